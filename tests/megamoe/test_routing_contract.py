"""Routing modes, the route conservation guardrail and the seed-004 grouped-GEMM contract."""

from __future__ import annotations

import json

import numpy as np
import pytest

import moeopt.megamoe as mm
from moeopt.megamoe import contract as ct
from moeopt.megamoe import routing
from moeopt.megamoe.routing import counts_matrix


def test_cyclic_matches_the_kernel_rule_by_hand():
    # world 2, 2 local experts (4 global), tokens 3, topk 2: source 0 routes are t*2+k for t in 0..2 ->
    # 0,1,2,3,4,5 mod 4 -> experts 0,1,2,3,0,1; source 1 (t = 3..5) -> 6..11 mod 4 -> 2,3,0,1,2,3
    w = mm.Workload(tokens=3, topk=2, world=2, local_experts=2, routing="cyclic")
    assert counts_matrix(w).tolist() == [[2, 2, 1, 1], [1, 1, 2, 2]]


def test_uniform_spreads_the_remainder_and_conserves():
    # 5 routes per source over 4 experts: 1 each, remainder 1 to expert (s*1 + 0) mod 4 = s
    w = mm.Workload(tokens=5, topk=1, world=2, local_experts=2, routing="uniform")
    assert counts_matrix(w).tolist() == [[2, 1, 1, 1], [1, 2, 1, 1]]


def test_random_and_zipf_are_seeded_and_conserve():
    a = counts_matrix(mm.Workload(tokens=64, topk=4, world=4, local_experts=8, routing="random", seed=3))
    b = counts_matrix(mm.Workload(tokens=64, topk=4, world=4, local_experts=8, routing="random", seed=3))
    assert (a == b).all()
    assert (a.sum(axis=1) == 256).all()
    z = counts_matrix(
        mm.Workload(tokens=512, topk=4, world=4, local_experts=8, routing="zipf", seed=1, zipf_skew=1.5)
    )
    # skewed popularity: the hottest expert gets far more than the uniform share 512*4/32 = 64
    assert z.sum(axis=0).max() > 2 * 64 * 4


def _reference_sampled(w: mm.Workload) -> np.ndarray:
    """The sampled routings as documented, one source at a time: per token, the ``topk`` largest
    of ``log weight + Generator.gumbel`` (Gumbel top-k, without replacement), zipf weights
    ``rank^-skew`` over a seeded permutation of the experts."""
    n_exp = w.world * w.local_experts
    rng = np.random.default_rng(w.routing_seed)
    logp = -w.skew * np.log(rng.permutation(n_exp) + 1.0) if w.routing == "zipf" else np.zeros(n_exp)
    out = np.zeros((w.world, n_exp), dtype=np.int64)
    for s in range(w.world):
        keys = logp[None, :] + rng.gumbel(size=(w.tokens, n_exp))
        top = np.argsort(-keys, axis=1, kind="stable")[:, : w.topk]
        out[s] = np.bincount(top.ravel(), minlength=n_exp)
    return out


@pytest.mark.parametrize(
    "kw",
    [
        {"tokens": 700, "topk": 8, "world": 6, "local_experts": 8, "routing": "zipf", "seed": 5},
        {"tokens": 300, "topk": 3, "world": 3, "local_experts": 4, "routing": "random", "seed": 2},
        {"tokens": 50, "topk": 1, "world": 2, "local_experts": 1, "routing": "zipf", "zipf_skew": 3.0},
        {"tokens": 40, "topk": 2, "world": 2, "local_experts": 1, "routing": "random"},  # topk = experts
    ],
)
def test_the_sampled_routings_draw_what_the_reference_draws(kw, monkeypatch):
    # the sampler is vectorised for speed (uniform draws, logs of whole arrays, a threshold per
    # token) and must pick exactly the experts the plain Gumbel top-k picks from the same draws,
    # also on its exact fallback path (forced here by an infinite tie gap)
    w = mm.Workload(**kw)
    want = _reference_sampled(w)
    assert (counts_matrix(w) == want).all()
    monkeypatch.setattr(routing, "_TIE_GAP", float("inf"))
    assert (counts_matrix(w) == want).all()


def test_route_conservation_guardrail_fires():
    with pytest.raises(mm.RouteConservationError, match=r"source rank 1 sends 3 routes; must be .* = 4"):
        mm.Workload(tokens=2, topk=2, world=2, local_experts=1, routing="explicit", counts=[[2, 2], [1, 2]])


