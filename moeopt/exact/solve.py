"""``solve_exact``: the CP-SAT optimum and a sound lower bound for any event graph (SPEC §5).

Steps: validate the graph and the hint (without a hint, the greedy with the default policy
provides one); pair the semaphores (:mod:`moeopt.exact.pairing`); compute the static bounds on
the real durations (:mod:`moeopt.exact.bounds`); choose the tick grid and round down
(:mod:`moeopt.exact.ticks`; when the grid rounds nothing and the hint is not improved, the
static analysis runs once, on ticks, and gives the real bounds too; otherwise it runs once, on
the real durations, and its values rounded down onto the grid serve the model,
:func:`rounded_analysis`); build the model
(:mod:`moeopt.exact.model`), hint it, solve it within what is left of the time limit (on small
graphs not solved by then, the last ``BOUND_PHASE_SHARE`` of it searches from below for the
bound); replay the solver's schedule with the real durations (:mod:`moeopt.exact.replay`) and
validate it; report the best valid schedule and the largest bound.

``time_limit_s`` bounds the whole call: model building, the greedy hint when none is given, the
solve, and a reserve for the replay and validation are all taken from it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ortools.sat.python import cp_model

from moeopt.core.compiled import CompiledGraph
from moeopt.core.events import EventGraph
from moeopt.core.schedule import Schedule
from moeopt.core.scheduler import schedule as greedy_schedule
from moeopt.core.validate import validate_schedule
from moeopt.errors import InputError, ScheduleError, SchedulingError, did_you_mean
from moeopt.exact.bounds import Bound, StaticAnalysis, best_bound, static_analysis
from moeopt.exact.model import (
    ExactModel,
    Mode,
    SemModel,
    TickInstance,
    semaphore_models,
    tick_analysis,
    tick_instance,
)
from moeopt.exact.replay import ReplayError, replay
from moeopt.exact.result import ExactResult, SolveStatus, same_time
from moeopt.exact.symmetry import site_classes
from moeopt.exact.ticks import TimeGrid, choose_grid

MODES = ("exact", "relaxed")
SEMAPHORE_MODELS = ("auto", "reservoir")

DEFAULT_PARAMS: Mapping[str, Any] = {
    # sat_parameters.proto `linearization_level` (0: no LP relaxation). On PSPLIB j30 with one
    # worker the LP only slowed the search: the optimality proofs of the hard instances came
    # about twice as fast without it. The static and energy bounds the LP would give are added
    # by moeopt itself (makespan domain, redundant cumulatives, energy distances).
    "linearization_level": 0,
    # sat_parameters.proto `use_new_integer_conflict_resolution`. On PSPLIB j30 with one worker
    # the refutations that prove optimality (makespan <= optimum - 1, bench_psplib_proof.py
    # --question proof --dtime 3) took 10-40% less deterministic time on every one of the
    # hardest instances refuted either way (j3029_4 0.97 -> 0.58, j3013_6 3+ -> 2.5), and
    # CP-SAT's mean time over all 480 fell 0.075 -> 0.064 s (p95 0.25 -> 0.17 s); 471/480
    # proven in 2 s against 470. Finding the optima took as long as before in all. The kernel
    # graphs of bench_gap.py (M = 16, 512 at 20 s) gave identical best and bound either way.
    "use_new_integer_conflict_resolution": True,
}
"""CP-SAT parameters moeopt sets before the caller's ``params`` (which win)."""

LARGE_MODEL_INTERVALS = 5_000
LARGE_MODEL_PARAMS: Mapping[str, Any] = {
    # sat_parameters.proto `cp_model_probing_level` (0: no probing in presolve). On a 10k-event
    # MegaMoE-shaped graph in exact mode (67k intervals) presolve probing alone took 9 s of a
    # 20 s budget and CP-SAT returned without even loading the hint; on the 11.8k-event
    # seed002 scenario in relaxed mode (17k intervals) it took 6.4 s of 10. Without it the hint
    # loads and the search starts.
    "cp_model_probing_level": 0,
}
"""Added to :data:`DEFAULT_PARAMS` for models with more than ``LARGE_MODEL_INTERVALS`` intervals."""

