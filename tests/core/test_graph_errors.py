"""Bad graphs are rejected with one clear error that names what is wrong."""

from __future__ import annotations

import math

import pytest

import moeopt as m


def test_cycle_is_named() -> None:
    g = m.EventGraph()
    g.add(m.Event("a", deps={"c": 0.0}))
    g.add(m.Event("b", deps={"a": 0.0}))
    g.add(m.Event("c", deps={"b": 0.0}))
    g.add(m.Event("d", deps={"a": 0.0}))
    with pytest.raises(m.GraphError, match=r"cycle: (a -> b -> c -> a|b -> c -> a -> b|c -> a -> b -> c)"):
        g.validate()


def test_self_dependency() -> None:
    with pytest.raises(m.GraphError, match="'a' depends on itself"):
        m.Event("a", deps={"a": 0.0})


def test_missing_dependency_names_both_events() -> None:
    g = m.EventGraph()
    g.add(m.Event("a", deps={"ghost": 0.0}))
    with pytest.raises(m.GraphError, match=r"event 'a' depends on missing event\(s\) \['ghost'\]"):
        m.schedule(g)


def test_undeclared_semaphore() -> None:
    g = m.EventGraph(semaphores={"slot": 1})
    g.add(m.Event("a", acquires={"slto": 1}))
    with pytest.raises(m.GraphError, match=r"acquires undeclared semaphore 'slto' \(declared: \['slot'\]\)"):
        g.validate()


def test_events_with_equal_semaphore_maps_are_each_reported() -> None:
    # equal acquire / release maps are shared between events (one read-only copy per distinct
    # map): a problem in such a map is still reported once per event that has it
    g = m.EventGraph(semaphores={"slot": 2})
    for name in ("a", "b"):
        g.add(m.Event(name, acquires={"slto": 1}, releases={"slto": 1}))
    for name in ("c", "d"):
        g.add(m.Event(name, acquires={"slot": 3}))
    with pytest.raises(m.GraphError) as info:
        g.validate()
    text = str(info.value)
    for name in ("a", "b"):
        assert f"event {name!r} acquires undeclared semaphore 'slto'" in text
        assert f"event {name!r} releases undeclared semaphore 'slto'" in text
    for name in ("c", "d"):
        assert f"event {name!r} acquires 3 units of semaphore 'slot' whose capacity is 2" in text
    assert m.Event("e", acquires={"slot": 1}).acquires is m.Event("f", acquires={"slot": 1}).acquires


def test_release_without_acquire() -> None:
    g = m.EventGraph(semaphores={"slot": 1})
    g.add(m.Event("a", releases={"slot": 1}))
    with pytest.raises(m.GraphError, match="semaphore 'slot' is released .* but never acquired"):
        g.validate()


def test_acquire_above_capacity() -> None:
    g = m.EventGraph(semaphores={"slot": 2})
    g.add(m.Event("a", acquires={"slot": 3}))
    with pytest.raises(m.GraphError, match="acquires 3 units of semaphore 'slot' whose capacity is 2"):
        g.validate()


def test_undeclared_pool() -> None:
    g = m.EventGraph(pools={"AIC": ["c0.AIC"]})
    g.add(m.Event("a", resources=["AIV:*"]))
    with pytest.raises(m.GraphError, match=r"placeholder 'AIV:\*' but no pool 'AIV' is declared"):
        g.validate()


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, "3"])
def test_bad_duration(bad: object) -> None:
    with pytest.raises(m.GraphError, match="duration_us must be a finite number >= 0"):
        m.Event("a", duration_us=bad)  # type: ignore[arg-type]


def test_negative_lambda() -> None:
    with pytest.raises(m.GraphError, match="sync latency λ on dependency 'p' must be a finite number >= 0, got -0.1"):
        m.Event("a", deps={"p": -0.1})


def test_colocation_with_missing_event() -> None:
    g = m.EventGraph()
    g.add(m.Event("a", resources=["c0.AIV"], colocate_with="nobody"))
    with pytest.raises(m.GraphError, match="'a' is colocated with missing event 'nobody'"):
        g.validate()


def test_colocation_across_fixed_sites() -> None:
    g = m.EventGraph()
    g.add(m.Event("a", resources=["c0.AIC"]))
    g.add(m.Event("b", resources=["c1.AIV"], colocate_with="a"))
    with pytest.raises(m.GraphError, match="fixed resources on different sites"):
        g.validate()


