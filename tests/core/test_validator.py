"""The independent validator catches every kind of violation and lists all of them."""

from __future__ import annotations

import dataclasses

import pytest

import moeopt as m


def _graph() -> m.EventGraph:
    g = m.EventGraph(semaphores={"slot": 1}, pools={"AIC": ["c0.AIC", "c1.AIC"], "AIV": ["c0.AIV", "c1.AIV"]})
    g.add(m.Event("load", resources=["c0.MTE"], acquires={"slot": 1}, duration_us=1.0))
    g.add(m.Event("mm", resources=["AIC:*"], deps={"load": 0.5}, duration_us=2.0))
    g.add(m.Event("act", resources=["AIV:*"], deps={"mm": 0.0}, releases={"slot": 1}, colocate_with="mm", duration_us=1.0))
    g.add(m.Event("other", resources=["c0.AIC"], duration_us=1.0))
    return g


def _edit(s: m.Schedule, **changes: dict) -> m.Schedule:
    fields = {
        "start_us": dict(s.start_us),
        "end_us": dict(s.end_us),
        "resources": dict(s.resources),
    }
    for key, patch in changes.items():
        fields[key].update(patch)
    return dataclasses.replace(s, **fields)


def test_greedy_schedule_is_valid() -> None:
    g = _graph()
    m.validate_schedule(g, m.schedule(g))


def test_precedence_with_lambda() -> None:
    g = _graph()
    s = m.schedule(g)
    # mm may start at load's end (1.0) + λ 0.5 = 1.5 at the earliest; put it at 1.2
    bad = _edit(s, start_us={"mm": 1.2}, end_us={"mm": 3.2})
    with pytest.raises(m.ScheduleError, match=r"'mm' starts at 1.2 µs, before its predecessor 'load' ends \(1\) plus λ 0.5 = 1.5"):
        m.validate_schedule(g, bad)


def test_overlap_on_an_exclusive_resource() -> None:
    g = _graph()
    s = m.schedule(g)
    bad = _edit(s, start_us={"other": s.start_us["mm"]}, end_us={"other": s.start_us["mm"] + 1.0},
                resources={"other": ("c0.AIC",), "mm": ("c0.AIC",), "act": ("c0.AIV",)})
    with pytest.raises(m.ScheduleError, match="overlap on resource 'c0.AIC'"):
        m.validate_schedule(g, bad)


def test_wrong_duration_and_negative_start() -> None:
    g = _graph()
    s = m.schedule(g)
    bad = _edit(s, start_us={"other": -1.0}, end_us={"other": 0.5})
    with pytest.raises(m.ScheduleError) as info:
        m.validate_schedule(g, bad)
    text = str(info.value)
    assert "'other' starts at -1 µs, before t = 0" in text
    assert "'other' lasts 1.5 µs but its duration is 1 µs" in text


def test_binding_outside_the_pool_and_broken_colocation() -> None:
    g = _graph()
    s = m.schedule(g)
    bad = _edit(s, resources={"mm": ("c7.AIC",)})
    with pytest.raises(m.ScheduleError, match=r"bound to \['c7.AIC'\] for placeholder\(s\) \['AIC:\*'\]"):
        m.validate_schedule(g, bad)
    moved = "c1.AIV" if s.resources["act"] == ("c0.AIV",) else "c0.AIV"
    bad = _edit(s, resources={"act": (moved,)})
    with pytest.raises(m.ScheduleError, match="'act' on site.* is not colocated with 'mm'"):
        m.validate_schedule(g, bad)


