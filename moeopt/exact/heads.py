"""Heads and tails from the precedence structure *and* the capacities: classes combined along paths.

The longest path gives each event a head (earliest start) from precedence alone, and each
capacity set (:mod:`moeopt.exact.bounds`) bounds the makespan alone. Neither sees that an event
deep in a chain cannot start before *all* its ancestors that share a capacity have been through
it: a compute phase on one core must wait for the loads of every tile it needs, and those loads
queue for the shared bandwidth with the loads of other cores. The adjusted heads ``H`` and tails
``T`` put the two together, one capacity set at a time, and propagate along the precedences, so
that a path can collect one class's delay before an event and another class's after it.

**Heads.** In topological order::

    H(j) = max( head(j),  max_{p -> j} H(p) + d(p) + λ,  max_X F_X(j) )

where, for a capacity set ``X`` of capacity ``C`` and the intervals ``A`` of ``X`` whose closing
event is a strict ancestor of ``j``::

    F_X(j) = max_h ( h + Σ_{i ∈ A, H(first_i) ≥ h} q_i · len_i / C )   (rounded up on ticks)

*Claim:* every schedule starts ``j`` at or after ``H(j)``. *Proof* by induction along the
topological order. The first two terms hold by the precedences. Every interval of ``A`` ends at
its closing event's end, which precedes ``j``'s start (``r`` is an ancestor, λ ≥ 0), and starts
at its opening event's start, an ancestor of ``j`` too, so at or after ``H(first)`` by induction.
The intervals of ``A`` with ``H(first) ≥ h`` therefore lie in ``[h, start(j)]``, and at most ``C``
units are in use at any instant there: ``start(j) − h ≥ Σ q·len / C``. ∎

**Tails.** Symmetrically, in reverse topological order, ``T(j)`` (from ``j``'s start to the end,
its duration included) is at least ``d(j) + λ + T(s)`` for a successor ``s`` and at least
``d(j) + max_t ( t + Σ_{i ∈ B, after_i ≥ t} q_i · len_i / C )`` for the intervals ``B`` of a set
whose opening event is a strict descendant of ``j`` (they start after ``j`` ends), where
``after_i = T(last_i) − d(last_i)`` is the work that must follow the interval. Same proof,
mirrored.

**Bounds.** ``max_j H(j) + T(j)`` (source ``joint:paths``) is a lower bound on the makespan,
and so is every capacity set's energy bound recomputed with ``H`` and ``T`` in place of the
longest-path heads and tails (source ``joint:<set>``). Their class is ``joint``: they mix
the constraint classes that the per-class bounds keep apart.

Ancestors and descendants are bit sets; the work is events × intervals of the sets, skipped
beyond ``HEADS_BUDGET``. Larger graphs get the targeted form, :func:`raised_ends`: only the
intervals of the winning capacity sets, each raised from its own ancestors (descendants) when
there are few, with energy, weighted energy and parallel machines (it lifts a set's bound where
the set's first intervals wait for rounds of another capacity, e.g. loads behind cross-rank
transfers).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from itertools import accumulate
from operator import add

from moeopt.core.compiled import CompiledGraph

HEADS_BUDGET = 3_000_000
"""Events × capacity-set intervals allowed for the adjusted heads and tails."""


def _fluid(pairs: list[tuple[float, float]], capacity: int, integral: bool) -> float:
    """``max_h h + Σ_{x ≥ h} w / C`` over ``(x, w)`` pairs (rounded up on ticks); ``-inf`` if empty."""
    pairs = sorted(pairs, key=lambda p: -p[0])
    return _fluid_sorted([x for x, _w in pairs], [w for _x, w in pairs], capacity, integral)


def _fluid_sorted(xs: Sequence[float], ws: Sequence[float], capacity: int, integral: bool) -> float:
    """:func:`_fluid` of pairs given as releases ``xs`` (latest first) and their weights ``ws``:
    the energy is summed in that order, one term at a time, as :func:`_fluid` sums it."""
    if not xs:
        return -math.inf
    if integral:
        spans = [float(-(-round(e) // capacity)) for e in accumulate(ws)]
    else:
        spans = [e / capacity for e in accumulate(ws)]
    return max(map(add, xs, spans))


def _reach_bits(
    topo: Sequence[int],
    preds: Sequence[Sequence[tuple[int, float]]],
    succs: Sequence[Sequence[tuple[int, float]]],
) -> tuple[list[int], list[int]]:
    """Each event's ancestors and descendants as bit sets (bit ``k`` = event ``k``)."""
    anc = [0] * len(topo)
    for j in topo:
        a = 0
        for p, _lam in preds[j]:
            a |= anc[p] | (1 << p)
        anc[j] = a
    desc = [0] * len(topo)
    for j in reversed(topo):
        d = 0
        for x, _lam in succs[j]:
            d |= desc[x] | (1 << x)
        desc[j] = d
    return anc, desc