SMALL_MODEL_EVENTS = 300
SMALL_MODEL_PARAMS: Mapping[str, Any] = {
    # sat_parameters.proto `use_sat_inprocessing` (clause database vivification, subsumption and
    # probing between restarts). PSPLIB j30 with one worker, solve_exact's search limited by
    # deterministic time (bench_psplib_dtime.py, OR-Tools 9.15): at 0.7 units per instance
    # (about what a 2 s solve gets on an idle core) 474/480 proven instead of 473 (j3029_4
    # gained, none lost) with 6.60 units used in all instead of 7.73; at 5 units 479/480 either
    # way, 20.6 units instead of 27.1. To optimal: j3029_4 0.24 units instead of 1.02, j3013_6
    # 1.96 instead of 3.71, j3013_5 2.21 instead of 3.33, j3013_2 3.45 instead of 4.52, j3029_6
    # 3.23 instead of 4.01, j3029_8 2.34 instead of 2.70; j3013_1 0.51 instead of 0.46. With
    # random_seed 2 (the default is 1) the seven took 14.7 units instead of 16.9 (j3013_1 0.58
    # instead of 0.86; j3013_5 2.21 instead of 1.97). CPU seconds per unit the same (2.0 either
    # way at that load).
    "use_sat_inprocessing": False,
}
"""Added to :data:`DEFAULT_PARAMS` for the main search of graphs of at most
``SMALL_MODEL_EVENTS`` events. assumed: 300, the size up to which PSPLIB-like graphs were
measured and the bound phase runs; the kernel graphs of thousands of events (bench_gap.py) were
not measured with it and keep CP-SAT's default. Measured at the sizes of PSPLIB j60 and j120
(62 and 122 events), whose instances are not at hand, on 24 instances each of
``bench/gen_rcpsp.py --jobs 60`` / ``--jobs 120`` (``bench_psplib_dtime.py --variants
default,inproc --dtime 0.7``, OR-Tools 9.15, stop 46): the same instances proven (22/24,
10/24) and the same bounds (sums 1677, 2403) either way; the best makespans sum to 1711 / 2561
without inprocessing against 1714 / 2568 with it, which used 14% fewer CPU seconds per
deterministic unit on the 122-event graphs (69.7 against 81.2 s for 10.2-10.4 units) and the
same on the 62-event ones: no case for another setting at these sizes."""

RESERVOIR_EXPAND_LIMIT = 100
LARGE_RESERVOIR_PARAMS: Mapping[str, Any] = {
    # sat_parameters.proto `expand_reservoir_constraints`. Expanding a reservoir creates a
    # literal per pair of its events: on a 2k-event graph with two 1k-event reservoirs, 1.6M
    # variables, and CP-SAT returned after 50 s of a 10 s limit. Unexpanded, it keeps its limit.
    "expand_reservoir_constraints": False,
}
"""Added when a semaphore modelled as a reservoir has more than ``RESERVOIR_EXPAND_LIMIT`` events."""

RESERVED_PARAMS = {
    "max_time_in_seconds": "time_limit_s",
    "num_workers": "workers",
    "num_search_workers": "workers",
}

REPLAY_RESERVE_S = 0.02
REPLAY_RESERVE_PER_EVENT_S = 8e-5
"""Time kept back from the solver for the replay and the validation (base + per event)."""

IMPROVE_SHARE_SMALL = 0.0
IMPROVE_SHARE_LARGE = 0.4
IMPROVE_LARGE_EVENTS = 1000
"""Share of ``time_limit_s`` spent improving the hint by forward-backward passes
(:mod:`moeopt.exact.improve`) before CP-SAT, by default: ``IMPROVE_SHARE_SMALL`` (none) up to
``IMPROVE_LARGE_EVENTS`` events (CP-SAT's own search is strong there: on PSPLIB j30, 2 s, 1
worker, it reaches the optimum on 476/480 with no passes against 472/480 with 5% of the time in
passes, and ``moeopt gap`` on the bs = 72 example takes 2 s instead of 3),
``IMPROVE_SHARE_LARGE`` above (on kernel graphs of thousands of events CP-SAT rarely improves the
hint within a minute; the passes do)."""

WINDOW_SHARE_SMALL = 0.0
WINDOW_SHARE_LARGE = 0.0
MIN_WINDOW_S = 1.0
"""Share of the time left after model building spent on the window search
(:mod:`moeopt.exact.neighbourhood`) before the main solve, by default: ``WINDOW_SHARE_SMALL`` up to
``IMPROVE_LARGE_EVENTS`` events, ``WINDOW_SHARE_LARGE`` above; it does not run when its share is
under ``MIN_WINDOW_S`` (one window takes 0.2-3 s on the kernel graphs). Both are 0 (off) because
on the kernel graphs of ``bench/bench_gap.py`` it found nothing after the forward-backward
passes. Measured at a 60 s limit, one worker, share 0.5 (load 1.3-1.9 on 2 cores): V1 M = 512
(2,008 events) 13 windows in 13.9 s, none better than the passes' 981.72 µs (10 proven);
M = 128 12 windows in 23.4 s, none better than 680.02 (8 proven); M = 512 27 windows in 24.3 s,
all proven, and CP-SAT was left 7.2 s to prove the passes' schedule optimal. From the restarts'
976.11 µs on V1 M = 512 every window of 150 events was proven without gain (46 of 48 in 60 s).
From a greedy schedule it does gain (V1 M = 512: 1012.34 -> 1000.43 µs in 120 s), but far
slower than the passes (981.72 in 24 s). Pass ``window_share`` to use it."""

STATIC_SHARE = 0.25
"""Share of ``time_limit_s`` that the static analysis (one per solve: on the real durations, or
on the tick grid when it rounds nothing; :func:`rounded_analysis`) may spend raising heads and tails
(:func:`moeopt.exact.heads.raised_ends`) before it stops with what it has (sound, possibly
weaker bounds). assumed: a quarter; on the seed-002 kernel graphs of 2-6k events the two
analyses made then (real, then ticks) took 9-21 s in all before they were sped up (7-14 s
after), so a 60 s limit cut none of them, while a 5 s limit (the quick-start study's gap
check) no longer runs 4x over."""

