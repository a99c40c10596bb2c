"""The true optimum of a small event graph by exhaustive search, independent of the exact layer.

For graphs whose semaphores are all *held*: every event that acquires units of a semaphore
releases the same units at its own end (``acquires == releases``), so every resource and
semaphore is renewable. Fixed resources, pools, colocation and λ are all allowed.

**Search.** Every list of the events in which each event comes after its predecessors, and for
each event every binding of its placeholders (one member per placeholder, never a member twice,
colocated events on one site), is turned into a schedule by the serial rule: each event in turn
starts at the earliest time, at or after its predecessors' ends plus λ, at which its resources
are free and its semaphores have room over its whole duration, given the events placed before it
(gaps between them allowed). The smallest makespan over all lists and bindings is returned.

**Why it is the optimum.** Take an optimal schedule ``S*`` with its bindings, and list the events
by their start in ``S*`` (ties: predecessors first; zero-length events first among equals). By
induction every event is placed no later than in ``S*``: at its ``S*`` start ``t``, a placed event
``i`` occupying an instant ``τ ∈ [t, t + d)`` in the partial schedule starts at ``s_i ≤ S*_i ≤ t ≤ τ``
and ends at ``e_i ≤ S*_i + d_i``, so ``i`` occupies ``τ`` in ``S*`` too; the resources and units in
use at ``τ`` are a subset of those of ``S*``, where the event also fits. Its predecessors end no
later either. So the earliest feasible time is at most ``t``, and the schedule built from this
list has a makespan at most ``S*``'s. Zero-length events occupy nothing (as in the validator).

Exponential: only for a handful of events (the search prunes with the incumbent).
"""

from __future__ import annotations

import itertools
import math

import moeopt as m
from moeopt.core.schedule import Schedule

INF = math.inf


def held_only(g: m.EventGraph) -> bool:
    """Every event releases exactly what it acquires (the graphs :func:`optimum` is exact for)."""
    return all(dict(ev.acquires) == dict(ev.releases) for ev in g.events.values())


def optimum(g: m.EventGraph) -> tuple[float, Schedule]:
    """``(makespan, schedule)`` of an optimal schedule of ``g`` (see the module docstring)."""
    if not held_only(g):
        raise ValueError("brute force is exact only when every event releases what it acquires")
    cg = g.compiled()
    n = cg.n
    dur = cg.dur
    tails = cg.tails()
    caps = list(cg.sem_cap)
    # per event: every binding (tuple of resource indices) allowed by pools and colocation
    options: list[list[tuple[int, ...]]] = []
    for i in range(n):
        slots = [cg.pool_members[p] for p in cg.placeholders[i]]
        opts = []
        for pick in itertools.product(*slots):
            chosen = tuple(cg.fixed[i]) + tuple(pick)
            if len(set(chosen)) < len(chosen):
                continue
            opts.append(chosen)
        options.append(opts)
    best: list[float] = [INF]
    best_sched: list[tuple[list[float], list[tuple[int, ...]]]] = []
    start = [0.0] * n
    bound: list[tuple[int, ...]] = [()] * n
    placed = [False] * n

    def earliest(i: int, res: tuple[int, ...], est: float) -> float:
        d = dur[i]
        cands = sorted({est} | {start[k] + dur[k] for k in range(n) if placed[k] and start[k] + dur[k] > est})
        for t in cands:
            if d <= 0:
                return t
            ok = True
            for k in range(n):
                if not placed[k] or dur[k] <= 0:
                    continue
                if start[k] < t + d and t < start[k] + dur[k] and set(bound[k]) & set(res):
                    ok = False
                    break
            if ok and cg.acq[i]:
                # semaphore room over [t, t + d): check at t and at every placed start inside
                points = [t] + [start[k] for k in range(n) if placed[k] and t < start[k] < t + d]
                for s, a in cg.acq[i]:
                    for tau in points:
                        used = a
                        for k in range(n):
                            if placed[k] and dur[k] > 0 and start[k] <= tau < start[k] + dur[k]:
                                used += sum(u for s2, u in cg.acq[k] if s2 == s)
                        if used > caps[s]:
                            ok = False
                            break
                    if not ok:
                        break
            if ok:
                return t
        raise AssertionError("unreachable: after every placed event ends, everything is free")

    def site_ok(i: int, res: tuple[int, ...]) -> bool:
        g_id = cg.group[i]
        if g_id < 0:
            return True
        sites = {cg.res_site[r] for r in res}
        if len(sites) > 1:
            return False
        allowed = cg.group_sites[g_id]
        if allowed is not None and not sites <= set(allowed):
            return False
        for k in range(n):
            if placed[k] and cg.group[k] == g_id and bound[k] and {cg.res_site[r] for r in bound[k]} != sites:
                return False
        return True

    def dfs(count: int, makespan: float) -> None:
        if count == n:
            if makespan < best[0]:
                best[0] = makespan
                best_sched[:] = [(list(start), list(bound))]
            return
        for i in range(n):
            if placed[i] or not all(placed[p] for p, _lam in cg.preds[i]):
                continue
            est = max((start[p] + dur[p] + lam for p, lam in cg.preds[i]), default=0.0)
            for res in options[i]:
                if not site_ok(i, res):
                    continue
                t = earliest(i, res, est)
                if t + tails[i] >= best[0]:
                    continue  # cannot improve on the incumbent
                start[i] = t
                bound[i] = res
                placed[i] = True
                dfs(count + 1, max(makespan, t + dur[i]))
                placed[i] = False
                bound[i] = ()

    dfs(0, 0.0)
    st, bd = best_sched[0]
    sched = Schedule(
        start_us={cg.names[i]: st[i] for i in range(n)},
        end_us={cg.names[i]: st[i] + dur[i] for i in range(n)},
        resources={cg.names[i]: tuple(cg.res_names[r] for r in bd[i]) for i in range(n)},
        policy="brute",
    )
    return best[0], sched
