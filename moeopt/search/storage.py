"""Where a study lives, who runs which trial, and finding the trials of dead workers.

Storages (``storage:`` in the study file, ``--storage`` on the command line):

* ``null`` / ``journal`` — an Optuna journal file ``study.journal`` in the output folder (default);
* ``journal:PATH`` — a journal file elsewhere;
* ``sqlite`` — ``study.db`` in the output folder; ``sqlite:///PATH`` — that SQLite file;
* any other SQLAlchemy URL (``postgresql://user@host/db``, ``mysql+pymysql://...``) — an Optuna
  RDB storage that workers on several machines share.

File-backed storages (journal, SQLite) are for the workers of one machine. Their writes are
serialised with ``flock`` on a lock file beside them, which the kernel releases when a process
dies, so a killed worker never leaves a lock behind. The same kind of lock makes "count the
trials, then ask for a new one" atomic across local workers, so K workers run exactly the
requested number of trials.

A worker records who it is (host, pid, process start time) on each trial it starts. A RUNNING
trial whose worker is gone (same host, process dead) is *interrupted*: it is marked failed with
``interrupted`` set, and its point is queued again, so a resumed study loses no point and counts
no point twice. On an RDB storage Optuna's heartbeat finds dead workers on other machines too.

A journal file's records reach the operating system at every append (the other workers read
them at once, and a killed worker loses none) and are forced to the disk whenever one settles
something: a trial's end, a queued trial, a change to the study (:func:`settles`). A power cut
can lose the progress of the trials running at that moment, never a finished trial.

A journal file whose last append a crash cut short is repaired before anything is written to it
(:func:`check_journal`: the torn record is cut off, a copy of the file kept); one damaged before
its end is refused with the line named.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from moeopt.search.errors import StudyError
from moeopt.search.optuna_private import CREATE_TRIAL, PROGRESS_OPS, SET_TRIAL_STATE, BaseJournalFileLock

HEARTBEAT_INTERVAL_S = 30
HEARTBEAT_GRACE_S = 120

STORAGE_FORMS = (
    "null (a journal file in the output folder), 'journal', 'journal:PATH', 'sqlite', 'sqlite:///PATH', "
    "or an RDB URL such as postgresql://user:pw@host/db"
)


class FlockLock(BaseJournalFileLock):
    """An exclusive ``flock`` on ``path``: released by the kernel if the holder dies."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._fd: int | None = None
        self._thread = threading.Lock()

    def acquire(self) -> bool:
        self._thread.acquire()
        try:
            fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
        except BaseException:
            self._thread.release()  # nothing is held when the lock file cannot be opened
            raise
        fcntl.flock(fd, fcntl.LOCK_EX)
        self._fd = fd
        return True

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        self._thread.release()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        self.acquire()
        try:
            yield
        finally:
            self.release()


class StudyFileHold:
    """An open descriptor of a study's file, to tell whether the path still names that file."""

    def __init__(self, url: str, path: str, fd: int) -> None:
        self.url, self.path, self.fd = url, path, fd

    def check(self) -> os.stat_result:
        """Raise :class:`StudyError` when the path no longer names the file this worker opened;
        else the file's status (its size, for a reader)."""
        held = os.fstat(self.fd)
        try:
            now = os.stat(self.path)
            same = (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)
        except OSError:
            same = False
        if not same or held.st_nlink == 0:
            raise StudyError(
                f"storage {self.url!r}: the study file was removed or replaced while the study ran; "
                "this worker stopped without writing to it (a study's output folder must stay in place "
                "until its workers have finished)"
            )
        return held

    def close(self, _close: Any = os.close) -> None:
        # (os.close is bound at definition: when this runs from __del__ at interpreter exit,
        # the module's globals may already be gone)
        fd, self.fd = self.fd, -1
        if fd >= 0:
            try:  # noqa: SIM105 - contextlib may be gone at exit too
                _close(fd)
            except OSError:
                pass

    def __del__(self) -> None:
        self.close()


