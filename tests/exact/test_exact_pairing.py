"""The pairing theorem (moeopt.exact.pairing): which semaphores are exactly holding-interval cumulatives.

The property test checks the theorem itself: for random graphs with random acquire / release
patterns and random precedence-respecting start times, the semaphore's free level computed the
validator's way (changes at one instant applied together) equals capacity minus the cover of
the holding intervals of the pairing found, at every instant where anything changes.
"""

from __future__ import annotations

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

import moeopt as m
from moeopt.exact.pairing import Pairing, find_pairing


def _pairing(g: m.EventGraph, sem: str) -> Pairing | None:
    cg = g.compiled()
    return find_pairing(cg, cg.sem_names.index(sem))


def _named(g: m.EventGraph, p: Pairing) -> tuple[set[tuple[str, str, int]], set[tuple[str, int]]]:
    names = g.compiled().names
    return {(names[a], names[r], k) for a, r, k in p.pairs}, {(names[a], k) for a, k in p.unreleased}


def test_self_release_pairs_each_event_with_itself() -> None:
    # PSPLIB style: every job takes and gives back its own units.
    g = m.EventGraph(semaphores={"R": 4})
    g.add(m.Event("a", acquires={"R": 3}, releases={"R": 3}, duration_us=1.0))
    g.add(m.Event("b", deps={"a": 0.0}, acquires={"R": 2}, releases={"R": 2}, duration_us=1.0))
    p = _pairing(g, "R")
    assert p is not None
    assert _named(g, p) == ({("a", "a", 3), ("b", "b", 2)}, set())


def test_producer_consumer_and_unreleased_units() -> None:
    # p takes 2, its consumer c gives 1 back; the other unit is never released.
    g = m.EventGraph(semaphores={"slot": 2})
    g.add(m.Event("p", acquires={"slot": 2}, duration_us=1.0))
    g.add(m.Event("c", deps={"p": 0.0}, releases={"slot": 1}, duration_us=1.0))
    p = _pairing(g, "slot")
    assert p is not None
    assert _named(g, p) == ({("p", "c", 1)}, {("p", 1)})


def test_max_flow_finds_what_nearest_first_misses() -> None:
    # r1 descends from a1 and a2, r2 only from a1 (through m1, m2). Releasers go in topological
    # order (a1, a2, m1, r1, m2, r2): r1 looks at its predecessors a1 first and takes a1's unit,
    # leaving r2 nothing. The exact transportation check pairs (a2, r1) and (a1, r2).
    g = m.EventGraph(semaphores={"s": 2})
    g.add(m.Event("a1", acquires={"s": 1}, duration_us=1.0))
    g.add(m.Event("a2", acquires={"s": 1}, duration_us=1.0))
    g.add(m.Event("m1", deps={"a1": 0.0}, duration_us=1.0))
    g.add(m.Event("r1", deps={"a1": 0.0, "a2": 0.0}, releases={"s": 1}, duration_us=1.0))
    g.add(m.Event("m2", deps={"m1": 0.0}, duration_us=1.0))
    g.add(m.Event("r2", deps={"m2": 0.0}, releases={"s": 1}, duration_us=1.0))
    assert [g.compiled().names[i] for i in g.compiled().topo] == ["a1", "a2", "m1", "r1", "m2", "r2"]
    p = _pairing(g, "s")
    assert p is not None
    assert _named(g, p) == ({("a2", "r1", 1), ("a1", "r2", 1)}, set())


def test_release_by_a_non_descendant_has_no_pairing() -> None:
    # b gives back a unit that only a (unrelated to b) takes: the level depends on whether b
    # ends before a starts, which no cumulative over fixed intervals can express.
    g = m.EventGraph(semaphores={"s": 1})
    g.add(m.Event("a", acquires={"s": 1}, duration_us=1.0))
    g.add(m.Event("b", releases={"s": 1}, duration_us=1.0))
    assert _pairing(g, "s") is None


def test_more_releases_than_acquires_has_no_pairing() -> None:
    g = m.EventGraph(semaphores={"s": 3})
    g.add(m.Event("a", acquires={"s": 1}, duration_us=1.0))
    g.add(m.Event("b", deps={"a": 0.0}, releases={"s": 2}, duration_us=1.0))
    assert _pairing(g, "s") is None


# ---------------------------------------------------------------------- the theorem, checked
@st.composite
def _instances(draw: st.DrawFn) -> tuple[m.EventGraph, dict[str, float]]:
    n = draw(st.integers(2, 7))
    deps: list[dict[str, float]] = []
    for i in range(n):
        preds = draw(st.lists(st.integers(0, i - 1), max_size=2, unique=True)) if i else []
        deps.append({f"e{p}": float(draw(st.integers(0, 2))) for p in preds})
    dur = [float(draw(st.integers(0, 3))) for _ in range(n)]
    dag = nx.DiGraph()
    dag.add_nodes_from(range(n))
    dag.add_edges_from((int(p[1:]), i) for i, d in enumerate(deps) for p in d)
    acq = [0] * n
    rel = [0] * n
    for _ in range(draw(st.integers(1, 5))):
        a = draw(st.integers(0, n - 1))
        acq[a] += 1
        outs = [a, *sorted(nx.descendants(dag, a))]
        if draw(st.booleans()):  # released by itself or a descendant; else kept for ever
            rel[draw(st.sampled_from(outs))] += 1
    cap = sum(acq)  # never binding: the theorem is about the level, whatever its value
    g = m.EventGraph(semaphores={"s": cap})
    for i in range(n):
        g.add(
            m.Event(
                f"e{i}",
                deps=deps[i],
                acquires={"s": acq[i]} if acq[i] else {},
                releases={"s": rel[i]} if rel[i] else {},
                duration_us=dur[i],
            )
        )
    # precedence-respecting start times with random slack
    start: dict[str, float] = {}
    for i in range(n):
        ready = max((start[p] + dur[int(p[1:])] + lam for p, lam in deps[i].items()), default=0.0)
        start[f"e{i}"] = ready + draw(st.integers(0, 3))
    return g, start


@settings(max_examples=150, deadline=None)
@given(_instances())
def test_level_equals_capacity_minus_holding_cover(inst: tuple[m.EventGraph, dict[str, float]]) -> None:
    g, start = inst
    p = _pairing(g, "s")
    assert p is not None  # built pairable
    cg = g.compiled()
    dag = g.nx
    s = [start[nm] for nm in cg.names]
    f = [s[i] + cg.dur[i] for i in range(cg.n)]
    for a, r, _k in p.pairs:  # the pairing is a pairing: releaser is acquirer or descendant
        assert r == a or nx.has_path(dag, cg.names[a], cg.names[r])
    cap = g.semaphores["s"]
    instants = sorted(set(s) | set(f))
    for tau in instants:
        level = cap
        for i, ev in enumerate(g):
            if s[i] <= tau:
                level -= ev.acquires.get("s", 0)
            if f[i] <= tau:
                level += ev.releases.get("s", 0)
        cover = sum(k for a, r, k in p.pairs if s[a] <= tau < f[r])
        cover += sum(k for a, k in p.unreleased if s[a] <= tau)
        assert level == cap - cover, (tau, level, cover)
