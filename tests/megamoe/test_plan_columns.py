"""GmmPlan.columns (a stage's tiles as integer columns, worked out from the walks' block
positions) against TileColumns.of(order), the item-by-item packing it stands for.

The columns are made per wave and expert from each walk's blocks (a rect_grid walk's tiles'
rows, cols, mb and nb computed from their row-major positions), cut to the wave's m-blocks.
Whatever the packing (several experts per wave, waves with part of an expert's m-blocks, the
layered macro waves), the grid (partial last rows and columns, swizzle groups that do not divide
the N-blocks) and the V1 small-M rebalance (whose N-slice grids have no blocks: no columns),
they must be the very integers of the plan's order, or None.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import moeopt.megamoe as mm
from moeopt.megamoe.build import plan as pl
from moeopt.megamoe.build.gmm import TileColumns
from moeopt.megamoe.routing import counts_matrix


def _same(got: TileColumns, want: TileColumns) -> None:
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype == np.int64
        assert a.shape == b.shape
        assert (a == b).all()


@settings(max_examples=30, deadline=None)
@given(
    st.sampled_from(["pto-a2a3", "pto-a2a3-v1"]),
    st.sampled_from(["sequential_greedy", "longest_expert_first", "balanced_waves"]),
    st.sampled_from([0, 1, 3]),
    st.sampled_from([1, 2, 3, 5]),
    st.sampled_from([(1024, 512), (1024, 704), (2560, 4096)]),
    st.integers(0, 5),
    st.booleans(),
)
def test_plan_columns_are_the_order_packed(
    profile: str, packer: str, per_wave: int, swizzle: int, dims: tuple[int, int], seed: int, layered: bool
) -> None:
    h, hidden = dims
    w = mm.Workload(tokens=160, topk=4, world=4, local_experts=4, routing="zipf", seed=seed)
    over: dict[str, object] = {
        "policy.wave_packing": packer,
        "p1_override": per_wave,
        "p2_override": per_wave,
        "kernel.swizzle_n": swizzle,
    }
    if layered:  # (the URMA kernel's orchestration: its profile and transport, its own waves)
        over = {"kernel.swizzle_n": swizzle, "options.orchestration": "layered", "kernel.topo_urma": True}
        profile = "megamoe-a8w8"
    s = mm.Scenario(workload=w, h=h, hidden_dim=hidden, profile=profile).with_overrides(over)
    cfg = s.config
    counts = counts_matrix(w)
    for rank in range(w.world):
        rows = counts[:, rank * 4 : (rank + 1) * 4]
        plan = pl.plan_rank(cfg, rows, w.tokens, rank, w.world, 1, w.topk)
        for gp in (plan.gmm1, plan.gmm2):
            want = TileColumns.of(gp.order)
            _same(TileColumns.of_plan(gp), want)
            # (of_plan falls back to the order on columns of another length: held apart here)
            a = gp.columns
            if a is None:  # only a walk that is not rect_grid's (V1's small-M GMM1 slices)
                assert profile == "pto-a2a3-v1"
                assert gp.stage == "gmm1"
                continue
            assert not a.flags.writeable
            _same(TileColumns(a[:, 0], a[:, 1], a[:, 2], a[:, 3], a[:, 4], a[:, 5]), want)


def test_a_walk_without_blocks_has_no_columns() -> None:
    # the V1 small-M rebalance cuts an expert with one M-tile into N slices (not rect_grid's
    # tiles): its GMM1 walk has no blocks, so GMM1 has no columns and is packed from its order
    w = mm.Workload(tokens=16, topk=1, world=2, local_experts=2, routing="uniform")
    cfg = mm.Scenario(workload=w, h=2560, hidden_dim=4096, profile="pto-a2a3-v1").config
    counts = counts_matrix(w)
    plan = pl.plan_rank(cfg, counts[:, 0:2], w.tokens, 0, w.world, 0, w.topk)
    # (the test's premise: the V1 profile rebalances small-M GMM1; should a profile change turn
    # that off, this must fail rather than skip, or the columns' fallback goes untested)
    assert cfg.gmm1_small_m_rebalance, "pto-a2a3-v1 no longer rebalances small-M GMM1"
    assert plan.gmm1.columns is None
    assert plan.gmm2.columns is not None
    _same(TileColumns.of_plan(plan.gmm1), TileColumns.of(plan.gmm1.order))
    _same(TileColumns.of_plan(plan.gmm2), TileColumns.of(plan.gmm2.order))
