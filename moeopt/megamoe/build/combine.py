"""Combine: GMM2's output rows written back to the ranks they came from.

Three modes (``options.combine_granularity``, ``auto`` by the kernel's small-path threshold):

* ``per_tile`` (the kernel's small path): per GMM2 tile, its rows split evenly over the paired
  core's sub-cores, after the tile's compute;
* ``per_expert`` (DirectLarge): per expert, after its flag ``g2c.e{e}``, each source rank's rows
  in ``COMBINE_LANES`` lanes, packed ``event_granularity.combine`` to a vector event;
* ``urma``: per expert and remote source one batched PUT from the source's AIV1 in program
  order; the local source's rows as in ``per_expert``.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from types import MappingProxyType
from typing import Any

from moeopt.megamoe.build.context import BuildContext
from moeopt.megamoe.build.emitter import Emitter, Units
from moeopt.megamoe.build.handoff import CombineOut, Gmm2Out
from moeopt.megamoe.build.plan import ExpertPlan, RankPlan
from moeopt.megamoe.build.streams import queue_units, stream_rate
from moeopt.megamoe.build.urma import urma_batch
from moeopt.megamoe.config.implementation import COMBINE_LANES  # impl: combine.h@2d9d4288:27-28

RowsBySrc = tuple[tuple[int, int], ...]  # (source rank, rows)

# combine mode -> the kernel's name for the path (combine.h@2d9d4288 L35-37; V1: combine.h@HEAD)
COMBINE_PATHS = {
    "per_tile": "DirectSmall",
    "per_expert": "DirectLarge",
    "by_source": "by_source",
    "urma": "urma",
}


def build_combine(ctx: BuildContext, em: Emitter, plan: RankPlan, gmm2: Gmm2Out) -> CombineOut:
    """The combine events of the mode :func:`combine_mode` picks; with
    ``options.combine_start_after = s`` every combine event of an expert before ``s`` also waits
    for GMM2's expert ``s`` (the V1 kernel holds combine back to leave the bandwidth to dispatch,
    then starts at expert 0 and catches up; overview_v1.md "AIV 动态调度" 4)."""
    writes = RowWrites(ctx, em)
    mode = combine_mode(ctx)
    if mode == "per_tile":
        out = tile_combine(ctx, em, plan, gmm2, writes)
    elif mode == "by_source":
        out = source_combine(ctx, em, plan, gmm2, writes)
    else:
        out = expert_combine(ctx, em, plan, gmm2, writes)
    hold_back(ctx, em, gmm2, out)
    return out


def hold_back(ctx: BuildContext, em: Emitter, gmm2: Gmm2Out, out: CombineOut) -> None:
    """``options.combine_start_after``: the combine events of experts before it wait for its
    GMM2 flag too (λ = flag latency)."""
    start = ctx.cfg.combine_start_after
    if start is None:
        return
    flag = gmm2.expert_done.get(start)
    if flag is None:  # fewer experts with rows than the start: wait for the last one
        if not gmm2.expert_done:
            return
        flag = gmm2.expert_done[max(gmm2.expert_done)]
    for name, e in zip(out.events, out.experts, strict=True):
        if e < start:
            em.add_deps(name, {flag: ctx.sync.flag_us})


def combine_mode(ctx: BuildContext) -> str:
    """``urma`` with URMA; else ``options.combine_granularity`` (``per_tile``, ``per_expert``,
    ``by_source``), where ``auto`` is ``per_tile`` iff ``tokens × topk <=
    kernel.combine_small_max_routes`` (combine.h@2d9d4288 L30, L73-85), else ``per_expert``."""
    cfg = ctx.cfg
    if cfg.topo_urma:
        return "urma"
    if cfg.combine_granularity == "auto":
        return "per_tile" if ctx.tokens * ctx.topk <= cfg.combine_small_max_routes else "per_expert"
    return cfg.combine_granularity


class RowWrites:
    """Combine events that write rows back: their cost, traffic and emission.

    ``dispatch_call_us + Σ_src bytes_src / rate_src`` with ``bytes = rows × cols × 2`` (bf16):
    each write-back is a stream (:mod:`~moeopt.megamoe.build.streams`) whose per-row pipeline
    reads GMM2's output, scales and converts it and stores it into the source rank's window
    (combine.h: ``TLOAD`` / ``TSTORE`` per row). ``rate_src`` is the per-stream
    ``aiv_remote_write_bytes_per_us``, or for a remote source its fair share of
    ``remote_out_bytes_per_us`` among the ``concurrent`` write-backs of the same expert; this
    rank's own rows move at ``aiv_local_bytes_per_us`` (pto-a2a3: the same window path, so the
    per-stream rate; megamoe-a8w8: its measured local write). It holds HBM bandwidth for the
    readback (GMM2's output from GM, when the hand-off is not on-chip) and the local bytes,
    ``remote_out`` for the remote ones, and, throttled by the link, its share of the cube cores'
    ``gm_l1`` paths. Memoised per (rows by source, cols, readback, released slot, concurrency):
    every N-tile of an M-block writes the same rows; the traffic is still counted per event.

    Provenance (config/profiles.py): ``dispatch_call_us`` as for dispatch (arch35 measured,
    hardware.md §5); ``aiv_remote_write_bytes_per_us`` pto-a2a3 fitted to the combine of the V1
    timeline (§1b: 8 write-back streams, below the link's aggregate), megamoe-a8w8 measured (§5);
    ``remote_out_bytes_per_us`` fitted to the combine of §1 (32 streams, the link's aggregate);
    ``remote_write_excess_share`` fitted to GMM2 beside combine at §1."""

    def __init__(self, ctx: BuildContext, em: Emitter) -> None:
        self._ctx = ctx
        self._em = em
        self._rows_memo: dict[tuple[tuple[int, ...], int, int], RowsBySrc] = {}
        self._memo: dict[
            tuple[RowsBySrc, int, bool, str | None, int], tuple[float, int, float, float, Units, Units]
        ] = {}

    def src_rows_in(self, ex: ExpertPlan, m0: int, m1: int) -> RowsBySrc:
        """(source rank, rows) of the expert's compact rows [m0, m1) (rows are ordered by source)."""
        key = (ex.rows_by_src, m0, m1)
        got = self._rows_memo.get(key)
        if got is None:
            out = []
            off = 0
            for s, n in enumerate(ex.rows_by_src):
                lo, hi = max(off, m0), min(off + n, m1)
                if hi > lo:
                    out.append((s, hi - lo))
                off += n
            got = self._rows_memo[key] = tuple(out)
        return got

    def cost(
        self, rows_by_src: RowsBySrc, cols: int, readback: bool, release: str | None, concurrent: int
    ) -> tuple[float, int, float, float, Units, Units]:
        """(µs, readback bytes, HBM bytes, remote bytes, acquires, releases) of one write-back."""
        key = (rows_by_src, cols, readback, release, concurrent)
        memo = self._memo.get(key)
        if memo is None:
            ctx, em = self._ctx, self._em
            us = loc = rem = rem_us = 0.0
            throttle = 0.0
            for s, r in rows_by_src:
                b = r * cols * 2
                remote = s != ctx.rank
                rate = stream_rate(ctx, "write", remote, concurrent)
                us += b / rate.bytes_per_us
                if remote:
                    rem += b
                    rem_us += b / rate.bytes_per_us
                    throttle = rate.throttle
                else:
                    loc += b
            rb_bytes = sum(r for _s, r in rows_by_src) * cols * 2 if readback else 0
            dur = ctx.c("dispatch_call_us") + us
            take: dict[str, int] = {}
            give: dict[str, int] = {}
            em.bw(take, give, "hbm", rb_bytes + loc, dur, count=False)
            if rem:
                em.bw(take, give, "remote_out", rem, dur, count=False)
                q = queue_units(ctx, em, throttle, rem_us / dur)
                if q:
                    take["gm_l1"] = give["gm_l1"] = q
            if release:
                give[release] = give.get(release, 0) + 1
            memo = self._memo[key] = (
                dur,
                rb_bytes,
                rb_bytes + loc,
                rem,
                MappingProxyType(take),
                MappingProxyType(give),
            )
        return memo

    def event(
        self,
        name: str,
        resources: Sequence[str],
        pinned: Sequence[str] | None,
        deps: dict[str, float],
        rows_by_src: RowsBySrc,
        cols: int,
        readback: bool,
        labels: dict[str, Any],
        concurrent: int,
        colocate: str | None = None,
        release: str | None = None,
    ) -> str:
        """Emit one write-back (in program order on ``pinned`` when the protocol asks for it)."""
        dur, rb_bytes, hbm_bytes, rem, acq, rel = self.cost(rows_by_src, cols, readback, release, concurrent)
        em = self._em
        em.count("hbm", hbm_bytes)
        if rem:
            em.count("remote_out", rem)
        em.count("gm_to_ub", rb_bytes)
        chain_on = pinned if self._ctx.sync.program_order else None
        return em.emit(name, "combine", resources, deps, acq, rel, dur, labels, colocate, chain_on)


def concurrency(n_events: int, members: int) -> int:
    """Write-backs of one expert that run together: its events, at most one per combine core."""
    return max(1, min(n_events, members))


def tile_combine(
    ctx: BuildContext, em: Emitter, plan: RankPlan, gmm2: Gmm2Out, writes: RowWrites
) -> CombineOut:
    """Per GMM2 tile of a local expert, one write-back per sub-core of the paired core (the tile's
    rows split evenly), waiting for the tile's compute (λ = flag latency). On-chip hand-off: no
    readback, colocated with the tile, the last sub-core gives the link slot back.

    The events the code it replaced made with one :meth:`Emitter.emit` each (same order, fields
    and running totals; ``tests/megamoe/by_event_emitters.py`` keeps it as the reference), made
    as one row per event and emitted by one :meth:`Emitter.emit_run` (program order on the
    pinned sub-core when the protocol asks for it: ``chain``); what depends only on (core,
    sub-core) or on the write-back's rows is looked up once per distinct value."""
    cfg, layout = ctx.cfg, ctx.layout
    lam = ctx.sync.flag_us
    onchip = cfg.link("gmm2", "combine").location == "onchip"
    g2_late = "gmm2" in layout.late
    late = "combine" in layout.late or (onchip and g2_late)
    role = layout.groups["combine"].role
    subs = [f"AIV{j}" for j in range(cfg.aiv_per_core)] if role == "AIV" else [role]
    n_subs = len(subs)
    items, events, cores = gmm2.tiles.items, gmm2.tiles.events, gmm2.tiles.cores
    per_expert: dict[int, int] = {}
    for _w, e, t in items:  # (min(t.rows, n_subs) without the property and min calls)
        r = t[1] - t[0]
        per_expert[e] = per_expert.get(e, 0) + (r if r < n_subs else n_subs)
    members = len(layout.members["combine"])
    together = {e: concurrency(n, members) for e, n in per_expert.items()}

    def placed(i: int, k: int) -> tuple[Sequence[str], str | None]:
        """(resources, released slot) of sub-core ``i`` of core ``k``'s write-backs (a pool is
        declared where the reference declares it: at the first event that names it)."""
        resources: Sequence[str]
        if late:
            resources = (em.pool("AIV-combine", layout.members["combine"]),)
        elif g2_late:
            # the paired combine follows its GMM2 tile, whose core is only chosen when the
            # tile is scheduled: the same sub-core of whichever core that is
            every = [f"c{c}.{subs[i]}" for c in range(cfg.aic_num)]
            resources = (em.pool(f"{subs[i]}-paired-combine", every),)
        else:
            resources = layout.core_res(k, subs[i])[1]
        release = None
        if onchip and i == n_subs - 1:
            release = "onchip_comb" if g2_late else f"c{k}.onchip_comb"
        return resources, release

    # colocated with the tile on-chip, and the paired combine of a late-bound GMM2 tile; pinned
    # (and then chained when the protocol has program order) unless late-bound or paired
    colocated = onchip or (g2_late and not late)
    chain = ctx.sync.program_order and not late and not g2_late
    splits: dict[tuple[int, int], list[tuple[int, int, int]]] = {}  # (m0, m1) -> (i, m0, m1)
    where: dict[tuple[int, int], tuple[Sequence[str], str | None]] = {}  # (i, core) -> placed(i, core)
    # (expert, m0, m1, cols, released slot) -> (dur, readback bytes, HBM bytes, remote bytes,
    # acquires, releases): the reference's memo
    cost_of: dict[tuple[int, int, int, int, str | None], tuple[float, int, float, float, Units, Units]] = {}
    suffix = [f".comb{i}" for i in range(n_subs)]
    readback = not onchip
    rank, traffic, experts_plan = ctx.rank, em.traffic, plan.experts
    hbm_total, remote_total, gm_ub_total = traffic["hbm"], traffic["remote_out"], traffic["gm_to_ub"]
    rows: list[tuple[Any, ...]] = []  # per event: its emit_run columns and its expert
    append = rows.append
    for (w, e, t), mm, core in zip(items, events, cores, strict=True):
        ex = experts_plan[e]
        if ex.shared:
            continue
        m0, m1, n0, n1 = t[0], t[1], t[2], t[3]
        rows_split = splits.get((m0, m1))
        if rows_split is None:  # the tile's rows split evenly over the sub-cores (empty parts left out)
            r = m1 - m0
            rows_split = splits[(m0, m1)] = [
                (i, lo, hi)
                for i in range(n_subs)
                for lo, hi in ((m0 + (r * i) // n_subs, m0 + (r * (i + 1)) // n_subs),)
                if hi > lo
            ]
        labels = {"stage": "combine", "rank": rank, "expert": e, "wave": w}
        for i, lo, hi in rows_split:
            placed_at = where.get((i, core))
            if placed_at is None:
                placed_at = where[(i, core)] = placed(i, core)
            key = (e, lo, hi, n1 - n0, placed_at[1])
            got = cost_of.get(key)
            if got is None:
                src_rows = writes.src_rows_in(ex, lo, hi)
                got = cost_of[key] = writes.cost(src_rows, n1 - n0, readback, placed_at[1], together[e])
            hbm_total += got[2]
            if got[3]:
                remote_total += got[3]
            gm_ub_total += got[1]
            # (each event its own labels dict only when several share a tile: one per event)
            labels_i = labels if n_subs == 1 else dict(labels)
            append((mm.replace(".mm", suffix[i]), placed_at[0], {mm: lam}, got, labels_i, mm, e))
    traffic["hbm"], traffic["remote_out"], traffic["gm_to_ub"] = hbm_total, remote_total, gm_ub_total
    if not rows:
        return CombineOut((), colocated=onchip, experts=())
    names, resources, deps, got_of, labels_of, tiles_of, experts = zip(*rows)
    em.emit_run(
        "combine",
        names,
        resources,
        deps,
        list(map(_acq, got_of)),
        list(map(_rel, got_of)),
        list(map(_dur, got_of)),
        labels_of,
        chain,
        colocate=tiles_of if colocated else None,
        # (resources: one-resource tuples; maps: RowWrites.cost's read-only ones)
        plain=all(type(got[0]) is float for got in cost_of.values()),
    )
    return CombineOut(names, colocated=onchip, experts=experts)


_dur, _acq, _rel = itemgetter(0), itemgetter(4), itemgetter(5)


def source_combine(
    ctx: BuildContext, em: Emitter, plan: RankPlan, gmm2: Gmm2Out, writes: RowWrites
) -> CombineOut:
    """The V1 kernel's combine (combine.h@HEAD L27-28; pseudocode.md L357-422): each combine core
    owns the source ranks ``s ≡ i (mod cores)`` and writes back their whole rows, expert after
    expert, in program order; an expert's write-backs wait for its flag ``g2c.e{e}`` (λ = flag
    latency). A stream's rate is shared among the expert's remote sources that run together (at
    most one per combine core)."""
    lam = ctx.sync.flag_us
    h = ctx.cfg.h
    members = ctx.layout.members["combine"]
    names: list[str] = []
    experts: list[int] = []
    for ex in plan.experts:
        if ex.shared or ex.rows == 0:
            continue
        flag = gmm2.expert_done[ex.index]
        segs = [(s, n) for s, n in enumerate(ex.rows_by_src) if n]
        together = concurrency(sum(1 for s, _n in segs if s != ctx.rank), len(members))
        for s, n in segs:
            res, pinned = ctx.layout.vector_res(em, "combine", s)
            labels = {"stage": "combine", "rank": ctx.rank, "expert": ex.index, "src": s}
            names.append(
                writes.event(
                    f"comb.e{ex.index}.src{s}", res, pinned, {flag: lam}, ((s, n),), h, True, labels, together
                )
            )
            experts.append(ex.index)
    return CombineOut(tuple(names), colocated=False, experts=tuple(experts))


def expert_combine(
    ctx: BuildContext, em: Emitter, plan: RankPlan, gmm2: Gmm2Out, writes: RowWrites
) -> CombineOut:
    """Per local expert, after its flag ``g2c.e{e}`` (λ = flag latency): each source's rows in
    ``COMBINE_LANES`` lanes, ``event_granularity.combine`` lanes to a write-back on the next
    combine AIV (with readback); under URMA a batched PUT
    (:func:`~moeopt.megamoe.build.urma.urma_batch`) of the rows of each remote source and one
    write-back of the local rows."""
    lam = ctx.sync.flag_us
    urma = combine_mode(ctx) == "urma"
    gran = ctx.cfg.event_granularity["combine"]
    h = ctx.cfg.h
    members = len(ctx.layout.members["combine"])
    names: list[str] = []
    experts: list[int] = []
    task = 0
    for ex in plan.experts:
        if ex.shared or ex.rows == 0:
            continue
        flag = gmm2.expert_done[ex.index]
        labels = {"stage": "combine", "rank": ctx.rank, "expert": ex.index}
        segs = [(s, n) for s, n in enumerate(ex.rows_by_src) if n]
        if urma:
            for s, n in segs:
                if s != ctx.rank:
                    put_labels = {"stage": "combine", "rank": ctx.rank, "expert": ex.index, "src": s}
                    put = urma_batch(
                        ctx,
                        em,
                        "put",
                        f"put.e{ex.index}.src{s}",
                        "combine",
                        s,
                        n * h * 2,
                        {flag: lam},
                        put_labels,
                    )
                    names.append(put)
                    experts.append(ex.index)
                    continue
                res, pinned = ctx.layout.vector_res(em, "combine", task)
                task += 1
                names.append(
                    writes.event(
                        f"comb.e{ex.index}.src{s}",
                        res,
                        pinned,
                        {flag: lam},
                        ((s, n),),
                        h,
                        True,
                        dict(labels),
                        1,
                    )
                )
                experts.append(ex.index)
            continue
        lanes = []
        for s, n in segs:
            for ln in range(COMBINE_LANES):
                r = n * (ln + 1) // COMBINE_LANES - n * ln // COMBINE_LANES
                if r:
                    lanes.append((s, r))
        together = concurrency(-(-len(lanes) // gran), members)
        for i in range(0, len(lanes), gran):
            res, pinned = ctx.layout.vector_res(em, "combine", task)
            task += 1
            pack = tuple(lanes[i : i + gran])
            names.append(
                writes.event(
                    f"comb.e{ex.index}.t{i}", res, pinned, {flag: lam}, pack, h, True, dict(labels), together
                )
            )
            experts.append(ex.index)
    return CombineOut(tuple(names), colocated=False, experts=tuple(experts))
