"""Forward-backward improvement of list schedules (:mod:`moeopt.exact.improve`)."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings

import moeopt as m
from moeopt.core.schedule import Schedule
from moeopt.exact import solve_exact
from moeopt.exact.improve import Improver, reversed_graph, reversible
from moeopt.testing.strategies import event_graphs
from tests.exact.strategies import held_graphs


def _mirror(g: m.EventGraph, back: Schedule) -> Schedule:
    span = back.makespan_us
    return Schedule(
        start_us={n: span - back.end_us[n] for n in g.events},
        end_us={n: span - back.start_us[n] for n in g.events},
        resources={n: back.resources[n] for n in g.events},
    )


@settings(max_examples=80, deadline=None)
@given(event_graphs())
def test_a_schedule_of_the_reversed_graph_mirrors_into_a_valid_schedule(g: m.EventGraph) -> None:
    assume(reversible(g.compiled()))
    back_graph = reversed_graph(g)
    try:
        back = m.schedule(back_graph)
    except (m.GraphError, m.SchedulingError):
        assume(False)
        return
    m.validate_schedule(back_graph, back)
    mirrored = _mirror(g, back)
    m.validate_schedule(g, mirrored)
    assert mirrored.makespan_us == pytest.approx(back.makespan_us)


@settings(max_examples=60, deadline=None)
@given(held_graphs())
def test_improvement_is_valid_and_never_worse(g: m.EventGraph) -> None:
    starts = [m.schedule(g, p) for p in ("earliest_start", "critical_path_first")]
    best = Improver(g).improve(starts, 0.05)
    m.validate_schedule(g, best)
    assert best.makespan_us <= min(s.makespan_us for s in starts) + 1e-9


def _greedy_trap() -> m.EventGraph:
    """Six jobs on one resource R of 4 units (RCPSP-style): chain e0 (4 µs, 1 unit) -> e1 (1 µs,
    3 units) -> e5 (4 µs, all 4 units); chain e2 (1 µs, all 4) -> e4 (4 µs, 1 unit); e3 (3 µs,
    3 units) alone."""
    g = m.EventGraph(semaphores={"R": 4})
    for name, units, deps, d in (
        ("e0", 1, {}, 4.0),
        ("e1", 3, {"e0": 0.0}, 1.0),
        ("e2", 4, {}, 1.0),
        ("e3", 3, {}, 3.0),
        ("e4", 1, {"e2": 0.0}, 4.0),
        ("e5", 4, {"e1": 0.0}, 4.0),
    ):
        g.add(m.Event(name, deps=deps, acquires={"R": units}, releases={"R": units}, duration_us=d))
    return g


def test_one_forward_backward_pass_beats_every_greedy_policy() -> None:
    # Greedy (every built-in policy): e0 and e3 start at 0 (1 + 3 units); e2 needs all 4 and waits
    # for e0 to end at 4, where e1 (added first) takes 3 units [4, 5), so e2 runs [5, 6), e4
    # [6, 10) holds 1 unit, and e5 (all 4) waits for it: [10, 14). Makespan 14.
    g = _greedy_trap()
    for policy in ("earliest_start", "critical_path_first", "work_conserving_critical_path"):
        assert m.schedule(g, policy).makespan_us == pytest.approx(14.0)
    # One pass: the backward schedule puts e2 before e1, and the forward pass keeps that order:
    # e2 [4, 5), then e1 [5, 6) beside e4 [5, 9) (3 + 1 units), e5 [9, 13). Makespan 13.
    better = Improver(g).justify(m.schedule(g))
    assert better is not None
    m.validate_schedule(g, better)
    assert better.makespan_us == pytest.approx(13.0)
    assert (better.start_us["e2"], better.start_us["e1"], better.start_us["e5"]) == (4.0, 5.0, 9.0)


def test_solve_exact_reports_an_improved_hint() -> None:
    # The hint runs the two 2-µs jobs of c0.X one after the other behind a 3-µs wait that one
    # of them does not need: a valid but poor schedule of makespan 7. The improvement starts
    # from it and finds 5 (free job [0, 2), gated job [3, 5)); CP-SAT cannot do better (the
    # gated job cannot start before 3), so the answer is 5 and it is proven.
    g = m.EventGraph()
    g.add(m.Event("wait", duration_us=3.0))
    g.add(m.Event("gated", resources=["c0.X"], deps={"wait": 0.0}, duration_us=2.0))
    g.add(m.Event("free", resources=["c0.X"], duration_us=2.0))
    poor = Schedule(
        start_us={"wait": 0.0, "gated": 3.0, "free": 5.0},
        end_us={"wait": 3.0, "gated": 5.0, "free": 7.0},
        resources={"wait": (), "gated": ("c0.X",), "free": ("c0.X",)},
    )
    m.validate_schedule(g, poor)
    x = solve_exact(g, 5.0, 1, hint=poor)
    assert x.best_us == pytest.approx(5.0)
    assert x.proven_optimal
    assert x.best_source in ("improved", "cpsat")
    y = solve_exact(g, 5.0, 1, hint=poor, improve_share=0.0, skip_proven=True)
    assert y.best_source in ("cpsat", "hint")
    with pytest.raises(m.InputError, match=r"improve_share must be a number in \[0, 1\), got 1.5"):
        solve_exact(g, 5.0, 1, improve_share=1.5)


class _Ticking:
    """A fake clock for :mod:`moeopt.exact.improve`: one second per reading."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


