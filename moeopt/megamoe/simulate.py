"""``simulate(scenario)``: routing -> one event graph per distinct rank -> greedy schedule -> analyses.

Guardrails live here so that no entry point bypasses them (every command and tool that shows a
greedy schedule of a scenario gets it from :func:`simulate` or :func:`schedule_rank`, or checks
it with :func:`guard_schedule`):

* every schedule is checked by the independent validator (:func:`moeopt.validate_schedule`);
* :class:`BoundViolation` when a rank's time is below its compute, bandwidth or dependency
  bound (``check_bounds=False`` only records it in ``r["bounds"]["violated"]``);
* :class:`WorkConservationViolation` when a late-bound pool shows avoidable idle, except for
  statically pinned pools, stages colocated with their producer tile, and policies declaring
  ``work_conserving = False``;
* route conservation (in :mod:`moeopt.megamoe.routing`), the not-modelled checks and the
  buffer budgets of :mod:`moeopt.megamoe.scenario` run before any graph is built (the budget
  that depends on the routing, the rows a rank receives, in :func:`build_graphs`);
* a runtime restructuring rule (``policy.restructure``, :mod:`moeopt.megamoe.stealing`) may
  re-pin tiles while the greedy runs; the validator accepts exactly the moves the schedule
  records, and the rank's ``graph`` in the result has the moved tiles where they ran;
* the grouped-GEMM contract (:mod:`moeopt.megamoe.contract`) is checked on every rank graph as
  it is built (:func:`~moeopt.megamoe.build.implementation.checked_contract`):
  :class:`~moeopt.megamoe.contract.ContractError` when the tables or the builder's M-blocks
  disagree with the kernel's addressing.

:func:`build_graphs` is the explicit opt-out: it returns the rank graphs without scheduling
them, and a schedule made of them with the generic ``moeopt.schedule`` carries no guardrail.
:func:`schedule_rank` schedules one of them with both guardrails.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Hashable, Mapping, Sequence
from itertools import compress, repeat
from operator import eq
from typing import cast

import numpy as np

from moeopt.core import fastloop
from moeopt.core.gcpause import gc_paused
from moeopt.core.policies import make_policy
from moeopt.core.restructure import repinned_graph
from moeopt.core.schedule import Schedule
from moeopt.core.scheduler import schedule
from moeopt.core.validate import validate_schedule
from moeopt.megamoe.analysis import (
    EventRows,
    Table,
    busy_times,
    critical_path,
    graph_floors,
    idle_decomposition,
    judge_bounds,
    judge_floors,
    physical_bounds,
)
from moeopt.megamoe.analysis.bounds import data_paths
from moeopt.megamoe.analysis.table import Columns, events_on
from moeopt.megamoe.build import RankGraph
from moeopt.megamoe.config.budgets import BUDGET_CONSTANTS, PROFILE_BUDGETS
from moeopt.megamoe.config.implementation import IMPL, implementation_constants_used
from moeopt.megamoe.config.profiles import IMPLEMENTATIONS
from moeopt.megamoe.config.provenance import Const, domain_check, record, recording
from moeopt.megamoe.errors import BoundViolation, WorkConservationViolation
from moeopt.megamoe.results import (
    Bounds,
    Calibration,
    CompilePoint,
    ConstantEntry,
    IdleDecomposition,
    Implementation,
    RankResult,
    SimulateResult,
)
from moeopt.megamoe.routing import counts_matrix, routing_signature
from moeopt.megamoe.scenario import Config, Scenario, Workload
from moeopt.megamoe.scenario.resolve import check_routing_budgets
from moeopt.megamoe.stealing import restructure_rule
from moeopt.registry import lookup

AVOIDABLE_TOL_CORE_US = 1e-3


class BuiltGraphs(dict[int, tuple[RankGraph, list[int]]]):
    """``{representative rank: (graph, ranks)}``, and the constants the build read."""

    constants_used: frozenset[str] = frozenset()


def rank_groups(scenario: Scenario) -> tuple[np.ndarray, list[list[int]]]:
    """The routing counts and the ranks grouped by routing signature (ranks with equal
    signatures build equal graphs), after the scenario's routing budgets are checked."""
    cfg = scenario.config
    w = scenario.workload
    e = w.local_experts
    memo = _LAST_GROUPS.get(w) if w.routing != "file" else None
    if memo is None:
        counts = counts_matrix(w)
        groups: dict[Hashable, list[int]] = {}
        for r in range(w.world):
            groups.setdefault(routing_signature(counts, r, w.local_experts), []).append(r)
        memo = (counts, list(groups.values()))
        if w.routing != "file":
            _LAST_GROUPS.clear()
            _LAST_GROUPS[w] = memo
    counts = memo[0].copy()  # (copies: a caller may change what it is given)
    check_routing_budgets(cfg, {r: int(counts[:, r * e : (r + 1) * e].sum()) for r in range(w.world)})
    return counts, [list(g) for g in memo[1]]


