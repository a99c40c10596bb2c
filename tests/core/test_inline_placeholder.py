"""The keyed scheduler's inlined evaluation of an event with one placeholder and no acquires
(pool members known: the pool itself, or its members at the colocated group's fixed site)
against the naive scheduler.

The graphs are built so that most events take that path: one placeholder each, on a pool of
one to three members per role, some colocated with a pinned event (their site then fixed from
the start) or with another placeholder event (fixed when the first of the group commits),
some with a fixed resource besides; a few acquiring events on fixed resources keep the other
paths (evaluate, admission) in the same schedule, and a few events with a placeholder and an
acquire go through evaluate."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moeopt.core.events import Event, EventGraph
from moeopt.core.state import SchedulerState
from tests.core.test_semaphore_waiters import _check_against_naive


@st.composite
def placeholder_graphs(draw: st.DrawFn) -> EventGraph:
    sites = draw(st.integers(1, 3))
    pools = {role: [f"c{k}.{role}" for k in range(sites)] for role in ("A", "B")}
    g = EventGraph(semaphores={"s": draw(st.integers(1, 3))}, pools=pools)
    names: list[str] = []
    # events a placeholder event may colocate with: those on one fixed core resource and the
    # placeholder events without a fixed resource (a colocated group has one site at most)
    anchors: list[str] = []
    for k in range(draw(st.integers(2, 24))):
        deps = {}
        if names and draw(st.booleans()):
            deps[draw(st.sampled_from(names))] = draw(st.sampled_from([0.0, 0.5]))
        kind = draw(st.sampled_from(["pool", "pool", "coloc", "pinned", "acquire"]))
        name = f"e{k}"
        dur = draw(st.sampled_from([0.0, 0.5, 1.0, 2.5]))
        role = draw(st.sampled_from(["A", "B"]))
        if kind == "pinned":
            core = draw(st.integers(0, sites - 1))
            g.add(Event(name, resources=[f"c{core}.{role}"], deps=deps, duration_us=dur))
            anchors.append(name)
        elif kind == "acquire":
            # a placeholder with an acquire (evaluate), or a fixed resource with a hold
            res = [f"{role}:*"] if draw(st.booleans()) else [f"c0.{role}"]
            g.add(Event(name, resources=res, deps=deps, acquires={"s": 1}, releases={"s": 1}, duration_us=dur))
        else:
            res = [f"{role}:*"]
            coloc = None
            if kind == "coloc" and anchors:
                coloc = draw(st.sampled_from(anchors))
            elif draw(st.integers(0, 3)) == 0:
                res.append(f"c{draw(st.integers(0, sites - 1))}.{'B' if role == 'A' else 'A'}")
            if len(res) == 1:
                anchors.append(name)
            g.add(Event(name, resources=res, deps=deps, colocate_with=coloc, duration_us=dur))
        names.append(name)
    return g


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=placeholder_graphs())
def test_one_placeholder_events_are_scheduled_as_the_naive_scheduler_does(g: EventGraph) -> None:
    cg = g.compiled()
    state = SchedulerState(cg)
    # the path under test is taken by some event of most graphs: one placeholder, no acquire
    assert all(len(lists) == len(phs) for lists, phs in zip(state.ph_lists, cg.placeholders))
    state.close()
    _check_against_naive(g)
