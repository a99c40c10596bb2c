"""One rank's schedule read once into arrays (:class:`Table`), and the lazy per-event rows."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TypeVar, overload

from moeopt.core.events import Event
from moeopt.core.schedule import Schedule, Wait
from moeopt.megamoe.build import RankGraph
from moeopt.megamoe.results import EventRow

EPS = 1e-6
"""Tolerance (µs) of the analyses' time comparisons."""

_V = TypeVar("_V")


@dataclass(frozen=True)
class Table:
    """One rank's schedule as arrays in graph order, read once from the :class:`Schedule`.

    Every analysis walks all events; reading ``start_us`` / ``end_us`` / ``resources`` /
    ``waits`` by name once and sharing the arrays keeps the analyses linear and cheap.
    """

    names: list[str]
    events: list[Event]
    start: list[float]
    end: list[float]
    res: list[tuple[str, ...]]
    schedule: Schedule

    @classmethod
    def of(cls, rg: RankGraph, s: Schedule) -> Table:
        events = list(rg.graph)
        names = [ev.name for ev in events]

        def in_order(m: Mapping[str, _V]) -> list[_V]:
            # a schedule from the greedy scheduler lists the events in graph order already
            if type(m) is dict and list(m) == names:
                return list(m.values())
            return [m[n] for n in names]

        return cls(
            names=names,
            events=events,
            start=in_order(s.start_us),
            end=in_order(s.end_us),
            res=in_order(s.resources),
            schedule=s,
        )

    @cached_property
    def stage(self) -> list[str | None]:
        """Per event, its ``stage`` label (None without one)."""
        return [ev.labels.get("stage") for ev in self.events]

    @cached_property
    def waits(self) -> list[Wait]:
        """Per event, what it waited for (read when first needed: only the event rows do)."""
        wt = self.schedule.waits
        return [wt[n] for n in self.names]


def events_on(t: Table) -> dict[str, list[int]]:
    """Per resource, the events that ran on it (indices in graph order; resources in the order of
    their first event): read by the busy times, the idle ledger and the critical path, built
    once per rank by :func:`moeopt.megamoe.simulate` and handed to each (not kept on the
    table: the table is part of the result, whose contents must not change)."""
    on: dict[str, list[int]] = {}
    for i, rs in enumerate(t.res):
        for r in rs:
            got = on.get(r)
            if got is None:
                on[r] = [i]
            else:
                got.append(i)
    return on


class EventRows(Sequence[EventRow]):
    """``rank_results[r]["events"]``: one row per event (start, end, core, what it waited for).

    Built on first access: most callers read the totals and never look at single events.
    """

    __slots__ = ("_rows", "_table")

    def __init__(self, table: Table) -> None:
        self._table = table
        self._rows: list[EventRow] | None = None

    def _all(self) -> list[EventRow]:
        if self._rows is None:
            t = self._table
            rows: list[EventRow] = []
            for i, ev in enumerate(t.events):
                wt = t.waits[i]
                kind = wt.kind
                rows.append(
                    {
                        "name": t.names[i],
                        "stage": ev.labels.get("stage"),
                        "start_us": t.start[i],
                        "end_us": t.end[i],
                        "core": "+".join(t.res[i]),
                        "waited_for": wt.pred if kind == "dependency" else (wt.resource or wt.semaphore),
                        "wait_kind": kind,
                        "wait_us": wt.queued_us,
                        "ready_us": wt.ready_us,
                    }
                )
            self._rows = rows
        return self._rows

    @overload
    def __getitem__(self, i: int) -> EventRow: ...

    @overload
    def __getitem__(self, i: slice) -> list[EventRow]: ...

    def __getitem__(self, i: int | slice) -> EventRow | list[EventRow]:
        return self._all()[i]

    def __len__(self) -> int:
        return len(self._table.names)

    def __iter__(self) -> Iterator[EventRow]:
        return iter(self._all())

    def __repr__(self) -> str:
        return f"EventRows({len(self)} events)"