def adjusted_heads_tails(
    cg: CompiledGraph,
    sets: Sequence[tuple[int, Sequence[tuple[int, int, float, int]]]],
    dur: Sequence[float],
    preds: Sequence[Sequence[tuple[int, float]]],
    succs: Sequence[Sequence[tuple[int, float]]],
    head: Sequence[float],
    tail: Sequence[float],
    *,
    integral: bool = False,
    budget: int = HEADS_BUDGET,
) -> tuple[list[float], list[float]] | None:
    """``(H, T)`` of the module docstring, or ``None`` when over ``budget``.

    ``sets`` are ``(capacity, items)`` with items ``(first, last, length, demand)`` as in
    :class:`moeopt.exact.bounds.CapacitySet` (items held until the end, ``last = −1``, are left
    out: they close no interval before another event).
    """
    n = cg.n
    used = [
        (cap, [(f, la, ln, q) for f, la, ln, q in items if la >= 0 and ln > 0 and q > 0])
        for cap, items in sets
    ]
    used = [(cap, items) for cap, items in used if len(items) > 1 and cap > 0]
    work = n * sum(len(items) for _c, items in used)
    if not used or work > budget:
        return None
    anc, desc = _reach_bits(cg.topo, preds, succs)
    big_h = list(head)
    for j in cg.topo:
        h = big_h[j]
        for p, lam in preds[j]:
            h = max(h, big_h[p] + dur[p] + lam)
        aj = anc[j]
        for cap, items in used:
            pairs = [(big_h[f], q * ln) for f, la, ln, q in items if (aj >> la) & 1]
            if pairs:
                h = max(h, _fluid(pairs, cap, integral))
        big_h[j] = h
    big_t = list(tail)
    for j in reversed(cg.topo):
        rest = 0.0
        for s, lam in succs[j]:
            rest = max(rest, lam + big_t[s])
        dj = desc[j]
        for cap, items in used:
            pairs = [(big_t[la] - dur[la], q * ln) for f, la, ln, q in items if (dj >> f) & 1]
            if pairs:
                rest = max(rest, _fluid(pairs, cap, integral))
        big_t[j] = max(big_t[j], dur[j] + rest)
    return big_h, big_t


RAISE_MAX_NEIGHBOURS = 400
"""Targeted raising (:func:`raised_ends`): events with at most this many ancestors
(descendants) always get a raised head (tail); the others share ``RAISE_WORK``."""
RAISE_WORK = 2_000_000
"""Targeted raising: work (neighbours visited plus intervals passed to a completion bound) for
the events with more than ``RAISE_MAX_NEIGHBOURS`` ancestors (descendants), taken by increasing
head (tail): the earliest intervals of a set are the ones its bound starts from. On a 6000-event
kernel graph the first intervals of the winning set have almost every event as an ancestor."""
RAISE_FUTILE = 8
"""Targeted raising stops taking events beyond ``RAISE_MAX_NEIGHBOURS`` after this many in a row
raised nothing (stopping early only weakens the result)."""
GAP_THRESHOLDS = 8
"""Targeted raising: distances to the event tried as thresholds per capacity set (the smallest,
and up to this many more evenly spread over the distinct ones)."""
MACHINE_RELEASES = 32
"""Targeted raising: release thresholds per call of the machine part (:class:`_Completion`)."""
MACHINE_THRESHOLDS = 3
"""Demand thresholds per set for the machine part of the targeted raising (largest demands)."""


