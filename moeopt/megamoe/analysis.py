"""Analyses of one rank's schedule: bounds, idle decomposition, critical path, busy times.

* Bounds (a ruler, not a prediction): compute = MACs / (cube cores x cube rate); bandwidth =
  bytes the algorithm must move over each aggregate channel (HBM: every active expert's weights
  once plus the routed rows once; cross-rank in / out: the remote rows) divided by
  min(per-core rate x cores, aggregate); dependency chain = the longest path of the event graph
  (durations + λ, unlimited resources). Any valid schedule of the graph is at least the last one;
  a time below the first two means a cost formula missed something.
* Idle decomposition per stage pool: at each instant, ``min(idle members, ready events)`` core-µs
  are avoidable (work was ready, with its dependencies and semaphores satisfied, while a member
  that could run it idled); the rest is forced. An event counts as ready from ``ready_us`` until
  ``start - semaphore_wait_us`` (the stretch its semaphores held it back is not "ready").
* Critical path: from the last event back, each step says what set its start: a dependency
  (``pred``), a resource held by the previous event on it, or semaphore capacity.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from moeopt.core.schedule import Schedule
from moeopt.megamoe.builders import RankGraph
from moeopt.megamoe.scenario import Config

EPS = 1e-6


def bounds(rg: RankGraph, cfg: Config) -> dict[str, Any]:
    n_aic = len({int(r.split(".")[0][1:]) for st in ("gmm1", "gmm2") for r in rg.stage_members[st]})
    cube = cfg.c("cube_mac_per_us_int8") if cfg.quant == "w8a8" else cfg.c("cube_mac_per_us_fp16")
    compute = rg.macs / (n_aic * cube)
    per_core = cfg.c("gm_l1_bytes_per_us") * n_aic
    bw = {
        "hbm": rg.algo_hbm_bytes / min(per_core, cfg.c("hbm_bytes_per_us")),
        "remote_in": rg.algo_remote_in_bytes / cfg.c("remote_in_bytes_per_us"),
        "remote_out": rg.algo_remote_out_bytes / cfg.c("remote_out_bytes_per_us"),
    }
    cg = rg.graph.compiled()
    # longest path over data dependencies only: program-order chains on a pinned resource are
    # resource constraints, so they are left out (else the bound would absorb the queueing)
    heads = [0.0] * cg.n
    names = cg.names
    chain = rg.chain_edges
    for i in cg.topo:
        best = 0.0
        for p, lam in cg.preds[i]:
            if (names[p], names[i]) in chain:
                continue
            v = heads[p] + cg.dur[p] + lam
            if v > best:
                best = v
        heads[i] = best
    ends = rg.combine_events or [n for n in cg.names if n != rg.tail_event]
    # the time is measured to the last combine, so the chain bound ends there too
    dep = max((heads[cg.index[n]] + cg.dur[cg.index[n]] for n in ends), default=0.0)
    channel = max(bw, key=lambda k: bw[k])
    return {
        "compute_us": compute,
        "bandwidth_us": bw[channel],
        "bandwidth_channel": channel,
        "bandwidth_by_channel_us": bw,
        "dependency_us": dep,
    }


def judge_bounds(b: dict[str, Any], time_us: float) -> dict[str, Any]:
    vals = {"compute": b["compute_us"], "bandwidth": b["bandwidth_us"], "dependency": b["dependency_us"]}
    binding = max(vals, key=lambda k: vals[k])
    lb = vals[binding]
    out = dict(b)
    out["binding"] = binding
    out["lower_bound_us"] = lb
    out["excess_pct"] = (time_us / lb - 1.0) * 100.0 if lb > 0 else 0.0
    out["violated"] = time_us < lb * (1 - 1e-9) - EPS
    return out


def busy(rg: RankGraph, s: Schedule, span: float) -> dict[str, Any]:
    res_busy: dict[str, float] = defaultdict(float)
    stage_busy: dict[str, float] = defaultdict(float)
    for ev in rg.graph:
        d = s.end_us[ev.name] - s.start_us[ev.name]
        for r in s.resources[ev.name]:
            res_busy[r] += d
        if s.resources[ev.name]:
            stage_busy[str(ev.labels.get("stage"))] += d * len(s.resources[ev.name])
    all_res = sorted(set(rg.graph.resources()))
    rb = {r: res_busy.get(r, 0.0) for r in all_res}
    idle = {r: max(0.0, span - v) for r, v in rb.items()}
    util = {r: (v / span if span > 0 else 0.0) for r, v in rb.items()}
    roles: dict[str, list[float]] = defaultdict(list)
    for r, v in rb.items():
        roles[r.rsplit(".", 1)[1]].append(v)
    role_util = {role: (sum(v) / (len(v) * span) if span > 0 else 0.0) for role, v in sorted(roles.items())}
    return {
        "resource_busy_us": rb,
        "resource_idle_us": idle,
        "resource_utilization": util,
        "role_utilization": role_util,
        "stage_busy_us": dict(stage_busy),
    }


def idle_decomposition(rg: RankGraph, s: Schedule, span: float, max_samples: int = 5) -> dict[str, Any]:
    """Forced vs avoidable idle per stage pool (see the module docstring)."""
    out: dict[str, Any] = {"forced_core_us": 0.0, "avoidable_core_us": 0.0, "by_stage": {}, "samples": []}
    by_stage: dict[str, list[str]] = defaultdict(list)
    for ev in rg.graph:
        st = ev.labels.get("stage")
        if st in rg.stage_members and s.resources[ev.name]:
            by_stage[str(st)].append(ev.name)
    for st, names in by_stage.items():
        members = set(rg.stage_members[st])
        if st in ("gmm1", "gmm2"):
            # loads run on the MTE2 of the same cores; judge the AIC pool on compute phases only
            names = [n for n in names if rg.graph[n].labels.get("phase") == "compute"]
        pts: list[tuple[float, int, int]] = []  # (t, d_busy_members, d_ready)
        busy_iv: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for ev in rg.graph:
            for r in s.resources[ev.name]:
                if r in members:
                    busy_iv[r].append((s.start_us[ev.name], s.end_us[ev.name]))
        for r in members:
            for a, b in _merge(busy_iv.get(r, [])):
                pts.append((a, 1, 0))
                pts.append((b, -1, 0))
        for n in names:
            w = s.waits[n]
            a = w.ready_us
            b = s.start_us[n] - w.semaphore_wait_us
            if b > a + EPS:
                pts.append((a, 0, 1))
                pts.append((b, 0, -1))
        pts.sort()
        n_mem = len(members)
        busy_n = ready_n = 0
        prev = 0.0
        forced = avoid = 0.0
        samples: list[dict[str, Any]] = []
        i = 0
        while i < len(pts) and pts[i][0] < span:
            t = pts[i][0]
            if t > prev:
                idle_n = max(0, n_mem - busy_n)
                av = min(idle_n, ready_n)
                avoid += av * (t - prev)
                forced += (idle_n - av) * (t - prev)
                if av > 0 and t - prev > EPS and len(samples) < max_samples:
                    samples.append(
                        {"stage": st, "from_us": prev, "to_us": t, "idle_members": idle_n, "ready": ready_n}
                    )
                prev = t
            while i < len(pts) and pts[i][0] <= t:
                busy_n += pts[i][1]
                ready_n += pts[i][2]
                i += 1
        if span > prev:
            forced += max(0, n_mem - busy_n) * (span - prev)
        exempt = None
        if st not in rg.late_stages:
            exempt = "statically pinned pool"
        elif st in rg.colocated_stages:
            exempt = "colocated with its producer tile"
        out["by_stage"][st] = {
            "forced_core_us": forced,
            "avoidable_core_us": avoid,
            "late_bound": st in rg.late_stages,
            "work_conservation_exempt": exempt,
        }
        out["forced_core_us"] += forced
        out["avoidable_core_us"] += avoid
        out["samples"].extend(samples)
    return out


def _merge(iv: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1] + EPS:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def critical_path(rg: RankGraph, s: Schedule, last: str, limit: int = 10000) -> list[dict[str, Any]]:
    """Walk back from ``last``: each step names the event, its stage and why it started when it did."""
    ends_on: dict[str, list[tuple[float, str]]] = defaultdict(list)
    releasers: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for ev in rg.graph:
        for r in s.resources[ev.name]:
            ends_on[r].append((s.end_us[ev.name], ev.name))
        for sem in ev.releases:
            releasers[sem].append((s.end_us[ev.name], ev.name))
    path: list[dict[str, Any]] = []
    cur: str | None = last
    seen = set()
    while cur is not None and cur not in seen and len(path) < limit:
        seen.add(cur)
        ev = rg.graph[cur]
        w = s.waits[cur]
        kind = w.kind
        step = {
            "event": cur,
            "stage": ev.labels.get("stage"),
            "start_us": s.start_us[cur],
            "end_us": s.end_us[cur],
            "resources": list(s.resources[cur]),
            "why": {
                "dependency": "dependency",
                "resource": "resource queueing",
                "semaphore": "capacity",
                "none": "source",
            }[kind],
            "wait_us": {
                "dependency": 0.0,
                "resource": w.resource_wait_us,
                "semaphore": w.semaphore_wait_us,
                "none": 0.0,
            }[kind],
        }
        nxt: str | None = None
        if kind == "semaphore" and w.semaphore is not None:
            nxt = _ended_at(releasers[w.semaphore], s.start_us[cur], cur)
            step["semaphore"] = w.semaphore
        elif kind == "resource" and w.resource is not None:
            nxt = _ended_at(ends_on[w.resource], w.ready_us + w.resource_wait_us, cur)
            step["resource"] = w.resource
        if nxt is None:
            nxt = w.pred
            if kind != "none" and w.pred is not None:
                step["lambda_us"] = rg.graph[cur].deps.get(w.pred, 0.0)
        step["after"] = nxt
        path.append(step)
        cur = nxt
    path.reverse()
    return path


def _ended_at(items: list[tuple[float, str]], t: float, not_this: str) -> str | None:
    best: tuple[float, str] | None = None
    for end, name in items:
        if name != not_this and end <= t + EPS and (best is None or end > best[0]):
            best = (end, name)
    return None if best is None else best[1]
