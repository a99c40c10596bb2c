"""graph_floors' needed events: the successor scan against the marking from the ends back that it
replaced (the same set, so the same floors to the bit)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import moeopt.megamoe as mm
from moeopt.megamoe.analysis.bounds import _ancestors_or_self, graph_floors
from moeopt.megamoe.scenario import scenario_from_dict
from moeopt.megamoe.simulate import build_graphs


def _ancestors_marked_back(
    preds: Sequence[tuple[tuple[int, float], ...]], ends: list[int], n: int, topo: Sequence[int]
) -> list[bool]:
    """The replaced code (the reference): marked from the ends back along ``preds``, in reverse
    topological order (an event is reached only after all its successors)."""
    needed = [False] * n
    for i in ends:
        needed[i] = True
    for i in reversed(topo):
        if needed[i]:
            for p, _lam in preds[i]:
                needed[p] = True
    return needed


@st.composite
def _dags(
    draw: st.DrawFn,
) -> tuple[list[tuple[tuple[int, float], ...]], list[tuple[tuple[int, float], ...]], list[int], list[int]]:
    """A random DAG (edges only from an earlier to a later position of a random topological
    order), its preds and succs as the compiled graph holds them, the order and some ends."""
    n = draw(st.integers(0, 30))
    topo = draw(st.permutations(list(range(n))))
    edges = draw(
        st.sets(st.tuples(st.integers(0, max(n - 1, 0)), st.integers(0, max(n - 1, 0))), max_size=80)
    )
    preds: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    succs: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for a, b in sorted(edges):
        if a < b:  # positions in topo: an edge from the earlier event to the later one
            u, v = topo[a], topo[b]
            preds[v].append((u, 0.5))
            succs[u].append((v, 0.5))
    ends = draw(st.lists(st.integers(0, n - 1), max_size=5)) if n else []
    return [tuple(p) for p in preds], [tuple(s) for s in succs], ends, list(topo)


@settings(max_examples=300, deadline=None)
@given(_dags())
def test_successor_scan_is_the_marking_back(dag):
    preds, succs, ends, topo = dag
    n = len(topo)
    assert _ancestors_or_self(succs, ends, n, topo) == _ancestors_marked_back(preds, ends, n, topo)


def _layered() -> mm.Scenario:
    return scenario_from_dict(
        {
            "profile": "megamoe-a8w8",
            "h": 1024,
            "hidden_dim": 2048,
            "aic_num": 8,
            "workload": {"tokens": 300, "topk": 2, "world": 2, "local_experts": 2, "routing": "uniform"},
            "kernel": {"topo_urma": True},
            "options": {"orchestration": "layered"},
        },
        where="",
    )


def _pto(profile: str, routing: str) -> mm.Scenario:
    # (the shape test_plan6_walk.py plans: experts of one and of several M-blocks under zipf)
    w = mm.Workload(
        tokens=160, topk=4, world=4, local_experts=4, routing=routing, seed=3 if routing == "zipf" else None
    )
    return mm.Scenario(workload=w, h=2560, hidden_dim=4096, profile=profile)


_LATE_AIC = {
    "options.late_bind_pools": ["AIC", "AIV1"],
    "options.links": [
        {
            "producer": "gmm1",
            "consumer": "activation",
            "location": "gm",
            "depth": 0,
            "colocated_by_hardware": False,
        }
    ],
}


@pytest.mark.parametrize(
    "make",
    [
        lambda bs72: _pto("pto-a2a3", "cyclic"),
        lambda bs72: _pto("pto-a2a3-v1", "zipf"),
        lambda bs72: _layered(),
        lambda bs72: bs72,  # the seed's w8a8 shape
        lambda bs72: bs72.with_overrides(_LATE_AIC),  # late-bound cube tiles
    ],
    ids=["pto-a2a3", "pto-a2a3-v1-zipf", "layered", "w8a8-bs72", "late-bound-aic"],
)
def test_needed_events_of_real_graphs(bs72, make):
    """On the graphs the builders make, the same needed events as the marking back."""
    s = make(bs72)
    for rg, _ranks in build_graphs(s).values():
        cg = rg.graph.compiled()
        ends = [cg.index[n] for n in (rg.combine_events or [n for n in cg.names if n != rg.tail_event])]
        got = _ancestors_or_self(cg.succs, ends, cg.n, cg.topo)
        assert got == _ancestors_marked_back(cg.preds, ends, cg.n, cg.topo)
        assert any(got)
        graph_floors(rg)  # (runs through)
