"""The greedy scheduler's state over one compiled graph, shared by the scheduler's loops
(:mod:`moeopt.core.scheduler`) and the read-only view handed to policies
(:mod:`moeopt.core.view`); both read it through the public names below, and only the scheduler
commits.

Per event ``i`` the state keeps its ready time (predecessors done, λ included) and the
predecessor that set it, its fixed resources (the compiled graph's, copied: a restructure hook,
:mod:`moeopt.core.restructure`, may re-pin a pending event in this run without touching the
shared frozen graph), whether it is committed, its start and end, the resources it was bound to
and why it waited; per resource, the time it is free from; per semaphore, a
:class:`~moeopt.core.semaphores.SemaphoreProfile` of its free units over time.

:meth:`SchedulerState.evaluate` answers "when could eligible event ``i`` start now" as an
:data:`Eval`; :meth:`SchedulerState.commit` places it. Both are closures over the arrays (the
scheduler's hottest functions: closure variables are much cheaper than attribute lookups), built
once per state.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from itertools import compress
from operator import itemgetter, not_
from types import MappingProxyType
from typing import NamedTuple, TypeVar

from moeopt.core.compiled import CompiledGraph
from moeopt.core.semaphores import SemaphoreProfile
from moeopt.errors import SchedulingError

INF = math.inf

Eval = tuple[
    float, float, tuple[int, ...], int, int, "tuple[int, ...] | None", "tuple[tuple[int, int, int], ...]"
]
"""The answer of :meth:`SchedulerState.evaluate` for one event, a plain tuple (made once per
evaluation on the hot path) read by unpacking it by name::

    start, t_base, chosen, rb, sb, blocking, movers = ev

``start``: the earliest start (``inf`` if its semaphores never admit it); ``t_base``: the start
from predecessors and resources alone; ``chosen``: the pool members its placeholders bind to;
``rb``: the resource that set ``t_base`` (-1: none); ``sb``: the semaphore that moved the start
past ``t_base`` last (-1: none); ``blocking``: the candidate resources (one fixed resource or one
placeholder's members) whose free time set ``t_base`` (``None``: none did); ``movers``: the
acquire triples ``(semaphore, take, give back)`` whose semaphores moved the start (only their
releases can make it earlier)."""

SemOps = tuple[
    tuple[tuple[SemaphoreProfile, int, int], ...],
    tuple[tuple[SemaphoreProfile, int], ...],
    tuple[tuple[int, int], ...],
]
"""An event's semaphore changes for commit, ``holds, takes, gives`` (see ``SchedulerState.sem_ops``)."""

NO_SEM_OPS: SemOps = ((), (), ())
"""The one :data:`SemOps` object of every event without semaphore changes (most events): a
commit tests for it by identity and skips the three loops."""



class GraphTables(NamedTuple):
    """What a :class:`SchedulerState` needs of its graph that depends on the graph alone: found
    once per compiled graph (:func:`graph_tables`) and shared by every state of it, read-only.

    Per distinct (acquires, releases) pair (few of them, and events with equal maps share the
    compiled tuples, see compile_graph: keyed by identity, which the compiled graph keeps alive),
    in the order each first appears, then per event by one C-level lookup:

    * ``acq3``: acquire triples (semaphore, take, give back by the same event);
    * ``gains``: the semaphores whose units it gives back beyond what it took itself: only
      those releases can raise a semaphore's free units anywhere (an event that gives back at
      most what it took lowers the profile over [start, end) and leaves it lower or equal
      after), so only they can bring a waiting event's start forward;
    * ``sig``: the number of its pair among the distinct ones (numbered in order of first
      appearance): the scheduler's semaphore gates are per signature;
    * ``sig_acq`` / ``sig_gains`` / ``sig_ops``: per signature, its acquire triples, its gains
      and its semaphore changes by semaphore number (the state puts its own profiles in, see
      ``SchedulerState.sem_ops``).
    """

    indeg: tuple[int, ...]  # the number of predecessors per event
    ready: tuple[float, ...]  # the initial ready times (see SchedulerState.ready)
    sig: tuple[int, ...]
    sig_acq: tuple[tuple[tuple[int, int, int], ...], ...]
    sig_ops: tuple[
        tuple[tuple[tuple[int, int, int], ...], tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]], ...
    ]
    sig_gains: tuple[tuple[int, ...], ...]
    acq3: tuple[tuple[tuple[int, int, int], ...], ...]
    gains: tuple[tuple[int, ...], ...]
    gainful: tuple[bool, ...]  # per semaphore: some event's gains hold it
    group_site: tuple[int, ...]  # per colocation group: its site when it has one only, else -1
    members_at: Mapping[tuple[int, int], tuple[int, ...]]  # (pool, site) -> its members there
    single: tuple[tuple[int], ...]  # one shared 1-tuple per resource
    ph_lists: tuple[tuple[tuple[int, ...], ...], ...]
    site_members: tuple[tuple[int, ...] | None, ...]


