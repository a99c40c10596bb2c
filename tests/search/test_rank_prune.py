"""A kernel-time objective on a skewed routing stops at the first rank that reaches the best.

The kernel's time is its slowest rank's, so one rank whose time alone reaches the best value
found proves the point cannot win. The reference for every time here is ``kernel_time`` (all
ranks scheduled)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import moeopt.megamoe.kerneltime as kt
from moeopt.megamoe.kerneltime import Reached, kernel_time, kernel_time_below, kernel_time_built_below
from moeopt.megamoe.simulate import build_graphs, rank_groups
from moeopt.search.config import load_study
from moeopt.search.evaluate import Evaluator
from tests.search.conftest import TINY


def _study(**extra: Any) -> Any:
    d = copy.deepcopy(TINY)
    d["scenario"]["workload"]["routing"] = "zipf"  # every one of the 8 ranks differs
    d.update(extra)
    return load_study(d)


def test_kernel_time_below_stops_at_the_first_rank_that_reaches(ranks_scheduled: list[int]) -> None:
    sc = _study().shapes[0].scenario({})
    full = kernel_time(sc, workers=1)
    times = full["rank_kernel_total_us"]
    assert len(set(times.values())) == 8  # skewed: eight distinct ranks
    # at the kernel time itself: the slowest rank reaches it (maybe after others), never a
    # rank that does not; if it is the last one scheduled, nothing is saved and the whole
    # answer comes back
    del ranks_scheduled[:]
    got = kernel_time_below(sc, full["kernel_total_us"], workers=1)
    if isinstance(got, Reached):
        assert got.total_us == full["kernel_total_us"]
        assert times[got.rank] == got.total_us
        assert ranks_scheduled[-1] == got.rank
        assert len(ranks_scheduled) < 8
    else:
        assert got == full
        assert times[ranks_scheduled[-1]] == full["kernel_total_us"]
    # below every rank's time: the first rank scheduled (the likely slowest) already reaches it
    del ranks_scheduled[:]
    got = kernel_time_below(sc, min(times.values()), workers=1)
    assert isinstance(got, Reached)
    assert ranks_scheduled == [got.rank]
    # above the kernel time: every rank is scheduled and the answer is kernel_time's
    del ranks_scheduled[:]
    assert kernel_time_below(sc, full["kernel_total_us"] + 1e-6, workers=1) == full
    assert len(ranks_scheduled) == 8


def test_kernel_time_below_in_worker_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    # every rank is handed out at once, the likely slowest first: a point that cannot win stops
    # at the first rank done that reaches the best (the other worker's rank is stopped with it),
    # with that rank's own time; one that wins has every rank timed once
    import multiprocessing

    sc = _study().shapes[0].scenario({})
    full = kernel_time(sc, workers=2)
    assert full["workers"] == 2
    times = full["rank_kernel_total_us"]
    counts, groups = rank_groups(sc)
    first = groups[kt._slowest_first(counts, groups, sc.workload.local_experts)[0]][0]
    seen = multiprocessing.get_context("fork").SimpleQueue()  # (written to by the workers)
    real = kt._rank_time

    def counting(rep: int) -> Any:
        seen.put(rep)
        return real(rep)

    def scheduled() -> list[int]:
        out = []
        while not seen.empty():
            out.append(seen.get())
        return out

    monkeypatch.setattr(kt, "_rank_time", counting)
    # below every rank's time: whichever rank is done first reaches it (which one depends on
    # the two workers' pace); the likely slowest, handed out first, is always one of those begun
    got = kernel_time_below(sc, min(times.values()), workers=2)
    assert isinstance(got, Reached)
    assert got.total_us == times[got.rank]
    begun = scheduled()
    assert first in begun
    assert got.rank in begun
    assert len(begun) == len(set(begun))
    assert kernel_time_below(sc, full["kernel_total_us"] + 1e-6, workers=2) == full
    ranks = scheduled()
    assert sorted(ranks) == sorted(full["simulated_ranks"])


def test_auto_leaves_a_point_of_several_distinct_ranks_to_its_ranks(monkeypatch: pytest.MonkeyPatch) -> None:
    # auto mode, a point with a best to beat and eight distinct ranks (zipf): no graph is built
    # for the bound check (it would build all eight here, one after another); the point's ranks
    # are timed likely slowest first and the first one reaching the best prunes it. On a
    # uniform routing (one distinct rank) the first points are still checked
    import moeopt.search.evaluate as evaluate

    calls: list[int] = []
    real = evaluate.built

    def counting(sc: Any) -> Any:
        calls.append(1)
        return real(sc)

    monkeypatch.setattr(evaluate, "built", counting)
    cfg = _study(prune={"lower_bound": "auto"})
    point = {"kernel.tile_n": 256, "kernel.tile_m": 128, "p1_override": 0, "policy.dispatch_lookahead": 0}
    value = kernel_time(cfg.shapes[0].scenario(point_overrides(cfg, point)), workers=1)["kernel_total_us"]
    ev = Evaluator(cfg)
    out = ev.evaluate(point, best=value)
    assert calls == []
    assert (ev.lb_checked, ev.lb_skipped) == (0, 1)
    assert (out.state, out.kind) == ("pruned", "lower_bound")
    assert "the other ranks were not scheduled" in (out.reason or "")
    uniform = copy.deepcopy(TINY)
    uniform["prune"] = {"lower_bound": "auto"}
    ev = Evaluator(load_study(uniform))
    ev.evaluate(point, best=value)
    assert calls == [1]
    assert ev.lb_checked == 1


def test_evaluator_prunes_on_a_rank_and_completes_otherwise(ranks_scheduled: list[int]) -> None:
    cfg = _study(prune={"lower_bound": "auto"})
    assert cfg.metrics == ["kernel_total_us"]
    point = {"kernel.tile_n": 256, "kernel.tile_m": 128, "p1_override": 0, "policy.dispatch_lookahead": 0}
    ev = Evaluator(cfg)
    ev.lb_checked = 10**6  # past the probing checks, none pruned: the point is simulated at once
    value = kernel_time(cfg.shapes[0].scenario(point_overrides(cfg, point)), workers=1)["kernel_total_us"]
    del ranks_scheduled[:]
    out = ev.evaluate(point, best=value)  # cannot beat itself
    assert out.state == "pruned"
    assert out.kind == "lower_bound"
    assert out.lower_bound_us is not None
    assert out.lower_bound_us >= value
    assert "the other ranks were not scheduled" in (out.reason or "")
    assert len(ranks_scheduled) < 8
    out = ev.evaluate(point, best=value + 1.0)
    assert out.state == "complete"
    assert out.values == [value]


def point_overrides(cfg: Any, point: dict[str, Any]) -> dict[str, Any]:
    from moeopt.search.space import to_overrides

    return to_overrides(cfg, point)


def test_one_distinct_rank_is_never_cut_short() -> None:
    # a uniform routing: one graph stands for every rank, so reaching the threshold saves nothing
    # and the trial keeps its exact value (the quick-start study's trials stay complete)
    d = copy.deepcopy(TINY)
    sc = load_study(d).shapes[0].scenario({})
    full = kernel_time(sc, workers=1)
    assert full["simulated_ranks"] == [0]
    assert kernel_time_below(sc, full["kernel_total_us"] - 1.0, workers=1) == full


@pytest.fixture
def ranks_judged(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    seen: list[int] = []
    real = kt._judge

    def counting(rep: int, *args: Any) -> Any:
        seen.append(rep)
        return real(rep, *args)

    monkeypatch.setattr(kt, "_judge", counting)
    return seen


def test_built_graphs_stop_at_the_first_rank_that_reaches(ranks_judged: list[int]) -> None:
    """The search's path after a lower-bound check (the graphs are built already) stops as
    kernel_time_below does: the likely slowest rank first (kerneltime._slowest_first's key, read
    off the plan's experts: the most rows on one expert, then the rows in all), and only while
    ranks are left."""
    sc = _study().shapes[0].scenario({})
    graphs = build_graphs(sc)
    full = kernel_time(sc, workers=1)
    times = full["rank_kernel_total_us"]
    del ranks_judged[:]
    got = kernel_time_built_below(sc, graphs, min(times.values()))
    assert isinstance(got, Reached)
    counts, groups = rank_groups(sc)
    first = groups[kt._slowest_first(counts, groups, sc.workload.local_experts)[0]][0]
    heaviest = max(max(ex.rows for ex in rg.experts if not ex.shared) for rg, _r in graphs.values())
    assert max(ex.rows for ex in graphs[first][0].experts if not ex.shared) == heaviest
    assert ranks_judged == [first] == [got.rank]
    assert got.total_us == times[first]
    del ranks_judged[:]
    assert kernel_time_built_below(sc, graphs, full["kernel_total_us"] + 1e-6) == {**full, "workers": 1}
    assert sorted(ranks_judged) == sorted(graphs)


def test_evaluator_stops_early_after_a_lower_bound_check(ranks_judged: list[int]) -> None:
    # with the bound check on every point (``always``: in ``auto`` mode a point of several
    # distinct ranks is left to them, see the next test), the graphs it built are scheduled
    # likely slowest first and a point that cannot win stops at its first rank too
    cfg = _study(prune={"lower_bound": "always"})
    point = {"kernel.tile_n": 256, "kernel.tile_m": 128, "p1_override": 0, "policy.dispatch_lookahead": 0}
    value = kernel_time(cfg.shapes[0].scenario(point_overrides(cfg, point)), workers=1)["kernel_total_us"]
    ev = Evaluator(cfg)
    del ranks_judged[:]
    out = ev.evaluate(point, best=value)
    assert ev.lb_checked == 1
    assert ev.lb_pruned == 0
    assert out.state == "pruned"
    assert out.kind == "lower_bound"
    assert "the other ranks were not scheduled" in (out.reason or "")
    assert len(ranks_judged) < 8
    out = ev.evaluate(point, best=value + 1.0)
    assert ev.lb_checked == 2
    assert out.state == "complete"
    assert out.values == [value]