_LAST_GROUPS: dict[Workload, tuple[np.ndarray, list[list[int]]]] = {}
"""The last workload's counts and rank groups. One run asks for them up to three times (the
command's progress bar, simulate's step count, the build), and a sampled routing of the
DeepSeek-V3-like shape (32 ranks x 4096 tokens x 256 experts) takes a second to draw. Every
routing but ``file`` (which reads a file that may change between calls) is a function of the
workload's fields alone, so an equal workload has equal counts and groups; the routing budgets,
which depend on the rest of the scenario, are checked on every call."""


Progress = Callable[[int, int, str], None]
"""``progress(done, total, what)``: called after each step of a long run (a rank built,
scheduled, analysed), for a progress bar."""


def progress_total(ranks: str, distinct: int) -> int:
    """The steps :func:`simulate` reports for ``distinct`` distinct ranks: each built, scheduled
    and analysed (``ranks="all"``), or each timed and then the slowest analysed (``"slowest"``)."""
    return 3 * distinct if ranks == "all" else distinct + 1


class Steps:
    """Counts the steps of a run for a :data:`Progress` callback (none: nothing happens)."""

    def __init__(self, progress: Progress | None, total: int) -> None:
        self.progress, self.total, self.done = progress, total, 0

    def __call__(self, what: str) -> None:
        if self.progress is not None:
            self.done += 1
            self.progress(self.done, self.total, what)


def build_graphs(scenario: Scenario, *, progress: Steps | None = None) -> BuiltGraphs:
    """One built graph per distinct routing signature: ``{representative rank: (graph, ranks)}``.

    **No guardrail**: these are the graphs only. Scheduling ``rg.graph`` with the generic
    ``moeopt.schedule`` is the explicit opt-out of ``BoundViolation`` and
    ``WorkConservationViolation``; :func:`schedule_rank` (one graph) and :func:`simulate_built`
    (all of them, with the analyses) schedule them with both. ``progress``: a step per rank."""
    cfg = scenario.config
    w = scenario.workload
    counts, groups = rank_groups(scenario)
    builder = lookup("builder", cfg.builder)()
    out = BuiltGraphs()
    # (the collector paused as for every build of this many objects, see moeopt.core.gcpause:
    # a library call of this function alone paid about a fifth of a DeepSeek-V3-like rank's
    # build in collections, callgrind; simulate and the search already pause it around it)
    with gc_paused(), recording() as used:
        for ranks in groups:
            rep = ranks[0]
            out[rep] = (builder(cfg, w.tokens, w.topk, w.world, counts, rep, w.shared_expert_num), ranks)
            if progress is not None:
                progress(f"rank {rep} built")
    out.constants_used = frozenset(used)
    for name in used:  # into the run's own record, if one is being kept
        record(name)
    return out


RANK_DETAIL = ("all", "slowest")
"""What ``simulate(..., ranks=...)`` analyses: every distinct rank, or the slowest one."""


