"""Energetic reasoning on windows (:mod:`moeopt.exact.windows`) and heads and tails adjusted by the
capacities (:mod:`moeopt.exact.heads`): hand cases. Their soundness on random graphs is checked
against the exhaustive optimum with every other static bound in test_exact_packing.py; the sweep
over every right end is checked here against energetic reasoning by its definition and against
the exhaustive optimum."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import moeopt as m
from moeopt.exact import solve_exact
from moeopt.exact.bounds import Item, _items, capacity_sets, energy_bound, static_bounds
from moeopt.exact.heads import adjusted_heads_tails, raised_ends
from moeopt.exact.pairing import find_pairing
from moeopt.exact.windows import sweep_overloaded, sweep_window_bound, window_bound
from tests.exact.brute import optimum
from tests.exact.strategies import held_graphs


def _window_graph() -> m.EventGraph:
    """``long`` (10 µs) and ``short`` (2 µs) share ``c0.X``; ``short`` comes after a 5-µs ``lead``
    and before a 5-µs ``trail``. Longest path 5 + 2 + 5 = 12; the resource's energy bound is 12
    too ({long, short}: 0 + 12 + 0; {short}: 5 + 2 + 5). But ``long`` cannot fit before ``short``
    (it would end at 10 > 5), so one runs after the other: 17 (long [0, 10), short [10, 12),
    trail [12, 17); or short [5, 7), long [7, 17))."""
    g = m.EventGraph()
    g.add(m.Event("lead", duration_us=5.0))
    g.add(m.Event("long", resources=["c0.X"], duration_us=10.0))
    g.add(m.Event("short", resources=["c0.X"], deps={"lead": 0.0}, duration_us=2.0))
    g.add(m.Event("trail", deps={"short": 0.0}, duration_us=5.0))
    return g


def test_window_bound_counts_the_part_that_must_fall_inside() -> None:
    # For a makespan T < 17 the window [5, T − 5] must hold 5 of long (it cannot end by 5, nor
    # start after T − 15 ≤ 1... its overlap is at least min(10, T − 10, 0 + 10 − 5, T − 5 − T + 10) = 5)
    # and all of short (2): 7 > T − 10.
    items = [Item(0.0, 10.0, 0.0, 1), Item(5.0, 2.0, 5.0, 1)]
    assert energy_bound(items, 1) == pytest.approx(12.0)
    value, method = window_bound(items, 1, 12.0)
    assert method == "window"
    assert value == pytest.approx(17.0, abs=1e-6)
    assert value <= 17.0
    # on whole ticks: T = 16 is refuted, so the bound is 17 exactly
    assert window_bound(items, 1, 12.0, integral=True) == (17.0, "window")
    # nothing to refute above a bound already at the optimum
    assert window_bound(items, 1, 17.0, integral=True) == (17.0, "")


def test_static_and_solver_bounds_on_the_window_graph() -> None:
    g = _window_graph()
    cg = g.compiled()
    got = {b.source: b for b in static_bounds(cg, {}, cg.dur, cg.preds, cg.succs)}
    assert got["longest_path"].value == pytest.approx(12.0)
    assert got["resource:c0.X"].value == pytest.approx(17.0, abs=1e-6)
    assert got["resource:c0.X"].method == "window"
    x = solve_exact(g, 10.0, 1)
    assert x.best_us == pytest.approx(17.0)
    assert x.proven_optimal


def _combined_graph() -> m.EventGraph:
    """a, b (3 µs each) share c0.X and both precede j (1 µs); j precedes c and d (1 µs each),
    which share c0.Y. Per class: X gives 0 + 6 + 2 = 8 (j and one of c, d after each), Y gives
    head 4 + 2 = 6, the longest path 3 + 1 + 1 = 5. Combined: j cannot start before both a and b
    are through X (6), and c, d then take 2 on Y after j: 6 + 1 + 2 = 9, the optimum."""
    g = m.EventGraph()
    g.add(m.Event("a", resources=["c0.X"], duration_us=3.0))
    g.add(m.Event("b", resources=["c0.X"], duration_us=3.0))
    g.add(m.Event("j", deps={"a": 0.0, "b": 0.0}, duration_us=1.0))
    g.add(m.Event("c", resources=["c0.Y"], deps={"j": 0.0}, duration_us=1.0))
    g.add(m.Event("d", resources=["c0.Y"], deps={"j": 0.0}, duration_us=1.0))
    return g


def test_adjusted_heads_and_tails_combine_two_resources_along_a_path() -> None:
    g = _combined_graph()
    cg = g.compiled()
    head, tail = cg.heads(), cg.tails()
    ix = cg.index
    x_items = ((ix["a"], ix["a"], 3.0, 1), (ix["b"], ix["b"], 3.0, 1))
    y_items = ((ix["c"], ix["c"], 1.0, 1), (ix["d"], ix["d"], 1.0, 1))
    got = adjusted_heads_tails(cg, [(1, x_items), (1, y_items)], cg.dur, cg.preds, cg.succs, head, tail)
    assert got is not None
    big_h, big_t = got
    assert head[ix["j"]] == pytest.approx(3.0)
    assert big_h[ix["j"]] == pytest.approx(6.0)  # a and b one after the other on X
    assert big_h[ix["c"]] == pytest.approx(7.0)
    assert big_t[ix["j"]] == pytest.approx(3.0)  # j, then c and d one after the other on Y
    assert big_t[ix["a"]] == pytest.approx(3.0 + 1.0 + 2.0)
    bounds = {b.source: b.value for b in static_bounds(cg, {}, cg.dur, cg.preds, cg.succs)}
    assert bounds["longest_path"] == pytest.approx(5.0)
    assert bounds["resource:c0.X"] == pytest.approx(8.0)
    assert bounds["resource:c0.Y"] == pytest.approx(6.0)
    assert bounds["joint:paths"] == pytest.approx(9.0)
    x = solve_exact(g, 10.0, 1)
    assert x.best_us == pytest.approx(9.0)
    assert x.class_bounds_us["joint"] == pytest.approx(9.0)
    assert x.class_bounds_us["resource"] == pytest.approx(8.0)


def test_adjusted_heads_stay_within_budget() -> None:
    g = _combined_graph()
    cg = g.compiled()
    items = ((0, 0, 3.0, 1), (1, 1, 3.0, 1))
    assert (
        adjusted_heads_tails(cg, [(1, items)], cg.dur, cg.preds, cg.succs, cg.heads(), cg.tails(), budget=5)
        is None
    )


def _far_and_near_graph() -> m.EventGraph:
    """``a1`` and ``a2`` (10 µs each) and ``b`` (1 µs) share ``c0.R``; ``x`` (20 µs, no resource)
    follows ``a1`` and ``a2``; ``j`` follows ``x`` and ``b``. Longest path to ``j``: 10 + 20 = 30.
    ``a1`` and ``a2`` run one after the other, so ``x`` starts at 20 at the earliest and ``j`` at
    40 (the optimum: a1 [0, 10), a2 [10, 20), b [20, 21), x [20, 40), j [40, 41))."""
    g = m.EventGraph()
    g.add(m.Event("a1", resources=["c0.R"], duration_us=10.0))
    g.add(m.Event("a2", resources=["c0.R"], duration_us=10.0))
    g.add(m.Event("b", resources=["c0.R"], duration_us=1.0))
    g.add(m.Event("x", deps={"a1": 0.0, "a2": 0.0}, duration_us=20.0))
    g.add(m.Event("j", deps={"x": 0.0, "b": 0.0}, duration_us=1.0))
    return g


def _raised_head_of_j(g: m.EventGraph, **limits: float) -> dict[int, float]:
    """raised_ends asked for j's head, over the one capacity set of a1, a2 and b on c0.R."""
    cg = g.compiled()
    ix = cg.index
    items = tuple((ix[e], ix[e], cg.dur[ix[e]], 1) for e in ("a1", "a2", "b"))
    raised_h, _t = raised_ends(
        cg, [(1, items)], cg.dur, cg.preds, cg.succs, cg.heads(), cg.tails(), [ix["j"]], [], **limits
    )
    return raised_h


