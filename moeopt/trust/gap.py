"""Optimality-gap reports per MegaMoE scenario (SPEC §5, §7, §10): greedy against CP-SAT, per rank.

The question a kernel developer asks: *on this tiling, how much could any dispatch order still
gain, and which ordering decisions does the optimum make differently?* :func:`optimality_gap`
answers it for every distinct rank of a scenario (ranks with the same routing signature share
one graph, as in :func:`moeopt.simulate`):

* the greedy makespan of every scheduling policy, the scenario's own policy marked;
* CP-SAT (:func:`moeopt.solve_exact`) hinted with the best greedy schedule: its best valid
  schedule and a proven lower bound, which bound won (``cpsat``, an energy bound of a
  resource / pool / semaphore, the longest path, or a physical bound) and in which mode;
* the three physical bounds of the kernel (compute, bandwidth, dependency chain,
  :func:`moeopt.megamoe.analysis.physical_bounds`), passed to the exact layer as makespan lower limits;
* the gaps: ``greedy / bound − 1`` (certified: no orchestration of this graph can gain more)
  and ``greedy / best − 1`` (reachable: CP-SAT's schedule achieves it), with the time limit used;
* the first places where the optimum's schedule departs from the greedy's
  (:func:`first_divergences`): per resource the first event run in a different order, and
  the events bound to a different core, with their stage.

**Times are makespans of the rank graph**: to the end of the unpermute tail, the quantity CP-SAT
minimises. ``simulate``'s ``kernel_total_us`` stops at the last combine; the physical bounds
are bounds on that time, so they become makespan limits by adding ``tail_offset_us``, the
shortest longest-path distance from the end of any combine event to the end of the graph
(every schedule ends at least that long after its last combine ends).

**Soundness of the physical limits.** The dependency bound is a longest path over a subset of
the graph's edges (program-order chains left out), so every schedule of the graph meets it. The
compute and bandwidth bounds hold for every schedule of a graph that carries all the work and
bytes of the kernel; that is what :func:`moeopt.simulate`'s :class:`BoundViolation` guardrail
asserts of the model ("a time below it means a missed cost"). Here the same guardrail applies to
every greedy schedule before the solve (a limit above a valid schedule is refused by the exact
layer too), so a limit is only used when no known schedule contradicts it.

**Modes.** ``"exact"``: pool members as optional intervals with one choice, colocation exact.
``"relaxed"``: one cumulative per pool, colocation dropped (a relaxation: its bound is sound, its
schedule comes from the replay, which binds members itself). ``"auto"`` (default): exact for
graphs without pools or with at most :data:`AUTO_EXACT_MAX_EVENTS` events, relaxed above (exact
mode creates an optional interval per event and pool member: 24-48 per event on MegaMoE).
When a static bound already reaches the best greedy makespan, the greedy is proven optimal and
CP-SAT is not run.

**What makes the bound useful at kernel scale** (thousands to tens of thousands of events; CP-SAT
alone rarely moves its bound there within a minute, so the certificate comes from the bounds it
is given):

* decomposition by capacity: every exclusive resource, every pool, every *group of pools sharing
  cores* (the GMM1 and GMM2 loads of late-bound tiles use the same load pipes through two pools:
  apart, each left a 29% gap on the late-bound scenario_basic variant; together 1.8%) and every
  paired semaphore (the shared HBM) is a one-resource relaxation of the whole graph, bounded by
  its energy with the best (earliest start, latest tail) thresholds
  (:mod:`moeopt.exact.bounds`); the same sets are redundant cumulatives in the model;
* the physical bounds as makespan lower limits (above);
* symmetry breaking between interchangeable cores in exact mode (:mod:`moeopt.exact.symmetry`,
  with its proof), and the hint relabelled to match;
* CP-SAT on the whole rank graph for the rest, hinted with the best greedy schedule. No
  time-window decomposition is made: on the seed-002 sweep the energy bounds already come within
  1-5% of the best schedule, and a window split would need its own proof for the semaphores
  held across windows.
"""

from __future__ import annotations

import html
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from moeopt.core.compiled import longest_paths
from moeopt.core.events import EventGraph
from moeopt.core.policies import BUILTIN_POLICIES, make_policy
from moeopt.core.schedule import Schedule
from moeopt.errors import InputError
from moeopt.megamoe.analysis import physical_bounds
from moeopt.megamoe.build import RankGraph
from moeopt.megamoe.errors import BoundViolation
from moeopt.megamoe.results import PhysicalBounds
from moeopt.megamoe.scenario import Scenario
from moeopt.megamoe.simulate import build_graphs, guard_schedule

