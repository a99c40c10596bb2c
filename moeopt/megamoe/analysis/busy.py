"""Busy and idle time of one rank's schedule per resource, role and stage."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from itertools import chain

import numpy as np

from moeopt.core.schedule import Schedule
from moeopt.megamoe.analysis.table import Columns, Table, events_on, packed
from moeopt.megamoe.build import RankGraph
from moeopt.megamoe.results import BusyTimes


def busy_times(
    rg: RankGraph,
    s: Schedule,
    span: float,
    table: Table | None = None,
    on: Mapping[str, list[int]] | None = None,
    cols: Columns | None = None,
) -> BusyTimes:
    """Busy µs per resource and per stage (an event on several resources counts on each), idle
    µs within ``span`` and busy / ``span`` per resource and per role (the part after the dot of
    ``c3.AIV0``). ``on``: :func:`~moeopt.megamoe.analysis.table.events_on` of the table, and
    ``cols``: its :class:`~moeopt.megamoe.analysis.table.Columns`, if already made."""
    t = table or Table.of(rg, s)
    c = Columns(t) if cols is None else cols
    # every sum below is a running sum in graph order, as one loop over the events made it:
    # np.bincount with weights adds each bin's terms one by one in input order, in float64,
    # from 0.0 (the same IEEE operations as the loop's Python floats)
    dur = c.end - c.start
    n_res = c.n_res
    # per stage (its label as a string, None as "None"), the events holding a resource, each
    # counted once per resource it holds; stages in order of their first such event (the
    # labels' codes mapped to their strings' codes: labels in order of first event, as the
    # strings are numbered)
    keys: dict[str, int] = {}
    str_code = [keys.setdefault(str(label), len(keys)) for label in c.stage_labels]
    code = packed("n", str_code, len(str_code))[c.stage_code]
    held = n_res > 0
    code, w = code[held], (dur * n_res)[held]
    sums = np.bincount(code, weights=w, minlength=len(keys)).tolist()
    _codes, first = np.unique(code, return_index=True)
    names = list(keys)
    stage_busy = {names[c]: sums[c] for c in code[np.sort(first)].tolist()}
    on_ = events_on(t, c) if on is None else on
    ids = packed("n", chain.from_iterable(on_.values()), int(sum(map(len, on_.values()))))
    which = np.repeat(np.arange(len(on_)), packed("n", map(len, on_.values()), len(on_)))
    res_busy = dict(zip(on_, np.bincount(which, weights=dur[ids], minlength=len(on_)).tolist()))
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
