"""What every ``python -m moeopt`` command shares: the command triple, output, ``--set``
parsing, JSON conversion, argument types, progress bars and the guardrail wrapper."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from moeopt.errors import InputError
from moeopt.megamoe.errors import GuardrailError
from moeopt.megamoe.results import SimulateResult
from moeopt.megamoe.scenario import parse_override_value
from moeopt.plain import jsonable

Command = tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]
"""``(help, add_arguments(parser), run(args) -> exit code)``."""


def out(text: str, *, err: bool = False) -> None:
    """One line (or block) to standard output / error, flushed (progress is read live)."""
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")
    stream.flush()


def emit(stream: TextIO, text: str) -> None:
    """``text`` as it is (no newline added) to ``stream``, flushed."""
    stream.write(text)
    stream.flush()


# --------------------------------------------------------------------------- --set
def parse_sets(items: list[str] | None) -> dict[str, Any]:
    """``["kernel.tile_n=128", ...]`` -> ``{"kernel.tile_n": 128}`` (values read as TOML literals)."""
    out: dict[str, Any] = {}
    for item in items or []:
        path, eq, value = item.partition("=")
        path = path.strip()
        if not eq or not path:
            raise InputError(f"--set {item!r}: expected dotted.path=value, e.g. --set kernel.tile_n=128")
        out[path] = parse_override_value(value.strip())
    return out


def add_set_argument(p: argparse.ArgumentParser, applies_to: str = "") -> None:
    """The ``--set PATH=VALUE`` option every scenario command takes (read with :func:`parse_sets`);
    ``applies_to`` prefixes the help when only some inputs take it."""
    p.add_argument(
        "--set",
        action="append",
        metavar="PATH=VALUE",
        help=f"{applies_to}dotted-path override, e.g. --set kernel.tile_n=128 "
        "(repeatable; values are TOML literals)",
    )


# --------------------------------------------------------------------------- the shared options
def add_json_argument(p: argparse.ArgumentParser, what: str) -> None:
    """``--json [PATH]``, the same on every command: ``what`` as JSON to PATH, or with no PATH (or
    ``-``) to standard output, the human-readable text then going to standard error. Read it with
    :func:`text_stream` and :func:`write_json`."""
    p.add_argument(
        "--json",
        nargs="?",
        const="-",
        metavar="PATH",
        help=f"write {what} as JSON to PATH (no PATH or '-': standard output; the text then goes to "
        "standard error)",
    )


def text_stream(args: argparse.Namespace) -> TextIO:
    """Where a command's human-readable text goes: standard error when ``--json`` takes stdout."""
    return sys.stderr if getattr(args, "json", None) == "-" else sys.stdout


def add_quiet_argument(p: argparse.ArgumentParser, what: str = "no progress output") -> None:
    """``--quiet``, the same on every command that reports progress (``--no-progress``, its older
    name, is still read)."""
    p.add_argument("--quiet", action="store_true", help=what)
    p.add_argument("--no-progress", action="store_true", dest="quiet", help=argparse.SUPPRESS)


# --------------------------------------------------------------------------- JSON
def result_to_jsonable(r: SimulateResult) -> dict[str, Any]:
    """The result dict without graphs and schedules, with plain JSON types only.

    Ranks with the same routing signature are simulated once: ``rank_results`` holds the
    simulated ranks only (each lists the ranks it stands for in ``ranks_sharing_signature``),
    and ``representative_of_rank`` maps every rank of the scenario to the entry that holds it."""
    out: dict[str, object] = {k: v for k, v in r.items() if k != "rank_results"}
    ranks: dict[str, dict[str, object]] = {}
    stands_for: dict[str, int] = {}
    for rep in r["simulated_ranks"]:
        rr = r["rank_results"][rep]
        for k in rr["ranks_sharing_signature"]:
            stands_for[str(k)] = rep
        ranks[str(rep)] = {
            "ranks_sharing_signature": rr["ranks_sharing_signature"],
            "kernel_total_us": rr["kernel_total_us"],
            "kernel_dag_end_us": rr["kernel_dag_end_us"],
            "n_events": rr["n_events"],
            "schedule_fingerprint": rr["schedule"].fingerprint(),
            "bounds": rr["bounds"],
            "waves": rr["waves"],
            "contract": rr["contract"],
        }
    out["rank_results"] = ranks
    out["representative_of_rank"] = dict(sorted(stands_for.items(), key=lambda kv: int(kv[0])))
    return jsonable(out)


def write_text(dest: str, text: str) -> None:
    if dest == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        Path(dest).write_text(text)
    except OSError as exc:
        raise InputError(f"{dest}: cannot write: {exc.strerror or exc}") from None


def write_json(dest: str, doc: Any) -> None:
    """``doc`` as indented JSON (see :func:`moeopt.plain.jsonable`) to a file or, for ``-``, stdout."""
    write_text(dest, json.dumps(jsonable(doc), indent=1) + "\n")


# --------------------------------------------------------------------------- argument types
def positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}")
    return v


def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return v


def at_least_zero(kind: type[int] | type[float]) -> Callable[[str], Any]:
    """An argparse type: a finite ``kind`` >= 0, or one message naming the value."""
    what = "an integer" if kind is int else "a number"

    def parse(text: str) -> Any:
        try:
            v = kind(text)
        except ValueError:
            v = -1
        if not math.isfinite(v) or v < 0:
            raise argparse.ArgumentTypeError(f"expected {what} >= 0, got {text!r}")
        return v

    return parse


nonneg_float = at_least_zero(float)
nonneg_int = at_least_zero(int)


# --------------------------------------------------------------------------- progress, guardrails
@contextmanager
def progress_bar(
    total: int, desc: str, enabled: bool = True, unit: str = "run"
) -> Iterator[Callable[[int, int, str], None]]:
    """Progress on standard error while ``total`` steps run (only when there is more than one and it
    is enabled): a bar on a terminal, periodic one-line reports anywhere else (a CI log, a pipe)."""
    if not enabled or total <= 1:
        yield lambda _d, _t, _n: None
        return
    from moeopt.search.progress import Progress, progress_mode  # loads Optuna: only when shown

    with Progress(desc, total, mode=progress_mode(True), unit=unit) as shown:

        def step(done: int, _total: int, name: str) -> None:
            shown.update(done, name[:40])

        yield step


def guarded(what: str, run: Callable[[], Any]) -> Any:
    """``run()``; a guardrail becomes one ``error:`` line and ``None`` (exit code 1)."""
    try:
        return run()
    except GuardrailError as exc:
        out(f"error: {what}guardrail {type(exc).__name__}: {exc}", err=True)
        return None
