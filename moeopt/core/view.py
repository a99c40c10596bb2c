"""A read-only view of the scheduler's state for ``wants_view`` policies.

The view can say who is eligible, when each could start, when a resource frees, and probe one
step ahead with :meth:`SchedulerView.start_if`. It has no way to commit or undo anything:
policies decide, the scheduler acts.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from moeopt.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from moeopt.core.events import Event
    from moeopt.core.state import Eval, SchedulerState


class SchedulerView:
    """Read-only questions about the current scheduling step."""

    __slots__ = ("_cache", "_earliest", "_eligible", "_exhausted", "_index", "_res_index", "_state", "_tails")

    def __init__(self, state: SchedulerState, eligible: set[int]) -> None:
        self._state = state
        self._eligible = eligible
        # the evaluations of the current step, kept in the state: the scheduler empties them
        # after every commit
        self._cache = state.step_evals
        self._tails: list[float] | None = None
        # the scheduler's candidate mode (Policy.candidates): the k earliest eligible events of
        # this step, in order, as its lazy heap found them (None: found here on demand)
        self._earliest: list[int] | None = None
        self._exhausted = False
        # name lookups on every call: plain dicts, copied once from the compiled graph's
        # read-only mappings (a lookup through the read-only proxy costs an extra call)
        self._index = dict(state.cg.index)
        self._res_index = dict(state.cg.res_index)

    def _idx(self, name: str) -> int:
        i = self._index.get(name)
        if i is None:
            raise InputError(f"no event named {name!r} in this graph")
        return i

    def _eval(self, i: int) -> Eval:
        ev = self._cache.get(i)
        if ev is None:
            if i not in self._eligible:
                raise InputError(f"event {self._state.cg.names[i]!r} is not eligible at this step")
            ev = self._state.evaluate(i)
            self._cache[i] = ev
        return ev

    def eligible(self) -> list[str]:
        """Names of the events whose predecessors are all committed, in the order they were added."""
        names = self._state.cg.names
        return [names[i] for i in sorted(self._eligible)]

    def earliest(self, k: int) -> list[str]:
        """The ``k`` eligible events that can start earliest, earliest first (ties: first
        added); events that cannot start (``inf``) come last, in the order they were added."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InputError(f"earliest(k): k must be an integer >= 1, got {k!r}")
        names = self._state.cg.names
        found = self._earliest
        if found is not None:
            if k <= len(found):
                return [names[i] for i in found[:k]]
            if self._exhausted:
                # the scheduler's heap ran out: no other eligible event can start
                rest = sorted(self._eligible.difference(found))
                return [names[i] for i in (found + rest)[:k]]
        order = sorted(self._eligible, key=lambda i: (self._eval(i)[0], i))
        return [names[i] for i in order[:k]]

    def _set_earliest(self, found: list[int], exhausted: bool = False) -> None:
        """(The scheduler) the earliest eligible events of this step, as its heap verified them
        in order; ``exhausted``: no further eligible event can start."""
        self._earliest = found
        self._exhausted = exhausted

    def earliest_start(self, name: str) -> float:
        """When ``name`` would start if committed now (``inf`` if its semaphores never admit it)."""
        start, _tb, _chosen, _rb, _sb, _blk, _movers = self._eval(self._idx(name))
        return start

    def binding_if(self, name: str) -> tuple[str, ...]:
        """The resources ``name`` would occupy if committed now."""
        i = self._idx(name)
        _start, _tb, chosen, _rb, _sb, _blk, _movers = self._eval(i)
        cg = self._state.cg
        return tuple(cg.res_names[r] for r in self._state.fixed[i] + chosen)

    def resource_free(self, resource: str) -> float:
        """When ``resource`` is free from (0.0 if nothing has used it yet)."""
        r = self._res_index.get(resource)
        if r is None:
            raise InputError(f"no resource named {resource!r} in this graph")
        return self._state.free[r]

    def start_if(self, name: str, occupied: Mapping[str, float]) -> float:
        """When ``name`` could start if each resource in ``occupied`` were busy until the given
        time (a one-step probe; nothing is committed)."""
        i = self._idx(name)
        if i not in self._eligible:
            raise InputError(f"event {name!r} is not eligible at this step")
        free = list(self._state.free)
        for res, until in occupied.items():
            r = self._res_index.get(res)
            if r is None:
                raise InputError(f"no resource named {res!r} in this graph")
            if until > free[r]:
                free[r] = until
        start, _tb, _chosen, _rb, _sb, _blk, _movers = self._state.evaluate(i, free)
        return start

    def duration(self, name: str) -> float:
        return self._state.cg.dur[self._idx(name)]

    def tail(self, name: str) -> float:
        """Longest path from the start of ``name`` to the end of the graph (duration included)."""
        if self._tails is None:
            self._tails = self._state.cg.tails()
        return self._tails[self._idx(name)]

    def position(self, name: str) -> int:
        """The order in which ``name`` was added to the graph (the scheduler's tie-break)."""
        return self._idx(name)

    def event(self, name: str) -> Event:
        return self._state.cg.events[self._idx(name)]

    def is_committed(self, name: str) -> bool:
        return self._state.done[self._idx(name)]

    def end_of(self, name: str) -> float:
        """End time of a committed event."""
        i = self._idx(name)
        if not self._state.done[i]:
            raise InputError(f"event {name!r} is not committed yet")
        return self._state.end[i]

    @property
    def inf(self) -> float:
        return math.inf