@pytest.mark.parametrize("max_neighbours", [400, 0])
def test_targeted_raising_takes_the_far_intervals_apart_from_the_near_ones(max_neighbours: int) -> None:
    # all three intervals of c0.R end before j starts, but b right before it (distance 0) and a1,
    # a2 20 µs before (x in between). All three through by 0 + 21, plus the smallest distance 0:
    # 21, below the longest path 30. The subset at distance >= 20, {a1, a2}: through by 20, plus
    # 20: 40, the optimum's start of j. max_neighbours = 0 takes j through the work budget.
    g = _far_and_near_graph()
    cg = g.compiled()
    raised_h = _raised_head_of_j(g, max_neighbours=max_neighbours)
    assert cg.heads()[cg.index["j"]] == pytest.approx(30.0)
    assert raised_h[cg.index["j"]] == pytest.approx(40.0)
    x = solve_exact(g, 10.0, 1)
    assert x.best_us == pytest.approx(41.0)
    assert x.schedule is not None
    assert x.schedule.start_us["j"] == pytest.approx(40.0)


def test_targeted_raising_stays_within_its_work() -> None:
    # with no work allowed, an event beyond max_neighbours keeps its longest-path head
    assert _raised_head_of_j(_far_and_near_graph(), max_neighbours=0, work=0) == {}


