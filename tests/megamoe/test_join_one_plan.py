"""build_rank with the V1 kernel's GMM2 join check builds the rank twice (without the join, to
read the join expert off its schedule, then with it). A plan does not depend on the join, so both
builds read one plan: these tests check that the plan is made once, and that the graph built that
way is the graph built from a fresh plan (the pre-issue-17 way: compose planning on its own)."""

from __future__ import annotations

import pytest

import moeopt.megamoe as mm
import moeopt.megamoe.build.implementation as impl_mod
from moeopt.megamoe.build.implementation import NO_JOIN, build_rank, compose, implementation_for, join_expert
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
