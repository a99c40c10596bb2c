"""The analyses' array forms against the loops they replace (results must stay the same to the bit)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moeopt.megamoe.analysis.bounds import _needed_work, _tails, data_paths
from moeopt.megamoe.analysis.busy import busy_times
from moeopt.megamoe.analysis.critical import _by_pair, _Ended, _Ends
from moeopt.megamoe.analysis.idle import _data_ready, _merge, _merged_all, _stage_events
from moeopt.megamoe.analysis.table import Columns, Table, _events_on_loop, events_on, packed, pair_numbers
from moeopt.megamoe.simulate import build_graphs, scheduled_rank


def _needed_work_loop(dur, fixed, places, needed, role_of, pool_role):
    """The event-by-event loop graph_floors ran before :func:`_needed_work` (the reference)."""
    pinned: dict[int, float] = {}
    by_role: dict[str, float] = {}
    for need, d, fx, pl in zip(needed, dur, fixed, places):
        if not need:
            continue
        for r in fx:
            pinned[r] = pinned.get(r, 0.0) + d
            role = role_of[r]
            by_role[role] = by_role.get(role, 0.0) + d
        for p in pl:
            role = pool_role[p]
            by_role[role] = by_role.get(role, 0.0) + d
    return pinned, by_role


_ROLES = ["AIC", "AIV0", "AIV1"]


@st.composite
def _work(draw):
    n_res = draw(st.integers(1, 6))
    n_pools = draw(st.integers(0, 3))
    role_of = [draw(st.sampled_from(_ROLES)) for _ in range(n_res)]
    pool_role = [draw(st.sampled_from(_ROLES)) for _ in range(n_pools)]
    n = draw(st.integers(0, 40))
    # durations with many digits, so that a sum in another order would differ in the last bits
    dur = [draw(st.floats(0.0, 1e4, allow_nan=False)) for _ in range(n)]
    fixed = [tuple(draw(st.lists(st.integers(0, n_res - 1), max_size=2, unique=True))) for _ in range(n)]
    places = [
        tuple(draw(st.lists(st.integers(0, n_pools - 1), max_size=2))) if n_pools else () for _ in range(n)
    ]
    needed = [draw(st.booleans()) for _ in range(n)]
    return dur, fixed, places, needed, role_of, pool_role


@settings(max_examples=200, deadline=None)
@given(_work())
def test_needed_work_is_the_loop_to_the_bit(case):
    pinned, by_role = _needed_work(*case)
    ref_pinned, ref_by_role = _needed_work_loop(*case)
    assert pinned == ref_pinned
    assert by_role == ref_by_role
    # to the bit, and the same keys
    assert [(k, v.hex()) for k, v in sorted(pinned.items())] == [(k, v.hex()) for k, v in sorted(ref_pinned.items())]
    assert sorted((k, v.hex()) for k, v in by_role.items()) == sorted((k, v.hex()) for k, v in ref_by_role.items())


class _Ev:
    def __init__(self, releases):
        self.releases = releases


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_releasers_are_every_releaser_by_end_then_index(data):
    """:meth:`_Ends.releasers` (events grouped by shared release map, on arrays) against the
    events found one by one and sorted by (end, index), as :class:`_Ended` sorts them."""
    shared = [{}, {"s0": 1}, {"s1": 2}, {"s0": 1, "s1": 1}]
    n = data.draw(st.integers(0, 30))
    # the same map objects shared by many events, as the builder shares them; ends with ties
    evs = [_Ev(shared[data.draw(st.integers(0, 3))]) for _ in range(n)]
    ends = [float(data.draw(st.integers(0, 5))) for _ in range(n)]
    names = [f"e{i}" for i in range(n)]
    t = Table(names=names, events=evs, start=[0.0] * n, end=ends, res=[()] * n, schedule=None)  # type: ignore[arg-type]
    got = _Ends(t)
    for sem in ("s0", "s1", "s2"):
        ref = _Ended([(ends[i], i) for i in range(n) if sem in evs[i].releases], names)
        mine = got.releasers(sem)
        assert (mine.ends, list(mine.names)) == (ref.ends, ref.names)
        assert [mine.names[p] for p in range(len(mine.names))] == ref.names


def _busy_loop(t, on):
    """The event-by-event sums busy_times made before its bincount form (the reference)."""
    stage_busy: dict[str, float] = {}
    dur = [e - s for s, e in zip(t.start, t.end)]
    for rs, label, d in zip(t.res, t.stage, dur):
        if rs:
            stage_busy[str(label)] = stage_busy.get(str(label), 0.0) + d * len(rs)
    res_busy = {}
    for r, ids in on.items():
        total = 0.0
        for i in ids:
            total += dur[i]
        res_busy[r] = total
    return stage_busy, res_busy


# (the second: late-bound tiles, handed to SwiGLU through GM, as test_bounds.py runs them)
@pytest.mark.parametrize(
    "variant",
    [
        {},
        {
            "options.late_bind_pools": ["AIC", "AIV1"],
            "options.links": [
                {"producer": "gmm1", "consumer": "activation", "location": "gm", "depth": 0, "colocated_by_hardware": False}
            ],
        },
    ],
)
def test_busy_times_are_the_loops_sums_to_the_bit(bs72, variant):
    """Per stage (in order of first event) and per resource, the same floats as the loop."""
    s = bs72.with_overrides(variant) if variant else bs72
    rg = next(iter(build_graphs(s).values()))[0]
    rg, sch, _last = scheduled_rank(rg, s.config, False)
    t = Table.of(rg, sch)
    on = events_on(t)
    got = busy_times(rg, sch, sch.makespan_us, table=t, on=on)
    stage_busy, res_busy = _busy_loop(t, on)
    assert list(got["stage_busy_us"].items()) == list(stage_busy.items())
    assert got["resource_busy_us"] == {r: res_busy.get(r, 0.0) for r in sorted(set(rg.graph.resources()))}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.floats(), st.integers(-(2**53), 2**53)), max_size=30))
def test_packed_floats_are_fromiters_to_the_bit(values):
    """:func:`packed` (``struct``) converts each value as ``np.fromiter`` does: the same bytes
    (NaN, -0.0 and integers included)."""
    got = packed("d", values, len(values))
    assert got.tobytes() == np.fromiter(values, float, len(values)).tobytes()
    assert packed("n", range(len(values)), len(values)).tolist() == list(range(len(values)))


class _Labelled:
    def __init__(self, stage):
        self.labels = {} if stage is None else {"stage": stage}


def _stage_events_loop(stage_members, t):
    """The loop :func:`moeopt.megamoe.analysis.idle._stage_events` ran before it read the
    columns (the reference)."""
    by_stage: dict[str, list[int]] = {}
    for i, (rs, label) in enumerate(zip(t.res, t.stage)):
        if rs and label in stage_members:
            by_stage.setdefault(label, []).append(i)
    return by_stage


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_stage_events_are_the_loops(data):
    """Per stage with members, the events holding a resource, in graph order, stages in order of
    first such event: the same dict, in the same order, as the loop over the events."""
    n = data.draw(st.integers(0, 40))
    labels = [data.draw(st.sampled_from(["gmm1", "gmm2", "flag", "none", None])) for _ in range(n)]
    res = [data.draw(st.sampled_from([(), ("c0.AIC",), ("c0.AIV0", "c0.AIV1")])) for _ in range(n)]
    evs = [_Labelled(label) for label in labels]
    names = [f"e{i}" for i in range(n)]
    t = Table(names=names, events=evs, start=[0.0] * n, end=[1.0] * n, res=res, schedule=None)  # type: ignore[arg-type]
    members = dict.fromkeys(data.draw(st.sets(st.sampled_from(["gmm1", "gmm2", "flag", "other"]))), ("c0.AIC",))
    rg = SimpleNamespace(stage_members=members)
    got = _stage_events(rg, Columns(t))  # type: ignore[arg-type]
    assert list(got.items()) == list(_stage_events_loop(members, t).items())


def test_columns_are_the_tables_lists(bs72):
    """The shared columns hold the table's own values (start, end, resources held, stage)."""
    rg = next(iter(build_graphs(bs72).values()))[0]
    rg, sch, _last = scheduled_rank(rg, bs72.config, False)
    t = Table.of(rg, sch)
    c = Columns(t)
    assert c.start.tolist() == t.start
    assert c.end.tolist() == t.end
    assert c.n_res.tolist() == [len(rs) for rs in t.res]
    assert [c.stage_labels[k] for k in c.stage_code.tolist()] == t.stage
    # (numbered in one pass over the events above; from the table's list once it is made)
    assert c.stage_labels == list(dict.fromkeys(t.stage))
    again = Columns(t)
    assert again.stage_labels == c.stage_labels
    assert again.stage_code.tolist() == c.stage_code.tolist()
    assert list(_stage_events(rg, c).items()) == list(_stage_events_loop(rg.stage_members, t).items())


