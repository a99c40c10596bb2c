"""Redundant disjunctive cliques: sets of events of which no two can run at the same time.

Two events ``i`` and ``j`` (intervals of at least one tick) can never overlap in the tick model
when

* one descends from the other in the DAG (``start(j) ≥ end(i) + λ ≥ end(i)`` along the path), or
* they hold the same capacity with ``q(i) + q(j) > C``: an exclusive resource (``C = 1``), a pool
  (``C`` = members, ``q`` = placeholders and fixed members of the pool), or a semaphore whose
  pairing holds units from the event's own start to its own end (a self pair).

A clique of that "cannot overlap" graph is therefore a set of pairwise disjoint intervals: a
``NoOverlap`` over it is implied by the model's own constraints and removes no schedule. It
tells the solver what no single constraint knows (a precedence chain interleaved with resource
conflicts on different resources), which lets its disjunctive reasoning (edge finding,
precedences) work across them. On the hardest PSPLIB j30 instances a handful of the largest
cliques made CP-SAT's optimality proofs several times faster.

Only graphs of at most ``MAX_EVENTS`` events get cliques, and only the ``MAX_CLIQUES`` largest
maximal cliques of at least 3 events are kept (more slowed the solver down, see the constant).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations, islice

import networkx as nx

from moeopt.core.compiled import CompiledGraph, reachable
from moeopt.exact.bounds import capacity_sets
from moeopt.exact.pairing import Pairing

MAX_EVENTS = 300
MAX_CLIQUES = 3
"""The largest cliques kept. PSPLIB j30, 1 worker, the refutation of ``makespan <= OPT - 1``
(bench_psplib_proof.py --question proof --dtime 3) on the nine instances still open at 10: each
one refuted was refuted faster with 3 (deterministic time 0.36 -> 0.30 j3013_1, 0.37 -> 0.17
j3013_7, 0.58 -> 0.37 j3029_4, 1.76 -> 1.17 j3029_8; 6/9 refuted either way, 16.2 -> 14.9 units
and 37 -> 33 CPU s in all); 1, 2, 5 and 7 were between, 25 slower everywhere (18.6 units).
The whole optimisation hinted with the greedy on the 40 slowest instances proved 33 within 0.5
units instead of 31. bench_psplib.py, 2 s, 1 worker, alternating at load 0.7-1.0: 471 -> 473
proven (j3013_1, j3013_7), CP-SAT p95 0.166 -> 0.136 s."""
MAX_ENUMERATED = 5000
"""Maximal cliques looked at before choosing the largest (the enumeration can be exponential)."""


def disjunctive_cliques(
    cg: CompiledGraph,
    pairings: dict[int, Pairing],
    dur: Sequence[int],
    succs: Sequence[tuple[tuple[int, int], ...]],
) -> list[list[int]]:
    """The largest cliques of events that pairwise cannot overlap (see the module docstring)."""
    nodes = [i for i in range(cg.n) if dur[i] > 0]
    if len(nodes) < 3 or len(nodes) > MAX_EVENTS:
        return []
    keep = set(nodes)
    conflict = nx.Graph()
    conflict.add_nodes_from(nodes)
    # precedence: every descendant of i
    for i in nodes:
        conflict.add_edges_from((i, j) for j in reachable(succs, i) if j in keep)
    # shared capacities: event intervals only (first == last), demands adding up above it
    for cs in capacity_sets(cg, pairings, [float(d) for d in dur], succs):
        items = [(first, q) for first, last, _len, q in cs.items if first == last and first in keep]
        for (i, qi), (j, qj) in combinations(items, 2):
            if i != j and qi + qj > cs.capacity:
                conflict.add_edge(i, j)
    found = [sorted(c) for c in islice(nx.find_cliques(conflict), MAX_ENUMERATED) if len(c) >= 3]
    found.sort(key=lambda c: (-len(c), c))
    return found[:MAX_CLIQUES]
