"""The report and trace commands of ``python -m moeopt``.

``report FILE [-o report.html] [--set PATH=VALUE ...] [--rank R] [--policy NAME ...] [--exact S]``
    Simulate the scenario and write one self-contained HTML page (no network at view time): the
    time, the three physical bounds (which binds, the excess over it), utilisation per role and
    per resource, idle decomposition per stage, stage busy time, traffic, the critical path's
    largest waits, the calibration domain, and a Gantt chart of one rank (default: the slowest)
    with one row per core and role, coloured by stage, wait attribution on hover. ``--policy``
    stacks the same graph scheduled by other greedy policies under it (each simulated like the
    scenario's own, so the guardrails judge it); ``--exact S`` stacks the
    CP-SAT schedule found within S seconds (hinted with the greedy one). Exit 0, 1 when a
    guardrail fired (the page is not written), 2 for bad input.

``trace FILE [-o trace.json] [--set ...] [--rank R] [--policy NAME]``
    Export one rank's schedule as Chrome-trace JSON (Perfetto / chrome://tracing; ``.gz`` for
    gzip): process = core, thread = role, ``cat`` = stage, waits and labels in ``args``.

``trace-compare [SCENARIO] MEASURED [--mapping FILE] [--set ...] [--rank R] [--units] [--json [PATH]]
[--check --tolerance T]``
    Compare the prediction of one rank with a measurement. MEASURED is a stage timeline (CSV or
    JSON rows: stage, unit, group, start, end; :mod:`moeopt.trace.timeline`), a profiler's Chrome
    trace turned into one by ``--mapping`` (:mod:`moeopt.trace.mapping`), or a Chrome trace moeopt
    exported. Timelines are compared stage by stage (``--units``: expert by expert) as
    ``moeopt fidelity`` does; the scenario comes from SCENARIO or, without it, from the timeline's
    metadata (profile and shape). ``--check`` exits 1 when a measured stage is further than
    ``--tolerance`` (µs, or ``N%`` of the measured span) from the prediction. An exported trace is
    compared event by event (:mod:`moeopt.trace.compare`): counts, order, per-core assignment,
    duration ratio, start shift; a truncated one as far as it goes, with a warning; ``--check``
    exits 1 unless the two are identical.

Library: :func:`moeopt.trust.report.report_html` / :func:`moeopt.trust.report.write_report`.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import warnings
from pathlib import Path

from moeopt.cli.common import Command, add_json_argument, add_set_argument, out, parse_sets, write_json
from moeopt.core.events import EventGraph
from moeopt.core.policies import make_policy
from moeopt.core.schedule import Schedule
from moeopt.errors import InputError
from moeopt.megamoe.errors import GuardrailError
from moeopt.megamoe.results import SimulateResult
from moeopt.megamoe.scenario import Scenario, load_scenario
from moeopt.megamoe.simulate import simulate
from moeopt.trace import (
    Trace,
    TraceTruncatedWarning,
    compare_schedule_to_trace,
    read_chrome_trace,
    write_chrome_trace,
)
from moeopt.trace.mapping import read_mapping, timeline_from_trace
from moeopt.trace.timeline import Timeline, compare_timelines, read_timeline
from moeopt.trust.fidelity import STAGE_ORDER, predicted_timeline, scenario_of
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


def _output(args: argparse.Namespace, suffix: str) -> str:
    """``-o`` as given, else ``runs/<scenario stem><suffix>`` (``runs/`` is where every output of
    moeopt goes by default, and git ignores it), the folder made if needed."""
    if args.output:
        return str(args.output)
    dest = Path("runs") / (Path(args.file).stem + suffix)
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{dest.parent}: cannot make the output folder: {exc.strerror or exc}") from None
    return str(dest)


def _report_arguments(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument(
        "-o",
        "--output",
        metavar="HTML",
        help="the page to write (default: runs/<scenario file name>.html, a folder git ignores)",
    )
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
            _output(args, ".html"),
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
    p.add_argument(
        "-o",
        "--output",
        metavar="JSON",
        help="trace file to write (.gz: gzip; default: runs/<scenario file name>.trace.json)",
    )
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
    path = write_chrome_trace(_output(args, ".trace.json"), s, g, label_key="stage", metadata=meta)
    slices = sum(max(1, len(v)) for v in s.resources.values())
    out(f"wrote {path}: rank {rk}, {len(s)} events as {slices} slices, makespan {s.makespan_us:.3f} µs")
    return 0


TRACE: Command = (
    "export one rank's schedule as Chrome-trace JSON (Perfetto, chrome://tracing)",
    _trace_arguments,
    _trace_run,
)


def _compare_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "paths",
        nargs="+",
        metavar="FILE",
        help="[SCENARIO] MEASURED: the scenario TOML (optional for a timeline whose metadata names its "
        "profile and shape) and the measured input: a stage timeline (CSV, or JSON with rows), or a "
        "Chrome trace (with --mapping: a profiler's; without: one moeopt exported)",
    )
    add_set_argument(p)
    p.add_argument("--rank", type=int, metavar="R", help="rank to compare (default: the slowest)")
    p.add_argument(
        "--mapping",
        metavar="FILE",
        help="TOML / YAML file saying which trace events give which stage and unit (see the usage docs)",
    )
    p.add_argument("--units", action="store_true", help="timelines: also compare every expert / segment")
    p.add_argument(
        "--label", default=None, metavar="KEY", help="label key of the stages (default: the trace's)"
    )
    p.add_argument(
        "--tolerance",
        default=None,
        metavar="T",
        help="what --check allows: µs (e.g. 40), or a share of the measured span (e.g. 10%%) for "
        "timelines; default for moeopt's own traces 1e-6 µs",
    )
    add_json_argument(p, "the comparison")
    p.add_argument(
        "--check",
        action="store_true",
        help="exit 1 unless every measured stage is within --tolerance (moeopt's own traces: identical)",
    )


def _compare_run(args: argparse.Namespace) -> int:
    if len(args.paths) > 2:
        raise InputError(f"trace-compare takes [SCENARIO] MEASURED, got {len(args.paths)} files")
    scenario_file, measured_path = (None, args.paths[0]) if len(args.paths) == 1 else args.paths
    kind = measured_kind(measured_path)
    if kind == "trace" and args.mapping is None:
        if scenario_file is None:
            raise InputError(
                f"{measured_path}: a Chrome trace without --mapping is compared event by event with the "
                "schedule of a scenario: give the scenario first (trace-compare SCENARIO TRACE), or a "
                "--mapping that turns the trace into a stage timeline"
            )
        return _compare_events(args, scenario_file, measured_path)
    if kind == "timeline" and args.mapping is not None:
        raise InputError(f"--mapping applies to Chrome traces; {measured_path} is a stage timeline")
    notes: list[str] = []
    if kind == "timeline":
        measured = read_timeline(measured_path)
    else:
        trace = _read_trace(measured_path, args.label)
        measured, notes = timeline_from_trace(trace, read_mapping(args.mapping))
    return _compare_timeline(args, scenario_file, measured, notes)


def measured_kind(path: str) -> str:
    """``"timeline"`` for a stage timeline (CSV, or JSON rows with stage / start_us), else
    ``"trace"`` for a Chrome trace (an object with traceEvents, or a list of events)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{path}: no such trace file or timeline")
    if p.suffix.lower() == ".csv":
        return "timeline"
    head = p.read_bytes()[:65536]
    if head[:2] == b"\x1f\x8b":
        return "trace"  # gzip: a trace
    text = head.decode("utf-8", errors="replace").lstrip()
    if text.startswith("{"):
        return "timeline" if '"rows"' in text and '"traceEvents"' not in text else "trace"
    if text.startswith("["):
        first = text[1:].lstrip()
        return "timeline" if first.startswith("{") and '"start_us"' in first[:2000] else "trace"
    raise InputError(
        f"{path}: neither a stage timeline (CSV with stage,unit,group,start_us,end_us, or JSON rows) "
        "nor a Chrome trace (JSON with traceEvents)"
    )