class _Compiled:
    def __init__(self, topo, dur):
        self.n, self.topo, self.dur = len(dur), topo, dur


class _Graph:
    def __init__(self, cg):
        self._cg = cg

    def compiled(self):
        return self._cg


class _Rank:
    def __init__(self, topo, dur, preds):
        self.graph = _Graph(_Compiled(topo, dur))
        self._preds = preds

    def data_preds(self):
        return self._preds


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_data_paths_are_the_two_walks_to_the_bit(data):
    """:func:`data_paths` (one walk) against the two walks it replaces: the floors' longest data
    path per event (``_tails``) and the idle ledger's data-ready times (``_data_ready``), on a
    random DAG in a random topological order, with negative λ and ready times at or below 0."""
    n = data.draw(st.integers(0, 30))
    topo = data.draw(st.permutations(range(n)))
    times = st.floats(-50.0, 1e3, allow_nan=False)
    preds: list[tuple[tuple[int, float], ...]] = [()] * n
    for k, i in enumerate(topo):
        before = data.draw(st.lists(st.sampled_from(topo[:k]), max_size=4, unique=True)) if k else []
        preds[i] = tuple((p, data.draw(times)) for p in before)
    dur = [data.draw(st.floats(0.0, 1e3, allow_nan=False)) for _ in range(n)]
    end = [data.draw(times) for _ in range(n)]
    rg = _Rank(topo, dur, preds)
    tails, ready = data_paths(rg, end)  # type: ignore[arg-type]
    ref_ready = _data_ready(rg, SimpleNamespace(end=end, names=[""] * n))  # type: ignore[arg-type]
    assert [x.hex() for x in tails] == [x.hex() for x in _tails(rg)]  # type: ignore[arg-type]
    assert [x.hex() for x in ready] == [x.hex() for x in ref_ready]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_merged_all_is_the_merge_of_each_resource(data):
    """:func:`_merged_all` (every resource at once) against :func:`_merge` per resource, to the
    bit: ends drawn on a coarse grid so that ties, touching and EPS-near intervals occur."""
    n = data.draw(st.integers(0, 60))
    grid = st.integers(0, 40).map(lambda k: k * 0.25 + data.draw(st.sampled_from([0.0, 1e-7, 3e-6])))
    start = [data.draw(grid) for _ in range(n)]
    end = [s + data.draw(st.integers(0, 8)) * 0.25 for s in start]
    names = ["r0", "r1", "r2", "r3"]
    on: dict[str, list[int]] = {}
    for i in range(n):
        for r in data.draw(st.lists(st.sampled_from(names), max_size=2, unique=True)):
            on.setdefault(r, []).append(i)
    on["idle"] = []
    got = _merged_all(on, np.array(start), np.array(end))
    ref = {r: _merge([(start[i], end[i]) for i in ids]) for r, ids in on.items()}
    assert list(got) == list(ref)
    for r in ref:
        assert [(a.hex(), b.hex()) for a, b in got[r]] == [(a.hex(), b.hex()) for a, b in ref[r]]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_events_on_is_the_loop(data):
    """:func:`events_on` (per distinct resource tuple, on arrays) against the loop over the events
    it replaces: the same resources in the same order (of first event), each with its events in
    graph order (a resource twice in one tuple: the event twice); and :attr:`Columns.n_res`
    against each tuple's length. Equal tuples drawn as distinct objects and as one object."""
    n = data.draw(st.integers(0, 40))
    shared = [(), ("c0.AIC",), ("c1.AIC",), ("c0.AIV0", "c0.AIV1"), ("c1.AIV0", "c0.AIV0", "c1.AIV0")]
    res = []
    for _ in range(n):
        rs = data.draw(st.sampled_from(shared))
        res.append(rs if data.draw(st.booleans()) else tuple(map(str, rs)))  # (an equal tuple, another object)
    t = Table(names=[f"e{i}" for i in range(n)], events=[], start=[0.0] * n, end=[1.0] * n, res=res, schedule=None)  # type: ignore[arg-type]
    got = events_on(t)
    ref = _events_on_loop(t)
    assert list(got.items()) == list(ref.items())
    assert Columns(t).n_res.tolist() == [len(rs) for rs in res]


