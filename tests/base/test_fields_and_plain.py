"""The base a user meets through every input and output: one wording for bad fields, one JSON."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest

import moeopt as m
from moeopt.plain import jsonable, plain
from moeopt.search import load_study

SCENARIO = Path(__file__).resolve().parents[2] / "examples" / "scenario_basic.toml"


def _scenario_error(overrides: dict[str, object]) -> str:
    with pytest.raises(m.MoeoptError) as info:
        m.load_scenario(SCENARIO, overrides)
    return str(info.value).split(": ", 1)[1]  # without the file name in front


def _study_error(extra: dict[str, object]) -> str:
    study = {"scenario": str(SCENARIO), "space": {"kernel.tile_n": {"choices": [128, 256]}}, **extra}
    with pytest.raises(m.MoeoptError) as info:
        load_study(study)
    return str(info.value).split(": ", 1)[1]  # without "<study>" in front


@pytest.mark.parametrize(
    ("scenario", "study", "pattern"),
    [
        # an integer out of its range: workload.world is 1..1024 and workers 1..256 (usage.md)
        (
            {"workload.world": 0},
            {"workers": 0},
            r"^(workload\.world|workers) = 0: out of range; allowed: integers in \[1, (1024|256)\]$",
        ),
        # a string where an integer is expected
        (
            {"workload.tokens": "many"},
            {"trials": "many"},
            r"^(workload\.tokens|trials) = 'many': must be an integer( in \[1, 1048576\]| >= 1)$",
        ),
        # a number where true / false is expected
        (
            {"options.bandwidth_contention": 1},
            {"baseline_trial": 1},
            r"^(options\.bandwidth_contention|baseline_trial) = 1: must be true or false$",
        ),
        # a misspelt name among fixed choices gets the closest one and the list
        (
            {"workload.routing": "zipff"},
            {"aggregate": "meen"},
            r"^(workload\.routing|aggregate) = '(zipff|meen)': not allowed "
            r"\(did you mean '(zipf|mean)'\?\); allowed: .*(zipf|mean).*$",
        ),
    ],
)
def test_a_scenario_file_and_a_study_file_word_a_bad_field_the_same_way(
    scenario: dict[str, object], study: dict[str, object], pattern: str
) -> None:
    assert re.match(pattern, _scenario_error(scenario)), _scenario_error(scenario)
    assert re.match(pattern, _study_error(study)), _study_error(study)


def test_an_unknown_key_names_the_closest_field_in_both_formats() -> None:
    for text in (_scenario_error({"kernel.tile_nn": 1}), _study_error({"trails": 3})):
        assert re.match(
            r"^.*unknown field '(kernel\.tile_nn|trails)' \(did you mean '(tile_n|trials)'", text
        ), text


def test_jsonable_writes_what_json_can_read_back() -> None:
    doc = {
        1: (1.5, math.inf, -math.inf),
        "nan": math.nan,
        "np": [np.int64(3), np.float32(0.5)],
        "set": frozenset({"a"}),
        "frozen": MappingProxyType({"k": (1, 2)}),
        "other": Path("/x"),
    }
    out = jsonable(doc)
    # allow_nan=False: JSON has no infinity or NaN, so any left over would raise here
    assert json.loads(json.dumps(out, allow_nan=False)) == {
        "1": [1.5, "inf", "-inf"],
        "nan": "nan",
        "np": [3, 0.5],
        "set": ["a"],
        "frozen": {"k": [1, 2]},
        "other": "/x",
    }
    assert jsonable({"t": math.inf}, nonfinite="null") == {"t": None}


def test_plain_copies_containers_and_keeps_the_values_a_check_must_see() -> None:
    src = MappingProxyType({"links": ({"depth": math.inf},), "n": 1})
    out = plain(src)
    assert out == {"links": [{"depth": math.inf}], "n": 1}
    out["links"][0]["depth"] = 0  # a fresh copy: the source is untouched
    assert src["links"][0]["depth"] == math.inf
