"""``kernel_time(scenario)``: the kernel's time alone, every distinct rank in parallel processes.

:func:`moeopt.simulate` returns every analysis of every distinct rank: its event table, its
schedule and its graph. A tiling search reads one number of it, the kernel's time (the slowest
rank's last combine), and on a skewed routing every one of the world's ranks is a graph of its
own: a DeepSeek-V3-like shape (32 ranks, zipf routing) holds 32 graphs of up to ~60k events at
once, more than a gigabyte. :func:`kernel_time` gives the same time and the same guardrails
without the rest:

* each distinct rank is built, scheduled, validated and checked in a worker process (the
  likely slowest ranks first, see :func:`_slowest_first`), and only a few numbers per rank
  come back; a worker holds one rank's graph at a time, so the memory is that of the largest rank per worker;
* the guardrails are those of :func:`moeopt.simulate`, judged in the same order (the rank's
  physical bounds for every rank first, then the work conservation of its late-bound pools),
  and the same error is raised for the same scenario;
* a scenario with one distinct rank (uniform or cyclic routing), or small ranks, runs in this
  process: starting workers would cost more than they save.

The time is exactly ``simulate(scenario)["kernel_total_us"]`` (same graphs, same scheduler); the
tests compare the two on skewed and uniform scenarios.

Built on it: :func:`kernel_time_below` (a search's question, "can this point beat the best?":
it stops at the first rank whose time reaches the best) and :func:`simulate_slowest`
(``simulate(..., ranks="slowest")``: every rank timed here, the slowest one analysed where it
was timed). :func:`parallel_rank_results` is ``simulate(...)``'s full result with the same
workers: each rank built, scheduled and analysed in one, its result sent back packed
(:mod:`moeopt.megamoe.packed`) without its graph, which this process builds again only if it is
read (:func:`_graph_again`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import multiprocessing
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any, NamedTuple, TypedDict, TypeGuard, cast

import numpy as np

from moeopt.core import fastloop, forked
from moeopt.core.events import EventGraph
from moeopt.core.gcpause import gc_paused
from moeopt.core.policies import make_policy
from moeopt.core.restructure import repinned_graph
from moeopt.core.schedule import Schedule, deferred_columns
from moeopt.core.scheduler import schedule
from moeopt.core.validate import validate_schedule
from moeopt.megamoe.analysis import idle_decomposition, judge_bounds, physical_bounds
from moeopt.megamoe.build import RankGraph
from moeopt.megamoe.config.provenance import recording
from moeopt.megamoe.packed import Packed, pack, unpack
from moeopt.megamoe.results import Bounds, IdleDecomposition, RankResult, SimulateResult
from moeopt.megamoe.scenario import Config, Scenario
from moeopt.megamoe.simulate import (
    Progress,
    Steps,
    _bound_guard,
    _conservation_guard,
    _last_combine,
    assemble_result,
    dag_end_us,
    progress_total,
    rank_groups,
    rank_result,
    scheduled_rank,
)
from moeopt.megamoe.stealing import restructure_rule
from moeopt.registry import lookup

PARALLEL_MIN_ROWS = 20_000
"""assumed: below this many routed rows over the distinct ranks, the ranks are scheduled in this
process (a worker process costs tens of milliseconds to start and to hand its answer back; a
rank of a few thousand rows schedules in about that time)."""


class KernelTime(TypedDict):
    """What :func:`kernel_time` returns."""

    kernel_total_us: float
    """the slowest rank's end of its last combine (``simulate(...)["kernel_total_us"]``)"""
    kernel_dag_end_us: float
    """the latest rank end after the cross-rank barrier and the tail"""
    slowest_rank: int
    """the lowest rank whose time is ``kernel_total_us``"""
    rank_kernel_total_us: dict[int, float]
    """every rank's time (ranks sharing a routing signature share it)"""
    simulated_ranks: list[int]
    """the representative rank of each distinct graph"""
    workers: int
    """the processes the ranks were scheduled in (1: this process)"""


class _RankTime(NamedTuple):
    """One distinct rank, as a worker hands it back."""

    rep: int
    total_us: float
    tail_end_us: float
    tail_us: float
    n_events: int
    bounds: Bounds
    idle: IdleDecomposition | None
    """``None`` when no pool of the rank is late-bound (nothing for the guardrail to judge)"""
    constants: frozenset[str] = frozenset()
    """the model constants the rank's build and judgement read (its share of a result's
    provenance)"""
    analysed: Any = None
    """for ``simulate(..., ranks="slowest")``, when the rank may be the slowest one (see
    :class:`_Slowest`): its result (a ``RankResult``; packed while it crosses from a worker, see
    :mod:`moeopt.megamoe.packed`) or the error its analyses raised; otherwise ``None``"""
    analysed_constants: frozenset[str] = frozenset()
    """the model constants its analyses read"""


