"""The PSPLIB set the PSPLIB benches read: ``--data DIR`` (or ``$MOEOPT_PSPLIB_DIR``) holding
``<set>/*.sm`` and ``<set>_opt.csv``, the set named by ``--set`` (default ``j30``: ``j30/*.sm``
and ``j30_opt.csv``, the proven optima). For the larger sets (j60, j90, j120), whose open
instances have only best-known bounds, ``<set>_opt.csv`` may give ranges (see
:func:`moeopt.load_psplib_known`); ``bench_psplib.py`` judges against them, the benches that
need proven optima refuse a set with open instances."""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

import moeopt as m

_SET_NAME = re.compile(r"[A-Za-z0-9_-]+")


def add_data_argument(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--data", default=os.environ.get("MOEOPT_PSPLIB_DIR"))
    ap.add_argument(
        "--set",
        default="j30",
        dest="psplib_set",
        help="the instance set: DATA/<set>/*.sm and DATA/<set>_opt.csv (default j30)",
    )


def open_set(
    data: str | None, name: str = "j30", ranges: bool = False
) -> tuple[Path, dict[str, int]] | tuple[Path, dict[str, m.KnownMakespan]] | None:
    """The set's instance folder and what is known of each instance's optimum (``ranges``:
    :class:`moeopt.KnownMakespan` per instance; else the proven optima, and a set with open
    instances is refused); ``None`` (after saying why) without data, or when the files are
    missing or malformed."""
    if not data:
        print("no data: pass --data DIR or set MOEOPT_PSPLIB_DIR", file=sys.stderr)
        return None
    if not _SET_NAME.fullmatch(name):
        print(f"--set: {name!r} is not a set name (letters, digits, '_' or '-', e.g. j30, j60)", file=sys.stderr)
        return None
    folder = Path(data)
    known = folder / f"{name}_opt.csv"
    if not known.is_file() or not (folder / name).is_dir():
        print(f"no PSPLIB set {name} in {folder}: it needs {name}/*.sm and {name}_opt.csv", file=sys.stderr)
        return None
    try:
        values = m.load_psplib_known(known) if ranges else m.load_psplib_optima(known)
    except m.InputError as exc:
        print(f"{exc}" + ("" if ranges else " (this bench needs proven optima)"), file=sys.stderr)
        return None
    return folder / name, values  # type: ignore[return-value]


def add_selection_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--only", default="", help="comma-separated instance names (e.g. j3013_1,j3029_3); default: all"
    )
    ap.add_argument("--limit", type=int, default=0, help="only the first N instances (0: all)")


def instance_paths(folder: Path, only: str, limit: int = 0) -> list[Path] | None:
    """The ``.sm`` files of ``folder`` (a set's instance folder, see :func:`open_set`) chosen by
    ``--only`` (in the order named) or all of them, then the first ``limit`` (0: all); ``None``
    (after saying which) when a named instance is not in the set."""
    paths = sorted(folder.glob("*.sm"))
    if only:
        wanted = [x.strip() for x in only.split(",") if x.strip()]
        known = {p.stem: p for p in paths}
        unknown = [x for x in wanted if x not in known]
        if unknown:
            example = paths[0].stem if paths else "j301_1"
            print(f"--only: no instance {', '.join(unknown)} in {folder} (names like {example})", file=sys.stderr)
            return None
        paths = [known[x] for x in wanted]
    return paths[:limit] if limit > 0 else paths


def chosen_set(
    args: argparse.Namespace, ranges: bool = False
) -> tuple[dict[str, int], list[Path]] | tuple[dict[str, m.KnownMakespan], list[Path]] | None:
    """:func:`open_set` on ``args.data`` and ``args.psplib_set``, then :func:`instance_paths` by
    ``args.only`` and ``args.limit`` (0 when the bench has no ``--limit``): what is known of the
    optima and the chosen ``.sm`` files; ``None`` (after saying why) without data, with an
    unknown name, or when the set's CSV leaves out a chosen instance."""
    got = open_set(args.data, args.psplib_set, ranges)
    if got is None:
        return None
    folder, known = got
    paths = instance_paths(folder, args.only, getattr(args, "limit", 0))
    if paths is None:
        return None
    missing = [p.stem for p in paths if p.stem not in known]
    if missing:
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        print(f"{args.psplib_set}_opt.csv lists no makespan for {', '.join(missing[:5])}{more}", file=sys.stderr)
        return None
    return known, paths  # type: ignore[return-value]
