"""The real static analysis rounded down onto a grid that rounds durations serves the tick model
(``moeopt.exact.solve.rounded_analysis``) instead of a second analysis on ticks: every value it
gives must hold for the image ``⌊s / tick⌋`` of every real schedule, and the bounds reported
through it must stay below the exhaustive optimum."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

import moeopt as m
import moeopt.exact.model as model_mod
import moeopt.exact.solve as solve_mod
from moeopt.exact import solve_exact
from moeopt.exact.bounds import best_bound, static_analysis
from moeopt.exact.pairing import find_pairing
from moeopt.exact.solve import rounded_analysis
from moeopt.exact.ticks import TimeGrid
from tests.exact.brute import optimum
from tests.exact.strategies import held_graphs

TICK = 1.0
"""A grid coarser than the strategies' 0.5 µs steps: durations and λ of x.5 µs are rounded."""


@settings(max_examples=60, deadline=None)
@given(held_graphs(max_events=5))
def test_rounded_real_analysis_keeps_the_image_of_an_optimal_schedule(g: m.EventGraph) -> None:
    opt, best = optimum(g)
    cg = g.compiled()
    pairings = {s: p for s in range(len(cg.sem_names)) if (p := find_pairing(cg, s)) is not None}
    grid = TimeGrid(TICK, False)
    ticks = rounded_analysis(static_analysis(cg, pairings, cg.dur, cg.preds, cg.succs), grid)
    span = grid.down(opt)
    assert best_bound(ticks.bounds).value <= span
    for i, name in enumerate(cg.names):
        s = grid.down(best.start_us[name])
        assert ticks.head[i] <= s, name
        assert s + ticks.tail[i] <= span, name


@settings(max_examples=40, deadline=None)
@given(held_graphs(max_events=5))
def test_bounds_through_the_rounded_analysis_stay_below_the_optimum(g: m.EventGraph) -> None:
    opt, _best = optimum(g)
    x = solve_exact(g, 10.0, 1, tick_us=TICK)
    assert x.lower_bound_us <= opt + 1e-9
    for source, value in x.bounds_us.items():
        assert value <= opt + 1e-9, source
    if x.best_us is not None:
        assert x.best_us >= opt - 1e-9


def test_a_rounding_grid_runs_one_static_analysis(monkeypatch: pytest.MonkeyPatch) -> None:
    # a -> b on one resource, 1.5 µs each: the 1 µs grid rounds them, so the real analysis runs
    # and the tick model takes its values rounded down; no analysis on ticks is made.
    g = m.EventGraph()
    g.add(m.Event("a", resources=["c0.X"], duration_us=1.5))
    g.add(m.Event("b", resources=["c0.X"], deps={"a": 0.0}, duration_us=1.5))

    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("a second static analysis on ticks")

    monkeypatch.setattr(model_mod, "tick_analysis", refuse)
    monkeypatch.setattr(solve_mod, "tick_analysis", refuse)
    x = solve_exact(g, 10.0, 1, tick_us=TICK)
    assert x.durations_rounded
    assert x.best_us == pytest.approx(3.0)
    # the longest path, 3 µs, reported on real durations; the model's lower end is ⌊3 / 1⌋ = 3
    assert x.bounds_us["longest_path"] == pytest.approx(3.0)
    assert x.lower_bound_us == pytest.approx(3.0)
