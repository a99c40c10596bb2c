"""SchedulerState's per-event semaphore tables (``sig``, ``acq3``, ``gains``, ``sem_ops``) against
a direct per-event computation. The constructor numbers the distinct (acquire map, release map)
pairs by identity through one dict pass and builds each table once per pair; these tests rebuild
every table from the event's own maps, so a wrong pair number (two pairs merged, a pair split, a
numbering not by first appearance) fails here even where the schedule would not show it (the
signature only chooses how waiters are grouped, never a start)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

import moeopt as m
from moeopt.core.state import SchedulerState
from moeopt.synthetic import layered_graph
from moeopt.testing import event_graphs


def _check(g: m.EventGraph) -> None:
    cg = g.compiled()
    st = SchedulerState(cg)
    try:
        # signature: equal for two events exactly when both their maps are the same objects,
        # numbered 0, 1, ... in order of first appearance
        seen: dict[tuple[int, int], int] = {}
        for i in range(cg.n):
            key = (id(cg.acq[i]), id(cg.rel[i]))
            expect = seen.setdefault(key, len(seen))
            assert st.sig[i] == expect, i
        assert st.n_sigs == len(seen)
        profiles = st.profiles
        for i in range(cg.n):
            acq, rel = dict(cg.acq[i]), dict(cg.rel[i])
            # acquire triples: (semaphore, take, what the same event gives back of it)
            assert st.acq3[i] == tuple((s, a, rel.get(s, 0)) for s, a in cg.acq[i]), i
            # gains: the semaphores it gives back more of than it took
            assert st.gains[i] == tuple(s for s, r in cg.rel[i] if r > acq.get(s, 0)), i
            # holds: acquires whose release by the same event is at most the take
            held = {s for s, a in cg.acq[i] if 0 <= rel.get(s, -1) <= a}
            holds, takes, gives = st.sem_ops[i]
            assert holds == tuple((profiles[s], a, rel[s]) for s, a in cg.acq[i] if s in held), i
            assert takes == tuple((profiles[s], a) for s, a in cg.acq[i] if s not in held), i
            assert gives == tuple((s, r) for s, r in cg.rel[i] if s not in held), i
        for s in range(len(cg.sem_cap)):
            assert st.gainful[s] == any(s in gs for gs in st.gains), s
    finally:
        st.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(event_graphs())
def test_semaphore_tables_match_each_events_own_maps(g: m.EventGraph) -> None:
    _check(g)


def test_semaphore_tables_on_megamoe_shaped_graphs() -> None:
    # slots per core, a shared bandwidth semaphore, pools and colocated groups: many events per pair
    for late in (False, True):
        _check(layered_graph(300, seed=3, sites=3, bandwidth_units=4, late_bind_tiles=late))
