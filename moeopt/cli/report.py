"""The report and trace commands of ``python -m moeopt``.

``report FILE -o report.html [--set PATH=VALUE ...] [--rank R] [--policy NAME ...] [--exact S]``
    Simulate the scenario and write one self-contained HTML page (no network at view time): the
    time, the three physical bounds (which binds, the excess over it), utilisation per role and
    per resource, idle decomposition per stage, stage busy time, traffic, the critical path's
    largest waits, the calibration domain, and a Gantt chart of one rank (default: the slowest)
    with one row per core and role, coloured by stage, wait attribution on hover. ``--policy``
    stacks the same graph scheduled by other greedy policies under it (each simulated like the
    scenario's own, so the guardrails judge it); ``--exact S`` stacks the
    CP-SAT schedule found within S seconds (hinted with the greedy one). Exit 0, 1 when a
    guardrail fired (the page is not written), 2 for bad input.

``trace FILE -o trace.json [--set ...] [--rank R] [--policy NAME]``
    Export one rank's schedule as Chrome-trace JSON (Perfetto / chrome://tracing; ``.gz`` for
    gzip): process = core, thread = role, ``cat`` = stage, waits and labels in ``args``.

``trace-compare FILE MEASURED.json [--set ...] [--rank R] [--json PATH] [--check]``
    Compare the predicted schedule of one rank with a measured (or exported) trace, stage by
    stage: event counts, order, per-core assignment, duration ratio, start shift
    (:mod:`moeopt.trace.compare`). A truncated trace is compared as far as it goes, with a
    warning. ``--check``: exit 1 unless the two are identical.

Library: :func:`moeopt.trust.report.report_html` / :func:`moeopt.trust.report.write_report`.
"""

from __future__ import annotations

import argparse
import json
import math
import warnings
from pathlib import Path

from moeopt.cli.common import Command, add_set_argument, out, parse_sets
from moeopt.core.events import EventGraph
from moeopt.core.policies import make_policy
from moeopt.core.schedule import Schedule
from moeopt.errors import InputError
from moeopt.megamoe.errors import GuardrailError
from moeopt.megamoe.results import SimulateResult
from moeopt.megamoe.scenario import Scenario, load_scenario
from moeopt.megamoe.simulate import simulate
from moeopt.trace import (
    TraceTruncatedWarning,
    compare_schedule_to_trace,
    read_chrome_trace,
    write_chrome_trace,
)
from moeopt.trust.report import pick_rank, write_report


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="scenario TOML file")
    add_set_argument(p)
    p.add_argument("--rank", type=int, metavar="R", help="rank to show (default: the slowest)")


def _simulated(args: argparse.Namespace) -> tuple[Scenario, SimulateResult | None]:
    scenario = load_scenario(args.file, parse_sets(args.set))
    try:
        return scenario, simulate(scenario, check_bounds=not getattr(args, "no_check_bounds", False))
    except GuardrailError as exc:
        out(f"error: {args.file}: guardrail {type(exc).__name__}: {exc}", err=True)
        return scenario, None


def _report_arguments(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("-o", "--output", required=True, metavar="HTML", help="the page to write")
    p.add_argument(
        "--policy",
        action="append",
        default=[],
        metavar="NAME",
        help="also show this greedy policy (repeatable)",
    )
    p.add_argument("--exact", type=float, metavar="S", help="also show CP-SAT's schedule (S seconds)")
    p.add_argument("--title", default=None, help="page title (default: the scenario file name)")
    p.add_argument(
        "--no-check-bounds", action="store_true", help="report a time below the bounds instead of failing"
    )


def _report_run(args: argparse.Namespace) -> int:
    if args.exact is not None and not (math.isfinite(args.exact) and args.exact > 0):
        raise InputError(f"--exact: expected a number of seconds > 0, got {args.exact!r}")
    scenario, r = _simulated(args)
    if r is None:
        return 1
    for p in args.policy:
        make_policy(p)
    src = args.file + (f"  (--set {', '.join(args.set)})" if args.set else "")
    try:
        path = write_report(
            args.output,
            scenario,
            result=r,
            rank=args.rank,
            policies=args.policy,
            exact_time_limit_s=args.exact,
            title=args.title or f"moeopt report: {Path(args.file).name}",
            source=src,
        )
    except GuardrailError as exc:  # another policy's schedule (--policy) stopped by a guardrail
        out(f"error: {args.file}: guardrail {type(exc).__name__}: {exc}", err=True)
        return 1
    rk = pick_rank(r, args.rank)
    out(
        f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB): rank {rk}, "
        f"{r['rank_results'][rk]['n_events']} events, time {r['kernel_total_us']:.2f} µs"
    )
    return 0


