"""Head and tail: the front reorder before dispatch and the unpermute after combine.

Both are one closed-form event on every AIV of the rank (the kernel runs them on all vector
cores at the all-AIV streaming rate), and both are in program order on every AIV.
"""

from __future__ import annotations

import numpy as np

from moeopt.megamoe.build.context import BuildContext
from moeopt.megamoe.build.emitter import Emitter
from moeopt.megamoe.build.handoff import CombineOut, Gmm2Out
from moeopt.megamoe.build.plan import RankPlan

# impl: the front reorder's UB budget and sort loop (tiling_builder.cpp@HEAD L101-103, L215-272)
FRONT_UB_BYTES = 196608  # UB 192 KiB (const_args.hpp@HEAD L19-27)
SORT_LOOP_MAX_ROUTES = 6144  # sortLoopMaxElement = 192 KiB / 32 B / (32 * 32) x 1024
CALIBRATION_SORT_CORES = 4  # the §1 point: 16384 routes -> Pow4Ceil(ceil(16384 / 6144)) = 4 sort cores


def _align32(x: int) -> int:
    return -(-x // 32) * 32


def front_path(ctx: BuildContext) -> tuple[str, int]:
    """(path, sort cores) the PTO kernel's front reorder takes (tiling_builder.cpp@HEAD L215-322):
    ``FullLoad`` iff routes <= 6144, K <= 8192, K % 32 = 0 and
    ``36 align32(routes) + 13 align32(K) + align32(4 experts) + 64 <= 196608`` (the whole working
    set in UB); else ``OneCore`` iff routes <= 6144 (one AIV sorts in UB, results through GM); else
    ``MultiCore`` with ``Pow4Ceil(ceil(routes / 6144))`` sort cores (at most the AIVs). With
    ``kernel.front_reorder = single`` there is one path, ``closed_form`` (the fitted cost as is)."""
    routes = ctx.tokens * ctx.topk
    if ctx.cfg.front_reorder != "kernel_rule":
        return "closed_form", CALIBRATION_SORT_CORES
    k = ctx.cfg.h
    experts = ctx.world * ctx.rows.shape[1]
    budget = 36 * _align32(routes) + 13 * _align32(k) + _align32(4 * experts) + 64
    if routes <= SORT_LOOP_MAX_ROUTES and k <= 8192 and k % 32 == 0 and budget <= FRONT_UB_BYTES:
        return "FullLoad", 1
    if routes <= SORT_LOOP_MAX_ROUTES:
        return "OneCore", 1
    cores = 1
    while cores < -(-routes // SORT_LOOP_MAX_ROUTES):
        cores *= 4
    return "MultiCore", min(cores, len(ctx.layout.aiv_all))


def build_head(ctx: BuildContext, em: Emitter) -> str:
    """The front reorder: launch, routing sort and the quantised scatter of the packed rows.

    ``head_us = launch_us + sort_us + front_bytes / aiv_aggregate_local_bytes_per_us`` with
    ``routes = tokens × topk`` and ``front_bytes = tokens × h × 2 + routes × row_bytes`` (the
    bf16 tokens read, the packed rows written), plus ``routes × 16`` B of sorted expert / route
    arrays written and read back through GM unless the path keeps them in UB (FullLoad). The sort
    (:func:`front_path`): ``routes × front_sort_us_per_route × 4 / sort cores`` -- the per-route
    cost was fitted where 4 cores sorted (the §1 point); one core sorting alone (OneCore, and
    FullLoad, where every AIV sorts the whole set in UB) takes 4 times the share, an assumed
    linear split. Counts the bytes as HBM traffic. Returns the head event's name.

    Provenance (config/profiles.py): ``launch_us`` assumed (pto-a2a3: 10904.8 cycles of a
    cost model, hardware.md §4; megamoe-a8w8: 6 µs); ``front_sort_us_per_route`` fitted to the
    front reorder of hardware.md §1 (MultiCore; megamoe-a8w8 borrows it, assumed);
    ``aiv_aggregate_local_bytes_per_us`` fitted to the unpermute of §1 (megamoe-a8w8: measured, §5)."""
    routes = ctx.tokens * ctx.topk
    path, sort_cores = front_path(ctx)
    front_bytes = ctx.tokens * ctx.cfg.h * 2 + routes * ctx.row_bytes
    if path in ("OneCore", "MultiCore"):
        front_bytes += routes * 16
    sort_us = routes * ctx.c("front_sort_us_per_route") * CALIBRATION_SORT_CORES / sort_cores
    head_us = ctx.c("launch_us") + sort_us + front_bytes / ctx.c("aiv_aggregate_local_bytes_per_us")
    em.count("hbm", front_bytes)
    aiv = ctx.layout.aiv_all
    labels = {"stage": "head", "rank": ctx.rank, "path": path}
    return em.emit("head", "head", aiv, {}, duration_us=head_us, labels=labels, chain_on=aiv)


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


def build_two_phase_tail(
    ctx: BuildContext, em: Emitter, plan: RankPlan, combine: CombineOut, gmm2: Gmm2Out
) -> str:
    """The V1 kernel's unpermute, without an all-rank barrier (pseudocode.md L424-478):

    * phase 1 (``tail.p1``) on the dispatch and SwiGLU groups' AIVs, once they are free (program
      order) and every producer rank's combine has reached ``options.unpermute_ready_experts``
      experts (a flag on this rank's combine of those experts, λ = a cross-rank notification;
      every rank stands for its peers here, as ranks with the same routing are simulated once):
      the share ``f1`` of this rank's tokens whose routes all went to local experts below that
      count;
    * phase 2 (``tail``) on every AIV after phase 1, every combine (λ = the DataReady
      notification) and every shared expert's GMM2: the other tokens.

    Each phase takes ``share × tail_bytes / (AIVs × per-AIV rate)``, the per-AIV rate being
    ``aiv_aggregate_local_bytes_per_us`` over the die's AIVs (the unpermute it was fitted to ran
    on all of them), ``tail_bytes`` as in :func:`build_tail`. ``f1`` is exact for the kernel's
    cyclic routing (a token's ``topk`` routes go to consecutive global experts) and assumes
    independent routes otherwise (``p ** topk``, ``p`` the share of routes below the count).
    Returns the last phase's name."""
    cfg = ctx.cfg
    ready_n = cfg.unpermute_ready_experts
    early = [n for n, e in zip(combine.events, combine.experts, strict=True) if e < ready_n]
    shared_tail = [gmm2.expert_done[ex.index] for ex in plan.experts if ex.shared and ex.rows]
    done = em.flag("combine_done", list(combine.events) + shared_tail)
    ready = em.flag("combine_ready", early or list(combine.events))
    routes = ctx.tokens * ctx.topk
    tail_bytes = routes * cfg.h * 2 + ctx.tokens * cfg.h * 2 * (1 + ctx.shared_experts)
    aiv = ctx.layout.aiv_all
    per_aiv = ctx.c("aiv_aggregate_local_bytes_per_us") / len(aiv)
    f1 = ready_share(ctx, ready_n)
    first = tuple(dict.fromkeys([*ctx.layout.members["dispatch"], *ctx.layout.members["activation"]]))
    em.count("hbm", tail_bytes)
    p1 = em.emit(
        "tail.p1",
        "tail",
        first,
        {ready: ctx.sync.rank_barrier_us},
        duration_us=f1 * tail_bytes / (len(first) * per_aiv),
        labels={"stage": "tail", "rank": ctx.rank, "phase": 1},
        chain_on=first,
    )
    return em.emit(
        "tail",
        "tail",
        aiv,
        {done: ctx.sync.rank_barrier_us, p1: 0.0},
        duration_us=(1.0 - f1) * tail_bytes / (len(aiv) * per_aiv),
        labels={"stage": "tail", "rank": ctx.rank, "phase": 2},
        chain_on=aiv,
    )


def ready_share(ctx: BuildContext, ready_experts: int) -> float:
    """The share of this rank's tokens whose every route went to a local expert below
    ``ready_experts`` (of whichever rank): exact under the kernel's cyclic routing (global token
    ``g``'s route ``k`` goes to global expert ``(g × topk + k) mod (world × E)``), else from this
    rank's route counts assuming independent routes."""
    n_local = len(ctx.own_routes) // ctx.world if ctx.world else 0
    if not n_local:
        return 0.0
    if ctx.cfg.routing == "cyclic":
        n_exp = ctx.world * n_local
        g = ctx.rank * ctx.tokens + np.arange(ctx.tokens, dtype=np.int64)
        experts = (g[:, None] * ctx.topk + np.arange(ctx.topk, dtype=np.int64)[None, :]) % n_exp
        return float(np.mean(np.all(experts % n_local < ready_experts, axis=1)))
    local = np.arange(len(ctx.own_routes)) % n_local
    total = float(ctx.own_routes.sum())
    if total <= 0:
        return 0.0
    p = float(ctx.own_routes[local < ready_experts].sum()) / total
    return p**ctx.topk