def test_expert_id_file(tmp_path):
    p = tmp_path / "ids.json"
    p.write_text(json.dumps({"expert_ids": [[[0, 1], [1, 2]], [[3, 0], [2, 3]]]}))
    w = mm.Workload(tokens=2, topk=2, world=2, local_experts=2, routing="file", file=str(p))
    assert counts_matrix(w).tolist() == [[1, 2, 1, 0], [1, 0, 1, 2]]
    p.write_text(json.dumps({"expert_ids": [[[0, 0], [1, 2]], [[3, 0], [2, 3]]]}))
    with pytest.raises(mm.RouteConservationError, match="routes to an expert twice"):
        mm.Workload(tokens=2, topk=2, world=2, local_experts=2, routing="file", file=str(p))


def test_seed004_contract_by_hand():
    # 4 tokens, top-2 over 3 experts, padding 4: sizes [3, 3, 2]; offsets [0, 3, 6];
    # padded: expert 0 reserves ceil((3+1)/4)*4 = 4 rows, expert 1 also 4 -> [0, 4, 8];
    # m_blocks = ceil(8/4) + 3 = 5; block starts 0,4,8,12,16 -> experts 0,1,2,2,2
    c = ct.build_contract([[0, 1], [1, 2], [0, 2], [0, 1]], 3, padding_m=4, block_token=4)
    assert (c.group_sizes, c.group_offsets, c.group_padded_offsets) == ((3, 3, 2), (0, 3, 6), (0, 4, 8))
    assert c.m_blocks == 5
    assert c.group_idx_for_bx == (0, 1, 2, 2, 2)
    # block 1 is expert 1's first block: m_start = 4 - 4 + 3 = 3, rows = min(4, 3 - 0) = 3
    assert c.block_rows(1) == (1, 3, 3)
    ct.self_check(c)


@pytest.mark.parametrize("seed", range(5))
def test_seed004_self_checks_hold_on_random_routing(seed):
    rng = np.random.default_rng(seed)
    experts = [list(rng.choice(7, size=3, replace=False)) for _ in range(41)]
    c = ct.build_contract([[int(e) for e in row] for row in experts], 7, padding_m=16, block_token=16)
    ct.check_coverage(c)
    ct.check_padded_covers_compact(c)
    assert ct.check_kernel_addressing(c) > 0


def test_seed004_self_checks_catch_broken_tables():
    c = ct.build_contract([[0, 1], [1, 2], [0, 2]], 3, padding_m=4, block_token=4)
    dup = ct.GroupedGemmContract(
        **{**c.__dict__, "flat_token": (0, 0, 1, 1, 2, 2), "flat_expert": (0, 0, 1, 2, 0, 2)}
    )
    with pytest.raises(ct.ContractError, match="appears more than once"):
        ct.check_coverage(dup)
    squeezed = ct.GroupedGemmContract(**{**c.__dict__, "group_padded_offsets": (0, 2, 8)})
    with pytest.raises(ct.ContractError, match="overlaps"):
        ct.check_padded_covers_compact(squeezed)
    # offsets that skip compact row 2: expert 1 is read from [3, 5), so row 2 is never addressed
    shifted = ct.GroupedGemmContract(**{**c.__dict__, "group_offsets": (0, 3, 4)})
    with pytest.raises(ct.ContractError, match="compact row 2 is addressed 0 times"):
        ct.check_kernel_addressing(shifted)


def test_builder_blocks_by_hand():
    # sizes [3, 3, 2], padding = block_token = 4 (the tables of test_seed004_contract_by_hand):
    # expert 1 has one block (bx = 4 / 4 + 0 = 1), compact rows [3, 6)
    c = ct.contract_from_sizes([3, 3, 2], 4, 4)
    whole = [[(0, 0, 3)], [(0, 0, 3)], [(0, 0, 2)]]
    assert ct.check_builder_blocks(c, whole) == 3
    # a tile of expert 1 that covers only rows [0, 2): the kernel's block 1 holds rows [3, 6)
    with pytest.raises(ct.ContractError, match=r"expert 1: the builder's M-block 0 holds rows \[0, 2\)"):
        ct.check_builder_blocks(c, [[(0, 0, 3)], [(0, 0, 2)], [(0, 0, 2)]])
    # a block index past the expert's blocks, and an expert whose block is never computed
    with pytest.raises(ct.ContractError, match="no block of the expert"):
        ct.check_builder_blocks(c, [[(0, 0, 3)], [(0, 0, 3), (2, 0, 3)], [(0, 0, 2)]])
    with pytest.raises(ct.ContractError, match="block 0 is never computed"):
        ct.check_builder_blocks(c, [[(0, 0, 3)], [], [(0, 0, 2)]])


