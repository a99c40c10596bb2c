"""The idle ledger adds up: per execution role, busy + forced + avoidable = members x span."""

from __future__ import annotations

from collections import defaultdict

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import moeopt.megamoe as mm
from moeopt.megamoe.analysis.idle import CORE_ROLES, _matched
from moeopt.megamoe.scenario import scenario_from_dict

LEDGER = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def small_scenarios(draw: st.DrawFn) -> mm.Scenario:
    """Small MegaMoE scenarios over the knobs that change who runs what and when: both profiles,
    routing, waves, late binding, on-chip links, combine windows, core groups, roles, policies."""
    profile = draw(st.sampled_from(["megamoe-a8w8", "pto-a2a3"]))
    world = draw(st.integers(1, 3))
    experts = draw(st.integers(1, 4))
    wl: dict = {
        "tokens": draw(st.integers(4, 48)),
        "topk": draw(st.integers(1, min(4, world * experts))),
        "world": world,
        "local_experts": experts,
        "routing": draw(st.sampled_from(["uniform", "cyclic", "zipf"])),
    }
    if wl["routing"] == "zipf":
        wl["seed"] = draw(st.integers(0, 5))
    table: dict = {
        "profile": profile,
        "h": draw(st.sampled_from([256, 512, 1024])),
        "hidden_dim": draw(st.sampled_from([256, 512, 1024])),
        "aic_num": draw(st.integers(3, 6)),
        "p1_override": draw(st.integers(0, 2)),
        "workload": wl,
        "kernel": {"tile_m": 128, "tile_n": 128, "tile_k": 256},
        "policy": {
            "dispatch_lookahead": draw(st.integers(0, 2)),
            "scheduling": draw(
                st.sampled_from(["earliest_start", "critical_path_first", "priority_by_stage"])
            ),
        },
        "options": {
            "late_bind_pools": draw(
                st.sampled_from([[], ["AIC"], ["AIV1"], ["AIC", "AIV"], ["AIV0", "AIV1"]])
            ),
            "combine_granularity": draw(st.sampled_from(["per_tile", "per_expert"])),
            "core_groups": draw(st.sampled_from(["shared", "v1_fixed"])),
        },
    }
    late_cube = "AIC" in table["options"]["late_bind_pools"]
    # late-bound cube tiles need a GM hand-off (on-chip slots per core at binding are refused)
    if profile == "megamoe-a8w8" and (late_cube or draw(st.booleans())):
        table["options"]["links"] = [
            {"producer": "gmm1", "consumer": "activation", "location": "gm", "depth": 0, "colocated_by_hardware": False}
        ]
    if draw(st.booleans()):
        table["options"]["roles"] = {"dispatch": "AIV", "combine": "AIV"}
    return scenario_from_dict(table)


def _merged_busy(rr: dict, span: float) -> tuple[dict[str, float], dict[str, int]]:
    """Per role, busy member-µs within [0, span] and the number of members, from the schedule and
    the graph alone (not from the analysis)."""
    g, s = rr["graph"], rr["schedule"]
    members: set[str] = set()
    for ev in g:
        members.update(r for r in ev.resources if not r.endswith(":*"))
    for pool in g.pools.values():
        members.update(pool)
    per: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for name, res in s.resources.items():
        for r in res:
            per[r].append((s.start_us[name], s.end_us[name]))
    busy: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for r in members:
        role = r.rsplit(".", 1)[-1]
        count[role] += 1
        end = 0.0
        for a, b in sorted(per.get(r, [])):
            a, b = max(a, end), min(b, span)
            if b > a:
                busy[role] += b - a
            end = max(end, min(b, span))
    return dict(busy), dict(count)


