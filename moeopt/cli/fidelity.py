"""``python -m moeopt fidelity [TIMELINE ...] [--units] [--sweep] [--json PATH]``

The model against measured stage timelines of the real kernel (:mod:`moeopt.trust.fidelity`).
Without a file: the calibration timelines that ship with moeopt (the baseline at 16 ranks and the
V1 version at 8 ranks, M = 2048). For each: predicted against measured start and end of every
stage (and with ``--units`` of every expert), the error as a share of the measured span, and the
kernel time. ``--sweep`` adds the predicted kernel time of each ``--profiles`` entry across M and
world sizes with the gain of each over the first. ``--check PCT`` exits 1 when a stage is off by
more than PCT percent of its timeline's span. Exit codes: 0 ok, 1 ``--check`` failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from moeopt.cli.common import (
    Command,
    add_json_argument,
    add_quiet_argument,
    add_set_argument,
    emit,
    nonneg_float,
    parse_sets,
    progress_bar,
    text_stream,
    write_json,
)
from moeopt.errors import InputError
from moeopt.megamoe.config.profiles import PROFILES
from moeopt.trust.fidelity import (
    calibration_timelines,
    fidelity_report,
    format_sweep,
    read_timeline,
    scenario_of,
    sweep_to_dict,
    version_sweep,
)

DEFAULT_SWEEP = ("pto-a2a3", "pto-a2a3-v1")


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "timelines",
        nargs="*",
        metavar="TIMELINE",
        help="measured stage timelines (CSV or JSON; default: the calibration timelines shipped with moeopt)",
    )
    add_set_argument(p)
    p.add_argument("--units", action="store_true", help="also compare every expert / segment")
    p.add_argument("--sweep", action="store_true", help="predict each profile across M and world sizes")
    p.add_argument(
        "--profiles",
        default=None,
        metavar="A,B",
        help="profiles of --sweep, the first is the reference (default: the baseline and its V1 version)",
    )
    p.add_argument(
        "--check",
        type=nonneg_float,
        metavar="PCT",
        help="exit 1 if a stage is off by more than PCT%% of the span",
    )
    add_json_argument(p, "the comparison")
    add_quiet_argument(p, "no progress output for --sweep")


def _run(args: argparse.Namespace) -> int:
    overrides = parse_sets(args.set)
    paths = args.timelines or [str(p) for p in calibration_timelines()]
    out = text_stream(args)
    doc: dict[str, Any] = {"timelines": []}
    failed = []
    for path in paths:
        rep = fidelity_report(path, overrides)
        text = rep.format()
        if not args.units:
            text = text.split("\n\nper unit")[0] + "\n\n" + text.rsplit("\n", 1)[-1]
        emit(out, text + "\n\n")
        doc["timelines"].append(rep.to_dict())
        if args.check is not None and rep.comparison.worst_stage_error * 100 > args.check:
            failed.append(
                f"{path}: worst stage error {100 * rep.comparison.worst_stage_error:.1f}% > {args.check:g}%"
            )
    if args.sweep:
        profiles = _profiles(args.profiles)
        base = scenario_of(read_timeline(paths[0]))
        if overrides:
            base = base.with_overrides(overrides)
        n = len(profiles) * 14
        with progress_bar(n, "sweep", not args.quiet, unit="simulation") as step:
            rows = version_sweep(profiles, base, progress=step)
        emit(out, format_sweep(rows, profiles) + "\n")
        doc["sweep"] = sweep_to_dict(rows, profiles)
    if args.json:
        write_json(args.json, doc)
    for line in failed:
        emit(sys.stderr, f"error: --check: {line}\n")
    return 1 if failed else 0


def _profiles(text: str | None) -> list[str]:
    if text is None:
        return [p for p in DEFAULT_SWEEP if p in PROFILES]
    names = [p.strip() for p in text.split(",") if p.strip()]
    bad = [p for p in names if p not in PROFILES]
    if len(names) < 2 or bad:
        raise InputError(
            f"--profiles {text!r}: give two or more of {', '.join(PROFILES)} separated by commas"
            + (f" (unknown: {', '.join(bad)})" if bad else "")
        )
    return names


FIDELITY: Command = (
    "the model against measured stage timelines of the kernel, and predicted times across M and versions",
    _arguments,
    _run,
)
