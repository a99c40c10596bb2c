"""The layered orchestration: the URMA kernel's macro waves (``options.orchestration = 'layered'``).

A macro wave is a range of whole local experts (:func:`~moeopt.megamoe.build.plan.layered_ranges`,
the kernel's rule). Each wave is received, computed and combined before the next, and the two
communication steps of neighbouring waves overlap on the channel owners' AIV1s:

* every source / destination rank ``r`` is a channel owned by one AIV1, the one that issues
  URMA operations for ``r`` (:meth:`~moeopt.megamoe.build.context.Layout.urma_resource`: round
  the dispatch group's cores, as the kernel's ``GetChannelOwnerBlock``: ``rank % blocks``);
* receive (:func:`build_layered_receive`): per wave and channel, the wave's experts in order;
  the rows of the local source are copied per (expert, m-block), those of a remote source are
  gathered into batched GETs of at most :data:`RECEIVE_BATCH_ROWS` rows (a batch may span
  experts and m-blocks; the channel's last batch of the wave is flushed however full); an
  (expert, m-block) is ready (flag ``d2c.e{e}.m{mb}``) when every receive carrying its rows is;
* GMM1 (:func:`build_layered_gmm1`): a tile waits for its (expert, m-block)'s readiness, not a
  whole wave's; activation and GMM2 as in the wave orchestration, GMM2's waves being the same
  macro waves;
* combine (:func:`build_layered_combine`): per wave and destination channel, the wave's
  (expert, m-block) segments in order, each after its GMM2 tiles (flag ``g2c.e{e}.m{mb}``):
  the local destination's rows written back, a remote one's PUT; PUTs are committed in
  batches of :data:`PUT_BATCH_ROWS` rows accumulated across the wave's experts and flushed at
  the wave's end, and a segment pays the commits its rows complete;
* program order (:func:`layered_program_order`): on each channel owner's AIV1,
  ``recv(0), recv(1), combine(0), recv(2), combine(1), ..., combine(W-1)`` (the next wave's
  receive is issued before this wave's combine); on each cube core, GMM1(w)'s tiles then
  GMM2(w)'s, wave after wave.

Cost formulas (constants in ``config/profiles.py`` with their provenance):

* GET batch of ``n`` rows: ``urma_op_us + n × row_bytes / urma_get_bytes_per_us``, holding
  ``remote_in`` and ``hbm`` bandwidth for the bytes (:func:`~moeopt.megamoe.build.urma.urma_batch`);
* local copy of ``m`` rows: ``m × row_bytes / aiv_local_bytes_per_us`` (one AIV moving rows
  GM -> UB -> GM on its own die), holding ``hbm`` for the read and the write;
* PUT segment of ``m`` rows completing ``c`` batches: ``c × urma_op_us + m × h × 2 /
  urma_put_bytes_per_us`` (bf16 rows), holding ``remote_out`` and ``hbm``;
* local write-back of ``m`` rows: as every combine write-back
  (:class:`~moeopt.megamoe.build.combine.RowWrites`: call overhead plus the rows at the local
  stream rate, with the readback of GMM2's output).

Not modelled (no measured constant; each is small against the transfers): the mask / count scan
that precedes a channel's receive, the per-batch flag-window poll beyond ``urma_op_us`` and the
32 B of metadata per row. Every rank is assumed one hop away (one server): the kernel's
cross-server relay has no knob here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from moeopt.megamoe.build.combine import RowWrites, hold_back
from moeopt.megamoe.build.context import BuildContext
from moeopt.megamoe.build.emitter import Emitter
from moeopt.megamoe.build.gmm import (
    _runs_of,
    build_gmm2,
    full_expert_waits,
    gemm_k,
    gmm_tiles,
    tile_cube_us,
    wire_full_experts,
)
from moeopt.megamoe.build.handoff import (
    ActivationOut,
    CombineOut,
    DispatchOut,
    Gmm1Out,
    Gmm2Out,
)
from moeopt.megamoe.build.plan import ExpertPlan, Item, RankPlan
from moeopt.megamoe.build.urma import urma_batch
from moeopt.megamoe.config.implementation import LAYERED_PUT_BATCH_ROWS, LAYERED_RECEIVE_BATCH_ROWS
from moeopt.megamoe.contract import ContractError
from moeopt.registry import lookup

# the rows of one batched receive, and of one PUT commit batch (config/implementation.py)
RECEIVE_BATCH_ROWS = LAYERED_RECEIVE_BATCH_ROWS
PUT_BATCH_ROWS = LAYERED_PUT_BATCH_ROWS


def pieces(ex: ExpertPlan, src: int, tile_m: int) -> list[tuple[int, int]]:
    """``(m-block, rows)`` of the rows from ``src`` in ``ex``'s compact rows (ordered by source)."""
    n = ex.rows_by_src[src]
    if n == 0:
        return []
    off = sum(ex.rows_by_src[:src])
    out = []
    for mb in range(off // tile_m, (off + n - 1) // tile_m + 1):
        m = min(off + n, (mb + 1) * tile_m) - max(off, mb * tile_m)
        if m > 0:
            out.append((mb, m))
    return out


def wave_experts(plan: RankPlan, wave: int) -> list[ExpertPlan]:
    """The local experts of a macro wave, in order (its shared experts have nothing to move)."""
    seen = dict.fromkeys(g.expert for g in plan.gmm1.waves[wave])
    return [plan.experts[e] for e in seen if not plan.experts[e].shared]


# --------------------------------------------------------------------------- receive
def build_layered_receive(ctx: BuildContext, em: Emitter, plan: RankPlan, head: str) -> DispatchOut:
    """The receives of every macro wave (see the module docstring), each waiting for the head
    (λ = cross-rank flag); then a flag ``d2c.e{e}.m{mb}`` per (expert, m-block) on the receives
    that carry its rows. Program order on the AIV1s is wired by :func:`layered_program_order`."""
    tm = ctx.cfg.tile_m
    carriers: dict[tuple[int, int], list[str]] = {}
    got_rows: dict[tuple[int, int], int] = {}
    events: list[tuple[str, ...]] = []
    owners: list[tuple[str, ...]] = []
    for w in range(len(plan.gmm1.waves)):
        experts = wave_experts(plan, w)
        names: list[str] = []
        owns: list[str] = []

        # (called only within this iteration of the wave loop, so the lists it appends to are
        # this wave's own)
        def carried(name: str, res: tuple[str], parts: Sequence[tuple[int, int, int]]) -> None:
            names.append(name)  # noqa: B023
            owns.append(res[0])  # noqa: B023
            for e, mb, m in parts:
                carriers.setdefault((e, mb), []).append(name)
                got_rows[(e, mb)] = got_rows.get((e, mb), 0) + m

        for s in range(ctx.world):
            res = ctx.layout.urma_resource(s)
            segs = [(ex.index, mb, m) for ex in experts for mb, m in pieces(ex, s, tm)]
            if s == ctx.rank:
                for e, mb, m in segs:
                    carried(local_copy(ctx, em, w, e, mb, m, head, res), res, [(e, mb, m)])
                continue
            for b, batch in enumerate(receive_batches(segs, RECEIVE_BATCH_ROWS)):
                rows = sum(m for _e, _mb, m in batch)
                labels = {
                    "stage": "dispatch",
                    "rank": ctx.rank,
                    "wave": w,
                    "src": s,
                    "rows": rows,
                    "batch": b,
                }
                name = urma_batch(
                    ctx,
                    em,
                    "get",
                    f"get.w{w}.src{s}.b{b}",
                    "dispatch",
                    s,
                    rows * ctx.row_bytes,
                    {head: ctx.sync.cross_rank_us},
                    labels,
                    chain=False,
                )
                carried(name, res, batch)
        events.append(tuple(names))
        owners.append(tuple(owns))
    for ex in plan.experts:  # every block's rows arrive exactly once (the kernel's block_token rows)
        for mb in range(-(-ex.rows // tm)) if not ex.shared else ():
            want = min(tm, ex.rows - mb * tm)
            if got_rows.get((ex.index, mb), 0) != want:
                raise ContractError(
                    f"expert {ex.index}: the layered receive brings {got_rows.get((ex.index, mb), 0)} rows "
                    f"into M-block {mb}; the kernel addresses {want} rows there"
                )
    ready = {key: em.flag(f"d2c.e{key[0]}.m{key[1]}", evs) for key, evs in carriers.items()}
    return DispatchOut((), tuple(events), ready, tuple(owners))


def receive_batches(segs: Sequence[tuple[int, int, int]], cap: int) -> list[list[tuple[int, int, int]]]:
    """The batches of a channel's ``(expert, m-block, rows)`` segments in order: each full at
    ``cap`` rows (a segment may be split over two batches), the last one whatever is left."""
    out: list[list[tuple[int, int, int]]] = []
    cur: list[tuple[int, int, int]] = []
    filled = 0
    for e, mb, m in segs:
        while m > 0:
            take = min(m, cap - filled)
            cur.append((e, mb, take))
            filled += take
            m -= take
            if filled == cap:
                out.append(cur)
                cur, filled = [], 0
    if cur:
        out.append(cur)
    return out


def local_copy(
    ctx: BuildContext, em: Emitter, w: int, e: int, mb: int, m: int, head: str, res: tuple[str]
) -> str:
    """The local source's ``m`` rows of (expert, m-block): ``m × row_bytes /
    aiv_local_bytes_per_us``, holding HBM for the read and the write (module docstring)."""
    nbytes = m * ctx.row_bytes
    dur = nbytes / ctx.c("aiv_local_bytes_per_us")
    acq: dict[str, int] = {}
    rel: dict[str, int] = {}
    em.bw(acq, rel, "hbm", 2 * nbytes, dur)
    em.count("ub_to_gm", nbytes)
    labels = {"stage": "dispatch", "rank": ctx.rank, "wave": w, "expert": e, "src": ctx.rank, "rows": m}
    return em.emit(
        f"copy.w{w}.e{e}.m{mb}", "dispatch", res, {head: ctx.sync.cross_rank_us}, acq, rel, dur, labels
    )


# --------------------------------------------------------------------------- GMM1 / GMM2
def layered_cores(ctx: BuildContext, plan: RankPlan) -> tuple[list[int] | None, list[int] | None]:
    """The cores of GMM1's and GMM2's tiles when the core cursor rolls across stages
    (``policy.core_cursor = across_stages``) and both stages are pinned: one run of the
    registered ``core_assignment`` rule over the tiles in the layered program order (GMM1(w)'s
    expert groups, then GMM2(w)'s, wave after wave), restarting where the cores change; ``None``
    for a stage whose cores the ordinary per-stage rule gives (``per_stage``, or a late-bound
    stage)."""
    if ctx.cfg.core_cursor != "across_stages" or {"gmm1", "gmm2"} & ctx.layout.late:
        return None, None
    tagged: list[tuple[str, Item]] = []
    g1, g2 = plan.gmm1.order, plan.gmm2.order
    for w in range(len(plan.gmm1.waves)):
        tagged += [("gmm1", it) for it in g1 if it[0] == w]
        tagged += [("gmm2", it) for it in g2 if it[0] == w]
    assign = lookup("core_assignment", ctx.cfg.core_assignment)()
    rate = ctx.cube_rate()
    flat: list[int] = []
    for cores, grps in _runs_of(ctx, plan.experts, tagged):
        costs = [tile_cube_us([it[2] for _st, it in g], gemm_k(ctx, g[0][0]), rate) for g in grps]
        flat += [cores[slot] for slots in assign(costs, len(cores)) for slot in slots]
    out: dict[str, list[int]] = {"gmm1": [], "gmm2": []}
    for (st, _it), k in zip(tagged, flat, strict=True):
        out[st].append(k)
    return out["gmm1"], out["gmm2"]


def build_layered_gmm1(
    ctx: BuildContext, em: Emitter, plan: RankPlan, dispatch: DispatchOut, head: str
) -> Gmm1Out:
    """GMM1 tiles: a tile of (expert, m-block) waits for its readiness flag ``d2c.e{e}.m{mb}``
    (a shared expert's tile for the head: its rows are local), λ = flag latency; no look-ahead
    (the receive's program order paces it). Then, as in the wave orchestration, the AIC-only
    SYNCALLs of ``options.gmm1_full_experts`` and the flag ``gmm1_done``."""
    lam = ctx.sync.flag_us
    experts = plan.experts

    def ready(e: int, mb: int, _c: int) -> Mapping[str, float]:
        if experts[e].shared:
            return {head: lam}
        return {dispatch.ready[(e, mb)]: lam}

    cores, _ = layered_cores(ctx, plan)
    waits = full_expert_waits(ctx, plan.gmm1.order)  # (emitted with the tiles, as in build_gmm1)
    tiles = gmm_tiles(
        ctx, em, plan.gmm1, experts, lambda w, e: {}, ready, 1, None, cores=cores, chain=False, waits=waits
    )
    full_sync = wire_full_experts(ctx, em, tiles)
    return Gmm1Out(tiles, em.flag("gmm1_done", tiles.events), full_sync)


def build_layered_gmm2(
    ctx: BuildContext,
    em: Emitter,
    plan: RankPlan,
    act: ActivationOut,
    join_flag: str | None,
    full_sync: str | None = None,
) -> Gmm2Out:
    """GMM2 as in the wave orchestration (:func:`~moeopt.megamoe.build.gmm.build_gmm2`) over the
    macro waves, with the layered cores and program order."""
    _, cores = layered_cores(ctx, plan)
    return build_gmm2(ctx, em, plan, act, join_flag, full_sync, cores=cores, chain=False)


# --------------------------------------------------------------------------- combine
def put_commits(sizes: Sequence[int], cap: int) -> list[int]:
    """Batch commits each segment of a channel's wave pays: a commit whenever the running row count
    reaches a multiple of ``cap`` inside the segment, and the flush of a partial last batch on
    the last segment (``ceil(total / cap)`` in all)."""
    out = []
    total = 0
    for m in sizes:
        out.append((total + m) // cap - total // cap)
        total += m
    if out and total % cap:
        out[-1] += 1
    return out


def build_layered_combine(ctx: BuildContext, em: Emitter, plan: RankPlan, gmm2: Gmm2Out) -> CombineOut:
    """Per macro wave and destination channel, the wave's (expert, m-block) segments in order,
    each waiting for the flag ``g2c.e{e}.m{mb}`` on its GMM2 tiles (λ = flag latency): the local
    destination's rows as a write-back, a remote one's as a PUT paying the batch commits its rows
    complete (:func:`put_commits`); then ``options.combine_start_after`` as for every combine.
    Program order on the AIV1s is wired by :func:`layered_program_order`."""
    lam = ctx.sync.flag_us
    tm, h = ctx.cfg.tile_m, ctx.cfg.h
    by_mb: dict[tuple[int, int], list[str]] = {}
    for (_w, e, t), ev in zip(gmm2.tiles.items, gmm2.tiles.events, strict=True):
        if not plan.experts[e].shared:
            by_mb.setdefault((e, t.mb), []).append(ev)
    done = {key: em.flag(f"g2c.e{key[0]}.m{key[1]}", evs) for key, evs in by_mb.items()}
    writes = RowWrites(ctx, em)
    names: list[str] = []
    experts: list[int] = []
    waves: list[int] = []
    owners: list[str] = []
    for w in range(len(plan.gmm2.waves)):
        wexperts = wave_experts(plan, w)
        for d in range(ctx.world):
            res = ctx.layout.urma_resource(d)
            segs = [(ex.index, mb, m) for ex in wexperts for mb, m in pieces(ex, d, tm)]
            commits = put_commits([m for _e, _mb, m in segs], PUT_BATCH_ROWS)
            for (e, mb, m), c in zip(segs, commits, strict=True):
                deps = {done[(e, mb)]: lam}
                labels = {"stage": "combine", "rank": ctx.rank, "wave": w, "expert": e, "src": d, "rows": m}
                if d == ctx.rank:
                    name = writes.event(
                        f"comb.w{w}.e{e}.m{mb}", res, None, deps, ((d, m),), h, True, labels, 1
                    )
                else:
                    name = urma_batch(
                        ctx,
                        em,
                        "put",
                        f"put.w{w}.e{e}.m{mb}.dst{d}",
                        "combine",
                        d,
                        m * h * 2,
                        deps,
                        {**labels, "commits": c},
                        ops=c,
                        chain=False,
                    )
                names.append(name)
                experts.append(e)
                waves.append(w)
                owners.append(res[0])
    out = CombineOut(tuple(names), False, tuple(experts), tuple(waves), tuple(owners))
    hold_back(ctx, em, gmm2, out)
    return out


# --------------------------------------------------------------------------- program order
def layered_program_order(
    ctx: BuildContext,
    em: Emitter,
    plan: RankPlan,
    dispatch: DispatchOut,
    gmm1: Gmm1Out,
    gmm2: Gmm2Out,
    combine: CombineOut,
) -> None:
    """Program order of the layered kernel (module docstring): on each channel owner's AIV1
    ``recv(0), recv(1), combine(0), recv(2), combine(1), ...``; on each pinned cube core GMM1(w)'s
    tiles then GMM2(w)'s, wave after wave."""
    n_waves = len(plan.gmm1.waves)
    recv: list[dict[str, list[str]]] = [{} for _ in range(n_waves)]
    for w, (evs, owns) in enumerate(zip(dispatch.events, dispatch.owners, strict=True)):
        for ev, r in zip(evs, owns, strict=True):
            recv[w].setdefault(r, []).append(ev)
    comb: list[dict[str, list[str]]] = [{} for _ in range(n_waves)]
    for ev, w, r in zip(combine.events, combine.waves, combine.owners, strict=True):
        comb[w].setdefault(r, []).append(ev)
    owners = sorted({r for per in recv + comb for r in per}, key=ctx.layout.aiv_all.index)
    for r in owners:
        seq = list(recv[0].get(r, ())) if n_waves else []
        for w in range(n_waves):
            if w + 1 < n_waves:
                seq += recv[w + 1].get(r, ())
            seq += comb[w].get(r, ())
        em.chain(r, [(n, n) for n in seq])
    per_core: dict[int, list[list[tuple[str, str]]]] = {}
    for stage, tiles in enumerate((gmm1.tiles, gmm2.tiles)):
        for (w, _e, _t), first, last, k in zip(
            tiles.items, tiles.heads, tiles.events, tiles.cores, strict=True
        ):
            if k >= 0:
                parts = per_core.setdefault(k, [[] for _ in range(2 * n_waves)])
                parts[2 * w + stage].append((first, last))
    for k in sorted(per_core):
        em.chain(ctx.layout.core_res(k, "AIC")[0], [u for part in per_core[k] for u in part])
