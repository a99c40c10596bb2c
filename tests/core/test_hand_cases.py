"""Small graphs whose schedules are derived by hand (derivations in the comments)."""

from __future__ import annotations

import pytest

import moeopt as m
from moeopt.core.events import Event, EventGraph
from moeopt.core.policies import make_policy
from moeopt.testing import naive_schedule


def trace(s: m.Schedule) -> list[tuple[str, float, float, str]]:
    return [(e, round(a, 9), round(b, 9), r) for e, a, b, r in s.trace()]


def test_lambda_delays_the_successor() -> None:
    # A runs [0, 2). B needs A plus λ = 0.5: start = 2 + 0.5 = 2.5, end = 3.5.
    g = m.EventGraph()
    g.add(m.Event("A", resources=["c0.AIC"], duration_us=2.0))
    g.add(m.Event("B", resources=["c1.AIC"], deps={"A": 0.5}, duration_us=1.0))
    s = m.schedule(g)
    assert trace(s) == [("A", 0.0, 2.0, "c0.AIC"), ("B", 2.5, 3.5, "c1.AIC")]
    assert s.waits["B"].kind == "dependency"
    assert s.waits["B"].pred == "A"
    assert s.waits["B"].ready_us == pytest.approx(2.5)


def test_shared_resource_serialises_two_ready_events() -> None:
    # A and B are both ready at 0 on c0.AIC and could both start at 0: the tie goes to the
    # first added (A, [0, 3)); B then waits for the resource: [3, 5).
    g = m.EventGraph()
    g.add(m.Event("A", resources=["c0.AIC"], duration_us=3.0))
    g.add(m.Event("B", resources=["c0.AIC"], duration_us=2.0))
    s = m.schedule(g)
    assert trace(s) == [("A", 0.0, 3.0, "c0.AIC"), ("B", 3.0, 5.0, "c0.AIC")]
    assert s.waits["B"].kind == "resource"
    assert s.waits["B"].resource == "c0.AIC"
    assert s.waits["B"].resource_wait_us == pytest.approx(3.0)


def test_pool_binds_to_the_member_giving_the_earliest_start() -> None:
    # X is pinned on c0.AIC for [0, 4). Y (AIC:*) could start at 4 on c0 or at 0 on c1 -> c1,
    # [0, 1). Z (AIC:*): c0 frees at 4, c1 at 1 -> c1, [1, 2). W (AIC:*, needs Z, so ready at
    # 2): c0 frees at 4, c1 at 2 -> c1 at 2. V (AIC:*, ready at 5 after a 5 µs predecessor):
    # both members are free by 5 -> the tie goes to the first pool member, c0.
    g = m.EventGraph(pools={"AIC": ["c0.AIC", "c1.AIC"]})
    g.add(m.Event("X", resources=["c0.AIC"], duration_us=4.0))
    g.add(m.Event("Y", resources=["AIC:*"], duration_us=1.0))
    g.add(m.Event("Z", resources=["AIC:*"], duration_us=1.0))
    g.add(m.Event("W", resources=["AIC:*"], deps={"Z": 0.0}, duration_us=1.0))
    g.add(m.Event("P", resources=["c9.AIV"], duration_us=5.0))
    g.add(m.Event("V", resources=["AIC:*"], deps={"P": 0.0}, duration_us=1.0))
    s = m.schedule(g)
    assert s.binding["Y"] == "c1.AIC"
    assert (s.start_us["Y"], s.start_us["Z"], s.start_us["W"]) == (0.0, 1.0, 2.0)
    assert s.binding["Z"] == "c1.AIC"
    assert s.binding["W"] == "c1.AIC"
    assert s.binding["V"] == "c0.AIC"
    assert s.start_us["V"] == 5.0