def simulate(
    scenario: Scenario,
    check_bounds: bool = True,
    check_work_conservation: bool = True,
    validate: bool = True,
    *,
    ranks: str = "all",
    progress: Progress | None = None,
) -> SimulateResult:
    """Simulate ``scenario``: a :class:`~moeopt.megamoe.results.SimulateResult` (plain dicts; see
    the module docstring for the guardrails).

    ``ranks="slowest"``: every distinct rank is timed, validated and judged by the guardrails as
    here, in worker processes when there are several large ones
    (:func:`moeopt.megamoe.kerneltime.kernel_time`), but only the slowest rank is analysed and
    kept: ``rank_results`` and ``simulated_ranks`` hold its routing signature alone, and
    ``rank_kernel_total_us`` every rank's time. Everything else is what ``ranks="all"`` gives,
    value for value. For skewed routings, where every rank is a graph of its own and the
    analyses and event tables of all of them cost more time and memory than the answer needs
    (schedules are always validated in this mode).

    ``ranks="all"`` builds, schedules and analyses the distinct ranks in forked worker
    processes (the largest first) when there are several large ones and this process runs one
    thread (:func:`moeopt.megamoe.kerneltime.parallel_rank_results`), in this process
    otherwise: the same result value for value, and the same error, either way.

    ``progress(done, total, what)`` is called after each rank is built, scheduled and analysed
    (``ranks="all"``: three steps per distinct rank, as each comes back from a worker;
    ``"slowest"``: one per distinct rank, and one for the slowest rank's analyses).
    """
    if ranks not in RANK_DETAIL:
        raise ValueError(f"ranks = {ranks!r}: not allowed; allowed: {', '.join(map(repr, RANK_DETAIL))}")
    if ranks == "slowest":
        from moeopt.megamoe.kerneltime import simulate_slowest  # it builds on this module

        return simulate_slowest(scenario, check_bounds, check_work_conservation, progress)
    with gc_paused():
        return _simulate(scenario, check_bounds, check_work_conservation, validate, None, progress)


def simulate_built(scenario: Scenario, graphs: BuiltGraphs, check_bounds: bool = True) -> SimulateResult:
    """:func:`simulate` on graphs already built by ``build_graphs(scenario)`` (the search driver
    builds them once for the lower bound and reuses them here)."""
    with gc_paused():
        return _simulate(scenario, check_bounds, True, True, graphs)


def _simulate(
    scenario: Scenario,
    check_bounds: bool,
    check_work_conservation: bool,
    validate: bool,
    graphs: dict[int, tuple[RankGraph, list[int]]] | None,
    progress: Progress | None = None,
) -> SimulateResult:
    """Schedule every distinct rank graph, analyse each schedule, apply the guardrails, and
    assemble the result from the slowest rank's parts."""
    cfg = scenario.config
    policy = make_policy(cfg.scheduling)
    # (only simulate reports progress, and it passes no graphs)
    steps = Steps(progress, progress_total("all", len(rank_groups(scenario)[1]))) if progress else None
    with recording() as used:
        per_rank = None
        if graphs is None:
            from moeopt.megamoe.kerneltime import parallel_rank_results  # it builds on this module

            # several large distinct ranks: each built, scheduled and analysed in a worker
            # process (None: they are not, and are here)
            per_rank = parallel_rank_results(scenario, validate, steps, used)
        if per_rank is None:
            # (with the compiled loop loaded, large graphs compiled to the arrays it, the
            # array check and the analyses' compiled walks read)
            with fastloop.arrays_first():
                built = build_graphs(scenario, progress=steps) if graphs is None else graphs
                per_rank = rank_results(built, cfg, validate, steps)
            if isinstance(built, BuiltGraphs):
                used |= built.constants_used
    total = max(r["kernel_total_us"] for r in per_rank.values())
    slowest = min(r for r in per_rank if per_rank[r]["kernel_total_us"] == total)
    if check_bounds:
        _check_bounds(per_rank)
    if check_work_conservation and policy.work_conserving:
        _check_work_conservation(per_rank, policy.name)
    dag_end = max(r["kernel_dag_end_us"] for r in per_rank.values())
    return assemble_result(scenario, per_rank, slowest, total, dag_end, used, policy.name)


