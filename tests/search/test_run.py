"""run_study end to end on the bs=72 shape: outputs, reproducibility, pruning reasons, failures."""

from __future__ import annotations

import csv
import json
import os
import time
from pathlib import Path

import optuna
import pytest
import yaml

import moeopt as m
from moeopt import registry
from moeopt.search import run_study
from moeopt.search.storage import resolve_storage


def _trials(out: Path, name: str) -> list[optuna.trial.FrozenTrial]:
    spec = resolve_storage(None, str(out))
    return optuna.load_study(study_name=name, storage=spec.open()).get_trials()


def test_tiny_study_end_to_end_best_toml_reproduces_the_best_value(tiny, tmp_path):
    out = tmp_path / "run"
    r = run_study(tiny, out=out)

    # best.toml is a scenario file that simulate accepts, and gives the reported value bit for bit
    again = m.simulate(m.load_scenario(out / "best.toml"))
    assert again["kernel_total_us"] == r.best_value
    assert r.summary["best"]["reproduced"] is True

    # the best is the minimum over completed trials, and no worse than the baseline (enqueued as trial 0)
    trials = _trials(out, "tiny")
    done = [t.value for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert r.best_value == min(done)
    assert trials[0].user_attrs.get("baseline") is True
    assert trials[0].value == r.baseline_value
    assert r.best_value <= r.baseline_value

    # exactly the requested trials, one CSV row each, with the pruned reason stored
    assert r.n_trials == 12
    assert len(trials) == 12
    rows = list(csv.DictReader((out / "trials.csv").open()))
    assert [int(x["number"]) for x in rows] == list(range(12))
    for row, t in zip(rows, trials, strict=True):
        assert row["state"] == t.state.name
        if t.state == optuna.trial.TrialState.PRUNED and row["kind"] == "infeasible":
            # tile_n 512 with tile_m 256: (256 + 512) x 512 B x 2 stages = 786432 B > 512 KiB of L1
            assert "do not fit L1" in row["reason"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_trials"] == 12
    assert summary["best"]["trial"] == r.best_trial
    html = (out / "report.html").read_text()
    for section in ("Best vs baseline", "Optimisation history", "Parameter importances", "Optimality gap"):
        assert section in html


def test_same_seed_gives_the_same_trials(tiny, tmp_path):
    tiny["trials"] = 6
    a = run_study(tiny, out=tmp_path / "a")
    b = run_study(tiny, out=tmp_path / "b")
    ta, tb = _trials(tmp_path / "a", "tiny"), _trials(tmp_path / "b", "tiny")
    assert [t.params for t in ta] == [t.params for t in tb]
    assert [t.value for t in ta] == [t.value for t in tb]
    assert a.best_value == b.best_value
    tiny["seed"] = 2
    c = run_study(tiny, out=tmp_path / "c")
    assert c.n_trials == 6
    assert [t.params for t in _trials(tmp_path / "c", "tiny")][1:] != [t.params for t in ta][1:]


def test_lower_bound_prunes_without_scheduling_and_counts_it(tiny, tmp_path):
    """With 4 cube cores instead of 28 the compute bound alone is far above the 28-core time.

    bs=72: the 28-core baseline runs 381.3 µs; at aic_num 4 the adapter's bound is 1033.5 µs
    (bandwidth/compute per core x 4 cores), so once the baseline is the best, every 4-core point
    is pruned on its bound.
    """
    tiny.update(
        space={"aic_num": {"choices": [28, 4]}, "kernel.tile_m": {"choices": [128, 256]}},
        sampler="grid",
        trials=4,
        prune={"lower_bound": "always"},
    )
    r = run_study(tiny, out=tmp_path / "lb")
    trials = _trials(tmp_path / "lb", "tiny")
    pruned = [t for t in trials if t.state == optuna.trial.TrialState.PRUNED]
    assert pruned
    # every 4-core point is pruned; a 28-core point may be too, by the floors of its own graph
    # (tile_m 128 loads more per MTE2 pipe than the best time)
    assert all(t in pruned for t in trials if t.params["aic_num"] == 4)
    for t in pruned:
        a = t.user_attrs["moeopt"]
        assert a["kind"] == "lower_bound"
        assert a["lower_bound_us"] >= r.best_value
        assert a["reason"].startswith("lower bound")
        # soundness: the real time of the pruned point is at least its bound
        sc = m.load_scenario(
            tmp_path / "lb" / "best.toml",
            overrides={"aic_num": t.params["aic_num"], "kernel.tile_m": t.params["kernel.tile_m"]},
        )
        assert m.simulate(sc)["kernel_total_us"] >= a["lower_bound_us"]
    assert r.summary["pruned"]["lower_bound"] == len(pruned)
    assert r.summary["run"]["lower_bound_checks"]["pruned"] == len(pruned)


def _boom_builder() -> object:
    def build(*args: object) -> object:
        raise ZeroDivisionError("boom in a registered builder")

    return build


@pytest.fixture
def boom_builder():
    # registered for this test only: generated docs list the registered builders
    with registry.registered("builder", "test_search_boom", _boom_builder) as name:
        yield name


def test_one_failing_trial_never_stops_the_study(tiny, tmp_path, boom_builder):
    tiny.update(
        space={
            "options.builder": {"choices": ["megamoe", boom_builder]},
            "kernel.tile_m": {"choices": [128, 256]},
        },
        sampler="grid",
        trials=4,
    )
    r = run_study(tiny, out=tmp_path / "boom")
    trials = _trials(tmp_path / "boom", "tiny")
    failed = [t for t in trials if t.state == optuna.trial.TrialState.FAIL]
    assert {t.params["options.builder"] for t in failed} == {"test_search_boom"}
    assert all(
        t.user_attrs["moeopt"]["reason"] == "internal error ZeroDivisionError: boom in a registered builder"
        for t in failed
    )
    assert r.n_trials == 4
    assert r.best_value is not None
    assert r.summary["failed"] == {"internal": len(failed)}


def test_duplicate_points_reuse_the_evaluated_outcome(tiny, tmp_path):
    tiny.update(space={"kernel.tile_m": {"choices": [128, 256]}}, sampler="random", trials=6)
    run_study(tiny, out=tmp_path / "dup")
    trials = _trials(tmp_path / "dup", "tiny")
    firsts: dict[int, optuna.trial.FrozenTrial] = {}
    for t in trials:
        dup = t.user_attrs["moeopt"].get("duplicate_of") if "moeopt" in t.user_attrs else None
        if dup is None:
            assert t.params["kernel.tile_m"] not in firsts  # a point is simulated once
            firsts[t.params["kernel.tile_m"]] = t
        else:
            assert t.value == trials[dup].value
            assert t.params == trials[dup].params
    assert len(firsts) == 2  # 6 trials over 2 points: 4 reused


def test_conditional_parameter_is_absent_when_its_condition_fails(tiny, tmp_path):
    tiny.update(
        space={
            "policy.dispatch_lookahead": {"choices": [0, 2]},
            "policy.dispatch_lag": {"choices": [0, 1], "when": {"policy.dispatch_lookahead": 2}},
        },
        sampler="bruteforce",
        trials=10,
    )
    r = run_study(tiny, out=tmp_path / "cond")
    # lookahead 0: one point; lookahead 2: two points (lag 0, 1) -> the space has 3 points
    assert r.summary["target_trials"] == 3
    trials = _trials(tmp_path / "cond", "tiny")
    for t in trials:
        assert ("policy.dispatch_lag" in t.params) == (t.params["policy.dispatch_lookahead"] == 2)


def test_resume_refuses_a_changed_search_and_a_fresh_run_refuses_an_existing_study(tiny, tmp_path):
    tiny["trials"] = 3
    run_study(tiny, out=tmp_path / "x")
    # from Python, the message names run_study's own keyword arguments, not the command-line flags
    with pytest.raises(
        m.InputError,
        match=r"already exists in journal:.* with 3 trial\(s\); pass resume=True to continue it .*or out=DIR",
    ):
        run_study(tiny, out=tmp_path / "x")
    tiny["space"]["kernel.tile_m"] = {"choices": [64, 128]}
    with pytest.raises(m.InputError, match=r"cannot resume study 'tiny': the study file changed its space"):
        run_study(tiny, out=tmp_path / "x", resume=True)


def test_resuming_a_finished_study_runs_nothing_and_says_how_to_add_trials(tiny, tmp_path):
    tiny.update(trials=4, outputs={"exact_gap": {"time_limit_s": 2}})
    first = run_study(tiny, out=tmp_path / "f")
    assert first.summary["exact_gap"]["available"] is True
    said: list[str] = []
    again = run_study(tiny, out=tmp_path / "f", resume=True, say=said.append)
    assert said == [
        "study 'tiny' already has 4 trial(s) (4 requested): nothing to run; trials=N with N > 4 adds trials"
    ]
    assert again.status == "finished"
    assert (again.summary["run"]["evaluated"], again.summary["run"]["duplicates"]) == (0, 0)
    assert again.best_trial == first.best_trial
    # the best point did not change, so CP-SAT is not run on it again: its stored gap is reported
    assert again.summary["exact_gap"]["stored"] is True
    assert again.summary["exact_gap"]["shapes"] == json.loads(json.dumps(first.summary["exact_gap"]["shapes"]))
    assert len(_trials(tmp_path / "f", "tiny")) == 4  # nothing was added


def test_resuming_a_finished_study_on_the_command_line_says_so(tiny, tmp_path):
    import subprocess
    import sys

    tiny.update(trials=3, out="run")
    study = tmp_path / "s.yaml"
    study.write_text(yaml.safe_dump(tiny))
    cmd = [sys.executable, "-m", "moeopt.search", str(study), "--quiet"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    assert subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, check=False).returncode == 0
    p = subprocess.run([*cmd, "--resume"], cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stderr
    assert "already has 3 trial(s) (3 requested): nothing to run; --trials N with N > 3 adds trials" in p.stderr
    assert "no trial run: the study already had its 3 trials (--trials N adds more)" in p.stdout
    assert "trials/min" not in p.stdout


def test_timeout_stops_starting_trials(tiny, tmp_path):
    tiny["trials"] = 10_000
    t0 = time.perf_counter()
    r = run_study(tiny, out=tmp_path / "t", timeout_s=1.0)
    assert 1 <= r.n_trials < 10_000
    assert not r.interrupted
    assert r.status == "timeout"
    assert time.perf_counter() - t0 < 30  # the loop stopped; outputs were still written
    assert (tmp_path / "t" / "best.toml").exists()


@pytest.mark.slow  # creating the SQLite schema takes seconds
def test_sqlite_storage_resumes_like_the_journal(tiny, tmp_path):
    tiny["trials"] = 3
    run_study(tiny, out=tmp_path / "q", storage="sqlite")
    r = run_study(tiny, out=tmp_path / "q", storage="sqlite", resume=True, trials=5)
    assert r.storage == f"sqlite:///{tmp_path / 'q' / 'study.db'}"
    assert r.n_trials == 5
    st = optuna.load_study(study_name="tiny", storage=r.storage)
    assert [t.number for t in st.get_trials()] == list(range(5))