MIN_SOLVE_S = 0.05

BOUND_PHASE_EVENTS = 300
BOUND_PHASE_SHARE = 0.1
BOUND_PHASE_PARAMS = frozenset({"optimize_with_core", "search_branching", "interleave_search"})
"""Graphs of at most ``BOUND_PHASE_EVENTS`` events that CP-SAT has not solved after
``1 − BOUND_PHASE_SHARE`` of its time spend the rest searching from below (sat_parameters.proto
`optimize_with_core`: refute ``makespan ≤ bound``, raise the bound, repeat, keeping what was
learnt), hinted with the best schedule so far. The default search finds good schedules but its
bound hardly moves until the very end (it proves optimality by refuting ``best − 1`` in one go).
On the ten PSPLIB j30 instances it leaves unproven at 2 s, 1 worker, the bound rose from 13 to 8
below the optimum on average (e.g. j3029_6: 68 -> 79, optimum 92); a larger share lifts it more
but costs the proofs that come late (at 30%, 4 of 470 were lost under load), at 10% none was
lost in paired runs. Skipped when the caller chooses the search (``params`` with one of
``BOUND_PHASE_PARAMS``)."""
DESTRUCTIVE_SHARE = 0.5
"""Share of the bound phase's time (graphs of at most ``BOUND_PHASE_EVENTS`` events that CP-SAT
has not solved) given first to the destructive bound of :mod:`moeopt.exact.destructive`
(propagation and the preemptive LP, searched upward from CP-SAT's bound), whose result then
bounds the makespan of the core-based search. On the nine PSPLIB j30 instances CP-SAT leaves
unproven at 2 s, 1 worker, it reaches 2-10 below the optimum (CP-SAT's own bound: 4-12 below)
in 0.4-1.0 CPU s alone; it proves none of them (CP-SAT given ``optimum − 1`` as its makespan
lower bound proved 1 of the 9 in 2 s: the refutation of ``optimum − 1`` is the hard part), so
it only tightens the reported bound. assumed: half; the core search keeps the rest."""
DESTRUCTIVE_MIN_S = 1.0
"""The destructive bound runs only when its share of the bound phase is at least this long.
Measured: it needs 0.4-1.0 CPU s on the nine hard j30 instances; at a 2 s limit (0.1 s of its
share) it made one or two tests and took the time the core search needed: the reported bounds of
those nine fell by 1-5 (paired runs of bench_psplib.py, load 6 on 2 cores)."""
DELAYS_BUDGET = 2_000_000
"""Work allowed for the pairwise energy distances (events² × intervals)."""


class LowerLimitError(InputError):
    """A caller's makespan lower limit is above the makespan of a valid schedule (the hint)."""


