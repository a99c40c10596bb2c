"""Worker processes forked from this one, and how they are stopped without a hang.

**A pool without shared locks** (:class:`ForkPool`). ``multiprocessing.Pool`` passes every
result back through one queue whose write lock all its workers share; ``Pool.terminate``
stops the workers with SIGTERM and then has its task thread put a last message on that queue.
A worker stopped while it was writing a result dies holding the lock, and the task thread,
then ``terminate`` with it, waits for the lock for ever (seen: a point that stops at a rank
while another worker is handing its result back; 7 of 73 runs of the test that stops points
so, beside two busy loops, against none of 800 with this pool; ``py-spy`` showed the task
thread in ``SimpleQueue.put`` and both workers dead). Here every worker has a pipe of its own
to this process and no lock is shared, so stopping a worker at any instant leaves nothing for
another process to wait for.

**Stop signals.** A forked child starts with its parent's Python signal handlers. The workers
moeopt forks (the ranks of ``kernel_time`` and ``simulate``, a search's baseline noise) set
their own at their start: SIGTERM ends them (the system's default action: their parent stops
them that way) and Ctrl-C (SIGINT) is left to the parent. Between the fork and that point, a
SIGTERM would run the parent's handler in the child, and a handler that does not end the
process (one that does nothing, or whose exception is lost) would leave the worker alive. So
the parent holds SIGTERM and SIGINT back (blocks them in the forking thread) while it forks,
and each child, once its own dispositions are set, lets them through: a SIGTERM that arrived
meanwhile is then acted on as the child's own setting says. Where the platform cannot block
signals (no ``signal.pthread_sigmask``), both do nothing more than set the child's
dispositions.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import traceback
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.connection import Connection, wait
from typing import Any, cast

_STOP = frozenset({signal.SIGTERM, signal.SIGINT})


@contextlib.contextmanager
def stop_signals_held() -> Iterator[None]:
    """Run the block (which forks workers) with SIGTERM and SIGINT held back in this thread;
    restore this thread's signal mask afterwards, and with it deliver any that arrived meanwhile
    (Ctrl-C then interrupts at the block's end, once the workers exist and the caller can stop
    them)."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def child_stop_signals() -> None:
    """In a forked worker, first thing: SIGTERM ends it (the default action), SIGINT is ignored
    (its parent handles Ctrl-C and stops it), then both are let through. A SIGTERM held back
    since the fork ends the worker here.

    Not a handler inherited from the parent: a Python handler (such as the search's, which
    raises to interrupt a trial) runs only between bytecodes, and its exception is lost where
    that point is inside a ``__del__`` or a collector callback; the worker then went on, and
    its parent waited for it for ever (seen: a search on studies/dsv3_zipf.yaml hung at a point
    that stopped at its first rank)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP)


STOP_WAIT_S = 5.0
"""assumed: how long :meth:`ForkPool.close` waits for a worker to end after SIGTERM before it
kills it (SIGKILL): a worker ends on SIGTERM at once unless something in it changed that
signal's disposition."""


class WorkerLost(RuntimeError):
    """A worker process of a :class:`ForkPool` ended without handing back its task's result."""


class RemoteTraceback(Exception):
    """The traceback, in the worker, of an exception a :class:`ForkPool` task raised there (the
    cause of that exception when it is raised here)."""

    def __str__(self) -> str:
        return f"\n\n(in the worker process)\n{self.args[0]}"


