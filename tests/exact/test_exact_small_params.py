"""The CP-SAT parameters ``solve_exact`` adds for the main search of small graphs
(``SMALL_MODEL_PARAMS`` up to ``SMALL_MODEL_EVENTS`` events): set where they apply, never where
they do not, overridden by the caller's, and the answer stays the brute-force optimum."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

import moeopt as m
import moeopt.exact.solve as solve_mod
from moeopt.exact import solve_exact
from tests.exact.brute import optimum
from tests.exact.strategies import held_graphs


def _key() -> str:
    (key,) = solve_mod.SMALL_MODEL_PARAMS  # one parameter today; the test names it once
    return key


@settings(max_examples=20, deadline=None)
@given(held_graphs(max_events=5))
def test_small_graph_parameters_keep_the_brute_force_optimum(g: m.EventGraph) -> None:
    # with and without the small-graph parameters CP-SAT proves the same exhaustive optimum, and
    # the bound is never above it
    opt, _best = optimum(g)
    small = solve_exact(g, 10.0, 1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(solve_mod, "SMALL_MODEL_EVENTS", 0)  # every graph is "large"
        large = solve_exact(g, 10.0, 1)
    assert small.params_used[_key()] == solve_mod.SMALL_MODEL_PARAMS[_key()]
    assert _key() not in large.params_used
    for x in (small, large):
        assert x.lower_bound_us <= opt + 1e-9
        assert x.schedule is not None
        m.validate_schedule(g, x.schedule)
        assert x.proven_optimal
        assert x.best_us == pytest.approx(opt)


def test_the_callers_value_wins() -> None:
    g = m.EventGraph(semaphores={"s": 1})
    for k in range(3):
        g.add(m.Event(f"e{k}", acquires={"s": 1}, releases={"s": 1}, duration_us=1.0 + k))
    mine = not solve_mod.SMALL_MODEL_PARAMS[_key()]
    x = solve_exact(g, 10.0, 1, params={_key(): mine})
    assert x.params_used[_key()] is mine
    assert x.best_us == pytest.approx(6.0)  # one unit: the three in series, 1 + 2 + 3
    assert x.proven_optimal