class _Slowest:
    """What ``simulate(..., ranks="slowest")`` asks of the ranks it times: the analyses of the
    slowest one. Which rank that is is known once every rank is timed, so each rank is analysed
    where it was scheduled when it may be the slowest: when no rank timed before it (in any
    worker) was slower. The slowest rank always is (no time exceeds its own); the others that
    are come first in the likely-slowest-first order (:func:`_slowest_first`), as the first
    rank of each worker. This replaces building and scheduling the slowest rank a second time
    to analyse it."""

    def __init__(self, ranks_of: dict[int, list[int]], shared: bool) -> None:
        self.ranks_of = ranks_of
        """representative rank -> the ranks sharing its routing signature"""
        # the greatest time so far, in memory the worker processes share (forked after this)
        self._shared = multiprocessing.get_context("fork").Value("d", -math.inf) if shared else None
        self._here = -math.inf

    def may_be(self, total_us: float) -> bool:
        """Whether a rank whose time is ``total_us`` may be the slowest; notes its time."""
        if self._shared is None:
            if total_us < self._here:
                return False
            self._here = total_us
            return True
        with self._shared.get_lock():
            if total_us < self._shared.value:
                return False
            self._shared.value = total_us
            return True


class _Job(NamedTuple):
    scenario: Scenario
    counts: np.ndarray
    conservation: bool
    slowest: _Slowest | None = None
    """set: analyse each rank that may be the slowest (``simulate(..., ranks="slowest")``)"""


_JOB: _Job | None = None
"""The job of this worker process (set by :func:`_init`)."""


def _init(job: _Job) -> None:
    """A worker's setup (its stop signals are its pool's: see :class:`moeopt.core.forked.ForkPool`)."""
    global _JOB
    _JOB = job


_Failed = tuple[str, BaseException]
_Carried = tuple[str, type[BaseException], tuple[Any, ...], dict[str, Any]]


def _rank_time_remote(rep: int) -> tuple[int, _RankTime | _Carried]:
    """:func:`_rank_time` in a worker, with the rank it is of (the ranks come back in the order
    they are done): an error crosses the process boundary as its class, arguments and
    attributes (an error whose constructor takes other arguments than its message would not
    survive pickling as it is)."""
    got = _rank_time(rep)
    if not isinstance(got, _RankTime):
        return rep, _carried(*got)
    if isinstance(got.analysed, BaseException):
        return rep, got._replace(analysed=_carried("analyse", got.analysed))
    if got.analysed is not None:
        with gc_paused():
            return rep, got._replace(analysed=pack(got.analysed))
    return rep, got


def _received(got: _RankTime | _Carried) -> _RankTime | _Failed:
    """What :func:`_rank_time_remote` sent, as :func:`_rank_time` returned it (a result that
    was analysed stays packed: only the slowest rank's is unpacked)."""
    if not isinstance(got, _RankTime):
        return (got[0], _rebuilt(*got[1:]))
    a = got.analysed
    if isinstance(a, tuple) and len(a) == 4 and isinstance(a[0], str) and isinstance(a[1], type):
        return got._replace(analysed=_rebuilt(*a[1:]))
    return got


def _carried(phase: str, exc: BaseException) -> _Carried:
    return (phase, type(exc), exc.args, dict(vars(exc)))


def _rebuilt(cls: type[BaseException], args: tuple[Any, ...], attrs: dict[str, Any]) -> BaseException:
    exc = cls.__new__(cls)
    exc.args = args
    vars(exc).update(attrs)
    return exc


