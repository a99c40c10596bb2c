"""GMM1 and GMM2: the grouped matrix multiplications, one pipeline shared by both stages.

Every output tile is a load phase on the core's ``MTE2`` (A and B bytes GM -> L1) and a compute
phase on its ``AIC`` (MACs / cube rate). The pipeline, one function each:

1. :func:`assign_cores`: which core runs each tile (the registered ``core_assignment`` rule,
   its state carried across expert groups on the same cores);
2. :func:`l1_residency`: what a tile finds in L1 (the previous tile on its core had the same A
   or B block) and in L2 (another tile already read that block from HBM);
3. :class:`TileCosts`: the closed-form load and compute times;
4. :func:`tile_names`: the tiles' event names;
5. :func:`emit_tiles`: the events, with the L1 stage slots (a per-core semaphore the load takes
   and the compute gives back), the on-chip link slots, bandwidth units and program order of
   each core's loads.

:func:`build_gmm1` and :func:`build_gmm2` differ only in what a tile waits for (its wave's D2C
flag, or the activation's readiness) and in their hand-off.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

from moeopt.megamoe.build.context import BuildContext
from moeopt.megamoe.build.emitter import Emitter
from moeopt.megamoe.build.handoff import ActivationOut, DispatchOut, Gmm1Out, Gmm2Out, GmmTiles
from moeopt.megamoe.build.plan import ExpertPlan, GmmPlan, Item, RankPlan
from moeopt.megamoe.build.sync import wire_lookahead
from moeopt.megamoe.config.implementation import CUBE_M_ALIGN  # spec: the cube's 16-row fractal
from moeopt.megamoe.planning import Tile
from moeopt.registry import lookup

# (tile rows, tile cols, A resident in L1, B resident in L1, A read before, B read before)
CostKey = tuple[int, int, bool, bool, bool, bool]
WaveReady = Callable[[int, int], Mapping[str, float]]  # (wave, expert) -> deps of its tiles
ChunkReady = Callable[[int, int, int], Mapping[str, float]]  # (expert, m-block, K chunk) -> deps

CONSUMER = {"gmm1": "activation", "gmm2": "combine"}  # the stage an on-chip link hands the tile to
SLOT_KEY = {"gmm1": "act", "gmm2": "comb"}


def gemm_k(ctx: BuildContext, stage: str) -> int:
    """The stage's reduction dimension: GMM1 ``h``, GMM2 ``hidden_dim / 2`` (after SwiGLU)."""
    return ctx.cfg.h if stage == "gmm1" else ctx.cfg.hidden_dim // 2


def declare_gmm_semaphores(ctx: BuildContext, em: Emitter) -> None:
    """L1 stage slots (``l1_stages`` per core, pooled when a GMM stage is late-bound) and the
    on-chip link slots of GMM1 -> activation and GMM2 -> combine (``depth`` per core)."""
    cfg = ctx.cfg
    n = cfg.aic_num
    if ctx.layout.l1_late:
        em.semaphore("l1", cfg.l1_stages * n)
    else:
        for k in range(n):
            em.semaphore(f"c{k}.l1", cfg.l1_stages)
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

    tiles = gmm_tiles(ctx, em, plan.gmm1, experts, wave_ready, None, 1, None)
    wire_lookahead(em, sync, dispatch.events, tiles.loads_by_wave(len(plan.gmm1.waves)))
    return Gmm1Out(tiles, em.flag("gmm1_done", tiles.computes))


