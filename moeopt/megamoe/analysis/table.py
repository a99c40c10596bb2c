"""One rank's schedule read once into arrays (:class:`Table`), and the lazy per-event rows."""

from __future__ import annotations

import itertools
import struct
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from operator import attrgetter, itemgetter
from typing import TypeVar, overload

import numpy as np

from moeopt.core.compiled import CompiledGraph
from moeopt.core.events import Event
from moeopt.core.schedule import Schedule, Wait
from moeopt.core.smallints import stable_order
from moeopt.core.state import picked
from moeopt.megamoe.build import RankGraph
from moeopt.megamoe.results import EventRow

EPS = 1e-6
"""Tolerance (µs) of the analyses' time comparisons."""

_LABELS = attrgetter("labels")
_STAGE = itemgetter("stage")

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
        g = rg.graph
        events = list(g)
        names = list(g.events)  # (the keys are the events' names, in the same order)

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
        """Per event, its ``stage`` label (None without one).

        Read by subscription in one C-level pass while every event has one (MegaMoE's do): a
        read-only map's ``get`` is a method call on the map it wraps, about three times the
        instructions of its subscription (callgrind, scenario_basic: 4.2M for the ``get``
        loop); the first event without one sends the whole list to ``get``."""
        try:
            return list(map(_STAGE, map(_LABELS, self.events)))
        except KeyError:
            return [ev.labels.get("stage") for ev in self.events]

    @cached_property
    def waits(self) -> list[Wait]:
        """Per event, what it waited for (read when first needed: only the event rows do)."""
        wt = self.schedule.waits
        return [wt[n] for n in self.names]


def events_on(t: Table, cols: Columns | None = None) -> dict[str, list[int]]:
    """Per resource, the events that ran on it (indices in graph order; resources in the order of
    their first event): read by the busy times, the idle ledger and the critical path, built
    once per rank by :func:`moeopt.megamoe.simulate` and handed to each (not kept on the
    table: the table is part of the result, whose contents must not change). ``cols``: the
    table's :class:`Columns`, if made (they share its resource tuples' numbering).

    Worked out per distinct resource tuple (a rank has a few dozen: :attr:`Columns.res_tuples`)
    instead of per event: each tuple's resources numbered in order of first event (the tuples
    in order of their first event, each one's resources in its order: a resource's first event
    is the first of the first tuple holding it), every (event, resource) pair spread from its
    event's tuple, and the pairs sorted by resource stably (graph order kept within one). The
    same dict as one loop over the events appending each to its resources' lists (a resource
    twice in one tuple: the event twice), at about a fifth of the loop's instructions
    (callgrind, scenario_basic: 6.3M for the loop, see :func:`_events_on_loop`)."""
    c = Columns(t) if cols is None else cols
    tuples, which = c.res_tuples
    if not len(which):
        return {}
    res_no: dict[str, int] = {}
    for rs in tuples:
        for r in rs:
            if r not in res_no:
                res_no[r] = len(res_no)
    if not res_no:
        return {}
    size = packed("n", map(len, tuples), len(tuples))
    flat = packed("n", [res_no[r] for rs in tuples for r in rs], int(size.sum()))
    count = size[which]  # resources per event
    total = int(count.sum())
    ev = np.repeat(np.arange(len(which)), count)
    # pair k is entry (k - the event's first pair) of its event's tuple
    tab_start = np.cumsum(size) - size
    at = np.repeat(tab_start[which] - (np.cumsum(count) - count), count) + np.arange(total)
    res = flat[at]
    order = stable_order(res)
    ids: list[int] = ev[order].tolist()
    out: dict[str, list[int]] = {}
    lo = 0
    for r, n_r in zip(res_no, np.bincount(res, minlength=len(res_no)).tolist()):
        out[r] = ids[lo : lo + n_r]
        lo += n_r
    return out


def _events_on_loop(t: Table) -> dict[str, list[int]]:
    """:func:`events_on` event by event (the reference its tests compare with)."""
    on: dict[str, list[int]] = {}
    for i, rs in enumerate(t.res):
        for r in rs:
            got = on.get(r)
            if got is None:
                on[r] = [i]
            else:
                got.append(i)
    return on


