"""The bound phase of ``solve_exact``: on small graphs that CP-SAT has not solved after most of its
time, the rest goes to a core-based search from below (``BOUND_PHASE_SHARE``). Its bound must
stay sound (never above the optimum) and must be what lifts the certificate where the default
search leaves its bound at the static one.

The runs below limit CP-SAT by deterministic time (``max_deterministic_time``, applied to each
phase), not by wall time, so that what is searched does not depend on the machine's load.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings

import moeopt as m
import moeopt.exact.solve as solve_mod
from moeopt.exact import solve_exact
from tests.exact.brute import optimum
from tests.exact.strategies import held_graphs

DATA = os.environ.get("MOEOPT_PSPLIB_DIR")


@settings(max_examples=60, deadline=None)
@given(held_graphs(max_events=5))
def test_bound_phase_never_exceeds_the_brute_force_optimum(g: m.EventGraph) -> None:
    # The whole CP-SAT budget goes to the bound phase (share 1: the default search gets no time
    # and stops before it starts), so the core-based search alone answers: its bound is never
    # above the exhaustive optimum, and with the time it has on these small graphs it proves it.
    opt, _best = optimum(g)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(solve_mod, "BOUND_PHASE_SHARE", 1.0)
        x = solve_exact(g, 10.0, 1)
    assert x.params_used.get("optimize_with_core") is True
    assert x.lower_bound_us <= opt + 1e-9
    assert x.schedule is not None
    m.validate_schedule(g, x.schedule)
    assert x.schedule.makespan_us >= opt - 1e-9
    assert x.proven_optimal
    assert x.best_us == pytest.approx(opt)


@pytest.mark.skipif(not DATA, reason="MOEOPT_PSPLIB_DIR is not set (PSPLIB j30 is not shipped)")
def test_bound_phase_lifts_the_bound_of_a_hard_psplib_instance(monkeypatch: pytest.MonkeyPatch) -> None:
    # j3013_2 (proven optimum 62, j30opt.sm row "13 2") is among the hardest j30 instances: with
    # 0.3 units of deterministic time the default search finds 63 but its bound stays within one
    # of the static bounds; searching from below in the same budget refutes makespans above it.
    g = m.load_psplib(Path(DATA or "") / "j30" / "j3013_2.sm")
    opt = m.load_psplib_optima(Path(DATA or "") / "j30_opt.csv")["j3013_2"]
    assert opt == 62
    params = {"max_deterministic_time": 0.3}
    # the core-based search alone (the destructive bound, which takes part of the phase first,
    # has its own test in test_exact_destructive.py)
    monkeypatch.setattr(solve_mod, "DESTRUCTIVE_SHARE", 0.0)
    with_phase = solve_exact(g, 60.0, 1, params=params)
    # a caller who names the search (here CP-SAT's default one) gets one phase, theirs
    theirs = solve_exact(g, 60.0, 1, params={**params, "search_branching": "AUTOMATIC_SEARCH"})
    monkeypatch.setattr(solve_mod, "BOUND_PHASE_EVENTS", 0)
    without = solve_exact(g, 60.0, 1, params=params)
    assert with_phase.params_used.get("optimize_with_core") is True
    assert "optimize_with_core" not in without.params_used
    assert "optimize_with_core" not in theirs.params_used
    assert theirs.lower_bound_us == without.lower_bound_us
    assert without.lower_bound_us < with_phase.lower_bound_us <= opt
    assert with_phase.bound_source == "cpsat"
    static = max(v for k, v in with_phase.bounds_us.items() if k != "cpsat")
    assert with_phase.lower_bound_us > static
    assert with_phase.schedule is not None
    m.validate_schedule(g, with_phase.schedule)
    assert with_phase.schedule.makespan_us >= opt

