"""Score the greedy scheduler against CP-SAT on one event graph (SPEC §5, optimality gap).

For each policy: the greedy makespan, ``gap_to_bound = greedy / lower_bound − 1`` (an upper
bound on what any orchestration of this graph could gain over that policy) and
``gap_to_best = greedy / best − 1`` (a gain proven reachable: CP-SAT's best schedule achieves
it). When CP-SAT proves optimality the two coincide.

The CP-SAT optimum is monotone in durations and λ (making an event longer never makes the
optimum shorter, whenever every semaphore has a pairing, see :mod:`moeopt.exact.pairing`:
shorten the event in place in an optimal schedule of the longer graph and every rule still
holds), unlike list scheduling, which shows Graham's timing anomalies. That makes it the
anomaly-free companion metric of the greedy.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from moeopt.core.events import EventGraph
from moeopt.core.policies import BUILTIN_POLICIES, Policy, make_policy
from moeopt.core.schedule import Schedule
from moeopt.core.scheduler import schedule as greedy_schedule
from moeopt.core.validate import validate_schedule
from moeopt.errors import ScheduleError, SchedulingError
from moeopt.exact.result import ExactResult
from moeopt.exact.solve import solve_exact


@dataclass(frozen=True, slots=True)
class PolicyResult:
    """The greedy with one policy, scored against the exact result.

    ``makespan_us`` is ``None`` when the policy could not schedule the graph (``error`` says why).
    """

    policy: str
    makespan_us: float | None
    greedy_s: float
    gap_to_bound: float | None
    gap_to_best: float | None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "makespan_us": self.makespan_us,
            "greedy_s": self.greedy_s,
            "gap_to_bound": self.gap_to_bound,
            "gap_to_best": self.gap_to_best,
            "error": self.error,
        }


@dataclass(frozen=True, slots=True)
class GapReport:
    """Greedy per policy against CP-SAT's best schedule and lower bound, for one graph."""

    name: str
    num_events: int
    greedy: tuple[PolicyResult, ...]
    exact: ExactResult
    schedules: Mapping[str, Schedule] = field(default_factory=dict, compare=False, repr=False)
    """The valid greedy schedule of each policy that produced one (left out of :meth:`to_dict`)."""

    @property
    def lower_bound_us(self) -> float:
        return self.exact.lower_bound_us

    @property
    def best_us(self) -> float | None:
        return self.exact.best_us

    @property
    def proven_optimal(self) -> bool:
        return self.exact.proven_optimal

    @property
    def best_policy(self) -> PolicyResult | None:
        """The policy with the shortest greedy makespan (ties: the first listed)."""
        ok = [p for p in self.greedy if p.makespan_us is not None]
        if not ok:
            return None
        return min(ok, key=lambda p: p.makespan_us if p.makespan_us is not None else 0.0)

    def bound_explanation(self) -> str:
        """Where the lower bound comes from when it is not proven optimal: the winning bound, its
        argument and how far each constraint class reaches alone (``""`` when proven)."""
        return self.exact.bound_explanation()

    def policy(self, name: str) -> PolicyResult:
        for p in self.greedy:
            if p.policy == name:
                return p
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        best = self.best_policy
        return {
            "name": self.name,
            "num_events": self.num_events,
            "lower_bound_us": self.lower_bound_us,
            "best_us": self.best_us,
            "proven_optimal": self.proven_optimal,
            "best_policy": None if best is None else best.policy,
            "greedy": {p.policy: p.to_dict() for p in self.greedy},
            "exact": self.exact.to_dict(),
        }


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    return a / b - 1.0


RESTART_SHARE = 0.25
"""Share of the time limit given to restarts after an unproven solve (:func:`graph_optimality_gap`,
on top of the limit). Measured on the typical kernel graph with M = 128
(``bench/bench_gap.py``, 1,880 events): CP-SAT given 120 s after the passes (exact mode, one
worker, with or without interleaved LNS) improved their 680.02 µs by 6 ticks of 0.001 µs; the
restarts reached 677.89-679.98 within 2-14 s of passes per start (load 8 on 2 cores). In
``bench_gap.py`` at 60 s (load 6-12, two runs after), best / bound: M = 128 1.10% -> 0.78%,
0.94% (680.02 -> 677.89, 678.95 µs), V1 M = 512 2.53% -> 2.14%, 1.89% (982.50 -> 978.76,
976.34 µs), M = 16 0.68% and late-bound scenario_basic 0.25% unchanged (no restart found
better), M = 2048 proven by the solve; wall 62 -> 77 s per unproven case.
assumed: a quarter, so that a report's wall time grows by a quarter at most (15 s per
distinct rank at 60 s)."""