if TYPE_CHECKING:
    from moeopt.exact.usage import CapacityUse

MODES = ("auto", "exact", "relaxed")
AUTO_EXACT_MAX_EVENTS = 3000
DEFAULT_TIME_LIMIT_S = 30.0
DEFAULT_DIVERGENCES = 10


# ---------------------------------------------------------------------- results
@dataclass(frozen=True, slots=True)
class Divergence:
    """One place where the optimum's schedule departs from the greedy's.

    ``kind`` is ``"order"`` (on ``resource`` the greedy ran ``greedy_event`` at position
    ``position`` where the optimum runs ``optimal_event``) or ``"core"`` (``greedy_event`` runs
    on ``greedy_resources`` in the greedy and on ``optimal_resources`` in the optimum; then
    ``optimal_event`` is the same event). ``time_us`` is the greedy start of ``greedy_event``
    (the list is sorted by it: the first divergences come first).
    """

    kind: str
    resource: str
    position: int
    time_us: float
    greedy_event: str | None
    greedy_stage: str
    greedy_start_us: float | None
    optimal_event: str | None
    optimal_stage: str
    optimal_start_us: float | None
    greedy_resources: tuple[str, ...] = ()
    optimal_resources: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "resource": self.resource,
            "position": self.position,
            "time_us": self.time_us,
            "greedy_event": self.greedy_event,
            "greedy_stage": self.greedy_stage,
            "greedy_start_us": self.greedy_start_us,
            "optimal_event": self.optimal_event,
            "optimal_stage": self.optimal_stage,
            "optimal_start_us": self.optimal_start_us,
            "greedy_resources": list(self.greedy_resources),
            "optimal_resources": list(self.optimal_resources),
        }


@dataclass(frozen=True, slots=True)
class DivergenceSummary:
    """How the optimum's schedule differs from the greedy's, in counts and first places.

    ``resources_reordered``: resources whose event sequence differs; ``events_moved_by_stage``:
    per stage, the events whose position on their resource or whose core differs; ``first``:
    the earliest divergences (see :class:`Divergence`).
    """

    compared_with: str
    resources_reordered: int
    events_rebound: int
    events_moved_by_stage: Mapping[str, int]
    first: tuple[Divergence, ...]

    @property
    def identical(self) -> bool:
        return not self.resources_reordered and not self.events_rebound

    def to_dict(self) -> dict[str, Any]:
        return {
            "compared_with": self.compared_with,
            "identical": self.identical,
            "resources_reordered": self.resources_reordered,
            "events_rebound": self.events_rebound,
            "events_moved_by_stage": dict(self.events_moved_by_stage),
            "first": [d.to_dict() for d in self.first],
        }


