"""Physical lower bounds of one rank (a ruler, not a prediction), and their judgement.

* compute = MACs / (cube cores x cube rate);
* bandwidth = bytes the algorithm must move over each aggregate channel (HBM: every active
  expert's weights once plus the routed rows once; cross-rank in / out: the remote rows) divided
  by min(per-core rate x cores, aggregate);
* dependency chain = the longest path of the event graph over data dependencies (durations + λ,
  unlimited resources) to the last combine.

Any valid schedule of the graph is at least the last one; a time below the first two means a
cost formula missed something (:func:`judge_bounds` marks it ``violated``).
"""

from __future__ import annotations

from moeopt.megamoe.analysis.table import EPS
from moeopt.megamoe.build import RankGraph
from moeopt.megamoe.results import BoundKind, Bounds, Channel, PhysicalBounds
from moeopt.megamoe.scenario import Config


def physical_bounds(rg: RankGraph, cfg: Config) -> PhysicalBounds:
    """The compute, bandwidth and dependency bounds of ``rg`` (see the module docstring)."""
    n_aic = len({int(r.split(".")[0][1:]) for st in ("gmm1", "gmm2") for r in rg.stage_members[st]})
    cube = cfg.c("cube_mac_per_us_int8") if cfg.quant == "w8a8" else cfg.c("cube_mac_per_us_fp16")
    compute = rg.macs / (n_aic * cube)
    per_core = cfg.c("gm_l1_bytes_per_us") * n_aic
    bw: dict[Channel, float] = {
        "hbm": rg.algo_hbm_bytes / min(per_core, cfg.c("hbm_bytes_per_us")),
        "remote_in": rg.algo_remote_in_bytes / cfg.c("remote_in_bytes_per_us"),
        "remote_out": rg.algo_remote_out_bytes / cfg.c("remote_out_bytes_per_us"),
    }
    channel = max(bw, key=lambda k: bw[k])
    return {
        "compute_us": compute,
        "bandwidth_us": bw[channel],
        "bandwidth_channel": channel,
        "bandwidth_by_channel_us": bw,
        "dependency_us": _dependency_bound(rg),
    }


def _dependency_bound(rg: RankGraph) -> float:
    """Longest path over data dependencies only, to the last combine: program-order chains on a
    pinned resource are resource constraints, so they are left out (else the bound would absorb
    the queueing); the time is measured to the last combine, so the chain ends there too."""
    cg = rg.graph.compiled()
    heads = [0.0] * cg.n
    dur = cg.dur
    preds = rg.data_preds()
    for i in cg.topo:
        best = 0.0
        for p, lam in preds[i]:
            v = heads[p] + dur[p] + lam
            if v > best:
                best = v
        heads[i] = best
    ends = rg.combine_events or [n for n in cg.names if n != rg.tail_event]
    return max((heads[cg.index[n]] + cg.dur[cg.index[n]] for n in ends), default=0.0)


def judge_bounds(b: PhysicalBounds, time_us: float) -> Bounds:
    """``b`` with the binding bound, how far ``time_us`` is above it, and whether it is below."""
    vals: dict[BoundKind, float] = {
        "compute": b["compute_us"],
        "bandwidth": b["bandwidth_us"],
        "dependency": b["dependency_us"],
    }
    binding = max(vals, key=lambda k: vals[k])
    lb = vals[binding]
    return {
        **b,
        "binding": binding,
        "lower_bound_us": lb,
        "excess_pct": (time_us / lb - 1.0) * 100.0 if lb > 0 else 0.0,
        "violated": time_us < lb * (1 - 1e-9) - EPS,
    }
