"""The unranked keyed scheduler (``earliest_start``) keys its heap by ``(start, index)`` and its
starved-group tokens by ``(F, event, group, version)``; a policy with a ``rank`` of its own keys
by ``(before, start, after, index)``. A rank of ``(0, 0)`` for every event orders the four-item
keys exactly as the two-item ones, so such a policy must give the very same schedule, decision
for decision (commit order and waits included): the four-item path is the reference here."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

import moeopt as m
from moeopt.core.policies import EarliestStart
from moeopt.errors import SchedulingError
from moeopt.testing import event_graphs


class _RankedZero(EarliestStart):
    """earliest_start with ``rank`` overridden (the same (0, 0)): the four-item key path."""

    def rank(self, i: int) -> tuple[float, float]:
        return (0.0, 0.0)


def _same(g: m.EventGraph) -> None:
    try:
        a = m.schedule(g, "earliest_start")
    except SchedulingError as err:  # (a deadlock: units never given back) the same one
        with pytest.raises(SchedulingError) as ref:
            m.schedule(g, _RankedZero())
        assert str(ref.value) == str(err)
        return
    b = m.schedule(g, _RankedZero())
    assert a.start_us == b.start_us
    assert a.end_us == b.end_us
    assert a.resources == b.resources
    assert a.order == b.order
    assert dict(a.waits) == dict(b.waits)


@pytest.mark.parametrize("late", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_plain_keys_schedule_as_the_ranked_keys_do(late: bool, seed: int) -> None:
    # late-bound tiles starve loads of L1 slots (group tokens); pinned ones fill class gates
    from moeopt.synthetic import layered_graph

    _same(layered_graph(600, seed=seed, sites=3, bandwidth_units=4, late_bind_tiles=late))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(event_graphs())
def test_plain_keys_schedule_as_the_ranked_keys_do_on_random_graphs(g: m.EventGraph) -> None:
    _same(g)