def solve_exact(
    graph: EventGraph,
    time_limit_s: float = 10.0,
    workers: int = 1,
    mode: str = "exact",
    hint: Schedule | None = None,
    *,
    params: Mapping[str, Any] | None = None,
    tick_us: float | None = None,
    semaphores: str = "auto",
    makespan_lower_limits: Mapping[str, float] | None = None,
    skip_proven: bool = False,
    symmetry_breaking: bool = True,
    hints: Sequence[Schedule] = (),
    improve_share: float | None = None,
    window_share: float | None = None,
) -> ExactResult:
    """Solve ``graph`` with CP-SAT and return the best valid schedule and a sound lower bound.

    Args:
        graph: any event graph.
        time_limit_s: wall-clock budget of the whole call (seconds, > 0).
        workers: CP-SAT worker threads (≥ 1).
        mode: ``"exact"`` (pool members as optional intervals with one choice, colocation as
            equal site choices) or ``"relaxed"`` (one cumulative per pool, colocation ignored: a
            valid relaxation for large graphs; its schedule comes from the replay, which binds
            pool members itself).
        hint: a valid schedule of ``graph`` (e.g. the greedy's); it sets the horizon and is the
            solution hint. ``None``: the greedy with the default policy is used, when it can
            schedule the graph.
        params: extra CP-SAT parameters (``sat_parameters.proto`` names), applied after
            :data:`DEFAULT_PARAMS`.
        tick_us: force the time grid (default: automatic, see :mod:`moeopt.exact.ticks`).
        semaphores: ``"auto"`` (holding intervals wherever the pairing theorem applies) or
            ``"reservoir"`` (a reservoir for every semaphore; slower, for cross-checks).
        makespan_lower_limits: lower bounds on the makespan that the *caller* proves for every
            schedule of ``graph`` (name -> µs, e.g. an adapter's physical bounds). Each is
            reported like the static bounds (``bounds_us["<name>"]``, possibly
            ``bound_source``) and, rounded down to ticks, restricts the makespan variable:
            sound because the model's optimum is at least ``⌊OPT / tick⌋ ≥ ⌊limit / tick⌋``
            (:mod:`moeopt.exact.model`). A limit above the hint's makespan is not a lower bound
            and is refused.

        skip_proven: when the static bounds (or a caller's limit) already reach the hint's
            makespan, the hint is proven optimal: return it without running CP-SAT
            (``cpsat_status`` ``"NOT_RUN"``, ``solve_s`` 0). Default ``False``: CP-SAT always runs.
        symmetry_breaking: exact mode: value precedence between interchangeable sites
            (:mod:`moeopt.exact.symmetry`; sound, it keeps a relabelling of every schedule).
        hints: more valid schedules of ``graph`` (e.g. the greedy with every policy): with
            ``hint``, the starting points of the improvement below.
        improve_share: share of ``time_limit_s`` spent improving the best of ``hint`` and
            ``hints`` by forward-backward list scheduling (:mod:`moeopt.exact.improve`) before
            CP-SAT (0: none; ``None``: by graph size, see ``IMPROVE_SHARE_SMALL``); it stops
            early when a schedule reaches the best static bound. An improved schedule replaces
            the hint (``best_source`` ``"improved"`` when CP-SAT finds nothing better); a
            schedule reaching a static bound is proven optimal without CP-SAT when
            ``skip_proven``.

        window_share: share of the time left after model building spent re-optimising windows
            of the hint with CP-SAT, the rest of the schedule held (:mod:`moeopt.exact.neighbourhood`),
            before the main solve (0: none; ``None``: by graph size, see ``WINDOW_SHARE_LARGE``);
            it stops early, giving the time back to the main solve, once every window was proven
            without gain. A shorter schedule replaces the hint (``best_source`` ``"window"`` when
            CP-SAT finds nothing better).

    Raises:
        InputError: a bad argument or a hint that is not a valid schedule of ``graph``.
        GraphError: an invalid graph.
    """
    t_begin = time.perf_counter()
    _check_args(time_limit_s, workers, mode, semaphores)
    limits = _check_limits(makespan_lower_limits)
    model_mode: Mode = "exact" if mode == "exact" else "relaxed"
    graph.validate()
    cg = graph.compiled()
    if hint is not None:
        _check_hint(graph, hint)
    else:
        hint = _greedy_hint(graph)
    if improve_share is None:
        improve_share = IMPROVE_SHARE_SMALL if cg.n <= IMPROVE_LARGE_EVENTS else IMPROVE_SHARE_LARGE
    _check_share(improve_share)
    if window_share is None:
        window_share = WINDOW_SHARE_SMALL if cg.n <= IMPROVE_LARGE_EVENTS else WINDOW_SHARE_LARGE
    _check_share(window_share, "window_share")
    for h in hints:
        _check_hint(graph, h)
    # semaphores: pairing theorem where it applies
    pairings, sem_model = semaphore_models(cg, semaphores == "auto")

    starts = [x for x in (hint, *hints) if x is not None]
    improving = bool(starts) and improve_share > 0
    # On a grid that rounds nothing the static analysis on ticks is the one on real durations in
    # other units (energy rounded up to whole ticks, so never weaker but where a fractional bound
    # was kept): run it once, on ticks, and report its bounds in µs (sound by the theorem of
    # moeopt.exact.model). PSPLIB j30 (exact grid): the best static bound is equal or higher on
    # 479/480 (j301_2: 43 for 43.49999997, proven by CP-SAT anyway), and solve_exact's time
    # outside CP-SAT fell 0.13-0.16 -> 0.07 s per instance on the 40 hardest. The grid is known
    # this early when the hint, which sets the horizon, will not be improved.
    tick_static: StaticAnalysis | None = None
    real_static: list[Bound] | None = None
    if hint is not None and not improving:
        early = _grid(cg, hint, tick_us)
        if early.exact:
            tick_static = tick_analysis(
                cg, early, pairings, deadline=time.perf_counter() + STATIC_SHARE * time_limit_s
            )
            real_static = [Bound(b.source, early.to_us(b.value), b.method) for b in tick_static.bounds]
    real_analysis: StaticAnalysis | None = None
    if real_static is None:
        deadline = time.perf_counter() + STATIC_SHARE * time_limit_s
        real_analysis = static_analysis(cg, pairings, cg.dur, cg.preds, cg.succs, deadline=deadline)
        real_static = real_analysis.bounds
    real_bounds = real_static + [Bound(name, value) for name, value in limits.items()]
    if hint is not None:
        _check_limits_below(limits, hint)
    # better starting schedule: forward-backward passes, until the time share is spent or a
    # static bound (or a caller's limit) is reached
    hint_source = "hint"
    if improving:
        from moeopt.exact.improve import Improver

        target = best_bound(real_bounds).value
        better = Improver(graph).improve(starts, improve_share * time_limit_s, target_us=target)
        if hint is None or better.makespan_us < hint.makespan_us:
            _check_limits_below(limits, better)
            hint = better
            hint_source = "improved"
    horizon_us = _horizon_us(cg, hint)
    grid = _grid(cg, hint, tick_us)
    horizon = grid.down(horizon_us) if hint is not None else math.ceil(horizon_us / grid.tick_us)

    if skip_proven and hint is not None:
        static = best_bound(real_bounds)
        if static.value >= hint.makespan_us or same_time(static.value, hint.makespan_us):
            return _proven_by_static(
                hint, real_bounds, static, model_mode, workers, grid, horizon, cg.sem_names, sem_model,
                t_begin, hint_source,
            )

    if tick_static is None and real_analysis is not None:
        tick_static = rounded_analysis(real_analysis, grid)  # no second analysis (see there)
    inst = tick_instance(
        cg, grid, model_mode, horizon, pairings, sem_model, DELAYS_BUDGET,
        deadline=time.perf_counter() + STATIC_SHARE * time_limit_s,
        static=tick_static,  # on this same grid, or the real analysis rounded down onto it
    )
    if model_mode == "exact" and symmetry_breaking:
        inst.site_classes = site_classes(cg)
    if limits:
        inst.lower = min(horizon, max(inst.lower, max(grid.down(v) for v in limits.values())))
    model = ExactModel(inst)
    if hint is not None:
        model.add_hint(hint)

    solver = cp_model.CpSolver()
    defaults = dict(DEFAULT_PARAMS)
    if model.num_intervals > LARGE_MODEL_INTERVALS:
        defaults.update(LARGE_MODEL_PARAMS)
    if model.largest_reservoir > RESERVOIR_EXPAND_LIMIT:
        defaults.update(LARGE_RESERVOIR_PARAMS)
    main_defaults = {**defaults, **SMALL_MODEL_PARAMS} if cg.n <= SMALL_MODEL_EVENTS else defaults
    used = _apply_params(solver, workers, main_defaults, params)
    reserve = REPLAY_RESERVE_S + REPLAY_RESERVE_PER_EVENT_S * cg.n
    left_s = time_limit_s - (time.perf_counter() - t_begin) - reserve
    if hint is not None and window_share > 0 and left_s * window_share >= MIN_WINDOW_S:
        # better hint: CP-SAT on windows of it, the rest of the schedule held (module constant)
        from moeopt.exact.neighbourhood import WindowSearch

        def window_solver(seconds: float) -> cp_model.CpSolver:
            sub = cp_model.CpSolver()
            _apply_params(sub, workers, defaults, params)
            sub.parameters.max_time_in_seconds = seconds
            return sub

        search = WindowSearch(model, graph, window_solver, caller_params=tuple(params or {}))
        target = best_bound(real_bounds).value
        better = search.run(hint, time.perf_counter() + window_share * left_s, target_us=target)
        model.cp.clear_hints()
        model.add_hint(better)
        if better.makespan_us < hint.makespan_us:
            hint = better
            hint_source = "window"
    budget = max(MIN_SOLVE_S, time_limit_s - (time.perf_counter() - t_begin) - reserve)
    solver.parameters.max_time_in_seconds = budget
    used["max_time_in_seconds"] = budget

    bound_phase = (
        cg.n <= BOUND_PHASE_EVENTS
        and hint is not None
        and not any(k in BOUND_PHASE_PARAMS for k in (params or {}))
    )
    if bound_phase:
        solver.parameters.max_time_in_seconds = (1.0 - BOUND_PHASE_SHARE) * budget

    t_solve = time.perf_counter()
    code = solver.solve(model.cp)
    cpsat_status = solver.status_name(code)

    # schedule: replay the solver's, keep the better of it and the hint
    best: Schedule | None = hint
    best_source: str | None = hint_source if hint is not None else None
    replay_error: str | None = None
    cpsat_best_us: float | None = None

    def take(solver: cp_model.CpSolver, code: Any) -> None:
        nonlocal best, best_source, replay_error, cpsat_best_us
        if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return
        sol = model.solution(solver)
        us = grid.to_us(sol.objective)
        cpsat_best_us = us if cpsat_best_us is None else min(cpsat_best_us, us)
        try:
            replayed = replay(cg, sol.start, sol.end, sol.binding)
            validate_schedule(graph, replayed)
        except (ReplayError, ScheduleError) as exc:
            replay_error = str(exc)
        else:
            if best is None or replayed.makespan_us <= best.makespan_us or same_time(
                replayed.makespan_us, best.makespan_us
            ):
                best, best_source = replayed, "cpsat"

    take(solver, code)
    cp_bound = solver.best_objective_bound
    left = budget - (time.perf_counter() - t_solve)
    destructive: Bound | None = None
    if bound_phase and code in (cp_model.FEASIBLE, cp_model.UNKNOWN) and left >= MIN_SOLVE_S:
        # part of the bound phase: the destructive bound (module constant), from CP-SAT's bound
        if DESTRUCTIVE_SHARE * left >= DESTRUCTIVE_MIN_S:
            destructive = _destructive(inst, grid, cp_bound, best, DESTRUCTIVE_SHARE * left)
        if destructive is not None:
            model.cp.add(model.makespan >= grid.down(destructive.value))
        left = budget - (time.perf_counter() - t_solve)
    if bound_phase and code in (cp_model.FEASIBLE, cp_model.UNKNOWN) and left >= MIN_SOLVE_S:
        # the rest of the time: core-based search from below for the bound (module constant)
        core = cp_model.CpSolver()
        _apply_params(core, workers, {**defaults, "optimize_with_core": True}, params)
        core.parameters.max_time_in_seconds = left
        model.cp.clear_hints()
        if best is not None:
            model.add_hint(best)
        code2 = core.solve(model.cp)
        take(core, code2)
        used["optimize_with_core"] = True  # in the bound phase only
        if code2 in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            code, cpsat_status = code2, core.status_name(code2)
        core_bound = core.best_objective_bound
        if math.isfinite(core_bound):  # two bounds of one tick model: the larger holds
            cp_bound = max(cp_bound, core_bound) if math.isfinite(cp_bound) else core_bound
    solve_s = time.perf_counter() - t_solve

    # bounds
    bounds: list[Bound] = list(real_bounds)
    if destructive is not None:
        bounds.append(destructive)
    message = ""
    if code == cp_model.INFEASIBLE:
        bounds.append(Bound("cpsat", grid.to_us(horizon + 1)))
        message = (
            f"no schedule has a makespan within the horizon of {grid.to_us(horizon):g} µs "
            f"(the greedy found none either)"
        )
    elif code in (cp_model.OPTIMAL, cp_model.FEASIBLE, cp_model.UNKNOWN):
        if math.isfinite(cp_bound):  # the bound is a whole number of ticks, as a float
            bounds.append(Bound("cpsat", grid.to_us(max(0, math.floor(cp_bound + 1e-6)))))
    elif code == cp_model.MODEL_INVALID:
        message = f"CP-SAT rejected the model: {model.cp.validate()}"
    won = best_bound(bounds)
    lower = won.value
    if best is not None and lower > best.makespan_us and same_time(lower, best.makespan_us):
        lower = best.makespan_us  # float round-off of tick arithmetic, never more

    status = _status(code, None if best is None else best.makespan_us, lower)
    if status is SolveStatus.UNKNOWN and replay_error:
        message = "the solver's schedule could not be replayed with the real durations"
    return ExactResult(
        status=status,
        lower_bound_us=lower,
        best_us=None if best is None else best.makespan_us,
        schedule=best,
        solve_s=solve_s,
        mode=model_mode,
        params_used=used,
        bound_source=won.source,
        bounds_us={b.source: b.value for b in bounds},
        cpsat_status=cpsat_status,
        cpsat_bound_us=next((b.value for b in bounds if b.source == "cpsat"), 0.0),
        cpsat_best_us=cpsat_best_us,
        best_source=best_source,
        replay_error=replay_error,
        tick_us=grid.tick_us,
        durations_rounded=not grid.exact,
        horizon_us=grid.to_us(horizon),
        semaphore_models=dict(zip(cg.sem_names, sem_model)),
        total_s=time.perf_counter() - t_begin,
        message=message,
        symmetric_sites=tuple(len(sc.sites) for sc in inst.site_classes),
        bound_methods={b.source: b.method for b in bounds if b.method},
    )