def test_colocation_forces_a_later_start() -> None:
    # mm binds to c0.AIC at 0 ([0, 2); both AIC members are free, first member wins).
    # act must share mm's core: c0.AIV is busy with the pinned blocker until 5, so act starts
    # at 5 although c1.AIV is free from 0. Without colocation it would start at 2 on c1.AIV.
    def build(colocate: bool) -> m.EventGraph:
        g = m.EventGraph(pools={"AIC": ["c0.AIC", "c1.AIC"], "AIV": ["c0.AIV", "c1.AIV"]})
        g.add(m.Event("blocker", resources=["c0.AIV"], duration_us=5.0))
        g.add(m.Event("mm", resources=["AIC:*"], duration_us=2.0))
        g.add(
            m.Event(
                "act",
                resources=["AIV:*"],
                deps={"mm": 0.0},
                colocate_with="mm" if colocate else None,
                duration_us=1.0,
            )
        )
        return g

    s = m.schedule(build(True))
    assert s.binding["mm"] == "c0.AIC"
    assert (s.start_us["act"], s.binding["act"]) == (5.0, "c0.AIV")
    assert s.waits["act"].kind == "resource"
    s_free = m.schedule(build(False))
    assert (s_free.start_us["act"], s_free.binding["act"]) == (2.0, "c1.AIV")


def test_capacity_one_semaphore_serialises_producer_consumer_pairs() -> None:
    # slot has one unit. P1 takes it at 0 ([0, 1)); C1 gives it back at its end.
    # P2 is ready at 0 but its unit is taken for ever as long as C1 is not committed; C1
    # (ready at 1) commits [1, 3) and releases at 3, so P2 is admitted at 3: [3, 4); C2 [4, 6).
    g = m.EventGraph(semaphores={"slot": 1})
    g.add(m.Event("P1", resources=["c0.AIC"], acquires={"slot": 1}, duration_us=1.0))
    g.add(m.Event("C1", resources=["c0.AIV"], deps={"P1": 0.0}, releases={"slot": 1}, duration_us=2.0))
    g.add(m.Event("P2", resources=["c1.AIC"], acquires={"slot": 1}, duration_us=1.0))
    g.add(m.Event("C2", resources=["c1.AIV"], deps={"P2": 0.0}, releases={"slot": 1}, duration_us=2.0))
    s = m.schedule(g)
    assert trace(s) == [
        ("P1", 0.0, 1.0, "c0.AIC"),
        ("C1", 1.0, 3.0, "c0.AIV"),
        ("P2", 3.0, 4.0, "c1.AIC"),
        ("C2", 4.0, 6.0, "c1.AIV"),
    ]
    assert s.waits["P2"].semaphore == "slot"
    assert s.waits["P2"].semaphore_wait_us == pytest.approx(3.0)
    m.validate_schedule(g, s)


def test_release_committed_later_lowers_an_earlier_blocked_start() -> None:
    # s has 2 units. A1 takes one at 0 for ever (R gives it back). X [0, 5) and Q [0, 5.5) are
    # plain predecessors. H holds one unit over [5, 7) (taken and given back by itself).
    # Commit order by start: A1, X, Q (all 0), then H at 5. W (holds 1 unit for 6 µs, ready at
    # 5.5) now sees 0 free units on [5, 7): its earliest window starts at 7. R (ready 1 + λ 5
    # = 6) starts before 7, so it commits first, over [6, 6.5), and gives A1's unit back at
    # 6.5. W's window [6.5, 12.5) now fits (1 free on [6.5, 7), 2 after): W starts at 6.5,
    # earlier than the 7 it was blocked to before R's release was committed.
    g = m.EventGraph(semaphores={"s": 2})
    g.add(m.Event("A1", resources=["c0.a"], acquires={"s": 1}, duration_us=1.0))
    g.add(m.Event("X", resources=["c1.a"], duration_us=5.0))
    g.add(m.Event("Q", resources=["c2.a"], duration_us=5.5))
    g.add(m.Event("H", resources=["c3.a"], deps={"X": 0.0}, acquires={"s": 1}, releases={"s": 1}, duration_us=2.0))
    g.add(m.Event("W", resources=["c4.a"], deps={"Q": 0.0}, acquires={"s": 1}, releases={"s": 1}, duration_us=6.0))
    g.add(m.Event("R", resources=["c5.a"], deps={"A1": 5.0}, releases={"s": 1}, duration_us=0.5))
    s = m.schedule(g)
    assert s.start_us["H"] == 5.0
    assert s.start_us["R"] == 6.0
    assert s.start_us["W"] == pytest.approx(6.5)
    assert s.order.index("R") < s.order.index("W")
    assert s.waits["W"].semaphore == "s"
    assert s.waits["W"].semaphore_wait_us == pytest.approx(1.0)
    m.validate_schedule(g, s)


