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

**Bounds.** ``max_j H(j) + T(j)`` (source ``combined:paths``) is a lower bound on the makespan,
and so is every capacity set's energy bound recomputed with ``H`` and ``T`` in place of the
longest-path heads and tails (source ``combined:<set>``). Their class is ``combined``: they mix
the constraint classes that the per-class bounds keep apart.

Ancestors and descendants are bit sets; the work is events × intervals of the sets, skipped
beyond ``HEADS_BUDGET``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from moeopt.core.compiled import CompiledGraph

HEADS_BUDGET = 3_000_000
"""Events × capacity-set intervals allowed for the adjusted heads and tails."""


def _fluid(pairs: list[tuple[float, float]], capacity: int, integral: bool) -> float:
    """``max_h h + Σ_{x ≥ h} w / C`` over ``(x, w)`` pairs (rounded up on ticks); ``-inf`` if empty."""
    best = -math.inf
    energy = 0.0
    for x, w in sorted(pairs, key=lambda p: -p[0]):
        energy += w
        span = float(-(-round(energy) // capacity)) if integral else energy / capacity
        best = max(best, x + span)
    return best


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
    anc = [0] * n
    for j in cg.topo:
        a = 0
        for p, _lam in preds[j]:
            a |= anc[p] | (1 << p)
        anc[j] = a
    desc = [0] * n
    for j in reversed(cg.topo):
        d = 0
        for s, _lam in succs[j]:
            d |= desc[s] | (1 << s)
        desc[j] = d
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