# ---------------------------------------------------------------------- helpers
def rounded_analysis(real: StaticAnalysis, grid: TimeGrid) -> StaticAnalysis:
    """The static analysis on real µs (``real``) as the tick model's heads, tails and bounds:
    every value rounded down onto ``grid``. It stands in for a second analysis on the rounded
    durations (:func:`moeopt.exact.model.tick_analysis`), which on the kernel graphs of thousands
    of events cost as much again as the first (measured on the seed-002 graph with M = 512,
    3,480 events: 8.3 CPU s real, then 10.1 CPU s on ticks, load 3 on 2 cores) and left CP-SAT
    that much less of the time limit.

    *Why it is sound.* The bounds CP-SAT reports are sound because every real schedule maps to a
    tick schedule of the model, its *image* ``S_i = ⌊s_i⌋`` (:mod:`moeopt.exact.model`), whose
    makespan is ``⌊max e_i⌋``; a bound on the images is a bound on the real optimum. A real head
    ``h_i ≤ s_i`` gives ``S_i = ⌊s_i⌋ ≥ ⌊h_i⌋``; a real tail ``t_i`` (``s_i + t_i ≤`` makespan
    ``M``) gives ``S_i + ⌊t_i⌋ ≤ ⌊s_i + t_i⌋ ≤ ⌊M⌋``; a real bound ``B ≤ M`` gives
    ``⌊B⌋ ≤ ⌊M⌋``. So the start domains ``[⌊h_i⌋, H − ⌊t_i⌋]`` and the makespan's lower end
    ``⌊B⌋`` keep the image of every real schedule of makespan at most the horizon ``H`` (the
    hint's ``⌊M⌋``), the optimal ones included: the model restricted to them still has the
    image of an optimal schedule, and CP-SAT's bound stays at most ``⌊OPT⌋``. (Floors in ticks:
    :meth:`TimeGrid.down`.) ∎ The rounded real values are at least the tick analysis's wherever
    the two differ only by the rounding of durations (a sum of floors is at most the floor of
    the sum); only its energy terms rounded up to whole ticks can be a tick higher.
    """
    return StaticAnalysis(
        [Bound(b.source, float(grid.down(b.value)), b.method) for b in real.bounds],
        [float(grid.down(h)) for h in real.head],
        [float(grid.down(t)) for t in real.tail],
    )


