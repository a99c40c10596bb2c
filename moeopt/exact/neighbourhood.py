"""Large-neighbourhood search on the CP-SAT model: re-optimise one window of the best schedule.

**The neighbourhood.** Take a valid schedule ``B`` and its image on the tick grid (the hint of
:meth:`moeopt.exact.model.ExactModel.add_hint`: ``S_i = ⌊s_i⌋``, a feasible tick schedule of the
model, :mod:`moeopt.exact.model`). Sort the events by tick start and cut a *window*: ``WINDOW_EVENTS``
consecutive events of that order, the *free* events. The sub-problem is the whole model of
:class:`~moeopt.exact.model.ExactModel` (a copy, every constraint kept) with more constraints:

* every event before the window (earlier in the order) starts at its tick in the image;
* every event outside the window keeps its pool choices (exact mode);
* the events after the window keep their order where they share something: on each no-overlap
  constraint of the model, consecutive intervals of the image (neither owned by a free event)
  get ``end(prev) ≤ start(next)``; on each cumulative with constant demands, the units are
  passed along a *flow* read from the image (below) and every hand-over becomes
  ``end(giver) ≤ start(taker)``.

The free events may move anywhere and take any pool member; the events after the window may
shift (earlier or later) within their order. CP-SAT minimises the makespan of the sub-problem,
hinted with the image, within ``WINDOW_LIMIT_S``.

**Why what it returns is valid and never worse.** Every constraint added is satisfied by the
image (each one is read from it: an equality to its own value, or ``end ≤ start`` between two
intervals where the image has the end no later than the start), so the image is a solution of
the sub-problem and CP-SAT's answer is never worse on ticks. The sub-problem keeps every
constraint of the model, so its solutions are tick schedules of the model; such a schedule is
replayed with the real durations (:func:`moeopt.exact.replay.replay`) and checked by the
validator (:func:`moeopt.core.validate.validate_schedule`), and it replaces ``B`` only when it
is valid and its real makespan is smaller. So :meth:`WindowSearch.run` returns ``B`` or a valid
schedule shorter than ``B``. The search touches no bound: bounds come from the main model alone.

**The flow of a cumulative.** Walk the intervals (those owned by no free event, with positive
length and demand, present in the image) by start tick; the capacity ``C`` is a source of units
at the beginning. Each interval takes its demand from the units whose last holder ended by its
start (from the source first, then from the holders that ended earliest) and hands them on at
its end. The walk always finds enough units: at the start of an interval the units not yet
returned are held by intervals still running then, whose demand plus its own is at most ``C``
in the image. Then in any schedule that respects the hand-overs each unit is held by a chain of
intervals one after another, so the intervals of the walk never need more than ``C`` at once:
the order of the events after the window cannot run into the cumulative by itself, and CP-SAT
spends its search on the free events. (Correctness does not rest on this: the cumulative stays
in the sub-problem.)

**Why windows.** On kernel graphs of thousands of events the whole model is too large for
CP-SAT to improve within a minute; a window of ``WINDOW_EVENTS`` events with the rest fixed is
small after presolve, and CP-SAT often solves it to optimality in a second or two. A window
whose sub-problem is solved to optimality without gain is a local optimum for that window;
a sweep of every window without gain, each proven, ends the search early (the time goes back
to the caller).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from ortools.sat.python import cp_model

from moeopt.core.events import EventGraph
from moeopt.core.schedule import Schedule
from moeopt.core.validate import validate_schedule
from moeopt.errors import ScheduleError
from moeopt.exact.model import ExactModel
from moeopt.exact.replay import ReplayError, replay

WINDOW_EVENTS = 150
"""Free events per window. assumed: the size the issue suggests (about 60 µs of the V1 kernel
graph with M = 512, 2,008 events); there a window of 150-200 events was solved to optimality in
0.3-2.7 s (one worker, load 1-2 on 2 cores), mostly presolve."""
WINDOW_STEP = 75
"""Events between the starts of two consecutive windows (windows overlap by half). assumed: half
a window, so that an improvement that needs events of two neighbouring windows has one window
holding both."""
WINDOW_LIMIT_S = 3.0
"""CP-SAT's time per window. assumed: on the V1 kernel graph with M = 512 the windows of 150-200
events were solved to optimality in 0.3-2.7 s (cp_model_probing_level 0); a window not proven by
then is given up (its best solution, if better, is still taken)."""
SUB_PARAMS: dict[str, Any] = {
    # sat_parameters.proto `cp_model_probing_level`. On the V1 kernel graph with M = 512 presolve
    # probing took about 1 s of the 2.3 s presolve of a window sub-problem (two probing rounds of
    # 0.4 and 0.6 s) and then the window was proven optimal at once; without it the same
    # windows were proven in 1.7-2.7 s in all.
    "cp_model_probing_level": 0,
}
"""Parameters of every window's solve, applied before the caller's (which win)."""

_NO_LOWER = -(2**62)
"""The lower end of a one-sided linear constraint ``a − b ≤ c`` on the proto."""

Expr = tuple[tuple[int, ...], tuple[int, ...], int]
"""A linear expression of the proto: variable indices, coefficients, offset."""


@dataclass(frozen=True, slots=True)
class _Interval:
    start: Expr
    end: Expr
    presence: int | None  # enforcement literal (proto encoding: ~v is -v - 1), None: always present
    owners: frozenset[int]  # events whose start or end variable the interval uses


@dataclass(slots=True)
class WindowStats:
    """What a search did: windows solved, proven without gain, improvements taken, replays
    rejected (replay error or validator), seconds."""

    windows: int = 0
    proven: int = 0
    improved: int = 0
    rejected: int = 0
    seconds: float = 0.0
    history: list[float] = field(default_factory=list)  # makespan after each improvement (µs)


class WindowSearch:
    """Window search on one :class:`ExactModel` (module docstring).

    ``make_solver(seconds)`` returns a configured CP-SAT solver with that time limit (the
    caller's workers and parameters); :data:`SUB_PARAMS` are set on it where the caller has not
    set them (``caller_params``).
    """

    def __init__(
        self,
        model: ExactModel,
        graph: EventGraph,
        make_solver: Callable[[float], cp_model.CpSolver],
        caller_params: Sequence[str] = (),
        window_events: int = WINDOW_EVENTS,
        window_step: int = WINDOW_STEP,
        window_limit_s: float = WINDOW_LIMIT_S,
    ) -> None:
        self.model = model
        self.graph = graph
        self.cg = model.inst.cg
        self.make_solver = make_solver
        self.caller_params = frozenset(caller_params)
        self.window_events = max(1, window_events)
        self.window_step = max(1, window_step)
        self.window_limit_s = window_limit_s
        self.stats = WindowStats()
        self._parse()

    # ------------------------------------------------------------------ the model's structure
    def _parse(self) -> None:
        """Intervals, no-overlaps and cumulatives of the model, read from its proto once."""
        m = self.model
        owner_of: dict[int, int] = {}
        for i in range(self.cg.n):
            owner_of[m.start[i].index] = i
            if self.model.inst.flexible[i]:
                owner_of[m.end[i].index] = i
        self.intervals: dict[int, _Interval] = {}
        self.disjunctive: list[list[int]] = []
        self.cumulative: list[tuple[list[int], list[int], int]] = []
        proto = m.cp.proto
        for k, c in enumerate(proto.constraints):
            if c.has_interval():
                s, e = _expr(c.interval.start), _expr(c.interval.end)
                lits = list(c.enforcement_literal)
                owners = frozenset(owner_of[v] for v in s[0] + e[0] if v in owner_of)
                self.intervals[k] = _Interval(s, e, lits[0] if lits else None, owners)
            elif c.has_no_overlap():
                self.disjunctive.append(list(c.no_overlap.intervals))
            elif c.has_cumulative():
                cu = c.cumulative
                demands = [_expr(d) for d in cu.demands]
                cap = _expr(cu.capacity)
                if cap[0] or any(d[0] for d in demands):
                    continue  # variable demand or capacity: left to the cumulative itself
                self.cumulative.append((list(cu.intervals), [d[2] for d in demands], cap[2]))

    # ------------------------------------------------------------------ search
    def run(self, best: Schedule, deadline: float, target_us: float = 0.0) -> Schedule:
        """``best`` (a valid schedule of the graph) or a valid shorter one found by windows until
        ``deadline`` (``time.perf_counter``), a schedule reaching ``target_us`` (a lower bound),
        or a sweep of every window in which each was proven without gain."""
        t0 = time.perf_counter()
        cur = best
        n = self.cg.n
        starts = list(range(0, max(1, n - self.window_events + self.window_step), self.window_step))
        starts.reverse()  # from the end: the last events decide the makespan first
        quiet = 0  # windows in a row proven without gain
        k = 0
        while starts and quiet < len(starts):
            if cur.makespan_us <= target_us + 1e-9 * max(1.0, target_us):
                break
            left = deadline - time.perf_counter()
            if left < min(self.window_limit_s, 0.5):
                break
            first = starts[k % len(starts)]
            k += 1
            better, proven = self._window(cur, first, min(self.window_limit_s, left))
            if better is not None:
                cur = better
                quiet = 0
                self.stats.improved += 1
                self.stats.history.append(better.makespan_us)
            elif proven:
                quiet += 1
            else:
                quiet = 0
        self.stats.seconds += time.perf_counter() - t0
        return cur

    def _window(self, cur: Schedule, first: int, seconds: float) -> tuple[Schedule | None, bool]:
        """Re-optimise the window of the events ``first ...`` (in tick start order) of ``cur``:
        ``(a valid shorter schedule or None, whether CP-SAT proved the window without gain)``."""
        m = self.model
        cg = self.cg
        m.cp.clear_hints()
        m.add_hint(cur)
        hint = m.cp.proto.solution_hint
        vals = dict(zip(hint.vars, hint.values))
        start = [vals[m.start[i].index] for i in range(cg.n)]
        pos = {e: p for p, e in enumerate(cg.topo)}
        order = sorted(range(cg.n), key=lambda i: (start[i], pos[i]))
        free = set(order[first : first + self.window_events])
        before = set(order[:first])
        sub = m.cp.clone()
        for i in before:
            _fix(sub, m.start[i].index, start[i])
        for ch in m.choices:
            if ch.event not in free:
                for _member, lit in ch.options:
                    if lit is not None:
                        _fix(sub, lit.index, vals[lit.index])
        self._keep_order(sub, vals, free, before)
        solver = self.make_solver(seconds)
        for key, value in SUB_PARAMS.items():
            if key not in self.caller_params and hasattr(solver.parameters, key):
                setattr(solver.parameters, key, value)
        code = solver.solve(sub)
        self.stats.windows += 1
        if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return None, False
        tick_makespan = vals[m.makespan.index]
        proven = code == cp_model.OPTIMAL
        if solver.objective_value >= tick_makespan:
            if proven:
                self.stats.proven += 1
            return None, proven
        sol = m.solution(solver)
        try:
            replayed = replay(cg, sol.start, sol.end, sol.binding)
            validate_schedule(self.graph, replayed)
        except (ReplayError, ScheduleError):
            self.stats.rejected += 1
            return None, False
        if replayed.makespan_us < cur.makespan_us:
            return replayed, False
        if proven:  # a tick or two gained by the rounding, lost again in the replay
            self.stats.proven += 1
        return None, proven

    def _keep_order(
        self, sub: cp_model.CpModel, vals: dict[int, int], free: set[int], before: set[int]
    ) -> None:
        """The order constraints on the events after the window (module docstring)."""

        def value(e: Expr) -> int:
            return e[2] + sum(c * vals[v] for v, c in zip(e[0], e[1]))

        def present(iv: _Interval) -> bool:
            if iv.presence is None:
                return True
            lit = iv.presence
            return bool(vals[lit]) if lit >= 0 else not vals[-lit - 1]

        def kept(k: int) -> tuple[int, int] | None:
            """``(start, end)`` of an interval that takes part in the order, else ``None``."""
            iv = self.intervals.get(k)
            if iv is None or not iv.owners or iv.owners & free or not present(iv):
                return None
            s, e = value(iv.start), value(iv.end)
            return (s, e) if e > s else None

        def fixed(k: int) -> bool:
            return self.intervals[k].owners <= before

        for ivs in self.disjunctive:
            items = sorted((se, k) for k in ivs if (se := kept(k)) is not None)
            for (_a, k1), (_b, k2) in pairwise(items):
                if not (fixed(k1) and fixed(k2)):
                    _before(sub, self.intervals[k1].end, self.intervals[k2].start)
        for ivs, demands, cap in self.cumulative:
            walk = sorted(
                (se, d, k) for k, d in zip(ivs, demands) if d > 0 and (se := kept(k)) is not None
            )
            source = cap
            held: list[list[int]] = []  # [end tick, units, interval] of the units handed on at an end
            for (s, e), d, k in walk:
                take = min(source, d)
                source -= take
                need = d - take
                if need:
                    held.sort()
                    for h in held:
                        if need == 0 or h[0] > s:
                            break
                        got = min(need, h[1])
                        if got:
                            h[1] -= got
                            need -= got
                            if not (fixed(h[2]) and fixed(k)):
                                _before(sub, self.intervals[h[2]].end, self.intervals[k].start)
                    held = [h for h in held if h[1] > 0]
                if need:  # pragma: no cover - the image fits the cumulative (module docstring)
                    break
                held.append([e, d, k])


def _expr(e: Any) -> Expr:
    return (tuple(int(v) for v in e.vars), tuple(int(c) for c in e.coeffs), int(e.offset))


def _fix(sub: cp_model.CpModel, var: int, value: int) -> None:
    """``var == value`` on the proto of ``sub``."""
    ct = sub.proto.constraints.add()
    ct.linear.vars.append(var)
    ct.linear.coeffs.append(1)
    ct.linear.domain.extend([value, value])


def _before(sub: cp_model.CpModel, end: Expr, start: Expr) -> None:
    """``end ≤ start`` (two linear expressions) on the proto of ``sub``."""
    terms: dict[int, int] = {}
    for v, c in zip(end[0], end[1]):
        terms[v] = terms.get(v, 0) + c
    for v, c in zip(start[0], start[1]):
        terms[v] = terms.get(v, 0) - c
    terms = {v: c for v, c in terms.items() if c}
    ct = sub.proto.constraints.add()
    ct.linear.vars.extend(list(terms))
    ct.linear.coeffs.extend(list(terms.values()))
    ct.linear.domain.extend([_NO_LOWER, start[2] - end[2]])
