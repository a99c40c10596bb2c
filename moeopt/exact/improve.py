"""Better starting schedules for the solver: forward-backward improvement of list schedules.

The greedy of :mod:`moeopt.core.scheduler` with a fixed priority list is a *serial list
schedule*. Forward-backward improvement (also called double justification; Li & Willis 1992,
Valls, Ballestín & Quintanilla 2005) takes a valid schedule ``S`` of makespan ``M`` and

1. schedules the **reversed graph** (below) with the events that end latest in ``S`` first:
   a right-justified schedule ``S'``, read back in the original time as ``s_i = M' − e'_i``;
2. schedules the graph again with the events that start earliest in the read-back schedule
   first: a left-justified schedule.

Each pass keeps the order information of the previous schedule and removes idle time that the
greedy's left-to-right view left in; on resource-constrained project instances it usually
shortens list schedules by a few percent. Randomised priorities around the best schedule found
(``start + noise``), scheduled alternately serially and in parallel (the eligible events that can
start earliest, by priority), then explore nearby orders while time is left. Every schedule produced is
checked by the validator; only valid ones are kept, and the result is never worse than the
best schedule given.

**Restarts** (:meth:`Improver.restarts`). The passes around one best schedule are a local
search: on kernel graphs they settle in one basin (the typical M = 128 graph: 680.02 µs from
every greedy schedule; 120 s of passes never left it, nor did CP-SAT in 120 s, one tick at a
time). Restarts start again from other orders (``RESTART_SLACK_SHARES``), each with passes
around its own best until it stalls (``RESTART_STALL_SHARE``), after the passes around the
schedule given have stalled (on the V1 kernel graph with M = 512 they keep gaining for minutes:
990.5 µs after 2 s, 982.5 after 14, 979.5 after 116); the result is the best of all and of the
schedule given, so never worse than it.

**The reversed graph.** Same events, resources, pools and colocation; every dependency
``i -> j`` (λ) becomes ``j -> i`` (λ); every event acquires what it released and releases what
it acquired. *Claim:* if every semaphore has a pairing with no unreleased unit
(:mod:`moeopt.exact.pairing`), then for a valid schedule ``S'`` of the reversed graph of
makespan ``M'``, the mirror ``s_i = M' − e'_i`` is a valid schedule of the graph. *Proof.*
Precedence: ``s'_i ≥ e'_j + λ`` gives ``e_i = M' − s'_i ≤ M' − e'_j − λ = s_j − λ``. Resources:
the mirror maps intervals onto intervals, so two events overlap in one schedule iff they do in
the other (``[a, b)`` and ``[c, d)`` overlap iff ``a < d`` and ``c < b``, which the mirror keeps).
Semaphores: a pair ``(a, r, k)`` of the graph (``r`` a descendant of ``a``) is a pair ``(r, a,
k)`` of the reversed graph (``a`` a descendant of ``r`` there), so both graphs have pairings and,
by the pairing theorem, each semaphore is a cumulative over holding intervals; the holding
interval of a pair in one schedule is the mirror of its holding interval in the other, and a
family of intervals has the same largest overlap as its mirror. ∎ (The validator checks every
result all the same.) A graph whose semaphores lack such a pairing, or whose reversed graph is
not a valid graph (an event releasing more units than the capacity would acquire them), is
only improved by randomised forward passes.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence

from moeopt.core.compiled import CompiledGraph
from moeopt.core.events import Event, EventGraph
from moeopt.core.policies import Policy
from moeopt.core.schedule import Schedule
from moeopt.core.scheduler import schedule as greedy_schedule
from moeopt.core.validate import validate_schedule
from moeopt.errors import GraphError, ScheduleError, SchedulingError
from moeopt.exact.pairing import demands, find_pairing

NOISE_SHARES = (0.001, 0.003, 0.01)
"""Randomised priorities: ``start + U(0, share × makespan)``, the share drawn from these per pass
(on the typical kernel graphs, ``examples/seed002_typical.toml``, small shares, which reorder
near-ties, did better than shares of 1-5%)."""
JUSTIFY_ROUNDS = 2
"""Forward-backward passes after each randomised forward pass."""
_clock = time.perf_counter
"""The clock of the budget and of the stall test (a module attribute so that tests can drive it)."""
STALL_SHARE = 0.25
""":meth:`Improver.improve` gives up once it has gone without a better schedule for longer than
both the time it took to find its last one and this share of its budget (the time then goes to
the solver, which :func:`moeopt.exact.solve_exact` gives whatever is left). assumed: a quarter;
measured on the seed-002 kernel graphs (``bench/bench_gap.py``, 24 s of passes, load 7 on 2
cores): M = 512 reached its optimum on the 2nd pass (0.4 s) and then spent 23.6 s in vain, which
under load left CP-SAT too little to prove it (1 of 2 runs at a 60 s limit); M = 16 and M = 128
found their last schedule by 2 s; V1 at M = 512 kept improving until the end, never idle for
more than 6 s (a quarter of the budget) or than the time already spent; scenario_basic with
late-bound AIC gained 0.005% after 11.5 idle seconds (the one gain this gives up)."""


RESTART_SLACK_SHARES = (1.5, 2.0, 1.0, 3.0, 0.5)
"""Restarts (:meth:`Improver.restarts`, module docstring): each starts from the list schedule by
priority ``head + α · slack`` (the earliest start plus ``α`` times the slack of the longest path:
``α = 1`` is the latest start, beyond it the events with slack wait longer still), for each
``α`` here, parallel then serial. Measured on the typical kernel graph with M = 128
(``examples/seed002_typical.toml``, 1,880 events, 8-15 s of passes per start, load 8 on 2
cores): from ``α`` = 0 (the earliest start) every run stayed at the 680.02 µs the passes reach
from the greedy schedules, and 120 s of passes from those never left it; from ``α`` = 1.5
(parallel) one run of two reached 677.89, from 2.0 one of three 678.93 and one 679.98, from 1.0
679.98."""
RESTART_STALL_SHARE = 0.08
"""A restart gives up once it has gone without a better schedule (than its own best) for longer
than both the time it took to find its last one and this share of the restarts' budget.
assumed: a little less than a tenth, so that most of the ten starts (five orders, two schemes)
get a turn when none keeps gaining."""


def _reaches(s: Schedule, target_us: float) -> bool:
    """Whether ``s`` reaches the lower bound ``target_us`` (to a relative 1e-9: nothing left to
    gain), where the passes and the restarts stop."""
    return s.makespan_us <= target_us + 1e-9 * max(1.0, target_us)


class ListPolicy(Policy):
    """List scheduling by fixed priorities. Serial (default): the eligible event with the smallest
    priority commits first, at the earliest time it can start. ``parallel``: among the eligible
    events that can start earliest, the one with the smallest priority (ties: index)."""

    name = "priority_list"
    work_conserving = False

    def __init__(self, priority: Sequence[float], parallel: bool = False) -> None:
        self.priority = list(priority)
        self.parallel = parallel

    def rank(self, i: int) -> tuple[float, float]:
        return (0.0, self.priority[i]) if self.parallel else (self.priority[i], 0.0)


def reversible(cg: CompiledGraph) -> bool:
    """Every semaphore has a pairing that releases every acquired unit (module docstring)."""
    for s in range(len(cg.sem_names)):
        acq, rel = demands(cg, s)
        if sum(acq.values()) != sum(rel.values()):
            return False
        pairing = find_pairing(cg, s)
        if pairing is None or pairing.unreleased:
            return False
    return True


def reversed_graph(graph: EventGraph) -> EventGraph:
    """The reversed graph of the module docstring (events in reverse order of addition)."""
    succ: dict[str, dict[str, float]] = {name: {} for name in graph.events}
    for name, ev in graph.events.items():
        for p, lam in ev.deps.items():
            succ[p][name] = lam
    out = EventGraph(semaphores=dict(graph.semaphores), pools={k: list(v) for k, v in graph.pools.items()})
    for name in reversed(list(graph.events)):
        ev = graph.events[name]
        out.add(
            Event(
                name,
                resources=list(ev.resources),
                deps=succ[name],
                acquires=dict(ev.releases),
                releases=dict(ev.acquires),
                duration_us=ev.duration_us,
                colocate_with=ev.colocate_with,
            )
        )
    return out


class Improver:
    """Forward-backward improvement of valid schedules of one graph (module docstring)."""

    def __init__(self, graph: EventGraph, seed: int = 0) -> None:
        self.graph = graph
        self.cg = graph.compiled()
        self.back: EventGraph | None = None
        if reversible(self.cg):
            back = reversed_graph(graph)
            try:
                back.compiled()  # e.g. a release of more units than the capacity cannot be an acquire
            except GraphError:
                pass
            else:
                self.back = back
                self.back_names = list(back.events)
        self.rng = random.Random(seed)
        self.passes = 0
        self.parallel = False  # the list scheme of the passes, alternated by improve()

    def _run(self, g: EventGraph, priority: Sequence[float]) -> Schedule | None:
        self.passes += 1
        try:
            return greedy_schedule(g, ListPolicy(priority, self.parallel), normalize=False)
        except SchedulingError:
            return None

    def _valid(self, s: Schedule | None) -> Schedule | None:
        if s is None:
            return None
        try:
            validate_schedule(self.graph, s)
        except ScheduleError:
            return None
        return s

    def justify(self, s: Schedule) -> Schedule | None:
        """One backward then one forward pass from ``s`` (``None``: the graph is not reversible
        or a pass failed)."""
        if self.back is None:
            return None
        back = self._run(self.back, [-s.end_us[name] for name in self.back_names])
        if back is None:
            return None
        span = back.makespan_us
        mirrored = [span - back.end_us[name] for name in self.cg.names]
        return self._valid(self._run(self.graph, mirrored))

    def improve(self, starts: Sequence[Schedule], budget_s: float, target_us: float = 0.0) -> Schedule:
        """The best valid schedule found from ``starts`` (valid schedules) within ``budget_s``,
        stopping early once a schedule reaches ``target_us`` (a lower bound: nothing to gain) or
        once the passes have stalled (no better schedule for longer than both the time spent
        until the last one and ``STALL_SHARE`` of the budget)."""
        t_begin = _clock()
        return self._passes(starts, t_begin, t_begin + budget_s, STALL_SHARE * budget_s, target_us)

    def _passes(
        self, starts: Sequence[Schedule], t_begin: float, t_end: float, stall_floor_s: float, target_us: float
    ) -> Schedule:
        """The best valid schedule found by passes from ``starts`` (best first), begun at
        ``t_begin``, until ``t_end``, a schedule reaching ``target_us``, or a stall: no better
        schedule for longer than both the time spent until the last one and ``stall_floor_s``."""
        best = min(starts, key=lambda s: s.makespan_us)
        last_gain = t_begin  # when ``best`` last improved

        def done() -> bool:
            reached = _reaches(best, target_us)
            now = _clock()
            stalled = now - last_gain > max(last_gain - t_begin, stall_floor_s)
            return reached or now >= t_end or stalled

        def take(s: Schedule | None) -> None:
            nonlocal best, last_gain
            if s is not None and s.makespan_us < best.makespan_us:
                best, last_gain = s, _clock()

        for s in sorted(starts, key=lambda s: s.makespan_us):
            cur: Schedule | None = s
            for _ in range(JUSTIFY_ROUNDS):
                if done() or cur is None:
                    break
                cur = self.justify(cur)
                take(cur)
        while not done():
            self._step(best, done, take)
        return best

    def _step(
        self,
        around: Schedule,
        done: Callable[[], bool],
        take: Callable[[Schedule | None], None],
    ) -> None:
        """One randomised forward pass around ``around`` and its forward-backward passes, each
        result offered to ``take`` (the scheme alternates between serial and parallel)."""
        self.parallel = not self.parallel
        noise = self.rng.choice(NOISE_SHARES) * around.makespan_us
        prio = [around.start_us[name] + self.rng.uniform(0.0, noise) for name in self.cg.names]
        cur = self._valid(self._run(self.graph, prio))
        for _ in range(JUSTIFY_ROUNDS):
            if cur is None or done():
                break
            take(cur)
            cur = self.justify(cur)
        take(cur)

    def restart_priorities(self) -> list[tuple[list[float], bool]]:
        """The orders the restarts start from: ``(priority per event, parallel)``, the earliest
        start plus ``α`` times the slack of the longest path, for each ``α`` of
        ``RESTART_SLACK_SHARES`` and each list scheme (parallel first)."""
        head, tail = self.cg.heads(), self.cg.tails()
        span = max((h + t for h, t in zip(head, tail)), default=0.0)
        out = []
        for alpha in RESTART_SLACK_SHARES:
            prio = [h + alpha * (span - h - t) for h, t in zip(head, tail)]
            out.extend([(prio, True), (prio, False)])
        return out

    def restarts(self, best: Schedule, budget_s: float, target_us: float = 0.0) -> Schedule:
        """``best`` (a valid schedule), or a better one found within ``budget_s`` by the passes
        around it until they stall, then by the restarts (module docstring); stopping early once
        a schedule reaches ``target_us`` (a lower bound) or every order has been tried."""
        t_end = _clock() + budget_s
        # the passes around ``best`` itself first, while they gain (a solve may have cut them short)
        best = self._restart(best, t_end, budget_s, target_us)
        for prio, parallel in self.restart_priorities():
            if _clock() >= t_end or _reaches(best, target_us):
                break
            self.parallel = parallel
            first = self._valid(self._run(self.graph, prio))
            if first is None:
                continue
            mine = self._restart(first, t_end, budget_s, target_us)
            if mine.makespan_us < best.makespan_us:
                best = mine
        return best

    def _restart(self, first: Schedule, t_end: float, budget_s: float, target_us: float) -> Schedule:
        """The passes around the best schedule found from ``first`` until ``t_end``, a schedule
        reaching ``target_us`` or a stall (``RESTART_STALL_SHARE``)."""
        return self._passes([first], _clock(), t_end, RESTART_STALL_SHARE * budget_s, target_us)
