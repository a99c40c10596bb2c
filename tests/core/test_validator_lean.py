"""The array check of :func:`moeopt.validate_schedule` (``moeopt.core.validate._passes``) accepts
no schedule that the event-by-event reference in the same module (``_check_every_rule``) refuses,
on random graphs with every feature of the event model, for the greedy schedule and for
schedules with drawn defects, and ``validate_schedule`` (array path forced) raises the
reference's messages.

The defects reach each path of the cheaper check: events bound exactly as declared (the whole
binding list equal to the declared one, placeholders left unbound included), rebound or swapped
bindings, re-pins (legal or not, so the re-pinned declared resources are looked up by position),
colocated partners and moved or stretched events."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import moeopt as m
from moeopt.core import validate
from moeopt.errors import SchedulingError
from moeopt.testing import event_graphs

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _messages(check: object, g: m.EventGraph, s: m.Schedule, exact: bool) -> list[str] | None:
    try:
        check(g, s, durations_exact=exact)  # type: ignore[operator]
    except m.ScheduleError as e:
        return list(e.violations)
    return None


def _reference(g: m.EventGraph, s: m.Schedule, *, durations_exact: bool) -> None:
    """The event-by-event check alone (the array check skipped): the reference whose messages
    ``validate_schedule`` gives whenever the array check does not accept."""
    g.validate()
    validate._check_every_rule(g, s, durations_exact)


def _same_as_reference(g: m.EventGraph, s: m.Schedule, exact: bool) -> None:
    """The array check never accepts a schedule the reference refuses (refusing a valid one only
    costs time: it may, e.g. for an end within the tolerance of its duration), and
    ``validate_schedule`` raises the reference's messages."""
    ref = _messages(_reference, g, s, exact)
    if validate._passes(g, s, exact):
        assert ref is None
    assert _messages(m.validate_schedule, g, s, exact) == ref


@SETTINGS
@given(event_graphs(), st.data())
def test_same_verdicts_and_messages_as_the_reference(g: m.EventGraph, data: st.DataObject) -> None:
    try:
        s = m.schedule(g)
    except SchedulingError:  # a drawn graph that deadlocks
        return
    names = list(g.events)
    start, end, res = dict(s.start_us), dict(s.end_us), dict(s.resources)
    repinned: dict[str, tuple[str, str]] = {}
    for _ in range(data.draw(st.integers(0, 2))):
        name = data.draw(st.sampled_from(names))
        kind = data.draw(st.sampled_from(["shift", "stretch", "rebind", "swap", "declared", "repin"]))
        if kind == "shift":
            dt = data.draw(st.sampled_from([-2.0, -0.5, -1e-7, 0.5, 1.0]))
            start[name] += dt
            end[name] += dt
        elif kind == "stretch":
            end[name] += data.draw(st.sampled_from([-0.25, 1e-7, 0.75]))
        elif kind == "rebind":
            res[name] = (data.draw(st.sampled_from(["c0.a", "c1.a", "c2.b", "c9.a"])),)
        elif kind == "swap":
            other = data.draw(st.sampled_from(names))
            res[name], res[other] = res[other], res[name]
        elif kind == "declared":
            # every event bound to exactly what it declares (the binding lists compare equal)
            res = {x: tuple(g[x].resources) for x in names}
        else:
            # mostly legal: from a fixed resource of the event to a member of a pool holding it
            fixed = [r for r in g[name].resources if not r.endswith(":*")]
            frm = data.draw(st.sampled_from([*fixed, *fixed, "c0.a", "c1.b"]))
            pool = [ms for ms in g.pools.values() if frm in ms]
            to = data.draw(st.sampled_from([*(pool[0] if pool else ()), "c0.a", "c2.b"]))
            repinned[name] = (frm, to)
            if data.draw(st.booleans()):
                res[name] = tuple(to if r == frm else r for r in res[name])
    bad = dataclasses.replace(s, start_us=start, end_us=end, resources=res, repinned=repinned)
    for exact in (True, False):
        _same_as_reference(g, bad, exact)


@pytest.mark.parametrize("late", [False, True])
def test_forced_array_path_same_messages(late: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the array path (VECTOR_MIN_EVENTS lowered) on a layered graph
    with colocation and late-bound placeholders, valid and with each kind of defect."""
    from moeopt.synthetic import layered_graph

    monkeypatch.setattr(validate, "VECTOR_MIN_EVENTS", 1)
    g = layered_graph(300, seed=5, sites=3, bandwidth_units=4, late_bind_tiles=late)
    s = m.schedule(g)
    names = list(g.events)
    first, last = names[0], names[-1]
    variants = [
        {},
        {"start_us": {last: s.start_us[last] - 1000.0}},
        {"end_us": {first: s.end_us[first] + 3.0}},
        {"resources": {first: ("c9.x",)}},
        {"resources": {x: tuple(g[x].resources) for x in names}},
    ]
    for patch in variants:
        fields = {"start_us": dict(s.start_us), "end_us": dict(s.end_us), "resources": dict(s.resources)}
        for key, change in patch.items():
            fields[key].update(change)  # type: ignore[attr-defined]
        bad = dataclasses.replace(s, **fields)  # type: ignore[arg-type]
        _same_as_reference(g, bad, True)
    # the greedy schedule itself goes through the array check (what makes it the fast path)
    assert validate._passes(g, s, True)


def test_units_beyond_64_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Units that do not fit 64 bits (the array check's unit column cannot hold them: it hands the
    schedule to the event-by-event check) get the reference's verdicts: accepted while the free units
    stay within the capacity, refused with the same message when they do not."""
    monkeypatch.setattr(validate, "VECTOR_MIN_EVENTS", 1)
    big = 2**65
    g = m.EventGraph(semaphores={"s": big})
    g.add(m.Event("p", resources=["c0.a"], acquires={"s": big}, releases={"s": big}, duration_us=1.0))
    g.add(m.Event("q", resources=["c1.a"], acquires={"s": big}, releases={"s": big}, duration_us=1.0))
    names = list(g.events)
    for q_start, ok in ((1.0, True), (0.5, False)):  # after p, or overlapping it (2 * big taken)
        start = {"p": 0.0, "q": q_start}
        end = {x: start[x] + 1.0 for x in names}
        s = m.Schedule(start_us=start, end_us=end, resources={x: tuple(g[x].resources) for x in names})
        assert not validate._passes(g, s, True)
        got, ref = _messages(m.validate_schedule, g, s, True), _messages(_reference, g, s, True)
        assert got == ref
        assert (got is None) == ok
