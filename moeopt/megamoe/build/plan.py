"""Planning, done once per rank graph: the experts, their tile walks, the waves and the GMM program order.

* experts: the rank's local experts (rows from each source rank), then its shared experts (all
  rows local);
* tile walks: each expert's GMM1 (``rows x hidden_dim``) and GMM2 (``rows x h``) output cut by the
  registered tile grid, checked to cover it exactly once, in the kernel's swizzled order;
  experts with the same row count share one walk;
* waves: m-groups (expert, m-block) packed by the registered wave packer, ``p1_override``
  m-groups per GMM1 wave and ``p2_override`` per GMM2 wave (0: one expert per wave); with
  ``options.orchestration = 'layered'`` the URMA kernel's macro waves instead
  (:func:`layered_ranges`: ranges of whole local experts, the same for GMM1 and GMM2);
* program order of a GMM stage: wave by wave, in each wave its experts in order of first
  appearance, each expert's tiles of the wave's m-blocks in the expert's walk.

Everything here is a frozen value; the stage builders only read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain, repeat
from operator import attrgetter

import numpy as np

from moeopt.megamoe.config.implementation import (
    LAYERED_BALANCED_WAVES,
    LAYERED_FEW_EXPERTS,
    LAYERED_FIRST_WAVE_ROWS,
    LAYERED_LATENCY_ROWS,
    LAYERED_LATENCY_WAVES,
    LAYERED_THROUGHPUT_ROWS,
    LAYERED_THROUGHPUT_WAVES,
)
from moeopt.megamoe.planning import MGroup, Tile, checked_walk_blocks
from moeopt.megamoe.scenario import Config
from moeopt.registry import lookup

_mb = attrgetter("mb")  # a tile's M-block index, read in C

Item = tuple[int, int, Tile]  # (wave, expert index, tile): one GMM tile in program order


@dataclass(frozen=True)
class ExpertPlan:
    index: int  # position in the rank's expert list (local experts, then shared experts)
    name: str
    rows: int
    rows_by_src: tuple[int, ...]  # rows from each source rank (shared experts: all local)
    shared: bool
    g1_tiles: tuple[Tile, ...] = ()  # GMM1 output tiles in the swizzled walk (none without rows)
    g2_tiles: tuple[Tile, ...] = ()
    # each walk's tiles' (rows, cols, mb, nb) as a read-only (n, 4) int64 array when the walk is
    # of a rect_grid (worked out from block positions), else None: see GmmPlan.columns
    g1_blocks: np.ndarray | None = field(default=None, compare=False, repr=False)
    g2_blocks: np.ndarray | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class GmmPlan:
    """One GMM stage's waves and its tiles in program order."""

    stage: str
    waves: tuple[tuple[MGroup, ...], ...]
    order: tuple[Item, ...]
    # ``order`` as a read-only (n, 6) int64 array of (wave, expert, rows, cols, mb, nb) per tile,
    # when every walk in it has its blocks (ExpertPlan.g1_blocks), else None: the columns a GMM
    # builder reads, without turning each item's integers into array entries one by one
    columns: np.ndarray | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class RankPlan:
    experts: tuple[ExpertPlan, ...]
    gmm1: GmmPlan
    gmm2: GmmPlan


def plan_rank(
    cfg: Config, rows: np.ndarray, tokens: int, rank: int, world: int, shared_experts: int, topk: int = 1
) -> RankPlan:
    """The plan of destination ``rank`` (``rows[src][local expert]``; ``topk`` is read by the
    layered wave rule only)."""
    experts = plan_experts(cfg, rows, tokens, rank, world, shared_experts)
    if cfg.orchestration == "layered":
        w1 = w2 = layered_waves(cfg, experts, tokens, topk)
    else:
        w1 = plan_waves(cfg, experts, cfg.p1_override)
        # a wave packer is a function of the m-groups and the m-groups per wave: with GMM1's
        # count GMM2's waves are GMM1's (as with the layered waves, one value for both stages)
        w2 = w1 if cfg.p2_override == cfg.p1_override else plan_waves(cfg, experts, cfg.p2_override)
    return RankPlan(
        experts=experts,
        gmm1=GmmPlan("gmm1", w1, program_order(experts, w1, "gmm1"), program_columns(experts, w1, "gmm1")),
        gmm2=GmmPlan("gmm2", w2, program_order(experts, w2, "gmm2"), program_columns(experts, w2, "gmm2")),
    )


