"""Chrome-trace export, reading (with truncation) and the structural comparison."""

from __future__ import annotations

import copy
import gzip
import json
import warnings
from pathlib import Path

import pytest

import moeopt as m
from moeopt.errors import InputError
from moeopt.trace import (
    TraceTruncatedWarning,
    chrome_trace,
    compare_schedule_to_trace,
    compare_traces,
    parse_chrome_trace,
    read_chrome_trace,
    trace_from_schedule,
    write_chrome_trace,
)
from tests.viz.test_gantt import hand_graph

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "trace" / "megamoe_small.json"


def small_megamoe() -> tuple[m.Schedule, m.EventGraph]:
    s = m.Scenario(
        workload=m.Workload(tokens=16, topk=2, world=2, local_experts=2, routing="uniform"),
        h=1024,
        hidden_dim=1024,
        aic_num=4,
        profile="megamoe-a8w8",
    )
    rr = m.simulate(s)["rank_results"][0]
    return rr["schedule"], rr["graph"]


def test_export_layout_for_perfetto() -> None:
    g = hand_graph()
    s = m.schedule(g)
    doc = chrome_trace(s, g)
    meta = [e for e in doc["traceEvents"] if e["ph"] == "M"]
    procs = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
    # sites in natural order (c2 before c10), the resourceless flag in a process of its own
    assert procs == {1: "c0", 2: "c1", 3: "c2", 4: "c10", 5: "(no resource)"}
    threads = {(e["pid"], e["args"]["name"]) for e in meta if e["name"] == "thread_name"}
    assert threads == {(1, "AIC"), (1, "AIV1"), (2, "AIV0"), (3, "AIC"), (4, "AIC"), (5, "events")}
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    # one slice per resource held: d twice, every other event once (f on the no-resource process)
    assert sorted(e["name"] for e in xs) == ["a", "b", "c", "d", "d", "e", "f", "h"]
    c = next(e for e in xs if e["name"] == "c")
    # c: ready at end(b) + 0.5 = 1.5, c0.AIC busy with a until 2.0
    assert (c["ts"], c["dur"], c["cat"]) == (2.0, 1.0, "mm")
    assert c["args"]["wait"]["resource_wait_us"] == 0.5
    assert c["args"]["wait"]["pred"] == "b"


def test_round_trip_is_identical(tmp_path) -> None:
    for s, g in ((m.schedule(hand_graph()), hand_graph()), small_megamoe()):
        path = write_chrome_trace(tmp_path / "t.json", s, g)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a complete file reads without any warning
            tr = read_chrome_trace(path)
        assert not tr.truncated
        assert tr.notes == []
        assert len(tr) == len(s)
        for ev in tr.events:  # JSON keeps every float exactly
            assert ev.start_us == s.start_us[ev.name]
            assert ev.end_us == s.end_us[ev.name]
            assert ev.resources == tuple(s.resources[ev.name])
            assert ev.label == g[ev.name].labels.get("stage")
        cmp = compare_schedule_to_trace(s, g, tr, tolerance_us=0.0)
        assert cmp.identical, cmp.format()
        assert "IDENTICAL" in cmp.format()


def test_shipped_sample_reads_complete_and_matches_itself() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tr = read_chrome_trace(SAMPLE)
    assert tr.metadata["generator"] == "moeopt"
    assert len(tr) == tr.metadata["events"]
    stages = {e.label for e in tr.events}
    assert {"head", "dispatch", "gmm1", "activation", "gmm2", "combine", "tail"} <= stages
    assert compare_traces(tr, read_chrome_trace(SAMPLE)).identical


