"""The PSPLIB j30 set the PSPLIB benches read: ``--data DIR`` or ``$MOEOPT_PSPLIB_DIR``, holding
``j30/*.sm`` and ``j30_opt.csv`` (the proven optima)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import moeopt as m


def add_data_argument(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--data", default=os.environ.get("MOEOPT_PSPLIB_DIR"))


def open_set(data: str | None) -> tuple[Path, dict[str, int]] | None:
    """The data folder and the optima by instance name; ``None`` (after saying why) without data."""
    if not data:
        print("no data: pass --data DIR or set MOEOPT_PSPLIB_DIR", file=sys.stderr)
        return None
    folder = Path(data)
    if not (folder / "j30_opt.csv").is_file() or not (folder / "j30").is_dir():
        print(f"no PSPLIB j30 set in {folder}: it needs j30/*.sm and j30_opt.csv", file=sys.stderr)
        return None
    return folder, m.load_psplib_optima(folder / "j30_opt.csv")


def add_selection_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--only", default="", help="comma-separated instance names (e.g. j3013_1,j3029_3); default: all"
    )
    ap.add_argument("--limit", type=int, default=0, help="only the first N instances (0: all)")


def instance_paths(data: Path, only: str, limit: int = 0) -> list[Path] | None:
    """The ``.sm`` files chosen by ``--only`` (in the order named) or all of them, then the first
    ``limit`` (0: all); ``None`` (after saying which) when a named instance is not in the set."""
    paths = sorted((data / "j30").glob("*.sm"))
    if only:
        wanted = [x.strip() for x in only.split(",") if x.strip()]
        known = {p.stem: p for p in paths}
        unknown = [x for x in wanted if x not in known]
        if unknown:
            print(f"--only: no instance {', '.join(unknown)} in {data / 'j30'} (names like j3013_1)", file=sys.stderr)
            return None
        paths = [known[x] for x in wanted]
    return paths[:limit] if limit > 0 else paths


def chosen_set(args: argparse.Namespace) -> tuple[dict[str, int], list[Path]] | None:
    """:func:`open_set` on ``args.data``, then :func:`instance_paths` by ``args.only`` and
    ``args.limit`` (0 when the bench has no ``--limit``): the optima and the chosen ``.sm``
    files; ``None`` (after saying why) without data or with an unknown name."""
    got = open_set(args.data)
    if got is None:
        return None
    data, opt = got
    paths = instance_paths(data, args.only, getattr(args, "limit", 0))
    return None if paths is None else (opt, paths)
