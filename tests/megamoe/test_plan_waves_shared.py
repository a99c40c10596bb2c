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


def _program_order_by_definition(
    experts: tuple[pl.ExpertPlan, ...], waves: tuple[tuple[pl.MGroup, ...], ...], stage: str
) -> tuple[pl.Item, ...]:
    """program_order's docstring as a loop: waves, then each wave's experts (first appearance),
    then the expert's walk filtered to the wave's m-blocks."""
    out: list[pl.Item] = []
    for w, wave in enumerate(waves):
        here: dict[int, set[int]] = {}
        for g in wave:
            here.setdefault(g.expert, set()).add(g.mb)
        for e, mbs in here.items():
            walk = experts[e].g1_tiles if stage == "gmm1" else experts[e].g2_tiles
            out.extend((w, e, t) for t in walk if t.mb in mbs)
    return tuple(out)


@pytest.mark.parametrize("packer", ["sequential_greedy", "longest_expert_first", "balanced_waves"])
@pytest.mark.parametrize("p1", [1, 2, 5])
@pytest.mark.parametrize("swizzle", [1, 3])
def test_program_order_is_each_waves_part_of_each_walk(packer: str, p1: int, swizzle: int) -> None:
    # zipf routing at tile_m 32: experts of many m-blocks, so that waves hold part of an
    # expert's m-blocks (the case program_order takes by position) and, swizzled, a walk visits
    # several m-blocks in turn
    w = mm.Workload(tokens=160, topk=4, world=4, local_experts=4, routing="zipf", seed=3)
    s = mm.Scenario(workload=w, h=1024, hidden_dim=512, profile="pto-a2a3").with_overrides(
        {"policy.wave_packing": packer, "p1_override": p1, "kernel.tile_m": 32, "kernel.swizzle_n": swizzle}
    )
    cfg = s.config
    counts = counts_matrix(w)
    partial = 0
    for rank in range(w.world):
        rows = counts[:, rank * 4 : (rank + 1) * 4]
        experts = pl.plan_experts(cfg, rows, w.tokens, rank, w.world, 0)
        waves = pl.plan_waves(cfg, experts, p1)
        for stage in ("gmm1", "gmm2"):
            assert pl.program_order(experts, waves, stage) == _program_order_by_definition(experts, waves, stage)
        blocks = {ex.index: -(-ex.rows // 32) for ex in experts}  # each expert's m-blocks
        partial += sum(
            len({g.mb for g in wave if g.expert == e}) < blocks[e] for wave in waves for e in {g.expert for g in wave}
        )
    assert partial > 0  # (some wave holds part of an expert's m-blocks)