def graph_tables(cg: CompiledGraph) -> GraphTables:
    """The :class:`GraphTables` of ``cg``, found on the first call and kept on the graph (a
    repeated schedule of one graph, as a search or a benchmark makes, builds them once: on the
    pinned 100k-event graph they were most of the state's constructor)."""
    got: GraphTables | None = cg.derived("scheduler_tables")
    if got is None:
        got = cg.keep("scheduler_tables", _find_tables(cg))
    return got


_K = TypeVar("_K")
_T = TypeVar("_T")


def picked(table: Mapping[_K, _T] | Sequence[_T], keys: Sequence[_K] | Sequence[int]) -> tuple[_T, ...]:
    """``tuple(table[k] for k in keys)``: for two or more keys one C-level ``itemgetter`` call
    (about half the instructions of a ``map`` of the table's ``__getitem__``, callgrind: 5.6k
    keys 1.63M -> 0.74M); it returns a bare item for one key, and takes none."""
    if len(keys) > 1:
        got: tuple[_T, ...] = itemgetter(*keys)(table)
        return got
    return tuple(map(table.__getitem__, keys))  # type: ignore[arg-type]


def pair_numbers(
    acq: Sequence[tuple[tuple[int, int], ...]], rel: Sequence[tuple[tuple[int, int], ...]]
) -> tuple[list[int], tuple[int, ...]]:
    """``(some, sig)``: the events' (acquire, release) pairs of tuples told apart by the
    identities of the two tuples (the compiled graph shares them between the events with equal
    maps), numbered 0, 1, ... in order of their first event; ``some[k]`` is pair k's first
    event and ``sig[i]`` event i's pair number.

    Consecutive events often have the very pair of the event before, or of the last distinct
    pair before that (a tile's write-backs alternate between two): those are found by two
    identity tests, without an ``(id, id)`` key and its dict lookup (callgrind, pto M=2048's
    6.2k events: 13.5M -> 6.4M instructions; scenario_basic's 5.6k events, whose pairs cycle
    over a core's slot semaphores, 12.3M -> 11.1M, with one numbering of all by a dict
    ``setdefault`` per event as before). tests/core/test_pair_numbers.py holds it to that
    numbering."""
    sig: list[int] = []
    add = sig.append
    some: list[int] = []
    number: dict[tuple[int, int], int] = {}
    # the last distinct pair and its number, and the one before it
    la = lr = pa = pr = None
    ls = ps = -1
    for i, (a, r) in enumerate(zip(acq, rel)):
        if a is la and r is lr:
            add(ls)
        elif a is pa and r is pr:  # (the two swap places)
            pa, pr, la, lr, ps, ls = la, lr, a, r, ls, ps
            add(ls)
        else:
            key = (id(a), id(r))
            s = number.get(key)
            if s is None:
                s = number[key] = len(some)
                some.append(i)
            pa, pr, ps = la, lr, ls
            la, lr, ls = a, r, s
            add(s)
    return some, tuple(sig)


_Ops = tuple[tuple[tuple[int, int, int], ...], tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]]
"""An event's semaphore changes as ``SchedulerState.commit`` applies them: (holds, takes, gives)."""


