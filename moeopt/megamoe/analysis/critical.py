"""The critical path of one rank's schedule.

From the last event back, each step says what set its start: a dependency (the predecessor
whose end + λ it waited for), a resource held by the previous event on it (resource queueing),
or semaphore capacity (the event whose release admitted it). The path is returned from the
first step to the last.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from operator import attrgetter
from typing import overload

import numpy as np

from moeopt.core import smallints
from moeopt.core.compiled import CompiledGraph
from moeopt.core.events import Event
from moeopt.core.schedule import Schedule, Wait, WaitKind
from moeopt.megamoe.analysis.table import EPS, Columns, Table, events_on, packed, pair_numbers
from moeopt.megamoe.build import RankGraph
from moeopt.megamoe.results import CriticalStep, CriticalStepWait, Why

_releases = attrgetter("releases")

WHY: dict[WaitKind, Why] = {
    "dependency": "dependency",
    "resource": "resource queueing",
    "semaphore": "capacity",
    "none": "source",
}
"""A step's ``why`` for the kind of its wait."""


class _Ends:
    """Who ended on each resource and who released each semaphore, and when: built on the first
    step that waited for a resource (that resource's alone, from the table's events per
    resource) or for a semaphore (every semaphore's releasers, in one pass); a path of
    dependencies alone needs neither. Each list is sorted by end time (graph order on ties), so
    that a step finds the last end before its start by bisection instead of a scan of the
    resource's whole history."""

    def __init__(
        self,
        t: Table,
        on: Mapping[str, list[int]] | None = None,
        cols: Columns | None = None,
        cg: CompiledGraph | None = None,
    ) -> None:
        self._t = t
        self._cg = cg  # the table's graph compiled (its events in the table's order), if given
        self._events_on = on
        self._cols = cols
        self._on: dict[str, _Ended] = {}
        self._releasers: dict[str, _Ended] = {}
        self._by_map: tuple[list[Mapping[str, int]], np.ndarray] | None = None
        self._end: np.ndarray = np.empty(0)  # (the end times, read with the release maps)

    def on(self, r: str) -> _Ended:
        """The events that ran on resource ``r``."""
        got = self._on.get(r)
        if got is None:
            t = self._t
            end = t.end
            if self._events_on is None:
                self._events_on = events_on(t, self._cols)
            ids = self._events_on.get(r)
            got = self._on[r] = _Ended([(end[i], i) for i in ids], t.names) if ids else _NO_ENDS
        return got

    def releasers(self, sem: str) -> _Ended:
        """The events that released semaphore ``sem``: those whose release map names it. Events
        share release maps by the thousand: the events are grouped by map once (by the maps'
        identities, on arrays: each event's map is alive in the event meanwhile) and each
        distinct map asked once per semaphore; the releasers come out in graph order and are
        sorted by end time stably, so the order is (end, index) as :class:`_Ended` sorts."""
        got = self._releasers.get(sem)
        if got is None:
            t = self._t
            if self._by_map is None:
                self._by_map = _by_pair(self._cg) or _by_release_map(t.events)
                self._end = (Columns(t) if self._cols is None else self._cols).end
            maps, which = self._by_map
            mine = [j for j, m in enumerate(maps) if sem in m]
            if mine:
                idx = np.flatnonzero(np.isin(which, mine))
                e = self._end[idx]
                order = np.argsort(e, kind="stable")
                got = _Ended.sorted(e[order].tolist(), _NamesAt(idx[order], t.names))
            else:
                got = _NO_ENDS
            self._releasers[sem] = got
        return got


def _by_release_map(events: list[Event]) -> tuple[list[Mapping[str, int]], np.ndarray]:
    """The distinct release maps of ``events`` (by identity) and, per event, the number of its."""
    ids = packed("n", map(id, map(_releases, events)), len(events))
    _ids, first, which = np.unique(ids, return_index=True, return_inverse=True)
    return [events[i].releases for i in first.tolist()], which.reshape(-1)


def _by_pair(cg: CompiledGraph | None) -> tuple[list[Mapping[str, int]], np.ndarray] | None:
    """:func:`_by_release_map` read off the scheduler's pair numbers
    (:func:`~moeopt.megamoe.analysis.table.pair_numbers`): per event its pair's number, and per
    pair the semaphores its events release (the compiled release pairs of its first event, by
    name). Events are grouped by a finer key than their release map alone (equal maps may sit
    in different pairs), which changes no event's releases. ``None`` without pair numbers."""
    which = pair_numbers(cg)
    if which is None or cg is None:
        return None
    _sigs, first = smallints.unique(which, return_index=True)
    names = cg.sem_names
    rel = cg.rel
    maps: list[Mapping[str, int]] = [{names[k]: u for k, u in rel[i]} for i in first.tolist()]
    # (pair numbers are 0 .. count - 1, in order of first event: the map of pair j is maps[j])
    return maps, which