class _Gaining(Improver):
    """Every forward-backward pass 'finds' a schedule 0.1% shorter than the last it found (a
    scaled copy: improve() only reads makespans and starts), or nothing at all with
    ``gains=False``."""

    def __init__(self, g: m.EventGraph, gains: bool) -> None:
        super().__init__(g)
        self.gains = gains
        self.found: Schedule | None = None

    def justify(self, s: Schedule) -> Schedule | None:
        if not self.gains:
            return None
        last = s if self.found is None else self.found
        k = 0.999
        self.found = Schedule(
            start_us={n: k * v for n, v in last.start_us.items()},
            end_us={n: k * v for n, v in last.end_us.items()},
            resources=dict(last.resources),
        )
        return self.found


def test_the_passes_stop_once_stalled_and_not_while_they_gain(monkeypatch: pytest.MonkeyPatch) -> None:
    import moeopt.exact.improve as improve

    g = _greedy_trap()
    start = m.schedule(g)
    # no pass ever gains: with a 100 s budget, the passes give up once idle for STALL_SHARE of it
    # (25 s on the fake clock, one second per reading), far before the budget
    clock = _Ticking()
    monkeypatch.setattr(improve, "_clock", clock)
    best = _Gaining(g, gains=False).improve([start], 100.0)
    assert best is start
    assert 25.0 < clock.now <= 25.0 + 3.0  # the reading that found the stall, give or take a pass
    # every pass gains: never stalled, the passes run until the budget is spent
    clock = _Ticking()
    monkeypatch.setattr(improve, "_clock", clock)
    best = _Gaining(g, gains=True).improve([start], 100.0)
    assert best.makespan_us < start.makespan_us
    assert clock.now >= 100.0


@settings(max_examples=40, deadline=None)
@given(held_graphs())
def test_restarts_are_valid_never_worse_and_never_below_the_optimum(g: m.EventGraph) -> None:
    from tests.exact.brute import optimum

    start = max(
        (m.schedule(g, p) for p in ("earliest_start", "critical_path_first")), key=lambda s: s.makespan_us
    )
    best = Improver(g).restarts(start, 0.05)
    m.validate_schedule(g, best)
    assert best.makespan_us <= start.makespan_us + 1e-9
    opt, _sched = optimum(g)
    assert best.makespan_us >= opt - 1e-9