def _destructive(
    inst: TickInstance, grid: TimeGrid, cp_bound: float, best: Schedule | None, seconds: float
) -> Bound | None:
    """The destructive bound (:mod:`moeopt.exact.destructive`) above the larger of the static
    tick bound and CP-SAT's bound, below the best schedule, within ``seconds``; ``None`` when it
    does not apply or raises nothing. Sound: every makespan it refutes has no schedule of the
    tick model (a relaxation, :mod:`moeopt.exact.model`), so the tick bound times ``tick_us`` is
    at most the real optimum."""
    from moeopt.exact.destructive import applies, destructive_bound

    if best is None or seconds <= 0 or not applies(inst):
        return None
    lower = inst.lower
    if math.isfinite(cp_bound):
        lower = max(lower, math.floor(cp_bound + 1e-6))
    upper = grid.down(best.makespan_us)
    got = destructive_bound(inst, lower, upper, deadline=time.perf_counter() + seconds)
    if got.bound <= lower:
        return None
    return Bound("destructive", grid.to_us(got.bound), "lp")


def _proven_by_static(
    hint: Schedule,
    bounds: list[Bound],
    won: Bound,
    mode: Mode,
    workers: int,
    grid: TimeGrid,
    horizon: int,
    sem_names: Sequence[str],
    sem_model: Sequence[SemModel],
    t_begin: float,
    hint_source: str,
) -> ExactResult:
    """The hint reaches a static bound: it is optimal, no solve needed."""
    return ExactResult(
        status=SolveStatus.OPTIMAL,
        lower_bound_us=hint.makespan_us,  # the bound reaches it (up to round-off): never more
        best_us=hint.makespan_us,
        schedule=hint,
        solve_s=0.0,
        mode=mode,
        params_used={"num_workers": workers},
        bound_source=won.source,
        bounds_us={b.source: b.value for b in bounds},
        cpsat_status="NOT_RUN",
        cpsat_bound_us=0.0,
        cpsat_best_us=None,
        best_source=hint_source,
        replay_error=None,
        tick_us=grid.tick_us,
        durations_rounded=not grid.exact,
        horizon_us=grid.to_us(horizon),
        semaphore_models=dict(zip(sem_names, sem_model)),
        total_s=time.perf_counter() - t_begin,
        message=f"the hint reaches the {won.source} bound: proven optimal without CP-SAT",
        bound_methods={b.source: b.method for b in bounds if b.method},
    )


