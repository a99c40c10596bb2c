"""The generic layer: events, graphs, the greedy scheduler, the validator. No operator knowledge."""

from moeopt.core.events import Event, EventGraph, placeholder_role, split_resource
from moeopt.core.normalize import nonbinding_semaphores
from moeopt.core.policies import (
    CriticalPathFirst,
    EarliestStart,
    LookaheadOneStep,
    Policy,
    PriorityByStage,
    WorkConservingCriticalPath,
)
from moeopt.core.psplib import KnownMakespan, load_psplib, load_psplib_known, load_psplib_optima
from moeopt.core.restructure import Restructure, RestructureControl, repinned_graph
from moeopt.core.schedule import Schedule, Wait
from moeopt.core.scheduler import schedule
from moeopt.core.validate import validate_schedule
from moeopt.core.view import SchedulerView

__all__ = [
    "CriticalPathFirst",
    "EarliestStart",
    "Event",
    "EventGraph",
    "KnownMakespan",
    "LookaheadOneStep",
    "Policy",
    "PriorityByStage",
    "Restructure",
    "RestructureControl",
    "Schedule",
    "SchedulerView",
    "Wait",
    "WorkConservingCriticalPath",
    "load_psplib",
    "load_psplib_known",
    "load_psplib_optima",
    "nonbinding_semaphores",
    "placeholder_role",
    "repinned_graph",
    "schedule",
    "split_resource",
    "validate_schedule",
]
