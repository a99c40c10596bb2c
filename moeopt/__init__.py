"""moeopt: simulate the MegaMoE fused operator as an event graph, bound it with CP-SAT, tune it with Optuna.

Library entry points (SPEC §10)::

    import moeopt as m
    g = m.EventGraph(semaphores={"l1_slot": 2}, pools={"AIC": ["core0.AIC", "core1.AIC"]})
    s = m.schedule(g)
    m.validate_schedule(g, s)
"""

from moeopt.core import (
    CriticalPathFirst,
    EarliestStart,
    Event,
    EventGraph,
    LookaheadOneStep,
    Policy,
    PriorityByStage,
    Schedule,
    SchedulerView,
    Wait,
    WorkConservingCriticalPath,
    load_psplib,
    load_psplib_optima,
    schedule,
    validate_schedule,
)
from moeopt.errors import GraphError, InputError, MoeoptError, ScheduleError, SchedulingError
from moeopt.registry import register

__version__ = "0.1.0"

__all__ = [
    "CriticalPathFirst",
    "EarliestStart",
    "Event",
    "EventGraph",
    "GraphError",
    "InputError",
    "LookaheadOneStep",
    "MoeoptError",
    "Policy",
    "PriorityByStage",
    "Schedule",
    "ScheduleError",
    "SchedulerView",
    "SchedulingError",
    "Wait",
    "WorkConservingCriticalPath",
    "__version__",
    "load_psplib",
    "load_psplib_optima",
    "register",
    "schedule",
    "validate_schedule",
]
