"""The schedule's per-event maps (``start_us``, ``end_us``, ``resources``) are built from a copy
of the compiled graph's name index (``scheduler._by_name``): each must be exactly
``dict(zip(cg.names, values))`` (same keys in the same order, the very value objects), must
leave the index itself untouched, and must fall back to ``dict(zip(...))`` for an index it
cannot copy as a table of exactly the names. ``order`` is the names at the commit order's
indices (``scheduler._names_at``, one ``itemgetter`` call, with its one- and no-item cases)."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator, Mapping

import moeopt as m
from moeopt.core.scheduler import _by_name, _names_at
from moeopt.synthetic import layered_graph


class _Plain(Mapping[str, int]):
    """A read-only mapping that is not a dict (no ``copy``): the fallback path."""

    def __init__(self, d: Mapping[str, int]) -> None:
        self._d = dict(d)

    def __getitem__(self, k: str) -> int:
        return self._d[k]

    def __iter__(self) -> Iterator[str]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)


def _check(got: dict[str, object], names: tuple[str, ...], vals: list[object]) -> None:
    assert type(got) is dict
    assert list(got) == list(names)  # the names, in graph order
    assert len(got) == len(vals)
    assert all(a is b for a, b in zip(got.values(), vals, strict=True))  # the very objects


def test_by_name_is_dict_zip_and_leaves_the_index_alone() -> None:
    g = layered_graph(300, seed=2)
    cg = g.compiled()
    vals: list[object] = [object() for _ in cg.names]  # distinct objects: identity is checked
    _check(_by_name(cg, vals), cg.names, vals)
    # the index still maps each name to its position (the copy, not the index, was updated)
    assert list(cg.index.items()) == [(n, i) for i, n in enumerate(cg.names)]
    # fallbacks: an index that is no dict, and one whose table is not exactly the names (a
    # name missing: a copy updated with zip would keep a stale entry or miss one)
    plain = dataclasses.replace(cg, index=_Plain(cg.index))
    _check(_by_name(plain, vals), cg.names, vals)
    short = dict(cg.index)
    del short[cg.names[7]]
    _check(_by_name(dataclasses.replace(cg, index=short), vals), cg.names, vals)
    # as many entries as names, one of them foreign (found only once the names are in)
    other = dict(short)
    other["not an event"] = 7
    _check(_by_name(dataclasses.replace(cg, index=other), vals), cg.names, vals)
    _check(_by_name(cg, iter(vals)), cg.names, vals)  # values from an iterator, read once


def test_schedule_maps_in_graph_order_with_the_schedules_values() -> None:
    for late in (False, True):
        g = layered_graph(400, seed=5, late_bind_tiles=late)
        s = m.schedule(g, "earliest_start")
        names = list(g.events)
        for mp in (s.start_us, s.end_us, s.resources):
            assert type(mp) is dict
            assert list(mp) == names
        # the values agree with the trace (start, end, binding of every event)
        rows = {e: (a, b, r) for e, a, b, r in s.trace()}
        assert all(rows[e] == (s.start_us[e], s.end_us[e], "+".join(s.resources[e])) for e in names)
        # the recorded levels are still tied to these very maps
        assert s.recorded_levels is not None
        assert s.recorded_levels.for_start is s.start_us
        assert s.recorded_levels.for_end is s.end_us


def test_names_at_every_length() -> None:
    names = tuple(f"e{i}" for i in range(50))
    shuffled = list(range(50))
    random.Random(4).shuffle(shuffled)
    for at in ([], [3], [3, 1], [7, 7], shuffled):
        got = _names_at(names, at)
        assert type(got) is tuple
        assert got == tuple(names[i] for i in at)


def test_schedule_order_is_the_commit_order_by_name() -> None:
    g = layered_graph(300, seed=6)
    s = m.schedule(g, "earliest_start")
    assert type(s.order) is tuple
    assert sorted(s.order) == sorted(g.events)
    # earliest_start commits in order of start (ties by index): the order's starts never fall
    starts = [s.start_us[e] for e in s.order]
    assert starts == sorted(starts)
