"""Where a schedule leaves a capacity unused (moeopt.exact.usage), on hand-derived profiles, and
the line the gap reports print with it."""

from __future__ import annotations

import pytest

import moeopt as m
from moeopt.exact import graph_optimality_gap
from moeopt.exact.usage import PARTS, CapacityUse, capacity_source, capacity_use


def _semaphore_graph() -> m.EventGraph:
    # capacity 2: a takes both units for 2 µs; b (1 µs) and c (2 µs) take one each and wait for a
    # plus 1 µs, so with nothing else to delay them a runs [0, 2), b [3, 4) and c [3, 5)
    g = m.EventGraph(semaphores={"bw": 2})
    g.add(m.Event("a", acquires={"bw": 2}, releases={"bw": 2}, duration_us=2.0))
    g.add(m.Event("b", deps={"a": 1.0}, acquires={"bw": 1}, releases={"bw": 1}, duration_us=1.0))
    g.add(m.Event("c", deps={"a": 1.0}, acquires={"bw": 1}, releases={"bw": 1}, duration_us=2.0))
    return g


def test_semaphore_use_by_hand() -> None:
    g = _semaphore_graph()
    s = m.schedule(g)
    assert (s.start_us["a"], s.start_us["b"], s.start_us["c"]) == (0.0, 3.0, 3.0)
    use = capacity_use(g, s, "semaphore:bw")
    assert use is not None
    # units in use: 2 over [0, 2), 0 over [2, 3), 2 over [3, 4), 1 over [4, 5)
    assert (use.first_us, use.last_us, use.capacity) == (0.0, 5.0, 2)
    # work at full capacity: (2 x 2 + 2 x 1 + 1 x 1) / 2 = 3.5 µs; unused: 5 - 3.5 = 1.5 µs
    assert use.work_us == pytest.approx(3.5)
    assert use.unused_us == pytest.approx(1.5)
    # ten parts of 0.5 µs: [2, 2.5) and [2.5, 3) wholly unused (0.5 each), [4, 4.5) and [4.5, 5)
    # half used (0.25 each), the rest full
    assert len(use.parts) == PARTS
    unused = {(round(a, 6), round(b, 6)): u for a, b, u in use.parts}
    assert unused[(2.0, 2.5)] == pytest.approx(0.5)
    assert unused[(2.5, 3.0)] == pytest.approx(0.5)
    assert unused[(4.0, 4.5)] == pytest.approx(0.25)
    assert unused[(4.5, 5.0)] == pytest.approx(0.25)
    assert sum(use.parts[k][2] for k in (0, 1, 2, 3, 6, 7)) == pytest.approx(0.0)
    # the line names the three parts with most unused capacity, in time order
    line = use.text()
    assert "semaphore:bw (capacity 2) is in use from 0.0 to 5.0 µs: 3.5 µs of work" in line
    assert "1.5 µs of its capacity unused in between (most in 2.0-2.5: 0.5, 2.5-3.0: 0.5, 4.0-4.5" in line
    # the same set behind a joint bound; sources that name no capacity set
    assert capacity_use(g, s, "joint:semaphore:bw") == use
    for source in ("longest_path", "cpsat", "semaphore:nope", "destructive", "pool:AIC"):
        assert capacity_use(g, s, source) is None


def test_pool_use_by_hand() -> None:
    # two cube cores; p (2 µs) and q (1 µs) start at 0 on one core each, r (1 µs) waits for p
    g = m.EventGraph(pools={"AIC": ["c0.AIC", "c1.AIC"]})
    g.add(m.Event("p", resources=["AIC:*"], duration_us=2.0))
    g.add(m.Event("q", resources=["AIC:*"], duration_us=1.0))
    g.add(m.Event("r", resources=["AIC:*"], deps={"p": 0.0}, duration_us=1.0))
    s = m.schedule(g)
    assert (s.start_us["p"], s.start_us["q"], s.start_us["r"]) == (0.0, 0.0, 2.0)
    use = capacity_use(g, s, "pool:AIC")
    assert use is not None
    # members busy: 2 over [0, 1), 1 over [1, 3): work (2 + 2) / 2 = 2 µs of the 3, 1 unused
    assert (use.first_us, use.last_us, use.capacity) == (0.0, 3.0, 2)
    assert use.work_us == pytest.approx(2.0)
    assert use.unused_us == pytest.approx(1.0)
    # one member alone, as a resource of capacity 1: p's member is busy from 0 for p's 2 µs and
    # for r's 1 µs too if r went there (whichever member the greedy picked for r)
    member = s.resources["p"][0]
    one = capacity_use(g, s, f"resource:{member}")
    assert one is not None
    assert (one.capacity, one.first_us) == (1, 0.0)
    assert one.work_us == pytest.approx(2.0 + (1.0 if s.resources["r"] == (member,) else 0.0))


