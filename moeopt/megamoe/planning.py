"""Planning: tile grids, swizzle, wave packing and core assignment (registered by name).

* tile grid (``tile_grid``): how one expert's ``rows x cols`` output is cut into tiles; every
  grid is checked to cover the output exactly once (:func:`check_grid`).
* swizzle: the order in which a core walks an expert's tiles: groups of ``swizzle_n``
  N-columns, snake over M (odd groups reverse the M order), as ``gmm_common.h`` L66-91.
* wave packing (``wave_packer``): m-groups (expert, m-block) -> waves. ``per_wave = 0`` is the
  kernel's bucket rule: one local expert per wave (one D2C flag per expert group).
* core assignment (``core_assignment``): tiles -> core slots, pinned at build time.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from moeopt.megamoe.errors import ScenarioError
from moeopt.registry import register_builtin


class Tile(NamedTuple):
    """One output tile: rows ``[m0, m1)``, columns ``[n0, n1)``, block indices ``(mb, nb)``.

    A named tuple (not a dataclass) because builders key dictionaries by tiles thousands of
    times per graph, and a tuple's hash is computed in C."""

    m0: int
    m1: int
    n0: int
    n1: int
    mb: int
    nb: int

    @property
    def rows(self) -> int:
        return self.m1 - self.m0

    @property
    def cols(self) -> int:
        return self.n1 - self.n0


def _rect_tuples(rows: int, cols: int, tile_m: int, tile_n: int) -> list[tuple[int, int, int, int, int, int]]:
    """:func:`rect_grid`'s tiles as plain tuples (a tile compares equal to its plain tuple)."""
    n_cols = [(nb, n0, min(cols, n0 + tile_n)) for nb, n0 in enumerate(range(0, cols, tile_n))]
    return [
        (m0, m1, n0, n1, mb, nb)
        for mb, m0 in enumerate(range(0, rows, tile_m))
        for m1 in (min(rows, m0 + tile_m),)
        for nb, n0, n1 in n_cols
    ]