@LEDGER
@given(small_scenarios())
def test_ledger_per_role_adds_up(s):
    """Item 3 (an idle ledger that adds up): for every role of every simulated rank, busy +
    forced + avoidable = members x span, each term >= 0, busy and members as the schedule and the
    graph give them, and the totals are the core roles' sums (before, forced idle was summed per
    stage pool, so members shared by stages were counted several times)."""
    try:
        r = mm.simulate(s, check_bounds=False, check_work_conservation=False)
    except mm.NotModelledError:
        return
    for rr in {id(v): v for v in r["rank_results"].values()}.values():
        span = rr["kernel_total_us"]
        idle = rr["idle_decomposition"]
        busy, count = _merged_busy(rr, span)
        assert set(idle["by_role"]) == set(count)
        for role, d in idle["by_role"].items():
            assert d["members"] == count[role]
            assert d["busy_core_us"] == pytest.approx(busy.get(role, 0.0), abs=1e-6)
            assert d["forced_core_us"] >= -1e-6
            assert d["avoidable_core_us"] >= -1e-9
            total = d["busy_core_us"] + d["forced_core_us"] + d["avoidable_core_us"]
            assert total == pytest.approx(d["members"] * span, rel=1e-9, abs=1e-6)
        core = [d for role, d in idle["by_role"].items() if role in CORE_ROLES]
        assert idle["forced_core_us"] == pytest.approx(sum(d["forced_core_us"] for d in core))
        assert idle["avoidable_core_us"] == pytest.approx(sum(d["avoidable_core_us"] for d in core))


def test_bs72_forced_idle_fits_in_the_resource_time_that_exists(bs72):
    """Item 3: on bs = 72 the forced idle was 35,923 core-µs, more than the 112 resources x
    302.32 µs = 33,860 resource-µs of the rank; per role it now fits, with the 28 members each."""
    r = mm.simulate(bs72)
    idle = r["idle_decomposition"]
    span = r["kernel_total_us"]
    assert set(idle["by_role"]) == {"AIC", "AIV0", "AIV1"}
    assert all(d["members"] == 28 for d in idle["by_role"].values())
    assert idle["forced_core_us"] + idle["avoidable_core_us"] <= 3 * 28 * span


@st.composite
def matching_instances(draw: st.DrawFn) -> tuple[list[int], list[frozenset[int]], list[int]]:
    n_classes = draw(st.integers(1, 4))
    atoms = draw(
        st.lists(
            st.frozensets(st.integers(0, n_classes - 1), max_size=n_classes), min_size=1, max_size=6, unique=True
        )
    )
    waiting = draw(st.lists(st.integers(0, 4), min_size=n_classes, max_size=n_classes))
    idle = draw(st.lists(st.integers(0, 3), min_size=len(atoms), max_size=len(atoms)))
    return waiting, atoms, idle


@settings(max_examples=300, deadline=None)
@given(matching_instances())
def test_matching_of_ready_events_to_idle_members_is_maximum(inst):
    """Item 3: the avoidable idle at an instant is a maximum matching of ready events to idle
    members they may use; the closed form (Hall's deficiency) equals networkx's matching."""
    waiting, atoms, idle = inst
    g = nx.Graph()
    left = [("e", c, k) for c, n in enumerate(waiting) for k in range(n)]
    right = [("m", a, k) for a, n in enumerate(idle) for k in range(n)]
    g.add_nodes_from(left, bipartite=0)
    g.add_nodes_from(right, bipartite=1)
    for e in left:
        for m in right:
            if e[1] in atoms[m[1]]:
                g.add_edge(e, m)
    best = len(nx.bipartite.maximum_matching(g, top_nodes=left)) // 2 if left else 0
    got = _matched(waiting, atoms, idle) if any(waiting) else 0
    assert got == best


def _idle_without_the_all_busy_shortcut(s: mm.Scenario) -> tuple[dict, dict, int, int]:
    """The idle decomposition of every rank of ``s`` as simulate gives it, and with every waiting
    event's ready spans swept (no all-busy interval known to leave any out); and how many ready
    spans each way computed."""
    from unittest import mock

    from moeopt.megamoe.analysis import idle

    calls = [0]
    real = idle._ready_spans

    def counted(*a: object) -> list[tuple[float, float]]:
        calls[0] += 1
        return real(*a)

    def run() -> dict:
        r = mm.simulate(s, check_bounds=False, check_work_conservation=False)
        return {k: v["idle_decomposition"] for k, v in r["rank_results"].items()}

    with mock.patch.object(idle, "_ready_spans", counted):
        fast = run()
        n_fast, calls[0] = calls[0], 0
        with mock.patch.object(idle, "_all_busy", return_value=([], [])):
            full = run()
    return fast, full, n_fast, calls[0]


