"""The scheduler's inline evaluation and commit treat an event's fixed resources and chosen pool
members one way when there is exactly one and another (a loop) when there are several, and skip
them when there are none: events of two fixed resources and of two placeholders must mark and
read every one of them (times derived by hand in the comments, and checked against the naive
scheduler too)."""

from __future__ import annotations

import moeopt as m
from moeopt.core.policies import make_policy
from moeopt.testing import naive_schedule


def _check_naive(g: m.EventGraph, s: m.Schedule) -> None:
    for name, (start, end, bound) in naive_schedule(g, make_policy("earliest_start")).items():
        assert (s.start_us[name], s.end_us[name], s.resources[name]) == (start, end, bound), name


def test_an_event_on_two_fixed_resources_holds_and_waits_for_both() -> None:
    # A holds c0.AIC and c0.AIV over [0, 3) (first added: it wins the tie at 0). B needs c0.AIC
    # alone: [3, 4); C needs c0.AIV alone: [3, 4) (each waits for the resource A held: both
    # are marked busy until 3). D needs c1.AIC and c0.AIC: c1.AIC is free at 0, c0.AIC at 4
    # (after B) -> [4, 5): the second of its two resources sets its start
    g = m.EventGraph()
    g.add(m.Event("A", resources=["c0.AIC", "c0.AIV"], duration_us=3.0))
    g.add(m.Event("B", resources=["c0.AIC"], duration_us=1.0))
    g.add(m.Event("C", resources=["c0.AIV"], duration_us=1.0))
    g.add(m.Event("D", resources=["c1.AIC", "c0.AIC"], duration_us=1.0))
    s = m.schedule(g)
    assert (s.start_us["B"], s.start_us["C"], s.start_us["D"]) == (3.0, 3.0, 4.0)
    _check_naive(g, s)


def test_an_event_on_two_placeholders_marks_both_members_busy() -> None:
    # X binds AIC:* and AIV:* at 0 to the first members, c0.AIC and c0.AIV, for [0, 2). Y and
    # Z, ready at 0 with one placeholder each, find c0 busy until 2 and c1 free: both go to
    # c1 at 0 (had X marked only one of its members, the other would have taken c0 at 0).
    # W needs a fixed c1.AIC and AIV:*: c1.AIC is free at 1 (after Y), AIV members at 2 (c0,
    # after X) and 1 (c1, after Z) -> c1.AIV at 1
    pools = {"AIC": ["c0.AIC", "c1.AIC"], "AIV": ["c0.AIV", "c1.AIV"]}
    g = m.EventGraph(pools=pools)
    g.add(m.Event("X", resources=["AIC:*", "AIV:*"], duration_us=2.0))
    g.add(m.Event("Y", resources=["AIC:*"], duration_us=1.0))
    g.add(m.Event("Z", resources=["AIV:*"], duration_us=1.0))
    g.add(m.Event("W", resources=["c1.AIC", "AIV:*"], duration_us=1.0))
    s = m.schedule(g)
    assert s.resources["X"] == ("c0.AIC", "c0.AIV")
    assert (s.binding["Y"], s.binding["Z"]) == ("c1.AIC", "c1.AIV")
    assert (s.start_us["Y"], s.start_us["Z"]) == (0.0, 0.0)
    assert s.start_us["W"] == 1.0
    assert s.resources["W"] == ("c1.AIC", "c1.AIV")
    _check_naive(g, s)


def test_evaluate_reads_every_fixed_resource_of_an_acquiring_pooled_event() -> None:
    # Events with acquires and a placeholder go through SchedulerState.evaluate (not the inline
    # evaluation); s has one unit, so it binds (normalisation keeps it). A holds c0.AIC and
    # c0.AIV over [0, 3). V (c1.AIV, c0.AIV and AIC:*, holding s over its run): c1.AIV is free
    # at 0, c0.AIV at 3 -> t_base 3, set by the second of its fixed resources; AIC:* has c2
    # free -> [3, 4) on c2.AIC. U (c0.AIC and AIC:*, holding s): c0.AIC is free at 3 -> t_base
    # 3; s is held by V until 4 -> [4, 5), on the first member free by 4, c2.AIC (had either
    # fixed resource been skipped, V would start at 0, or U at 0 before V takes s)
    g = m.EventGraph(pools={"AIC": ["c2.AIC", "c3.AIC"]}, semaphores={"s": 1})
    g.add(m.Event("A", resources=["c0.AIC", "c0.AIV"], duration_us=3.0))
    for name, res in (("V", ["c1.AIV", "c0.AIV", "AIC:*"]), ("U", ["c0.AIC", "AIC:*"])):
        g.add(m.Event(name, resources=res, acquires={"s": 1}, releases={"s": 1}, duration_us=1.0))
    s = m.schedule(g)
    assert (s.start_us["V"], s.start_us["U"]) == (3.0, 4.0)
    assert s.resources["V"] == ("c1.AIV", "c0.AIV", "c2.AIC")
    assert s.resources["U"] == ("c0.AIC", "c2.AIC")
    _check_naive(g, s)