@dataclass(frozen=True)
class RankGap:
    """The gap report of one distinct rank (``ranks`` share its graph)."""

    rank: int
    ranks: tuple[int, ...]
    num_events: int
    policy: str
    report: Any  # moeopt.exact.GapReport (OR-Tools is imported on first use)
    physical: PhysicalBounds
    tail_offset_us: float
    divergences: DivergenceSummary
    graph: EventGraph = field(repr=False, compare=False)

    @property
    def exact(self) -> Any:
        return self.report.exact

    @property
    def greedy_us(self) -> float:
        """The makespan with the scenario's own policy (what ``simulate`` schedules)."""
        us = self.report.policy(self.policy).makespan_us
        assert us is not None  # the scenario's policy is checked to schedule the graph
        return float(us)

    @property
    def greedy_schedule(self) -> Schedule:
        return self.report.schedules[self.policy]

    @property
    def best_schedule(self) -> Schedule:
        s = self.exact.schedule
        return self.greedy_schedule if s is None else s

    @property
    def lower_bound_us(self) -> float:
        return float(self.exact.lower_bound_us)

    @property
    def best_us(self) -> float:
        return float(self.best_schedule.makespan_us)

    @property
    def certified_gap(self) -> float:
        """``greedy / lower bound − 1``: no schedule of this graph gains more than this."""
        return _ratio(self.greedy_us, self.lower_bound_us)

    @property
    def reachable_gap(self) -> float:
        """``greedy / best − 1``: CP-SAT's best schedule gains this much (proven reachable)."""
        return _ratio(self.greedy_us, self.best_us)

    @property
    def bound_gap(self) -> float:
        """``best / lower bound − 1``: how far the certificate is from the best schedule."""
        return _ratio(self.best_us, self.lower_bound_us)

    @property
    def proven_optimal(self) -> bool:
        return bool(self.exact.proven_optimal)

    def physical_limits(self) -> dict[str, float]:
        return _physical_limits(self.physical, self.tail_offset_us)

    @cached_property
    def binding_use(self) -> CapacityUse | None:
        """Where the best schedule leaves the winning bound's capacity unused, or the strongest
        capacity's when CP-SAT's own bound wins (:func:`moeopt.exact.usage.certificate_use`);
        ``None`` when proven optimal or when no bound names a capacity. Made once: the text,
        Markdown, HTML and JSON of one report all read it."""
        from moeopt.exact.usage import certificate_use  # (moeopt.exact imports OR-Tools)

        return certificate_use(self.graph, self.exact, self.best_schedule)

    def to_dict(self) -> dict[str, Any]:
        x = self.exact
        return {
            "rank": self.rank,
            "ranks": list(self.ranks),
            "num_events": self.num_events,
            "policy": self.policy,
            "greedy_us": self.greedy_us,
            "greedy_by_policy_us": {p.policy: p.makespan_us for p in self.report.greedy},
            "greedy_errors": {p.policy: p.error for p in self.report.greedy if p.error},
            "best_us": self.best_us,
            "best_from": _best_from(self),
            "lower_bound_us": self.lower_bound_us,
            "bound_from": x.bound_source,
            "mode": x.mode,
            "status": x.status.value,
            "proven_optimal": self.proven_optimal,
            "certified_gap": self.certified_gap,
            "reachable_gap": self.reachable_gap,
            "bound_gap": self.bound_gap,
            "physical_bounds_kernel_us": {
                "compute": self.physical["compute_us"],
                "bandwidth": self.physical["bandwidth_us"],
                "bandwidth_channel": self.physical["bandwidth_channel"],
                "dependency": self.physical["dependency_us"],
            },
            "tail_offset_us": self.tail_offset_us,
            "physical_limits_us": self.physical_limits(),
            "divergences": self.divergences.to_dict(),
            "binding_use": None if self.binding_use is None else self.binding_use.to_dict(),
            "exact": x.to_dict(),
        }


@dataclass(frozen=True)
class ScenarioGap:
    """:func:`optimality_gap` of one scenario: one :class:`RankGap` per distinct rank."""

    ranks: tuple[RankGap, ...]
    policy: str
    policies: tuple[str, ...]
    time_limit_s: float
    workers: int
    mode: str
    total_s: float
    label: str = ""

    @property
    def slowest(self) -> RankGap:
        """The rank with the longest greedy time (the kernel's time)."""
        return max(self.ranks, key=lambda r: (r.greedy_us, -r.rank))

    @property
    def worst(self) -> RankGap:
        """The rank with the largest certified gap."""
        return max(self.ranks, key=lambda r: (r.certified_gap, -r.rank))

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.label,
            "policy": self.policy,
            "policies": list(self.policies),
            "time_limit_s": self.time_limit_s,
            "workers": self.workers,
            "mode": self.mode,
            "total_s": self.total_s,
            "slowest_rank": self.slowest.rank,
            "worst_rank": self.worst.rank,
            "ranks": [r.to_dict() for r in self.ranks],
        }

    def text(self) -> str:
        """:func:`format_gap`."""
        return format_gap(self)

    def markdown(self) -> str:
        """:func:`gap_markdown`."""
        return gap_markdown(self)

    def proven_count(self) -> tuple[int, int]:
        """``(distinct ranks proven optimal, distinct ranks)``."""
        return sum(1 for r in self.ranks if r.proven_optimal), len(self.ranks)


def _ratio(a: float, b: float) -> float:
    return a / b - 1.0 if b > 0 and math.isfinite(b) else math.inf


def _best_from(r: RankGap) -> str:
    s = r.exact.schedule
    if r.exact.best_source == "cpsat":
        return "cpsat"
    if r.exact.best_source == "improved":
        return "improved greedy"
    if r.exact.best_source == "restarted":
        return "restarted passes"
    if r.exact.best_source == "window":
        return "window search"
    return f"greedy:{s.policy}" if s is not None and s.policy else "greedy"


