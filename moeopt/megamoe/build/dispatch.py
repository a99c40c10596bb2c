"""Dispatch: the rows of every (local expert, source rank) segment pulled into this rank.

A segment belongs to the first GMM1 wave that needs any of its rows. Per wave, the segments are
grouped by their AIV (source rank -> AIV slot) and packed ``event_granularity.dispatch`` to an
event; with URMA (``kernel.topo_urma``) every remote source's rows of the wave are one batched GET
issued from an AIV1 in program order. A flag ``d2c.w{w}`` closes each wave.
"""

from __future__ import annotations

from collections.abc import Sequence

from moeopt.megamoe.build.context import BuildContext
from moeopt.megamoe.build.emitter import Emitter
from moeopt.megamoe.build.handoff import DispatchOut
from moeopt.megamoe.build.plan import ExpertPlan, RankPlan
from moeopt.megamoe.build.streams import stream_rate
from moeopt.megamoe.build.urma import urma_batch
from moeopt.megamoe.config.implementation import DISPATCH_BATCH_ROWS  # impl: dispatch.h@HEAD:25-31

Segment = tuple[int, int]  # (expert index, source rank)


def build_dispatch(ctx: BuildContext, em: Emitter, plan: RankPlan, head: str) -> DispatchOut:
    """Every wave's dispatch events, then its flag ``d2c.w{w}`` on them (on the head if the wave
    has none); with the protocol's group barriers a wave's events wait for the previous wave's
    flag plus one SYNCALL (the baseline kernel's ``SYNCALL<AIVOnly>`` after every dispatched
    expert group)."""
    waves = plan.gmm1.waves
    by_wave = segments_by_wave(plan, ctx.cfg.tile_m)
    gran = ctx.cfg.event_granularity["dispatch"]
    flags: list[str] = []
    events: list[tuple[str, ...]] = []
    prev_flag: str | None = None
    memo: dict[tuple[bool, int, int], tuple[float, dict[str, int], dict[str, int]]] = {}
    for w in range(len(waves)):
        segs = by_wave.get(w, [])
        names: list[str] = []
        if ctx.cfg.topo_urma:
            names = urma_gets(ctx, em, plan.experts, w, segs, head, prev_flag)
        else:
            per_slot: dict[int, list[Segment]] = {}
            for e, s in segs:
                per_slot.setdefault(s, []).append((e, s))
            remote = sum(1 for s in per_slot if s != ctx.rank)
            for s, items in sorted(per_slot.items()):
                for i in range(0, len(items), gran):
                    pack = items[i : i + gran]
                    names.append(
                        dispatch_event(ctx, em, plan.experts, w, s, pack, head, prev_flag, remote, memo)
                    )
        prev_flag = em.flag(f"d2c.w{w}", names or [head])
        flags.append(prev_flag)
        events.append(tuple(names))
    return DispatchOut(tuple(flags), tuple(events))


