"""A kernel-time objective over several shapes or routing seeds stops as soon as what is known
proves the point cannot win.

Each scenario is timed with a threshold: the least time of it at which the aggregate, with the
scenarios already timed at their exact values and the rest at their lower bounds (0 without a
bound check), reaches the best value. The reference for every value is ``kernel_time`` with
every rank of every scenario scheduled."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from moeopt.megamoe.kerneltime import kernel_time
from moeopt.search.config import load_study
from moeopt.search.evaluate import Evaluator
from moeopt.search.space import to_overrides
from tests.search.conftest import TINY

POINT = {"kernel.tile_n": 256, "kernel.tile_m": 128, "p1_override": 0, "policy.dispatch_lookahead": 0}


def _study(routing: str = "uniform", **extra: Any) -> Any:
    d = copy.deepcopy(TINY)
    d["scenario"]["workload"]["routing"] = routing
    d.update(extra)
    return load_study(d)


def _reference(cfg: Any) -> list[list[float]]:
    """Every scenario's kernel time, all ranks scheduled: per shape, per routing seed."""
    ov = to_overrides(cfg, POINT)
    seeds = cfg.objective.seeds
    out = []
    for shape in cfg.shapes:
        scs = [shape.scenario({**ov, "workload.seed": s}) for s in seeds] if seeds else [shape.scenario(ov)]
        out.append([kernel_time(s, workers=1)["kernel_total_us"] for s in scs])
    return out


def _late(ev: Evaluator) -> Evaluator:
    ev.lb_checked = 10**6  # past the probing checks, none pruned: no bound check runs
    return ev


def _is_least(ev: Evaluator, known: dict[str, list[float]], name: str, best: float, expected: float) -> None:
    """The threshold of scenario 0 of ``name`` is ``expected`` up to rounding, and the least
    float at which the aggregate (as the evaluator computes it) reaches ``best``."""
    t = ev._threshold(known, name, 0, best)
    assert t is not None
    assert abs(t - expected) <= 1e-12 * expected

    def agg(v: float) -> float:
        return ev._known_aggregate({**known, name: [v, *known[name][1:]]})

    assert agg(t) >= best
    assert agg(float(np.nextafter(t, 0.0))) < best


def test_threshold_is_the_least_time_that_loses() -> None:
    two = [{"name": "A", "overrides": {}}, {"name": "B", "overrides": {}}]
    # mean of two shapes: (v + 100) / 2 >= 150  <=>  v >= 200
    ev = Evaluator(_study(shapes=two))
    known = {"A": [0.0], "B": [100.0]}
    _is_least(ev, known, "A", 150.0, 200.0)
    assert known == {"A": [0.0], "B": [100.0]}  # left as it was
    # max: v >= best whatever the other value below it
    _is_least(Evaluator(_study(shapes=two, aggregate="max")), {"A": [0.0], "B": [100.0]}, "A", 150.0, 150.0)
    # weighted 3:1: (3 v + 1 * 100) / 4 >= 150  <=>  v >= 500 / 3
    weighted = [{**two[0], "weight": 3}, {**two[1], "weight": 1}]
    ev = Evaluator(_study(shapes=weighted, aggregate="weighted"))
    _is_least(ev, {"A": [0.0], "B": [100.0]}, "A", 150.0, 500.0 / 3.0)
    # p90 over three seeds, the others at 10 and 20: sorted [10, 20, v], numpy's p90 is at
    # index 0.9 * 2 = 1.8, i.e. 20 + 0.8 (v - 20) >= 36  <=>  v >= 40
    ev = Evaluator(_study("zipf", objective={"metric": "kernel_total_us", "seeds": [0, 1, 2], "statistic": "p90"}))
    one = ev.cfg.shapes[0].name
    _is_least(ev, {one: [0.0, 10.0, 20.0]}, one, 36.0, 40.0)
    # min over two seeds, the other at 10 < best: no time of this seed alone reaches 36
    ev = Evaluator(_study("zipf", objective={"metric": "kernel_total_us", "seeds": [0, 1], "statistic": "min"}))
    assert ev._threshold({one: [0.0, 10.0]}, one, 0, 36.0) is None


def test_a_shape_that_decides_stops_the_others(ranks_scheduled: list[int]) -> None:
    # three shapes of one distinct rank each (uniform routing), mean: with the first shape's
    # time v1 known and the two others at 0, the mean is v1 / 3; at best = v1 / 3 the point
    # cannot win, and neither of the other shapes is timed
    shapes = [{"name": f"M{m}", "overrides": {"workload.tokens": m}} for m in (72, 48, 24)]
    cfg = _study(shapes=shapes)
    ref = _reference(cfg)
    v1 = ref[0][0]
    ev = _late(Evaluator(cfg))
    del ranks_scheduled[:]
    out = ev.evaluate(POINT, best=v1 / 3.0)
    assert out.state == "pruned"
    assert out.kind == "lower_bound"
    assert "2 scenario(s) not simulated" in (out.reason or "")
    assert out.lower_bound_us is not None
    assert out.lower_bound_us >= v1 / 3.0
    assert len(ranks_scheduled) == 1  # the first shape's one distinct rank
    # a best no value can reach: every shape timed, the exact mean
    del ranks_scheduled[:]
    out = ev.evaluate(POINT, best=sum(r[0] for r in ref) / 3.0 + 1.0)
    assert out.state == "complete"
    assert out.values == [pytest.approx(sum(r[0] for r in ref) / 3.0, rel=1e-12)]
    assert len(ranks_scheduled) == 3


def test_seeds_stop_at_a_rank(ranks_scheduled: list[int]) -> None:
    # zipf routing with three seeds, mean over them: at the point's own value as the best, it
    # cannot win; it stops before every rank of every seed is scheduled (8 distinct ranks each)
    cfg = _study("zipf", objective={"metric": "kernel_total_us", "seeds": [0, 1, 2], "statistic": "mean"})
    ref = _reference(cfg)
    value = float(np.mean(ref[0]))
    ev = _late(Evaluator(cfg))
    del ranks_scheduled[:]
    out = ev.evaluate(POINT, best=value)
    assert out.state == "pruned"
    assert out.kind == "lower_bound"
    assert out.lower_bound_us is not None
    assert out.lower_bound_us >= value
    assert len(ranks_scheduled) < 3 * 8
    del ranks_scheduled[:]
    out = ev.evaluate(POINT, best=value + 1.0)
    assert out.state == "complete"
    assert out.values == [value]
    assert len(ranks_scheduled) == 3 * 8


def test_mean_ratio_over_shapes_after_a_bound_check() -> None:
    # the bound check's graphs are reused; mean of time / baseline time over two shapes: the
    # point's own value as the best prunes it, a hair above completes it with that value
    shapes = [{"name": f"M{m}", "overrides": {"workload.tokens": m}} for m in (72, 48)]
    cfg = _study("zipf", shapes=shapes, aggregate="mean_ratio", prune={"lower_bound": "always"})
    ev = Evaluator(cfg)
    full = ev.evaluate(POINT, best=None)
    assert full.state == "complete"
    assert full.values is not None
    value = full.values[0]
    out = ev.evaluate(POINT, best=value)
    assert out.state == "pruned"
    assert out.kind == "lower_bound"
    assert out.lower_bound_us is not None
    assert out.lower_bound_us >= value
    out = ev.evaluate(POINT, best=value * (1 + 1e-9))
    assert out.state == "complete"
    assert out.values == [value]
