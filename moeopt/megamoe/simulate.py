"""``simulate(scenario)``: routing -> one event graph per distinct rank -> greedy schedule -> analyses.

Guardrails live here so that no entry point bypasses them:

* every schedule is checked by the independent validator (:func:`moeopt.validate_schedule`);
* :class:`BoundViolation` when a rank's time is below its compute, bandwidth or dependency
  bound (``check_bounds=False`` only records it in ``r["bounds"]["violated"]``);
* :class:`WorkConservationViolation` when a late-bound pool shows avoidable idle, except for
  statically pinned pools, stages colocated with their producer tile, and policies declaring
  ``work_conserving = False``;
* route conservation (in :mod:`moeopt.megamoe.routing`) and the not-modelled checks of
  :mod:`moeopt.megamoe.scenario` run before any graph is built.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from moeopt.core.gcpause import gc_paused
from moeopt.core.policies import make_policy
from moeopt.core.scheduler import schedule
from moeopt.core.validate import validate_schedule
from moeopt.megamoe import analysis
from moeopt.megamoe.builders import RankGraph
from moeopt.megamoe.config.profiles import IMPLEMENTATIONS
from moeopt.megamoe.config.provenance import domain_check
from moeopt.megamoe.errors import BoundViolation, WorkConservationViolation
from moeopt.megamoe.routing import counts_matrix, routing_signature
from moeopt.megamoe.scenario import Config, Scenario
from moeopt.registry import lookup

AVOIDABLE_TOL_CORE_US = 1e-3


def build_graphs(scenario: Scenario) -> dict[int, tuple[RankGraph, list[int]]]:
    """One built graph per distinct routing signature: ``{representative rank: (graph, ranks)}``."""
    cfg = scenario.config
    w = scenario.workload
    counts = counts_matrix(w)
    groups: dict[Any, list[int]] = {}
    for r in range(w.world):
        groups.setdefault(routing_signature(counts, r, w.local_experts), []).append(r)
    builder = lookup("builder", cfg.builder)()
    out = {}
    for ranks in groups.values():
        rep = ranks[0]
        out[rep] = (builder(cfg, w.tokens, w.topk, w.world, counts, rep, w.shared_expert_num), ranks)
    return out


def simulate(
    scenario: Scenario, check_bounds: bool = True, check_work_conservation: bool = True, validate: bool = True
) -> dict[str, Any]:
    """Simulate ``scenario``; the result dict of SPEC §7 (see the module docstring for guardrails)."""
    with gc_paused():
        return _simulate(scenario, check_bounds, check_work_conservation, validate, None)


def simulate_built(
    scenario: Scenario, graphs: dict[int, tuple[RankGraph, list[int]]], check_bounds: bool = True
) -> dict[str, Any]:
    """:func:`simulate` on graphs already built by ``build_graphs(scenario)`` (the search driver
    builds them once for the physical lower bound and reuses them here)."""
    with gc_paused():
        return _simulate(scenario, check_bounds, True, True, graphs)


def _simulate(
    scenario: Scenario,
    check_bounds: bool,
    check_work_conservation: bool,
    validate: bool,
    graphs: dict[int, tuple[RankGraph, list[int]]] | None,
) -> dict[str, Any]:
    cfg = scenario.config
    w = scenario.workload
    policy = make_policy(cfg.scheduling)
    per_rank: dict[int, dict[str, Any]] = {}
    built = build_graphs(scenario) if graphs is None else graphs
    for _rep, (rg, ranks) in sorted(built.items()):
        # the builder already left out every semaphore whose capacity covers its demand; the
        # scheduler's further normalisation (an ancestor / descendant walk per acquirer) finds
        # nothing more on MegaMoE graphs (their slot semaphores are released by a successor,
        # never by an ancestor of the next acquirer) and would cost more than the schedule
        s = schedule(rg.graph, policy=cfg.scheduling, normalize=False)
        if validate:
            validate_schedule(rg.graph, s)
        res = _rank_result(rg, s, cfg)
        res["ranks_sharing_signature"] = ranks
        for r in ranks:
            per_rank[r] = res
    total = max(r["kernel_total_us"] for r in per_rank.values())
    for res in per_rank.values():
        # the unpermute waits for a cross-rank barrier: every rank's combines must be in
        res["kernel_dag_end_us"] = max(
            res["tail_end_us"], total + cfg.c("cross_rank_flag_us") + res["tail_us"]
        )
    dag_end = max(r["kernel_dag_end_us"] for r in per_rank.values())
    slowest = min(r for r in per_rank if per_rank[r]["kernel_total_us"] == total)
    sl = per_rank[slowest]

    violations = [(r, res["bounds"]) for r, res in sorted(per_rank.items()) if res["bounds"]["violated"]]
    if violations and check_bounds:
        r, b = violations[0]
        raise BoundViolation(
            f"rank {r}: simulated {per_rank[r]['kernel_total_us']:.3f} µs is below the {b['binding']} bound "
            f"{b['lower_bound_us']:.3f} µs (compute {b['compute_us']:.3f}, bandwidth {b['bandwidth_us']:.3f} "
            f"[{b['bandwidth_channel']}], dependency {b['dependency_us']:.3f}): a cost is missing from the "
            f"model; "
            "do not use this time for a decision (simulate(..., check_bounds=False) records it instead)",
            bounds=b,
        )
    if check_work_conservation and policy.work_conserving:
        for r, res in sorted(per_rank.items()):
            for st, d in res["idle_decomposition"]["by_stage"].items():
                if (
                    d["late_bound"]
                    and d["work_conservation_exempt"] is None
                    and d["avoidable_core_us"] > AVOIDABLE_TOL_CORE_US
                ):
                    samples = [x for x in res["idle_decomposition"]["samples"] if x["stage"] == st]
                    unit = "pipe-µs of its MTE2 load pipes" if st.endswith(":load") else "core-µs"
                    raise WorkConservationViolation(
                        f"rank {r}: late-bound pool of stage {st!r} left {d['avoidable_core_us']:.3f} "
                        f"{unit} idle while work for it was ready (policy {policy.name!r} declares "
                        f"itself work-conserving; first at {samples[0]['from_us']:.3f} µs)"
                        if samples
                        else f"rank {r}: late-bound pool of stage {st!r} left "
                        f"{d['avoidable_core_us']:.3f} {unit} idle while work for it was ready "
                        f"(policy {policy.name!r} declares itself work-conserving)",
                        samples=samples,
                    )

    impl = IMPLEMENTATIONS.get(cfg.profile, IMPLEMENTATIONS[None])
    domain = impl["domain"]
    shape = {
        "tokens": w.tokens,
        "h": cfg.h,
        "hidden_dim": cfg.hidden_dim,
        "topk": w.topk,
        "local_experts": w.local_experts,
    }
    topo = {"world": w.world, "aic_num": cfg.aic_num}
    if domain is not None:
        reasons = domain_check(domain, cfg.implementation, cfg.compile_point(), shape, topo)
        if w.routing not in ("uniform", "cyclic"):
            reasons.append(f"routing {w.routing!r}; calibrated with uniform round-robin routing")
        overridden = [n for n in scenario.calibration if cfg.profile is not None]
        cal = {
            "domain": domain.as_dict(),
            "out_of_domain": bool(reasons),
            "reasons": reasons,
            "overridden_constants": overridden,
        }
    else:
        cal = {
            "domain": None,
            "out_of_domain": True,
            "reasons": ["no profile: no calibration domain"],
            "overridden_constants": list(scenario.calibration),
        }
    fingerprint = hashlib.sha256(json.dumps(cfg.compile_point(), sort_keys=True).encode()).hexdigest()[:12]
    return {
        "kernel_total_us": total,
        "kernel_dag_end_us": dag_end,
        "slowest_rank": slowest,
        "rank_results": per_rank,
        "bounds": sl["bounds"],
        "idle_decomposition": sl["idle_decomposition"],
        "critical_path": sl["critical_path"],
        "traffic_bytes": sl["traffic_bytes"],
        "stage_busy_us": sl["stage_busy_us"],
        "resource_busy_us": sl["resource_busy_us"],
        "resource_idle_us": sl["resource_idle_us"],
        "resource_utilization": sl["resource_utilization"],
        "role_utilization": sl["role_utilization"],
        "implementation": {
            "id": cfg.implementation,
            "profile": cfg.profile,
            "source_refs": list(cfg.source_refs),
            "compile_fingerprint": fingerprint,
            "compile_point": cfg.compile_point(),
            "topology": {**topo, "aiv_num": cfg.aic_num * cfg.aiv_per_core},
        },
        "policy": policy.name,
        "calibration": cal,
        "out_of_domain": cal["out_of_domain"],
        "provenance": {name: c.as_dict() for name, c in sorted(cfg.constants.items())},
        "simulated_ranks": sorted({v["ranks_sharing_signature"][0] for v in per_rank.values()}),
    }


def _rank_result(rg: RankGraph, s: Any, cfg: Config) -> dict[str, Any]:
    g = rg.graph
    t = analysis.Table.of(rg, s)
    comb = rg.combine_events or [n for n in g.events if n != rg.tail_event]
    total = max(s.end_us[n] for n in comb)
    span = s.makespan_us
    b = analysis.judge_bounds(analysis.bounds(rg, cfg), total)
    last = max(comb, key=lambda n: (s.end_us[n], n))
    out = {
        "rank": rg.rank,
        "kernel_total_us": total,
        "tail_end_us": s.end_us[rg.tail_event],
        "tail_us": g[rg.tail_event].duration_us,
        "head_us": g[rg.head_event].duration_us,
        "events": analysis.EventRows(t),
        "bounds": b,
        "idle_decomposition": analysis.idle_decomposition(rg, s, total, table=t),
        "critical_path": analysis.critical_path(rg, s, last, table=t),
        "traffic_bytes": dict(rg.traffic_bytes),
        "contract": {
            "group_sizes": list(rg.contract.group_sizes),
            "group_offsets": list(rg.contract.group_offsets),
            "group_padded_offsets": list(rg.contract.group_padded_offsets),
            "m_blocks": rg.contract.m_blocks,
        },
        "waves": {"gmm1": rg.waves_gmm1, "gmm2": rg.waves_gmm2},
        "n_events": len(g),
        "schedule": s,
        "graph": g,
    }
    out.update(analysis.busy(rg, s, span, table=t))
    return out
