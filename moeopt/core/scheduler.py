"""The greedy list scheduler: the reference timing of an event graph (SPEC §4).

For an eligible event ``e`` (every predecessor committed)::

    t_base(e) = max( max_p(end_p + λ(e,p)),   # predecessors done
                     max_r free(r) )          # every resource it needs is free (no back-filling)

then search forward from ``t_base`` for the first time at which every semaphore it acquires
admits it, given the releases already committed (an unreleased unit stays taken for ever).
The policy picks one eligible event; it is committed at that time; repeat.

* Exclusive resources keep a single "free from" time: an event never slips into a gap before
  an already committed event on the same resource (no back-filling).
* A pool placeholder ``<role>:*`` binds at commit time to the member giving the earliest start;
  among members giving the same start, the first in the pool's declared order. Colocated events
  (a ``colocate_with`` group) all bind on one site, fixed by the first of them committed.
* Semaphores: see :mod:`moeopt.core.semaphores`. A committed release can make a blocked event
  startable earlier than it looked before; the scheduler re-evaluates those events.

The scheduler is deterministic (ties by the order events were added), never mutates the graph,
and reads no labels. It knows nothing about any operator.
"""

from __future__ import annotations

import heapq
import math
from typing import Any

from moeopt.core.compiled import CompiledGraph
from moeopt.core.events import EventGraph
from moeopt.core.normalize import drop_nonbinding_semaphores
from moeopt.core.policies import Policy, make_policy
from moeopt.core.schedule import Schedule, Wait
from moeopt.core.semaphores import SemaphoreProfile
from moeopt.errors import SchedulingError

INF = math.inf

# result of evaluating an event: start, t_base, chosen pool members, resource that set t_base,
# semaphore that moved the start past t_base
Eval = tuple[float, float, tuple[int, ...], int, int]


