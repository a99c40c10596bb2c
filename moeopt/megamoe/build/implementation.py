"""An implementation is a composition: which stage builders, which sync protocol, which core groups.

:func:`compose` is the one program every implementation runs: plan, declare the slot
semaphores, then head -> dispatch -> GMM1 -> activation -> GMM2 -> combine -> tail, each stage
taking the hand-offs of the earlier ones as arguments, then the orchestration's program order
when it interleaves stages on a resource (layered), then the staged barriers if the protocol has
them, then assembly. :data:`BASELINE` (profiles ``pto-a2a3``, ``megamoe-a8w8`` and none) and
:data:`V1` (``pto-a2a3-v1``) are the PTO kernel's two versions; :data:`LAYERED` is the URMA
kernel's layered orchestration (``options.orchestration = 'layered'``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import chain, compress, repeat
from operator import attrgetter, eq, itemgetter, not_
from types import MappingProxyType
from typing import Any

import numpy as np

from moeopt.core import smallints
from moeopt.core.events import Event
from moeopt.core.schedule import deferred_columns
from moeopt.core.scheduler import schedule as greedy_schedule
from moeopt.megamoe.build.activation import build_activation
from moeopt.megamoe.build.combine import COMBINE_PATHS, build_combine, combine_mode
from moeopt.megamoe.build.context import STAGES, BuildContext, Layout
from moeopt.megamoe.build.dispatch import build_dispatch
from moeopt.megamoe.build.emitter import Emitter
from moeopt.megamoe.build.gmm import build_gmm1, build_gmm2, declare_gmm_semaphores
from moeopt.megamoe.build.handoff import ActivationOut, CombineOut, DispatchOut, Gmm1Out, Gmm2Out
from moeopt.megamoe.build.head import build_head, build_tail, build_two_phase_tail, front_path
from moeopt.megamoe.build.layered import (
    build_layered_combine,
    build_layered_gmm1,
    build_layered_gmm2,
    build_layered_receive,
    layered_program_order,
)
from moeopt.megamoe.build.plan import RankPlan, plan_rank
from moeopt.megamoe.build.rankgraph import RankGraph
from moeopt.megamoe.build.sync import (
    PROTOCOLS,
    SyncProtocol,
    hardware_flags,
    software_epochs,
    wire_stage_barriers,
)
from moeopt.megamoe.contract import GroupedGemmContract, check_rank, contract_from_sizes
from moeopt.megamoe.scenario import Config, CoreGroup
from moeopt.megamoe.stealing import restructure_rule

HeadStage = Callable[[BuildContext, Emitter], str]
DispatchStage = Callable[[BuildContext, Emitter, RankPlan, str], DispatchOut]
Gmm1Stage = Callable[[BuildContext, Emitter, RankPlan, DispatchOut, str], Gmm1Out]
ActivationStage = Callable[[BuildContext, Emitter, RankPlan, Gmm1Out], ActivationOut]
Gmm2Stage = Callable[[BuildContext, Emitter, RankPlan, ActivationOut, str | None, str | None], Gmm2Out]
CombineStage = Callable[[BuildContext, Emitter, RankPlan, Gmm2Out], CombineOut]
TailStage = Callable[[BuildContext, Emitter, RankPlan, CombineOut, Gmm2Out], str]
ProgramOrder = Callable[[BuildContext, Emitter, RankPlan, DispatchOut, Gmm1Out, Gmm2Out, CombineOut], None]


@dataclass(frozen=True)
class Implementation:
    """A kernel implementation as the model builds it."""

    name: str
    sync: Callable[[Config], SyncProtocol]  # the sync protocol's latencies and rules
    core_groups: Callable[[Config], Mapping[str, CoreGroup]]  # stage -> its cores and role
    head: HeadStage
    dispatch: DispatchStage
    gmm1: Gmm1Stage
    activation: ActivationStage
    gmm2: Gmm2Stage
    combine: CombineStage
    tail: TailStage
    # program order wired once every stage is built, for an orchestration that interleaves
    # stages on a resource (None: each stage's events follow each other as emitted)
    program_order: ProgramOrder | None = None


def scenario_core_groups(cfg: Config) -> Mapping[str, CoreGroup]:
    """The core groups the scenario resolved (``options.core_groups``: shared, v1_fixed or custom)."""
    return cfg.core_groups


BASELINE = Implementation(
    name="baseline",
    sync=hardware_flags,
    core_groups=scenario_core_groups,
    head=build_head,
    dispatch=build_dispatch,
    gmm1=build_gmm1,
    activation=build_activation,
    gmm2=build_gmm2,
    combine=build_combine,
    tail=build_tail,
)


V1 = Implementation(
    name="v1",
    sync=software_epochs,
    core_groups=scenario_core_groups,
    head=build_head,
    dispatch=build_dispatch,
    gmm1=build_gmm1,
    activation=build_activation,
    gmm2=build_gmm2,
    combine=build_combine,
    tail=build_two_phase_tail,
)


LAYERED = Implementation(
    name="layered",
    sync=hardware_flags,
    core_groups=scenario_core_groups,
    head=build_head,
    dispatch=build_layered_receive,
    gmm1=build_layered_gmm1,
    activation=build_activation,
    gmm2=build_layered_gmm2,
    combine=build_layered_combine,
    tail=build_tail,
    program_order=layered_program_order,
)


def implementation_for(cfg: Config) -> Implementation:
    """The composition that builds ``cfg``: its orchestration (``options.orchestration``), sync
    protocol (``options.sync_protocol``) and unpermute (``options.unpermute``); :data:`BASELINE`
    and :data:`V1` are the two the PTO kernel has, :data:`LAYERED` the URMA kernel's, and every mix
    of their parts is a composition too (the stage builders read the other knobs)."""
    sync = PROTOCOLS[cfg.sync_protocol]
    tail = build_two_phase_tail if cfg.unpermute == "two_phase" else build_tail
    known = (LAYERED,) if cfg.orchestration == "layered" else (BASELINE, V1)
    for impl in known:
        if impl.sync is sync and impl.tail is tail:
            return impl
    return dataclasses.replace(known[0], name="custom", sync=sync, tail=tail)


def compose(
    impl: Implementation,
    cfg: Config,
    tokens: int,
    topk: int,
    world: int,
    rows: np.ndarray,
    rank: int,
    shared_experts: int,
    own_routes: np.ndarray | None = None,
    gmm2_join_from: int | None = None,
    planned: tuple[RankPlan, GroupedGemmContract] | None = None,
) -> RankGraph:
    """The event graph of destination ``rank`` (``rows[src][local expert]``) built by ``impl``;
    ``own_routes``: this rank's own tokens' routes per global expert (the two-phase unpermute
    reads it); ``gmm2_join_from``: the expert from which GMM2's joining cores take part (the
    dynamic join, see :func:`build_rank`); ``planned``: :func:`plan_and_contract` of the same
    arguments, when the caller already has it (a plan does not depend on the join)."""
    w8a8 = cfg.quant == "w8a8"
    ctx = BuildContext(
        cfg=cfg,
        rank=rank,
        world=world,
        tokens=tokens,
        topk=topk,
        rows=rows,
        own_routes=np.zeros(0, dtype=np.int64) if own_routes is None else own_routes,
        shared_experts=shared_experts,
        layout=Layout.of(cfg, impl.core_groups(cfg), gmm2_join_from),
        sync=impl.sync(cfg),
        const=cfg.constant_values(),  # notes the constants the build reads (r["provenance"])
        row_bytes=cfg.h + 32 if w8a8 else cfg.h * 2,  # int8 payload + fp32 scale + pad, or bf16
        bpe=1 if w8a8 else 2,
    )
    plan, contract = planned or plan_and_contract(cfg, rows, tokens, rank, world, shared_experts, topk)
    em = Emitter(rank, cfg.bandwidth_contention, cfg.c("bw_unit_bytes_per_us"))
    for channel in ("hbm", "remote_in", "remote_out"):  # aggregate bandwidth of the rank
        em.bandwidth(channel, cfg.c(f"{channel}_bytes_per_us"))
    declare_gmm_semaphores(ctx, em)

    head = impl.head(ctx, em)
    dispatch = impl.dispatch(ctx, em, plan, head)
    gmm1 = impl.gmm1(ctx, em, plan, dispatch, head)
    act = impl.activation(ctx, em, plan, gmm1)
    # a GMM2 group that takes over GMM1's cores waits, on those cores, until GMM1 is done
    join = {"gmm1": gmm1.done}.get(ctx.layout.groups["gmm2"].join or "")
    gmm2 = impl.gmm2(ctx, em, plan, act, join, gmm1.full_sync)
    combine = impl.combine(ctx, em, plan, gmm2)
    if impl.program_order is not None:
        impl.program_order(ctx, em, plan, dispatch, gmm1, gmm2, combine)
    tail = impl.tail(ctx, em, plan, combine, gmm2)
    if ctx.sync.staged_barriers:
        wire_stage_barriers(em, ctx.sync, STAGES)
    # a write-back stream holds its queue entries: at a tie it starts before the next GMM tile
    graph, dropped = em.assemble(early=("combine",))

    hbm, remote_in, remote_out = algorithmic_bytes(ctx, plan)
    return RankGraph(
        rank=rank,
        graph=graph,
        experts=list(plan.experts),
        contract=contract,
        stage_members=dict(ctx.layout.members),
        late_stages=set(ctx.layout.late),
        colocated_stages={
            st for st, on in (("activation", act.colocated), ("combine", combine.colocated)) if on
        },
        traffic_bytes=em.traffic,
        macs=em.macs,
        algo_hbm_bytes=hbm,
        algo_remote_in_bytes=remote_in,
        algo_remote_out_bytes=remote_out,
        combine_events=list(combine.events),
        chain_edges=em.chain_edges,
        tail_event=tail,
        head_event=head,
        waves_gmm1=len(plan.gmm1.waves),
        waves_gmm2=len(plan.gmm2.waves),
        paths={"front_reorder": front_path(ctx)[0], "combine": COMBINE_PATHS[combine_mode(ctx)]},
        dropped_semaphores=dropped,
    )


_MB_M0_M1 = attrgetter("mb", "m0", "m1")


def plan_and_contract(
    cfg: Config, rows: np.ndarray, tokens: int, rank: int, world: int, shared_experts: int, topk: int
) -> tuple[RankPlan, GroupedGemmContract]:
    """The rank's plan (:func:`~moeopt.megamoe.build.plan.plan_rank`) and its checked grouped-GEMM
    contract (:func:`checked_contract`): what :func:`compose` builds from."""
    plan = plan_rank(cfg, rows, tokens, rank, world, shared_experts, topk)
    return plan, checked_contract(cfg, plan)


def checked_contract(cfg: Config, plan: RankPlan) -> GroupedGemmContract:
    """The rank's grouped-GEMM tables (its local experts' rows, blocks of ``tile_m`` rows), after
    the contract's self-checks and the check that the plan's GMM tiles compute exactly the blocks
    the kernel addresses (:func:`~moeopt.megamoe.contract.check_rank`; a failure is a
    :class:`~moeopt.megamoe.contract.ContractError`). Experts with the same tile walks share one
    list of blocks."""
    local = [ex for ex in plan.experts if not ex.shared]
    contract = contract_from_sizes([ex.rows for ex in local], cfg.tile_m, cfg.tile_m)
    memo: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    blocks = []
    for ex in local:
        key = (id(ex.g1_tiles), id(ex.g2_tiles))
        got = memo.get(key)
        if got is None:
            # (mb, m0, m1) of every tile, read in C
            got = memo[key] = sorted(set(map(_MB_M0_M1, chain(ex.g1_tiles, ex.g2_tiles))))
        blocks.append(got)
    check_rank(contract, blocks)
    return contract


def algorithmic_bytes(ctx: BuildContext, plan: RankPlan) -> tuple[float, float, float]:
    """The bytes no implementation can avoid: (HBM: every active expert's weights once and its
    rows' activations once; rows in from other ranks; rows out to other ranks, bf16)."""
    cfg, rows = ctx.cfg, ctx.rows
    remote_in = sum(int(rows[s].sum()) for s in range(ctx.world) if s != ctx.rank) * ctx.row_bytes
    remote_out = (int(rows.sum()) - int(rows[ctx.rank].sum())) * cfg.h * 2
    active = [ex for ex in plan.experts if ex.rows > 0]
    weight_bytes = sum(
        cfg.h * cfg.hidden_dim * ctx.bpe + (cfg.hidden_dim // 2) * cfg.h * ctx.bpe for _ in active
    )
    act_bytes = sum(ex.rows * cfg.h * ctx.bpe for ex in active)
    return weight_bytes + act_bytes, remote_in, remote_out


def build_rank(
    cfg: Config, tokens: int, topk: int, world: int, counts: np.ndarray, rank: int, shared_experts: int = 0
) -> RankGraph:
    """The event graph of destination ``rank`` (the ``megamoe`` builder)."""
    n_local = counts.shape[1] // world
    rows = counts[:, rank * n_local : (rank + 1) * n_local]
    impl = implementation_for(cfg)
    own = counts[rank]
    if cfg.gmm2_join_check is None:
        return compose(impl, cfg, tokens, topk, world, rows, rank, shared_experts, own)
    # The V1 kernel decides at run time, at each GMM2 expert boundary from the check expert on,
    # whether GMM1 is done; the first expert where it is becomes the join expert for the rest
    # (gmm2.h@HEAD L147-231). The model reads that decision off the schedule of the graph
    # without the join: everything before the join expert is the same in both graphs.
    # both builds read one plan (a plan does not depend on the join: plan_rank does not take it)
    planned = plan_and_contract(cfg, rows, tokens, rank, world, shared_experts, topk)
    alone = compose(impl, cfg, tokens, topk, world, rows, rank, shared_experts, own, NO_JOIN, planned)
    join = join_expert(alone, cfg, cfg.gmm2_join_check, cfg.c("epoch_sync_us"))
    if join == NO_JOIN:
        # GMM1 outlasts every boundary: the graph with the join is this one (the same build)
        return alone
    return compose(impl, cfg, tokens, topk, world, rows, rank, shared_experts, own, join, planned)


NO_JOIN = 1 << 30
"""A join expert no rank has: GMM2 keeps its own group."""


def join_expert(rg: RankGraph, cfg: Config, check_from: int, epoch_us: float) -> int:
    """The first local expert ``e >= check_from`` at whose GMM2 boundary GMM1 is done, read off
    the greedy schedule of ``rg`` (built without the join): GMM1 is done when ``gmm1_done`` ends
    (plus one epoch to publish it), the boundary is the earliest start of the expert's GMM2
    tiles; :data:`NO_JOIN` when GMM1 outlasts every boundary."""
    # the same schedule as simulate makes of it (its restructuring rule too, and without the
    # normalisation simulate skips: it never changes a schedule), kept for simulate when the
    # graph with the join is this same graph (no join)
    hook = restructure_rule(cfg.restructure).hook(rg, cfg)
    s = greedy_schedule(rg.graph, policy=cfg.scheduling, normalize=False, restructure=hook)
    rg.keep_schedule((cfg.scheduling, cfg.restructure), s)
    cols = deferred_columns(s)
    if cols is not None and cols.cg is rg.graph.compiled():
        # (the schedule's own columns, read by position: its maps stay unmade for the array
        # check of kernel_time, which reads the same columns)
        done = float(cols.end[cols.cg.index["gmm1_done"]])
        return first_join(rg.graph.events, cols.start, done + epoch_us, check_from)
    return first_join(rg.graph.events, s.start_us, s.end_us["gmm1_done"] + epoch_us, check_from)


_labels_of = attrgetter("labels")
_get = MappingProxyType.get
_stage_of = itemgetter("stage")
_shared_of = itemgetter("shared")
_expert_of = itemgetter("expert")


def first_join(
    events: Mapping[str, Event], start_us: Mapping[str, float] | np.ndarray, g1_done: float, check_from: int
) -> int:
    """:func:`join_expert`'s reading of a schedule: the first expert ``e >= check_from`` whose
    boundary (the earliest start of its GMM2 tiles, the events labelled ``stage = "gmm2"`` and
    not ``shared``) is at or after ``g1_done``; :data:`NO_JOIN` when none is. ``start_us``: the
    starts by name, or an array of them by event position.

    The labels are read by C-level maps over every event (a Python statement per event over the
    tens of thousands of a large rank cost more than the rest of the function), the GMM2 tiles'
    experts and starts gathered into arrays, and each expert's earliest start taken on them (a
    minimum of floats: the same value in any order). ``tests/megamoe/test_join_one_plan.py``
    holds it equal to the event-by-event loop it replaced."""
    labs = list(map(_labels_of, events.values()))
    try:
        # every label read by subscript (each event's read-only map looked up in C), where the
        # builders label every event with its stage and every GMM tile with its expert and
        # whether it is shared: ``MappingProxyType.get`` looks its method up on the map per
        # call (callgrind, DeepSeek-V3-like rank 1 of 47k events: first_join 137.3M -> 109.5M
        # instructions with the starts picked by position, _tile_starts, and the experts
        # counted, smallints.unique); a label missing anywhere takes the ``get`` reading, which
        # gives None for it
        is_gmm2 = list(map(eq, map(_stage_of, labs), repeat("gmm2")))
        tiles = list(compress(labs, is_gmm2))
        own = list(map(not_, map(_shared_of, tiles)))
        expert_of: Callable[[Mapping[str, Any]], Any] = _expert_of
    except KeyError:
        is_gmm2 = list(map(eq, map(_get, labs, repeat("stage")), repeat("gmm2")))
        tiles = list(compress(labs, is_gmm2))
        own = list(map(not_, map(_get, tiles, repeat("shared"))))
        expert_of = _expert_get
    experts = np.fromiter(map(expert_of, compress(tiles, own)), np.int64)
    starts = _tile_starts(events, start_us, is_gmm2, own, len(experts))
    for e in smallints.unique(experts).tolist():
        if e >= check_from and g1_done <= float(starts[experts == e].min()):
            return int(e)
    return NO_JOIN


def _tile_starts(
    events: Mapping[str, Event],
    start_us: Mapping[str, float] | np.ndarray,
    is_gmm2: list[bool],
    own: list[bool],
    k: int,
) -> np.ndarray:
    """The starts of the ``k`` events that are GMM2 tiles (``is_gmm2``, per event) of an own
    expert (``own``, per such tile), in graph order. A schedule lists its events in graph order
    (the greedy scheduler's does): its starts are then taken as one array and the tiles' picked
    out of it by position, instead of looking each name up in the map (tens of thousands of
    scattered hash lookups); any other map is read name by name. ``start_us`` may also be the
    starts as an array by event position."""
    names = list(events)
    by_position: np.ndarray | None = None
    if isinstance(start_us, np.ndarray):
        by_position = start_us
    elif len(start_us) == len(names) and list(start_us) == names:
        by_position = np.fromiter(start_us.values(), float, len(names))
    if by_position is not None:
        try:  # (bytes of the flags: bool objects, or anything else that is an int in 0..255)
            tile_at = np.flatnonzero(np.frombuffer(bytes(is_gmm2), np.uint8))
        except (TypeError, ValueError):  # a stage label compared to "gmm2" as something else
            start_us = dict(zip(names, by_position.tolist()))
        else:
            picked: np.ndarray = by_position[tile_at[np.frombuffer(bytes(own), np.bool_)]]
            return picked
    return np.fromiter(map(start_us.__getitem__, compress(compress(names, is_gmm2), own)), float, k)


def _expert_get(labels: Mapping[str, Any]) -> Any:
    return labels.get("expert")
