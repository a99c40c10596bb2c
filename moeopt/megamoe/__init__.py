"""The MegaMoE adapter: scenario -> routing -> wave plan -> event graph -> schedule -> analyses."""

from moeopt.megamoe.errors import (
    BoundViolation,
    GuardrailError,
    NotModelledError,
    RouteConservationError,
    ScenarioError,
    WorkConservationViolation,
)
from moeopt.megamoe.scenario import (
    Kernel,
    Link,
    Options,
    PolicyConfig,
    Scenario,
    Workload,
    load_scenario,
    parse_override_value,
)
from moeopt.megamoe.simulate import build_graphs, simulate

__all__ = [
    "BoundViolation",
    "GuardrailError",
    "Kernel",
    "Link",
    "NotModelledError",
    "Options",
    "PolicyConfig",
    "RouteConservationError",
    "Scenario",
    "ScenarioError",
    "WorkConservationViolation",
    "Workload",
    "build_graphs",
    "load_scenario",
    "parse_override_value",
    "simulate",
]