def build_gmm2(
    ctx: BuildContext, em: Emitter, plan: RankPlan, act: ActivationOut, join_flag: str | None
) -> Gmm2Out:
    """GMM2 tiles. A flag ``v2c.w{w}`` per wave on the activation events of the wave's m-groups;
    with ``per_chunk`` readiness each tile is cut into K chunks that wait for a flag
    ``v2c.e{e}.m{mb}.k{c}`` on the activations covering their columns instead. λ = flag latency.
    Cores that joined from ``join_flag``'s group wait for it. Then a flag ``g2c.e{e}`` per expert."""
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

    if chunks > 1:
        tiles = gmm_tiles(ctx, em, plan.gmm2, plan.experts, lambda w, e: {}, chunk_ready, chunks, join_flag)
    else:
        tiles = gmm_tiles(ctx, em, plan.gmm2, plan.experts, lambda w, e: {wave_flags[w]: lam}, None, 1, join_flag)
    done = {e: em.flag(f"g2c.e{e}", mms) for e, mms in tiles.computes_by_expert().items()}
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
) -> GmmTiles:
    """The pipeline of the module docstring on one stage's tiles in program order."""
    stage = gplan.stage
    order = gplan.order
    late = stage in ctx.layout.late
    cores = [-1] * len(order) if late else assign_cores(ctx, stage, experts, order)
    keys = l1_residency(ctx, stage, order, cores)
    costs = TileCosts(ctx, em, stage, chunks)
    names = tile_names(stage, order)
    return emit_tiles(ctx, em, stage, experts, order, cores, keys, costs, names, wave_ready, chunk_ready, join_flag)


def tile_cube_us(tiles: Sequence[Tile], k_dim: int, rate: float) -> list[float]:
    """Each tile's cube time ``rows × cols × K / rate`` (the core-assignment rules' cost estimate)."""
    return [(t.m1 - t.m0) * (t.n1 - t.n0) * k_dim / rate for t in tiles]


def assign_cores(ctx: BuildContext, stage: str, experts: Sequence[ExpertPlan], order: Sequence[Item]) -> list[int]:
    """The core of every tile in ``order`` by the registered ``core_assignment`` rule.

    One call per run of expert groups (a wave's tiles of one expert) on the same cores, so that
    the rule's state (the rolling start core of gmm1.h@2d9d4288 L120-131, the busy totals of
    greedy_least_busy) carries from one expert group to the next; it restarts only where the
    core set changes (a joining group, V1)."""
    groups: list[list[int]] = []  # indices into order
    for i, (w, e, _t) in enumerate(order):
        if not groups or order[groups[-1][0]][1] != e or order[groups[-1][0]][0] != w:
            groups.append([])
        groups[-1].append(i)
    runs: list[tuple[list[int], list[list[int]]]] = []
    for grp in groups:
        own, joined = ctx.layout.gmm_cores(stage, experts[order[grp[0]][1]])
        cores = own + joined
        if runs and runs[-1][0] == cores:
            runs[-1][1].append(grp)
        else:
            runs.append((cores, [grp]))
    assign = lookup("core_assignment", ctx.cfg.core_assignment)()
    k_dim = gemm_k(ctx, stage)
    out = [-1] * len(order)
    for cores, grps in runs:
        costs = [tile_cube_us([order[i][2] for i in g], k_dim, ctx.cube_rate()) for g in grps]
        for grp, slots in zip(grps, assign(costs, len(cores)), strict=True):
            for i, slot in zip(grp, slots, strict=True):
                out[i] = cores[slot]
    return out


def l1_residency(ctx: BuildContext, stage: str, order: Sequence[Item], cores: Sequence[int]) -> list[CostKey]:
    """Per tile, its :class:`TileCosts` key: its extent and what it finds on chip.

    * A (B) resident in L1: the previous tile on the same core was the same expert's same M
      block (N block) and both tiles' A and B fit in L1 together (``l1_bytes``);
    * A (B) read before: an earlier tile of the same expert read this M block's A (N block's B)
      from HBM, so it comes from L2 now (late-bound tiles: only this)."""
    k_dim = gemm_k(ctx, stage)
    bpe = ctx.bpe
    scale_bytes = 8 if ctx.cfg.quant == "w8a8" else 0
    l1_bytes = ctx.c("l1_bytes")
    first_a: set[tuple[int, int]] = set()
    first_b: set[tuple[int, int]] = set()
    last_on_core: dict[int, tuple[int, int, int]] = {}  # core -> (expert, mb, nb) of its previous tile
    keys: list[CostKey] = []
    for (_w, e, t), k in zip(order, cores, strict=True):
        t_rows, t_cols = t.m1 - t.m0, t.n1 - t.n0  # t.rows, t.cols
        a_res = b_res = False
        if k >= 0:
            prev = last_on_core.get(k)
            if prev is not None:
                pe, pmb, pnb = prev
                fits = t_rows * k_dim * bpe + (t_cols * k_dim * bpe + t_cols * scale_bytes) <= l1_bytes
                a_res = fits and pe == e and pmb == t.mb
                b_res = fits and pe == e and pnb == t.nb
            last_on_core[k] = (e, t.mb, t.nb)
        ka, kb = (e, t.mb), (e, t.nb)
        keys.append((t_rows, t_cols, a_res, b_res, ka in first_a, kb in first_b))
        first_a.add(ka)
        first_b.add(kb)
    return keys


