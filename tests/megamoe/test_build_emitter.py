"""The builder's emitter and composition: the contracts the stage modules (and the next
implementation) rely on. Expected values are worked out by hand from the rules in the docstrings
of ``moeopt/megamoe/build/emitter.py`` and ``sync.py``."""

from __future__ import annotations

import dataclasses

import pytest

from moeopt.megamoe.build import BASELINE, build_rank, compose
from moeopt.megamoe.build.emitter import Emitter
from moeopt.megamoe.build.sync import hardware_flags
from moeopt.megamoe.routing import counts_matrix


def test_chain_on_adds_the_program_order_edge_only_where_it_is_new() -> None:
    em = Emitter(rank=0, contention=False, unit=1000.0)
    r = ("c0.AIV0",)
    em.emit("a", "s", r, {}, duration_us=1.0, chain_on=r)
    em.emit("b", "s", r, {}, duration_us=1.0, chain_on=r)  # nothing to wait for: chained to a
    em.emit("c", "s", r, {"b": 1.5}, duration_us=1.0, chain_on=r)  # already waits for b
    # the program-order edge sits before the sync protocol's edges
    em.emit("d", "s", r, {"x": 0.25}, duration_us=1.0, chain_on=r, sync_deps={"f": 2.0})
    graph, _ = em.assemble()
    assert dict(graph.events["b"].deps) == {"a": 0.0}
    assert dict(graph.events["c"].deps) == {"b": 1.5}  # λ of the data edge kept, no second edge
    assert list(graph.events["d"].deps.items()) == [("x", 0.25), ("c", 0.0), ("f", 2.0)]
    assert em.chain_edges == {("a", "b"), ("c", "d")}
    assert em.stage_events("s") == ["a", "b", "c", "d"]


def test_chain_gives_program_order_after_the_fact_in_the_order_given() -> None:
    # emitted in stage order (a, b, c, d) without chain_on; the orchestration's order is a, c, then
    # the two-chunk unit (b, d): c waits for a, b (the unit's first) for c, and a later chain_on
    # emission follows d (the unit's last)
    em = Emitter(rank=0, contention=False, unit=1000.0)
    r = ("c0.AIV1",)
    for name in ("a", "b", "c"):
        em.emit(name, "s", r, {}, duration_us=1.0)
    em.emit("d", "s", r, {"b": 0.0}, duration_us=1.0)
    em.chain("c0.AIV1", [("a", "a"), ("c", "c"), ("b", "d")])
    em.emit("e", "s", r, {}, duration_us=1.0, chain_on=r)
    graph, _ = em.assemble()
    assert dict(graph.events["c"].deps) == {"a": 0.0}
    assert dict(graph.events["b"].deps) == {"c": 0.0}
    assert dict(graph.events["a"].deps) == {}  # the first unit keeps what it was emitted with
    assert dict(graph.events["e"].deps) == {"d": 0.0}
    assert em.chain_edges == {("a", "c"), ("c", "b"), ("d", "e")}
    with pytest.raises(AssertionError, match="no event 'x'"):
        em.chain("c0.AIV1", [("x", "x")])


def test_add_deps_appends_after_the_event_s_own_and_keeps_its_place() -> None:
    em = Emitter(rank=0, contention=False, unit=1000.0)
    em.emit("a", "s", ("c0.AIV0",), {}, duration_us=1.0)
    em.emit("b", "s", ("c0.AIV0",), {"a": 0.5}, duration_us=1.0)
    fl = em.flag("late", ["a"])
    em.add_deps("b", {fl: 0.7})
    em.add_deps("b", {"a": 0.9})  # a name added again: first place, last λ
    graph, _ = em.assemble()
    assert list(graph.events) == ["a", "b", "late"]
    assert list(graph.events["b"].deps.items()) == [("a", 0.9), ("late", 0.7)]
    assert em.chain_edges == set()
    with pytest.raises(AssertionError, match="no event 'nope'"):
        em.add_deps("nope", {"a": 0.0})


def test_an_event_emitted_twice_is_refused() -> None:
    em = Emitter(rank=0, contention=False, unit=1000.0)
    em.flag("f", [])
    with pytest.raises(AssertionError, match="twice"):
        em.flag("f", [])


