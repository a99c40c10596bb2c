"""``Event.trusted_many`` makes the very events ``Event.trusted`` makes one by one: every field
equal, of the same type, and the same objects shared (a read-only acquire / release map kept as
it is, equal plain maps sharing one copy, the empty maps), and it refuses a bad duration as
``trusted`` does."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

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


def _copied(maps: list[Any]) -> list[Any]:
    return [dict(m) if isinstance(m, dict) else m for m in maps]


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), 1])
def test_trusted_many_refuses_a_duration_trusted_refuses(bad: Any) -> None:
    with pytest.raises(GraphError, match="duration_us must be a finite float"):
        Event.trusted("b", (), None, None, None, None, bad, None)
    with pytest.raises(GraphError, match="'b': duration_us must be a finite float"):
        Event.trusted_many(
            ["a", "b"], [(), ()], [None, None], [None, None], [None, None], None, [1.0, bad], [None, None]
        )


def test_trusted_many_of_a_subclass_is_trusted_one_by_one() -> None:
    class Sub(Event):
        __slots__ = ()

    (ev,) = Sub.trusted_many(["a"], [("c0.AIC",)], [{"x": 1.0}], [None], [None], None, [2.0], [{"k": 1}])
    assert type(ev) is Sub
    assert (
        _row(ev)[1:] == _row(Event.trusted("a", ("c0.AIC",), {"x": 1.0}, None, None, None, 2.0, {"k": 1}))[1:]
    )