class _State:
    """Mutable scheduling state over one compiled graph (private to this module and the view)."""

    def __init__(self, cg: CompiledGraph) -> None:
        self.cg = cg
        n = cg.n
        self.free = [0.0] * len(cg.res_names)
        self.ready = [0.0] * n
        self.ready_pred = [-1] * n
        self.indeg = [len(p) for p in cg.preds]
        self.done = [False] * n
        self.start = [0.0] * n
        self.end = [0.0] * n
        self.bound: list[tuple[int, ...]] = [()] * n
        self.waits: list[tuple[float, int, int, float, int, float]] = [(0.0, -1, -1, 0.0, -1, 0.0)] * n
        self.order: list[int] = []
        self.profiles = [SemaphoreProfile(c) for c in cg.sem_cap]
        # acquire triples (semaphore, take, give back by the same event)
        self.acq3: list[tuple[tuple[int, int, int], ...]] = []
        for i in range(n):
            own = dict(cg.rel[i])
            self.acq3.append(tuple((s, a, own.get(s, 0)) for s, a in cg.acq[i]))
        # colocation: the site of each group, -1 while undecided
        self.group_site = [
            sites[0] if sites is not None and len(sites) == 1 else -1 for sites in cg.group_sites
        ]
        self.members_at: dict[tuple[int, int], tuple[int, ...]] = {}
        if cg.group_sites:
            for i in range(n):
                if cg.group[i] < 0:
                    continue
                for p in cg.placeholders[i]:
                    for site in cg.group_sites[cg.group[i]] or ():
                        if (p, site) not in self.members_at:
                            self.members_at[(p, site)] = cg.pool_members_at(p, site)

    # -------------------------------------------------------------- evaluation
    def evaluate(self, i: int, free: list[float] | None = None) -> Eval:
        """Earliest start of eligible event ``i`` given the committed state (``free`` overrides
        the resource free times, for probes)."""
        cg = self.cg
        if free is None:
            free = self.free
        t = self.ready[i]
        rb = -1
        for r in cg.fixed[i]:
            f = free[r]
            if f > t:
                t = f
                rb = r
        chosen: tuple[int, ...] = ()
        phs = cg.placeholders[i]
        if phs:
            g = cg.group[i]
            if g < 0:
                lists = [cg.pool_members[p] for p in phs]
            else:
                site = self.group_site[g]
                if site < 0:
                    site = self._best_site(i, g, t, free)
                members_at = self.members_at
                lists = [members_at[(p, site)] for p in phs]
            if len(lists) == 1:
                best = -1
                bf = INF
                for m in lists[0]:
                    f = free[m]
                    if f <= t:
                        best = m
                        bf = f
                        break
                    if f < bf:
                        bf = f
                        best = m
                if bf > t:
                    t = bf
                    rb = best
                chosen = (best,)
            else:
                # the start is the latest of each placeholder's earliest member; then take, per
                # placeholder, the first member free by that time
                for members in lists:
                    mf = min(free[m] for m in members)
                    if mf > t:
                        t = mf
                        rb = next(m for m in members if free[m] == mf)
                chosen = tuple(next(m for m in members if free[m] <= t) for members in lists)
        tb = t
        sb = -1
        acq = self.acq3[i]
        if acq:
            d = cg.dur[i]
            profiles = self.profiles
            if len(acq) == 1:
                s, a, back = acq[0]
                t = profiles[s].admit(t, a, back, d)
                if t > tb:
                    sb = s
            else:
                moved = True
                while moved and t < INF:
                    moved = False
                    for s, a, back in acq:
                        t2 = profiles[s].admit(t, a, back, d)
                        if t2 > t:
                            t = t2
                            sb = s
                            moved = True
        return (t, tb, chosen, rb, sb)

    def _best_site(self, i: int, g: int, t: float, free: list[float]) -> int:
        cg = self.cg
        sites = cg.group_sites[g] or ()
        best_site = -1
        best_t = INF
        for site in sites:
            ts = t
            for p in cg.placeholders[i]:
                mf = min(free[m] for m in self.members_at[(p, site)])
                if mf > ts:
                    ts = mf
            if ts < best_t:
                best_t = ts
                best_site = site
        return best_site

    # -------------------------------------------------------------- commit
    def commit(self, i: int, ev: Eval) -> list[int]:
        """Commit event ``i``; return the events that became eligible and the semaphores it released."""
        cg = self.cg
        start, tb, chosen, rb, sb = ev
        d = cg.dur[i]
        end = start + d
        self.done[i] = True
        self.start[i] = start
        self.end[i] = end
        self.order.append(i)
        free = self.free
        fixed = cg.fixed[i]
        for r in fixed:
            free[r] = end
        for m in chosen:
            free[m] = end
        self.bound[i] = fixed + chosen
        g = cg.group[i]
        if g >= 0 and self.group_site[g] < 0:
            rs = fixed + chosen
            self.group_site[g] = cg.res_site[rs[0]]
        ready = self.ready[i]
        self.waits[i] = (ready, self.ready_pred[i], rb, tb - ready, sb, start - tb)
        profiles = self.profiles
        for s, a, _back in self.acq3[i]:
            profiles[s].add(start, -a)
        for s, r in cg.rel[i]:
            hi = profiles[s].add(end, r)
            if hi > cg.sem_cap[s]:
                raise SchedulingError(
                    f"event {cg.names[i]!r} releases {r} unit(s) of semaphore {cg.sem_names[s]!r} at "
                    f"t={end:g} µs, lifting its free units to {hi} above the capacity "
                    f"{cg.sem_cap[s]}: the units were not acquired by an event scheduled before it. "
                    f"Make the releasing event depend on the event that acquires the units."
                )
        new: list[int] = []
        readyl = self.ready
        rpred = self.ready_pred
        indeg = self.indeg
        for j, lam in cg.succs[i]:
            v = end + lam
            if v > readyl[j] or rpred[j] < 0:
                readyl[j] = v
                rpred[j] = i
            indeg[j] -= 1
            if indeg[j] == 0:
                new.append(j)
        return new

    def to_schedule(self, policy_name: str) -> Schedule:
        cg = self.cg
        names = cg.names
        res_names = cg.res_names
        sem_names = cg.sem_names
        starts = dict(zip(names, self.start))
        ends = dict(zip(names, self.end))
        resources = {names[i]: tuple(res_names[r] for r in self.bound[i]) for i in range(cg.n)}
        waits: dict[str, Wait] = {}
        for i in range(cg.n):
            ready, rp, rb, rw, sb, sw = self.waits[i]
            waits[names[i]] = Wait(
                ready_us=ready,
                pred=names[rp] if rp >= 0 else None,
                resource=res_names[rb] if rb >= 0 and rw > 0 else None,
                resource_wait_us=rw if rw > 0 else 0.0,
                semaphore=sem_names[sb] if sb >= 0 and sw > 0 else None,
                semaphore_wait_us=sw if sw > 0 else 0.0,
            )
        return Schedule(
            start_us=starts,
            end_us=ends,
            resources=resources,
            waits=waits,
            policy=policy_name,
            order=tuple(names[i] for i in self.order),
        )

    def blocked_report(self, blocked: list[int]) -> str:
        cg = self.cg
        lines = []
        for i in blocked[:10]:
            sems = ", ".join(
                f"{cg.sem_names[s]} (needs {a}, free now {self.profiles[s].level_at(self.ready[i])})"
                for s, a, _b in self.acq3[i]
            )
            lines.append(f"{cg.names[i]!r} waits on {sems}")
        more = f" and {len(blocked) - 10} more" if len(blocked) > 10 else ""
        return "; ".join(lines) + more