def _graham(durations: list[float]) -> m.EventGraph:
    # Graham's (1969) instance: 9 tasks on 3 identical processors, T1 < T9 and T4 < T5..T8.
    g = m.EventGraph(pools={"P": ["p0.P", "p1.P", "p2.P"]})
    deps = {9: [1], 5: [4], 6: [4], 7: [4], 8: [4]}
    for k in range(1, 10):
        g.add(
            m.Event(
                f"T{k}",
                resources=["P:*"],
                deps={f"T{p}": 0.0 for p in deps.get(k, [])},
                duration_us=durations[k - 1],
            )
        )
    return g


def test_graham_anomaly_shorter_durations_give_a_longer_makespan() -> None:
    # Durations 3,2,2,2,4,4,4,4,9: T1 [0,3) p0, T2 [0,2) p1, T3 [0,2) p2, T4 [2,4) p1,
    # T9 [3,12) p0 (ready at 3, before T5..T8 which wait for T4), T5 [4,8), T6 [4,8),
    # T7 [8,12), T8 [8,12): makespan 12.
    # Every duration one shorter (2,1,1,1,3,3,3,3,8): T1 [0,2), T2 [0,1), T3 [0,1), T4 [1,2);
    # now T5..T9 are all ready at 2 and T5..T7 (added first) take the three processors for
    # [2,5), T8 [5,8), and T9 only starts at 5: [5,13) -> makespan 13 > 12.
    long = m.schedule(_graham([3, 2, 2, 2, 4, 4, 4, 4, 9]))
    short = m.schedule(_graham([2, 1, 1, 1, 3, 3, 3, 3, 8]))
    assert long.makespan_us == 12.0
    assert long.start_us["T9"] == 3.0
    assert short.makespan_us == 13.0
    assert short.start_us["T9"] == 5.0


def test_zero_duration_hold_needs_only_its_net_units() -> None:
    # The semaphore is empty from 0 on (T takes its only unit for ever). Z takes and gives
    # back one unit at the same instant (zero duration): the level after every change at that
    # instant is unchanged, so Z is admitted at 0 (validator rule: free units within [0, cap]
    # after all changes at an instant).
    g = m.EventGraph(semaphores={"s": 1})
    g.add(m.Event("T", resources=["c0.a"], acquires={"s": 1}, duration_us=1.0))
    g.add(m.Event("Z", resources=["c1.a"], acquires={"s": 1}, releases={"s": 1}, duration_us=0.0))
    s = m.schedule(g)
    assert s.start_us["Z"] == 0.0
    m.validate_schedule(g, s)


def test_units_never_given_back_are_a_clear_deadlock() -> None:
    g = m.EventGraph(semaphores={"s": 1})
    g.add(m.Event("A", resources=["c0.a"], acquires={"s": 1}, duration_us=1.0))
    g.add(m.Event("B", resources=["c1.a"], acquires={"s": 1}, duration_us=1.0))
    with pytest.raises(m.SchedulingError, match=r"deadlock.*'B' waits on s"):
        m.schedule(g)