class _NamesAt(Sequence[str]):
    """``[names[i] for i in ids]``, each looked up when read: a semaphore shared by thousands of
    events has as many releasers, of which a path step reads a few (building the list of their
    names took 2.5M instructions of a pto M=2048 rank's critical path, callgrind)."""

    __slots__ = ("_ids", "_names")

    def __init__(self, ids: np.ndarray, names: Sequence[str]) -> None:
        self._ids, self._names = ids, names

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, p: int) -> str: ...

    @overload
    def __getitem__(self, p: slice) -> list[str]: ...

    def __getitem__(self, p: int | slice) -> str | list[str]:
        if isinstance(p, slice):
            return [self._names[i] for i in self._ids[p].tolist()]
        return self._names[int(self._ids[p])]


class _Ended:
    """The events of one resource (or releasers of one semaphore) sorted by ``(end, index)``."""

    __slots__ = ("ends", "names")

    def __init__(self, items: list[tuple[float, int]], names: list[str]) -> None:
        items.sort()
        self.ends = [e for e, _i in items]
        self.names: Sequence[str] = [names[i] for _e, i in items]

    @classmethod
    def sorted(cls, ends: list[float], names: Sequence[str]) -> _Ended:
        """From ends and names already in ``(end, index)`` order."""
        out = cls.__new__(cls)
        out.ends, out.names = ends, names
        return out

    def last_before(self, t: float, not_this: str) -> str | None:
        """The event with the latest end at or before ``t`` (+ EPS) other than ``not_this``;
        among equal ends, the first added."""
        ends, names = self.ends, self.names
        k = bisect_right(ends, t + EPS)
        while k > 0:
            e = ends[k - 1]
            lo = bisect_left(ends, e, 0, k)
            for p in range(lo, k):
                if names[p] != not_this:
                    return names[p]
            k = lo
        return None


_NO_ENDS = _Ended([], [])


def critical_path(
    rg: RankGraph,
    s: Schedule,
    last: str,
    limit: int = 10000,
    table: Table | None = None,
    on: Mapping[str, list[int]] | None = None,
    cols: Columns | None = None,
) -> list[CriticalStep]:
    """Walk back from ``last``: each step names the event, its stage and why it started when it
    did (``on``: :func:`~moeopt.megamoe.analysis.table.events_on` of the table, ``cols``: its
    :class:`~moeopt.megamoe.analysis.table.Columns`, if made)."""
    t = table or Table.of(rg, s)
    ends = _Ends(t, on, cols, rg.graph.compiled())
    path: list[CriticalStep] = []
    cur: str | None = last
    seen = set()
    while cur is not None and cur not in seen and len(path) < limit:
        seen.add(cur)
        w = s.waits[cur]
        nxt, extra = _what_set_start(rg, s, cur, w, ends)
        kind = w.kind
        path.append(
            {
                "event": cur,
                "stage": rg.graph[cur].labels.get("stage"),
                "start_us": s.start_us[cur],
                "end_us": s.end_us[cur],
                "resources": list(s.resources[cur]),
                "why": WHY[kind],
                "wait_us": _wait_us(w, kind),
                **extra,
                "after": nxt,
            }
        )
        cur = nxt
    path.reverse()
    return path


def _wait_us(w: Wait, kind: WaitKind) -> float:
    """How long the step waited past its dependencies: the wait of the constraint that set it."""
    if kind == "resource":
        return w.resource_wait_us
    if kind == "semaphore":
        return w.semaphore_wait_us
    return 0.0


def _what_set_start(
    rg: RankGraph, s: Schedule, cur: str, w: Wait, ends: _Ends
) -> tuple[str | None, CriticalStepWait]:
    """The event before ``cur`` on the path and the step's optional keys: the releaser of the
    semaphore it waited for, the previous holder of the resource it queued for, else its
    predecessor (with the λ of that edge)."""
    kind = w.kind
    extra: CriticalStepWait = {}
    nxt: str | None = None
    if kind == "semaphore" and w.semaphore is not None:
        nxt = ends.releasers(w.semaphore).last_before(s.start_us[cur], cur)
        extra["semaphore"] = w.semaphore
    elif kind == "resource" and w.resource is not None:
        nxt = ends.on(w.resource).last_before(w.ready_us + w.resource_wait_us, cur)
        extra["resource"] = w.resource
    if nxt is None:
        nxt = w.pred
        if kind != "none" and w.pred is not None:
            extra["lambda_us"] = rg.graph[cur].deps.get(w.pred, 0.0)
    return nxt, extra
