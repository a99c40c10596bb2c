"""The exception types every layer of moeopt raises.

One base class, :class:`MoeoptError`, so that a command-line entry point can catch every
user-facing problem in one place and print it as a single line (no traceback).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class MoeoptError(Exception):
    """Base class of every error moeopt raises on purpose."""


class GraphError(MoeoptError, ValueError):
    """An event graph breaks a structural rule (cycle, missing event, bad resource name ...)."""


class SchedulingError(MoeoptError, RuntimeError):
    """The scheduler cannot place an event (for example a semaphore that never frees again)."""


class ScheduleError(MoeoptError, ValueError):
    """A schedule violates one or more rules of its event graph.

    ``violations`` holds one human-readable line per violated rule instance.
    """

    def __init__(self, violations: list[str]) -> None:
        self.violations = list(violations)
        shown = self.violations[:50]
        more = len(self.violations) - len(shown)
        text = f"schedule violates {len(self.violations)} rule(s):\n  " + "\n  ".join(shown)
        if more > 0:
            text += f"\n  ... and {more} more"
        super().__init__(text)


class InputError(MoeoptError, ValueError):
    """Bad user input: a file, a field, an override or a command-line value."""


def did_you_mean(name: str, choices: Iterable[str], n: int = 3) -> str:
    """Return ``" (did you mean 'x'?)"`` for the closest of ``choices``, or ``""``."""
    close = difflib.get_close_matches(name, list(choices), n=n, cutoff=0.6)
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(c) for c in close) + "?)"