def assemble_result(
    scenario: Scenario,
    per_rank: dict[int, RankResult],
    slowest: int,
    total: float,
    dag_end: float,
    used: set[str],
    policy: str,
) -> SimulateResult:
    """The result dict: the slowest rank's parts at the top, ``per_rank`` as ``rank_results``
    (``used``: the constants read, ``policy``: the policy's name)."""
    sl = per_rank[slowest]
    implementation, calibration = _implementation_and_domain(scenario)
    return {
        "kernel_total_us": total,
        "kernel_dag_end_us": dag_end,
        "slowest_rank": slowest,
        "rank_results": per_rank,
        "bounds": sl["bounds"],
        "floors": sl["floors"],
        "idle_decomposition": sl["idle_decomposition"],
        "critical_path": sl["critical_path"],
        "traffic_bytes": sl["traffic_bytes"],
        "stage_busy_us": sl["stage_busy_us"],
        "resource_busy_us": sl["resource_busy_us"],
        "resource_idle_us": sl["resource_idle_us"],
        "resource_utilization": sl["resource_utilization"],
        "role_utilization": sl["role_utilization"],
        "implementation": implementation,
        "policy": policy,
        "calibration": calibration,
        "out_of_domain": calibration["out_of_domain"],
        "provenance": _provenance(scenario, used),
        "simulated_ranks": sorted({v["ranks_sharing_signature"][0] for v in per_rank.values()}),
    }


def rank_results(
    built: dict[int, tuple[RankGraph, list[int]]], cfg: Config, validate: bool, progress: Steps | None = None
) -> dict[int, RankResult]:
    """Rank -> its result: each distinct graph scheduled (and validated) once, then analysed; the
    ranks sharing a routing signature share the dict (``progress``: a step per rank scheduled
    and per rank analysed)."""
    scheduled: list[tuple[RankGraph, Schedule, list[int], str]] = []
    for _rep, (rg, ranks) in sorted(built.items()):
        rg, s, last = scheduled_rank(rg, cfg, validate)
        scheduled.append((rg, s, ranks, last))
        if progress is not None:
            progress(f"rank {rg.rank} scheduled")
    total = max(s.end_us[last] for _rg, s, _ranks, last in scheduled)
    per_rank: dict[int, RankResult] = {}
    for rg, s, ranks, last in scheduled:
        res = rank_result(rg, s, cfg, last, ranks, 0.0)
        res["kernel_dag_end_us"] = dag_end_us(res, total, cfg)
        for r in ranks:
            per_rank[r] = res
        if progress is not None:
            progress(f"rank {rg.rank} analysed")
    return per_rank


def scheduled_rank(rg: RankGraph, cfg: Config, validate: bool) -> tuple[RankGraph, Schedule, str]:
    """One built rank graph scheduled (and validated): the graph the analyses read (with every
    tile a restructuring rule moved where it ran), its schedule and its last combine."""
    # the builder already left out every semaphore whose capacity covers its demand; the
    # scheduler's further normalisation (an ancestor / descendant walk per acquirer) finds
    # nothing more on MegaMoE graphs (their slot semaphores are released by a successor,
    # never by an ancestor of the next acquirer) and would cost more than the schedule
    s = rg.take_schedule((cfg.scheduling, cfg.restructure))  # made by the build, if any
    if s is None:
        hook = restructure_rule(cfg.restructure).hook(rg, cfg)
        s = schedule(rg.graph, policy=cfg.scheduling, normalize=False, restructure=hook)
    if validate:
        # (with the compiled loop loaded, the array check reads the edges and semaphore uses
        # by position from the compiled graph, and the schedule from its columns, as
        # kernel_time and simulate(ranks="slowest") check theirs: the same verdict, without
        # looking every predecessor up by name; the rules are still the validator's own)
        validate_schedule(rg.graph, s, by_position=fastloop.loaded())
    if s.repinned:
        # the analyses, the result and the exact layer read the graph with every moved tile
        # where it ran (the schedule is an ordinary valid schedule of that graph)
        rg = dataclasses.replace(rg, graph=repinned_graph(rg.graph, s.repinned))
    return rg, s, _last_combine(rg, s)


