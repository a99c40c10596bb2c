"""``packed``: a rank's result crossing from a worker, its graph, schedule and event table
rebuilt when first read (``_DeferredGraph``, ``_DeferredSchedule``, ``_DeferredTable``).

The reference is the result made in this process (``simulate`` schedules these small scenarios
here): the rebuilt one must read the same through every way in, and become a plain
``EventGraph`` / ``Table`` (class and attributes, in order) the first time anything of it is
read or written."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import threading
from collections.abc import Callable
from typing import Any

import pytest

from moeopt.core.events import EventGraph
from moeopt.core.schedule import Schedule
from moeopt.megamoe import simulate
from moeopt.megamoe.analysis.table import Table
from moeopt.megamoe.packed import pack, unpack
from moeopt.megamoe.results import RankResult
from moeopt.trust.golden import default_configs


def _results(name: str) -> list[RankResult]:
    """Two distinct ranks' results of golden scenario ``name``, made in this process."""
    sc = next(c for c in default_configs() if c.name == name).scenario()
    got = simulate(sc)
    return [got["rank_results"][r] for r in got["simulated_ranks"][:2]]


def _crossed(res: RankResult) -> RankResult:
    """``res`` as a worker sends it and this process rebuilds it."""
    return unpack(pickle.loads(pickle.dumps(pack(res))))


def _graph_text(g: EventGraph) -> tuple[Any, ...]:
    """What a reader sees of a graph (events compare by identity: their text and labels)."""
    acq_groups = {}  # events sharing an acquire map, by first sharer: the sharing is kept
    for ev in g:
        acq_groups.setdefault(id(ev.acquires), []).append(ev.name)
    return (
        [repr(ev) for ev in g],
        [dict(ev.labels) for ev in g],
        [type(m).__name__ for ev in g for m in (ev.deps, ev.acquires, ev.releases, ev.labels)],
        sorted(acq_groups.values()),
        dict(g.semaphores),
        dict(g.pools),
    )


@pytest.mark.parametrize(
    # skewed routings (a graph per rank), late-bound pools, a restructuring rule (re-pinned tiles)
    "name",
    ["bs72.zipf", "bs72.late_aic", "basic_e8.late_aic_aiv1", "pto_m16.zipf.stealing"],
)
def test_rebuilt_result_reads_as_the_original(name: str) -> None:
    for res in _results(name):
        got = _crossed(res)
        g = got["graph"]
        assert type(g) is not EventGraph  # (not read yet: the deferred path is under test)
        assert type(got["schedule"]) is not Schedule
        assert list(got) == list(res)
        assert {k: v for k, v in got.items() if k not in ("graph", "schedule", "events")} == {
            k: v for k, v in res.items() if k not in ("graph", "schedule", "events")
        }
        assert got["schedule"] == res["schedule"]
        assert type(got["schedule"]) is Schedule
        assert list(vars(got["schedule"])) == list(vars(res["schedule"]))
        assert got["schedule"].fingerprint() == res["schedule"].fingerprint()
        assert list(got["events"]) == list(res["events"])  # (the table, then the graph, made)
        assert type(g) is EventGraph
        assert list(vars(g)) == list(vars(res["graph"]))
        assert _graph_text(g) == _graph_text(res["graph"])
        # the event rows' table is a plain Table over the rebuilt graph's own events
        t = got["events"]._table  # type: ignore[attr-defined]
        assert type(t) is Table
        fields = list(Table.__dataclass_fields__)  # (and the caches each one filled when read)
        assert [f for f in vars(t) if f in fields] == fields
        assert all(a is b for a, b in zip(t.events, g, strict=True))
        assert t.schedule is got["schedule"]
        g.validate()  # (consumers rebuild the compiled form from the events)
        assert g.compiled().names == res["graph"].compiled().names


def _set(g: EventGraph) -> None:
    g.note = 1  # type: ignore[attr-defined]


_WAYS: dict[str, Callable[[Any], object]] = {
    "len": len,
    "iter": lambda g: next(iter(g)),
    "contains": lambda g: "x" in g,
    "repr": repr,
    "str": str,
    "vars": vars,
    "dir": dir,
    "method": lambda g: g.resources(),
    "property": lambda g: g.events,
    "class": lambda g: g.__class__,
    "setattr": _set,
    "pickle": pickle.dumps,  # (a graph does not pickle: its events' maps are read-only views)
    "copy": copy.copy,
    "deepcopy": copy.deepcopy,  # (nor deep-copies)
}


