"""A finished study is an ordinary Optuna study: plain Optuna opens it, and its list reads well."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import optuna
import yaml
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from moeopt.search import run_study


def test_a_finished_study_opens_with_plain_optuna(tiny, tmp_path):
    r = run_study(tiny, out=tmp_path / "run")
    # Optuna's own journal backend, its default lock, nothing from moeopt
    storage = JournalStorage(JournalFileBackend(str(tmp_path / "run" / "study.journal")))
    study = optuna.load_study(study_name="tiny", storage=storage)
    assert len(study.trials) == r.n_trials == tiny["trials"]
    assert study.best_trial.number == r.best_trial
    assert study.best_value == r.best_value
    assert study.best_params == dict(r.best_params)
    # every trial says what happened to its point, in plain JSON values
    for t in study.trials:
        assert t.user_attrs["moeopt"]["kind"] in ("ok", "infeasible", "constraint", "lower_bound")
        assert (t.state == TrialState.COMPLETE) == (t.user_attrs["moeopt"]["kind"] == "ok")


def test_the_study_list_of_optuna_is_readable(tiny, tmp_path):
    r = run_study(tiny, out=tmp_path / "run")
    p = subprocess.run(
        [
            str(Path(sys.executable).parent / "optuna"), "studies",  # Optuna's command, installed with it
            "--storage", str(tmp_path / "run" / "study.journal"),
            "--storage-class", "JournalFileBackend",
            "-f", "yaml",
        ],
        capture_output=True, text=True, timeout=120, check=False, env=dict(os.environ),
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    (listed,) = yaml.safe_load(p.stdout)
    assert listed["name"] == "tiny"
    # a few short values a person reads, not the whole study configuration
    assert listed["user_attrs"] == {
        "objective": "kernel_total_us, minimize",
        "baseline": round(r.baseline_value, 3),
        "best": f"{r.best_value:.3f} (trial {r.best_trial})",
    }
    assert max(len(line) for line in p.stdout.splitlines()) < 80
    assert Path(tmp_path / "run" / "study.journal").is_file()