class HeldJournalBackend(JournalFileBackend):
    """Optuna's journal file backend, reading and writing only the file it opened.

    Optuna's backend opens the journal by its path at every read and append: a study whose folder
    was removed (and made again) would read another study's records or write into its journal.
    This one holds the file open (:class:`StudyFileHold`) and checks before every read and write
    that the path still names it; if not, one :class:`StudyError` says so and nothing is written.
    It reads and appends through the descriptor it holds, never by the path: a folder replaced
    between the check and the write (a worker paused in between) cannot receive the record, and
    no file is opened per record (Optuna's storage reads the journal after every write and before
    every read: some twenty times a trial).
    """

    def __init__(self, url: str, path: str, lock: FlockLock) -> None:
        super().__init__(path, lock_obj=lock)  # creates the file when it is missing
        # O_APPEND: each write lands at the end of the file, after every other worker's records
        self._hold = StudyFileHold(url, path, os.open(path, os.O_RDWR | os.O_APPEND))
        self._path = path
        self._flock = lock
        self._offsets: dict[int, int] = {0: 0}  # log number -> byte offset of its record

    def read_logs(self, log_number_from: int) -> Generator[dict[str, Any], None, None]:
        """The records from number ``log_number_from`` on, as Optuna's backend reads them: the
        complete lines of the file as it is now (a last line without its end of line, being
        written or torn, is left for a later read), each a JSON record; a line that is not a
        record raises its error once another line follows it."""
        size = self._hold.check().st_size
        number = log_number_from if log_number_from in self._offsets else 0
        pos = self._offsets[number]
        if pos >= size:
            return  # nothing new (most reads)
        data = os.pread(self._hold.fd, size - pos, pos)
        error: Exception | None = None
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0 and start == len(data):
                return
            if error is not None:  # a line follows the one that is not a record
                raise error
            if end < 0:
                return  # the last line is not complete yet
            self._offsets.setdefault(number + 1, pos + end + 1)
            if number >= log_number_from:
                try:
                    record = json.loads(data[start : end + 1])
                except json.JSONDecodeError as err:
                    error = err
                    del self._offsets[number + 1]
                else:
                    yield record
            number += 1
            start = end + 1

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        """Optuna's append (the same records, under the same lock), forced to the disk only
        when it settles something (see :func:`settles`): every append reaches the operating
        system at once, so other workers read it and a killed worker loses nothing; a power cut
        can lose the progress of the trials running at that moment, never a finished trial,
        a queued one or a change to the study. (Optuna forces every append to the disk: about
        nine a trial, a few milliseconds each, a sixth of a small scenario's trial.) The force
        waits for the disk after the lock is released, so other workers append meanwhile."""
        fd = self._hold.fd
        self._hold.check()
        data = memoryview(
            "".join(json.dumps(log, separators=(",", ":")) + "\n" for log in logs).encode("utf-8")
        )
        try:
            with self._flock.held():
                while data:  # (a regular file takes it in one write; a short one is continued)
                    data = data[os.write(fd, data) :]
        except FileNotFoundError:  # the lock file's folder is gone
            self._hold.check()
            raise
        if settles(logs):
            # the file's every earlier record too, whichever worker wrote it
            os.fsync(fd)


def settles(logs: list[dict[str, Any]]) -> bool:
    """Whether a batch of journal records holds anything a power cut must not lose: anything but
    a running trial's progress (a trial started by ``ask``, a queued trial taken up, its
    parameters, values and attributes). Lost progress leaves a trial that never ran or a running
    trial of a dead worker, which a resumed study marks interrupted and queues again."""
    for log in logs:
        op = log.get("op_code")
        if op in PROGRESS_OPS:  # a parameter, an intermediate value, an attribute
            continue
        if op == CREATE_TRIAL and "state" not in log:  # ask(): a new running trial
            continue
        if op == SET_TRIAL_STATE and log.get("state") == TrialState.RUNNING:
            continue
        return True
    return False


