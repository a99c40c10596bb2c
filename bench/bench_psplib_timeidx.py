"""Experiments for refuting ``makespan <= OPT - 1`` faster on the hard PSPLIB j30 instances:
other formulations and searches of the decision questions of
``bench_psplib_proof.py``, and the optimisation ``solve_exact`` runs first.

For each named instance with proven optimum ``OPT`` and each variant, CP-SAT (1 worker) is asked
``makespan <= OPT - 1`` (refute) and/or ``makespan <= OPT`` (find); ``--question opt`` runs the
optimisation instead (greedy hint, horizon = its makespan, the model and defaults of
``solve_exact``, no bound phase). Printed: status, CPU s (model building included) and CP-SAT's
deterministic time, which is what to compare on a shared machine (``--dtime`` caps it).

Variants (``--variants``, comma-separated; all on the windows ``[head, L - tail]`` of the tick
instance, which every schedule of makespan ``<= L`` meets):

* ``base``: the model ``solve_exact`` builds (``bench_psplib_proof.decision_model``).
* ``ti``: a pure time-indexed model: Boolean ``x[j,t]`` (job ``j`` starts at ``t``), exactly one
  per job, per-instant capacity as linear sums, precedence in the disaggregated (DDT) form
  (``ti_agg``: aggregated ``sum t x`` form). ``chan``: ``base`` plus those rows, channelled by
  ``start == sum t x``. ``--lin`` sets their linearization_level (default 2: the point of
  time-indexed rows is their LP).
* ``plain`` (``plain_cl_dl``): intervals, precedences and one cumulative per resource only
  (plus moeopt's cliques and energy distances).
* ``fs``: ``base`` plus order literals ``p[i,j]`` (``i`` ends before ``j`` starts) and one clause
  per forbidden pair (``fs3``: and triple) of jobs not ordered by the precedences: some pair of it
  is ordered (intervals that pairwise overlap share an instant, Helly); ``r``: the literals
  reified both ways.
* ``act``: ``base`` plus the dominance "every job starts at 0 or at another job's end"
  (:func:`add_left_justified`).
* ``rev``: ``base`` of the reversed project (same feasibility for every ``L``).
* ``win`` / ``winp``: ``base`` with every start restricted to the windows of the destructive
  layer at ``L`` (:func:`moeopt.exact.destructive.shaved_windows`: propagation and shaving;
  ``winp``: propagation only), which every schedule of makespan ``<= L`` respects.
* ``pairs``: ``base`` plus a no-overlap per pair of jobs not ordered by the precedences whose
  demands exceed a capacity together (explicit disjunctions).
* ``fixed[:VAR:VAL]``: ``base`` with a decision strategy on the start variables (default
  CHOOSE_LOWEST_MIN / SELECT_MIN_VALUE, set-times style); pair with
  ``--params '{"search_branching": "FIXED_SEARCH"}'``.

Findings (OR-Tools 9.15, load 3-11 on 2 cores; a 2-second solve has ~0.5-0.8 deterministic
units): no variant brings the seven open instances (j3013_2/5/6, j3029_3/4/6/8) within reach.
Refuting ``OPT - 1`` takes at least 0.85 units on six of them in every variant (j3029_4: 0.32-0.37
with ``fs`` / ``base``); ``ti`` and ``chan`` do not refute even the easiest two within 4 units
(``base``: 1.2, 1.6) nor find ``OPT`` on any of the seven within 4; the other variants stay
within the seed-to-seed spread of ``base`` (j3029_8: 0.98-1.87 over six seeds) or are worse.
``--question opt`` with ``{"use_sat_inprocessing": false}`` is the one lead: 0.24-3.45 units
against 1.02-4.52 on six of the seven (j3029_3 open at 5 either way).

Later (same CP-SAT, load 5-10, the six left: j3013_2/5/6, j3029_3/6/8; seeds 1-3 where a range
is given): ``winp`` is ``base`` (the propagation narrows nothing beyond the heads and tails);
``win`` refutes in 2.72-3.35 units (``base`` 3.00-3.28), 1.65 (1.44-1.76), 1.82 (1.63-1.91),
4.55 (not within 5), 2.36 (3.05-3.67), 0.74 (0.86-0.90), after 0.3-4.5 CPU s of shaving;
``pairs`` (j3013_6, j3013_5, j3029_8) 1.92-1.95, 1.48, 1.06-1.08 against 1.63-1.91, 1.44-1.76,
0.86-0.90. Two more that this script does not run: splitting ``OPT - 1`` by the start of the
longest job into 2 or 4 windows and refuting each (0.77-5.38 units in all, as often above as
below ``base``), and dropping resources (with any 1-3 of the 4 resources ``OPT - 1`` is
feasible on j3013_5, j3013_6 and j3029_8: the refutation needs all four). None brings a proof
within the ~0.7 units of a 2-second solve; see ``moeopt/exact/destructive.py`` ("The windows as
CP-SAT domains") for the stronger shavings tried.

    python bench/bench_psplib_timeidx.py --only j3013_5,j3029_8 --variants base,ti,chan --dtime 4
    python bench/bench_psplib_timeidx.py --only j3029_4 --question opt --params '{"use_sat_inprocessing": false}'
    # data: --data DIR or $MOEOPT_PSPLIB_DIR (j30/ and j30_opt.csv)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from bench_psplib_proof import decision_model, one_worker_solver
from ortools.sat.python import cp_model
from psplib_set import add_data_argument, instance_paths, open_set

import moeopt as m
from moeopt.exact.model import ExactModel


def jobs(model: ExactModel) -> tuple[list[int], list[dict[int, int]], list[int]]:
    """Durations, demands (resource index -> units) and capacities of a PSPLIB graph's model:
    every semaphore is acquired and released by the same event (load_psplib)."""
    cg = model.inst.cg
    dem: list[dict[int, int]] = [{} for _ in range(cg.n)]
    for i in range(cg.n):
        for s, units in cg.acq[i]:
            dem[i][s] = dem[i].get(s, 0) + int(units)
    return list(model.inst.dur), dem, [int(c) for c in cg.sem_cap]


def add_time_indexed(
    cp: cp_model.CpModel, model: ExactModel, limit: int, starts: list[Any] | None, ddt: bool = True
) -> dict[tuple[int, int], Any]:
    """The time-indexed rows for ``makespan <= limit`` on ``cp``; ``starts`` (when given) are
    channelled (``start == sum t x``). Returns the ``x`` literals."""
    inst = model.inst
    dur, dem, cap = jobs(model)
    n = len(dur)
    win = [range(inst.head[j], max(inst.head[j], limit - inst.tail[j]) + 1) for j in range(n)]
    x: dict[tuple[int, int], Any] = {}
    for j in range(n):
        if limit - inst.tail[j] < inst.head[j]:
            cp.add_bool_or([])  # empty window: infeasible
            return x
        lits = []
        for t in win[j]:
            v = cp.new_bool_var(f"x[{j},{t}]")
            x[j, t] = v
            lits.append(v)
        cp.add_exactly_one(lits)
        if starts is not None:
            cp.add(starts[j] == sum(t * x[j, t] for t in win[j]))
    # capacity per instant
    for r, c in enumerate(cap):
        users = [j for j in range(n) if dem[j].get(r, 0) > 0 and dur[j] > 0]
        if sum(dem[j][r] for j in users) <= c:
            continue
        for t in range(limit):
            terms = []
            for j in users:
                for s in range(max(win[j].start, t - dur[j] + 1), min(win[j].stop, t + 1)):
                    terms.append(dem[j][r] * x[j, s])
            if terms:
                cp.add(sum(terms) <= c)
    # precedence
    for j in range(n):
        for i, lam in inst.preds[j]:
            d = dur[i] + lam
            if ddt:
                # started(j) by t  =>  started(i) by t - d
                for t in win[j]:
                    lhs = [x[j, s] for s in win[j] if s <= t]
                    rhs = [x[i, s] for s in win[i] if s <= t - d]
                    cp.add(sum(lhs) <= sum(rhs))
            else:
                cp.add(sum(t * x[j, t] for t in win[j]) >= sum(t * x[i, t] for t in win[i]) + d)
    return x


def plain(model: ExactModel, limit: int, with_cliques: bool, with_delays: bool) -> cp_model.CpModel:
    """A minimal RCPSP model on the same windows: intervals, precedences, one cumulative per
    resource (with the all-capacity interval after the makespan ``limit`` left out: the windows
    already end by ``limit``); optionally the moeopt cliques (no-overlaps) and energy delays."""
    inst = model.inst
    dur, dem, cap = jobs(model)
    cp = cp_model.CpModel()
    n = len(dur)
    st = [cp.new_int_var(inst.head[j], max(inst.head[j], limit - inst.tail[j]), f"s{j}") for j in range(n)]
    iv = [cp.new_fixed_size_interval_var(st[j], dur[j], f"i{j}") for j in range(n)]
    for j in range(n):
        for i, lam in inst.preds[j]:
            cp.add(st[j] >= st[i] + dur[i] + lam)
    for r, c in enumerate(cap):
        users = [j for j in range(n) if dem[j].get(r, 0) > 0 and dur[j] > 0]
        cp.add_cumulative([iv[j] for j in users], [dem[j][r] for j in users], c)
    if with_cliques:
        for cl in inst.cliques:
            cp.add_no_overlap([iv[j] for j in cl if dur[j] > 0])
    if with_delays:
        for i, j, d in inst.delays:
            cp.add(st[j] >= st[i] + d)
    return cp


def _reach(inst: Any) -> list[set[int]]:
    """Per job, the jobs reachable from it along the precedences (its transitive successors)."""
    reach: list[set[int]] = [set() for _ in range(inst.cg.n)]
    for i in reversed(list(inst.cg.topo)):
        for j, _lam in inst.succs[i]:
            reach[i].add(j)
            reach[i] |= reach[j]
    return reach


def add_forbidden_sets(
    cp: cp_model.CpModel, model: ExactModel, starts: list[Any], triples: bool, reify: bool
) -> int:
    """Order literals ``p[i,j]`` (``i`` ends before ``j`` starts) for every pair of jobs not
    ordered by the precedences, and a clause per forbidden pair / triple (jobs whose demands
    exceed a capacity together): some pair of it is ordered. Sound: intervals that pairwise
    overlap share an instant (Helly), so a schedule meeting the capacities orders a pair of
    every forbidden set. Returns the number of clauses."""
    inst = model.inst
    dur, dem, cap = jobs(model)
    n = len(dur)
    reach = _reach(inst)
    real = [j for j in range(n) if dur[j] > 0]
    free = lambda i, j: j not in reach[i] and i not in reach[j]  # noqa: E731
    p: dict[tuple[int, int], Any] = {}

    def lit(i: int, j: int) -> Any:
        if (i, j) not in p:
            v = cp.new_bool_var(f"p[{i},{j}]")
            p[i, j] = v
            cp.add(starts[j] >= starts[i] + dur[i]).only_enforce_if(v)
            if reify:
                cp.add(starts[j] <= starts[i] + dur[i] - 1).only_enforce_if(~v)
        return p[i, j]

    def over(js: list[int]) -> bool:
        return any(sum(dem[j].get(r, 0) for j in js) > c for r, c in enumerate(cap))

    count = 0
    pair_forbidden = set()
    for a, i in enumerate(real):
        for j in real[a + 1 :]:
            if free(i, j) and over([i, j]):
                pair_forbidden.add((i, j))
                cp.add_bool_or([lit(i, j), lit(j, i)])
                count += 1
    if triples:
        for a, i in enumerate(real):
            for b, j in enumerate(real[a + 1 :], a + 1):
                if not free(i, j) or (i, j) in pair_forbidden:
                    continue
                for k in real[b + 1 :]:
                    if (
                        not free(i, k)
                        or not free(j, k)
                        or (i, k) in pair_forbidden
                        or (j, k) in pair_forbidden
                    ):
                        continue
                    if over([i, j, k]):
                        cp.add_bool_or([lit(i, j), lit(j, i), lit(i, k), lit(k, i), lit(j, k), lit(k, j)])
                        count += 1
    return count


def add_left_justified(cp: cp_model.CpModel, model: ExactModel, limit: int) -> None:
    """Dominance: some schedule of makespan ``<= limit`` (if any) starts every job at 0 or at
    another job's end. Proof: when no job ends at ``s_j > 0`` (λ = 0 here), every job running
    at ``s_j - 1`` still runs at ``s_j``, so ``j`` fits one tick earlier and its predecessors
    end by ``s_j - 1``; such left shifts decrease the sum of starts, never the feasibility."""
    inst = model.inst
    dur, _dem, _cap = jobs(model)
    n = len(dur)
    lo = [inst.head[j] for j in range(n)]
    hi = [max(inst.head[j], limit - inst.tail[j]) for j in range(n)]
    reach = _reach(inst)
    for j in range(n):
        if lo[j] == 0 or dur[j] == 0:
            continue
        lits = []
        for i in range(n):
            if i == j or dur[i] == 0 or i in reach[j]:
                continue
            if lo[i] + dur[i] > hi[j] or hi[i] + dur[i] < lo[j]:
                continue
            b = cp.new_bool_var(f"after[{j},{i}]")
            cp.add(model.start[j] == model.start[i] + dur[i]).only_enforce_if(b)
            lits.append(b)
        cp.add_bool_or(lits)


def add_windows(model: ExactModel, limit: int, shave: bool) -> None:
    """Restrict every start to the window of :func:`moeopt.exact.destructive.shaved_windows` at
    ``limit`` (propagation, and shaving when ``shave``): every schedule of makespan ``<= limit``
    starts each event within it (that module's docstring), so the question keeps its answer.
    A makespan the propagation refutes gets an empty clause."""
    from moeopt.exact.destructive import build as build_problem
    from moeopt.exact.destructive import shaved_windows

    got = shaved_windows(build_problem(model.inst), limit, shave=shave)
    if got is None:
        model.cp.add_bool_or([])
        return
    es, ls, _cut = got
    for j, s in enumerate(model.start):
        model.cp.add(s >= int(es[j]))
        model.cp.add(s <= int(ls[j]))


def add_conflict_pairs(model: ExactModel) -> None:
    """A no-overlap per pair of jobs not ordered by the precedences whose demands exceed a
    capacity together (implied by that cumulative): explicit disjunctions for CP-SAT."""
    inst = model.inst
    dur, dem, cap = jobs(model)
    n = len(dur)
    reach = _reach(inst)
    for i in range(n):
        for j in range(i + 1, n):
            if dur[i] <= 0 or dur[j] <= 0 or j in reach[i] or i in reach[j]:
                continue
            if any(dem[i].get(r, 0) + dem[j].get(r, 0) > c for r, c in enumerate(cap)):
                model.cp.add_no_overlap([model.interval[i], model.interval[j]])


def reversed_graph(graph: m.EventGraph) -> m.EventGraph:
    """The same project with every precedence reversed (a schedule of makespan ``L`` maps to one
    of the reversed project by ``s' = L - e``, and back)."""
    cg = graph.compiled()
    g = m.EventGraph(semaphores={nm: int(c) for nm, c in zip(cg.sem_names, cg.sem_cap)})
    for i, nm in enumerate(cg.names):
        dem = {cg.sem_names[s]: int(u) for s, u in cg.acq[i]}
        deps = {cg.names[j]: 0.0 for j, _lam in cg.succs[i]}
        g.add(m.Event(nm, deps=deps, acquires=dem, releases=dem, duration_us=float(cg.dur[i])))
    g.validate()
    return g


def build(graph: m.EventGraph, limit: int, variant: str) -> cp_model.CpModel:
    if variant.startswith("rev"):
        graph = reversed_graph(graph)
        variant = variant[3:].lstrip("_") or "base"
    model = decision_model(graph, limit)
    if variant == "base":
        return model.cp
    if variant.startswith("fixed"):
        # fixed[:VAR:VAL]: branch on the start variables (set-times style)
        _f, var, val = [*variant.split(":"), "CHOOSE_LOWEST_MIN", "SELECT_MIN_VALUE"][:3]
        model.cp.add_decision_strategy(model.start, getattr(cp_model, var), getattr(cp_model, val))
        return model.cp
    if variant == "chan":
        add_time_indexed(model.cp, model, limit, model.start)
        return model.cp
    if variant.startswith("act"):
        add_left_justified(model.cp, model, limit)
        return model.cp
    if variant.startswith("fs"):
        add_forbidden_sets(model.cp, model, model.start, triples="3" in variant, reify="r" in variant)
        return model.cp
    if variant in ("win", "winp"):
        add_windows(model, limit, shave=variant == "win")
        return model.cp
    if variant == "pairs":
        add_conflict_pairs(model)
        return model.cp
    if variant.startswith("plain"):
        return plain(model, limit, with_cliques="cl" in variant, with_delays="dl" in variant)
    if variant in ("ti", "ti_agg"):
        cp = cp_model.CpModel()
        add_time_indexed(cp, model, limit, None, ddt=variant == "ti")
        return cp
    raise SystemExit(f"unknown variant {variant}")


def decide(
    graph: m.EventGraph, limit: int, variant: str, params: dict[str, Any], time_limit: float, dtime: float
) -> tuple[str, float, float]:
    c0 = time.process_time()
    cp = build(graph, limit, variant)
    solver = one_worker_solver(time_limit, params, dtime)
    code = solver.solve(cp)
    return solver.status_name(code), time.process_time() - c0, solver.response_proto.deterministic_time


def optimise(
    graph: m.EventGraph, params: dict[str, Any], time_limit: float, dtime: float
) -> tuple[str, int, int, float, float]:
    """The optimisation ``solve_exact`` runs first (greedy hint, horizon = its makespan, same
    model and defaults), without the bound phase: ``(status, best, bound, CPU s, dt)``."""
    from moeopt.core.scheduler import schedule as greedy_schedule
    from moeopt.exact.model import semaphore_models, tick_instance
    from moeopt.exact.solve import DELAYS_BUDGET
    from moeopt.exact.ticks import choose_grid

    c0 = time.process_time()
    cg = graph.compiled()
    hint = greedy_schedule(graph)
    pairings, sem_model = semaphore_models(cg)
    lams = [lam for p in cg.preds for _i, lam in p]
    grid = choose_grid(list(cg.dur) + lams, hint.makespan_us, None)
    inst = tick_instance(cg, grid, "exact", grid.down(hint.makespan_us), pairings, sem_model, DELAYS_BUDGET)
    model = ExactModel(inst)
    model.add_hint(hint)
    solver = one_worker_solver(time_limit, params, dtime)
    code = solver.solve(model.cp)
    best = int(solver.objective_value) if code in (cp_model.OPTIMAL, cp_model.FEASIBLE) else -1
    return (
        solver.status_name(code),
        best,
        int(solver.best_objective_bound + 1e-6),
        time.process_time() - c0,
        solver.response_proto.deterministic_time,
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_data_argument(ap)
    ap.add_argument("--only", required=True, help="comma-separated instance names, e.g. j3013_1,j3029_3")
    ap.add_argument("--variants", default="base,ti,chan", help="see the module docstring")
    ap.add_argument("--time-limit", type=float, default=60.0, help="wall seconds per question")
    ap.add_argument("--dtime", type=float, default=4.0, help="deterministic time per question (0: none)")
    ap.add_argument("--params", default="{}", help="extra CP-SAT parameters as a JSON object")
    ap.add_argument("--lin", type=int, default=2, help="linearization_level for ti/chan")
    ap.add_argument("--question", default="proof", choices=("both", "proof", "primal", "opt"))
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
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if args.question == "opt":
        print(f"optimisation, 1 worker, dtime {args.dtime:g}, params {params}")
        for name in names:
            graph = m.load_psplib(data / f"{name}.sm")
            status, best, bound, cpu, dt = optimise(graph, params, args.time_limit, args.dtime)
            bad = "  BOUND > OPT!" if bound > opt[name] else ""
            print(
                f"{name:<9} {opt[name]:>4} {status:<9} best {best:>4} bound {bound:>4} {cpu:6.2f} cpu {dt:5.2f} dt{bad}",
                flush=True,
            )
        return 0
    asked = {"both": (0, 1), "proof": (0,), "primal": (1,)}[args.question]
    print(f"1 worker, dtime {args.dtime:g}, params {params}, lin(ti/chan) {args.lin}")
    wrong = []
    for name in names:
        graph = m.load_psplib(data / f"{name}.sm")
        best = opt[name]
        for v in variants:
            pv = dict(params)
            if v in ("ti", "ti_agg", "chan"):
                pv.setdefault("linearization_level", args.lin)
            cells = []
            for q, (bound, expected) in enumerate(((best - 1, "INFEASIBLE"), (best, "FEASIBLE"))):
                if q not in asked:
                    continue
                status, cpu, dt = decide(graph, bound, v, pv, args.time_limit, args.dtime)
                if status not in (expected, "OPTIMAL", "UNKNOWN") or (q == 0 and status == "OPTIMAL"):
                    wrong.append(f"{name} {v} <= {bound}: {status}")
                cells.append(f"{('refute', 'find')[q]} {status:<10} {cpu:6.2f} cpu {dt:5.2f} dt")
            print(f"{name:<9} {best:>4} {v:<7} " + "   ".join(cells), flush=True)
    if wrong:
        print("WRONG: " + "; ".join(wrong))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