def test_colocation_without_a_common_site() -> None:
    g = m.EventGraph(pools={"AIC": ["c0.AIC"], "AIV": ["c1.AIV"]})
    g.add(m.Event("a", resources=["AIC:*"]))
    g.add(m.Event("b", resources=["AIV:*"], colocate_with="a"))
    with pytest.raises(m.GraphError, match="no site on which all their resources exist"):
        g.validate()


@pytest.mark.parametrize("name", ["AIC", "core0.", ".AIC", "core 0.AIC", "AIC:", "*:AIC"])
def test_resource_name_must_be_site_dot_role(name: str) -> None:
    with pytest.raises(m.GraphError, match=r"is neither '<site>\.<role>'"):
        m.Event("a", resources=[name])


def test_duplicate_event_and_bad_pool_member() -> None:
    g = m.EventGraph()
    g.add(m.Event("a"))
    with pytest.raises(m.GraphError, match="'a' is added twice"):
        g.add(m.Event("a"))
    with pytest.raises(m.GraphError, match="member 'core0' is not a resource name"):
        m.EventGraph(pools={"AIC": ["core0"]})


def test_add_all_is_all_or_nothing() -> None:
    g = m.EventGraph()
    g.add(m.Event("a"))
    # a name already in the graph, a name twice in the batch, something that is not an Event:
    # each is refused and none of the batch is added
    for batch, msg in (
        ([m.Event("b"), m.Event("a")], "'a' is added twice"),
        ([m.Event("b"), m.Event("c"), m.Event("b")], "'b' is added twice"),
        ([m.Event("b"), "c"], "takes an Event, got str"),
    ):
        with pytest.raises(m.GraphError, match=msg):
            g.add_all(batch)  # type: ignore[arg-type]
        assert list(g.events) == ["a"]
    g.add_all([m.Event("b"), m.Event("c")])
    assert list(g.events) == ["a", "b", "c"]


def test_all_problems_are_listed_together() -> None:
    g = m.EventGraph()
    g.add(m.Event("a", deps={"x": 0.0}))
    g.add(m.Event("b", acquires={"nope": 1}))
    with pytest.raises(m.GraphError) as info:
        g.validate()
    assert "missing event(s) ['x']" in str(info.value)
    assert "undeclared semaphore 'nope'" in str(info.value)


def test_graph_is_read_only_through_nx() -> None:
    g = m.EventGraph()
    g.add(m.Event("a", duration_us=1.0))
    g.add(m.Event("b", deps={"a": 0.25}, duration_us=1.0))
    view = g.nx
    assert view.edges["a", "b"]["lam"] == 0.25
    assert view.nodes["b"]["event"].duration_us == 1.0
    with pytest.raises(Exception, match="Frozen graph"):
        view.add_node("c")


@pytest.mark.parametrize(
    ("pools", "resources", "twice"),
    [
        # a fixed core and a pool that contains it: binding the pool's first free member would
        # give the event c0.AIV twice (one core where it asks for two)
        ({"AIV": ["c0.AIV", "c1.AIV"]}, ("c0.AIV", "AIV:*"), "c0.AIV"),
        # two pools sharing c1.AIV: each placeholder binds on its own and both may take it
        ({"A": ["c0.AIV", "c1.AIV"], "B": ["c1.AIV", "c2.AIV"]}, ("A:*", "B:*"), "c1.AIV"),
    ],
)
def test_the_list_scheduler_refuses_an_event_that_could_hold_a_resource_twice(
    pools: dict[str, list[str]], resources: tuple[str, ...], twice: str
) -> None:
    g = m.EventGraph()
    for role, members in pools.items():
        g.add_pool(role, members)
    g.add(m.Event("a", resources=resources, duration_us=1.0))
    with pytest.raises(m.GraphError, match=rf"event 'a': resource '{twice}' could be bound twice"):
        m.schedule(g)


def test_pools_without_a_common_member_still_bind_side_by_side() -> None:
    g = m.EventGraph()
    g.add_pool("A", ["c0.AIV", "c1.AIV"])
    g.add_pool("B", ["c2.AIV"])
    g.add(m.Event("a", resources=("A:*", "B:*"), duration_us=1.0))
    # both pools free at 0: A takes its first member, B its only one
    assert m.schedule(g).resources["a"] == ("c0.AIV", "c2.AIV")
