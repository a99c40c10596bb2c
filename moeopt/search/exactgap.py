"""The exact layer as the search uses it: the CP-SAT objective and the gap of the best point.

Both go through :func:`moeopt.exact.solve_exact` on the event graph of each
simulated rank, with the greedy schedule as the hint. When the exact layer is not installed the
caller gets :class:`ExactUnavailable` with the reason, never a made-up number.
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass
from typing import Any

from moeopt.megamoe.results import SimulateResult


@dataclass(frozen=True)
class ExactSpec:
    """How CP-SAT is run: ``objective.exact`` and ``outputs.exact_gap`` of a study file."""

    time_limit_s: float = 10.0
    workers: int = 1
    mode: str = "exact"


class ExactUnavailable(RuntimeError):
    """``moeopt.exact.solve_exact`` cannot be imported here."""


def _solver() -> Any:
    try:
        mod = importlib.import_module("moeopt.exact")
    except ImportError as exc:
        raise ExactUnavailable(f"moeopt.exact is not available ({exc})") from None
    fn = getattr(mod, "solve_exact", None)
    if fn is None:
        raise ExactUnavailable("moeopt.exact has no solve_exact in this installation")
    return fn


def available() -> str | None:
    """``None`` if the exact layer can be used, else why not."""
    try:
        _solver()
    except ExactUnavailable as exc:
        return str(exc)
    return None


def solve_rank(graph: Any, greedy: Any, spec: ExactSpec) -> dict[str, Any]:
    """CP-SAT on one rank's event graph; greedy vs. best / lower bound, as plain numbers."""
    solve_exact = _solver()
    t0 = time.perf_counter()
    x = solve_exact(graph, time_limit_s=spec.time_limit_s, workers=spec.workers, mode=spec.mode, hint=greedy)
    greedy_us = float(greedy.makespan_us)
    best = getattr(x, "best_us", None)
    lb = getattr(x, "lower_bound_us", None)
    status = getattr(x, "status", None)
    return {
        "status": str(getattr(status, "value", status)),
        "greedy_us": greedy_us,
        "best_us": float(best) if best is not None else greedy_us,
        "lower_bound_us": float(lb) if lb is not None else None,
        "gap_to_lower_bound_pct": (greedy_us / float(lb) - 1.0) * 100.0 if lb else None,
        "gap_to_best_pct": (greedy_us / float(best) - 1.0) * 100.0 if best else None,
        "solve_s": float(getattr(x, "solve_s", time.perf_counter() - t0)),
        "time_limit_s": spec.time_limit_s,
        "workers": spec.workers,
        "mode": spec.mode,
    }


def scenario_gap(result: SimulateResult, spec: ExactSpec) -> dict[str, Any]:
    """Gap of every simulated rank of one :func:`moeopt.simulate` result, and the worst of them.

    The greedy time here is the rank graph's makespan (the unpermute tail included), the same
    quantity CP-SAT minimises.
    """
    ranks = {}
    for rep in result["simulated_ranks"]:
        rr = result["rank_results"][rep]
        ranks[int(rep)] = solve_rank(rr["graph"], rr["schedule"], spec)
    worst = max(ranks.values(), key=lambda d: d["gap_to_lower_bound_pct"] or 0.0)
    return {"ranks": ranks, "worst": worst}