class _Completion:
    """Lower bounds on when a subset of one capacity set's intervals can all be through, given a
    release ``x`` per interval: ``max_x x + span(intervals released at or after x)``, with span
    the energy on the capacity, the energy under each knapsack weighting of the *whole* set (a
    weighting's ``K_W`` for the whole set is at least the one for any subset: still valid), or
    the ``P||Cmax`` bound on the machine count of the whole set (never fewer than a subset's)."""

    def __init__(self, capacity: int, items: Sequence[tuple[int, int, float, int]], integral: bool) -> None:
        from collections import Counter

        from moeopt.exact.packing import max_fit, weightings

        counts: Counter[int] = Counter(q for _f, _la, ln, q in items if ln > 0 and q > 0)
        self.capacity = capacity
        self.integral = integral
        # results by subset (in the order given): the events of raised_ends see the same few
        # subsets again and again (a v1 kernel graph of 2k events: 377k calls, 5k distinct)
        self._memo: dict[tuple[tuple[float, float, int], ...], float] = {}
        self.weightings = [(w, kw) for _name, w, kw in weightings(counts, capacity)]
        self.machines = []
        for q in sorted(counts, reverse=True)[:MACHINE_THRESHOLDS]:
            m = max_fit([d for d in counts.elements() if d >= q], capacity)
            if m > 1:
                self.machines.append((q, m))

    def of_latest_first(self, order: tuple[tuple[float, float, int], ...]) -> float:
        """The bound for intervals ``(x, length, demand)`` given in the order
        ``sorted(intervals, key=-x)`` gives (the energies are summed in that order)."""
        got = self._memo.get(order)
        if got is None:
            got = self._memo[order] = self._compute(order)
        return got

    def _compute(self, order: Sequence[tuple[float, float, int]]) -> float:
        xs = [x for x, _ln, _q in order]
        best = _fluid_sorted(xs, [q * ln for _x, ln, q in order], self.capacity, self.integral)
        for w, kw in self.weightings:
            best = max(best, _fluid_sorted(xs, [w.get(q, 0) * ln for _x, ln, q in order], kw, self.integral))
        for q0, m in self.machines:
            # releases from the latest down: the subsets {x' >= x}, each evaluated once, at the
            # last interval released at x (the largest subset with that x); beyond
            # MACHINE_RELEASES distinct releases only at evenly spread ones (any subset of the
            # thresholds still gives a valid bound)
            mine = [(x, ln) for x, ln, q in order if q >= q0]
            if len(mine) <= m:
                continue
            ends = [k for k in range(len(mine)) if k + 1 == len(mine) or mine[k + 1][0] != mine[k][0]]
            ends = [k for k in ends if k + 1 > m]
            if len(ends) > MACHINE_RELEASES:
                step = (len(ends) - 1) / (MACHINE_RELEASES - 1)
                ends = sorted({ends[round(step * i)] for i in range(MACHINE_RELEASES)})
            lengths = [ln for _x, ln in mine]
            for k in ends:
                best = max(best, mine[k][0] + _rounds(lengths[: k + 1], m))
        return best


_Subset = tuple[float, float, float, tuple[tuple[float, float, int], ...]]
"""``(gap threshold g, latest release, sum of lengths, intervals)`` of one subset of
:func:`_by_gap`, the intervals latest first."""


def _rounds(lengths: list[float], m: int) -> float:
    """The ``P||Cmax`` bound of :mod:`moeopt.exact.packing` on ``m`` machines."""
    p = sorted(lengths, reverse=True)
    best = 0.0
    k = 0
    while k * m < len(p):
        best = max(best, sum(p[k * m - k : k * m + 1]))
        k += 1
    return best


