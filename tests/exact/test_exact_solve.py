"""solve_exact on small hand-made graphs: optimum, bound, status, replay, modes, soundness of rounding.

Every returned schedule is re-checked with the independent validator, and its makespan is
recomputed from the schedule itself (never trusted from the result).
"""

from __future__ import annotations

import json
import math

import pytest

import moeopt as m
from moeopt.exact import ExactResult, SolveStatus, solve_exact

TL = 10.0  # generous: these graphs solve in milliseconds; the limit only guards a hang


def _check(g: m.EventGraph, x: ExactResult) -> None:
    """What every result promises: a valid schedule whose own makespan is best_us, above the bound."""
    assert x.schedule is not None
    m.validate_schedule(g, x.schedule)
    assert max(x.schedule.end_us.values(), default=0.0) == pytest.approx(x.best_us)
    assert x.best_us is not None
    assert x.lower_bound_us <= x.best_us + 1e-9


# ---------------------------------------------------------------------- pools
def _three_on_two_cores() -> m.EventGraph:
    g = m.EventGraph(pools={"AIC": ["core0.AIC", "core1.AIC"]})
    for k in range(3):
        g.add(m.Event(f"mm{k}", resources=["AIC:*"], duration_us=2.0))
    return g


def test_pool_optimum_beats_energy_bound_and_is_proven() -> None:
    # Three 2-µs events on a pool of two cores. Longest path 2, pool energy 3 × 2 / 2 = 3; but two
    # run side by side and the third after them: the optimum is 4. The pool seen as two machines
    # proves it (one core runs two of the three: 2 + 2), and so does CP-SAT.
    g = _three_on_two_cores()
    x = solve_exact(g, TL, 1)
    _check(g, x)
    assert x.status is SolveStatus.OPTIMAL
    assert x.proven_optimal
    assert x.best_us == pytest.approx(4.0)
    assert x.lower_bound_us == pytest.approx(4.0)
    assert x.bound_source == "pool:AIC"
    assert x.bounds_us["longest_path"] == pytest.approx(2.0)
    assert x.bounds_us["pool:AIC"] == pytest.approx(4.0)
    assert x.bounds_us["cpsat"] == pytest.approx(4.0)
    assert x.mode == "exact"
    assert x.best_source in ("cpsat", "hint")
    assert sorted(x.schedule.binding.values()).count("core0.AIC") in (1, 2)  # type: ignore[union-attr]


def test_precedence_lambda_and_fixed_resource() -> None:
    # load (core0.AIV0, 1.5) -λ 0.2-> mm (AIC:*, 3.0) -λ 0-> act (core0.AIV0, 1.0):
    # the chain is 1.5 + 0.2 + 3.0 + 1.0 = 5.7 and nothing else competes: optimum 5.7.
    g = m.EventGraph(pools={"AIC": ["core0.AIC", "core1.AIC"]})
    g.add(m.Event("load", resources=["core0.AIV0"], duration_us=1.5))
    g.add(m.Event("mm", resources=["AIC:*"], deps={"load": 0.2}, duration_us=3.0))
    g.add(m.Event("act", resources=["core0.AIV0"], deps={"mm": 0.0}, duration_us=1.0))
    x = solve_exact(g, TL, 1)
    _check(g, x)
    assert x.status is SolveStatus.OPTIMAL
    assert x.best_us == pytest.approx(5.7)
    assert x.lower_bound_us == pytest.approx(5.7)
    assert x.tick_us == pytest.approx(0.1)
    assert not x.durations_rounded


# ---------------------------------------------------------------------- semaphores
def _two_buffers(capacity: int) -> m.EventGraph:
    # p_k takes a slot at its start, c_k (its successor) frees it at its end; every event 1 µs.
    g = m.EventGraph(semaphores={"slot": capacity})
    for k in range(2):
        g.add(m.Event(f"p{k}", acquires={"slot": 1}, duration_us=1.0))
        g.add(m.Event(f"c{k}", deps={f"p{k}": 0.0}, releases={"slot": 1}, duration_us=1.0))
    return g


