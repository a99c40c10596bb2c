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

**Every right end at once** (:func:`sweep_overloaded`, for the set whose bound wins). For a
fixed ``t1``, write ``A_i = min(p_i, est_i + p_i − t1)`` and ``B_i = max(t1, lct_i − p_i)``; the
formula above is ``MI_i = min(A_i, t2 − B_i)`` clipped to ``[0, A_i]``, a ramp in ``t2``: zero up to
``B_i``, slope one up to ``B_i + A_i``, flat after. So the work that must fall in ``[t1, t2]`` is
``Σ_i q_i ((t2 − B_i)⁺ − (t2 − B_i − A_i)⁺)`` for ``A_i > 0``, which prefix sums over the sorted
breakpoints give for every ``t2`` in one pass (``n log n`` per ``t1`` instead of ``n`` per window).
The thinned grid of the classical algorithm misses narrow windows on sets of thousands of
intervals (a kernel graph's bandwidth semaphore: 1.3 µs of 672 at 48 points a side); the sweep
takes every ``t2`` and up to ``SWEEP_T1`` values of ``t1``. The window it finds most overloaded is
checked again with the formula itself (no prefix-sum round-off) before it refutes anything.
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
SWEEP_T1 = 256
"""Left ends ``t1`` per makespan tested by :func:`sweep_overloaded` (all distinct ``t2``)."""
SWEEP_MAX_ITEMS = 20_000
"""Capacity sets with more intervals get no sweep (its work: ``SWEEP_T1`` × n log n per test)."""
SWEEP_FIRST_STEP = 1e-4
"""The sweep's search starts this share of the known bound above it and doubles the step while
the makespans tested are refuted, then bisects (:func:`sweep_window_bound`)."""


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


def _midpoint(a: float, b: float, integral: bool) -> float | None:
    """The next makespan to test between ``a`` (refuted) and ``b`` (not), or ``None`` when no
    makespan is left between them (ticks: one apart; µs: within a relative 1e-9)."""
    if integral:
        return None if b - a <= 1 else float((int(a) + int(b)) // 2)
    return None if b - a <= 1e-9 * max(1.0, b) else 0.5 * (a + b)


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
        mid = _midpoint(a, b, integral)
        if mid is None:
            break
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


def _excess(
    est: np.ndarray,
    length: np.ndarray,
    lct: np.ndarray,
    demand: np.ndarray,
    capacity: float,
    t1: float,
    t2: float,
) -> float:
    """``Σ q · MI(t1, t2) − C · (t2 − t1)`` by the formula of the module docstring, interval by
    interval (no prefix sums): the check of a window the sweep found."""
    mi = np.minimum(np.minimum(length, t2 - t1), np.minimum(est + length - t1, t2 - lct + length))
    return float(np.dot(np.maximum(mi, 0.0), demand)) - capacity * (t2 - t1)


def sweep_overloaded(
    est: np.ndarray,
    length: np.ndarray,
    after: np.ndarray,
    demand: np.ndarray,
    capacity: float,
    makespan: float,
    *,
    t1_points: int = SWEEP_T1,
) -> bool:
    """Whether some window ``[t1, t2]`` is overloaded for a makespan of at most ``makespan``: every
    ``t2`` among the latest and earliest ends, up to ``t1_points`` values of ``t1`` among the earliest
    and latest starts (module docstring, "every right end at once"); also ``True`` when an interval
    cannot fit between its head and ``makespan − after``. A window refutes only after the direct
    check of :func:`_excess`."""
    lct = makespan - after
    scale = max(1.0, abs(makespan))
    if np.any(est + length > lct + 1e-9 * scale):
        return True
    t1s = _points(np.concatenate([est, lct - length]), t1_points)
    t2s = np.unique(np.concatenate([lct, est + length]))
    best, where = 0.0, (0.0, 0.0)
    for t1 in t1s:
        a = np.minimum(length, est + length - t1)
        keep = a > 0
        if not np.any(keep):
            continue
        a = a[keep]
        b = np.maximum(t1, lct[keep] - length[keep])
        q = demand[keep]
        x = np.concatenate([b, b + a])
        w = np.concatenate([q, -q])
        order = np.argsort(x, kind="stable")
        x, w = x[order], w[order]
        cw = np.concatenate([[0.0], np.cumsum(w)])
        cwx = np.concatenate([[0.0], np.cumsum(w * x)])
        t2 = t2s[t2s > t1]
        if not len(t2):
            continue
        k = np.searchsorted(x, t2, side="right")
        ex = t2 * cw[k] - cwx[k] - capacity * (t2 - t1)
        j = int(np.argmax(ex))
        if ex[j] > best:
            best, where = float(ex[j]), (float(t1), float(t2[j]))
    if best <= 0:
        return False
    tol = 1e-9 * capacity * scale
    return _excess(est, length, lct, demand, capacity, *where) > tol


def sweep_window_bound(
    items: Sequence[Item],
    capacity: int,
    known: float,
    *,
    integral: bool = False,
    deadline: float | None = None,
    t1_points: int = SWEEP_T1,
) -> tuple[float, str]:
    """The energetic-reasoning bound of ``items`` with every right end (:func:`sweep_overloaded`),
    searched above ``known``: makespans ``known + δ`` with ``δ`` doubling from ``SWEEP_FIRST_STEP ×
    known`` while refuted, then bisection; ``(known, "")`` when nothing above it is refuted.
    Every makespan found overloaded is a proof on its own, so stopping at ``deadline`` (a
    ``time.perf_counter()`` value) only weakens the result. On whole ticks the result is the
    largest refuted makespan plus one tick, on real µs the largest refuted makespan."""
    import time

    its = [it for it in items if it.length > 0 and it.demand > 0]
    if not its or len(its) > SWEEP_MAX_ITEMS or capacity <= 0 or known <= 0:
        return known, ""
    est = np.array([it.head for it in its], dtype=float)
    length = np.array([it.length for it in its], dtype=float)
    after = np.array([it.after for it in its], dtype=float)
    demand = np.array([it.demand for it in its], dtype=float)

    def refuted(t: float) -> bool:
        return sweep_overloaded(est, length, after, demand, capacity, t, t1_points=t1_points)

    def late() -> bool:
        return deadline is not None and time.perf_counter() > deadline

    # whole ticks: the bound is T + 1 for a refuted T, so the search starts at known − 1
    lo = float(int(known)) - 1.0 if integral else known
    step = max(1.0, round(SWEEP_FIRST_STEP * known)) if integral else SWEEP_FIRST_STEP * known
    found: float | None = None
    hi: float | None = None
    while not late():
        t = lo + step
        if refuted(t):
            found, lo = t, t
            step *= 2.0
        else:
            hi = t
            break
    if found is None:
        return known, ""
    for _ in range(BISECTION_STEPS if not integral else 64):
        if hi is None or late():
            break
        mid = _midpoint(lo, hi, integral)
        if mid is None:
            break
        if refuted(mid):
            found, lo = mid, mid
        else:
            hi = mid
    value = found + 1.0 if integral else found
    if value > known + (0.0 if integral else 1e-9 * max(1.0, known)):
        return value, "window"
    return known, ""
