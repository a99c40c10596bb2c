"""Static bounds (longest path, energy), energy distances and the tick grid, with hand derivations.

The random test checks soundness: on small random graphs every static bound and every energy
distance holds in CP-SAT's proven optimal schedule, and no bound exceeds any greedy makespan;
on a grid that rounds nothing, the bounds solve_exact reports are its one analysis on ticks and
never exceed the exhaustive optimum.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import moeopt as m
from moeopt.exact import SolveStatus, solve_exact
from moeopt.exact import cliques as cliques_mod
from moeopt.exact.bounds import Item, energy_bound, energy_delays, static_bounds
from moeopt.exact.cliques import disjunctive_cliques
from moeopt.exact.model import tick_analysis
from moeopt.exact.pairing import find_pairing
from moeopt.exact.ticks import TimeGrid, choose_grid
from tests.exact.brute import optimum
from tests.exact.strategies import held_graphs


# ---------------------------------------------------------------------- energy
def test_energy_bound_whole_set() -> None:
    # Three 2-µs intervals on capacity 2, all free at 0, nothing after: 0 + 6 / 2 + 0 = 3.
    assert energy_bound([Item(0.0, 2.0, 0.0, 1)] * 3, 2) == pytest.approx(3.0)


def test_energy_bound_uses_what_must_precede_and_follow() -> None:
    # Capacity 1: a (head 5, len 4, after 3) and b (head 6, len 2, after 1).
    # {a, b}: 5 + 6 + 1 = 12; {b}: 6 + 2 + 1 = 9; {a}: 5 + 4 + 3 = 12. Best 12.
    items = [Item(5.0, 4.0, 3.0, 1), Item(6.0, 2.0, 1.0, 1)]
    assert energy_bound(items, 1) == pytest.approx(12.0)
    # threshold subsets: x (head 0, len 10, after 0) is long but early; y and z (head 10, len 3,
    # after 10) alone give 10 + 6 + 10 = 26, more than the whole set 0 + 16 + 0.
    items = [Item(0.0, 10.0, 0.0, 1), Item(10.0, 3.0, 10.0, 1), Item(10.0, 3.0, 10.0, 1)]
    assert energy_bound(items, 1) == pytest.approx(26.0)
    # two thresholds at once: a (head 0, len 5, after 20), b (head 10, len 5, after 0),
    # c (head 10, len 10, after 20). One threshold at a time: {head >= 10} = {b, c} gives
    # 10 + 15 + 0 = 25, {after >= 20} = {a, c} gives 0 + 15 + 20 = 35; both: {c} gives
    # 10 + 10 + 20 = 40.
    items = [Item(0.0, 5.0, 20.0, 1), Item(10.0, 5.0, 0.0, 1), Item(10.0, 10.0, 20.0, 1)]
    assert energy_bound(items, 1) == pytest.approx(40.0)


def test_energy_bound_integral_rounds_the_span_up() -> None:
    # 3 ticks of work on capacity 2 need at least 2 whole ticks (1.5 on real time).
    assert energy_bound([Item(0, 1, 0, 1)] * 3, 2) == pytest.approx(1.5)
    assert energy_bound([Item(0, 1, 0, 1)] * 3, 2, integral=True) == pytest.approx(2.0)


def test_static_bounds_of_every_resource_pool_and_semaphore() -> None:
    g = m.EventGraph(semaphores={"hbm": 2}, pools={"AIC": ["c0.AIC", "c1.AIC"]})
    # three loads of 2 µs each taking 2 of the 2 HBM units: energy (3 x 2 x 2) / 2 = 6
    for k in range(3):
        g.add(m.Event(f"ld{k}", acquires={"hbm": 2}, releases={"hbm": 2}, duration_us=2.0))
    # two 3-µs matmuls on the AIC pool after ld0 (λ 0.5): energy 6 / 2 = 3 starting at head 2.5
    for k in range(2):
        g.add(m.Event(f"mm{k}", resources=["AIC:*"], deps={"ld0": 0.5}, duration_us=3.0))
    # a fixed vector unit used by two 1-µs events
    g.add(m.Event("v0", resources=["c0.AIV"], duration_us=1.0))
    g.add(m.Event("v1", resources=["c0.AIV"], duration_us=1.0))
    cg = g.compiled()
    pairings = {s: p for s in range(len(cg.sem_names)) if (p := find_pairing(cg, s)) is not None}
    got = {b.source: b.value for b in static_bounds(cg, pairings, cg.dur, cg.preds, cg.succs)}
    assert got["longest_path"] == pytest.approx(2.0 + 0.5 + 3.0)
    assert got["semaphore:hbm"] == pytest.approx(6.0)
    # pool: 2 matmuls on 2 members is not contention (demand 2 = capacity): no bound listed
    assert "pool:AIC" not in got
    assert got["resource:c0.AIV"] == pytest.approx(2.0)
    x = solve_exact(g, 10.0, 1)
    assert x.bound_source in ("semaphore:hbm", "cpsat")
    assert x.lower_bound_us == pytest.approx(6.0)
    assert x.status is SolveStatus.OPTIMAL


def test_energy_distance_between_two_events() -> None:
    # i (1 µs) -> {k1, k2} (3 µs each on one exclusive resource) -> j. The longest path from i's
    # start to j's start is 1 + 3 = 4; k1 and k2 run one after the other between them: 1 + 6 = 7.
    g = m.EventGraph()
    g.add(m.Event("i", duration_us=1.0))
    g.add(m.Event("k1", resources=["c0.X"], deps={"i": 0.0}, duration_us=3.0))
    g.add(m.Event("k2", resources=["c0.X"], deps={"i": 0.0}, duration_us=3.0))
    g.add(m.Event("j", deps={"k1": 0.0, "k2": 0.0}, duration_us=1.0))
    cg = g.compiled()
    dur = [int(d) for d in cg.dur]
    preds = [tuple((p, int(lam)) for p, lam in ps) for ps in cg.preds]
    succs = [tuple((q, int(lam)) for q, lam in ss) for ss in cg.succs]
    delays = {(cg.names[a], cg.names[b]): d for a, b, d in energy_delays(cg, {}, dur, preds, succs, budget=10**6)}
    assert delays[("i", "j")] == 7
    assert energy_delays(cg, {}, dur, preds, succs, budget=10) == []  # over budget: none


# ---------------------------------------------------------------------- ticks
def test_grid_is_the_coarsest_exact_one() -> None:
    assert choose_grid([3.0, 4.0], 100.0) == TimeGrid(1.0, True)
    assert choose_grid([0.3, 1.5], 100.0) == TimeGrid(0.1, True)  # 0.3 / 0.1 = 2.9999999999999996
    assert choose_grid([0.125], 100.0) == TimeGrid(0.001, True)
    assert choose_grid([2.0 / 3.0], 100.0) == TimeGrid(0.001, False)
    grid = choose_grid([2.0 / 3.0], 100.0)
    assert grid.down(2.0 / 3.0) == 666  # down, never 667
    assert grid.down(0.3) == 300


def test_grid_coarsens_for_huge_horizons_and_checks_forced_ticks() -> None:
    grid = choose_grid([0.001], 1e10)  # 1e13 ticks of 1 ns would not fit: 1e-2 µs ticks
    assert grid.tick_us == pytest.approx(0.01)
    assert not grid.exact
    with pytest.raises(m.InputError, match=r"tick_us must be a finite number of µs > 0, got 0"):
        choose_grid([1.0], 10.0, 0)


# ---------------------------------------------------------------------- soundness, randomly
@st.composite
def _graphs(draw: st.DrawFn) -> m.EventGraph:
    n = draw(st.integers(2, 6))
    g = m.EventGraph(semaphores={"buf": draw(st.integers(1, 2))}, pools={"P": ["s0.P", "s1.P"]})
    for i in range(n):
        preds = draw(st.lists(st.integers(0, i - 1), max_size=2, unique=True)) if i else []
        res = draw(st.sampled_from([[], ["P:*"], ["s0.Q"], ["P:*", "s1.Q"]]))
        held = draw(st.integers(0, 1))
        g.add(
            m.Event(
                f"e{i}",
                resources=res,
                deps={f"e{p}": float(draw(st.integers(0, 2))) for p in preds},
                acquires={"buf": 1} if held else {},
                releases={"buf": 1} if held else {},
                duration_us=float(draw(st.integers(0, 4))) + draw(st.sampled_from([0.0, 0.5])),
            )
        )
    return g


@settings(max_examples=40, deadline=None)
@given(_graphs())
def test_bounds_hold_in_optimal_schedules(g: m.EventGraph) -> None:
    x = solve_exact(g, 10.0, 1, tick_us=0.5)
    assert x.status is SolveStatus.OPTIMAL
    assert x.schedule is not None
    m.validate_schedule(g, x.schedule)
    for source, value in x.bounds_us.items():
        assert value <= x.best_us + 1e-9, source  # type: ignore[operator]
    for policy in ("earliest_start", "critical_path_first"):
        assert x.lower_bound_us <= m.schedule(g, policy).makespan_us + 1e-9
    cg = g.compiled()
    grid = TimeGrid(0.5, True)
    dur = [grid.down(d) for d in cg.dur]
    preds = [tuple((p, grid.down(lam)) for p, lam in ps) for ps in cg.preds]
    succs = [tuple((q, grid.down(lam)) for q, lam in ss) for ss in cg.succs]
    pairings = {0: p} if (p := find_pairing(cg, 0)) is not None else {}
    start = x.schedule.start_us
    for a, b, d in energy_delays(cg, pairings, dur, preds, succs, budget=10**6):
        assert start[cg.names[b]] - start[cg.names[a]] >= grid.to_us(d) - 1e-9


# ---------------------------------------------------------------------- disjunctive cliques
def test_cliques_join_precedence_and_capacity_conflicts() -> None:
    # a -> b (precedence); c takes 2 of the 3 units of S that a also needs 2 of (2 + 2 > 3) and
    # shares the fixed resource c0.X with b: {a, b, c} pairwise cannot overlap. d needs 1 unit
    # (1 + 2 <= 3) and nothing else: it conflicts with nobody.
    g = m.EventGraph(semaphores={"S": 3})
    g.add(m.Event("a", acquires={"S": 2}, releases={"S": 2}, duration_us=1.0))
    g.add(m.Event("b", deps={"a": 0.0}, resources=["c0.X"], duration_us=1.0))
    g.add(m.Event("c", acquires={"S": 2}, releases={"S": 2}, resources=["c0.X"], duration_us=1.0))
    g.add(m.Event("d", acquires={"S": 1}, releases={"S": 1}, duration_us=1.0))
    cg = g.compiled()
    pairings = {0: p} if (p := find_pairing(cg, 0)) is not None else {}
    dur = [1, 1, 1, 1]
    succs = [tuple((q, 0) for q, _lam in ss) for ss in cg.succs]
    cliques = disjunctive_cliques(cg, pairings, dur, succs)
    assert [[cg.names[i] for i in c] for c in cliques] == [["a", "b", "c"]]
    x = solve_exact(g, 10.0, 1)
    assert x.best_us == pytest.approx(3.0)  # a, b, c one after another; d alongside


@settings(max_examples=25, deadline=None)
@given(_graphs())
def test_cliques_never_cut_an_optimal_schedule(g: m.EventGraph) -> None:
    # The cliques are implied constraints: the optimum with and without them is the same.
    with_cliques = solve_exact(g, 10.0, 1, tick_us=0.5)
    saved = cliques_mod.MAX_CLIQUES
    cliques_mod.MAX_CLIQUES = 0
    try:
        without = solve_exact(g, 10.0, 1, tick_us=0.5)
    finally:
        cliques_mod.MAX_CLIQUES = saved
    assert with_cliques.status is SolveStatus.OPTIMAL
    assert without.status is SolveStatus.OPTIMAL
    assert with_cliques.best_us == pytest.approx(without.best_us)


# ---------------------------------------------------------------------- one static analysis
@settings(max_examples=60, deadline=None)
@given(held_graphs(max_events=5))
def test_static_bounds_on_an_exact_grid_come_from_the_tick_analysis(g: m.EventGraph) -> None:
    # Durations and λ are multiples of 0.5 µs, so the grid rounds nothing: solve_exact runs the
    # static analysis once, on ticks, and reports its bounds in µs. Each is a lower bound: never
    # above the exhaustive optimum.
    opt, _best = optimum(g)
    x = solve_exact(g, 10.0, 1)
    assert not x.durations_rounded
    cg = g.compiled()
    pairings = {s: p for s in range(len(cg.sem_names)) if (p := find_pairing(cg, s)) is not None}
    grid = TimeGrid(x.tick_us, True)
    want = {b.source: grid.to_us(b.value) for b in tick_analysis(cg, grid, pairings).bounds}
    got = {k: v for k, v in x.bounds_us.items() if k != "cpsat"}
    assert got == pytest.approx(want)
    for source, value in got.items():
        assert value <= opt + 1e-9, source
