"""The generic restructure hook: re-pinning pending events within a pool while the greedy runs.

Expected schedules are worked out by hand from the greedy's rules (earliest start, ties by the
order events were added) and the hook's rule; each derivation is in a comment.
"""

from __future__ import annotations

import dataclasses

import pytest

import moeopt as m
from moeopt.core.restructure import Restructure, RestructureControl, repinned_graph
from moeopt.errors import ScheduleError, SchedulingError


def _graph(colocate: bool = False) -> m.EventGraph:
    # three unit events pinned to c0, nothing on c1; c0 and c1 form the pool "P"
    g = m.EventGraph(pools={"P": ["c0.AIC", "c1.AIC"]})
    for k in (1, 2, 3):
        g.add(m.Event(f"a{k}", resources=["c0.AIC"], duration_us=1.0))
    if colocate:
        g.add(m.Event("b", resources=["c0.AIV"], duration_us=1.0, colocate_with="a3"))
    return g


class MoveOnce(Restructure):
    """After the first commit, move one event from one resource to another."""

    def __init__(self, event: str, old: str, new: str) -> None:
        self.args = (event, old, new)
        self.calls = 0

    def prepare(self, cg) -> None:  # type: ignore[no-untyped-def]
        self.cg = cg

    def after_commit(self, i: int, ctl: RestructureControl) -> None:
        self.calls += 1
        if self.calls == 1:
            ev, old, new = self.args
            ctl.repin(self.cg.index[ev], self.cg.res_index[old], self.cg.res_index[new])


@pytest.mark.parametrize("policy", ["earliest_start", "lookahead_one_step"])
def test_a_re_pinned_event_runs_on_its_new_member_and_the_schedule_says_so(policy):
    g = _graph()
    hook = MoveOnce("a3", "c0.AIC", "c1.AIC")
    s = m.schedule(g, policy, restructure=hook)
    # a1 commits first ([0, 1] on c0, ties by order); then a3 moves to the idle c1 and starts at 0;
    # a2 follows a1 on c0: makespan 2 instead of 3
    assert (s.start_us["a1"], s.start_us["a2"], s.start_us["a3"]) == (0.0, 1.0, 0.0)
    assert s.resources["a3"] == ("c1.AIC",)
    assert s.makespan_us == 2.0
    assert dict(s.repinned) == {"a3": ("c0.AIC", "c1.AIC")}
    assert hook.calls == 3  # once per commit
    m.validate_schedule(g, s)  # the recorded move is legal: c0 and c1 share pool P
    # without the record the binding breaks the graph's fixed resource
    with pytest.raises(ScheduleError, match="needs resource 'c0.AIC'"):
        m.validate_schedule(g, dataclasses.replace(s, repinned={}))
    # the graph with the event where it ran: an ordinary valid schedule of it
    moved = repinned_graph(g, s.repinned)
    assert moved.events["a3"].resources == ("c1.AIC",)
    m.validate_schedule(moved, dataclasses.replace(s, repinned={}))


def test_without_a_hook_nothing_moves():
    s = m.schedule(_graph())
    assert s.makespan_us == 3.0
    assert dict(s.repinned) == {}


def test_the_validator_refuses_a_recorded_move_outside_every_pool():
    g = _graph()
    g2 = m.EventGraph(pools={"P": ["c0.AIC", "c2.AIC"]})
    for ev in g.events.values():
        g2.add(ev)
    g2.add(m.Event("z", resources=["c1.AIC"], duration_us=0.5))
    s = m.schedule(g2)
    forged = dataclasses.replace(
        s,
        resources={**s.resources, "a3": ("c1.AIC",)},
        repinned={"a3": ("c0.AIC", "c1.AIC")},
    )
    with pytest.raises(ScheduleError, match="no pool of the graph contains both"):
        m.validate_schedule(g2, forged)


@pytest.mark.parametrize(
    ("event", "old", "new", "match"),
    [
        ("a3", "c0.AIC", "c9.AIC", "no declared pool contains both"),
        ("a1", "c0.AIC", "c1.AIC", "already committed"),
        ("a3", "c1.AIC", "c0.AIC", "is not pinned to 'c1.AIC'"),
    ],
)
def test_illegal_re_pins_are_refused_with_the_reason(event, old, new, match):
    g = _graph()
    g.add(m.Event("x", resources=["c9.AIC"], duration_us=1.0))
    with pytest.raises(SchedulingError, match=match):
        m.schedule(g, restructure=MoveOnce(event, old, new))


def test_a_colocated_event_cannot_move_alone():
    with pytest.raises(SchedulingError, match="colocated with other events"):
        m.schedule(_graph(colocate=True), restructure=MoveOnce("a3", "c0.AIC", "c1.AIC"))
