"""planning.checked_walk (issue 17) stands for what plan_experts did before: check_grid, then
swizzle_order. A grid that is exactly rect_grid's is walked by list slices instead of through a
dict of blocks. These tests compare it with that sequence (swizzle_order, unchanged, walks every
grid block by block through a dict: the reference for the slice walk) on exact rect grids,
reordered and rebalanced grids, broken grids (the same error) and swizzle widths <= 0; and the
plan of zipf ranks against the plan built through the reference. small_m_rebalance's reordered
test is compared with the old condition."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import moeopt.megamoe as mm
from moeopt.megamoe.build import plan as pl
from moeopt.megamoe.errors import ScenarioError
from moeopt.megamoe.planning import Tile, check_grid, checked_walk, rect_grid, swizzle_order
from moeopt.megamoe.routing import counts_matrix


def reference_walk(tiles: Sequence[Tile], rows: int, cols: int, swizzle_n: int, name: str) -> list[Tile]:
    check_grid(tiles, rows, cols, name)
    return swizzle_order(tiles, swizzle_n)


def _outcome(f, *args):  # type: ignore[no-untyped-def]
    """The result, or the exception's type and message."""
    try:
        return ("ok", f(*args))
    except (ScenarioError, ValueError) as e:
        return (type(e).__name__, str(e))


@st.composite
def grids(draw: st.DrawFn) -> tuple[list[Tile], int, int]:
    """A rect grid of a small output, as it is or changed: reordered, one tile dropped (a gap),
    cut into whole-width N slices as small_m_rebalance does, or one tile's block index off."""
    # at most (500 / 16)^2 = 1,024 tiles: cheap examples
    rows, cols = draw(st.integers(1, 500)), draw(st.integers(1, 500))
    tile_m, tile_n = draw(st.integers(16, 300)), draw(st.integers(16, 300))
    tiles = rect_grid(rows, cols, tile_m, tile_n)
    how = draw(st.sampled_from(["as is", "as is", "shuffled", "gap", "slices", "index off"]))
    if how == "shuffled":
        tiles = draw(st.permutations(tiles))
    elif how == "gap" and len(tiles) > 1:
        tiles = tiles[:-1]
    elif how == "slices":
        k = draw(st.integers(1, min(cols, 6)))
        edges = [cols * i // k for i in range(k + 1)]
        tiles = [Tile(0, rows, edges[i], edges[i + 1], 0, i) for i in range(k) if edges[i] < edges[i + 1]]
    elif how == "index off":
        i = draw(st.integers(0, len(tiles) - 1))
        t = tiles[i]
        tiles = [*tiles[:i], t._replace(nb=t.nb + draw(st.sampled_from([-1, 1, 5]))), *tiles[i + 1 :]]
    return tiles, rows, cols


@settings(max_examples=300, deadline=None)
@given(grids(), st.integers(-2, 12))
def test_checked_walk_is_check_then_swizzle(grid: tuple[list[Tile], int, int], swizzle_n: int) -> None:
    tiles, rows, cols = grid
    want = _outcome(reference_walk, tiles, rows, cols, swizzle_n, "g")
    got = _outcome(checked_walk, tiles, rows, cols, swizzle_n, "g")
    assert got == want
    if got[0] == "ok":
        assert all(type(t) is Tile for t in got[1])


def test_a_rect_grid_walk_by_hand() -> None:
    # 3 M-blocks x 5 N-blocks, swizzle 2: groups of N-blocks {0, 1}, {2, 3}, {4}; the first and
    # third group walk M-blocks 0, 1, 2, the second 2, 1, 0 (gmm_common.h L66-91 snake)
    tiles = rect_grid(3 * 128, 5 * 256, 128, 256)
    walk = checked_walk(tiles, 3 * 128, 5 * 256, 2)
    assert [(t.mb, t.nb) for t in walk] == [
        (0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1),
        (2, 2), (2, 3), (1, 2), (1, 3), (0, 2), (0, 3),
        (0, 4), (1, 4), (2, 4),
    ]  # fmt: skip


def test_a_numpy_indexed_rect_grid_walks_as_the_reference() -> None:
    # a custom grid with NumPy block indices equal to rect_grid's tiles (values compare equal)
    tiles = [Tile(*(np.int64(x) for x in t)) for t in rect_grid(700, 900, 128, 256)]
    assert checked_walk(tiles, 700, 900, 3) == reference_walk(tiles, 700, 900, 3, "g")


def _old_rebalance_keeps(tiles: list[Tile], cols: int, cores: int) -> bool:
    """small_m_rebalance's condition as of commit 9fb7aea (True: the tiles stay)."""
    units = cols // pl.REBALANCE_COLS
    return bool(
        cols % pl.REBALANCE_COLS or len({t.mb for t in tiles}) != 1 or len(tiles) >= cores or units < cores
    )


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 400),
    st.sampled_from([32, 64, 96, 100, 1024, 4096]),
    st.integers(32, 300),
    st.integers(1, 40),
)
def test_small_m_rebalance_keeps_what_it_kept(rows: int, cols: int, tile_m: int, cores: int) -> None:
    tiles = rect_grid(rows, cols, tile_m, 256)
    got = pl.small_m_rebalance(tiles, rows, cols, cores)
    assert (got is tiles) == _old_rebalance_keeps(tiles, cols, cores)


@pytest.mark.parametrize("profile", ["pto-a2a3", "pto-a2a3-v1"])
def test_plan_is_the_plan_through_the_reference_walk(profile: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # zipf routing: experts of different row counts (one and several M-blocks); GMM1 and GMM2 of
    # 16 and 10 N-blocks of 256 columns: two swizzle groups of at most 9, the second walks the
    # M-blocks backwards; the V1 profile has the small-M GMM1 rebalance (N-slice grids, not
    # rect_grid's)
    w = mm.Workload(tokens=160, topk=4, world=4, local_experts=4, routing="zipf", seed=3)
    cfg = mm.Scenario(workload=w, h=2560, hidden_dim=4096, profile=profile).config
    counts = counts_matrix(w)
    got = [
        pl.plan_rank(cfg, counts[:, r * 4 : (r + 1) * 4], w.tokens, r, w.world, 1, w.topk) for r in range(4)
    ]
    # (plan_experts takes each walk with its blocks; the reference walk has none, and the plan's
    # columns, when there are some, are held to its order by tests/megamoe/test_plan_columns.py)
    monkeypatch.setattr(pl, "checked_walk_blocks", lambda *a: (reference_walk(*a), None))
    want = [
        pl.plan_rank(cfg, counts[:, r * 4 : (r + 1) * 4], w.tokens, r, w.world, 1, w.topk) for r in range(4)
    ]
    assert got == want
