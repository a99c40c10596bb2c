"""Workers started together on an empty database all open it.

Optuna creates an RDB storage's tables and its schema-version row without a lock. Eight
processes opening one fresh SQLite file at once reproduce the clash on this machine ("table
studies already exists", "UNIQUE constraint failed: alembic_version.version_num"; plain
``optuna.storages.RDBStorage`` failed about one open in ten over 15 rounds; this test fails
without the retry). The same clash on PostgreSQL
("duplicate key value violates unique constraint pg_type_typname_nsp_index") failed a CI run of
test_postgres.py. The storage layer must absorb it: every worker opens the storage.
"""

from __future__ import annotations

from multiprocessing import get_context
from pathlib import Path

from moeopt.search.storage import resolve_storage


def _open(url: str) -> str:
    try:
        resolve_storage(url, "unused").open()
    except Exception as exc:  # the test reports what went wrong instead of a pool traceback
        return f"{type(exc).__name__}: {exc}"
    return "ok"


def test_workers_opening_a_fresh_sqlite_storage_together_all_succeed(tmp_path: Path) -> None:
    ctx = get_context("fork")
    with ctx.Pool(8) as pool:
        for i in range(6):  # each round a fresh, empty database file
            url = f"sqlite:///{tmp_path / f'r{i}.db'}"
            results = pool.map(_open, [url] * 8)
            assert results == ["ok"] * 8, next(r for r in results if r != "ok")
