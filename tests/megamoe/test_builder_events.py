"""The MegaMoE builders make their events with ``Event.trusted``, which skips the constructor's
per-field checks. This holds them to that contract: every event of every golden configuration
(all builders, both communication back-ends, pinned and late-bound pools, V1 core groups)
is rebuilt with the checking constructor, which must accept it and produce the same fields,
with floats where the constructor would have converted."""

from __future__ import annotations

import dataclasses

import pytest

from moeopt.core.events import Event
from moeopt.megamoe.simulate import build_graphs
from moeopt.trust.golden import default_configs


@pytest.mark.parametrize("cfg", default_configs(), ids=lambda c: c.name)
def test_builder_events_pass_the_checking_constructor(cfg) -> None:  # type: ignore[no-untyped-def]
    for rg, _ranks in build_graphs(cfg.scenario()).values():
        for ev in rg.graph.events.values():
            checked = dataclasses.replace(ev)  # every field again, through the checking constructor
            assert type(ev.resources) is tuple
            assert checked.resources == ev.resources
            assert dict(checked.deps) == dict(ev.deps)
            # the checking constructor turns an int λ into a float; the trusted path must get floats
            assert all(type(lam) is float for lam in ev.deps.values()), ev.name
            assert type(ev.duration_us) is float, ev.name
            assert dict(checked.acquires) == dict(ev.acquires)
            assert dict(checked.releases) == dict(ev.releases)
            assert dict(checked.labels) == dict(ev.labels)


def test_trusted_still_refuses_a_bad_duration() -> None:
    # a cost formula can still produce a negative or NaN time: that stays a clear GraphError
    from moeopt.errors import GraphError

    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(GraphError, match="duration_us"):
            Event.trusted("e", duration_us=bad)


def test_trusted_mappings_are_read_only_views() -> None:
    # the mappings are handed over, not copied (the contract: the caller does not change them
    # again); through the event they cannot be changed at all
    ev = Event.trusted("e", deps={"a": 0.5}, acquires={"s": 1}, releases={"s": 1}, labels={"stage": "x"})
    for m in (ev.deps, ev.acquires, ev.releases, ev.labels):
        with pytest.raises(TypeError):
            m["z"] = 1  # type: ignore[index]


def test_trusted_events_are_frozen_dataclass_events() -> None:
    ev = Event.trusted("e", resources=["c0.AIC"], deps={"a": 0.5}, duration_us=1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ev.name = "f"  # type: ignore[misc]
    other = dataclasses.replace(ev, duration_us=2.0)  # goes through the checking constructor
    assert (other.name, other.resources, dict(other.deps), other.duration_us) == ("e", ("c0.AIC",), {"a": 0.5}, 2.0)