def dag_end_us(res: RankResult, total: float, cfg: Config) -> float:
    """The end of rank ``res`` after the cross-rank barrier and the tail, ``total``: the
    kernel's time (the unpermute waits for a cross-rank barrier: every rank's combines must be
    in)."""
    return max(res["tail_end_us"], total + cfg.c("cross_rank_flag_us") + res["tail_us"])


def _last_combine(rg: RankGraph, s: Schedule, end: Mapping[str, float] | None = None) -> str:
    """The event whose end is the rank's time: its last combine (the last event but the tail
    in a graph without combines), the greatest name on ties. ``end``: the ends to read (at
    least those events'), if not the schedule's ``end_us``."""
    comb = rg.combine_events or [n for n in rg.graph.events if n != rg.tail_event]
    return last_of(comb, s.end_us if end is None else end)


def last_of(names: Sequence[str], end: Mapping[str, float]) -> str:
    """The name with the latest ``end``, the greatest name on ties: ``max(names, key=lambda n:
    (end[n], n))``, without a key tuple per name (a rank has up to thousands of combines): the
    latest end first, then the greatest of the names ending then (``==`` is the tuples' tie
    test, so 0.0 and -0.0 tie as there). Empty ``names``: ValueError, as ``max``."""
    ends = list(map(end.__getitem__, names))
    top = max(ends)
    return max(compress(names, map(eq, ends, repeat(top))))


def rank_result(
    rg: RankGraph,
    s: Schedule,
    cfg: Config,
    last: str,
    ranks: list[int],
    dag_end: float,
    judged: tuple[Bounds, IdleDecomposition | None] | None = None,
) -> RankResult:
    """The analyses of one rank's schedule; ``last``: its last combine, ``ranks``: the ranks it
    stands for, ``dag_end``: its end after the cross-rank barrier and the tail (see
    :func:`dag_end_us`; it depends on every rank's time). ``judged``: the judged physical
    bounds and the idle decomposition (``None``: not made) that the caller already computed on
    this very graph, schedule and time (``kernel_time``'s guardrails), taken as they are
    instead of computed again (the idle ledger is the largest of the analyses: about 344M
    instructions on the largest DeepSeek-V3-like rank, callgrind)."""
    g = rg.graph
    t = Table.of(rg, s)
    cols = Columns(t)  # the table's columns as arrays, for three of the analyses
    on = events_on(t, cols)  # each resource's events, for the same three
    # each event's longest data path (the floors) and data-ready time (the idle ledger), in
    # one walk of the data predecessors
    tails, ready = data_paths(rg, t.end)
    total = s.end_us[last]
    bounds, idle = judged if judged is not None else (None, None)
    return {
        "rank": rg.rank,
        "kernel_total_us": total,
        "tail_end_us": s.end_us[rg.tail_event],
        "tail_us": g[rg.tail_event].duration_us,
        "head_us": g[rg.head_event].duration_us,
        "events": EventRows(t),
        "bounds": judge_bounds(physical_bounds(rg, cfg), total) if bounds is None else bounds,
        "floors": judge_floors(graph_floors(rg, tails), total),
        "idle_decomposition": (
            idle_decomposition(rg, s, total, table=t, on=on, cols=cols, ready=ready) if idle is None else idle
        ),
        "critical_path": critical_path(rg, s, last, table=t, on=on, cols=cols),
        "traffic_bytes": dict(rg.traffic_bytes),
        "contract": {
            "group_sizes": list(rg.contract.group_sizes),
            "group_offsets": list(rg.contract.group_offsets),
            "group_padded_offsets": list(rg.contract.group_padded_offsets),
            "m_blocks": rg.contract.m_blocks,
        },
        "waves": {"gmm1": rg.waves_gmm1, "gmm2": rg.waves_gmm2},
        "paths": {"front_reorder": rg.paths["front_reorder"], "combine": rg.paths["combine"]},
        "n_events": len(g),
        "schedule": s,
        "graph": g,
        **busy_times(rg, s, s.makespan_us, table=t, on=on, cols=cols),
        "ranks_sharing_signature": ranks,
        "kernel_dag_end_us": dag_end,
    }


