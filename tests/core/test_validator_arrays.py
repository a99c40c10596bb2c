"""The validator's array check (``moeopt.core.validate._passes``, tried first on large graphs)
accepts a schedule only when the event-by-event check (``_check_every_rule``) finds nothing: on
random graphs with every feature of the event model, for the greedy schedule and for schedules
with one drawn defect of each kind; and through :func:`moeopt.validate_schedule` a schedule it
refuses gets exactly the event-by-event check's messages."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import moeopt as m
from moeopt.core import validate
from moeopt.core.validate import _check_every_rule, _passes
from moeopt.errors import SchedulingError
from moeopt.testing import event_graphs

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _reference_ok(g: m.EventGraph, s: m.Schedule, exact: bool = True) -> bool:
    try:
        _check_every_rule(g, s, exact)
    except m.ScheduleError:
        return False
    return True


def _greedy(g: m.EventGraph) -> m.Schedule | None:
    try:
        return m.schedule(g)
    except SchedulingError:  # a drawn graph that deadlocks
        return None


@SETTINGS
@given(event_graphs(), st.data())
def test_array_check_accepts_only_what_the_reference_accepts(g: m.EventGraph, data: st.DataObject) -> None:
    s = _greedy(g)
    if s is None:
        return
    # the greedy schedule is valid, and the array check sees it (reading the edges and the
    # semaphore uses by name or by position in the compiled graph)
    assert _reference_ok(g, s)
    assert _passes(g, s, True)
    assert _passes(g, s, True, by_position=True)
    # one defect: an event moved in time (with or without its end), rebound, given a
    # tolerance-sized nudge, every event bound as declared, or a re-pin; the array check must
    # never accept what the reference refuses
    names = list(g.events)
    name = data.draw(st.sampled_from(names))
    start, end, res = dict(s.start_us), dict(s.end_us), dict(s.resources)
    repinned: dict[str, tuple[str, str]] = {}
    kind = data.draw(st.sampled_from(["shift", "stretch", "nudge", "rebind", "swap", "declared", "repin"]))
    if kind == "shift":
        dt = data.draw(st.sampled_from([-2.0, -0.5, -1e-7, 0.5, 1.0]))
        start[name] += dt
        end[name] += dt
    elif kind == "stretch":
        end[name] += data.draw(st.sampled_from([-0.25, 1e-7, 0.75]))
    elif kind == "nudge":
        start[name] -= 5e-7
    elif kind == "rebind":
        res[name] = (data.draw(st.sampled_from(["c0.a", "c1.a", "c2.b", "c9.a"])),)
    elif kind == "swap":
        other = data.draw(st.sampled_from(names))
        res[name], res[other] = res[other], res[name]
    elif kind == "declared":
        # every event bound to exactly what it declares (the binding lists compare equal, the
        # array check's shortcut; placeholders left unbound are a defect)
        res = {x: tuple(g[x].resources) for x in names}
    else:
        # a re-pin, mostly legal: from a fixed resource of the event to a member of a pool
        # holding it (the re-pinned declared resources are looked up by position)
        fixed = [r for r in g[name].resources if not r.endswith(":*")]
        frm = data.draw(st.sampled_from([*fixed, *fixed, "c0.a", "c1.b"]))
        pool = [ms for ms in g.pools.values() if frm in ms]
        to = data.draw(st.sampled_from([*(pool[0] if pool else ()), "c0.a", "c2.b"]))
        repinned[name] = (frm, to)
        if data.draw(st.booleans()):
            res[name] = tuple(to if r == frm else r for r in res[name])
    bad = dataclasses.replace(s, start_us=start, end_us=end, resources=res, repinned=repinned)
    for exact in (True, False):
        got = _passes(g, bad, exact)
        if got:
            assert _reference_ok(g, bad, exact), (kind, name)
        # the positional reading sees the same numbers: the same verdict
        assert _passes(g, bad, exact, by_position=True) == got, (kind, name)


@pytest.mark.parametrize("late", [False, True])
def test_array_path_gives_the_reference_messages(late: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from moeopt.synthetic import layered_graph

    monkeypatch.setattr(validate, "VECTOR_MIN_EVENTS", 1)  # validate_schedule takes the array path
    g = layered_graph(400, seed=3, sites=3, bandwidth_units=4, late_bind_tiles=late)
    s = m.schedule(g)
    assert _passes(g, s, True)
    m.validate_schedule(g, s)
    # each defect is refused with exactly the reference's messages
    names = list(g.events)
    first, last = names[0], names[-1]
    defects = [
        {"start_us": {last: s.start_us[last] - 1000.0}},
        {"end_us": {first: s.end_us[first] + 3.0}},
        {"resources": {first: ("c9.x",)}},
    ]
    for patch in defects:
        fields = {"start_us": dict(s.start_us), "end_us": dict(s.end_us), "resources": dict(s.resources)}
        for key, change in patch.items():
            fields[key].update(change)  # type: ignore[attr-defined]
        bad = dataclasses.replace(s, **fields)  # type: ignore[arg-type]
        assert not _passes(g, bad, True)
        with pytest.raises(m.ScheduleError) as got:
            m.validate_schedule(g, bad)
        with pytest.raises(m.ScheduleError) as ref:
            _check_every_rule(g, bad, True)
        assert got.value.violations == ref.value.violations
    # every event bound exactly as declared (the array check's whole-list shortcut; late-bound
    # placeholders are then left unbound): accepted by the array check only if the reference does
    declared = dataclasses.replace(s, resources={x: tuple(g[x].resources) for x in names})
    assert _passes(g, declared, True) <= _reference_ok(g, declared)


def test_semaphore_runs_merged_by_the_tolerance_are_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    # a slot released at 1 + 1e-7 and taken again at 1.0: within the time tolerance of one
    # instant, so the reference applies both together (free units 0 -> 0); the array check's
    # exact-time runs see -1 for a moment and hand that semaphore to the tolerance sweep
    monkeypatch.setattr(validate, "VECTOR_MIN_EVENTS", 1)
    g = m.EventGraph(semaphores={"slot": 1})
    g.add(m.Event("p", resources=["c0.b"], acquires={"slot": 1}, releases={"slot": 1}, duration_us=1.0 + 1e-7))
    g.add(m.Event("q", resources=["c1.b"], acquires={"slot": 1}, releases={"slot": 1}, duration_us=1.0))
    names = list(g.events)
    start = dict.fromkeys(names, 0.0)
    start["q"] = 1.0
    end = {x: start[x] + g[x].duration_us for x in names}
    s = m.Schedule(start_us=start, end_us=end, resources={x: tuple(g[x].resources) for x in names})
    assert _reference_ok(g, s)
    assert _passes(g, s, True)
    # and a real overdraw is still refused
    start["q"] = 0.5
    end["q"] = 1.5
    bad = dataclasses.replace(s, start_us=start, end_us=end)
    assert not _passes(g, bad, True)
    with pytest.raises(m.ScheduleError, match="semaphore 'slot' has -1 free units at t = 0.5"):
        m.validate_schedule(g, bad)


def test_units_beyond_64_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Units that do not fit 64 bits (the array check's unit column cannot hold them: it hands the
    schedule to the event-by-event check) are accepted while the free units stay within the
    capacity and refused with the reference's message when they do not."""
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
        assert not _passes(g, s, True)
        assert not _passes(g, s, True, by_position=True)
        assert _reference_ok(g, s) == ok
        if ok:
            m.validate_schedule(g, s)
            continue
        with pytest.raises(m.ScheduleError) as got:
            m.validate_schedule(g, s)
        with pytest.raises(m.ScheduleError) as ref:
            _check_every_rule(g, s, True)
        assert got.value.violations == ref.value.violations