class TileCosts:
    """The load and compute phase of one tile (one K chunk of it), memoised by :data:`CostKey`.

    * load: ``(A + B') / gm_l1_bytes_per_us`` with ``A = rows × K × bpe``, ``B = cols × K × bpe
      + cols × scale`` (per chunk ``1/chunks`` of each; a block resident in L1 is not loaded) and
      ``B' = B × b_reuse_load_factor`` when B was read before (L2 hit); it holds HBM bandwidth for
      the bytes not read before (first touch).
    * compute: ``align16(rows) × cols × K / cube rate`` (the cube works on 16-row fractals); the
      MACs counted are ``rows × cols × K`` (real rows only).

    Provenance (config/profiles.py): ``gm_l1_bytes_per_us`` pto-a2a3 fitted to the load-bound
    GMM1 tile of hardware.md §1, megamoe-a8w8 measured (§5); ``b_reuse_load_factor`` megamoe-a8w8
    measured 0.53 (§5), pto-a2a3 1.0 (assumed: the §1 fit already averages L2 hits); the cube
    rates are spec (§3: 8192 int8 / 4096 fp16 MAC per cycle at 1.8 GHz; §5 for arch35);
    ``l1_bytes`` spec (§3, 512 KiB); ``CUBE_M_ALIGN`` the cube's 16-row fractal (spec).

    A value: ``(load_us, load_bytes, hbm_bytes, hbm_units, compute_us, macs)``; the traffic is
    counted by the caller, per event.
    """

    def __init__(self, ctx: BuildContext, em: Emitter, stage: str, chunks: int) -> None:
        self.memo: dict[CostKey, tuple[float, float, float, int, float, float]] = {}
        self.chunks = chunks
        self._em = em
        self._k = gemm_k(ctx, stage)
        self._bpe = ctx.bpe
        self._scale = 8 if ctx.cfg.quant == "w8a8" else 0
        self._frac = 1.0 / chunks
        self._gm_l1 = ctx.c("gm_l1_bytes_per_us")
        self._reuse = ctx.c("b_reuse_load_factor")
        self._rate = ctx.cube_rate()

    def compute(self, key: CostKey) -> tuple[float, float, float, int, float, float]:
        t_rows, t_cols, a_res, b_res, a_seen, b_seen = key
        k_dim, frac = self._k, self._frac
        a_b = 0.0 if a_res else t_rows * k_dim * self._bpe * frac
        b_b = 0.0 if b_res else (t_cols * k_dim * self._bpe + t_cols * self._scale) * frac
        load_us = (a_b + (b_b * self._reuse if b_seen else b_b)) / self._gm_l1
        hbm_bytes = (0.0 if a_seen else a_b) + (0.0 if b_seen else b_b)
        units = self._em.units("hbm", hbm_bytes, load_us, count=False) if hbm_bytes else 0
        rows_al = -(-t_rows // CUBE_M_ALIGN) * CUBE_M_ALIGN
        compute_us = rows_al * t_cols * k_dim * frac / self._rate
        got = self.memo[key] = (load_us, a_b + b_b, hbm_bytes, units, compute_us, t_rows * t_cols * k_dim * frac)
        return got


def tile_names(stage: str, order: Sequence[Item]) -> list[str]:
    """Each tile's base name ``g1.e{expert}.m{mb}.n{nb}`` (``g2.`` for GMM2); its phases add
    ``.ld`` / ``.mm`` (after ``.k{c}`` when cut into K chunks)."""
    pre = "g1" if stage == "gmm1" else "g2"
    return [f"{pre}.e{e}.m{t.mb}.n{t.nb}" for _w, e, t in order]


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
) -> GmmTiles:
    """The load and compute events of every tile (per K chunk).

    A load takes one L1 stage slot and holds its HBM units; each core's loads are in program
    order on its MTE2 (late-bound: a pool of the stage's MTE2 pipes, the compute colocated with
    its load). A compute waits for its load (and the previous chunk), gives the L1 slot back and,
    on the last chunk, takes a slot of the on-chip link to its consumer. A core that joined the
    stage's group waits for ``join_flag`` (λ = flag latency) before its loads."""
    layout = ctx.layout
    chunks = costs.chunks
    late = stage in layout.late
    onchip = ctx.cfg.link(stage, CONSUMER[stage]).location == "onchip"
    slot_key = SLOT_KEY[stage]
    if late:
        members = layout.members[stage]
        mte_pool = (em.pool(f"MTE2-{stage}", [m.replace(".AIC", ".MTE2") for m in members]),)
        aic_pool = (em.pool(f"AIC-{stage}", members),)
    grp = layout.groups[stage]
    joined: set[int] = set(layout.groups[grp.join].cores) - set(grp.cores) if grp.join is not None else set()
    join_deps = {join_flag: ctx.sync.flag_us} if join_flag is not None and not late else None
    # per core: its L1 slot semaphore, MTE2 pipe, cube and on-chip slot names
    core_names: dict[int, tuple[str, tuple[str], tuple[str], str]] = {}
    wave_deps: dict[tuple[int, int], dict[str, float]] = {}  # copied per tile
    memo, traffic, emit, hold_maps = costs.memo, em.traffic, em.emit, em.hold_maps
    rank, l1_late = ctx.rank, layout.l1_late
    macs_total = em.macs  # accumulated here, in order, and stored back
    loads: list[str] = []
    computes: list[str] = []
    for idx, (w, e, t) in enumerate(order):
        k = cores[idx]
        key = keys[idx]
        load_us, load_bytes, hbm_bytes, units, compute_us, macs = memo.get(key) or costs.compute(key)
        cn = core_names.get(k)
        if cn is None:
            cn = core_names[k] = (
                f"c{k}.l1", layout.core_res(k, "MTE2")[1], layout.core_res(k, "AIC")[1], f"c{k}.onchip_{slot_key}"
            )
        l1 = "l1" if l1_late else cn[0]
        acq, rel = hold_maps("hbm", units, l1)
        slot = ("onchip_" + slot_key if late else cn[3]) if onchip else None
        shared_deps = wave_deps.get((w, e))
        if shared_deps is None:
            shared_deps = wave_deps[(w, e)] = dict(wave_ready(w, e))
        shared = experts[e].shared
        base = names[idx]
        prev_mm: str | None = None
        ld = ""
        for c in range(chunks):
            traffic["gm_to_l1"] += load_bytes
            if hbm_bytes:
                traffic["hbm"] += hbm_bytes
            deps = dict(shared_deps)
            if chunk_ready is not None:
                deps.update(chunk_ready(e, t.mb, c))
            sfx = f".k{c}" if chunks > 1 else ""
            ld = f"{base}{sfx}.ld"
            labels = {
                "stage": stage, "rank": rank, "wave": w, "expert": e, "tile": idx,
                "shared": shared, "phase": "load", "chunk": c,
            }
            if late:
                emit(ld, stage, mte_pool, deps, acq, rel, load_us, labels)
            else:
                after = join_deps if join_deps is not None and k in joined else None
                emit(ld, stage, cn[1], deps, acq, rel, load_us, labels, None, cn[1], after)
            macs_total += macs
            mm = f"{base}{sfx}.mm"
            mdeps = {ld: 0.0}
            if prev_mm is not None:
                mdeps[prev_mm] = 0.0
            macq, mrel = hold_maps("hbm", 0, slot if c == chunks - 1 else None, l1)
            labels = {
                "stage": stage, "rank": rank, "wave": w, "expert": e, "tile": idx,
                "shared": shared, "phase": "compute", "chunk": c, "core": k,
            }
            emit(mm, stage, aic_pool if late else cn[2], mdeps, macq, mrel, compute_us, labels, ld if late else None)
            prev_mm = mm
        assert prev_mm is not None
        loads.append(ld)
        computes.append(prev_mm)
    em.macs = macs_total
    return GmmTiles(tuple(order), tuple(loads), tuple(computes), tuple(cores))
