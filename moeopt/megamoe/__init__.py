"""The MegaMoE adapter: scenario -> routing -> wave plan -> event graph -> schedule -> analyses."""

from moeopt.megamoe.audit import KnobVerdict, audit_knobs, format_audit
from moeopt.megamoe.compare import VariantRow, compare_variants, format_design_space
from moeopt.megamoe.domain import DomainReport, domain_report, format_domain
from moeopt.megamoe.errors import (
    BoundViolation,
    GuardrailError,
    NotModelledError,
    RouteConservationError,
    ScenarioError,
    WorkConservationViolation,
)
from moeopt.megamoe.gap import RankGap, ScenarioGap, optimality_gap
from moeopt.megamoe.knobs import Knob, knob_catalogue
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
from moeopt.megamoe.sensitivity import SensitivityReport, calibration_sensitivity, format_sensitivity
from moeopt.megamoe.simulate import build_graphs, simulate

__all__ = [
    "BoundViolation",
    "DomainReport",
    "GuardrailError",
    "Kernel",
    "Knob",
    "KnobVerdict",
    "Link",
    "NotModelledError",
    "Options",
    "PolicyConfig",
    "RankGap",
    "RouteConservationError",
    "Scenario",
    "ScenarioError",
    "ScenarioGap",
    "SensitivityReport",
    "VariantRow",
    "WorkConservationViolation",
    "Workload",
    "audit_knobs",
    "build_graphs",
    "calibration_sensitivity",
    "compare_variants",
    "domain_report",
    "format_audit",
    "format_design_space",
    "format_domain",
    "format_sensitivity",
    "knob_catalogue",
    "load_scenario",
    "optimality_gap",
    "parse_override_value",
    "simulate",
]
