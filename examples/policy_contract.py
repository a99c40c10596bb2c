"""A scheduling policy of your own, registered by name and checked with moeopt's policy contract
suite (needs pytest and Hypothesis: pip install "moeopt[testing]"):

    python -m pytest -q examples/policy_contract.py
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import moeopt as m
from moeopt import registry
from moeopt.core.compiled import CompiledGraph
from moeopt.testing import PolicyContract


class MostSuccessorsFirst(m.Policy):
    """Commit the eligible event that unblocks the most others first (ties: earliest start)."""

    name = "most_successors_first"
    work_conserving = False  # a core may wait for an event that starts later but unblocks more

    def prepare(self, cg: CompiledGraph) -> None:
        self._before = [-float(len(succs)) for succs in cg.succs]

    def rank(self, i: int) -> tuple[float, float]:
        return (self._before[i], 0.0)


class TestMostSuccessorsFirst(PolicyContract):
    max_examples = 30  # random graphs per check (default 100)

    @pytest.fixture
    def policy(self) -> Iterator[str]:
        # registered while each test runs; a scenario's policy.scheduling could now name it
        with registry.registered("policy", MostSuccessorsFirst.name, MostSuccessorsFirst) as name:
            yield name
