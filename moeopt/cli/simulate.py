"""``moeopt simulate FILE [--set dotted.path=value ...] [--json [PATH]] [--no-check-bounds]``
``[--ranks all|slowest] [--quiet] [--assert-conserving]``

Simulate a scenario file and print the summary: time (and with the unpermute tail), the three
physical bounds with the binding one and the excess over it, utilisation per role, avoidable
idle, GM->L1 bytes. ``--json`` prints the result instead (every field of the result except the
per-rank graphs and schedules); ``--json PATH`` writes it there and prints the summary.
``--assert-conserving`` also simulates the scenario with every pool late-bound and fails unless
work conservation holds (:mod:`moeopt.trust.conserving`). Exit codes: 0 ok, 1 a guardrail fired
(the time must not be used) or work conservation failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import json

from moeopt.cli.common import (
    Command,
    add_json_argument,
    add_quiet_argument,
    add_set_argument,
    out,
    parse_sets,
    progress_bar,
    result_to_jsonable,
    write_json,
)
from moeopt.megamoe.errors import GuardrailError
from moeopt.megamoe.scenario import load_scenario
from moeopt.megamoe.simulate import RANK_DETAIL, progress_total, rank_groups, simulate
from moeopt.megamoe.summary import format_summary
from moeopt.trust.conserving import REFUSED, VIOLATED, check_conserving, format_check


def _simulate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="scenario TOML file")
    add_set_argument(p)
    add_json_argument(
        p,
        "the result (every field except the per-rank graphs and schedules; rank_results holds one "
        "simulated rank per distinct routing signature, representative_of_rank maps every rank to it)",
    )
    p.add_argument(
        "--no-check-bounds",
        action="store_true",
        help="record a time below the physical bounds in the result instead of failing",
    )
    p.add_argument(
        "--ranks",
        choices=RANK_DETAIL,
        default="all",
        help="analyse every distinct rank (all), or time and judge every rank, in worker processes "
        "when there are several large ones, and analyse the slowest one only (slowest: for skewed "
        "routings with many distinct ranks; the JSON then holds the slowest rank and every rank's time)",
    )
    add_quiet_argument(p)
    p.add_argument(
        "--assert-conserving",
        action="store_true",
        help="also simulate with every pool late-bound and fail (exit 1) unless work conservation holds",
    )


def _simulate_run(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.file, parse_sets(args.set))
    # progress only when there is more than one distinct rank (a skewed routing: many graphs)
    n = len(rank_groups(scenario)[1])
    total = progress_total(args.ranks, n)
    try:
        with progress_bar(total, "simulate", not args.quiet and n > 1, unit="step") as step:
            r = simulate(scenario, check_bounds=not args.no_check_bounds, ranks=args.ranks, progress=step)
    except GuardrailError as exc:
        out(f"error: {args.file}: guardrail {type(exc).__name__}: {exc}", err=True)
        return 1
    if args.json == "-":
        out(json.dumps(result_to_jsonable(r), indent=1))
    else:
        out(f"scenario        {args.file}" + (f"  (--set {', '.join(args.set)})" if args.set else ""))
        out(format_summary(r))
        if args.json:
            write_json(args.json, result_to_jsonable(r))
    if args.assert_conserving:
        c = check_conserving(scenario, args.file, check_bounds=not args.no_check_bounds)
        out(f"conserving      every pool late-bound: {format_check(c)}", err=args.json == "-")
        if c.verdict in (VIOLATED, REFUSED):
            return 1
    return 0


SIMULATE: Command = (
    "simulate a scenario file and print the summary (time, bounds, utilisation, idle, traffic)",
    _simulate_arguments,
    _simulate_run,
)