@pytest.mark.parametrize("semaphores", ["auto", "reservoir"])
def test_holding_intervals_equal_reservoir(semaphores: str) -> None:
    # One slot: the holdings [p0, c0) and [p1, c1) last 2 µs each and cannot overlap: optimum 4.
    # The semaphore's energy bound says the same (2 + 2) / 1 = 4. Holding intervals (pairing
    # theorem) and the reservoir must agree.
    g = _two_buffers(1)
    x = solve_exact(g, TL, 1, semaphores=semaphores)
    _check(g, x)
    assert x.semaphore_models == {"slot": "holding" if semaphores == "auto" else "reservoir"}
    assert x.status is SolveStatus.OPTIMAL
    assert x.best_us == pytest.approx(4.0)
    assert x.cpsat_bound_us == pytest.approx(4.0)
    if semaphores == "auto":
        assert x.bounds_us["semaphore:slot"] == pytest.approx(4.0)


def test_semaphore_that_cannot_bind_is_dropped() -> None:
    # Two slots for two holdings: no waiting, optimum = longest path = 2.
    g = _two_buffers(2)
    x = solve_exact(g, TL, 1)
    _check(g, x)
    assert x.semaphore_models == {"slot": "dropped"}
    assert x.best_us == pytest.approx(2.0)


def test_unreleased_units_make_the_graph_infeasible() -> None:
    # One slot, two events each take it and never give it back: no schedule exists. The greedy
    # deadlocks (no hint), CP-SAT proves the model infeasible within its horizon.
    g = m.EventGraph(semaphores={"slot": 1})
    g.add(m.Event("a", acquires={"slot": 1}, duration_us=1.0))
    g.add(m.Event("b", acquires={"slot": 1}, duration_us=1.0))
    x = solve_exact(g, TL, 1)
    assert x.status is SolveStatus.INFEASIBLE
    assert x.schedule is None
    assert x.best_us is None
    assert "no schedule" in x.message
    # horizon = serial sum 2 µs; infeasible within it means every schedule is longer: bound 3.
    assert x.lower_bound_us == pytest.approx(3.0)


# ---------------------------------------------------------------------- exact vs relaxed
def _colocated_pair() -> m.EventGraph:
    # x and y both need an AIC and must share a site; each site has one AIC, so they serialize.
    g = m.EventGraph(pools={"AIC": ["s0.AIC", "s1.AIC"]})
    g.add(m.Event("x", resources=["AIC:*"], duration_us=3.0))
    g.add(m.Event("y", resources=["AIC:*"], colocate_with="x", duration_us=3.0))
    return g


def test_relaxed_bound_is_below_exact_bound() -> None:
    # exact: same site -> same AIC -> 3 + 3 = 6, proven.
    # relaxed: colocation ignored, the pool is a cumulative of capacity 2 -> both at once -> 3.
    # Its replay keeps the colocation (it binds members itself), so its schedule is 6 as well.
    g = _colocated_pair()
    ex = solve_exact(g, TL, 1, "exact")
    rx = solve_exact(g, TL, 1, "relaxed")
    _check(g, ex)
    _check(g, rx)
    assert ex.lower_bound_us == pytest.approx(6.0)
    assert ex.status is SolveStatus.OPTIMAL
    assert rx.lower_bound_us == pytest.approx(3.0)
    assert rx.status is SolveStatus.FEASIBLE
    assert rx.lower_bound_us < ex.lower_bound_us
    assert rx.best_us == pytest.approx(6.0)
    assert rx.mode == "relaxed"


# ---------------------------------------------------------------------- rounding soundness
def test_thirds_round_down_to_a_sound_bound() -> None:
    # Three 2/3-µs events in a chain: the optimum is exactly 2 µs. No grid of 1..0.001 µs holds
    # 2/3, so the model uses 1 ns ticks rounded down: 666 ticks each, 1998 ticks = 1.998 µs.
    # Rounding to nearest (667) would claim 2.001 µs > the optimum, up (667) the same. The real
    # longest path, 2 µs, rounded down to 2000 ticks, is the makespan's lower end in the model
    # (solve.rounded_analysis), so CP-SAT's best is 2000 ticks, not the 1998 of the durations.
    g = m.EventGraph()
    prev: dict[str, float] = {}
    for k in range(3):
        g.add(m.Event(f"e{k}", deps=prev, duration_us=2.0 / 3.0))
        prev = {f"e{k}": 0.0}
    x = solve_exact(g, TL, 1)
    _check(g, x)
    assert x.durations_rounded
    assert x.tick_us == pytest.approx(0.001)
    assert x.cpsat_best_us == pytest.approx(2.0)
    assert x.cpsat_bound_us <= 2.0
    assert x.lower_bound_us <= 2.0 + 1e-12
    assert x.best_us == pytest.approx(2.0)  # the replay uses the real durations
    assert x.status is SolveStatus.OPTIMAL  # the real longest path (2.0) closes the gap


