"""The destructive bound (:mod:`moeopt.exact.destructive`): hand cases, soundness against the
exhaustive optimum on small random graphs, and its place in ``solve_exact``'s bound phase."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings

import moeopt as m
import moeopt.exact.destructive as destructive_mod
import moeopt.exact.solve as solve_mod
from moeopt.exact import solve_exact
from moeopt.exact.destructive import (
    applies,
    build,
    check_makespan,
    destructive_bound,
    lp_refutes,
    shaved_windows,
)
from moeopt.exact.model import TickInstance, semaphore_models, tick_instance
from moeopt.exact.ticks import TimeGrid
from tests.exact.brute import optimum
from tests.exact.strategies import held_graphs

DATA = os.environ.get("MOEOPT_PSPLIB_DIR")


def _instance(g: m.EventGraph, grid: TimeGrid, horizon: int) -> TickInstance:
    """The tick instance ``solve_exact`` builds (exact mode, automatic semaphores)."""
    cg = g.compiled()
    pairings, sem_model = semaphore_models(cg)
    return tick_instance(cg, grid, "exact", horizon, pairings, sem_model, 2_000_000)


def _triangle() -> m.EventGraph:
    """Three 2-µs jobs, each pair sharing a unit semaphore (R1: a, b; R2: b, c; R3: a, c): no two
    can overlap, so the optimum is 6. Each semaphore's energy is 4 and no two jobs are ordered,
    so the windows for a makespan of 5 are all [0, 3] and no propagation rule removes a start
    (no pair is forced into an order, each semaphore's work of 4 fits every window); but at
    every instant at most one job runs, so the LP needs 6 units of time in 5 and refutes it:
    bound 6."""
    g = m.EventGraph(semaphores={"R1": 1, "R2": 1, "R3": 1})
    for name, sems in (("a", ("R1", "R3")), ("b", ("R1", "R2")), ("c", ("R2", "R3"))):
        held = dict.fromkeys(sems, 1)
        g.add(m.Event(name, acquires=held, releases=held, duration_us=2.0))
    return g


def test_the_lp_refutes_what_propagation_cannot() -> None:
    g = _triangle()
    inst = _instance(g, TimeGrid(1.0, True), 6)
    assert applies(inst)
    assert inst.lower == 4  # each semaphore's energy: 2 + 2 on capacity 1
    prob = build(inst)
    windows = shaved_windows(prob, 5, shave=False)
    assert windows is not None
    es, ls, cut = windows
    assert not cut
    assert es.tolist() == [0, 0, 0]
    assert ls.tolist() == [3, 3, 3]
    assert lp_refutes(prob, es, ls, 5)
    assert not lp_refutes(prob, *shaved_windows(prob, 6, shave=False)[:2], 6)  # type: ignore[index]
    assert check_makespan(prob, 5) is True
    assert check_makespan(prob, 5, lp=False) is False
    # shaving gets there too: a at 0 leaves b and c 4 units of work in [2, 5]
    assert check_makespan(prob, 5, lp=False, shave=True) is True
    got = destructive_bound(inst, inst.lower, 6)
    assert got.bound == 6
    assert got.refuted == (4, 5)  # 4, then 5 by bisection (the doubled step would reach 6)
    assert got.complete


def test_the_lp_gives_up_sound_when_its_columns_cost_too_much(monkeypatch: pytest.MonkeyPatch) -> None:
    """Listing the maximal subsets is exponential in the events of one piece: past its step
    budget or its deadline the LP test refutes nothing (weaker, never unsound). On the triangle
    the one piece [0, 5] has the three pairwise-incompatible jobs, and its enumeration takes 7
    steps: the root; {a} (b and c do not fit with a: maximal); a left out; {b}; b left out; {c};
    c left out (nothing chosen, not maximal)."""
    g = _triangle()
    prob = build(_instance(g, TimeGrid(1.0, True), 6))
    ok = destructive_mod._compatible(prob)
    assert destructive_mod._maximal_subsets([0, 1, 2], ok, prob, 100, [7]) == [(0,), (1,), (2,)]
    assert destructive_mod._maximal_subsets([0, 1, 2], ok, prob, 100, [6]) is None
    es, ls, _cut = shaved_windows(prob, 5, shave=False)  # type: ignore[misc]
    assert lp_refutes(prob, es, ls, 5)
    monkeypatch.setattr(destructive_mod, "LP_MAX_NODES", 6)
    assert not lp_refutes(prob, es, ls, 5)
    monkeypatch.undo()
    assert not lp_refutes(prob, es, ls, 5, deadline=0.0)  # a deadline already passed
    assert check_makespan(prob, 5, deadline=0.0) is None  # ... and the test says it was cut


def test_propagation_refutes_a_job_that_cannot_fit_before_another() -> None:
    # long (10) and short (2) share a unit resource; short sits between a 5-µs lead and a 5-µs
    # trail. Energy and longest path give 12; for a makespan of at most 16 short must start in
    # [5, 9] and long cannot end by 5 nor start after short ends by 11 (it would end after 16):
    # the disjunction leaves no order, so the bound is 17, the optimum (long [0, 10), short
    # [10, 12), trail [12, 17)).
    g = m.EventGraph()
    g.add(m.Event("lead", duration_us=5.0))
    g.add(m.Event("long", resources=["c0.X"], duration_us=10.0))
    g.add(m.Event("short", resources=["c0.X"], deps={"lead": 0.0}, duration_us=2.0))
    g.add(m.Event("trail", deps={"short": 0.0}, duration_us=5.0))
    inst = _instance(g, TimeGrid(1.0, True), 17)
    prob = build(inst)
    for t in range(12, 17):
        assert check_makespan(prob, t, lp=False, shave=False) is True, t
    assert check_makespan(prob, 17) is False
    assert destructive_bound(inst, 12, 17).bound == 17


def test_graphs_it_does_not_take() -> None:
    g = _triangle()
    inst = _instance(g, TimeGrid(1.0, True), 6)
    inst.flexible = [True, False, False]  # a reservoir's releaser on a rounded grid
    assert not applies(inst)
    assert destructive_bound(inst, 4, 6).bound == 4


@settings(max_examples=120, deadline=None)
@given(held_graphs())
def test_never_refutes_the_brute_force_optimum(g: m.EventGraph) -> None:
    opt, best = optimum(g)
    # ticks: exact (every value is a whole number of half µs) and rounded down (1 µs); energetic
    # windows: every pair of ticks, and the characteristic points only (DENSE_WINDOWS = 0)
    for tick, dense in ((0.5, True), (1.0, True), (0.5, False)):
        with pytest.MonkeyPatch.context() as mp:
            if not dense:
                mp.setattr(destructive_mod, "DENSE_WINDOWS", 0)
            _check_against(g, opt, best, tick)


def _check_against(g: m.EventGraph, opt: float, best: m.Schedule, tick: float) -> None:
    grid = TimeGrid(tick, tick == 0.5)
    top = grid.down(opt)  # the optimal schedule mapped onto ticks has a makespan <= top
    inst = _instance(g, grid, top + 3)
    if not applies(inst):
        return
    prob = build(inst)
    # the mapped optimal schedule starts every event inside the shaved windows of top
    windows = shaved_windows(prob, top)
    assert windows is not None, (tick, top)
    es, ls, _cut = windows
    for i, name in enumerate(inst.cg.names):
        s = grid.down(best.start_us[name])
        assert es[i] <= s <= ls[i], (tick, name, s, es[i], ls[i])
    assert not lp_refutes(prob, es, ls, top)
    for t in (top, top + 1):
        assert check_makespan(prob, t, shave=True) is False, (tick, t)
    got = destructive_bound(inst, 0, top + 3, shave=True)
    assert got.bound <= top, (tick, got, top)
    assert grid.to_us(got.bound) <= opt + 1e-9


@pytest.mark.skipif(not DATA, reason="MOEOPT_PSPLIB_DIR is not set (PSPLIB j30 is not shipped)")
def test_the_bound_phase_reports_it_on_a_hard_psplib_instance() -> None:
    # j3013_2 (proven optimum 62, j30opt.sm row "13 2"): the default search does not prove it in
    # 0.3 units of deterministic time, so the bound phase runs; the destructive bound then
    # refutes makespans above CP-SAT's bound, never the optimum (it reached 59 in bench runs).
    g = m.load_psplib(Path(DATA or "") / "j30" / "j3013_2.sm")
    opt = m.load_psplib_optima(Path(DATA or "") / "j30_opt.csv")["j3013_2"]
    x = solve_exact(g, 60.0, 1, params={"max_deterministic_time": 0.3})
    assert "destructive" in x.bounds_us
    assert x.bounds_us["destructive"] <= opt
    assert x.bound_methods["destructive"] == "lp"
    assert x.lower_bound_us >= x.bounds_us["destructive"]


def test_off_when_its_share_is_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(solve_mod, "DESTRUCTIVE_SHARE", 0.0)
    x = solve_exact(_triangle(), 10.0, 1)
    assert "destructive" not in x.bounds_us
    assert x.best_us == pytest.approx(6.0)