# ---------------------------------------------------------------------- physical bounds
def tail_offset_us(rg: RankGraph) -> float:
    """Shortest distance any schedule keeps between the end of a combine event and its makespan.

    For a combine event ``c`` every schedule ends at least ``tail(c) − d(c)`` after ``c`` ends
    (``tail``: the longest path from ``c``'s start to the end of the graph, λ included); the
    minimum over all combine events holds for the last one, whichever it is.
    """
    cg = rg.graph.compiled()
    _head, tail = longest_paths(cg.topo, cg.dur, cg.preds, cg.succs)
    ends = rg.combine_events or [n for n in cg.names if n != rg.tail_event]
    return min((tail[cg.index[n]] - cg.dur[cg.index[n]] for n in ends), default=0.0)


def _physical_limits(b: PhysicalBounds, offset: float) -> dict[str, float]:
    return {
        "physical:compute": b["compute_us"] + offset,
        f"physical:bandwidth({b['bandwidth_channel']})": b["bandwidth_us"] + offset,
        "physical:dependency": b["dependency_us"] + offset,
    }


# ---------------------------------------------------------------------- divergences
def stage_of(graph: EventGraph, name: str) -> str:
    """``stage`` label of an event, with its ``phase`` when it has one (``gmm1:load``)."""
    labels = graph[name].labels
    st = str(labels.get("stage", "-"))
    phase = labels.get("phase")
    return f"{st}:{phase}" if phase else st


def _sequences(graph: EventGraph, s: Schedule) -> dict[str, list[str]]:
    """Per resource (and per semaphore, ``"semaphore <name>"``: its acquirers) the events in
    start order. Semaphores shared by many cores are where orders that no single core shows
    (which core's load takes the HBM first) differ."""
    seq: dict[str, list[str]] = {}
    for name, res in s.resources.items():
        ev = graph[name]
        for sem in ev.acquires:
            seq.setdefault(f"semaphore {sem}", []).append(name)
        if ev.duration_us <= 0:
            continue
        for r in res:
            seq.setdefault(r, []).append(name)
    for evs in seq.values():
        evs.sort(key=lambda e: (s.start_us[e], s.end_us[e], e))
    return seq


def first_divergences(
    graph: EventGraph, greedy: Schedule, optimal: Schedule, limit: int = DEFAULT_DIVERGENCES
) -> DivergenceSummary:
    """Where ``optimal`` first departs from ``greedy`` (see :class:`DivergenceSummary`).

    Per resource and per semaphore, the two event sequences (by start time; zero-length events
    left out on resources) are compared position by position: the first position where they
    differ is an ``"order"`` divergence. Every event bound to other resources is a ``"core"``
    divergence. The ``limit`` earliest of them (by greedy start) are kept; the counts cover all.
    """
    gseq = _sequences(graph, greedy)
    oseq = _sequences(graph, optimal)
    found: list[Divergence] = []
    moved: set[str] = set()
    reordered = 0
    for r in sorted(set(gseq) | set(oseq)):
        g = gseq.get(r, [])
        o = oseq.get(r, [])
        k = next((i for i, (a, b) in enumerate(zip(g, o)) if a != b), min(len(g), len(o)))
        if k == len(g) == len(o):
            continue
        reordered += 1
        moved.update(a for a, b in zip(g[k:], o[k:]) if a != b)
        moved.update(g[len(o) :])
        moved.update(o[len(g) :])
        ge = g[k] if k < len(g) else None
        oe = o[k] if k < len(o) else None
        t = greedy.start_us[ge] if ge is not None else greedy.start_us[oe] if oe is not None else 0.0
        found.append(_divergence("order", r, k, t, graph, greedy, optimal, ge, oe))
    rebound = 0
    for name, res in greedy.resources.items():
        ores = optimal.resources.get(name, ())
        if tuple(res) != tuple(ores) and graph[name].duration_us > 0:
            rebound += 1
            moved.add(name)
            t = greedy.start_us[name]
            d = _divergence("core", res[0] if res else "-", -1, t, graph, greedy, optimal, name, name)
            found.append(
                Divergence(
                    **{**_fields(d), "greedy_resources": tuple(res), "optimal_resources": tuple(ores)}
                )
            )
    found.sort(key=lambda d: (d.time_us, d.kind != "order", d.resource))
    by_stage: dict[str, int] = {}
    for name in moved:
        st = stage_of(graph, name)
        by_stage[st] = by_stage.get(st, 0) + 1
    return DivergenceSummary(
        compared_with=optimal.policy or "optimal",
        resources_reordered=reordered,
        events_rebound=rebound,
        events_moved_by_stage=dict(sorted(by_stage.items(), key=lambda kv: (-kv[1], kv[0]))),
        first=tuple(found[: max(0, limit)]),
    )


