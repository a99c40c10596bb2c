"""The base scenarios are evaluated once per run: the study's first trial (the base's own point,
queued by ``baseline_trial``) and the baseline values a ``mean_ratio`` aggregate divides by take
the outcome ``run_study`` computed for the baseline record, when the point's scenario tables are
the base's, value for value and type for type. The reference is evaluating them again."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import optuna
import pytest

import moeopt.search.evaluate as evaluate_mod
from moeopt.search import run_study
from moeopt.search.config import load_study
from moeopt.search.evaluate import Evaluator, identical, is_base_point
from moeopt.search.runner import _baseline_point
from moeopt.search.storage import resolve_storage
from tests.search.conftest import TINY

# The base's own values of TINY's space, written into its scenario (TINY's base leaves them to
# the defaults, where setting them explicitly adds keys to the table: not the base's table then)
BASE_POINT = {"kernel.tile_n": 256, "kernel.tile_m": 128, "p1_override": 0, "policy.dispatch_lookahead": 0}


def _explicit(**extra: Any) -> dict[str, Any]:
    d = copy.deepcopy(TINY)
    d["scenario"].update(
        p1_override=0, kernel={"tile_n": 256, "tile_m": 128}, policy={"dispatch_lookahead": 0}
    )
    d.update(extra)
    return d


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The overrides of every scenario an evaluation builds in this process, in order."""
    seen: list[dict[str, Any]] = []
    real = evaluate_mod.shape_scenarios

    def counting(cfg: Any, shape: Any, overrides: Any) -> Any:
        seen.append(dict(overrides))
        return real(cfg, shape, overrides)

    monkeypatch.setattr(evaluate_mod, "shape_scenarios", counting)
    return seen


def test_identical_tells_types_and_order_apart() -> None:
    assert identical({"a": 1, "b": [1.5, "x", None, True]}, {"a": 1, "b": [1.5, "x", None, True]})
    assert not identical({"a": 1}, {"a": 1.0})  # equal numbers, other types
    assert not identical({"a": True}, {"a": 1})
    assert not identical({"a": 0.0}, {"a": -0.0})
    assert not identical({"a": math.nan}, {"a": math.nan})
    assert not identical({"a": 1, "b": 2}, {"b": 2, "a": 1})  # the same keys, another order
    assert not identical({"a": [1, 2]}, {"a": (1, 2)})
    assert not identical({"a": [1, 2]}, {"a": [1, 2, 3]})
    assert not identical({"a": {1, 2}}, {"a": {1, 2}})  # not a scenario value: never identical


def test_the_base_point_is_recognised_only_when_its_tables_are_the_base_s() -> None:
    cfg = load_study(_explicit())
    assert _baseline_point(cfg) == BASE_POINT
    assert is_base_point(cfg, BASE_POINT)
    assert not is_base_point(cfg, {**BASE_POINT, "kernel.tile_n": 512})
    # TINY leaves p1_override and the tiles to the defaults: the point sets keys the base has not
    plain = load_study(copy.deepcopy(TINY))
    assert not is_base_point(plain, _baseline_point(plain) or {})
    # a constraint the point breaks makes it pruned, not the base
    assert not is_base_point(load_study(_explicit(constraints=["kernel.tile_n > 256"])), BASE_POINT)


def test_the_base_point_takes_the_baseline_outcome_without_a_best_only(built: list[dict[str, Any]]) -> None:
    cfg = load_study(_explicit())
    base = Evaluator(cfg).evaluate({}, None)
    assert base.state == "complete"
    reference = Evaluator(cfg).evaluate(BASE_POINT, None)  # evaluated again
    ev = Evaluator(cfg)
    ev.take_baseline(base, BASE_POINT)
    del built[:]
    got = ev.evaluate(BASE_POINT, None)
    assert built == []  # no scenario built, nothing simulated
    assert got == reference
    assert got.attrs() == reference.attrs()
    assert got is not base
    assert got.per_shape is not base.per_shape
    # with a best, the point goes through the bound check and the early stop: evaluated
    ev.evaluate(BASE_POINT, reference.values[0] if reference.values else None)
    assert len(built) == 1
    # another point: evaluated
    ev.evaluate({**BASE_POINT, "p1_override": 2}, None)
    assert len(built) == 2
    assert (ev.lb_checked, ev.lb_pruned, ev.lb_skipped) == (1, 0, 0)


def test_a_baseline_that_did_not_complete_is_not_taken(built: list[dict[str, Any]]) -> None:
    cfg = load_study(_explicit())
    ev = Evaluator(cfg)
    failed = evaluate_mod.Outcome("failed", "guardrail", reason="a made-up failure")
    ev.take_baseline(failed, BASE_POINT)
    got = ev.evaluate(BASE_POINT, None)
    assert got.state == "complete"
    assert len(built) == 1


def test_mean_ratio_takes_the_baseline_values_instead_of_evaluating_them(built: list[dict[str, Any]]) -> None:
    shapes = [{"name": "a"}, {"name": "b", "overrides": {"workload.tokens": 48}}]
    cfg = load_study(_explicit(shapes=shapes, aggregate="mean_ratio"))
    point = {**BASE_POINT, "kernel.tile_n": 128}
    reference = Evaluator(cfg).evaluate(point, None)  # evaluates the baseline for its ratios
    ov = to_ov(cfg, point)
    assert built == [ov, ov, {}, {}]  # (one call per shape)
    base = Evaluator(cfg).evaluate({}, None)
    ev = Evaluator(cfg)
    ev.take_baseline(base, None)
    del built[:]
    assert ev.evaluate(point, None) == reference
    assert built == [ov, ov]  # the point only


def to_ov(cfg: Any, point: dict[str, Any]) -> dict[str, Any]:
    return evaluate_mod.to_overrides(cfg, point)


def _stored(out: Path) -> list[tuple[Any, ...]]:
    spec = resolve_storage(None, str(out))
    trials = optuna.load_study(study_name="tiny", storage=spec.open()).get_trials()
    return [
        (t.number, t.state, t.values, t.params, t.user_attrs["moeopt"], t.intermediate_values) for t in trials
    ]


def test_a_study_gives_the_same_trials_as_when_the_base_point_is_evaluated_again(
    tmp_path: Path, built: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    study = _explicit(trials=6, outputs={"exact_gap": False, "report": False})
    r = run_study(study, out=tmp_path / "reused")
    reused = _stored(tmp_path / "reused")
    assert reused[0][3] == BASE_POINT
    assert reused[0][2] == [r.baseline_value]
    assert {} in built
    assert BASE_POINT not in built
    monkeypatch.setattr(Evaluator, "take_baseline", lambda self, base, point: None)
    del built[:]
    run_study(study, out=tmp_path / "again")
    assert BASE_POINT in built
    assert _stored(tmp_path / "again") == reused