def packed(code: str, values: Iterable[object], count: int) -> np.ndarray:
    """The ``count`` ``values`` as a read-only array of the struct type ``code`` (``d``: float64,
    ``n``: intp), each converted as ``np.fromiter`` converts a Python number (``d``: by
    ``float()``; ``n``: an integer, which must fit). :func:`struct.pack` converts a sequence in
    one C loop, about half the instructions of ``np.fromiter``'s generic per-item assignment
    (callgrind, see :func:`moeopt.core.validate._packed`, the validator's own copy: the validator
    shares no code with the analyses). Raises :class:`struct.error` unless there are exactly
    ``count`` values."""
    return np.frombuffer(struct.pack(f"{count}{code}", *values), _DTYPE[code])


_DTYPE = {"d": np.dtype(np.float64), "n": np.dtype(np.intp)}


def pair_numbers(cg: CompiledGraph | None) -> np.ndarray | None:
    """Per event of the compiled graph ``cg`` (graph order), the number of its (acquire,
    release) pair among the distinct ones, as the greedy scheduler numbered them and kept them
    on the graph (``SemaphoreSignatures.sig``: pairs of compiled tuples, which are shared by the events
    whose maps are one object, numbered 0, 1, ... in order of first event). ``None`` when the
    graph carries none (not scheduled by the greedy scheduler since it was compiled: a graph
    compiled again, e.g. with re-pinned tiles). The analyses group events by them instead of by
    the ``id`` of each event's maps: an ``id`` per event is a new integer object, and packing
    them cost 2.8M instructions per map of a scenario_basic rank (callgrind), where these small
    integers pack in a tenth of it."""
    # (kept by either greedy loop: moeopt.core.state.semaphore_signatures)
    signatures = cg.derived("semaphore_signatures") if cg is not None else None
    if signatures is None:
        return None
    sig = signatures.sig
    return packed("n", sig, len(sig))


class Columns:
    """A table's per-event columns as arrays (read-only), each made when first asked and then
    shared: the busy times, the idle ledger and the critical path each read the start and end
    times, and the busy times and the idle ledger each the stage of every event and whether it
    holds a resource. Like :func:`events_on`, made once per rank by
    :func:`moeopt.megamoe.simulate.rank_result` and handed to each analysis (an analysis called
    alone makes its own), and not kept on the table."""

    def __init__(self, t: Table) -> None:
        self.t = t

    @cached_property
    def start(self) -> np.ndarray:
        """Per event, its start time."""
        return packed("d", self.t.start, len(self.t.start))

    @cached_property
    def end(self) -> np.ndarray:
        """Per event, its end time."""
        return packed("d", self.t.end, len(self.t.end))

    @cached_property
    def res_tuples(self) -> tuple[list[tuple[str, ...]], np.ndarray]:
        """The distinct resource tuples of the events (equal tuples once, in order of their
        first event) and, per event, the number of its tuple: one C-level pass of the tuples
        into a dict and one of their lookups, instead of a Python step per event for
        :func:`events_on` and :attr:`n_res`."""
        res = self.t.res
        number = {rs: k for k, rs in enumerate(dict.fromkeys(res))}
        return list(number), packed("n", picked(number, res), len(res))

    @cached_property
    def n_res(self) -> np.ndarray:
        """Per event, how many resources it held."""
        tuples, which = self.res_tuples
        return packed("n", map(len, tuples), len(tuples))[which]

    @cached_property
    def stage_labels(self) -> list[str | None]:
        """The distinct ``stage`` labels (None: none) in order of their first event."""
        return self._stages[0]

    @cached_property
    def stage_code(self) -> np.ndarray:
        """Per event, the position of its ``stage`` label in :attr:`stage_labels`."""
        return self._stages[1]

    @cached_property
    def _stages(self) -> tuple[list[str | None], np.ndarray]:
        """:attr:`stage_labels` and :attr:`stage_code` in one C-level pass over
        :attr:`Table.stage`: each label numbered on first sight by a ``defaultdict`` whose
        factory counts (so in order of first event, as ``dict.fromkeys`` orders them), without
        a second pass to number them (callgrind, scenario_basic: the label list then its
        numbering 7.7M)."""
        stage = self.t.stage
        number: defaultdict[str | None, int] = defaultdict(itertools.count().__next__)
        code = packed("n", picked(number, stage), len(stage))
        return list(number), code


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
