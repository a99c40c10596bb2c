"""The emitter's early order (``Emitter.assemble(early=...)``) builds the order as a walk of the
anchor tree; the rule it implements is a sort by keys, kept here as the reference it is pinned
to on random emissions (stages, flags, dependencies on earlier events, late dependencies on any
event, some of them emitted later)."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from moeopt.core.events import Event
from moeopt.megamoe.build.emitter import Emitter


def _early_order_by_sort(em: Emitter, specs: list[Event], early: Sequence[str]) -> list[Event]:
    """The rule of ``Emitter._early_order`` as written before it became a tree walk: a staying
    event's key is ``(i,)``; a moved one's is the largest key among its dependencies keyed
    before it (``(-1,)`` without one) plus ``(seq,)``; sort by key."""
    moved = {name for st_ in early for name in em._by_stage.get(st_, ())}
    if not moved:
        return specs
    moved |= {d for name in moved for d in em._events[name].deps if d in em._flags}
    key: dict[str, tuple[int, ...]] = {}
    seq = 0
    for i, sp in enumerate(specs):
        if sp.name in moved:
            deps = [d for d in (*sp.deps, *em._late.get(sp.name, ())) if d in key]
            seq += 1
            key[sp.name] = (*max((key[d] for d in deps), default=(-1,)), seq)
        else:
            key[sp.name] = (i,)
    return sorted(specs, key=lambda sp: key[sp.name])


@st.composite
def emissions(draw: st.DrawFn) -> tuple[Emitter, list[str]]:
    em = Emitter(rank=0, contention=False, unit=1000.0)
    n = draw(st.integers(1, 30))
    names: list[str] = []
    for k in range(n):
        kind = draw(st.sampled_from(["s0", "s1", "s2", "flag"]))
        deps = draw(st.lists(st.sampled_from(names), max_size=3, unique=True)) if names else []
        name = f"e{k}"
        if kind == "flag":
            em.flag(name, deps)
        else:
            em.emit(name, kind, ("c0.AIV0",), dict.fromkeys(deps, 0.5), duration_us=1.0)
        names.append(name)
    for _ in range(draw(st.integers(0, 6))):
        target = draw(st.sampled_from(names))
        extra = draw(st.lists(st.sampled_from(names), max_size=2, unique=True))
        em.add_deps(target, {d: 0.25 for d in extra if d != target})
    early = draw(st.lists(st.sampled_from(["s0", "s1", "s2", "none"]), max_size=2, unique=True))
    return em, early


@settings(max_examples=150, deadline=None)
@given(emissions())
def test_early_order_is_the_sort_by_keys(case: tuple[Emitter, list[str]]) -> None:
    em, early = case
    specs = list(em._events.values())
    got = em._early_order(list(specs), early)
    want = _early_order_by_sort(em, list(specs), early)
    assert [sp.name for sp in got] == [sp.name for sp in want]


@st.composite
def one_anchor_emissions(draw: st.DrawFn) -> tuple[Emitter, list[str]]:
    """Emissions where most early events wait for one event that stays (the write-backs of a
    per-tile combine: the order is then found by one stable sort), with now and then one that
    waits for another early event, for none, or for a late dependency."""
    em = Emitter(rank=0, contention=False, unit=1000.0)
    staying: list[str] = []
    early: list[str] = []
    for k in range(draw(st.integers(1, 30))):
        name = f"e{k}"
        if not staying or draw(st.integers(0, 2)) == 0:
            em.emit(name, "x", ("c0.AIC",), {}, duration_us=1.0)
            staying.append(name)
            continue
        kind = draw(st.integers(0, 9))
        if kind == 0 and early:
            deps = [draw(st.sampled_from(early))]
        elif kind == 1:
            deps = []
        else:
            deps = [draw(st.sampled_from(staying))]
        em.emit(name, "e", ("c0.AIV0",), dict.fromkeys(deps, 0.5), duration_us=1.0)
        early.append(name)
    if early and draw(st.booleans()):
        em.add_deps(draw(st.sampled_from(early)), {draw(st.sampled_from(staying)): 0.25})
    return em, ["e"]


@settings(max_examples=150, deadline=None)
@given(one_anchor_emissions())
def test_early_order_of_one_anchor_stages_is_the_sort_by_keys(case: tuple[Emitter, list[str]]) -> None:
    em, early = case
    specs = list(em._events.values())
    got = em._early_order(list(specs), early)
    want = _early_order_by_sort(em, list(specs), early)
    assert [sp.name for sp in got] == [sp.name for sp in want]


def test_early_order_by_hand() -> None:
    # a, b stay; c (early) depends on a: right after a; d (early) depends on c: after c (its key
    # extends c's); f (early) has no dependency: first of all
    em = Emitter(rank=0, contention=False, unit=1000.0)
    r = ("c0.AIV0",)
    em.emit("a", "x", r, {}, duration_us=1.0)
    em.emit("b", "x", r, {}, duration_us=1.0)
    em.emit("c", "e", r, {"a": 0.0}, duration_us=1.0)
    em.emit("d", "e", r, {"c": 0.0, "a": 0.0}, duration_us=1.0)
    em.emit("f", "e", r, {}, duration_us=1.0)
    graph, _ = em.assemble(early=("e",))
    assert list(graph.events) == ["f", "a", "c", "d", "b"]


@settings(max_examples=150, deadline=None)
@given(emissions())
def test_assemble_is_the_sort_by_keys_with_late_deps_after(case: tuple[Emitter, list[str]]) -> None:
    # assemble remakes the events with late dependencies before it orders (each at its emission
    # position, no pass over every name): the graph is the reference order, each event with its
    # own dependencies followed by its late ones
    em, early = case
    graph, _ = em.assemble(early)
    want = _early_order_by_sort(em, list(em._events.values()), early)
    assert list(graph.events) == [sp.name for sp in want]
    for name, ev in graph.events.items():
        assert list(ev.deps.items()) == list({**em._events[name].deps, **em._late.get(name, {})}.items())
