"""Energy bounds that see how demands pack into a capacity: weighted energy and parallel machines.

The plain energy bound of :mod:`moeopt.exact.bounds` charges every interval ``q · len`` against
``C · span``: it assumes the demands can always fill the capacity exactly. Kernel graphs break
that assumption in a way that costs percents: loads each holding 128 of 1600 HBM units fit only
12 at a time (1536 units, 96%), combine windows holding 12 of 131 cross-rank units fit 10 at a
time (92%). Two sound refinements, both for a set ``S`` of intervals sharing a capacity ``C``
(each interval ``i``: demand ``q_i``, at least ``len_i`` long, inside ``[head_i, T − after_i]``
for every schedule of makespan ``T``):

**Weighted energy.** Give every demand value ``q`` an integer weight ``W(q) ≥ 0`` and let
``K_W`` be the largest total weight of a set of intervals of ``S`` that can run at one instant::

    K_W = max { Σ_q n_q · W(q) : Σ_q n_q · q ≤ C,  0 ≤ n_q ≤ #{i ∈ S : q_i = q} }

(a bounded knapsack, solved exactly by :func:`knapsack_capacity`). Then for every subset
``S' ⊆ S``::

    T ≥ min_{S'} head + Σ_{i∈S'} W(q_i) · len_i / K_W + min_{S'} after

*Proof.* At every instant the intervals running form a set whose demands add up to at most
``C`` (the capacity rule), with at most as many intervals of demand ``q`` as ``S`` has: their
weights add up to at most ``K_W``. Integrating over ``[h, f]`` (``h = min head``, ``f`` the last
end in ``S'``), ``Σ W · len ≤ K_W · (f − h)``, and the interval ending at ``f`` is followed by at
least ``min after``. ∎ The identity ``W(q) = q`` gives the plain bound with the capacity
replaced by the largest total demand that fits (``1536`` instead of ``1600`` when all demands
are 128). Other weights come from the dual-feasible functions of Fekete & Schepers (2001), which
zero the small demands and round the large ones up to ``1/k`` of the capacity::

    f_k(q) = k · q              if (k + 1) · q is a multiple of C
             C · ⌊(k + 1) q / C⌋  otherwise,        for k = 1, 2, …

(scaled to integers: ``f_k(C) = k·C``). Soundness does not depend on that theory: whatever the
weights, ``K_W`` is computed exactly. The energy with thresholds is
:func:`moeopt.exact.bounds.energy_bound` on the weighted items.

**Parallel machines.** Let ``S_q = {i ∈ S : q_i ≥ q}`` and ``m`` the largest number of intervals
of ``S_q`` that fit at one instant (the smallest demands first, :func:`max_fit`). At most ``m``
intervals of ``S_q`` overlap at any instant, so (interval graphs are perfect: their chromatic
number is their largest clique) they can be assigned to ``m`` machines, none of which runs two
at once. Sort the lengths of a subset ``S' ⊆ S_q`` decreasingly, ``p_1 ≥ p_2 ≥ …``. Among the
``k·m + 1`` longest, some machine runs ``k + 1`` (pigeonhole), which take at least the sum of the
``k + 1`` shortest of them, so::

    T ≥ min_{S'} head + max_k Σ_{j=k·m+1−k}^{k·m+1} p_j + min_{S'} after

(the classical bound of the identical-machine problem ``P||Cmax``; with equal lengths ``p``,
``⌈|S'| / m⌉ · p``). ∎ It sees what energy cannot: 224 windows of 77 µs on 10 lanes need 23 rounds,
not 22.4.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from moeopt.exact.bounds import Item, energy_bound

KNAPSACK_MAX_CAPACITY = 1_000_000
"""Capacities above this get no weighted bound (the knapsack table has ``C + 1`` entries)."""
DFF_MAX_K = 64
"""Dual-feasible functions ``f_k`` up to this ``k`` (a demand ``q`` proposes ``k = ⌊C / q⌋``)."""
DFF_MAX_FUNCTIONS = 6
"""At most this many ``f_k`` per capacity set (from the largest demands down)."""
MACHINE_MAX_THRESHOLDS = 6
"""Demand thresholds ``q`` tried by the machine bound (the largest distinct demands)."""
MACHINE_SAMPLES = 24
"""Head and after thresholds of the machine bound: all distinct values, or this many quantiles."""
MACHINE_BUDGET = 30_000_000
"""Interval × threshold-pair work of the machine bound per capacity set; beyond, fewer pairs."""


def knapsack_capacity(counts: Mapping[int, int], weights: Mapping[int, int], capacity: int) -> int:
    """``max Σ n_q W(q)`` over ``Σ n_q q ≤ capacity``, ``0 ≤ n_q ≤ counts[q]`` (exact, integers).

    Bounded knapsack by binary splitting of the counts: each demand value becomes items of
    ``1, 2, 4, …`` copies, every subset of which is a count in ``0..n_q`` (and every count is
    such a subset), then a 0/1 knapsack over the capacity (a table of ``capacity + 1`` values,
    ``best[c]`` = the largest weight within ``c`` units).
    """
    best = np.zeros(capacity + 1, dtype=np.int64)
    for q, n in sorted(counts.items()):
        w = int(weights.get(q, 0))
        if w <= 0 or q <= 0 or n <= 0 or q > capacity:
            continue
        left = min(n, capacity // q)
        piece = 1
        while left > 0:
            take = min(piece, left)
            size = q * take
            # the right-hand side is computed from the old table before the assignment: 0/1 item
            best[size:] = np.maximum(best[size:], best[: capacity + 1 - size] + w * take)
            left -= take
            piece *= 2
    return int(best[capacity])


def dff_weights(demands: Sequence[int], capacity: int, k: int) -> dict[int, int]:
    """``f_k`` of the module docstring, for each demand value (integers, ``f_k(C) = k·C``)."""
    out = {}
    for q in set(demands):
        if ((k + 1) * q) % capacity == 0:
            out[q] = k * q
        else:
            out[q] = capacity * (((k + 1) * q) // capacity)
    return out


def weightings(counts: Mapping[int, int], capacity: int) -> list[tuple[str, dict[int, int], int]]:
    """Candidate weights for a capacity set with ``counts[q]`` intervals of demand ``q``:
    ``(label, weights, K_W)``. Only those that can beat the plain energy bound are returned.

    * ``"fit"``: the identity, when the largest total demand that fits is below ``capacity``;
    * ``"dff<k>"``: ``f_k`` for ``k = ⌊C / q⌋`` of the largest demands (up to ``DFF_MAX_K``).
    """
    if capacity > KNAPSACK_MAX_CAPACITY or capacity <= 1 or not counts:
        return []  # capacity 1: every weighting is a multiple of the identity
    out: list[tuple[str, dict[int, int], int]] = []
    ident = {q: q for q in counts}
    fit = knapsack_capacity(counts, ident, capacity)
    if 0 < fit < capacity:
        out.append(("fit", ident, fit))
    ks: list[int] = []
    for q in sorted(counts, reverse=True):
        k = capacity // q
        if 1 <= k <= DFF_MAX_K and k not in ks:
            ks.append(k)
        if len(ks) >= DFF_MAX_FUNCTIONS:
            break
    for k in ks:
        w = dff_weights(list(counts), capacity, k)
        if all(v == 0 for v in w.values()):
            continue
        kw = knapsack_capacity(counts, w, capacity)
        if kw > 0:
            out.append((f"dff{k}", w, kw))
    return out


def weighted_energy_bound(
    items: Sequence[Item], capacity: int, *, integral: bool = False
) -> tuple[float, str]:
    """The best weighted energy bound over :func:`weightings` (``(0, "")`` when none applies)."""
    got = best_weighting(items, capacity, integral=integral)
    return (0.0, "") if got is None else (got[0], got[1])


def best_weighting(
    items: Sequence[Item], capacity: int, *, integral: bool = False
) -> tuple[float, str, dict[int, int], int] | None:
    """``(bound, label, weights, K_W)`` of the weighting of :func:`weightings` whose energy bound
    is largest, or ``None`` when none applies."""
    counts = Counter(it.demand for it in items if it.length > 0 and it.demand > 0)
    best: tuple[float, str, dict[int, int], int] | None = None
    for name, w, kw in weightings(counts, capacity):
        weighted = [Item(it.head, it.length, it.after, w.get(it.demand, 0)) for it in items]
        v = energy_bound(weighted, kw, integral=integral)
        if best is None or v > best[0]:
            best = (v, name, w, kw)
    return best


def max_fit(demands: Sequence[int], capacity: int) -> int:
    """The largest number of the given demands (a multiset) whose sum is at most ``capacity``:
    the smallest ones first (exchanging a larger chosen demand for a smaller unchosen one never
    raises the sum, so some largest feasible set is made of the smallest demands)."""
    total = 0
    count = 0
    for q in sorted(demands):
        if total + q > capacity:
            break
        total += q
        count += 1
    return count


def machine_bound(items: Sequence[Item], capacity: int) -> tuple[float, str]:
    """The best parallel-machine bound (module docstring) over demand thresholds and subsets
    ``{head ≥ h, after ≥ t}``; ``(0, "")`` when no threshold leaves fewer machines than intervals."""
    its = [it for it in items if it.length > 0 and it.demand > 0]
    if len(its) < 2:
        return 0.0, ""
    best, label = 0.0, ""
    thresholds = sorted({it.demand for it in its}, reverse=True)[:MACHINE_MAX_THRESHOLDS]
    for q in thresholds:
        chosen = [it for it in its if it.demand >= q]
        m = max_fit([it.demand for it in chosen], capacity)
        if m <= 1 or len(chosen) <= m:
            continue  # one machine: the bound is the energy bound (the sum of the lengths)
        v = _machines(chosen, m)
        if v > best:
            best, label = v, f"machines{m}"
    return best, label


def _samples(values: np.ndarray, limit: int) -> np.ndarray:
    u = np.unique(values)
    if len(u) > limit:
        u = u[np.linspace(0, len(u) - 1, limit).round().astype(int)]
    return u


def _machines(its: Sequence[Item], m: int) -> float:
    """``max over (h, t)`` of ``h + L(S_{h,t}) + t`` with ``L`` the ``P||Cmax`` bound on ``m``."""
    order = sorted(its, key=lambda it: -it.length)
    head = np.array([it.head for it in order], dtype=float)
    after = np.array([it.after for it in order], dtype=float)
    length = np.array([it.length for it in order], dtype=float)
    n = len(order)
    samples = MACHINE_SAMPLES
    while samples > 2 and samples * samples * n > MACHINE_BUDGET:
        samples //= 2
    best = 0.0
    for h in _samples(head, samples):
        mh = head >= h
        for t in _samples(after[mh], samples):
            mask = mh & (after >= t)
            p = length[mask]
            k_max = (len(p) - 1) // m
            prefix = np.concatenate(([0.0], np.cumsum(p)))
            ks = np.arange(k_max + 1)
            # Σ_{j = km − k}^{km} p_j (0-indexed): the k + 1 shortest of the km + 1 longest
            span = float(np.max(prefix[ks * m + 1] - prefix[ks * m - ks]))
            best = max(best, float(h) + span + float(t))
    return best
