"""Stop signals of forked worker processes, without a window in which a worker can miss one.

A forked child starts with its parent's Python signal handlers. The workers moeopt forks (the
ranks of ``kernel_time`` and ``simulate``, a search's baseline noise) set their own at their
start: SIGTERM ends them (the system's default action: their parent stops them that way) and
Ctrl-C (SIGINT) is left to the parent. Between the fork and that point, though, a SIGTERM ran
the parent's handler in the child: a handler that does not end the process (one that does
nothing, or whose exception is lost) left the worker alive, and the parent, which had just
terminated its pool, waited for it for ever. That happens when a pool is stopped right after it
was made, as a search point that stops at its first rank does, and more often on a loaded
machine, where a child takes longer to reach its own setup.

So the parent holds SIGTERM and SIGINT back (blocks them in the forking thread) while it forks,
and each child, once its own dispositions are set, lets them through: a SIGTERM that arrived
meanwhile is then acted on as the child's own setting says. Threads started while the signals
are held (a pool's helper threads) keep them held, so the process's signals go to the thread
that handles them, the main one. Where the platform cannot block signals (no
``signal.pthread_sigmask``), both do nothing more than set the child's dispositions.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

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
    since the fork ends the worker here."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP)