def _fields(d: Divergence) -> dict[str, Any]:
    return {f: getattr(d, f) for f in Divergence.__slots__}


def _divergence(
    kind: str,
    resource: str,
    position: int,
    t: float,
    graph: EventGraph,
    greedy: Schedule,
    optimal: Schedule,
    ge: str | None,
    oe: str | None,
) -> Divergence:
    return Divergence(
        kind=kind,
        resource=resource,
        position=position,
        time_us=t,
        greedy_event=ge,
        greedy_stage="-" if ge is None else stage_of(graph, ge),
        greedy_start_us=None if ge is None else greedy.start_us[ge],
        optimal_event=oe,
        optimal_stage="-" if oe is None else stage_of(graph, oe),
        optimal_start_us=None if oe is None else optimal.start_us[oe],
    )


# ---------------------------------------------------------------------- the report
def _check(time_limit_s: Any, workers: Any, mode: Any, divergences: Any) -> None:
    if (
        isinstance(time_limit_s, bool)
        or not isinstance(time_limit_s, (int, float))
        or not math.isfinite(time_limit_s)
        or time_limit_s <= 0
    ):
        raise InputError(
            f"optimality_gap: time_limit_s must be a number of seconds > 0, got {time_limit_s!r}"
        )
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InputError(f"optimality_gap: workers must be an integer >= 1, got {workers!r}")
    if mode not in MODES:
        raise InputError(f"optimality_gap: mode must be one of {', '.join(MODES)}, got {mode!r}")
    if isinstance(divergences, bool) or not isinstance(divergences, int) or divergences < 0:
        raise InputError(f"optimality_gap: divergences must be an integer >= 0, got {divergences!r}")


def rank_mode(graph: EventGraph, mode: str) -> str:
    """The exact layer's mode for one graph under ``mode`` (``"auto"``: see the module docstring)."""
    if mode != "auto":
        return mode
    has_pools = bool(graph.compiled().pool_names)
    return "exact" if not has_pools or len(graph) <= AUTO_EXACT_MAX_EVENTS else "relaxed"


def optimality_gap(
    scenario: Scenario,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    workers: int = 1,
    mode: str = "auto",
    *,
    policies: Sequence[str] | None = None,
    divergences: int = DEFAULT_DIVERGENCES,
    params: Mapping[str, Any] | None = None,
    label: str = "",
    progress: Callable[[RankGap], None] | None = None,
) -> ScenarioGap:
    """Greedy vs CP-SAT for every distinct rank of ``scenario`` (see the module docstring).

    Args:
        scenario: a :class:`~moeopt.megamoe.Scenario` (e.g. from ``load_scenario``).
        time_limit_s: CP-SAT's wall-clock budget **per distinct rank** (model building, solve,
            replay and validation; the greedy runs are extra, and so are the restarts of
            :func:`moeopt.exact.gap.graph_optimality_gap` on a rank left unproven, a quarter of
            the limit at most).
        workers: CP-SAT worker threads.
        mode: ``"auto"``, ``"exact"`` or ``"relaxed"``; each rank reports the mode it used.
        policies: greedy policies to score (default: every built-in one); the scenario's own
            policy is always included.
        divergences: how many first divergences to keep per rank.
        params: extra CP-SAT parameters for :func:`moeopt.solve_exact`.
        label: a name for reports (e.g. the scenario file).
        progress: called with each rank's result as it finishes.

    Raises:
        InputError: a bad argument. BoundViolation: a greedy schedule below a physical bound
        (the model misses a cost; the gap would be meaningless). WorkConservationViolation: a
        policy that declares itself work-conserving left a checked late-bound pool idle with work
        ready (as in ``simulate``).
    """
    from moeopt.exact.gap import graph_optimality_gap
    from moeopt.exact.solve import LowerLimitError

    _check(time_limit_s, workers, mode, divergences)
    t0 = time.perf_counter()
    cfg = scenario.config
    own = make_policy(cfg.scheduling).name
    names = list(BUILTIN_POLICIES if policies is None else policies)
    for p in names:
        make_policy(p)  # an unknown name fails here with the known names
    if own not in names:
        names.insert(0, own)
    out: list[RankGap] = []
    for rep, (rg, ranks) in sorted(build_graphs(scenario).items()):
        graph = rg.graph
        phys = physical_bounds(rg, cfg)
        offset = tail_offset_us(rg)
        limits = _physical_limits(phys, offset)
        r_mode = rank_mode(graph, mode)
        # the builder already dropped every semaphore whose capacity covers its demand (see
        # simulate): the greedy's normalisation would find nothing more
        try:
            rep_gap = graph_optimality_gap(
                graph,
                time_limit_s=time_limit_s,
                workers=workers,
                mode=r_mode,
                policies=names,
                params=params,
                name=f"rank{rep}",
                normalize=False,
                makespan_lower_limits=limits,
                skip_proven=True,
            )
        except LowerLimitError as exc:
            raise BoundViolation(
                f"rank {rep}: a greedy schedule is shorter than a physical bound ({exc}); a cost is "
                "missing from the model and the gap would be meaningless",
                bounds=phys.copy(),
            ) from None
        # the work-conservation guardrail on every greedy schedule shown (the bounds were the
        # solver's lower limits above)
        for pname, sched in rep_gap.schedules.items():
            guard_schedule(rg, cfg, sched, pname, check_bounds=False)
        if rep_gap.policy(own).makespan_us is None:
            raise InputError(
                f"rank {rep}: the scenario's policy {own!r} could not schedule the graph: "
                f"{rep_gap.policy(own).error}"
            )
        greedy = rep_gap.schedules[own]
        best = rep_gap.exact.schedule if rep_gap.exact.schedule is not None else greedy
        summary = first_divergences(graph, greedy, best, divergences)
        rg_out = RankGap(
            rank=rep,
            ranks=tuple(ranks),
            num_events=len(graph),
            policy=own,
            report=rep_gap,
            physical=phys,
            tail_offset_us=offset,
            divergences=summary,
            graph=graph,
        )
        out.append(rg_out)
        if progress is not None:
            progress(rg_out)
    return ScenarioGap(
        ranks=tuple(out),
        policy=own,
        policies=tuple(names),
        time_limit_s=float(time_limit_s),
        workers=workers,
        mode=mode,
        total_s=time.perf_counter() - t0,
        label=label,
    )


