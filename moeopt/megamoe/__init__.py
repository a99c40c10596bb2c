"""The MegaMoE adapter: scenario -> routing -> wave plan -> event graph -> schedule -> analyses.

Only the model lives here. The questions asked of it (optimality gap, design-space comparison,
sensitivity, knob audit, calibration domain, golden fingerprints, HTML report) are in
:mod:`moeopt.trust`; the command line is :mod:`moeopt.cli`.
"""

from moeopt.megamoe.errors import (
    BoundViolation,
    ContractError,
    GuardrailError,
    NotModelledError,
    RouteConservationError,
    ScenarioError,
    WorkConservationViolation,
)
from moeopt.megamoe.kerneltime import KernelTime, kernel_time
from moeopt.megamoe.knobs import Knob, knob_catalogue
from moeopt.megamoe.results import RankResult, SimulateResult
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
from moeopt.megamoe.simulate import build_graphs, guard_schedule, schedule_rank, simulate

__all__ = [
    "BoundViolation",
    "ContractError",
    "GuardrailError",
    "Kernel",
    "KernelTime",
    "Knob",
    "Link",
    "NotModelledError",
    "Options",
    "PolicyConfig",
    "RankResult",
    "RouteConservationError",
    "Scenario",
    "ScenarioError",
    "SimulateResult",
    "WorkConservationViolation",
    "Workload",
    "build_graphs",
    "guard_schedule",
    "kernel_time",
    "knob_catalogue",
    "load_scenario",
    "parse_override_value",
    "schedule_rank",
    "simulate",
]
