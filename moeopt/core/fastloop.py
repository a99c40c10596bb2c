"""A compiled form of the keyed greedy loop.

For a pinned graph (no pool placeholder) under a keyed policy without a restructure hook,
:func:`moeopt.core.scheduler.schedule` may hand the whole loop to :func:`run_compiled`, which
makes the same choices as ``_run_keyed`` and fills the same columns (starts, ends, bound
resources, ready times, the wait columns, the commit order and each semaphore's breakpoints), in
machine code compiled by numba (:mod:`moeopt.core.fastkernel`). Graphs with placeholders are
bound the same way but taken only when :data:`PLACEHOLDERS` is on (off by default, see there).

Why the same schedule: the rule is the one of :mod:`moeopt.core.scheduler` (commit the eligible
event of the smallest key ``(before, start, after, index)``), and every part of an event's
start is worked out by the same float operations in the same order:

* ``ready = max(end_p + λ)`` over the predecessors, updated when each is committed (strictly
  greater replaces, so the predecessor that set it is the first committed to reach it);
* ``t_base``: the ready time raised by each fixed resource's free time in the event's order
  (strictly greater replaces), then by the pool placeholders as ``SchedulerState.evaluate``
  binds them (one placeholder: the first member free by then, else the earliest to free up,
  first on ties; several: the latest of each one's earliest member; a colocated event: the
  members at its group's site, or while the group has none, its one placeholder's members at
  the group's sites (the state's ``site_members``) or, for several, the site ``_best_site``
  picks), and the members picked again after the semaphores moved the start (several
  placeholders of a group without a site: at the site ``_site_binding`` picks);
* admission of each semaphore as ``SemaphoreProfile.admit`` answers it (the earliest ``t >=
  t_base`` at which ``take`` units are free over ``[t, t + duration)``, ``τ < t + duration``
  deciding whether a breakpoint ``τ`` is inside, and what the event keeps from its end on is
  free from then on), with several semaphores the same cycle as ``SchedulerState.admit_all``
  (each semaphore in turn until every one admits the same start; the one that moved it last is
  the wait's semaphore);
* a committed event's changes as ``SchedulerState.commit`` makes them (its resources' free
  times, its group's site when it is the group's first; ``sem_ops``: holds, then
  the other takes at its start, then the other gives at its end), each adding the breakpoints
  ``SemaphoreProfile`` adds (at the level in force there) and moving the levels it moves.

Keys: a heap entry's key is a lower bound of its event's key. Commits raise free times, fix
groups' sites and take units, which only moves starts later; a popped event whose key is unchanged is then the
true minimum (the argument of ``_run_keyed``'s docstring). A release that gives back more than
its event took is the one change that can move a start earlier: every eligible event that
acquires that semaphore gets its key afresh at once (its older entry is retired by a version
number), so the invariant holds again before the next pop. Events that a busy core or pool
holds back wait in that candidate set's *gate*, which has one heap entry for all of them (see
:func:`moeopt.core.fastkernel.loop`): a commit there re-keys one entry, not every waiter.

The Python loop stays the reference: view policies, restructure hooks and small processes use
it, and tests/core/test_fastloop.py holds the two to identical schedules on random graphs
(pools, colocation, every semaphore use) and on operator graphs. :func:`run_compiled` answers
``None`` (the caller then runs the Python loop, which raises its own error) when no eligible
event can ever start or a release lifts a semaphore above its capacity, and also when it gives
up on a graph whose waiters, admissions or moved keys cost too much (:data:`WAKES_PER_EVENT`,
:data:`WALK_PER_EVENT`, :data:`PUSHES_PER_EVENT`).

Walks: a process that has loaded the loop also walks the graphs it takes by size in machine
code where an analysis walks every edge (:func:`paths_without`, :func:`ancestors_or_self`),
and, within :func:`arrays_first`, compiles them to arrays first; those walks give the values
of the Python walks they replace (tests/megamoe/test_kerneltime.py holds ``simulate`` equal
both ways).

When: numba is imported on the first use, not with moeopt. Its import and the load of the
compiled loop (cached on disk after the first compilation) cost 0.25-0.8 s once per process (see
:data:`LOAD_EVENTS`), so a process starts using the compiled loop only once the graphs it has
scheduled make that worth it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from itertools import chain, compress, repeat
from operator import is_not
from typing import Any, NamedTuple

import numpy as np

from moeopt.core.compiled import CompiledGraph, columns_from
from moeopt.core.state import group_sites, semaphore_signatures, site_members

LOAD_EVENTS = 160_000
"""A process loads the compiled loop once the graphs it has scheduled under keyed policies
(this one included) reach this many events in all; from then on every such graph of at least
:data:`MIN_EVENTS` events uses it. measured (stop 41, this 2-core machine): loading costs
~0.8 s once per process (numba's import 0.29 s, the kernel module 0.26 s, the first call 0.23
s, from the on-disk cache), and the Python loop costs ~5 µs per event more than the compiled
one (scenario_basic: 35-90 ms against 4-15 ms for its 5,570 events). The threshold is the
rent-or-buy rule: load once the Python loop has cost what loading costs (0.8 s / 5 µs =
160k events), which never pays more than twice the better of the two choices made in
hindsight. So a single ``simulate``, the README's 24-trial quick start (134k events) and other
short runs never load numba, and a search or sweep of more loads it once. assumed: the 5 µs per
event, an average over the graphs measured.

