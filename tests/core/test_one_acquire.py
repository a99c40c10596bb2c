"""The scheduler's inlined admission of an event with exactly one acquire (``state.sig_acq1``,
read per signature: no admit_all call) against the naive scheduler, and that table against ``acq3``.

The graphs are built so that every semaphore-using event goes through that path: events on
fixed resources only (the inlined evaluation), each acquiring exactly one semaphore, as a hold
(giving back at most what it took), or as a taker whose units a later giver (which acquires
nothing) brings back; zero durations too (admission then needs only the units kept after)."""

from __future__ import annotations

from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moeopt.core import semaphores
from moeopt.core.events import Event, EventGraph
from moeopt.core.semaphores import B
from moeopt.core.state import SchedulerState
from tests.core.test_semaphore_waiters import _check_against_naive


@st.composite
def one_acquire_graphs(draw: st.DrawFn) -> EventGraph:
    caps = {"s0": draw(st.integers(1, 3)), "s1": draw(st.integers(1, 4))}
    g = EventGraph(semaphores=caps)
    names: list[str] = []
    for k in range(draw(st.integers(2, 20))):
        deps = {}
        if names and draw(st.booleans()):
            deps[draw(st.sampled_from(names))] = draw(st.sampled_from([0.0, 0.5]))
        sem = draw(st.sampled_from(sorted(caps)))
        take = draw(st.integers(1, caps[sem]))
        mode = draw(st.sampled_from(["hold", "hold", "partial", "take", "plain"]))
        acquires: dict[str, int] = {}
        releases: dict[str, int] = {}
        if mode == "hold":
            acquires, releases = {sem: take}, {sem: take}
        elif mode == "partial":
            acquires, releases = {sem: take}, {sem: draw(st.integers(0, take))}
        elif mode == "take":
            acquires = {sem: take}
        name = f"e{k}"
        g.add(
            Event(
                name,
                resources=[draw(st.sampled_from(["c0.r", "c1.r", "c2.r"]))],
                deps=deps,
                acquires=acquires,
                releases={s: u for s, u in releases.items() if u},
                duration_us=draw(st.sampled_from([0.0, 0.5, 1.0, 2.5])),
            )
        )
        names.append(name)
        if mode in ("take", "partial"):
            # a giver bringing back the units kept (it acquires nothing: not a one-acquire
            # event), mostly, so that most graphs finish
            kept = take - releases.get(sem, 0)
            if kept and draw(st.integers(0, 4)):
                g.add(
                    Event(
                        f"g{k}",
                        resources=[draw(st.sampled_from(["c0.r", "c1.r", "c2.r"]))],
                        deps={name: draw(st.sampled_from([0.0, 1.0]))},
                        releases={sem: kept},
                        duration_us=draw(st.sampled_from([0.5, 3.0])),
                    )
                )
                names.append(f"g{k}")
    return g


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=one_acquire_graphs(), tiny_blocks=st.booleans())
def test_one_acquire_events_are_scheduled_as_the_naive_scheduler_does(g: EventGraph, tiny_blocks: bool) -> None:
    st_ = SchedulerState(g.compiled())
    # the path under test: every acquiring event has exactly one acquire and no placeholder
    assert all(one is not None for one, acq in zip(map(st_.sig_acq1.__getitem__, st_.sig), st_.acq3) if acq)
    assert not any(g.compiled().placeholders)
    st_.close()
    with (
        mock.patch.object(semaphores, "B", 2 if tiny_blocks else B),
        mock.patch.object(semaphores, "_FLAT", 2 if tiny_blocks else semaphores._FLAT),
    ):
        _check_against_naive(g)


def test_acq1_is_the_one_acquire_of_acq3_with_its_profile() -> None:
    g = EventGraph(semaphores={"a": 2, "b": 3})
    g.add(Event("x", resources=["c0.r"], acquires={"a": 2}, releases={"a": 1}, duration_us=1.0))
    g.add(Event("y", resources=["c0.r"], acquires={"a": 1, "b": 1}, duration_us=1.0))
    g.add(Event("z", resources=["c0.r"], releases={"b": 1}, deps={"y": 0.0}, duration_us=1.0))
    cg = g.compiled()
    state = SchedulerState(cg)
    x, y, z = (cg.index[k] for k in "xyz")
    (sem, take, back), = state.acq3[x]
    assert state.sig_acq1[state.sig[x]] == (sem, take, back, state.profiles[sem])
    assert (take, back) == (2, 1)
    assert state.sig_acq1[state.sig[y]] is None  # two acquires: admit_all
    assert state.sig_acq1[state.sig[z]] is None  # none
    state.close()


def test_acq2_is_the_two_acquires_of_acq3_with_their_profiles() -> None:
    # the two-acquire events are admitted inline from acq2 (the cycle of admit_all); their
    # schedules are compared with the naive scheduler's in test_class_gates and
    # test_semaphore_waiters (loads holding a slot and bandwidth)
    g = EventGraph(semaphores={"a": 2, "b": 3, "c": 1})
    g.add(Event("x", resources=["c0.r"], acquires={"a": 2}, releases={"a": 1}, duration_us=1.0))
    g.add(Event("y", resources=["c0.r"], acquires={"a": 1, "b": 2}, releases={"b": 2}, duration_us=1.0))
    g.add(Event("w", resources=["c0.r"], acquires={"a": 1, "b": 1, "c": 1}, duration_us=1.0))
    cg = g.compiled()
    state = SchedulerState(cg)
    x, y, w = (cg.index[k] for k in "xyw")
    first, second = state.acq3[y]
    assert state.sig_acq2[state.sig[y]] == (first, second, state.profiles[first[0]], state.profiles[second[0]])
    assert {first[1:], second[1:]} == {(1, 0), (2, 2)}
    assert state.sig_acq2[state.sig[x]] is None  # one acquire: acq1
    assert state.sig_acq2[state.sig[w]] is None  # three: admit_all
    state.close()
