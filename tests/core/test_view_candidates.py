"""View policies that choose among the k earliest eligible events (``Policy.candidates``).

The scheduler then finds those k with the lazy heap of ``earliest_start`` instead of evaluating
every eligible event at every step; the schedule must be exactly the one the full evaluation
gives, ``view.earliest(k)`` must say the same in both modes, and a choice outside the k is
refused.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings

import moeopt as m
from moeopt.core.policies import LookaheadOneStep
from moeopt.core.view import SchedulerView
from moeopt.errors import SchedulingError
from moeopt.testing.strategies import event_graphs


class FullLookahead(LookaheadOneStep):
    """The same policy without the declaration: every eligible event is evaluated each step."""

    name = "lookahead_full_test"

    def __init__(self, width: int = 6) -> None:
        super().__init__(width)
        self.candidates = None


def _run(g: m.EventGraph, pol: m.Policy) -> m.Schedule | str:
    try:
        return m.schedule(g, pol)
    except SchedulingError as exc:
        return "deadlock" if "deadlock" in str(exc) else str(exc)


@settings(max_examples=200, deadline=None)
@given(event_graphs(max_events=12))
def test_candidate_mode_gives_the_schedule_of_full_evaluation(g: m.EventGraph) -> None:
    for width in (1, 2, 6):
        fast, full = _run(g, LookaheadOneStep(width)), _run(g, FullLookahead(width))
        if isinstance(fast, str) or isinstance(full, str):
            assert fast == full
            continue
        assert fast.start_us == full.start_us, width
        assert fast.resources == full.resources, width


def _earliest_graph() -> m.EventGraph:
    # c0.x busy by "a" (0..4); "b" waits for it; "c" on its own core from 1 (lambda 1 after
    # "z"); "d" holds 2 units of s for 1 us, but "p" keeps 1 for ever (no consumer): d never
    # starts.
    g = m.EventGraph(semaphores={"s": 2})
    g.add(m.Event("p", resources=["c9.x"], acquires={"s": 1}, duration_us=0.5))
    g.add(m.Event("z", resources=["c8.x"], duration_us=0.0))
    g.add(m.Event("a", resources=["c0.x"], duration_us=4.0))
    g.add(m.Event("b", resources=["c0.x"], duration_us=1.0))
    g.add(m.Event("c", resources=["c1.x"], deps={"z": 1.0}, duration_us=1.0))
    g.add(
        m.Event("d", resources=["c2.x"], deps={"p": 0.0}, acquires={"s": 2}, releases={"s": 2}, duration_us=1.0)
    )
    return g


@pytest.mark.parametrize("declared", [3, None])
def test_earliest_orders_by_start_then_position_with_the_unstartable_last(declared: int | None) -> None:
    seen: list[list[str]] = []

    class Recorder(m.Policy):
        name = "recorder_test"
        wants_view = True
        candidates = declared

        def choose(self, view: SchedulerView) -> str:
            got = view.earliest(3)
            seen.append(got)
            return got[0]

    g = _earliest_graph()
    with pytest.raises(SchedulingError, match="deadlock"):  # d never starts
        m.schedule(g, Recorder())
    # Hand-derived steps (p, z, a all start at 0: position order p, z, a):
    #   1: p 0, z 0, a 0, b 0 (c, d not eligible) -> [p, z, a]; commit p (1 unit kept for ever)
    #   2: z 0, a 0, b 0, d inf -> [z, a, b]; commit z; c becomes eligible, ready at 0 + 1 = 1
    #   3: a 0, b 0, c 1, d inf -> [a, b, c]; commit a (c0.x busy until 4)
    #   4: c 1, b 4, d inf -> [c, b, d]; commit c
    #   5: b 4, d inf -> [b, d]; commit b; then only d, which never starts: deadlock
    # (without the declaration the policy is asked once more, [d], before the deadlock is found)
    assert seen[:5] == [["p", "z", "a"], ["z", "a", "b"], ["a", "b", "c"], ["c", "b", "d"], ["b", "d"]]
    assert seen[5:] == ([] if declared else [["d"]])


def test_a_choice_outside_the_declared_candidates_is_refused() -> None:
    class Last(m.Policy):
        name = "last_test"
        wants_view = True
        candidates = 1

        def choose(self, view: SchedulerView) -> str:
            return view.eligible()[-1]

    g = m.EventGraph()
    g.add(m.Event("a", resources=["c0.x"], duration_us=1.0))
    g.add(m.Event("b", resources=["c1.x"], duration_us=1.0))
    with pytest.raises(SchedulingError, match=r"chose 'b', which is not among the 1 earliest eligible events"):
        m.schedule(g, Last())


@pytest.mark.parametrize("bad", [0, -1, 2.5, "3", True])
def test_a_bad_candidates_value_is_refused(bad: object) -> None:
    class Odd(m.Policy):
        name = "odd_test"
        wants_view = True
        candidates = bad  # type: ignore[assignment]

        def choose(self, view: SchedulerView) -> str:
            return view.eligible()[0]

    g = m.EventGraph()
    g.add(m.Event("a"))
    with pytest.raises(m.InputError, match=r"candidates must be None or an integer >= 1"):
        m.schedule(g, Odd())


def test_a_keyed_policy_cannot_declare_candidates() -> None:
    class Keyed(m.Policy):
        name = "keyed_test"
        candidates = 2

    g = m.EventGraph()
    g.add(m.Event("a"))
    with pytest.raises(m.InputError, match=r"on a keyed policy"):
        m.schedule(g, Keyed())
