"""Energetic reasoning on time windows: a makespan bound from the work that must fall inside a window.

The threshold energy bound of :mod:`moeopt.exact.bounds` counts only intervals that lie wholly
inside ``[h, T − t]``. Energetic reasoning (Lopez, Erschler & Esquirol 1992; Baptiste, Le Pape &
Nuijten 2001) also counts the part of an interval that *must* overlap a window, whatever its
start. For a candidate makespan ``T``, an interval ``i`` of a capacity set (demand ``q``, at
least ``p`` long, inside ``[est, lct]`` with ``est = head`` and ``lct = T − after``) overlaps the
window ``[t1, t2]`` by at least::

    MI_i(t1, t2) = max(0, min(p, t2 − t1, est + p − t1, t2 − lct + p))

*Proof.* If ``i`` starts at ``s ∈ [est, lct − p]`` and lasts ``p' ≥ p`` (ending by ``lct``), its
overlap with the window is ``min(s + p', t2) − max(s, t1)``; shortening it to ``p`` (keeping the
start, or the end when that is later) only lowers the overlap; for length ``p`` the overlap is
a concave function of ``s`` (a trapezoid), so its minimum over ``[est, lct − p]`` is at an end:
``s = est`` gives ``min(p, t2 − t1, est + p − t1, t2 − est)`` and ``s = lct − p`` gives
``min(p, t2 − t1, t2 − lct + p, lct − t1)``, each ≥ the formula's terms, clipped at 0. ∎

At every instant at most ``C`` units are in use, so a schedule of makespan at most ``T`` needs
``Σ_i q_i · MI_i(t1, t2) ≤ C · (t2 − t1)`` on every window. A window that breaks it proves that
no schedule has a makespan ``≤ T``: the makespan is ``> T`` (``≥ T + 1`` on whole ticks). The
bound is the largest such ``T`` found by bisection (each ``T`` tested is a proof on its own, so
the answer is sound even where the test is not monotone in ``T``). The same test runs on the
knapsack-weighted demands of :mod:`moeopt.exact.packing`.

Windows: ``t1`` among the earliest starts and latest starts ``lct − p``, ``t2`` among the
latest ends and earliest ends ``est + p`` (every characteristic window of the classical
algorithm), an evenly spaced subset of them when there are more than ``WINDOW_POINTS`` (or
than ``WINDOW_WORK`` allows for the number of intervals): any subset of windows is sound.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from moeopt.exact.bounds import Item

WINDOW_POINTS = 48
"""Window ends per side (``t1`` and ``t2`` candidates): all distinct values or this many."""
WINDOW_MAX_ITEMS = 4000
"""Capacity sets with more intervals get no window bound (work: points² × intervals × steps)."""
WINDOW_WORK = 2_000_000
"""Window points are thinned so that points² × intervals stays below this per test."""
BISECTION_STEPS = 30
"""Bisection steps on real µs (whole ticks stop when the interval is one tick wide)."""


def _points(values: np.ndarray, limit: int) -> np.ndarray:
    u = np.unique(values)
    if len(u) > limit:
        u = u[np.linspace(0, len(u) - 1, limit).round().astype(int)]
    return u


def overloaded(
    est: np.ndarray,
    length: np.ndarray,
    after: np.ndarray,
    demand: np.ndarray,
    capacity: float,
    makespan: float,
) -> bool:
    """Whether some window is overloaded for a makespan of at most ``makespan`` (module docstring);
    also ``True`` when an interval cannot fit between its head and ``makespan − after``."""
    lct = makespan - after
    if np.any(est + length > lct + 1e-9 * max(1.0, abs(makespan))):
        return True
    k = max(4, min(WINDOW_POINTS, int((WINDOW_WORK / max(1, len(est))) ** 0.5)))
    t1s = _points(np.concatenate([est, lct - length]), k)
    t2s = _points(np.concatenate([lct, est + length]), k)
    # shapes: (t1, 1, 1), (1, t2, 1), (1, 1, item)
    t1 = t1s[:, None, None]
    t2 = t2s[None, :, None]
    e = est[None, None, :]
    p = length[None, None, :]
    lc = lct[None, None, :]
    mi = np.minimum(np.minimum(p, t2 - t1), np.minimum(e + p - t1, t2 - lc + p))
    work = np.tensordot(np.maximum(mi, 0.0), demand, axes=([2], [0]))  # (t1, t2)
    span = t2s[None, :] - t1s[:, None]
    excess = work - capacity * span
    tol = 1e-9 * max(1.0, float(np.max(np.abs(work), initial=0.0)))
    return bool(np.any((span > 0) & (excess > tol)))


def _largest_infeasible(
    its: Sequence[Item], capacity: int, lo: float, hi: float, integral: bool
) -> float | None:
    """The largest makespan ``T`` in ``[lo, hi)`` found overloaded by bisection, or ``None`` when
    ``lo`` itself is not (nothing to search from)."""
    est = np.array([it.head for it in its], dtype=float)
    length = np.array([it.length for it in its], dtype=float)
    after = np.array([it.after for it in its], dtype=float)
    demand = np.array([it.demand for it in its], dtype=float)
    if not overloaded(est, length, after, demand, capacity, lo):
        return None
    a, b = lo, hi  # a overloaded; b not tested (assumed not)
    for _ in range(BISECTION_STEPS if not integral else 64):
        if integral:
            if b - a <= 1:
                break
            mid = float((int(a) + int(b)) // 2)
        else:
            if b - a <= 1e-9 * max(1.0, b):
                break
            mid = 0.5 * (a + b)
        if overloaded(est, length, after, demand, capacity, mid):
            a = mid
        else:
            b = mid
    return a


def window_bound(
    items: Sequence[Item],
    capacity: int,
    known: float,
    *,
    integral: bool = False,
    weighting: tuple[str, Mapping[int, int], int] | None = None,
) -> tuple[float, str]:
    """The energetic-reasoning bound of ``items`` on ``capacity`` and, when given, on one
    knapsack ``weighting`` ``(label, weights, K_W)`` of their demands (:mod:`moeopt.exact.packing`),
    searched above ``known`` (a bound already proven); ``(known, "")`` when nothing better is
    found. On whole ticks the result is ``T + 1`` for the largest refuted makespan ``T``; on real
    µs it is the largest refuted ``T``."""
    its = [it for it in items if it.length > 0 and it.demand > 0]
    if not its or len(its) > WINDOW_MAX_ITEMS or capacity <= 0:
        return known, ""
    total = sum(it.length for it in its)
    hi = max(it.head for it in its) + total + max(it.after for it in its) + 1.0
    best, label = known, ""
    variants: list[tuple[str, Sequence[Item], int]] = [("window", its, capacity)]
    if weighting is not None:
        name, w, kw = weighting
        weighted = [Item(it.head, it.length, it.after, w.get(it.demand, 0)) for it in its]
        variants.append((f"window-{name}", [it for it in weighted if it.demand > 0], kw))
    for name, vits, cap in variants:
        if not vits:
            continue
        # whole ticks: a schedule of makespan ``best − 1`` must be refuted first; then the bound
        # is the largest refuted makespan plus one tick. Real µs: the largest refuted makespan.
        lo = float(int(best)) - 1.0 if integral else best
        found = _largest_infeasible(vits, cap, lo, hi, integral)
        if found is None:
            continue
        v = found + 1.0 if integral else found
        if v > best + (0.0 if integral else 1e-9 * max(1.0, best)):
            best, label = v, name
    return best, label
