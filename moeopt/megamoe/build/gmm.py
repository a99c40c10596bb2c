"""GMM1 and GMM2: the grouped matrix multiplications, one pipeline shared by both stages.

Every output tile is one event on its core's cube (``AIC``): the kernel streams the tile's K
extent through L1 in steps, loading step ``i + 1`` while it computes step ``i``
(:class:`TileCosts`). The pipeline, one function each:

1. :func:`assign_cores`: which core runs each tile (the registered ``core_assignment`` rule,
   its state carried across expert groups on the same cores);
2. :func:`l1_residency`: what a tile finds in L1 (the previous tile on its core had the same A
   or B block) and in L2 (another tile already read that block from HBM);
3. :class:`TileCosts`: the closed-form K-step pipeline time, the fill, the bandwidth held;
4. :func:`tile_names`: the tiles' event names;
5. :func:`emit_tiles`: the events, with the on-chip link slots, bandwidth units and program
   order of each core's tiles.

:func:`build_gmm1` and :func:`build_gmm2` differ only in what a tile waits for (its wave's D2C
flag, or the activation's readiness) and in their hand-off.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain as chained
from itertools import groupby, pairwise, repeat
from operator import itemgetter
from types import MappingProxyType
from typing import NamedTuple, TypeVar

import numpy as np

from moeopt.core import smallints
from moeopt.core.smallints import stable_order
from moeopt.megamoe.build.context import BuildContext
from moeopt.megamoe.build.emitter import Emitter, Units
from moeopt.megamoe.build.handoff import ActivationOut, DispatchOut, Gmm1Out, Gmm2Out, GmmTiles
from moeopt.megamoe.build.plan import ExpertPlan, GmmPlan, Item, RankPlan
from moeopt.megamoe.build.sync import wire_lookahead
from moeopt.megamoe.config.implementation import CUBE_M_ALIGN  # spec: the cube's 16-row fractal
from moeopt.megamoe.errors import ScenarioError
from moeopt.megamoe.planning import Tile
from moeopt.registry import lookup

GM_BURST_ALIGN = 512  # spec: GM address alignment for full MTE2 read bandwidth (CANN Ascend C best practices)

# (tile rows, tile cols, A resident in L1, B resident in L1, A read before, B read before)
CostKey = tuple[int, int, bool, bool, bool, bool]
WaveReady = Callable[[int, int], Mapping[str, float]]  # (wave, expert) -> deps of its tiles
ChunkReady = Callable[[int, int, int], Mapping[str, float]]  # (expert, m-block, K chunk) -> deps

_wave_of, _expert_of, _tile_of = itemgetter(0), itemgetter(1), itemgetter(2)


class TileColumns(NamedTuple):
    """A GMM stage's tiles in program order as integer columns, one entry per tile (made once
    per stage): the per-tile computations of the pipeline work on these arrays instead of on
    the items one by one."""

    wave: np.ndarray
    expert: np.ndarray
    rows: np.ndarray  # m1 - m0
    cols: np.ndarray  # n1 - n0
    mb: np.ndarray
    nb: np.ndarray

    @classmethod
    def of(cls, order: Sequence[Item]) -> TileColumns:
        n = len(order)
        # every integer of the items in one flat list (waves, experts, then each tile's six),
        # packed as int64 by one struct call and read by numpy: fewer instructions per integer
        # than np.fromiter's conversion of each (callgrind). The columns are read-only views of
        # the packed bytes (nothing writes into them)
        flat = [*map(_wave_of, order), *map(_expert_of, order), *chained.from_iterable(map(_tile_of, order))]
        a = np.frombuffer(struct.pack(f"{len(flat)}q", *flat), np.int64)
        t = a[2 * n :].reshape(n, 6)
        return cls(
            a[:n],
            a[n : 2 * n],
            t[:, 1] - t[:, 0],
            t[:, 3] - t[:, 2],
            t[:, 4],
            t[:, 5],
        )

    @classmethod
    def of_plan(cls, gplan: GmmPlan) -> TileColumns:
        """:meth:`of` the stage's order, read off the plan's columns when it has them
        (:attr:`~moeopt.megamoe.build.plan.GmmPlan.columns`: the same integers, worked out from
        the walks' block positions; ``tests/megamoe/test_plan_columns.py`` holds them equal)."""
        a = gplan.columns
        if a is None or len(a) != len(gplan.order):
            return cls.of(gplan.order)
        return cls(a[:, 0], a[:, 1], a[:, 2], a[:, 3], a[:, 4], a[:, 5])


CONSUMER = {"gmm1": "activation", "gmm2": "combine"}  # the stage an on-chip link hands the tile to
SLOT_KEY = {"gmm1": "act", "gmm2": "comb"}


def gemm_k(ctx: BuildContext, stage: str) -> int:
    """The stage's reduction dimension: GMM1 ``h``, GMM2 ``hidden_dim / 2`` (after SwiGLU)."""
    return ctx.cfg.h if stage == "gmm1" else ctx.cfg.hidden_dim // 2


def declare_gmm_semaphores(ctx: BuildContext, em: Emitter) -> None:
    """The on-chip link slots of GMM1 -> activation and GMM2 -> combine (``depth`` per core), and
    the die's GM->L1 paths as one bandwidth channel ``gm_l1`` of ``aic_num × gm_l1_bytes_per_us``
    (every tile holds its load rate of it, so the cube cores alone never exhaust it) when vector
    transfers share it (``remote_write_excess_share`` > 0; see
    :mod:`~moeopt.megamoe.build.streams`). The L1 stage buffers are inside a tile's own pipeline
    (:class:`TileCosts`), not a semaphore between tiles."""
    cfg = ctx.cfg
    n = cfg.aic_num
    if cfg.bandwidth_contention and ctx.c("remote_write_excess_share") > 0:
        em.bandwidth("gm_l1", n * ctx.c("gm_l1_bytes_per_us"), paths=n)
    for a, key in SLOT_KEY.items():
        lk = cfg.link(a, CONSUMER[a])
        if lk.location != "onchip":
            continue
        if a in ctx.layout.late:
            em.semaphore(f"onchip_{key}", lk.depth * n)
        else:
            for k in range(n):
                em.semaphore(f"c{k}.onchip_{key}", lk.depth)


def build_gmm1(ctx: BuildContext, em: Emitter, plan: RankPlan, dispatch: DispatchOut, head: str) -> Gmm1Out:
    """GMM1 tiles. A tile of wave ``w`` waits for the flag ``d2c.w{w + lag}`` (a shared expert's
    tile waits for the head instead: its rows are local), λ = flag latency. Then the dispatch
    look-ahead (see :func:`~moeopt.megamoe.build.sync.wire_lookahead`) and the flag ``gmm1_done``
    on every tile's compute."""
    sync = ctx.sync
    d2c = dispatch.flags
    experts = plan.experts

    def wave_ready(w: int, e: int) -> Mapping[str, float]:
        if experts[e].shared:
            return {head: sync.flag_us}
        return {d2c[min(len(d2c) - 1, w + sync.lag)]: sync.flag_us}

    # the AIC-only SYNCALL waits of ``gmm1_full_experts`` go in with the tiles (their flags are
    # emitted after them, below): the same dependencies, in the same place, as added late
    waits = full_expert_waits(ctx, plan.gmm1.order)
    tiles = gmm_tiles(ctx, em, plan.gmm1, experts, wave_ready, None, 1, None, waits=waits)
    wire_lookahead(em, sync, dispatch.events, tiles.events_by_wave(len(plan.gmm1.waves)))
    full_sync = wire_full_experts(ctx, em, tiles)
    return Gmm1Out(tiles, em.flag("gmm1_done", tiles.events), full_sync)


def _full_expert_order(ctx: BuildContext, experts: Iterable[int]) -> list[tuple[int, int | None]]:
    """``options.gmm1_full_experts``: each expert that runs on every cube core (``experts`` in
    program order), with the expert after it, whose tiles wait for its SYNCALL (None: none)."""
    full = ctx.layout.gmm1_full_experts
    seen = list(experts)
    order = [e for e in seen if e < full]
    later = [e for e in seen if e not in order]
    nxt = [*order[1:], later[0] if later else None]
    return list(zip(order, nxt))


def full_expert_waits(ctx: BuildContext, order: Sequence[Item]) -> dict[int, dict[str, float]]:
    """Expert -> the wait of its GMM1 tiles on the SYNCALL flag ``g1sync.e{e}`` of the expert
    before it (:func:`wire_full_experts`; λ = one SYNCALL), for the tiles in program order
    ``order``; empty without ``options.gmm1_full_experts``."""
    if not ctx.layout.gmm1_full_experts:
        return {}
    lam = ctx.sync.syncall_us
    seq = list(map(_expert_of, order))
    experts = dict.fromkeys(seq)  # in order of first appearance
    pairs = [(e, nxt) for e, nxt in _full_expert_order(ctx, experts) if nxt is not None]
    _check_syncall_order(ctx, seq, pairs)
    return {nxt: {f"g1sync.e{e}": lam} for e, nxt in pairs}


def _check_syncall_order(ctx: BuildContext, seq: Sequence[int], pairs: Sequence[tuple[int, int]]) -> None:
    """A :class:`ScenarioError` unless every tile of each expert ``e`` comes before every tile of
    the expert ``nxt`` that waits for its SYNCALL, in GMM1's program order (``seq``: each tile's
    expert, in that order): otherwise a tile of ``nxt`` precedes one of ``e`` on a core, or in an
    earlier wave, and waits for a flag set after it (a cycle). The V1 kernel runs its full-core
    experts first, whole and in order (gmm1.h@HEAD L158-181); a wave packer that puts another
    expert's m-groups before or among theirs (on a skewed routing: ``longest_expert_first``, or
    ``balanced_waves`` with several m-groups per wave) asks for an order it cannot run."""
    if not pairs:
        return
    at = np.fromiter(seq, np.int64, len(seq))
    for e, nxt in pairs:
        last_e = int(np.flatnonzero(at == e)[-1])
        first_nxt = int(np.flatnonzero(at == nxt)[0])
        if first_nxt < last_e:
            cfg = ctx.cfg
            full = ctx.layout.gmm1_full_experts
            raise ScenarioError(
                f"policy.wave_packing = {cfg.wave_packing!r} with options.gmm1_full_experts = {full} "
                f"(p1_override = {cfg.p1_override}): GMM1's waves run expert {nxt}'s tiles before the "
                f"last of expert {e}'s, yet expert {nxt} waits for the SYNCALL after expert {e} (a "
                f"cycle: the full-core experts run first, whole and in order); allowed: a wave packing "
                f"that keeps local experts 0..{full - 1} first and whole on this routing "
                f"('sequential_greedy' always does), or options.gmm1_full_experts = 0"
            )


def wire_full_experts(ctx: BuildContext, em: Emitter, tiles: GmmTiles) -> str | None:
    """``options.gmm1_full_experts``: after each GMM1 expert that runs on every cube core, an
    AIC-only SYNCALL (gmm1.h@HEAD L173-181): a flag ``g1sync.e{e}`` on the expert's tiles that
    the next expert's tiles wait for (λ = one SYNCALL). Returns the last such flag (GMM2's own
    cores wait for it too before their first tile), or None. Only the flags are emitted here:
    the tiles were emitted with the waits on them (:func:`full_expert_waits`)."""
    if not ctx.layout.gmm1_full_experts:
        return None
    by_expert = tiles.events_by_expert()
    last: str | None = None
    for e, _nxt in _full_expert_order(ctx, by_expert):
        last = em.flag(f"g1sync.e{e}", by_expert[e])
    return last


def build_gmm2(
    ctx: BuildContext,
    em: Emitter,
    plan: RankPlan,
    act: ActivationOut,
    join_flag: str | None,
    full_sync: str | None = None,
    *,
    cores: Sequence[int] | None = None,
    chain: bool = True,
) -> Gmm2Out:
    """GMM2 tiles. A flag ``v2c.w{w}`` per wave on the activation events of the wave's m-groups;
    with ``per_chunk`` readiness each tile is cut into K chunks that wait for a flag
    ``v2c.e{e}.m{mb}.k{c}`` on the activations covering their columns instead. λ = flag latency.
    Cores that joined from ``join_flag``'s group wait for it; the first wave also waits for
    ``full_sync`` (GMM1's AIC-only SYNCALL after experts on every core, λ = one SYNCALL). Then a
    flag ``g2c.e{e}`` per expert."""
    lam = ctx.sync.flag_us
    lk = ctx.cfg.link("activation", "gmm2")
    chunks = lk.chunks if lk.readiness == "per_chunk" else 1
    wave_flags = []
    for w, wave in enumerate(plan.gmm2.waves):
        deps: list[str] = []
        for g in wave:
            deps.extend(act.by_mgroup.get((g.expert, g.mb), ()))
        wave_flags.append(em.flag(f"v2c.w{w}", sorted(set(deps))))
    chunk_flags: dict[tuple[int, int, int], str] = {}

    def chunk_ready(e: int, mb: int, c: int) -> Mapping[str, float]:
        key = (e, mb, c)
        fl = chunk_flags.get(key)
        if fl is None:
            fl = chunk_flags[key] = em.flag(f"v2c.e{e}.m{mb}.k{c}", act.by_chunk.get(key, ()))
        return {fl: lam}

    first = {full_sync: ctx.sync.syncall_us} if full_sync is not None else {}

    def wave_ready(w: int, e: int) -> Mapping[str, float]:
        return {wave_flags[w]: lam, **(first if w == 0 else {})}

    carry = plan.gmm1.order if ctx.cfg.core_cursor == "across_stages" else ()
    if chunks > 1:
        tiles = gmm_tiles(
            ctx,
            em,
            plan.gmm2,
            plan.experts,
            lambda w, e: first if w == 0 else {},
            chunk_ready,
            chunks,
            join_flag,
            carry,
            cores=cores,
            chain=chain,
        )
    else:
        tiles = gmm_tiles(
            ctx, em, plan.gmm2, plan.experts, wave_ready, None, 1, join_flag, carry, cores=cores, chain=chain
        )
    done = {e: em.flag(f"g2c.e{e}", mms) for e, mms in tiles.events_by_expert().items()}
    return Gmm2Out(tiles, MappingProxyType(done))


def gmm_tiles(
    ctx: BuildContext,
    em: Emitter,
    gplan: GmmPlan,
    experts: Sequence[ExpertPlan],
    wave_ready: WaveReady,
    chunk_ready: ChunkReady | None,
    chunks: int,
    join_flag: str | None,
    carry: Sequence[Item] = (),
    *,
    cores: Sequence[int] | None = None,
    chain: bool = True,
    waits: Mapping[int, Mapping[str, float]] | None = None,
) -> GmmTiles:
    """The pipeline of the module docstring on one stage's tiles in program order (``carry``: see
    :func:`assign_cores`). ``cores``: each tile's core when the orchestration assigned them
    (else the registered rule does); ``chain``: in program order on each core now (an
    orchestration that interleaves the stages on a core wires it later, see
    :meth:`~moeopt.megamoe.build.emitter.Emitter.chain`); ``waits``: expert -> dependencies its
    tiles (their last K chunks) take after all others (:func:`full_expert_waits`). A stage whose
    tiles a restructuring rule may move (``policy.restructure``, :mod:`moeopt.megamoe.stealing`)
    is never chained: each core takes its queued tiles as they become ready (ties in program
    order), and the stage's own cores are declared as the pool a tile may move in."""
    stage = gplan.stage
    order = gplan.order
    late = stage in ctx.layout.late
    if stage in ctx.layout.queued:
        from moeopt.megamoe.stealing import steal_pool

        chain = False
        em.pool(steal_pool(stage), [f"c{k}.AIC" for k in ctx.layout.groups[stage].cores])
    cols = TileColumns.of_plan(gplan)
    if late:
        cores = [-1] * len(order)
    elif cores is None:
        cores = assign_cores(ctx, stage, experts, order, carry, cols)
    codes = l1_residency_coded(ctx, stage, order, cores, cols)
    keys = codes.keys
    costs = TileCosts(ctx, em, stage, chunks)
    n_cores = np.zeros(len(experts), np.int64)  # per expert: the cores running it
    for e in smallints.unique(cols.expert).tolist():
        own, joined = ctx.layout.gmm_cores(stage, experts[e])
        n_cores[e] = len(set(own + joined))
    costs.share_hbm(keys, n_cores[cols.expert], codes)
    if chunks == 1 and chunk_ready is None and WHOLE_TILES_BY_COLUMN:
        return emit_whole_tiles(
            ctx, em, stage, experts, order, cores, keys, costs, wave_ready, join_flag, chain, cols, waits,
            codes,
        )
    names = tile_names(stage, order)
    return emit_tiles(
        ctx,
        em,
        stage,
        experts,
        order,
        cores,
        keys,
        costs,
        names,
        wave_ready,
        chunk_ready,
        join_flag,
        chain,
        waits,
    )


WHOLE_TILES_BY_COLUMN = True
"""Whether tiles not cut into K chunks that wait for their wave are emitted by
:func:`emit_whole_tiles` (False: by :func:`emit_tiles`, the reference it is tested against)."""


def tile_cube_us(tiles: Sequence[Tile], k_dim: int, rate: float) -> list[float]:
    """Each tile's cube time ``rows × cols × K / rate`` (the core-assignment rules' cost estimate)."""
    return [(t.m1 - t.m0) * (t.n1 - t.n0) * k_dim / rate for t in tiles]


def assign_cores(
    ctx: BuildContext,
    stage: str,
    experts: Sequence[ExpertPlan],
    order: Sequence[Item],
    carry: Sequence[Item] = (),
    cols: TileColumns | None = None,
) -> list[int]:
    """The core of every tile in ``order`` by the registered ``core_assignment`` rule.

    One call per run of expert groups (a wave's tiles of one expert) on the same cores, so that
    the rule's state (the rolling start core of gmm1.h@2d9d4288 L120-131, the busy totals of
    greedy_least_busy) carries from one expert group to the next; it restarts only where the
    core set changes (a joining group, V1). ``carry``: an earlier stage's tiles whose groups run
    first in the same call when its last run is on the same cores (``policy.core_cursor =
    across_stages``: the cursor rolls on from GMM1 into GMM2); their cores are not returned.
    ``cols``: ``order``'s columns, if made."""
    c = TileColumns.of(order) if cols is None else cols
    runs = _runs(ctx, stage, experts, order, c)
    k_dim = gemm_k(ctx, stage)
    rate = ctx.cube_rate()
    # each tile's cube time, in the order of the runs' groups (a carried group's tiles first)
    cube: list[float] = _cube_us(c, k_dim, rate)
    skip = 0
    if carry and runs:
        before = _runs(ctx, "gmm1", experts, carry)
        if before and before[-1][0] == runs[0][0]:
            runs[0] = (runs[0][0], before[-1][1] + runs[0][1])
            skip = sum(len(g) for g in before[-1][1])
            # (costed with this stage's K, as they always were)
            cube = tile_cube_us([t for g in before[-1][1] for _w, _e, t in g], k_dim, rate) + cube
    assign = lookup("core_assignment", ctx.cfg.core_assignment)()
    out: list[int] = []
    at = 0
    for r, (cores, grps) in enumerate(runs):
        costs = []
        for g in grps:
            costs.append(cube[at : at + len(g)])
            at += len(g)
        flat = [cores[slot] for slots in assign(costs, len(cores)) for slot in slots]
        out += flat[skip:] if r == 0 else flat
    return out


def _cube_us(c: TileColumns, k_dim: int, rate: float) -> list[float]:
    """:func:`tile_cube_us` of every tile of the columns ``c``: the same integer product (well
    below 2**53) divided by ``rate`` as a float, elementwise."""
    return (c.rows * c.cols * k_dim / rate).tolist()


def _runs(
    ctx: BuildContext,
    stage: str,
    experts: Sequence[ExpertPlan],
    order: Sequence[Item],
    cols: TileColumns | None = None,
) -> list[tuple[list[int], list[list[Item]]]]:
    """``order``'s expert groups (a wave's tiles of one expert, in order), gathered into runs on
    the same cores (:func:`_runs_of` of the items tagged with ``stage``, without the tags); a
    group starts where the (wave, expert) of the columns ``cols`` changes."""
    n = len(order)
    if not n:
        return []
    c = TileColumns.of(order) if cols is None else cols
    cut = np.flatnonzero((c.wave[1:] != c.wave[:-1]) | (c.expert[1:] != c.expert[:-1])) + 1
    bounds = [0, *cut.tolist(), n]
    groups = [list(order[a:b]) for a, b in pairwise(bounds)]
    heads = [(stage, e) for e in c.expert[bounds[:-1]].tolist()]
    return _gather(ctx, experts, heads, groups)


def _runs_of(
    ctx: BuildContext, experts: Sequence[ExpertPlan], tagged: Sequence[tuple[str, Item]]
) -> list[tuple[list[int], list[list[tuple[str, Item]]]]]:
    """:func:`_runs` of tiles tagged with their stage (an orchestration that interleaves the GMM
    stages assigns them in one run): a group is a stage's wave's tiles of one expert."""
    groups: list[list[tuple[str, Item]]] = []
    grp: list[tuple[str, Item]] = []
    cur: tuple[str, int, int] | None = None
    for x in tagged:
        st, (w, e, _t) = x
        if (st, w, e) != cur:
            cur = (st, w, e)
            grp = []
            groups.append(grp)
        grp.append(x)
    return _gather(ctx, experts, [(grp[0][0], grp[0][1][1]) for grp in groups], groups)


_G = TypeVar("_G")


def _gather(
    ctx: BuildContext, experts: Sequence[ExpertPlan], heads: Sequence[tuple[str, int]], groups: list[_G]
) -> list[tuple[list[int], list[_G]]]:
    """The groups (each with its (stage, expert)) gathered into runs on the same cores."""
    runs: list[tuple[list[int], list[_G]]] = []
    for (st, e), grp in zip(heads, groups, strict=True):
        own, joined = ctx.layout.gmm_cores(st, experts[e])
        cores = own + joined
        if runs and runs[-1][0] == cores:
            runs[-1][1].append(grp)
        else:
            runs.append((cores, [grp]))
    return runs


class KeyCodes(NamedTuple):
    """:func:`l1_residency`'s keys with their numbering: ``keys[i] is distinct[no[i]]``, the
    distinct keys in ascending code order (equal keys, equal numbers: one tuple per distinct
    key)."""

    keys: list[CostKey]
    no: np.ndarray
    distinct: list[CostKey]


def l1_residency(
    ctx: BuildContext,
    stage: str,
    order: Sequence[Item],
    cores: Sequence[int],
    cols: TileColumns | None = None,
) -> list[CostKey]:
    """:func:`l1_residency_coded`'s keys."""
    return l1_residency_coded(ctx, stage, order, cores, cols).keys


def l1_residency_coded(
    ctx: BuildContext,
    stage: str,
    order: Sequence[Item],
    cores: Sequence[int],
    cols: TileColumns | None = None,
) -> KeyCodes:
    """Per tile, its :class:`TileCosts` key: its extent and what it finds on chip.

    * A (B) resident in L1: the previous tile on the same core was the same expert's same M
      block (N block) and both tiles' A and B fit in L1 together (``l1_bytes``);
    * A (B) read before: an earlier tile of the same expert read this M block's A (N block's B)
      from HBM, so it comes from L2 now (late-bound tiles: only this).

    Worked out on the columns of ``order`` (``cols``, if made) at once; the tile-by-tile loop it
    replaced is kept in ``tests/megamoe/test_build_columns.py`` as the reference."""
    n = len(order)
    if not n:
        return KeyCodes([], np.zeros(0, np.int64), [])
    c = TileColumns.of(order) if cols is None else cols
    k_dim = gemm_k(ctx, stage)
    bpe = ctx.bpe
    scale_bytes = 8 if ctx.cfg.quant == "w8a8" else 0
    l1_bytes = ctx.c("l1_bytes")
    core = np.fromiter(cores, np.int64, n)
    e, mb, nb, rows, tcols = c.expert, c.mb, c.nb, c.rows, c.cols
    # each pinned tile's previous tile on its core (-1: the core's first, or late-bound): the
    # pinned tiles by core, in order within a core (a stable sort)
    prev = np.full(n, -1, np.int64)
    pinned = np.flatnonzero(core >= 0)
    by_core = pinned[stable_order(core[pinned])]
    same = core[by_core[1:]] == core[by_core[:-1]]
    prev[by_core[1:][same]] = by_core[:-1][same]
    p = np.maximum(prev, 0)
    # (integers well below 2**53: the comparison with a float l1_bytes is exact, as in Python)
    fits = rows * k_dim * bpe + (tcols * k_dim * bpe + tcols * scale_bytes) <= l1_bytes
    same_expert = (prev >= 0) & fits & (e[p] == e)
    a_res = same_expert & (mb[p] == mb)
    b_res = same_expert & (nb[p] == nb)
    a_seen, b_seen = _seen_before(e, mb), _seen_before(e, nb)
    # one tuple per distinct key, which its tiles share: the few distinct keys are made once
    # (not a tuple per tile), and later passes that compare neighbouring keys (the runs of
    # TileCosts._runs) find equal ones by identity, in C. The code numbers the keys one to one
    # (every column >= 0, the flags 0 or 1, the columns below their maximum + 1)
    code = rows * (int(tcols.max()) + 1) + tcols
    for flag in (a_res, b_res, a_seen, b_seen):
        code = code * 2 + flag
    _codes, first, key_no = smallints.unique(code, return_index=True, return_inverse=True)
    distinct = list(
        zip(
            rows[first].tolist(),
            tcols[first].tolist(),
            a_res[first].tolist(),
            b_res[first].tolist(),
            a_seen[first].tolist(),
            b_seen[first].tolist(),
        )
    )
    return KeyCodes(_take(distinct, key_no), key_no, distinct)


def _seen_before(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per entry, whether an earlier entry has the same pair ``(a, b)`` (non-negative integers):
    the entries sorted stably by the pair, each equal to the one before it in that order."""
    key = a * (int(b.max()) + 1) + b
    by_key = stable_order(key)
    ks = key[by_key]
    out = np.empty(len(key), bool)
    out[by_key] = np.concatenate(([False], ks[1:] == ks[:-1]))
    return out


class TileCosts:
    """One tile's time on its core (one K chunk of it), memoised by :data:`CostKey`.

    The kernel streams a tile's K extent through L1 in steps of ``tile_k`` (``l1_stages`` buffers
    of an A and a B slice each, gmm_common.h L22-23; the preload loop of
    pto_gmm_preload_async_fixpipe_quant.hpp RunTile L218-278): per step a load
    ``L = (A_k + B_k) / gm_l1_bytes_per_us`` on the core's GM->L1 pipe and a compute
    ``C = align16(rows) × cols × tile_k / cube rate``. With two or more stages the load of step
    ``i + 1`` overlaps the compute of step ``i``, so a core running tiles back to back spends
    ``n_k × max(L, C)`` per tile (``n_k = ceil(K / tile_k)``; one stage: ``n_k × (L + C)``); a tile
    that starts an empty pipeline (its data just arrived) first waits one more step, the fill
    ``min(L, C)``, which the tile's data-ready edge carries. ``A_k = rows × tile_k × bpe``,
    ``B_k = cols × tile_k × bpe``, plus the tile's per-channel scale ``cols × 8`` B once; a block
    resident in L1 is not loaded, and a B read before (an L2 hit) loads at
    ``b_reuse_load_factor`` of its time. The activation rows (``A``, row-major, K contiguous) are
    read in bursts of ``tile_k × bpe`` bytes per row; when that is not a multiple of
    :data:`GM_BURST_ALIGN` the steps start off the 512-B boundary and ``A`` loads at
    ``gm_unaligned_load_efficiency`` of the rate (the weights' layout is not known, so ``B`` is
    not penalised). The tile holds HBM bandwidth for the bytes not read
    before (first touch), and ``gm_l1`` units for all it loads (the die's GM->L1 paths, see
    :func:`declare_gmm_semaphores`). The MACs counted are ``rows × cols × K`` (real rows only).

    Provenance (config/profiles.py): ``gm_l1_bytes_per_us`` pto-a2a3 fitted to the load-bound
    GMM1 tile of hardware.md §1 (14 K steps of 512), megamoe-a8w8 measured (§5);
    ``b_reuse_load_factor`` megamoe-a8w8 measured 0.53 (§5), pto-a2a3 1.0 (assumed: the §1 fit
    already averages L2 hits); the cube rates are spec (§3: 8192 int8 / 4096 fp16 MAC per cycle
    at 1.8 GHz; §5 for arch35); ``l1_bytes`` spec (§3, 512 KiB); ``CUBE_M_ALIGN`` the cube's
    16-row fractal (spec).

    A value: :class:`TileCost`; the traffic is counted by the caller, per event.
    """

    def __init__(self, ctx: BuildContext, em: Emitter, stage: str, chunks: int) -> None:
        self.memo: dict[tuple[CostKey, float], TileCost] = {}
        self.chunks = chunks
        self._em = em
        self._k = gemm_k(ctx, stage)
        self._tile_k = ctx.cfg.tile_k
        self._overlap = ctx.cfg.l1_stages >= 2
        self._bpe = ctx.bpe
        self._scale = 8 if ctx.cfg.quant == "w8a8" else 0
        self._frac = 1.0 / chunks
        self._gm_l1 = ctx.c("gm_l1_bytes_per_us")
        self._reuse = ctx.c("b_reuse_load_factor")
        aligned = (self._tile_k * self._bpe) % GM_BURST_ALIGN == 0
        self._a_eff = 1.0 if aligned else ctx.c("gm_unaligned_load_efficiency")
        self._rate = ctx.cube_rate()
        self._fabric = em.has("gm_l1")
        self._hbm = ctx.c("hbm_bytes_per_us") if ctx.cfg.bandwidth_contention else 0.0
        self.stretch: list[float] = []
        self.stretch_no: np.ndarray | None = None
        """per tile, its stretch's number among the distinct stretch values (set by
        :meth:`share_hbm` given the keys' codes; None otherwise)"""

    def share_hbm(self, keys: Sequence[CostKey], cores: Sequence[int], codes: KeyCodes | None = None) -> None:
        """Slow every tile alike when the cores running it together ask more of HBM than it gives.

        With ``P`` cores streaming at once (the cores that run the tile's expert, at most its
        tiles), the stage's tiles ask ``P × Σ first-touch bytes / Σ tile time`` of HBM; above
        ``hbm_bytes_per_us`` a tile takes ``demand / hbm_bytes_per_us`` times longer (the cores
        share HBM fairly, so the stage moves its first-touch bytes at the HBM rate) and holds its
        HBM units at that slower rate, so as many tiles run together as there are cores. Below it
        nothing changes (the HBM semaphore still arbitrates against other stages). Without this,
        whole tiles would queue for HBM units and the last one that does not fit would leave up
        to one tile's rate of HBM idle. ``cores``: per tile, the cores of its expert.

        ``codes``: the keys' numbering (:func:`l1_residency_coded`), if known: the per-tile
        arrays are then gathered by it, the runs of equal core counts found on an array, and
        each tile's stretch numbered (:attr:`stretch_no`), without a Python step per run of
        keys (callgrind); the same stretches (``tests/megamoe/test_build_columns.py``)."""
        n = len(keys)
        self.stretch = [1.0] * n
        if codes is not None:
            self.stretch_no = np.zeros(n, np.int64)
        if not self._hbm or not keys:
            return
        if codes is not None:
            self._share_hbm_coded(codes, np.asarray(cores, np.int64))
            return
        # Consecutive tiles mostly share a key (runs of an expert's blocks): the keys are
        # compared along the order in C, and only the runs' keys hashed (hashing every tile's
        # key twice, to find the distinct ones and to look each up, was most of the cost)
        run_keys, run_lens = self._runs(keys)
        raw = {key: self._raw(key) for key in dict.fromkeys(run_keys)}  # few distinct keys
        per_run = list(map(raw.__getitem__, run_keys))
        m = len(run_keys)
        # the sums of every tile's first-touch bytes and time, added one by one in tile order
        # (add.accumulate is that running sum: the same floats as a loop's +=; each run's value
        # repeated over its tiles is the per-tile array)
        hbm_tiles = np.repeat(np.fromiter(map(itemgetter(5), per_run), float, m), run_lens)
        dur_tiles = np.repeat(np.fromiter(map(itemgetter(0), per_run), float, m), run_lens)
        hbm = float(np.add.accumulate(hbm_tiles)[-1])
        dur = float(np.add.accumulate(dur_tiles)[-1])
        rho = hbm / dur if dur > 0 else 0.0
        # max(1.0, min(p, n) * rho / hbm) per tile, the same float operations elementwise, once
        # per run of equal core counts and repeated over the run
        core_runs, core_lens = self._runs(cores)
        p = np.minimum(np.fromiter(core_runs, np.int64, len(core_runs)), n)
        per_core_run = np.maximum(1.0, p * rho / self._hbm).tolist()
        self.stretch = list(chained.from_iterable(map(repeat, per_core_run, core_lens)))

    def _share_hbm_coded(self, codes: KeyCodes, cores: np.ndarray) -> None:
        """:meth:`share_hbm` given the keys' codes: the same sums (each tile's value, added one
        by one in tile order) and the same stretch per run of equal core counts."""
        n = len(codes.no)
        raw = [self._raw(key) for key in codes.distinct]  # few distinct keys
        hbm = float(np.add.accumulate(np.array([r[5] for r in raw], float)[codes.no])[-1])
        dur = float(np.add.accumulate(np.array([r[0] for r in raw], float)[codes.no])[-1])
        rho = hbm / dur if dur > 0 else 0.0
        starts = np.flatnonzero(np.append(True, cores[1:] != cores[:-1]))
        core_lens = np.diff(np.append(starts, n))
        per_run = np.maximum(1.0, np.minimum(cores[starts], n) * rho / self._hbm)
        self.stretch = list(chained.from_iterable(map(repeat, per_run.tolist(), core_lens.tolist())))
        _values, value_no = np.unique(per_run, return_inverse=True)
        self.stretch_no = np.repeat(value_no, core_lens)

    @staticmethod
    def _runs(seq: Iterable[_G]) -> tuple[list[_G], list[int]]:
        """The runs of equal consecutive values of ``seq``: each run's first value, its length."""
        firsts: list[_G] = []
        lens: list[int] = []
        for value, run in groupby(seq):
            firsts.append(value)
            lens.append(len(list(run)))
        return firsts, lens

    def _raw(self, key: CostKey) -> tuple[float, float, float, float, float, float]:
        """(time, fill, load, compute, load bytes, first-touch HBM bytes) before HBM sharing."""
        t_rows, t_cols, a_res, b_res, a_seen, b_seen = key
        k_dim, frac, bpe = self._k, self._frac, self._bpe
        steps = -(-k_dim // self._tile_k) * frac  # K steps of this chunk (fractional when cut)
        a_b = 0.0 if a_res else t_rows * k_dim * bpe * frac
        b_b = 0.0 if b_res else (t_cols * k_dim * bpe + t_cols * self._scale) * frac
        load_us = (a_b / self._a_eff + (b_b * self._reuse if b_seen else b_b)) / self._gm_l1
        rows_al = -(-t_rows // CUBE_M_ALIGN) * CUBE_M_ALIGN
        compute_us = rows_al * t_cols * k_dim * frac / self._rate
        step_l, step_c = load_us / steps, compute_us / steps
        if self._overlap:
            dur, fill = steps * max(step_l, step_c), min(step_l, step_c)
        else:
            dur, fill = load_us + compute_us, 0.0
        hbm_bytes = (0.0 if a_seen else a_b) + (0.0 if b_seen else b_b)
        return dur, fill, load_us, compute_us, a_b + b_b, hbm_bytes

    def compute(self, key: CostKey, stretch: float = 1.0) -> TileCost:
        dur, fill, load_us, compute_us, load_bytes, hbm_bytes = self._raw(key)
        dur *= stretch
        em = self._em
        hbm_units = em.units("hbm", hbm_bytes, dur, count=False) if hbm_bytes else 0
        load_units = em.units("gm_l1", load_bytes, dur, count=False) if self._fabric and load_bytes else 0
        t_rows, t_cols = key[0], key[1]
        macs = t_rows * t_cols * self._k * self._frac
        got = self.memo[(key, stretch)] = TileCost(
            dur, fill, load_us, compute_us, load_bytes, hbm_bytes, hbm_units, load_units, macs
        )
        return got


class TileCost(NamedTuple):
    """One tile's (chunk's) cost: its time on the core, the pipeline fill, the load and compute
    totals it is made of, the bytes it loads and those first read from HBM, the bandwidth units
    it holds, and its MACs."""

    dur_us: float
    fill_us: float
    load_us: float
    compute_us: float
    load_bytes: float
    hbm_bytes: float
    hbm_units: int
    load_units: int
    macs: float


def tile_names(stage: str, order: Sequence[Item]) -> list[str]:
    """Each tile's base name ``g1.e{expert}.m{mb}.n{nb}`` (``g2.`` for GMM2); its event adds
    ``.mm`` (after ``.k{c}`` when cut into K chunks)."""
    pre = "g1" if stage == "gmm1" else "g2"
    # (an f-string per tile: fewer instructions than str.format over the columns, callgrind)
    return [f"{pre}.e{e}.m{t.mb}.n{t.nb}" for _w, e, t in order]


_first, _second = itemgetter(0), itemgetter(1)


def emit_whole_tiles(
    ctx: BuildContext,
    em: Emitter,
    stage: str,
    experts: Sequence[ExpertPlan],
    order: Sequence[Item],
    cores: Sequence[int],
    keys: Sequence[CostKey],
    costs: TileCosts,
    wave_ready: WaveReady,
    join_flag: str | None,
    chain: bool = True,
    cols: TileColumns | None = None,
    waits: Mapping[int, Mapping[str, float]] | None = None,
    codes: KeyCodes | None = None,
) -> GmmTiles:
    """:func:`emit_tiles` of tiles that are not cut into K chunks (one event each) and wait for
    their wave's readiness (no ``chunk_ready``): the same events, in the same order, with the
    same dependencies, units, labels and running totals, made column by column and emitted by
    one :meth:`~moeopt.megamoe.build.emitter.Emitter.emit_run`. ``wave_ready`` must not emit
    (the wave readiness of GMM1 and GMM2 only names flags made before).

    Every tile has a cost class (its distinct ``(key, stretch)``, found on the runs of equal
    consecutive pairs, compared in C: tiles come in runs of an expert's blocks) and a core: each
    value that depends only on those (the cost, the held units, the readiness with the fill on
    its edges) is worked out once per distinct combination, numbered on arrays, and given to the
    tiles by list lookups in C. What is the tile's own (its name, labels and dependency dict, its
    event) is made in one comprehension or C-level map each."""
    layout = ctx.layout
    late = stage in layout.late
    onchip = ctx.cfg.link(stage, CONSUMER[stage]).location == "onchip"
    slot_key = SLOT_KEY[stage]
    n = len(order)
    c = TileColumns.of(order) if cols is None else cols
    pool = em.pool(f"AIC-{stage}", layout.members[stage]) if late else ""
    if not n:
        em.emit_run(stage, [], [], [], [], [], [], [], chain and not late)
        return GmmTiles((), (), (), ())
    # the cost classes: each distinct (key, stretch) costed once (in order of first appearance)
    cls, tc = _cost_classes(keys, costs, codes)
    n_cls = len(tc)
    # the cores: each tile's core numbered among the stage's (the pool's one entry when late-bound)
    core_arr = np.fromiter(cores, np.int64, n)
    core_ids, core_no = smallints.unique(core_arr, return_inverse=True)
    core_list = core_ids.tolist()
    if late:
        res_of: list[tuple[str, ...]] = [(pool,)] * len(core_list)
        takes: list[str | None] = ["onchip_" + slot_key if onchip else None] * len(core_list)
    else:
        res_of = [layout.core_res(k, "AIC")[1] for k in core_list]
        takes = [f"c{k}.onchip_{slot_key}" if onchip else None for k in core_list]
    res = _take(res_of, core_no)
    # held units (by cost class and on-chip slot taken): one read-only pair of maps each
    hold_code = cls * len(core_list) + core_no if onchip else cls
    hold_ids, hold_no = smallints.unique(hold_code, return_inverse=True)
    pairs = []
    for h in hold_ids.tolist():
        t, take = (tc[h // len(core_list)], takes[h % len(core_list)]) if onchip else (tc[h], takes[0])
        pairs.append(em.hold_maps((("hbm", t.hbm_units), ("gm_l1", t.load_units)), take))
    # the wave's readiness with the pipeline fill on each edge, by (wave, expert, cost class); a
    # dict per tile when something is added to it (its chain edge, a sync wait), else shared
    n_exp = int(c.expert.max()) + 1
    ready_ids, ready_no = smallints.unique((c.wave * n_exp + c.expert) * n_cls + cls, return_inverse=True)
    ready = []
    ready_codes = ready_ids.tolist()
    for code in ready_codes:
        we, k = divmod(code, n_cls)
        w, e = divmod(we, n_exp)
        fill = tc[k].fill_us
        ready.append({f: lam + fill for f, lam in wave_ready(w, e).items()})
    syncs = _tile_syncs(ctx, stage, join_flag, waits, c.expert, core_list, core_no)
    ready_of = _take(ready, ready_no)
    chained = chain and not late
    deps = list(map(dict.copy, ready_of)) if chained or syncs is not None else ready_of
    # per-class columns given to the tiles by array lookups
    # (each class's float object given to its tiles: no float made per tile)
    durs = _take([t.dur_us for t in tc], cls)
    labels = _tile_labels(stage, ctx.rank, experts, tc, ready_codes, n_exp, ready_no, cores)
    events = tile_event_names(stage, c)
    acqs, rels = _take(list(map(_first, pairs)), hold_no), _take(list(map(_second, pairs)), hold_no)
    # (resources: one-resource tuples; maps: hold_maps' read-only ones; durations: the classes')
    plain = all(type(t.dur_us) is float for t in tc)
    res_no = None if late else core_no
    em.emit_run(stage, events, res, deps, acqs, rels, durs, labels, chained, syncs, res_no, plain=plain)
    # the running totals, each tile's bytes and MACs added in tile order (add.accumulate is the
    # running sum from the total: the same floats as a loop's +=; an HBM byte count of 0 added
    # leaves the non-negative total as it is)
    traffic = em.traffic
    traffic["gm_to_l1"] = _running(traffic["gm_to_l1"], [t.load_bytes for t in tc], cls)
    traffic["hbm"] = _running(traffic["hbm"], [t.hbm_bytes for t in tc], cls)
    em.macs = _running(em.macs, [t.macs for t in tc], cls)
    out = tuple(events)
    return GmmTiles(tuple(order), out, tuple(cores), out)


def _cost_classes(
    keys: Sequence[CostKey], costs: TileCosts, codes: KeyCodes | None
) -> tuple[np.ndarray, list[TileCost]]:
    """Each tile's cost class (its distinct ``(key, stretch)``, numbered in order of first
    appearance) and each class's :class:`TileCost`. With the keys' codes and the stretches'
    numbers (:meth:`TileCosts.share_hbm`) the pairs are numbered on arrays; otherwise the runs of
    equal consecutive pairs are compared in C (tiles come in runs of an expert's blocks) and
    only the runs' pairs hashed."""
    n = len(keys)
    memo = costs.memo
    stretch_no = costs.stretch_no
    if codes is not None and stretch_no is not None and len(stretch_no) == n:
        first, cls = smallints.numbered(codes.no * (int(stretch_no.max()) + 1) + stretch_no)
        stretch = costs.stretch
        firsts = first.tolist()
        pairs = zip(map(keys.__getitem__, firsts), map(stretch.__getitem__, firsts))
        tc = [memo.get(p) or costs.compute(*p) for p in pairs]
        return cls, tc
    run_pairs, run_lens = TileCosts._runs(zip(keys, costs.stretch if costs.stretch else repeat(1.0, n)))
    number = dict(zip(dict.fromkeys(run_pairs), range(n)))  # (key, stretch) -> its class
    tc = [memo.get(p) or costs.compute(*p) for p in number]  # each class's TileCost
    cls = np.repeat(np.fromiter(map(number.__getitem__, run_pairs), np.int64, len(run_pairs)), run_lens)
    return cls, tc


_T = TypeVar("_T")


def _take(values: Sequence[_T], index: np.ndarray) -> list[_T]:
    """``[values[i] for i in index]``, the very objects (shared maps stay shared), gathered in C
    from an object array (cheaper than a C-level map of ``values.__getitem__`` over ``index``
    as a list of ints, callgrind)."""
    return np.fromiter(values, object, len(values))[index].tolist()


def _tile_labels(
    stage: str,
    rank: int,
    experts: Sequence[ExpertPlan],
    tc: Sequence[TileCost],
    codes: list[int],
    n_exp: int,
    code_no: np.ndarray,
    cores: Sequence[int],
) -> list[dict[str, object]]:
    """Each whole tile's labels (:func:`emit_tiles`' keys, in its order). ``codes``: the
    distinct ``(wave × n_exp + expert) × classes + cost class`` of the tiles (the readiness
    codes of :func:`emit_whole_tiles`), ``code_no`` each tile's number among them: every label
    but the tile's index and core is the same for the tiles of one code, so one dict per code
    holds them (with the keys in order), each tile gets a copy (a C-level map), and its index
    and core are stored by a plain loop. (A C-level ``map`` of ``dict.__setitem__`` costs more
    than the loop's two subscript stores: the unbound slot wrapper builds an argument tuple per
    call; callgrind, 46k tiles: 97.4M against 39.4M instructions.)"""
    n_cls = len(tc)
    templates: list[dict[str, object]] = []
    for code in codes:
        we, k = divmod(code, n_cls)
        w, e = divmod(we, n_exp)
        templates.append(
            {
                "stage": stage,
                "rank": rank,
                "wave": w,
                "expert": e,
                "tile": 0,
                "shared": experts[e].shared,
                "chunk": 0,
                "core": 0,
                "load_us": tc[k].load_us,
                "compute_us": tc[k].compute_us,
            }
        )
    out: list[dict[str, object]] = list(map(dict.copy, _take(templates, code_no)))
    for d, i, k in zip(out, range(len(out)), cores):
        d["tile"] = i
        d["core"] = k
    return out


def _tile_syncs(
    ctx: BuildContext,
    stage: str,
    join_flag: str | None,
    waits: Mapping[int, Mapping[str, float]] | None,
    expert: np.ndarray,
    core_list: list[int],
    core_no: np.ndarray,
) -> list[Mapping[str, float] | None] | None:
    """The waits after program order of each pinned tile of :func:`emit_whole_tiles`: a joined
    core's wait for ``join_flag`` (λ = flag latency), then its expert's ``waits``; one map per
    (joined, expert), None for a tile without any (None: no tile has any). ``expert``: the
    tiles' experts; ``core_no``: each tile's core as an index into ``core_list``."""
    layout = ctx.layout
    joined: set[int] = set()
    if join_flag is not None and stage not in layout.late:
        grp = layout.groups[stage]
        if grp.join is not None:
            joined = set(layout.groups[grp.join].cores) - set(grp.cores)
    if not joined and not waits:
        return None
    after = {join_flag: ctx.sync.flag_us} if join_flag is not None else {}
    per: list[Mapping[str, float] | None] = []
    for e in range(int(expert.max()) + 1):
        extra = waits.get(e) if waits else None
        per += [extra or None, {**after, **extra} if extra else after]
    in_joined = np.fromiter(map(joined.__contains__, core_list), bool, len(core_list))[core_no]
    return list(map(per.__getitem__, (expert * 2 + in_joined).tolist()))


def _running(total: float, per_class: list[float], cls: np.ndarray) -> float:
    """``total`` with each tile's value (its class's entry of ``per_class``) added one by one, in
    tile order."""
    vals = np.empty(len(cls) + 1)
    vals[0] = total
    vals[1:] = np.array(per_class, float)[cls]
    return float(np.add.accumulate(vals)[-1])


def tile_event_names(stage: str, c: TileColumns) -> list[str]:
    """Each whole tile's event name, :func:`tile_names` ``+ ".mm"``, from the columns: the
    head ``g1.e{expert}.m{mb}`` made once per distinct (expert, m-block), the tail
    ``.n{nb}.mm`` once per n-block, and each tile's two joined by one elementwise addition of
    object arrays (a string concatenation per tile, in C: no int formatted, no Python
    statement per tile)."""
    pre = "g1" if stage == "gmm1" else "g2"
    _codes, first, head_no = smallints.unique(
        c.expert * (int(c.mb.max()) + 1) + c.mb, return_index=True, return_inverse=True
    )
    heads = [f"{pre}.e{e}.m{mb}" for e, mb in zip(c.expert[first].tolist(), c.mb[first].tolist())]
    tails = [f".n{nb}.mm" for nb in range(int(c.nb.max()) + 1)]
    joined = np.fromiter(heads, object, len(heads))[head_no] + np.fromiter(tails, object, len(tails))[c.nb]
    return joined.tolist()


def emit_tiles(
    ctx: BuildContext,
    em: Emitter,
    stage: str,
    experts: Sequence[ExpertPlan],
    order: Sequence[Item],
    cores: Sequence[int],
    keys: Sequence[CostKey],
    costs: TileCosts,
    names: Sequence[str],
    wave_ready: WaveReady,
    chunk_ready: ChunkReady | None,
    join_flag: str | None,
    chain: bool = True,
    waits: Mapping[int, Mapping[str, float]] | None = None,
) -> GmmTiles:
    """One event per tile (per K chunk) on its core's cube, :class:`TileCost` long.

    A tile waits for its data (its wave's flag or its chunk's flag) with the pipeline fill added
    to that edge's λ, and follows the previous tile on its core in program order (late-bound: a
    pool of the stage's cubes, program order left to the binding). It holds its HBM and GM->L1
    units for its duration and, on its last chunk, takes a slot of the on-chip link to its
    consumer. A core that joined the stage's group waits for ``join_flag`` (λ = flag latency).
    Without ``chain`` a pinned tile is not put in program order here (see :func:`gmm_tiles`).
    A tile's last chunk then takes its expert's ``waits``, if any (see :func:`gmm_tiles`)."""
    layout = ctx.layout
    chunks = costs.chunks
    late = stage in layout.late
    onchip = ctx.cfg.link(stage, CONSUMER[stage]).location == "onchip"
    slot_key = SLOT_KEY[stage]
    if late:
        aic_pool = (em.pool(f"AIC-{stage}", layout.members[stage]),)
    grp = layout.groups[stage]
    joined: set[int] = set(layout.groups[grp.join].cores) - set(grp.cores) if grp.join is not None else set()
    join_deps = {join_flag: ctx.sync.flag_us} if join_flag is not None and not late else None
    # per core: its cube (as a one-resource tuple) and its on-chip slot semaphore
    core_names: dict[int, tuple[tuple[str], str]] = {}
    wave_deps: dict[tuple[int, int, float], dict[str, float]] = {}  # copied per tile
    memo, traffic, emit, hold_maps = costs.memo, em.traffic, em.emit, em.hold_maps
    holds: dict[tuple[int, int, str | None], tuple[Units, Units]] = {}  # hold_maps by its arguments
    rank = ctx.rank
    # running totals accumulated here, in order, and stored back (nothing else adds to them
    # meanwhile: the readiness callbacks only emit flags)
    macs_total, gm_l1_total, hbm_total = em.macs, traffic["gm_to_l1"], traffic["hbm"]
    events: list[str] = []
    heads: list[str] = []
    for idx, (w, e, t) in enumerate(order):
        k = cores[idx]
        key = keys[idx]
        stretch = costs.stretch[idx] if costs.stretch else 1.0
        cost = memo.get((key, stretch)) or costs.compute(key, stretch)
        cn = core_names.get(k)
        if cn is None:
            cn = core_names[k] = (layout.core_res(k, "AIC")[1], f"c{k}.onchip_{slot_key}")
        slot = ("onchip_" + slot_key if late else cn[1]) if onchip else None
        shared = experts[e].shared
        base = names[idx]
        ev = ""
        for c in range(chunks):
            gm_l1_total += cost.load_bytes
            if cost.hbm_bytes:
                hbm_total += cost.hbm_bytes
            if chunk_ready is not None:
                deps = {f: lam + cost.fill_us for f, lam in chunk_ready(e, t.mb, c).items()}
            else:
                dkey = (w, e, cost.fill_us)
                shared_deps = wave_deps.get(dkey)
                if shared_deps is None:
                    shared_deps = wave_deps[dkey] = {
                        f: lam + cost.fill_us for f, lam in wave_ready(w, e).items()
                    }
                deps = dict(shared_deps)
            if ev:
                deps[ev] = 0.0
            take = slot if c == chunks - 1 else None
            hkey = (cost.hbm_units, cost.load_units, take)
            got = holds.get(hkey)
            if got is None:
                got = holds[hkey] = hold_maps((("hbm", cost.hbm_units), ("gm_l1", cost.load_units)), take)
            acq, rel = got
            ev = f"{base}.k{c}.mm" if chunks > 1 else f"{base}.mm"
            if c == 0:
                heads.append(ev)
            labels = {
                "stage": stage,
                "rank": rank,
                "wave": w,
                "expert": e,
                "tile": idx,
                "shared": shared,
                "chunk": c,
                "core": k,
                "load_us": cost.load_us,
                "compute_us": cost.compute_us,
            }
            macs_total += cost.macs
            extra = waits.get(e) if waits and c == chunks - 1 else None
            if late:
                emit(ev, stage, aic_pool, deps, acq, rel, cost.dur_us, labels, None, None, extra)
            else:
                after: Mapping[str, float] | None = None
                if join_deps is not None and k in joined:
                    after = join_deps
                if extra:
                    after = {**after, **extra} if after else extra
                site = cn[0] if chain else None
                emit(ev, stage, cn[0], deps, acq, rel, cost.dur_us, labels, None, site, after)
        events.append(ev)
    em.macs = macs_total
    traffic["gm_to_l1"], traffic["hbm"] = gm_l1_total, hbm_total
    return GmmTiles(tuple(order), tuple(events), tuple(cores), tuple(heads))
