"""Kill and resume, Ctrl-C and resume, and several workers on one storage (real processes, real Optuna)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.trial import TrialState

from moeopt.search import run_study
from moeopt.search.storage import resolve_storage

from .conftest import write_study

ROOT = Path(__file__).resolve().parents[2]


def _slower(tiny: dict[str, Any], trials: int) -> dict[str, Any]:
    # 576 tokens per rank and 64 / 128-row tiles make a trial take ~0.1-0.4 s (measured
    # 2026-11-29), so a kill usually lands inside a trial and a second process has time to join
    tiny["scenario"] = {**tiny["scenario"], "workload": {**tiny["scenario"]["workload"], "tokens": 576}}
    tiny.update(
        space={
            "kernel.tile_m": {"choices": [64, 128]},
            "kernel.tile_n": {"choices": [128, 256]},
            "p1_override": {"int": [0, 2]},
            "policy.dispatch_lookahead": {"choices": [0, 1]},
        },
        trials=trials,
        out="run",
        prune={"duplicates": False},  # every trial simulates, so none is instantaneous
    )
    return tiny


def _load(out: Path, name: str = "tiny") -> list[optuna.trial.FrozenTrial] | None:
    spec = resolve_storage(None, str(out))
    if not os.path.exists(spec.path or ""):
        return None
    try:
        return optuna.load_study(study_name=name, storage=spec.open()).get_trials()
    except KeyError:
        return None


def _start(study: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "moeopt.search", str(study), "--quiet", *args],
        cwd=study.parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_mid_trial(
    out: Path, min_finished: int, proc: subprocess.Popen[str], limit_s: float = 120.0
) -> None:
    """Return once >= min_finished trials are done and one is running (or the process is near the end)."""
    t0 = time.time()
    while time.time() - t0 < limit_s:
        trials = _load(out)
        if trials is not None:
            done = sum(1 for t in trials if t.state.is_finished())
            running = any(t.state == TrialState.RUNNING and "worker" in t.user_attrs for t in trials)
            if done >= min_finished and running:
                return
        assert proc.poll() is None, (
            f"the study ended before it could be stopped: {proc.stderr.read() if proc.stderr else ''}"
        )
        time.sleep(0.02)
    raise AssertionError("the study did not reach a running trial in time")


def _check_resumed(
    before: list[optuna.trial.FrozenTrial], after: list[optuna.trial.FrozenTrial], n: int
) -> None:
    # numbering continues: the trials that existed keep their numbers, states and values
    for t in before:
        if t.state.is_finished():
            a = after[t.number]
            assert (a.state, a.values, a.params) == (t.state, t.values, t.params)
    # the trial that was running is marked interrupted and its point was run again, once
    interrupted = [
        t for t in after if t.state == TrialState.FAIL and t.user_attrs["moeopt"]["kind"] == "interrupted"
    ]
    stopped = [t.number for t in before if t.state == TrialState.RUNNING]
    assert [t.number for t in interrupted] == stopped
    for t in interrupted:
        retries = [x for x in after if x.user_attrs.get("retry_of") == t.number]
        if not t.params:
            # stopped between asking for the trial and choosing its first value (a loaded machine
            # makes that window wide enough to hit): no point was chosen, so none is lost, and a
            # "retry" of nothing would only be a fresh trial mislabelled; the sampler draws anew
            assert retries == []
            continue
        # the retry takes the point's values chosen so far (all, unless it was stopped while choosing)
        assert len(retries) == 1
        assert retries[0].params.items() >= t.params.items()
        assert retries[0].state.is_finished()
    # exactly n counted trials: nothing lost, nothing counted twice, nothing left running
    counted = [t for t in after if t.state.is_finished() and t not in interrupted]
    assert len(counted) == n
    assert not [t for t in after if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    assert [t.number for t in after] == list(range(len(after)))


def test_killed_study_resumes_with_no_trial_lost_or_duplicated(tiny, tmp_path):
    study = write_study(tmp_path / "s.yaml", _slower(tiny, 10))
    out = tmp_path / "run"
    proc = _start(study)
    _wait_mid_trial(out, 3, proc)
    proc.kill()  # SIGKILL: no chance to clean up; the running trial stays RUNNING in the journal
    proc.communicate(timeout=30)  # reaps it and closes its pipes
    before = _load(out)
    assert before is not None
    # almost always one trial was running (the kill is sent while one is); it may just have ended
    stopped = [t.number for t in before if t.state == TrialState.RUNNING]
    assert len(stopped) <= 1

    r = run_study(study, resume=True)
    after = _load(out)
    assert after is not None
    _check_resumed(before, after, 10)
    assert r.n_trials == 10
    assert r.summary["run"]["recovered_trials"] == stopped


def test_ctrl_c_stops_cleanly_and_resume_finishes(tiny, tmp_path):
    study = write_study(tmp_path / "s.yaml", _slower(tiny, 7))
    out = tmp_path / "run"
    proc = _start(study)
    _wait_mid_trial(out, 2, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert "continue with --resume" in err
    assert (out / "summary.json").exists()  # outputs are written for what was done
    before = _load(out)
    assert before is not None
    assert not [t for t in before if t.state == TrialState.RUNNING]  # nothing is left half done
    interrupted = [t for t in before if t.state == TrialState.FAIL]
    # the trial stopped mid-evaluation (or none, if Ctrl-C fell between two trials) is marked, and its
    # point is queued again when it had one
    assert len(interrupted) <= 1
    assert all(t.user_attrs["moeopt"]["kind"] == "interrupted" for t in interrupted)
    waiting = [t for t in before if t.state == TrialState.WAITING]
    assert [w.user_attrs["retry_of"] for w in waiting] == [t.number for t in interrupted if t.params]

    proc = _start(study, "--resume")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    after = _load(out)
    assert after is not None
    assert [t.number for t in after if t.state == TrialState.FAIL] == [t.number for t in interrupted]
    assert all(after[w.number].state.is_finished() for w in waiting)
    assert sum(1 for t in after if t.state.is_finished()) - len(interrupted) == 7


def _state(pid: int) -> str | None:
    """The process state letter of ``pid`` (R, S, Z, ...), None when there is no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()[0]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to see the worker processes")