def raised_ends(
    cg: CompiledGraph,
    sets: Sequence[tuple[int, Sequence[tuple[int, int, float, int]]]],
    dur: Sequence[float],
    preds: Sequence[Sequence[tuple[int, float]]],
    succs: Sequence[Sequence[tuple[int, float]]],
    head: Sequence[float],
    tail: Sequence[float],
    heads_of: Sequence[int],
    tails_of: Sequence[int],
    *,
    integral: bool = False,
    max_neighbours: int = RAISE_MAX_NEIGHBOURS,
    work: int = RAISE_WORK,
    deadline: float | None = None,
) -> tuple[dict[int, float], dict[int, float]]:
    """Raised heads for the events ``heads_of`` and raised tails for ``tails_of``, each from its
    own ancestors (descendants) only: the cheap, targeted form of :func:`adjusted_heads_tails`
    for graphs too large for it, where only a few events matter (the intervals of the capacity
    set whose bound wins).

    For an event ``j`` with ancestors ``A``: every interval of a set whose closing event ``r`` is
    in ``A`` runs between its opening event's head and ``end(r)``, and ``start(j) ≥ end(r) +
    gap(r)`` with ``gap(r)`` the longest path from ``r``'s end to ``j``'s start; so ``start(j)``
    is at least the time by which those intervals can all be through (:class:`_Completion`:
    energy, weighted energy or parallel machines, released at their heads) plus the smallest
    ``gap`` among them. The same holds for every subset of those intervals, so it is applied to
    the subsets ``{gap ≥ g}`` too, for a few thresholds ``g`` (``GAP_THRESHOLDS``): with ``S``
    such a subset, ``start(j) ≥ max_{i∈S} (end(r_i) + gap_i) ≥ max_{i∈S} end(r_i) + g``, and
    the completion bound is a lower bound on ``max_{i∈S} end(r_i)``. This matters where an
    event's nearest intervals are few and the bulk of them lie farther up, behind a phase that
    does not use the capacity (a transfer right after a few loads of its own, which come after
    all the loads of an earlier phase and a long computation). Mirrored for tails: the intervals
    opened by descendants ``f`` start at least ``gap(f)`` after ``j`` ends and are followed by
    their ``after``, so ``tail(j) ≥ d(j) + g + max_t (t + span(intervals with gap ≥ g and
    after ≥ t))``. Events with more than
    ``max_neighbours`` ancestors (descendants) are taken by increasing head (tail) while
    ``work`` lasts and until ``RAISE_FUTILE`` in a row raised nothing; the others keep their
    longest-path value (leaving an event out only weakens the result).

    ``deadline`` (a ``time.perf_counter()`` value): no event is taken after it, and no head after
    the midpoint between the call and it (the tails get the rest); leaving events out only
    weakens the result, so a deadline that falls makes the result depend on the machine's speed.
    """
    now = time.perf_counter()
    mid = None if deadline is None else now + (deadline - now) / 2
    used = [(cap, [it for it in items if it[1] >= 0 and it[2] > 0 and it[3] > 0]) for cap, items in sets]
    completions = [_Completion(cap, items, integral) for cap, items in used]
    by_last: dict[int, list[tuple[int, int, float, int]]] = {}
    by_first: dict[int, list[tuple[int, int, float, int]]] = {}
    for k, (_cap, items) in enumerate(used):
        for f, la, ln, q in items:
            by_last.setdefault(la, []).append((k, f, ln, q))
            by_first.setdefault(f, []).append((k, la, ln, q))
    anc, desc = _reach_bits(cg.topo, preds, succs)

    def members(bits: int) -> list[int]:
        out = []
        while bits:
            low = bits & -bits
            out.append(low.bit_length() - 1)
            bits ^= low
        return out

    # the subsets of _by_gap per (set, released intervals with their gaps): many events see the
    # same ones (their ancestors' intervals at the same distances)
    split: dict[tuple[int, tuple[tuple[float, float, int, float], ...]], list[_Subset]] = {}

    def subsets(k: int, released: list[tuple[float, float, int, float]]) -> list[_Subset]:
        released.sort(key=_minus_release)  # latest first, as the completion bound takes them
        key = (k, tuple(released))
        got = split.get(key)
        if got is None:
            got = split[key] = [
                (g, sub[0][0], sum([r[1] for r in sub]), tuple(sub)) for g, sub in _by_gap(released)
            ]
        return got

    position = {e: p for p, e in enumerate(cg.topo)}
    heads: dict[int, float] = {}
    left, futile = work, 0
    for j, budgeted in _order(set(heads_of), anc, head, max_neighbours):
        if budgeted and (left <= 0 or futile >= RAISE_FUTILE):
            break
        if mid is not None and time.perf_counter() > mid:
            break
        ancestors = sorted(members(anc[j]), key=lambda x: -position[x])
        cost = len(ancestors)
        # gap[x]: longest path from x's end to j's start (λ and durations in between)
        gap = {j: 0.0}
        for x in ancestors:
            gap[x] = max(lam + (0.0 if y == j else dur[y] + gap[y]) for y, lam in succs[x] if y in gap)
        per_set: dict[int, list[tuple[float, float, int, float]]] = {}
        for a in ancestors:
            for k, f, ln, q in by_last.get(a, ()):
                per_set.setdefault(k, []).append((head[f], ln, q, gap[a]))
        best = head[j]
        for k, released in per_set.items():
            for g, x0, total, sub in subsets(k, released):
                # every span is at most the sum of the lengths: skip subsets that cannot raise it
                if x0 + total + g > best:
                    best = max(best, completions[k].of_latest_first(sub) + g)
                    cost += len(sub)
        if best > head[j]:
            heads[j] = best
        if budgeted:
            left -= cost
            futile = 0 if best > head[j] else futile + 1
    tails: dict[int, float] = {}
    left, futile = work, 0
    for j, budgeted in _order(set(tails_of), desc, tail, max_neighbours):
        if budgeted and (left <= 0 or futile >= RAISE_FUTILE):
            break
        if deadline is not None and time.perf_counter() > deadline:
            break
        descendants = sorted(members(desc[j]), key=lambda x: position[x])
        cost = len(descendants)
        # gap[x]: longest path from j's end to x's start
        gap = {j: 0.0}
        for x in descendants:
            gap[x] = max(lam + (0.0 if p == j else gap[p] + dur[p]) for p, lam in preds[x] if p in gap)
        per_set = {}
        for d in descendants:
            for k, la, ln, q in by_first.get(d, ()):
                per_set.setdefault(k, []).append((tail[la] - dur[la], ln, q, gap[d]))
        best = tail[j]
        for k, released in per_set.items():
            for g, x0, total, sub in subsets(k, released):
                if dur[j] + g + x0 + total > best:
                    best = max(best, dur[j] + g + completions[k].of_latest_first(sub))
                    cost += len(sub)
        if best > tail[j]:
            tails[j] = best
        if budgeted:
            left -= cost
            futile = 0 if best > tail[j] else futile + 1
    return heads, tails