def test_targeted_raising_stops_at_its_deadline() -> None:
    # j has 4 ancestors (within max_neighbours: taken without the work budget); a deadline already
    # passed leaves it out too, with its longest-path head (30, a sound bound), while a deadline
    # far ahead changes nothing (40, as above)
    import time

    g = _far_and_near_graph()
    cg = g.compiled()
    assert _raised_head_of_j(g, deadline=time.perf_counter() - 1.0) == {}
    late = _raised_head_of_j(g, deadline=time.perf_counter() + 3600.0)
    assert late == {cg.index["j"]: pytest.approx(40.0)}


# ---------------------------------------------------------------------- every right end at once
def test_sweep_finds_the_window_of_the_hand_case() -> None:
    # the same derivation as above: [5, T − 5] must hold 5 of long and all of short, 7 > T − 10
    # for every T < 17; on whole ticks T = 16 is refuted, so 17 exactly; nothing above 17
    items = [Item(0.0, 10.0, 0.0, 1), Item(5.0, 2.0, 5.0, 1)]
    value, method = sweep_window_bound(items, 1, 12.0)
    assert method == "window"
    assert 17.0 - 1e-6 <= value <= 17.0
    assert sweep_window_bound(items, 1, 12.0, integral=True) == (17.0, "window")
    assert sweep_window_bound(items, 1, 17.0, integral=True) == (17.0, "")
    assert sweep_window_bound(items, 1, 17.0) == (17.0, "")


def _all_windows_overloaded(its: list[Item], capacity: int, makespan: float) -> bool:
    """Energetic reasoning by its definition, window by window, over every characteristic window
    (``t1`` among heads and latest starts, ``t2`` among latest and earliest ends), pure Python."""
    lct = [makespan - it.after for it in its]
    if any(it.head + it.length > lc + 1e-9 for it, lc in zip(its, lct, strict=True)):
        return True
    t1s = {it.head for it in its} | {lc - it.length for it, lc in zip(its, lct, strict=True)}
    t2s = set(lct) | {it.head + it.length for it in its}
    for t1 in t1s:
        for t2 in t2s:
            if t2 <= t1:
                continue
            work = sum(
                it.demand
                * max(0.0, min(it.length, t2 - t1, it.head + it.length - t1, t2 - lc + it.length))
                for it, lc in zip(its, lct, strict=True)
            )
            if work > capacity * (t2 - t1) + 1e-9:
                return True
    return False


@st.composite
def _item_sets(draw: st.DrawFn) -> tuple[list[Item], int, float]:
    half = st.integers(0, 12).map(lambda k: k / 2)
    n = draw(st.integers(1, 7))
    its = [
        Item(draw(half), draw(st.integers(1, 8).map(lambda k: k / 2)), draw(half), draw(st.integers(1, 3)))
        for _ in range(n)
    ]
    return its, draw(st.integers(1, 4)), draw(st.integers(0, 40).map(lambda k: k / 2))


