"""Busy and idle time of one rank's schedule per resource, role and stage."""

from __future__ import annotations

from collections import defaultdict

from moeopt.core.schedule import Schedule
from moeopt.megamoe.analysis.table import Table
from moeopt.megamoe.build import RankGraph
from moeopt.megamoe.results import BusyTimes


def busy_times(rg: RankGraph, s: Schedule, span: float, table: Table | None = None) -> BusyTimes:
    """Busy µs per resource and per stage (an event on several resources counts on each), idle
    µs within ``span`` and busy / ``span`` per resource and per role (the part after the dot of
    ``c3.AIV0``)."""
    t = table or Table.of(rg, s)
    res_busy: dict[str, float] = defaultdict(float)
    stage_busy: dict[str, float] = defaultdict(float)
    start, end, stage = t.start, t.end, t.stage
    for i, rs in enumerate(t.res):
        if not rs:
            continue
        d = end[i] - start[i]
        for r in rs:
            res_busy[r] += d
        stage_busy[str(stage[i])] += d * len(rs)
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
