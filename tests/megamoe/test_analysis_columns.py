"""The per-rank analyses that work on arrays are pinned to the event-by-event code they replaced
(kept here as references): each resource's events, the busy times, the graph floors' sums per
resource and role, the critical path's releasers, the data predecessors; and the running sums
they are made of against ``+=`` loops. Compared with ``==`` (every float to the bit) on random
small scenarios (``test_idle_ledger.small_scenarios``) and on golden configurations."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import moeopt.megamoe as mm
from moeopt.core.scheduler import schedule
from moeopt.megamoe.analysis import bounds, busy_times, graph_floors
from moeopt.megamoe.analysis.critical import _Ended, _Ends
from moeopt.megamoe.analysis.table import Table, events_on
from moeopt.megamoe.build import RankGraph
from moeopt.megamoe.simulate import build_graphs
from moeopt.trust.golden import default_configs
from tests.megamoe.test_idle_ledger import LEDGER, small_scenarios


def _events_on_by_event(t: Table) -> dict[str, list[int]]:
    on: dict[str, list[int]] = {}
    for i, rs in enumerate(t.res):
        for r in rs:
            on.setdefault(r, []).append(i)
    return on


def _busy_by_event(rg: RankGraph, t: Table, span: float) -> tuple[dict[str, float], dict[str, float]]:
    """(stage busy, resource busy) as ``busy_times`` summed them event by event."""
    stage_busy: dict[str, float] = defaultdict(float)
    dur = [e - s for s, e in zip(t.start, t.end)]
    for rs, st_, d in zip(t.res, [ev.labels.get("stage") for ev in t.events], dur):
        if rs:
            stage_busy[str(st_)] += d * len(rs)
    res_busy: dict[str, float] = {}
    for r, ids in _events_on_by_event(t).items():
        total = 0.0
        for i in ids:
            total += dur[i]
        res_busy[r] = total
    return dict(stage_busy), {r: res_busy.get(r, 0.0) for r in sorted(set(rg.graph.resources()))}


def _pipes_by_event(rg: RankGraph) -> dict[str, float]:
    """``graph_floors``'s per-role pipe floors as its event-by-event loop made them."""
    cg = rg.graph.compiled()
    ends = [cg.index[n] for n in (rg.combine_events or [n for n in cg.names if n != rg.tail_event])]
    needed = bounds._ancestors_or_self(cg.preds, ends, cg.n, cg.topo)
    pinned: dict[int, float] = {}
    by_role: dict[str, float] = {}
    role_of = [name.rsplit(".", 1)[-1] for name in cg.res_names]
    members: dict[str, int] = {}
    for role in role_of:
        members[role] = members.get(role, 0) + 1
    pool_role = [role_of[m[0]] if m else "" for m in cg.pool_members]
    for need, d, fixed, places in zip(needed, cg.dur, cg.fixed, cg.placeholders):
        if not need:
            continue
        for r in fixed:
            pinned[r] = pinned.get(r, 0.0) + d
            by_role[role_of[r]] = by_role.get(role_of[r], 0.0) + d
        for p in places:
            by_role[pool_role[p]] = by_role.get(pool_role[p], 0.0) + d
    pipe: dict[str, float] = {}
    for role, work in by_role.items():
        most = max((w for r, w in pinned.items() if role_of[r] == role), default=0.0)
        pipe[role] = max(most, work / members[role])
    return dict(sorted(pipe.items()))


def _releasers_by_event(t: Table, sem: str) -> tuple[list[float], list[str]]:
    items = [(t.end[i], i) for i, ev in enumerate(t.events) if sem in ev.releases]
    e = _Ended(items, t.names)
    return e.ends, e.names


def _data_preds_by_edge(rg: RankGraph) -> list[Any]:
    cg = rg.graph.compiled()
    chain = {(cg.index[b], cg.index[a]) for a, b in rg.chain_edges}
    return [tuple(pl for pl in ps if (i, pl[0]) not in chain) for i, ps in enumerate(cg.preds)]


def _check(s: mm.Scenario) -> None:
    for rg, _ranks in build_graphs(s).values():
        sch = schedule(rg.graph, policy=s.config.scheduling, normalize=False)
        t = Table.of(rg, sch)
        on = events_on(t)
        assert on == _events_on_by_event(t)
        assert list(on) == list(_events_on_by_event(t))
        got = busy_times(rg, sch, sch.makespan_us, table=t, on=on)
        stage_busy, res_busy = _busy_by_event(rg, t, sch.makespan_us)
        assert got["stage_busy_us"] == stage_busy
        assert list(got["stage_busy_us"]) == list(stage_busy)
        assert got["resource_busy_us"] == res_busy
        assert graph_floors(rg)["pipe_us"] == _pipes_by_event(rg)
        assert rg.data_preds() == _data_preds_by_edge(rg)
        ends = _Ends(t, on)
        for sem in rg.graph.semaphores:
            e = ends.releasers(sem)
            assert (e.ends, e.names) == _releasers_by_event(t, sem)


@LEDGER
@given(small_scenarios())
def test_analyses_on_arrays_equal_the_event_loops(s: mm.Scenario) -> None:
    try:
        _check(s)
    except mm.NotModelledError:
        return


@pytest.mark.parametrize(
    "name", ["bs72", "bs72.late_aic_aiv1", "bs72.urma.layered", "basic_e8.stealing", "pto_m16.v1", "pto_m128"]
)
def test_analyses_on_arrays_on_golden_configurations(name: str) -> None:
    (cfg,) = [c for c in default_configs() if c.name == name]
    _check(cfg.scenario())


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.floats(0, 1e9, allow_nan=False)), max_size=50))
def test_running_sums_per_group_are_the_loops(entries: list[tuple[int, float]]) -> None:
    sums = [0.0] * 5
    for g, v in entries:
        sums[g] += v
    group = np.array([g for g, _v in entries], np.intp)
    values = np.array([v for _g, v in entries], float)
    assert bounds._running_sums(group, values, 5) == sums