def rect_grid(rows: int, cols: int, tile_m: int, tile_n: int) -> list[Tile]:
    """Row-major ``tile_m x tile_n`` tiles; the last row / column of tiles may be partial."""
    if not _whole_positive(rows, cols, tile_m, tile_n):
        # (an empty grid, a range's error, or tiles of another integer type: made as they are)
        return _made_tiles(_rect_tuples(rows, cols, tile_m, tile_n))
    # the whole M-blocks of every grid of the same (cols, tile_m, tile_n) are the same tiles: a
    # grid is a slice of those of the most rows asked for so far, plus its partial last M-block
    # (made here). The tiles are shared between grids (immutable tuples), so that
    # _is_rect_grid finds a grid made here equal to its rebuild by identity, in C.
    key = (cols, tile_m, tile_n)
    whole = _WHOLE_BLOCKS.get(key)
    n_nb = -(-cols // tile_n)
    full_mb = rows // tile_m
    if whole is None or len(whole) < full_mb * n_nb:
        if whole is None:
            if len(_WHOLE_BLOCKS) >= _WHOLE_BLOCKS_MAX:
                _WHOLE_BLOCKS.clear()  # (a bound on what is kept; it is only ever rebuilt)
            whole = []
        # (the M-blocks not made yet, each tile made once.) A new list replaces the kept one,
        # which is never changed in place: two threads growing the same key at once (a user's
        # Optuna study with n_jobs > 1) each get a list that is right, and the one kept is one of
        # them; a list extended in place could have had the same blocks appended twice
        have = len(whole) // n_nb
        more = _rect_tuples((full_mb - have) * tile_m, cols, tile_m, tile_n)
        whole = _WHOLE_BLOCKS[key] = whole + _made_tiles(more, have * tile_m, have)
    out = whole[: full_mb * n_nb]
    if rows % tile_m:
        m0 = full_mb * tile_m
        out += _made_tiles(_rect_tuples(rows - m0, cols, tile_m, tile_n), m0, full_mb)
    return out


def _whole_positive(*values: int) -> bool:
    """Whether every value is a plain ``int`` above 0 (what the shared tiles are made of)."""
    return all(type(v) is int and v > 0 for v in values)


_WHOLE_BLOCKS: dict[tuple[int, int, int], list[Tile]] = {}
"""(cols, tile_m, tile_n) -> row-major tiles of whole M-blocks, for :func:`rect_grid`."""
_WHOLE_BLOCKS_MAX = 64  # assumed: a scenario uses a handful of (cols, tile_m, tile_n)


def _made_tiles(tuples: list[tuple[int, int, int, int, int, int]], m0: int = 0, mb: int = 0) -> list[Tile]:
    """Tiles from :func:`_rect_tuples`' plain tuples, shifted down by ``m0`` rows and ``mb``
    M-blocks."""
    if m0 or mb:
        tuples = [(a + m0, b + m0, n0, n1, i + mb, nb) for a, b, n0, n1, i, nb in tuples]
    # each Tile made from its plain tuple in C (Tile(...) runs the named tuple's Python-level
    # __new__); tuple.__new__ called by map directly, not through a functools.partial: callgrind,
    # plan_rank of the DeepSeek-V3-like zipf rank 1, 257.6M -> 240.2M instructions
    return list(map(tuple.__new__, itertools.repeat(Tile), tuples))


def check_grid(tiles: Sequence[Tile], rows: int, cols: int, name: str = "tile grid") -> None:
    """Every output element is covered by exactly one tile (else :class:`ScenarioError`)."""
    if tiles and _is_rect_grid(tiles, rows, cols):
        return  # an exact cover by construction
    area = 0
    for t in tiles:
        if not (0 <= t.m0 < t.m1 <= rows and 0 <= t.n0 < t.n1 <= cols):
            raise ScenarioError(f"{name}: tile {t} lies outside the {rows} x {cols} output")
        area += t.rows * t.cols
    if area != rows * cols:
        raise ScenarioError(
            f"{name}: tiles cover {area} elements of a {rows} x {cols} output (gaps or overlaps)"
        )
    # equal area + no element covered twice <=> exact cover; check overlaps by sweeping the
    # row bands between consecutive tile edges. The tiles covering band [a, b) are those with
    # m0 <= a < m1: kept in an active set updated at each edge (scanning every tile per band
    # was quadratic: 13 s of a 27 s build on a 167k-row expert)
    opening: dict[int, list[int]] = {}
    closing: dict[int, list[int]] = {}
    for k, t in enumerate(tiles):
        opening.setdefault(t.m0, []).append(k)
        closing.setdefault(t.m1, []).append(k)
    cuts = sorted(opening.keys() | closing.keys())
    active: dict[int, tuple[int, int]] = {}
    spans: list[tuple[int, int]] = []
    for a, b in itertools.pairwise(cuts):
        changed = False
        for k in closing.get(a, ()):
            del active[k]
            changed = True
        for k in opening.get(a, ()):
            active[k] = (tiles[k].n0, tiles[k].n1)
            changed = True
        if changed:
            spans = sorted(active.values())
        covered = 0
        for n0, n1 in spans:
            if n0 != covered:
                raise ScenarioError(
                    f"{name}: rows [{a}, {b}) are covered twice or not at all near column {n0}"
                )
            covered = n1
        if covered != cols:
            raise ScenarioError(f"{name}: rows [{a}, {b}) covered up to column {covered} of {cols}")


def _is_rect_grid(tiles: Sequence[Tile], rows: int, cols: int) -> bool:
    """Whether ``tiles`` are exactly :func:`rect_grid`'s for the extent of their first tile (a
    comparison of two lists in C: a grid :func:`rect_grid` made shares its whole M-blocks' tile
    objects with the one made here, compared by identity)."""
    t = tiles[0]
    tile_m, tile_n = t.m1 - t.m0, t.n1 - t.n0
    if tile_m <= 0 or tile_n <= 0 or rows <= 0 or cols <= 0:
        return False
    n = -(-rows // tile_m) * -(-cols // tile_n)
    if len(tiles) != n:
        return False
    if _whole_positive(rows, cols, tile_m, tile_n):
        return list(tiles) == rect_grid(rows, cols, tile_m, tile_n)
    return list(tiles) == _rect_tuples(rows, cols, tile_m, tile_n)  # (other integer types)


def checked_walk(
    tiles: Sequence[Tile], rows: int, cols: int, swizzle_n: int, name: str = "tile grid"
) -> list[Tile]:
    """:func:`check_grid`, then :func:`swizzle_order`. A grid found to be exactly
    :func:`rect_grid`'s has its blocks in row-major order, ``(mb, nb)`` at position
    ``mb * n_nb + nb``: its walk is cut out of the list by slices (:func:`_rect_walk`) instead of
    looked up block by block through a dict (the same tiles in the same order)."""
    return checked_walk_blocks(tiles, rows, cols, swizzle_n, name)[0]


def checked_walk_blocks(
    tiles: Sequence[Tile], rows: int, cols: int, swizzle_n: int, name: str = "tile grid"
) -> tuple[list[Tile], np.ndarray | None]:
    """:func:`checked_walk`, and for a walk of :func:`rect_grid`'s tiles its tiles' ``(rows,
    cols, mb, nb)`` as a read-only ``(n, 4)`` int64 array, worked out from the walk's block
    positions (one integer per tile: what a builder reads of a tile without turning its six
    integers into array entries one by one); None for any other grid."""
    if tiles and swizzle_n > 0 and _is_rect_grid(tiles, rows, cols):
        last = tiles[-1]
        n_mb, n_nb = last.mb + 1, last.nb + 1
        walk = _rect_walk(tiles, n_mb, n_nb, swizzle_n)
        t = tiles[0]
        tile_m, tile_n = t.m1 - t.m0, t.n1 - t.n0
        if not _whole_positive(rows, cols, tile_m, tile_n, n_mb, n_nb):
            return walk, None  # (a grid of other integer types: no blocks worked out)
        return walk, _rect_blocks(rows, cols, tile_m, tile_n, n_nb, _rect_walk_at(n_mb, n_nb, swizzle_n))
    check_grid(tiles, rows, cols, name)
    return swizzle_order(tiles, swizzle_n), None


def _rect_walk_at(n_mb: int, n_nb: int, swizzle_n: int) -> np.ndarray:
    """:func:`_rect_walk`'s tiles' row-major positions (``mb * n_nb + nb``), each group's
    M-blocks by N-blocks as one outer sum."""
    mbs = np.arange(n_mb, dtype=np.int64) * n_nb
    parts = [
        np.add.outer(mbs if g % 2 == 0 else mbs[::-1], np.arange(nb0, min(n_nb, nb0 + swizzle_n))).ravel()
        for g, nb0 in enumerate(range(0, n_nb, swizzle_n))
    ]
    return np.concatenate(parts)


def _rect_blocks(
    rows: int, cols: int, tile_m: int, tile_n: int, n_nb: int, positions: np.ndarray
) -> np.ndarray:
    """``(rows, cols, mb, nb)`` of the tiles of a :func:`rect_grid` at the given row-major
    positions: block ``(mb, nb)`` is rows ``[mb * tile_m, min(rows, (mb + 1) * tile_m))`` and
    columns ``[nb * tile_n, min(cols, (nb + 1) * tile_n))``."""
    mb, nb = np.divmod(positions, n_nb)
    m0, n0 = mb * tile_m, nb * tile_n
    out = np.stack([np.minimum(rows, m0 + tile_m) - m0, np.minimum(cols, n0 + tile_n) - n0, mb, nb], axis=1)
    out.flags.writeable = False
    return out


def _rect_walk(tiles: Sequence[Tile], n_mb: int, n_nb: int, swizzle_n: int) -> list[Tile]:
    """:func:`swizzle_order` of ``n_mb x n_nb`` tiles in row-major block order: a group's run
    on one M-block is one slice."""
    out: list[Tile] = []
    for g, nb0 in enumerate(range(0, n_nb, swizzle_n)):
        nb1 = min(n_nb, nb0 + swizzle_n)
        for mb in range(n_mb) if g % 2 == 0 else range(n_mb - 1, -1, -1):
            k = mb * n_nb
            out += tiles[k + nb0 : k + nb1]
    return out


def swizzle_order(tiles: Sequence[Tile], swizzle_n: int) -> list[Tile]:
    """Tiles in the kernel's swizzled walk: groups of ``swizzle_n`` N-columns, snake over M."""
    if not tiles:
        return []
    n_mb = max(t.mb for t in tiles) + 1
    n_nb = max(t.nb for t in tiles) + 1
    at = {(t.mb, t.nb): t for t in tiles}
    out = []
    for g, nb0 in enumerate(range(0, n_nb, swizzle_n)):
        nbs = range(nb0, min(n_nb, nb0 + swizzle_n))
        mbs = range(n_mb) if g % 2 == 0 else range(n_mb - 1, -1, -1)
        for mb in mbs:
            for nb in nbs:
                t = at.get((mb, nb))
                if t is not None:
                    out.append(t)
    if len(out) != len(tiles):  # a custom grid that is not a full rectangle of blocks
        return list(tiles)
    return out


# --------------------------------------------------------------------------- waves
@dataclass(frozen=True)
class MGroup:
    expert: int
    mb: int
    rows: int


def _by_expert(groups: Sequence[MGroup]) -> list[list[MGroup]]:
    out: dict[int, list[MGroup]] = {}
    for g in groups:
        out.setdefault(g.expert, []).append(g)
    return list(out.values())


def pack_sequential_greedy(groups: Sequence[MGroup], per_wave: int) -> list[list[MGroup]]:
    """Experts in order; ``per_wave`` m-groups per wave (0: one expert per wave)."""
    if per_wave == 0:
        return _by_expert(groups)
    return [list(groups[i : i + per_wave]) for i in range(0, len(groups), per_wave)]


def pack_longest_expert_first(groups: Sequence[MGroup], per_wave: int) -> list[list[MGroup]]:
    """Experts by decreasing rows (ties: lower expert id), then sequential."""
    experts = _by_expert(groups)
    experts.sort(key=lambda gs: (-sum(g.rows for g in gs), gs[0].expert))
    flat = [g for gs in experts for g in gs]
    return pack_sequential_greedy(flat, per_wave) if per_wave else experts


def pack_balanced_waves(groups: Sequence[MGroup], per_wave: int) -> list[list[MGroup]]:
    """As many waves as sequential packing, m-groups spread so that wave row totals balance
    (largest first to the lightest wave, at most ``per_wave`` per wave), each wave in expert order."""
    if per_wave == 0:
        return _by_expert(groups)
    n = -(-len(groups) // per_wave)
    waves: list[list[MGroup]] = [[] for _ in range(n)]
    load = [0] * n
    for g in sorted(groups, key=lambda g: (-g.rows, g.expert, g.mb)):
        w = min((i for i in range(n) if len(waves[i]) < per_wave), key=lambda i: (load[i], i))
        waves[w].append(g)
        load[w] += g.rows
    for wave in waves:
        wave.sort(key=lambda g: (g.expert, g.mb))
    waves.sort(key=lambda w: (w[0].expert, w[0].mb))
    return waves


# --------------------------------------------------------------------------- core assignment
def assign_static_round_robin(groups: Sequence[Sequence[float]], n: int) -> list[list[int]]:
    """The baseline kernel's rolling cursor: within a group tile i -> (start + i) mod n; the
    start advances by the group's tile count (gmm1.h@2d9d4288 L120-131)."""
    start = 0
    out = []
    for g in groups:
        out.append([(start + i) % n for i in range(len(g))])
        start = (start + len(g)) % n
    return out


def assign_static_round_robin_v1(groups: Sequence[Sequence[float]], n: int) -> list[list[int]]:
    """The V1 kernel's cursor: the start advances by ``tiles mod n``, or 1 if that is 0
    (gmm_common.h@HEAD L56-64)."""
    start = 0
    out = []
    for g in groups:
        out.append([(start + i) % n for i in range(len(g))])
        adv = len(g) % n or 1
        start = (start + adv) % n
    return out


def assign_greedy_least_busy(groups: Sequence[Sequence[float]], n: int) -> list[list[int]]:
    """Each tile to the core with the least estimated work so far (ties: lowest index)."""
    busy = [0.0] * n
    out = []
    for g in groups:
        row = []
        for cost in g:
            k = min(range(n), key=lambda i: (busy[i], i))
            busy[k] += cost
            row.append(k)
        out.append(row)
    return out


def assign_contiguous_block(groups: Sequence[Sequence[float]], n: int) -> list[list[int]]:
    """Each group's tiles cut into ``n`` contiguous blocks, block j on core j."""
    return [[i * n // len(g) for i in range(len(g))] for g in groups]


for _name, _fn in (("rect", lambda: rect_grid),):
    register_builtin("tile_grid", _name, _fn)
for _name, _pk in (
    ("sequential_greedy", pack_sequential_greedy),
    ("longest_expert_first", pack_longest_expert_first),
    ("balanced_waves", pack_balanced_waves),
):
    register_builtin("wave_packer", _name, (lambda f: lambda: f)(_pk))
for _name, _as in (
    ("static_round_robin", assign_static_round_robin),
    ("static_round_robin_v1", assign_static_round_robin_v1),
    ("greedy_least_busy", assign_greedy_least_busy),
    ("contiguous_block", assign_contiguous_block),
):
    register_builtin("core_assignment", _name, (lambda f: lambda: f)(_as))
