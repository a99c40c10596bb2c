"""``Event.trusted_many`` makes the very events ``Event.trusted`` makes one by one: every field
equal, of the same type, and the same objects shared (a read-only acquire / release map kept as
it is, equal plain maps sharing one copy, the empty maps), and it refuses a bad duration as
``trusted`` does."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moeopt.core.events import Event
from moeopt.errors import GraphError

_FIELDS = ("name", "resources", "deps", "acquires", "releases", "colocate_with", "duration_us", "labels")

_SHARED_ACQ = MappingProxyType({"hbm": 3, "slot": 1})  # one read-only map several events hold


def _row(ev: Event) -> tuple[Any, ...]:
    """An event's fields with their types (and their items' types for the maps)."""
    out: list[Any] = [type(ev)]
    for f in _FIELDS:
        v = getattr(ev, f)
        out += [v, type(v)]
        if f in ("deps", "acquires", "releases", "labels"):
            out.append(tuple((k, val, type(val)) for k, val in v.items()))
    return tuple(out)


def _sharing(evs: list[Event]) -> list[tuple[int, ...]]:
    """Which field objects the events share: each object numbered in order of first use."""
    ids: dict[int, int] = {}
    return [
        tuple(ids.setdefault(id(getattr(ev, f)), len(ids)) for f in (*_FIELDS[1:5], "labels")) for ev in evs
    ]


_units = st.one_of(
    st.none(),
    st.just({}),
    st.just(_SHARED_ACQ),
    st.dictionaries(st.sampled_from(["hbm", "gm_l1", "c0.slot"]), st.integers(1, 4), max_size=2),
)


@st.composite
def columns(draw: st.DrawFn) -> tuple[list[Any], ...]:
    n = draw(st.integers(0, 12))
    names = [f"ev{i}" for i in range(n)]
    res = draw(
        st.lists(st.sampled_from([(), ("c0.AIC",), ["c1.AIC", "c1.AIV"], ("AIC:*",)]), min_size=n, max_size=n)
    )
    deps = [
        draw(
            st.one_of(
                st.none(),
                st.just({}),
                st.dictionaries(st.sampled_from(names[:i] or ["x"]), st.floats(0, 5), max_size=2),
            )
        )
        for i in range(n)
    ]
    acq = draw(st.lists(_units, min_size=n, max_size=n))
    rel = draw(st.lists(_units, min_size=n, max_size=n))
    coloc = draw(st.lists(st.sampled_from([None, "x"]), min_size=n, max_size=n))
    durs = draw(st.lists(st.floats(0, 1e6), min_size=n, max_size=n))
    labels = [
        draw(
            st.one_of(
                st.none(), st.just({}), st.fixed_dictionaries({"stage": st.just("s"), "tile": st.just(i)})
            )
        )
        for i in range(n)
    ]
    return names, res, deps, acq, rel, coloc, durs, labels


_OTHER_ACQ = MappingProxyType({"gm_l1": 2})


@settings(max_examples=60, deadline=None)
@given(columns(), st.booleans())
def test_trusted_many_makes_trusteds_events(cols: tuple[list[Any], ...], no_coloc: bool) -> None:
    names, res, deps, acq, rel, coloc, durs, labels = cols
    if no_coloc:
        coloc = [None] * len(names)
    # each side gets its own copies of the handed-over dicts (trusted wraps them, not copies)
    one = [
        Event.trusted(*args)
        for args in zip(names, res, _copied(deps), acq, rel, coloc, durs, _copied(labels))
    ]
    many = Event.trusted_many(
        names, res, _copied(deps), acq, rel, None if no_coloc else coloc, durs, _copied(labels)
    )
    assert list(map(_row, many)) == list(map(_row, one))
    assert _sharing(many) == _sharing(one)
    # a read-only map handed in is kept as it is, a plain one becomes the shared copy trusted uses
    for ev, a in zip(many, acq):
        if a is _SHARED_ACQ:
            assert ev.acquires is _SHARED_ACQ


def _bulk_columns(n: int) -> list[list[Any]]:
    """Columns trusted_many converts by whole-column passes (the builders' GMM runs): every
    resource list a tuple, every dependency and label map non-empty, every acquire / release map
    a non-empty read-only one, every duration a plain float."""
    return [
        [f"ev{i}" for i in range(n)],
        [("c0.AIC",), ("c1.AIC", "c1.AIV")] * (n // 2),
        [{"x": float(i)} for i in range(n)],
        [_SHARED_ACQ, _OTHER_ACQ] * (n // 2),
        [_OTHER_ACQ, _SHARED_ACQ] * (n // 2),
        [None, "x"] * (n // 2),
        [float(i) for i in range(n)],
        [{"stage": "s", "tile": i} for i in range(n)],
    ]


# per column, the entries that trusted converts one by one (one of them sends the whole column to
# the entry-wise conversion)
_ODD = {
    1: [["c2.AIC"]],
    2: [None, {}],
    3: [None, {}, MappingProxyType({}), {"hbm": 1}],
    4: [None, {}, MappingProxyType({}), {"hbm": 1}],
    7: [None, {}],
}


@pytest.mark.parametrize(("col", "odd"), [(c, v) for c, vs in _ODD.items() for v in vs] + [(0, None)])
@pytest.mark.parametrize("at", [0, 3])
def test_trusted_many_converts_whole_columns_as_trusted(col: int, odd: Any, at: int) -> None:
    # (col 0: no odd entry, every column taken by its whole-column pass)
    names, res, deps, acq, rel, coloc, durs, labels = cols = _bulk_columns(4)
    if col:
        cols[col][at] = odd
    one = [
        Event.trusted(*args)
        for args in zip(names, res, _copied(deps), acq, rel, coloc, durs, _copied(labels))
    ]
    many = Event.trusted_many(names, res, _copied(deps), acq, rel, coloc, durs, _copied(labels))
    assert list(map(_row, many)) == list(map(_row, one))
    assert _sharing(many) == _sharing(one)
    for ev, ref in zip(many, one):  # an empty map is the one shared empty map, as trusted's
        for f in ("deps", "acquires", "releases", "labels"):
            if not getattr(ref, f):
                assert getattr(ev, f) is getattr(ref, f)


_OTHER_ACQ = MappingProxyType({"gm_l1": 2})


def _copied(maps: list[Any]) -> list[Any]:
    return [dict(m) if isinstance(m, dict) else m for m in maps]


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), 1, np.float64(1.0)])
@pytest.mark.parametrize("at", [0, 1, 2])
def test_trusted_many_refuses_a_duration_trusted_refuses(bad: Any, at: int) -> None:
    # the durations are first checked as a whole (types, sum, minimum): a NaN anywhere, before or
    # after an ordinary value, an infinity, a negative, or a non-float still raises, by its name
    with pytest.raises(GraphError, match="duration_us must be a finite float"):
        Event.trusted("b", (), None, None, None, None, bad, None)
    durs = [1.0, 2.0, 0.0]
    durs[at] = bad
    with pytest.raises(GraphError, match=f"'e{at}': duration_us must be a finite float"):
        Event.trusted_many(
            ["e0", "e1", "e2"], [()] * 3, [None] * 3, [None] * 3, [None] * 3, None, durs, [None] * 3
        )


def test_trusted_many_takes_durations_whose_sum_overflows() -> None:
    # each finite, their float sum infinite: the whole-column test fails, the one-by-one check
    # decides (and takes them)
    big = [1e308, 1e308]
    evs = Event.trusted_many(["a", "b"], [(), ()], [None] * 2, [None] * 2, [None] * 2, None, big, [None] * 2)
    assert [ev.duration_us for ev in evs] == big


def test_trusted_many_of_a_subclass_is_trusted_one_by_one() -> None:
    class Sub(Event):
        __slots__ = ()

    (ev,) = Sub.trusted_many(["a"], [("c0.AIC",)], [{"x": 1.0}], [None], [None], None, [2.0], [{"k": 1}])
    assert type(ev) is Sub
    assert (
        _row(ev)[1:] == _row(Event.trusted("a", ("c0.AIC",), {"x": 1.0}, None, None, None, 2.0, {"k": 1}))[1:]
    )


def _plain_columns(n: int) -> list[list[Any]]:
    """Columns under ``plain``'s contract: tuples, read-only maps (some empty), floats."""
    empty: MappingProxyType[str, int] = MappingProxyType({})
    return [
        [f"ev{i}" for i in range(n)],
        [("c0.AIC",), ("c1.AIC", "c1.AIV"), ()] * (n // 3),
        [{"x": float(i)} if i % 2 else {} for i in range(n)],
        [_SHARED_ACQ, empty, _OTHER_ACQ] * (n // 3),
        [empty, _OTHER_ACQ, _SHARED_ACQ] * (n // 3),
        [None, "x", None] * (n // 3),
        [float(i) for i in range(n)],
        [{"stage": "s", "tile": i} if i % 3 else {} for i in range(n)],
    ]


@pytest.mark.parametrize("empty_maps", [False, True])
def test_plain_makes_the_events_the_checked_path_makes(empty_maps: bool) -> None:
    # plain only skips type tests the caller vouches for: every field, type and shared object
    # is the checked path's (and trusted's, one by one), an empty read-only map becoming the
    # one shared empty map as there
    names, res, deps, acq, rel, coloc, durs, labels = _plain_columns(6)
    if not empty_maps:
        acq = [_SHARED_ACQ] * 6
        rel = [_OTHER_ACQ] * 6
    checked = Event.trusted_many(names, res, _copied(deps), acq, rel, coloc, durs, _copied(labels))
    plain = Event.trusted_many(names, res, _copied(deps), acq, rel, coloc, durs, _copied(labels), plain=True)
    one = [Event.trusted(*a) for a in zip(names, res, _copied(deps), acq, rel, coloc, durs, _copied(labels))]
    assert list(map(_row, plain)) == list(map(_row, checked)) == list(map(_row, one))
    assert _sharing(plain) == _sharing(checked) == _sharing(one)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
@pytest.mark.parametrize("at", [0, 2])
def test_plain_still_refuses_a_bad_float_duration(bad: float, at: int) -> None:
    durs = [1.0, 2.0, 0.0]
    durs[at] = bad
    with pytest.raises(GraphError, match=f"'e{at}': duration_us must be a finite float"):
        Event.trusted_many(
            ["e0", "e1", "e2"], [()] * 3, [None] * 3, [None] * 3, [None] * 3, None, durs, [None] * 3, plain=True
        )
