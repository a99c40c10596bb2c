"""The window search on the CP-SAT model (:mod:`moeopt.exact.neighbourhood`): what it returns is a
valid schedule never worse than the one given, and it finds what a window can fix."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from ortools.sat.python import cp_model

import moeopt as m
from moeopt.core.schedule import Schedule
from moeopt.exact import solve_exact
from moeopt.exact.improve import ListPolicy
from moeopt.exact.model import ExactModel, semaphore_models, tick_instance
from moeopt.exact.neighbourhood import WindowSearch
from moeopt.exact.solve import _grid
from tests.exact.strategies import held_graphs


def _search(g: m.EventGraph, hint: Schedule, events: int, step: int = 1) -> WindowSearch:
    """A window search on the exact-mode model of ``g`` with ``hint``'s horizon (as
    :func:`moeopt.solve_exact` builds it), windows of ``events`` events."""
    cg = g.compiled()
    pairings, sem_model = semaphore_models(cg)
    grid = _grid(cg, hint, None)
    inst = tick_instance(cg, grid, "exact", grid.down(hint.makespan_us), pairings, sem_model, 10_000)
    model = ExactModel(inst)

    def make(seconds: float) -> cp_model.CpSolver:
        s = cp_model.CpSolver()
        s.parameters.num_workers = 1
        s.parameters.max_time_in_seconds = seconds
        return s

    return WindowSearch(model, g, make, window_events=events, window_step=step, window_limit_s=1.0)


@settings(max_examples=40, deadline=None)
@given(held_graphs())
def test_window_search_returns_a_valid_schedule_never_worse(g: m.EventGraph) -> None:
    for policy in ("earliest_start", "critical_path_first"):
        start = m.schedule(g, policy)
        for events in (1, 2, 3):
            got = _search(g, start, events).run(start, time.perf_counter() + 5.0)
            m.validate_schedule(g, got)
            assert got.makespan_us <= start.makespan_us + 1e-9


def _trap() -> m.EventGraph:
    """``a`` (2 µs on core A) beside the chain ``x`` (1 µs on A) -> ``y`` (5 µs on core B)."""
    g = m.EventGraph()
    g.add(m.Event("a", resources=["c0.A"], duration_us=2.0))
    g.add(m.Event("x", resources=["c0.A"], duration_us=1.0))
    g.add(m.Event("y", resources=["c0.B"], deps={"x": 0.0}, duration_us=5.0))
    return g


def test_a_window_fixes_a_list_schedule_that_puts_the_short_chain_last() -> None:
    # The list schedule with a first: a [0, 2), x [2, 3), y [3, 8): makespan 8. The chain x -> y
    # takes 6 whatever the order, so 6 is optimal: x [0, 1), y [1, 6), a [1, 3).
    g = _trap()
    poor = m.schedule(g, ListPolicy([0.0, 1.0, 2.0]), normalize=False)
    assert poor.makespan_us == pytest.approx(8.0)
    # Windows of two events in start order (a, x, y): from the end, {x, y} first, with a held at
    # [0, 2): x cannot start before 2, so no gain, and CP-SAT proves it. Then {a, x}, y after
    # them free to shift: the window puts x first and y follows at 1.
    search = _search(g, poor, 2)
    got = search.run(poor, time.perf_counter() + 10.0)
    m.validate_schedule(g, got)
    assert got.makespan_us == pytest.approx(6.0)
    assert (got.start_us["x"], got.start_us["y"], got.start_us["a"]) == (0.0, 1.0, 1.0)
    assert search.stats.improved == 1
    # from the optimum every window is proven without gain: the search stops long before its
    # deadline
    again = _search(g, got, 2)
    t0 = time.perf_counter()
    assert again.run(got, t0 + 60.0).makespan_us == pytest.approx(6.0)
    assert time.perf_counter() - t0 < 30.0
    assert again.stats.improved == 0
    assert again.stats.proven == again.stats.windows
    # One event at a time: {y} (a and x held at [0, 2), [2, 3)) gains nothing, and CP-SAT proves
    # it; {a} alone fixes the schedule too: a moves behind x, and x, y (their order kept) shift
    # to 0 and 1.
    one = _search(g, poor, 1)
    assert one._window(poor, 2, 1.0) == (None, True)
    alone, _proven = one._window(poor, 0, 1.0)
    assert alone is not None
    assert alone.makespan_us == pytest.approx(6.0)


def test_the_order_after_the_window_is_kept_through_a_semaphore() -> None:
    # Two events u, v each holding all 2 units of S for 1 µs, in the order v [0, 1), u [1, 2),
    # then w (1 µs, after u). A window holding only w cannot move u before v: u and v keep
    # their order (the flow hands S's units from v to u), and nothing improves; the result is
    # still the valid schedule given.
    g = m.EventGraph(semaphores={"S": 2})
    g.add(m.Event("u", acquires={"S": 2}, releases={"S": 2}, duration_us=1.0))
    g.add(m.Event("v", acquires={"S": 2}, releases={"S": 2}, duration_us=1.0))
    g.add(m.Event("w", deps={"u": 0.0}, duration_us=1.0))
    given_ = m.schedule(g, ListPolicy([1.0, 0.0, 2.0]), normalize=False)
    assert (given_.start_us["v"], given_.start_us["u"], given_.makespan_us) == (0.0, 1.0, 3.0)
    search = _search(g, given_, 1)
    got = search._window(given_, 2, 1.0)  # the window {w}
    assert got == (None, True)
    # a window holding u and v swaps them: u [0, 1), w [1, 2), v [1, 2): makespan 2
    better, _proven = search._window(given_, 0, 1.0)
    assert better is not None
    m.validate_schedule(g, better)
    assert better.makespan_us == pytest.approx(2.0)


def test_solve_exact_runs_the_window_search_within_its_limit() -> None:
    g = _trap()
    poor = m.schedule(g, ListPolicy([0.0, 1.0, 2.0]), normalize=False)
    t0 = time.perf_counter()
    x = solve_exact(g, 3.0, 1, hint=poor, improve_share=0.0, window_share=0.5)
    # the limit is the whole call's, window search included; the margin is for a loaded
    # machine (model building and the replay run outside CP-SAT's own clock)
    assert time.perf_counter() - t0 < 3.0 + 3.0
    assert x.best_us == pytest.approx(6.0)
    assert x.proven_optimal
    assert x.best_source in ("window", "cpsat")
    with pytest.raises(m.InputError, match=r"window_share must be a number in \[0, 1\), got 1.5"):
        solve_exact(g, 3.0, 1, window_share=1.5)