Measured again (stop 49, a faster machine day: bench machine reference ~39 ms; CPU seconds):
loading 0.24-0.27 s (numba's import 0.11 s, its first call 0.12 s, ~5 ms more on the first
real call), a whole ``simulate`` 3.2-3.6 µs per event slower with the Python loop on
scenario_basic and pto M = 2048, 10 µs on pto M = 512: the rule would give ~75k. Tried and
not kept: at 75k the quick start loads numba at its ~14th trial and ran 0.91x as fast (1421-1427
against 1560-1603 trials/min, four alternating runs), an 80-trial study 1.07x as fast
(1725-1812 against 1581-1652, three runs); in a thousand-trial study the two differ by under
1% (worked out, not measured: ~15 trials x ~18 ms against ~35 s), so the shorter runs decide."""

MIN_EVENTS = 500
"""assumed: below this many events the arrays the compiled loop reads cost about what it saves."""

PLACEHOLDERS = False
"""Whether graphs with pool placeholders go to the compiled loop too. It binds them as the Python
loop does (tests/core/test_fastloop.py turns this on: random graphs with pools and colocation,
and late-bound operator graphs, give identical schedules), but it is not on by default: events
that a semaphore holds back (alone, or after a busy core or pool) re-key at every commit that
moves the semaphore, and admissions walk the long low stretches of late-bound slots one
breakpoint at a time, where the Python loop has semaphore and class gates and skips such
stretches in blocks; the compiled loop's gates hold only events held back by a busy core or
pool. measured (stop 42, this machine), whole ``simulate`` in a warm process with it on
against off, medians of 3, late-bound AIC (GM link where the on-chip one forbids it):
scenario_basic 1.61x, pto_m16 1.33x, basic_e8 1.29x, bs72 1.03x faster; pto_m16.v1 0.77x,
pto_m512 0.89x, pto_m128 0.88x, pto_m16.zipf 0.85x (pto_m512 under earliest_start: 59 moved
keys per event, 60% held by a semaphore after the core, 40% by a semaphore alone, and 13k
breakpoints walked per event, so the loop gives up after building its arrays); 0.91x over the
eight. bench_scheduler's synthetic graphs at 100k events: rolling-cursor 3-5x faster (the
work_conserving_critical_path slowdown measured at stop 41 was the re-keying the gates now
remove: 0.48 s against 1.8 s), late-bound given up at once (+5-10% over the Python loop
alone). Semaphore gates and block skipping in the compiled loop would be the next step."""

WAKES_PER_EVENT = 1
WAKES_BASE = 1_000
"""The compiled loop gives up on a graph (and the Python loop schedules it, now and every time
after) once its releases have woken waiters more than ``WAKES_PER_EVENT * c + WAKES_BASE``
times with ``c`` events committed so far (counted against the commits, so that a graph it
cannot take is given up early): many events waiting for one shared semaphore (late-bound
tiles competing for a pool's slots) are woken one by one at every release there, where the
Python loop's gates wake one entry per class. measured (stop 41): none of the 508 runs of the
golden configs' graphs under the four keyed policies gives up; without a limit, the late-bound
synthetic graph of bench_scheduler (placeholders on) took 2.7 s at 10k events under
earliest_start against 0.43 s in Python. measured (stop 42): at most 0.34 wake-ups per event
on those graphs, never above ``c``. assumed: the multiple and the base themselves (a wake-up
is an evaluation, ~0.1-1 µs, so the limit costs at most about what the Python loop spends on a
few events each)."""

WALK_PER_EVENT = 256
WALK_BASE = 1_000_000
"""Likewise, it gives up once admissions have walked over more than ``WALK_PER_EVENT * c +
WALK_BASE`` breakpoints in all: a semaphore whose levels stay low for long stretches makes
each admission walk them one by one, where the Python loop's profiles skip them in blocks and
remember the stretches refused (late-bound slots: the synthetic late-bound graph at 100k events,
placeholders on, took 165 s under earliest_start without this). measured (stop 42,
placeholders on): the golden configs' graphs under the four keyed policies walk at most 392
breakpoints per event, and at most 287,581 above ``256 * c`` at any commit (pto_m16.late_aic).
assumed: a breakpoint costs ~1-2 ns, so the budget is a few milliseconds per 10k events."""

PUSHES_PER_EVENT = 16
PUSHES_BASE = 25_000
"""Likewise, it gives up once keys that moved have gone back to the heap more than
``PUSHES_PER_EVENT * c + PUSHES_BASE`` times with ``c`` events committed: events held back by a
semaphore, which its gates do not hold (those of the Python loop do), are re-keyed at every
commit that moves the semaphore's level. measured (stop 42, placeholders on): over the golden
configs' graphs under the four keyed policies at most 16.6 pushes per event and at most 8,551
pushes above ``16 * c`` at any commit (pto_m16.late_aic); the DeepSeek-V3-like ranks 1, 16 and
21 and the rolling-cursor synthetic graphs never above ``16 * c``; the late-bound synthetic
graph 188-251 per event under earliest_start and work_conserving_critical_path, given up after
~1,000 commits (0.03-0.1 s at 100k events). assumed: the multiple and the base themselves."""

_seen_events = 0


class LoopForm(NamedTuple):
    """The arrays of a graph for the compiled loop, built once per compiled graph (see :func:`loop_form`).
    CSR lists: the entries of row ``r`` are ``ptr[r]:ptr[r + 1]`` of the flat arrays."""

    dur: np.ndarray  # float64 per event
    ready0: np.ndarray  # float64 per event: 0.0 without predecessors, else -1.0 (as the state's)
    indeg: np.ndarray  # int64 per event
    succ_ptr: np.ndarray
    succ_idx: np.ndarray  # the successor j (int64) ...
    succ_lam: np.ndarray  # ... and its λ (float64), in the order of ``cg.succs[i]``
    fix_ptr: np.ndarray
    fix_idx: np.ndarray  # fixed resources (int64), in the order of ``cg.fixed[i]``
    sig: np.ndarray  # int64 per event: its semaphore signature (the state's ``sig``)
    # per signature (CSR): its acquire triples (the state's ``acq3``: semaphore, take, give
    # back), and its changes (``sem_ops``): holds (semaphore, take, give back), the other
    # takes and the other gives (semaphore, units)
    acq: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    holds: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    takes: tuple[np.ndarray, np.ndarray, np.ndarray]
    gives: tuple[np.ndarray, np.ndarray, np.ndarray]
    sem_cap: np.ndarray  # int64 per semaphore
    off: np.ndarray  # per semaphore, where its breakpoints live in one array (room for all)
    waiters_off: np.ndarray  # per semaphore, where its eligible acquirers live in one array
    n_res: int
    # the placeholders: per event (CSR) its pools, and its colocation group (-1: none); per group
    # (CSR) its allowed sites; the member lists as ranges of one array ``mem``: each pool's
    # (``pool_ptr``), each pool's at each site (``mat_ptr``, row pool * n_sites + site) and each
    # distinct list of the state's ``site_members`` (``sm_ptr``, row ``sm_row[i]`` for event i,
    # -1: none), and ``mem_pos`` each entry's place in its pool (for the members at a site);
    # in the order (ph_ptr, ph_pool, group, gs_ptr, gs_site, sm_ptr, pool_ptr, mat_ptr, mem,
    # sm_row, mem_pos)
    pools: tuple[np.ndarray, ...]
    group_site: np.ndarray  # per group: its site when it has one only, else -1 (initial)
    res_site: np.ndarray  # per resource: its site
    n_sites: int


def declines(cg: CompiledGraph) -> bool:
    """Whether the loop declines ``cg`` on sight (without its arrays): pool placeholders while
    :data:`PLACEHOLDERS` is off, or a graph it gave up on before."""
    return bool(cg.derived("loop_declined")) or (not PLACEHOLDERS and any(cg.placeholders))


def loop_form(cg: CompiledGraph) -> LoopForm | None:
    """The :class:`LoopForm` of ``cg`` (``None`` for the graph the loop declines, see the module
    docstring); found once per compiled graph and kept on it."""
    if declines(cg):
        return None
    got = cg.derived("loop_form")
    if got is None:
        got = cg.keep("loop_form", _find_form(cg) or False)
    return got or None


def _ptr(rows: Sequence[Sequence[Any]]) -> np.ndarray:
    """The CSR offsets of ``rows``: row ``i`` is ``ptr[i]:ptr[i + 1]`` of the flattened items."""
    ptr = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, rows), np.int64, len(rows)), out=ptr[1:])
    return ptr


def _columns(rows: Sequence[Sequence[tuple[int, ...]]], width: int) -> tuple[np.ndarray, ...]:
    """``(ptr, column 0, ..., column width-1)`` of rows of ``width``-tuples of ints (fresh
    int64 arrays: numba compiles the loop once per array type, so every array is alike)."""
    flat = list(chain.from_iterable(rows))
    cols = [np.array([x[c] for x in flat], np.int64) if flat else np.zeros(0, np.int64) for c in range(width)]
    return (_ptr(rows), *cols)


def _pool_tables(
    cg: CompiledGraph, site_members: Sequence[tuple[int, ...] | None]
) -> tuple[np.ndarray, ...] | None:
    """The placeholder tables of :attr:`LoopForm.pools` (see there); ``None`` when a
    colocated event with placeholders has a group without a site list (which the Python loop
    cannot bind either)."""
    n = cg.n
    n_sites = len(cg.site_names)
    ph_ptr = _ptr(cg.placeholders)
    ph_pool = np.fromiter(chain.from_iterable(cg.placeholders), np.int64, int(ph_ptr[-1]))
    group = np.fromiter(cg.group, np.int64, n)
    gs = cg.group_sites
    for i in np.flatnonzero((group >= 0) & (np.diff(ph_ptr) > 0)).tolist():
        if gs[cg.group[i]] is None:
            return None
    gs_ptr = _ptr([x or () for x in gs])
    gs_site = np.fromiter(chain.from_iterable(x or () for x in gs), np.int64, int(gs_ptr[-1]))
    # every member list in one array: each pool's members, then each pool's members at each
    # site (pool p, site s: row p * n_sites + s), then each distinct list of a colocated
    # event's members at its group's sites (the state's ``site_members``: one object per
    # distinct list), ``sm_row`` naming each event's (-1: none)
    at_site = [cg.pool_members_at(p, site) for p in range(len(cg.pool_members)) for site in range(n_sites)]
    row_of: dict[int, int] = {}
    own: list[tuple[int, ...]] = []
    sm_row = np.full(n, -1, np.int64)
    # (the events with a list picked by a C-level pass: most events have none)
    for i in compress(range(n), map(is_not, site_members, repeat(None))):
        x = site_members[i]
        if x is not None:  # (always: mypy)
            k = row_of.get(id(x))
            if k is None:
                k = row_of[id(x)] = len(own)
                own.append(x)
            sm_row[i] = k
    pool_ptr = _ptr(cg.pool_members)
    mat_ptr = _ptr(at_site) + pool_ptr[-1]
    sm_ptr = _ptr(own) + mat_ptr[-1]
    mem = np.fromiter(
        chain(chain.from_iterable(cg.pool_members), chain.from_iterable(at_site), chain.from_iterable(own)),
        np.int64,
        int(sm_ptr[-1]),
    )
    # each member's place in its pool, for the members at a site (a colocated event of several
    # placeholders binds by it: SchedulerState._site_binding); the other entries their place in
    # their own list
    place = [{m: k for k, m in enumerate(members)} for members in cg.pool_members]
    pool_places = chain.from_iterable(map(range, map(len, cg.pool_members)))
    at_places = (place[k // n_sites][m] for k, row in enumerate(at_site) for m in row)
    list_places = chain.from_iterable(map(range, map(len, own)))
    mem_pos = np.fromiter(chain(pool_places, at_places, list_places), np.int64, int(sm_ptr[-1]))
    return (ph_ptr, ph_pool, group, gs_ptr, gs_site, sm_ptr, pool_ptr, mat_ptr, mem, sm_row, mem_pos)


def _find_form(cg: CompiledGraph) -> LoopForm | None:
    """The loop's arrays of ``cg``: from the Python loop's tables when a schedule of this graph
    made them, else from the part of them the loop reads (the semaphore signatures, the
    colocated events' site lists), without the per-event tables only the Python loop reads.
    measured (DeepSeek-V3-like zipf rank 16, 58k events): 22 -> ~16 ms."""
    tab = cg.derived("scheduler_tables")
    n = cg.n
    # (each event's predecessors: off the arrays when the graph was compiled to them)
    indeg = np.diff(cg.columns.pred_ptr) if cg.columns is not None else np.array(cg.indeg(), np.int64)
    sigs = semaphore_signatures(cg)  # (kept on the graph: the Python loop's tables hold them too)
    group_site = group_sites(cg)
    pools = _pool_tables(cg, tab.site_members if tab is not None else site_members(cg))
    if pools is None:
        return None
    n_sem = len(cg.sem_cap)
    succ_ptr, succ_idx, succ_lam = cg.succ_arrays()
    fix_ptr = _ptr(cg.fixed)
    sig = np.fromiter(sigs.sig, np.int64, n)
    acq = _columns(sigs.acq, 3)
    holds = _columns([ops[0] for ops in sigs.ops], 3)
    takes = _columns([ops[1] for ops in sigs.ops], 2)
    gives = _columns([ops[2] for ops in sigs.ops], 2)
    # room per semaphore: a breakpoint per change of each event (a hold makes two), and an
    # eligible-acquirer entry per acquiring event
    per_sig = np.bincount(sig, minlength=len(sigs.acq))

    def per_sem(cols: tuple[np.ndarray, ...]) -> np.ndarray:
        rows = np.repeat(np.arange(len(cols[0]) - 1), np.diff(cols[0]))
        return np.bincount(cols[1], per_sig[rows], n_sem) if len(cols[1]) else np.zeros(n_sem)

    changes = 2 * per_sem(holds) + per_sem(takes) + per_sem(gives)
    off = np.zeros(n_sem + 1, np.int64)
    np.cumsum(changes.astype(np.int64), out=off[1:])
    waiters_off = np.zeros(n_sem + 1, np.int64)
    np.cumsum(per_sem(acq).astype(np.int64), out=waiters_off[1:])
    return LoopForm(
        dur=np.fromiter(cg.dur, np.float64, n),
        # (-1 until a predecessor is committed; 0 without any: GraphTables.ready)
        ready0=np.where(indeg == 0, 0.0, -1.0),
        indeg=indeg.astype(np.int64),
        succ_ptr=succ_ptr.copy(),  # (copies: fresh, writable int64 / float64 arrays)
        succ_idx=succ_idx.astype(np.int64),
        succ_lam=succ_lam.copy(),
        fix_ptr=fix_ptr,
        fix_idx=np.fromiter(chain.from_iterable(cg.fixed), np.int64, int(fix_ptr[-1])),
        sig=sig,
        acq=acq,  # type: ignore[arg-type]
        holds=holds,  # type: ignore[arg-type]
        takes=takes,  # type: ignore[arg-type]
        gives=gives,  # type: ignore[arg-type]
        sem_cap=np.fromiter(cg.sem_cap, np.int64, n_sem),
        off=off,
        waiters_off=waiters_off,
        n_res=len(cg.res_names),
        pools=pools,
        group_site=np.fromiter(group_site, np.int64, len(group_site)),
        res_site=np.fromiter(cg.res_site, np.int64, len(cg.res_site)),
        n_sites=len(cg.site_names),
    )


class Column(Sequence[Any]):
    """A column of a finished compiled run: the loop's array, read as the Python loop's list of
    Python numbers (turned into that list on the first read and kept).

    Why: ``kernel_time`` reads a rank's starts and ends only as arrays (the array check) and
    none of its wait columns; turning the eight columns of the DeepSeek-V3-like zipf rank 16
    (58k events) into lists cost ~8 ms of its ~440 ms."""

    __slots__ = ("_list", "array")

    def __init__(self, array: np.ndarray) -> None:
        array.flags.writeable = False  # (the list, once made, would not follow a change)
        self.array = array
        """the loop's array (read-only)"""
        self._list: list[Any] | None = None

    def values(self) -> list[Any]:
        """The column as a list of Python numbers (made once)."""
        got = self._list
        if got is None:
            got = self._list = self.array.tolist()
        return got

    def __getitem__(self, i: Any) -> Any:
        return self.values()[i]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.values())

    def __len__(self) -> int:
        return len(self.array)

    def __eq__(self, other: object) -> bool:  # as the list it stands for
        return self.values() == (other.values() if isinstance(other, Column) else other)

    __hash__ = None  # type: ignore[assignment]  # (a list's)

    def __repr__(self) -> str:
        return f"Column({self.values()!r})"


class CompiledRun(NamedTuple):
    """The columns of a finished run of ``cg``, named as the Python loop leaves them in its
    state and read as its lists of Python numbers (:class:`Column`, so that
    :func:`moeopt.core.scheduler._to_schedule` reads either), and each semaphore's breakpoints
    ``(times, levels)``."""

    cg: CompiledGraph
    start: Column
    end: Column
    ready: Column
    ready_pred: Column
    wait_res: Column
    t_base: Column
    wait_sem: Column
    order: Column
    curves: list[tuple[list[float], list[int]]]
    bound: list[tuple[int, ...]]  # per event: its fixed resources, then its chosen members


def wanted(n: int) -> bool:
    """Whether a graph of ``n`` events is to be scheduled by the compiled loop in this
    process (see :data:`LOAD_EVENTS`); counts it among the graphs this process has scheduled."""
    global _seen_events
    if n < MIN_EVENTS:
        return False
    _seen_events += n
    return _LOOP is not None or (_seen_events >= LOAD_EVENTS and available())


def scheduled_elsewhere(n: int) -> None:
    """Count a graph of ``n`` events that a worker process of this one scheduled (its workers'
    graphs count as this process's work: see :func:`before_fork`)."""
    global _seen_events
    if n >= MIN_EVENTS:
        _seen_events += n


def before_fork(expected: int = 0, workers: int = 1, walks: bool = False) -> None:
    """Load the compiled loop now when this process has scheduled enough (see
    :data:`LOAD_EVENTS`): a process about to fork workers, so that they share it instead of
    each loading it (a forked worker's counts are lost with it: without this, every call of a
    search that schedules in workers would load it again).

    ``walks``: the workers analyse their graphs too, so the analyses' walks are loaded with
    the loop (:func:`load_walks`).

    ``expected``: the events the ``workers`` are about to schedule, when the caller knows about
    how many (the ranks of one ``kernel_time``). The rent-or-buy rule of :data:`LOAD_EVENTS`
    is for work whose end is unknown; with the end known, buying at once pays as soon as the
    work saves what loading costs. Loading here costs its time once, on this one core, while
    the saving (per event) is shared out over the workers, so it pays once ``expected`` reaches
    ``workers * LOAD_EVENTS``. Otherwise each worker keeps its own count, as before. measured
    (stop 43, the DeepSeek-V3-like zipf shape: 32 ranks, 388k events, 2 workers, a fresh
    process each): ``kernel_time`` 2.71 and 2.85 s loading before the fork, 2.86 and 3.0 s never
    loading, 3.07 and 3.35 s when each worker loads once its own graphs reach
    :data:`LOAD_EVENTS` (near the end of its share, where loading no longer pays)."""
    pays = _seen_events >= LOAD_EVENTS or _seen_events + expected >= workers * LOAD_EVENTS
    if _LOOP is None and pays and available():
        compiled()
    if walks:
        load_walks()


def run_compiled(cg: CompiledGraph, before: Sequence[float], after: Sequence[float]) -> CompiledRun | None:
    """The greedy schedule of ``cg`` under the keys ``(before[i], start, after[i], i)``; ``None``
    when the loop does not take the graph, or no eligible event can ever start, or a release
    lifts a semaphore above its capacity (the caller then runs the Python loop, which reports
    it), or waiters were woken too often (the loop then declines this graph from now on: see
    :mod:`moeopt.core.fastkernel`'s ``loop``)."""
    f = loop_form(cg)
    if f is None:
        return None
    fixed = cg.fixed
    n = len(f.dur)
    b = np.asarray(before, np.float64)
    a = np.asarray(after, np.float64)
    # each event's place in the order of (before, after, index): a gate's order (lexsort is
    # stable, so equal pairs stay in index order)
    by_rank = np.lexsort((a, b))
    rank = np.empty(n, np.int64)
    rank[by_rank] = np.arange(n)
    out = compiled()(
        f.dur, f.ready0, f.indeg.copy(), f.succ_ptr, f.succ_idx, f.succ_lam, f.fix_ptr, f.fix_idx,
        f.n_res, f.pools, f.group_site, f.res_site, f.n_sites,
        f.sig, *f.acq, *f.holds, *f.takes, *f.gives, f.sem_cap, f.off, f.waiters_off,
        b, a, rank, by_rank,
        np.array(
            [WAKES_PER_EVENT, WAKES_BASE, WALK_PER_EVENT, WALK_BASE, PUSHES_PER_EVENT, PUSHES_BASE], np.int64
        ),
    )  # fmt: skip
    status, start, end, ready, rpred, wres, tbase, wsem, order, times, levels, used, chosen = out
    if status:
        if status == 4:
            cg.keep("loop_declined", True)
        return None
    # each event's bound resources: its fixed ones, then the member chosen for each placeholder
    bound: list[tuple[int, ...]] = list(fixed)
    ph_ptr = f.pools[0]
    if len(chosen):
        picks = chosen.tolist()
        lo = ph_ptr[:-1].tolist()
        hi = ph_ptr[1:].tolist()
        for i in np.flatnonzero(np.diff(ph_ptr)).tolist():
            bound[i] = fixed[i] + tuple(picks[lo[i] : hi[i]])
    off = f.off
    curves = [
        (times[off[s] : off[s] + used[s]].tolist(), levels[off[s] : off[s] + used[s]].tolist())
        for s in range(len(f.sem_cap))
    ]
    return CompiledRun(
        cg, Column(start), Column(end), Column(ready), Column(rpred), Column(wres), Column(tbase),
        Column(wsem), Column(order), curves, bound,
    )  # fmt: skip


def arrays_first() -> contextlib.AbstractContextManager[None]:
    """While the block runs, in a process that has loaded the compiled loop: graphs it would
    take by size compiled to arrays first (:func:`moeopt.core.compiled.columns_from`), for
    work whose readers are the array ones (the loop, the validator's array check, the
    analyses' compiled walks); the same graphs, at less cost, the per-event tuples made from
    the arrays only where something reads them. Otherwise nothing changes."""
    return columns_from(MIN_EVENTS) if loaded() else contextlib.nullcontext()


def walks_compiled(n: int) -> bool:
    """Whether a graph of ``n`` events is walked by the compiled kernels here
    (:func:`paths_without`, :func:`ancestors_or_self`): in a process that has loaded the
    compiled loop, a graph it would take by size (:data:`MIN_EVENTS`), the graphs
    :func:`arrays_first` compiles to arrays."""
    return n >= MIN_EVENTS and loaded()


def _topo_array(cg: CompiledGraph) -> np.ndarray:
    """``cg.topo`` as an int64 array (kept on the graph)."""
    got = cg.derived("topo_array")
    if got is None:
        got = cg.keep("topo_array", np.fromiter(cg.topo, np.int64, cg.n))
    return got


def paths_without(
    cg: CompiledGraph, a: np.ndarray, b: np.ndarray, end: Sequence[float]
) -> tuple[list[float], list[float]]:
    """Per event, over the edges of ``cg`` but the edges ``a[k] -> b[k]`` (positions): the
    longest path from a source to its end (its duration included, each edge's λ counted), and
    the latest ``end[p] + λ`` of its predecessors (0.0 for none), by the compiled kernel (for
    a process where it is loaded). The values a walk over each event's other predecessors in
    topological order makes (``moeopt.megamoe.analysis.bounds.data_paths``; a maximum of the
    same sums, in another order)."""
    from moeopt.core import fastkernel

    succ_ptr, succ_idx, succ_lam = cg.succ_arrays()
    skip = fastkernel.skipped_edges(succ_ptr, succ_idx, a, b)
    dur = np.fromiter(cg.dur, np.float64, cg.n)
    tails, ready = fastkernel.paths_without(
        _topo_array(cg), dur, succ_ptr, succ_idx, succ_lam, skip, np.asarray(end, np.float64)
    )
    return tails.tolist(), ready.tolist()


def ancestors_or_self(cg: CompiledGraph, ends: Sequence[int]) -> list[bool]:
    """Whether each event of ``cg`` is one of ``ends`` (positions) or an ancestor of one, by the
    compiled kernel (for a process where it is loaded)."""
    from moeopt.core import fastkernel

    needed = np.zeros(cg.n, np.bool_)
    needed[np.asarray(ends, np.int64)] = True
    succ_ptr, succ_idx, _lam = cg.succ_arrays()
    fastkernel.ancestors_or_self(_topo_array(cg), succ_ptr, succ_idx, needed)
    got: list[bool] = needed.tolist()
    return got


_LOOP: Callable[..., Any] | None = None
_AVAILABLE: bool | None = None


def topo_order(
    indeg: np.ndarray, succ_ptr: np.ndarray, succ_idx: np.ndarray, sources: Sequence[int]
) -> list[int]:
    """Kahn's breadth-first order by the compiled kernel (``moeopt.core.fastkernel.topo_order``,
    the order ``moeopt.core.compiled._kahn`` gives), for a process where it is loaded."""
    from moeopt.core import fastkernel

    # (succ_ptr read-only whatever the caller's: machine code is loaded per argument type, and
    # read-only is one; the compiled graphs' arrays are, and compiled() loads that one)
    ptr = np.asarray(succ_ptr, np.int64).view()
    ptr.flags.writeable = False
    got: list[int] = fastkernel.topo_order(
        indeg.astype(np.int64), ptr, succ_idx.astype(np.int64), np.asarray(sources, np.int64)
    ).tolist()
    return got


def loaded() -> bool:
    """Whether the compiled loop is loaded in this process (it then takes every pinned graph of
    :data:`MIN_EVENTS` or more under a keyed policy)."""
    return _LOOP is not None


def available() -> bool:
    """Whether numba can be imported here (asked once per process)."""
    global _AVAILABLE
    if _AVAILABLE is None:
        try:
            import numba  # noqa: F401
        except ImportError:
            _AVAILABLE = False
        else:
            _AVAILABLE = True
    return _AVAILABLE


def compiled() -> Callable[..., Any]:
    """The compiled loop (numba imported, and the loop's and :func:`topo_order`'s machine code
    compiled or loaded from the on-disk cache, on the first call in a process)."""
    global _LOOP
    if _LOOP is None:
        from moeopt.core import fastkernel

        _LOOP = fastkernel.loop
        _load_machine_code()
    return _LOOP


def _load_machine_code() -> None:
    """Run the loop and :func:`topo_order` once on a two-event graph, so that numba loads their
    machine code here and now rather than on their first real call. numba loads a function's
    code on its first call in a process, for the argument types of that call; a process that
    forks workers after :func:`before_fork` would otherwise have each worker load it again, on
    every fork (measured, stop 45, the DeepSeek-V3-like zipf shape in a warm process: the first
    rank a forked worker scheduled took 0.59 s against 0.34 s for the same rank after it, ~0.21 s
    of it this load; each ``kernel_time`` forks its workers afresh). The two events use a
    semaphore so that every array the loop reads has the type a real graph's has."""
    from moeopt.core.events import Event, EventGraph

    g = EventGraph(semaphores={"s": 1})
    g.add(Event("a", resources=["c0.a"], acquires={"s": 1}, duration_us=1.0))
    g.add(Event("b", resources=["c0.a"], deps={"a": 0.0}, releases={"s": 1}, duration_us=1.0))
    run_compiled(g.compiled(), [0.0, 0.0], [0.0, 0.0])
    # (one event, no edge: in-degrees, successor offsets, successors, sources)
    topo_order(np.zeros(1, np.int64), np.zeros(2, np.int64), np.zeros(0, np.int64), [0])


_WALKS = False


def load_walks() -> None:
    """Load the machine code of the analyses' walks (:func:`paths_without`,
    :func:`ancestors_or_self`) now, as :func:`_load_machine_code` does the loop's, when the
    compiled loop is loaded: for a process about to fork workers that analyse their graphs.
    Not with the loop itself: ``kernel_time`` (a search's objective) analyses nothing, and
    loading them costs ~0.05 s (measured, stop 48: loading the loop 0.40-0.67 s without them,
    0.46-0.51 s with them)."""
    global _WALKS
    if _WALKS or _LOOP is None:
        return
    _WALKS = True
    from moeopt.core.events import Event, EventGraph

    # on the arrays of a compiled graph (read-only, as every graph's are), one edge
    g = EventGraph()
    g.add(Event("a", duration_us=1.0))
    g.add(Event("b", deps={"a": 0.0}, duration_us=1.0))
    cg = g.compiled()
    paths_without(cg, np.zeros(1, np.int64), np.ones(1, np.int64), [1.0, 2.0])
    ancestors_or_self(cg, [1])