@LEDGER
@given(small_scenarios())
def test_events_that_waited_while_every_member_was_busy_change_nothing(s):
    """The pool sweep leaves out events whose whole wait fell while every member of the pool was
    busy (nothing was avoidable then): the avoidable idle and the samples are the same to the
    bit as when every waiting event is swept."""
    try:
        fast, full, _n_fast, _n_full = _idle_without_the_all_busy_shortcut(s)
    except mm.NotModelledError:
        return
    assert fast == full


def test_the_all_busy_shortcut_leaves_out_events(bs72):
    # and it does leave some out on a real shape (else the property above would test nothing)
    fast, full, n_fast, n_full = _idle_without_the_all_busy_shortcut(bs72)
    assert fast == full
    assert n_fast < n_full


def _idle_both_ways(s: mm.Scenario) -> tuple[dict, dict]:
    """The idle decomposition of every rank of ``s`` with the numpy sweeps and with the
    point-by-point sweeps (``idle.VECTOR_SWEEPS`` off)."""
    from unittest import mock

    from moeopt.megamoe.analysis import idle

    def run() -> dict:
        r = mm.simulate(s, check_bounds=False, check_work_conservation=False)
        return {k: v["idle_decomposition"] for k, v in r["rank_results"].items()}

    fast = run()
    with mock.patch.object(idle, "VECTOR_SWEEPS", False):
        slow = run()
    return fast, slow


@LEDGER
@given(small_scenarios())
def test_numpy_sweeps_equal_the_point_by_point_sweeps(s):
    """The sweeps with no tied ready event run on numpy arrays; the avoidable idle (every float
    to the bit: == on the dicts) and the samples are those of the point-by-point sweeps."""
    try:
        fast, slow = _idle_both_ways(s)
    except mm.NotModelledError:
        return
    assert fast == slow


def test_numpy_sweeps_equal_on_bs72(bs72):
    fast, slow = _idle_both_ways(bs72)
    assert fast == slow
    assert any(d["avoidable_core_us"] > 0 for r in fast.values() for d in r["by_stage"].values())


def _spans_both_ways(s: mm.Scenario) -> tuple[int, int]:
    """Every event's ready spans of every rank of ``s`` primed on arrays (``_SpanCache.prime``)
    and one by one (``_ready_spans``): asserted equal (values and float types), and read as one
    array (``_SpanCache.pairs``); returns how many events were primed and how many made a cut."""
    import numpy as np

    from moeopt.core.scheduler import schedule
    from moeopt.megamoe.analysis import idle, table
    from moeopt.megamoe.analysis.table import Table
    from moeopt.megamoe.simulate import build_graphs

    primed = cut = 0
    for rg, _ranks in build_graphs(s).values():
        sch = schedule(rg.graph, policy=s.config.scheduling, normalize=False)
        tab = Table.of(rg, sch)
        ready = idle._data_ready(rg, tab)
        levels = idle._SemaphoreLevels(rg, tab)
        cache = idle._SpanCache(tab, levels, ready)
        cache.prime([i for i in range(len(tab.names)) if tab.start[i] > ready[i] + idle.EPS])
        primed += int(np.count_nonzero(cache.state))  # (the events whose spans it knows)
        refs = []
        for i in range(len(tab.names)):
            ref = idle._ready_spans(i, tab, levels, ready[i])
            got = cache.of(i)
            assert got == ref, tab.names[i]
            assert all(type(a) is float and type(b) is float for a, b in got)
            cut += ref not in ([], [(ready[i], tab.start[i])])
            refs.append(ref)
        # the spans of any events as one array (what the sweeps read), event after event: here
        # every event, the waiting ones, and a reordered selection with repeats
        everyone = np.arange(len(tab.names))
        waited = everyone[cache.start > cache.ready + idle.EPS]
        # (and from a cache primed again and read as arrays first: the spans _prime_group keeps
        # as rows of an array are read without their lists)
        # (grouped by the scheduler's pair numbers, where the first cache grouped by identity)
        fresh = idle._SpanCache(tab, levels, ready, cg=rg.graph.compiled())
        assert table.pair_numbers(rg.graph.compiled()) is not None
        fresh.prime([i for i in range(len(tab.names)) if tab.start[i] > ready[i] + idle.EPS])
        for idx in (everyone, waited, np.concatenate((waited[::-1], waited[:3]))):
            flat = [ab for i in idx.tolist() for ab in refs[i]]
            for c in (cache, fresh):
                got_pairs = c.pairs(idx)
                assert got_pairs.shape == (len(flat), 2)
                assert got_pairs.tolist() == [list(ab) for ab in flat]
    return primed, cut


