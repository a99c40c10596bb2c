"""Analyses of one rank's schedule, each returning a part of the :func:`moeopt.simulate` result.

* :mod:`~moeopt.megamoe.analysis.table`: the schedule read once into arrays in graph order
  (:class:`Table`, shared by the analyses) and the lazy per-event rows (:class:`EventRows`);
* :mod:`~moeopt.megamoe.analysis.bounds`: the compute, bandwidth and dependency lower bounds of
  the shape (:func:`physical_bounds`), the floors of this graph (:func:`graph_floors`) and
  their judgement against the time (:func:`judge_bounds`, :func:`judge_floors`);
* :mod:`~moeopt.megamoe.analysis.idle`: forced vs avoidable idle per stage pool
  (:func:`idle_decomposition`), what the work-conservation guardrail reads;
* :mod:`~moeopt.megamoe.analysis.critical`: the critical path, each step saying what set its
  start (:func:`critical_path`);
* :mod:`~moeopt.megamoe.analysis.busy`: busy and idle time per resource, role and stage
  (:func:`busy_times`).

The keys each returns are the ``TypedDict``\\ s of :mod:`moeopt.megamoe.results`.
"""

from moeopt.megamoe.analysis.bounds import (
    graph_floors,
    judge_bounds,
    judge_floors,
    longest_path_us,
    physical_bounds,
)
from moeopt.megamoe.analysis.busy import busy_times
from moeopt.megamoe.analysis.critical import critical_path
from moeopt.megamoe.analysis.idle import idle_decomposition
from moeopt.megamoe.analysis.table import EPS, EventRows, Table

__all__ = [
    "EPS",
    "EventRows",
    "Table",
    "busy_times",
    "critical_path",
    "graph_floors",
    "idle_decomposition",
    "judge_bounds",
    "judge_floors",
    "longest_path_us",
    "physical_bounds",
]