class SemaphoreSignatures(NamedTuple):
    """The events' semaphore uses told apart by their (acquire, release) pair (see
    :func:`pair_numbers`), per distinct pair in the order of its first event: ``acq``: each
    acquire as ``(semaphore, units, units given back at the end)``; ``gains``: the semaphores
    it gives back more of than it took; ``ops``: ``(holds, takes, gives)`` as
    ``SchedulerState.commit`` applies them. ``sig[i]``: event i's pair number."""

    sig: tuple[int, ...]
    acq: tuple[tuple[tuple[int, int, int], ...], ...]
    gains: tuple[tuple[int, ...], ...]
    ops: tuple[_Ops, ...]


def semaphore_signatures(cg: CompiledGraph) -> SemaphoreSignatures:
    """:class:`SemaphoreSignatures` of ``cg`` (the part of :class:`GraphTables` the compiled
    loop reads too), found on the first call and kept on the graph (the analyses group events
    by ``sig``: ``moeopt.megamoe.analysis.table.pair_numbers``)."""
    got: SemaphoreSignatures | None = cg.derived("semaphore_signatures")
    if got is None:
        got = cg.keep("semaphore_signatures", _find_signatures(cg))
    return got


def _find_signatures(cg: CompiledGraph) -> SemaphoreSignatures:
    # (found by the compilation when it worked on arrays, else here)
    kept: tuple[list[int], tuple[int, ...]] | None = cg.derived("pair_numbers")
    some, sig = kept if kept is not None else pair_numbers(cg.acq, cg.rel)
    seen: list[tuple[tuple[int, int, int], ...]] = []
    seen_gain: list[tuple[int, ...]] = []
    seen_ops = []
    for e in some:
        acq, rel = cg.acq[e], cg.rel[e]
        own = dict(rel)
        seen.append(tuple([(s, a, own.get(s, 0)) for s, a in acq]))
        took = dict(acq)
        seen_gain.append(tuple([s for s, r in rel if r > took.get(s, 0)]))
        held = {s for s, a in acq if 0 <= own.get(s, -1) <= a}
        seen_ops.append(
            (
                tuple([(s, a, own[s]) for s, a in acq if s in held]),
                tuple([(s, a) for s, a in acq if s not in held]),
                tuple([(s, r) for s, r in rel if s not in held]),
            )
        )
    return SemaphoreSignatures(sig, tuple(seen), tuple(seen_gain), tuple(seen_ops))


def _find_tables(cg: CompiledGraph) -> GraphTables:
    n = cg.n
    indeg = tuple(cg.indeg())
    # -1 until a predecessor is committed (every end + λ is >= 0, so the first one always
    # sets it: commit needs no separate test for "no predecessor yet"); 0 without any
    ready = [-1.0] * n
    for i in compress(range(n), map(not_, indeg)):
        ready[i] = 0.0
    sig, seen, seen_gain, seen_ops = semaphore_signatures(cg)
    # gainful[s]: some event gives back units of semaphore s beyond what it took itself
    # (its ``gains`` holds s): only such releases can bring a waiting start forward
    gainful = [False] * len(cg.sem_cap)
    for gs in seen_gain:
        for sem in gs:
            gainful[sem] = True
    ph_lists, site_members, members_at = _placeholder_tables(cg)
    return GraphTables(
        indeg=indeg,
        ready=tuple(ready),
        sig=sig,
        sig_acq=tuple(seen),
        sig_ops=tuple(seen_ops),
        sig_gains=tuple(seen_gain),
        acq3=picked(seen, sig),
        gains=picked(seen_gain, sig),
        gainful=tuple(gainful),
        group_site=group_sites(cg),
        members_at=MappingProxyType(members_at),
        single=tuple([(r,) for r in range(len(cg.res_names))]),
        ph_lists=ph_lists,
        site_members=site_members,
    )


def group_sites(cg: CompiledGraph) -> tuple[int, ...]:
    """Per colocation group: its site when it may use one site only, else -1 (no site yet)."""
    return tuple([sites[0] if sites is not None and len(sites) == 1 else -1 for sites in cg.group_sites])


def site_members(cg: CompiledGraph) -> tuple[tuple[int, ...] | None, ...]:
    """:attr:`GraphTables.site_members` of ``cg``."""
    return _placeholder_tables(cg)[1]


