"""The CP-SAT model of an event graph: integer data, variables, objective, hint and solution.

**What the model is.** On the tick grid of :mod:`moeopt.exact.ticks`, event ``i`` is an interval
``[S_i, E_i)`` of ``D_i = floor(d_i)`` ticks (``floor`` of the duration in ticks), precedences are
``S_j ≥ E_i + floor(λ)``, and the makespan ``M ≥ E_i`` is minimised. Events that release units
of a semaphore modelled as a reservoir, and whose duration is not a whole number of ticks, get a
*flexible* size ``D_i ≤ E_i − S_i ≤ D_i + 1`` (why: below). The constraints themselves are listed
in :class:`moeopt.exact.constraints.Constraints`.

**Theorem (the model is a relaxation).** Map a feasible real schedule ``(s_i, e_i)`` of the graph
(times in ticks, so ``e_i = s_i + d_i`` with real ``d_i``) to ``S_i = ⌊s_i⌋`` and
``E_i = S_i + D_i``, or ``E_i = ⌊e_i⌋`` for a flexible event. This is a feasible tick schedule with
makespan ``⌊max e_i⌋``. Hence the model's optimum is at most ``⌊OPT / tick⌋`` and every bound
CP-SAT proves, times ``tick_us``, is at most the real optimum ``OPT``.

*Proof.* Write ``⌊·⌋`` for floor. Always ``E_i ≤ ⌊e_i⌋`` because ``⌊s⌋ + ⌊d⌋ ≤ ⌊s + d⌋``; a
flexible event's size ``⌊e_i⌋ − ⌊s_i⌋`` is ``⌊d_i⌋`` or ``⌊d_i⌋ + 1``.

* Precedence: ``s_j ≥ e_i + λ`` gives ``⌊s_j⌋ ≥ ⌊e_i + λ⌋ ≥ ⌊e_i⌋ + ⌊λ⌋ ≥ E_i + ⌊λ⌋``.
* A tick interval contains the integer ``t`` only if ``⌊s_i⌋ ≤ t < E_i ≤ ⌊e_i⌋``, i.e.
  ``s_i < t + 1 ≤ e_i``; so every tick interval containing ``t`` has a real interval containing
  the instant ``t + 1 − ε`` for every small enough ``ε > 0``. No-overlap and cumulative
  constraints (on event intervals, on the holding intervals ``[S_a, E_r)`` of
  :mod:`moeopt.exact.pairing`, and on ``[S_a, H + 1)`` for units never released, whose real
  holding is ``[s_a, ∞)``) therefore hold on ticks because they hold at those real instants.
  Intervals of zero ticks are left out of no-overlap constraints (CP-SAT forbids a zero-size
  interval strictly inside another one; the real schedule ignores zero-length events, and leaving
  a constraint out only relaxes).
* Reservoir (a semaphore without a pairing): the acquires counted at tick ``t`` are those with
  ``⌊s_a⌋ ≤ t``, i.e. ``s_a < t + 1``, and the releases those with ``E_r ≤ t``. With a flexible
  size ``E_r = ⌊e_r⌋``, so ``E_r ≤ t`` iff ``e_r < t + 1``: the tick level at ``t`` equals the real
  level at ``t + 1 − ε``, inside ``[0, C]``. (With a fixed size ``⌊d_r⌋`` a release could be
  counted up to one tick early and lift the level above ``C``: that is why such releasers are
  flexible. Holding intervals need no flexibility: the cover argument above only needs
  ``E ≤ ⌊e⌋``.)
* Makespan: ``M = max E_i ≤ ⌊max e_i⌋``. ∎

Colocation (exact mode) and pool choices are the same discrete decisions in both schedules; the
horizon ``H`` is ``⌊hint makespan / tick⌋``, which the mapped hint meets, so restricting the
makespan to ``≤ H`` keeps at least one optimal tick schedule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ortools.sat.python import cp_model

from moeopt.core.compiled import CompiledGraph
from moeopt.core.schedule import Schedule
from moeopt.exact.bounds import Edges, StaticAnalysis, best_bound, static_analysis
from moeopt.exact.pairing import Pairing, demands, find_pairing
from moeopt.exact.symmetry import SiteClass, canonical_permutation
from moeopt.exact.ticks import TimeGrid

Mode = Literal["exact", "relaxed"]
SemModel = Literal["holding", "reservoir", "dropped"]


@dataclass(slots=True)
class TickInstance:
    """The graph on the tick grid: everything the CP-SAT model is built from.

    ``dur`` are floored durations, ``preds`` / ``succs`` carry floored λ, ``head`` / ``tail`` the
    longest paths on those (raised by the capacities where :mod:`moeopt.exact.heads` ran: every
    schedule of the tick model starts each event in ``[head, makespan − tail]``) or those of the
    real durations rounded down (:func:`moeopt.exact.solve.rounded_analysis`: the image of every
    real schedule starts each event there), ``lower`` the best static bound in ticks,
    ``delays`` the redundant start-to-start distances ``(i, j, ticks)`` from
    :func:`moeopt.exact.bounds.energy_delays`, ``cliques`` the redundant disjunctive cliques of
    :mod:`moeopt.exact.cliques`.
    """

    cg: CompiledGraph
    grid: TimeGrid
    mode: Mode
    dur: list[int]
    flexible: list[bool]
    preds: list[tuple[tuple[int, int], ...]]
    succs: list[tuple[tuple[int, int], ...]]
    head: list[int]
    tail: list[int]
    horizon: int
    pairings: dict[int, Pairing]
    sem_model: list[SemModel]
    lower: int
    delays: list[tuple[int, int, int]] = field(default_factory=list)
    cliques: list[list[int]] = field(default_factory=list)
    site_classes: list[SiteClass] = field(default_factory=list)


def semaphore_models(cg: CompiledGraph, auto: bool = True) -> tuple[dict[int, Pairing], list[SemModel]]:
    """How each semaphore enters the model: with a pairing (``auto`` and the pairing theorem
    applies, :func:`moeopt.exact.pairing.find_pairing`) it is ``"dropped"`` when every unit ever
    acquired fits its capacity at once, else ``"holding"`` (cumulative of holding intervals);
    without one, ``"reservoir"``. Returns the pairings by semaphore index and the models."""
    pairings: dict[int, Pairing] = {}
    models: list[SemModel] = []
    for s in range(len(cg.sem_names)):
        pairing = find_pairing(cg, s) if auto else None
        if pairing is None:
            models.append("reservoir")
            continue
        pairings[s] = pairing
        models.append("dropped" if sum(demands(cg, s)[0].values()) <= cg.sem_cap[s] else "holding")
    return pairings, models


def tick_instance(
    cg: CompiledGraph,
    grid: TimeGrid,
    mode: Mode,
    horizon: int,
    pairings: dict[int, Pairing],
    sem_model: list[SemModel],
    delays_budget: int,
    deadline: float | None = None,
    static: StaticAnalysis | None = None,
) -> TickInstance:
    """Round the graph onto ``grid`` (durations and λ down) and precompute the static tick bounds
    (``deadline``: see :func:`moeopt.exact.bounds.static_analysis`; ``static``: that analysis
    when the caller has it already, from :func:`tick_analysis` on the same grid)."""
    from moeopt.exact.bounds import energy_delays
    from moeopt.exact.cliques import disjunctive_cliques

    dur, preds, succs = _tick_data(cg, grid)
    releases_reservoir = [
        any(sem_model[s] == "reservoir" for s, _r in cg.rel[i]) for i in range(cg.n)
    ]
    flexible = [releases_reservoir[i] and not grid.is_whole(cg.dur[i]) for i in range(cg.n)]
    if static is None:
        static = tick_analysis(cg, grid, pairings, deadline)
    head_f, tail_f = static.head, static.tail
    lower = int(best_bound(static.bounds).value)
    delays = energy_delays(cg, pairings, dur, preds, succs, budget=delays_budget)
    return TickInstance(
        cg=cg,
        grid=grid,
        mode=mode,
        dur=dur,
        flexible=flexible,
        preds=preds,
        succs=succs,
        head=[int(h) for h in head_f],
        tail=[int(t) for t in tail_f],
        horizon=horizon,
        pairings=pairings,
        sem_model=sem_model,
        lower=lower,
        delays=delays,
        cliques=disjunctive_cliques(cg, pairings, dur, succs),
    )


def _tick_data(
    cg: CompiledGraph, grid: TimeGrid
) -> tuple[list[int], list[tuple[tuple[int, int], ...]], list[tuple[tuple[int, int], ...]]]:
    """Durations, predecessors and successors with their λ, rounded down onto ``grid``."""
    dur = [grid.down(d) for d in cg.dur]
    preds = [tuple((p, grid.down(lam)) for p, lam in cg.preds[i]) for i in range(cg.n)]
    succs = [tuple((j, grid.down(lam)) for j, lam in cg.succs[i]) for i in range(cg.n)]
    return dur, preds, succs


def tick_analysis(
    cg: CompiledGraph, grid: TimeGrid, pairings: dict[int, Pairing], deadline: float | None = None
) -> StaticAnalysis:
    """:func:`moeopt.exact.bounds.static_analysis` of the graph rounded onto ``grid`` (bounds,
    heads and tails in ticks). By the theorem above every one of its bounds, times ``tick_us``,
    is a lower bound on the real optimum; on an exact grid it is the real analysis in other
    units (energy terms rounded up to whole ticks)."""
    dur, preds, succs = _tick_data(cg, grid)
    fdur: Sequence[float] = dur
    fpreds: Edges = preds
    fsuccs: Edges = succs
    return static_analysis(cg, pairings, fdur, fpreds, fsuccs, integral=True, deadline=deadline)


@dataclass(slots=True)
class Choice:
    """The member options of one placeholder slot of one event (exact mode).

    ``options`` are ``(member resource index, presence literal)``; a single option has the
    literal ``None`` (the member is forced).
    """

    event: int
    slot: int
    pool: int
    options: list[tuple[int, Any]]


@dataclass(slots=True)
class TickSolution:
    """Start and end ticks of every event, and (exact mode) the resources each one is bound to."""

    start: list[int]
    end: list[int]
    binding: list[tuple[int, ...]] | None
    objective: int


class ExactModel:
    """Variables, constraints and objective of one :class:`TickInstance` (see the module docstring).

    ``start[i]`` is a variable, ``end[i]`` an affine expression (a variable for flexible events),
    ``interval[i]`` the event's interval; ``choices`` the pool choices (exact mode); ``site_lits``
    the site literals of colocation groups with more than one possible site; ``holding`` the
    extra holding intervals as ``(size variable, acquirer, releaser)``, releaser ``-1`` for a
    unit held for ever.
    """

    def __init__(self, inst: TickInstance) -> None:
        from moeopt.exact.constraints import Constraints

        self.inst = inst
        self.cp = cp_model.CpModel()
        self.start: list[Any] = []
        self.size: list[Any] = []
        self.end: list[Any] = []
        self.interval: list[Any] = []
        self.choices: list[Choice] = []
        self.site_lits: dict[int, dict[int, Any]] = {}
        self.holding: list[tuple[Any, int, int]] = []
        self.makespan_interval: Any = None  # [makespan, horizon + 1), see Constraints
        self.makespan_tail: Any = None  # its size
        self.num_intervals = 0  # every interval of the model (sizes CP-SAT's work)
        self.largest_reservoir = 0  # time points of the largest reservoir constraint
        self._variables()
        Constraints(self).add_all()
        self.cp.minimize(self.makespan)

    # ------------------------------------------------------------------ variables
    def _variables(self) -> None:
        inst = self.inst
        cg = inst.cg
        cp = self.cp
        horizon = inst.horizon
        for i in range(cg.n):
            lo = inst.head[i]
            hi = max(lo, horizon - inst.tail[i])
            s = cp.new_int_var(lo, hi, f"start[{i}]")
            d = inst.dur[i]
            size: Any
            e: Any
            if inst.flexible[i]:
                size = cp.new_int_var(d, d + 1, f"size[{i}]")
                e = cp.new_int_var(lo + d, hi + d + 1, f"end[{i}]")
                iv = cp.new_interval_var(s, size, e, f"event[{i}]")
            else:
                size = d
                e = s + d
                iv = cp.new_fixed_size_interval_var(s, d, f"event[{i}]")
            self.num_intervals += 1
            self.start.append(s)
            self.size.append(size)
            self.end.append(e)
            self.interval.append(iv)
        self.makespan = cp.new_int_var(min(inst.lower, horizon), horizon, "makespan")
        if inst.mode == "exact":
            self._pool_choices()

    def _pool_choices(self) -> None:
        inst = self.inst
        cg = inst.cg
        cp = self.cp
        for g, sites in enumerate(cg.group_sites):
            if sites is not None and len(sites) > 1:
                lits = {site: cp.new_bool_var(f"site[g{g},{cg.site_names[site]}]") for site in sites}
                cp.add_exactly_one(lits.values())
                self.site_lits[g] = lits
        for i in range(cg.n):
            g = cg.group[i]
            allowed = None if g < 0 else cg.group_sites[g]
            for k, p in enumerate(cg.placeholders[i]):
                members = [
                    m
                    for m in cg.pool_members[p]
                    if m not in cg.fixed[i] and (allowed is None or cg.res_site[m] in allowed)
                ]
                if len(members) == 1:
                    self.choices.append(Choice(i, k, p, [(members[0], None)]))
                    continue
                options = []
                for m in members:
                    lit = cp.new_bool_var(f"bind[{i},{k},{cg.res_names[m]}]")
                    options.append((m, lit))
                self.choices.append(Choice(i, k, p, options))

    def optional_interval(self, i: int, lit: Any, name: str) -> Any:
        """An interval of event ``i`` that is present iff ``lit`` (same start, size and end)."""
        self.num_intervals += 1
        if self.inst.flexible[i]:
            return self.cp.new_optional_interval_var(self.start[i], self.size[i], self.end[i], lit, name)
        return self.cp.new_optional_fixed_size_interval_var(self.start[i], self.inst.dur[i], lit, name)

    def min_size(self, i: int) -> int:
        return self.inst.dur[i]

    # ------------------------------------------------------------------ hint
    def add_hint(self, schedule: Schedule) -> None:
        """Hint every variable from a valid real schedule mapped onto ticks (module docstring)."""
        inst = self.inst
        cg = inst.cg
        grid = inst.grid
        cp = self.cp
        s_t = [grid.down(schedule.start_us[nm]) for nm in cg.names]
        e_t = []
        for i, nm in enumerate(cg.names):
            if inst.flexible[i]:
                e = grid.down(schedule.end_us[nm])
                e = min(max(e, s_t[i] + inst.dur[i]), s_t[i] + inst.dur[i] + 1)
                cp.add_hint(self.size[i], e - s_t[i])
                cp.add_hint(self.end[i], e)
            else:
                e = s_t[i] + inst.dur[i]
            e_t.append(e)
            cp.add_hint(self.start[i], s_t[i])
        makespan = max(e_t, default=0)
        cp.add_hint(self.makespan, makespan)
        cp.add_hint(self.makespan_tail, inst.horizon + 1 - makespan)
        for var, a, r in self.holding:
            cp.add_hint(var, (e_t[r] if r >= 0 else inst.horizon + 1) - s_t[a])
        # pool bindings and sites
        bound = {
            i: {cg.res_index[r] for r in schedule.resources.get(nm, ()) if r in cg.res_index}
            for i, nm in enumerate(cg.names)
        }
        if inst.site_classes:  # the hint relabelled to meet the symmetry breaking (same times)
            perm = canonical_permutation(cg, inst.site_classes, [bound[i] for i in range(cg.n)])
            bound = {i: {perm[r] for r in rs} for i, rs in bound.items()}
        used_by = {i: set(rs) for i, rs in bound.items()}
        for ch in self.choices:
            hit = next((m for m, _lit in ch.options if m in bound[ch.event]), None)
            for m, lit in ch.options:
                if lit is not None:
                    cp.add_hint(lit, m == hit)
            if hit is not None:
                bound[ch.event].discard(hit)
        for g, lits in self.site_lits.items():
            members = [i for i in range(cg.n) if cg.group[i] == g]
            used = {cg.res_site[r] for i in members for r in used_by[i]}
            for site, lit in lits.items():
                cp.add_hint(lit, site in used)

    # ------------------------------------------------------------------ solution
    def solution(self, solver: cp_model.CpSolver) -> TickSolution:
        """The solver's current solution in ticks (and bindings in exact mode)."""
        cg = self.inst.cg
        start = [int(solver.value(v)) for v in self.start]
        end = [int(solver.value(e)) for e in self.end]
        binding: list[tuple[int, ...]] | None = None
        if self.inst.mode == "exact":
            chosen: list[list[int]] = [list(cg.fixed[i]) for i in range(cg.n)]
            for ch in self.choices:
                for m, lit in ch.options:
                    if lit is None or solver.boolean_value(lit):
                        chosen[ch.event].append(m)
                        break
            binding = [tuple(c) for c in chosen]
        return TickSolution(start, end, binding, int(solver.objective_value))