# ---------------------------------------------------------------------- formatting
def us_text(x: float | None) -> str:
    if x is None:
        return "-"
    return "inf" if math.isinf(x) else f"{x:.2f}"


def pct_text(x: float | None) -> str:
    if x is None:
        return "-"
    return "inf" if math.isinf(x) else f"{100.0 * x:+.2f}%"


def ranks_text(ranks: Sequence[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2,5"``."""
    out: list[str] = []
    rs = sorted(ranks)
    i = 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        out.append(str(rs[i]) if i == j else f"{rs[i]}-{rs[j]}")
        i = j + 1
    return ",".join(out)


def _status_text(r: RankGap) -> str:
    return "optimal" if r.proven_optimal else r.exact.status.value


def summary_rows(sg: ScenarioGap) -> tuple[list[str], list[list[str]]]:
    """Head and cells of the main table (one row per distinct rank)."""
    head = [
        "rank",
        "ranks",
        "events",
        "greedy *",
        "CP-SAT best",
        "lower bound",
        "bound from",
        "mode",
        "status",
        "certified",
        "reachable",
        "best/bound-1",
        "s",
    ]
    rows = []
    for r in sg.ranks:
        rows.append(
            [
                str(r.rank),
                ranks_text(r.ranks),
                str(r.num_events),
                us_text(r.greedy_us),
                us_text(r.best_us),
                us_text(r.lower_bound_us),
                r.exact.bound_source,
                r.exact.mode,
                _status_text(r),
                pct_text(r.certified_gap),
                pct_text(r.reachable_gap),
                pct_text(r.bound_gap),
                f"{r.exact.total_s:.1f}",
            ]
        )
    return head, rows


def policy_rows(sg: ScenarioGap) -> tuple[list[str], list[list[str]]]:
    head = ["rank", *[p + (" *" if p == sg.policy else "") for p in sg.policies]]
    rows = []
    for r in sg.ranks:
        cells = [str(r.rank)]
        for p in sg.policies:
            pr = r.report.policy(p)
            us = pr.makespan_us
            cells.append("failed" if us is None else f"{us_text(us)} ({pct_text(pr.gap_to_bound)})")
        rows.append(cells)
    return head, rows


def physical_rows(sg: ScenarioGap) -> tuple[list[str], list[list[str]]]:
    head = ["rank", "compute", "bandwidth", "dependency", "binds", "tail offset", "best limit (makespan)"]
    rows = []
    for r in sg.ranks:
        b = r.physical
        vals = {"compute": b["compute_us"], "bandwidth": b["bandwidth_us"], "dependency": b["dependency_us"]}
        binds = max(vals, key=lambda k: vals[k])
        rows.append(
            [
                str(r.rank),
                us_text(b["compute_us"]),
                f"{us_text(b['bandwidth_us'])} [{b['bandwidth_channel']}]",
                us_text(b["dependency_us"]),
                binds,
                us_text(r.tail_offset_us),
                us_text(max(r.physical_limits().values())),
            ]
        )
    return head, rows


def divergence_rows(d: DivergenceSummary) -> tuple[list[str], list[list[str]]]:
    head = ["greedy t (µs)", "where", "greedy runs", "stage", "optimum runs", "stage ", "optimum t (µs)"]
    rows = []
    for x in d.first:
        if x.kind == "core":
            where = f"{'+'.join(x.greedy_resources)} -> {'+'.join(x.optimal_resources)}"
        else:
            where = f"{x.resource} #{x.position}"
        rows.append(
            [
                us_text(x.time_us),
                where,
                x.greedy_event or "(nothing)",
                x.greedy_stage,
                x.optimal_event or "(nothing)",
                x.optimal_stage,
                us_text(x.optimal_start_us),
            ]
        )
    return head, rows


def divergence_headline(r: RankGap) -> str:
    d = r.divergences
    src = _best_from(r)
    if r.exact.cpsat_status == "NOT_RUN":
        return f"the greedy is optimal: it reaches the {r.exact.bound_source} bound (CP-SAT not needed)."
    if d.identical:
        if src == f"greedy:{r.policy}":
            return "CP-SAT found no schedule better than the greedy within the time limit."
        return f"the best schedule ({src}) runs every resource and semaphore in the greedy's order."
    stages = ", ".join(f"{k} {v}" for k, v in d.events_moved_by_stage.items())
    return (
        f"best schedule from {src}: {d.resources_reordered} resource(s) / semaphore(s) take their "
        f"events in another order, {d.events_rebound} event(s) on another core; events moved by "
        f"stage: {stages}"
    )


def _text_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[k]) for r in rows)) if rows else len(h) for k, h in enumerate(head)]
    lines = ["  ".join(f"{c:<{w}}" for c, w in zip(head, widths)).rstrip()]
    lines += ["  ".join(f"{c:<{w}}" for c, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines)


def _settings_line(sg: ScenarioGap) -> str:
    return (
        f"policy {sg.policy}; CP-SAT {sg.time_limit_s:g} s per rank, {sg.workers} worker(s), "
        f"mode {sg.mode}; {sg.total_s:.1f} s in all"
    )


NOTES = (
    "* greedy with the scenario's policy. "
    "Times: makespan of each rank graph in µs (to the end of the unpermute tail). "
    "certified = greedy / lower bound − 1 (no orchestration of this graph gains more); "
    "reachable = greedy / best − 1 (a schedule achieving it was found and validated); "
    "s = seconds in the exact layer. "
    "Physical bounds are the kernel's (to the last combine); plus the tail offset they limit the makespan."
)


def format_gap(sg: ScenarioGap) -> str:
    """The report as plain text for a terminal (tables, then the divergences of every rank)."""
    parts = [
        f"optimality gap  {sg.label or 'scenario'}",
        _settings_line(sg),
        "",
        _text_table(*summary_rows(sg)),
        "",
        "greedy per policy, µs (certified gap); * = the scenario's policy",
        _text_table(*policy_rows(sg)),
        "",
        "physical bounds of the kernel, µs",
        _text_table(*physical_rows(sg)),
    ]
    loose = bound_lines(sg)
    if loose:
        parts += ["", "where the lower bound comes from (ranks not proven optimal)", *loose]
    for r in sg.ranks:
        parts += ["", f"what the optimum does differently, rank {r.rank}: {divergence_headline(r)}"]
        if r.divergences.first:
            parts.append(_text_table(*divergence_rows(r.divergences)))
    parts += ["", NOTES]
    return "\n".join(parts)


def bound_lines(sg: ScenarioGap) -> list[str]:
    """Per rank not proven optimal: the winning bound, its argument and how far each constraint
    class reaches alone (:meth:`moeopt.exact.ExactResult.bound_explanation`), then where the best
    schedule leaves that bound's capacity (or the strongest capacity's) unused
    (:meth:`RankGap.binding_use`)."""
    out = []
    for r in sg.ranks:
        if r.proven_optimal:
            continue
        out.append(f"rank {r.rank}: {r.exact.bound_explanation()}")
        if r.binding_use is not None:
            out.append(f"rank {r.rank}: {r.binding_use.text()}")
    return out


def _md_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    esc = [[c.replace("|", "\\|") for c in row] for row in rows]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in esc]
    return "\n".join(lines)


