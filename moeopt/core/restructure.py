"""Runtime restructuring hooks: re-pinning events while the greedy scheduler runs.

A *restructure hook* is called by :func:`moeopt.schedule` after every commit. Through a
:class:`RestructureControl` it may read the scheduler's state (resource free times, which events
are committed, where each event is pinned) and do one thing: **re-pin** a not-yet-committed event
from one of its fixed resources to another member of a pool that contains both. The event keeps
its name, its dependencies, its duration and its semaphores, so its consumers are unchanged; only
where it runs moves. Everything else about the schedule is as the greedy's rules say (an event
re-pinned while eligible is re-evaluated on its new resource).

What the scheduler guarantees, and what it refuses (:class:`~moeopt.errors.SchedulingError`):

* a re-pinned event is not committed yet and is not colocated with another event (a colocation
  group binds on one site together; moving one member alone would split it);
* the new resource is a member of a declared pool that also contains the resource it replaces;
* the schedule records every re-pin (:attr:`moeopt.Schedule.repinned`: event -> (declared
  resource, resource it ran on)); :func:`moeopt.validate_schedule` accepts such a binding only
  where the schedule records it and the pool rule holds, and :func:`repinned_graph` gives the
  graph with the events where they ran, on which the schedule is an ordinary valid schedule (the
  graph to hand to the exact layer with the schedule as its hint).

Cost. The scheduler's own work per re-pin is ``O(log n)`` (a fresh heap entry; the stale one is
dropped lazily). A hook must keep its own work per call amortised ``O(log n)`` (or better) for
scheduling to stay near-linear in the number of events: a hook that scans every pending event
on each commit, as a straightforward implementation would, makes scheduling quadratic.

The core knows no stage or operator: which events may move, and when, is the hook's business
(the MegaMoE adapter's idle-core stealing is one such hook).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from moeopt.core.compiled import CompiledGraph
from moeopt.core.events import Event, EventGraph
from moeopt.errors import SchedulingError


class Restructure:
    """Base class of restructure hooks (see the module docstring)."""

    name: str = "restructure"

    def prepare(self, cg: CompiledGraph) -> None:
        """Called once before scheduling with the compiled graph (index ``i`` = ``cg.names[i]``)."""

    def after_commit(self, i: int, ctl: RestructureControl) -> None:
        """Called after event ``i`` was committed; may re-pin events through ``ctl``."""


class RestructureControl:
    """What a hook may read and do (handed to :meth:`Restructure.after_commit`)."""

    __slots__ = ("_cg", "_done", "_end", "_fixed", "_free", "_pool_of", "_refresh", "repinned")

    def __init__(
        self,
        cg: CompiledGraph,
        fixed: list[tuple[int, ...]],
        free: list[float],
        done: list[bool],
        end: list[float],
        refresh: Callable[[int], None],
    ) -> None:
        self._cg = cg
        self._fixed = fixed
        self._free = free
        self._done = done
        self._end = end
        self._refresh = refresh
        # resource -> the pools (ids) it belongs to, built on the first re-pin
        self._pool_of: dict[int, set[int]] | None = None
        self.repinned: dict[int, tuple[int, int]] = {}  # event -> (declared resource, resource now)

    @property
    def cg(self) -> CompiledGraph:
        return self._cg

    def free_at(self, r: int) -> float:
        """When resource ``r`` is free after the events committed so far."""
        return self._free[r]

    def done(self, j: int) -> bool:
        """Whether event ``j`` is committed."""
        return self._done[j]

    def end(self, j: int) -> float:
        """The end of committed event ``j``."""
        return self._end[j]

    def fixed(self, j: int) -> tuple[int, ...]:
        """Event ``j``'s fixed resources now (re-pins applied)."""
        return self._fixed[j]

    def repin(self, j: int, old: int, new: int) -> None:
        """Move event ``j`` from its fixed resource ``old`` to ``new`` (see the module docstring
        for the rules; breaking one is a :class:`SchedulingError` naming the hook's mistake)."""
        cg = self._cg
        name = cg.names[j]
        if self._done[j]:
            raise SchedulingError(f"restructure: event {name!r} is already committed; it cannot be re-pinned")
        if cg.group[j] >= 0:
            raise SchedulingError(
                f"restructure: event {name!r} is colocated with other events; re-pinning it alone would "
                "split its colocation group"
            )
        cur = self._fixed[j]
        if old not in cur:
            raise SchedulingError(
                f"restructure: event {name!r} is not pinned to {cg.res_names[old]!r} "
                f"(its fixed resources: {[cg.res_names[r] for r in cur]})"
            )
        if new == old:
            return
        if new in cur:
            raise SchedulingError(f"restructure: event {name!r} already holds {cg.res_names[new]!r}")
        if self._pool_of is None:
            pool_of: dict[int, set[int]] = {}
            for p, members in enumerate(cg.pool_members):
                for m in members:
                    pool_of.setdefault(m, set()).add(p)
            self._pool_of = pool_of
        if not self._pool_of.get(old, set()) & self._pool_of.get(new, set()):
            raise SchedulingError(
                f"restructure: event {name!r} cannot move from {cg.res_names[old]!r} to "
                f"{cg.res_names[new]!r}: no declared pool contains both"
            )
        self._fixed[j] = tuple(new if r == old else r for r in cur)
        first = self.repinned.get(j, (old, old))[0]
        if first == new:
            del self.repinned[j]  # back where it was declared
        else:
            self.repinned[j] = (first, new)
        self._refresh(j)

    def repinned_names(self) -> dict[str, tuple[str, str]]:
        cg = self._cg
        moved = sorted(self.repinned.items())
        return {cg.names[j]: (cg.res_names[a], cg.res_names[b]) for j, (a, b) in moved}


def repinned_graph(graph: EventGraph, repinned: Mapping[str, tuple[str, str]]) -> EventGraph:
    """``graph`` with every re-pinned event on the resource it ran on (``repinned``: a schedule's
    :attr:`~moeopt.Schedule.repinned`); the same graph when nothing moved."""
    if not repinned:
        return graph
    events: list[Event] = []
    for name, ev in graph.events.items():
        got = repinned.get(name)
        if got is not None:
            old, new = got
            ev = dataclasses.replace(ev, resources=tuple(new if r == old else r for r in ev.resources))
        events.append(ev)
    return graph.copy_with(events=events)