def test_release_above_capacity_fails_loudly() -> None:
    # R gives back a unit that nobody scheduled before it took: free units would exceed 1.
    g = m.EventGraph(semaphores={"s": 1})
    g.add(m.Event("R", resources=["c0.a"], releases={"s": 1}, duration_us=1.0))
    g.add(m.Event("A", resources=["c1.a"], deps={"R": 0.0}, acquires={"s": 1}, duration_us=1.0))
    with pytest.raises(m.SchedulingError, match=r"'R' releases 1 unit\(s\) of semaphore 's'.*above the capacity"):
        m.schedule(g, normalize=False)


def test_pool_tie_after_semaphore_delay_goes_to_the_first_member() -> None:
    # Pool order [c0, c1]. Y keeps c0 busy until 2, X keeps c1 busy until 1, B holds the only
    # unit of s over [0, 3). E (one of the pool, holds a unit of s) could start at 1 on c1 as far
    # as resources go, but s admits it only at 3; at 3 both members are free, so both give the
    # same start and the tie goes to the first member of the pool, c0.
    g = m.EventGraph(semaphores={"s": 1}, pools={"P": ["c0.P", "c1.P"]})
    g.add(m.Event("X", resources=["c1.P"], duration_us=1.0))
    g.add(m.Event("Y", resources=["c0.P"], duration_us=2.0))
    g.add(m.Event("B", resources=["c9.Q"], acquires={"s": 1}, releases={"s": 1}, duration_us=3.0))
    g.add(m.Event("E", resources=["P:*"], acquires={"s": 1}, releases={"s": 1}, duration_us=1.0))
    s = m.schedule(g)
    assert (s.start_us["E"], s.binding["E"]) == (3.0, "c0.P")
    assert s.waits["E"].resource == "c1.P"
    assert s.waits["E"].resource_wait_us == 1.0
    assert s.waits["E"].semaphore_wait_us == 2.0


def site_change_graph() -> EventGraph:
    """A colocated event whose group has no site yet waits for one site's members, and another
    site frees up first (pool b: two members on c0 and two on c1; g and k: one on each). m has
    two placeholders (b and k), so it is bound at its group's best site for now."""
    g = EventGraph(
        pools={"b": ["c0.b", "c0.bb", "c1.b", "c1.bb"], "g": ["c0.g", "c1.g"], "k": ["c0.k", "c1.k"]}
    )
    g.add(Event("x0", resources=["c1.b"], duration_us=5.0))
    g.add(Event("x1", resources=["c1.bb"], duration_us=5.0))
    g.add(Event("z", resources=["c0.b"], duration_us=1.0))
    g.add(Event("z2", resources=["c0.bb"], duration_us=1.0))
    g.add(Event("q", resources=["c0.b"], duration_us=10.0))
    g.add(Event("q2", resources=["c0.bb"], duration_us=10.0))
    g.add(Event("hr", resources=["c0.h"], duration_us=0.5))
    g.add(Event("r", resources=["b:*"], colocate_with="hr", duration_us=1.0))
    g.add(Event("m", resources=["b:*", "k:*"], duration_us=2.0))
    g.add(Event("hm", resources=["g:*"], deps={"m": 0.0}, colocate_with="m", duration_us=0.5))
    g.add(Event("w", resources=["c1.b"], deps={"x0": 1.0}, duration_us=3.0))
    g.add(Event("w2", resources=["c1.bb"], deps={"x1": 1.0}, duration_us=3.0))
    return g


