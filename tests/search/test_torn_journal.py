"""A journal whose last write was cut short (a crash in the middle of an append) is repaired on
--resume; one damaged in the middle is refused with the line named and left untouched."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from .conftest import write_study
from .test_resume_workers import _start

N = 8


def _finished_study(tiny, tmp_path: Path) -> tuple[Path, Path]:
    # run in a separate process, as a user does: its worker is gone when the journal is torn, so
    # the trial whose last record is cut is found running with a dead worker
    tiny.update(trials=N, out="run")
    study = write_study(tmp_path / "s.yaml", tiny)
    proc = _start(study)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return study, tmp_path / "run" / "study.journal"


def _trials(path: Path) -> list[optuna.trial.FrozenTrial]:
    """The trials plain Optuna reads from a journal file."""
    storage = JournalStorage(JournalFileBackend(str(path)))
    return optuna.load_study(study_name="tiny", storage=storage).get_trials()


def test_a_torn_last_record_is_cut_back_and_the_study_resumes(tiny, tmp_path):
    study, journal = _finished_study(tiny, tmp_path)
    whole = journal.read_bytes()
    torn = whole[:-37]  # what a crash in the middle of the last append leaves
    assert not torn.endswith(b"\n")
    journal.write_bytes(torn)
    # what survives the tear, read independently: the complete records before the torn one
    intact = tmp_path / "intact.journal"
    intact.write_bytes(torn[: torn.rindex(b"\n") + 1])
    kept = {t.number: t for t in _trials(intact) if t.state == TrialState.COMPLETE}
    assert kept  # trials completed before the tear

    proc = _start(study, "--resume")
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert "internal error" not in err
    assert "is incomplete, a write cut short by a crash: cut the journal back to its last complete record" in err
    backups = list(journal.parent.glob("study.journal.torn-*"))
    assert [b.read_bytes() for b in backups] == [torn]  # the file as it was is kept

    # plain Optuna opens the repaired study; no complete trial was lost, N trials count in all
    after = _trials(journal)
    for number, t in kept.items():
        assert (after[number].state, after[number].values, after[number].params) == (t.state, t.values, t.params)
    assert [t.number for t in after] == list(range(len(after)))
    counted = [t for t in after if t.state.is_finished() and t.user_attrs["moeopt"]["kind"] != "interrupted"]
    assert len(counted) == N
    assert not [t for t in after if t.state == TrialState.RUNNING]


def test_a_last_record_without_its_newline_is_completed_not_cut(tiny, tmp_path):
    study, journal = _finished_study(tiny, tmp_path)
    whole = journal.read_bytes()
    journal.write_bytes(whole[:-1])  # only the final newline is missing: the record itself is whole
    proc = _start(study, "--resume")
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert "lacked its end of line" in err
    assert journal.read_bytes() == whole  # nothing lost, nothing added: the study was finished
    assert len(_trials(journal)) == N


def test_a_record_damaged_in_the_middle_is_refused_and_nothing_is_appended(tiny, tmp_path):
    study, journal = _finished_study(tiny, tmp_path)
    lines = journal.read_bytes().splitlines(keepends=True)
    lines[5] = lines[5][: len(lines[5]) // 2] + b"\n"  # half a record, with more records after it
    damaged = b"".join(lines)
    journal.write_bytes(damaged)
    proc = _start(study, "--resume", "--trials", str(N + 4))
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, err
    assert "Traceback" not in err
    assert f"line 6 is not a journal record, and {len(lines) - 6} record(s) follow it" in err
    assert journal.read_bytes() == damaged  # nothing appended, nothing cut
    assert not list(journal.parent.glob("study.journal.torn-*"))


@pytest.mark.parametrize("content", [b"", b'{"op_code": 0, "worker_id": "w", "study_name": "x"}\n'])
def test_an_intact_journal_is_left_as_it_is(tmp_path, content):
    from moeopt.search.storage import check_journal, resolve_storage

    spec = resolve_storage(None, str(tmp_path))
    Path(spec.path).write_bytes(content)
    said: list[str] = []
    check_journal(spec, said.append)
    assert Path(spec.path).read_bytes() == content
    assert said == []
