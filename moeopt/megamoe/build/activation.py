"""Activation (SwiGLU): GMM1's output gated and quantised for GMM2.

Two hand-offs, chosen by the GMM1 -> activation link:

* on-chip (:func:`tile_activation`): one event per GMM1 tile on the same core as the tile
  (colocated), giving back the link slot its compute phase took;
* GM (:func:`segment_activation`): per SwiGLU segment of experts, after a flag on the segment's
  GMM1 tiles, the segment's rows split evenly over the activation group's AIVs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import itemgetter
from types import MappingProxyType
from typing import Any, TypeVar

from moeopt.megamoe.build.context import BuildContext
from moeopt.megamoe.build.emitter import Emitter, Units
from moeopt.megamoe.build.handoff import ActivationOut, Gmm1Out, GmmTiles
from moeopt.megamoe.build.plan import ExpertPlan, RankPlan
from moeopt.megamoe.scenario import Config

K = TypeVar("K", bound=tuple[int, ...])


def build_activation(ctx: BuildContext, em: Emitter, plan: RankPlan, gmm1: Gmm1Out) -> ActivationOut:
    """The activation events; returns what GMM2 waits on per m-group and per K chunk."""
    if ctx.cfg.link("gmm1", "activation").location == "onchip":
        return tile_activation(ctx, em, gmm1.tiles)
    return segment_activation(ctx, em, plan, gmm1.tiles)


def activation_us(ctx: BuildContext, in_bytes: float) -> float:
    """``act_startup_us + in_bytes / act_bytes_per_us``: a fixed start-up, then streaming the
    half-precision GMM1 output.

    Provenance (config/profiles.py): ``act_bytes_per_us`` pto-a2a3 fitted to the SwiGLU stage
    of hardware.md §1, megamoe-a8w8 measured (§5); ``act_startup_us`` measured on arch35 (§5;
    pto-a2a3 borrows it, assumed)."""
    return ctx.c("act_startup_us") + in_bytes / ctx.c("act_bytes_per_us")


def tile_activation(ctx: BuildContext, em: Emitter, tiles: GmmTiles) -> ActivationOut:
    """One event per GMM1 tile, colocated with the tile's compute phase: :func:`activation_us` of
    the tile read from L0C -> UB (``rows × cols × 2`` bytes), writing ``rows × cols/2 × bpe``
    bytes to GM while holding HBM bandwidth for them; it gives back the on-chip link slot. A
    vector role runs on the tile core's AIV ``nb mod aiv_per_core``.

    The events the code it replaced made with one :meth:`Emitter.emit` each (same order, fields
    and running totals; ``tests/megamoe/by_event_emitters.py`` keeps it as the reference), made
    as one row per event and emitted by one :meth:`Emitter.emit_run` (not chained: an
    activation follows its own tile on the core); what depends only on the tile's extent or on
    (core, HBM units, AIV) is looked up once per distinct value."""
    cfg, layout = ctx.cfg, ctx.layout
    inter = cfg.hidden_dim // 2
    late_aic = "gmm1" in layout.late
    pooled = "activation" in layout.late or late_aic
    role = layout.groups["activation"].role
    lk = cfg.link("activation", "gmm2")
    chunks = lk.chunks if lk.readiness == "per_chunk" else 1
    aiv_subs = [f"AIV{j}" for j in range(cfg.aiv_per_core)]
    aiv_per_core = cfg.aiv_per_core
    by_mgroup: dict[tuple[int, int], list[str]] = {}
    by_chunk: dict[tuple[int, int, int], list[str]] = {}
    memo: dict[tuple[int, int], tuple[float, int, int]] = {}
    # per (tile rows, tile cols, core, AIV): the event's duration, bytes, resources and hold
    # maps (each (rows, cols) costed, each (core, units, AIV) placed once, as the reference does)
    placed: dict[tuple[int, int, int], tuple[Sequence[str], Units, Units]] = {}
    per_class: dict[tuple[int, int, int, int], tuple[float, int, Sequence[str], Units, Units]] = {}
    traffic, rank = em.traffic, ctx.rank
    # the chunks' column ranges [lo, hi) of the intermediate dimension
    bounds = [(c, c * inter // chunks, (c + 1) * inter // chunks) for c in range(chunks)]
    # running totals accumulated here, in order, and stored back (nothing else adds to them
    # while this loop runs: em.units(count=False), hold_maps and pool count nothing)
    hbm_total, ub_gm_total = traffic["hbm"], traffic["ub_to_gm"]
    rows: list[tuple[Any, ...]] = []  # per event: its emit_run columns
    append = rows.append
    for (w, e, t), mm, core in zip(tiles.items, tiles.events, tiles.cores, strict=True):
        m0, m1, n0, n1, mb, nb = t
        sub = nb % aiv_per_core
        ckey = (m1 - m0, n1 - n0, core, sub)
        got = per_class.get(ckey)
        if got is None:
            cost = memo.get(ckey[:2])
            if cost is None:
                out_bytes = (m1 - m0) * ((n1 - n0) // 2) * ctx.bpe
                dur = activation_us(ctx, (m1 - m0) * (n1 - n0) * 2)
                cost = memo[ckey[:2]] = (dur, out_bytes, em.units("hbm", out_bytes, dur, count=False))
            dur, out_bytes, units = cost
            where = placed.get((core, units, sub))
            if where is None:
                give = "onchip_act" if late_aic else f"c{core}.onchip_act"
                acq, rel = em.hold_maps((("hbm", units),), give=give)
                resources: Sequence[str]
                if pooled:
                    resources = (em.pool("AIV-activation", layout.members["activation"]),)
                else:
                    resources = layout.core_res(core, role if role != "AIV" else aiv_subs[sub])[1]
                where = placed[(core, units, sub)] = (resources, acq, rel)
            got = per_class[ckey] = (dur, out_bytes, *where)
        hbm_total += got[1]
        ub_gm_total += got[1]
        name = mm.replace(".mm", ".act")
        append((name, got, {mm: 0.0}, {"stage": "activation", "rank": rank, "expert": e, "wave": w}, mm))
        if (e, mb) in by_mgroup:
            by_mgroup[(e, mb)].append(name)
        else:
            by_mgroup[(e, mb)] = [name]
        c0, c1 = n0 // 2, n1 // 2
        for c, lo, hi in bounds:
            if c0 < hi and c1 > lo:
                by_chunk.setdefault((e, mb, c), []).append(name)
    traffic["hbm"], traffic["ub_to_gm"] = hbm_total, ub_gm_total
    if rows:
        names, got_of, deps, labels, colocate = zip(*rows)
        em.emit_run(
            "activation",
            names,
            list(map(_resources, got_of)),
            deps,
            list(map(_acq, got_of)),
            list(map(_rel, got_of)),
            list(map(_dur, got_of)),
            labels,
            False,
            colocate=colocate,
            # (resources: one-resource tuples; maps: hold_maps' read-only ones)
            plain=all(type(got[0]) is float for got in per_class.values()),
        )
    return ActivationOut(_frozen(by_mgroup), _frozen(by_chunk), colocated=True)


_dur, _resources, _acq, _rel = itemgetter(0), itemgetter(2), itemgetter(3), itemgetter(4)


def segment_activation(ctx: BuildContext, em: Emitter, plan: RankPlan, tiles: GmmTiles) -> ActivationOut:
    """Per SwiGLU segment: a flag ``c2v.s{i}`` on its GMM1 tiles; each of the activation group's
    first ``options.swiglu_active`` AIVs takes an even share ``r`` of the segment's rows after the
    flag (λ = flag latency, + one SYNCALL with the protocol's group barriers),
    :func:`activation_us` of ``r × hidden_dim × 2`` bytes read, ``r × hidden_dim/2 × bpe``
    written, holding HBM bandwidth for both; in program order on its AIV. A flag ``v2c.s{i}`` on
    them is what every m-group of the segment's experts hands to GMM2."""
    cfg, sync = ctx.cfg, ctx.sync
    inter = cfg.hidden_dim // 2
    experts = plan.experts
    members = ctx.layout.members["activation"]
    g1_by_expert = tiles.events_by_expert()
    by_mgroup: dict[tuple[int, int], list[str]] = {}
    for si, seg in enumerate(swiglu_segments(cfg, experts)):
        mms = [mm for e in seg for mm in g1_by_expert.get(e, [])]
        if not mms:
            continue
        c2v = em.flag(f"c2v.s{si}", mms)
        rows = sum(experts[e].rows for e in seg)
        parts = min(len(members), cfg.swiglu_active)
        names = []
        for p in range(parts):
            r = rows * (p + 1) // parts - rows * p // parts
            if r == 0:
                continue
            in_bytes = r * cfg.hidden_dim * 2
            out_bytes = r * inter * ctx.bpe
            dur = activation_us(ctx, in_bytes)
            acq: dict[str, int] = {}
            rel: dict[str, int] = {}
            em.bw(acq, rel, "hbm", in_bytes + out_bytes, dur)
            em.count("gm_to_ub", in_bytes)
            em.count("ub_to_gm", out_bytes)
            resources, pinned = ctx.layout.vector_res(em, "activation", p)
            names.append(
                em.emit(
                    f"act.s{si}.p{p}",
                    "activation",
                    resources,
                    {c2v: sync.flag_us + (sync.syncall_us if sync.group_barriers else 0.0)},
                    acq,
                    rel,
                    dur,
                    {"stage": "activation", "rank": ctx.rank, "segment": si, "rows": r, **_one_expert(seg)},
                    chain_on=pinned if sync.program_order else None,
                )
            )
        v2c = em.flag(f"v2c.s{si}", names)
        for e in seg:
            for mb in range(-(-experts[e].rows // cfg.tile_m)):
                by_mgroup[(e, mb)] = [v2c]
    return ActivationOut(_frozen(by_mgroup), MappingProxyType({}), colocated=False)


def _one_expert(seg: Sequence[int]) -> dict[str, int]:
    """The ``expert`` label of a segment that is one expert (per-expert SwiGLU), else none."""
    return {"expert": seg[0]} if len(seg) == 1 else {}


def swiglu_segments(cfg: Config, experts: Sequence[ExpertPlan]) -> list[list[int]]:
    """The SwiGLU segments (``kernel.swiglu_segments``): ``per_expert``, ``single``, or the
    kernel's rule, experts ``[0, E-3)`` and ``[E-3, E)`` for ``E > 4`` (moe_swiglu_segment.hpp
    L23-45); the shared experts, if any, are one more segment, the last one (the first with
    ``options.orchestration = 'layered'``, which computes them first)."""
    local = [ex.index for ex in experts if not ex.shared]
    shared = [ex.index for ex in experts if ex.shared]
    rule = cfg.swiglu_segments
    if rule == "per_expert":
        segs = [[e] for e in local]
    elif rule == "single":
        segs = [local]
    else:
        n = len(local)
        segs = [local[: n - 3], local[n - 3 :]] if n > 4 else [local]
    segs = [s for s in segs if s]
    if not shared:
        return segs
    return [shared, *segs] if cfg.orchestration == "layered" else [*segs, shared]


def _frozen(d: Mapping[K, list[str]]) -> Mapping[K, tuple[str, ...]]:
    """A read-only copy with tuple values."""
    return MappingProxyType({k: tuple(v) for k, v in d.items()})