def test_restart_orders_run_from_the_earliest_start_through_the_latest_start() -> None:
    # _greedy_trap: longest path e0 -> e1 -> e5 = 4 + 1 + 4 = 9; e2 -> e4 has 9 − 5 = 4 of slack
    # (head 0), e3 6 (head 0), e4 4 (head 1), the chain e0, e1, e5 none. Priority of an event:
    # head + α · slack, each α of RESTART_SLACK_SHARES twice (parallel, then serial).
    import moeopt.exact.improve as improve

    g = _greedy_trap()
    orders = Improver(g).restart_priorities()
    assert [parallel for _p, parallel in orders] == [True, False] * len(improve.RESTART_SLACK_SHARES)
    names = g.compiled().names
    for k, alpha in enumerate(improve.RESTART_SLACK_SHARES):
        prio = dict(zip(names, orders[2 * k][0]))
        assert prio == pytest.approx(
            {"e0": 0.0, "e1": 4.0, "e2": 4 * alpha, "e3": 6 * alpha, "e4": 1.0 + 4 * alpha, "e5": 5.0}
        )


def test_graph_optimality_gap_takes_a_better_restarted_schedule_and_keeps_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the trap's optimum (13, one forward-backward pass from the greedy's 14, see above) stands
    # in for what the restarts find after a solve left the greedy's 14 unproven
    from moeopt.exact import gap as exact_gap
    from moeopt.exact.improve import Improver as RealImprover
    from moeopt.exact.result import SolveStatus

    g = _greedy_trap()
    better = RealImprover(g).justify(m.schedule(g))
    assert better is not None
    assert better.makespan_us == pytest.approx(13.0)
    real_solve = exact_gap.solve_exact

    def unproven(*args: object, **kwargs: object) -> object:
        from dataclasses import replace

        x = real_solve(*args, **kwargs)  # type: ignore[arg-type]
        poor = m.schedule(g)
        return replace(
            x, schedule=poor, best_us=poor.makespan_us, lower_bound_us=12.0, status=SolveStatus.FEASIBLE
        )

    calls: list[tuple[float, float]] = []

    def restarts(self: RealImprover, best: Schedule, budget_s: float, target_us: float = 0.0) -> Schedule:
        calls.append((budget_s, target_us))  # the target: the bound, nothing below it to look for
        return better

    monkeypatch.setattr(exact_gap, "solve_exact", unproven)
    monkeypatch.setattr(RealImprover, "restarts", restarts)
    rep = exact_gap.graph_optimality_gap(g, time_limit_s=2.0, restart_share=0.5)
    assert calls == [(1.0, 12.0)]  # half of the time limit, down to the bound
    assert rep.exact.best_us == pytest.approx(13.0)
    assert rep.exact.best_source == "restarted"
    assert rep.exact.schedule is better
    assert rep.exact.lower_bound_us == 12.0
    assert rep.exact.status is SolveStatus.FEASIBLE
    m.validate_schedule(g, rep.exact.schedule)
    # reaching the bound proves the restarted schedule optimal; none when the solve proved it
    monkeypatch.setattr(
        exact_gap,
        "solve_exact",
        lambda *a, **k: __import__("dataclasses").replace(unproven(*a, **k), lower_bound_us=13.0),
    )
    assert exact_gap.graph_optimality_gap(g, time_limit_s=2.0, restart_share=0.5).exact.proven_optimal
    monkeypatch.setattr(exact_gap, "solve_exact", real_solve)
    calls.clear()
    proven = exact_gap.graph_optimality_gap(g, time_limit_s=2.0, restart_share=0.5)
    assert proven.exact.proven_optimal
    assert calls == []
    # by default only graphs the solver improves by passes (above IMPROVE_LARGE_EVENTS) restart
    monkeypatch.setattr(exact_gap, "solve_exact", unproven)
    assert exact_gap.graph_optimality_gap(g, time_limit_s=2.0).exact.best_source != "restarted"
    assert calls == []
