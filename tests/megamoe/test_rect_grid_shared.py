"""planning.rect_grid with shared whole M-blocks, held to the grid it replaced.

rect_grid keeps, per (cols, tile_m, tile_n), the tiles of whole M-blocks of the largest grid
made so far and cuts every grid out of them (plus its own partial last M-block), so that
_is_rect_grid confirms a grid by comparing tile objects by identity instead of rebuilding it.
Whatever the order of the calls (the kept tiles grow, or are dropped at the bound), every grid
must be the row-major grid the old code made, tile for tile and of the same types, and
_is_rect_grid must answer as the old rebuild-and-compare did.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moeopt.megamoe import planning
from moeopt.megamoe.planning import Tile, _is_rect_grid, rect_grid


def reference_grid(rows: int, cols: int, tile_m: int, tile_n: int) -> list[Tile]:
    """The grid as rect_grid made it before (every tile made anew, row-major)."""
    return [
        Tile(m0, min(rows, m0 + tile_m), n0, min(cols, n0 + tile_n), mb, nb)
        for mb, m0 in enumerate(range(0, rows, tile_m))
        for nb, n0 in enumerate(range(0, cols, tile_n))
    ]


def reference_is_rect(tiles: list[Tile], rows: int, cols: int) -> bool:
    """_is_rect_grid as it was: the grid of the first tile's extent rebuilt and compared."""
    t = tiles[0]
    tile_m, tile_n = t.m1 - t.m0, t.n1 - t.n0
    if tile_m <= 0 or tile_n <= 0 or rows <= 0 or cols <= 0:
        return False
    return list(tiles) == reference_grid(rows, cols, tile_m, tile_n)


_shapes = st.tuples(
    st.integers(0, 1200),
    st.sampled_from([7, 96, 256, 700]),
    st.sampled_from([9, 16, 100, 128]),
    st.sampled_from([5, 128, 256, 300]),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_shapes, min_size=1, max_size=8), st.booleans())
def test_grids_in_any_call_order_are_the_reference(
    calls: list[tuple[int, int, int, int]], small: bool
) -> None:
    # (a bound of 1: the kept tiles are dropped whenever another shape comes, and rebuilt)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(planning, "_WHOLE_BLOCKS", {})
        if small:
            mp.setattr(planning, "_WHOLE_BLOCKS_MAX", 1)
        for rows, cols, tile_m, tile_n in calls:
            got = rect_grid(rows, cols, tile_m, tile_n)
            want = reference_grid(rows, cols, tile_m, tile_n)
            assert got == want
            assert all(type(t) is Tile and all(type(x) is int for x in t) for t in got)
            if got:
                assert _is_rect_grid(got, rows, cols)
                assert _is_rect_grid(want, rows, cols)  # (tiles made elsewhere: compared by value)


@settings(max_examples=60, deadline=None)
@given(_shapes, st.integers(0, 10_000), st.sampled_from(["m1", "n1", "mb", "drop", "swap"]))
def test_is_rect_grid_answers_as_the_rebuild(shape: tuple[int, int, int, int], at: int, how: str) -> None:
    rows, cols, tile_m, tile_n = shape
    tiles = rect_grid(rows, cols, tile_m, tile_n)
    if not tiles:
        return
    i = at % len(tiles)
    bad = list(tiles)
    if how == "drop":
        del bad[i]
    elif how == "swap":
        j = (i + 1) % len(bad)
        bad[i], bad[j] = bad[j], bad[i]
    else:
        bad[i] = bad[i]._replace(**{how: getattr(bad[i], how) + 1})
    for grid in (tiles, bad):
        if grid:
            assert _is_rect_grid(grid, rows, cols) == reference_is_rect(grid, rows, cols)
            # (another extent for the same grid: not rect_grid's of it)
            assert _is_rect_grid(grid, rows + 1, cols) == reference_is_rect(grid, rows + 1, cols)


def test_grids_share_their_whole_blocks() -> None:
    # 300 rows of 128: two whole M-blocks and a partial one; 200 rows: one whole, one partial
    a = rect_grid(300, 512, 128, 256)
    b = rect_grid(200, 512, 128, 256)
    assert a[:2] == b[:2]
    assert all(x is y for x, y in zip(a[:2], b[:2], strict=True))
    assert b[2:] == [Tile(128, 200, 0, 256, 1, 0), Tile(128, 200, 256, 512, 1, 1)]


def test_other_integer_types_are_made_as_before() -> None:
    np = pytest.importorskip("numpy")
    # a NumPy tile extent (a custom grid's) does not go into the shared tiles: the grid is made
    # anew from those values, as before
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(planning, "_WHOLE_BLOCKS", {})
        got = rect_grid(300, 512, np.int64(128), 256)
        assert got == reference_grid(300, 512, 128, 256)
        assert not planning._WHOLE_BLOCKS
        assert all(type(x) is int for t in rect_grid(300, 512, 128, 256) for x in t)


def test_kept_tiles_are_replaced_not_grown_in_place() -> None:
    # growing the kept whole M-blocks makes a new list: a list another caller (another thread)
    # is still reading or extending is never changed under it, so two threads growing one shape
    # at once cannot append the same blocks twice
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(planning, "_WHOLE_BLOCKS", {})
        rect_grid(256, 700, 128, 256)  # two whole M-blocks of 3 tiles kept
        kept = planning._WHOLE_BLOCKS[(700, 128, 256)]
        before = list(kept)
        got = rect_grid(1024, 700, 128, 256)  # eight whole M-blocks: the kept list grows
        assert kept == before  # (the earlier list as it was)
        assert planning._WHOLE_BLOCKS[(700, 128, 256)] is not kept
        assert got == reference_grid(1024, 700, 128, 256)
        assert all(a is b for a, b in zip(got, kept, strict=False))  # (the first blocks shared)

