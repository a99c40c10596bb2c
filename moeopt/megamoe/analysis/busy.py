"""Busy and idle time of one rank's schedule per resource, role and stage."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from moeopt.core.schedule import Schedule
from moeopt.megamoe.analysis.table import Table, events_on
from moeopt.megamoe.build import RankGraph
from moeopt.megamoe.results import BusyTimes


def busy_times(
    rg: RankGraph,
    s: Schedule,
    span: float,
    table: Table | None = None,
    on: Mapping[str, list[int]] | None = None,
) -> BusyTimes:
    """Busy µs per resource and per stage (an event on several resources counts on each), idle
    µs within ``span`` and busy / ``span`` per resource and per role (the part after the dot of
    ``c3.AIV0``). ``on``: :func:`~moeopt.megamoe.analysis.table.events_on` of the table, if
    already made."""
    t = table or Table.of(rg, s)
    stage_busy: dict[str, float] = defaultdict(float)
    dur = [e - s for s, e in zip(t.start, t.end)]
    for rs, st, d in zip(t.res, t.stage, dur):
        if rs:
            stage_busy[str(st)] += d * len(rs)
    res_busy: dict[str, float] = {}
    for r, ids in (events_on(t) if on is None else on).items():
        total = 0.0  # each resource's sum in graph order, as one running sum per resource made it
        for i in ids:
            total += dur[i]
        res_busy[r] = total
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
