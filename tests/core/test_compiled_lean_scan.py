"""``compile_graph``'s lean scan against its event-by-event scan (``_scan_events``, which reports
every problem of a graph) on random valid and invalid graphs: missing dependencies, undeclared
semaphores and pools, over-capacity acquires, release-only semaphores, pool placeholders,
colocation and cycles. Every field of the compiled form must be equal and of the same type,
events with the same acquire (release) map must share one pair tuple either way (the
scheduler's state numbers the distinct tuples by identity), and a bad graph must raise the same
GraphError message. The lean scan is taken when no event has a problem of its own (and gives up
otherwise): both are reached here."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any
from unittest import mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import moeopt as m
from moeopt.core import compiled
from moeopt.core.compiled import CompiledGraph, _scan_columns, _scan_rows, compile_graph
from moeopt.core.events import EventGraph
from moeopt.core.state import pair_numbers
from moeopt.core.validate import _pair_uses
from moeopt.errors import GraphError
from tests.core.test_compiled_reference import _reference

_SEMS = ["s0", "s1", "s2"]  # s2 is declared or not, per graph
_RES = ["c0.a", "c1.a", "c0.b", "c1.b", "c2.a", "P:*", "Q:*", "Z:*"]  # no pool Z is ever declared
_LAMS = [0.0, 0.5, 1.0]


def _reference_compile(g: EventGraph) -> CompiledGraph:
    """``compile_graph`` through the event-by-event scan alone (``_scan_events``, the per-event
    code it keeps for graphs with a problem: the lean scan is made to give up)."""
    with mock.patch.object(compiled, "_scan_fast", return_value=None):
        return compile_graph(g)


@st.composite
def graphs(draw: st.DrawFn, valid: bool = False) -> EventGraph:
    """A random graph, invalid or not. Names ``e<k>`` in a random insertion order; one to four
    dependencies on any event (cycles possible) or on a missing one; acquire / release maps
    from a few shared read-only maps (as the builders pass them: events share one map object)
    or fresh dicts (shared by value through Event's memo); resources, placeholders and
    colocation partners. ``valid``: a graph that compiles (acyclic, every name declared,
    capacities of 4 units, each event releases what it acquires, every fixed resource on site
    c0 and both pools with a member there, so every colocation group can use c0)."""
    n = draw(st.integers(1, 14))
    order = draw(st.permutations(range(n)))
    if valid:
        sems = dict.fromkeys(_SEMS, 4)
        pools = {"P": ["c0.a", "c1.a"], "Q": ["c1.b", "c0.b"]}
        res = st.lists(st.sampled_from(["c0.a", "c0.b", "P:*", "Q:*"]), min_size=1, max_size=3, unique=True)
    else:
        sems = {s: draw(st.integers(0, 3)) for s in _SEMS[: draw(st.integers(0, 3))]}
        pools = {}
        if draw(st.booleans()):
            pools["P"] = draw(st.sampled_from([["c0.a", "c1.a"], ["c1.a", "c2.a"], ["c2.c"]]))
        if draw(st.booleans()):
            pools["Q"] = draw(st.sampled_from([["c0.b", "c1.b"], ["c1.b"], ["c0.a", "c0.b"]]))
        res = st.lists(st.sampled_from(_RES), max_size=3, unique=True)
    maps = st.dictionaries(st.sampled_from(_SEMS), st.integers(1, 4), max_size=2)
    some = st.dictionaries(st.sampled_from(_SEMS), st.integers(1, 4), min_size=1, max_size=2)
    shared = [MappingProxyType(mp) for mp in draw(st.lists(some, max_size=3))]
    amounts: st.SearchStrategy[Mapping[str, int]] = (
        st.one_of(maps, st.sampled_from(shared)) if shared else maps
    )
    acyclic = valid or draw(st.booleans())
    g = EventGraph(semaphores=sems, pools=pools)
    evs = []
    for k in order:
        targets = [f"e{j}" for j in range(n) if j != k and (j < k or not acyclic)]
        if not valid and draw(st.integers(0, 3)) == 0:
            targets.append("ghost")
        size = min(4, len(targets))
        deps = draw(st.lists(st.sampled_from(targets), max_size=size, unique=True)) if size else []
        partner = draw(st.sampled_from([None, None, *(["ghost"] if not valid else []), *[f"e{j}" for j in range(n) if j != k]]))
        acquires = draw(amounts)
        evs.append(
            m.Event.trusted(
                f"e{k}",
                resources=draw(res),
                deps={d: draw(st.sampled_from(_LAMS)) for d in deps},
                acquires=acquires,
                releases=acquires if valid else draw(amounts),
                colocate_with=partner if draw(st.integers(0, 3)) == 0 else None,
                duration_us=draw(st.sampled_from([0.0, 1.0, 2.5])),
            )
        )
    g.add_all(evs)
    return g


def _outcome(compile_fn: Any, g: EventGraph) -> CompiledGraph | str:
    try:
        return compile_fn(g)  # type: ignore[no-any-return]
    except GraphError as err:
        return str(err)


def _sharing(tuples: Sequence[object]) -> list[int]:
    """Which entries are one object: each entry numbered by its object's first appearance."""
    first: dict[int, int] = {}
    return [first.setdefault(id(t), len(first)) for t in tuples]


def _assert_same(g: EventGraph) -> None:
    # the lean scan both ways: the edges as tuples first, and as arrays first
    for columns_from in (float("inf"), 0):
        with mock.patch.object(compiled, "COLUMNS_MIN_EVENTS", columns_from):
            _assert_same_as_reference(g)


def _assert_same_as_reference(g: EventGraph) -> None:
    new, ref = _outcome(compile_graph, g), _outcome(_reference_compile, g)
    if isinstance(ref, str):
        assert new == ref
        return
    assert isinstance(new, CompiledGraph)
    same = [f.name for f in dataclasses.fields(CompiledGraph) if f.name not in ("rows", "columns", "_derived")]
    for name in [*same, "preds", "succs"]:
        a, b = getattr(new, name), getattr(ref, name)
        assert type(a) is type(b), name
        assert a == b, name
        if isinstance(b, tuple):  # the items' types too (a list inside would compare unequal)
            assert list(map(type, a)) == list(map(type, b)), name
    assert _sharing(new.acq) == _sharing(ref.acq)
    assert _sharing(new.rel) == _sharing(ref.rel)
    _assert_edges(g, new)
    kept = new.derived("pair_numbers")  # (the arrays scan numbers the events' pairs on arrays)
    assert kept is None or kept == pair_numbers(new.acq, new.rel)
    if compiled.COLUMNS_MIN_EVENTS == 0:
        assert kept is not None
        # the validator's array check spreads each semaphore use from the tuples' kept numbers
        # as from the tuples themselves
        for pairs, key in ((new.acq, "acq_numbers"), (new.rel, "rel_numbers")):
            numbers = new.derived(key)
            assert numbers is not None
            for a, b in zip(_pair_uses(pairs, numbers), _pair_uses(pairs), strict=True):
                assert a.tolist() == b.tolist()


def _assert_edges(g: EventGraph, cg: CompiledGraph) -> None:
    """The compiled edges against the events themselves (tests/core/test_compiled_reference.py's
    hand-written predecessors, successors and Kahn's breadth-first order, independent of both
    scans), and the arrays' types."""
    want_preds, want_succs, topo = _reference(list(g.events.values()))
    assert cg.preds == tuple(want_preds)
    assert cg.succs == tuple(want_succs)
    assert cg.topo == tuple(topo)
    e = cg.edges
    assert (e.pred_ptr.dtype, e.succ_ptr.dtype) == (np.int64, np.int64)
    assert (e.pred_idx.dtype, e.succ_idx.dtype) == (np.intp, np.intp)
    assert (e.pred_lam.dtype, e.succ_lam.dtype) == (np.float64, np.float64)
    assert not any(a.flags.writeable for a in (e.pred_ptr, e.pred_idx, e.pred_lam, e.succ_ptr, e.succ_idx, e.succ_lam))


@settings(max_examples=120, deadline=None)
@given(graphs())
def test_compile_graph_matches_the_reference(g: EventGraph) -> None:
    _assert_same(g)


@settings(max_examples=60, deadline=None)
@given(graphs(valid=True))
def test_valid_graphs_match_the_reference(g: EventGraph) -> None:
    # the same comparison on graphs that compile (the fast scan end to end)
    assert isinstance(_reference_compile(g), CompiledGraph)
    _assert_same(g)


def test_each_scan_is_taken() -> None:
    # the fast scan gives up on an event with a problem of its own, and only then
    g = EventGraph(semaphores={"s": 1}, pools={"P": ["c0.a"]})
    g.add(m.Event("a", resources=["P:*"], acquires={"s": 1}, releases={"s": 1}))
    g.add(m.Event("b", resources=["c0.b"], deps={"a": 0.0}))
    args = (list(g.events.values()), {"a": 0, "b": 1}, {"s": 0})
    for scan in (_scan_rows, _scan_columns):
        assert scan(*args, dict(g.pools)) is not None
        assert scan(*args, {}) is None  # no pool P
        assert scan(args[0], {"b": 1}, args[2], dict(g.pools)) is None  # b's dependency missing
        assert scan(args[0], args[1], {}, dict(g.pools)) is None  # no semaphore s


def test_graphs_without_events_match_the_reference() -> None:
    _assert_same(EventGraph())
    _assert_same(EventGraph(semaphores={"s": 2}, pools={"P": ["c0.a", "c1.a"]}))


def test_alternating_maps_match_the_reference() -> None:
    # the lean scan keeps the last two distinct maps met: events alternating between two shared
    # maps (a tile's sub-core write-backs), a third one, an empty one and a return to the first
    # two must get the very pair tuples the event-by-event scan gives (one per distinct map)
    a, b, c = (MappingProxyType({"s0": 1}), MappingProxyType({"s1": 2}), MappingProxyType({"s0": 1, "s1": 1}))
    seq = [a, b, a, b, c, a, b, b, MappingProxyType({}), a, c, c, b, a]
    g = EventGraph(semaphores={"s0": 4, "s1": 4})
    g.add_all(
        m.Event.trusted(f"e{k}", resources=["c0.a"], acquires=mp, releases=seq[-1 - k], duration_us=1.0)
        for k, mp in enumerate(seq)
    )
    _assert_same(g)
    cg = compile_graph(g)
    assert _sharing(cg.acq) == _sharing(seq)  # one pair tuple per distinct map, by identity
    # (each pair: the semaphore's index among the declared ones, in declaration order, and its units)
    assert [dict(cg.acq[k]) for k in range(len(seq))] == [
        {cg.sem_names.index(s): u for s, u in mp.items()} for mp in seq
    ]