def segments_by_wave(plan: RankPlan, tile_m: int) -> dict[int, list[Segment]]:
    """Wave -> its (expert, source) segments, in (expert, source) order: a segment's wave is the
    first GMM1 wave that needs any of its rows (an expert's rows are ordered by source rank)."""
    wave_of_mb = {(g.expert, g.mb): w for w, wave in enumerate(plan.gmm1.waves) for g in wave}
    seg_wave: dict[Segment, int] = {}
    for ex in plan.experts:
        if ex.shared or ex.rows == 0:
            continue
        off = 0
        for s, n_rows in enumerate(ex.rows_by_src):
            if n_rows:
                mbs = range(off // tile_m, (off + n_rows - 1) // tile_m + 1)
                seg_wave[(ex.index, s)] = min(wave_of_mb[(ex.index, mb)] for mb in mbs)
            off += n_rows
    by_wave: dict[int, list[Segment]] = {}
    for key, w in sorted(seg_wave.items(), key=lambda kv: (kv[1], kv[0][0], kv[0][1])):
        by_wave.setdefault(w, []).append(key)
    return by_wave


def segment_us(ctx: BuildContext, remote: bool, n_rows: int, rate: float) -> float:
    """One event's time on its AIV pulling ``n_rows`` rows at ``rate``, the kernel's row-level
    software pipeline: ``dispatch_call_us + max(λ_remote, first batch × beat) + extra rows × beat``
    with ``beat = row_bytes / rate``, ``λ_remote = remote_latency_us`` (0 locally) and a first
    batch of ``DISPATCH_BATCH_ROWS`` rows (dispatch.h@HEAD L25-31). An event that packs several
    segments (``options.event_granularity.dispatch``) pays the call and the first batch once.

    ``rate`` is the stream's (:func:`~moeopt.megamoe.build.streams.stream_rate`): the per-stream
    ``aiv_remote_read_bytes_per_us``, or its fair share of ``remote_in_bytes_per_us`` when more
    sources than the link serves at full rate run together; this rank's own source at
    ``aiv_local_bytes_per_us`` (pto-a2a3: the kernel reads it through the same window path,
    dispatch.h ``TLOAD`` from ``srcRank.remoteWindow.offsetA`` for every source rank, so the
    profile sets it to the per-stream rate; megamoe-a8w8: its measured local segment).

    Provenance (config/profiles.py): ``dispatch_call_us`` measured on arch35 (hardware.md §5;
    pto-a2a3 borrows it, assumed); ``remote_latency_us`` assumed (a few HCCS round trips);
    ``aiv_remote_read_bytes_per_us`` pto-a2a3 fitted to the dispatch of the V1 timeline (§1b: 8
    streams, below the link's aggregate), megamoe-a8w8 measured (§5); ``remote_in_bytes_per_us``
    fitted to the dispatch of §1 (16 streams, the link's aggregate)."""
    beat = ctx.row_bytes / rate
    lam = ctx.c("remote_latency_us") if remote else 0.0
    first = min(n_rows, DISPATCH_BATCH_ROWS)
    return ctx.c("dispatch_call_us") + max(lam, first * beat) + (n_rows - first) * beat


def dispatch_event(
    ctx: BuildContext,
    em: Emitter,
    experts: Sequence[ExpertPlan],
    w: int,
    s: int,
    pack: Sequence[Segment],
    head: str,
    prev_flag: str | None,
    concurrent: int,
    memo: dict[tuple[bool, int, int], tuple[float, dict[str, int], dict[str, int]]] | None = None,
) -> str:
    """One AIV event of wave ``w`` pulling the segments ``pack`` from source ``s`` among
    ``concurrent`` remote sources of the wave: :func:`segment_us` of their rows, holding
    ``remote_in`` (remote source) and ``hbm`` bandwidth for the rows' bytes; waits for the head
    (λ = cross-rank flag), in program order on its AIV.

    ``memo`` (one per stage build, if given): (remote, rows, concurrency) -> the event's time
    and its acquire / release maps, worked out once (events by the hundred pull a few distinct
    row counts; a builder's event takes copies of the maps, see ``Event.trusted``)."""
    remote = s != ctx.rank
    rows = sum(experts[e].rows_by_src[s] for e, _s in pack)
    nbytes = rows * ctx.row_bytes
    key = (remote, rows, concurrent)
    got = memo.get(key) if memo is not None else None
    if got is None:
        rate = stream_rate(ctx, "read", remote, concurrent).bytes_per_us
        dur = segment_us(ctx, remote, rows, rate)
        acq: dict[str, int] = {}
        rel: dict[str, int] = {}
        if remote:
            em.bw(acq, rel, "remote_in", nbytes, dur, count=False)
        em.bw(acq, rel, "hbm", nbytes, dur, count=False)
        got = (dur, acq, rel)
        if memo is not None:
            memo[key] = got
    dur, acq, rel = got
    # (the traffic of each event, in event order, as em.bw counted it)
    if remote:
        em.count("remote_in", nbytes)
    em.count("hbm", nbytes)
    em.count("ub_to_gm", nbytes)
    resources, pinned = ctx.layout.vector_res(em, "dispatch", s)
    sync = ctx.sync
    after = {prev_flag: sync.syncall_us} if pinned is not None and sync.group_barriers and prev_flag else None
    return em.emit(
        f"disp.w{w}.src{s}.e{pack[0][0]}" + (f"+{len(pack) - 1}" if len(pack) > 1 else ""),
        "dispatch",
        resources,
        {head: sync.cross_rank_us},
        acq,
        rel,
        dur,
        {"stage": "dispatch", "rank": ctx.rank, "wave": w, "expert": pack[0][0], "src": s, "rows": rows},
        chain_on=pinned,
        sync_deps=after,
    )


def urma_gets(
    ctx: BuildContext,
    em: Emitter,
    experts: Sequence[ExpertPlan],
    w: int,
    segs: Sequence[Segment],
    head: str,
    prev_flag: str | None,
) -> list[str]:
    """URMA: one batched GET (:func:`~moeopt.megamoe.build.urma.urma_batch`) per (wave, remote
    source); the local source's rows are an ordinary :func:`dispatch_event`."""
    by_src: dict[int, int] = {}
    for e, s in segs:
        by_src[s] = by_src.get(s, 0) + experts[e].rows_by_src[s]
    names = []
    for s, rows in sorted(by_src.items()):
        if s == ctx.rank:
            local = [x for x in segs if x[1] == s]
            names.append(dispatch_event(ctx, em, experts, w, s, local, head, prev_flag, 1))
            continue
        labels = {"stage": "dispatch", "rank": ctx.rank, "wave": w, "src": s, "rows": rows}
        deps = {head: ctx.sync.cross_rank_us}
        names.append(
            urma_batch(ctx, em, "get", f"get.w{w}.src{s}", "dispatch", s, rows * ctx.row_bytes, deps, labels)
        )
    return names
