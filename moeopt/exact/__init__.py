"""The exact layer: CP-SAT optimum and a sound lower bound for any event graph (SPEC §5).

``solve_exact(graph, time_limit_s, workers, mode, hint)`` -> :class:`ExactResult`;
``graph_optimality_gap(graph, ...)`` -> :class:`GapReport` (greedy per policy against CP-SAT).
"""

from moeopt.exact.gap import GapReport, PolicyResult, graph_optimality_gap
from moeopt.exact.result import ExactResult, SolveStatus
from moeopt.exact.solve import DEFAULT_PARAMS, solve_exact

__all__ = [
    "DEFAULT_PARAMS",
    "ExactResult",
    "GapReport",
    "PolicyResult",
    "SolveStatus",
    "graph_optimality_gap",
    "solve_exact",
]