def test_coarse_grid_rounds_down_not_up() -> None:
    # Two 0.6-µs events on one exclusive resource, forced onto 1-µs ticks: optimum 1.2 µs.
    # Down: 0 + 0 ticks, bound 0. Nearest or up would give 1 + 1 = 2 µs > 1.2: unsound.
    g = m.EventGraph()
    g.add(m.Event("a", resources=["c0.X"], duration_us=0.6))
    g.add(m.Event("b", resources=["c0.X"], duration_us=0.6))
    x = solve_exact(g, TL, 1, tick_us=1.0)
    _check(g, x)
    assert x.cpsat_bound_us <= 1.2
    assert x.lower_bound_us <= 1.2 + 1e-12
    assert x.best_us == pytest.approx(1.2)


def _ceiling_graph() -> m.EventGraph:
    # S1 (1 free unit): rel gives a unit back at its end, acq (after p, 2 µs) takes one; the
    # unit may not come back before it is taken, so end(rel) >= start(acq) >= 2.
    # S2 (1 free unit): rel takes a unit at its start, y gives one back at its end, so
    # start(rel) <= end(y). z (10 µs) follows y.
    # Real optimum: rel on [0.4, 2.0) (1.6 µs), y on [0, 0.4), z on [0.4, 10.4): 10.4 µs.
    g = m.EventGraph(semaphores={"S1": 1, "S2": 1})
    g.add(m.Event("p", duration_us=2.0))
    g.add(m.Event("acq", deps={"p": 0.0}, acquires={"S1": 1}, duration_us=0.0))
    g.add(m.Event("rel", releases={"S1": 1}, acquires={"S2": 1}, duration_us=1.6))
    g.add(m.Event("y", releases={"S2": 1}, duration_us=0.4))
    g.add(m.Event("z", deps={"y": 0.0}, duration_us=10.0))
    return g


def _ceiling_optimum(g: m.EventGraph) -> m.Schedule:
    times = {"p": (0.0, 2.0), "acq": (2.0, 2.0), "rel": (0.4, 2.0), "y": (0.0, 0.4), "z": (0.4, 10.4)}
    s = m.Schedule(
        start_us={e: t[0] for e, t in times.items()},
        end_us={e: t[1] for e, t in times.items()},
        resources=dict.fromkeys(times, ()),
    )
    m.validate_schedule(g, s)
    return s


def test_reservoir_releases_get_flexible_sizes() -> None:
    # On 1-µs ticks with fixed rounded-down sizes, rel would last 1 tick: end(rel) >= 2 forces
    # start(rel) >= 1, so end(y) >= 1 and z ends at >= 11 ticks = 11 µs > 10.4: an unsound bound.
    # Releasers of reservoir semaphores get a size in [floor, floor + 1] ticks instead: rel on
    # [0, 2), y on [0, 0), z on [0, 10) -> the tick optimum is 10 <= 10.4.
    g = _ceiling_graph()
    x = solve_exact(g, TL, 1, hint=_ceiling_optimum(g), tick_us=1.0)
    assert x.semaphore_models == {"S1": "reservoir", "S2": "reservoir"}
    assert x.cpsat_status == "OPTIMAL"
    assert x.cpsat_best_us == pytest.approx(10.0)
    assert x.cpsat_bound_us <= 10.4
    assert x.lower_bound_us == pytest.approx(10.4)  # the real longest path y -> z
    _check(g, x)


def test_failed_replay_is_reported_and_never_returned() -> None:
    # The tick optimum above puts y (end 0) first; replayed with y's real 0.4 µs, y gives its S2
    # unit back before rel has taken one: S2 would hold 2 free units > capacity 1. The replay is
    # refused; with a hint the hint is returned, without one (the greedy cannot schedule this
    # graph either) there is no schedule at all.
    g = _ceiling_graph()
    with_hint = solve_exact(g, TL, 1, hint=_ceiling_optimum(g), tick_us=1.0)
    assert with_hint.replay_error is not None
    assert "capacity" in with_hint.replay_error
    assert with_hint.best_source == "hint"
    _check(g, with_hint)
    assert with_hint.status is SolveStatus.OPTIMAL  # hint 10.4 = longest-path bound 10.4

    alone = solve_exact(g, TL, 1, tick_us=1.0)
    assert alone.replay_error is not None
    assert alone.schedule is None
    assert alone.best_us is None
    assert alone.status is SolveStatus.UNKNOWN
    assert alone.lower_bound_us <= 10.4 + 1e-12


