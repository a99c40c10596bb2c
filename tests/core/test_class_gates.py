"""The scheduler's class gates (``gate_cls`` in ``moeopt.core.scheduler._run_keyed``) against the
naive scheduler.

An event that semaphores alone delay and that has no other waiter of its acquire signature
waits in one gate per class: the acquire triple of the semaphore that moved it last, its
duration and its ``before`` rank. Members of a class may differ in every other acquire (a slot
per lane, as the loads of tiles on a rolling core cursor each have the slot of their core), so
the class's key is a lower bound computed from the shared semaphore alone, and members are
evaluated only when it lands on them. The graphs here are made of such waiters: lanes of
chained events, each holding some units of a shared bandwidth semaphore and a slot of its own
lane (given back by a consumer on the lane), with a few durations and unit counts so that
classes gather members of different signatures; some events give units of the bandwidth back
beyond what they took (releases that wake a class and restart its bound) or keep units for a
while (a class that no time admits until a release). Every keyed policy must give the naive
scheduler's schedule event for event.
"""

from __future__ import annotations

from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import moeopt as m
from moeopt.core import semaphores
from moeopt.core.events import Event, EventGraph
from moeopt.core.policies import make_policy
from moeopt.testing import naive_schedule
from tests.core.test_semaphore_waiters import _check_against_naive


@st.composite
def shared_bandwidth_graphs(draw: st.DrawFn) -> EventGraph:
    cap = draw(st.integers(2, 5))
    lanes = draw(st.integers(3, 8))
    sems = {"bw": cap}
    sems.update({f"slot{k}": draw(st.integers(1, 2)) for k in range(lanes)})
    g = EventGraph(semaphores=sems, pools={"v": ["c0.v", "c1.v"]})
    g.add(Event("src", resources=["c0.s"], duration_us=draw(st.sampled_from([0.0, 1.0]))))
    last: dict[int, str] = {}
    borrowed: list[str] = []
    n = draw(st.integers(3, 22))
    durations = draw(st.sampled_from([[1.0, 2.0], [1.0, 2.0, 3.5], [2.0]]))
    for k in range(n):
        lane = draw(st.integers(0, lanes - 1))
        name = f"ld{k}"
        deps = {last[lane]: draw(st.sampled_from([0.0, 0.5]))} if lane in last and draw(st.booleans()) else {}
        if draw(st.sampled_from([True, True, False])):
            deps["src"] = draw(st.sampled_from([0.0, 0.0, 1.5]))
        units = draw(st.integers(1, min(cap, 2)) if draw(st.booleans()) else st.integers(1, cap))
        mode = draw(st.sampled_from(["hold", "hold", "hold", "keep", "give"]))
        acquires = {"bw": units, f"slot{lane}": 1}
        releases = {"bw": units} if mode == "hold" else {}
        if mode == "give" and borrowed:
            # gives back the units an earlier event kept (beyond what it took itself: a release
            # that can bring waiting starts forward)
            prev = borrowed.pop(0)
            deps.setdefault(prev, 0.0)
            releases = {"bw": units + 1}
        elif mode == "give":
            releases = {"bw": units}
        g.add(
            Event(
                name,
                deps=deps,
                acquires=acquires,
                releases=releases,
                duration_us=draw(st.sampled_from(durations)),
            )
        )
        if mode == "keep":
            borrowed.append(name)
        last[lane] = name
        # the lane's consumer gives the slot back; on a pool member or a fixed core
        g.add(
            Event(
                f"use{k}",
                resources=draw(st.sampled_from([["v:*"], [f"c{lane}.u"]])),
                deps={name: 0.0},
                releases={f"slot{lane}": 1},
                duration_us=draw(st.sampled_from([0.5, 2.0, 4.0])),
            )
        )
    # units still kept: given back at the end, so that every schedule can finish
    for k, prev in enumerate(borrowed):
        g.add(Event(f"ret{k}", deps={prev: 1.0}, releases={"bw": 1}, duration_us=0.5))
    return g


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=shared_bandwidth_graphs(), tiny_blocks=st.booleans())
def test_class_gates_schedule_as_the_naive_scheduler_does(g: EventGraph, tiny_blocks: bool) -> None:
    with (
        mock.patch.object(semaphores, "B", 2 if tiny_blocks else semaphores.B),
        mock.patch.object(semaphores, "_FLAT", 2 if tiny_blocks else semaphores._FLAT),
    ):
        _check_against_naive(g)


def test_a_release_before_a_class_bound_brings_its_member_forward() -> None:
    """A class's bound computed before a release must not hold its member back after it.

    ``bw`` has 3 units. K keeps 1 from t=0 (given back by Y), H1 holds 2 over [0, 2): the level
    is 0 over [0, 2). X (2 units for 3 us) and A (1 unit for 1 us) both start at 2 at the
    earliest; X is first on the tie and holds 2 over [2, 5), so 0 units stay free until 5 and
    A's class bound becomes 5. Y (ready 2 + 0.5) gives K's unit back at 3: 1 unit is free over
    [3, 5), so A starts at 3 and holds it until 4. Z (ready 3 + 0.5, 1 unit for 2 us) then
    finds no unit before A's end: it starts at 4. Had A's bound stayed at 5, Z would have
    taken the unit at 3.5 and A would have waited until 5.5.
    """
    g = EventGraph(semaphores={"bw": 3})
    g.add(Event("K", acquires={"bw": 1}, duration_us=0.5))
    g.add(Event("H1", acquires={"bw": 2}, releases={"bw": 2}, duration_us=2.0))
    g.add(Event("X", acquires={"bw": 2}, releases={"bw": 2}, duration_us=3.0))
    g.add(Event("A", acquires={"bw": 1}, releases={"bw": 1}, duration_us=1.0))
    g.add(Event("Y", deps={"H1": 0.5, "K": 0.0}, releases={"bw": 1}, duration_us=0.5))
    g.add(Event("Z", deps={"Y": 0.5}, acquires={"bw": 1}, releases={"bw": 1}, duration_us=2.0))
    s = m.schedule(g)
    assert (s.start_us["X"], s.start_us["Y"], s.start_us["A"], s.start_us["Z"]) == (2.0, 2.5, 3.0, 4.0)
    ref = naive_schedule(g, make_policy("earliest_start"))
    assert {k: v[0] for k, v in ref.items()} == s.start_us
