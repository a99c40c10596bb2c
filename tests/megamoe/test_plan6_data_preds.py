"""RankGraph.data_preds drops each chain edge in one pass over the edges (issue 17). It must give
what the replaced code gave: the edges grouped per event in a dict first (the first predecessor
per event, a set for events chained after several), then one filter per event. That code is kept
here as the reference."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import moeopt.megamoe as mm
from moeopt.core.events import Event, EventGraph
from moeopt.megamoe.build.rankgraph import RankGraph
from moeopt.megamoe.simulate import build_graphs


def reference_data_preds(rg: RankGraph) -> list[tuple[tuple[int, float], ...]]:
    """RankGraph.data_preds before issue 17's helper plan6 (commit 9fb7aea)."""
    cg = rg.graph.compiled()
    index = cg.index
    one: dict[int, int] = {}
    more: dict[int, set[int]] = {}
    for a, b in rg.chain_edges:
        i, j = index[b], index[a]
        if i in one:
            more.setdefault(i, {one[i]}).add(j)
        else:
            one[i] = j
    preds = list(cg.preds)
    for i, j in one.items():
        ps = preds[i]
        skip = more.get(i)
        if skip is not None:
            preds[i] = tuple([pl for pl in ps if pl[0] not in skip])
        elif len(ps) == 2:
            p0, p1 = ps
            preds[i] = (p1,) if p0[0] == j else (p0,) if p1[0] == j else ps
        elif len(ps) == 1:
            preds[i] = () if ps[0][0] == j else ps
        else:
            preds[i] = tuple([pl for pl in ps if pl[0] != j])
    return preds


def _rank_graph(graph: EventGraph, chain_edges: set[tuple[str, str]]) -> RankGraph:
    """A RankGraph around ``graph``: data_preds reads only the graph and the chain edges."""
    none: Any = None  # fields data_preds never reads
    return RankGraph(
        rank=0,
        graph=graph,
        experts=[],
        contract=none,
        stage_members={},
        late_stages=set(),
        colocated_stages=set(),
        traffic_bytes={},
        macs=0.0,
        algo_hbm_bytes=0.0,
        algo_remote_in_bytes=0.0,
        algo_remote_out_bytes=0.0,
        combine_events=[],
        chain_edges=chain_edges,
        tail_event="e0",
        head_event="e0",
        waves_gmm1=0,
        waves_gmm2=0,
    )


@st.composite
def graphs(draw: st.DrawFn) -> tuple[EventGraph, set[tuple[str, str]]]:
    """A DAG of up to 12 events (deps on earlier events only, random λ) and chain edges among
    its edges; some chain edges name a pair that is no edge, which both versions leave alone."""
    n = draw(st.integers(1, 12))
    g = EventGraph()
    chain: set[tuple[str, str]] = set()
    lam = st.sampled_from([0.0, 0.5, 1.0, 2.25])
    for i in range(n):
        deps = draw(st.sets(st.integers(0, i - 1), max_size=5)) if i else set()
        # event i's deps in a drawn order (the pairs' order in preds follows it)
        order = draw(st.permutations(sorted(deps)))
        g.add(Event(f"e{i}", deps={f"e{p}": draw(lam) for p in order}, duration_us=1.0))
        if i:
            chained = draw(st.sets(st.integers(0, i - 1), max_size=3))
            chain |= {(f"e{p}", f"e{i}") for p in chained}
    return g, chain


@settings(max_examples=300, deadline=None)
@given(graphs())
def test_data_preds_is_the_reference(gc: tuple[EventGraph, set[tuple[str, str]]]) -> None:
    g, chain = gc
    want = reference_data_preds(_rank_graph(g, chain))
    assert _rank_graph(g, chain).data_preds() == want


def test_data_preds_on_a_built_rank() -> None:
    # a built rank: most chained events have one data edge and the chain edge, some have more,
    # and one event follows several events on its pinned resources (the multi-chain case)
    w = mm.Workload(tokens=64, topk=4, world=4, local_experts=4, routing="zipf", seed=3)
    s = mm.Scenario(workload=w, h=1024, hidden_dim=512, profile="pto-a2a3")
    for rg, _ranks in build_graphs(s).values():
        want = reference_data_preds(rg)
        rg._data_preds = None
        assert rg.data_preds() == want
        succs = [b for _a, b in rg.chain_edges]
        assert len(set(succs)) < len(succs)  # the multi-chain case is exercised