def test_report_lines_of_a_bound_that_is_not_proven() -> None:
    """The trust report's lines for a rank whose certificate is not tight: the bound's
    explanation, then where the best schedule leaves that bound's capacity unused."""
    from dataclasses import replace

    from moeopt.exact import SolveStatus
    from moeopt.trust.gap import RankGap, ScenarioGap, bound_lines

    g = _semaphore_graph()
    rep = graph_optimality_gap(g, time_limit_s=5.0)
    # the optimum is the schedule above (5 µs: the longest path a -> c is 2 + 1 + 2), proven;
    # stood in for here by a result whose semaphore bound (energy: 3.5 of work) was not lifted
    x = replace(
        rep.exact,
        status=SolveStatus.FEASIBLE,
        lower_bound_us=3.5,
        bound_source="semaphore:bw",
        bounds_us={"semaphore:bw": 3.5, "cpsat": 3.0},
    )
    r = RankGap(0, (0,), len(g), "earliest_start", replace(rep, exact=x), {}, 0.0, None, g)  # type: ignore[arg-type]
    sg = ScenarioGap((r,), "earliest_start", ("earliest_start",), 5.0, 1, "exact", 0.0)
    first, second = bound_lines(sg)
    assert first.startswith("rank 0: bound from semaphore:bw")
    assert second == f"rank 0: {capacity_use(g, x.schedule, 'semaphore:bw').text()}"
    assert "1.5 µs of its capacity unused in between" in second
    use = r.binding_use
    assert use is not None
    assert use.to_dict()["unused_us"] == pytest.approx(1.5)
    # proven: no lines at all
    proven = replace(r, report=rep)
    assert bound_lines(replace(sg, ranks=(proven,))) == []


def test_parts_that_round_to_nothing_are_not_named() -> None:
    # round-off leaves 1e-9 µs in one part: the line names only the part with real unused time
    use = CapacityUse("pool:AIC", 2, 0.0, 2.0, 1.5, 0.5, ((0.0, 1.0, 1e-9), (1.0, 2.0, 0.5)))
    assert use.text().endswith("0.5 µs of its capacity unused in between (most in 1.0-2.0: 0.5 µs)")
    # nothing unused at all: no parts named
    none = CapacityUse("pool:AIC", 2, 0.0, 2.0, 2.0, 0.0, ((0.0, 1.0, 0.0), (1.0, 2.0, 0.0)))
    assert none.text().endswith("0.0 µs of its capacity unused in between")


def test_which_capacity_explains_a_certificate() -> None:
    # the winning bound's own capacity set, behind joint: too
    assert capacity_source("semaphore:bw", {}) == "semaphore:bw"
    assert capacity_source("joint:pool:AIC", {}) == "joint:pool:AIC"
    # CP-SAT's bound (or the longest path) wins: the capacity set with the highest bound of its
    # own; the longest path and a caller's physical limit name no capacity set
    bounds = {"cpsat": 10.0, "semaphore:a": 8.0, "resource:x": 9.0, "longest_path": 9.5, "physical:bandwidth(hbm)": 9.9}
    assert capacity_source("cpsat", bounds) == "resource:x"
    assert capacity_source("longest_path", bounds) == "resource:x"
    # ties go to the first name in order; nothing to name: None
    assert capacity_source("cpsat", {"semaphore:b": 8.0, "pool:a": 8.0}) == "pool:a"
    assert capacity_source("cpsat", {"cpsat": 3.0, "longest_path": 2.0}) is None
