"""The journal file reaches the disk (fsync) when a record settles something, not at every append.

Optuna's journal backend forces every append to the disk: about nine per trial (the trial, each
parameter, each attribute, the end), a few milliseconds each, a sixth of a small scenario's
trial. moeopt's backend writes the same records under the same lock, hands each to the
operating system at once (other workers read it at once; a killed worker loses nothing), and
forces them to the disk when a trial ends, a trial is queued or the study changes: a power cut
can lose only the progress of the trials running at that moment."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest

import moeopt.search.storage as storage
from moeopt.search.storage import resolve_storage, settles


@pytest.fixture
def syncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per fsync of the journal backend."""
    seen: list[int] = []
    real = storage.os.fsync

    def counting(fd: int) -> None:
        real(fd)
        seen.append(fd)

    monkeypatch.setattr(storage.os, "fsync", counting)
    return seen


def _records(path: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def test_one_sync_per_trial_and_every_record_written_at_once(tmp_path: Path, syncs: list[int]) -> None:
    spec = resolve_storage(None, str(tmp_path / "run"))
    assert spec.path is not None
    study = optuna.create_study(study_name="s", storage=spec.open())
    n_study = len(syncs)
    assert n_study >= 1  # the study's creation is settled
    reader = spec.open()  # another worker's view of the same file
    for k in range(3):
        del syncs[:]
        trial = study.ask()
        x = trial.suggest_int("x", 0, 10)
        trial.suggest_categorical("c", ["a", "b"])
        trial.set_user_attr("result", {"k": k})
        # written at once: another storage object reads every record before any fsync
        assert syncs == []
        sid = reader.get_study_id_from_name("s")
        got = reader.get_trial(reader.get_trial_id_from_study_id_trial_number(sid, k))
        assert got.params["x"] == x
        assert got.user_attrs["result"] == {"k": k}
        study.tell(trial, float(x))
        assert len(syncs) == 1  # the trial's end: one fsync for its five records
    del syncs[:]
    study.enqueue_trial({"x": 3, "c": "a"})  # a queued point must survive a power cut
    assert len(syncs) == 1
    trial = study.ask()  # taking the queued trial up is progress
    assert trial.suggest_int("x", 0, 10) == 3
    assert len(syncs) == 1
    study.tell(trial, state=optuna.trial.TrialState.FAIL)
    assert len(syncs) == 2
    study.set_user_attr("best", 1.0)
    assert len(syncs) == 3
    assert len(_records(spec.path)) > 3 * 5  # nothing was held back


@pytest.mark.parametrize(
    ("logs", "expected"),
    [
        # codes as Optuna's JournalOperation numbers them: 4 create trial, 5 param, 6 state,
        # 7 intermediate value, 8 user attr, 9 system attr, 0 create study, 2 study user attr
        ([{"op_code": 5}, {"op_code": 8}, {"op_code": 9}, {"op_code": 7}], False),
        ([{"op_code": 4, "study_id": 0}], False),  # ask(): running
        ([{"op_code": 4, "study_id": 0, "state": 4}], True),  # a queued (waiting) trial
        ([{"op_code": 6, "trial_id": 1, "state": 0}], False),  # a queued trial taken up
        ([{"op_code": 6, "trial_id": 1, "state": 1}], True),  # complete
        ([{"op_code": 6, "trial_id": 1, "state": 2}], True),  # pruned
        ([{"op_code": 6, "trial_id": 1, "state": 3}], True),  # failed
        ([{"op_code": 0}], True),
        ([{"op_code": 2}], True),
        ([{"op_code": 5}, {"op_code": 6, "state": 1}], True),  # a batch settles if any record does
    ],
)
def test_what_settles(logs: list[dict[str, object]], expected: bool) -> None:
    assert settles(logs) is expected
