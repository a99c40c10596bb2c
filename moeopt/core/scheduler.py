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
import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import compress, repeat
from types import MappingProxyType
from typing import Any, NamedTuple, TypeVar

import numpy as np

from moeopt.core import fastloop
from moeopt.core.compiled import CompiledGraph
from moeopt.core.events import EventGraph
from moeopt.core.fastloop import CompiledRun
from moeopt.core.gcpause import gc_paused
from moeopt.core.normalize import drop_nonbinding_semaphores
from moeopt.core.policies import Policy, make_policy
from moeopt.core.restructure import Restructure, RestructureControl
from moeopt.core.schedule import Schedule, SemaphoreLevels, TimeColumns, Wait, deferred
from moeopt.core.semaphores import SemaphoreProfile
from moeopt.core.state import NO_SEM_OPS, SchedulerState
from moeopt.core.view import SchedulerView
from moeopt.errors import GraphError, SchedulingError

INF = math.inf
_V = TypeVar("_V")


def _to_schedule(
    state: SchedulerState | CompiledRun,
    policy_name: str,
    record_levels: bool = True,
    repinned: Mapping[str, tuple[str, str]] | None = None,
) -> Schedule:
    """The schedule of the committed state; ``record_levels``: every semaphore use of the
    graph was scheduled (none dropped by normalisation), so that each profile is its
    semaphore's level curve in the schedule.

    Its ``start_us``, ``end_us``, ``resources`` and ``order`` (and its recorded levels'
    ``for_start`` / ``for_end``, the same two maps) are made from the state's columns when
    first read (:class:`_ScheduleMaker`), each as it was made here before: building the three
    maps and the order of the pinned 100k graph touched every event name's string (its hash,
    its reference count) about four times, ~0.1 s of its ~0.95 s (wall, median of 7), for
    callers that may read none of them (the makespan reads the ends column).

    The recorded levels are set here, not left to the maker: a maker that held the levels,
    whose own maker it is, made a reference cycle, which only the cyclic collector frees, and
    ``kernel_time``'s workers schedule rank after rank with it paused (``gc_paused``): each
    rank's compiled graph stayed behind (DeepSeek-V3-like zipf, ``bench_scale.py --mode
    kernel_time``: peak 505 MB against 291 MB before the maker, back to the latter without the
    cycle; tests/core/test_deferred_schedule_fields.py frees a schedule with the collector off)."""
    cg = state.cg
    maker = _ScheduleMaker(cg, state.start, state.end, state.bound, state.order)
    s = object.__new__(Schedule)
    own = s.__dict__
    own["waits"] = _LazyWaits(
        cg, state.ready_pred, state.wait_res, state.t_base, state.wait_sem, state.ready, state.start
    )
    own["policy"] = policy_name
    own["repinned"] = dict(repinned or {})
    levels = None
    if record_levels:
        # every event is committed: each profile is its semaphore's final level curve (the
        # curves now: the profiles are the state's; their maps when read, as the schedule's)
        levels = object.__new__(SemaphoreLevels)
        curves = state.curves if isinstance(state, CompiledRun) else [p.curve() for p in state.profiles]
        levels.__dict__["curves"] = dict(zip(cg.sem_names, curves))
        deferred(levels, maker)
    own["recorded_levels"] = levels
    deferred(s, maker)
    return s


_LEVELS_MAP = {"for_start": "start_us", "for_end": "end_us"}
"""The recorded levels' maps: the schedule's."""


class _ScheduleMaker:
    """The fields of a greedy schedule (and of its recorded levels) made from the scheduler's
    columns when first read (see :func:`moeopt.core.schedule.deferred`): each made once, and the
    levels' ``for_start`` / ``for_end`` are the schedule's very ``start_us`` / ``end_us``."""

    __slots__ = ("_bound", "_cg", "_end", "_made", "_order", "_start")

    def __init__(
        self,
        cg: CompiledGraph,
        start: Sequence[float],
        end: Sequence[float],
        bound: list[tuple[int, ...]],
        order: Sequence[int],
    ) -> None:
        self._cg, self._start, self._end, self._bound, self._order = cg, start, end, bound, order
        self._made: dict[str, Any] = {}

    def get(self, name: str) -> Any:
        made = self._made
        name = _LEVELS_MAP.get(name, name)
        if name in made:
            return made[name]
        cg = self._cg
        value: Any
        if name == "start_us":
            value = _by_name(cg, self._start)
        elif name == "end_us":
            value = _by_name(cg, self._end)
        elif name == "resources":
            value = _bound_names(cg, self._bound)
        elif name == "order":
            value = _names_at(cg.names, self._order)
        else:
            raise AttributeError(name)
        made[name] = value
        return value

    def end_values(self) -> Sequence[float]:
        return self._end

    def size(self) -> int:
        return len(self._cg.names)

    def columns(self) -> TimeColumns:
        """The starts, ends and bound resources by position (see :class:`TimeColumns`; made
        once: a rank's V1 join reading, its check and its time each read them)."""
        got: TimeColumns | None = self._made.get("_columns")
        if got is None:
            got = self._made["_columns"] = TimeColumns(
                self._cg, _float_array(self._start), _float_array(self._end), self._bound
            )
        return got


def _float_array(values: Sequence[float]) -> np.ndarray:
    """A compiled run's column as its array; the Python loop's list packed into one (its
    entries are floats: the loop's sums of float durations)."""
    if isinstance(values, fastloop.Column):
        return values.array
    return np.array(values, np.float64)


def _by_name(cg: CompiledGraph, values: Iterable[_V]) -> dict[str, _V]:
    """``dict(zip(cg.names, values))``, made from a copy of the graph's name index.

    Why: ``dict(zip(...))`` inserts name by name into a table that grows (and is copied) again
    and again on the way to 100k entries, each time into freshly allocated memory. A copy
    of ``cg.index`` (the same names, in the same order: compile_graph builds it in event order)
    is one allocation of the final size and one copy of the table; ``update`` then replaces each
    value in place, finding its name by identity. The keys, their order and the values are
    those of ``dict(zip(...))``. (With :func:`_names_at`, callgrind on the pinned 20k graph:
    45.6M -> 37.9M instructions per ``_to_schedule`` call, the most of it the growing tables'
    clearing and re-indexing: memset, find_empty_slot, build_indices.) Any other index (not a
    dict's table, not exactly the names) takes ``dict(zip)``."""
    names = cg.names
    out = cg.index.copy() if isinstance(cg.index, (dict, MappingProxyType)) else None
    if type(out) is not dict or len(out) != len(names):
        return dict(zip(names, values))
    out.update(zip(names, values))
    if len(out) != len(names):
        # a name the index lacked was added (so the index held another name): every name has
        # its value here, but among stale entries and out of order
        return dict(zip(names, map(out.__getitem__, names)))
    return out


def _names_at(names: tuple[str, ...], at: Sequence[int]) -> tuple[str, ...]:
    """``tuple(names[i] for i in at)``: one C-level ``itemgetter`` call for two or more (it
    returns a bare item for one, and takes no empty list). About half the CPU time of
    ``tuple(map(list(names).__getitem__, at))``, which made a list of the names and called its
    ``__getitem__`` once per event (100k shuffled indices: 17 ms -> 10 ms, min of 10)."""
    if len(at) > 1:
        got: tuple[str, ...] = operator.itemgetter(*at)(names)
        return got
    return tuple([names[i] for i in at])


