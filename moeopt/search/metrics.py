"""The metrics a study can optimise: one table of name, meaning and how it is computed.

Each :class:`Metric` reads one :func:`moeopt.simulate` result (the slowest rank where the
quantity is per rank). The table is the only list: the study file's ``objective.metric`` and
``secondary[].metric`` choices, the reference in ``docs/usage.md``, lower-bound pruning and the
re-simulation check of ``best.toml`` all read it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from moeopt.search.exactgap import ExactSpec, solve_rank

Result = Mapping[str, Any]


@dataclass(frozen=True)
class Metric:
    """One metric. ``kernel_time``: it is a kernel time, so the physical bounds of the shape and
    the floors of the event graph bound it (points can be pruned without scheduling).
    ``exact``: it runs CP-SAT, so it depends on a time limit (it is never a secondary objective
    and is not compared when ``best.toml`` is simulated again)."""

    name: str
    doc: str
    value: Callable[[Result, ExactSpec], float]
    kernel_time: bool = False
    exact: bool = False


def _role(resource: str) -> str:
    return resource.rsplit(".", 1)[-1]


def _aic_busy_us(r: Result, _exact: ExactSpec) -> float:
    return float(sum(v for k, v in r["resource_busy_us"].items() if _role(k) == "AIC"))


def _aiv_busy_us(r: Result, _exact: ExactSpec) -> float:
    return float(sum(v for k, v in r["resource_busy_us"].items() if _role(k).startswith("AIV")))


def _aiv_utilization(r: Result, _exact: ExactSpec) -> float:
    u = [v for k, v in r["role_utilization"].items() if k.startswith("AIV")]
    return float(sum(u) / len(u)) if u else 0.0


def exact_best_us(r: Result, spec: ExactSpec) -> float:
    """The CP-SAT best schedule length over the simulated ranks (greedy schedule as the hint)."""
    best = 0.0
    for rep in r["simulated_ranks"]:
        rr = r["rank_results"][rep]
        x = solve_rank(rr["graph"], rr["schedule"], spec)
        best = max(best, float(x["best_us"]))
    return best


TABLE: tuple[Metric, ...] = (
    Metric(
        "kernel_total_us",
        "greedy time to the last combine (the reference timing)",
        lambda r, _x: float(r["kernel_total_us"]),
        kernel_time=True,
    ),
    Metric(
        "kernel_dag_end_us",
        "greedy time including the unpermute tail",
        lambda r, _x: float(r["kernel_dag_end_us"]),
        kernel_time=True,
    ),
    Metric(
        "cpsat_us",
        "CP-SAT best schedule of the same event graphs (anomaly-free; needs moeopt.exact)",
        exact_best_us,
        kernel_time=True,
        exact=True,
    ),
    Metric("aic_busy_us", "sum of AIC busy time on the slowest rank", _aic_busy_us),
    Metric("aiv_busy_us", "sum of AIV busy time on the slowest rank", _aiv_busy_us),
    Metric(
        "aic_utilization",
        "mean AIC utilisation on the slowest rank (0..1)",
        lambda r, _x: float(r["role_utilization"].get("AIC", 0.0)),
    ),
    Metric("aiv_utilization", "mean AIV utilisation on the slowest rank (0..1)", _aiv_utilization),
    Metric(
        "gm_to_l1_bytes",
        "bytes loaded GM -> L1 on the slowest rank",
        lambda r, _x: float(r["traffic_bytes"].get("gm_to_l1", 0.0)),
    ),
    Metric(
        "hbm_bytes",
        "HBM bytes on the slowest rank",
        lambda r, _x: float(r["traffic_bytes"].get("hbm", 0.0)),
    ),
    Metric(
        "excess_over_bound_pct",
        "how far the time is above its physical lower bound, in %",
        lambda r, _x: float(r["bounds"]["excess_pct"]),
    ),
)
BY_NAME: dict[str, Metric] = {m.name: m for m in TABLE}

# views of the table
METRICS: dict[str, str] = {m.name: m.doc for m in TABLE}
"""Metric name -> what it measures."""
TIME_METRICS = tuple(m.name for m in TABLE if m.kernel_time)
EXACT_METRICS = tuple(m.name for m in TABLE if m.exact)


def metric_value(name: str, r: Result, exact: ExactSpec | None = None) -> float:
    """Metric ``name`` of the result ``r``; ``exact`` sets how CP-SAT runs for an exact metric."""
    return BY_NAME[name].value(r, exact or ExactSpec())
