"""``compile_graph``'s column scan (each distinct resource tuple and acquire / release map looked
at once) gives the arrays of the general event-by-event scan, with the same sharing of the pair
tuples (the scheduler keys per-map work on their identity), and gives way to the general scan
exactly when an event has a problem that the general scan reports."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import moeopt.core.compiled as compiled
from moeopt.core.events import Event, EventGraph
from moeopt.errors import GraphError
from moeopt.testing.strategies import event_graphs

_Inputs = tuple[
    list[Event],
    dict[str, int],
    Callable[[str], int],
    list[tuple[int]],
    dict[str, int],
    dict[str, int],
    list[str],
    dict[str, int],
]


def _inputs(g: EventGraph) -> _Inputs:
    # the state compile_graph hands the scans: event indices, the resource table (pool members
    # registered first), pool and semaphore indices
    events = list(g.events.values())
    index = {ev.name: i for i, ev in enumerate(events)}
    res_names: list[str] = []
    res_index: dict[str, int] = {}
    one_res: list[tuple[int]] = []

    def rid(name: str) -> int:
        if name not in res_index:
            res_index[name] = len(res_names)
            res_names.append(name)
            one_res.append((res_index[name],))
        return res_index[name]

    for members in g.pools.values():
        for m in members:
            rid(m)
    pool_names = list(g.pools)
    return events, index, rid, one_res, res_index, {p: k for k, p in enumerate(pool_names)}, pool_names, {s: k for k, s in enumerate(g.semaphores)}


def _sharing(tuples: Sequence[object]) -> list[int]:
    # each entry's number among the distinct objects, in order of first appearance
    seen: dict[int, int] = {}
    return [seen.setdefault(id(t), len(seen)) for t in tuples]


def _both(g: EventGraph) -> tuple[Any, Any, list[str], list[str], list[str]]:
    events, index, rid, one_res, res_index, pool_id, pool_names, sem_id = _inputs(g)
    fast = compiled._scan_columns(events, index, rid, one_res, res_index, pool_id, sem_id)
    fast_res = list(res_index)
    events, index, rid, one_res, res_index, pool_id, pool_names, sem_id = _inputs(g)
    problems: list[str] = []
    general = compiled._scan_events(
        events, index, rid, one_res, res_index, pool_id, pool_names, sem_id, dict(g.semaphores), problems
    )
    return fast, general, problems, fast_res, list(res_index)


def _check(g: EventGraph) -> None:
    fast, general, problems, fast_res, general_res = _both(g)
    if problems:
        assert fast is None
        return
    assert fast is not None
    preds, succs, acq, rel, fixed, phs, acq_kinds, rel_kinds = fast
    assert (preds, succs, acq, rel, fixed, phs) == general[:6]
    assert fast_res == general_res  # resources numbered in the same order
    assert _sharing(acq) == _sharing(general[2])
    assert _sharing(rel) == _sharing(general[3])
    assert sorted(acq_kinds) == sorted(p for p in general[6] if p)
    assert sorted(rel_kinds) == sorted(p for p in general[7] if p)


@settings(max_examples=300, deadline=None)
@given(event_graphs(max_events=12))
def test_column_scan_equals_the_general_scan(g: EventGraph) -> None:
    _check(g)


@settings(max_examples=300, deadline=None)
@given(event_graphs(max_events=8), st.data())
def test_column_scan_gives_way_on_every_problem(g: EventGraph, data: st.DataObject) -> None:
    # one event made bad in one of the three ways the general scan reports
    events = list(g.events.values())
    k = data.draw(st.integers(0, len(events) - 1))
    how = data.draw(st.sampled_from(["missing dep", "undeclared semaphore", "undeclared pool", "new resource"]))
    ev = events[k]
    if how == "missing dep":
        bad = dataclasses.replace(ev, deps={**ev.deps, "nowhere": 0.5})
    elif how == "undeclared semaphore":
        bad = dataclasses.replace(ev, acquires={**ev.acquires, "s9": 1}, releases={**ev.releases, "s9": 1})
    elif how == "undeclared pool":
        bad = dataclasses.replace(ev, resources=[r for r in ev.resources if not r.endswith(":*")] + ["z:*"])
    else:  # not a problem: a resource no pool lists
        bad = dataclasses.replace(ev, resources=[r for r in ev.resources if not r.endswith(":*")] + ["c7.q"])
    h = g.copy_with(events=[bad if i == k else e for i, e in enumerate(events)])
    _check(h)
    # and compile_graph says the same with either scan
    real = compiled._scan_columns

    def outcome() -> object:
        try:
            cg = compiled.compile_graph(h)
        except GraphError as e:
            return str(e)
        return tuple(getattr(cg, f.name) for f in dataclasses.fields(cg) if f.name != "events")

    fast_out = outcome()
    try:
        compiled._scan_columns = lambda *args: None  # type: ignore[assignment]
        general_out = outcome()
    finally:
        compiled._scan_columns = real
    assert fast_out == general_out


def test_pair_tuples_are_shared_per_map_object() -> None:
    # two events with one shared map object share one pair tuple; an equal map of its own gets
    # its own tuple (what the general scan's memo by identity gives)
    from types import MappingProxyType

    shared = MappingProxyType({"s": 1})
    g = EventGraph(semaphores={"s": 1})
    g.add(Event.trusted("a", ("c0.x",), None, shared, shared, None, 1.0))
    g.add(Event.trusted("b", ("c0.x",), None, shared, shared, None, 1.0))
    g.add(Event.trusted("c", ("c0.x",), None, MappingProxyType({"s": 1}), None, None, 1.0))
    cg = g.compiled()
    assert cg.acq[0] is cg.acq[1]
    assert cg.acq[2] == cg.acq[0]
    assert cg.acq[2] is not cg.acq[0]
    assert cg.rel[2] == ()