@LEDGER
@given(small_scenarios())
def test_primed_spans_are_the_one_by_one_spans(s):
    """The ready spans worked out together on arrays (every query's spans as cut columns, sorted
    and uncut column by column) are those of ``_ready_spans``, event by event."""
    try:
        _spans_both_ways(s)
    except mm.NotModelledError:
        return


def test_primed_spans_on_pto_cut_waits():
    # the PTO M=512 case: hundreds of GMM2 tiles whose wait the GM->L1 channel cut into pieces
    s = mm.Scenario(
        workload=mm.Workload(tokens=512, topk=8, world=8, local_experts=16, routing="cyclic"),
        h=7168,
        hidden_dim=4096,
        profile="pto-a2a3",
    )
    primed, cut = _spans_both_ways(s)
    assert primed > 1000
    assert cut > 500  # (not only the cases without a cut or blocked over the whole wait)


_TIMES = st.sampled_from([0.0, 1.0, 1.0 + 5e-7, 1.0 + 2e-6, 2.5, 3.0, 3.0 - 5e-7, 4.0, 7.0])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_TIMES, _TIMES, st.lists(st.tuples(_TIMES, _TIMES), max_size=4)), min_size=1, max_size=6))
def test_uncut_rows_is_uncut_per_row(rows):
    """``_uncut_rows`` (every row's cuts as columns, sorted per row) is ``_uncut`` of each row's
    sorted cuts; times within EPS of each other exercise every tolerance comparison."""
    import numpy as np

    from moeopt.megamoe.analysis.idle import _uncut, _uncut_rows

    width = max(len(c) for _r, _s, c in rows)
    r = np.array([x[0] for x in rows])
    stt = np.array([x[1] for x in rows])
    cut_from = [np.array([c[j][0] if j < len(c) else np.inf for _r, _s, c in rows]) for j in range(width)]
    cut_to = [np.array([c[j][1] if j < len(c) else np.inf for _r, _s, c in rows]) for j in range(width)]
    got = _uncut_rows(r, stt, cut_from, cut_to)
    assert got == [_uncut(a, b, sorted(c)) for a, b, c in rows]


@st.composite
def role_sweeps(draw: st.DrawFn) -> tuple:
    """A role's members with disjoint busy intervals, one to three classes of members (the pools
    on the role), free ready spans per class and a span: the input of both role sweeps."""
    grid = st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.5, 9.0])
    members = [f"c{k}.AIC" for k in range(draw(st.integers(1, 5)))]
    merged: dict[str, list[tuple[float, float]]] = {}
    for m in members:
        cuts = sorted(set(draw(st.lists(grid, max_size=6))))
        merged[m] = [(cuts[j], cuts[j + 1]) for j in range(0, len(cuts) - 1, 2)]
    classes: list[frozenset[str]] = []
    for _ in range(draw(st.integers(1, 3))):
        own = frozenset(draw(st.lists(st.sampled_from(members), min_size=1, unique=True)))
        if own not in classes:
            classes.append(own)
    spans = st.tuples(grid, grid).filter(lambda ab: ab[0] < ab[1])
    waits_of = [draw(st.lists(spans, max_size=5)) for _ in classes]
    return merged, members, classes, waits_of, draw(grid) + 1.0