def plan_experts(
    cfg: Config, rows: np.ndarray, tokens: int, rank: int, world: int, shared_experts: int
) -> tuple[ExpertPlan, ...]:
    n_local = rows.shape[1]
    heads = [(f"e{e}", tuple(int(x) for x in rows[:, e]), False) for e in range(n_local)]
    for j in range(shared_experts):
        heads.append((f"s{j}", tuple(tokens if s == rank else 0 for s in range(world)), True))
    grid = lookup("tile_grid", cfg.tile_grid)()
    # a tile grid is a function of (rows, cols, tile_m, tile_n): experts with the same row
    # count (and, with the small-M rebalance, the same GMM1 core count) share one checked,
    # swizzled walk (under uniform routing that is every expert)
    walks: dict[tuple[int, str, int], tuple[tuple[Tile, ...], np.ndarray | None]] = {}
    experts = []
    for index, (name, col, shared) in enumerate(heads):
        n_rows = sum(col)
        tiles: dict[str, tuple[tuple[Tile, ...], np.ndarray | None]] = {
            "gmm1": ((), None),
            "gmm2": ((), None),
        }
        if n_rows:
            for stage, cols in (("gmm1", cfg.hidden_dim), ("gmm2", cfg.h)):
                cores = (
                    gmm1_cores(cfg, index, shared) if stage == "gmm1" and cfg.gmm1_small_m_rebalance else 0
                )
                walk = walks.get((n_rows, stage, cores))
                if walk is None:
                    grid_tiles = grid(n_rows, cols, cfg.tile_m, cfg.tile_n)
                    if cores:
                        grid_tiles = small_m_rebalance(grid_tiles, n_rows, cols, cores)
                    where = f"tile grid {cfg.tile_grid!r} ({stage}, {name})"
                    got, blocks = checked_walk_blocks(grid_tiles, n_rows, cols, cfg.swizzle_n, where)
                    walk = walks[(n_rows, stage, cores)] = (tuple(got), blocks)
                tiles[stage] = walk
        (g1, b1), (g2, b2) = tiles["gmm1"], tiles["gmm2"]
        experts.append(ExpertPlan(index, name, n_rows, col, shared, g1, g2, b1, b2))
    return tuple(experts)


REBALANCE_COLS = 32  # impl: the V1 kernel's N slices are whole 32-column units (gmm1.h@HEAD L60-78)


def gmm1_cores(cfg: Config, expert: int, shared: bool) -> int:
    """The cube cores GMM1 runs ``expert`` on: its group, plus GMM2's for the first
    ``options.gmm1_full_experts`` local experts."""
    own = set(cfg.core_groups["gmm1"].cores)
    if expert < cfg.gmm1_full_experts and not shared:
        own |= set(cfg.core_groups["gmm2"].cores)
    return len(own)