def _placeholder_tables(
    cg: CompiledGraph,
) -> tuple[
    tuple[tuple[tuple[int, ...], ...], ...],
    tuple[tuple[int, ...] | None, ...],
    dict[tuple[int, int], tuple[int, ...]],
]:
    """Per event: the member lists of its placeholders when no site restriction applies, and
    for a colocated event with one placeholder, its pool's members at the sites its group may
    use, in pool order (choosing the member then chooses the site, while the group has none);
    and the members of each pool at each site a colocated event may use."""
    n = cg.n
    members_at: dict[tuple[int, int], tuple[int, ...]] = {}
    pool_members = cg.pool_members
    # the lists depend on the placeholders alone: found once per distinct placeholder tuple
    lists_of = {phs: tuple([pool_members[p] for p in phs]) if phs else () for phs in set(cg.placeholders)}
    ph_lists = picked(lists_of, cg.placeholders)
    site_members: list[tuple[int, ...] | None] = [None] * n
    interned: dict[tuple[int, ...], tuple[int, ...]] = {}
    if cg.group_sites:
        # the members an event gets depend on its placeholders and its group's allowed
        # sites alone: found once per distinct pair (most colocated events share a few)
        found: dict[tuple[tuple[int, ...], tuple[int, ...]], tuple[int, ...] | None] = {}
        group_of, phs_of, group_sites = cg.group, cg.placeholders, cg.group_sites
        for i in compress(range(n), phs_of):
            g = group_of[i]
            if g < 0:
                continue  # not colocated: its placeholders' whole pools
            phs = phs_of[i]
            allowed = group_sites[g] or ()
            pk = (phs, allowed)
            if pk in found:
                got = found[pk]
                if got is not None:
                    site_members[i] = got
                continue
            got = None
            for p in phs:
                for site in allowed:
                    if (p, site) not in members_at:
                        members_at[(p, site)] = cg.pool_members_at(p, site)
            if len(phs) == 1:
                # its pool's members at the allowed sites, in pool order: it binds among them as
                # an event outside any group binds in its pool (the member giving the earliest
                # start, the first in pool order on ties), and the member chosen chooses the site
                ok_sites = set(allowed)
                pool = cg.pool_members[phs[0]]
                mem = tuple(m for m in pool if cg.res_site[m] in ok_sites)
                # one shared object per distinct list: the scheduler's gates key on identity
                got = site_members[i] = interned.setdefault(mem, mem)
            found[pk] = got
    return ph_lists, tuple(site_members), members_at