def schedule(
    graph: EventGraph,
    policy: str | Policy = "earliest_start",
    *,
    normalize: bool = True,
) -> Schedule:
    """Greedy list schedule of ``graph`` (SPEC §4): the model's reference timing.

    Args:
        graph: the event graph (validated here; a bad graph raises ``GraphError``).
        policy: a registered policy name (``moeopt.registry.names("policy")``) or a Policy object.
        normalize: drop semaphores that provably cannot bind before scheduling (it never changes
            the result; see :func:`moeopt.core.normalize.drop_nonbinding_semaphores`).

    Raises:
        SchedulingError: when an event can never be admitted (semaphore units that are never
            given back) or a release lifts a semaphore above its capacity.
    """
    pol = make_policy(policy)
    graph.validate()
    cg = drop_nonbinding_semaphores(graph) if normalize else graph.compiled()
    state = _State(cg)
    pol.prepare(cg)
    if pol.wants_view:
        _run_view(state, pol)
    else:
        _run_keyed(state, pol)
    return state.to_schedule(pol.name)


def _run_keyed(state: _State, pol: Policy) -> None:
    cg = state.cg
    n = cg.n
    keyfn = pol.key
    evaluate = state.evaluate
    commit = state.commit
    done = state.done
    heap: list[tuple[Any, int]] = []
    push = heapq.heappush
    pop = heapq.heappop
    cur_key: list[Any] = [None] * n
    waiters: list[list[int]] = [[] for _ in cg.sem_names]
    blocked: set[int] = set()
    has_sems = bool(cg.sem_names)

    def enqueue(j: int) -> None:
        ev = evaluate(j)
        s = ev[0]
        if s == INF:
            blocked.add(j)
            cur_key[j] = None
            for sem, _a, _b in state.acq3[j]:
                waiters[sem].append(j)
            return
        k = keyfn(j, s)
        cur_key[j] = k
        push(heap, (k, j))
        if ev[4] >= 0:
            for sem, _a, _b in state.acq3[j]:
                waiters[sem].append(j)

    for i in range(n):
        if state.indeg[i] == 0:
            enqueue(i)
    committed = 0
    while heap:
        key, i = pop(heap)
        if done[i] or cur_key[i] != key:
            continue
        ev = evaluate(i)
        s = ev[0]
        if s == INF:
            blocked.add(i)
            cur_key[i] = None
            for sem, _a, _b in state.acq3[i]:
                waiters[sem].append(i)
            continue
        k = keyfn(i, s)
        if k > key:
            cur_key[i] = k
            push(heap, (k, i))
            if ev[4] >= 0:
                for sem, _a, _b in state.acq3[i]:
                    waiters[sem].append(i)
            continue
        new = commit(i, ev)
        committed += 1
        blocked.discard(i)
        if has_sems and cg.rel[i]:
            for sem, _r in cg.rel[i]:
                w = waiters[sem]
                if not w:
                    continue
                waiters[sem] = []
                for j in w:
                    if not done[j]:
                        blocked.discard(j)
                        enqueue(j)
        for j in new:
            enqueue(j)
    if committed < n:
        stuck = sorted(blocked) or [i for i in range(n) if not done[i]][:10]
        raise SchedulingError(
            f"deadlock: {n - committed} event(s) can never start because semaphore units they need "
            f"are never given back: " + state.blocked_report(stuck)
        )


def _run_view(state: _State, pol: Policy) -> None:
    from moeopt.core.view import SchedulerView

    cg = state.cg
    eligible = {i for i in range(cg.n) if state.indeg[i] == 0}
    view = SchedulerView(state, eligible)
    while eligible:
        view._step()
        name = pol.choose(view)
        i = cg.index.get(name, -1) if isinstance(name, str) else -1
        if i not in eligible:
            raise SchedulingError(
                f"policy {pol.name!r} chose {name!r}, which is not an eligible event at this step"
            )
        ev = state.evaluate(i)
        if ev[0] == INF:
            if all(view.earliest_start(cg.names[j]) == INF for j in eligible):
                raise SchedulingError(
                    "deadlock: every eligible event waits on semaphore units that are never given "
                    "back: " + state.blocked_report(sorted(eligible))
                )
            raise SchedulingError(
                f"policy {pol.name!r} chose {name!r}, which cannot start (its semaphores never admit it)"
            )
        eligible.discard(i)
        eligible.update(state.commit(i, ev))
