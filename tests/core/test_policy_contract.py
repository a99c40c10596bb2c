"""Every built-in policy goes through the public policy contract suite (moeopt.testing), the one a
user runs on their own policy: valid, above the lower bounds, deterministic (also in another
interpreter), blind to labels, unchanged by semaphore normalisation, equal to the naive
scheduler (keyed policies)."""

from __future__ import annotations

import pytest

from moeopt.core.policies import BUILTIN_POLICIES
from moeopt.testing import PolicyContract


class BuiltinContract(PolicyContract):
    """A built-in policy by its registered name (150 graphs per check, as before the suite)."""

    name = ""
    max_examples = 150

    @pytest.fixture
    def policy(self) -> str:
        return self.name


class TestEarliestStart(BuiltinContract):
    name = "earliest_start"


class TestCriticalPathFirst(BuiltinContract):
    name = "critical_path_first"


class TestWorkConservingCriticalPath(BuiltinContract):
    name = "work_conserving_critical_path"


class TestPriorityByStage(BuiltinContract):
    name = "priority_by_stage"
    reads_labels = True  # it ranks events by their "stage" label: that is the policy


class TestLookaheadOneStep(BuiltinContract):
    name = "lookahead_one_step"


def test_every_builtin_policy_goes_through_the_suite() -> None:
    covered = {cls.name for cls in BuiltinContract.__subclasses__()}
    assert covered == set(BUILTIN_POLICIES)