def _rank_time(rep: int) -> _RankTime | _Failed:
    """Build, schedule, validate and judge one distinct rank; an error comes back as a value
    (``("build" | "schedule", exception)``) so that the caller can raise the one
    :func:`moeopt.simulate` would have raised first."""
    assert _JOB is not None
    scenario, counts, conservation, slowest = _JOB
    cfg = scenario.config
    w = scenario.workload
    with gc_paused(), recording() as used, fastloop.arrays_first():
        try:
            builder = lookup("builder", cfg.builder)()
            rg = builder(cfg, w.tokens, w.topk, w.world, counts, rep, w.shared_expert_num)
        except Exception as exc:  # handed back, raised by the caller
            return ("build", exc)
        got = _judged(rep, rg, cfg, conservation)
        if not isinstance(got, _Judged):
            return got
        t = got.time._replace(constants=frozenset(used))
        if slowest is not None and slowest.may_be(t.total_us):
            # analysed as simulate analyses it (rank_results), its own constants noted apart
            # (a rank analysed here may not be the slowest: its analyses' constants count only
            # if it is); the barrier-delayed end is the caller's to set
            with recording() as extra:
                try:
                    res = rank_result(
                        got.rg, got.s, cfg, got.last, slowest.ranks_of[rep], 0.0, (t.bounds, t.idle)
                    )
                except Exception as exc:  # handed back, raised by the caller if it is the slowest
                    return t._replace(analysed=exc, analysed_constants=frozenset(extra))
            t = t._replace(analysed=res, analysed_constants=frozenset(extra))
    return t


class _Judged(NamedTuple):
    time: _RankTime
    rg: RankGraph
    """the graph judged (with every moved tile where it ran)"""
    s: Schedule
    last: str
    """its last combine"""


def _judge(rep: int, rg: RankGraph, cfg: Config, conservation: bool) -> _RankTime | _Failed:
    """Schedule, validate and judge one built rank graph."""
    got = _judged(rep, rg, cfg, conservation)
    return got.time if isinstance(got, _Judged) else got


def _judged(rep: int, rg: RankGraph, cfg: Config, conservation: bool) -> _Judged | _Failed:
    """:func:`_judge`, and the graph and schedule it judged."""
    try:
        s = rg.take_schedule((cfg.scheduling, cfg.restructure))  # made by the build, if any
        if s is None:
            hook = restructure_rule(cfg.restructure).hook(rg, cfg)
            s = schedule(rg.graph, policy=cfg.scheduling, normalize=False, restructure=hook)
        # (the array check reads the compiled graph's edges and semaphore uses by position
        # instead of by name: the same verdict; callgrind of this whole function on the
        # DeepSeek-V3-like zipf rank 1, 4,007.7M -> 3,980.0M instructions)
        validate_schedule(rg.graph, s, by_position=True)
    except Exception as exc:  # handed back, raised by the caller
        return ("schedule", exc)
    end = _ends(rg, s)
    if s.repinned:
        # judged on the graph with every moved tile where it ran, as simulate does
        rg = dataclasses.replace(rg, graph=repinned_graph(rg.graph, s.repinned))
    # the rank's time: the end of its last combine (as simulate reads it)
    last = _last_combine(rg, s, end)
    total = end[last]
    idle = idle_decomposition(rg, s, total) if conservation and rg.late_stages else None
    time = _RankTime(
        rep,
        total,
        end[rg.tail_event],
        rg.graph[rg.tail_event].duration_us,
        len(rg.graph),
        judge_bounds(physical_bounds(rg, cfg), total),
        idle,
    )
    return _Judged(time, rg, s, last)


def _ends(rg: RankGraph, s: Schedule) -> Mapping[str, float]:
    """The ends of the schedule ``s`` of ``rg`` by name, for the few events a rank's time
    reads: read by position off the schedule's own columns while its maps are still unmade
    (``deferred_columns``: making the ends map of the DeepSeek-V3-like zipf rank 16, 58k
    events, cost ~3.5 ms of its ~380 ms), else its ``end_us``."""
    cols = deferred_columns(s)
    if cols is None or cols.cg is not rg.graph.compiled() or not rg.combine_events:
        return s.end_us
    index, column = cols.cg.index, cols.end
    return {name: float(column[index[name]]) for name in (*rg.combine_events, rg.tail_event)}


def _slowest_first(counts: np.ndarray, groups: list[list[int]], local_experts: int) -> list[int]:
    """The distinct ranks (indices into ``groups``) in the order their times are likely to
    rank, the slowest first: by the most rows routed to one of the rank's experts, then by its
    rows in all, then by rank.

    The order decides nothing but how soon :func:`kernel_time_below` may stop (and how many
    ranks ``simulate(..., ranks="slowest")`` analyses): every order gives the same result. The
    key is read off the routing counts, before anything is built; it is an observation, not a
    bound. Measured (zipf routing, every distinct rank timed): on the DeepSeek-V3-like shape
    (world 32, profile pto-a2a3-v1) at M 4096 and 1024 and at world 8 with 32 experts per rank,
    the heaviest expert puts the slowest rank first and the rows in all put it second (M 4096:
    rank 1, 3846 rows on one expert and 134k in all, 79.3 ms, against rank 16, 2996 and 168k,
    69.0 ms); on examples/scenario_basic.toml with zipf routing, whose four ranks are within 5%
    of each other, both put it last."""
    e = local_experts

    def key(k: int) -> tuple[int, int, int]:
        rows = counts[:, groups[k][0] * e : (groups[k][0] + 1) * e]
        return (-int(rows.sum(axis=0).max(initial=0)), -int(rows.sum()), groups[k][0])

    return sorted(range(len(groups)), key=key)


