"""Is an unproven PSPLIB instance missing its optimum (the primal) or its proof (the bound)?

For each named instance with proven optimum ``OPT``, build the CP-SAT model ``solve_exact``
builds (same tick grid, pairing, static bounds, energy distances, cliques), drop the objective
and ask two decision questions with one worker:

* ``makespan <= OPT - 1``: must be refuted (INFEASIBLE). Its time is what the optimality proof
  costs once the optimum is known: a search from above finishes exactly by refuting it.
* ``makespan <= OPT``: must be satisfied (FEASIBLE). Its time is what finding the optimum costs
  when the bound is already known.

Prints wall and CPU seconds and CP-SAT's deterministic time per question (CPU is what the
2-second target needs on an idle core; wall grows with the machine's load, and so does CPU, a
little, on a shared machine; deterministic time does not). ``--dtime X`` limits each question
by deterministic time instead of wall time, so that two variants compared on a loaded machine
search exactly as far (one unit took 2.5-4 CPU s on the hard j30 instances on a loaded machine).
``--question proof`` asks only the refutation. Extra CP-SAT parameters go through ``--params``.

    python bench/bench_psplib_proof.py --only j3013_1,j3029_3 [--time-limit 30] [--dtime 3]
                                       [--question both|proof|primal]
                                       [--params '{"use_overload_checker_in_cumulative": true}']
    # data: --data DIR or $MOEOPT_PSPLIB_DIR (j30/ and j30_opt.csv)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from ortools.sat.python import cp_model
from psplib_set import add_data_argument, instance_paths, open_set

import moeopt as m
from moeopt.exact.model import ExactModel, semaphore_models, tick_instance
from moeopt.exact.solve import DEFAULT_PARAMS, DELAYS_BUDGET, SMALL_MODEL_PARAMS
from moeopt.exact.ticks import choose_grid


def decision_model(graph: m.EventGraph, limit: int) -> ExactModel:
    """The model of ``solve_exact`` (exact mode, automatic semaphores) with the makespan at most
    ``limit`` ticks and no objective."""
    cg = graph.compiled()
    pairings, sem_model = semaphore_models(cg)
    lams = [lam for p in cg.preds for _i, lam in p]
    grid = choose_grid(list(cg.dur) + lams, float(limit), None)
    if not grid.exact or grid.tick_us != 1.0:
        raise SystemExit("this bench expects whole-number durations (PSPLIB): tick 1")
    inst = tick_instance(cg, grid, "exact", limit, pairings, sem_model, DELAYS_BUDGET)
    model = ExactModel(inst)
    model.cp.clear_objective()
    return model


def one_worker_solver(time_limit: float, params: dict[str, Any], dtime: float = 0.0) -> cp_model.CpSolver:
    """A CP-SAT solver on one worker with the parameters of ``solve_exact``'s main search on a
    small graph (its defaults and ``SMALL_MODEL_PARAMS``: j30 has 32 events), then ``params``
    (enum values by name, repeated fields as lists), limited by ``time_limit`` wall seconds and,
    when ``dtime > 0``, by deterministic time."""
    solver = cp_model.CpSolver()
    p = solver.parameters
    p.num_workers = 1
    p.max_time_in_seconds = time_limit
    if dtime > 0:
        p.max_deterministic_time = dtime
    for key, value in {**DEFAULT_PARAMS, **SMALL_MODEL_PARAMS, **params}.items():
        current = getattr(p, key)
        if isinstance(value, str) and hasattr(type(current), "__members__"):
            value = type(current).__members__[value]
        if hasattr(current, "extend"):
            current.clear()
            current.extend(value)
        else:
            setattr(p, key, value)
    return solver


def decide(
    graph: m.EventGraph, limit: int, time_limit: float, params: dict[str, Any], dtime: float = 0.0
) -> tuple[str, float, float, float]:
    """``(status, wall s, CPU s, deterministic time)`` of CP-SAT on ``makespan <= limit`` (model
    building included in the seconds); ``dtime > 0`` limits the search by deterministic time."""
    t0, c0 = time.perf_counter(), time.process_time()
    model = decision_model(graph, limit)
    solver = one_worker_solver(time_limit, params, dtime)
    code = solver.solve(model.cp)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return solver.status_name(code), wall, cpu, solver.response_proto.deterministic_time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_data_argument(ap)
    ap.add_argument("--only", required=True, help="comma-separated instance names, e.g. j3013_1,j3029_3")
    ap.add_argument("--time-limit", type=float, default=30.0, help="CP-SAT seconds per question")
    ap.add_argument("--params", default="{}", help="extra CP-SAT parameters as a JSON object")
    ap.add_argument(
        "--dtime", type=float, default=0.0, help="limit each question by CP-SAT deterministic time (0: wall only)"
    )
    ap.add_argument("--question", default="both", choices=("both", "proof", "primal"))
    args = ap.parse_args()
    got = open_set(args.data, args.psplib_set)
    if got is None:
        return 2
    data, opt = got
    params = json.loads(args.params)
    paths = instance_paths(data, args.only)
    if paths is None:
        return 2
    names = [p.stem for p in paths]
    limit = f"{args.time_limit:g} s" + (f" / {args.dtime:g} deterministic" if args.dtime > 0 else "")
    print(f"CP-SAT, 1 worker, {limit} per question, params {params or 'default'}")
    print(f"{'instance':<10} {'OPT':>4}   {'<= OPT-1 (proof)':<38} {'<= OPT (primal)':<38}")
    asked = {"both": (0, 1), "proof": (0,), "primal": (1,)}[args.question]
    totals = [[0, 0.0, 0.0], [0, 0.0, 0.0]]  # per question: answered, CPU s, deterministic time
    wrong = []
    for name in names:
        graph = m.load_psplib(data / f"{name}.sm")
        best = opt[name]
        cells = []
        questions = ((best - 1, ("INFEASIBLE",)), (best, ("FEASIBLE", "OPTIMAL")))
        for q, (bound, expected) in enumerate(questions):
            if q not in asked:
                cells.append("-")
                continue
            status, wall, cpu, dt = decide(graph, bound, args.time_limit, params, args.dtime)
            if status not in expected and status != "UNKNOWN":
                wrong.append(f"{name} <= {bound}: {status}")
            totals[q][0] += status in expected
            totals[q][1] += cpu
            totals[q][2] += dt
            cells.append(f"{status:<10} {wall:6.2f} w {cpu:6.2f} cpu {dt:5.2f} dt")
        print(f"{name:<10} {best:>4}   {cells[0]:<38} {cells[1]:<38}", flush=True)
    for q in asked:
        answered, cpu, dt = totals[q]
        label = ("refuted", "found")[q]
        print(f"{label}: {answered}/{len(names)}, {cpu:.1f} CPU s, {dt:.2f} deterministic in all")
    if wrong:
        print("WRONG ANSWERS (against the proven optima): " + "; ".join(wrong))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
