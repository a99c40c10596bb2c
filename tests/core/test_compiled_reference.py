"""``compile_graph``'s index arrays against a plain reference on random graphs: predecessors
and successors by name lookups one edge at a time, the topological order by Kahn's algorithm
on a deque (breadth first from the sources in index order), and a missing dependency reported
with the others kept (the fast paths for one and two dependencies, the successor lists they
append to, and the order that is its own queue must give exactly these)."""

from __future__ import annotations

from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import moeopt as m
from moeopt.errors import GraphError


def _reference(
    events: list[m.Event],
) -> tuple[list[tuple[tuple[int, float], ...]], list[tuple[tuple[int, float], ...]], list[int]]:
    index = {ev.name: i for i, ev in enumerate(events)}
    preds = [tuple((index[p], lam) for p, lam in ev.deps.items()) for ev in events]
    succs: list[list[tuple[int, float]]] = [[] for _ in events]
    for i, pl in enumerate(preds):
        for p, lam in pl:
            succs[p].append((i, lam))
    indeg = [len(pl) for pl in preds]
    queue = deque(i for i in range(len(events)) if not indeg[i])
    topo = []
    while queue:
        i = queue.popleft()
        topo.append(i)
        for j, _lam in succs[i]:
            indeg[j] -= 1
            if not indeg[j]:
                queue.append(j)
    return preds, [tuple(s) for s in succs], topo


@st.composite
def dags(draw: st.DrawFn) -> list[m.Event]:
    # events in a random order whose dependencies point at earlier-numbered ones (a DAG),
    # with one to four dependencies of random λ each
    n = draw(st.integers(1, 25))
    order = draw(st.permutations(range(n)))
    events = []
    for k in order:
        deps = draw(st.lists(st.integers(0, k - 1), max_size=4, unique=True)) if k else []
        lams = draw(st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=len(deps), max_size=len(deps)))
        events.append(
            m.Event(
                f"e{k}",
                resources=[f"c{k % 3}.a"],
                deps=dict(zip((f"e{d}" for d in deps), lams)),
                duration_us=1.0,
            )
        )
    return events


@settings(max_examples=60, deadline=None)
@given(dags())
def test_compiled_arrays_match_the_reference(events: list[m.Event]) -> None:
    g = m.EventGraph()
    g.add_all(events)
    cg = g.compiled()
    preds, succs, topo = _reference(events)
    assert list(cg.preds) == preds
    assert list(cg.succs) == succs
    assert list(cg.topo) == topo


@pytest.mark.parametrize(
    "deps",
    [{"ghost": 0.0}, {"a": 0.0, "ghost": 1.0}, {"ghost": 0.0, "a": 1.0}, {"a": 0.0, "b": 0.5, "ghost": 1.0}],
)
def test_a_missing_dependency_is_reported_with_one_or_more_others(deps: dict[str, float]) -> None:
    # one, two or three dependencies (each path of compile_graph's loop), one of them missing
    g = m.EventGraph()
    g.add(m.Event("a", resources=["c0.a"], duration_us=1.0))
    g.add(m.Event("b", resources=["c0.a"], duration_us=1.0))
    g.add(m.Event("x", resources=["c0.a"], deps=deps, duration_us=1.0))
    with pytest.raises(GraphError, match=r"event 'x' depends on missing event\(s\) \['ghost'\]"):
        g.compiled()