def _horizon_us(cg: CompiledGraph, hint: Schedule | None) -> float:
    """The makespan no optimal schedule exceeds: the hint's, or without one every event in
    series, each after its longest λ."""
    if hint is not None:
        return hint.makespan_us
    return sum(cg.dur) + sum(max((lam for _p, lam in p), default=0.0) for p in cg.preds)


def _grid(cg: CompiledGraph, hint: Schedule | None, tick_us: float | None) -> TimeGrid:
    """The tick grid of ``cg`` for the horizon of :func:`_horizon_us`."""
    lams = [lam for p in cg.preds for _i, lam in p]
    return choose_grid(list(cg.dur) + lams, _horizon_us(cg, hint), tick_us)


def _check_limits_below(limits: Mapping[str, float], schedule: Schedule) -> None:
    """A caller's limit above the makespan of a valid schedule is not a lower bound."""
    for name, value in limits.items():
        if value > schedule.makespan_us and not same_time(value, schedule.makespan_us):
            raise LowerLimitError(
                f"makespan_lower_limits[{name!r}] = {value:g} µs exceeds the makespan "
                f"{schedule.makespan_us:g} µs of a valid schedule (the hint): it is not a lower bound"
            )


def _check_share(share: Any, name: str = "improve_share") -> None:
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share < 1:
        raise InputError(f"{name} must be a number in [0, 1), got {share!r}")


def _check_limits(limits: Any) -> dict[str, float]:
    if limits is None:
        return {}
    if not isinstance(limits, Mapping):
        raise InputError(f"makespan_lower_limits must be a mapping name -> µs, got {limits!r}")
    out: dict[str, float] = {}
    for name, value in limits.items():
        if not isinstance(name, str) or not name:
            raise InputError(f"makespan_lower_limits: names must be non-empty strings, got {name!r}")
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value < 0
        ):
            raise InputError(
                f"makespan_lower_limits[{name!r}] must be a finite number of µs >= 0, got {value!r}"
            )
        out[name] = float(value)
    return out


