"""The compiled greedy loop (moeopt.core.fastloop) against the Python loop.

The Python loop (``_run_keyed``) is the reference, itself held to the naive rule by
test_properties.py: on every graph, under every keyed policy, the compiled loop must
give the very same schedule (starts, ends, commit order, every wait column, every semaphore's
breakpoints), or decline (``None``) exactly where the Python loop raises, which it then does.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moeopt.core import fastloop
from moeopt.core import scheduler as scheduler_module
from moeopt.core.events import Event, EventGraph
from moeopt.core.policies import BUILTIN_POLICIES, make_policy
from moeopt.core.schedule import Schedule
from moeopt.core.scheduler import schedule
from moeopt.core.state import graph_tables
from moeopt.errors import SchedulingError
from moeopt.testing.strategies import event_graphs
from tests.core.test_hand_cases import SITE_CHANGE_STARTS, several_placeholders_graph, site_change_graph

KEYED = [p for p in BUILTIN_POLICIES if not make_policy(p).wants_view]
RESOURCES = ("c0.a", "c0.b", "c1.a", "c1.b")
DURATIONS = (0.0, 0.5, 1.0, 1.0, 2.0, 3.25)  # (repeats: ties between starts are common)
LAMBDAS = (0.0, 0.0, 0.5, 1.25)


@st.composite
def pinned_graphs(draw: st.DrawFn, max_events: int = 24) -> EventGraph:
    """A pinned graph (no placeholder): 0-2 fixed resources per event, λ edges, colocation links
    (which bind nothing without placeholders), and three semaphores used every way an event
    can use one: a hold giving back all it took or part of it, a take given back by a later
    consumer, a give beyond what the event took (which may overflow: the scheduler raises),
    several semaphores on one event, and takes never given back (which may starve a later
    acquirer: the scheduler raises)."""
    n = draw(st.integers(1, max_events))
    caps = {"s1": draw(st.integers(1, 4)), "s2": draw(st.integers(1, 3)), "s3": draw(st.integers(2, 6))}
    g = EventGraph(semaphores=caps)
    names: list[str] = []
    site_of: dict[str, set[str]] = {}
    open_slots: list[tuple[str, str, int]] = []
    for k in range(n):
        name = f"e{k}"
        res = draw(st.lists(st.sampled_from(RESOURCES), max_size=2, unique=True))
        deps: dict[str, float] = {}
        if names:
            for p in draw(st.lists(st.sampled_from(names), max_size=3, unique=True)):
                deps[p] = draw(st.sampled_from(LAMBDAS))
        acquires: dict[str, int] = {}
        releases: dict[str, int] = {}
        for sem in draw(st.lists(st.sampled_from(sorted(caps)), max_size=2, unique=True)):
            mode = draw(st.sampled_from(["hold", "hold", "partial", "produce", "consume", "extra"]))
            cap = caps[sem]
            if mode == "hold":
                acquires[sem] = releases[sem] = draw(st.integers(1, cap))
            elif mode == "partial" and cap >= 2:
                acquires[sem] = draw(st.integers(2, cap))
                releases[sem] = draw(st.integers(1, acquires[sem] - 1))
            elif mode == "produce":
                acquires[sem] = 1
                open_slots.append((name, sem, 1))
            elif mode == "consume":
                mine = [x for x in open_slots if x[1] == sem]
                if mine:
                    slot = draw(st.sampled_from(mine))
                    open_slots.remove(slot)
                    deps.setdefault(slot[0], draw(st.sampled_from(LAMBDAS)))
                    releases[sem] = slot[2]
            elif mode == "extra":
                acquires[sem] = 1
                releases[sem] = 2
        # colocation with an earlier event on the same one site (a group needs one site)
        sites = {r.split(".")[0] for r in res}
        partners = [p for p in names if len(sites) == 1 and site_of.get(p) == sites]
        coloc = draw(st.sampled_from(partners)) if partners and draw(st.integers(0, 3)) == 0 else None
        site_of[name] = sites
        g.add(
            Event(
                name,
                resources=res,
                deps=deps,
                acquires=acquires,
                releases=releases,
                colocate_with=coloc,
                duration_us=draw(st.sampled_from(DURATIONS)),
            )
        )
        names.append(name)
    return g


@pytest.fixture
def compiled_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every graph goes to the compiled loop in this test (the process-wide policy of
    when to load it is tested on its own)."""
    fastloop.compiled()
    monkeypatch.setattr(fastloop, "MIN_EVENTS", 0)
    monkeypatch.setattr(fastloop, "PLACEHOLDERS", True)


