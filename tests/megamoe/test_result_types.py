"""Real ``simulate`` results have exactly the keys and value types of the TypedDicts in
``moeopt/megamoe/results.py`` (which mypy checks the code against, and which docs/usage.md is
generated from), on configurations that reach every optional key and both calibration cases."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import moeopt.megamoe as mm
from moeopt.megamoe.config.profiles import profile_constants
from moeopt.megamoe.results import CriticalStepWait, SimulateResult
from moeopt.trust.golden import default_configs
from tests.docs.tool import load_gen_docs

result_problems = load_gen_docs().result_problems

# golden configurations whose results between them carry every optional key of a critical-path
# step (semaphore waits, resource queueing, λ edges), idle samples, a violated bound (checked
# with check_bounds=False), and several simulated ranks
GOLDEN = ("bs72.urma", "bs72.l1_stages1", "pto_m16.no_contention", "bs72.random")


def _no_profile() -> mm.Scenario:
    """A scenario without a profile (no calibration domain): every constant given by hand."""
    cal = {name: c.value for name, c in profile_constants("megamoe-a8w8").items()}
    return mm.Scenario(
        workload=mm.Workload(tokens=16, topk=2, world=2, local_experts=2),
        h=512,
        hidden_dim=512,
        aic_num=4,
        calibration=cal,
    )


@pytest.fixture(scope="module")
def results() -> dict[str, SimulateResult]:
    by_name = {c.name: c for c in default_configs()}
    out = {n: mm.simulate(by_name[n].scenario(), check_bounds=by_name[n].check_bounds) for n in GOLDEN}
    out["no profile"] = mm.simulate(_no_profile())
    return out


@pytest.mark.parametrize("name", [*GOLDEN, "no profile"])
def test_a_real_result_has_the_keys_and_types_of_the_typed_dicts(
    results: dict[str, SimulateResult], name: str
) -> None:
    assert result_problems(results[name]) == []


def test_the_results_checked_reach_every_optional_key_and_case(results: dict[str, SimulateResult]) -> None:
    # otherwise the test above would pass without ever checking those keys' types
    steps = [st for r in results.values() for rr in r["rank_results"].values() for st in rr["critical_path"]]
    assert set(CriticalStepWait.__annotations__) <= {k for st in steps for k in st}
    assert any(r["calibration"]["domain"] is None for r in results.values())
    assert any(r["calibration"]["domain"] is not None for r in results.values())
    assert any(r["bounds"]["violated"] for r in results.values())
    assert any(r["idle_decomposition"]["samples"] for r in results.values())
    assert any(len(r["simulated_ranks"]) > 1 for r in results.values())


def test_the_check_names_a_missing_key_an_unknown_key_and_a_wrong_value(
    results: dict[str, SimulateResult],
) -> None:
    r: Any = copy.copy(results["bs72.urma"])
    r["bounds"] = dict(r["bounds"])
    del r["bounds"]["binding"]
    assert result_problems(r) == ["r['bounds']: no key 'binding' (Bounds)"]

    r = copy.copy(results["bs72.urma"])
    r["new_key"] = 1.0
    assert result_problems(r) == ["r: key 'new_key' is not in SimulateResult"]

    r = copy.copy(results["bs72.urma"])
    r["calibration"] = {**r["calibration"], "out_of_domain": "no"}
    assert result_problems(r) == ["r['calibration']['out_of_domain']: str 'no', expected bool"]

    r = copy.copy(results["bs72.urma"])
    r["bounds"] = {**r["bounds"], "binding": "memory"}
    assert result_problems(r) == [
        "r['bounds']['binding']: 'memory', expected one of 'compute' | 'bandwidth' | 'dependency'"
    ]

    r = copy.copy(results["bs72.urma"])
    r["critical_path"] = [*r["critical_path"][:-1], {**r["critical_path"][-1], "after": 3}]
    n = len(r["critical_path"]) - 1
    assert result_problems(r) == [f"r['critical_path'][{n}]['after']: int 3, expected str | None"]