def _read_trace(path: str, label: str | None) -> Trace:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TraceTruncatedWarning)
        trace = read_chrome_trace(path, label_key=label)
    for w in caught:
        out(f"warning: {w.message}", err=True)
    return trace


def _compare_events(args: argparse.Namespace, scenario_file: str, measured_path: str) -> int:
    tol = 1e-6 if args.tolerance is None else _tolerance(args.tolerance, allow_pct=False)[0]
    measured = _read_trace(measured_path, args.label)
    args.file = scenario_file
    got = _schedule_of(args)
    if got is None:
        return 1
    s, g, rk, _r = got
    cmp = compare_schedule_to_trace(s, g, measured, label_key=args.label, tolerance_us=tol)
    to_stdout = args.json == "-"
    out(f"predicted: {scenario_file}, rank {rk}; measured: {measured_path}", err=to_stdout)
    out(cmp.format(), err=to_stdout)
    if args.json:
        write_json(args.json, cmp.to_dict())
    return 1 if args.check and not cmp.identical else 0


def _tolerance(text: str, allow_pct: bool = True) -> tuple[float, bool]:
    """``"40"`` -> (40 µs, False); ``"10%"`` -> (0.10 of the span, True)."""
    raw = text.strip()
    pct = raw.endswith("%")
    try:
        v = float(raw[:-1] if pct else raw)
    except ValueError:
        v = math.nan
    if not math.isfinite(v) or v < 0 or (pct and not allow_pct):
        allowed = "a number of µs >= 0"
        if allow_pct:
            allowed += " or a percentage of the measured span such as 10%"
        raise InputError(f"--tolerance {text!r}: allowed: {allowed}")
    return (v / 100.0, True) if pct else (v, False)