@dataclass(frozen=True)
class StorageSpec:
    """A resolved storage: ``kind`` is journal | sqlite | rdb; ``url`` is what users see."""

    kind: str
    url: str
    path: str | None = None

    @property
    def local(self) -> bool:
        return self.kind in ("journal", "sqlite")

    @property
    def ask_lock_path(self) -> str | None:
        return None if self.path is None else self.path + ".ask.lock"

    def open(self) -> optuna.storages.BaseStorage:
        try:
            if self.kind == "journal":
                assert self.path is not None
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
                backend = HeldJournalBackend(self.url, self.path, FlockLock(self.path + ".lock"))
                return optuna.storages.JournalStorage(backend)
            kwargs: dict[str, Any] = {}
            if self.kind == "sqlite":
                assert self.path is not None
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
                kwargs["engine_kwargs"] = {"connect_args": {"timeout": 60}}
            if self.kind == "rdb":  # workers on other machines: Optuna's heartbeat finds the dead ones
                kwargs.update(heartbeat_interval=HEARTBEAT_INTERVAL_S, grace_period=HEARTBEAT_GRACE_S)
            return open_rdb(self.url, kwargs)
        except StudyError:
            raise
        except Exception as exc:
            raise StudyError(f"storage {self.url!r}: cannot open it: {type(exc).__name__}: {exc}") from None


#: How often :func:`open_rdb` tries again when another process created the schema at the same
#: moment, and the pause before the first retry (doubled each time). assumed: two or three
#: processes starting together settle within a second; a real fault still fails after ~1.5 s.
SCHEMA_RACE_RETRIES = 5
SCHEMA_RACE_PAUSE_S = 0.05


def _schema_race(exc: BaseException) -> bool:
    """Whether ``exc`` is what a database raises when two processes create one schema at once:
    a unique-key clash on the new table's catalogue row or version row (PostgreSQL, MySQL), or
    "table already exists" (SQLite, PostgreSQL's DuplicateTable)."""
    import sqlalchemy.exc as sa

    if isinstance(exc, sa.IntegrityError):
        return True
    if isinstance(exc, (sa.ProgrammingError, sa.OperationalError)):
        return "already exists" in str(exc)
    return False


def open_rdb(
    url: str, kwargs: dict[str, Any], *, retries: int = SCHEMA_RACE_RETRIES
) -> optuna.storages.RDBStorage:
    """Open an Optuna RDB storage, creating its tables if the database is empty.

    Optuna creates the tables and inserts the schema-version row without a lock, so two
    workers started together on an empty database (or a worker and a monitoring script) can
    clash, and the loser sees an integrity error although the schema is then complete. Opening
    again finds the tables and the row in place, so such a clash is retried a few times; any
    other error, or the same one after the retries, is raised."""
    pause = SCHEMA_RACE_PAUSE_S
    for attempt in range(retries + 1):
        try:
            return optuna.storages.RDBStorage(url, **kwargs)
        except Exception as exc:
            if attempt == retries or not _schema_race(exc):
                raise
            time.sleep(pause)
            pause *= 2
    raise AssertionError("unreachable")  # the loop returns or raises


def resolve_storage(spec: str | None, out_dir: str) -> StorageSpec:
    """Turn the ``storage`` field / ``--storage`` value into a :class:`StorageSpec`."""
    if spec is None or spec == "journal":
        path = os.path.join(out_dir, "study.journal")
        return StorageSpec("journal", f"journal:{path}", path)
    if spec == "sqlite":
        path = os.path.join(out_dir, "study.db")
        return StorageSpec("sqlite", f"sqlite:///{path}", path)
    if spec.startswith("journal:"):
        path = os.path.abspath(spec[len("journal:") :])
        if not spec[len("journal:") :]:
            raise StudyError(f"storage = {spec!r}: names no file; allowed: {STORAGE_FORMS}")
        return StorageSpec("journal", f"journal:{path}", path)
    if spec.startswith("sqlite:///"):
        path = os.path.abspath(spec[len("sqlite:///") :])
        return StorageSpec("sqlite", f"sqlite:///{path}", path)
    if "://" in spec:
        return StorageSpec("rdb", spec, None)
    raise StudyError(f"storage = {spec!r}: not a storage; allowed: {STORAGE_FORMS}")