def test_a_semaphore_that_covers_its_demand_is_left_out() -> None:
    # two events take one unit each: capacity 2 can never bind (dropped), capacity 1 can (kept)
    for cap, dropped in ((2, ["s"]), (1, [])):
        em = Emitter(rank=0, contention=False, unit=1000.0)
        em.semaphore("s", cap)
        acq, rel = em.hold_maps((), take="s", give="s")
        em.emit("a", None, ("c0.AIV0",), {}, acq, rel, 1.0)
        em.emit("b", None, ("c1.AIV0",), {}, acq, rel, 1.0)
        graph, left_out = em.assemble()
        assert left_out == dropped
        assert ("s" in graph.semaphores) == (not dropped)
        assert ("s" in graph.events["a"].acquires) == (not dropped)


def test_the_rank_barrier_latency_comes_from_the_sync_protocol_only(bs72) -> None:  # type: ignore[no-untyped-def]
    """An implementation that changes one latency of the protocol changes exactly the edges that
    carry it: with no rank barrier, only the tail's wait on ``combine_done`` moves (to λ = 0)."""
    cfg, w = bs72.config, bs72.workload
    counts = counts_matrix(w)
    base = build_rank(cfg, w.tokens, w.topk, w.world, counts, 0)
    no_barrier = dataclasses.replace(
        BASELINE, sync=lambda c: dataclasses.replace(hardware_flags(c), rank_barrier_us=0.0)
    )
    e = counts.shape[1] // w.world
    other = compose(no_barrier, cfg, w.tokens, w.topk, w.world, counts[:, :e], 0, 0)
    assert cfg.c("cross_rank_flag_us") > 0  # so that the change is visible
    changed = [n for n, ev in base.graph.events.items() if dict(ev.deps) != dict(other.graph.events[n].deps)]
    assert changed == ["tail"]
    assert base.graph.events["tail"].deps["combine_done"] == cfg.c("cross_rank_flag_us")
    assert other.graph.events["tail"].deps["combine_done"] == 0.0
    assert list(base.graph.events) == list(other.graph.events)


def test_a_channel_of_paths_admits_every_path_at_full_rate() -> None:
    # 24 cube cores, each path 51,900 B/µs, unit 1000 B/µs: a tile loading at the path's full rate
    # holds ceil(51.9) = 52 units, so the 24 paths need 24 x 52 = 1248 units. Rounding the aggregate
    # down gives floor(1,245,600 / 1000) = 1245: the 24th core could never load beside the others.
    em = Emitter(0, contention=True, unit=1000.0)
    em.bandwidth("paths", 24 * 51_900.0, paths=24)
    full_rate = em.units("paths", 51_900.0, 1.0, count=False)
    assert full_rate == 52
    assert em.capacity("paths") == 24 * full_rate
    # a channel that is one shared pipe keeps its rate rounded down (never more than it has)
    em.bandwidth("pipe", 24 * 51_900.0)
    assert em.capacity("pipe") == 1245


def test_a_run_records_its_chain_edges_as_a_set_made_when_read() -> None:
    em = Emitter(rank=0, contention=False, unit=1000.0)
    a, b = ("c0.AIC",), ("c1.AIC",)
    em.emit("x", "s", a, {}, duration_us=1.0, chain_on=a)
    # a run on two cores: t0 follows x on c0 (a new edge); t1 is c1's first event (no edge);
    # t2 follows t0 on c0 but already waits for it (no new edge); t3 follows t1 on c1
    em.emit_run(
        "g",
        ["t0", "t1", "t2", "t3"],
        [a, b, a, b],
        [{}, {}, {"t0": 0.5}, {}],
        [{}] * 4,
        [{}] * 4,
        [1.0] * 4,
        [{}] * 4,
        chain=True,
    )
    em.chain_edges.add(("p", "q"))  # (as Emitter.chain records one)
    want = {("x", "t0"), ("t1", "t3"), ("p", "q")}
    # the edges' two ends as columns, read before the set is made (the runs' columns) ...
    first, second = em.chain_edges.endpoints()
    assert sorted(zip(first, second)) == sorted(want)
    assert em.chain_edges == want
    # ... and after (the set)
    first, second = em.chain_edges.endpoints()
    assert sorted(zip(first, second)) == sorted(want)
    assert len(em.chain_edges) == 3
    assert ("t0", "t2") not in em.chain_edges
    assert ("x", "t0") in em.chain_edges
    assert sorted(em.chain_edges) == sorted(want)  # (read again: the same pairs)
    graph, _ = em.assemble()
    assert dict(graph.events["t2"].deps) == {"t0": 0.5}  # λ of the data edge kept
    assert dict(graph.events["t3"].deps) == {"t1": 0.0}