def _python(g: EventGraph, policy: str, normalize: bool = False) -> Schedule:
    """The Python loop's schedule (the compiled loop turned off)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fastloop, "MIN_EVENTS", 1 << 60)
        return schedule(g, policy=policy, normalize=normalize)


def _compiled(g: EventGraph, policy: str, normalize: bool = False) -> Schedule:
    """The schedule by the compiled loop; fails the test if the Python loop ran instead."""

    def refuse(*_args: object) -> None:
        raise AssertionError("the Python loop ran: the compiled loop declined")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(scheduler_module, "_run_keyed", refuse)
        return schedule(g, policy=policy, normalize=normalize)


def _same(a: Schedule, b: Schedule) -> None:
    assert list(a.start_us.items()) == list(b.start_us.items())
    assert list(a.end_us.items()) == list(b.end_us.items())
    assert list(a.order) == list(b.order)
    assert dict(a.resources) == dict(b.resources)
    assert a.waits.rows() == b.waits.rows()  # type: ignore[attr-defined]
    assert (a.recorded_levels is None) == (b.recorded_levels is None)
    if a.recorded_levels is not None and b.recorded_levels is not None:
        assert a.recorded_levels.curves == b.recorded_levels.curves
    assert a.policy == b.policy


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=pinned_graphs(), policy=st.sampled_from(KEYED), normalize=st.booleans())
@pytest.mark.usefixtures("compiled_loop")
def test_compiled_loop_gives_the_python_schedule(g: EventGraph, policy: str, normalize: bool) -> None:
    try:
        want = _python(g, policy, normalize)
    except SchedulingError as exc:
        # (a starved acquirer or an overflow) the compiled loop declines and the Python loop
        # raises the same error through schedule()
        cg = g.compiled()
        pol = make_policy(policy)
        pol.prepare(cg)
        before, after, _plain = scheduler_module._keys(pol, cg.n)
        if not normalize:
            assert fastloop.run_compiled(cg, before, after) is None
        with pytest.raises(SchedulingError) as again:
            schedule(g, policy=policy, normalize=normalize)
        assert str(again.value) == str(exc)
        return
    _same(want, _compiled(g, policy, normalize))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=event_graphs(max_events=12), policy=st.sampled_from(KEYED), normalize=st.booleans())
@pytest.mark.usefixtures("compiled_loop")
def test_compiled_loop_binds_placeholders_as_the_python_loop(
    g: EventGraph, policy: str, normalize: bool
) -> None:
    """Pool placeholders over three sites, colocation with an earlier event (a group binds on
    one site, fixed by its first member committed), fixed resources, and both semaphore uses
    (moeopt.testing's graphs): the same members chosen, the same schedule, or the same error."""
    try:
        want = _python(g, policy, normalize)
    except SchedulingError as exc:
        with pytest.raises(SchedulingError) as again:
            schedule(g, policy=policy, normalize=normalize)
        assert str(again.value) == str(exc)
        return
    _same(want, _compiled(g, policy, normalize))


def test_a_colocated_pair_takes_the_first_site_on_a_tie(compiled_loop: None) -> None:
    """Hand-derived: e0 and e1 (colocated) each need one member of pool a and one of pool b;
    both sites c0 and c1 have one of each, all free at 0. e0's group has no site yet and two
    placeholders, so the site is the one giving the earliest start, the first on a tie: c0.
    e1 must then bind on c0 too, after e0 ends at 1."""
    g = EventGraph(pools={"a": ["c0.a", "c1.a"], "b": ["c0.b", "c1.b"]})
    g.add(Event("e0", resources=["a:*", "b:*"], duration_us=1.0))
    g.add(Event("e1", resources=["a:*", "b:*"], colocate_with="e0", duration_us=1.0))
    s = _compiled(g, "earliest_start")
    assert dict(s.resources) == {"e0": ("c0.a", "c0.b"), "e1": ("c0.a", "c0.b")}
    assert dict(s.start_us) == {"e0": 0.0, "e1": 1.0}
    _same(_python(g, "earliest_start"), s)


def test_a_graph_whose_waiters_wake_too_often_goes_to_the_python_loop(
    compiled_loop: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no wake allowed, the first release that wakes a waiter makes the compiled loop give
    up: the schedule is the Python loop's, and the graph is not tried again. The graph: p takes
    the one unit of s, c gives it back after p, and w waits for it meanwhile."""
    monkeypatch.setattr(fastloop, "WAKES_PER_EVENT", 0)
    monkeypatch.setattr(fastloop, "WAKES_BASE", 0)
    g = EventGraph(semaphores={"s": 1})
    g.add(Event("p", resources=["c0.a"], acquires={"s": 1}, duration_us=1.0))
    g.add(Event("c", resources=["c0.a"], deps={"p": 0.0}, releases={"s": 1}, duration_us=2.0))
    g.add(Event("w", resources=["c1.a"], acquires={"s": 1}, releases={"s": 1}, duration_us=1.0))
    cg = g.compiled()
    assert fastloop.run_compiled(cg, [0.0] * 3, [0.0] * 3) is None
    assert fastloop.loop_form(cg) is None  # (declined from now on)
    _same(_python(g, "earliest_start"), schedule(g, normalize=False))


def test_a_starved_acquirer_is_reported_as_by_the_python_loop(compiled_loop: None) -> None:
    # e0 takes the only unit of s and nothing gives it back; e1 needs it: no start ever
    g = EventGraph(semaphores={"s": 1})
    g.add(Event("e0", resources=["c0.a"], acquires={"s": 1}, duration_us=1.0))
    g.add(Event("e1", resources=["c1.a"], deps={"e0": 0.0}, acquires={"s": 1}, duration_us=1.0))
    with pytest.raises(SchedulingError) as got:
        schedule(g)
    with pytest.raises(SchedulingError) as want:
        _python(g, "earliest_start")
    assert str(got.value) == str(want.value)


def test_an_overflowing_release_is_reported_as_by_the_python_loop(compiled_loop: None) -> None:
    # e0 gives back two units of a semaphore of capacity 1 having taken one
    g = EventGraph(semaphores={"s": 1})
    # (normalize=False: normalisation drops a semaphore no one waits on, and its check)
    g.add(Event("e0", resources=["c0.a"], acquires={"s": 1}, releases={"s": 2}, duration_us=1.0))
    assert fastloop.run_compiled(g.compiled(), [0.0], [0.0]) is None
    with pytest.raises(SchedulingError, match="above the capacity") as got:
        schedule(g, normalize=False)
    with pytest.raises(SchedulingError) as want:
        _python(g, "earliest_start")
    assert str(got.value) == str(want.value)


def test_a_release_brings_a_waiting_start_forward(compiled_loop: None) -> None:
    """Hand-derived: s has 1 unit. p, w and x can all start at 0; p goes first (index 0), takes
    the unit at 0 and never gives it back itself: w and x then cannot start at all (starved).
    c (on c0.a after p: 1-3 µs) gives the unit back at 3, which brings w and x forward to 3;
    w goes first on the tie (index 2 < 3) and holds the unit over [3, 4), so x starts at 4.
    w waited 3 µs for s from its t_base 0."""
    g = EventGraph(semaphores={"s": 1})
    g.add(Event("p", resources=["c0.a"], acquires={"s": 1}, duration_us=1.0))
    g.add(Event("c", resources=["c0.a"], deps={"p": 0.0}, releases={"s": 1}, duration_us=2.0))
    g.add(Event("w", resources=["c1.a"], acquires={"s": 1}, releases={"s": 1}, duration_us=1.0))
    g.add(Event("x", resources=["c1.b"], acquires={"s": 1}, releases={"s": 1}, duration_us=0.5))
    s = _compiled(g, "earliest_start")
    assert dict(s.start_us) == {"p": 0.0, "c": 1.0, "w": 3.0, "x": 4.0}
    assert s.waits["w"].semaphore == "s"
    assert s.waits["w"].semaphore_wait_us == 3.0
    _same(_python(g, "earliest_start"), s)


GATE_N = 3_000
"""Events waiting for one candidate set in the gate tests. Without gates every commit there
re-keys every waiter (about ``GATE_N ** 2 / 2`` = 4.5M pushes), far above the loop's push limit
(``16 * c + 25,000`` after ``c`` commits), so the loop would give up and ``_compiled`` fail."""


def _durations(k: int) -> float:
    return (1.0, 0.5, 2.0, 0.25)[k % 4]


def test_events_waiting_for_one_core_wait_in_its_gate(compiled_loop: None) -> None:
    """GATE_N independent events on one core, all ready at 0. Hand-derived for earliest_start:
    every one can start when the core frees up, so the keys tie on the start and the index
    decides: they run back to back in index order, e_k starting at the sum of the durations
    of e_0 .. e_{k-1}. Every keyed policy gives the Python loop's schedule."""
    g = EventGraph()
    for k in range(GATE_N):
        g.add(Event(f"e{k}", resources=["c0.a"], duration_us=_durations(k)))
    s = _compiled(g, "earliest_start")
    t = 0.0
    for k in range(GATE_N):
        assert s.start_us[f"e{k}"] == t
        t += _durations(k)
    for policy in KEYED:
        _same(_python(g, policy), _compiled(g, policy))


def test_events_waiting_for_a_pool_wait_in_its_gate(compiled_loop: None) -> None:
    """The same with pool placeholders: GATE_N events bound late to a pool of two cores;
    GATE_N / 2 colocated pairs of a pinned head on site c0 or c1 and a placeholder of a pool
    with members on both sites (it waits for the members at its head's site); and GATE_N / 2
    pairs of two placeholders whose group has no site until one of them is committed (the first
    waits for its pool's members on every site). Every keyed policy: the compiled loop takes the
    graph and gives the Python loop's schedule."""
    g = EventGraph(
        pools={"a": ["c0.a", "c1.a"], "b": ["c0.b", "c1.b", "c0.c", "c1.c"], "d": ["c0.d", "c1.d"]}
    )
    for k in range(GATE_N):
        g.add(Event(f"e{k}", resources=["a:*"], duration_us=_durations(k)))
    for k in range(GATE_N // 2):
        g.add(Event(f"h{k}", resources=[f"c{k % 2}.h"], duration_us=0.125))
        g.add(Event(f"t{k}", resources=["b:*"], colocate_with=f"h{k}", duration_us=_durations(k)))
    for k in range(GATE_N // 2):
        g.add(Event(f"u{k}", resources=["b:*"], duration_us=_durations(k + 1)))
        g.add(Event(f"v{k}", resources=["d:*"], deps={f"u{k}": 0.0}, colocate_with=f"u{k}", duration_us=0.25))
    for policy in KEYED:
        _same(_python(g, policy), _compiled(g, policy))


def test_an_event_that_may_still_change_site_waits_in_no_gate(compiled_loop: None) -> None:
    """m's group has no site yet, so the members it waits for may still change: it must not
    wait behind r in the gate of pool b's members at c0 (the hand-derived case and its
    schedule: tests/core/test_hand_cases.py)."""
    g = site_change_graph()
    s = _compiled(g, "earliest_start")
    assert dict(s.start_us) == SITE_CHANGE_STARTS
    assert s.resources["m"] == ("c1.b", "c1.k")
    for policy in KEYED:
        _same(_python(g, policy), _compiled(g, policy))


def test_several_placeholders_bind_as_the_python_loop(compiled_loop: None) -> None:
    """The hand-derived case of tests/core/test_hand_cases.py: e binds at the site whose
    members come first in their pools once the semaphore has set its start."""
    g = several_placeholders_graph()
    s = _compiled(g, "earliest_start")
    assert s.resources["e"] == ("c0.a", "c0.b")
    _same(_python(g, "earliest_start"), s)


def test_a_graph_whose_moved_keys_cost_too_much_goes_to_the_python_loop(compiled_loop: None) -> None:
    """400 events on 400 cores all hold the one unit of s: each commit moves every other start
    by the semaphore, which no gate holds, so the keys go back to the heap about 400 ** 2 / 2
    times, and the loop gives up once that passes 16 * c + 25,000 (after ~70 commits). The
    Python loop's schedule, hand-derived: they run one at a time in index order, e_k at k µs."""
    n = 400
    g = EventGraph(semaphores={"s": 1})
    for k in range(n):
        g.add(Event(f"e{k}", resources=[f"c{k}.a"], acquires={"s": 1}, releases={"s": 1}, duration_us=1.0))
    cg = g.compiled()
    assert fastloop.run_compiled(cg, [0.0] * n, [0.0] * n) is None
    assert fastloop.loop_form(cg) is None  # (declined from now on)
    s = schedule(g, normalize=False)
    assert [s.start_us[f"e{k}"] for k in range(n)] == [float(k) for k in range(n)]


@pytest.mark.parametrize("case", ["scenario_basic", "pto_m128", "bs72.staged", "basic_e8.late_aic_aiv1"])
def test_operator_graphs_under_every_policy(case: str, compiled_loop: None) -> None:
    from moeopt.trust.golden import default_configs

    sm = importlib.import_module("moeopt.megamoe.simulate")
    if case == "scenario_basic":
        from moeopt.megamoe.scenario.files import load_scenario

        scen = load_scenario(Path(__file__).resolve().parents[2] / "examples" / "scenario_basic.toml")
    else:
        scen = next(c for c in default_configs() if c.name == case).scenario()
    for rg, _ranks in sm.build_graphs(scen).values():
        for policy in KEYED:
            _same(_python(rg.graph, policy), _compiled(rg.graph, policy))


def test_placeholders_stay_with_the_python_loop_by_default() -> None:
    """fastloop.PLACEHOLDERS is off: a graph with a pool placeholder is not taken."""
    g = EventGraph(pools={"a": ["c0.a", "c1.a"]})
    g.add(Event("e0", resources=["a:*"], duration_us=1.0))
    assert fastloop.loop_form(g.compiled()) is None
    h = EventGraph()
    h.add(Event("e0", resources=["c0.a"], duration_us=1.0))
    assert fastloop.loop_form(h.compiled()) is not None


def test_a_declined_graph_does_not_count_toward_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    """A graph with a placeholder (switch off) is scheduled by the Python loop without counting
    as work for the compiled one; a pinned graph counts."""
    monkeypatch.setattr(fastloop, "_seen_events", 0)
    monkeypatch.setattr(fastloop, "MIN_EVENTS", 1)
    monkeypatch.setattr(fastloop, "LOAD_EVENTS", 1 << 40)
    g = EventGraph(pools={"a": ["c0.a", "c1.a"]})
    g.add(Event("e0", resources=["a:*"], duration_us=1.0))
    schedule(g)
    assert fastloop._seen_events == 0
    h = EventGraph()
    h.add(Event("e0", resources=["c0.a"], duration_us=1.0))
    schedule(h)
    assert fastloop._seen_events == 1


def test_when_a_process_loads_the_compiled_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Graphs below MIN_EVENTS never count; the loop is wanted once LOAD_EVENTS events of
    graphs were scheduled here or by this process's workers, and a process about to fork loads
    it then (its workers share it)."""
    monkeypatch.setattr(fastloop, "_LOOP", None)
    monkeypatch.setattr(fastloop, "_seen_events", 0)
    monkeypatch.setattr(fastloop, "MIN_EVENTS", 100)
    monkeypatch.setattr(fastloop, "LOAD_EVENTS", 1000)
    assert not fastloop.wanted(99)
    assert fastloop._seen_events == 0
    assert not fastloop.wanted(600)
    fastloop.before_fork()
    assert fastloop._LOOP is None  # (600 < 1000)
    fastloop.scheduled_elsewhere(50)  # (below MIN_EVENTS: not counted)
    fastloop.scheduled_elsewhere(300)
    assert fastloop._seen_events == 900
    fastloop.before_fork()
    assert fastloop._LOOP is None
    assert fastloop.wanted(100)  # 1000 reached
    fastloop.before_fork()
    assert fastloop._LOOP is not None


def test_a_known_job_loads_before_the_fork_once_it_pays(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers about to schedule a known number of events: the loop is loaded before the fork
    once those events reach LOAD_EVENTS per worker (loading is paid once, on one core; what it
    saves is shared out over the workers), whatever this process scheduled before."""
    monkeypatch.setattr(fastloop, "_LOOP", None)
    monkeypatch.setattr(fastloop, "_seen_events", 0)
    monkeypatch.setattr(fastloop, "LOAD_EVENTS", 1000)
    fastloop.before_fork(1999, 2)  # below 2 x 1000
    assert fastloop._LOOP is None
    fastloop.before_fork(2999, 3)
    assert fastloop._LOOP is None
    monkeypatch.setattr(fastloop, "_seen_events", 1)  # (with one event seen here: 2000 in all)
    fastloop.before_fork(1999, 2)
    assert fastloop._LOOP is not None


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.lists(st.tuples(st.integers(0, 39), st.integers(0, 39)), max_size=120), st.booleans())
def test_compiled_kahn_gives_the_python_order(n: int, pairs: list[tuple[int, int]], acyclic: bool) -> None:
    """The machine-code Kahn (fastkernel.topo_order, used when the loop is loaded and a graph
    is compiled to arrays) gives compiled._kahn's breadth-first order, on random edges with or
    without cycles (cut short at the same event when there is one)."""
    import numpy as np

    from moeopt.core.compiled import _edges_from, _kahn, _rows

    edges = sorted({(a % n, b % n) for a, b in pairs if a % n != b % n and (not acyclic or a % n < b % n)})
    preds: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:  # (a before b)
        preds[b].append(a)
    n_deps = np.array([len(p) for p in preds], np.int64)
    idx = np.array([a for p in preds for a in p], np.intp)
    e = _edges_from(n_deps, idx, np.zeros(len(idx)), n)
    sources = [i for i in range(n) if not preds[i]]
    want = _kahn(n_deps.tolist(), _rows(e.succ_ptr, e.succ_idx, e.succ_lam), sources)
    assert fastloop.topo_order(np.diff(e.pred_ptr), e.succ_ptr, e.succ_idx, sources) == want
    if acyclic:
        assert sorted(want) == list(range(n))


def _form_arrays(f: fastloop.LoopForm) -> list[object]:
    """Every field of a loop form, arrays as (dtype, list) pairs."""
    out: list[object] = []
    for v in f:
        for a in v if isinstance(v, tuple) else (v,):
            out.append((a.dtype.str, a.tolist()) if isinstance(a, np.ndarray) else a)
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=st.one_of(pinned_graphs(), event_graphs(max_events=12)))
@pytest.mark.usefixtures("compiled_loop")
def test_the_loop_form_needs_no_python_loop_tables(g: EventGraph) -> None:
    """The loop's arrays found from the semaphore signatures and site lists alone (a graph the
    compiled loop schedules first) are those found from the Python loop's tables."""
    lean = g.copy_with().compiled()
    assert lean.derived("scheduler_tables") is None
    got = fastloop._find_form(lean)
    assert lean.derived("scheduler_tables") is None  # (not made for the loop)
    full = g.copy_with().compiled()
    graph_tables(full)
    want = fastloop._find_form(full)
    assert (got is None) == (want is None)
    if got is not None and want is not None:
        assert _form_arrays(got) == _form_arrays(want)
