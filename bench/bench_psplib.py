"""CP-SAT (and the greedy, every policy) on all PSPLIB j30 instances against their proven optima.

Per instance: the greedy with every built-in policy, then ``graph_optimality_gap`` (CP-SAT hinted
with the best greedy schedule) with a per-instance time limit. Prints how many instances CP-SAT
solves to the proven optimum, how many it proves optimal, how many have bound = optimum, that no
bound exceeds the optimum and every returned schedule validates, the greedy's distance to the
optimum per policy, and CP-SAT's seconds.

    python bench/bench_psplib.py [--data DIR] [--time-limit 2] [--workers 1] [--limit N]
                                 [--only NAME,...] [--mode exact] [--json FILE]
    # DIR holds j30/ and j30_opt.csv (default: $MOEOPT_PSPLIB_DIR)

Data: PSPLIB (Kolisch & Sprecher 1996, EJOR 96:205-216); optima from j30opt.sm
(Demeulemeester & Herroelen's branch-and-bound). A full run takes up to 480 × the time limit.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

from psplib_set import add_data_argument, add_selection_arguments, chosen_set

import moeopt as m
from moeopt.core.policies import BUILTIN_POLICIES
from moeopt.exact import graph_optimality_gap


def _p95(xs: list[float]) -> float:
    ys = sorted(xs)
    return ys[min(len(ys) - 1, math.ceil(0.95 * len(ys)) - 1)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_data_argument(ap)
    ap.add_argument("--time-limit", type=float, default=2.0, help="CP-SAT seconds per instance")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--mode", default="exact", choices=("exact", "relaxed"))
    add_selection_arguments(ap)
    ap.add_argument("--json", help="write per-instance results to this file")
    args = ap.parse_args()
    chosen = chosen_set(args)
    if chosen is None:
        return 2
    opt, paths = chosen
    n = len(paths)
    print(
        f"PSPLIB j30: {n} instances; CP-SAT {args.time_limit:g} s per instance, "
        f"{args.workers} worker(s), mode {args.mode}; greedy: {', '.join(BUILTIN_POLICIES)}",
        flush=True,
    )
    rows = []
    bound_above: list[str] = []
    invalid: list[str] = []
    below_opt: list[str] = []
    t_all = time.perf_counter()
    for k, path in enumerate(paths, 1):
        name = path.stem
        g = m.load_psplib(path)
        rep = graph_optimality_gap(
            g, time_limit_s=args.time_limit, workers=args.workers, mode=args.mode, name=name
        )
        x = rep.exact
        best = opt[name]
        if x.lower_bound_us > best + 1e-9:
            bound_above.append(name)
        if x.schedule is None:
            invalid.append(name)
        else:
            try:
                m.validate_schedule(g, x.schedule)
            except m.ScheduleError:
                invalid.append(name)
            if x.schedule.makespan_us < best - 1e-9:
                below_opt.append(name)
        rows.append((name, best, rep))
        if k % 40 == 0 or k == n:
            print(f"  [{k}/{n}] {time.perf_counter() - t_all:.0f} s", file=sys.stderr, flush=True)

    solved = [r for r in rows if r[2].best_us is not None and abs(r[2].best_us - r[1]) < 1e-9]
    proven = [r for r in rows if r[2].proven_optimal]
    tight = [r for r in rows if abs(r[2].lower_bound_us - r[1]) < 1e-9]
    solve_s = [r[2].exact.solve_s for r in rows]
    total_s = [r[2].exact.total_s for r in rows]
    print(f"bound <= proven optimum:       {n - len(bound_above)}/{n} (exceptions: {len(bound_above)})")
    print(f"CP-SAT best = proven optimum:  {len(solved)}/{n}")
    print(f"optimality proven:             {len(proven)}/{n}")
    print(f"bound = proven optimum:        {len(tight)}/{n}")
    print(f"returned schedules valid:      {n - len(invalid)}/{n}")
    print(f"schedules below the optimum:   {len(below_opt)}")
    print("greedy % above optimum (mean / max):")
    for policy in BUILTIN_POLICIES:
        gaps = [
            100.0 * (mk / r[1] - 1.0)
            for r in rows
            if (mk := r[2].policy(policy).makespan_us) is not None
        ]
        fails = n - len(gaps)
        extra = f"   ({fails} failed)" if fails else ""
        print(f"  {policy:<30} {statistics.mean(gaps):6.2f} / {max(gaps):6.2f}{extra}")
    print(f"CP-SAT seconds (mean / p95):   {statistics.mean(solve_s):.3f} / {_p95(solve_s):.3f}")
    print(f"whole solve_exact seconds (mean / max): {statistics.mean(total_s):.3f} / {max(total_s):.3f}")
    won: dict[str, int] = {}
    for r in rows:
        key = r[2].exact.bound_source.split(":")[0]
        won[key] = won.get(key, 0) + 1
    print("bound won by:                  " + ", ".join(f"{k} {v}" for k, v in sorted(won.items())))
    unproven = [f"{r[0]} ({r[2].lower_bound_us:g}..{r[2].best_us:g}, opt {r[1]})" for r in rows if r not in proven]
    if unproven:
        print("not proven: " + ", ".join(unproven))
    for label, names in (("BOUND ABOVE OPTIMUM", bound_above), ("INVALID", invalid), ("BELOW OPTIMUM", below_opt)):
        if names:
            print(f"{label}: {', '.join(names)}")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                [{"instance": nm, "optimum": best, **rep.to_dict()} for nm, best, rep in rows], indent=1
            )
        )
    return 1 if bound_above or invalid or below_opt else 0


if __name__ == "__main__":
    sys.exit(main())