def _restarted(
    graph: EventGraph, exact: ExactResult, time_limit_s: float, share: float | None
) -> ExactResult:
    """``exact`` with a better best schedule from :meth:`Improver.restarts` when one is found
    (validated by the improver; the bound is untouched: it holds for every schedule)."""
    from dataclasses import replace

    from moeopt.exact.improve import Improver
    from moeopt.exact.result import SolveStatus, same_time
    from moeopt.exact.solve import IMPROVE_LARGE_EVENTS

    if share is None:
        share = RESTART_SHARE if len(graph) > IMPROVE_LARGE_EVENTS else 0.0
    best = exact.schedule
    if share <= 0 or best is None or exact.proven_optimal:
        return exact
    better = Improver(graph).restarts(best, share * time_limit_s, target_us=exact.lower_bound_us)
    if better.makespan_us >= best.makespan_us or same_time(better.makespan_us, best.makespan_us):
        return exact
    proven = same_time(better.makespan_us, exact.lower_bound_us)
    return replace(
        exact,
        schedule=better,
        best_us=better.makespan_us,
        best_source="restarted",
        status=SolveStatus.OPTIMAL if proven else exact.status,
    )


def graph_optimality_gap(
    graph: EventGraph,
    *,
    time_limit_s: float = 10.0,
    workers: int = 1,
    mode: str = "exact",
    policies: Sequence[str | Policy] | None = None,
    params: Mapping[str, Any] | None = None,
    tick_us: float | None = None,
    name: str = "",
    normalize: bool = True,
    makespan_lower_limits: Mapping[str, float] | None = None,
    skip_proven: bool = False,
    restart_share: float | None = None,
) -> GapReport:
    """Run the greedy with every policy, then CP-SAT hinted with the best greedy schedule (improved
    first by forward-backward passes from every policy's schedule, see :func:`moeopt.solve_exact`).

    Args:
        graph: the event graph.
        time_limit_s, workers, mode, params, tick_us: passed to :func:`moeopt.solve_exact`
            (the greedy runs are not counted in ``time_limit_s``).
        policies: policy names or objects (default: every built-in policy).
        name: a label for reports.
        normalize: passed to the greedy (:func:`moeopt.schedule`); ``False`` skips dropping
            non-binding semaphores (same schedules, less work when the caller knows there are none).
        makespan_lower_limits, skip_proven: passed to ``solve_exact``.
        restart_share: when the solve leaves the best schedule unproven, a further
            ``restart_share × time_limit_s`` seconds of restarts of the forward-backward passes
            from other orders (:meth:`moeopt.exact.improve.Improver.restarts`), on top of the
            time limit; a better schedule replaces the best (``best_source`` ``"restarted"``).
            ``None``: ``RESTART_SHARE`` above ``IMPROVE_LARGE_EVENTS`` events (the graphs
            :func:`moeopt.solve_exact` improves by passes), none below.

    Every greedy schedule is checked with ``validate_schedule``; a policy that fails to schedule
    the graph is reported with its error instead of a makespan.
    """
    pols = [make_policy(p) for p in (BUILTIN_POLICIES if policies is None else policies)]
    graph.validate()
    runs: list[tuple[str, Schedule | None, float, str | None]] = []
    for pol in pols:
        t0 = time.perf_counter()
        try:
            s: Schedule | None = greedy_schedule(graph, pol, normalize=normalize)
            assert s is not None
            validate_schedule(graph, s)
            err = None
        except (SchedulingError, ScheduleError) as exc:
            s, err = None, str(exc).splitlines()[0]
        runs.append((pol.name, s, time.perf_counter() - t0, err))
    valid = [s for _n, s, _t, _e in runs if s is not None]
    hint = min(valid, key=lambda s: s.makespan_us) if valid else None
    exact = solve_exact(
        graph,
        time_limit_s,
        workers,
        mode,
        hint,
        hints=[s for s in valid if s is not hint],
        params=params,
        tick_us=tick_us,
        makespan_lower_limits=makespan_lower_limits,
        skip_proven=skip_proven,
    )
    exact = _restarted(graph, exact, time_limit_s, restart_share)
    greedy = tuple(
        PolicyResult(
            policy=pname,
            makespan_us=None if s is None else s.makespan_us,
            greedy_s=dt,
            gap_to_bound=_ratio(None if s is None else s.makespan_us, exact.lower_bound_us),
            gap_to_best=_ratio(None if s is None else s.makespan_us, exact.best_us),
            error=err,
        )
        for pname, s, dt, err in runs
    )
    schedules = {pname: s for pname, s, _dt, _err in runs if s is not None}
    return GapReport(name=name, num_events=len(graph), greedy=greedy, exact=exact, schedules=schedules)