def small_m_rebalance(tiles: list[Tile], rows: int, cols: int, cores: int) -> list[Tile]:
    """The V1 kernel's small-M GMM1 rebalance (gmm1.h@HEAD L33-41, L60-78): an expert with one
    M-tile whose tiles are fewer than the cores, and at least one 32-column unit per core, is cut
    into ``cores`` N slices of whole 32-column units (the first ones a unit wider when they do
    not divide evenly); otherwise the tiles stay as they are."""
    units = cols // REBALANCE_COLS
    # (the one-M-tile test, a pass over the tiles, last: a many-row expert fails the count first)
    if cols % REBALANCE_COLS or len(tiles) >= cores or units < cores or len(set(map(_mb, tiles))) != 1:
        return tiles
    out = []
    n0 = 0
    for i in range(cores):
        width = (units // cores + (1 if i < units % cores else 0)) * REBALANCE_COLS
        out.append(Tile(0, rows, n0, n0 + width, 0, i))
        n0 += width
    return out


def plan_waves(cfg: Config, experts: tuple[ExpertPlan, ...], per_wave: int) -> tuple[tuple[MGroup, ...], ...]:
    tm = cfg.tile_m
    groups = [
        MGroup(ex.index, mb, min(tm, ex.rows - mb * tm))
        for ex in experts
        if ex.rows > 0
        for mb in range(-(-ex.rows // tm))
    ]
    waves = lookup("wave_packer", cfg.wave_packing)()(groups, per_wave)
    return tuple(tuple(wave) for wave in waves)


def layered_ranges(n_experts: int, tokens: int, topk: int) -> list[tuple[int, int]]:
    """The URMA kernel's macro waves as ranges ``[begin, end)`` of local experts (its constants,
    ``LAYERED_*``, with their source in ``config/implementation.py``).

    With ``E`` local experts and the estimate ``r = ceil(tokens × topk / E)`` rows per expert (the
    rank's own routes spread evenly; the kernel does not look at the real counts):

    * target waves ``T``: ``E`` if ``E <= 1``; 1 if ``tokens × topk <= 1024``; else 2 if
      ``r <= 256``, 4 if ``r >= 2048``, 2 if ``E <= 8``, else 6; at most ``E``;
    * the first wave takes ``min(ceil(1024 / r), ceil(E / T))`` experts (at least 1; all if
      ``T = 1``): a warm-up wave of about 1024 rows;
    * every later wave ``ceil((E - first) / (T - 1))`` experts, the last one what is left.
    """
    e = n_experts
    if e == 0:
        return []
    routes = tokens * topk
    per_expert = max(1, -(-routes // e))
    if e <= 1:
        target = e
    elif routes <= LAYERED_FIRST_WAVE_ROWS:
        target = 1
    else:
        target = LAYERED_BALANCED_WAVES
        if per_expert <= LAYERED_LATENCY_ROWS:
            target = LAYERED_LATENCY_WAVES
        elif per_expert >= LAYERED_THROUGHPUT_ROWS:
            target = LAYERED_THROUGHPUT_WAVES
        elif e <= LAYERED_FEW_EXPERTS:
            target = LAYERED_LATENCY_WAVES
        target = min(target, e)
    if target <= 1:
        return [(0, e)]
    first = min(-(-LAYERED_FIRST_WAVE_ROWS // per_expert), -(-e // target))
    first = min(max(first, 1), e)
    steady = max(1, -(-(e - first) // (target - 1)))
    ranges = [(0, first)]
    while ranges[-1][1] < e:
        b = ranges[-1][1]
        ranges.append((b, min(b + steady, e)))
    return ranges


def layered_waves(
    cfg: Config, experts: tuple[ExpertPlan, ...], tokens: int, topk: int
) -> tuple[tuple[MGroup, ...], ...]:
    """The layered macro waves (:func:`layered_ranges` over the local experts): every m-group of
    the range's experts; a wave whose experts have no rows is left out. The shared experts (local
    rows, nothing to receive) are computed first, at the head of the first wave."""
    tm = cfg.tile_m

    def groups(ex: ExpertPlan) -> list[MGroup]:
        return [MGroup(ex.index, mb, min(tm, ex.rows - mb * tm)) for mb in range(-(-ex.rows // tm))]

    local = [ex for ex in experts if not ex.shared]
    shared = [g for ex in experts if ex.shared for g in groups(ex)]
    waves: list[tuple[MGroup, ...]] = []
    for b, end in layered_ranges(len(local), tokens, topk):
        wave = [g for ex in local[b:end] for g in groups(ex)]
        if not waves:
            wave = shared + wave
        if wave:
            waves.append(tuple(wave))
    return tuple(waves)


def program_order(
    experts: tuple[ExpertPlan, ...], waves: tuple[tuple[MGroup, ...], ...], stage: str
) -> tuple[Item, ...]:
    """The stage's tiles in program order: waves, then each wave's experts (first appearance),
    then the expert's swizzled walk restricted to the wave's m-blocks."""
    order: list[Item] = []
    walk_mbs: dict[int, set[int]] = {}  # id(walk) -> its m-blocks (experts share walks)
    # id(walk) -> m-block -> the positions of its tiles in the walk, in walk order: a wave with
    # part of an expert's m-blocks takes their tiles by position instead of filtering the whole
    # walk (which cost waves x walk: an expert of 1,600 m-blocks four to a wave, 2.5 s)
    walk_pos: dict[int, dict[int, list[int]]] = {}
    for w, wave in enumerate(waves):
        mbs: dict[int, set[int]] = {}  # expert -> its m-blocks in this wave, experts in order
        for g in wave:
            mbs.setdefault(g.expert, set()).add(g.mb)
        for e, here in mbs.items():
            ex = experts[e]
            walk = ex.g1_tiles if stage == "gmm1" else ex.g2_tiles
            every = walk_mbs.get(id(walk))
            if every is None:
                every = walk_mbs[id(walk)] = set(map(_mb, walk))
            if every <= here:  # the wave has all of the expert's m-blocks: its whole walk
                order.extend(zip(repeat(w), repeat(e), walk))
                continue
            pos = walk_pos.get(id(walk))
            if pos is None:
                pos = walk_pos[id(walk)] = {}
                for i, mb in enumerate(map(_mb, walk)):
                    pos.setdefault(mb, []).append(i)
            # (the m-blocks' positions merged back into walk order)
            at = sorted(chain.from_iterable(pos.get(mb, ()) for mb in here))
            order.extend(zip(repeat(w), repeat(e), map(walk.__getitem__, at)))
    return tuple(order)


def program_columns(
    experts: tuple[ExpertPlan, ...], waves: tuple[tuple[MGroup, ...], ...], stage: str
) -> np.ndarray | None:
    """:func:`program_order` as :attr:`GmmPlan.columns`: the same walk of the same waves and
    experts, each expert's part of a wave cut out of its walk's blocks (the m-blocks of the
    wave, in walk order); None when a walk in it has no blocks. (One array operation per
    expert of a wave only where the wave has part of the expert's m-blocks; the parts joined,
    and their waves and experts repeated, at once.)"""
    parts: list[np.ndarray] = []
    ws: list[int] = []
    es: list[int] = []
    n_mb: dict[int, int] = {}  # id(blocks) -> the walk's M-blocks (experts share walks)
    for w, wave in enumerate(waves):
        mbs: dict[int, set[int]] = {}  # (as program_order: experts in order of first appearance)
        for g in wave:
            mbs.setdefault(g.expert, set()).add(g.mb)
        for e, here in mbs.items():
            ex = experts[e]
            blocks = ex.g1_blocks if stage == "gmm1" else ex.g2_blocks
            if blocks is None:
                if not (ex.g1_tiles if stage == "gmm1" else ex.g2_tiles):
                    continue  # (an expert without tiles adds none)
                return None
            every = n_mb.get(id(blocks))
            if every is None:
                every = n_mb[id(blocks)] = int(blocks[:, 2].max()) + 1 if len(blocks) else 0
            # (a set of `every` m-blocks in [0, every) is all of them: the whole walk)
            if not (len(here) == every and min(here) >= 0 and max(here) < every):
                blocks = blocks[np.isin(blocks[:, 2], list(here))]
            parts.append(blocks)
            ws.append(w)
            es.append(e)
    if not parts:
        out = np.zeros((0, 6), np.int64)
    else:
        lens = list(map(len, parts))
        out = np.empty((sum(lens), 6), np.int64)
        out[:, 0] = np.repeat(ws, lens)
        out[:, 1] = np.repeat(es, lens)
        out[:, 2:] = np.concatenate(parts)
    out.flags.writeable = False
    return out