def _minus_release(r: tuple[float, float, int, float]) -> float:
    return -r[0]


def _order(
    events: set[int], reach: Sequence[int], value: Sequence[float], max_neighbours: int
) -> list[tuple[int, bool]]:
    """The events of :func:`raised_ends`, ``(event, budgeted)``: every one with at most
    ``max_neighbours`` ancestors (descendants, as bit sets in ``reach``) first, then the others
    by increasing ``value`` (head or tail), which share the work budget."""
    few = sorted(j for j in events if reach[j].bit_count() <= max_neighbours)
    many = sorted((j for j in events if reach[j].bit_count() > max_neighbours), key=lambda j: (value[j], j))
    return [(j, False) for j in few] + [(j, True) for j in many]


def _by_gap(
    released: list[tuple[float, float, int, float]],
) -> list[tuple[float, list[tuple[float, float, int]]]]:
    """``(g, intervals with gap ≥ g)`` for the smallest gap and up to ``GAP_THRESHOLDS`` more of
    the distinct gaps, evenly spread (``released``: ``(release, length, demand, gap)``)."""
    gaps = sorted({r[3] for r in released})
    if GAP_THRESHOLDS and len(gaps) > GAP_THRESHOLDS + 1:
        step = (len(gaps) - 1) / GAP_THRESHOLDS
        gaps = sorted({gaps[0], *(gaps[round(step * k)] for k in range(1, GAP_THRESHOLDS + 1))})
    return [(g, [(x, ln, q) for x, ln, q, gp in released if gp >= g]) for g in gaps]
