"""Errors of the MegaMoE adapter. All derive from :class:`moeopt.errors.MoeoptError`."""

from __future__ import annotations

from collections.abc import Mapping

from moeopt.errors import InputError, MoeoptError
from moeopt.megamoe.results import IdleSample, PhysicalBounds


class ScenarioError(InputError):
    """A scenario (file, override or constructor argument) is invalid."""


class NotModelledError(ScenarioError):
    """A value that can be written but whose effect the model does not represent.

    Raised instead of silently ignoring the value: a sweep over an ignored knob would read as
    "no gain" where the truth is "not measured".
    """


class RouteConservationError(ScenarioError):
    """A routing counts matrix does not hold exactly tokens × topk routes per source rank."""


class GuardrailError(MoeoptError, RuntimeError):
    """A model-level guardrail fired: the result must not be used for a decision."""


class BoundViolation(GuardrailError):
    """The simulated time is below a physical lower bound: some cost was missed."""

    def __init__(self, message: str, bounds: PhysicalBounds | None = None) -> None:
        super().__init__(message)
        self.bounds: Mapping[str, object] = bounds or {}  # the rank's bounds (empty when not given)


class ContractError(GuardrailError):
    """The grouped-GEMM tables are inconsistent with the routing, with the kernel addressing, or
    with the blocks the graph builder computes (:mod:`moeopt.megamoe.contract`)."""


class WorkConservationViolation(GuardrailError):
    """A late-bound pool left a member idle while work for it was ready."""

    def __init__(self, message: str, samples: list[IdleSample] | None = None) -> None:
        super().__init__(message)
        self.samples = samples or []  # the pool's avoidable-idle samples