def _complete_events_before(text: str, cut: int) -> int:
    """Independent count: distinct exported events among the lines wholly inside text[:cut]."""
    names = set()
    for line in text[:cut].split("\n")[:-1]:  # the last piece may be cut
        line = line.rstrip(",")
        if line.startswith('{"name"'):
            names.add(json.loads(line)["args"]["event"])
    return len(names)


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.93])
def test_truncated_copy_reads_with_a_warning(tmp_path, fraction: float) -> None:
    text = SAMPLE.read_text()
    cut = int(len(text) * fraction)
    assert text[cut - 1] != "\n"  # a cut in the middle of a line, not at a record boundary
    bad = tmp_path / "cut.json"
    bad.write_text(text[:cut])
    with pytest.warns(TraceTruncatedWarning, match="cut short inside the event array"):
        tr = read_chrome_trace(bad)
    assert tr.truncated
    assert len(tr) == _complete_events_before(text, cut)
    full = read_chrome_trace(SAMPLE)
    cmp = compare_traces(full, tr)
    assert not cmp.identical
    assert any("cut short" in n for n in cmp.notes)


def test_missing_closing_brackets_only(tmp_path) -> None:
    text = SAMPLE.read_text().rstrip()
    assert text.endswith("]}")
    p = tmp_path / "noclose.json"
    p.write_text(text[:-2])
    with pytest.warns(TraceTruncatedWarning):
        tr = read_chrome_trace(p)
    assert len(tr) == read_chrome_trace(SAMPLE).metadata["events"]  # every event is still there


def test_gzip_and_truncated_gzip(tmp_path) -> None:
    s, g = m.schedule(hand_graph()), hand_graph()
    p = write_chrome_trace(tmp_path / "t.json.gz", s, g)
    assert p.read_bytes()[:2] == b"\x1f\x8b"
    assert compare_schedule_to_trace(s, g, read_chrome_trace(p)).identical
    big = SAMPLE.read_bytes()
    z = gzip.compress(big)
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(z[: len(z) // 2])
    with pytest.warns(TraceTruncatedWarning, match="gzip stream is cut short"):
        tr = read_chrome_trace(cut)
    assert 0 < len(tr) < 62


def _doc() -> dict:
    return json.loads(SAMPLE.read_text())


def _x(doc: dict, stage: str) -> list[dict]:
    return [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == stage]


def test_comparison_finds_durations_assignment_and_order() -> None:
    pred = parse_chrome_trace(_doc())
    meas_doc = _doc()
    for e in _x(meas_doc, "gmm1"):
        e["dur"] *= 1.1  # every GMM1 tile 10 % slower than predicted
    comb = _x(meas_doc, "combine")[0]
    comb["tid"] = 1 if comb["tid"] != 1 else 2  # one combine on another role of its core
    disp = sorted(_x(meas_doc, "dispatch"), key=lambda e: e["ts"])
    first, second = disp[0], next(e for e in disp if e["ts"] > disp[0]["ts"])
    first["ts"], second["ts"] = second["ts"], first["ts"]  # two dispatches in swapped order
    meas = parse_chrome_trace(meas_doc)
    cmp = compare_traces(pred, meas)
    assert not cmp.identical
    g1 = cmp.stage("gmm1")
    assert g1.duration_ratio == pytest.approx(1.1)
    assert g1.ratio_min == pytest.approx(1.1)
    assert g1.ratio_max == pytest.approx(1.1)
    assert g1.in_order == g1.matched  # durations changed, starts did not
    cb = cmp.stage("combine")
    assert cb.same_resources == cb.matched - 1
    assert cb.core_count_diff == 2  # one resource lost an event, another gained one
    dp = cmp.stage("dispatch")
    assert dp.in_order == dp.matched - 1  # one transposition of neighbours in time
    shift = first["ts"] - second["ts"]  # after the swap: first starts later by this much
    assert dp.max_start_shift_us == pytest.approx(shift, abs=1e-9)
    for name in ("head", "activation", "gmm2", "tail"):
        assert cmp.stage(name).identical(1e-9)


def test_begin_end_pairs_and_bare_array_read_like_complete_slices() -> None:
    doc = _doc()
    be = []
    for e in doc["traceEvents"]:
        if e["ph"] != "X":
            be.append(e)
            continue
        b = {k: v for k, v in e.items() if k != "dur"}
        b["ph"] = "B"
        be.append(b)
        be.append({"ph": "E", "pid": e["pid"], "tid": e["tid"], "ts": e["ts"] + e["dur"]})
    pred = parse_chrome_trace(_doc())
    assert compare_traces(pred, parse_chrome_trace(be)).identical  # a bare array, B/E pairs


def test_predicted_side_from_a_schedule_matches_the_exported_file(tmp_path) -> None:
    s, g = small_megamoe()
    tr = trace_from_schedule(s, g)
    assert compare_traces(tr, read_chrome_trace(write_chrome_trace(tmp_path / "x.json", s, g))).identical


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty file, not a Chrome trace"),
        ("hello", "expected a JSON array of events or an object with 'traceEvents', found 'h'"),
        ('{"foo": 1}', "the object has no 'traceEvents' key \\(keys: 'foo'\\)"),
        ('{"traceEvents": 3}', "'traceEvents' must be a list of events"),
        ("[1]", r"traceEvents\[0\]: expected an event object, got 1"),
        ('[{"name": "a", "ts": 1}]', r"traceEvents\[0\]: 'ph' .* is missing"),
        (
            '[{"name": "a", "ph": "X", "ts": 1}]',
            r"traceEvents\[0\] \(name 'a', ph 'X'\): 'dur' must be a number",
        ),
        ('[{"name": "a", "ph": "X", "ts": "one", "dur": 1}]', r"'ts' must be a finite number of µs, got 'one'"),
        (
            '[{"name": "a", "ph": "X", "ts": 1, "dur": 1}, xyz, {"name": "b"}]',
            "not valid JSON in traceEvents\\[1\\]",
        ),
        ('[{"name": "a", "ph": "X", "ts": 1, "dur": 1, "args": {"x": 1,, "y": 2}}]', "not valid JSON"),
        ('[{"name": 5, "ph": "X", "ts": 1, "dur": 1}]', r"'name' must be a string, got 5"),
    ],
)
def test_bad_trace_is_one_clear_error(tmp_path, text: str, message: str) -> None:
    p = tmp_path / "bad.json"
    p.write_text(text)
    with pytest.raises(InputError, match=message) as exc:
        read_chrome_trace(p)
    assert str(exc.value).startswith(str(p))
    assert "\n" not in str(exc.value)


