"""The pairing theorem: when a semaphore is exactly a cumulative over holding intervals.

Notation, for one semaphore of capacity ``C`` (free units at t = 0): event ``e`` acquires
``A(e)`` units at its start ``s(e)`` and releases ``R(e)`` units at its end ``f(e)``. The free
level at an instant ``τ`` (every change at ``τ`` applied) is::

    level(τ) = C − Σ_{e : s(e) ≤ τ} A(e) + Σ_{e : f(e) ≤ τ} R(e)

and a schedule must keep ``0 ≤ level(τ) ≤ C`` at every ``τ``.

**Pairing.** A *pairing* is a list of unit pairs ``(a, r, k)``: ``k`` units acquired by ``a`` are
given back by ``r``, where ``r`` is ``a`` itself or a DAG descendant of ``a``. Every released unit
belongs to exactly one pair; acquired units that no pair takes are *unreleased* (held until the
end of the schedule).

**Theorem.** If the semaphore has a pairing, then in every schedule that respects the
precedences (λ ≥ 0, durations ≥ 0)::

    level(τ) = C − cover(τ)

where ``cover(τ)`` is the total demand of the *holding intervals* ``[s(a), f(r))`` (demand ``k``,
one per pair) and ``[s(a), +∞)`` (one per unreleased unit) that contain ``τ``. Hence
"``0 ≤ level ≤ C`` at every instant" is exactly "a cumulative of capacity ``C`` over the holding
intervals": the reservoir and the cumulative accept the same schedules.

*Proof.* Count units. Each acquired unit ``u`` has its acquirer ``a_u``; each released unit
belongs to one pair, so it is ``u``'s return by ``r_u`` for exactly one acquired unit ``u``.
Then ``Σ_{s(e) ≤ τ} A(e) = #{u : s(a_u) ≤ τ}`` and ``Σ_{f(e) ≤ τ} R(e) = #{u paired : f(r_u) ≤ τ}``.
Because ``r_u`` is ``a_u`` or a descendant, ``f(r_u) ≥ s(a_u)``: for ``r_u = a_u``,
``f(a_u) = s(a_u) + d(a_u) ≥ s(a_u)``; for a descendant, following the path
``a_u → … → r_u`` gives ``s(r_u) ≥ f(a_u) + λ ≥ s(a_u)``, so ``f(r_u) ≥ s(r_u) ≥ s(a_u)``. So
``{u paired : f(r_u) ≤ τ} ⊆ {u : s(a_u) ≤ τ}`` and the difference of the two counts is
``#{u : s(a_u) ≤ τ < f(r_u)}`` (with ``f = +∞`` for unreleased units), the number of holding
intervals, weighted by demand, that contain ``τ`` (half-open intervals, as the level applies
every change at ``τ``). So ``level(τ) = C − cover(τ)``. Finally ``cover(τ) ≥ 0`` gives
``level ≤ C`` for free, and ``level ≥ 0`` ⟺ ``cover ≤ C``. ∎

The argument only uses ``s ≤ f`` along the pairs, so it holds on the model's integer ticks too
(the precedences hold there). Which pairing is chosen does not matter for the equivalence.

**Finding a pairing.** Pairing an event with itself first loses nothing: if ``e`` both acquires
and releases, and some pairing sends an acquired unit of ``e`` to ``r`` and a released unit of
``e`` comes from ``a`` (``a`` an ancestor-or-self of ``e``, ``r`` a descendant-or-self), swapping
to ``(e, e)`` and ``(a, r)`` is again a pairing (``r`` descends from ``a`` by transitivity); the
same swap works when ``e``'s unit was unreleased. The remaining releases are matched nearest
ancestor first; if that greedy fails, an exact maximum flow (acquirers → releasers they reach)
decides, within a work budget. No pairing found within the budget means the semaphore stays a
reservoir, which is always correct, just slower for the solver.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import networkx as nx

from moeopt.core.compiled import CompiledGraph

WORK_BUDGET = 4_000_000
"""Graph steps (ancestor walks, reachability) allowed per semaphore before giving up."""


@dataclass(frozen=True, slots=True)
class Pairing:
    """A pairing of one semaphore (see the module docstring).

    Attributes:
        sem: semaphore index in the compiled graph.
        pairs: ``(acquirer, releaser, units)``; ``releaser`` is the acquirer or a descendant.
        unreleased: ``(acquirer, units)`` held until the end of the schedule.
    """

    sem: int
    pairs: tuple[tuple[int, int, int], ...]
    unreleased: tuple[tuple[int, int], ...]


def demands(cg: CompiledGraph, sem: int) -> tuple[dict[int, int], dict[int, int]]:
    """``(acquired, released)``: units of semaphore ``sem`` per event index (non-zero only)."""
    acq: dict[int, int] = {}
    rel: dict[int, int] = {}
    for i in range(cg.n):
        for s, a in cg.acq[i]:
            if s == sem:
                acq[i] = acq.get(i, 0) + a
        for s, r in cg.rel[i]:
            if s == sem:
                rel[i] = rel.get(i, 0) + r
    return acq, rel


def find_pairing(cg: CompiledGraph, sem: int, budget: int = WORK_BUDGET) -> Pairing | None:
    """A pairing of semaphore ``sem``, or ``None`` when there is none (or none within ``budget``)."""
    acq, rel = demands(cg, sem)
    if sum(rel.values()) > sum(acq.values()):
        return None  # some released unit has no acquired unit to come from
    left = dict(acq)  # acquired units not paired yet
    need = dict(rel)  # released units not paired yet
    pairs: dict[tuple[int, int], int] = {}
    for i in sorted(need):
        k = min(left.get(i, 0), need[i])
        if k > 0:
            pairs[(i, i)] = k
            left[i] -= k
            need[i] -= k
    need = {i: k for i, k in need.items() if k > 0}
    if need:
        position = {e: p for p, e in enumerate(cg.topo)}
        greedy = _nearest_first(cg, dict(left), need, position, budget)
        if greedy is None:
            greedy = _max_flow(cg, {a: k for a, k in left.items() if k > 0}, need, budget)
        if greedy is None:
            return None
        for (a, r), k in greedy.items():
            pairs[(a, r)] = pairs.get((a, r), 0) + k
            left[a] -= k
    return Pairing(
        sem=sem,
        pairs=tuple((a, r, k) for (a, r), k in sorted(pairs.items())),
        unreleased=tuple((a, k) for a, k in sorted(left.items()) if k > 0),
    )


def _nearest_first(
    cg: CompiledGraph,
    left: dict[int, int],
    need: dict[int, int],
    position: dict[int, int],
    budget: int,
) -> dict[tuple[int, int], int] | None:
    """Each releaser (topological order) takes units from its nearest ancestors (breadth first)."""
    out: dict[tuple[int, int], int] = {}
    work = 0
    for r in sorted(need, key=lambda e: position[e]):
        want = need[r]
        seen = {r}
        queue = deque(p for p, _lam in cg.preds[r])
        seen.update(queue)
        while want > 0 and queue:
            a = queue.popleft()
            work += 1
            if work > budget:
                return None
            have = left.get(a, 0)
            if have > 0:
                k = min(have, want)
                left[a] = have - k
                want -= k
                out[(a, r)] = out.get((a, r), 0) + k
            for p, _lam in cg.preds[a]:
                if p not in seen:
                    seen.add(p)
                    queue.append(p)
        if want > 0:
            return None
    return out


def _max_flow(
    cg: CompiledGraph, left: dict[int, int], need: dict[int, int], budget: int
) -> dict[tuple[int, int], int] | None:
    """Exact transportation check: acquirer ``a`` may feed releaser ``r`` iff ``r`` descends from ``a``."""
    if len(left) * cg.n > budget:
        return None
    net = nx.DiGraph()
    for a, k in left.items():
        net.add_edge("src", ("a", a), capacity=k)
    for r, k in need.items():
        net.add_edge(("r", r), "dst", capacity=k)
    for a in left:
        seen: set[int] = set()
        stack = [a]
        while stack:
            x = stack.pop()
            for y, _lam in cg.succs[x]:
                if y not in seen:
                    seen.add(y)
                    stack.append(y)
        for r in need:
            if r in seen:
                net.add_edge(("a", a), ("r", r))  # no capacity attribute: unbounded
    if "src" not in net or "dst" not in net:
        return None
    value, flow = nx.maximum_flow(net, "src", "dst")
    if value < sum(need.values()):
        return None
    out: dict[tuple[int, int], int] = {}
    for a in left:
        for node, k in flow.get(("a", a), {}).items():
            if k > 0:
                out[(a, node[1])] = int(k)
    return out