@settings(max_examples=300, deadline=None)
@given(_item_sets())
def test_sweep_is_energetic_reasoning_over_every_characteristic_window(case: tuple[list[Item], int, float]) -> None:
    # with every t1 taken (t1_points above their number) the prefix-sum sweep refutes exactly the
    # makespans that some characteristic window refutes (the definition, window by window); the
    # half-µs values keep every sum exact in floating point
    its, capacity, makespan = case
    arr = [np.array([getattr(it, f) for it in its], dtype=float) for f in ("head", "length", "after", "demand")]
    got = sweep_overloaded(*arr, float(capacity), makespan, t1_points=1000)
    assert got == _all_windows_overloaded(its, capacity, makespan)


@settings(max_examples=150, deadline=None)
@given(held_graphs())
def test_sweep_never_refutes_the_brute_force_optimum(g: m.EventGraph) -> None:
    # an optimal schedule exists at makespan opt, so no window can be overloaded there, and the
    # sweep's bound of every capacity set (real µs and whole ticks of 0.5 µs) stays at or below opt
    opt, _best = optimum(g)
    cg = g.compiled()
    pairings = {s: p for s in range(len(cg.sem_names)) if (p := find_pairing(cg, s)) is not None}
    head, tail = cg.heads(), cg.tails()
    for cs in capacity_sets(cg, pairings, cg.dur, cg.succs):
        its = [it for it in _items(cs, head, tail, cg.dur) if it.length > 0 and it.demand > 0]
        if not its:
            continue
        arr = [np.array([getattr(it, f) for it in its], dtype=float) for f in ("head", "length", "after", "demand")]
        for t1_points in (1, 3, 1000):
            assert not sweep_overloaded(*arr, float(cs.capacity), opt, t1_points=t1_points), cs.source
        start = max(energy_bound(its, cs.capacity), 0.5)
        value, _method = sweep_window_bound(its, cs.capacity, start)
        assert value <= opt + 1e-9, (cs.source, value, opt)
        ticks = [Item(2 * it.head, 2 * it.length, 2 * it.after, it.demand) for it in its]
        tick_value, _m = sweep_window_bound(ticks, cs.capacity, max(1.0, float(int(2 * start))), integral=True)
        assert tick_value / 2 <= opt + 1e-9, (cs.source, tick_value, opt)


def test_the_targeted_form_reports_the_joint_class_even_when_it_adds_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the graph of the combined test taken through the targeted form (as if too large for the
    # full adjustment). The leading set is X (8; Y's 6 is below 95% of it), so only a and b are
    # raised: a's tail = 3 (itself) + 1 (j) + 2 (c and d one after the other on Y) = 6 against
    # its longest-path 5, so joint:paths = 0 + 6 = 6; X's energy on the raised tails: 0 + 6 + 3
    # = 9, the optimum. With no set near the top (the longest path leads alone), joint:paths is
    # still reported, at the longest path.
    import moeopt.exact.heads as heads

    monkeypatch.setattr(heads, "adjusted_heads_tails", lambda *_a, **_k: None)
    cg = _combined_graph().compiled()
    got = {b.source: b.value for b in static_bounds(cg, {}, cg.dur, cg.preds, cg.succs)}
    assert got["longest_path"] == pytest.approx(5.0)
    assert got["joint:paths"] == pytest.approx(6.0)
    assert got["joint:resource:c0.X"] == pytest.approx(9.0)
    lone = m.EventGraph()
    lone.add(m.Event("a", resources=["c0.X"], duration_us=1.0))
    lone.add(m.Event("b", resources=["c0.X"], duration_us=1.0))
    lone.add(m.Event("long", duration_us=10.0))
    cg = lone.compiled()
    got = {b.source: b.value for b in static_bounds(cg, {}, cg.dur, cg.preds, cg.succs)}
    # X alone: a and b one after the other, 2; the longest path (long alone) 10 leads, X is far
    # below 95% of it
    assert got["resource:c0.X"] == pytest.approx(2.0)
    assert got["joint:paths"] == pytest.approx(10.0)
