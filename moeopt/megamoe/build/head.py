"""Head and tail: the front reorder before dispatch and the unpermute after combine.

Both are one closed-form event on every AIV of the rank (the kernel runs them on all vector
cores at the all-AIV streaming rate), and both are in program order on every AIV.
"""

from __future__ import annotations

from moeopt.megamoe.build.context import BuildContext
from moeopt.megamoe.build.emitter import Emitter
from moeopt.megamoe.build.plan import RankPlan
from moeopt.megamoe.build.handoff import CombineOut, Gmm2Out


def build_head(ctx: BuildContext, em: Emitter) -> str:
    """The front reorder: launch, routing sort and the quantised scatter of the packed rows.

    ``head_us = launch_us + routes × front_sort_us_per_route + front_bytes / aiv_aggregate_local_bytes_per_us``
    with ``routes = tokens × topk`` and ``front_bytes = tokens × h × 2 + routes × row_bytes`` (the
    bf16 tokens read, the packed rows written). Counts ``front_bytes`` as HBM traffic. Returns the
    head event's name.

    Provenance (config/profiles.py): ``launch_us`` assumed (pto-a2a3: 10904.8 cycles of a
    cost model, hardware.md §4; megamoe-a8w8: 6 µs); ``front_sort_us_per_route`` fitted to the
    front reorder of hardware.md §1 (megamoe-a8w8 borrows it, assumed);
    ``aiv_aggregate_local_bytes_per_us`` fitted to the unpermute of §1 (megamoe-a8w8: measured, §5)."""
    routes = ctx.tokens * ctx.topk
    front_bytes = ctx.tokens * ctx.cfg.h * 2 + routes * ctx.row_bytes
    head_us = (
        ctx.c("launch_us")
        + routes * ctx.c("front_sort_us_per_route")
        + front_bytes / ctx.c("aiv_aggregate_local_bytes_per_us")
    )
    em.count("hbm", front_bytes)
    aiv = ctx.layout.aiv_all
    return em.emit("head", "head", aiv, {}, duration_us=head_us, labels={"stage": "head", "rank": ctx.rank}, chain_on=aiv)


def build_tail(ctx: BuildContext, em: Emitter, plan: RankPlan, combine: CombineOut, gmm2: Gmm2Out) -> str:
    """The unpermute, after every combine of every rank (a cross-rank barrier).

    A flag ``combine_done`` waits for every combine event and for the GMM2 of every shared expert
    (its rows are already local); the tail waits for it with λ = the protocol's rank barrier
    (``cross_rank_flag_us``) and runs ``tail_bytes / aiv_aggregate_local_bytes_per_us`` with
    ``tail_bytes = routes × h × 2 + tokens × h × 2 × (1 + shared experts)`` (the combined rows
    read, the output and each shared expert's rows). Counts ``tail_bytes`` as HBM traffic.
    Returns the tail event's name. Provenance: ``cross_rank_flag_us`` assumed in every profile
    (see :func:`~moeopt.megamoe.build.sync.hardware_flags`); the rate as for the head."""
    cfg = ctx.cfg
    shared_tail = [gmm2.expert_done[ex.index] for ex in plan.experts if ex.shared and ex.rows]
    done = em.flag("combine_done", list(combine.events) + shared_tail)
    routes = ctx.tokens * ctx.topk
    tail_bytes = routes * cfg.h * 2 + ctx.tokens * cfg.h * 2 * (1 + ctx.shared_experts)
    tail_us = tail_bytes / ctx.c("aiv_aggregate_local_bytes_per_us")
    em.count("hbm", tail_bytes)
    aiv = ctx.layout.aiv_all
    return em.emit(
        "tail",
        "tail",
        aiv,
        {done: ctx.sync.rank_barrier_us},
        duration_us=tail_us,
        labels={"stage": "tail", "rank": ctx.rank},
        chain_on=aiv,
    )
