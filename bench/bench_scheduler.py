"""Scheduler throughput on MegaMoE-shaped random graphs (moeopt.synthetic.layered_graph).

Prints, for 10k and 100k events, tiles on a rolling cursor (pinned) and late-bound tiles: the
time to build and validate the graph, and events scheduled per second for each policy (median of
--repeat runs, one process, one core).
``lookahead_one_step`` is a baseline that probes every pair of its 6 candidates per step (about
30 evaluations per event): it runs once per graph instead of --repeat times.

    python bench/bench_scheduler.py [--sizes 10000 100000] [--repeat 3] [--seed 1]
                                    [--policies earliest_start ...] [--kinds pinned late]
"""

from __future__ import annotations

import argparse
import statistics
import time

import moeopt as m
from moeopt.core.policies import BUILTIN_POLICIES
from moeopt.synthetic import layered_graph

# Every policy runs on every graph: the figures the targets read are events/s at 100k at least
# half of that at 10k (late-bound tiles), earliest_start at least 20k events/s at 100k.


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--policies", nargs="+", default=list(BUILTIN_POLICIES), help="policies to run")
    ap.add_argument("--kinds", nargs="+", default=["pinned", "late"], choices=["pinned", "late"])
    args = ap.parse_args()
    print(f"{'graph':<28} {'events':>8} {'build s':>8}  {'policy':<30} {'sched s':>8} {'events/s':>10} {'makespan us':>12}")
    # late-bound tiles: every load competes for the whole AIC pool and the shared slots
    runs = [(False, size) for size in args.sizes] if "pinned" in args.kinds else []
    if "late" in args.kinds:
        runs += [(True, size) for size in args.sizes]
    for late, size in runs:
        t0 = time.perf_counter()
        g = layered_graph(size, seed=args.seed, late_bind_tiles=late)
        g.validate()
        build_s = time.perf_counter() - t0
        label = ("late-bound tiles" if late else "tiles on a rolling cursor") + f" {size // 1000}k"
        for policy in [p for p in BUILTIN_POLICIES if p in args.policies]:
            times = []
            reps = 1 if policy == "lookahead_one_step" else args.repeat
            for _ in range(reps):
                t1 = time.perf_counter()
                s = m.schedule(g, policy)
                times.append(time.perf_counter() - t1)
            med = statistics.median(times)
            print(
                f"{label:<28} {len(g):>8} {build_s:>8.2f}  {policy:<30} {med:>8.3f} "
                f"{len(g) / med:>10,.0f} {s.makespan_us:>12.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
