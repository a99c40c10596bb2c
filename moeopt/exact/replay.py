"""Replay a CP-SAT tick schedule with the real durations.

The model runs on rounded-down durations (:mod:`moeopt.exact.model`), so its start times are not
a schedule of the real graph. The replay keeps the model's *decisions* and recomputes the times:
events are taken in the order of their tick starts (ties: tick end, then topological order, so
predecessors come first), each keeps the resources CP-SAT bound it to (exact mode) or takes the
pool member that frees first (relaxed mode, which has no bindings; colocation groups stay on one
site), and starts at the earliest real time at which

* every predecessor has ended, plus λ;
* every resource it holds is free after the events taken before it on that resource;
* every semaphore it acquires admits it, given the changes of the events already taken (units
  whose release is not placed yet count as taken for ever).

When the durations are whole ticks (nothing was rounded) and bindings are given, no event starts
later than in the tick schedule (induction over the order: each constraint above was met by the
tick times), so the replayed makespan is at most the model's. With rounded durations the replay
may be a little longer. A replay that cannot place an event (a semaphore that never admits it,
or a release that would lift a semaphore above its capacity) raises :class:`ReplayError`; the
caller reports it and never returns such a schedule. Every replayed schedule is then checked by
the independent validator.
"""

from __future__ import annotations

import math

from moeopt.core.compiled import CompiledGraph
from moeopt.core.schedule import Schedule
from moeopt.core.semaphores import SemaphoreProfile

INF = math.inf


class ReplayError(Exception):
    """The tick schedule cannot be replayed with the real durations (message says why)."""


def replay(
    cg: CompiledGraph,
    start_ticks: list[int],
    end_ticks: list[int],
    binding: list[tuple[int, ...]] | None,
) -> Schedule:
    """The real-duration schedule that follows the tick schedule's order and bindings."""
    n = cg.n
    pos = {e: k for k, e in enumerate(cg.topo)}
    order = sorted(range(n), key=lambda i: (start_ticks[i], end_ticks[i], pos[i]))
    start = [0.0] * n
    end = [0.0] * n
    done = [False] * n
    bound: list[tuple[int, ...]] = [()] * n
    free = [0.0] * len(cg.res_names)
    profiles = [SemaphoreProfile(c) for c in cg.sem_cap]
    group_site = [-1] * len(cg.group_sites)
    for i in order:
        name = cg.names[i]
        d = cg.dur[i]
        t = 0.0
        for p, lam in cg.preds[i]:
            if not done[p]:  # pragma: no cover - the order puts predecessors first
                raise ReplayError(f"event {name!r} comes before its predecessor {cg.names[p]!r}")
            t = max(t, end[p] + lam)
        res = binding[i] if binding is not None else _choose(cg, i, t, free, group_site)
        if d > 0:
            for r in res:
                t = max(t, free[r])
        t = _admit(cg, i, t, profiles)
        if t == INF:
            sems = ", ".join(cg.sem_names[s] for s, _a in cg.acq[i])
            raise ReplayError(
                f"event {name!r}: semaphore(s) {sems} never admit it in the solver's order with the "
                f"real durations"
            )
        start[i] = t
        end[i] = t + d
        done[i] = True
        bound[i] = tuple(res)
        if d > 0:
            for r in res:
                free[r] = t + d
        g = cg.group[i]
        if g >= 0 and group_site[g] < 0 and res:
            group_site[g] = cg.res_site[res[0]]
        for s, a in cg.acq[i]:
            profiles[s].add(t, -a)
        for s, r in cg.rel[i]:
            hi = profiles[s].add(t + d, r)
            if hi > cg.sem_cap[s]:
                raise ReplayError(
                    f"event {name!r} releases {r} unit(s) of semaphore {cg.sem_names[s]!r} at "
                    f"{t + d:g} µs, lifting it to {hi} free units above its capacity {cg.sem_cap[s]} "
                    f"(the matching acquire is not placed before it in the solver's order)"
                )
    return Schedule(
        start_us=dict(zip(cg.names, start)),
        end_us=dict(zip(cg.names, end)),
        resources={cg.names[i]: tuple(cg.res_names[r] for r in bound[i]) for i in range(n)},
        policy="cpsat",
        order=tuple(cg.names[i] for i in order),
    )


def _admit(cg: CompiledGraph, i: int, t: float, profiles: list[SemaphoreProfile]) -> float:
    """Earliest time ``≥ t`` at which every semaphore event ``i`` acquires admits it."""
    acq = cg.acq[i]
    if not acq:
        return t
    own = dict(cg.rel[i])
    d = cg.dur[i]
    moved = True
    while moved and t < INF:
        moved = False
        for s, a in acq:
            t2 = profiles[s].admit(t, a, own.get(s, 0), d)
            if t2 > t:
                t = t2
                moved = True
    return t


def _choose(
    cg: CompiledGraph, i: int, t: float, free: list[float], group_site: list[int]
) -> tuple[int, ...]:
    """Fixed resources plus, per placeholder, the member free first (relaxed mode: no bindings)."""
    taken = list(cg.fixed[i])
    phs = cg.placeholders[i]
    if not phs:
        return tuple(taken)
    g = cg.group[i]
    sites: tuple[int, ...] | None = None
    if g >= 0:
        sites = (group_site[g],) if group_site[g] >= 0 else cg.group_sites[g]
    best: tuple[float, list[int]] | None = None
    for site in sites if sites is not None else (None,):
        chosen: list[int] = []
        ready = t
        ok = True
        for p in phs:
            options = [
                m
                for m in cg.pool_members[p]
                if m not in taken
                and m not in chosen
                and (site is None or cg.res_site[m] == site)
            ]
            if not options:
                ok = False
                break
            m = min(options, key=lambda x: max(free[x], t))
            chosen.append(m)
            ready = max(ready, free[m])
        if ok and (best is None or ready < best[0]):
            best = (ready, chosen)
    if best is None:
        raise ReplayError(f"event {cg.names[i]!r}: no pool member left for its placeholder(s)")
    return tuple(taken + best[1])
