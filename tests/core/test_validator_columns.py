"""The validator's reading of a greedy schedule's own columns
(``moeopt.core.validate._passes_columns``, what ``validate_schedule(..., by_position=True)``
tries first while the schedule's maps are unmade): on random pinned graphs, for the greedy
schedule and for columns with one drawn defect, it gives the verdict of the array check reading
the made maps (``_passes``), accepts only what the event-by-event check accepts, and through
:func:`moeopt.validate_schedule` a refused schedule gets the event-by-event check's messages.
It leaves the maps unmade."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import moeopt as m
from moeopt.core import fastloop, validate
from moeopt.core.events import Event, EventGraph
from moeopt.core.schedule import Schedule, deferred, deferred_columns
from moeopt.core.scheduler import _ScheduleMaker
from moeopt.core.validate import _check_every_rule, _passes, _passes_columns
from moeopt.errors import SchedulingError
from tests.core.test_fastloop import pinned_graphs

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_MAPS = ("start_us", "end_us", "resources")


def _uncolocated(g: EventGraph) -> EventGraph:
    """``g`` without its colocation links (the columns reading takes graphs without them)."""
    return g.copy_with(events=[dataclasses.replace(ev, colocate_with=None) for ev in g])


def _with_columns(
    s: Schedule, start: list[float], end: list[float], bound: list[tuple[int, ...]]
) -> Schedule:
    """A copy of the greedy schedule ``s`` (its maps unmade) whose maps are to be made from
    these columns: what the scheduler would hand back had it written them."""
    own = s.__dict__
    maker = own["_deferred_fields"]
    out = object.__new__(Schedule)
    out.__dict__.update({k: v for k, v in own.items() if k != "_deferred_fields"})
    deferred(out, _ScheduleMaker(maker._cg, start, end, bound, maker._order))
    return out


def _pinned_graph(n: int, seed: int) -> EventGraph:
    """A pinned graph of ``n`` events over four cores, each depending on up to two earlier ones
    (λ 0 or 0.5) and holding 1-2 units of a 3-unit bandwidth semaphore for its duration."""
    rng = random.Random(seed)
    g = EventGraph(semaphores={"bw": 3})
    for k in range(n):
        deps = {f"e{j}": rng.choice([0.0, 0.5]) for j in rng.sample(range(k), min(k, rng.randint(0, 2)))}
        units = {"bw": rng.randint(1, 2)}
        core = f"c{rng.randrange(4)}.a"
        g.add(
            Event(
                f"e{k}",
                resources=[core],
                deps=deps,
                acquires=units,
                releases=units,
                duration_us=rng.choice([0.5, 1.0, 2.5]),
            )
        )
    return g


def _made(s: Schedule) -> Schedule:
    """The same schedule with its maps made (read): the array check then reads them by name."""
    return dataclasses.replace(
        s, start_us=dict(s.start_us), end_us=dict(s.end_us), resources=dict(s.resources)
    )


def _reference_ok(g: EventGraph, s: Schedule, exact: bool) -> bool:
    try:
        _check_every_rule(g, s, exact)
    except m.ScheduleError:
        return False
    return True


@SETTINGS
@given(pinned_graphs(max_events=14), st.data())
def test_columns_reading_gives_the_verdict_of_the_maps(g0: EventGraph, data: st.DataObject) -> None:
    g = _uncolocated(g0)
    try:
        s = m.schedule(g, normalize=False)  # (normalised, it would be a schedule of another graph)
    except SchedulingError:  # a drawn graph that starves or overflows a semaphore
        return
    cols = deferred_columns(s)
    assert cols is not None
    assert cols.cg is g.compiled()
    assert _passes_columns(g, s, True) is True
    assert not set(_MAPS) & s.__dict__.keys()  # (read without making the maps)
    # one defect in the columns: an event moved in time (with or without its end), given a
    # tolerance-sized nudge, or bound to another resource (or none)
    n = len(g)
    i = data.draw(st.integers(0, n - 1))
    start, end, bound = cols.start.tolist(), cols.end.tolist(), list(cols.bound)
    kind = data.draw(st.sampled_from(["shift", "stretch", "nudge", "rebind", "none"]))
    if kind == "shift":
        dt = data.draw(st.sampled_from([-2.0, -0.5, -1e-7, 0.5, 1.0]))
        start[i] += dt
        end[i] += dt
    elif kind == "stretch":
        end[i] += data.draw(st.sampled_from([-0.25, 1e-7, 0.75]))
    elif kind == "nudge":
        start[i] -= 5e-7
    elif kind == "rebind":  # (to one of the graph's resources, or to none)
        k = len(cols.cg.res_names)
        bound[i] = (data.draw(st.integers(0, k - 1)),) if k and data.draw(st.booleans()) else ()
    for exact in (True, False):
        bad = _with_columns(s, start, end, bound)
        got = _passes_columns(g, bad, exact)
        made = _made(bad)
        if got is None:
            # declined only where the binding differs from the fixed resources: the names decide
            assert bound != list(cols.cg.fixed), kind
        else:
            assert got == _passes(g, made, exact, by_position=True), (kind, i)
            if got:
                assert _reference_ok(g, made, exact), (kind, i)


@pytest.mark.parametrize("loop", ["python", "compiled"])
def test_a_refused_column_gets_the_reference_messages(loop: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(validate, "VECTOR_MIN_EVENTS", 1)  # validate_schedule takes the array path
    if loop == "compiled":
        fastloop.compiled()
    monkeypatch.setattr(fastloop, "MIN_EVENTS", 0 if loop == "compiled" else 10**9)
    g = _pinned_graph(400, seed=4)
    s = m.schedule(g, normalize=False)
    cols = deferred_columns(s)
    assert cols is not None
    # the compiled loop's columns are its arrays (no list made); the Python loop's are lists
    assert isinstance(s.__dict__["_deferred_fields"]._start, fastloop.Column) == (loop == "compiled")
    m.validate_schedule(g, s, by_position=True)
    assert not set(_MAPS) & s.__dict__.keys()
    # an event with a predecessor started one µs before its edge allows; the last event's end
    # stretched by 3 µs; an event taken off its resource
    cg = cols.cg
    i = next(k for k in range(cg.n) if len(cg.preds[k]))
    p, lam = cg.preds[i][0]
    early = float(cols.end[p]) + lam - 1.0
    start, end = cols.start.tolist(), cols.end.tolist()
    early_start, early_end = list(start), list(end)
    early_start[i], early_end[i] = early, early + cg.dur[i]
    late_end = list(end)
    late_end[-1] += 3.0
    for s2, e2 in ((early_start, early_end), (start, late_end)):
        bad = _with_columns(s, s2, e2, list(cols.bound))
        assert _passes_columns(g, bad, True) is False
        with pytest.raises(m.ScheduleError) as got:
            m.validate_schedule(g, bad, by_position=True)
        with pytest.raises(m.ScheduleError) as ref:
            _check_every_rule(g, _made(bad), True)
        assert got.value.violations == ref.value.violations
    unbound = list(cols.bound)
    unbound[0] = ()
    bad = _with_columns(s, start, end, unbound)
    assert _passes_columns(g, bad, True) is None
    with pytest.raises(m.ScheduleError) as got:
        m.validate_schedule(g, bad, by_position=True)
    assert any("resource" in v for v in got.value.violations)


def test_a_read_schedule_or_another_graph_is_checked_by_name() -> None:
    g = EventGraph()
    for k in range(3):
        g.add(Event(f"e{k}", resources=["c0.a"], duration_us=1.0, deps={f"e{k - 1}": 0.0} if k else None))
    s = m.schedule(g)
    assert deferred_columns(s) is not None
    s.start_us  # noqa: B018  (read: the maps may have been changed since)
    assert deferred_columns(s) is None
    # a schedule whose maps are made (by hand) has no columns
    assert deferred_columns(Schedule(start_us={}, end_us={}, resources={})) is None
    # a schedule of the normalised graph (the never-binding semaphore dropped: another compiled
    # graph) is read by name, and accepted
    h = EventGraph(semaphores={"wide": 5})
    for k in range(3):
        h.add(Event(f"e{k}", resources=[f"c{k}.a"], acquires={"wide": 1}, releases={"wide": 1}, duration_us=1.0))
    norm = m.schedule(h)
    cols = deferred_columns(norm)
    assert cols is not None
    assert cols.cg is not h.compiled()
    assert _passes_columns(h, norm, True) is None
    m.validate_schedule(h, norm, by_position=True)


def test_a_column_reads_as_the_list_it_stands_for() -> None:
    a = np.array([1.5, 0.0, 2.25])
    col = fastloop.Column(a)
    assert col == [1.5, 0.0, 2.25]
    assert list(col) == [1.5, 0.0, 2.25]
    assert len(col) == 3
    assert col[1] == 0.0
    assert type(col[1]) is float
    assert col[-1] == 2.25
    assert col[:2] == [1.5, 0.0]
    assert col == fastloop.Column(np.array([1.5, 0.0, 2.25]))
    assert col != [1.5, 0.0]
    with pytest.raises(ValueError):
        a[0] = 9.0  # (read-only: the list once made would not follow)
