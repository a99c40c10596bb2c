"""Semaphore normalisation drops exactly the semaphores the theorem proves non-binding."""

from __future__ import annotations

import moeopt as m
from moeopt.core.normalize import nonbinding_semaphores
from moeopt.synthetic import layered_graph


def _names(g: m.EventGraph) -> set[str]:
    cg = g.compiled()
    return {cg.sem_names[s] for s in nonbinding_semaphores(cg)}


def test_capacity_covering_all_demand_is_dropped() -> None:
    # wide: capacity 3 >= total demand 1 + 2 -> never binds. tight: capacity 2 < 1 + 2, and the
    # two acquirers are unrelated, so neither the cheap nor the DAG criterion holds.
    g = m.EventGraph(semaphores={"wide": 3, "tight": 2})
    g.add(m.Event("a", acquires={"wide": 1, "tight": 1}, releases={"wide": 1, "tight": 1}, duration_us=1.0))
    g.add(m.Event("b", acquires={"wide": 2, "tight": 2}, releases={"wide": 2, "tight": 2}, duration_us=1.0))
    assert _names(g) == {"wide"}


def test_releases_by_ancestors_make_a_chain_non_binding() -> None:
    # One slot used by a chain p1 -> c1 -> p2 -> c2: p2's acquire is preceded in the DAG by c1's
    # release, so at p2's start cap + released-by-ancestors - acquired-by-non-descendants
    # = 1 + 1 - (p1 + p2 = 2) = 0 >= 0; for p1: 1 + 0 - (p1 + p2) = -1 < 0 ... but p2 is a
    # descendant of p1, so only p1 counts: 1 - 1 = 0 >= 0. The theorem holds: drop it.
    g = m.EventGraph(semaphores={"slot": 1})
    g.add(m.Event("p1", acquires={"slot": 1}, duration_us=1.0))
    g.add(m.Event("c1", deps={"p1": 0.0}, releases={"slot": 1}, duration_us=1.0))
    g.add(m.Event("p2", deps={"c1": 0.0}, acquires={"slot": 1}, duration_us=1.0))
    g.add(m.Event("c2", deps={"p2": 0.0}, releases={"slot": 1}, duration_us=1.0))
    assert _names(g) == {"slot"}
    # p2 no longer waits for c1: both producers may hold the slot at once -> it binds
    g2 = g.copy_with(events=[ev if ev.name != "p2" else m.Event("p2", acquires={"slot": 1}, duration_us=1.0) for ev in g])
    assert _names(g2) == set()


def test_schedules_are_bit_identical_with_and_without_normalisation() -> None:
    # a bandwidth capacity above the total demand is provably slack: normalisation drops it, and
    # the schedule must not change; the per-core L1 slots bind and stay
    g = layered_graph(3000, seed=11, bandwidth_units=10**9)
    assert _names(g) == {"hbm_bw"}
    for policy in ("earliest_start", "critical_path_first", "work_conserving_critical_path", "priority_by_stage"):
        assert m.schedule(g, policy, normalize=True).fingerprint() == m.schedule(g, policy, normalize=False).fingerprint()
