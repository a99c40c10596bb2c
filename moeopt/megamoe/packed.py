"""One rank's result in a compact form that crosses a process boundary cheaply.

A worker process of :func:`moeopt.simulate` (:mod:`moeopt.megamoe.kerneltime`) builds, schedules
and analyses a rank and hands its :class:`~moeopt.megamoe.results.RankResult` back. Pickled as it
is, the result costs more than it took to compute (the largest DeepSeek-V3-like rank, 58k events:
2.6 s to pickle, 3.2 s to unpickle, against 1.8 s to build, schedule and analyse it): its graph
and schedule are tens of thousands of small objects (events, read-only maps, waits) that pickle
walks one by one through Python-level reduce hooks, and the schedule's lazy waits hold the
scheduler's whole compiled graph. :func:`pack` turns them into columns of plain values (lists of
names, floats, tuples and dicts, which pickle reads and writes in C); :func:`unpack` rebuilds
the same objects from them:

* the graph: every event rebuilt by ``Event.trusted`` from its own fields (the fields of an
  event that was already checked: the same event), the semaphores and pools as they were; the
  acquire / release maps events share stay shared. Its columns are pickled apart, to a byte
  string, and the graph is rebuilt from them the first time anything of it is read (see
  :class:`_DeferredGraph`): the parent process of ``simulate`` reads none of its ranks' graphs,
  and unpickling and rebuilding them was most of its serial work (the largest
  DeepSeek-V3-like rank, 47k events, took 1.09 G instructions to unpickle and unpack, 0.32 G
  without its graph). A sender whose receiver can make the graph itself leaves it out
  (``pack(..., graph=False)``, ``unpack(..., graph=maker)``): simulate's workers do, see
  :func:`moeopt.megamoe.kerneltime._graph_again`;
* the schedule: the same starts, ends, bindings, waits (as plain ``Wait`` values: the lazy map's
  values, each built once), policy, commit order, recorded semaphore levels (recorded for the
  rebuilt start / end maps, as they were for the originals) and moved tiles. Its columns and
  the graph's event names are pickled apart too, and the schedule is rebuilt the first time
  anything of it is read (:class:`_DeferredSchedule`): the parent process of ``simulate``
  reads no rank's schedule either (the guardrails read the analyses);
* the event rows: a :class:`~moeopt.megamoe.analysis.table.Table` of the rebuilt graph and
  schedule, built as ``Table.of`` builds it, when the rows first read it (it holds the
  graph's events);
* every other field (the analyses: plain dicts, lists and numbers) as it is.

What the rebuilt result does not carry is cache: the graph's compiled form (rebuilt by
``graph.compiled()`` when something asks for it) and the lazy waits' reference to the
scheduler's arrays. ``tests/megamoe/test_kerneltime.py`` compares a result that crossed with
the one made in this process, field by field.
"""

from __future__ import annotations

import pickle
import struct
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from operator import attrgetter
from types import MappingProxyType
from typing import Any, TypeVar, cast

import numpy as np

from moeopt.core.events import Event, EventGraph
from moeopt.core.gcpause import gc_paused
from moeopt.core.schedule import Schedule, SemaphoreLevels, Wait
from moeopt.core.scheduler import wait_records, wait_rows
from moeopt.megamoe.analysis.table import EventRows, Table
from moeopt.megamoe.results import RankResult

_NAME = attrgetter("name")
_RES = attrgetter("resources")
_DEPS = attrgetter("deps")
_ACQ = attrgetter("acquires")
_REL = attrgetter("releases")
_COLOC = attrgetter("colocate_with")
_DUR = attrgetter("duration_us")
_LABELS = attrgetter("labels")

_OWN = ("events", "schedule", "graph")
"""The fields :func:`pack` encodes; every other one is sent as it is."""


def _shared_maps(maps: list[Mapping[str, int]]) -> tuple[list[dict[str, int]], list[int]]:
    """The distinct maps (by identity: events share them) as dicts, and each event's index."""
    first: dict[int, int] = {}
    distinct: list[dict[str, int]] = []
    idx: list[int] = []
    for m in maps:
        k = first.get(id(m))
        if k is None:
            k = first[id(m)] = len(distinct)
            distinct.append(dict(m))
        idx.append(k)
    return distinct, idx