def _check_bounds(per_rank: dict[int, RankResult]) -> None:
    """:class:`BoundViolation` for the lowest rank whose time is below a physical bound."""
    for r, res in sorted(per_rank.items()):
        _bound_guard(r, res["bounds"], res["kernel_total_us"])


def _bound_guard(rank: int, b: Bounds, total: float) -> None:
    if b["violated"]:
        raise BoundViolation(
            f"rank {rank}: simulated {total:.3f} µs is below the {b['binding']} bound "
            f"{b['lower_bound_us']:.3f} µs (compute {b['compute_us']:.3f}, bandwidth "
            f"{b['bandwidth_us']:.3f} [{b['bandwidth_channel']}], dependency {b['dependency_us']:.3f}): "
            "a cost is missing from the model; do not use this time for a decision "
            "(simulate(..., check_bounds=False) records it instead)",
            bounds=b,
        )


def _check_work_conservation(per_rank: dict[int, RankResult], policy: str) -> None:
    """:class:`WorkConservationViolation` for the first late-bound, checked pool (lowest rank,
    then pool order) that left avoidable idle beyond the tolerance."""
    for r, res in sorted(per_rank.items()):
        _conservation_guard(r, res["idle_decomposition"], policy)


def _conservation_guard(rank: int, idle: IdleDecomposition, policy: str) -> None:
    for st, d in idle["by_stage"].items():
        if (
            d["late_bound"]
            and d["work_conservation_exempt"] is None
            and d["avoidable_core_us"] > AVOIDABLE_TOL_CORE_US
        ):
            samples = [x for x in idle["samples"] if x["stage"] == st]
            unit = "core-µs"
            raise WorkConservationViolation(
                f"rank {rank}: late-bound pool of stage {st!r} left {d['avoidable_core_us']:.3f} "
                f"{unit} idle while work for it was ready (policy {policy!r} declares "
                f"itself work-conserving; first at {samples[0]['from_us']:.3f} µs)"
                if samples
                else f"rank {rank}: late-bound pool of stage {st!r} left "
                f"{d['avoidable_core_us']:.3f} {unit} idle while work for it was ready "
                f"(policy {policy!r} declares itself work-conserving)",
                samples=samples,
            )


def guard_schedule(
    rg: RankGraph,
    cfg: Config,
    s: Schedule,
    policy: str | None = None,
    *,
    check_bounds: bool = True,
    check_work_conservation: bool = True,
) -> None:
    """Apply both guardrails to a schedule ``s`` of ``rg`` made by the greedy ``policy``
    (default: the scenario's): :class:`BoundViolation` when its time (the end of its last
    combine) is below a physical bound, :class:`WorkConservationViolation` when a checked
    late-bound pool left avoidable idle and the policy declares itself work-conserving. For
    schedules made outside :func:`simulate` (other policies of the gap report, the report page)."""
    pol = make_policy(policy or cfg.scheduling)
    total = s.end_us[_last_combine(rg, s)]
    if check_bounds:
        _bound_guard(rg.rank, judge_bounds(physical_bounds(rg, cfg), total), total)
    if check_work_conservation and pol.work_conserving:
        _conservation_guard(rg.rank, idle_decomposition(rg, s, total), pol.name)


