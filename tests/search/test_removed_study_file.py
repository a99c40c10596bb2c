"""A study whose output folder is removed (and made again) while its workers run: the workers stop
with one clear message and write nothing into the new folder, where another study may live now."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from moeopt.search.errors import StudyError
from moeopt.search.storage import StudyFileHold, resolve_storage

from .conftest import write_study
from .test_resume_workers import _slower, _start, _wait_mid_trial


def test_a_replaced_study_file_is_refused(tmp_path):
    spec = resolve_storage(None, str(tmp_path / "run"))
    assert spec.path is not None
    Path(spec.path).parent.mkdir()
    Path(spec.path).write_text("")
    hold = StudyFileHold(spec.url, spec.path, os.open(spec.path, os.O_RDONLY))
    try:
        hold.check()  # the same file: nothing to say
        Path(spec.path).unlink()
        Path(spec.path).write_text("")  # a new file at the same path
        with pytest.raises(StudyError, match="removed or replaced while the study ran"):
            hold.check()
        Path(spec.path).unlink()  # and no file at all
        with pytest.raises(StudyError, match="removed or replaced while the study ran"):
            hold.check()
    finally:
        hold.close()


@pytest.mark.parametrize("workers", [1, 2])
def test_workers_stop_when_the_output_folder_is_made_again(tiny, tmp_path, workers):
    study = write_study(tmp_path / "s.yaml", _slower(tiny, trials=400))
    out = tmp_path / "run"
    proc = _start(study, "--workers", str(workers))
    _wait_mid_trial(out, 2, proc)
    # moved away in one step (a recursive delete races with the workers' own lock files); for
    # the workers it is the same as a removal: the path no longer names the file they opened
    out.rename(tmp_path / "gone")
    out.mkdir()
    marker = out / "study.journal"
    marker.write_bytes(b"")  # what a new study's first open leaves: an empty journal
    _, err = proc.communicate(timeout=120)
    time.sleep(0.5)  # a child that had not stopped would write within a trial (0.1-0.4 s)
    assert proc.returncode != 0
    assert "Traceback" not in err, err
    assert "internal error" not in err, err
    assert "removed" in err, err
    assert marker.read_bytes() == b"", "a worker of the old study wrote into the new folder's journal"