def _default_workers(rows: Sequence[int]) -> int:
    if len(rows) < 2 or sum(rows) < PARALLEL_MIN_ROWS:
        return 1
    return max(1, min(len(rows), os.cpu_count() or 1))


def _can_fork() -> bool:
    """Fork is the one start method whose workers see this process's registrations (a policy
    or builder registered at run time) and share its loaded modules. It is safe only while this
    process runs one thread: with others running (a search worker's heartbeat, a user's
    program), a forked child could inherit a lock one of them holds. A daemonic process (a
    worker of a user's ``multiprocessing.Pool``) may not start processes at all. Otherwise the
    ranks are scheduled here."""
    return (
        "fork" in multiprocessing.get_all_start_methods()
        and threading.active_count() == 1
        and not multiprocessing.current_process().daemon
    )


def _expected_events(cfg: Config, counts: np.ndarray, reps: Sequence[int], local_experts: int) -> int:
    """About how many events the ranks ``reps`` have: their GMM tiles on a rectangular grid
    (each expert's rows in blocks of ``tile_m``, its GMM1 and GMM2 columns in blocks of
    ``tile_n``), which are nearly all of a large rank's events (the DeepSeek-V3-like zipf rank
    16: 57,772 GMM tiles of 58,460 events). An estimate for deciding when to load the compiled
    loop (:func:`moeopt.core.fastloop.before_fork`), read off the routing counts before anything
    is built; other tile grids cut the outputs otherwise, and the other stages add a few
    events per expert."""
    e = local_experts
    per_row_block = -(-cfg.hidden_dim // cfg.tile_n) + -(-cfg.h // cfg.tile_n)
    total = 0
    for r in reps:
        rows = counts[:, r * e : (r + 1) * e].sum(axis=0)
        total += int((-(-rows // cfg.tile_m)).sum()) * per_row_block
    return total


@contextlib.contextmanager
def _pool(job: _Job | _FullJob, workers: int, expected: int = 0) -> Iterator[forked.ForkPool]:
    # a process that has scheduled enough (its workers' ranks counted), or whose workers are
    # about to schedule enough (``expected`` events, when the whole job is known), loads the
    # compiled loop once, here, so that every worker forked now and later shares it instead of
    # loading it again (moeopt.core.fastloop)
    # (the analyses' walks too when the workers analyse: simulate's, and the slowest rank's)
    analyses = not isinstance(job, _Job) or job.slowest is not None
    fastloop.before_fork(expected, workers, walks=analyses)
    # (workers with a pipe each, which can be stopped at any instant: see moeopt.core.forked)
    with forked.ForkPool(workers, _init if isinstance(job, _Job) else _init_full, (job,)) as pool:
        yield pool


# --------------------------------------------------------------------------- simulate(..., ranks="all")


class _FullJob(NamedTuple):
    scenario: Scenario
    counts: np.ndarray
    ranks_of: dict[int, list[int]]
    """representative rank -> the ranks sharing its routing signature"""
    validate: bool


_FULL: _FullJob | None = None
"""The job of this worker process of :func:`parallel_rank_results` (set by :func:`_init_full`)."""


def _init_full(job: _FullJob) -> None:
    global _FULL
    _FULL = job


class _Analysed(NamedTuple):
    """One distinct rank, as a worker of :func:`parallel_rank_results` hands it back."""

    rep: int
    result: Packed | None
    """its result, packed (``None`` when it failed)"""
    failed: _Carried | None
    """``("build" | "schedule" | "analyse", the error's class, arguments, attributes)``"""
    constants: frozenset[str]
    """the model constants its build, schedule and analyses read"""


def _rank_analysed(rep: int) -> _Analysed:
    """Build, schedule, validate and analyse one distinct rank in a worker, as
    :func:`moeopt.simulate` does in this process (:func:`~moeopt.megamoe.simulate.build_graphs`,
    then :func:`~moeopt.megamoe.simulate.rank_results`, whose parts these are). Its
    ``kernel_dag_end_us`` is left to the caller: it depends on every rank's time."""
    assert _FULL is not None
    scenario, counts, ranks_of, validate = _FULL
    cfg = scenario.config
    w = scenario.workload
    phase = "build"
    with gc_paused(), recording() as used, fastloop.arrays_first():
        try:
            builder = lookup("builder", cfg.builder)()
            rg = builder(cfg, w.tokens, w.topk, w.world, counts, rep, w.shared_expert_num)
            phase = "schedule"
            rg, s, last = scheduled_rank(rg, cfg, validate)
            phase = "analyse"
            # without its graph: the caller makes it again if it is ever read (_graph_again)
            packed = pack(rank_result(rg, s, cfg, last, ranks_of[rep], 0.0), graph=False)
        except Exception as exc:  # handed back, raised by the caller
            return _Analysed(rep, None, _carried(phase, exc), frozenset(used))
    return _Analysed(rep, packed, None, frozenset(used))


def _graph_again(
    builder: Callable[[], Any], scenario: Scenario, counts: np.ndarray, rep: int, s: Schedule
) -> EventGraph:
    """The graph of distinct rank ``rep`` that a worker of :func:`parallel_rank_results`
    analysed, made again in this process when its result's graph is first read (the worker
    sends the result without it): built as the worker built it (the builder and the routing
    counts are the ones the workers had; a build is a function of them and the scenario), with
    every tile the restructuring rule moved where ``s`` (the rank's schedule) says it ran, as
    :func:`~moeopt.megamoe.simulate.scheduled_rank` gives it to the analyses.

    Why not send it: packing and pickling the graph cost about a tenth of a DeepSeek-V3-like
    rank's worker time, and this process kept every rank's pickled graph until the end, while
    most callers of ``simulate`` read no rank's graph; a caller that does pays a build per rank
    it reads (about five times the unpickling it replaces)."""
    cfg = scenario.config
    w = scenario.workload
    with gc_paused(), recording():  # (its constants were noted when the worker built it)
        g = builder()(cfg, w.tokens, w.topk, w.world, counts, rep, w.shared_expert_num).graph
    # a graph of those events without the caches the build filled (its compiled form), as the
    # graph that crossed before was and as repinned_graph makes one when a tile moved
    return repinned_graph(g, s.repinned) if s.repinned else g.copy_with()


def parallel_rank_results(
    scenario: Scenario, validate: bool, steps: Steps | None, used: set[str]
) -> dict[int, RankResult] | None:
    """``rank_results(build_graphs(scenario), ...)`` (what :func:`moeopt.simulate` computes for
    ``ranks="all"``) with every distinct rank built, scheduled, validated and analysed in a
    worker process, the largest first; the constants the workers read are added to ``used``.
    ``None``, and nothing done, when the ranks are scheduled in this process: a scenario with
    one distinct rank or small ranks (:data:`PARALLEL_MIN_ROWS`), or a process that may not
    fork (:func:`_can_fork`).

    The same result, value for value: a worker sends its rank's result packed
    (:mod:`moeopt.megamoe.packed`), rebuilt here (its schedule unpickled and its graph built
    again when first read, :func:`_graph_again`); the barrier-delayed ends, which depend on
    every rank's time, are set here as :func:`~moeopt.megamoe.simulate.rank_results` sets them.
    The same error, too: the first build error in rank order, else the first scheduling or
    validation error, else the first analysis error (simulate builds every rank before it
    schedules one, and schedules every rank before it analyses one). ``steps``: each rank's
    three steps (built, scheduled, analysed) as its result comes in."""
    cfg = scenario.config
    w = scenario.workload
    counts, groups = rank_groups(scenario)
    e = w.local_experts
    rows = [int(counts[:, g[0] * e : (g[0] + 1) * e].sum()) for g in groups]
    n = _default_workers(rows)
    if n <= 1 or not _can_fork():
        return None
    # the largest ranks first: the last one to finish is then a small one
    reps = [groups[k][0] for k in sorted(range(len(groups)), key=lambda k: -rows[k])]
    job = _FullJob(scenario, counts, {g[0]: g for g in groups}, validate)
    builder = lookup("builder", cfg.builder)  # (the one the workers build with, kept)
    got: dict[int, RankResult] = {}
    failed: dict[int, _Failed] = {}
    with _pool(job, n, _expected_events(cfg, counts, reps, e)) as pool:  # (leaving it stops the workers)
        for one in pool.imap_unordered(_rank_analysed, reps):
            used |= one.constants
            if one.failed is not None:
                phase, cls, args, attrs = one.failed
                failed[one.rep] = (phase, _rebuilt(cls, args, attrs))
                continue
            assert one.result is not None
            # (while the workers go on) its graph was sent without: made here when first read
            got[one.rep] = unpack(one.result, partial(_graph_again, builder, scenario, counts, one.rep))
            fastloop.scheduled_elsewhere(got[one.rep]["n_events"])
            if steps is not None:
                for what in ("built", "scheduled", "analysed"):
                    steps(f"rank {one.rep} {what}")
    for phase in ("build", "schedule", "analyse"):
        for rep in sorted(failed):
            if failed[rep][0] == phase:
                raise failed[rep][1]
    total = max(res["kernel_total_us"] for res in got.values())
    per_rank: dict[int, RankResult] = {}
    for rep in sorted(got):  # (the order rank_results fills it in)
        res = got[rep]
        res["kernel_dag_end_us"] = dag_end_us(res, total, cfg)
        for r in job.ranks_of[rep]:
            per_rank[r] = res
    return per_rank


def kernel_time(
    scenario: Scenario,
    *,
    workers: int | None = None,
    check_bounds: bool = True,
    check_work_conservation: bool = True,
) -> KernelTime:
    """The kernel's time of ``scenario`` with the guardrails of :func:`moeopt.simulate`, without
    its analyses (see the module docstring).

    Args:
        workers: processes to schedule the distinct ranks in; ``None``: as many as there are
            cores when the scenario has several large distinct ranks, else this process alone.
            Workers are forked, and only while this process runs a single thread: otherwise
            the ranks are scheduled in this process (``r["workers"]`` says which).
        check_bounds, check_work_conservation: as for :func:`moeopt.simulate`.
    """
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ValueError(f"workers = {workers!r}: not allowed; allowed: an integer >= 1, or None")
    got = _timed(scenario, workers, check_bounds, check_work_conservation)
    assert not isinstance(got, Reached)
    return got[0]


class Reached(NamedTuple):
    """A rank whose time reached the threshold of :func:`kernel_time_below`."""

    rank: int
    total_us: float


def kernel_time_below(
    scenario: Scenario, threshold_us: float, *, workers: int | None = None
) -> KernelTime | Reached:
    """:func:`kernel_time`, unless some rank's time reaches ``threshold_us`` while ranks are
    left to schedule: then the first such rank found and its time, without scheduling the ranks
    left (the kernel's time, the slowest rank's, is at least that much). When the rank that
    reaches it is the last one (a uniform routing's only one), nothing is left to save: the
    whole answer is returned.

    For a search that only needs to know whether a point can beat the best time found so far:
    the likely slowest ranks are scheduled first (:func:`_slowest_first`), each one's time
    read as soon as it is done, so on a skewed routing a point that cannot win usually stops
    after its first rank. A rank's build or guardrail error is raised as by
    :func:`kernel_time` only when no rank reaches the threshold."""
    got = _timed(scenario, workers, True, True, threshold_us)
    return got if isinstance(got, Reached) else got[0]


def _timed(
    scenario: Scenario,
    workers: int | None,
    check_bounds: bool,
    check_work_conservation: bool,
    stop_at: float | None = None,
    steps: Steps | None = None,
    analyse_slowest: bool = False,
) -> tuple[KernelTime, dict[int, _RankTime], np.ndarray, list[list[int]]] | Reached:
    """:func:`kernel_time`, and what it found per distinct rank (by representative), the
    routing counts and the ranks grouped by routing signature; or the first rank found whose
    time is at least ``stop_at``. ``steps``: a step per rank timed. ``analyse_slowest``: the
    slowest rank's found has its ``analysed`` result (see :class:`_Slowest`)."""
    cfg = scenario.config
    w = scenario.workload
    policy = make_policy(cfg.scheduling)
    conservation = check_work_conservation and policy.work_conserving
    counts, groups = rank_groups(scenario)
    e = w.local_experts
    rows = [int(counts[:, g[0] * e : (g[0] + 1) * e].sum()) for g in groups]
    n = _default_workers(rows) if workers is None else min(workers, len(groups))
    if n > 1 and not _can_fork():
        n = 1
    # the likely slowest ranks first, so that a rank reaching stop_at comes early (they are
    # also among the largest: the last one to finish is then a small one)
    reps = [groups[k][0] for k in _slowest_first(counts, groups, e)]
    slowest = _Slowest({g[0]: g for g in groups}, shared=n > 1) if analyse_slowest else None
    job = _Job(scenario, counts, conservation, slowest)
    got: list[_RankTime | _Failed] = []
    done: list[int] = []  # the representative of each of got, in the order they came

    def took(rep: int, one: _RankTime | _Failed) -> Reached | None:
        """Record one rank's time; the stop when it reaches ``stop_at`` before the last rank."""
        got.append(one)
        done.append(rep)
        _drop_slower(got)
        if steps is not None:
            steps(f"rank {rep} timed")
        if _reached(one, stop_at) and len(got) < len(reps):
            return Reached(rep, one.total_us)
        return None

    if n <= 1:
        global _JOB
        saved, _JOB = _JOB, job
        try:
            for rep in reps:
                stop = took(rep, _rank_time(rep))
                if stop is not None:
                    return stop
        finally:
            _JOB = saved
    else:
        # (with stop_at, how many ranks are scheduled is not known beforehand: the workers'
        # own counts decide)
        expected = _expected_events(cfg, counts, reps, e) if stop_at is None else 0
        with _pool(job, n, expected) as pool:  # (leaving it stops the workers)
            # each rank as soon as it is done, the likely slowest handed out first: with
            # stop_at, a rank that reaches it stops the run even while ranks handed out before
            # it are still being scheduled (their workers are stopped)
            for rep, res in pool.imap_unordered(_rank_time_remote, reps):
                if isinstance(res, _RankTime):
                    fastloop.scheduled_elsewhere(res.n_events)
                stop = took(rep, _received(res))
                if stop is not None:
                    return stop
    by_rep = dict(zip(done, got, strict=True))
    firsts = [g[0] for g in groups]
    kt = _combine(scenario, firsts, groups, by_rep, n, check_bounds, conservation, policy.name)
    # (_combine raised if any rank failed)
    return kt, {rep: res for rep, res in by_rep.items() if isinstance(res, _RankTime)}, counts, groups


def _drop_slower(got: list[_RankTime | _Failed]) -> None:
    """Drop the analyses of ranks now known not to be the slowest (a faster rank's result is
    never read: only the slowest rank's is kept), so that at most the ranks tied for the
    greatest time so far hold one."""
    held = [k for k, t in enumerate(got) if isinstance(t, _RankTime) and t.analysed is not None]
    if len(held) > 1:
        top = max(cast(_RankTime, got[k]).total_us for k in held)
        for k in held:
            t = cast(_RankTime, got[k])
            if t.total_us < top:
                got[k] = t._replace(analysed=None, analysed_constants=frozenset())


def _reached(res: _RankTime | _Failed, stop_at: float | None) -> TypeGuard[_RankTime]:
    return stop_at is not None and isinstance(res, _RankTime) and res.total_us >= stop_at


def simulate_slowest(
    scenario: Scenario, check_bounds: bool, check_work_conservation: bool, progress: Progress | None = None
) -> SimulateResult:
    """``simulate(scenario, ranks="slowest")`` (see :func:`moeopt.simulate`): every distinct rank
    timed and judged by :func:`kernel_time`, and the slowest one analysed as
    :func:`moeopt.simulate` analyses it, where it was scheduled (see :class:`_Slowest`)."""
    cfg = scenario.config
    policy = make_policy(cfg.scheduling)
    steps = Steps(progress, progress_total("slowest", len(rank_groups(scenario)[1]))) if progress else None
    got = _timed(scenario, None, check_bounds, check_work_conservation, steps=steps, analyse_slowest=True)
    assert not isinstance(got, Reached)
    kt, times, _counts, groups = got
    group = next(g for g in groups if kt["slowest_rank"] in g)
    slow = times[group[0]]
    used: set[str] = set(slow.analysed_constants)
    for t in times.values():
        used |= t.constants
    if isinstance(slow.analysed, BaseException):
        raise slow.analysed
    if slow.analysed is None:  # no time exceeds the slowest rank's: it was analysed
        raise AssertionError(f"the slowest rank {group[0]} was not analysed")
    with gc_paused(), recording() as here:
        a = slow.analysed
        res = cast(RankResult, a) if isinstance(a, dict) else unpack(a)
        # (rank_results of this rank alone: the kernel's time is its own)
        res["kernel_dag_end_us"] = dag_end_us(res, res["kernel_total_us"], cfg)
    used |= here
    per_rank = dict.fromkeys(group, res)
    if steps is not None:
        steps(f"rank {group[0]} analysed")
    if res["kernel_total_us"] != kt["kernel_total_us"]:  # one graph, one schedule
        raise AssertionError("the slowest rank's time differs from its analysed one")
    total, dag_end = kt["kernel_total_us"], kt["kernel_dag_end_us"]
    out = assemble_result(scenario, per_rank, kt["slowest_rank"], total, dag_end, used, policy.name)
    out["rank_kernel_total_us"] = kt["rank_kernel_total_us"]
    return out


def kernel_time_built(
    scenario: Scenario,
    graphs: Mapping[int, tuple[RankGraph, list[int]]],
    *,
    check_bounds: bool = True,
    check_work_conservation: bool = True,
) -> KernelTime:
    """:func:`kernel_time` on graphs already built by ``build_graphs(scenario)`` (the search
    builds them for the lower bound and reuses them here), in this process."""
    got = _built_times(scenario, graphs, check_bounds, check_work_conservation, None)
    assert not isinstance(got, Reached)
    return got


def kernel_time_built_below(
    scenario: Scenario, graphs: Mapping[int, tuple[RankGraph, list[int]]], threshold_us: float
) -> KernelTime | Reached:
    """:func:`kernel_time_below` on graphs already built by ``build_graphs(scenario)``: the
    likely slowest ranks are scheduled first, and the first rank whose time reaches ``threshold_us``
    while ranks are left to schedule is returned instead of the kernel's time."""
    return _built_times(scenario, graphs, True, True, threshold_us)


def _built_times(
    scenario: Scenario,
    graphs: Mapping[int, tuple[RankGraph, list[int]]],
    check_bounds: bool,
    check_work_conservation: bool,
    stop_at: float | None,
) -> KernelTime | Reached:
    cfg = scenario.config
    policy = make_policy(cfg.scheduling)
    conservation = check_work_conservation and policy.work_conserving
    # the likely slowest first, by _timed's key (read off the plan's experts here), then the
    # largest graph
    order = list(graphs)
    if stop_at is not None:
        order.sort(key=lambda rep: _built_key(graphs[rep][0]))
    got: dict[int, _RankTime | _Failed] = {}
    with gc_paused():
        for rep in order:
            one = got[rep] = _judge(rep, graphs[rep][0], cfg, conservation)
            if _reached(one, stop_at) and len(got) < len(order):
                return Reached(rep, one.total_us)
    groups = [ranks for _rep, (_rg, ranks) in graphs.items()]
    return _combine(scenario, list(graphs), groups, got, 1, check_bounds, conservation, policy.name)


def _built_key(rg: RankGraph) -> tuple[int, int, int]:
    """:func:`_slowest_first`'s key of a built rank (its routed experts' rows, as planned), the
    larger graph first between equal ones."""
    rows = [ex.rows for ex in rg.experts if not ex.shared]
    return (-max(rows, default=0), -sum(rows), -len(rg.graph))


def _combine(
    scenario: Scenario,
    built_order: list[int],
    groups: list[list[int]],
    by_rep: dict[int, _RankTime | _Failed],
    workers: int,
    check_bounds: bool,
    conservation: bool,
    policy: str,
) -> KernelTime:
    """The kernel's time from every distinct rank's, with the guardrails in simulate's order."""
    # the error simulate raises first: building comes before scheduling, each in rank order
    for phase, reps_in_order in (("build", built_order), ("schedule", sorted(by_rep))):
        for rep in reps_in_order:
            res = by_rep[rep]
            if not isinstance(res, _RankTime) and res[0] == phase:
                raise res[1]
    times: dict[int, _RankTime] = {}
    for rep, res in by_rep.items():
        assert isinstance(res, _RankTime)
        times[rep] = res
    total = max(t.total_us for t in times.values())
    flag = scenario.config.c("cross_rank_flag_us")
    per_rank: dict[int, _RankTime] = {r: times[g[0]] for g in groups for r in g}
    if check_bounds:
        for r, t in sorted(per_rank.items()):
            _bound_guard(r, t.bounds, t.total_us)
    if conservation:
        for r, t in sorted(per_rank.items()):
            if t.idle is not None:
                _conservation_guard(r, t.idle, policy)
    return {
        "kernel_total_us": total,
        "kernel_dag_end_us": max(max(t.tail_end_us, total + flag + t.tail_us) for t in times.values()),
        "slowest_rank": min(r for r, t in per_rank.items() if t.total_us == total),
        "rank_kernel_total_us": {r: t.total_us for r, t in sorted(per_rank.items())},
        "simulated_ranks": sorted(times),
        "workers": workers,
    }