def test_missing_and_binary_files(tmp_path) -> None:
    with pytest.raises(InputError, match="no such trace file"):
        read_chrome_trace(tmp_path / "nope.json")
    p = tmp_path / "bin.json"
    p.write_bytes(b"\xff\xfe\x00garbage" * 10)
    with pytest.raises(InputError, match="not UTF-8 text"):
        read_chrome_trace(p)


def test_metadata_after_events_still_names_resources() -> None:
    doc = _doc()
    evs = doc["traceEvents"]
    doc2 = copy.deepcopy(doc)
    doc2["traceEvents"] = [e for e in evs if e["ph"] != "M"] + [e for e in evs if e["ph"] == "M"]
    assert compare_traces(parse_chrome_trace(doc), parse_chrome_trace(doc2)).identical


def test_every_prefix_reads_as_far_as_it_goes(tmp_path) -> None:
    """Cut the export of a small schedule at every byte: never an error, always a warning, and every
    event read is exactly an event of the full trace (no half-read event, no invented one)."""
    g = hand_graph()
    s = m.schedule(g)
    text = write_chrome_trace(tmp_path / "t.json", s, g).read_text()
    full = {e.name: e for e in read_chrome_trace(tmp_path / "t.json").events}
    assert len(full) == len(s)
    seen = 0
    for cut in range(1, len(text.rstrip())):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tr = parse_chrome_trace(text[:cut])
        assert [w.category for w in caught] == [TraceTruncatedWarning], cut
        assert tr.truncated
        names = [e.name for e in tr.events]
        # a multi-resource event may be read with only its first slices: compare times and label
        for e in tr.events:
            ref = full[e.name]
            assert (e.start_us, e.end_us, e.label) == (ref.start_us, ref.end_us, ref.label)
            assert set(e.resources) <= set(ref.resources)
        assert len(names) >= seen  # a longer prefix never reads fewer events
        seen = len(names)
    assert seen == len(s)  # the cut that only loses the closing brace still has every event
