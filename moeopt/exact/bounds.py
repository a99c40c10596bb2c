"""Static lower bounds on the makespan of any event graph: longest path, energy and their refinements.

Every bound here holds for every schedule of the graph, so each is a lower bound on the optimum
(and the solver gets the ones in ticks as redundant constraints, see
:mod:`moeopt.exact.constraints`). Nothing here knows what the events mean.

* **Longest path**: ``max_e head(e) + tail(e)``, where ``head(e)`` is the earliest start allowed
  by the precedences (durations and λ) and ``tail(e)`` the longest path from ``e``'s start to the
  end of the graph, its own duration included.

* **Energy** of a set ``S`` of intervals that share a capacity ``c`` (each interval lasts at least
  ``len(i)``, uses ``q(i)`` units, starts no earlier than ``head(i)`` and is followed by at least
  ``after(i)`` of work that must come after its end)::

      makespan ≥ min_{i∈S} head(i) + Σ_{i∈S} q(i)·len(i) / c + min_{i∈S} after(i)

  *Proof.* No interval of ``S`` starts before ``h = min head``. Over ``[h, f]``, where ``f`` is the
  last end of an interval of ``S``, at most ``c`` units are in use, and ``Σ q·len`` unit-time is
  needed, so ``f − h ≥ Σ q·len / c``. The interval ending at ``f`` is followed by at least its
  ``after ≥ min after``. ∎ It holds for every subset ``S``; we take the best over the subsets
  ``{i : head(i) ≥ h}`` and ``{i : after(i) ≥ t}`` and, for sets of at most ``EXACT_2D_LIMIT``
  intervals, ``{i : head(i) ≥ h, after(i) ≥ t}`` for every pair of thresholds.

  The interval sets are:

  - each fixed resource (capacity 1): the events that hold it;
  - each pool (capacity = number of members): the events with a placeholder of it, plus the
    events holding one of its members as a fixed resource;
  - each group of pools that share members (connected through common members; capacity = the
    number of members of the union ``U``): the events with a placeholder of any of them (one
    unit per placeholder) plus the events holding a member of ``U`` as a fixed resource. Every
    such unit occupies one member of ``U``, and a member runs one event at a time, so at most
    ``|U|`` units are in use at any instant. Two pools over the same cores (the loads of two
    stages on one set of load pipes) are much tighter together than apart: each alone leaves
    the cores free for the other;
  - each semaphore that has a pairing (:mod:`moeopt.exact.pairing`, capacity ``C``): its holding
    intervals. A pair ``(a, r, k)`` holds ``k`` units from ``a``'s start to ``r``'s end, which is
    at least ``d(a)`` when ``r = a``, ``d(a) + λ + d(r)`` when ``r`` is a direct successor, and
    ``d(a) + d(r)`` for a deeper descendant (``r`` starts after ``a`` ends); it starts no earlier
    than ``head(a)`` and is followed by ``after(r) = tail(r) − d(r)``. An unreleased unit holds
    from ``a``'s start to the end of the schedule: length ``tail(a)``, nothing after.

  A semaphore without a pairing gives no energy bound (its units may come back from anywhere).

* **Packing** (:mod:`moeopt.exact.packing`): the same sets with knapsack-weighted demands (the
  largest total demand that fits at once, dual-feasible functions) and as parallel machines
  (``P||Cmax`` rounds).

* **Windows** (:mod:`moeopt.exact.windows`): energetic reasoning, the part of every interval that
  must fall inside a time window, refuting candidate makespans: on a thinned grid of windows for
  every promising set, and with every right end of the windows (a sweep over prefix sums) for the
  ``SWEEP_SETS`` sets whose bounds lead.

* **Combined** (:mod:`moeopt.exact.heads`): heads and tails raised by the capacity sets along the
  precedences (an event waits for all its ancestors that share a capacity), then the longest
  path and every set's bound again on them: the constraint classes combined along paths.

* **Energy distances** (:func:`energy_delays`, for the solver only): the same argument between two
  events ``i`` and ``j`` of a chain, over the intervals that must run after ``i`` starts and
  before ``j`` starts, gives a lower bound on ``start(j) − start(i)``.

The same functions run on real µs (the reported bounds) and on integer ticks (``integral=True``:
the energy term is rounded up, which is valid because tick spans are whole numbers).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from moeopt.core.compiled import CompiledGraph
from moeopt.core.compiled import longest_paths as core_longest_paths
from moeopt.exact.pairing import Pairing

EXACT_2D_LIMIT = 300
"""Interval sets up to this size get the two-threshold energy bound in pure Python (quadratic);
larger ones get it vectorised (:func:`_energy_2d`) within ``ENERGY_2D_BUDGET``."""
WINDOW_PROMISING = 0.95
"""Energetic reasoning on windows runs for the capacity sets whose other bounds reach this share
of the best bound (it costs far more than the threshold bounds, and rarely lifts a weak set)."""
ENERGY_2D_BUDGET = 20_000_000
"""Thresholds × intervals of the vectorised two-threshold energy bound."""

Edges = Sequence[tuple[tuple[int, float], ...]]


@dataclass(frozen=True, slots=True)
class Bound:
    """One lower bound on the makespan: where it comes from and its value (µs or ticks).

    ``source`` is ``"longest_path"``, ``"resource:<name>"``, ``"pool:<role>"``,
    ``"pools:<role>+<role>"``, ``"semaphore:<name>"`` or ``"cpsat"`` (or a caller's limit);
    :func:`constraint_class` is the part before the colon. ``method`` says which argument
    reached the value for a capacity set: ``"energy"``, ``"fit"`` / ``"dff<k>"`` (weighted
    energy) or ``"machines<m>"`` (parallel machines), see :mod:`moeopt.exact.packing`.
    """

    source: str
    value: float
    method: str = ""


@dataclass(frozen=True, slots=True)
class Item:
    """An interval for the energy bound: earliest start, minimum length, work after, demand."""

    head: float
    length: float
    after: float
    demand: int


def longest_paths(
    cg: CompiledGraph, dur: Sequence[float], preds: Edges, succs: Edges
) -> tuple[list[float], list[float]]:
    """``(head, tail)`` per event for durations ``dur`` and edges ``preds`` / ``succs`` (with λ)."""
    return core_longest_paths(cg.topo, dur, preds, succs)


def energy_bound(items: Sequence[Item], capacity: int, *, integral: bool = False) -> float:
    """The best energy bound over the threshold subsets of ``items`` (see the module docstring)."""
    its = [it for it in items if it.length > 0 and it.demand > 0]
    if not its or capacity <= 0:
        return 0.0

    def span(energy: float) -> float:
        if integral:
            return float(-(-int(energy) // capacity))  # ceil for whole ticks
        return energy / capacity

    best = 0.0
    # S = {head >= h}: sweep heads from the latest down, tracking the smallest after
    energy = 0.0
    min_after = math.inf
    for it in sorted(its, key=lambda x: -x.head):
        energy += it.demand * it.length
        min_after = min(min_after, it.after)
        best = max(best, it.head + span(energy) + min_after)
    # S = {after >= t}
    energy = 0.0
    min_head = math.inf
    for it in sorted(its, key=lambda x: -x.after):
        energy += it.demand * it.length
        min_head = min(min_head, it.head)
        best = max(best, min_head + span(energy) + it.after)
    if len(its) <= EXACT_2D_LIMIT:
        by_after = sorted(its, key=lambda x: -x.after)
        for h in sorted({it.head for it in its}):
            energy = 0.0
            for it in by_after:
                if it.head >= h:
                    energy += it.demand * it.length
                    best = max(best, h + span(energy) + it.after)
    else:
        best = max(best, _energy_2d(its, capacity, integral))
    return best


def _energy_2d(its: Sequence[Item], capacity: int, integral: bool) -> float:
    """The two-threshold bound of :func:`energy_bound`, vectorised, for large interval sets.

    Thresholds ``h`` are the distinct heads; when there are more than fit in
    ``ENERGY_2D_BUDGET`` (heads × intervals), an evenly spaced subset of them (any subset of
    thresholds still gives a valid bound, only a weaker one).
    """
    order = sorted(range(len(its)), key=lambda k: -its[k].after)
    head = np.array([its[k].head for k in order])
    after = np.array([its[k].after for k in order])
    work = np.array([its[k].demand * its[k].length for k in order])
    heads = np.unique(head)
    keep = max(1, ENERGY_2D_BUDGET // len(its))
    if len(heads) > keep:
        heads = heads[np.linspace(0, len(heads) - 1, keep).round().astype(int)]
    best = 0.0
    for h in heads:
        mask = head >= h
        energy = np.cumsum(np.where(mask, work, 0.0))
        span = -np.floor_divide(-np.round(energy), capacity) if integral else energy / capacity
        best = max(best, float(np.max(np.where(mask, h + span + after, -np.inf))))
    return best


def static_bounds(
    cg: CompiledGraph,
    pairings: dict[int, Pairing],
    dur: Sequence[float],
    preds: Edges,
    succs: Edges,
    *,
    integral: bool = False,
    deadline: float | None = None,
) -> list[Bound]:
    """:func:`static_analysis`'s bounds."""
    return static_analysis(cg, pairings, dur, preds, succs, integral=integral, deadline=deadline).bounds


@dataclass(frozen=True, slots=True)
class StaticAnalysis:
    """The static bounds and the best heads and tails known (the adjusted ones of
    :mod:`moeopt.exact.heads` when they were computed, else the longest paths)."""

    bounds: list[Bound]
    head: list[float]
    tail: list[float]


def static_analysis(
    cg: CompiledGraph,
    pairings: dict[int, Pairing],
    dur: Sequence[float],
    preds: Edges,
    succs: Edges,
    *,
    integral: bool = False,
    deadline: float | None = None,
) -> StaticAnalysis:
    """Longest path, the best bound of every resource, pool and paired semaphore
    (:func:`capacity_bound`), and the joint bounds of :mod:`moeopt.exact.heads` (sources
    ``joint:paths`` and ``joint:<set>``, the latter only where they beat the set alone; on graphs
    too large for every event, ``joint:paths`` is the longest path on the heads and tails raised
    for the intervals of the leading sets, reported even when nothing was raised, and the
    ``SWEEP_SETS`` leading sets get the sweep of energetic reasoning on their raised intervals).

    ``dur`` / ``preds`` / ``succs`` give durations and λ (real µs, or ticks with ``integral``);
    ``pairings`` maps semaphore index -> pairing for the semaphores that have one.
    ``deadline`` (a ``time.perf_counter()`` value) cuts the sweep of the leading sets (within
    ``SWEEP_SHARE`` of the time left) and the targeted raising
    (:func:`moeopt.exact.heads.raised_ends`) short: the bounds stay sound, possibly weaker.
    """
    from moeopt.exact.heads import adjusted_heads_tails, raised_ends

    head, tail = longest_paths(cg, dur, preds, succs)
    out = [Bound("longest_path", max((head[i] + tail[i] for i in range(cg.n)), default=0.0), "path")]
    sets = capacity_sets(cg, pairings, dur, succs)
    plain: dict[str, float] = {}
    set_bounds = []
    for cs in sets:
        items = _items(cs, head, tail, dur)
        set_bounds.append((cs, items, capacity_bound(cs, items, integral=integral, windows=False)))
    top = max([out[0].value, *(b.value for _cs, _its, b in set_bounds)])
    finals = []
    for cs, items, b in set_bounds:
        if b.value >= WINDOW_PROMISING * top:  # windows cost more: only where they may win
            b = capacity_bound(cs, items, integral=integral)
        finals.append((cs, items, b))
    finals = _swept(finals, out[0].value, integral=integral, deadline=deadline)
    for cs, _its, b in finals:
        plain[cs.source] = b.value
        out.append(b)
    adjusted = adjusted_heads_tails(
        cg, [(cs.capacity, cs.items) for cs in sets], dur, preds, succs, head, tail, integral=integral
    )
    if adjusted is not None:
        big_h, big_t = adjusted
        paths = max((big_h[i] + big_t[i] for i in range(cg.n)), default=0.0)
        out.append(Bound("joint:paths", paths, "heads"))
        for cs in sets:
            b = capacity_bound(cs, _items(cs, big_h, big_t, dur), integral=integral, windows=False)
            if b.value > plain[cs.source]:
                out.append(Bound(f"joint:{cs.source}", b.value, b.method))
        return StaticAnalysis(out, big_h, big_t)
    # too large for every event: raise the heads (tails) of the intervals of the winning sets only
    top = max(b.value for b in out)
    winners = [(cs, b) for cs, _its, b in set_bounds if b.value >= WINDOW_PROMISING * top]
    if not winners:
        out.append(Bound("joint:paths", out[0].value, "heads"))  # nothing to raise: the longest path
        return StaticAnalysis(out, list(head), list(tail))
    heads_of = [f for cs, _b in winners for f, _la, _ln, _q in cs.items]
    tails_of = [la for cs, _b in winners for _f, la, _ln, _q in cs.items if la >= 0]
    raised_h, raised_t = raised_ends(
        cg,
        [(cs.capacity, cs.items) for cs in sets],
        dur,
        preds,
        succs,
        head,
        tail,
        heads_of,
        tails_of,
        integral=integral,
        deadline=deadline,
    )
    big_h = list(head)
    big_t = list(tail)
    for j, v in raised_h.items():
        big_h[j] = v
    for j, v in raised_t.items():
        big_t[j] = v
    # reported even when it is the longest path: how far the joint class reaches
    out.append(Bound("joint:paths", max((big_h[i] + big_t[i] for i in range(cg.n)), default=0.0), "heads"))
    if raised_h or raised_t:
        from moeopt.exact.windows import sweep_window_bound

        swept = 0
        for cs, b in sorted(winners, key=lambda w: -plain[w[0].source]):
            raised_items = _items(cs, big_h, big_t, dur)
            nb = capacity_bound(cs, raised_items, integral=integral, windows=False)
            if swept < SWEEP_SETS:  # the leading sets again, with the raised heads and tails
                swept += 1
                start = max(nb.value, plain[cs.source])
                value, method = sweep_window_bound(
                    raised_items, cs.capacity, start, integral=integral, deadline=deadline
                )
                if method and value > nb.value:
                    nb = Bound(cs.source, value, method)
            if nb.value > b.value:
                out.append(Bound(f"joint:{cs.source}", nb.value, nb.method))
    return StaticAnalysis(out, big_h, big_t)


SWEEP_SETS = 2
"""Capacity sets (those with the largest bounds, when they lead) that get energetic reasoning with
every right end of the windows (:func:`moeopt.exact.windows.sweep_window_bound`)."""
SWEEP_SHARE = 0.3
"""Share of the time left before the static analysis's deadline that the sweep of the leading
sets may take (it stops with the makespans refuted so far: sound, possibly weaker). assumed: on
the seed-002 kernel graphs it takes about a second, against a 15 s share at a 60 s limit."""


def _swept(
    finals: list[tuple[CapacitySet, list[Item], Bound]],
    path: float,
    *,
    integral: bool,
    deadline: float | None,
) -> list[tuple[CapacitySet, list[Item], Bound]]:
    """``finals`` with the leading capacity sets' bounds raised by the sweep of
    :func:`moeopt.exact.windows.sweep_window_bound`: the ``SWEEP_SETS`` largest bounds that are
    at or above every other bound (the longest path ``path`` included) within ``WINDOW_PROMISING``."""
    import time

    from moeopt.exact.windows import sweep_window_bound

    if deadline is not None:  # leave most of the time to the targeted raising that follows
        now = time.perf_counter()
        deadline = now + SWEEP_SHARE * max(0.0, deadline - now)
    top = max([path, *(b.value for _cs, _its, b in finals)])
    order = sorted(range(len(finals)), key=lambda k: -finals[k][2].value)
    out = list(finals)
    for k in order[:SWEEP_SETS]:
        cs, items, b = finals[k]
        if b.value < WINDOW_PROMISING * top:
            break
        value, method = sweep_window_bound(items, cs.capacity, b.value, integral=integral, deadline=deadline)
        if method and value > b.value:
            out[k] = (cs, items, Bound(cs.source, value, method))
    return out


def _items(
    cs: CapacitySet, head: Sequence[float], tail: Sequence[float], dur: Sequence[float]
) -> list[Item]:
    return [
        Item(head[first], length, tail[last] - dur[last], q)
        if last >= 0
        else Item(head[first], tail[first], 0.0, q)
        for first, last, length, q in cs.items
    ]


def capacity_bound(
    cs: CapacitySet, items: Sequence[Item], *, integral: bool, windows: bool = True
) -> Bound:
    """The best bound of one capacity set: energy with thresholds (:func:`energy_bound`), with
    knapsack-weighted demands and as parallel machines (:mod:`moeopt.exact.packing`), and by
    energetic reasoning on windows (:mod:`moeopt.exact.windows`) from there."""
    from moeopt.exact.packing import best_weighting, machine_bound
    from moeopt.exact.windows import window_bound

    best = Bound(cs.source, energy_bound(items, cs.capacity, integral=integral), "energy")
    weighted = best_weighting(items, cs.capacity, integral=integral)
    if weighted is not None and weighted[0] > best.value:
        best = Bound(cs.source, weighted[0], weighted[1])
    value, method = machine_bound(items, cs.capacity)
    if value > best.value:
        best = Bound(cs.source, value, method)
    if windows:
        wt = None if weighted is None else (weighted[1], weighted[2], weighted[3])
        value, method = window_bound(items, cs.capacity, best.value, integral=integral, weighting=wt)
        if method and value > best.value:
            best = Bound(cs.source, value, method)
    return best


def describe_method(method: str) -> str:
    """A bound's ``method`` in words, for reports: ``"dff12"`` -> ``"energy with demands rounded
    to 1/12 of the capacity"``."""
    if method.startswith("window"):
        rest = method.removeprefix("window").removeprefix("-")
        return "energetic reasoning on time windows" + (f" ({describe_method(rest)})" if rest else "")
    if method.startswith("dff") and method[3:].isdigit():
        return f"energy with demands rounded to 1/{method[3:]} of the capacity"
    if method.startswith("machines") and method[8:].isdigit():
        return f"{method[8:]} parallel machines"
    return {
        "energy": "energy",
        "fit": "energy on the largest total demand that fits",
        "path": "longest path",
        "heads": "heads and tails raised by the capacities",
        "lp": "makespans refuted by propagation and a preemptive LP (destructive)",
    }.get(method, method)


CLASS_OF_PREFIX = {
    "longest_path": "precedence",
    "joint": "joint",
    "resource": "resource",
    "pool": "pool",
    "pools": "pool",
    "semaphore": "semaphore",
    "cpsat": "cpsat",
}
"""Bound source prefix -> constraint class; a caller's limit keeps its own prefix (``physical``)."""


def constraint_class(source: str) -> str:
    """The constraint class of a bound's source: ``"semaphore:hbm"`` -> ``"semaphore"``,
    ``"longest_path"`` -> ``"precedence"``, ``"pools:a+b"`` -> ``"pool"``, ``"cpsat"`` -> the
    whole model; any other ``"<prefix>:..."`` (a caller's limit) -> ``"<prefix>"``."""
    prefix = source.split(":", 1)[0]
    return CLASS_OF_PREFIX.get(prefix, prefix)


def best_bound(bounds: Sequence[Bound]) -> Bound:
    """The largest bound (ties: the first listed, so ``longest_path`` wins ties)."""
    best = bounds[0]
    for b in bounds[1:]:
        if b.value > best.value:
            best = b
    return best


@dataclass(frozen=True, slots=True)
class CapacitySet:
    """Intervals sharing a capacity: ``items`` are ``(first, last, length, demand)``.

    ``first`` is the event whose start opens the interval, ``last`` the event whose end closes it
    (the same event except for the holding intervals of a pairing; ``-1`` for a unit held until
    the end of the schedule, whose ``length`` is then unknown here and given as 0).
    """

    source: str
    capacity: int
    items: tuple[tuple[int, int, float, int], ...]


def capacity_sets(
    cg: CompiledGraph, pairings: dict[int, Pairing], dur: Sequence[float], succs: Edges
) -> list[CapacitySet]:
    """Every fixed resource, pool and paired semaphore that more demand than capacity contends for."""
    out: list[CapacitySet] = []
    users: dict[int, list[int]] = {}
    for i in range(cg.n):
        for r in cg.fixed[i]:
            users.setdefault(r, []).append(i)
    for r, evs in sorted(users.items()):
        if len(evs) > 1:
            out.append(CapacitySet(f"resource:{cg.res_names[r]}", 1, tuple((i, i, dur[i], 1) for i in evs)))
    for p, members in enumerate(cg.pool_members):
        pool_items = [(i, i, dur[i], q) for i, q in pool_usage(cg, {p}, set(members))]
        if sum(it[3] for it in pool_items) > len(members):
            out.append(CapacitySet(f"pool:{cg.pool_names[p]}", len(members), tuple(pool_items)))
    out.extend(shared_pool_sets(cg, dur))
    succ_lam = [dict(s) for s in succs]
    for s, pairing in sorted(pairings.items()):
        sem_items: list[tuple[int, int, float, int]] = []
        for a, r, k in pairing.pairs:
            if r == a:
                length = dur[a]
            elif r in succ_lam[a]:
                length = dur[a] + succ_lam[a][r] + dur[r]
            else:
                length = dur[a] + dur[r]
            sem_items.append((a, r, length, k))
        sem_items.extend((a, -1, 0.0, k) for a, k in pairing.unreleased)
        if sum(it[3] for it in sem_items) > cg.sem_cap[s] > 0:
            out.append(CapacitySet(f"semaphore:{cg.sem_names[s]}", cg.sem_cap[s], tuple(sem_items)))
    return out


def pool_usage(cg: CompiledGraph, pools: set[int], members: set[int]) -> list[tuple[int, int]]:
    """``(event, units)`` for every event using ``members``: one unit per placeholder of one of
    ``pools`` (whose members are among ``members``) and one per fixed resource in ``members``."""
    out = []
    for i in range(cg.n):
        q = sum(1 for x in cg.placeholders[i] if x in pools) + sum(1 for r in cg.fixed[i] if r in members)
        if q:
            out.append((i, q))
    return out


def pool_groups(cg: CompiledGraph) -> list[tuple[list[int], set[int]]]:
    """Pools connected through shared members, groups of two or more: ``(pools, union of members)``."""
    parent = list(range(len(cg.pool_members)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    owner: dict[int, int] = {}
    for p, members in enumerate(cg.pool_members):
        for m in members:
            if m in owner:
                parent[find(p)] = find(owner[m])
            else:
                owner[m] = p
    groups: dict[int, list[int]] = {}
    for p in range(len(cg.pool_members)):
        groups.setdefault(find(p), []).append(p)
    return [
        (ps, {m for p in ps for m in cg.pool_members[p]}) for ps in groups.values() if len(ps) > 1
    ]


def shared_pool_sets(cg: CompiledGraph, dur: Sequence[float]) -> list[CapacitySet]:
    """One capacity set per group of pools sharing members (see the module docstring)."""
    out: list[CapacitySet] = []
    for ps, union in pool_groups(cg):
        items = [(i, i, dur[i], q) for i, q in pool_usage(cg, set(ps), union)]
        if sum(it[3] for it in items) > len(union):
            name = "+".join(cg.pool_names[p] for p in ps)
            out.append(CapacitySet(f"pools:{name}", len(union), tuple(items)))
    return out


def energy_delays(
    cg: CompiledGraph,
    pairings: dict[int, Pairing],
    dur: Sequence[int],
    preds: Sequence[tuple[tuple[int, int], ...]],
    succs: Sequence[tuple[tuple[int, int], ...]],
    *,
    budget: int,
) -> list[tuple[int, int, int]]:
    """Redundant start-to-start distances from energy, on integer ticks: ``(i, j, delay)``.

    For ``j`` a descendant of ``i``, every interval of a capacity set whose opening event
    descends from ``i`` and whose closing event is an ancestor of ``j`` runs inside
    ``[S_i + lo, S_j − hi]``, where ``lo`` is the smallest longest-path distance from ``i``'s start
    to an opening event's start and ``hi`` the smallest distance from a closing event's end to
    ``j``'s start. So ``S_j − S_i ≥ lo + ⌈energy / capacity⌉ + hi``: the energy bound of the
    sub-project between ``i`` and ``j`` (what must precede and follow, applied to pairs). Only
    distances above the plain longest path are returned. Skipped (empty list) when
    ``n² × intervals`` exceeds ``budget``.
    """
    n = cg.n
    sets = [
        (cs.capacity, [it for it in cs.items if it[1] >= 0 and it[2] > 0])
        for cs in capacity_sets(cg, pairings, [float(d) for d in dur], succs)
    ]
    num_items = sum(len(items) for _c, items in sets)
    if not sets or n * n * max(1, num_items) > budget:
        return []
    # dist[i][k]: longest path from i's start to k's start (-1: k does not descend from i)
    dist: list[list[int]] = []
    for i in range(n):
        d = [-1] * n
        d[i] = 0
        for k in cg.topo:
            dk = d[k]
            if dk < 0:
                continue
            for j, lam in succs[k]:
                v = dk + dur[k] + lam
                if v > d[j]:
                    d[j] = v
        dist.append(d)
    out: list[tuple[int, int, int]] = []
    for i in range(n):
        di = dist[i]
        for j in range(n):
            base = di[j]
            if j == i or base < 0:
                continue
            best = base
            for cap, items in sets:
                energy = 0
                lo = -1
                hi = -1
                for first, last, length, q in items:
                    if first == i or last == j:
                        continue
                    a = di[first]
                    if a < 0:
                        continue
                    b = dist[last][j]
                    if b < 0:
                        continue
                    energy += q * int(length)
                    b -= dur[last]
                    lo = a if lo < 0 or a < lo else lo
                    hi = b if hi < 0 or b < hi else hi
                if energy:
                    v = lo + -(-energy // cap) + hi
                    if v > best:
                        best = v
            if best > base:
                out.append((i, j, best))
    return out
