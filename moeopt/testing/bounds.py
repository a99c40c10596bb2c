"""Lower bounds on the makespan of every schedule of a graph, for checking schedules in tests.

Two are computed here from the events alone, independently of the schedulers and of
:mod:`moeopt.exact`:

* ``longest_path``: the longest chain of durations and λ through the dependencies (no event
  starts before its predecessors end plus λ);
* ``busiest_resource``: the largest total duration pinned to one fixed resource, and, per pool
  of ``k`` members, the durations of its placeholder events plus those pinned to its members,
  divided by ``k`` (a resource runs one event at a time; a pool runs at most ``k``).

The others are :func:`moeopt.exact.bounds.static_bounds` (longest path plus the energy bound of
every contended resource, pool, group of pools sharing members and paired semaphore; each
proved there), reported as ``exact:<source>``. All of them hold for every valid schedule, so a
schedule below one of them is invalid.
"""

from __future__ import annotations

from collections import defaultdict

from moeopt.core.events import EventGraph, placeholder_role
from moeopt.exact.bounds import static_bounds
from moeopt.exact.pairing import Pairing, find_pairing


def lower_bounds(graph: EventGraph) -> dict[str, float]:
    """Every lower bound above, by name, in µs (``GraphError`` for an invalid graph)."""
    cg = graph.compiled()
    out = {"longest_path": _longest_path(graph), "busiest_resource": _busiest_load(graph)}
    pairings: dict[int, Pairing] = {}
    for s in range(len(cg.sem_names)):
        pairing = find_pairing(cg, s)
        if pairing is not None:
            pairings[s] = pairing
    for b in static_bounds(cg, pairings, cg.dur, cg.preds, cg.succs):
        out[f"exact:{b.source}"] = b.value
    return out


def _longest_path(graph: EventGraph) -> float:
    cg = graph.compiled()
    finish: dict[str, float] = {}
    for i in cg.topo:
        ev = cg.events[i]
        start = max((finish[p] + lam for p, lam in ev.deps.items()), default=0.0)
        finish[ev.name] = start + ev.duration_us
    return max(finish.values(), default=0.0)


def _busiest_load(graph: EventGraph) -> float:
    load: dict[str, float] = defaultdict(float)
    for ev in graph:
        for r in ev.resources:
            if placeholder_role(r) is None:
                load[r] += ev.duration_us
    best = max(load.values(), default=0.0)
    for role, members in graph.pools.items():
        total = sum(ev.duration_us for ev in graph if f"{role}:*" in ev.resources)
        total += sum(load[r] for r in members)
        best = max(best, total / len(members))
    return best