def _dicts(maps: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each map copied to a dict: an event's read-only view copies its dict in C (``dict()`` of
    a view walks it item by item, four times slower); any other map as ``dict()`` copies it."""
    if set(map(type, maps)) <= {MappingProxyType}:
        out: list[Any] = list(map(MappingProxyType.copy, maps))  # type: ignore[arg-type]
        if set(map(type, out)) <= {dict}:
            return out
    return list(map(dict, maps))


def _pack_graph(g: EventGraph) -> tuple[Any, ...]:
    evs = list(g)
    acq, acq_idx = _shared_maps(list(map(_ACQ, evs)))
    rel, rel_idx = _shared_maps(list(map(_REL, evs)))
    return (
        dict(g.semaphores),
        dict(g.pools),
        list(map(_NAME, evs)),
        list(map(_RES, evs)),
        _dicts(list(map(_DEPS, evs))),
        acq,
        acq_idx,
        rel,
        rel_idx,
        list(map(_COLOC, evs)),
        list(map(_DUR, evs)),
        _dicts(list(map(_LABELS, evs))),
    )


def _unpack_graph(packed: tuple[Any, ...]) -> EventGraph:
    sems, pools, names, res, deps, acq, acq_idx, rel, rel_idx, coloc, dur, labels = packed
    # a non-empty read-only map is kept by Event.trusted as it is (shared between the events
    # that shared it); an empty one becomes the shared empty map, as it was
    acq_maps = [MappingProxyType(m) if m else None for m in acq]
    rel_maps = [MappingProxyType(m) if m else None for m in rel]
    evs = list(
        map(
            Event.trusted,
            names,
            res,
            deps,
            map(acq_maps.__getitem__, acq_idx),
            map(rel_maps.__getitem__, rel_idx),
            coloc,
            dur,
            labels,
        )
    )
    g = EventGraph(semaphores=sems, pools=pools)
    g.add_all(evs)
    return g


def _column(m: Mapping[str, Any], names: list[str]) -> tuple[list[str] | None, list[Any]]:
    """``m``'s keys (``None`` when they are ``names``, in order: the common case, sent once) and
    values."""
    keys = list(m)
    return (None if keys == names else keys), list(m.values())


def _uncolumn(
    col: tuple[list[str] | None, list[Any]], names: list[str], like: dict[str, Any]
) -> dict[str, Any]:
    """The map :func:`_column` was given. ``like``: a dict whose keys are ``names``, in order
    (the common case's keys): copied, then its values replaced, which gives the same dict
    as ``dict(zip(names, values))`` (the same keys in the same order, the same values) several
    times faster -- the copy takes the key table as it is (no key hashed, no table grown) and
    the update finds every key in place (measured: 47k event names, 2.1 ms against 14 ms, in
    the parent process, which rebuilds four such maps per rank one rank after another)."""
    keys, values = col
    if keys is None:
        out = like.copy()
        out.update(zip(names, values))
        return out
    return dict(zip(keys, values))


_WAIT = partial(tuple.__new__, Wait)
"""A ``Wait`` from its fields as a tuple (what ``Wait._make`` does, without a Python call)."""


def _pack_schedule(s: Schedule, names: list[str]) -> tuple[Any, ...]:
    rec = s.recorded_levels
    levels = None
    if rec is not None:
        # the levels hold for the times they were recorded with: keep which ones they are
        levels = (
            None if rec.for_start is s.start_us else dict(rec.for_start),
            None if rec.for_end is s.end_us else dict(rec.for_end),
            dict(rec.curves),
        )
    return (
        _column(s.start_us, names),
        _column(s.end_us, names),
        _column(s.resources, names),
        _pack_waits(s.waits, names),
        s.policy,
        list(s.order),
        levels,
        dict(s.repinned),
    )


def _wait_column(
    waits: Mapping[str, Wait], names: list[str]
) -> tuple[list[str] | None, list[tuple[Any, ...]]]:
    """:func:`_column` of a schedule's waits, each as a plain tuple of its fields (the greedy
    scheduler's lazy map hands them over in columns: :func:`moeopt.core.scheduler.wait_rows`)."""
    rows = wait_rows(waits, names)
    if rows is not None:
        return None, rows
    keys, values = _column(waits, names)
    return keys, list(map(tuple, values))


def _pack_waits(waits: Mapping[str, Wait], names: list[str]) -> tuple[Any, ...]:
    """A schedule's waits for :func:`_unpack_waits`: the greedy scheduler's records worked out
    in arrays when ``waits`` is its lazy map over exactly ``names`` in that order and every
    time in them is a float (:func:`_record_arrays`), else one column per field of ``Wait`` of
    :func:`_wait_column`'s rows (six tuples; none when there is no event)."""
    arrays = _record_arrays(waits, names)
    if arrays is not None:
        return ("arrays", *arrays)
    keys, rows = _wait_column(waits, names)
    return ("fields", keys, list(zip(*rows)))


def _record_arrays(waits: Mapping[str, Wait], names: list[str]) -> tuple[Any, ...] | None:
    """The fields of every event's wait as :meth:`moeopt.core.scheduler._LazyWaits.rows` works
    them out, in numpy arrays of indices and floats (and the resource and semaphore names the
    indices are into), or ``None`` when ``waits`` is not the greedy scheduler's lazy map over
    ``names`` (:func:`~moeopt.core.scheduler.wait_rows`'s test), or some ``t_base`` is not a
    float.

    Why: ``rows`` makes six Python objects per event through a dozen C-level maps; a
    DeepSeek-V3-like rank's 47k waits took 300M instructions to pack that way, and pickle then
    wrote each one (callgrind). The same subtractions and comparisons on float64 arrays are the
    same IEEE operations: ``rw = t_base - ready`` and ``sw = start - t_base`` with ``t_base`` a
    float (an int ``ready`` or ``start`` is made a float by the subtraction there too, exactly
    as ``struct`` makes it one here; two ints would give an int there, hence the test of
    ``t_base``); a wait is kept where it is ``> 0``, else ``0.0``; the resource / semaphore
    index where its wait is ``> 0``, else ``-1`` (``None``). ``ready`` goes as it is, and the
    arrays pickle as their bytes."""
    rec = wait_records(waits, names)
    if rec is None:
        return None
    # (the lazy map's own columns, which its rows() reads)
    ready, start, t_base = rec.ready, rec.start, rec.t_base
    if not t_base:
        return None
    if not _FLOATS.issuperset(map(type, t_base)):
        return None
    tb = _array("d", t_base)
    rw = tb - _array("d", ready)
    sw = _array("d", start) - tb
    rpos, spos = rw > 0, sw > 0
    return (
        list(ready),
        _array("n", rec.pred),
        np.where(rpos, _array("n", rec.res), -1),
        np.where(rpos, rw, 0.0),
        np.where(spos, _array("n", rec.sem), -1),
        np.where(spos, sw, 0.0),
        list(rec.res_names),
        list(rec.sem_names),
    )


_FLOATS = frozenset({float})


def _array(code: str, values: Sequence[Any]) -> np.ndarray:
    """``values`` as an array of the struct type ``code`` (``d``: float64, ``n``: intp), each
    converted by :func:`struct.pack` (a float by ``float()``)."""
    return np.frombuffer(struct.pack(f"{len(values)}{code}", *values), np.float64 if code == "d" else np.intp)


def _unpack_waits(
    sent: tuple[Any, ...], names: list[str]
) -> tuple[list[str] | None, Iterable[tuple[Any, ...]]]:
    """The keys (``None``: ``names``) and the rows of fields :func:`_pack_waits` was given."""
    if sent[0] == "fields":
        return sent[1], zip(*sent[2])
    ready, pred, res, rw, sem, sw, res_names, sem_names = sent[1:]
    # index -1 reads the None appended to each list of names
    return None, zip(
        ready,
        map([*names, None].__getitem__, pred.tolist()),
        map([*res_names, None].__getitem__, res.tolist()),
        rw.tolist(),
        map([*sem_names, None].__getitem__, sem.tolist()),
        sw.tolist(),
    )


def _waits_column(sent: tuple[Any, ...], names: list[str]) -> tuple[list[str] | None, list[Wait]]:
    keys, rows = _unpack_waits(sent, names)
    return keys, list(map(_WAIT, rows))


def _unpack_schedule(packed: tuple[Any, ...], names: list[str]) -> Schedule:
    start, end, res, waits, policy, order, levels, repinned = packed
    like = dict.fromkeys(names)  # (the keys of every column sent without its own)
    start_us = _uncolumn(start, names, like)
    end_us = _uncolumn(end, names, like)
    rec = None
    if levels is not None:
        for_start, for_end, curves = levels
        rec = SemaphoreLevels(
            start_us if for_start is None else for_start, end_us if for_end is None else for_end, curves
        )
    return Schedule(
        start_us=start_us,
        end_us=end_us,
        resources=_uncolumn(res, names, like),
        waits=_uncolumn(_waits_column(waits, names), names, like),
        policy=policy,
        order=tuple(order),
        recorded_levels=rec,
        repinned=repinned,
    )


def _table(g: EventGraph, s: Schedule, names: list[str]) -> Table:
    """``Table.of`` of the rebuilt graph and schedule (which reads the rank's graph alone)."""

    def in_order(m: Mapping[str, Any]) -> list[Any]:
        return list(m.values()) if list(m) == names else [m[n] for n in names]

    return Table(
        names=names,
        events=list(g),
        start=in_order(s.start_us),
        end=in_order(s.end_us),
        res=in_order(s.resources),
        schedule=s,
    )


_MAKE = "_packed_make"
"""The key under which a stand-in keeps, in its own ``__dict__``, what makes its object."""

_BECOMING = threading.RLock()
"""Held while a stand-in becomes its object (two threads must not make it twice; reentrant: the
event table's stand-in makes the graph's on the way)."""


def _become(obj: object) -> None:
    """Turn the stand-in ``obj`` into the object it stands for, in place: its maker's object's
    attributes, in their order, then its class (a ``__class__`` assignment: a stand-in is a
    subclass that adds nothing to the layout). Once done (or for an object that was never a
    stand-in) nothing."""
    with _BECOMING:
        own = object.__getattribute__(obj, "__dict__")
        make = own.get(_MAKE)
        if make is None:
            return
        with gc_paused():  # (as any build of as many objects: see moeopt.core.gcpause)
            real = make()
        own.clear()
        own.update(vars(real))
        object.__setattr__(obj, "__class__", type(real))


_T = TypeVar("_T", bound=type)


def _deferring(cls: _T) -> _T:
    """Makes ``cls`` a stand-in class: any attribute read, write or delete first makes the
    instance the object it stands for (:func:`_become`). The methods are set on the class itself
    rather than inherited from a mixin: a second base would change the layout, and the instance's
    ``__class__`` could then not become its base's."""

    def __getattribute__(self: object, name: str) -> Any:
        _become(self)
        return object.__getattribute__(self, name)

    def __setattr__(self: object, name: str, value: Any) -> None:
        _become(self)
        setattr(self, name, value)

    def __delattr__(self: object, name: str) -> None:
        _become(self)
        delattr(self, name)

    cls.__getattribute__ = __getattribute__  # type: ignore[assignment]
    cls.__setattr__ = __setattr__  # type: ignore[assignment]
    cls.__delattr__ = __delattr__  # type: ignore[assignment]
    return cls


@_deferring
class _DeferredGraph(EventGraph):
    """A rank's graph that is rebuilt from its packed columns the first time anything of it is
    read or written (the events, a method, ``vars``, ``len``, ``repr``, pickling, copying...),
    and is from then on an :class:`EventGraph` (its class too) with the very attributes the
    eager rebuild gives it. Until then, ``type()`` alone tells it from one (``isinstance``
    does not). Most callers of ``simulate`` never read a rank's graph: this spares the parent
    process unpickling and rebuilding tens of thousands of events it would not look at."""

    def __init__(self, make: Callable[[], EventGraph]) -> None:  # (no EventGraph.__init__)
        object.__getattribute__(self, "__dict__")[_MAKE] = make


@_deferring
class _DeferredTable(Table):
    """The event rows' :class:`Table`, made (as :func:`_table` makes it, from the rebuilt graph)
    the first time the rows read it: see :class:`_DeferredGraph`."""

    def __init__(self, make: Callable[[], Table]) -> None:  # (no Table.__init__)
        object.__getattribute__(self, "__dict__")[_MAKE] = make


@_deferring
class _DeferredSchedule(Schedule):
    """A rank's :class:`Schedule` made from its packed columns the first time anything of it is
    read (see :class:`_DeferredGraph`; a frozen dataclass still, once made). The parent process
    of ``simulate`` reads none of its ranks' schedules (the guardrails and the result's totals
    read the analyses): unpickling and rebuilding them was most of its serial work once the
    graphs were deferred (the largest DeepSeek-V3-like rank, 47k events: 132M instructions to
    unpickle its packed result, 169M to unpack it, callgrind)."""

    def __init__(self, make: Callable[[], Schedule]) -> None:  # (no Schedule.__init__)
        object.__getattribute__(self, "__dict__")[_MAKE] = make


class _SentSchedule:
    """A schedule and its graph's event names as :func:`pack` pickled them (one byte string),
    unpickled when the schedule or the event rows first need them (both made while
    :data:`_BECOMING` is held, so once), the schedule's columns dropped once it is made."""

    def __init__(self, blob: bytes) -> None:
        self._blob: bytes | None = blob
        self._names: list[str] = []
        self._cols: tuple[Any, ...] | None = None

    def _load(self) -> None:
        if self._blob is not None:
            self._names, self._cols = pickle.loads(self._blob)
            self._blob = None

    def names(self) -> list[str]:
        self._load()
        return self._names

    def schedule(self) -> Schedule:
        self._load()
        assert self._cols is not None, "a sent schedule is made once"
        made = _unpack_schedule(self._cols, self._names)
        self._cols = None  # (dropped once made: an error leaves them for another try)
        return made


def _table_sent(g: EventGraph, s: Schedule, sent: _SentSchedule) -> Table:
    return _table(g, s, sent.names())


def _graph_of(blob: bytes) -> EventGraph:
    return _unpack_graph(pickle.loads(blob))


Packed = tuple[list[str], dict[str, Any], bytes | None, bytes]
"""What :func:`pack` makes of a rank's result (plain values only): its keys, its other fields,
its graph's columns pickled (``None``: left out) and its graph's event names and schedule's
columns pickled."""


def pack(res: RankResult, *, graph: bool = True) -> Packed:
    """``res`` as plain values: its keys in order, every field but its graph, schedule and
    event rows as it is, its graph as columns pickled apart (a byte string, unpickled only when
    the graph is first read), its graph's event names and its schedule as columns pickled apart
    too (unpickled when the schedule or the event rows are first read; the rows are a view of
    the graph and the schedule).

    ``graph=False``: the graph's columns are left out, for a receiver that can make the same
    graph itself when it is first read (:func:`unpack`'s ``graph``): packing and pickling a
    large rank's graph was about a tenth of a DeepSeek-V3-like worker's time, and the parent
    held every rank's byte string until the end."""
    if not isinstance(res["events"], EventRows):
        raise TypeError("pack takes a result of moeopt.megamoe.simulate.rank_result")
    g = res["graph"]
    if graph:
        cols = _pack_graph(g)
        names: list[str] = cols[2]
        blob: bytes | None = pickle.dumps(cols, protocol=pickle.HIGHEST_PROTOCOL)
    else:
        names, blob = list(map(_NAME, g)), None
    sched = (names, _pack_schedule(res["schedule"], names))
    return (
        list(res),
        {k: v for k, v in res.items() if k not in _OWN},
        blob,
        pickle.dumps(sched, protocol=pickle.HIGHEST_PROTOCOL),
    )


def unpack(packed: Packed, graph: Callable[[Schedule], EventGraph] | None = None) -> RankResult:
    """The result :func:`pack` was given, rebuilt (see the module docstring): its schedule, its
    graph and its event table each when first read. ``graph``: what makes the graph, from the
    rebuilt schedule (a tile a restructuring rule moved is where ``schedule.repinned`` says),
    when it was packed without it (``pack(..., graph=False)``): called when the graph is first
    read, it must give the graph the result was made of, its events in the packed order."""
    keys, rest, blob, sched = packed
    sent = _SentSchedule(sched)
    s = _DeferredSchedule(sent.schedule)
    if blob is not None:
        make: Callable[[], EventGraph] = partial(_graph_of, blob)
    elif graph is not None:
        make = partial(graph, s)
    else:
        raise ValueError("the result was packed without its graph: unpack needs what makes it")
    g = _DeferredGraph(make)
    rows = EventRows(_DeferredTable(partial(_table_sent, g, s, sent)))
    own = {"graph": g, "schedule": s, "events": rows}
    return cast(RankResult, {k: own[k] if k in own else rest[k] for k in keys})