# earliest_start on site_change_graph, ties by index:
# * x0, x1 hold c1's members over [0, 5); z, z2 hold c0's over [0, 1), and q, q2 then hold them
#   over [1, 11). hr fixes r's group on c0 at once.
# * At 1, r (group on c0) and m (no site yet: c0 at 1 beats c1 at 5) both wait for c0.
# * q and q2 commit at 1, so c0 is busy to 11: r can start at 11 only, and m's best site is now
#   c1 at 5 (k's members are free all along). m starts at 5 on c1.b and c1.k (the first members
#   free by then), which fixes its group on c1.
# * w2 (ready 6 = x1's end + 1) finds c1.bb free and starts at 6. hm (ready 7 after m) and w
#   (ready 6, c1.b busy to 7) can both start at 7: hm first by index. r starts at 11.
SITE_CHANGE_STARTS = {
    "x0": 0.0, "x1": 0.0, "z": 0.0, "z2": 0.0, "q": 1.0, "q2": 1.0, "hr": 0.0,
    "r": 11.0, "m": 5.0, "hm": 7.0, "w": 7.0, "w2": 6.0,
}  # fmt: skip


def test_an_event_whose_site_may_change_is_not_held_to_one_sites_members() -> None:
    """The scheduler once parked m in the gate of c0's members behind r (its best site when it
    was first evaluated): the gate's key, r's start at 11, then stood for m too, so w and w2
    took c1 at 6 and m started at 9 instead of 5. The naive scheduler agrees with the
    derivation under earliest_start, and with the scheduler under every keyed policy."""
    g = site_change_graph()
    s = m.schedule(g, "earliest_start", normalize=False)
    assert dict(s.start_us) == SITE_CHANGE_STARTS
    assert s.resources["m"] == ("c1.b", "c1.k")
    assert {k: v[0] for k, v in naive_schedule(g, make_policy("earliest_start")).items()} == SITE_CHANGE_STARTS
    for policy in ("earliest_start", "critical_path_first", "work_conserving_critical_path", "priority_by_stage"):
        ref = naive_schedule(g, make_policy(policy))
        got = m.schedule(g, policy, normalize=False)
        assert {k: (got.start_us[k], got.resources[k]) for k in ref} == {k: (v[0], v[2]) for k, v in ref.items()}


def several_placeholders_graph() -> EventGraph:
    """e has two placeholders (a and b) and a group with no site yet (p, colocated with it,
    depends on it); s has one unit, which y holds over [0, 2)."""
    g = EventGraph(semaphores={"s": 1}, pools={"a": ["c0.a", "c1.a"], "b": ["c0.b", "c1.b"]})
    g.add(Event("y", resources=["c5.z"], acquires={"s": 1}, releases={"s": 1}, duration_us=2.0))
    g.add(Event("x", resources=["c0.a"], duration_us=1.0))
    g.add(Event("e", resources=["a:*", "b:*"], acquires={"s": 1}, releases={"s": 1}, duration_us=1.0))
    g.add(Event("p", resources=["a:*"], deps={"e": 0.0}, colocate_with="e", duration_us=1.0))
    return g


def test_several_placeholders_bind_at_the_site_whose_members_come_first() -> None:
    """Hand-derived, earliest_start: y holds s over [0, 2) and x holds c0.a over [0, 1). e's
    earliest t_base is 0 at c1 (c0.a is busy to 1), but s admits it only at 2, when both sites
    are free: every binding free by 2 gives the start 2, and the tie rule (the lowest index)
    takes the members first in their pools, c0.a and c0.b. (The scheduler once kept the site of
    the earliest t_base, c1.) p follows on e's site: c0.a at 3. The naive scheduler agrees."""
    g = several_placeholders_graph()
    s = m.schedule(g, "earliest_start", normalize=False)
    assert dict(s.start_us) == {"y": 0.0, "x": 0.0, "e": 2.0, "p": 3.0}
    assert dict(s.resources) == {"y": ("c5.z",), "x": ("c0.a",), "e": ("c0.a", "c0.b"), "p": ("c0.a",)}
    ref = naive_schedule(g, make_policy("earliest_start"))
    assert {k: (v[0], v[2]) for k, v in ref.items()} == {k: (s.start_us[k], s.resources[k]) for k in ref}
