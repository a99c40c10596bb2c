"""The per-graph tables a schedule call keeps on the compiled graph (the scheduler's signature,
acquire and placeholder tables, the normalised form) and reuses on the next call: a later call
must see exactly what a fresh computation gives, and a graph changed in between must not see
the old graph's tables."""

from __future__ import annotations

import moeopt as m
from moeopt.core.normalize import drop_nonbinding_semaphores, nonbinding_semaphores
from moeopt.core.state import SchedulerState, _find_tables, graph_tables
from moeopt.synthetic import layered_graph


def _rows(s: m.Schedule) -> tuple[object, ...]:
    names = list(s.start_us)
    return (
        list(s.start_us.items()),
        list(s.end_us.items()),
        list(s.resources.items()),
        [tuple(s.waits[n]) for n in names],
        s.order,
    )


def test_kept_tables_equal_a_fresh_computation() -> None:
    for late in (False, True):
        g = layered_graph(400, seed=2, sites=3, bandwidth_units=4, late_bind_tiles=late)
        cg = g.compiled()
        first = graph_tables(cg)
        assert graph_tables(cg) is first  # kept: the second call finds the same object
        fresh = _find_tables(cg)
        assert first == fresh
        st = SchedulerState(cg)
        try:
            # the per-signature forms of the loop against the per-event tables
            for i in range(cg.n):
                k = st.sig[i]
                assert st.sig_acq3[k] == st.acq3[i]
                assert st.sig_gains[k] == st.gains[i]
                assert st.sig_ops[k] is st.sem_ops[i]
                acq = st.acq3[i]
                one = st.sig_acq1[k]
                two = st.sig_acq2[k]
                assert one == ((*acq[0], st.profiles[acq[0][0]]) if len(acq) == 1 else None)
                expect = (acq[0], acq[1], st.profiles[acq[0][0]], st.profiles[acq[1][0]]) if len(acq) == 2 else None
                assert two == expect
        finally:
            st.close()


def test_repeated_schedules_of_one_graph_are_identical() -> None:
    # the second and third calls read the kept tables (and the kept normalised form); every
    # profile, ready time and in-degree list is the call's own, so no call sees another's state
    for late in (False, True):
        g = layered_graph(600, seed=5, sites=3, bandwidth_units=4, late_bind_tiles=late)
        for policy in ("earliest_start", "critical_path_first"):
            a = m.schedule(g, policy)
            b = m.schedule(g, policy)
            c = m.schedule(g, policy, normalize=False)
            assert _rows(a) == _rows(b) == _rows(c)


def test_a_changed_graph_gets_fresh_tables() -> None:
    # scheduled, then changed, then scheduled again: the same as a graph built changed at once
    def build(extra: bool) -> m.EventGraph:
        g = layered_graph(200, seed=1, sites=3, bandwidth_units=4)
        if extra:
            g.add(m.Event("extra", resources=["core0.AIC"], acquires={"hbm_bw": 1}, releases={"hbm_bw": 1}))
        return g

    g = build(False)
    m.schedule(g)
    old = g.compiled()
    g.add(m.Event("extra", resources=["core0.AIC"], acquires={"hbm_bw": 1}, releases={"hbm_bw": 1}))
    cg = g.compiled()
    assert cg is not old
    assert cg.derived("scheduler_tables") is None
    assert _rows(m.schedule(g)) == _rows(m.schedule(build(True)))
    assert len(graph_tables(cg).indeg) == cg.n == old.n + 1


def test_normalised_form_is_kept_and_drops_what_the_theorem_allows() -> None:
    # a semaphore whose capacity covers every acquire is dropped; the kept copy is returned again
    g = m.EventGraph(semaphores={"wide": 10, "tight": 1})
    g.add(m.Event("a", resources=["c0.X"], acquires={"wide": 1, "tight": 1}, duration_us=1.0))
    g.add(m.Event("b", resources=["c0.Y"], acquires={"wide": 1, "tight": 1}, duration_us=1.0))
    g.add(m.Event("c", resources=["c0.Z"], deps={"a": 0.0}, releases={"wide": 1, "tight": 1}, duration_us=1.0))
    cg = g.compiled()
    assert nonbinding_semaphores(cg) == [0]
    norm = drop_nonbinding_semaphores(g)
    assert norm is not cg
    assert drop_nonbinding_semaphores(g) is norm
    assert all(s != 0 for acq in norm.acq for s, _a in acq)
    assert norm.derived("scheduler_tables") is None  # a copy starts with nothing kept
    s1, s2 = m.schedule(g), m.schedule(g)
    assert _rows(s1) == _rows(s2)
