"""A built rank as plain rows, for tests that compare two ways of building the same rank.

:func:`rank_graph_rows` lists everything a :class:`~moeopt.megamoe.build.rankgraph.RankGraph`
holds: every event in graph order with every field in its order (and the types of the
durations, the dependency lags and the label values, so that an ``int`` where a ``float`` was
shows), the semaphores, the pools, then every other field of the rank (sets sorted; caches
left out). Two builds are the same build when their rows are equal."""

from __future__ import annotations

import dataclasses
from typing import Any

_CACHES = ("graph", "_data_preds", "_greedy")
"""RankGraph fields that are the graph itself (listed as rows) or caches of it."""


def rank_graph_rows(rg: Any) -> list[Any]:
    """Everything ``rg`` holds, as comparable rows (see the module docstring). ``rg``: a
    ``RankGraph``, or any dataclass holding an event graph in ``graph`` (typed loosely: this
    layer does not import moeopt.megamoe)."""
    rows: list[Any] = [
        (
            ev.name,
            ev.resources,
            tuple(ev.deps.items()),
            tuple(map(type, ev.deps.values())),
            tuple(ev.acquires.items()),
            tuple(ev.releases.items()),
            ev.colocate_with,
            ev.duration_us,
            type(ev.duration_us),
            tuple(ev.labels.items()),
            tuple(map(type, ev.labels.values())),
        )
        for ev in rg.graph
    ]
    rows.append(tuple(rg.graph.semaphores.items()))
    rows.append(tuple(rg.graph.pools.items()))
    for f in dataclasses.fields(rg):
        if f.name not in _CACHES:
            v = getattr(rg, f.name)
            rows.append((f.name, sorted(v) if isinstance(v, set) else v))
    return rows
