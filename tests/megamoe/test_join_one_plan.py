"""build_rank with the V1 kernel's GMM2 join check builds the rank twice (without the join, to
read the join expert off its schedule, then with it). A plan does not depend on the join, so both
builds read one plan: these tests check that the plan is made once, and that the graph built that
way is the graph built from a fresh plan (the pre-issue-17 way: compose planning on its own)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest

import moeopt.megamoe as mm
import moeopt.megamoe.build.implementation as impl_mod
from moeopt.core.events import Event
from moeopt.core.scheduler import schedule
from moeopt.megamoe.build.implementation import NO_JOIN, build_rank, compose, implementation_for, join_expert
from moeopt.megamoe.build.rankgraph import RankGraph
from moeopt.megamoe.routing import counts_matrix
from moeopt.testing.rankgraph import rank_graph_rows


def _v1(tokens: int) -> mm.Scenario:
    # the seed-002 shape (7168 x 4096, 8 ranks of 16 experts) on the V1 profile, whose cyclic
    # routing makes GMM1 finish before a GMM2 boundary (a join is found on every rank)
    return mm.Scenario(
        workload=mm.Workload(tokens=tokens, topk=8, world=8, local_experts=16, routing="cyclic"),
        h=7168,
        hidden_dim=4096,
        profile="pto-a2a3-v1",
    )


@pytest.mark.parametrize("tokens", [128, 512])
def test_v1_rank_plans_once_and_builds_the_same_graph(tokens: int, monkeypatch: pytest.MonkeyPatch) -> None:
    s = _v1(tokens)
    cfg, w = s.config, s.workload
    assert cfg.gmm2_join_check is not None  # the profile under test has the join check
    counts = counts_matrix(w)
    calls = []
    real = impl_mod.plan_rank
    monkeypatch.setattr(impl_mod, "plan_rank", lambda *a, **k: calls.append(a) or real(*a, **k))
    rg = build_rank(cfg, w.tokens, w.topk, w.world, counts, 0, w.shared_expert_num)
    assert len(calls) == 1

    # the reference: both composes plan on their own (as before this change)
    impl = implementation_for(cfg)
    n_local = counts.shape[1] // w.world
    rows, own = counts[:, :n_local], counts[0]
    alone = compose(impl, cfg, w.tokens, w.topk, w.world, rows, 0, w.shared_expert_num, own, NO_JOIN)
    join = join_expert(alone, cfg, cfg.gmm2_join_check, cfg.c("epoch_sync_us"))
    assert join != NO_JOIN  # the case in which the rank is built twice
    ref = compose(impl, cfg, w.tokens, w.topk, w.world, rows, 0, w.shared_expert_num, own, join)
    assert rank_graph_rows(rg) == rank_graph_rows(ref)


def _first_join_by_event(rg: RankGraph, start_us: Mapping[str, float], g1_done: float, check_from: int) -> int:
    """The event-by-event reading of a schedule that first_join replaced (the reference)."""
    first: dict[int, float] = {}
    for name, ev in rg.graph.events.items():
        lab = ev.labels
        if lab.get("stage") == "gmm2" and not lab.get("shared"):
            e = int(lab["expert"])
            first[e] = min(first.get(e, float("inf")), start_us[name])
    for e in sorted(first):
        if e >= check_from and g1_done <= first[e]:
            return e
    return NO_JOIN


@pytest.mark.parametrize("profile", ["pto-a2a3-v1", "pto-a2a3"])
def test_first_join_reads_the_schedule_as_the_event_loop_did(profile: str) -> None:
    # a V1 rank (a shared expert too, so that shared GMM2 tiles are left out) and a baseline one,
    # every GMM1 end from before the first boundary to after the last, every check expert
    s = mm.Scenario(
        workload=mm.Workload(tokens=256, topk=8, world=8, local_experts=16, routing="zipf", shared_expert_num=1),
        h=7168,
        hidden_dim=4096,
        profile=profile,
    )
    cfg, w = s.config, s.workload
    counts = counts_matrix(w)
    impl = implementation_for(cfg)
    n_local = counts.shape[1] // w.world
    for rank in (0, 3):
        rows, own = counts[:, rank * n_local : (rank + 1) * n_local], counts[rank]
        rg = compose(impl, cfg, w.tokens, w.topk, w.world, rows, rank, w.shared_expert_num, own, NO_JOIN)
        start = schedule(rg.graph, normalize=False).start_us
        # (the starts by event position too: what join_expert reads off a greedy schedule's
        # own columns while its maps are unmade)
        by_position = np.array([start[n] for n in rg.graph.events], float)
        tiles = [n for n, ev in rg.graph.events.items() if ev.labels.get("stage") == "gmm2"]
        assert tiles
        assert any(rg.graph[n].labels.get("shared") for n in tiles)
        ends = sorted({start[n] for n in tiles})
        for g1_done in (-1.0, ends[0], ends[len(ends) // 2], ends[-1], ends[-1] + 1.0):
            for check_from in (0, 1, 5, 16):
                want = _first_join_by_event(rg, start, g1_done, check_from)
                assert impl_mod.first_join(rg.graph.events, start, g1_done, check_from) == want
                assert impl_mod.first_join(rg.graph.events, by_position, g1_done, check_from) == want



def test_first_join_other_maps_and_labels() -> None:
    # first_join's fast readings (labels by subscript, the starts picked by position from a map in
    # graph order, the experts counted) against the event-by-event reference where each is left:
    # a start map in another order, an event without a stage label, tiles without a shared label
    s = mm.Scenario(
        workload=mm.Workload(tokens=256, topk=8, world=8, local_experts=16, routing="zipf", shared_expert_num=1),
        h=7168,
        hidden_dim=4096,
        profile="pto-a2a3-v1",
    )
    cfg, w = s.config, s.workload
    counts = counts_matrix(w)
    impl = implementation_for(cfg)
    n_local = counts.shape[1] // w.world
    rg = compose(impl, cfg, w.tokens, w.topk, w.world, counts[:, :n_local], 0, w.shared_expert_num, counts[0], NO_JOIN)
    start = schedule(rg.graph, normalize=False).start_us
    events = dict(rg.graph.events)
    reordered = dict(reversed(start.items()))
    unlabelled = dict(events)
    flag = next(n for n, ev in events.items() if ev.labels.get("stage") == "flag")
    unlabelled[flag] = Event(flag, deps=dict(events[flag].deps))  # no labels at all
    no_shared = {
        n: Event(n, resources=list(ev.resources), duration_us=ev.duration_us,
                 labels={k: v for k, v in ev.labels.items() if k != "shared"})
        if ev.labels.get("stage") == "gmm2" else ev
        for n, ev in events.items()
    }
    tiles = sorted({start[n] for n, ev in events.items() if ev.labels.get("stage") == "gmm2"})
    for g1_done in (tiles[0], tiles[len(tiles) // 2], tiles[-1] + 1.0):
        for check_from in (0, 3, 16):
            want = _first_join_by_event(rg, start, g1_done, check_from)
            assert impl_mod.first_join(events, reordered, g1_done, check_from) == want
            assert impl_mod.first_join(unlabelled, start, g1_done, check_from) == want
            # (without the shared label, the shared expert's tiles count as its own)
            no_shared_want = _first_join_by_event(
                RankGraphLike(no_shared), start, g1_done, check_from  # type: ignore[arg-type]
            )
            assert impl_mod.first_join(no_shared, start, g1_done, check_from) == no_shared_want


class RankGraphLike:
    """What _first_join_by_event reads of a RankGraph: its graph's events."""

    def __init__(self, events: Mapping[str, Event]) -> None:
        self.graph = self
        self.events = events

