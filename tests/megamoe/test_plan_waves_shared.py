"""plan_rank packs GMM2's waves only when their m-groups per wave differ from GMM1's; with the
same count it reuses GMM1's waves. The plan must be the one packed twice (the reference path:
plan_waves for each stage)."""

from __future__ import annotations

import pytest

import moeopt.megamoe as mm
from moeopt.megamoe.build import plan as pl
from moeopt.megamoe.routing import counts_matrix


@pytest.mark.parametrize("packer", ["sequential_greedy", "longest_expert_first", "balanced_waves"])
@pytest.mark.parametrize(("p1", "p2"), [(0, 0), (3, 3), (2, 5), (0, 4)])
def test_plan_rank_is_the_plan_packed_per_stage(packer: str, p1: int, p2: int) -> None:
    # zipf routing: experts with different row counts (several m-blocks each at tile_m 128), so
    # the packers' orders differ and a wave of 3 or 5 m-groups mixes experts
    w = mm.Workload(tokens=160, topk=4, world=4, local_experts=4, routing="zipf", seed=3)
    s = mm.Scenario(workload=w, h=1024, hidden_dim=512, profile="pto-a2a3").with_overrides(
        {"policy.wave_packing": packer, "p1_override": p1, "p2_override": p2}
    )
    cfg = s.config
    counts = counts_matrix(w)
    for rank in range(w.world):
        rows = counts[:, rank * 4 : (rank + 1) * 4]
        got = pl.plan_rank(cfg, rows, w.tokens, rank, w.world, 0, w.topk)
        experts = pl.plan_experts(cfg, rows, w.tokens, rank, w.world, 0)
        w1, w2 = pl.plan_waves(cfg, experts, p1), pl.plan_waves(cfg, experts, p2)
        assert got.gmm1 == pl.GmmPlan("gmm1", w1, pl.program_order(experts, w1, "gmm1"))
        assert got.gmm2 == pl.GmmPlan("gmm2", w2, pl.program_order(experts, w2, "gmm2"))
        assert (got.gmm2.waves is got.gmm1.waves) == (p1 == p2)
