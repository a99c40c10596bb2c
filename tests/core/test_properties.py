"""Property tests of the scheduler itself on random graphs: it matches a naive re-implementation
of the greedy rule on MegaMoE-shaped graphs, and the semaphore levels it records are the
schedule's own. Each policy's contract (valid, bounded, deterministic, blind to labels, unchanged
by normalisation, equal to the naive scheduler on random graphs) is checked through
moeopt.testing.PolicyContract in test_policy_contract.py."""

from __future__ import annotations

import dataclasses
from collections import defaultdict

import pytest
from hypothesis import HealthCheck, given, settings

import moeopt as m
from moeopt.core.policies import BUILTIN_POLICIES, make_policy
from moeopt.testing import event_graphs, naive_schedule

KEYED = [p for p in BUILTIN_POLICIES if not make_policy(p).wants_view]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("late", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_scheduler_matches_naive_on_small_megamoe_shaped_graphs(late: bool, seed: int) -> None:
    # contention on pools, colocated groups, per-core slots and a shared bandwidth semaphore:
    # the gates and waiter queues of the fast scheduler must not change a single decision
    from moeopt.synthetic import layered_graph

    g = layered_graph(70, seed=seed, sites=3, bandwidth_units=4, late_bind_tiles=late)
    for policy in KEYED:
        s = m.schedule(g, policy)
        ref = naive_schedule(g, make_policy(policy))
        for name, (start, end, bound) in ref.items():
            assert s.start_us[name] == pytest.approx(start, abs=1e-9), (policy, name)
            assert s.end_us[name] == pytest.approx(end, abs=1e-9), (policy, name)
            assert s.resources[name] == bound, (policy, name)


@pytest.mark.slow  # the naive scheduler takes minutes on 300 events
def test_scheduler_matches_naive_on_late_bound_graphs_with_starved_loads() -> None:
    # 300 events on late-bound tiles: enough loads compete for the L1 slots that many wait,
    # starved, for a slot no committed release has given back yet, and are woken by releases
    # through their group's token. A token keyed too late (or a woken load keyed by a bound a
    # later release invalidates) changed ties between equal starts on these graphs under
    # work_conserving_critical_path (63 of 300 events moved on this seed); the 70-event graphs
    # above did not show it
    from moeopt.synthetic import layered_graph

    g = layered_graph(300, seed=4, sites=3, bandwidth_units=4, late_bind_tiles=True)
    for policy in KEYED:
        s = m.schedule(g, policy)
        ref = naive_schedule(g, make_policy(policy))
        for name, (start, end, bound) in ref.items():
            assert s.start_us[name] == pytest.approx(start, abs=1e-9), (policy, name)
            assert s.end_us[name] == pytest.approx(end, abs=1e-9), (policy, name)
            assert s.resources[name] == bound, (policy, name)


def _levels_from_times(g: m.EventGraph, s: m.Schedule, sem: str) -> tuple[list[float], list[int]]:
    # the semaphore's free units rebuilt from the events and the schedule's times alone: every
    # acquire at its event's start, every release at its end, the changes at one time summed
    delta: dict[float, int] = defaultdict(int)
    for ev in g:
        if sem in ev.acquires:
            delta[s.start_us[ev.name]] -= ev.acquires[sem]
        if sem in ev.releases:
            delta[s.end_us[ev.name]] += ev.releases[sem]
    level = g.semaphores[sem]
    times, levels = [], []
    for t in sorted(delta):
        level += delta[t]
        times.append(t)
        levels.append(level)
    return times, levels


@SETTINGS
@given(event_graphs())
def test_recorded_semaphore_levels_match_the_schedule(g: m.EventGraph) -> None:
    # the analyses read the levels the scheduler recorded instead of rebuilding them; they must
    # be exactly the curve that the schedule's own start and end times give
    for policy, normalize in (("earliest_start", False), ("lookahead_one_step", False), ("earliest_start", True)):
        try:
            s = m.schedule(g, policy, normalize=normalize)
        except m.SchedulingError:
            continue
        for sem in g.semaphores:
            got = s.semaphore_levels(sem)
            if got is None:
                # only when normalisation left some semaphore's uses out of the scheduling
                assert normalize
                continue
            assert (list(got[0]), list(got[1])) == _levels_from_times(g, s, sem)
        if g.semaphores and s.start_us:
            # a copy with other times no longer claims them
            moved = {name: t + 1.0 for name, t in s.start_us.items()}
            assert dataclasses.replace(s, start_us=moved).semaphore_levels(next(iter(g.semaphores))) is None
