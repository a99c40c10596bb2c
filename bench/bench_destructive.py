"""The destructive lower bound (:mod:`moeopt.exact.destructive`) alone on PSPLIB j30: how far it
reaches and what it costs.

Per instance, the tick instance ``solve_exact`` builds (same grid, pairing, static bounds, energy
distances), the greedy's makespan as the known schedule, and the destructive bound searched
between the static bound and it. Prints, per instance named with ``--only`` (or the first
``--show`` of a full run), the optimum, the static bound, the destructive bound, the makespans
tested and the CPU seconds of the bound alone; then that none is above the optimum, how many
reach it (and how many of those the static bounds leave below it), and the CPU seconds (mean /
p95 / max) over the instances. The search never tests the greedy's makespan (a known schedule),
so where the greedy is optimal the bound can reach the optimum only by refuting one less.

    python bench/bench_destructive.py [--data DIR] [--only j3013_1,...] [--limit N]
                                      [--deadline 0.3] [--no-lp] [--shave]
    # DIR holds j30/ and j30_opt.csv (default: $MOEOPT_PSPLIB_DIR)
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time

from psplib_set import add_data_argument, add_selection_arguments, chosen_set

import moeopt as m
from moeopt.core.scheduler import schedule as greedy_schedule
from moeopt.exact.destructive import destructive_bound
from moeopt.exact.model import semaphore_models, tick_instance
from moeopt.exact.solve import DELAYS_BUDGET
from moeopt.exact.ticks import choose_grid


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_data_argument(ap)
    add_selection_arguments(ap)
    ap.add_argument("--deadline", type=float, default=0.0, help="wall seconds per instance (0: none)")
    ap.add_argument("--no-lp", action="store_true", help="propagation only (no LP test)")
    ap.add_argument("--shave", action="store_true", help="shave the windows before the LP test")
    args = ap.parse_args()
    chosen = chosen_set(args)
    if chosen is None:
        return 2
    opt, paths = chosen
    print(
        f"destructive bound on {len(paths)} PSPLIB {args.psplib_set} instances: LP {'off' if args.no_lp else 'on'}, "
        f"shaving {'on' if args.shave else 'off'}, deadline {args.deadline or 'none'}"
    )
    above: list[str] = []
    cpu: list[float] = []
    reached = 0
    raised = 0
    static_short = 0  # static bound below the optimum
    closed = 0  # of those, the destructive bound reaches the optimum
    show = bool(args.only)
    if show:
        print(f"{'instance':<9} {'opt':>4} {'static':>6} {'destr':>6} {'tests':>5} {'cpu s':>6}")
    for path in paths:
        name = path.stem
        g = m.load_psplib(path)
        cg = g.compiled()
        pairings, sem_model = semaphore_models(cg)
        hint = greedy_schedule(g)
        grid = choose_grid(list(cg.dur), hint.makespan_us, None)
        upper = grid.down(hint.makespan_us)
        inst = tick_instance(cg, grid, "exact", upper, pairings, sem_model, DELAYS_BUDGET)
        deadline = time.perf_counter() + args.deadline if args.deadline > 0 else None
        r = destructive_bound(inst, inst.lower, upper, deadline=deadline, lp=not args.no_lp, shave=args.shave)
        value = grid.to_us(r.bound)
        cpu.append(r.cpu_s)
        best = opt[name]
        if value > best + 1e-9:
            above.append(f"{name} ({value:g} > {best})")
        static_short += grid.to_us(inst.lower) < best - 1e-9
        reached += value >= best - 1e-9
        closed += grid.to_us(inst.lower) < best - 1e-9 <= value
        raised += r.bound > inst.lower
        if show:
            print(f"{name:<9} {best:>4} {inst.lower:>6} {r.bound:>6} {r.tests:>5} {r.cpu_s:6.3f}", flush=True)
    n = len(paths)
    ys = sorted(cpu)
    p95 = ys[min(n - 1, math.ceil(0.95 * n) - 1)] if n else 0.0
    print(f"bound <= proven optimum:        {n - len(above)}/{n}")
    print(f"bound = optimum:                {reached}/{n}")
    print(f"static bound below the optimum: {static_short}/{n}, of which the destructive bound closes {closed}")
    print(f"raised above the static bound:  {raised}/{n}")
    if cpu:
        print(f"CPU s of the bound (mean / p95 / max): {statistics.mean(cpu):.3f} / {p95:.3f} / {max(cpu):.3f}")
    if above:
        print("BOUND ABOVE OPTIMUM: " + ", ".join(above))
    return 1 if above else 0


if __name__ == "__main__":
    sys.exit(main())