@pytest.mark.parametrize("way", sorted(_WAYS))
def test_every_way_in_makes_the_graph(way: str) -> None:
    res = _results("basic_e8.late_aic_aiv1")[0]
    g = _crossed(res)["graph"]
    assert type(g) is not EventGraph
    try:  # what the way does with the graph made in this process: the same, or the same error
        want: object = _WAYS[way](res["graph"])
    except Exception as exc:
        with pytest.raises(type(exc)):
            _WAYS[way](g)
    else:
        out = _WAYS[way](g)
        if way == "copy":  # a copy of the graph, of the plain class
            assert type(out) is EventGraph
            assert _graph_text(out) == _graph_text(want)  # type: ignore[arg-type]
        elif way in ("len", "contains", "str", "repr", "dir", "class"):
            assert out == want
    assert type(g) is EventGraph
    assert _graph_text(g) == _graph_text(res["graph"])
    if way == "setattr":  # (set on both: on the plain graph too)
        assert g.note == 1  # type: ignore[attr-defined]
        assert list(vars(g)) == list(vars(res["graph"]))
        assert list(vars(g))[-1] == "note"


def _read_all(g: EventGraph, seen: list[int]) -> None:
    seen.append(len(list(g)))


def test_graph_made_once_across_threads() -> None:
    # threads reading the graph at once: one makes it, the others wait and read it
    res = _results("bs72.zipf")[0]
    n = len(res["graph"])
    for _ in range(3):
        g = _crossed(res)["graph"]
        seen: list[int] = []
        ts = [threading.Thread(target=_read_all, args=(g, seen)) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert seen == [n] * 4
        assert type(g) is EventGraph
        assert len(g) == n


def test_result_packed_without_its_graph_reads_as_the_original() -> None:
    # pack(..., graph=False): the receiver makes the graph itself, from the rebuilt schedule,
    # the first time it is read (simulate's workers send their results so, see
    # kerneltime._graph_again); re-pinned tiles: the maker is handed the schedule that moved them
    for res in _results("pto_m16.zipf.stealing"):
        packed = pickle.loads(pickle.dumps(pack(res, graph=False)))
        assert packed[2] is None  # (no graph columns sent)
        with pytest.raises(ValueError, match="without its graph"):
            unpack(packed)
        made: list[object] = []

        def make(s: object, g: EventGraph = res["graph"], made: list[object] = made) -> EventGraph:
            made.append(s)
            return g.copy_with()

        got = unpack(packed, make)
        assert made == []  # (not made before it is read)
        assert got["schedule"] == res["schedule"]
        assert list(got["events"]) == list(res["events"])
        assert made == [got["schedule"]]  # once, from the rebuilt schedule
        assert type(got["graph"]) is EventGraph
        assert _graph_text(got["graph"]) == _graph_text(res["graph"])
        assert {k: v for k, v in got.items() if k not in ("graph", "schedule", "events")} == {
            k: v for k, v in res.items() if k not in ("graph", "schedule", "events")
        }


def test_columns_rebuilt_from_a_copy_of_the_names_are_the_maps() -> None:
    # _uncolumn copies a dict keyed by the names and replaces its values: the map _column was
    # given, keys in the same order, the same value objects (and a fresh dict each time, the
    # template untouched); a column with its own keys (another order) as before
    from moeopt.megamoe.packed import _column, _uncolumn

    names = [f"e{i}" for i in range(50)]
    like = dict.fromkeys(names)
    values = [object() for _ in names]
    m = dict(zip(names, values))
    for src in (m, dict(reversed(list(m.items()))), {n: m[n] for n in names[::3]}):
        col = _column(src, names)
        got = _uncolumn(col, names, like)
        assert list(got.items()) == list(src.items())
        assert all(a is b for a, b in zip(got.values(), src.values()))
        assert got is not like
    assert _column(m, names)[0] is None  # (the names' order: the copied case)
    assert list(like.values()) == [None] * len(names)


def test_waits_worked_out_in_columns_are_the_lazy_maps() -> None:
    # pack reads the greedy scheduler's lazy waits in columns (core's wait_rows) instead of
    # building each Wait through the map: every field of every event the map's own (floats to
    # the bit, None where the map has None), on schedules with dependency, resource and
    # semaphore waits
    from moeopt.core.scheduler import _LazyWaits, wait_records, wait_rows
    from moeopt.megamoe.packed import _wait_column

    kinds: set[str] = set()
    results = [
        res
        for name in ("bs72.zipf", "basic_e8.late_aic_aiv1", "pto_m16.zipf.stealing")
        for res in _results(name)
    ]
    for res in results:
        s = res["schedule"]
        names = list(s.start_us)
        assert type(s.waits) is _LazyWaits
        got = wait_rows(s.waits, names)
        assert got is not None
        want = [tuple(s.waits[n]) for n in names]  # (the map's own, one by one)
        assert [tuple(map(repr, row)) for row in got] == [tuple(map(repr, row)) for row in want]
        assert [tuple(map(type, row)) for row in got] == [tuple(map(type, row)) for row in want]
        assert _wait_column(s.waits, names) == (None, got)
        assert _wait_column(dict(s.waits), names) == (None, want)  # (any other map: as it is)
        assert wait_rows(dict(s.waits), names) is None
        assert wait_rows(s.waits, names[::-1]) is None  # (not the graph's order: one by one)
        # the raw columns behind the map: one record per event, and none for any other map
        rec = wait_records(s.waits, names)
        assert rec is not None
        assert list(rec.names) == names
        cols = (rec.pred, rec.res, rec.t_base, rec.sem, rec.ready, rec.start)
        assert [len(c) for c in cols] == [len(names)] * 6
        assert wait_records(dict(s.waits), names) is None
        assert wait_records(s.waits, names[::-1]) is None
        kinds |= {s.waits[n].kind for n in names}
    assert {"dependency", "resource", "semaphore"} <= kinds


_SCHEDULE_WAYS: dict[str, Callable[[Any], object]] = {
    "len": len,
    "eq": lambda s: s == s,
    "repr": repr,
    "vars": lambda s: list(vars(s)),
    "field": lambda s: s.start_us,
    "method": lambda s: s.fingerprint(),
    "property": lambda s: s.makespan_us,
    "class": lambda s: s.__class__,
    "replace": lambda s: type(dataclasses.replace(s, policy="x")),
    "pickle": lambda s: pickle.loads(pickle.dumps(s)).start_us,
    "setattr": lambda s: setattr(s, "policy", "x"),  # (frozen: the same error)
}


@pytest.mark.parametrize("way", sorted(_SCHEDULE_WAYS))
def test_every_way_in_makes_the_schedule(way: str) -> None:
    res = _results("basic_e8.late_aic_aiv1")[0]
    got = _crossed(res)
    s = got["schedule"]
    assert type(s) is not Schedule
    ref = _crossed(res)["schedule"]  # (made before it is asked: a rebuilt schedule's plain maps
    assert ref.start_us  # pickle, the lazy waits of the one made in this process do not)
    assert type(ref) is Schedule
    try:  # what the way does with the schedule made first: the same, or the same error
        want: object = _SCHEDULE_WAYS[way](ref)
    except Exception as exc:
        with pytest.raises(type(exc)):
            _SCHEDULE_WAYS[way](s)
    else:
        assert _SCHEDULE_WAYS[way](s) == want
    assert type(s) is Schedule
    assert s == res["schedule"]
    assert s.semaphore_levels("x") == res["schedule"].semaphore_levels("x")
    # the recorded levels hold for the rebuilt start / end maps, as for the originals
    rec = s.recorded_levels
    assert rec is not None
    assert rec.for_start is s.start_us
    assert rec.for_end is s.end_us
    # the event rows, made afterwards, read the schedule that was made (not a second one)
    assert got["events"]._table.schedule is s  # type: ignore[attr-defined]


def test_schedule_and_rows_unpickled_once_when_read() -> None:
    # nothing of the schedule is unpickled until the schedule or the rows are read; then once,
    # whichever is read first (the rows make the schedule on the way)
    res = _results("bs72.zipf")[0]
    calls: list[int] = []
    real = pickle.loads

    def counting(b: bytes) -> Any:
        calls.append(len(b))
        return real(b)

    packed = pickle.loads(pickle.dumps(pack(res)))
    for first in ("schedule", "events"):
        got = unpack(packed)
        import moeopt.megamoe.packed as pk

        pk.pickle.loads = counting  # type: ignore[assignment]
        try:
            assert calls == []
            if first == "schedule":
                assert got["schedule"].start_us == res["schedule"].start_us
                assert len(calls) == 1
                assert list(got["events"]) == list(res["events"])  # (+1: the graph's columns)
            else:
                assert list(got["events"]) == list(res["events"])
                assert got["schedule"] == res["schedule"]
            assert len(calls) == 2
            assert got["events"]._table.schedule is got["schedule"]  # type: ignore[attr-defined]
        finally:
            pk.pickle.loads = real  # type: ignore[assignment]
        calls.clear()


def test_waits_sent_as_arrays_are_the_rows() -> None:
    # _pack_waits: the greedy scheduler's lazy waits as arrays (any other map: one column per
    # field), made back into rows by _unpack_waits; every field of every event the lazy map's
    # own (floats to the bit, ints as ints, None where it has None), on schedules with
    # dependency, resource and semaphore waits and re-pinned tiles
    from moeopt.megamoe.packed import _pack_waits, _unpack_waits, _wait_column

    kinds: set[str] = set()
    for name in ("bs72.zipf", "basic_e8.late_aic_aiv1", "pto_m16.zipf.stealing", "bs72.late_aic"):
        for res in _results(name):
            s = res["schedule"]
            names = list(s.start_us)
            want = [tuple(s.waits[n]) for n in names]  # (the map's own, one by one)
            for waits, how in ((s.waits, "arrays"), (dict(s.waits), "fields")):
                sent = pickle.loads(pickle.dumps(_pack_waits(waits, names)))
                assert sent[0] == how
                keys, rows = _unpack_waits(sent, names)
                assert keys == _wait_column(waits, names)[0]
                got = list(rows)
                assert [tuple(map(repr, r)) for r in got] == [tuple(map(repr, r)) for r in want]
                assert [tuple(map(type, r)) for r in got] == [tuple(map(type, r)) for r in want]
            kinds |= {s.waits[n].kind for n in names}
            # not over the graph's names in order: the rows, one by one
            assert _pack_waits(s.waits, names[::-1])[0] == "fields"
    assert {"dependency", "resource", "semaphore"} <= kinds
    assert list(_unpack_waits(_pack_waits({}, []), [])[1]) == []


def test_waits_with_an_int_time_are_the_rows() -> None:
    # an int ready or start time: the arrays give the rows' own fields (the subtractions with a
    # float t_base make floats there too; ready is sent as it is); an int t_base would give an
    # int wait there: such waits go as columns of fields
    from moeopt.core.scheduler import _LazyWaits
    from moeopt.megamoe.packed import _pack_waits, _unpack_waits

    s = _results("bs72.zipf")[0]["schedule"]
    names = list(s.start_us)
    lazy = s.waits
    assert type(lazy) is _LazyWaits
    cols = {
        "pred": lazy._pred,
        "res": lazy._res,
        "t_base": lazy._tb,
        "sem": lazy._sem,
        "ready": lazy._ready,
        "start": lazy._start,
    }
    for field, how in (("ready", "arrays"), ("start", "arrays"), ("t_base", "fields")):
        col = list(cols[field])
        k = next(i for i, v in enumerate(col) if v == int(v))
        col[k] = int(col[k])
        got = {**cols, field: col}
        waits = _LazyWaits(
            lazy._cg, got["pred"], got["res"], got["t_base"], got["sem"], got["ready"], got["start"]
        )
        sent = _pack_waits(waits, names)
        assert sent[0] == how
        got = list(_unpack_waits(sent, names)[1])
        want = [tuple(waits[n]) for n in names]
        assert [tuple(map(repr, r)) for r in got] == [tuple(map(repr, r)) for r in want]
        assert [tuple(map(type, r)) for r in got] == [tuple(map(type, r)) for r in want]