def _bound_names(cg: CompiledGraph, bound: list[tuple[int, ...]]) -> dict[str, tuple[str, ...]]:
    """``event -> bound resource names``, built eagerly: validation and every analysis read all
    of them, and the common one-resource tuples are shared."""
    res_names = cg.res_names
    # one names tuple per distinct binding, shared by every event bound alike
    names_of = {b: tuple([res_names[r] for r in b]) for b in set(bound)}
    # (two or more events: one C-level itemgetter call, about half the instructions of a map
    # of the dict's __getitem__, callgrind)
    got = operator.itemgetter(*bound)(names_of) if len(bound) > 1 else map(names_of.__getitem__, bound)
    return _by_name(cg, got)


class _LazyByEvent(Mapping[str, _V]):
    """``event name -> value`` built from the scheduler's arrays on first access per event (most
    callers read a few events of a large schedule; one that has read many is taken to read all,
    and the rest are built in one pass)."""

    __slots__ = ("_all", "_cg", "_memo")

    BULK_AFTER = 1024
    """assumed: a caller that has read this many events, and at least a quarter of them
    (``BULK_SHARE``), is taken to read all of them. Relative as well as absolute: the critical
    path of a 47k-event rank reads about 8.6k of its waits, and building all 47k when it had
    read 1024 cost more than the reads it was meant to save."""

    BULK_SHARE = 4
    """assumed: see ``BULK_AFTER``"""

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
        done = len(self._memo)
        if done >= self.BULK_AFTER and done >= len(self._cg.names) // self.BULK_SHARE:
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


def _listed(values: Sequence[Any]) -> Sequence[Any]:
    """A compiled run's column as its list (see ``fastloop.Column``), else ``values``."""
    return values.values() if isinstance(values, fastloop.Column) else values


class _LazyWaits(_LazyByEvent[Wait]):
    """``event -> Wait``."""

    __slots__ = ("_listed", "_pred", "_ready", "_res", "_sem", "_start", "_tb")

    def __init__(
        self,
        cg: CompiledGraph,
        pred: Sequence[int],
        res: Sequence[int],
        t_base: Sequence[float],
        sem: Sequence[int],
        ready: Sequence[float],
        start: Sequence[float],
    ) -> None:
        """Per event in graph order (the scheduler's columns, see ``SchedulerState``): the
        predecessor that set its ready time, the resource that set its t_base, t_base, the
        semaphore that moved its start (indices; -1: none), its ready time and its start."""
        super().__init__(cg)
        self._pred, self._res, self._tb, self._sem = pred, res, t_base, sem
        self._ready, self._start = ready, start
        self._listed = False

    def _build(self, i: int) -> Wait:
        if not self._listed:
            # a compiled run's columns read as their lists from the first wait on (each wait
            # reads six of them; a Column is read through a Python-level call per entry)
            self._pred, self._res, self._tb, self._sem, self._ready, self._start = map(
                _listed, (self._pred, self._res, self._tb, self._sem, self._ready, self._start)
            )
            self._listed = True
        cg = self._cg
        rp, rb, tb, sb = self._pred[i], self._res[i], self._tb[i], self._sem[i]
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

    def rows(self) -> list[tuple[Any, ...]]:
        """Every event's wait, in graph order, as the tuple of its fields: what ``tuple(self[n])``
        gives for each name, worked out in columns rather than one ``Wait`` at a time.

        Why: building each ``Wait`` is a Python call per event, and reading all of them through
        the ``Mapping`` protocol adds two more; packing a DeepSeek-V3-like rank's schedule to
        send it between processes took 408M instructions (callgrind), nearly all in those calls.
        The fields are :meth:`_build`'s, by the same operations, each a C-level ``map`` over a
        column: ``rw = t_base - ready`` and ``sw = start - t_base`` (the same float
        subtractions); ``rw if rw > 0 else 0.0`` is ``max(0.0, rw)`` (``max`` keeps its first
        argument unless the second is greater, so ``-0.0`` gives ``0.0`` as there); the
        predecessor's name by index, ``None`` for ``-1`` (the names with ``None`` appended, read
        at ``-1``); the resource (the semaphore) only when ``rw > 0`` (``sw > 0``): read at
        ``(index + 1) * (wait > 0)`` in the names with ``None`` put first."""
        cg = self._cg
        ready, start = self._ready, self._start
        rp, rb, tb, sb = self._pred, self._res, self._tb, self._sem
        rw = list(map(operator.sub, tb, ready))
        sw = list(map(operator.sub, start, tb))
        pred = map([*cg.names, None].__getitem__, rp)
        one, zero = repeat(1), repeat(0.0)  # (endless constant columns: any map may share them)
        res = map(
            [None, *cg.res_names].__getitem__,
            map(operator.mul, map(operator.add, rb, one), map(operator.gt, rw, zero)),
        )
        sem = map(
            [None, *cg.sem_names].__getitem__,
            map(operator.mul, map(operator.add, sb, one), map(operator.gt, sw, zero)),
        )
        return list(zip(ready, pred, res, map(max, zero, rw), sem, map(max, zero, sw)))


class WaitRecords(NamedTuple):
    """The greedy scheduler's own columns behind a schedule's ``waits`` (see
    :func:`wait_records`): per event in graph order, ``pred[i]``, ``res[i]``, ``t_base[i]``,
    ``sem[i]`` (the indices into ``names``, ``res_names``, ``sem_names``; ``-1``: none), its
    ready time and its start. An event's ``Wait`` is ``ready``; the predecessor's name;
    ``rw = t_base - ready`` and the resource when ``rw > 0`` (else ``0.0``, ``None``);
    ``sw = start - t_base`` and the semaphore when ``sw > 0`` (else ``0.0``, ``None``)."""

    names: tuple[str, ...]
    res_names: tuple[str, ...]
    sem_names: tuple[str, ...]
    pred: Sequence[int]
    res: Sequence[int]
    t_base: Sequence[float]
    sem: Sequence[int]
    ready: Sequence[float]
    start: Sequence[float]


def wait_records(waits: Mapping[str, Wait], names: Sequence[str]) -> WaitRecords | None:
    """The columns ``waits`` is built from, when it is the greedy scheduler's own map
    (:class:`Schedule`'s ``waits`` as :func:`schedule` returns it) over exactly ``names`` in
    that order; ``None`` for any other map. For a reader that works the fields out on arrays
    itself (a process boundary: :mod:`moeopt.megamoe.packed`)."""
    if type(waits) is _LazyWaits and waits._cg.names == tuple(names):
        cg = waits._cg
        return WaitRecords(
            cg.names,
            cg.res_names,
            cg.sem_names,
            waits._pred,
            waits._res,
            waits._tb,
            waits._sem,
            waits._ready,
            waits._start,
        )
    return None


def wait_rows(waits: Mapping[str, Wait], names: Sequence[str]) -> list[tuple[Any, ...]] | None:
    """``[tuple(waits[n]) for n in names]`` in columns when ``waits`` is the greedy scheduler's
    own map (:class:`Schedule`'s ``waits`` as :func:`schedule` returns it) over exactly
    ``names`` in that order; ``None`` for any other map (read it one by one)."""
    if type(waits) is _LazyWaits and waits._cg.names == tuple(names):
        return waits.rows()
    return None


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
        GraphError: a bad graph, or one the list scheduler cannot bind: an event whose
            placeholders' pools share a member, or contain one of its fixed resources
            (``CompiledGraph.double_bound``).
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
        bad = full.double_bound  # found once per graph, when it was compiled
        if bad:
            more = f"\n  ... and {len(bad) - 5} more" if len(bad) > 5 else ""
            raise GraphError("the list scheduler cannot bind this graph:\n  " + "\n  ".join(bad[:5]) + more)
        cg = drop_nonbinding_semaphores(graph) if normalize else full
        pol.prepare(cg)
        if restructure is None:
            run = _run_compiled(cg, pol)
            if run is not None:
                return _to_schedule(run, pol.name, record_levels=cg is full)
        state = SchedulerState(cg)
        try:
            if restructure is not None:
                restructure.prepare(cg)
            if pol.wants_view and not pol.candidates:
                ctl = _run_view(state, pol, restructure)
            else:
                ctl = _run_keyed(state, pol, restructure)
            moved = ctl.repinned_names() if ctl is not None else None
            # a semaphore whose uses normalisation dropped was never tracked: no levels then
            return _to_schedule(state, pol.name, record_levels=cg is full, repinned=moved)
        finally:
            state.close()