class SchedulerState:
    """Mutable scheduling state over one compiled graph (see the module docstring).

    Read by the view: ``cg``, ``fixed``, ``free``, ``done``, ``end``, ``evaluate`` and
    ``step_evals`` (the evaluations made at the current step, which the scheduler empties after
    every commit).
    """

    def __init__(self, cg: CompiledGraph) -> None:
        self.cg = cg
        n = cg.n
        tab = graph_tables(cg)
        self.free = [0.0] * len(cg.res_names)
        # each event's fixed resources: the graph's, until a restructure hook re-pins one
        # (moeopt.core.restructure)
        self.fixed: list[tuple[int, ...]] = list(cg.fixed)
        self.indeg = list(tab.indeg)
        self.ready = list(tab.ready)
        self.ready_pred = [-1] * n
        self.done = [False] * n
        self.start = [0.0] * n
        self.end = [0.0] * n
        self.bound: list[tuple[int, ...]] = [()] * n
        self._pool_pos: list[dict[int, int]] | None = None  # (see _site_binding)
        # why each committed event started when it did, in columns by event: the predecessor
        # that set its ready time (``ready_pred``, final once the event is committed), the
        # resource that set its t_base (``wait_res``), ``t_base``, and the semaphore that moved
        # the start (``wait_sem``; -1: none); the waits are derived from these, the ready times
        # and the starts when read. Why columns: one tuple per commit was 100k tuples (about
        # 7 MB) per schedule of the pinned 100k graph, allocated in the loop and kept with it
        self.wait_res = [-1] * n
        self.t_base = [0.0] * n
        self.wait_sem = [-1] * n
        self.order: list[int] = []
        self.profiles = profiles = [SemaphoreProfile(c) for c in cg.sem_cap]
        # the graph's semaphore tables (see GraphTables), shared with every state of this graph;
        # then, per signature and per event by one C-level lookup, the forms that hold this
        # state's own profiles:
        # * sem_ops: its semaphore changes for commit: ``holds``, (profile, take, give back)
        #   where the event gives back at most what it took of that semaphore (one
        #   SemaphoreProfile.hold call, which needs no capacity check: see there); then the other
        #   acquires, (profile, take), and the other releases, (semaphore, units), with the
        #   capacity check.
        sig = tab.sig
        self.acq3: Sequence[tuple[tuple[int, int, int], ...]] = tab.acq3
        self.gains: Sequence[tuple[int, ...]] = tab.gains
        self.sig: Sequence[int] = sig
        self.n_sigs = len(tab.sig_acq)
        seen_ops: list[SemOps] = [
            NO_SEM_OPS
            if not (ops[0] or ops[1] or ops[2])
            else (
                tuple([(profiles[s], a, back) for s, a, back in ops[0]]),
                tuple([(profiles[s], a) for s, a in ops[1]]),
                ops[2],
            )
            for ops in tab.sig_ops
        ]
        # sig_acq1: per signature with exactly one acquire, (semaphore, take, give back, its
        # profile), else None: the scheduler admits such an event (most acquiring events of the MegaMoE
        # graphs) without admit_all's call, tests and result tuple
        self.sig_acq1: list[tuple[int, int, int, SemaphoreProfile] | None] = [
            (*a[0], profiles[a[0][0]]) if len(a) == 1 else None for a in tab.sig_acq
        ]
        # sig_acq2: per signature with exactly two acquires, (first triple, second triple, their
        # profiles), else None: the scheduler admits such an event (the slot and bandwidth of a
        # tile's load) with admit_all's two-semaphore cycle inline, without its call
        self.sig_acq2: list[
            tuple[tuple[int, int, int], tuple[int, int, int], SemaphoreProfile, SemaphoreProfile] | None
        ] = [(a[0], a[1], profiles[a[0][0]], profiles[a[1][0]]) if len(a) == 2 else None for a in tab.sig_acq]
        # the per-signature tables as well (the scheduler's loop reads an event's signature and
        # then these few short lists, where one long list per table cost a cache line each)
        self.sig_acq3 = tab.sig_acq
        self.sig_gains = tab.sig_gains
        self.sig_ops = seen_ops
        self.sem_ops: list[SemOps] = list(picked(seen_ops, sig))
        self.gainful = list(tab.gainful)
        # colocation: the site of each group, -1 while undecided
        self.group_site = list(tab.group_site)
        self.members_at: dict[tuple[int, int], tuple[int, ...]] = dict(tab.members_at)
        self.single = tab.single
        self.ph_lists: Sequence[tuple[tuple[int, ...], ...]] = tab.ph_lists
        self.site_members: Sequence[tuple[int, ...] | None] = tab.site_members
        # evaluations at the current step, for the view (emptied by the scheduler after a commit)
        self.step_evals: dict[int, Eval] = {}
        self.evaluate: Callable[..., Eval] = self._make_evaluate()
        self.commit: Callable[[int, float, float, tuple[int, ...], int, int], list[int]] = self._make_commit()

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
        site_binding = self._site_binding

        def admit_all(
            acq: tuple[tuple[int, int, int], ...], t: float, d: float
        ) -> tuple[float, int, tuple[tuple[int, int, int], ...]]:
            """Earliest time >= t at which every semaphore in ``acq`` admits an event of duration
            ``d``, the semaphore that moved it last (-1 if none did) and the entries of ``acq``
            whose semaphore moved it at all (every earlier time is refused by one of those)."""
            sb = -1
            if len(acq) == 1:
                s, a, back = acq[0]
                p = profiles[s]
                if p.low >= a:
                    return (t, -1, ())  # admit's own first test, without the call
                t2 = p.admit(t, a, back, d)
                return (t2, s, acq) if t2 > t else (t, -1, ())
            for s, a, _back in acq:
                if profiles[s].low < a:
                    break
            else:
                # every semaphore admits at once (admit's first test: never fewer than the units
                # taken free), so the cycle below would return t, -1, no mover
                return (t, -1, ())
            if len(acq) == 2:
                # the cycle below for two semaphores, unrolled (the common case: a slot and a
                # bandwidth): x, y, x, ... until both have admitted the same start in turn (or
                # none can); movers in the order they first moved it; admit's first test inline
                x, y = acq
                sx, ax, bx = x
                sy, ay, by = y
                px = profiles[sx]
                py = profiles[sy]
                order: tuple[tuple[int, int, int], ...] = ()
                ok = 0
                while t < INF:
                    t2 = t if px.low >= ax else px.admit(t, ax, bx, d)
                    if t2 > t:
                        t = t2
                        sb = sx
                        ok = 1
                        if x not in order:
                            order += (x,)
                        if t == INF:
                            break
                    else:
                        ok += 1
                        if ok == 2:
                            break
                    t2 = t if py.low >= ay else py.admit(t, ay, by, d)
                    if t2 > t:
                        t = t2
                        sb = sy
                        ok = 1
                        if y not in order:
                            order += (y,)
                    else:
                        ok += 1
                        if ok == 2:
                            break
                return (t, sb, order)
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
            # whether the members the placeholders bind among are settled: not so for several
            # placeholders of a group whose site is not fixed (bound at the best site for now,
            # the binding chosen once the start is known, see _site_binding); a start they set
            # is then no bound for other events waiting on those members, so the event waits
            # in no gate (blk None)
            settled = True
            g = -1
            if phs:
                g = group_of[i]
                if g < 0:
                    lists = ph_lists[i]
                else:
                    site = group_site[g]
                    if site >= 0:
                        if len(phs) == 1:
                            lists = (members_at[(phs[0], site)],)
                        else:
                            lists = tuple([members_at[(p, site)] for p in phs])
                    else:
                        fast = site_members[i]
                        if fast is not None:
                            lists = (fast,)
                        else:
                            site = best_site(i, g, t, free)
                            lists = tuple(members_at[(p, site)] for p in phs)
                            settled = False
                if len(lists) == 1:
                    lst = lists[0]
                    if len(lst) == 1:
                        # one member (a colocated event's site fixed): the event binds to it, the
                        # shared one-member tuple (the schedule's names are then found by identity)
                        best = lst[0]
                        bf = free[best]
                        if bf > t:
                            t = bf
                            rb = best
                            blk = lst if settled else None
                        chosen = lst
                    else:
                        # the first member free by t (a walk that stops there: a few members of
                        # a pool of many); else every member is busy past t, and the earliest to
                        # free up is taken (first on ties), from the free times in one C-level map
                        for best in lst:
                            if free[best] <= t:
                                break
                        else:
                            vals = list(map(free.__getitem__, lst))
                            bf = min(vals)
                            best = lst[vals.index(bf)]
                            t = bf
                            rb = best
                            blk = lst if settled else None
                        chosen = single[best]
                else:
                    # the start is the latest of each placeholder's earliest member; then take,
                    # per placeholder, the first member free by that time
                    for members in lists:
                        mf = min(map(free.__getitem__, members))
                        if mf > t:
                            t = mf
                            rb = next(m for m in members if free[m] == mf)
                            blk = members if settled else None
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
                    if len(lists) == 1:
                        for best in lists[0]:
                            if free[best] <= t:
                                break
                        chosen = single[best]
                    else:
                        chosen = tuple([next(m for m in members if free[m] <= t) for members in lists])
            if not settled and t < INF:
                # several placeholders and the group has no site yet: every site at which each
                # placeholder has a member free by t gives the start t (admission is monotone),
                # and the binding goes to the one whose members come first in pool order
                chosen = site_binding(i, g, t, free)
            return (t, tb, chosen, rb, sb, blk, movers)

        return evaluate

    def _site_binding(self, i: int, g: int, t: float, free: list[float]) -> tuple[int, ...]:
        """The members event ``i`` (several placeholders, group ``g`` without a site) binds to
        when it starts at ``t``: at each allowed site where every placeholder has a member free
        by ``t``, the first such member of each; of those sites, the one whose members' places
        in their pools come first (compared in placeholder order): the binding rule (the member
        giving the earliest start, the lowest index on ties) for several placeholders."""
        cg = self.cg
        if self._pool_pos is None:
            self._pool_pos = [{m: k for k, m in enumerate(members)} for members in cg.pool_members]
        pos = self._pool_pos
        best: tuple[tuple[int, ...], tuple[int, ...]] | None = None
        for site in cg.group_sites[g] or ():
            picks: list[int] = []
            for p in cg.placeholders[i]:
                m = next((m for m in self.members_at[(p, site)] if free[m] <= t), -1)
                if m < 0:
                    break
                picks.append(m)
            else:
                key = tuple([pos[p][m] for p, m in zip(cg.placeholders[i], picks)])
                if best is None or key < best[0]:
                    best = (key, tuple(picks))
        assert best is not None  # (the best site's members are free by t)
        return best[1]

    def _best_site(self, i: int, g: int, t: float, free: list[float]) -> int:
        cg = self.cg
        sites = cg.group_sites[g] or ()
        best_site = -1
        best_t = INF
        for site in sites:
            ts = t
            for p in cg.placeholders[i]:
                mf = min(map(free.__getitem__, self.members_at[(p, site)]))
                if mf > ts:
                    ts = mf
            if ts < best_t:
                best_t = ts
                best_site = site
        return best_site

    # -------------------------------------------------------------- commit
    def _make_commit(self) -> Callable[[int, float, float, tuple[int, ...], int, int], list[int]]:
        """Build ``commit(i, start, tb, chosen, rb, sb)`` (the first five fields of ``i``'s
        :data:`Eval`, which the caller has unpacked) as a closure over the state's arrays (called
        once per event)."""
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
        wait_res = self.wait_res
        t_base = self.t_base
        wait_sem = self.wait_sem
        profiles = self.profiles
        sem_ops = self.sem_ops
        sem_cap = cg.sem_cap
        capacity_error = self.capacity_error
        succs = cg.succs
        indeg = self.indeg

        def commit(i: int, start: float, tb: float, chosen: tuple[int, ...], rb: int, sb: int) -> list[int]:
            """Commit event ``i``; return the events that became eligible."""
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
            wait_res[i] = rb
            t_base[i] = tb
            wait_sem[i] = sb
            ops = sem_ops[i]
            if ops is not NO_SEM_OPS:
                holds, takes, gives = ops
                # a hold's two changes and the other acquires, then the other releases: each
                # semaphore sees its changes in the order of before (acquires first), and only
                # releases beyond what the event took can fail the capacity check
                for p, a, back in holds:
                    p.hold(start, end, a, back)
                for p, a in takes:
                    p.add(start, -a)
                for s, r in gives:
                    if profiles[s].add(end, r) > sem_cap[s]:
                        capacity_error(i, s, r)
            new: list[int] = []
            for j, lam in succs[i]:
                v = end + lam
                if v > readyl[j]:  # the first committed predecessor always (ready starts at -1)
                    readyl[j] = v
                    rpred[j] = i
                d = indeg[j] - 1
                indeg[j] = d
                if not d:
                    new.append(j)
            return new

        return commit

    def capacity_error(self, i: int, s: int, r: int) -> None:
        """Raise the error of event ``i``'s release of ``r`` units of semaphore ``s``, which
        lifted its free units above the capacity (the profile has the release applied)."""
        cg = self.cg
        end = self.end[i]
        p = self.profiles[s]
        times, levels = p.curve()
        hi = max(v for t, v in zip(times, levels) if t >= end)
        raise SchedulingError(
            f"event {cg.names[i]!r} releases {r} unit(s) of semaphore {cg.sem_names[s]!r} at "
            f"t={end:g} µs, lifting its free units to {hi} above the capacity "
            f"{cg.sem_cap[s]}: the units were not acquired by an event scheduled before it. "
            f"Make the releasing event depend on the event that acquires the units."
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

    def close(self) -> None:
        """Drop the closures: they refer back to the state, and without this the whole state
        (tens of thousands of objects) would wait for the cycle collector."""
        self.evaluate = self.admit_all = self.commit = None  # type: ignore[assignment]
