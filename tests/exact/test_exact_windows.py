"""Energetic reasoning on windows (:mod:`moeopt.exact.windows`): hand cases. Its soundness on random
graphs is checked against the exhaustive optimum with every other static bound in
test_exact_packing.py."""

from __future__ import annotations

import pytest

import moeopt as m
from moeopt.exact import solve_exact
from moeopt.exact.bounds import Item, energy_bound, static_bounds
from moeopt.exact.windows import window_bound


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
