"""A starved event ranked before every other pending event must not be woken for ever.

The scheduler keeps events that semaphores starve (no start possible with what is committed) in
groups woken by a token after a release. An event evaluated as starved again right after such a
wake used to be woken again at once when its group was awake: with a rank that put it before
every other pending event, nothing else was ever committed, the release it waited for never
came, and the token heap grew without bound (a CI run hung at 5 GB in the policy contract
example). Such an event now waits for the next release on its semaphore.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import moeopt as m
from moeopt.core.compiled import CompiledGraph
from moeopt.core.events import Event, EventGraph
from moeopt.core.scheduler import schedule
from moeopt.errors import SchedulingError
from moeopt.testing.naive import naive_schedule
from moeopt.testing.strategies import event_graphs


class FixedRanks(m.Policy):
    """Ranks each event by a number given per name (lower first); not work-conserving."""

    name = "fixed_ranks_test"
    work_conserving = False

    def __init__(self, ranks: dict[str, float]) -> None:
        self.ranks = ranks
        self._b: list[float] = []

    def prepare(self, cg: CompiledGraph) -> None:
        self._b = [float(self.ranks.get(nm, 0.0)) for nm in cg.names]

    def rank(self, i: int) -> tuple[float, float]:
        return (self._b[i], 0.0)


class _Hang(Exception):
    pass


@contextmanager
def _within(seconds: int) -> Iterator[None]:
    """Turns a livelock into a failure after ``seconds`` instead of a hung suite."""

    def fire(_sig: int, _frame: FrameType | None) -> None:
        raise _Hang(f"the scheduler did not finish within {seconds} s (livelock)")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture
def watchdog() -> Iterator[None]:
    with _within(20):
        yield


def test_two_starved_events_and_a_late_release(watchdog: None) -> None:
    # Semaphore s, 2 units. P1, P2 each take 1 and keep it until their consumer C1 / C2 gives it
    # back at its end. H1, H2 need both units for their duration. Ranks: P (-20) < H1 (-5) <
    # H2 (-4.5) < C1 (-4) < C2 (0). Hand-derived schedule:
    #   P1, P2: start 0, end 1 (own cores, 1 free unit each at 0).
    #   H1, H2 ready at 1 but starved (0 units free for ever after P1, P2).
    #   C1: ready at P1's end 1, ends 2 -> 1 unit free from 2; H1 is woken and still starved.
    #   C2: ready at P2's end 1 + lambda 3 = 4, ends 4 + 5 = 9 -> 2 units free from 9.
    #   H1: 9..10 (it holds both units); H2: after H1 gives them back, 10..11.
    # Before the fix, H1 (ranked before C2) was woken and refused for ever, and C2 never ran.
    g = EventGraph(semaphores={"s": 2}, pools={})
    g.add(Event("P1", resources=["c0.a"], acquires={"s": 1}, duration_us=1.0))
    g.add(Event("P2", resources=["c1.a"], acquires={"s": 1}, duration_us=1.0))
    for h, core in (("H1", "c2.a"), ("H2", "c3.a")):
        g.add(
            Event(
                h,
                resources=[core],
                acquires={"s": 2},
                releases={"s": 2},
                duration_us=1.0,
                deps={"P1": 0.0, "P2": 0.0},
            )
        )
    g.add(Event("C1", resources=["c4.a"], releases={"s": 1}, duration_us=1.0, deps={"P1": 0.0}))
    g.add(Event("C2", resources=["c5.a"], releases={"s": 1}, duration_us=5.0, deps={"P2": 3.0}))
    ranks = {"P1": -20, "P2": -20, "H1": -5, "H2": -4.5, "C1": -4, "C2": 0}
    s = schedule(g, FixedRanks(ranks))
    want = {"P1": 0, "P2": 0, "C1": 1, "C2": 4, "H1": 9, "H2": 10}
    assert {k: s.start_us[k] for k in want} == pytest.approx(want)
    assert s.end_us["H2"] == pytest.approx(11.0)


@settings(max_examples=300, deadline=None)
@given(g=event_graphs(max_events=9), data=st.data())
def test_any_ranks_finish_and_match_the_naive_scheduler(g: EventGraph, data: st.DataObject) -> None:
    """Per-event ranks drawn at random (ties included): the scheduler finishes and gives the
    naive reference's schedule, or both deadlock."""
    ranks = {name: data.draw(st.integers(-3, 3), label=name) for name in g.events}
    with _within(20):
        try:
            s = schedule(g, FixedRanks(ranks))
        except SchedulingError:
            s = None
    try:
        ref = naive_schedule(g, FixedRanks(ranks))
    except SchedulingError:
        assert s is None, "the naive scheduler deadlocks, the scheduler does not"
        return
    assert s is not None, "the scheduler deadlocks, the naive scheduler does not"
    for name, (start, end, bound) in ref.items():
        assert s.start_us[name] == pytest.approx(start, abs=1e-9), name
        assert s.end_us[name] == pytest.approx(end, abs=1e-9), name
        assert s.resources[name] == bound, name