def test_positional_reading_refuses_what_the_names_refuse(monkeypatch: pytest.MonkeyPatch) -> None:
    """``validate_schedule(..., by_position=True)`` (the kernel-time path's check) reads each
    event's predecessors and semaphore uses from the compiled graph: a start before a
    predecessor's end plus λ, and a semaphore overdrawn, are refused with the reference's
    messages, and the valid schedule is accepted."""
    from moeopt.synthetic import layered_graph

    monkeypatch.setattr(validate, "VECTOR_MIN_EVENTS", 1)
    g = layered_graph(400, seed=5, sites=2, bandwidth_units=2)
    s = m.schedule(g)
    m.validate_schedule(g, s, by_position=True)
    # an event with a predecessor, started one µs before that edge allows (its end plus λ)
    name, (pred, lam) = next((x, next(iter(g[x].deps.items()))) for x in g.events if g[x].deps)
    early = s.end_us[pred] + lam - 1.0
    start, end = dict(s.start_us), dict(s.end_us)
    start[name], end[name] = early, early + g[name].duration_us
    bad = dataclasses.replace(s, start_us=start, end_us=end)
    assert not _passes(g, bad, True, by_position=True)
    with pytest.raises(m.ScheduleError) as got:
        m.validate_schedule(g, bad, by_position=True)
    with pytest.raises(m.ScheduleError) as ref:
        _check_every_rule(g, bad, True)
    assert got.value.violations == ref.value.violations
    # two holders of a one-unit slot at once (the semaphore uses read by position)
    h = m.EventGraph(semaphores={"slot": 1})
    for k in range(2):
        slot = {"slot": 1}
        h.add(m.Event(f"e{k}", resources=[f"c{k}.b"], acquires=slot, releases=slot, duration_us=1.0))
    names = list(h.events)
    both = m.Schedule(
        start_us=dict.fromkeys(names, 0.0),
        end_us=dict.fromkeys(names, 1.0),
        resources={x: tuple(h[x].resources) for x in names},
    )
    assert not _passes(h, both, True, by_position=True)
    with pytest.raises(m.ScheduleError, match="semaphore 'slot' has -1 free units"):
        m.validate_schedule(h, both, by_position=True)
