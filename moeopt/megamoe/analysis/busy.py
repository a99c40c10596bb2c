"""Busy and idle time of one rank's schedule per resource, role and stage."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from itertools import repeat

import numpy as np

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
    n = len(t.names)
    dur = np.array(t.end) - np.array(t.start)  # (the same float differences as e - s)
    width = np.fromiter(map(len, t.res), np.intp, n)
    # per stage, d x resources of each event that holds any, summed one by one in graph order
    # (add.accumulate is that running sum); stages keyed by str() in order of first such event
    held = np.flatnonzero(width > 0)
    key_of = {st: str(st) for st in dict.fromkeys(t.stage)}
    keys = list(dict.fromkeys(map(key_of.__getitem__, map(t.stage.__getitem__, held.tolist()))))
    number = {k: j for j, k in enumerate(keys)}
    code = np.fromiter(map(number.get, map(key_of.__getitem__, t.stage), repeat(-1)), np.intp, n)
    work = dur * width
    stage_busy: dict[str, float] = {}
    for j, k in enumerate(keys):
        stage_busy[k] = _summed(work[held[code[held] == j]])
    res_busy = {r: _summed(dur[ids]) for r, ids in (events_on(t) if on is None else on).items()}
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
        "stage_busy_us": stage_busy,
    }


def _summed(values: np.ndarray) -> float:
    """``0.0 + v[0] + v[1] + ...``, added in order as a running ``+=`` sum adds them."""
    return float(np.add.accumulate(np.concatenate(([0.0], values)))[-1])
