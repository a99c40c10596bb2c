"""A deliberately naive re-implementation of the greedy rule, for differential tests.

The rule (the scheduler's, see :mod:`moeopt.core.scheduler`): an eligible event (every
predecessor committed) starts at the earliest time at or after its predecessors' ends plus λ and
its resources' free times (no back-filling) at which every semaphore it acquires admits it; a
placeholder binds to the pool member giving the earliest start, the first in pool order on
ties; colocated events share a site. The policy's ``rank`` picks among eligible events.

At every step this recomputes, from the committed events alone (no profiles, no heaps, no
gates, no compiled indices beyond the policy's own ``prepare``), when each eligible event could
start for every possible binding, and commits the smallest key ``(before, start, after,
index)``. Quadratic and slow: only for graphs of a few dozen events, in tests. It applies to
keyed policies only (``wants_view = False``); a view policy chooses by asking the scheduler's
own view, which this does not rebuild.
"""

from __future__ import annotations

import itertools
import math

from moeopt.core.events import Event, EventGraph, placeholder_role, split_resource
from moeopt.core.policies import Policy
from moeopt.errors import InputError, SchedulingError

INF = math.inf

NaiveSchedule = dict[str, tuple[float, float, tuple[str, ...]]]
"""``event name -> (start, end, bound resources)``."""


def naive_schedule(g: EventGraph, policy: Policy) -> NaiveSchedule:
    """The greedy schedule of ``g`` under the keyed ``policy``, recomputed naively.

    Raises:
        SchedulingError: "naive: deadlock" when no eligible event can ever start.
    """
    if policy.wants_view:
        raise InputError(f"naive_schedule takes keyed policies only; {policy.name!r} is a view policy")
    cg = g.compiled()
    policy.prepare(cg)
    events = list(g.events.values())
    index = {e.name: k for k, e in enumerate(events)}
    done: dict[str, tuple[float, float, tuple[str, ...]]] = {}
    free: dict[str, float] = {}
    pools = g.pools
    # colocation groups: connected components of colocate_with links
    group: dict[str, frozenset[str]] = {}
    for e in events:
        if e.colocate_with:
            a, b = e.name, e.colocate_with
            merged = group.get(a, frozenset([a])) | group.get(b, frozenset([b]))
            for x in merged:
                group[x] = merged

    def site_of(res: str) -> str:
        parts = split_resource(res)
        assert parts is not None
        return parts[0]

    def level_ok(t: float, d: float, take: dict[str, int], back: dict[str, int]) -> bool:
        for sem, a in take.items():
            cap = g.semaphores[sem]
            keep = a - back.get(sem, 0)
            points = {t}
            for name, (s, e, _r) in done.items():
                ev = g.events[name]
                if sem in ev.acquires and s > t:
                    points.add(s)
                if sem in ev.releases and e > t:
                    points.add(e)
            for tau in points:
                level = cap
                for name, (s, e, _r) in done.items():
                    ev = g.events[name]
                    if sem in ev.acquires and s <= tau:
                        level -= ev.acquires[sem]
                    if sem in ev.releases and e <= tau:
                        level += ev.releases[sem]
                need = a if tau < t + d else keep
                if level < need:
                    return False
        return True

    def admission(tb: float, ev: Event) -> float:
        if not ev.acquires:
            return tb
        cands = sorted({tb} | {x for (s, e, _r) in done.values() for x in (s, e) if x > tb})
        for t in cands:
            if level_ok(t, ev.duration_us, dict(ev.acquires), dict(ev.releases)):
                return t
        return INF

    def options(ev: Event) -> list[tuple[float, tuple[int, ...], tuple[str, ...]]]:
        ready = max((done[p][1] + lam for p, lam in ev.deps.items()), default=0.0)
        fixed = [r for r in ev.resources if placeholder_role(r) is None]
        roles = [role for r in ev.resources if (role := placeholder_role(r)) is not None]
        site = None
        if ev.name in group:
            sites = {
                site_of(r)
                for x in group[ev.name]
                for r in g.events[x].resources
                if placeholder_role(r) is None
            }
            sites |= {site_of(r) for x in group[ev.name] if x in done for r in done[x][2]}
            assert len(sites) <= 1
            site = next(iter(sites)) if sites else None
        choices = []
        for role in roles:
            members = list(pools[role])
            choices.append([(k, mem) for k, mem in enumerate(members)])
        out = []
        for combo in itertools.product(*choices):
            bound = tuple(fixed) + tuple(mem for _k, mem in combo)
            if len(set(bound)) != len(bound):
                continue
            if ev.name in group:
                sites = {site_of(r) for r in bound}
                if len(sites) != 1 or (site is not None and sites != {site}):
                    continue
            tb = max([ready] + [free.get(r, 0.0) for r in bound])
            out.append((admission(tb, ev), tuple(k for k, _m in combo), bound))
        return out

    while len(done) < len(events):
        best = None
        for ev in events:
            if ev.name in done or any(p not in done for p in ev.deps):
                continue
            opts = [o for o in options(ev) if o[0] < INF]
            if not opts:
                continue
            start, _pos, bound = min(opts, key=lambda o: (o[0], o[1]))
            before, after = policy.rank(index[ev.name])
            key = (before, start, after, index[ev.name])
            if best is None or key < best[0]:
                best = (key, ev, start, bound)
        if best is None:
            raise SchedulingError("naive: deadlock")
        _key, ev, start, bound = best
        end = start + ev.duration_us
        done[ev.name] = (start, end, bound)
        for r in bound:
            free[r] = end
    return done
