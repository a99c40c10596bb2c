"""The questions asked of the MegaMoE model: how far from optimal (gap), what a choice costs
(compare), how much the conclusion depends on the calibration (sensitivity), which knobs act
(audit), whether the constants are used where they were measured (domain), whether schedules
moved (golden), and one HTML page of a run (report)."""

from moeopt.trust.audit import KnobVerdict, audit_knobs, format_audit
from moeopt.trust.compare import VariantRow, compare_variants, format_design_space
from moeopt.trust.domain import DomainReport, domain_report, format_domain
from moeopt.trust.gap import RankGap, ScenarioGap, optimality_gap
from moeopt.trust.sensitivity import SensitivityReport, calibration_sensitivity, format_sensitivity

__all__ = [
    "DomainReport",
    "KnobVerdict",
    "RankGap",
    "ScenarioGap",
    "SensitivityReport",
    "VariantRow",
    "audit_knobs",
    "calibration_sensitivity",
    "compare_variants",
    "domain_report",
    "format_audit",
    "format_design_space",
    "format_domain",
    "format_sensitivity",
    "optimality_gap",
]