def test_sigterm_to_the_main_process_stops_every_worker(tiny, tmp_path):
    """`kill -TERM` sent to the main process only (not its process group, as a job scheduler or a
    plain `kill PID` does) stops the child worker too, writes the outputs, leaves a resumable study."""
    n = 40
    study = write_study(tmp_path / "s.yaml", _slower(tiny, n))
    out = tmp_path / "run"
    proc = _start(study, "--workers", "2")
    t0, children = time.time(), set()
    while time.time() - t0 < 120:  # both workers have run a trial and one is running one now
        trials = _load(out) or []
        pids = {t.user_attrs["worker"]["pid"] for t in trials if "worker" in t.user_attrs}
        children = pids - {proc.pid}
        done = sum(1 for t in trials if t.state.is_finished())
        if children and proc.pid in pids and done >= 2:
            break
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.02)
    assert children, "the child worker never ran a trial"
    proc.send_signal(signal.SIGTERM)  # to the main process alone
    stdout, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert "interrupted; continue with --resume" in err
    assert stdout.startswith("study tiny interrupted: ")
    # no worker is left: the child ended with the main process (it was joined: not even a zombie)
    assert {pid: _state(pid) for pid in children} == dict.fromkeys(children)
    # the outputs are written for what was done
    for name in ("summary.json", "trials.csv", "best.toml"):
        assert (out / name).is_file(), name
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["status"] == "interrupted"
    before = _load(out)
    assert before is not None
    assert not [t for t in before if t.state == TrialState.RUNNING]  # each worker marked its own trial
    counted_before = [t for t in before if t.state.is_finished() and t.user_attrs["moeopt"]["kind"] != "interrupted"]
    assert len(counted_before) < n  # the child did not run the rest of the budget
    # --resume continues: unique consecutive numbers, the finished trials as they were, n in all
    proc = _start(study, "--resume")
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    after = _load(out)
    assert after is not None
    assert [t.number for t in after] == list(range(len(after)))
    for t in before:
        if t.state.is_finished():
            assert (after[t.number].state, after[t.number].values) == (t.state, t.values)
    counted = [t for t in after if t.state.is_finished() and t.user_attrs["moeopt"]["kind"] != "interrupted"]
    assert len(counted) == n
    assert not [t for t in after if t.state in (TrialState.RUNNING, TrialState.WAITING)]


