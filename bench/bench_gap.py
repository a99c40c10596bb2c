"""Wall seconds of a full optimality-gap report (``moeopt.optimality_gap``) on the typical
PTO MegaMoE cases.

Target: a full report -- every distinct rank, the greedy with every built-in policy,
CP-SAT with the default time limit (30 s per distinct rank) on one worker, the divergences --
finishes within 5 minutes for M = 16 and M = 128 on this machine.

The scenario is ``examples/seed002_typical.toml`` (pto-a2a3, world 8, K 7168, N 4096, topK 8,
16 experts per rank, cyclic routing) with ``workload.tokens = M``. Each figure is the median of
``--repeat`` reports (default 1: each takes about the time limit per distinct rank). Besides the
wall seconds it prints what the report found: events, greedy, CP-SAT best, bound, which bound
won, the certified gap and the bound's distance to the best schedule.

    python bench/bench_gap.py [--m 16 128] [--time-limit 30] [--workers 1] [--repeat 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import moeopt.megamoe as mm
import moeopt.trust as tr
from moeopt.trust.gap import DEFAULT_TIME_LIMIT_S

HERE = os.path.dirname(os.path.abspath(__file__))
SEED002 = os.path.join(HERE, "..", "examples", "seed002_typical.toml")
TARGET_S = 300.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, nargs="+", default=[16, 128], help="tokens per rank (default 16 128)")
    ap.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT_S, help="CP-SAT s per distinct rank")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--mode", default="auto", choices=("auto", "exact", "relaxed"))
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    print(
        f"full gap report, typical PTO MegaMoE case; CP-SAT {args.time_limit:g} s per distinct rank, "
        f"{args.workers} worker(s), mode {args.mode}; target {TARGET_S:.0f} s wall per report"
    )
    head = (
        f"{'M':>5} {'ranks':>5} {'events':>7} {'greedy us':>10} {'best us':>10} {'bound us':>10} "
        f"{'bound from':<22} {'certified':>9} {'best/bound':>10} {'wall s':>7} {'cpu s':>7}  verdict"
    )
    print(head)
    for m in args.m:
        walls: list[float] = []
        cpus: list[float] = []
        sg = None
        for _ in range(args.repeat):
            scenario = mm.load_scenario(SEED002, {"workload.tokens": m})
            t0, c0 = time.perf_counter(), time.process_time()
            sg = tr.optimality_gap(scenario, time_limit_s=args.time_limit, workers=args.workers, mode=args.mode)
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        assert sg is not None
        wall = statistics.median(walls)
        r = sg.worst
        print(
            f"{m:>5} {len(sg.ranks):>5} {r.num_events:>7} {r.greedy_us:>10.2f} {r.best_us:>10.2f} "
            f"{r.lower_bound_us:>10.2f} {r.exact.bound_source:<22} {100 * r.certified_gap:>8.2f}% "
            f"{100 * r.bound_gap:>9.2f}% {wall:>7.1f} {statistics.median(cpus):>7.1f}  "
            f"{'ok' if wall <= TARGET_S else 'SLOW'}",
            flush=True,
        )


if __name__ == "__main__":
    main()
