"""The small things of the user's side: where report writes by default, natural order of cores,
the Gantt legend's counts, what gap --json says it used, what simulate --json holds, and one
parameter table in the study report."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import moeopt as m
from moeopt.cli import main
from moeopt.search import run_study
from moeopt.viz import GanttTrack, gantt_data

ROOT = Path(__file__).resolve().parents[2]
BS72 = ROOT / "examples" / "scenario_bs72.toml"
# 12 cube cores: resource names c0 .. c11, where text order would put c10 and c11 before c2
SMALL = """
profile = "megamoe-a8w8"
h = 1024
hidden_dim = 1024
aic_num = 12
[workload]
tokens = 16
topk = 2
world = 2
local_experts = 2
routing = "uniform"
"""


def test_report_writes_under_runs_by_default_and_lists_cores_in_natural_order(tmp_path, capsys):
    (tmp_path / "small.toml").write_text(SMALL)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert main(["report", "small.toml"]) == 0
        assert main(["trace", "small.toml"]) == 0
    finally:
        os.chdir(cwd)
    # runs/ is the folder every default output goes to (and .gitignore lists it): nothing lands
    # beside the user's files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs", "small.toml"]
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["small.html", "small.trace.json"]
    assert "runs/" in (ROOT / ".gitignore").read_text().splitlines()
    page = (tmp_path / "runs" / "small.html").read_text()
    table = page.split("per resource (")[1].split("</table>")[0]
    cores = [int(x) for x in dict.fromkeys(re.findall(r"<td[^>]*>c(\d+)\.", table))]
    assert cores == sorted(cores)
    assert 10 in cores  # the case that text order gets wrong


def test_gantt_legend_counts_the_events_of_one_schedule_not_of_every_chart():
    g = m.EventGraph()
    for k in range(3):
        g.add(m.Event(f"a{k}", resources=[f"c{k}.AIC"], duration_us=1.0, labels={"stage": "load"}))
    g.add(m.Event("b", resources=["c0.AIV0"], deps={"a0": 0.0}, duration_us=1.0, labels={"stage": "vec"}))
    s1 = m.schedule(g, policy="earliest_start")
    s2 = m.schedule(g, policy="critical_path_first")
    doc = gantt_data([GanttTrack("greedy", s1, g), GanttTrack("other", s2, g)])
    # the same graph twice: 3 'load' events and 1 'vec' event per chart (not 6 and 2)
    assert dict(zip(doc["labels"], doc["legend"])) == {"load": "3", "vec": "1"}
    # two different graphs: one count per chart
    h = m.EventGraph()
    h.add(m.Event("x", resources=["c0.AIC"], duration_us=1.0, labels={"stage": "load"}))
    doc = gantt_data([GanttTrack("g", s1, g), GanttTrack("h", m.schedule(h), h)])
    assert dict(zip(doc["labels"], doc["legend"])) == {"load": "3 / 1", "vec": "1 / 0"}


def test_gap_json_says_which_time_limit_it_used(tmp_path, capsys):
    assert main(["gap", str(BS72), "--json", str(tmp_path / "g.json")]) == 0
    settings = json.loads((tmp_path / "g.json").read_text())["settings"]
    # a scenario input without --time-limit gets CP-SAT 30 s per distinct rank (the printed header
    # says so too)
    assert settings["time_limit_s"] == 30
    assert settings["time_limit_s_by_input"] == {"scenarios": 30}
    assert "CP-SAT 30 s per rank" in capsys.readouterr().out


def test_simulate_json_says_which_rank_stands_for_which(capsys):
    assert main(["simulate", str(BS72), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    world = m.load_scenario(BS72).workload.world
    assert sorted(int(k) for k in doc["representative_of_rank"]) == list(range(world))
    for rank, rep in doc["representative_of_rank"].items():
        assert int(rank) in doc["rank_results"][str(rep)]["ranks_sharing_signature"]


def test_study_report_shows_the_best_parameters_once(tiny_study, tmp_path):
    r = run_study(tiny_study, out=tmp_path / "plain")
    page = Path(r.files["report_html"]).read_text()
    assert page.count("<h2>Best parameters</h2>") == 1
    assert "As scenario overrides" not in page  # each parameter is its own scenario path
    # a label -> overrides parameter: the overrides say what the label stands for
    tiny_study["space"]["tiles"] = {"choices": {"narrow": {"kernel.tile_n": 128}, "wide": {"kernel.tile_n": 256}}}
    r = run_study(tiny_study, out=tmp_path / "mapped")
    assert "As scenario overrides" in Path(r.files["report_html"]).read_text()
