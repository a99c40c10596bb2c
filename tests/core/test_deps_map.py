"""``Event._deps_map``, the mapping an event's read-only ``deps`` wraps, which ``compile_graph``'s
lean scan and the validator's array check read instead of ``deps``: every way of making an event
gives one with ``deps``' very entries in its order (the objects too), and a graph whose events
carry other mappings there (``Event.trusted`` handed a read-only map: the proxy itself) compiles
and is judged as the same graph made with plain dicts."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import moeopt as m
from moeopt.core.compiled import CompiledGraph, compile_graph
from moeopt.core.events import Event, EventGraph
from moeopt.core.validate import _flat_values, _passes
from moeopt.errors import SchedulingError
from moeopt.testing import event_graphs


def _entries(mp: Any) -> list[tuple[str, int, int]]:
    """A map's entries with their objects' identities (a copied value would differ)."""
    return [(k, id(k), id(v)) for k, v in mp.items()]


class _Sub(Event):
    __slots__ = ()


_deps = st.one_of(
    st.none(),
    st.just({}),
    st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.floats(0, 5), max_size=4),
)


@settings(max_examples=100, deadline=None)
@given(_deps, st.booleans())
def test_every_constructor_keeps_the_wrapped_map(deps: dict[str, float] | None, proxy: bool) -> None:
    handed: Any = MappingProxyType(deps) if proxy and deps is not None else deps
    made = [
        Event("x", deps=handed),
        Event.trusted("x", deps=handed),
        _Sub.trusted("x", deps=handed),
        *Event.trusted_many(["x"], [()], [handed], [None], [None], None, [0.0], [None]),
        dataclasses.replace(Event("y"), name="x", deps=handed),
    ]
    for ev in made:
        assert _entries(ev._deps_map) == _entries(ev.deps)
        assert list(ev._deps_map.items()) == list((handed or {}).items())
    for ev in made[1:4]:  # the trusted constructors hand the very map over (not copied)
        if handed:
            assert ev._deps_map is handed
        else:
            assert ev._deps_map == {}


def test_flat_values_of_mixed_maps() -> None:
    # dicts, read-only maps and other mappings in one list: every value, map after map
    maps: list[Any] = [{"a": 1.0}, MappingProxyType({"b": 2.0, "c": 3.0}), {}, {"d": 4.0}]
    assert _flat_values(maps, "d", 4).tolist() == [1.0, 2.0, 3.0, 4.0]
    assert _flat_values(maps[:1] + maps[3:], "d", 2).tolist() == [1.0, 4.0]
    assert _flat_values(maps[1:2], "d", 2).tolist() == [2.0, 3.0]


def _carried_otherwise(g: EventGraph, proxied: list[bool]) -> EventGraph:
    """``g`` again, each event made by ``Event.trusted`` from a copy of its dependencies: a
    read-only map where ``proxied`` says so (it then carries that proxy), else a dict."""
    out = EventGraph(semaphores=g.semaphores, pools=g.pools)
    for ev, px in zip(g, proxied):
        deps = MappingProxyType(dict(ev.deps)) if px else dict(ev.deps)
        out.add(
            Event.trusted(
                ev.name, ev.resources, deps, ev.acquires, ev.releases, ev.colocate_with, ev.duration_us
            )
        )
    return out


@settings(max_examples=150, deadline=None)
@given(event_graphs(), st.data())
def test_graphs_carrying_read_only_maps_compile_and_validate_alike(g: EventGraph, data: st.DataObject) -> None:
    proxied = data.draw(st.lists(st.booleans(), min_size=len(g), max_size=len(g)))
    h = _carried_otherwise(g, proxied)
    a, b = compile_graph(g), compile_graph(h)
    for f in dataclasses.fields(CompiledGraph):
        if f.name != "events":
            assert getattr(a, f.name) == getattr(b, f.name), f.name
    try:
        s = m.schedule(g)
    except SchedulingError:  # a drawn graph that deadlocks
        return
    assert _passes(g, s, True)
    assert _passes(h, s, True)
    # an event with dependencies started before one of them ends: both refuse it
    late = [ev.name for ev in g if ev.deps]
    if late:
        name = data.draw(st.sampled_from(late))
        pred = next(iter(g[name].deps))
        start, end = dict(s.start_us), dict(s.end_us)
        shift = s.end_us[pred] + g[name].deps[pred] - 0.5 - start[name]
        start[name] += shift
        end[name] += shift
        bad = m.Schedule(start_us=start, end_us=end, resources=s.resources)
        assert not _passes(g, bad, True)
        assert not _passes(h, bad, True)
