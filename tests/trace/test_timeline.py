"""Stage timelines: reading (CSV, JSON, bad input), building one from a schedule, comparing two."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

import moeopt as m
from moeopt.trace.timeline import (
    WHOLE,
    Timeline,
    TimelineRow,
    compare_timelines,
    parse_timeline_csv,
    read_timeline,
    timeline_from_schedule,
    write_timeline,
)

CSV = """# a comment line that is not metadata because it has no colon
# kernel_us: 100
# units: boundaries
stage,unit,group,start_us,end_us
front,*,AIV 0-47,0,10
load,e0,AIV,10,30
load,e1,AIV,30,50
mm,*,AIC,15,95
mm,e0,AIC,15,60
mm,e1,AIC,60,90
"""


def test_csv_metadata_stage_spans_and_units() -> None:
    t = parse_timeline_csv(CSV, "t.csv")
    assert t.meta == {"kernel_us": "100", "units": "boundaries"}
    assert t.stages() == ["front", "load", "mm"]
    # 'load' has no '*' row: its span is the envelope of its units, 10 .. 50
    assert t.stage_span("load") == (10.0, 50.0)
    # 'mm' has one: the '*' row wins over the units' envelope (15 .. 90)
    assert t.stage_span("mm") == (15.0, 95.0)
    assert t.units("mm") == {"e0": (15.0, 60.0), "e1": (60.0, 90.0)}
    assert t.stage_span("absent") is None
    assert t.kernel_us == 100.0
    assert t.span_us == 100.0  # from 0 to the kernel time
    assert t.unit_kind == "boundaries"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("stage,unit,start_us,end_us\nx,*,0,1\n", r"t.csv:1: header .* lacks group"),
        (
            "stage,unit,group,start_us,end_us\nx,*,g,zero,1\n",
            r"t.csv:2: start_us = 'zero': must be a number of µs",
        ),
        ("stage,unit,group,start_us,end_us\nx,*,g,5,1\n", r"t.csv:2: end_us = 1 is before start_us = 5"),
        ("stage,unit,group,start_us,end_us\nx,*,g,0,1,7\n", r"t.csv:2: 6 fields, the header has 5"),
        ("stage,unit,group,start_us,end_us\n,*,g,0,1\n", r"t.csv:2: stage is empty"),
        ("stage,unit,group,start_us,end_us\nx,e0,g,0,1\nx,e0,g,1,2\n", r"stage 'x' unit 'e0' appears twice"),
        (
            "# units: bars\nstage,unit,group,start_us,end_us\nx,*,g,0,1\n",
            r"units = 'bars': allowed: envelopes",
        ),
        ("# kernel_us: -3\nstage,unit,group,start_us,end_us\nx,*,g,0,1\n", r"kernel_us = '-3': must be"),
        ("stage,unit,group,start_us,end_us\n", r"t.csv: the timeline has no rows"),
        ("# only: metadata\n", r"t.csv: no header line"),
    ],
)
def test_bad_csv_is_one_clear_error(text: str, message: str) -> None:
    with pytest.raises(m.InputError, match=message):
        parse_timeline_csv(text, "t.csv")


def test_json_and_csv_round_trip(tmp_path: Path) -> None:
    t = parse_timeline_csv(CSV, "t.csv")
    for name in ("a.json", "b.csv"):
        back = read_timeline(write_timeline(tmp_path / name, t))
        assert back.rows == t.rows
        assert back.meta == t.meta


def test_bad_json_names_the_row(tmp_path: Path) -> None:
    p = tmp_path / "t.json"
    p.write_text('{"rows": [{"stage": "x", "unit": "*", "group": "", "start_us": 0, "end_us": "late"}]}')
    with pytest.raises(m.InputError, match=r"t.json: rows\[0\]: end_us = 'late': must be a number"):
        read_timeline(p)
    with pytest.raises(m.InputError, match="no such timeline file"):
        read_timeline(tmp_path / "missing.csv")


def test_timeline_of_a_schedule() -> None:
    # two loads on one AIV (1 µs, then 2 µs), a zero-length flag, and a matmul after each load
    g = m.EventGraph()
    g.add(m.Event("ld0", resources=["c0.AIV0"], duration_us=1.0, labels={"stage": "load", "expert": 0}))
    g.add(
        m.Event(
            "ld1",
            resources=["c0.AIV0"],
            deps={"ld0": 0.0},
            duration_us=2.0,
            labels={"stage": "load", "expert": 1},
        )
    )
    g.add(m.Event("flag", deps={"ld1": 0.0}, labels={"stage": "flag"}))
    g.add(
        m.Event(
            "mm0",
            resources=["c0.AIC"],
            deps={"ld0": 0.0},
            duration_us=4.0,
            labels={"stage": "mm", "expert": 0},
        )
    )
    g.add(
        m.Event(
            "mm1",
            resources=["c0.AIC"],
            deps={"flag": 0.5},
            duration_us=1.0,
            labels={"stage": "mm", "expert": 1},
        )
    )
    s = m.schedule(g)

    def unit_of(labels: Mapping[str, object]) -> tuple[str, str] | None:
        if labels["stage"] == "flag":
            return None
        return str(labels["stage"]), f"e{labels['expert']}"

    t = timeline_from_schedule(g, s, unit_of)
    # hand schedule: ld0 0-1, ld1 1-3, mm0 1-5 (after ld0), flag at 3, mm1 waits for the AIC: 5-6
    assert t.rows == (
        TimelineRow("load", WHOLE, "", 0.0, 3.0),
        TimelineRow("load", "e0", "", 0.0, 1.0),
        TimelineRow("load", "e1", "", 1.0, 3.0),
        TimelineRow("mm", WHOLE, "", 1.0, 6.0),
        TimelineRow("mm", "e0", "", 1.0, 5.0),
        TimelineRow("mm", "e1", "", 5.0, 6.0),
    )


def test_comparison_arithmetic() -> None:
    measured = parse_timeline_csv(CSV, "t.csv")
    predicted = Timeline(
        (
            TimelineRow("front", WHOLE, "", 0.0, 12.0),
            TimelineRow("load", "e0", "", 10.0, 35.0),
            TimelineRow("load", "e1", "", 35.0, 52.0),
            TimelineRow("mm", "e0", "", 20.0, 70.0),
        ),
        {"kernel_us": "110"},
    )
    c = compare_timelines(predicted, measured)
    assert [d.stage for d in c.stages] == ["front", "load", "mm"]
    # load: predicted envelope 10-52 against 10-50: start +0, end +2
    load = c.stages[1]
    assert (load.start_diff_us, load.end_diff_us) == (0.0, 2.0)
    # mm: predicted 20-70 (only e0) against the measured '*' row 15-95: start +5, end -25
    assert c.stage_error("mm") == pytest.approx(25 / 100)
    assert c.worst_stage_error == pytest.approx(0.25)
    # units both sides name: load e0, load e1, mm e0
    assert [(d.stage, d.unit) for d in c.units] == [("load", "e0"), ("load", "e1"), ("mm", "e0")]
    assert c.total_error == pytest.approx(110 / 100 - 1)
    text = c.format()
    assert "measured bars are back to back" in text
    assert "worst stage error 25.0% of the 100 µs span" in text
    assert c.to_dict()["stages"][2]["end_diff_us"] == -25.0