# --------------------------------------------------------------------------- a journal cut short
def check_journal(spec: StorageSpec, say: Callable[[str], None], fresh_hint: str = "--out DIR") -> None:
    """Before anything is written to a journal file: repair a torn tail, refuse a damaged middle.

    An append that a crash (or a full disk, or a copy) cut short leaves a last line without its
    newline or with half a record. Optuna's journal reader skips such a tail, but the next append
    is written behind it, the two merge into one unreadable line, and from then on neither moeopt
    nor Optuna can open the study. So, holding the journal's lock (no worker is appending):

    * a last line that is a whole record without its newline gets the newline;
    * a last line that is not a whole record is cut off (the trial it was updating is then found
      running with its worker gone, and is recovered as any interrupted trial);

    both after keeping a copy of the file (``study.journal.torn-<time>``), and said through
    ``say``. A line that is not a record *before* other records is damage no crash leaves: a
    :class:`StudyError` names the line, and nothing is written to the file.
    """
    path = spec.path
    if spec.kind != "journal" or path is None or not os.path.isfile(path):
        return
    with FlockLock(path + ".lock").held():
        with open(path, "rb") as fh:
            data = fh.read()
        if not data:
            return
        lines = data.splitlines(keepends=True)
        bad = next((k for k, ln in enumerate(lines) if not _is_record(ln)), None)
        if bad is None:
            return
        if bad < len(lines) - 1:
            raise StudyError(
                f"{path}: line {bad + 1} is not a journal record, and {len(lines) - 1 - bad} record(s) "
                "follow it: the file is damaged in the middle (a crash only cuts its end), so moeopt "
                f"writes nothing to it; restore the file from a copy, or start a new study with {fresh_hint}"
            )
        backup = f"{path}.torn-{time.strftime('%Y%m%dT%H%M%S')}"
        shutil.copy2(path, backup)
        if _is_record(lines[-1] + b"\n"):
            with open(path, "ab") as fh:
                fh.write(b"\n")
                fh.flush()
                os.fsync(fh.fileno())
            say(
                f"{path}: its last record lacked its end of line (a write cut short); added it, "
                f"kept the file as it was in {backup}"
            )
            return
        keep = len(data) - len(lines[-1])
        with open(path, "r+b") as fh:
            fh.truncate(keep)
            fh.flush()
            os.fsync(fh.fileno())
        say(
            f"{path}: its last record (line {len(lines)}, {len(lines[-1])} bytes) is incomplete, a write "
            f"cut short by a crash: cut the journal back to its last complete record (line {len(lines) - 1}) "
            f"and kept the file as it was in {backup}"
        )


def _is_record(line: bytes) -> bool:
    """Whether ``line`` is one whole journal record: a JSON object ending with a newline."""
    if not line.endswith(b"\n"):
        return False
    try:
        return isinstance(json.loads(line), dict)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False


@contextlib.contextmanager
def ask_lock(spec: StorageSpec) -> Iterator[None]:
    """Serialise count-then-ask among the local workers of a file-backed storage (no-op for RDB)."""
    path = spec.ask_lock_path
    if path is None:
        yield
        return
    lock = FlockLock(path)
    try:
        lock.acquire()
    except FileNotFoundError:
        raise StudyError(
            f"storage {spec.url!r}: the study's folder was removed while the study ran; this worker "
            "stopped (a study's output folder must stay in place until its workers have finished)"
        ) from None
    try:
        yield
    finally:
        lock.release()


# --------------------------------------------------------------------------- worker identity
def _proc_start(pid: int) -> tuple[str, str] | None:
    """(state, start time in clock ticks) of a process from /proc, or None where unavailable."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return None
    rest = text[text.rfind(")") + 2 :].split()
    return rest[0], rest[19]


def worker_identity() -> dict[str, Any]:
    pid = os.getpid()
    st = _proc_start(pid)
    return {"host": socket.gethostname(), "pid": pid, "start": st[1] if st else None}


def worker_alive(ident: Any) -> bool | None:
    """True / False for a worker of this host; None when it cannot be told from here."""
    if not isinstance(ident, dict) or ident.get("host") != socket.gethostname():
        return None
    pid = ident.get("pid")
    if not isinstance(pid, int):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    st = _proc_start(pid)
    if st is None:
        return True
    state, start = st
    if state in ("Z", "X"):
        return False
    return not (ident.get("start") is not None and start != ident["start"])