def test_semaphore_capacity_at_every_instant() -> None:
    # two loads each take the only slot; the second starts before the first's consumer ends
    g = m.EventGraph(semaphores={"slot": 1})
    g.add(m.Event("p1", resources=["c0.a"], acquires={"slot": 1}, duration_us=1.0))
    g.add(m.Event("c1", resources=["c0.b"], deps={"p1": 0.0}, releases={"slot": 1}, duration_us=1.0))
    g.add(m.Event("p2", resources=["c1.a"], acquires={"slot": 1}, duration_us=1.0))
    g.add(m.Event("c2", resources=["c1.b"], deps={"p2": 0.0}, releases={"slot": 1}, duration_us=1.0))
    s = m.schedule(g)
    bad = _edit(s, start_us={"p2": 0.5, "c2": 1.5}, end_us={"p2": 1.5, "c2": 2.5})
    with pytest.raises(
        m.ScheduleError, match=r"semaphore 'slot' has -1 free units at t = 0.5 µs \(capacity 1\), when \['p2'\] start"
    ):
        m.validate_schedule(g, bad)
    # both loads at t = 0: the message names every event that changed the semaphore at that instant
    bad = _edit(s, start_us={"p2": 0.0, "c2": 1.0}, end_us={"p2": 1.0, "c2": 2.0})
    with pytest.raises(m.ScheduleError, match=r"-1 free units at t = 0 µs \(capacity 1\), when \['p1', 'p2'\]"):
        m.validate_schedule(g, bad)


def test_missing_and_unknown_events_are_all_listed() -> None:
    g = _graph()
    s = m.schedule(g)
    start = dict(s.start_us)
    del start["other"]
    start["ghost"] = 0.0
    bad = dataclasses.replace(s, start_us=start)
    with pytest.raises(m.ScheduleError) as info:
        m.validate_schedule(g, bad)
    assert "event 'other' has no start time" in str(info.value)
    assert "'ghost', which is not an event of the graph" in str(info.value)
    assert len(info.value.violations) >= 2


def test_longer_than_duration_is_allowed_only_when_asked() -> None:
    g = m.EventGraph()
    g.add(m.Event("a", resources=["c0.x"], duration_us=1.0))
    s = m.Schedule(start_us={"a": 0.0}, end_us={"a": 1.5}, resources={"a": ("c0.x",)})
    with pytest.raises(m.ScheduleError, match="lasts 1.5 µs but its duration is 1 µs"):
        m.validate_schedule(g, s)
    m.validate_schedule(g, s, durations_exact=False)


def _seven_placeholders(roles: list[str], pools: dict[str, list[str]]) -> tuple[m.EventGraph, m.Schedule]:
    g = m.EventGraph(pools=pools)
    g.add(m.Event("big", resources=[f"{r}:*" for r in roles], duration_us=1.0))
    bound = ("c0.x", "c1.x", "c2.x", "c3.x", "c4.x", "c5.x", "c6.x")
    return g, m.Schedule(start_us={"big": 0.0}, end_us={"big": 1.0}, resources={"big": bound})


def test_pool_matching_is_exact_beyond_six_placeholders() -> None:
    # seven placeholders A, B, C..G bound to c0.x .. c6.x (in that order). Pools: A = {c0.x, c1.x},
    # B = {c0.x}, C = {c2.x}, ..., G = {c6.x}. The only assignment is A -> c1.x, B -> c0.x and
    # C..G -> c2.x..c6.x, so the binding is valid. A greedy pass in placeholder order gives A the
    # first bound member of its pool, c0.x, and then finds nothing left for B: it would report a
    # violation that is not there.
    singles = {r: [f"c{k}.x"] for k, r in enumerate("CDEFG", start=2)}
    g, s = _seven_placeholders(["A", "B", *singles], {"A": ["c0.x", "c1.x"], "B": ["c0.x"], **singles})
    m.validate_schedule(g, s)


def test_pool_matching_beyond_six_placeholders_still_finds_a_real_violation() -> None:
    # seven placeholders B, K, C..G bound to c0.x .. c6.x: B and K both have only c0.x in their
    # pools and c1.x is in no pool, so two placeholders share one usable member (Hall's condition
    # fails) and no assignment exists, whatever the order
    singles = {r: [f"c{k}.x"] for k, r in enumerate("CDEFG", start=2)}
    g, s = _seven_placeholders(["B", "K", *singles], {"B": ["c0.x"], "K": ["c0.x"], **singles})
    with pytest.raises(m.ScheduleError, match=r"'big' is bound to .* for placeholder\(s\) .*which are not members of those pools"):
        m.validate_schedule(g, s)
