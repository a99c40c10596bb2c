"""Several machines on one PostgreSQL storage (any Optuna RDB URL works the same way).

Needs a server: set ``MOEOPT_POSTGRES_URL`` to an SQLAlchemy URL of an empty database the test may
write to, e.g. ``postgresql+psycopg2://user@127.0.0.1:5432/moeopt_test``, and install a driver
(``pip install psycopg2-binary``). Without both, the test is skipped and says which is missing.
``.ci/run`` starts a throwaway local server from the Debian packages and sets both when it can.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import optuna
import pytest

from moeopt.search.trials import attrs, counts

from .conftest import write_study
from .test_resume_workers import _slower, _start

URL = os.environ.get("MOEOPT_POSTGRES_URL")

# Enough trials that the first process is still running when the second has started and joined:
# with 12 (about 1 s of trials on the simulator of 2026-12-02) the first finished them all while
# the second was still importing, under pytest -n auto's second worker (CI, 2026-12-02)
TRIALS = 64


@pytest.mark.skipif(not URL, reason="MOEOPT_POSTGRES_URL is not set (no PostgreSQL server to test against)")
def test_two_processes_share_a_postgresql_storage(tiny, tmp_path: Path) -> None:
    """Two separate `python -m moeopt.search` processes (as on two machines) on one RDB storage
    finish the requested trials in total: every trial number once, both processes ran some.

    An RDB has no lock the two processes share, so both may take the last slot at once; the later
    trial then yields (failed, kind ``surplus``, not counted). Such trials may exist beyond the
    requested ones; none may take a number among them."""
    pytest.importorskip("psycopg2", reason="no PostgreSQL driver: pip install psycopg2-binary")
    assert URL is not None
    study = _slower(tiny, TRIALS)
    study["name"] = f"tiny_pg_{uuid.uuid4().hex[:8]}"  # a fresh study in a shared database
    path = write_study(tmp_path / "s.yaml", study)
    first = _start(path, "--storage", URL, "--out", str(tmp_path / "a"))
    t0 = time.time()  # --resume joins a study that exists: wait until the first process made it
    while study["name"] not in optuna.get_all_study_names(URL) and time.time() - t0 < 60:
        time.sleep(0.1)
    second = _start(path, "--storage", URL, "--out", str(tmp_path / "b"), "--resume")
    for p in (first, second):
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    trials = optuna.load_study(study_name=study["name"], storage=URL).get_trials()
    counted = [t for t in trials if counts(t)]
    assert sorted(t.number for t in counted) == list(range(TRIALS))
    assert all(attrs(t).get("kind") == "surplus" and t.number >= TRIALS for t in trials if not counts(t))
    assert all(t.state.is_finished() for t in trials)
    assert len({t.user_attrs["worker"]["pid"] for t in trials}) == 2
