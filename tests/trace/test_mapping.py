"""A profiler's Chrome trace read as a stage timeline through a mapping file."""

from __future__ import annotations

from pathlib import Path

import pytest

from moeopt.errors import InputError
from moeopt.trace import parse_chrome_trace
from moeopt.trace.mapping import mapping_from_dict, read_mapping, timeline_from_trace
from moeopt.trace.timeline import WHOLE

ROOT = Path(__file__).resolve().parents[2]


def _trace(events: list[dict]) -> object:
    return parse_chrome_trace({"traceEvents": events}, source="t.json")


def _x(name: str, ts: float | str, dur: float, **args: object) -> dict:
    return {"ph": "X", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": dict(args)}


def test_regex_units_rename_select_and_origin():
    tr = _trace(
        [
            _x("host_launch", "1000.0", 5),  # not selected
            _x("moe_front_reorder", "1010.0", 100),  # times as strings, as profilers write them
            _x("moe_dispatch", 1100.0, 30, expert=0),
            _x("moe_dispatch", 1105.0, 40, expert=0),  # the same unit twice: one envelope
            _x("moe_dispatch", 1130.0, 30, expert=1),
            _x("moe_swiglu", 1200.0, 10, segment=1),
        ]
    )
    m = mapping_from_dict(
        {
            "stage_regex": "^moe_(?P<stage>[a-z_]+)$",
            "select": "^moe_",
            "units": {"expert": "e", "segment": "seg"},
            "rename": {"front_reorder": "front"},
            "meta": {"units": "envelopes", "kernel_us": 300},
        }
    )
    t, notes = timeline_from_trace(tr, m)
    # origin "first": time 0 is the first selected event (1010), so every time is ts - 1010
    got = [(r.stage, r.unit, r.start_us, r.end_us) for r in t.rows]
    assert got == [
        ("front", WHOLE, 0.0, 100.0),
        ("dispatch", "e0", 90.0, 135.0),  # 1100..1130 and 1105..1145 -> 1100..1145
        ("dispatch", "e1", 120.0, 150.0),
        ("swiglu", "seg1", 190.0, 200.0),
    ]
    assert t.meta == {"units": "envelopes", "kernel_us": "300"}
    assert notes == ["1 event(s) of the trace give no stage under the mapping: left out"]


def test_stage_from_args_and_unit_from_the_name():
    tr = _trace([_x("gmm1_e3", 10, 5, stage="gmm1"), _x("gmm1_e4", 20, 5, stage="gmm1"), _x("idle", 0, 1)])
    m = mapping_from_dict({"stage_arg": "stage", "stage_regex": "^(?P<stage>[a-z0-9]+)_(?P<unit>e\\d+)$", "origin": "zero"})
    t, notes = timeline_from_trace(tr, m)
    assert [(r.stage, r.unit, r.start_us) for r in t.rows] == [("gmm1", "e3", 10.0), ("gmm1", "e4", 20.0)]
    assert notes == ["1 event(s) of the trace give no stage under the mapping: left out"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"stage_arg": "stage", "unit": "expert"}, r"unknown key 'unit'; allowed: stage_arg, stage_regex, units"),
        ({"select": "x"}, r"says nowhere where an event's stage is: give stage_arg .* or stage_regex"),
        ({"stage_regex": "("}, r"stage_regex = '\(': not a valid regular expression"),
        ({"stage_regex": "^moe_"}, r"stage_regex = '\^moe_' has no group named 'stage'"),
        ({"stage_arg": "stage", "origin": "start"}, r"origin = 'start': allowed: first, zero"),
        ({"stage_arg": "stage", "rename": ["a"]}, r"rename = \['a'\]: must be a table of name = value"),
    ],
)
def test_bad_mapping_is_one_clear_error(data, message):
    with pytest.raises(InputError, match=message):
        mapping_from_dict(data, "map.toml")


def test_a_mapping_that_finds_nothing_says_so():
    tr = _trace([_x("a", 0, 1), _x("b", 1, 1)])
    with pytest.raises(InputError, match=r"t.json: no event gives a stage under map.toml \(2 event\(s\) read"):
        timeline_from_trace(tr, mapping_from_dict({"stage_arg": "stage"}, "map.toml"))


def test_yaml_and_toml_mapping_files(tmp_path):
    (tmp_path / "m.yaml").write_text("stage_arg: stage\nunits: {expert: e}\n")
    (tmp_path / "m.toml").write_text('stage_arg = "stage"\n[units]\nexpert = "e"\n')
    assert read_mapping(tmp_path / "m.yaml").units == read_mapping(tmp_path / "m.toml").units == {"expert": "e"}
    (tmp_path / "bad.toml").write_text("stage_arg = \n")
    with pytest.raises(InputError, match=r"bad.toml: not valid TOML"):
        read_mapping(tmp_path / "bad.toml")
    with pytest.raises(InputError, match=r"nope.toml: no such mapping file"):
        read_mapping(tmp_path / "nope.toml")
