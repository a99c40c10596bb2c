"""The per-tile activation and combine as they were emitted before they became one run each
(issue 17): one :meth:`Emitter.emit` per event. They are the reference the run emitters are
tested against (``test_build_by_run.py``, swapped in with ``monkeypatch``), kept here rather than
in the modules, which no longer call them."""

from __future__ import annotations

from collections.abc import Sequence

from moeopt.megamoe.build.activation import _frozen, activation_us
from moeopt.megamoe.build.combine import RowsBySrc, RowWrites, concurrency
from moeopt.megamoe.build.context import BuildContext
from moeopt.megamoe.build.emitter import Emitter, Units
from moeopt.megamoe.build.handoff import ActivationOut, CombineOut, Gmm2Out, GmmTiles
from moeopt.megamoe.build.plan import RankPlan


def tile_activation_by_event(ctx: BuildContext, em: Emitter, tiles: GmmTiles) -> ActivationOut:
    """:func:`moeopt.megamoe.build.activation.tile_activation` event by event, one
    :meth:`Emitter.emit` call each: the code it replaced (c2d9e36)."""
    cfg, layout = ctx.cfg, ctx.layout
    inter = cfg.hidden_dim // 2
    late_aic = "gmm1" in layout.late
    pooled = "activation" in layout.late or late_aic
    role = layout.groups["activation"].role
    lk = cfg.link("activation", "gmm2")
    chunks = lk.chunks if lk.readiness == "per_chunk" else 1
    aiv_subs = [f"AIV{j}" for j in range(cfg.aiv_per_core)]
    by_mgroup: dict[tuple[int, int], list[str]] = {}
    by_chunk: dict[tuple[int, int, int], list[str]] = {}
    memo: dict[tuple[int, int], tuple[float, int, int]] = {}
    # per (core, HBM units, AIV): the event's resources and hold maps (each asked once)
    placed: dict[tuple[int, int, int], tuple[Sequence[str], Units, Units]] = {}
    emit, traffic, rank = em.emit, em.traffic, ctx.rank
    # running totals accumulated here, in order, and stored back (nothing else adds to them
    # while this loop runs: em.units(count=False), hold_maps, pool and emit count nothing)
    hbm_total, ub_gm_total = traffic["hbm"], traffic["ub_to_gm"]
    for (w, e, t), mm, core in zip(tiles.items, tiles.events, tiles.cores, strict=True):
        got = memo.get((t.rows, t.cols))
        if got is None:
            out_bytes = t.rows * (t.cols // 2) * ctx.bpe
            dur = activation_us(ctx, t.rows * t.cols * 2)
            got = memo[(t.rows, t.cols)] = (dur, out_bytes, em.units("hbm", out_bytes, dur, count=False))
        dur, out_bytes, units = got
        hbm_total += out_bytes
        ub_gm_total += out_bytes
        sub = t.nb % cfg.aiv_per_core
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
        resources, acq, rel = where
        name = emit(
            mm.replace(".mm", ".act"),
            "activation",
            resources,
            {mm: 0.0},
            acq,
            rel,
            dur,
            {"stage": "activation", "rank": rank, "expert": e, "wave": w},
            colocate_with=mm,
        )
        by_mgroup.setdefault((e, t.mb), []).append(name)
        c0, c1 = t.n0 // 2, t.n1 // 2
        for c in range(chunks):
            lo, hi = c * inter // chunks, (c + 1) * inter // chunks
            if c0 < hi and c1 > lo:
                by_chunk.setdefault((e, t.mb, c), []).append(name)
    traffic["hbm"], traffic["ub_to_gm"] = hbm_total, ub_gm_total
    return ActivationOut(_frozen(by_mgroup), _frozen(by_chunk), colocated=True)


def tile_combine_by_event(
    ctx: BuildContext, em: Emitter, plan: RankPlan, gmm2: Gmm2Out, writes: RowWrites
) -> CombineOut:
    """:func:`moeopt.megamoe.build.combine.tile_combine` event by event, one
    :meth:`Emitter.emit` call each: the code it replaced (c2d9e36)."""
    cfg, layout = ctx.cfg, ctx.layout
    lam = ctx.sync.flag_us
    onchip = cfg.link("gmm2", "combine").location == "onchip"
    g2_late = "gmm2" in layout.late
    late = "combine" in layout.late or (onchip and g2_late)
    role = layout.groups["combine"].role
    subs = [f"AIV{j}" for j in range(cfg.aiv_per_core)] if role == "AIV" else [role]
    splits: dict[tuple[int, int], list[tuple[int, int]]] = {}
    names: list[str] = []
    experts: list[int] = []
    per_expert: dict[int, int] = {}
    for _w, e, t in gmm2.tiles.items:
        per_expert[e] = per_expert.get(e, 0) + min(t.rows, len(subs))
    members = len(layout.members["combine"])
    # what RowWrites.event does per event, with each expert's concurrency, each (expert, rows)'s
    # rows by source and each write-back's cost looked up once, and the traffic totals summed
    # here in the same order and stored back (nothing else adds to them while this loop runs:
    # RowWrites.cost counts nothing, pool and emit neither)
    together = {e: concurrency(n, members) for e, n in per_expert.items()}
    rows_of: dict[tuple[int, int, int], RowsBySrc] = {}
    cost_of: dict[tuple[int, int, int, int, str | None], tuple[float, int, float, float, Units, Units]] = {}
    suffix = [f".comb{i}" for i in range(len(subs))]
    readback = not onchip
    program_order = ctx.sync.program_order
    emit, traffic, rank = em.emit, em.traffic, ctx.rank
    hbm_total, remote_total, gm_ub_total = traffic["hbm"], traffic["remote_out"], traffic["gm_to_ub"]
    for (w, e, t), mm, core in zip(gmm2.tiles.items, gmm2.tiles.events, gmm2.tiles.cores, strict=True):
        ex = plan.experts[e]
        if ex.shared:
            continue
        rows_split = splits.get((t.m0, t.rows))
        if rows_split is None:  # the tile's rows split evenly over the sub-cores
            rows_split = splits[(t.m0, t.rows)] = [
                (t.m0 + (t.rows * i) // len(subs), t.m0 + (t.rows * (i + 1)) // len(subs))
                for i in range(len(subs))
            ]
        for i, (sub, (m0, m1)) in enumerate(zip(subs, rows_split, strict=False)):
            if m1 <= m0:
                continue
            colocate = mm if onchip else None
            resources: Sequence[str]
            pinned: Sequence[str] | None
            if late:
                resources, pinned = (em.pool("AIV-combine", layout.members["combine"]),), None
            elif g2_late:
                # the paired combine follows its GMM2 tile, whose core is only chosen when the
                # tile is scheduled: the same sub-core of whichever core that is
                every = [f"c{k}.{sub}" for k in range(cfg.aic_num)]
                resources, pinned = (em.pool(f"{sub}-paired-combine", every),), None
                colocate = mm
            else:
                resources = pinned = layout.core_res(core, sub)[1]
            release = None
            if onchip and i == len(subs) - 1:
                release = "onchip_comb" if g2_late else f"c{core}.onchip_comb"
            key = (e, m0, m1, t.cols, release)
            got = cost_of.get(key)
            if got is None:
                rows = rows_of.get(key[:3])
                if rows is None:
                    rows = rows_of[key[:3]] = writes.src_rows_in(ex, m0, m1)
                got = cost_of[key] = writes.cost(rows, t.cols, readback, release, together[e])
            dur, rb_bytes, hbm_bytes, rem, acq, rel = got
            hbm_total += hbm_bytes
            if rem:
                remote_total += rem
            gm_ub_total += rb_bytes
            experts.append(e)
            names.append(
                emit(
                    mm.replace(".mm", suffix[i]),
                    "combine",
                    resources,
                    {mm: lam},
                    acq,
                    rel,
                    dur,
                    {"stage": "combine", "rank": rank, "expert": e, "wave": w},
                    colocate,
                    pinned if program_order else None,
                )
            )
    traffic["hbm"], traffic["remote_out"], traffic["gm_to_ub"] = hbm_total, remote_total, gm_ub_total
    return CombineOut(tuple(names), colocated=onchip, experts=tuple(experts))
