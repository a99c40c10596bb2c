"""Planning, done once per rank graph: the experts, their tile walks, the waves and the GMM program order.

* experts: the rank's local experts (rows from each source rank), then its shared experts (all
  rows local);
* tile walks: each expert's GMM1 (``rows x hidden_dim``) and GMM2 (``rows x h``) output cut by the
  registered tile grid, checked to cover it exactly once, in the kernel's swizzled order;
  experts with the same row count share one walk;
* waves: m-groups (expert, m-block) packed by the registered wave packer, ``p1_override``
  m-groups per GMM1 wave and ``p2_override`` per GMM2 wave (0: one expert per wave);
* program order of a GMM stage: wave by wave, in each wave its experts in order of first
  appearance, each expert's tiles of the wave's m-blocks in the expert's walk.

Everything here is a frozen value; the stage builders only read it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from moeopt.megamoe.planning import MGroup, Tile, check_grid, swizzle_order
from moeopt.megamoe.scenario import Config
from moeopt.registry import lookup

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


@dataclass(frozen=True)
class GmmPlan:
    """One GMM stage's waves and its tiles in program order."""

    stage: str
    waves: tuple[tuple[MGroup, ...], ...]
    order: tuple[Item, ...]


@dataclass(frozen=True)
class RankPlan:
    experts: tuple[ExpertPlan, ...]
    gmm1: GmmPlan
    gmm2: GmmPlan


def plan_rank(
    cfg: Config, rows: np.ndarray, tokens: int, rank: int, world: int, shared_experts: int
) -> RankPlan:
    """The plan of destination ``rank`` (``rows[src][local expert]``)."""
    experts = plan_experts(cfg, rows, tokens, rank, world, shared_experts)
    w1 = plan_waves(cfg, experts, cfg.p1_override)
    w2 = plan_waves(cfg, experts, cfg.p2_override)
    return RankPlan(
        experts=experts,
        gmm1=GmmPlan("gmm1", w1, program_order(experts, w1, "gmm1")),
        gmm2=GmmPlan("gmm2", w2, program_order(experts, w2, "gmm2")),
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
    walks: dict[tuple[int, str, int], tuple[Tile, ...]] = {}
    experts = []
    for index, (name, col, shared) in enumerate(heads):
        n_rows = sum(col)
        tiles: dict[str, tuple[Tile, ...]] = {"gmm1": (), "gmm2": ()}
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
                    check_grid(grid_tiles, n_rows, cols, f"tile grid {cfg.tile_grid!r} ({stage}, {name})")
                    walk = walks[(n_rows, stage, cores)] = tuple(swizzle_order(grid_tiles, cfg.swizzle_n))
                tiles[stage] = walk
        experts.append(ExpertPlan(index, name, n_rows, col, shared, tiles["gmm1"], tiles["gmm2"]))
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
    if cols % REBALANCE_COLS or len({t.mb for t in tiles}) != 1 or len(tiles) >= cores or units < cores:
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


def program_order(
    experts: tuple[ExpertPlan, ...], waves: tuple[tuple[MGroup, ...], ...], stage: str
) -> tuple[Item, ...]:
    """The stage's tiles in program order: waves, then each wave's experts (first appearance),
    then the expert's swizzled walk restricted to the wave's m-blocks."""
    order: list[Item] = []
    for w, wave in enumerate(waves):
        mgs = {(g.expert, g.mb) for g in wave}
        for e in dict.fromkeys(g.expert for g in wave):
            ex = experts[e]
            for t in ex.g1_tiles if stage == "gmm1" else ex.g2_tiles:
                if (e, t.mb) in mgs:
                    order.append((w, e, t))
    return tuple(order)
