"""moeopt: simulate the MegaMoE fused operator as an event graph, bound it with CP-SAT, tune it with Optuna.

Library entry points::

    import moeopt as m
    g = m.EventGraph(semaphores={"l1_slot": 2}, pools={"AIC": ["core0.AIC", "core1.AIC"]})
    s = m.schedule(g)
    m.validate_schedule(g, s)
"""

from typing import TYPE_CHECKING, Any

from moeopt.core import (
    CriticalPathFirst,
    EarliestStart,
    Event,
    EventGraph,
    KnownMakespan,
    LookaheadOneStep,
    Policy,
    PriorityByStage,
    Restructure,
    Schedule,
    SchedulerView,
    Wait,
    WorkConservingCriticalPath,
    load_psplib,
    load_psplib_known,
    load_psplib_optima,
    schedule,
    validate_schedule,
)
from moeopt.errors import GraphError, InputError, MoeoptError, ScheduleError, SchedulingError
from moeopt.megamoe import (
    BoundViolation,
    ContractError,
    NotModelledError,
    RouteConservationError,
    Scenario,
    ScenarioError,
    WorkConservationViolation,
    Workload,
    knob_catalogue,
    load_scenario,
    simulate,
)
from moeopt.registry import register
from moeopt.trace import (
    TraceTruncatedWarning,
    compare_schedule_to_trace,
    compare_traces,
    read_chrome_trace,
    write_chrome_trace,
)
from moeopt.trust import (
    audit_knobs,
    calibration_sensitivity,
    compare_variants,
    domain_report,
    format_design_space,
    optimality_gap,
)
from moeopt.viz import GanttTrack, gantt_page, write_gantt

if TYPE_CHECKING:
    from moeopt.exact import ExactResult, GapReport, SolveStatus, graph_optimality_gap, solve_exact
    from moeopt.search import StudyResult, run_study

_EXACT = ("solve_exact", "ExactResult", "SolveStatus", "graph_optimality_gap", "GapReport")


def __getattr__(name: str) -> Any:
    # the search driver imports Optuna: load it on first use, not with every ``import moeopt``
    if name in ("run_study", "StudyResult"):
        import moeopt.search

        return getattr(moeopt.search, name)
    # the exact layer imports OR-Tools' CP-SAT: also loaded on first use
    if name in _EXACT:
        import moeopt.exact

        return getattr(moeopt.exact, name)
    raise AttributeError(f"module 'moeopt' has no attribute {name!r}")


__version__ = "0.1.0"

__all__ = [
    "BoundViolation",
    "ContractError",
    "CriticalPathFirst",
    "EarliestStart",
    "Event",
    "EventGraph",
    "ExactResult",
    "GanttTrack",
    "GapReport",
    "GraphError",
    "InputError",
    "KnownMakespan",
    "LookaheadOneStep",
    "MoeoptError",
    "NotModelledError",
    "Policy",
    "PriorityByStage",
    "Restructure",
    "RouteConservationError",
    "Scenario",
    "ScenarioError",
    "Schedule",
    "ScheduleError",
    "SchedulerView",
    "SchedulingError",
    "SolveStatus",
    "StudyResult",
    "TraceTruncatedWarning",
    "Wait",
    "WorkConservationViolation",
    "WorkConservingCriticalPath",
    "Workload",
    "__version__",
    "audit_knobs",
    "calibration_sensitivity",
    "compare_schedule_to_trace",
    "compare_traces",
    "compare_variants",
    "domain_report",
    "format_design_space",
    "gantt_page",
    "graph_optimality_gap",
    "knob_catalogue",
    "load_psplib",
    "load_psplib_known",
    "load_psplib_optima",
    "load_scenario",
    "optimality_gap",
    "read_chrome_trace",
    "register",
    "run_study",
    "schedule",
    "simulate",
    "solve_exact",
    "validate_schedule",
    "write_chrome_trace",
    "write_gantt",
]
