"""A user's policy, registered by name with the registry's scoped API, checked with the public
contract suite exactly as a user would (subclass PolicyContract); and the suite fails on
policies that break the contract."""

from __future__ import annotations

import os

import pytest

import moeopt as m
from moeopt import registry
from moeopt.core.compiled import CompiledGraph
from moeopt.testing import PolicyContract


class ShortestFirst(m.Policy):
    """A toy keyed policy: the shortest eligible event first, then the earliest start."""

    name = "test_toy_shortest_first"
    work_conserving = False

    def __init__(self) -> None:
        self._dur: tuple[float, ...] = ()

    def prepare(self, cg: CompiledGraph) -> None:
        self._dur = cg.dur

    def rank(self, i: int) -> tuple[float, float]:
        return (self._dur[i], 0.0)


class TestShortestFirst(PolicyContract):
    max_examples = 60

    @pytest.fixture
    def policy(self):  # type: ignore[no-untyped-def]
        with registry.registered("policy", ShortestFirst.name, ShortestFirst) as name:
            yield name


def test_the_toy_policy_is_registered_only_while_its_tests_run() -> None:
    assert ShortestFirst.name not in registry.names("policy")


# --- policies that break the contract, and the suite catching each (the classes are not named
# Test*, so pytest does not collect them)


class StageFirst(m.Policy):
    """Ranks by the "stage" label without declaring reads_labels."""

    name = "test_stage_first"

    def prepare(self, cg: CompiledGraph) -> None:
        order = {"z": 0.0, "y": 1.0, "x": 2.0}
        self._rank = [order.get(ev.labels.get("stage", ""), 3.0) for ev in cg.events]

    def rank(self, i: int) -> tuple[float, float]:
        return (self._rank[i], 0.0)


class ProcessDependent(m.Policy):
    """Last added first in a process started with PYTHONHASHSEED=1, first added first elsewhere:
    a stand-in for a policy whose choices follow hash() order or other per-process state."""

    name = "test_process_dependent"

    def rank(self, i: int) -> tuple[float, float]:
        return (-float(i) if os.environ.get("PYTHONHASHSEED") == "1" else float(i), 0.0)


class RemembersRuns(m.Policy):
    """First added first on its first run, last added first on every later run: state kept
    between runs (a fresh object always behaves the same; a reused one does not)."""

    name = "test_remembers_runs"

    def __init__(self) -> None:
        self.runs = 0

    def prepare(self, cg: CompiledGraph) -> None:
        self.runs += 1

    def rank(self, i: int) -> tuple[float, float]:
        return (-float(i) if self.runs > 1 else float(i), 0.0)


class Contract(PolicyContract):
    max_examples = 100
    fresh_interpreter_graphs = 40


def test_the_suite_catches_a_policy_reading_labels() -> None:
    with pytest.raises(AssertionError, match="other labels give another schedule"):
        Contract().test_every_schedule_keeps_the_contract(StageFirst())


def test_the_suite_catches_a_policy_that_depends_on_the_process() -> None:
    if os.environ.get("PYTHONHASHSEED") == "1":
        pytest.skip("the other interpreter runs with PYTHONHASHSEED=2 here, and this policy ignores that")
    with pytest.raises(AssertionError, match="get another schedule in an interpreter with PYTHONHASHSEED=1"):
        Contract().test_same_schedules_in_a_fresh_interpreter(ProcessDependent())


def test_the_suite_catches_a_policy_that_keeps_state_between_runs() -> None:
    # the object reused across graphs turns its order round after its first run; fresh objects
    # never do
    with pytest.raises(AssertionError, match="keeps state between runs"):
        Contract().test_every_schedule_keeps_the_contract(RemembersRuns())
