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
and reads no labels. It knows nothing about any operator. A restructure hook
(:mod:`moeopt.core.restructure`) may re-pin pending events within a pool after each commit.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from moeopt.core.compiled import CompiledGraph
from moeopt.core.events import EventGraph
from moeopt.core.gcpause import gc_paused
from moeopt.core.normalize import drop_nonbinding_semaphores
from moeopt.core.policies import Policy, make_policy
from moeopt.core.restructure import Restructure, RestructureControl
from moeopt.core.schedule import Schedule, SemaphoreLevels, Wait
from moeopt.core.semaphores import SemaphoreProfile
from moeopt.errors import SchedulingError

INF = math.inf
_V = TypeVar("_V")

# result of evaluating an event: start, t_base, chosen pool members, resource that set t_base,
# semaphore that moved the start past t_base, the candidate resources (one fixed resource or
# one placeholder's members) whose free time set t_base, and the acquires whose semaphores moved
# the start (only their releases can make it earlier)
Eval = tuple[
    float, float, tuple[int, ...], int, int, "tuple[int, ...] | None", "tuple[tuple[int, int, int], ...]"
]


class _State:
    """Mutable scheduling state over one compiled graph (private to this module and the view)."""

    def __init__(self, cg: CompiledGraph) -> None:
        self.cg = cg
        n = cg.n
        self.free = [0.0] * len(cg.res_names)
        # each event's fixed resources, as the graph declares them until a restructure hook
        # re-pins one (moeopt.core.restructure)
        self.fixed: list[tuple[int, ...]] = list(cg.fixed)
        self.ready = [0.0] * n
        self.ready_pred = [-1] * n
        self.indeg = list(map(len, cg.preds))
        self.done = [False] * n
        self.start = [0.0] * n
        self.end = [0.0] * n
        self.bound: list[tuple[int, ...]] = [()] * n
        # per committed event: (predecessor that set its ready time, resource that set t_base,
        # t_base, semaphore that moved the start); the waits are derived from these, the ready
        # times and the starts when read
        self.waits: list[tuple[int, int, float, int]] = [(-1, -1, 0.0, -1)] * n
        self.order: list[int] = []
        self.profiles = [SemaphoreProfile(c) for c in cg.sem_cap]
        # acquire triples (semaphore, take, give back by the same event)
        self.acq3: list[tuple[tuple[int, int, int], ...]] = []
        acq3 = self.acq3
        # few distinct pairs, and events with equal maps share the compiled tuples (see
        # compile_graph): keyed by identity, which the compiled graph keeps alive
        seen: dict[tuple[int, int], tuple[tuple[int, int, int], ...]] = {}
        for acq, rel in zip(cg.acq, cg.rel):
            key = (id(acq), id(rel))
            got = seen.get(key)
            if got is None:
                own = dict(rel)
                got = seen[key] = tuple([(s, a, own.get(s, 0)) for s, a in acq])
            acq3.append(got)
        # colocation: the site of each group, -1 while undecided
        self.group_site = [
            sites[0] if sites is not None and len(sites) == 1 else -1 for sites in cg.group_sites
        ]
        self.members_at: dict[tuple[int, int], tuple[int, ...]] = {}
        # per event: the member lists of its placeholders when no site restriction applies, and
        # for a colocated event with one placeholder whose pool has one member per allowed site,
        # those members (choosing the member then chooses the site)
        self.single = [(r,) for r in range(len(cg.res_names))]
        pool_members = cg.pool_members
        self.ph_lists: list[tuple[tuple[int, ...], ...]] = [
            tuple([pool_members[p] for p in phs]) if phs else () for phs in cg.placeholders
        ]
        self.site_members: list[tuple[int, ...] | None] = [None] * n
        interned: dict[tuple[int, ...], tuple[int, ...]] = {}
        if cg.group_sites:
            for i, g in enumerate(cg.group):
                if g < 0 or not cg.placeholders[i]:
                    continue  # no placeholder: its site follows from its fixed resources
                allowed = cg.group_sites[g] or ()
                for p in cg.placeholders[i]:
                    for site in allowed:
                        if (p, site) not in self.members_at:
                            self.members_at[(p, site)] = cg.pool_members_at(p, site)
                if len(cg.placeholders[i]) == 1:
                    ok_sites = set(allowed)
                    pool = cg.pool_members[cg.placeholders[i][0]]
                    mem = tuple(m for m in pool if cg.res_site[m] in ok_sites)
                    if len({cg.res_site[m] for m in mem}) == len(mem):
                        # one shared object per distinct list: the scheduler's gates key on identity
                        self.site_members[i] = interned.setdefault(mem, mem)
        self.evaluate = self._make_evaluate()
        self.commit = self._make_commit()

    # -------------------------------------------------------------- evaluation
    def _make_evaluate(self) -> Callable[..., Eval]:
        """Build ``evaluate(i, free=None)`` as a closure over the state's arrays (the scheduler's
        hottest function; closure variables are much cheaper than attribute lookups)."""
        cg = self.cg
        own_free = self.free
        ready = self.ready
        fixed_of = self.fixed
        single = self.single
        placeholders = cg.placeholders
        group_of = cg.group
        group_site = self.group_site
        ph_lists = self.ph_lists
        members_at = self.members_at
        site_members = self.site_members
        acq3 = self.acq3
        dur = cg.dur
        profiles = self.profiles
        best_site = self._best_site

        def admit_all(
            acq: tuple[tuple[int, int, int], ...], t: float, d: float
        ) -> tuple[float, int, tuple[tuple[int, int, int], ...]]:
            """Earliest time >= t at which every semaphore in ``acq`` admits an event of duration
            ``d``, the semaphore that moved it last (-1 if none did) and the entries of ``acq``
            whose semaphore moved it at all (every earlier time is refused by one of those)."""
            sb = -1
            if len(acq) == 1:
                s, a, back = acq[0]
                t2 = profiles[s].admit(t, a, back, d)
                return (t2, s, acq) if t2 > t else (t, -1, ())
            movers: list[tuple[int, int, int]] = []
            # cycle through the semaphores until each has admitted the same start in turn
            m = len(acq)
            k = 0
            ok = 0
            while ok < m and t < INF:
                s, a, back = acq[k]
                t2 = profiles[s].admit(t, a, back, d)
                if t2 > t:
                    t = t2
                    sb = s
                    ok = 1
                    if acq[k] not in movers:
                        movers.append(acq[k])
                else:
                    ok += 1
                k = k + 1 if k + 1 < m else 0
            return (t, sb, tuple(movers))

        self.admit_all = admit_all

        def evaluate(i: int, free: list[float] | None = None) -> Eval:
            """Earliest start of eligible event ``i`` given the committed state (``free``
            overrides the resource free times, for probes)."""
            if free is None:
                free = own_free
            t = ready[i]
            rb = -1
            blk: tuple[int, ...] | None = None
            for r in fixed_of[i]:
                f = free[r]
                if f > t:
                    t = f
                    rb = r
                    blk = single[r]
            chosen: tuple[int, ...] = ()
            phs = placeholders[i]
            if phs:
                g = group_of[i]
                if g < 0:
                    lists = ph_lists[i]
                else:
                    site = group_site[g]
                    if site >= 0:
                        lists = tuple(members_at[(p, site)] for p in phs)
                    else:
                        fast = site_members[i]
                        if fast is not None:
                            lists = (fast,)
                        else:
                            site = best_site(i, g, t, free)
                            lists = tuple(members_at[(p, site)] for p in phs)
                if len(lists) == 1:
                    lst = lists[0]
                    vals = [free[m] for m in lst]
                    bf = min(vals)
                    if bf > t:
                        # every member is busy past t: the earliest to free up (first on ties)
                        best = lst[vals.index(bf)]
                        t = bf
                        rb = best
                        blk = lst
                    else:
                        best = lst[0]
                        for k, f in enumerate(vals):
                            if f <= t:
                                best = lst[k]
                                break
                    chosen = (best,)
                else:
                    # the start is the latest of each placeholder's earliest member; then take,
                    # per placeholder, the first member free by that time
                    for members in lists:
                        mf = min(free[m] for m in members)
                        if mf > t:
                            t = mf
                            rb = next(m for m in members if free[m] == mf)
                            blk = members
                    chosen = tuple(next(m for m in members if free[m] <= t) for members in lists)
            tb = t
            sb = -1
            movers: tuple[tuple[int, int, int], ...] = ()
            acq = acq3[i]
            if acq:
                t, sb, movers = admit_all(acq, t, dur[i])
                if t > tb and phs and t < INF:
                    # semaphores moved the start: every member free by then gives that same
                    # start, so the binding goes to the first of them in pool order
                    chosen = tuple(next(m for m in members if free[m] <= t) for members in lists)
            return (t, tb, chosen, rb, sb, blk, movers)

        return evaluate

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
    def _make_commit(self) -> Callable[[int, Eval], list[int]]:
        """Build ``commit(i, ev)`` as a closure over the state's arrays (called once per event)."""
        cg = self.cg
        dur_of = cg.dur
        done = self.done
        start_of = self.start
        end_of = self.end
        order = self.order
        free = self.free
        fixed_of = self.fixed
        bound = self.bound
        group_of = cg.group
        group_site = self.group_site
        res_site = cg.res_site
        readyl = self.ready
        rpred = self.ready_pred
        waits = self.waits
        profiles = self.profiles
        acq3 = self.acq3
        rel_of = cg.rel
        sem_cap = cg.sem_cap
        succs = cg.succs
        indeg = self.indeg

        def commit(i: int, ev: Eval) -> list[int]:
            """Commit event ``i``; return the events that became eligible."""
            start, tb, chosen, rb, sb, _blk, _movers = ev
            end = start + dur_of[i]
            done[i] = True
            start_of[i] = start
            end_of[i] = end
            order.append(i)
            fixed = fixed_of[i]
            for r in fixed:
                free[r] = end
            for m in chosen:
                free[m] = end
            rs = bound[i] = fixed + chosen if chosen else fixed
            g = group_of[i]
            if g >= 0 and group_site[g] < 0:
                group_site[g] = res_site[rs[0]]
            waits[i] = (rpred[i], rb, tb, sb)
            for s, a, _back in acq3[i]:
                profiles[s].add(start, -a)
            for s, r in rel_of[i]:
                hi = profiles[s].add(end, r)
                if hi > sem_cap[s]:
                    raise SchedulingError(
                        f"event {cg.names[i]!r} releases {r} unit(s) of semaphore {cg.sem_names[s]!r} at "
                        f"t={end:g} µs, lifting its free units to {hi} above the capacity "
                        f"{sem_cap[s]}: the units were not acquired by an event scheduled before it. "
                        f"Make the releasing event depend on the event that acquires the units."
                    )
            new: list[int] = []
            for j, lam in succs[i]:
                v = end + lam
                if v > readyl[j] or rpred[j] < 0:
                    readyl[j] = v
                    rpred[j] = i
                indeg[j] -= 1
                if indeg[j] == 0:
                    new.append(j)
            return new

        return commit

    def to_schedule(
        self,
        policy_name: str,
        record_levels: bool = True,
        repinned: Mapping[str, tuple[str, str]] | None = None,
    ) -> Schedule:
        """The schedule of the committed state; ``record_levels``: every semaphore use of the
        graph was scheduled (none dropped by normalisation), so that each profile is its
        semaphore's level curve in the schedule."""
        cg = self.cg
        names = cg.names
        start_us = dict(zip(names, self.start))
        end_us = dict(zip(names, self.end))
        levels = None
        if record_levels:
            # every event is committed: each profile is its semaphore's final level curve
            curves = {sem: (p.times, p.levels) for sem, p in zip(cg.sem_names, self.profiles)}
            levels = SemaphoreLevels(start_us, end_us, curves)
        return Schedule(
            start_us=start_us,
            end_us=end_us,
            resources=_bound_names(cg, self.bound),
            waits=_LazyWaits(cg, self.waits, self.ready, self.start),
            policy=policy_name,
            order=tuple(map(names.__getitem__, self.order)),
            recorded_levels=levels,
            repinned=dict(repinned or {}),
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


def _bound_names(cg: CompiledGraph, bound: list[tuple[int, ...]]) -> dict[str, tuple[str, ...]]:
    """``event -> bound resource names``, built eagerly: validation and every analysis read all
    of them, and the common one-resource tuples are shared."""
    res_names = cg.res_names
    single = [(r,) for r in res_names]
    return {
        name: single[b[0]] if len(b) == 1 else tuple(res_names[r] for r in b)
        for name, b in zip(cg.names, bound)
    }


class _LazyByEvent(Mapping[str, _V]):
    """``event name -> value`` built from the scheduler's arrays on first access per event (most
    callers read a few events of a large schedule; one that has read many is taken to read all,
    and the rest are built in one pass)."""

    __slots__ = ("_all", "_cg", "_memo")

    BULK_AFTER = 1024

    def __init__(self, cg: CompiledGraph) -> None:
        self._cg = cg
        self._memo: dict[str, _V] = {}
        self._all = False

    def _build(self, i: int) -> _V:
        raise NotImplementedError

    def _build_all(self) -> None:
        memo = self._memo
        build = self._build
        for i, name in enumerate(self._cg.names):
            if name not in memo:
                memo[name] = build(i)
        self._all = True

    def __getitem__(self, name: str) -> _V:
        try:
            return self._memo[name]
        except KeyError:
            if self._all or name not in self._cg.index:
                raise
        if len(self._memo) >= self.BULK_AFTER:
            self._build_all()
            return self._memo[name]
        got = self._memo[name] = self._build(self._cg.index[name])
        return got

    def __iter__(self) -> Iterator[str]:
        return iter(self._cg.names)

    def __len__(self) -> int:
        return len(self._cg.names)

    def __contains__(self, name: object) -> bool:
        return name in self._cg.index


class _LazyWaits(_LazyByEvent[Wait]):
    """``event -> Wait``."""

    __slots__ = ("_raw", "_ready", "_start")

    def __init__(
        self,
        cg: CompiledGraph,
        raw: list[tuple[int, int, float, int]],
        ready: list[float],
        start: list[float],
    ) -> None:
        super().__init__(cg)
        self._raw, self._ready, self._start = raw, ready, start

    def _build(self, i: int) -> Wait:
        cg = self._cg
        rp, rb, tb, sb = self._raw[i]
        ready = self._ready[i]
        rw = tb - ready
        sw = self._start[i] - tb
        return Wait(
            ready,
            cg.names[rp] if rp >= 0 else None,
            cg.res_names[rb] if rb >= 0 and rw > 0 else None,
            rw if rw > 0 else 0.0,
            cg.sem_names[sb] if sb >= 0 and sw > 0 else None,
            sw if sw > 0 else 0.0,
        )


def schedule(
    graph: EventGraph,
    policy: str | Policy = "earliest_start",
    *,
    normalize: bool = True,
    restructure: Restructure | None = None,
) -> Schedule:
    """Greedy list schedule of ``graph`` (SPEC §4): the model's reference timing.

    Args:
        graph: the event graph (validated here; a bad graph raises ``GraphError``).
        policy: a registered policy name (``moeopt.registry.names("policy")``) or a Policy object.
        normalize: drop semaphores that provably cannot bind before scheduling (it never changes
            the result; see :func:`moeopt.core.normalize.drop_nonbinding_semaphores`).
        restructure: a hook called after every commit that may re-pin pending events within a
            pool (:mod:`moeopt.core.restructure`); the schedule records what it moved
            (:attr:`Schedule.repinned`).

    Raises:
        SchedulingError: when an event can never be admitted (semaphore units that are never
            given back) or a release lifts a semaphore above its capacity.
    """
    pol = make_policy(policy)
    # the cycle collector is paused: scheduling allocates an object or more per event and
    # frees them by reference counting; with the collector on, the first schedule of a freshly
    # built 100k-event graph paid a full collection of it (2.15 s instead of 1.75 s here)
    with gc_paused():
        graph.validate()
        full = graph.compiled()
        cg = drop_nonbinding_semaphores(graph) if normalize else full
        state = _State(cg)
        try:
            pol.prepare(cg)
            if restructure is not None:
                restructure.prepare(cg)
            if pol.wants_view:
                ctl = _run_view(state, pol, restructure)
            else:
                ctl = _run_keyed(state, pol, restructure)
            # a semaphore whose uses normalisation dropped was never tracked: no levels then
            moved = ctl.repinned_names() if ctl is not None else None
            return state.to_schedule(pol.name, record_levels=cg is full, repinned=moved)
        finally:
            # the state's evaluate / admit_all closures refer back to the state: without this the
            # whole scheduling state (tens of thousands of objects) waits for the cycle collector
            state.evaluate = state.admit_all = state.commit = None  # type: ignore[assignment]


def _run_keyed(state: _State, pol: Policy, hook: Restructure | None = None) -> RestructureControl | None:
    """Lazy-heap list scheduling for keyed policies.

    Heap keys ``(before, start, after, index)`` are lower bounds of each event's true key:
    resource free times and acquires only ever make an event start later, so a popped event
    whose re-evaluated key is unchanged is the true minimum.

    *Gates.* Events held back by a busy resource wait in a gate, one per candidate resource set
    (a fixed resource, or the members of a pool placeholder) and, for events that a semaphore
    delays further, per semaphore signature and duration too. Every event parked in a gate starts
    no earlier than ``F(T)``, where ``T`` is the set's earliest free time and ``F`` the semaphore
    admission of that signature from ``T`` (the identity without semaphores); admission is
    monotone in its start time. So only the gate's best-ranked event needs a heap entry, keyed
    ``(before, F(T), after, index)``: a commit does not re-rank every event that waits for the
    same pool or the same bandwidth.

    *Releases.* A committed release is the one thing that makes a start *earlier*; by the
    property in :meth:`SemaphoreProfile.admit`, a release at time ``r`` can only help a waiter
    (an event or a gate) whose semaphore-delayed start is after ``r`` or that cannot start at
    all yet, so exactly those are woken: per semaphore, delayed waiters sit in a max-heap of their
    start and starved waiters are grouped by the units they need. A waiter is registered only
    with the semaphores that moved its start during admission: every earlier time was refused by
    one of them, so a release on any other semaphore cannot bring the start forward.

    *Restructuring.* With a hook, after every commit the hook may re-pin pending events; an
    eligible one gets a fresh lower-bound key (its old heap or gate entry is retired by its
    version), so it is re-evaluated on its new resource: ``O(log n)`` per re-pin.
    """
    cg = state.cg
    n = cg.n
    if type(pol).rank is Policy.rank:
        # the base rank, (0, 0) for every event (earliest_start): the start alone orders
        before = after = [0.0] * n
    else:
        ranks = [pol.rank(i) for i in range(n)]
        before = [float(r[0]) for r in ranks]
        after = [float(r[1]) for r in ranks]
        del ranks
    evaluate = state.evaluate
    admit_all = state.admit_all
    commit = state.commit
    done = state.done
    acq3 = state.acq3
    dur = cg.dur
    profiles = state.profiles
    ready = state.ready
    free = state.free
    heap: list[tuple[float, float, float, int]] = []
    push = heapq.heappush
    pop = heapq.heappop
    cur_key: list[tuple[float, float, float, int] | None] = [None] * n
    # waiter ids: 0..n-1 are events, n + g is gate g; versions retire stale registrations
    version = [0] * n
    in_gate = [-1] * n
    gate_index: dict[Any, int] = {}
    gate_members: list[tuple[int, ...]] = []
    gate_acq: list[tuple[tuple[int, int, int], ...]] = []
    gate_dur: list[float] = []
    gate_heap: list[list[tuple[float, float, int, int]]] = []
    gate_version: list[int] = []
    n_sem = len(cg.sem_names)
    delayed: list[list[tuple[float, int, int]]] = [[] for _ in range(n_sem)]
    starved: list[dict[int, list[tuple[int, int]]]] = [{} for _ in range(n_sem)]

    def register(owner: int, ver: int, acq: tuple[tuple[int, int, int], ...], start: float) -> None:
        if start == INF:
            # a waiter keeps ``take - back`` units for ever, so it cannot start while fewer are
            # free for ever (a necessary condition only: woken waiters are re-evaluated)
            for sem, take, back in acq:
                starved[sem].setdefault(max(take - back, 0), []).append((owner, ver))
        else:
            for sem, _take, _b in acq:
                push(delayed[sem], (-start, owner, ver))

    def live(owner: int, ver: int) -> bool:
        if owner < n:
            return ver == version[owner] and not done[owner]
        return ver == gate_version[owner - n]

    def push_rep(g: int) -> None:
        gh = gate_heap[g]
        while gh:
            top = gh[0]
            j = top[2]
            if done[j] or version[j] != top[3]:
                pop(gh)
                continue
            t = min([free[m] for m in gate_members[g]])
            acq = gate_acq[g]
            if acq:
                gate_version[g] += 1
                t2, _sb, movers = admit_all(acq, t, gate_dur[g])
                if t2 != t:
                    register(n + g, gate_version[g], movers, t2)
                if t2 == INF:
                    if cur_key[j] is not None:
                        cur_key[j] = None
                    return
                t = t2
            key = (top[0], t, top[1], j)
            if cur_key[j] != key:
                cur_key[j] = key
                push(heap, key)
            return

    def route(j: int, ev: Eval) -> None:
        s = ev[0]
        version[j] += 1
        vj = version[j]
        blk = ev[5]
        if blk is not None and ev[1] > ready[j] and s < INF:
            # held back by a busy resource (and maybe then by semaphores): park in a gate
            if ev[4] < 0:
                gkey: Any = id(blk)
                acq: tuple[tuple[int, int, int], ...] = ()
            else:
                acq = acq3[j]
                gkey = (id(blk), acq, dur[j])
            g = gate_index.get(gkey)
            if g is None:
                g = len(gate_members)
                gate_index[gkey] = g
                gate_members.append(blk)
                gate_acq.append(acq)
                gate_dur.append(dur[j])
                gate_heap.append([])
                gate_version.append(0)
            gh = gate_heap[g]
            entry = (before[j], after[j], j, vj)
            push(gh, entry)
            in_gate[j] = g
            cur_key[j] = None
            push_rep(g)
            return
        if s == INF:
            cur_key[j] = None
            register(j, vj, ev[6], INF)
            return
        key = (before[j], s, after[j], j)
        cur_key[j] = key
        push(heap, key)
        if ev[4] >= 0:
            register(j, vj, ev[6], s)

    def lower_bound(j: int) -> None:
        # start >= ready[j] always holds, so this key may be pushed without evaluating j
        key = (before[j], ready[j], after[j], j)
        cur_key[j] = key
        push(heap, key)

    def on_release(sem: int, r: float) -> None:
        wake: list[int] = []
        dh = delayed[sem]
        while dh and -dh[0][0] > r:
            _negs, owner, ver = pop(dh)
            if live(owner, ver):
                wake.append(owner)
        groups = starved[sem]
        if groups:
            levels = profiles[sem].levels
            final = levels[-1] if levels else cg.sem_cap[sem]
            for take in [t for t in groups if t <= final]:
                for owner, ver in groups.pop(take):
                    if live(owner, ver):
                        wake.append(owner)
        for owner in wake:
            if owner >= n:
                push_rep(owner - n)
            elif not done[owner] and in_gate[owner] < 0:
                version[owner] += 1
                lower_bound(owner)

    for i in range(n):
        if state.indeg[i] == 0:
            lower_bound(i)
    ctl: RestructureControl | None = None
    if hook is not None:

        def refresh(j: int) -> None:
            # a re-pinned event: retire its heap / gate entry and, if eligible, key it afresh
            version[j] += 1
            g = in_gate[j]
            if g >= 0:
                in_gate[j] = -1
                push_rep(g)
            if state.indeg[j] == 0 and not done[j]:
                lower_bound(j)

        ctl = RestructureControl(cg, state.fixed, free, done, state.end, refresh)
    committed = 0
    while heap:
        entry = pop(heap)
        i = entry[3]
        if done[i] or cur_key[i] != entry:
            continue
        cur_key[i] = None
        g = in_gate[i]
        if g >= 0:
            in_gate[i] = -1
        ev = evaluate(i)
        s = ev[0]
        if s <= entry[1]:
            # s is never below the lower bound; equal means this is the true minimum
            new = commit(i, ev)
            committed += 1
            version[i] += 1
            if g >= 0:
                push_rep(g)
            for sem, _r in cg.rel[i]:
                if delayed[sem] or starved[sem]:
                    on_release(sem, state.end[i])
            for j in new:
                lower_bound(j)
            if ctl is not None:
                hook.after_commit(i, ctl)  # type: ignore[union-attr]
        else:
            route(i, ev)
            if g >= 0 and in_gate[i] != g:
                push_rep(g)
    if committed < n:
        stuck = [i for i in range(n) if not done[i] and state.indeg[i] == 0]
        raise SchedulingError(
            f"deadlock: {n - committed} event(s) can never start because semaphore units they need "
            f"are never given back: " + state.blocked_report(stuck)
        )
    return ctl


def _run_view(state: _State, pol: Policy, hook: Restructure | None = None) -> RestructureControl | None:
    from moeopt.core.view import SchedulerView

    cg = state.cg
    eligible = {i for i in range(cg.n) if state.indeg[i] == 0}
    view = SchedulerView(state, eligible)
    ctl = (
        RestructureControl(cg, state.fixed, state.free, state.done, state.end, lambda _j: None)
        if hook is not None
        else None
    )
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
        if ctl is not None:
            hook.after_commit(i, ctl)  # type: ignore[union-attr]
    return ctl