def gap_markdown(sg: ScenarioGap) -> str:
    """The report as Markdown (same content as :func:`format_gap`)."""
    parts = [
        f"## Optimality gap: {sg.label or 'scenario'}",
        "",
        _settings_line(sg) + ".",
        "",
        _md_table(*summary_rows(sg)),
        "",
        "Greedy per policy, µs (certified gap); * = the scenario's policy.",
        "",
        _md_table(*policy_rows(sg)),
        "",
        "Physical bounds of the kernel, µs.",
        "",
        _md_table(*physical_rows(sg)),
    ]
    loose = bound_lines(sg)
    if loose:
        parts += ["", "Where the lower bound comes from (ranks not proven optimal):", ""]
        parts += [f"- {line}" for line in loose]
    for r in sg.ranks:
        parts += ["", f"### What the optimum does differently, rank {r.rank}", "", divergence_headline(r)]
        if r.divergences.first:
            parts += ["", _md_table(*divergence_rows(r.divergences))]
    parts += ["", NOTES, ""]
    return "\n".join(parts)


def _html_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    h = "".join(f"<th>{html.escape(c)}</th>" for c in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="gap"><thead><tr>{h}</tr></thead><tbody>{body}</tbody></table>\n'


HTML_CSS = (
    "<style>table.gap{border-collapse:collapse;margin:6px 0 14px;font:13px system-ui,sans-serif}"
    "table.gap th,table.gap td{border:1px solid #ccc;padding:2px 8px;text-align:left}"
    "table.gap th{background:#f3f3f3}p.note{color:#555;font:13px system-ui,sans-serif;max-width:70em}"
    "</style>\n"
)


def gap_html(reports: ScenarioGap | Sequence[ScenarioGap]) -> str:
    """One self-contained page for one or several reports: the tables, and per rank the greedy
    and the best schedule as two Gantt charts one above the other on the same time axis
    (:mod:`moeopt.viz.gantt`: zoom and pan move both)."""
    from moeopt.viz.gantt import GanttTrack, gantt_fragment, page_head, page_tail

    sgs = [reports] if isinstance(reports, ScenarioGap) else list(reports)
    if not sgs:
        raise InputError("gap_html: no report to draw")
    title = "Optimality gap: " + ", ".join(sg.label or "scenario" for sg in sgs)
    parts = [page_head(title), HTML_CSS]
    for k, sg in enumerate(sgs):
        parts += [
            f"<h1>Optimality gap: {html.escape(sg.label or 'scenario')}</h1>\n",
            f"<p class='note'>{html.escape(_settings_line(sg))}</p>\n",
            _html_table(*summary_rows(sg)),
            "<h3>Greedy per policy, µs (certified gap); * = the scenario's policy</h3>\n",
            _html_table(*policy_rows(sg)),
            "<h3>Physical bounds of the kernel, µs</h3>\n",
            _html_table(*physical_rows(sg)),
        ]
        loose = bound_lines(sg)
        if loose:
            parts.append("<h3>Where the lower bound comes from (ranks not proven optimal)</h3>\n<ul>\n")
            parts += [f"<li>{html.escape(line)}</li>\n" for line in loose]
            parts.append("</ul>\n")
        parts.append(f"<p class='note'>{html.escape(NOTES)}</p>\n")
        for r in sg.ranks:
            parts.append(f"<h2>Rank {r.rank} (ranks {html.escape(ranks_text(r.ranks))})</h2>\n")
            parts.append(f"<p class='note'>{html.escape(divergence_headline(r))}</p>\n")
            if r.divergences.first:
                parts.append(_html_table(*divergence_rows(r.divergences)))
            best_title = (
                f"best schedule ({_best_from(r)}): {us_text(r.best_us)} µs; "
                f"bound {us_text(r.lower_bound_us)} µs"
            )
            tracks = [
                GanttTrack(f"greedy ({r.policy}): {us_text(r.greedy_us)} µs", r.greedy_schedule, r.graph),
                GanttTrack(best_title, r.best_schedule, r.graph),
            ]
            parts.append(gantt_fragment(tracks, color_by="stage", chart_id=f"s{k}-rank{r.rank}"))
    parts.append(page_tail())
    return "".join(parts)