REPORT: Command = (
    "write a self-contained HTML report of a scenario: Gantt per core and role, bounds, utilisation",
    _report_arguments,
    _report_run,
)


def _trace_arguments(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("-o", "--output", required=True, metavar="JSON", help="trace file to write (.gz: gzip)")
    p.add_argument(
        "--policy", metavar="NAME", help="schedule with this greedy policy instead of the scenario's"
    )


def _schedule_of(args: argparse.Namespace) -> tuple[Schedule, EventGraph, int, SimulateResult] | None:
    if getattr(args, "policy", None):
        # another policy is simulated like the scenario's own, so both guardrails judge it
        make_policy(args.policy)  # an unknown name fails here with the known names
        args.set = [*(args.set or []), f"policy.scheduling={make_policy(args.policy).name}"]
    _scenario, r = _simulated(args)
    if r is None:
        return None
    rk = pick_rank(r, args.rank)
    rr = r["rank_results"][rk]
    return rr["schedule"], rr["graph"], rk, r


def _trace_run(args: argparse.Namespace) -> int:
    got = _schedule_of(args)
    if got is None:
        return 1
    s, g, rk, r = got
    meta = {
        "scenario": args.file,
        "overrides": list(args.set or []),
        "rank": rk,
        "implementation": r["implementation"]["id"],
    }
    path = write_chrome_trace(args.output, s, g, label_key="stage", metadata=meta)
    slices = sum(max(1, len(v)) for v in s.resources.values())
    out(f"wrote {path}: rank {rk}, {len(s)} events as {slices} slices, makespan {s.makespan_us:.3f} µs")
    return 0


TRACE: Command = (
    "export one rank's schedule as Chrome-trace JSON (Perfetto, chrome://tracing)",
    _trace_arguments,
    _trace_run,
)


def _compare_arguments(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("measured", metavar="TRACE", help="measured Chrome-trace JSON (or an exported one)")
    p.add_argument(
        "--label", default=None, metavar="KEY", help="label key of the stages (default: the trace's)"
    )
    p.add_argument(
        "--tolerance", type=float, default=1e-6, metavar="US", help="time tolerance (default 1e-6 µs)"
    )
    p.add_argument("--json", metavar="PATH", help="also write the comparison as JSON ('-': stdout)")
    p.add_argument("--check", action="store_true", help="exit 1 unless the traces are identical")


def _compare_run(args: argparse.Namespace) -> int:
    if not math.isfinite(args.tolerance) or args.tolerance < 0:
        raise InputError(f"--tolerance: must be a number of µs >= 0, got {args.tolerance!r}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TraceTruncatedWarning)
        measured = read_chrome_trace(args.measured, label_key=args.label)
    for w in caught:
        out(f"warning: {w.message}", err=True)
    got = _schedule_of(args)
    if got is None:
        return 1
    s, g, rk, _r = got
    cmp = compare_schedule_to_trace(s, g, measured, label_key=args.label, tolerance_us=args.tolerance)
    to_stdout = args.json == "-"
    out(f"predicted: {args.file}, rank {rk}; measured: {args.measured}", err=to_stdout)
    out(cmp.format(), err=to_stdout)
    if args.json:
        text = json.dumps(cmp.to_dict(), indent=1)
        if to_stdout:
            out(text)
        else:
            try:
                Path(args.json).write_text(text + "\n")
            except OSError as exc:
                raise InputError(f"{args.json}: cannot write: {exc.strerror or exc}") from None
    return 1 if args.check and not cmp.identical else 0


TRACE_COMPARE: Command = (
    "compare the predicted schedule with a measured Chrome trace, stage by stage",
    _compare_arguments,
    _compare_run,
)