def test_two_workers_finish_the_requested_trials_in_total(tiny, tmp_path):
    tiny.update(trials=14, prune={"duplicates": False})
    r = run_study(tiny, out=tmp_path / "w2", workers=2)
    trials = _load(tmp_path / "w2")
    assert trials is not None
    assert r.n_trials == 14
    assert len(trials) == 14
    assert all(t.state.is_finished() for t in trials)
    pids = {t.user_attrs["worker"]["pid"] for t in trials}
    assert len(pids) == 2  # both processes ran trials


@pytest.mark.slow
def test_two_separate_processes_share_one_storage(tiny, tmp_path):
    study = write_study(tmp_path / "s.yaml", _slower(tiny, 20))
    out = tmp_path / "run"
    first = _start(study)
    t0 = time.time()
    while _load(out) is None and time.time() - t0 < 60:
        time.sleep(0.02)
    second = _start(study, "--resume")  # --resume joins a running study
    for p in (first, second):
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
    trials = _load(out)
    assert trials is not None
    assert len(trials) == 20
    assert all(t.state.is_finished() for t in trials)
    assert len({t.user_attrs["worker"]["pid"] for t in trials}) == 2


def test_ctrl_c_in_a_tuning_script_raises_after_writing_the_outputs(tiny, tmp_path):
    """run_study does not swallow Ctrl-C: a script looping over studies stops too."""
    import threading

    from moeopt.search import StudyInterrupted

    # many trials, but a time limit so that a lost interrupt fails in a minute, not in an hour
    tiny.update(trials=100_000, timeout_s=60, prune={"duplicates": False})
    # an interactive script has Python's default Ctrl-C handler; CI may start this process with
    # SIGINT ignored (a non-interactive background job), so install the default one here
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    stop = threading.Event()

    def press_ctrl_c_mid_study() -> None:
        # once trials are being run (a slow machine may still be setting up after a fixed delay)
        t0 = time.time()
        while not stop.is_set() and time.time() - t0 < 60:
            trials = _load(tmp_path / "int")
            if trials is not None and sum(1 for t in trials if t.state.is_finished()) >= 2:
                os.kill(os.getpid(), signal.SIGINT)
                return
            time.sleep(0.05)

    presser = threading.Thread(target=press_ctrl_c_mid_study, daemon=True)
    presser.start()
    try:
        with pytest.raises(StudyInterrupted) as info:
            run_study(tiny, out=tmp_path / "int")
    finally:
        stop.set()
        presser.join()
        signal.signal(signal.SIGINT, previous)
    r = info.value.result
    assert 2 <= r.n_trials < 100_000
    assert r.summary["run"]["interrupted"] is True
    assert (tmp_path / "int" / "summary.json").exists()
    assert r.summary["run"]["interrupted"] is True


def test_a_swallowed_interrupt_is_raised_again_before_the_next_trial():
    """Python may run a signal handler inside a gc callback or __del__, where its exception is only
    reported as "ignored" (CI saw this with hypothesis's gc callback): the stop must not be lost."""
    from moeopt.search.runner import _Signals

    sig = _Signals()
    sig.check()  # nothing received: no stop
    with contextlib.suppress(KeyboardInterrupt):  # stands in for the interpreter ignoring it
        sig._handler(signal.SIGINT, None)
    with pytest.raises(KeyboardInterrupt):
        sig.check()


def test_a_trial_that_lost_the_race_for_the_last_slot_yields_and_does_not_count(tmp_path):
    """On an RDB storage two machines can both see 1 of 2 trials taken and both ask: three trials
    then exist for a budget of two. The later one (by number) must yield: failed with kind
    ``surplus`` and not counted, so the study holds exactly the requested number of results."""
    from moeopt.search.runner import _surplus
    from moeopt.search.trials import attrs, counts

    url = f"sqlite:///{tmp_path / 'race.db'}"
    study = optuna.create_study(study_name="race", storage=url)
    done = study.ask()
    study.tell(done, 1.0)  # the first of the two requested trials
    a, b = study.ask(), study.ask()  # both machines ask at 1 counted: numbers 1 and 2
    assert not _surplus(study, a, 2)  # trial 1 has one counted trial before it: within the budget
    assert _surplus(study, b, 2)  # trial 2 has two before it (0 finished, 1 running): it yields
    stored = {t.number: t for t in study.get_trials()}
    assert stored[2].state == TrialState.FAIL
    assert attrs(stored[2])["kind"] == "surplus"
    assert not counts(stored[2])
    assert counts(stored[1])