def _status(code: Any, best_us: float | None, lower_us: float) -> SolveStatus:
    """The one place CP-SAT's status becomes moeopt's, for the real-valued instance.

    CP-SAT's ``OPTIMAL`` is about the rounded tick model; the real instance is proven optimal
    only when a validated schedule reaches the lower bound.
    """
    if code == cp_model.MODEL_INVALID:
        return SolveStatus.MODEL_INVALID
    if best_us is not None:
        return SolveStatus.OPTIMAL if same_time(best_us, lower_us) else SolveStatus.FEASIBLE
    if code == cp_model.INFEASIBLE:
        return SolveStatus.INFEASIBLE
    return SolveStatus.UNKNOWN


def _check_args(time_limit_s: Any, workers: Any, mode: Any, semaphores: Any) -> None:
    if (
        isinstance(time_limit_s, bool)
        or not isinstance(time_limit_s, (int, float))
        or not math.isfinite(time_limit_s)
        or time_limit_s <= 0
    ):
        raise InputError(f"time_limit_s must be a finite number of seconds > 0, got {time_limit_s!r}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InputError(f"workers must be an integer >= 1, got {workers!r}")
    if mode not in MODES:
        raise InputError(
            f"mode must be one of {', '.join(MODES)}, got {mode!r}{did_you_mean(str(mode), MODES)}"
        )
    if semaphores not in SEMAPHORE_MODELS:
        raise InputError(
            f"semaphores must be one of {', '.join(SEMAPHORE_MODELS)}, got {semaphores!r}"
            f"{did_you_mean(str(semaphores), SEMAPHORE_MODELS)}"
        )


def _check_hint(graph: EventGraph, hint: Any) -> None:
    if not isinstance(hint, Schedule):
        raise InputError(
            f"hint must be a Schedule (e.g. from moeopt.schedule) or None, got {type(hint).__name__}"
        )
    try:
        validate_schedule(graph, hint)
    except ScheduleError as exc:
        more = len(exc.violations) - 1
        raise InputError(
            f"hint is not a valid schedule of this graph: {exc.violations[0]}"
            + (f" (and {more} more violation(s))" if more else "")
        ) from None


def _greedy_hint(graph: EventGraph) -> Schedule | None:
    try:
        s = greedy_schedule(graph)
        validate_schedule(graph, s)
    except (SchedulingError, ScheduleError):
        return None
    return s


def parameter_names() -> list[str]:
    """Every CP-SAT parameter name ``params`` accepts."""
    p = cp_model.CpSolver().parameters
    return sorted(
        x
        for x in dir(p)
        if not x.startswith("_") and not callable(getattr(p, x)) and x not in RESERVED_PARAMS
    )


def _apply_params(
    solver: cp_model.CpSolver,
    workers: int,
    defaults: Mapping[str, Any],
    params: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """Set moeopt's defaults, then the caller's parameters; return everything set."""
    if params is not None and not isinstance(params, Mapping):
        raise InputError(f"params must be a mapping of CP-SAT parameter names to values, got {params!r}")
    p = solver.parameters
    used: dict[str, Any] = {"num_workers": workers}
    p.num_workers = workers
    # moeopt's own defaults that the installed OR-Tools does not know are left out (a recent
    # field such as use_new_integer_conflict_resolution on an older CP-SAT); the caller's are
    # checked below
    own = {k: v for k, v in defaults.items() if hasattr(p, k) and not callable(getattr(p, k))}
    merged = {**own, **dict(params or {})}
    for key, value in merged.items():
        if key in RESERVED_PARAMS:
            raise InputError(
                f"CP-SAT parameter {key!r} is set through solve_exact's {RESERVED_PARAMS[key]!r} argument"
            )
        known = isinstance(key, str) and not key.startswith("_") and hasattr(p, key)
        if not known or callable(getattr(p, key)):
            raise InputError(
                f"unknown CP-SAT parameter {key!r}{did_you_mean(str(key), parameter_names())} "
                f"(see ortools/sat/sat_parameters.proto)"
            )
        current = getattr(p, key)
        is_enum = hasattr(type(current), "__members__")
        try:
            if isinstance(value, str) and is_enum:
                members = type(current).__members__
                if value not in members:
                    raise ValueError(f"allowed: {', '.join(members)}")
                value = members[value]
            elif isinstance(value, int) and not isinstance(value, bool) and is_enum:
                value = type(current)(value)
            elif isinstance(current, bool) and not isinstance(value, bool):
                raise TypeError(f"expected true/false, got {type(value).__name__}")
            if hasattr(current, "extend"):  # a repeated field (e.g. subsolvers): a list of values
                if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
                    raise TypeError(f"expected a list, got {type(value).__name__}")
                current.clear()
                try:
                    current.extend(list(value))
                except TypeError:
                    raise TypeError("an element has the wrong type for this field") from None
            else:
                setattr(p, key, value)
        except (TypeError, ValueError) as exc:
            raise InputError(f"CP-SAT parameter {key} = {value!r} is not accepted: {exc}") from None
        used[key] = value
    return used
