"""A forked worker cannot miss a stop signal sent before it has set its own handlers
(moeopt.core.forked): the parent holds SIGTERM and SIGINT back while it forks, the child lets
them through once its own dispositions are set."""

from __future__ import annotations

import contextlib
import os
import signal
import time

import pytest

from moeopt.core import forked

pytestmark = pytest.mark.skipif(
    not hasattr(os, "fork") or not hasattr(signal, "pthread_sigmask"), reason="needs fork and signal masks"
)


def _ignoring_handler(signum: int, frame: object) -> None:
    """The parent's SIGTERM handler: one that does not end the process, what a handler whose
    exception is lost (inside a ``__del__``, a collector callback) comes to."""


def _exit_3_handler(signum: int, frame: object) -> None:
    """The parent's SIGINT handler: in a child, it would end the child with status 3."""
    os._exit(3)


def _child_status(send_early: signal.Signals, held: bool) -> int:
    """Fork a child that is sent ``send_early`` before it sets its own handlers (it has the
    parent's, inherited: ``_ignoring_handler`` for SIGTERM, ``_exit_3_handler`` for SIGINT),
    then sets them (``child_stop_signals``) and exits with status 0 if it is still alive; with
    the stop signals held through the fork when ``held``. The child's wait status."""
    old_term = signal.signal(signal.SIGTERM, _ignoring_handler)
    old_int = signal.signal(signal.SIGINT, _exit_3_handler)
    try:
        with forked.stop_signals_held() if held else contextlib.nullcontext():
            pid = os.fork()
            if pid == 0:  # the child: never returns into the test
                try:
                    os.kill(os.getpid(), send_early)
                    forked.child_stop_signals()
                finally:
                    os._exit(0)
        _pid, status = os.waitpid(pid, 0)
    finally:
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGINT, old_int)
    return status


def test_a_terminate_before_the_childs_setup_ends_it() -> None:
    status = _child_status(signal.SIGTERM, held=True)
    assert os.WIFSIGNALED(status)
    assert os.WTERMSIG(status) == signal.SIGTERM


def test_without_holding_the_signals_the_child_would_have_missed_it() -> None:
    # the failure the holding prevents: the inherited handler swallows the terminate and the
    # child lives on (its parent then waited for it for ever)
    status = _child_status(signal.SIGTERM, held=False)
    assert os.WIFEXITED(status)
    assert os.WEXITSTATUS(status) == 0


def test_a_ctrl_c_before_the_childs_setup_is_left_to_the_parent() -> None:
    # SIGINT held back, then discarded when the child ignores it (its parent's handler, which
    # would exit with 3, never runs there): the child lives on to exit by itself
    status = _child_status(signal.SIGINT, held=True)
    assert os.WIFEXITED(status)
    assert os.WEXITSTATUS(status) == 0


def test_the_parents_mask_is_restored() -> None:
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    with forked.stop_signals_held():
        inside = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        assert {signal.SIGTERM, signal.SIGINT} <= inside
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before


# --------------------------------------------------------------------------- ForkPool

_SETUP: list[int] = []


def _setup(value: int) -> None:
    _SETUP.append(value)


def _with_setup(item: int) -> tuple[int, int, list[int]]:
    return item, os.getpid(), list(_SETUP)


def _fails(item: int) -> int:
    raise ValueError(f"item {item} is bad")


def _dies(item: int) -> int:
    os._exit(7)


def _slow_big(item: int) -> bytes:
    # item 0 at once; item 1 after a moment, so large that sending it blocks until read
    if item == 0:
        return b"small"
    time.sleep(0.2)
    return b"x" * (64 << 20)


def test_pool_gives_every_result_computed_in_its_workers_after_their_setup() -> None:
    with forked.ForkPool(2, _setup, (41,)) as pool:
        got = list(pool.imap_unordered(_with_setup, range(7)))
    assert sorted(item for item, _pid, _setup_seen in got) == list(range(7))
    pids = {pid for _item, pid, _setup_seen in got}
    assert len(pids) == 2  # (the first two items go one to each worker)
    assert os.getpid() not in pids
    assert all(seen == [41] for _item, _pid, seen in got)  # (each worker's setup ran once, first)
    assert _SETUP == []  # (not in this process)


def test_pool_raises_a_workers_error_here() -> None:
    with forked.ForkPool(2, _setup, (0,)) as pool, pytest.raises(ValueError, match="item 0 is bad"):
        list(pool.imap_unordered(_fails, [0]))


def test_pool_names_a_worker_that_ends_without_a_result() -> None:
    with forked.ForkPool(1, _setup, (0,)) as pool, pytest.raises(forked.WorkerLost, match="exit code 7"):
        list(pool.imap_unordered(_dies, [0]))


def test_leaving_the_pool_stops_a_worker_in_the_middle_of_sending() -> None:
    # the caller stops at the first result (a search point that stops at a rank) while the other
    # worker is about to hand back, or is handing back, a result no one will read: nothing may
    # wait for that worker (multiprocessing.Pool's terminate could wait for ever for a lock a
    # worker stopped while handing back its result still held)
    t0 = time.monotonic()
    with forked.ForkPool(2, _setup, (0,)) as pool:
        procs = list(pool._procs)
        first = next(pool.imap_unordered(_slow_big, [0, 1]))
        time.sleep(0.5)  # (the other worker is blocked sending 64 MB by now)
    assert first == b"small"
    assert all(p.exitcode is not None for p in procs)
    assert time.monotonic() - t0 < forked.STOP_WAIT_S  # (SIGTERM ended it: no SIGKILL needed)


def _broken_setup() -> None:
    raise RuntimeError("no setup")


def test_pool_names_a_worker_whose_setup_failed() -> None:
    with forked.ForkPool(1, _broken_setup) as pool, pytest.raises(forked.WorkerLost, match="exit code 1"):
        list(pool.imap_unordered(_with_setup, range(3)))


def test_a_workers_error_carries_its_traceback_there() -> None:
    with forked.ForkPool(1, _setup, (0,)) as pool, pytest.raises(ValueError) as got:
        list(pool.imap_unordered(_fails, [3]))
    assert isinstance(got.value.__cause__, forked.RemoteTraceback)
    assert "in _fails" in str(got.value.__cause__)
