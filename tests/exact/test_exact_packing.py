"""Weighted energy and parallel-machine bounds (:mod:`moeopt.exact.packing`): hand cases and
soundness against the exhaustive optimum of :mod:`tests.exact.brute` on small random graphs."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings

import moeopt as m
from moeopt.exact import solve_exact
from moeopt.exact.bounds import Item, capacity_sets, energy_bound, static_analysis, static_bounds
from moeopt.exact.heads import raised_ends
from moeopt.exact.packing import (
    dff_weights,
    knapsack_capacity,
    machine_bound,
    max_fit,
    weighted_energy_bound,
)
from moeopt.exact.pairing import find_pairing
from moeopt.exact.ticks import TimeGrid
from tests.exact.brute import optimum
from tests.exact.strategies import held_graphs


# ---------------------------------------------------------------------- hand cases
def test_knapsack_capacity_respects_capacity_and_counts() -> None:
    # 12 loads of 128 units fit in 1600 (1536); a 13th would need 1664.
    assert knapsack_capacity({128: 20}, {128: 128}, 1600) == 1536
    # demands 3 (three of them) and 5 (one) in 10 units: 3+3+3 = 9 beats 5+3 = 8
    assert knapsack_capacity({3: 3, 5: 1}, {3: 3, 5: 5}, 10) == 9
    # only two 3s available: 5+3 = 8
    assert knapsack_capacity({3: 2, 5: 1}, {3: 3, 5: 5}, 10) == 8
    # weights other than the demand: two items of weight 7 (demand 4) beat one of weight 10 (demand 8)
    assert knapsack_capacity({4: 2, 8: 1}, {4: 7, 8: 10}, 8) == 14


def test_dff_weights_round_large_demands_and_drop_small_ones() -> None:
    # f_12 on capacity 1600 (scaled: f(C) = 12 × 1600 = 19200): 13 × 128 = 1664 is not a multiple
    # of 1600, so 1600 × ⌊1664 / 1600⌋ = 1600 = 1/12 of the capacity; 13 × 7 = 91 < 1600 -> 0;
    # 13 × 800 = 10400 -> 1600 × 6 = 9600 = one half.
    assert dff_weights([128, 7, 800], 1600, 12) == {128: 1600, 7: 0, 800: 9600}
    # (k + 1) q a multiple of C keeps the demand itself, scaled by k: 2 × 50 = 100 on C = 100, k = 1
    assert dff_weights([50], 100, 1) == {50: 50}


def test_max_fit_takes_the_smallest_first() -> None:
    assert max_fit([5, 1, 1, 4], 6) == 3  # 1 + 1 + 4
    assert max_fit([7, 7], 6) == 0


def test_weighted_energy_sees_that_twelve_of_128_fill_1600() -> None:
    # 13 intervals of 1 µs holding 128 of 1600 units, all free at 0, nothing after. Plain energy:
    # 13 × 128 / 1600 = 1.04. Only 12 fit at once (1536 units): 13 × 128 / 1536 = 1.0833 (the
    # "fit" weighting and f_12 give the same). The optimum is 2 (a 13th must wait for one to end).
    items = [Item(0.0, 1.0, 0.0, 128)] * 13
    assert energy_bound(items, 1600) == pytest.approx(1.04)
    value, label = weighted_energy_bound(items, 1600)
    assert value == pytest.approx(13 / 12)
    assert label in ("fit", "dff12")


def test_machine_bound_counts_rounds() -> None:
    # 21 windows of 1 µs holding 12 of 131 units: at most 10 at once (120 ≤ 131 < 132), so on 10
    # "machines" some machine runs 3 of them: ⌈21 / 10⌉ × 1 = 3. Energy alone: 21 × 12 / 131 = 1.92.
    items = [Item(0.0, 1.0, 0.0, 12)] * 21
    value, label = machine_bound(items, 131)
    assert value == pytest.approx(3.0)
    assert label == "machines10"
    assert energy_bound(items, 131) == pytest.approx(252 / 131)
    # P||Cmax with unequal lengths, 2 machines: lengths 5, 4, 3 -> among the 3 longest, some machine
    # runs 2, at least 4 + 3 = 7; energy 12 / 2 = 6; with head 1 and after 2: 1 + 7 + 2 = 10.
    items = [Item(1.0, 5.0, 2.0, 1), Item(1.0, 4.0, 2.0, 1), Item(1.0, 3.0, 2.0, 1)]
    assert machine_bound(items, 2) == (pytest.approx(10.0), "machines2")
    # one machine is the energy bound itself: nothing new to report
    assert machine_bound(items, 1) == (0.0, "")


def test_static_bounds_report_the_method() -> None:
    # 13 loads of 1 µs holding 128 of 1600 HBM units: the semaphore's bound is 2 (machines12: 13
    # intervals on 12 lanes need two rounds), above the plain energy 1.04.
    g = m.EventGraph(semaphores={"hbm": 1600})
    for k in range(13):
        g.add(m.Event(f"ld{k}", acquires={"hbm": 128}, releases={"hbm": 128}, duration_us=1.0))
    cg = g.compiled()
    pairings = {0: p} if (p := find_pairing(cg, 0)) is not None else {}
    got = {b.source: b for b in static_bounds(cg, pairings, cg.dur, cg.preds, cg.succs)}
    assert got["semaphore:hbm"].value == pytest.approx(2.0)
    assert got["semaphore:hbm"].method == "machines12"
    x = solve_exact(g, 10.0, 1)
    assert x.lower_bound_us == pytest.approx(2.0)
    assert x.best_us == pytest.approx(2.0)


# ---------------------------------------------------------------------- soundness
def _tick_bounds(g: m.EventGraph, tick: float) -> dict[str, float]:
    cg = g.compiled()
    grid = TimeGrid(tick, False)
    dur = [grid.down(d) for d in cg.dur]
    preds = [tuple((p, grid.down(lam)) for p, lam in ps) for ps in cg.preds]
    succs = [tuple((q, grid.down(lam)) for q, lam in ss) for ss in cg.succs]
    pairings = {s: p for s in range(len(cg.sem_names)) if (p := find_pairing(cg, s)) is not None}
    bounds = static_bounds(cg, pairings, dur, preds, succs, integral=True)
    return {f"{b.source} ({b.method})": grid.to_us(b.value) for b in bounds}


@settings(max_examples=150, deadline=None)
@given(held_graphs())
def test_static_bounds_never_exceed_the_brute_force_optimum(g: m.EventGraph) -> None:
    opt, best = optimum(g)
    m.validate_schedule(g, best)  # the brute force's own schedule is valid
    cg = g.compiled()
    pairings = {s: p for s in range(len(cg.sem_names)) if (p := find_pairing(cg, s)) is not None}
    static = static_analysis(cg, pairings, cg.dur, cg.preds, cg.succs)
    for b in static.bounds:
        assert b.value <= opt + 1e-9, (b, opt)
    # the heads and tails raised by the capacities hold in the optimal schedule too, and so do
    # the targeted ones (used on graphs too large for the full adjustment), asked for every event
    sets = [(cs.capacity, cs.items) for cs in capacity_sets(cg, pairings, cg.dur, cg.succs)]
    everyone = list(range(cg.n))
    raised_h, raised_t = raised_ends(
        cg, sets, cg.dur, cg.preds, cg.succs, cg.heads(), cg.tails(), everyone, everyone
    )
    # and through the work budget (every event beyond max_neighbours = 0)
    budget_h, budget_t = raised_ends(
        cg, sets, cg.dur, cg.preds, cg.succs, cg.heads(), cg.tails(), everyone, everyone, max_neighbours=0
    )
    for i, name in enumerate(cg.names):
        assert static.head[i] <= best.start_us[name] + 1e-9, name
        assert best.start_us[name] + static.tail[i] <= opt + 1e-9, name
        assert raised_h.get(i, 0.0) <= best.start_us[name] + 1e-9, name
        assert best.start_us[name] + raised_t.get(i, 0.0) <= opt + 1e-9, name
        assert budget_h.get(i, 0.0) <= best.start_us[name] + 1e-9, name
        assert best.start_us[name] + budget_t.get(i, 0.0) <= opt + 1e-9, name
    # on ticks: exact (0.5 µs) and rounding the half-µs values down (1 µs)
    for tick in (0.5, 1.0):
        for source, value in _tick_bounds(g, tick).items():
            assert value <= opt + 1e-9, (tick, source, value, opt)


@settings(max_examples=40, deadline=None)
@given(held_graphs(max_events=5))
def test_solve_exact_bound_never_exceeds_the_brute_force_optimum(g: m.EventGraph) -> None:
    opt, _best = optimum(g)
    x = solve_exact(g, 10.0, 1)
    assert x.lower_bound_us <= opt + 1e-9
    assert x.best_us is not None
    assert x.best_us >= opt - 1e-9
    assert x.proven_optimal
    assert x.best_us == pytest.approx(opt)


# ---------------------------------------------------------------------- the report by class
def test_class_bounds_and_the_explanation_of_a_loose_certificate() -> None:
    from moeopt.exact import ExactResult, SolveStatus

    x = ExactResult(
        status=SolveStatus.FEASIBLE,
        lower_bound_us=540.0,
        best_us=550.0,
        schedule=None,
        solve_s=1.0,
        mode="exact",
        params_used={},
        bound_source="semaphore:hbm",
        bounds_us={
            "longest_path": 356.5,
            "resource:c0.AIC": 300.0,
            "resource:c1.AIC": 310.0,
            "semaphore:hbm": 540.0,
            "semaphore:remote_out": 373.6,
            "pools:a+b": 200.0,
            "physical:bandwidth(hbm)": 476.0,
            "cpsat": 539.0,
        },
        cpsat_status="FEASIBLE",
        cpsat_bound_us=539.0,
        cpsat_best_us=550.0,
        best_source="cpsat",
        replay_error=None,
        tick_us=0.001,
        durations_rounded=True,
        horizon_us=560.0,
        semaphore_models={},
        total_s=1.0,
        bound_methods={"semaphore:hbm": "dff12", "longest_path": "path"},
    )
    # per class the largest of its sources, largest class first
    assert list(x.class_bounds_us.items()) == [
        ("semaphore", 540.0),
        ("cpsat", 539.0),
        ("physical", 476.0),
        ("precedence", 356.5),
        ("resource", 310.0),
        ("pool", 200.0),
    ]
    assert x.class_bounds["resource"] == ("resource:c1.AIC", 310.0)
    assert x.bound_method == "dff12"
    text = x.bound_explanation()
    # 550 / 540 − 1 = 1.85%
    assert text.startswith(
        "bound from semaphore:hbm (energy with demands rounded to 1/12 of the capacity), "
        "1.85% below the best schedule; each class alone: "
    )
    assert "semaphore 540.00 [semaphore:hbm]" in text
    assert "cpsat 539.00," in text
    assert "precedence 356.50 [longest_path]" in text
    # a class that proved nothing (CP-SAT stopped early) is left out of the sentence
    y = replace(x, bounds_us={**x.bounds_us, "cpsat": 0.0})
    assert "cpsat" not in y.bound_explanation()
    assert y.class_bounds_us["cpsat"] == 0.0
    d = x.to_dict()
    assert d["class_bounds_us"]["physical"] == 476.0
    assert d["class_bound_sources"]["pool"] == "pools:a+b"
    assert d["bound_method"] == "dff12"


def test_a_proven_result_needs_no_explanation() -> None:
    g = m.EventGraph(semaphores={"hbm": 1600})
    for k in range(13):
        g.add(m.Event(f"ld{k}", acquires={"hbm": 128}, releases={"hbm": 128}, duration_us=1.0))
    x = solve_exact(g, 10.0, 1)
    assert x.proven_optimal
    assert x.bound_explanation() == ""
    assert x.class_bounds_us["semaphore"] == pytest.approx(2.0)
    assert x.class_bounds_us["precedence"] == pytest.approx(1.0)


def test_methods_in_words() -> None:
    from moeopt.exact.bounds import describe_method

    assert describe_method("machines10") == "10 parallel machines"
    assert describe_method("window-dff12") == (
        "energetic reasoning on time windows (energy with demands rounded to 1/12 of the capacity)"
    )
    assert describe_method("fit") == "energy on the largest total demand that fits"
    assert describe_method("heads") == "heads and tails raised by the capacities"