# ---------------------------------------------------------------------- hint and result
def test_hint_sets_horizon_and_is_never_beaten_by_worse() -> None:
    g = _three_on_two_cores()
    greedy = m.schedule(g)
    x = solve_exact(g, TL, 1, hint=greedy)
    _check(g, x)
    assert x.horizon_us == pytest.approx(greedy.makespan_us)
    assert x.best_us is not None
    assert x.best_us <= greedy.makespan_us


def test_empty_graph() -> None:
    x = solve_exact(m.EventGraph(), TL, 1)
    assert x.status is SolveStatus.OPTIMAL
    assert x.best_us == 0.0
    assert x.lower_bound_us == 0.0


def test_result_is_json_ready_and_records_parameters() -> None:
    x = solve_exact(_three_on_two_cores(), TL, 1, params={"random_seed": 7, "search_branching": "FIXED_SEARCH"})
    d = x.to_dict()
    json.dumps(d)
    assert d["status"] == "optimal"
    assert str(x.status) == "optimal"
    assert d["params_used"]["random_seed"] == 7
    assert d["params_used"]["num_workers"] == 1
    assert d["params_used"]["linearization_level"] == 0  # moeopt's default preset
    assert 0 < d["params_used"]["max_time_in_seconds"] <= TL
    assert x.total_s >= x.solve_s >= 0


# ---------------------------------------------------------------------- bad input
def test_bad_arguments_name_field_value_and_allowed() -> None:
    g = _three_on_two_cores()
    with pytest.raises(m.InputError, match=r"mode must be one of exact, relaxed, got 'exakt' \(did you mean 'exact'\?\)"):
        solve_exact(g, TL, 1, "exakt")
    with pytest.raises(m.InputError, match=r"time_limit_s must be a finite number of seconds > 0, got 0"):
        solve_exact(g, 0, 1)
    with pytest.raises(m.InputError, match=r"workers must be an integer >= 1, got 0"):
        solve_exact(g, TL, 0)
    with pytest.raises(m.InputError, match=r"tick_us must be a finite number of µs > 0, got -1"):
        solve_exact(g, TL, 1, tick_us=-1)


def test_bad_parameters_are_named_with_suggestions() -> None:
    g = _three_on_two_cores()
    with pytest.raises(m.InputError, match=r"unknown CP-SAT parameter 'linearisation_level' \(did you mean 'linearization_level'"):
        solve_exact(g, TL, 1, params={"linearisation_level": 2})
    with pytest.raises(m.InputError, match=r"'num_workers' is set through solve_exact's 'workers' argument"):
        solve_exact(g, TL, 1, params={"num_workers": 4})
    with pytest.raises(m.InputError, match=r"CP-SAT parameter search_branching = 'FIXED' is not accepted: allowed: "):
        solve_exact(g, TL, 1, params={"search_branching": "FIXED"})
    with pytest.raises(m.InputError, match=r"CP-SAT parameter use_lns = 3 is not accepted: expected true/false"):
        solve_exact(g, TL, 1, params={"use_lns": 3})
    # a repeated field takes a list of its values (it had been an AttributeError traceback)
    with pytest.raises(m.InputError, match=r"CP-SAT parameter subsolvers = 'core' is not accepted: expected a list"):
        solve_exact(g, TL, 1, params={"subsolvers": "core"})
    with pytest.raises(m.InputError, match=r"subsolvers = \['core', 1\] is not accepted: an element has the wrong"):
        solve_exact(g, TL, 1, params={"subsolvers": ["core", 1]})


def test_repeated_parameters_take_a_list() -> None:
    x = solve_exact(_three_on_two_cores(), TL, 1, params={"subsolvers": ["default_lp"]})
    assert x.params_used["subsolvers"] == ["default_lp"]
    assert x.status is SolveStatus.OPTIMAL