def _keys(pol: Policy, n: int) -> tuple[list[float], list[float], bool]:
    """``(before, after, plain)``: each event's fixed parts of its key ``(before, start, after,
    index)`` under the keyed policy ``pol`` (prepared), as floats; ``plain``: the base rank,
    ``(0, 0)`` for every event (earliest_start), so that the start alone orders."""
    if type(pol).rank is Policy.rank or pol.wants_view:
        # (the keys are then ``(start, index)``, which order as ``(0, start, 0, index)`` would,
        # and tokens ``(F, event, group, version)``: a key made and compared for every heap
        # entry with two items fewer; callgrind, one warm pinned 100k call: 3,943M -> 3,907M)
        zeros = [0.0] * n
        return zeros, zeros, True
    ranks = [pol.rank(i) for i in range(n)]
    return [float(b) for b, _a in ranks], [float(a) for _b, a in ranks], False


def _run_compiled(cg: CompiledGraph, pol: Policy) -> CompiledRun | None:
    """The compiled loop's run of ``cg`` (:mod:`moeopt.core.fastloop`) when it applies: a keyed
    policy (prepared), a graph it takes, and the process using the compiled loop
    (``fastloop.wanted``); else ``None`` (and ``None`` when no event can ever start or a release
    overflows a semaphore: the Python loop then reports it)."""
    # (a graph the loop declines on sight is not counted as work for it: see fastloop.wanted)
    if pol.wants_view or cg.n < fastloop.MIN_EVENTS or fastloop.declines(cg) or not fastloop.wanted(cg.n):
        return None
    before, after, _plain = _keys(pol, cg.n)
    return fastloop.run_compiled(cg, before, after)