def test_events_on_and_stages_of_a_rank_are_the_loops(bs72):
    """On a built and scheduled rank: :func:`events_on` is the loop over the events, and
    :attr:`Table.stage` each event's ``labels.get("stage")`` (a table whose events lack the
    label reads them all by ``get``)."""
    rg = next(iter(build_graphs(bs72).values()))[0]
    rg, sch, _last = scheduled_rank(rg, bs72.config, False)
    t = Table.of(rg, sch)
    assert list(events_on(t).items()) == list(_events_on_loop(t).items())
    assert t.stage == [ev.labels.get("stage") for ev in t.events]
    evs = [_Labelled(None), _Labelled("gmm1")]
    t2 = Table(names=["a", "b"], events=evs, start=[0.0] * 2, end=[1.0] * 2, res=[(), ()], schedule=None)  # type: ignore[arg-type]
    assert t2.stage == [None, "gmm1"]


def test_releasers_by_pair_numbers_are_by_map(bs72):
    """:meth:`_Ends.releasers` read off the scheduler's (acquire, release) pair numbers kept on
    the compiled graph, against the release maps grouped by identity: the same events in the
    same (end, index) order, for every semaphore of a built and scheduled rank; a graph
    compiled again (no pair numbers kept) takes the identity path."""
    from dataclasses import replace

    rg = next(iter(build_graphs(bs72).values()))[0]
    rg, sch, _last = scheduled_rank(rg, bs72.config, False)
    t = Table.of(rg, sch)
    cg = rg.graph.compiled()
    assert pair_numbers(cg) is not None
    by_pair, by_map = _Ends(t, cg=cg), _Ends(t)
    sems = list(rg.graph.semaphores)
    assert sems
    for sem in [*sems, "no such semaphore"]:
        a, b = by_pair.releasers(sem), by_map.releasers(sem)
        assert (a.ends, list(a.names)) == (b.ends, list(b.names))
        assert list(a.names[1:3]) == list(b.names)[1:3]
    assert _by_pair(replace(cg)) is None


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_busy_level_kept_on_merged_is_the_level(data):
    """The busy level kept on a :class:`_Merged` (shared by a pool and the role with its
    members) gives the all-busy intervals and the idle windows that a plain dict of the same
    members gives, read in either order."""
    from moeopt.megamoe.analysis.idle import _all_busy, _idle_windows, _Merged

    grid = st.integers(0, 20).map(lambda k: k * 0.5)
    members = {}
    for r in ("c0.AIC", "c1.AIC", "c2.AIC")[: data.draw(st.integers(1, 3))]:
        iv = sorted({(a, a + data.draw(st.integers(1, 3)) * 0.5) for a in data.draw(st.lists(grid, max_size=5))})
        keep = []
        for a, b in iv:  # (disjoint, as merged intervals are)
            if not keep or a > keep[-1][1]:
                keep.append((a, b))
        members[r] = keep
    span = data.draw(grid)
    ref = (_all_busy(dict(members)), _idle_windows(dict(members), span))
    first = _Merged(members)
    assert (_all_busy(first), _idle_windows(first, span)) == ref
    second = _Merged(members)
    assert _idle_windows(second, span) == ref[1]
    assert _all_busy(second) == ref[0]