def schedule_rank(
    scenario: Scenario,
    rg: RankGraph,
    policy: str | None = None,
    *,
    check_bounds: bool = True,
    check_work_conservation: bool = True,
) -> Schedule:
    """The greedy schedule of one graph of ``build_graphs(scenario)`` with ``policy`` (default:
    the scenario's) and the scenario's restructuring rule, validated and checked by both
    guardrails (:func:`guard_schedule`): the guarded way to schedule a built graph yourself. A
    tile the rule moved runs where ``s.repinned`` says (``moeopt.repinned_graph(rg.graph,
    s.repinned)`` is the graph with it there)."""
    cfg = scenario.config
    with gc_paused():
        hook = restructure_rule(cfg.restructure).hook(rg, cfg)
        s = schedule(rg.graph, policy=policy or cfg.scheduling, normalize=False, restructure=hook)
        validate_schedule(rg.graph, s)
        if s.repinned:
            rg = dataclasses.replace(rg, graph=repinned_graph(rg.graph, s.repinned))
        guard_schedule(
            rg, cfg, s, policy, check_bounds=check_bounds, check_work_conservation=check_work_conservation
        )
    return s


def _provenance(scenario: Scenario, used: set[str]) -> dict[str, ConstantEntry]:
    """The constants this run used, by name: the model constants read while it ran (and
    ``l1_bytes``, read by the L1 rule every scenario passes), the implementation constants its
    configuration uses, and the buffer budgets its profile's kernel is checked against."""
    cfg = scenario.config
    w = scenario.workload
    consts: dict[str, Const] = {n: cfg.constants[n] for n in used | {"l1_bytes"} if n in cfg.constants}
    consts.update(implementation_constants_used(cfg, w.tokens * w.topk))
    rules = PROFILE_BUDGETS.get(cfg.profile, PROFILE_BUDGETS[None])
    for name in rules.constants(cfg.quant):
        consts[name] = BUDGET_CONSTANTS[name] if name in BUDGET_CONSTANTS else IMPL[name].const
    return {name: c.as_dict() for name, c in sorted(consts.items())}


def _implementation_and_domain(scenario: Scenario) -> tuple[Implementation, Calibration]:
    """What was simulated (implementation, compile point, topology) and whether it lies inside
    its profile's calibration domain."""
    cfg = scenario.config
    w = scenario.workload
    impl = IMPLEMENTATIONS.get(cfg.profile, IMPLEMENTATIONS[None])
    domain = impl["domain"]
    shape = {
        "tokens": w.tokens,
        "h": cfg.h,
        "hidden_dim": cfg.hidden_dim,
        "topk": w.topk,
        "local_experts": w.local_experts,
    }
    topo = {"world": w.world, "aic_num": cfg.aic_num}
    cal: Calibration
    if domain is not None:
        reasons = domain_check(domain, cfg.implementation, cfg.compile_point(), shape, topo)
        if w.routing not in ("uniform", "cyclic"):
            reasons.append(f"routing {w.routing!r}; calibrated with uniform round-robin routing")
        overridden = [n for n in scenario.calibration if cfg.profile is not None]
        cal = {
            "domain": domain.as_dict(),
            "out_of_domain": bool(reasons),
            "reasons": reasons,
            "overridden_constants": overridden,
        }
    else:
        cal = {
            "domain": None,
            "out_of_domain": True,
            "reasons": ["no profile: no calibration domain"],
            "overridden_constants": list(scenario.calibration),
        }
    # Config.compile_point() is a plain dict with the keys of CompilePoint
    point = cast(CompilePoint, cfg.compile_point())
    fingerprint = hashlib.sha256(json.dumps(point, sort_keys=True).encode()).hexdigest()[:12]
    implementation: Implementation = {
        "id": cfg.implementation,
        "profile": cfg.profile,
        "source_refs": list(cfg.source_refs),
        "compile_fingerprint": fingerprint,
        "compile_point": point,
        "topology": {"world": w.world, "aic_num": cfg.aic_num, "aiv_num": cfg.aic_num * cfg.aiv_per_core},
    }
    return implementation, cal
