"""`moeopt trace-compare` with what a kernel developer has: a measured stage timeline, or a profiler's
Chrome trace with a mapping file; the two calibration timelines shipped with moeopt as inputs."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from moeopt.cli import main
from moeopt.trust.fidelity import calibration_timelines

ROOT = Path(__file__).resolve().parents[2]
BASELINE, V1 = calibration_timelines()


def _stage_spans(path: Path) -> dict[str, tuple[float, float]]:
    """Each stage's span read straight from the CSV: its '*' row, else the envelope of its rows."""
    body = "\n".join(ln for ln in path.read_text().splitlines() if not ln.startswith("#"))
    rows = list(csv.DictReader(io.StringIO(body)))
    out: dict[str, tuple[float, float]] = {}
    for st in dict.fromkeys(r["stage"] for r in rows):
        mine = [r for r in rows if r["stage"] == st]
        whole = [r for r in mine if r["unit"] == "*"]
        use = whole or mine
        out[st] = (min(float(r["start_us"]) for r in use), max(float(r["end_us"]) for r in use))
    return out


@pytest.mark.parametrize("path", [BASELINE, V1], ids=["baseline", "v1"])
def test_the_calibration_timelines_give_per_stage_differences(path, capsys):
    assert main(["trace-compare", str(path)]) == 0
    text = capsys.readouterr().out
    assert main(["trace-compare", str(path), "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    measured = _stage_spans(path)
    # one row per measured stage, in the kernel's order, with the measured span as the file has it
    assert [d["stage"] for d in doc["stages"]] == list(measured)
    for d in doc["stages"]:
        assert tuple(d["measured"]) == measured[d["stage"]]
        assert d["predicted"] is not None  # the model has every stage the kernel's timeline has
        # the differences are predicted - measured, start and end
        assert d["start_diff_us"] == pytest.approx(d["predicted"][0] - d["measured"][0])
        assert d["end_diff_us"] == pytest.approx(d["predicted"][1] - d["measured"][1])
        assert f"{d['end_diff_us']:+8.0f}" in text  # and the table prints them
    assert doc["measured_kernel_us"] == float(
        next(ln for ln in path.read_text().splitlines() if ln.startswith("# kernel_us:")).split(":")[1]
    )


def _shifted(path: Path, stage: str, by_us: float, dest: Path) -> Path:
    """A copy of a timeline with every row of ``stage`` moved later by ``by_us``."""
    out = []
    for ln in path.read_text().splitlines():
        parts = ln.split(",")
        if not ln.startswith("#") and parts[0] == stage:
            parts[3] = f"{float(parts[3]) + by_us:g}"
            parts[4] = f"{float(parts[4]) + by_us:g}"
        out.append(",".join(parts))
    dest.write_text("\n".join(out) + "\n")
    return dest


def test_check_fails_on_a_shifted_copy_of_a_calibration_timeline(tmp_path, capsys):
    assert main(["trace-compare", str(BASELINE), "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # a tolerance the model meets on the timeline as measured (its worst stage, plus one point)...
    tol = f"{100 * doc['worst_stage_error'] + 1:.1f}%"
    assert main(["trace-compare", str(BASELINE), "--check", "--tolerance", tol]) == 0
    capsys.readouterr()
    # ...is broken by the same timeline with GMM1 moved 40% of the span later
    moved = _shifted(BASELINE, "gmm1", 0.4 * doc["span_us"], tmp_path / "shifted.csv")
    assert main(["trace-compare", str(moved), "--check", "--tolerance", tol]) == 1
    err = capsys.readouterr().err
    assert "error: --check: gmm1: off by" in err
    assert [ln for ln in err.splitlines() if ln.startswith("error: --check:")] == [
        ln for ln in err.splitlines() if ln.startswith("error: --check: gmm1")
    ]
    # an absolute tolerance in µs works the same way
    us = f"{doc['worst_stage_error'] * doc['span_us'] + 1:.0f}"
    assert main(["trace-compare", str(BASELINE), "--check", "--tolerance", us]) == 0
    assert main(["trace-compare", str(moved), "--check", "--tolerance", us]) == 1


def test_a_profiler_trace_with_a_mapping_gives_the_same_comparison(capsys):
    # examples/profiler_trace_pto_baseline.json is the baseline timeline written as a profiler
    # exports stage markers (absolute clock, times as strings, host calls around the kernel)
    trace = ROOT / "examples" / "profiler_trace_pto_baseline.json"
    mapping = ROOT / "examples" / "trace_mapping.toml"
    assert main(["trace-compare", str(trace), "--mapping", str(mapping), "--units", "--json", "-"]) == 0
    from_trace = json.loads(capsys.readouterr().out)
    assert main(["trace-compare", str(BASELINE), "--units", "--json", "-"]) == 0
    from_csv = json.loads(capsys.readouterr().out)
    for key in ("stages", "units", "measured_kernel_us", "predicted_kernel_us", "unit_kind"):
        assert from_trace[key] == from_csv[key], key
    assert from_trace["notes"] == ["2 event(s) of the trace give no stage under the mapping: left out"]


def test_a_scenario_file_gives_the_prediction_when_one_is_named(tmp_path, capsys):
    # the same case as the baseline timeline's metadata, written as a scenario file
    scenario = tmp_path / "pto.toml"
    scenario.write_text(
        'profile = "pto-a2a3"\nh = 7168\nhidden_dim = 4096\n'
        '[workload]\ntokens = 2048\ntopk = 8\nworld = 16\nlocal_experts = 16\nrouting = "cyclic"\n'
    )
    assert main(["trace-compare", str(scenario), str(BASELINE), "--json", "-"]) == 0
    named = json.loads(capsys.readouterr().out)
    assert main(["trace-compare", str(BASELINE), "--json", "-"]) == 0
    assert named["stages"] == json.loads(capsys.readouterr().out)["stages"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["{b}", "--check"], "--check on a measured timeline needs --tolerance"),
        (["{b}", "--check", "--tolerance", "ten"], "--tolerance 'ten': allowed: a number of µs >= 0 or a percentage"),
        (["{t}"], "a Chrome trace without --mapping is compared event by event with the schedule of a scenario"),
        (["{b}", "--mapping", "{m}"], "--mapping applies to Chrome traces"),
        (["a.toml", "b.csv", "c.csv"], "trace-compare takes \\[SCENARIO\\] MEASURED, got 3 files"),
    ],
)
def test_bad_input_is_one_line(argv, message, capsys):
    import re

    paths = {
        "b": str(BASELINE),
        "t": str(ROOT / "examples" / "profiler_trace_pto_baseline.json"),
        "m": str(ROOT / "examples" / "trace_mapping.toml"),
    }
    assert main(["trace-compare", *[a.format(**paths) for a in argv]]) == 2
    err = capsys.readouterr().err
    assert re.search(message, err), err
    assert len(err.strip().splitlines()) == 1
