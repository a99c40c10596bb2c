"""The columns compile_graph's lean scan now reads in its one loop over the events (durations,
whether any event is colocated, fixed resources per distinct resource tuple) and the name index
the graph gives it (``EventGraph._positions``), each against a straightforward reference built
from the graph's events. (test_compiled_lean_scan.py holds the whole compiled form to the
event-by-event scan; these name the new pieces, so that a slip in one points at it.)"""

from __future__ import annotations

from hypothesis import given, settings

from moeopt.core.compiled import _scan_fast
from moeopt.core.events import EventGraph, placeholder_role
from tests.core.test_compiled_lean_scan import graphs


@settings(max_examples=80, deadline=None)
@given(graphs())
def test_positions_are_the_insertion_order(g: EventGraph) -> None:
    names = list(g.events)
    pos = g._positions()
    assert pos == dict(zip(names, range(len(names))))
    assert list(pos) == names  # same order, so the compiled index iterates as before
    assert all(type(v) is int for v in pos.values())
    pos[names[0]] = -1  # a new dict: the graph's own events are untouched
    assert g.events[names[0]].name == names[0]
    assert g._positions()[names[0]] == 0


@settings(max_examples=120, deadline=None)
@given(graphs())
def test_lean_scan_columns_match_the_events(g: EventGraph) -> None:
    events = list(g.events.values())
    index = {name: k for k, name in enumerate(g.events)}
    sem_id = {s: k for k, s in enumerate(g.semaphores)}
    scan = _scan_fast(events, index, sem_id, dict(g.pools))
    if scan is None:  # a problem of an event's own (the other scan reports it)
        return
    assert scan.dur == [ev.duration_us for ev in events]
    assert scan.linked == any(ev.colocate_with is not None for ev in events)
    # fixed resources: each event's own, by the numbering, and one tuple per distinct tuple
    for ev, fx in zip(events, scan.fixed):
        assert [scan.res_names[r] for r in fx] == [r for r in ev.resources if placeholder_role(r) is None]
    by_value = {}
    for ev, fx in zip(events, scan.fixed):
        assert by_value.setdefault(ev.resources, fx) is fx
    # resources numbered in order of first appearance: pool members first, then the events'
    first: list[str] = [m for members in g.pools.values() for m in members]
    first += [r for ev in events for r in ev.resources if placeholder_role(r) is None]
    assert scan.res_names == list(dict.fromkeys(first))
