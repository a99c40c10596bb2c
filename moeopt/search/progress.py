"""Progress of a long run, readable wherever its output goes.

On a terminal: a tqdm bar on standard error. Anywhere else (a CI log, ``nohup``, a pipe): one
line when the run starts, one each time another tenth of the work is done or a while has passed
since the last line (:data:`EVERY_S`), and one at the end, so a log shows the run is alive
without a bar's control characters. Phase lines ("checking the best point with CP-SAT") appear
in both modes. Quiet: nothing.

Used by the search driver and by the ``moeopt`` commands that take a while (compare, audit,
fidelity ``--sweep``).
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

EVERY_S = 30.0
"""A progress line at least this often (seconds) while work is being done, off a terminal."""
STEPS = 10
"""Off a terminal, a line each time another 1 / STEPS of the work is done."""
MODES = ("bar", "lines")


def progress_mode(enabled: bool, stream: TextIO | None = None) -> str | None:
    """``"bar"`` on a terminal, ``"lines"`` elsewhere, ``None`` when progress is off."""
    if not enabled:
        return None
    s = stream or sys.stderr
    try:
        tty = s.isatty()
    except (AttributeError, ValueError):
        tty = False
    return "bar" if tty else "lines"


class Progress:
    """``what``: the name of the run (``search quickstart``); ``unit``: what is counted (``trial``)."""

    def __init__(
        self,
        what: str,
        total: int,
        *,
        mode: str | None,
        unit: str = "step",
        initial: int = 0,
        stream: TextIO | None = None,
        every_s: float = EVERY_S,
    ) -> None:
        if mode is not None and mode not in MODES:
            raise ValueError(f"progress mode {mode!r}: allowed: {', '.join(MODES)} or None")
        self.what, self.total, self.mode, self.unit = what, max(0, total), mode, unit
        self.stream = stream or sys.stderr
        self.every_s = every_s
        self.done = min(initial, self.total)
        self.t0 = self.last_t = time.perf_counter()
        self.last_step = self._step(self.done)
        self.note = ""
        self.bar: Any = None
        if mode == "bar":
            from tqdm import tqdm  # type: ignore[import-untyped,unused-ignore]

            self.bar = tqdm(
                total=self.total,
                initial=self.done,
                desc=what,
                unit=unit,
                file=self.stream,
                dynamic_ncols=True,
                leave=False,
            )
        elif mode == "lines":
            self._line(f"{self.done}/{self.total} {self._units(self.total)}")

    def _step(self, done: int) -> int:
        return (done * STEPS) // self.total if self.total else STEPS

    def _units(self, n: int) -> str:
        return self.unit if n == 1 else self.unit + "s"

    def _line(self, text: str) -> None:
        self.stream.write(f"{self.what}: {text}\n")
        self.stream.flush()

    def update(self, done: int, note: str = "") -> None:
        """``done`` of the ``total`` are finished; ``note`` (``best 1754.7``) goes with the count."""
        done = min(max(done, 0), self.total)
        self.note = note or self.note
        if self.bar is not None:
            self.bar.n = done
            if self.note:
                self.bar.set_postfix_str(self.note[:60], refresh=False)
            self.bar.refresh()
        elif self.mode == "lines":
            now = time.perf_counter()
            step = self._step(done)
            due = step > self.last_step or now - self.last_t >= self.every_s or done == self.total
            if done > self.done and due:
                self.last_step, self.last_t = step, now
                extra = f", {self.note}" if self.note else ""
                self._line(f"{done}/{self.total} {self._units(self.total)}{extra} ({now - self.t0:.0f} s)")
        self.done = max(self.done, done)

    def say(self, text: str) -> None:
        """A phase of the run (shown above the bar on a terminal)."""
        if self.mode is None:
            return
        if self.bar is not None:
            self.bar.write(f"{self.what}: {text}", file=self.stream)
        else:
            self._line(text)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