@settings(max_examples=400, deadline=None)
@given(role_sweeps())
def test_class_stretches_sum_to_the_role_sweep(case):
    """With no ready event tied to a member, the role's avoidable idle from the stretches on
    arrays (``_class_stretches``: every class set's Hall deficiency per stretch) is, to the bit,
    the point-by-point ``_role_sweep`` (its ``_matched`` over the waiting classes only): several
    classes, overlapping and nested member sets, ties between busy and ready times."""
    from moeopt.megamoe.analysis.idle import _class_stretches, _role_sweep

    merged, members, classes, waits_of, span = case
    pts = [(t, 1, "", c, d) for c, ws in enumerate(waits_of) for a, b in ws for t, d in ((a, 1), (b, -1))]
    ref = _role_sweep(pts, {m: list(v) for m, v in merged.items()}, members, classes, span) if pts else 0.0
    got = 0.0
    if any(waits_of):
        prev, t, av = _class_stretches(waits_of, merged, members, classes, span)
        for x in (av * (t - prev)).tolist():
            got += x
    assert got == ref


def test_numpy_sweeps_equal_on_v1_with_two_classes_per_role():
    # the V1 profile's AIC role holds two pools (GMM1's and GMM2's members): several classes of
    # free ready events on one role, the case _class_stretches added to the arrays
    from unittest import mock

    from moeopt.megamoe.analysis import idle

    s = mm.Scenario(
        workload=mm.Workload(tokens=128, topk=4, world=4, local_experts=4, routing="zipf"),
        h=1024,
        hidden_dim=1024,
        profile="pto-a2a3-v1",
    )
    seen: list[int] = []
    real = idle._class_stretches

    def spy(waits_of, merged, members, classes, span):
        seen.append(len(classes))
        return real(waits_of, merged, members, classes, span)

    with mock.patch.object(idle, "_class_stretches", spy):
        fast, slow = _idle_both_ways(s)
    assert fast == slow
    assert max(seen) >= 2


_BASE = st.sampled_from([0.0, 1.0, 2.5, 3.0])
_NEAR = st.sampled_from([0.0, 5e-7, 1e-6, 2e-6])  # (the EPS of the analyses is 1e-6)
_LONG = st.sampled_from([0.0, 5e-7, 0.5, 1.0, 1.5, 3.0])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_BASE, _NEAR, _LONG), max_size=80))
def test_merged_arrays_is_merge(iv):
    """``_merged_arrays`` (the busy intervals of a resource merged on arrays: a running maximum
    of the ends) is ``_merge`` of the same intervals, to the bit: starts at, just within and
    just beyond EPS after an end (``1.0 + 1e-6`` after ``(0.0, 1.0)`` is ``hi + EPS`` exactly)
    exercise the tolerance, repeats and nesting the running maximum."""
    import numpy as np

    from moeopt.megamoe.analysis.idle import _merge, _merged_arrays

    pairs = [(base + near, base + near + d) for base, near, d in iv]
    start = np.array([a for a, _b in pairs], dtype=float)
    end = np.array([b for _a, b in pairs], dtype=float)
    ids = np.arange(len(iv))[::-1]  # (in any order: both sort)
    want = _merge(pairs)
    got = _merged_arrays(ids, start, end) if len(iv) else []
    assert got == want
    assert all(type(a) is float and type(b) is float for a, b in got)


def test_primed_spans_on_basic_batches_of_one_shape():
    """scenario_basic: its GMM1 tiles wait in 35 groups of one shape (two acquires, the
    second keeping its unit), which :meth:`_SpanCache.prime` works out as one batch; every
    event's spans are still those of ``_ready_spans``, one by one."""
    from pathlib import Path
    from unittest import mock

    from moeopt.megamoe.analysis import idle

    shapes: list[int] = []
    real = idle._SpanCache._prime_batch

    def spy(self, shape, batch):  # type: ignore[no-untyped-def]
        shapes.append(len(batch))
        return real(self, shape, batch)

    s = mm.load_scenario(Path(__file__).parents[2] / "examples" / "scenario_basic.toml")
    with mock.patch.object(idle._SpanCache, "_prime_batch", spy):
        primed, _cut = _spans_both_ways(s)
    assert primed > 1000
    assert max(shapes) > 10  # (batches of many groups were made)