class ForkPool:
    """``workers`` processes forked from this one, each setting its stop signals
    (:func:`child_stop_signals`: SIGTERM ends it, Ctrl-C is left to this process), running
    ``initializer(*initargs)`` and then the tasks it is handed, one at a time, with a pipe of
    its own to this process (see the module's docstring). A context manager: leaving it stops
    every worker at once (:meth:`close`), whatever each is doing. Fork only: the workers share
    this process's memory as it was when they were forked (the caller checks that forking is
    safe: one thread)."""

    def __init__(
        self, workers: int, initializer: Callable[..., None], initargs: tuple[Any, ...] = ()
    ) -> None:
        ctx = multiprocessing.get_context("fork")
        self._procs: list[Any] = []
        self._conns: list[Connection] = []
        try:
            with stop_signals_held():  # (until each worker has set its own: child_stop_signals)
                for _ in range(workers):
                    mine, theirs = ctx.Pipe(duplex=True)
                    # (the worker closes its copies of this process's ends: ``others``)
                    others = [*self._conns, mine]
                    args = (theirs, others, initializer, initargs)
                    proc = ctx.Process(target=_serve, args=args, daemon=True)
                    proc.start()
                    theirs.close()  # (the worker holds the only other end: its death shows as EOF)
                    self._procs.append(proc)
                    self._conns.append(mine)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> ForkPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def imap_unordered(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Any]:
        """``fn(item)`` of every item, computed by the workers, yielded as each is done: the
        items are handed out in order, one at a time to each idle worker. ``fn`` must be a
        module-level function (it is sent by name). An exception ``fn`` raises in a worker is
        raised here; a worker that ends without a result raises :class:`WorkerLost`."""
        todo = iter(items)
        busy: dict[Connection, int] = {}  # the pipe of each busy worker -> its worker's number

        def hand_out(k: int) -> None:
            for item in todo:
                try:
                    self._conns[k].send((fn, item))
                except OSError:  # (it ended before: its setup failed, or it was killed)
                    raise self._lost(k) from None
                busy[self._conns[k]] = k
                return

        for k in range(len(self._conns)):
            hand_out(k)
        while busy:
            for conn in cast("list[Connection]", wait(list(busy))):
                k = busy.pop(conn)
                try:
                    ok, out = cast("tuple[bool, Any]", conn.recv())
                except (EOFError, OSError):
                    raise self._lost(k) from None
                if not ok:
                    exc, where = out
                    raise exc from RemoteTraceback(where)
                hand_out(k)
                yield out

    def _lost(self, k: int) -> WorkerLost:
        proc = self._procs[k]
        proc.join(STOP_WAIT_S)
        return WorkerLost(f"worker process {proc.pid} ended without a result (exit code {proc.exitcode})")

    def close(self) -> None:
        """Stop every worker now (SIGTERM; SIGKILL for one still running after
        :data:`STOP_WAIT_S`) and wait for each to end."""
        for conn in self._conns:
            conn.close()
        for proc in self._procs:
            if proc.exitcode is None:
                proc.terminate()
        for proc in self._procs:
            proc.join(STOP_WAIT_S)
            if proc.exitcode is None:
                proc.kill()
                proc.join()
        self._procs, self._conns = [], []


def _serve(
    conn: Connection, others: list[Connection], initializer: Callable[..., None], initargs: tuple[Any, ...]
) -> None:
    """A :class:`ForkPool` worker: its stop signals (:func:`child_stop_signals`), its setup,
    then each task it is handed until its pipe closes.
    A task's exception goes back to be raised by the caller; a result or exception that cannot
    be pickled goes back as a RuntimeError saying so."""
    child_stop_signals()  # (first: the stop signals are held back until here)
    for other in others:  # (the pool's ends of its pipes, this worker's own included)
        other.close()
    initializer(*initargs)
    while True:
        try:
            fn, item = conn.recv()
        except (EOFError, OSError):
            return
        try:
            out: tuple[bool, Any] = (True, fn(item))
        except BaseException as exc:  # handed back with its traceback, raised by the caller
            out = (False, (exc, traceback.format_exc()))
        try:
            conn.send(out)
        except Exception as exc:  # (pickling failed before anything was written)
            why = f"a worker's result of {fn.__name__}({item!r}) cannot be sent: {exc!r}"
            conn.send((False, (RuntimeError(why), traceback.format_exc())))
