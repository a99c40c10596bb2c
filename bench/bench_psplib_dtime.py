"""CP-SAT parameter variants on all PSPLIB j30 instances at a fixed deterministic budget.

``bench_psplib.py`` limits CP-SAT by wall seconds, which move 2.5-4x with the machine's load, so
two variants run at different times search different distances. Here each variant runs
``graph_optimality_gap`` (greedy hint from every policy, the model and defaults of
``solve_exact``) with a wall limit far above what the budget needs and CP-SAT limited by
``--dtime`` deterministic units instead (``params["max_deterministic_time"]``). The bound phase
of ``solve_exact`` (its last 10%, searching from below; wall-limited, as is the destructive bound
in it) is switched off by naming ``interleave_search`` (at its default, false) among the
parameters, so this measures the main search, which is where the proofs come from. Printed per variant:
instances proven optimal, bound = optimum, bounds above the optimum (must be 0), invalid
schedules (must be 0), the deterministic time CP-SAT used in all and CPU seconds (to check that a
variant's deterministic units cost what the default's do), and the instances left unproven.

What a 2-second solve gets (OR-Tools 9.15, one worker, load ~0.3 on 2 cores): 0.37-0.90
deterministic units on the hard instances (``bench_psplib_timeidx.py --question opt --time-limit 2
--dtime 0``: j3029_8 0.37, j3013_2 0.69, j3029_3 0.90), so ``--dtime 0.7`` is the default.

Findings (OR-Tools 9.15; with ``{"use_sat_inprocessing": true}`` as the old default): without
inprocessing 474/480 proven at 0.7 units instead of 473, 479/480 at 5 either way (j3029_3 open),
20.6 units in all instead of 27.1; hence ``SMALL_MODEL_PARAMS`` in ``solve_exact``. A split of
one budget between the two (part without, the rest with inprocessing) cannot prove more at 0.7:
only j3029_4 and the 473 others are proven below 0.7 units by either, and no instance is proven
faster with inprocessing by more than the seed-to-seed spread (j3013_1 0.46 against 0.51 with
the default seed, 0.86 against 0.58 with seed 2). Timetable edge finding on top costs twice the
CPU seconds per instance proven. The six left (j3013_2/5/6, j3029_3/6/8) are out of reach of
parameters: refuting ``makespan <= OPT - 1`` alone (``bench_psplib_proof.py --question proof``)
takes 0.86-1.76 units on three of them and more than 3 on the other three, while finding OPT
takes 0.01-0.73.

    python bench/bench_psplib_dtime.py [--dtime 0.7] [--variants default,noinproc]
                                       [--only NAME,...] [--limit N]
    # variants: names below, or a JSON object of CP-SAT parameters
    # data: --data DIR or $MOEOPT_PSPLIB_DIR (j30/ and j30_opt.csv)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from ortools.sat.python import cp_model
from psplib_set import add_data_argument, add_selection_arguments, chosen_set

import moeopt as m
from moeopt.exact import graph_optimality_gap

VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "noinproc": {"use_sat_inprocessing": False},
    "inproc": {"use_sat_inprocessing": True},
}

_used: list[float] = []


def _counting_solve(self: cp_model.CpSolver, *args: Any, **kwargs: Any) -> Any:
    """``CpSolver.solve`` that records the deterministic time of each call."""
    code = _plain_solve(self, *args, **kwargs)
    _used.append(self.response_proto.deterministic_time)
    return code


_plain_solve = cp_model.CpSolver.solve


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_data_argument(ap)
    ap.add_argument("--dtime", type=float, default=0.7, help="CP-SAT deterministic units per instance")
    ap.add_argument("--wall", type=float, default=60.0, help="wall seconds per instance (a safety net)")
    ap.add_argument("--variants", default="default,noinproc", help="names or JSON objects, comma-separated")
    add_selection_arguments(ap)
    ap.add_argument("--json", help="write per-variant, per-instance results to this file")
    args = ap.parse_args()
    chosen = chosen_set(args, ranges=True)
    if chosen is None:
        return 2
    known, paths = chosen
    variants: list[tuple[str, dict[str, Any]]] = []
    for v in args.variants.split(";" if "{" in args.variants else ","):
        v = v.strip()
        variants.append((v, json.loads(v)) if v.startswith("{") else (v, VARIANTS[v]))
    cp_model.CpSolver.solve = _counting_solve  # type: ignore[method-assign]
    graphs = [(p.stem, m.load_psplib(p)) for p in paths]
    print(f"PSPLIB {args.psplib_set}: {len(graphs)} instances, 1 worker, {args.dtime:g} deterministic units each", flush=True)
    bad = 0
    out: dict[str, list[dict[str, Any]]] = {}
    for label, extra in variants:
        params = {"interleave_search": False, **extra, "max_deterministic_time": args.dtime}
        proven, tight, above, invalid, unproven = 0, 0, [], [], []
        sum_bound = sum_best = 0.0
        _used.clear()
        c0 = time.process_time()
        rows = out.setdefault(label, [])
        for name, g in graphs:
            k, c1 = len(_used), time.process_time()
            rep = graph_optimality_gap(g, time_limit_s=args.wall, workers=1, params=params, name=name)
            x = rep.exact
            rows.append(
                {
                    "instance": name,
                    "proven": rep.proven_optimal,
                    "bound": x.lower_bound_us,
                    "best": x.best_us,
                    "dt": sum(_used[k:]),
                    "cpu": time.process_time() - c1,
                }
            )
            kn = known[name]
            if kn.bound_too_high(x.lower_bound_us):
                above.append(name)
            if x.schedule is None or kn.makespan_too_low(x.schedule.makespan_us):
                invalid.append(name)
            else:
                try:
                    m.validate_schedule(g, x.schedule)
                except m.ScheduleError:
                    invalid.append(name)
            proven += rep.proven_optimal
            tight += kn.optimum is not None and abs(x.lower_bound_us - kn.optimum) < 1e-9
            sum_bound += x.lower_bound_us
            sum_best += x.best_us if x.best_us is not None else math.inf
            if not rep.proven_optimal:
                unproven.append(f"{name} ({x.lower_bound_us:g}..{x.best_us:g}, known {kn})")
        cpu = time.process_time() - c0
        n = len(graphs)
        print(
            f"{label}: proven {proven}/{n}, bound = opt {tight}/{n}, bound > opt {len(above)}, "
            f"invalid {len(invalid)}, {sum(_used):.2f} dt, {cpu:.1f} CPU s; "
            f"bounds {sum_bound:g} and best makespans {sum_best:g} in all",
            flush=True,
        )
        if unproven:
            print("  not proven: " + ", ".join(unproven), flush=True)
        if above or invalid:
            print(f"  BOUND ABOVE OPTIMUM OR UPPER BOUND: {above}  INVALID OR BELOW: {invalid}", flush=True)
            bad = 1
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return bad


if __name__ == "__main__":
    sys.exit(main())