def _compare_timeline(
    args: argparse.Namespace, scenario_file: str | None, measured: Timeline, notes: list[str]
) -> int:
    if args.check and args.tolerance is None:
        raise InputError(
            "--check on a measured timeline needs --tolerance: µs (e.g. 40) or a share of the measured "
            "span (e.g. 10%): the model is not expected to match a measurement exactly"
        )
    tol = None if args.tolerance is None else _tolerance(args.tolerance)
    overrides = parse_sets(args.set)
    if scenario_file is None:
        described = measured
        if "profile" in overrides:  # the metadata's profile is replaced, not built first
            meta = {**measured.meta, "profile": str(overrides["profile"])}
            described = dataclasses.replace(measured, meta=meta)
        scenario = scenario_of(described)
        if overrides:
            scenario = scenario.with_overrides(overrides)
        label = f"the timeline's metadata ({scenario.profile}, world {scenario.workload.world}, M = "
        label += f"{scenario.workload.tokens})" + (f" --set {', '.join(args.set)}" if args.set else "")
    else:
        scenario = load_scenario(scenario_file, overrides)
        label = scenario_file + (f"  (--set {', '.join(args.set)})" if args.set else "")
    try:
        r = simulate(scenario, check_bounds=False)
    except GuardrailError as exc:
        out(f"error: {scenario_file or measured.source}: guardrail {type(exc).__name__}: {exc}", err=True)
        return 1
    rk = pick_rank(r, args.rank)
    predicted = predicted_timeline(r, rk)
    names = measured.stages()
    order = [st for st in STAGE_ORDER if st in names] + [st for st in names if st not in STAGE_ORDER]
    cmp = compare_timelines(
        predicted, measured, predicted_kernel_us=float(r["kernel_dag_end_us"]), stages=order
    )
    text = cmp.format(f"predicted: {label}, rank {rk}; measured: {measured.source}")
    if not args.units:
        text = text.split("\n\nper unit")[0] + "\n\n" + text.rsplit("\n", 1)[-1]
    to_stdout = args.json == "-"
    for n in notes:
        out(f"note: {n}", err=True)
    out(text, err=to_stdout)
    failed: list[str] = []
    if tol is not None:
        limit, pct = tol
        for d in cmp.stages:
            if d.measured is None:
                continue
            if d.predicted is None:
                failed.append(f"{d.stage}: measured, but the model has no such stage")
                continue
            err_us = max(abs(d.start_diff_us or 0.0), abs(d.end_diff_us or 0.0))
            err = err_us / cmp.span_us if pct else err_us
            if err > limit:
                shown = f"{100 * err:.1f}% of the span > {100 * limit:g}%" if pct else f"> {limit:g} µs"
                failed.append(f"{d.stage}: off by {err_us:.1f} µs ({shown})")
        verdict = "within" if not failed else "NOT within"
        out(f"check: every measured stage {verdict} the tolerance {args.tolerance}", err=to_stdout)
    if args.json:
        doc = {"scenario": scenario_file, "rank": rk, "notes": notes, **cmp.to_dict()}
        if tol is not None:
            doc["check"] = {"tolerance": args.tolerance, "failed": failed}
        write_json(args.json, doc)
    if args.check and failed:
        for line in failed:
            out(f"error: --check: {line}", err=True)
        return 1
    return 0


TRACE_COMPARE: Command = (
    "compare the prediction with a measured stage timeline or profiler trace, stage by stage",
    _compare_arguments,
    _compare_run,
)