def _bands64(rows: int, cols: int, tile_m: int, tile_n: int) -> list:
    """A tile grid that cuts M in 64-row bands whatever tile_m is (an exact cover, so the grid
    check accepts it, but its M-blocks are not the kernel's blocks of tile_m rows)."""
    from moeopt.megamoe.planning import Tile

    return [
        Tile(m0, min(rows, m0 + 64), n0, min(cols, n0 + tile_n), mb, nb)
        for mb, m0 in enumerate(range(0, rows, 64))
        for nb, n0 in enumerate(range(0, cols, tile_n))
    ]


def test_simulate_checks_the_builder_against_the_grouped_gemm_tables(bs72):
    # bs72: 72 x 6 x 8 / 24 = 144 rows per expert, tile_m 256: one kernel block of 144 rows; a
    # grid of 64-row bands makes M-blocks [0, 64), [64, 128), [128, 144)
    from moeopt.registry import registered

    with registered("tile_grid", "test_bands64", lambda: _bands64):
        with pytest.raises(ct.ContractError) as ei:
            mm.simulate(bs72.with_overrides({"options.tile_grid": "test_bands64"}))
        msg = str(ei.value)
        assert msg.startswith("expert 0: the builder's M-block 0 holds rows [0, 64) of the expert")
        assert "compact rows [0, 144)" in msg  # what the kernel addresses there
        assert "\n" not in msg
        # with 64-row kernel blocks the same grid is the kernel's own cut
        r = mm.simulate(bs72.with_overrides({"options.tile_grid": "test_bands64", "kernel.tile_m": 64}))
        assert r["rank_results"][0]["contract"]["m_blocks"] > 0



def test_the_grid_check_accepts_exact_covers_and_refuses_the_rest():
    from moeopt.megamoe.errors import ScenarioError
    from moeopt.megamoe.planning import Tile, check_grid, rect_grid

    # 300 x 100 in 128 x 64 tiles: M blocks [0,128) [128,256) [256,300), N blocks [0,64) [64,100)
    grid = rect_grid(300, 100, 128, 64)
    assert [(t.m0, t.m1, t.n0, t.n1) for t in grid] == [
        (0, 128, 0, 64), (0, 128, 64, 100), (128, 256, 0, 64),
        (128, 256, 64, 100), (256, 300, 0, 64), (256, 300, 64, 100),
    ]  # fmt: skip
    # each a Tile (made from a plain tuple): block indices row-major, rows of the short last band
    assert all(type(t) is Tile for t in grid)
    assert [(t.mb, t.nb) for t in grid] == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]
    assert grid[4].rows == 300 - 256
    check_grid(grid, 300, 100)
    check_grid(list(reversed(grid)), 300, 100)  # any order of an exact cover
    # the regular grid with its last tile one row short (a gap), or one row longer (outside)
    short = [*grid[:-1], Tile(256, 299, 64, 100, 2, 1)]
    with pytest.raises(ScenarioError, match="gaps or overlaps"):
        check_grid(short, 300, 100)
    with pytest.raises(ScenarioError, match="lies outside"):
        check_grid([*grid[:-1], Tile(256, 301, 64, 100, 2, 1)], 300, 100)
    # equal area, but two tiles overlap where a third leaves a hole
    moved = [*grid[:-2], Tile(250, 294, 0, 64, 2, 0), Tile(256, 300, 64, 100, 2, 1), Tile(294, 300, 0, 64, 3, 0)]
    check_grid([*grid[:-2], Tile(256, 294, 0, 64, 2, 0), grid[-1], Tile(294, 300, 0, 64, 3, 0)], 300, 100)
    with pytest.raises(ScenarioError, match="gaps or overlaps|covered twice"):
        check_grid(moved, 300, 100)
    # the regular grid of a smaller output is not a cover of this one
    with pytest.raises(ScenarioError):
        check_grid(rect_grid(300, 64, 128, 64), 300, 100)
