"""Property tests on random graphs: every policy's schedule is valid, bounded below by the
longest path and the busiest resource, deterministic, identical to a naive re-implementation of
the greedy rule, and unchanged by semaphore normalisation."""

from __future__ import annotations

import dataclasses
from collections import defaultdict

import pytest
from hypothesis import HealthCheck, given, settings

import moeopt as m
from moeopt.core.events import placeholder_role
from moeopt.core.policies import BUILTIN_POLICIES

from .naive import naive_schedule
from .strategies import event_graphs

KEYED = [p for p in BUILTIN_POLICIES if p != "lookahead_one_step"]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _schedule_or_deadlock(g: m.EventGraph, policy: str | m.Policy) -> m.Schedule | None:
    try:
        return m.schedule(g, policy)
    except m.SchedulingError as exc:
        assert "deadlock" in str(exc)
        return None


def _longest_path(g: m.EventGraph) -> float:
    finish: dict[str, float] = {}
    for name in g.compiled().topo:
        ev = g.compiled().events[name]
        start = max((finish[p] + lam for p, lam in ev.deps.items()), default=0.0)
        finish[ev.name] = start + ev.duration_us
    return max(finish.values(), default=0.0)


def _busiest_load(g: m.EventGraph) -> float:
    # a fixed resource runs its events one after another; a pool of k members runs at most k
    # at a time, and its members also carry the events pinned to them
    load: dict[str, float] = defaultdict(float)
    for ev in g:
        for r in ev.resources:
            if placeholder_role(r) is None:
                load[r] += ev.duration_us
    best = max(load.values(), default=0.0)
    for role, members in g.pools.items():
        total = sum(ev.duration_us for ev in g if f"{role}:*" in ev.resources)
        total += sum(load[r] for r in members)
        best = max(best, total / len(members))
    return best


@SETTINGS
@given(event_graphs())
def test_every_policy_gives_a_valid_bounded_deterministic_schedule(g: m.EventGraph) -> None:
    for policy in BUILTIN_POLICIES:
        s = _schedule_or_deadlock(g, policy)
        if s is None:
            continue
        m.validate_schedule(g, s)
        assert s.makespan_us >= _longest_path(g) - 1e-9
        assert s.makespan_us >= _busiest_load(g) - 1e-9
        again = m.schedule(g, policy)
        assert again.fingerprint() == s.fingerprint()


@SETTINGS
@given(event_graphs(max_events=7))
def test_scheduler_matches_a_naive_reimplementation(g: m.EventGraph) -> None:
    from moeopt.core.policies import make_policy

    for policy in KEYED:
        s = _schedule_or_deadlock(g, policy)
        try:
            ref = naive_schedule(g, make_policy(policy))
        except m.SchedulingError:
            assert s is None
            continue
        assert s is not None
        for name, (start, end, bound) in ref.items():
            assert s.start_us[name] == pytest.approx(start, abs=1e-9), (policy, name)
            assert s.end_us[name] == pytest.approx(end, abs=1e-9), (policy, name)
            assert s.resources[name] == bound, (policy, name)


@SETTINGS
@given(event_graphs())
def test_semaphore_normalisation_never_changes_a_schedule(g: m.EventGraph) -> None:
    for policy in KEYED:
        try:
            plain = m.schedule(g, policy, normalize=False)
        except m.SchedulingError:
            continue
        assert m.schedule(g, policy, normalize=True).fingerprint() == plain.fingerprint()


@SETTINGS
@given(event_graphs(semaphores=False))
def test_labels_do_not_change_the_schedule(g: m.EventGraph) -> None:
    import dataclasses

    relabelled = g.copy_with(events=[dataclasses.replace(ev, labels={"other": 1}) for ev in g])
    for policy in ("earliest_start", "critical_path_first", "work_conserving_critical_path"):
        assert m.schedule(g, policy).fingerprint() == m.schedule(relabelled, policy).fingerprint()


@pytest.mark.parametrize("late", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_scheduler_matches_naive_on_small_megamoe_shaped_graphs(late: bool, seed: int) -> None:
    # contention on pools, colocated groups, per-core slots and a shared bandwidth semaphore:
    # the gates and waiter queues of the fast scheduler must not change a single decision
    from moeopt.core.policies import make_policy
    from moeopt.synthetic import layered_graph

    g = layered_graph(70, seed=seed, sites=3, bandwidth_units=4, late_bind_tiles=late)
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
