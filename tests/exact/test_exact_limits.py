"""solve_exact's caller-given makespan lower limits and the skip when a static bound proves the hint."""

from __future__ import annotations

import math

import pytest

import moeopt as m
from moeopt.exact.solve import LowerLimitError


def _two_jobs() -> m.EventGraph:
    """Three jobs of 2 µs, each on two of three resources (a: X+Y, b: Y+Z, c: X+Z): every two
    share a resource, so they run one after another and the optimum is 6 µs; the static bounds
    are weaker (longest path 2, each resource's energy 4), so only CP-SAT or a caller's limit
    reaches 6."""
    g = m.EventGraph()
    d = 2.0
    g.add(m.Event("a", duration_us=d, resources=["c0.X", "c0.Y"]))
    g.add(m.Event("b", duration_us=d, resources=["c0.Y", "c0.Z"]))
    g.add(m.Event("c", duration_us=d, resources=["c0.X", "c0.Z"]))
    return g


def test_a_limit_reaching_the_hint_proves_it_without_cpsat():
    g = _two_jobs()
    hint = m.schedule(g)
    assert hint.makespan_us == pytest.approx(6.0)
    x = m.solve_exact(g, 5, hint=hint, makespan_lower_limits={"mine": 6.0}, skip_proven=True)
    assert x.status is m.SolveStatus.OPTIMAL
    assert x.cpsat_status == "NOT_RUN"
    assert x.solve_s == 0.0
    assert x.bound_source == "mine"
    assert x.lower_bound_us == pytest.approx(6.0)
    assert x.bounds_us["mine"] == 6.0
    m.validate_schedule(g, x.schedule)


def test_without_skip_cpsat_runs_and_the_limit_is_reported():
    g = _two_jobs()
    x = m.solve_exact(g, 5, makespan_lower_limits={"mine": 5.5})
    assert x.cpsat_status == "OPTIMAL"
    assert x.lower_bound_us == pytest.approx(6.0)  # CP-SAT's proof, above the caller's 5.5
    assert x.bounds_us["mine"] == 5.5


def test_static_bounds_below_the_hint_do_not_skip():
    x = m.solve_exact(_two_jobs(), 5, skip_proven=True)
    assert x.cpsat_status == "OPTIMAL"  # 4 < 6: CP-SAT had to prove it
    assert x.lower_bound_us == pytest.approx(6.0)


def test_a_limit_above_a_valid_schedule_is_refused():
    g = _two_jobs()
    with pytest.raises(LowerLimitError, match=r"makespan_lower_limits\['mine'\] = 7 µs exceeds the makespan 6"):
        m.solve_exact(g, 5, hint=m.schedule(g), makespan_lower_limits={"mine": 7.0})


@pytest.mark.parametrize("limits", [{"x": -1.0}, {"x": math.nan}, {"x": "5"}, {"": 1.0}, [("x", 1.0)]])
def test_bad_limits_name_the_argument(limits):
    with pytest.raises(m.InputError, match="makespan_lower_limits"):
        m.solve_exact(_two_jobs(), 5, makespan_lower_limits=limits)


def _two_pools_one_set_of_cores() -> m.EventGraph:
    """Pools A and B over the same two cores, two 1 µs events in each, no precedence. Each pool
    alone fits its two events side by side (a bound of 1 µs); together four events need two
    rounds on two cores: the optimum and the shared-pool energy bound are 4 x 1 / 2 = 2 µs."""
    cores = ["c0.X", "c1.X"]
    g = m.EventGraph(pools={"A": cores, "B": cores})
    for k in range(2):
        g.add(m.Event(f"a{k}", resources=["A:*"], duration_us=1.0))
        g.add(m.Event(f"b{k}", resources=["B:*"], duration_us=1.0))
    return g


@pytest.mark.parametrize("mode", ["exact", "relaxed"])
def test_pools_sharing_cores_are_bounded_together(mode):
    g = _two_pools_one_set_of_cores()
    x = m.solve_exact(g, 5, mode=mode, skip_proven=True)
    assert x.bounds_us["pools:A+B"] == pytest.approx(2.0)
    assert x.lower_bound_us == pytest.approx(2.0)
    assert x.status is m.SolveStatus.OPTIMAL
    m.validate_schedule(g, x.schedule)


def _symmetric_cores(fixed_on_core0: bool = False) -> m.EventGraph:
    """Five independent events (3, 3, 2, 2, 2 µs) on a pool of three identical cores. The optimum
    is 5 µs: the bound 12 / 3 = 4 would need three bins of exactly 4, and a 3 µs event cannot
    be topped up to 4 by 2 µs events; {3, 2}, {3, 2}, {2} reaches 5."""
    cores = ["c0.X", "c1.X", "c2.X"]
    g = m.EventGraph(pools={"X": cores})
    for k, d in enumerate((3.0, 3.0, 2.0, 2.0, 2.0)):
        g.add(m.Event(f"e{k}", resources=["X:*"], duration_us=d))
    if fixed_on_core0:
        g.add(m.Event("pinned", resources=["c0.X"], duration_us=1.0))
    return g


@pytest.mark.parametrize("symmetry", [True, False])
def test_symmetry_breaking_keeps_the_optimum(symmetry):
    g = _symmetric_cores()
    x = m.solve_exact(g, 10, mode="exact", symmetry_breaking=symmetry)
    assert x.status is m.SolveStatus.OPTIMAL
    assert x.best_us == pytest.approx(5.0)
    assert x.symmetric_sites == ((3,) if symmetry else ())
    m.validate_schedule(g, x.schedule)
    if symmetry and x.best_source == "cpsat":
        # value precedence: in event order, cores are first used in the order c0, c1, c2
        first_use = []
        for k in range(5):
            (core,) = x.schedule.resources[f"e{k}"]
            if core not in first_use:
                first_use.append(core)
        assert first_use == sorted(first_use)


def test_a_core_with_its_own_fixed_work_is_not_interchangeable():
    """With an event pinned to c0, only c1 and c2 can be swapped (optimum: c0 carries the pinned
    1 µs, so e.g. {3, 2}, {3, 2}, {2, 1} still gives 5)."""
    g = _symmetric_cores(fixed_on_core0=True)
    x = m.solve_exact(g, 10, mode="exact")
    assert x.symmetric_sites == (2,)
    assert x.best_us == pytest.approx(5.0)
    assert x.status is m.SolveStatus.OPTIMAL