def _run_keyed(
    state: SchedulerState, pol: Policy, hook: Restructure | None = None
) -> RestructureControl | None:
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
    same pool or the same bandwidth. Events that semaphores alone delay (a candidate resource is
    free) wait in a *semaphore gate* per acquire signature once two of them wait; there ``T`` is
    the least t_base of its waiting members as they were evaluated (t_base only grows while an
    event waits), so ``F(T)`` again bounds every member's start.

    *Releases.* A committed release is the one thing that makes a start *earlier*; by the
    property in :meth:`SemaphoreProfile.admit`, a release at time ``r`` can only help a waiter
    (an event or a gate) whose semaphore-delayed start is after ``r`` or that cannot start at
    all yet, so exactly those are woken: per semaphore, delayed waiters sit in a max-heap of their
    start and starved waiters are grouped by the units they need. A waiter is registered only
    with the semaphores that moved its start during admission: every earlier time was refused by
    one of them, so a release on any other semaphore cannot bring the start forward.

    *Candidates.* A view policy that declares ``candidates = k`` runs here too, with the key of
    ``earliest_start``: the first ``k`` verified minima are the ``k`` eligible events that can
    start earliest, in order; they are set aside (not committed), the policy chooses one
    through the view, and the others go back keyed by their ready time.

    *Restructuring.* With a hook, after every commit the hook may re-pin pending events; an
    eligible one gets a fresh lower-bound key (its old heap or gate entry is retired by its
    version), so it is re-evaluated on its new resource: ``O(log n)`` per re-pin.
    """
    cg = state.cg
    n = cg.n
    before, after, plain = _keys(pol, n)
    evaluate = state.evaluate
    admit_all = state.admit_all
    commit = state.commit
    done = state.done
    acq3 = state.acq3
    # per signature (an event's ``sig``): its acquires, their one- and two-acquire forms, its
    # semaphore changes and its gains (see SchedulerState)
    sig_acq3 = state.sig_acq3
    sig_acq1 = state.sig_acq1
    sig_acq2 = state.sig_acq2
    sig_ops = state.sig_ops
    sig_gains = state.sig_gains
    dur = cg.dur
    profiles = state.profiles
    ready = state.ready
    free = state.free
    # what the inlined evaluate and commit below read (see there)
    placeholders = cg.placeholders
    fixed_of = state.fixed
    single = state.single
    group_of = cg.group
    group_site = state.group_site
    res_site = cg.res_site
    start_of = state.start
    end_of = state.end
    order_append = state.order.append
    bound = state.bound
    rpred = state.ready_pred
    wait_res = state.wait_res
    t_base = state.t_base
    wait_sem = state.wait_sem
    sem_cap = cg.sem_cap
    succs = cg.succs
    indeg = state.indeg
    # Events with one placeholder and no acquires (the combines and activations of the MegaMoE
    # synthetic graphs: about half of all evaluations) are evaluated inline below, as evaluate
    # would, once their members are known: the pool's (the one entry of its placeholders'
    # member lists, the state's ``ph_lists``) when not colocated, else those at the group's site
    # once it is fixed. Every other event with placeholders calls evaluate
    ph_lists = state.ph_lists
    members_at = state.members_at
    # keys: (before, start, after, index), or (start, index) when ``plain``
    heap: list[tuple[Any, ...]] = []
    push = heapq.heappush
    pop = heapq.heappop
    cur_key: list[tuple[Any, ...] | None] = [None] * n
    # waiter ids: 0..n-1 are events, n + g is gate g; versions retire stale registrations
    version = [0] * n
    in_gate = [-1] * n
    gate_index: dict[Any, int] = {}
    gate_members: list[tuple[int, ...]] = []
    gate_acq: list[tuple[tuple[int, int, int], ...]] = []
    gate_dur: list[float] = []
    gate_heap: list[list[tuple[float, float, int, int]]] = []
    gate_version: list[int] = []
    # A gate of semaphore-delayed events holds every duration (``gate_any_dur``): its key is the
    # admission of its shortest member's duration, a lower bound of every member's start
    # (admission is monotone in the start and in the duration). A member whose own duration
    # then gives a later start than that bound moves for good to a gate of its duration
    # (``by_dur``); keeping one gate per duration for all made every commit on a pool re-rank
    # a gate per distinct duration (quadratic on late-bound tiles of many durations).
    gate_any_dur: list[bool] = []
    by_dur = [False] * n
    # Semaphore gates: events that semaphores alone delay (a candidate resource is free at their
    # t_base) wait in one gate per acquire signature instead of one heap entry each. Their t_base
    # values differ (their ready times), so such a gate keeps its waiting members' t_base values
    # as they were evaluated (``gate_tbs``) and their durations (``gate_durs``), in min-heaps
    # whose entries die with the member's version: a member's t_base only grows while it waits
    # (ready times are fixed, free times only move later), so the admission from the least
    # t_base of the shortest duration bounds every member's start. Without them, every commit
    # on a busy semaphore made the key of each of its K waiters stale, and each was evaluated
    # again: K evaluations per commit (about 300 per late-bound load at 3k events under
    # work_conserving_critical_path). A member whose own t_base (not the gate's state) puts it
    # after the gate's key leaves for good (``solo``) and waits alone, as before.
    gate_sem: list[bool] = []
    gate_live: list[int] = []  # members waiting in each gate (a popped representative has left)
    gate_tbs: list[list[tuple[float, int, int]]] = []
    gate_durs: list[list[tuple[float, int, int]]] = []
    # A plain gate's last admission in push_rep: (the change counts of its semaphores summed,
    # t, duration, the admitted start, the gate's version after it). Admission depends on the
    # profiles alone, and change counts only grow, so an equal sum means no profile of the gate
    # changed: asked again from the same t and duration it gives the same start, and while the
    # gate's version is the one it left, the registrations made then are still live (a release
    # that could consume them changes a profile). Between two commits a gate is often re-keyed
    # several times (each of its popped representatives that goes back, each release), with
    # nothing changed on its semaphores: the second admission is then not made again.
    gate_memo: list[tuple[int, float, float, float, int] | None] = []
    solo = [False] * n
    # A semaphore-delayed event with no other waiter of its signature waits on its own, as
    # without gates (tiles on a rolling cursor: one waiter per core's slot semaphore, where a
    # gate would only add work). ``lone[k]`` is the last event of signature k sent to wait on its
    # own and ``lone_ver[k]`` its version then: while it is still waiting so (same version, not
    # done), a second waiter of the signature goes to the gate. (A heuristic only: whichever way
    # an event waits, its key stays a lower bound of its start.)
    sig = state.sig
    lone = [-1] * state.n_sigs
    lone_ver = [0] * state.n_sigs
    sem_gate = [-1] * state.n_sigs  # the gate of each signature (-1: none yet)
    sem_by_dur = [False] * n  # as ``by_dur``, for semaphore gates
    # Class gates: the other events that semaphores alone delay (they would wait on their own:
    # no other waiter of their acquire signature, or their own t_base set them apart) wait in
    # one gate per *class*: the acquire triple (semaphore, take, give back) of the semaphore
    # that moved their start last, their duration and their ``before`` rank; their other
    # acquires (a slot per core, ...) may differ. Tiles on a rolling cursor: each core's load
    # has a signature of its own (its slot), but the loads of one expert share their bandwidth
    # units and duration, so they share a class. Without it, every commit on the bandwidth
    # semaphore made the key of every load waiting for the same free units stale, and each was
    # evaluated again (13 evaluations per load on the pinned 100k graph).
    #
    # Each member ``m`` keeps its *floor* ``f_m``, the start its last evaluation gave: a lower
    # bound of its start while it waits (commits only remove units and move free times later;
    # a release that could bring its start forward wakes it, since it is registered with the
    # semaphores that moved it, as an event waiting alone is). Every member must be admitted
    # by the class's semaphore ``S`` with the class's take, give back and duration, so with
    # ``H(t)`` the admission of that triple on ``S`` from ``t`` (monotone in ``t``) and ``beta``
    # a lower bound of every member's start, every member starts at or after ``lb = H(beta)``,
    # which becomes the next ``beta``. The members split into *ripe* (floor <= the ``lb`` they
    # were compared with) in a heap by rank ``(before, after, event)`` and *pending* (floor
    # above it) in a heap by floor. The class's heap key is ``(before, lb, after_r, r)`` with
    # ``r`` the best-ranked ripe member: a lower bound of every member's key (ripe ones: ``lb``
    # and the rank; pending ones start after ``lb``; ``before`` is the class's). When the key
    # pops, the class is re-keyed first (one admission on ``S``: after a commit on ``S`` it
    # usually moves, and no member is evaluated); only an unmoved key evaluates ``r``, whose
    # start is then ``lb`` (it is the true minimum) or later (it goes back with that floor,
    # pending: progress). A release on ``S`` that lands before ``lb`` wakes the class (it is
    # registered on ``S`` at ``lb``): ``beta`` restarts from the least floor.
    gate_cls: list[bool] = []
    cls_index: dict[Any, int] = {}
    cls_pend: list[list[tuple[float, float, int, int]]] = []  # (floor, after, event, version)
    cls_beta: list[float] = []
    cls_rep: list[int] = []  # the member whose cur_key is the class's key (-1: none)
    # the class semaphore's change count when ``beta`` was last found as an admission (-1: it
    # was lowered since): while it is unchanged, H(beta) = beta (an admitted time is its own
    # admission) and push_cls needs no admission
    cls_stamp: list[int] = []
    # the class semaphore's profile per gate (None for the other gates): the main loop compares
    # its change count with ``cls_stamp`` before re-keying a popped class key
    cls_prof: list[SemaphoreProfile | None] = []
    # As with signatures (``lone``), the first waiter of a class waits on its own (its own key,
    # its own registrations: no class work for the many classes that never gather two); a
    # second waiter arriving while it still waits so brings it into the class, where its key
    # (its own evaluation) is the class's key of one member
    cls_lone: list[int] = []
    cls_lone_ver: list[int] = []
    # Classes are per ``before`` rank: under a policy that ranks most events apart before the
    # start (critical_path_first: one rank per event) every class would hold one event, so
    # they are used only when few distinct ``before`` values exist. assumed: 64 (stage-like
    # ranks have a handful of values; critical-path ranks about one per event)
    use_cls = before is after or len(set(before)) <= 64
    ev_cls = [-1] * n  # the class each event last entered (a cache of the cls_index lookup)
    floor_of = [0.0] * n
    n_sem = len(cg.sem_names)
    delayed: list[list[tuple[float, int, int]]] = [[] for _ in range(n_sem)]
    # starved gates: per semaphore, the units they keep for ever -> (gate waiter id, version)
    starved: list[dict[int, list[tuple[int, int]]]] = [{} for _ in range(n_sem)]
    # starved events: one group per (semaphore, units kept for ever), its members in a heap by
    # rank (before, after, event, version). A release that leaves enough units free for ever
    # wakes a group lazily: a token in ``tok_heap`` wakes the group's best-ranked member when
    # nothing in the main heap ranks before it, and then the next one, while the units are
    # still free. The token's key is (before, F, after, event) of that member, where F is the
    # time after the profile's last point with fewer than the units kept free (no member can
    # start before it: it keeps those units from its start on); F only moves later until a
    # release, which re-keys the group's token. With the members' ready times in the key
    # instead, every release woke every starved member (they were ready long before F) though
    # the first one committed takes the units again (quadratic on late-bound slots).
    sg_index: dict[tuple[int, int], int] = {}
    sg_sem: list[int] = []
    sg_need: list[int] = []
    sg_heap: list[list[tuple[float, float, int, int]]] = []
    sg_tok: list[int] = []  # version of the group's live token; -1: no token (dormant)
    # Members starved since the group's semaphore last released: they were evaluated against
    # the profile as it is, and only a release on it can let them start, so they join the heap
    # (and may be woken) at its next release. Woken at once, a member ranked before every other
    # pending event was woken, refused and woken again for ever (a livelock that grew the
    # token heap without bound: seen as a 5 GB hang in CI, tests/core/test_starved_livelock.py).
    sg_new: list[list[tuple[float, float, int, int]]] = []
    sg_of_sem: list[list[int]] = [[] for _ in range(n_sem)]
    # tokens: (before, F, after, event, group, version), or (F, event, group, version) when plain
    tok_heap: list[tuple[Any, ...]] = []

    def free_from(gid: int) -> float:
        """The earliest start the group's units kept for ever allow (``INF``: never, with
        what is committed now)."""
        need = sg_need[gid]
        if need <= 0:
            return -INF
        return profiles[sg_sem[gid]].free_from(need)

    def retoken(gid: int) -> None:
        gh = sg_heap[gid]
        while gh:
            b, a, j, ver = gh[0]
            if ver != version[j] or done[j]:
                pop(gh)
                continue
            t_ff = free_from(gid)
            if t_ff == INF:
                break
            tv = sg_tok[gid] = abs(sg_tok[gid]) + 1
            push(tok_heap, (t_ff, j, gid, tv) if plain else (b, t_ff, a, j, gid, tv))
            return
        sg_tok[gid] = -abs(sg_tok[gid]) - 1  # dormant

    # semaphores that some event gives back units of beyond what it took itself: only their
    # releases call on_release (see gains), so a delayed waiter registers with those alone (a
    # bandwidth semaphore that every event holds and gives back is never one: on the pinned
    # graphs its ~280k registrations were never read)
    gainful = state.gainful

    def register(owner: int, ver: int, acq: tuple[tuple[int, int, int], ...], start: float) -> None:
        if start == INF:
            # a waiter keeps ``take - back`` units for ever, so it cannot start while fewer are
            # free for ever (a necessary condition only: woken waiters are re-evaluated)
            for sem, take, back in acq:
                need = take - back if take > back else 0
                if owner >= n:
                    starved[sem].setdefault(need, []).append((owner, ver))
                    continue
                gid = sg_index.get((sem, need))
                if gid is None:
                    gid = sg_index[(sem, need)] = len(sg_sem)
                    sg_sem.append(sem)
                    sg_need.append(need)
                    sg_heap.append([])
                    sg_tok.append(-1)
                    sg_new.append([])
                    sg_of_sem[sem].append(gid)
                sg_new[gid].append((before[owner], after[owner], owner, ver))
        else:
            for sem, _take, _b in acq:
                if gainful[sem]:
                    push(delayed[sem], (-start, owner, ver))

    def wake_token(tok: tuple[Any, ...]) -> None:
        gid, tv = tok[-2], tok[-1]
        if tv != sg_tok[gid]:
            return  # superseded
        gh = sg_heap[gid]
        t_ff = free_from(gid)
        if t_ff == INF or not gh:
            sg_tok[gid] = -tv  # dormant until a release frees enough units for ever
            return
        _b, _a, j, ver = pop(gh)
        if ver == version[j] and not done[j] and in_gate[j] < 0:
            # keyed by its ready time, not by F: a release before it is evaluated may move F
            # earlier, and the main heap's keys must stay lower bounds
            version[j] += 1
            lower_bound(j)
        retoken(gid)

    def live(owner: int, ver: int) -> bool:
        if owner < n:
            return ver == version[owner] and not done[owner]
        return ver == gate_version[owner - n]

    def least(h: list[tuple[float, int, int]]) -> float:
        """The least value of a semaphore gate's ``(value, event, version)`` heap over its
        members still waiting (the caller knows one is)."""
        while True:
            v, j, ver = h[0]
            if done[j] or version[j] != ver:
                pop(h)
                continue
            return v

    def push_cls(g: int, reset: bool = False) -> None:
        """Key class gate ``g`` afresh (see gate_cls above); ``reset``: a release on its
        semaphore may have brought starts forward, so ``beta`` restarts from the least floor."""
        if not gate_live[g]:
            cls_rep[g] = -1  # no member left (their entries are retired)
            return
        ripe = gate_heap[g]
        pend = cls_pend[g]
        sem, take, back = gate_acq[g][0]
        p = profiles[sem]
        d = gate_dur[g]
        stamp = -1
        if reset:
            fl = [floor_of[j] for _b, _a, j, ver in ripe if version[j] == ver and not done[j]]
            fl += [f for f, _a, j, ver in pend if version[j] == ver and not done[j]]
            beta = min(fl) if fl else INF
        else:
            beta = cls_beta[g]
            if cls_stamp[g] == p.changes:
                stamp = -2  # beta is H(beta): no admission on the first pass below
        old = cls_rep[g]
        while True:
            # (stamp -2: beta is H(beta) already; p.low >= take: admit's own first test)
            lb = beta if stamp == -2 or p.low >= take else p.admit(beta, take, back, d)
            stamp = p.changes
            if lb == INF:
                # S never admits the class with what is committed: it waits for a release
                cls_beta[g] = beta
                cls_stamp[g] = -1
                cls_rep[g] = -1
                if old >= 0 and in_gate[old] == g:
                    cur_key[old] = None
                gate_version[g] += 1
                register(n + g, gate_version[g], gate_acq[g], INF)
                return
            while pend and pend[0][0] <= lb:
                _f, a, j, ver = pop(pend)
                if version[j] == ver and not done[j]:
                    push(ripe, (before[j], a, j, ver))
            while ripe:
                b, a, j, ver = ripe[0]
                if version[j] != ver or done[j]:
                    pop(ripe)
                    continue
                break
            if ripe:
                break  # (b, a, j) is its live best-ranked member
            while pend:
                _f, a, j, ver = pend[0]
                if version[j] != ver or done[j]:
                    pop(pend)
                    continue
                break
            if not pend:
                cls_rep[g] = -1  # no member left
                return
            beta = pend[0][0]  # every member is pending: the least floor bounds them all
        cls_beta[g] = lb
        cls_stamp[g] = stamp
        if old != j:
            if old >= 0 and in_gate[old] == g:
                cur_key[old] = None  # its entry retires: the class's key is j's
            cls_rep[g] = j
        key = (lb, j) if plain else (b, lb, a, j)
        if cur_key[j] != key:
            cur_key[j] = key
            push(heap, key)
            if gainful[sem]:
                gate_version[g] += 1
                push(delayed[sem], (-lb, n + g, gate_version[g]))

    def enter_cls(
        j: int, vj: int, s: float, sb: int, movers: tuple[tuple[int, int, int], ...]
    ) -> None:
        """Event ``j`` (version ``vj``), whose evaluation gave start ``s`` moved last by
        semaphore ``sb``, waits in its class gate (see gate_cls above)."""
        b = before[j]
        g = ev_cls[j]
        if g < 0 or gate_acq[g][0][0] != sb:
            # not the class it entered last (its duration and rank are its own: only the
            # semaphore that moved it last can differ)
            trip = movers[0]
            if trip[0] != sb:
                for trip in movers:
                    if trip[0] == sb:
                        break
            d = dur[j]
            ck = (trip, d, b)
            g = cls_index.get(ck, -1)
            if g >= 0:
                ev_cls[j] = g
        if g < 0:
            g = cls_index[ck] = ev_cls[j] = len(gate_members)
            gate_members.append(())
            gate_acq.append((trip,))
            gate_dur.append(d)
            gate_heap.append([])
            gate_version.append(0)
            gate_any_dur.append(False)
            gate_sem.append(False)
            gate_live.append(0)
            gate_tbs.append([])
            gate_durs.append([])
            gate_memo.append(None)
            gate_cls.append(True)
            cls_pend.append([])
            cls_beta.append(s)
            cls_rep.append(-1)
            cls_lone.append(-1)
            cls_lone_ver.append(0)
            cls_stamp.append(-1)
            cls_prof.append(profiles[trip[0]])
        floor_of[j] = s
        a = after[j]
        if not gate_live[g]:
            w = cls_lone[g]
            if not (
                w >= 0
                and w != j
                and version[w] == cls_lone_ver[g]
                and not done[w]
                and in_gate[w] < 0
                and cur_key[w] is not None
            ):
                # the only waiter of its class: it waits on its own
                cls_lone[g] = j
                cls_lone_ver[g] = vj
                key = (s, j) if plain else (b, s, a, j)
                cur_key[j] = key
                push(heap, key)
                return
            # w waits on its own: it becomes the class's one member (every older entry is
            # retired), its key (its own evaluation) the class's key, and its own registrations
            # cover the class (that key is its floor)
            cls_lone[g] = -1
            in_gate[w] = g
            gate_live[g] = 1
            ripe = gate_heap[g]
            ripe.clear()
            cls_pend[g].clear()
            ripe.append((b, after[w], w, version[w]))
            cls_beta[g] = floor_of[w]
            cls_stamp[g] = -1
            cls_rep[g] = w
        in_gate[j] = g
        gate_live[g] += 1
        cur_key[j] = None
        if s < cls_beta[g]:
            cls_beta[g] = s
            cls_stamp[g] = -1
        push(cls_pend[g], (s, a, j, vj))
        r = cls_rep[g]
        if s > cls_beta[g] and r >= 0 and r != j and in_gate[r] == g and cur_key[r] is not None:
            # j is pending (its floor is above the class's bound) and the class's key, its
            # representative's, is live: that key still bounds every member's, j's included
            # (which is all a key must do; re-keying the class after a change of its semaphore
            # waits until the key pops, as it would after any other commit)
            return
        push_cls(g)

    def push_rep(g: int) -> None:
        if gate_cls[g]:
            push_cls(g)
            return
        gh = gate_heap[g]
        while gh:
            # a gate's entries: (before, after, event, version)
            b, a, j, ver = gh[0]
            if done[j] or version[j] != ver:
                pop(gh)
                continue
            acq = gate_acq[g]
            if gate_sem[g]:
                t = least(gate_tbs[g])
                d = least(gate_durs[g])
            else:
                t = min(map(free.__getitem__, gate_members[g]))
                d = gate_dur[g]
            if acq:
                stamp = 0
                for sem, _a, _b in acq:
                    stamp += profiles[sem].changes
                memo = gate_memo[g]
                if (
                    memo is not None
                    and memo[0] == stamp
                    and memo[1] == t
                    and memo[2] == d
                    and memo[4] == gate_version[g]
                ):
                    t2 = memo[3]
                else:
                    gate_version[g] += 1
                    t2, _sb, movers = admit_all(acq, t, d)
                    if t2 != t:
                        register(n + g, gate_version[g], movers, t2)
                    gate_memo[g] = (stamp, t, d, t2, gate_version[g])
                if t2 == INF:
                    if cur_key[j] is not None:
                        cur_key[j] = None
                    return
                t = t2
            key = (t, j) if plain else (b, t, a, j)
            if cur_key[j] != key:
                cur_key[j] = key
                push(heap, key)
            return

    def route(
        j: int,
        s: float,
        tb: float,
        sb: int,
        blk: tuple[int, ...] | None,
        movers: tuple[tuple[int, int, int], ...],
    ) -> None:
        # j's evaluation (start s, t_base tb, ...; see Eval) is later than its heap key said
        version[j] += 1
        vj = version[j]
        if blk is not None and tb > ready[j] and s < INF:
            # held back by a busy resource (and maybe then by semaphores): park in a gate
            if sb < 0:
                gkey: Any = id(blk)
                acq: tuple[tuple[int, int, int], ...] = ()
            else:
                acq = acq3[j]
                gkey = (id(blk), acq, dur[j]) if by_dur[j] else (id(blk), acq)
            enter_gate(j, vj, gkey, blk, acq, sb >= 0 and not by_dur[j], False, tb, s, movers)
            return
        if s == INF:
            cur_key[j] = None
            register(j, vj, movers, INF)
            return
        if sb >= 0 and not solo[j]:
            # delayed by semaphores alone: a semaphore gate (see gate_sem above) once another
            # event of its signature waits
            acq = acq3[j]
            k = sig[j]
            if sem_by_dur[j]:
                # a gate of its own duration: rare (its duration set it apart in the gate)
                enter_gate(j, vj, (k, dur[j]), (), acq, False, True, tb, s, movers)
                return
            g = sem_gate[k]
            w = lone[k]
            if (g >= 0 and gate_live[g]) or (
                w >= 0
                and w != j
                and version[w] == lone_ver[k]
                and not done[w]
                and (in_gate[w] < 0 or gate_cls[in_gate[w]])
            ):
                enter_gate(j, vj, ("sem", k), (), acq, True, True, tb, s, movers)
                sem_gate[k] = in_gate[j]
                return
            lone[k] = j
            lone_ver[k] = vj
        if sb >= 0:
            register(j, vj, movers, s)
            if use_cls:
                enter_cls(j, vj, s, sb, movers)
                return
        key = (s, j) if plain else (before[j], s, after[j], j)
        cur_key[j] = key
        push(heap, key)

    def enter_gate(
        j: int,
        vj: int,
        gkey: Any,
        blk: tuple[int, ...],
        acq: tuple[tuple[int, int, int], ...],
        any_dur: bool,
        sem_only: bool,
        tb: float,
        s: float,
        movers: tuple[tuple[int, int, int], ...],
    ) -> None:
        g = gate_index.get(gkey)
        if g is None:
            g = len(gate_members)
            gate_index[gkey] = g
            gate_members.append(blk)
            gate_acq.append(acq)
            gate_dur.append(dur[j])
            gate_heap.append([])
            gate_version.append(0)
            gate_any_dur.append(any_dur)
            gate_sem.append(sem_only)
            gate_live.append(0)
            gate_tbs.append([])
            gate_durs.append([])
            gate_memo.append(None)
            gate_cls.append(False)
            cls_pend.append([])
            cls_beta.append(INF)
            cls_rep.append(-1)
            cls_lone.append(-1)
            cls_lone_ver.append(0)
            cls_stamp.append(-1)
            cls_prof.append(None)
        elif dur[j] < gate_dur[g]:
            # the shortest member's admission bounds every member's (a semaphore gate reads
            # the shortest of its members still waiting from gate_durs instead)
            gate_dur[g] = dur[j]
        if sem_only:
            push(gate_tbs[g], (tb, j, vj))
            push(gate_durs[g], (dur[j], j, vj))
        push(gate_heap[g], (before[j], after[j], j, vj))
        in_gate[j] = g
        gate_live[g] += 1
        cur_key[j] = None
        if sem_only and gate_live[g] == 1:
            # alone in its gate (the common case of tiles on a rolling cursor): its own fresh
            # evaluation is the gate's key, and the gate waits on the semaphores that moved it
            gate_version[g] += 1
            register(n + g, gate_version[g], movers, s)
            key = (s, j) if plain else (before[j], s, after[j], j)
            cur_key[j] = key
            push(heap, key)
            return
        push_rep(g)

    def lower_bound(j: int) -> None:
        # start >= ready[j] always holds, so this key may be pushed without evaluating j
        key = (ready[j], j) if plain else (before[j], ready[j], after[j], j)
        cur_key[j] = key
        push(heap, key)

    def on_release(sem: int, r: float) -> None:
        wake: list[int] = []
        dh = delayed[sem]
        while dh:
            # delayed waiters: (-start, owner, version), the latest start first
            neg_start, owner, ver = dh[0]
            if -neg_start <= r:
                break
            pop(dh)
            if live(owner, ver):
                wake.append(owner)
        groups = starved[sem]
        gids = sg_of_sem[sem]
        if groups or gids:
            final = profiles[sem].final_level()
            for take in [t for t in groups if t <= final]:
                for owner, ver in groups.pop(take):
                    if live(owner, ver):
                        wake.append(owner)
            for gid in gids:
                fresh = sg_new[gid]
                if fresh:
                    gh = sg_heap[gid]
                    for entry in fresh:
                        push(gh, entry)
                    fresh.clear()
                # awake or not: the release may have moved the group's free-from time earlier
                if sg_need[gid] <= final and sg_heap[gid]:
                    retoken(gid)
        for owner in wake:
            if owner >= n:
                g = owner - n
                if gate_cls[g]:
                    push_cls(g, True)
                else:
                    push_rep(g)
            elif not done[owner]:
                g = in_gate[owner]
                if g < 0:
                    version[owner] += 1
                    lower_bound(owner)
                elif gate_cls[g]:
                    # a class member's floor may no longer bound its start: it leaves
                    in_gate[owner] = -1
                    gate_live[g] -= 1
                    was_rep = cur_key[owner] is not None
                    version[owner] += 1
                    lower_bound(owner)
                    if was_rep:
                        push_cls(g)

    for i in compress(range(n), map(operator.not_, indeg)):  # the events without predecessors
        lower_bound(i)
    ctl: RestructureControl | None = None
    if hook is not None:

        def refresh(j: int) -> None:
            # a re-pinned event: retire its heap / gate entry and, if eligible, key it afresh
            version[j] += 1
            g = in_gate[j]
            if g >= 0:
                in_gate[j] = -1
                gate_live[g] -= 1
                push_rep(g)
            if state.indeg[j] == 0 and not done[j]:
                lower_bound(j)

        ctl = RestructureControl(cg, state.fixed, free, done, state.end, refresh)
    # Candidate mode (a view policy with ``candidates = k``): the verified minima of the heap
    # are the eligible events in order of (start, index) (before = after = 0 here), so the
    # first k of them are set aside instead of committed, the policy chooses among them, and
    # the others go back with their ready time as key (a lower bound whatever is committed).
    width = (pol.candidates or 0) if pol.wants_view else 0
    cands: list[tuple[int, float, float, tuple[int, ...], int, int]] = []
    new: Sequence[int] = ()
    eligible: set[int] = set()
    view: SchedulerView | None = None
    if width:
        eligible = {i for i in range(n) if state.indeg[i] == 0}
        view = SchedulerView(state, eligible)

    def decide() -> tuple[int, float, float, tuple[int, ...], int, int]:
        assert view is not None
        found = [c[0] for c in cands]
        view._set_earliest(found, exhausted=len(found) < width)
        name = pol.choose(view)
        j = cg.index.get(name, -1) if isinstance(name, str) else -1
        pick = None
        for c in cands:
            if c[0] == j:
                pick = c
            else:
                version[c[0]] += 1
                lower_bound(c[0])
        cands.clear()
        if pick is None:
            if j not in eligible:
                raise SchedulingError(
                    f"policy {pol.name!r} chose {name!r}, which is not an eligible event at this step"
                )
            if len(found) < width:
                raise SchedulingError(
                    f"policy {pol.name!r} chose {name!r}, which cannot start (its semaphores never admit it)"
                )
            raise SchedulingError(
                f"policy {pol.name!r} chose {name!r}, which is not among the {width} earliest eligible "
                f"events (it declares candidates = {width}: view.earliest({width}))"
            )
        eligible.discard(j)
        return pick

    while True:
        if tok_heap and (not heap or tok_heap[0] < heap[0]):
            wake_token(pop(tok_heap))
            continue
        if heap:
            entry = pop(heap)
            if plain:
                lower, i = entry
            else:
                _before, lower, _after, i = entry
            live_key = cur_key[i]
            # (identity first: a live entry is the very key object, and comparing a 4-tuple with
            # itself item by item was the costliest line of the loop; equal keys are still live)
            if done[i] or (live_key is not entry and live_key != entry):
                continue
            g = in_gate[i]
            if g >= 0:
                if gate_cls[g] and cls_stamp[g] != cls_prof[g].changes:
                    # a class gate's key: re-key the class first (after a commit on its
                    # semaphore the bound usually moves, and then no member is evaluated).
                    # With the semaphore unchanged since the key was found, push_cls would
                    # find it again (beta is its own admission, every pending floor is above
                    # it, and the live key is its representative's): no call then
                    push_cls(g)
                    live_key = cur_key[i]
                    if live_key is not entry and live_key != entry:
                        continue
                in_gate[i] = -1
                gate_live[g] -= 1
            cur_key[i] = None
            if placeholders[i]:
                lists = ph_lists[i]
                lst = None
                if len(lists) == 1 and not sig_acq3[sig[i]]:
                    grp = group_of[i]
                    if grp < 0:
                        lst = lists[0]
                    else:
                        site = group_site[grp]
                        if site >= 0:
                            lst = members_at[(placeholders[i][0], site)]
                if lst is None:
                    s, tb, chosen, rb, sb, blk, movers = evaluate(i)
                else:
                    # evaluate(i) inlined for one placeholder whose members are known and no
                    # acquires: the same steps (the earliest member to free up if every one is
                    # busy past t_base, else the first free by then; nothing moves it further)
                    s = ready[i]
                    rb = -1
                    blk = None
                    fixed = fixed_of[i]
                    if fixed:  # (most have none: no loop, no iterator object made)
                        for r in fixed:
                            f = free[r]
                            if f > s:
                                s = f
                                rb = r
                                blk = single[r]
                    if len(lst) == 1:
                        best = lst[0]
                        bf = free[best]
                        if bf > s:
                            s = bf
                            rb = best
                            blk = lst
                        chosen = lst
                    else:
                        # the first member free by s, else (every member busy past s) the
                        # earliest to free up, first on ties: evaluate's choice, found by a walk
                        # that stops at the first free member (about 4 of the 24 of a pool on
                        # the pinned graphs), the free times listed only when none is free
                        for best in lst:
                            if free[best] <= s:
                                break
                        else:
                            vals = list(map(free.__getitem__, lst))
                            bf = min(vals)
                            best = lst[vals.index(bf)]
                            s = bf
                            rb = best
                            blk = lst
                        chosen = single[best]
                    tb = s
                    sb = -1
                    movers = ()
            else:
                # evaluate(i) inlined for an event without placeholders (most events of the
                # MegaMoE graphs): SchedulerState.evaluate takes exactly these steps then (its
                # placeholder branch is skipped: nothing chosen, and semaphores moving the start
                # leave no binding to redo)
                s = ready[i]
                rb = -1
                blk = None
                fixed = fixed_of[i]
                if fixed:  # (an event that holds semaphores alone has none)
                    if len(fixed) == 1:  # (the common case: the loop's iterator object saved)
                        r = fixed[0]
                        f = free[r]
                        if f > s:
                            s = f
                            rb = r
                            blk = single[r]
                    else:
                        for r in fixed:
                            f = free[r]
                            if f > s:
                                s = f
                                rb = r
                                blk = single[r]
                tb = s
                sb = -1
                chosen = ()
                movers = ()
                k = sig[i]
                acq = sig_acq3[k]
                if acq:
                    one = sig_acq1[k]
                    if one is not None:
                        # admit_all(acq, s, dur[i]) for one acquire, inlined: the same steps
                        # (admit's own first test, then one admission; the semaphore moved the
                        # start or none did)
                        sem, take, back, p = one
                        if p.low < take:
                            t2 = p.admit(s, take, back, dur[i])
                            if t2 > s:
                                s = t2
                                sb = sem
                                movers = acq
                    else:
                        two = sig_acq2[k]
                        if two is None:
                            s, sb, movers = admit_all(acq, s, dur[i])
                        else:
                            # admit_all(acq, s, dur[i]) for two acquires, inlined: its cycle x,
                            # y, x, ... until both admit the same start in turn (or none can),
                            # the movers in the order they first moved it (its shortcut when
                            # both admit at once gives what the cycle gives then: s, -1, ())
                            x, y, px, py = two
                            sx, ax, bx = x
                            sy, ay, by = y
                            d = dur[i]
                            ok = 0
                            while s < INF:
                                t2 = s if px.low >= ax else px.admit(s, ax, bx, d)
                                if t2 > s:
                                    s = t2
                                    sb = sx
                                    ok = 1
                                    if x not in movers:
                                        movers += (x,)
                                    if s == INF:
                                        break
                                else:
                                    ok += 1
                                    if ok == 2:
                                        break
                                t2 = s if py.low >= ay else py.admit(s, ay, by, d)
                                if t2 > s:
                                    s = t2
                                    sb = sy
                                    ok = 1
                                    if y not in movers:
                                        movers += (y,)
                                else:
                                    ok += 1
                                    if ok == 2:
                                        break
            if s > lower:
                # s is never below the lower bound; above it, i waits again
                if g >= 0 and gate_sem[g]:
                    # a semaphore gate's member later than the gate's key: the gate's state
                    # moved (it goes back in), or its own t_base (it waits alone from now on),
                    # or its own duration (a gate of its duration); nothing to tell apart when
                    # it was alone (the popped member's own entries are still live: they count
                    # in the floors)
                    if sb >= 0 and gate_live[g]:
                        acq_g, t0 = gate_acq[g], least(gate_tbs[g])
                        if admit_all(acq_g, t0, least(gate_durs[g]))[0] < s:
                            if admit_all(acq_g, t0, dur[i])[0] < s:
                                solo[i] = True
                            elif gate_any_dur[g]:
                                sem_by_dur[i] = True
                elif g >= 0 and sb >= 0 and gate_any_dur[g] and not by_dur[i]:
                    t_gate = min(map(free.__getitem__, gate_members[g]))
                    if admit_all(gate_acq[g], t_gate, gate_dur[g])[0] < s:
                        by_dur[i] = True  # its duration matters: a gate of its own duration
                route(i, s, tb, sb, blk, movers)
                if g >= 0 and in_gate[i] != g:
                    push_rep(g)
                continue
            # equal: this is the true minimum
            if width:
                cands.append((i, s, tb, chosen, rb, sb))
                state.step_evals[i] = (s, tb, chosen, rb, sb, blk, movers)
                version[i] += 1  # its gate entries retire: the gate's next member surfaces
                if g >= 0:
                    push_rep(g)
                if len(cands) < width:
                    continue
        elif not cands:
            break
        if width:
            i, s, tb, chosen, rb, sb = decide()
            g = -1
            new = commit(i, s, tb, chosen, rb, sb)
            eligible.update(new)
            state.step_evals.clear()  # the view's evaluations of this step are stale now
        else:
            # commit(i, ...) inlined: SchedulerState.commit takes exactly these steps, in this
            # order (its binding is its fixed resources, then the pool members chosen, and a
            # colocated group's site is that of the first of them); the events that become
            # eligible are keyed at once, as lower_bound below would (their keys do not depend
            # on anything done between: a newly eligible event was never evaluated, so no
            # release can wake it, and it sits in no gate)
            end = s + dur[i]
            done[i] = True
            start_of[i] = s
            end_of[i] = end
            order_append(i)
            # (each ``for`` over a tuple makes an iterator object: the loops below that are
            # often empty are skipped by a test instead)
            fixed = fixed_of[i]
            if fixed:
                if len(fixed) == 1:
                    free[fixed[0]] = end
                else:
                    for r in fixed:
                        free[r] = end
            if chosen:
                if len(chosen) == 1:
                    free[chosen[0]] = end
                else:
                    for r in chosen:
                        free[r] = end
                rs = bound[i] = fixed + chosen
            else:
                rs = bound[i] = fixed
            grp = group_of[i]
            if grp >= 0 and group_site[grp] < 0:
                group_site[grp] = res_site[rs[0]]
            wait_res[i] = rb
            t_base[i] = tb
            wait_sem[i] = sb
            ops = sig_ops[sig[i]]
            if ops is not NO_SEM_OPS:  # (most events change no semaphore)
                holds, takes, gives = ops
                if holds:
                    for p, a, back in holds:
                        p.hold(s, end, a, back)
                if takes:
                    for p, a in takes:
                        p.add(s, -a)
                if gives:
                    for sem, r in gives:
                        if profiles[sem].add(end, r) > sem_cap[sem]:
                            state.capacity_error(i, sem, r)
            nexts = succs[i]
            if nexts:
                for j, lam in nexts:
                    v = end + lam
                    if v > ready[j]:  # the first committed predecessor always (ready starts at -1)
                        ready[j] = v
                        rpred[j] = i
                    d = indeg[j] - 1
                    indeg[j] = d
                    if not d:
                        key = (ready[j], j) if plain else (before[j], ready[j], after[j], j)
                        cur_key[j] = key
                        push(heap, key)
        # (no version bump for i: every reader of a version also tests done, and i is done)
        if g >= 0:
            if gate_cls[g]:
                push_cls(g)
            else:
                push_rep(g)
        gains = sig_gains[sig[i]]
        if gains:  # (most events give no semaphore units back)
            for sem in gains:
                # on_release's own first tests: a delayed waiter starting after the release, a
                # starved one (most releases on the pinned graphs find neither)
                dh = delayed[sem]
                if (dh and -dh[0][0] > end_of[i]) or starved[sem] or sg_of_sem[sem]:
                    on_release(sem, end_of[i])
        if width:
            for j in new:  # (the inline commit above keyed its new events itself)
                lower_bound(j)
        if ctl is not None:
            hook.after_commit(i, ctl)  # type: ignore[union-attr]
    committed = len(state.order)  # one entry per commit, in either mode
    if committed < n:
        stuck = [i for i in range(n) if not done[i] and state.indeg[i] == 0]
        raise SchedulingError(
            f"deadlock: {n - committed} event(s) can never start because semaphore units they need "
            f"are never given back: " + state.blocked_report(stuck)
        )
    return ctl


def _run_view(
    state: SchedulerState, pol: Policy, hook: Restructure | None = None
) -> RestructureControl | None:
    cg = state.cg
    eligible = {i for i in range(cg.n) if state.indeg[i] == 0}
    view = SchedulerView(state, eligible)
    ctl = (
        RestructureControl(cg, state.fixed, state.free, state.done, state.end, lambda _j: None)
        if hook is not None
        else None
    )
    step_evals = state.step_evals
    while eligible:
        step_evals.clear()  # a new step: the view's evaluations of the last one are stale
        name = pol.choose(view)
        i = cg.index.get(name, -1) if isinstance(name, str) else -1
        if i not in eligible:
            raise SchedulingError(
                f"policy {pol.name!r} chose {name!r}, which is not an eligible event at this step"
            )
        start, tb, chosen, rb, sb, _blk, _movers = state.evaluate(i)
        if start == INF:
            if all(view.earliest_start(cg.names[j]) == INF for j in eligible):
                raise SchedulingError(
                    "deadlock: every eligible event waits on semaphore units that are never given "
                    "back: " + state.blocked_report(sorted(eligible))
                )
            raise SchedulingError(
                f"policy {pol.name!r} chose {name!r}, which cannot start (its semaphores never admit it)"
            )
        eligible.discard(i)
        eligible.update(state.commit(i, start, tb, chosen, rb, sb))
        if ctl is not None:
            hook.after_commit(i, ctl)  # type: ignore[union-attr]
    return ctl
