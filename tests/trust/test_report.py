"""``python -m moeopt report / trace / trace-compare``: the page, the trace round trip, bad input, and the
page in a real headless Chromium (skipped only when no browser is installed)."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest

import moeopt as m
from moeopt.cli import main
from moeopt.trace import TraceTruncatedWarning, read_chrome_trace
from moeopt.viz.browser import find_browser, load_page

SMALL = """
profile = "megamoe-a8w8"
h = 1024
hidden_dim = 1024
aic_num = 4
[workload]
tokens = 16
topk = 2
world = 2
local_experts = 2
routing = "uniform"
"""


@pytest.fixture
def scenario(tmp_path) -> Path:
    p = tmp_path / "small.toml"
    p.write_text(SMALL)
    return p


def _gantt_doc(page: str) -> dict:
    found = re.search(r'<script type="application/json" id="schedule-data">(.*?)</script>', page, re.S)
    assert found is not None
    return json.loads(found.group(1))


def test_report_page_contents(scenario, tmp_path, capsys) -> None:
    out = tmp_path / "r.html"
    assert main(["report", str(scenario), "-o", str(out), "--policy", "critical_path_first"]) == 0
    assert "wrote" in capsys.readouterr().out
    page = out.read_text()
    r = m.simulate(m.load_scenario(scenario))
    b = r["bounds"]
    # the bounds and the time as simulate reports them, in the page's number format
    for v in (r["kernel_total_us"], b["compute_us"], b["bandwidth_us"], b["dependency_us"]):
        assert f"{v:,.3f}" in page
    assert f"binding: {b['binding']}" in page
    for role, u in r["role_utilization"].items():
        assert f'<td class="l">{role}</td>' in page
        assert f"{100 * u:.1f}%" in page
    doc = _gantt_doc(page)
    # the scenario's greedy and the extra policy, stacked on one axis
    assert [t["title"] for t in doc["tracks"]] == [
        "rank 0, greedy (earliest_start)",
        "rank 0, greedy (critical_path_first)",
    ]
    rr = r["rank_results"][0]
    # one row per core and role: every concrete resource the schedule used
    used = {x for res in rr["schedule"].resources.values() for x in res}
    assert set(doc["tracks"][0]["rows"]) == used
    assert doc["key"] == "stage"
    assert {"dispatch", "gmm1", "activation", "gmm2", "combine"} <= set(doc["labels"])


def test_report_has_no_network_reference(scenario, tmp_path) -> None:
    out = tmp_path / "r.html"
    assert main(["report", str(scenario), "-o", str(out)]) == 0
    page = out.read_text()
    assert not re.search(r"https?://", page)
    assert not re.search(r"""(src|href)\s*=\s*["']?//""", page)
    assert "@import" not in page


def test_report_with_the_cpsat_schedule(scenario, tmp_path) -> None:
    out = tmp_path / "r.html"
    assert main(["report", str(scenario), "-o", str(out), "--exact", "5"]) == 0
    page = out.read_text()
    titles = [t["title"] for t in _gantt_doc(page)["tracks"]]
    assert len(titles) == 2
    assert titles[1].startswith("rank 0, CP-SAT ")
    assert "lower bound" in page


@pytest.mark.skipif(
    find_browser() is None, reason="no Chromium-family browser found (chromium, google-chrome)"
)
def test_report_opens_in_headless_chromium(scenario, tmp_path) -> None:
    out = tmp_path / "r.html"
    assert main(["report", str(scenario), "-o", str(out)]) == 0
    dom = load_page(out, timeout_s=15)
    assert dom.console == [], dom.console  # no console message, no uncaught error
    drawn = re.search(r'data-drawn="(\d+)"', dom.dom)
    assert drawn is not None
    assert int(drawn.group(1)) > 0  # the chart's script ran and painted bars
    shot = load_page(out, screenshot=tmp_path / "r.png", window=(1400, 2400), timeout_s=15)
    assert shot.console == []
    assert shot.screenshot is not None
    assert shot.screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_trace_export_and_compare_round_trip(scenario, tmp_path, capsys) -> None:
    tr = tmp_path / "t.json"
    assert main(["trace", str(scenario), "-o", str(tr)]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        back = read_chrome_trace(tr)
    assert back.metadata["scenario"] == str(scenario)
    capsys.readouterr()
    assert main(["trace-compare", str(scenario), str(tr), "--check"]) == 0
    assert "IDENTICAL" in capsys.readouterr().out
    # a truncated copy: a warning on stderr, the comparison of what is there, --check fails
    text = tr.read_text()
    cut = tmp_path / "cut.json"
    cut.write_text(text[: len(text) * 2 // 3])
    assert main(["trace-compare", str(scenario), str(cut), "--check"]) == 1
    io = capsys.readouterr()
    assert "warning:" in io.err
    assert "truncated trace" in io.err
    assert "DIFFERENT" in io.out
    assert main(["trace-compare", str(scenario), str(cut)]) == 0  # without --check: a report, not a failure
    with pytest.warns(TraceTruncatedWarning):
        read_chrome_trace(cut)


def test_trace_compare_json_output(scenario, tmp_path, capsys) -> None:
    tr = tmp_path / "t.json"
    assert main(["trace", str(scenario), "-o", str(tr), "--policy", "critical_path_first"]) == 0
    capsys.readouterr()
    assert main(["trace-compare", str(scenario), str(tr), "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {s["stage"] for s in doc["stages"]} >= {"dispatch", "gmm1", "combine"}
    assert all(s["predicted"] == s["measured"] for s in doc["stages"])  # same graph, another policy


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["report", "{s}", "-o", "{o}", "--rank", "9"],
            "--rank: must be an integer from 0 to 1 (the world size is 2), got 9",
        ),
        (["report", "{s}", "-o", "{o}", "--policy", "fastest"], "fastest"),
        (["trace-compare", "{s}", "{t}/missing.json"], "missing.json: no such trace file"),
        (["trace", "{s}", "-o", "{t}/no/such/dir/x.json"], "cannot write the trace"),
        (["report", "{s}", "-o", "{o}", "--set", "kernel.tile_q=3"], "tile_q"),
    ],
)
def test_bad_input_one_line(scenario, tmp_path, capsys, argv, message) -> None:
    args = [a.format(s=scenario, o=tmp_path / "r.html", t=tmp_path) for a in argv]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ")
    assert message in err
    assert "Traceback" not in err
    assert not (tmp_path / "r.html").exists()
