"""Greedy list schedules on all PSPLIB j30 instances against their proven optima.

For each policy: how far above the optimum the greedy makespan lands (mean and max %), how many
instances it solves optimally, and confirmation that every schedule validates and no makespan
falls below the optimum.

    python bench/bench_psplib_greedy.py [--data DIR]   # DIR holds j30/ and j30_opt.csv
                                                       # (default: $MOEOPT_PSPLIB_DIR)

Data: PSPLIB (Kolisch & Sprecher 1996, EJOR 96:205-216); optima from j30opt.sm.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from psplib_set import add_data_argument, open_set

import moeopt as m
from moeopt.core.policies import BUILTIN_POLICIES


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_data_argument(ap)
    args = ap.parse_args()
    got = open_set(args.data, args.psplib_set)
    if got is None:
        return 2
    data, opt = got
    paths = sorted(data.glob("*.sm"))
    graphs = [(p.stem, m.load_psplib(p)) for p in paths]
    print(f"PSPLIB {args.psplib_set}: {len(graphs)} instances")
    print(f"{'policy':<30} {'mean % above opt':>17} {'max %':>7} {'optimal':>8} {'below opt':>10} {'s total':>8}")
    for policy in BUILTIN_POLICIES:
        gaps = []
        optimal = below = 0
        t0 = time.perf_counter()
        for name, g in graphs:
            s = m.schedule(g, policy)
            m.validate_schedule(g, s)
            gap = 100.0 * (s.makespan_us / opt[name] - 1.0)
            gaps.append(gap)
            optimal += s.makespan_us == opt[name]
            below += s.makespan_us < opt[name]
        elapsed = time.perf_counter() - t0
        print(
            f"{policy:<30} {statistics.mean(gaps):>17.2f} {max(gaps):>7.2f} {optimal:>8} {below:>10} {elapsed:>8.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
