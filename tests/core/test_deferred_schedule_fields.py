"""A greedy schedule's ``start_us``, ``end_us``, ``resources`` and ``order`` (and its recorded
levels' two maps) are made from the scheduler's columns when first read (``moeopt.core.schedule.deferred``). What a
user relies on must not tell it from a schedule made eagerly: the fields' values and types,
equality, ``repr``, ``len`` and the makespan (read from the ends column before the map is made),
the levels tied to the very start / end maps whichever is read first, copying, pickling,
``dataclasses.replace``, ``vars`` once every field is read (the declared order, no maker), and
no reference cycle: ``kernel_time``'s workers schedule rank after rank with the cyclic collector
paused, so a schedule and what it holds must go when its last reference does."""

from __future__ import annotations

import copy
import dataclasses
import gc
import pickle
import weakref

import pytest

import moeopt as m
from moeopt.core.policies import make_policy
from moeopt.core.schedule import _DEFERRED
from moeopt.synthetic import layered_graph
from moeopt.testing import naive_schedule

_LAZY = ("start_us", "end_us", "resources", "order")
_FIELDS = [f.name for f in dataclasses.fields(m.Schedule)]


def _eager(s: m.Schedule) -> m.Schedule:
    """The same schedule made by the dataclass's own ``__init__`` (every field a plain value)."""
    return m.Schedule(**{name: getattr(s, name) for name in _FIELDS})


@pytest.mark.parametrize("late", [False, True])
def test_fields_made_on_read_are_the_schedules_own(late: bool) -> None:
    g = layered_graph(150, seed=4, late_bind_tiles=late)  # (small: the naive reference is slow)
    # (normalize=False: every semaphore use is scheduled, so that the levels are recorded)
    s = m.schedule(g, "earliest_start", normalize=False)
    assert not set(_LAZY) & set(vars(s))  # nothing made yet
    ref = naive_schedule(g, make_policy("earliest_start"))
    # the makespan and the length are read without making the maps, and are theirs
    assert s.makespan_us == max(end for _s, end, _b in ref.values())
    assert len(s) == len(g)
    assert not set(_LAZY) & set(vars(s))
    names = list(g.events)
    for mp in (s.start_us, s.end_us, s.resources):
        assert type(mp) is dict
        assert list(mp) == names
    assert {n: (s.start_us[n], s.end_us[n], s.resources[n]) for n in names} == ref
    assert s.makespan_us == max(s.end_us.values())
    # the commit order: every event once, each after its predecessors
    assert sorted(s.order) == sorted(names)
    pos = {n: k for k, n in enumerate(s.order)}
    assert all(pos[d] < pos[n] for n in names for d in g.events[n].deps)
    assert s.recorded_levels is not None
    assert s.recorded_levels.for_start is s.start_us
    assert s.recorded_levels.for_end is s.end_us
    # every field read: the declared order, the maker gone; each read again is the same object
    assert list(vars(s)) == _FIELDS
    assert all(getattr(s, f) is vars(s)[f] for f in _FIELDS)
    eager = _eager(s)
    assert s == eager
    assert repr(s) == repr(eager)
    assert s.fingerprint() == eager.fingerprint()


def test_levels_read_first_share_the_schedules_maps() -> None:
    g = layered_graph(300, seed=1)
    s = m.schedule(g, "earliest_start", normalize=False)
    lv = s.recorded_levels
    assert lv is not None
    assert "start_us" not in vars(s)
    assert lv.for_end is s.end_us
    assert lv.for_start is s.start_us
    sem = next(iter(lv.curves))
    assert s.semaphore_levels(sem) is lv.curves[sem]


@pytest.mark.parametrize("read", [False, True])
def test_a_schedule_and_its_levels_go_without_the_cyclic_collector(read: bool) -> None:
    # A maker that held the levels (whose maker it is) made a cycle: with the collector off
    # the levels, the maker and the compiled graph it holds outlived the schedule.
    g = layered_graph(300, seed=3)
    gc.collect()
    gc.disable()
    try:
        s = m.schedule(g, "earliest_start", normalize=False)
        assert s.recorded_levels is not None
        if read:
            assert s.recorded_levels.for_start is s.start_us
        gone = [weakref.ref(s), weakref.ref(s.recorded_levels)]
        del s
        assert [r() for r in gone] == [None, None]
    finally:
        gc.enable()


def test_equality_and_copies_of_an_unread_schedule() -> None:
    g = layered_graph(300, seed=2, late_bind_tiles=True)

    def fresh() -> m.Schedule:
        s = m.schedule(g, "earliest_start", normalize=False)
        assert not set(_LAZY) & set(vars(s))
        return s

    a, b = fresh(), fresh()
    assert a == b  # (each made on the way)
    assert fresh() == _eager(fresh())
    r = dataclasses.replace(fresh(), policy="x")
    assert type(r) is m.Schedule
    assert _DEFERRED not in vars(r)
    assert r == dataclasses.replace(a, policy="x")
    # copied and pickled (its lazy waits hold the compiled graph, which neither deep-copies nor
    # pickles: a dict of them here), the same schedule with its levels still tied to its maps
    for way in (copy.copy, copy.deepcopy, lambda s: pickle.loads(pickle.dumps(s))):
        s = fresh()
        if way is not copy.copy:
            vars(s)["waits"] = dict(s.waits)
        got = way(s)
        assert got == a
        assert list(vars(got)) == _FIELDS
        assert dict(got.waits) == dict(a.waits)
        assert got.recorded_levels is not None
        assert got.recorded_levels.for_start is got.start_us
        assert got.recorded_levels.for_end is got.end_us


def test_other_missing_attributes_and_empty_graphs() -> None:
    s = m.schedule(layered_graph(100, seed=3), "earliest_start")
    assert not hasattr(s, "start")
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = s.nope  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.policy = "x"  # type: ignore[misc]
    e = m.schedule(m.EventGraph())
    assert (e.makespan_us, len(e), e.start_us, e.order) == (0.0, 0, {}, ())
    assert e == m.Schedule(start_us={}, end_us={}, resources={}, waits={}, policy="earliest_start")
    assert e.recorded_levels is not None
    assert e.recorded_levels.for_start is e.start_us
