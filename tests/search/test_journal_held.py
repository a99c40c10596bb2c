"""moeopt's journal backend reads and appends through the descriptor it holds.

Its reads must give what Optuna's own backend gives for the same file, at every point of its
growth (records appended in pieces, a last line not yet complete, a line that is not a record),
from any record number on; the reference is ``optuna.storages.journal.JournalFileBackend``. Its
appends go to the file it opened even when the path names another file by the time it writes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import optuna
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from optuna.storages.journal import JournalFileBackend

from moeopt.search.errors import StudyError
from moeopt.search.storage import FlockLock, HeldJournalBackend, resolve_storage

RECORD = st.dictionaries(
    st.sampled_from(["op_code", "worker_id", "trial_id", "value", "name"]),
    st.one_of(st.integers(-5, 5), st.floats(allow_nan=False), st.text(max_size=4), st.none()),
    max_size=3,
)
LINE = st.one_of(
    RECORD.map(lambda r: json.dumps(r, separators=(",", ":")).encode() + b"\n"),
    st.sampled_from([b"not a record\n", b"\n", b'{"op_code": \n']),  # damage: raises once a line follows
)


@st.composite
def growth(draw: Any) -> list[tuple[str, Any]]:
    """The file's bytes appended in pieces (a piece may end inside a line), reads in between."""
    data = b"".join(draw(st.lists(LINE, max_size=12)))
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=5)))
    ops: list[tuple[str, Any]] = []
    last = 0
    for c in [*cuts, len(data)]:
        ops.append(("append", data[last:c]))
        last = c
        for k in draw(st.lists(st.integers(0, 14), max_size=3)):
            ops.append(("read", k))
    return ops


def _read(backend: Any, k: int) -> tuple[str, Any]:
    try:
        return "ok", list(backend.read_logs(k))
    except Exception as exc:
        return "error", (type(exc), str(exc))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=growth())
def test_reads_give_what_optuna_s_backend_gives(tmp_path: Path, ops: list[tuple[str, Any]]) -> None:
    path = tmp_path / f"j{os.getpid()}-{id(ops)}.journal"
    path.write_bytes(b"")
    ours = HeldJournalBackend(f"journal:{path}", str(path), FlockLock(f"{path}.lock"))
    ref = JournalFileBackend(str(path))
    try:
        for what, arg in ops:
            if what == "append":
                with open(path, "ab") as fh:
                    fh.write(arg)
            else:
                assert _read(ours, arg) == _read(ref, arg)
    finally:
        ours._hold.close()
        path.unlink()


def test_an_append_goes_to_the_file_it_opened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The folder is replaced between the check and the write (a worker paused in between): the
    record lands in the study's own file, which was moved, never in the new folder's."""
    spec = resolve_storage(None, str(tmp_path / "run"))
    assert spec.path is not None
    storage = spec.open()
    study = optuna.create_study(study_name="s", storage=storage)
    backend = storage._backend  # type: ignore[attr-defined]
    assert isinstance(backend, HeldJournalBackend)
    real = backend._hold.check

    def check_then_replace() -> os.stat_result:
        got = real()
        monkeypatch.setattr(backend._hold, "check", real)  # once
        (tmp_path / "run").rename(tmp_path / "gone")
        (tmp_path / "run").mkdir()
        (tmp_path / "run" / "study.journal").write_bytes(b"")
        return got

    monkeypatch.setattr(backend._hold, "check", check_then_replace)
    with pytest.raises(StudyError, match="removed or replaced"):
        study.set_user_attr("k", 1)  # appended, then refused when the storage reads it back
    assert (tmp_path / "run" / "study.journal").read_bytes() == b""
    assert b'"k":1' in (tmp_path / "gone" / "study.journal").read_bytes().splitlines()[-1]
