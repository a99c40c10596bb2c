"""moeopt's bounds and schedules against an independent CP-SAT model, on any PSPLIB-format set.

Where a set's optima are unknown (instances made by ``gen_rcpsp.py``, or the open instances of
j60 / j120 with wide best-known ranges), ``bench_psplib.py`` can only judge a bound against the
run's own schedules. A bound that is too high would not show there: the model that the bound
constrains then finds no schedule below it either. This bench checks it against a second
solver that shares nothing with moeopt but CP-SAT itself:

* **the independent model** reads the ``.sm`` file with OR-Tools' own RCPSP reader
  (``ortools.scheduling.python.rcpsp``, not :func:`moeopt.load_psplib`): one fixed-size
  interval per job, ``start(succ) >= end(job)`` per arc, one cumulative per resource,
  minimise the largest end. No moeopt graph, bound, hint, tick grid or replay;
* **moeopt**: ``graph_optimality_gap`` on the loaded graph, as ``bench_psplib.py`` runs it.

Per instance, a contradiction fails the run (exit code 1): moeopt's bound above the other
model's best schedule (a bound that cuts off a schedule that exists), moeopt's valid best
schedule below the other model's bound, or both proven optimal at different makespans. It also
counts which side proves more, has the higher bound and the shorter schedule.

    python bench/bench_psplib_crosscheck.py --data DIR --set g60 [--time-limit 2]
                                            [--other-time-limit 10] [--only ...] [--limit N]
    # DIR holds <set>/ and <set>_opt.csv (gen_rcpsp.py writes both; default $MOEOPT_PSPLIB_DIR)
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ortools.sat.python import cp_model
from ortools.scheduling.python import rcpsp
from psplib_set import add_data_argument, add_selection_arguments, chosen_set

import moeopt as m
from moeopt.exact import graph_optimality_gap


@dataclass(frozen=True)
class Side:
    """What one solver says of an instance: its lower bound, its best makespan (``None``: no
    schedule) and whether it proved that makespan optimal."""

    bound: float
    best: float | None
    proven: bool


def contradictions(ours: Side, other: Side, tol: float = 1e-9) -> list[str]:
    """Why the two answers cannot both be right (empty: they can). A lower bound may not exceed
    any schedule that exists, and two proofs of optimality must agree."""
    out = []
    if other.best is not None and ours.bound > other.best + tol:
        out.append(f"moeopt's bound {ours.bound:g} is above the other model's schedule {other.best:g}")
    if ours.best is not None and ours.best < other.bound - tol:
        out.append(f"moeopt's schedule {ours.best:g} is below the other model's bound {other.bound:g}")
    a, b = ours.best, other.best
    if ours.proven and other.proven and a is not None and b is not None and abs(a - b) > tol:
        out.append(f"both proven optimal, at {a:g} and {b:g}")
    return out


def independent(path: Path, time_limit: float, workers: int) -> Side:
    """The independent model of the module docstring on the ``.sm`` file ``path``."""
    reader = rcpsp.RcpspParser()
    if not reader.parse_file(str(path)):
        raise SystemExit(f"{path}: OR-Tools' RCPSP reader cannot parse it")
    problem = reader.problem()
    tasks = list(problem.tasks)
    for k, t in enumerate(tasks):
        if len(t.recipes) != 1:
            raise SystemExit(f"{path}: job {k} has {len(t.recipes)} modes; this bench takes single-mode sets")
    dur = [t.recipes[0].duration for t in tasks]
    horizon = sum(dur)
    model = cp_model.CpModel()
    start = [model.new_int_var(0, horizon, f"s{k}") for k in range(len(tasks))]
    iv = [model.new_fixed_size_interval_var(start[k], dur[k], f"i{k}") for k in range(len(tasks))]
    for k, t in enumerate(tasks):
        for s in t.successors:
            model.add(start[s] >= start[k] + dur[k])
    for r, res in enumerate(problem.resources):
        used = [
            (iv[k], d)
            for k, t in enumerate(tasks)
            for rr, d in zip(t.recipes[0].resources, t.recipes[0].demands)
            if rr == r and d > 0
        ]
        if used:
            model.add_cumulative([x for x, _d in used], [d for _x, d in used], res.max_capacity)
    makespan = model.new_int_var(0, horizon, "makespan")
    model.add_max_equality(makespan, [start[k] + dur[k] for k in range(len(tasks))])
    model.minimize(makespan)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit
    solver.parameters.num_workers = workers
    status = solver.solve(model)
    found = status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    return Side(
        bound=float(solver.best_objective_bound) if found else 0.0,
        best=float(solver.objective_value) if found else None,
        proven=status == cp_model.OPTIMAL,
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_data_argument(ap)
    ap.add_argument("--time-limit", type=float, default=2.0, help="moeopt's seconds per instance")
    ap.add_argument(
        "--other-time-limit", type=float, default=10.0, help="the independent model's seconds per instance"
    )
    ap.add_argument("--workers", type=int, default=1, help="CP-SAT workers, both sides")
    add_selection_arguments(ap)
    args = ap.parse_args()
    chosen = chosen_set(args, ranges=True)
    if chosen is None:
        return 2
    _known, paths = chosen
    n = len(paths)
    print(
        f"{args.psplib_set}: {n} instances; moeopt {args.time_limit:g} s, the independent model "
        f"{args.other_time_limit:g} s per instance, {args.workers} worker(s)",
        flush=True,
    )
    bad: list[str] = []
    pairs: list[tuple[str, Side, Side]] = []
    t0 = time.perf_counter()
    for k, path in enumerate(paths, 1):
        g = m.load_psplib(path)
        rep = graph_optimality_gap(g, time_limit_s=args.time_limit, workers=args.workers, name=path.stem)
        x = rep.exact
        best = None
        if x.schedule is not None:
            try:
                m.validate_schedule(g, x.schedule)
                best = float(x.schedule.makespan_us)
            except m.ScheduleError as exc:  # (a failure of its own; its makespan proves nothing)
                bad.append(f"{path.stem}: moeopt's schedule is invalid: {str(exc).splitlines()[0]}")
        ours = Side(float(x.lower_bound_us), best, rep.proven_optimal)
        other = independent(path, args.other_time_limit, args.workers)
        pairs.append((path.stem, ours, other))
        for why in contradictions(ours, other):
            bad.append(f"{path.stem}: {why}")
        if k % 20 == 0 or k == n:
            print(f"  [{k}/{n}] {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)

    def count(test: Callable[[Side, Side], bool]) -> int:
        """The instances where ``test(moeopt's side, the other side)`` holds."""
        return sum(1 for _name, o, x in pairs if test(o, x))

    print(f"contradictions:                {len(bad)}")
    for line in bad:
        print(f"  {line}")
    print(f"proven optimal, moeopt / other: {count(lambda o, x: o.proven)} / {count(lambda o, x: x.proven)} of {n}")
    print(
        "bound higher / equal / lower:  "
        f"{count(lambda o, x: o.bound > x.bound)} / {count(lambda o, x: o.bound == x.bound)} / "
        f"{count(lambda o, x: o.bound < x.bound)} (moeopt against the other)"
    )
    shorter = count(lambda o, x: o.best is not None and (x.best is None or o.best < x.best))
    longer = count(lambda o, x: x.best is not None and (o.best is None or o.best > x.best))
    print(f"best schedule shorter / longer: {shorter} / {longer} (moeopt against the other)")

    def text(side: Side) -> str:
        return f"{side.bound:g}..{'-' if side.best is None else format(side.best, 'g')}"

    open_ones = [f"{nm} ({text(o)}, other {text(x)})" for nm, o, x in pairs if not o.proven]
    if open_ones:
        print("not proven by moeopt: " + ", ".join(open_ones))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