def test_an_own_default_the_installed_cpsat_lacks_is_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    # moeopt's defaults may name a field newer than the user's OR-Tools (>= 9.10 is allowed):
    # such a default is skipped, while the same unknown name from the caller is still an error
    import moeopt.exact.solve as solve

    monkeypatch.setattr(solve, "DEFAULT_PARAMS", {**solve.DEFAULT_PARAMS, "a_field_from_the_future": True})
    x = solve_exact(_three_on_two_cores(), TL, 1)
    assert x.status is SolveStatus.OPTIMAL
    assert "a_field_from_the_future" not in x.params_used
    with pytest.raises(m.InputError, match=r"unknown CP-SAT parameter 'a_field_from_the_future'"):
        solve_exact(_three_on_two_cores(), TL, 1, params={"a_field_from_the_future": True})


def test_invalid_hint_is_refused_with_the_violation() -> None:
    g = _three_on_two_cores()
    good = m.schedule(g)
    bad = m.Schedule(
        start_us={**good.start_us, "mm2": 0.0},
        end_us={**good.end_us, "mm2": 2.0},
        resources=good.resources,
    )
    with pytest.raises(m.InputError, match=r"hint is not a valid schedule of this graph: events .* overlap"):
        solve_exact(g, TL, 1, hint=bad)
    with pytest.raises(m.InputError, match=r"hint must be a Schedule"):
        solve_exact(g, TL, 1, hint={"mm0": 0.0})  # type: ignore[arg-type]


def test_time_limit_bounds_the_whole_call() -> None:
    # A pool instance too big to prove quickly: the call must come back within its limit
    # (plus a margin for the machine) with a valid schedule and a bound below it.
    g = m.EventGraph(pools={"AIC": [f"core{k}.AIC" for k in range(3)]})
    for k in range(40):
        g.add(m.Event(f"e{k}", resources=["AIC:*"], duration_us=1.0 + (k * 7919 % 13) / 3.0))
    x = solve_exact(g, 1.0, 1)
    _check(g, x)
    assert x.total_s < 1.0 * 1.5
    assert not math.isnan(x.lower_bound_us)


def test_large_reservoirs_are_not_expanded() -> None:
    # 60 events free a unit that 60 unrelated events take: no pairing, one reservoir of 120
    # time points. CP-SAT would expand it into a literal per pair (quadratic; on 1k-event
    # reservoirs that blew a 10 s limit to 50 s), so moeopt turns the expansion off above 100.
    g = m.EventGraph(semaphores={"s": 60})
    for k in range(60):
        g.add(m.Event(f"take{k}", acquires={"s": 1}, duration_us=1.0))
        g.add(m.Event(f"give{k}", releases={"s": 1}, duration_us=1.0))
    x = solve_exact(g, 1.0, 1, hint=_all_at_zero(g))
    assert x.semaphore_models == {"s": "reservoir"}
    assert x.params_used["expand_reservoir_constraints"] is False
    _check(g, x)


def _all_at_zero(g: m.EventGraph) -> m.Schedule:
    # every event on [0, 1): the 60 takes and the 60 gives net to zero at each instant
    s = m.Schedule(
        start_us={e.name: 0.0 for e in g},
        end_us={e.name: 1.0 for e in g},
        resources={e.name: () for e in g},
    )
    m.validate_schedule(g, s)
    return s


def test_makespan_interval_leaves_room_for_units_never_released() -> None:
    # S has 2 units; `grab` takes one and never gives it back, and `b` and `c` (1 unit each,
    # 2 µs) come after it, so they share the other unit: 2 + 2 = 4 µs. After the makespan the never-released unit is still
    # held, so the model's makespan interval may take only 2 − 1 units of S there (taking both
    # would make every schedule infeasible).
    g = m.EventGraph(semaphores={"S": 2})
    g.add(m.Event("grab", acquires={"S": 1}, duration_us=0.0))
    g.add(m.Event("b", deps={"grab": 0.0}, acquires={"S": 1}, releases={"S": 1}, duration_us=2.0))
    g.add(m.Event("c", deps={"grab": 0.0}, acquires={"S": 1}, releases={"S": 1}, duration_us=2.0))
    x = solve_exact(g, TL, 1, improve_share=0.0)
    _check(g, x)
    assert x.semaphore_models == {"S": "holding"}
    assert x.cpsat_status == "OPTIMAL"
    assert x.best_us == pytest.approx(4.0)
    assert x.proven_optimal
