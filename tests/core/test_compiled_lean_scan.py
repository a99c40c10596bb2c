"""``compile_graph`` against its own earlier version (db7e175, copied below verbatim as
``_reference_compile``), on random valid and invalid graphs: missing dependencies, undeclared
semaphores and pools, over-capacity acquires, release-only semaphores, pool placeholders,
colocation and cycles. Every field of the compiled form must be equal and of the same type,
events with the same acquire (release) map must share one pair tuple exactly as before (the
scheduler's state numbers the distinct tuples by identity), and a bad graph must raise the same
GraphError message. The per-event part now takes a lean scan when no event has a problem of its
own, and the event-by-event scan that reports each problem otherwise: both are reached here."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from itertools import compress, repeat
from operator import attrgetter, is_not, not_
from types import MappingProxyType
from typing import Any

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

import moeopt as m
from moeopt.core.compiled import (
    CompiledGraph,
    _double_bound,
    _group_sites,
    _linked_groups,
    _scan_fast,
    _sem_pairs,
    compile_graph,
)
from moeopt.core.events import EventGraph, placeholder_role, split_resource
from moeopt.errors import GraphError

_coloc_of = attrgetter("colocate_with")
_duration = attrgetter("duration_us")


def _reference_compile(g: EventGraph) -> CompiledGraph:
    """compile_graph as of db7e175 (one Python step per event), verbatim."""
    events = list(g.events.values())
    names = list(g.events)  # the keys are the events' names, in the same order
    index = dict(zip(names, range(len(names))))
    sems = dict(g.semaphores)
    pools = dict(g.pools)
    problems: list[str] = []

    # --- one pass over the events: dependencies (missing ones reported), semaphore uses,
    # resources and pool placeholders
    res_names: list[str] = []
    res_index: dict[str, int] = {}

    one_res: list[tuple[int]] = []

    def rid(name: str) -> int:
        i = res_index.get(name)
        if i is None:
            i = len(res_names)
            res_index[name] = i
            res_names.append(name)
            one_res.append((i,))
        return i

    pool_names = list(pools)
    pool_id = {p: k for k, p in enumerate(pool_names)}
    pool_members = [tuple(rid(m) for m in pools[p]) for p in pool_names]
    sem_names = list(sems)
    sem_id = {s: k for k, s in enumerate(sem_names)}
    n = len(events)
    preds: list[tuple[tuple[int, float], ...]] = []
    succ_lists: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    acq: list[tuple[tuple[int, int], ...]] = []
    rel: list[tuple[tuple[int, int], ...]] = []
    fixed: list[tuple[int, ...]] = []
    placeholders: list[tuple[int, ...]] = []
    no_pairs: tuple[tuple[int, int], ...] = ()
    # events with equal acquire / release maps share one mapping object (see Event): its index
    # pairs are made once per distinct map, keyed by the mapping's identity (every mapping stays
    # alive in its event until the end of this function)
    acq_of: dict[int, tuple[tuple[int, int], ...]] = {}
    rel_of: dict[int, tuple[tuple[int, int], ...]] = {}
    odd_acq: list[tuple[tuple[int, int], ...]] = []  # pairs of maps naming undeclared semaphores
    odd_rel: list[tuple[tuple[int, int], ...]] = []
    pl: tuple[tuple[int, float], ...]

    def first_pairs(
        amounts: Mapping[str, int],
        memo: dict[int, tuple[tuple[int, int], ...]],
        odd: list[tuple[tuple[int, int], ...]],
        name: str,
        what: str,
    ) -> tuple[tuple[int, int], ...]:
        # the index pairs of a map not seen yet; a map naming an undeclared semaphore is reported
        # and not memoised, so that every event naming it is reported
        try:
            pairs = memo[id(amounts)] = tuple([(sem_id[sm], u) for sm, u in amounts.items()])
        except KeyError:
            pairs = _sem_pairs(name, what, amounts, sem_id, sems, problems)
            odd.append(pairs)
        return pairs

    for i, ev in enumerate(events):
        d = ev.deps
        try:
            # one or two predecessors, the common cases: unpacked, without a comprehension (a
            # function call each in this Python)
            # (and the successor lists appended to without a loop; every index is looked up
            # before the first append, so a missing name leaves them as they were)
            nd = len(d)
            if nd == 1:
                ((pn, lam),) = d.items()
                q = index[pn]
                pl = ((q, lam),)
                succ_lists[q].append((i, lam))
            elif nd == 2:
                (pn, lam), (pn2, lam2) = d.items()
                q, q2 = index[pn], index[pn2]
                pl = ((q, lam), (q2, lam2))
                succ_lists[q].append((i, lam))
                succ_lists[q2].append((i, lam2))
            else:
                pl = tuple([(index[pn], lam) for pn, lam in d.items()])
                for p, lam in pl:
                    succ_lists[p].append((i, lam))
        except KeyError:
            missing = [pn for pn in d if pn not in index]
            problems.append(f"event {ev.name!r} depends on missing event(s) {missing}")
            pl = tuple([(index[pn], lam) for pn, lam in d.items() if pn in index])
            for p, lam in pl:
                succ_lists[p].append((i, lam))
        preds.append(pl)
        # capacities and use are checked after the loop (the pairs of a non-empty map are never
        # empty unless all its semaphores are undeclared, and then they are not memoised)
        a_map, r_map = ev.acquires, ev.releases
        acq.append(
            (acq_of.get(id(a_map)) or first_pairs(a_map, acq_of, odd_acq, ev.name, "acquires"))
            if a_map
            else no_pairs
        )
        rel.append(
            (rel_of.get(id(r_map)) or first_pairs(r_map, rel_of, odd_rel, ev.name, "releases"))
            if r_map
            else no_pairs
        )
        rs = ev.resources
        if len(rs) == 1:
            # the common case: one resource already seen (one shared tuple per resource)
            j = res_index.get(rs[0])
            if j is not None:
                fixed.append(one_res[j])
                placeholders.append(())
                continue
        fx: list[int] = []
        ph: list[int] = []
        for r in rs:
            j = res_index.get(r)
            if j is not None:
                fx.append(j)
                continue
            role = placeholder_role(r)
            if role is None:
                fx.append(rid(r))
            elif role not in pool_id:
                problems.append(
                    f"event {ev.name!r} uses pool placeholder {r!r} but no pool {role!r} is declared "
                    f"(declared pools: {pool_names or 'none'})"
                )
            else:
                ph.append(pool_id[role])
        fixed.append(tuple(fx))
        placeholders.append(tuple(ph))
    sem_cap = [sems[sm] for sm in sem_names]
    # the distinct pair tuples stand for all the events that share them
    acq_kinds = [*acq_of.values(), *odd_acq]
    acquired = {k for pairs in acq_kinds for k, _u in pairs}
    released = {k for pairs in [*rel_of.values(), *odd_rel] for k, _u in pairs}
    if any(u > sem_cap[k] for pairs in acq_kinds for k, u in pairs):
        for i, k, u in [(i, k, u) for i, pairs in enumerate(acq) for k, u in pairs if u > sem_cap[k]]:
            problems.append(
                f"event {names[i]!r} acquires {u} units of semaphore {sem_names[k]!r} whose "
                f"capacity is {sem_cap[k]}: it could never start"
            )
    for sem in sorted(sem_names[k] for k in released - acquired):
        who = [ev.name for ev in events if sem in ev.releases][:5]
        problems.append(f"semaphore {sem!r} is released (by {who}) but never acquired")

    site_names: list[str] = []
    site_index: dict[str, int] = {}
    res_site: list[int] = []
    for r in res_names:
        parts = split_resource(r)
        assert parts is not None  # checked when the event / pool was made
        site = parts[0]
        if site not in site_index:
            site_index[site] = len(site_names)
            site_names.append(site)
        res_site.append(site_index[site])

    # --- colocation groups
    partner: dict[str, str] = {}
    for ev in compress(events, map(is_not, map(_coloc_of, events), repeat(None))):
        if ev.colocate_with not in index:
            problems.append(f"event {ev.name!r} is colocated with missing event {ev.colocate_with!r}")
            continue
        partner[ev.name] = ev.colocate_with
    group = [-1] * len(events)
    group_sites: list[tuple[int, ...] | None] = []
    if partner:
        # each group's members in index order, the groups in order of their first-added member
        ia = list(map(index.__getitem__, partner))
        ib = list(map(index.__getitem__, partner.values()))
        groups: Sequence[Sequence[int]]
        if len(set(ib)) == len(ib) and set(ib).isdisjoint(ia):
            # the common case: each event is linked to a partner that nothing else links to and
            # that links to nothing, so every group is one pair (what union-find finds then)
            groups = sorted(zip(map(min, ia, ib), map(max, ia, ib)))
        else:
            groups = _linked_groups(len(events), ia, ib)
        pool_sites = [{res_site[m] for m in members} for members in pool_members]
        # groups whose members occupy the same resources may use the same sites: worked out once
        # per distinct tuple of (fixed, placeholders) (a colocated stage repeats a few dozen over
        # a thousand groups); a group with a problem is not memoised, so each one is reported
        memo: dict[tuple[tuple[int, ...], ...], tuple[int, ...] | None] = {}
        for gid, members in enumerate(groups):
            key = tuple([x for i in members for x in (fixed[i], placeholders[i])])
            for i in members:
                group[i] = gid
            if key in memo:
                group_sites.append(memo[key])
                continue
            seen = len(problems)
            sites = _group_sites(
                members, fixed, placeholders, res_site, pool_sites, names, site_names, problems
            )
            if len(problems) == seen:
                memo[key] = sites
            group_sites.append(sites)
    # events outside any group with several placeholders bind each placeholder independently.

    # --- successors and a topological order
    succs = list(map(tuple, succ_lists))
    indeg = list(map(len, preds))
    # Kahn's algorithm, breadth first from the sources in index order: the order is its own queue
    # (a list iterated while it grows reaches every appended item, in order), which saves a
    # deque's pop and push per event
    topo = list(compress(range(n), map(not_, indeg)))
    put = topo.append
    for i in topo:
        for j, _ in succ_lists[i]:
            k = indeg[j] - 1
            indeg[j] = k
            if not k:
                put(j)
    if len(topo) < n:
        done = set(topo)
        rest = [names[i] for i in range(n) if i not in done]
        # the dependency graph among the events left over (each has a predecessor among them),
        # nodes and edges in graph order
        left = [i for i in range(n) if i not in done]
        sub = nx.DiGraph()
        sub.add_nodes_from(rest)
        sub.add_edges_from((names[p], names[i]) for i in left for p, _lam in preds[i] if p not in done)
        try:
            cyc = nx.find_cycle(sub)
            path = " -> ".join([str(u) for u, _v in cyc] + [str(cyc[0][0])])
            problems.append(f"the dependencies form a cycle: {path}")
        except nx.NetworkXNoCycle:  # pragma: no cover - Kahn left nodes, so a cycle exists
            problems.append(f"the dependencies form a cycle among {rest[:10]}")

    if problems:
        raise GraphError("invalid event graph:\n  " + "\n  ".join(problems))

    return CompiledGraph(
        names=tuple(names),
        index=MappingProxyType(index),
        dur=tuple(map(_duration, events)),
        preds=tuple(preds),
        succs=tuple(succs),
        topo=tuple(topo),
        res_names=tuple(res_names),
        res_index=MappingProxyType(res_index),
        res_site=tuple(res_site),
        site_names=tuple(site_names),
        fixed=tuple(fixed),
        placeholders=tuple(placeholders),
        pool_names=tuple(pool_names),
        pool_members=tuple(pool_members),
        acq=tuple(acq),
        rel=tuple(rel),
        sem_names=tuple(sem_names),
        sem_cap=tuple(sem_cap),
        group=tuple(group),
        group_sites=tuple(group_sites),
        events=tuple(events),
        double_bound=_double_bound(names, res_names, fixed, placeholders, pool_members),
    )


# --- random graphs

_SEMS = ["s0", "s1", "s2"]  # s2 is declared or not, per graph
_RES = ["c0.a", "c1.a", "c0.b", "c1.b", "c2.a", "P:*", "Q:*", "Z:*"]  # no pool Z is ever declared
_LAMS = [0.0, 0.5, 1.0]


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
    new, ref = _outcome(compile_graph, g), _outcome(_reference_compile, g)
    if isinstance(ref, str):
        assert new == ref
        return
    assert isinstance(new, CompiledGraph)
    for f in dataclasses.fields(CompiledGraph):
        a, b = getattr(new, f.name), getattr(ref, f.name)
        assert type(a) is type(b), f.name
        assert a == b, f.name
        if isinstance(b, tuple):  # the items' types too (a list inside would compare unequal)
            assert list(map(type, a)) == list(map(type, b)), f.name
    assert _sharing(new.acq) == _sharing(ref.acq)
    assert _sharing(new.rel) == _sharing(ref.rel)


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
    assert _scan_fast(*args, dict(g.pools)) is not None
    assert _scan_fast(*args, {}) is None  # no pool P
    assert _scan_fast(args[0], {"b": 1}, args[2], dict(g.pools)) is None  # b's dependency missing
    assert _scan_fast(args[0], args[1], {}, dict(g.pools)) is None  # no semaphore s


def test_graphs_without_events_match_the_reference() -> None:
    _assert_same(EventGraph())
    _assert_same(EventGraph(semaphores={"s": 2}, pools={"P": ["c0.a", "c1.a"]}))
