"""Forced vs avoidable idle of one rank's schedule: the ledger per execution role, and the
avoidable idle of each stage pool that the work-conservation guardrail reads.

At each instant, the idle members that ready events could have occupied are avoidable (work was
ready, with its dependencies and semaphores satisfied, while a member that could run it idled);
the rest is forced. **The ledger is kept per execution role** (``AIC``, ``AIV0``, ``AIV1``:
every resource named ``c<k>.<role>``), over the resources of that role that exist, so
that a member shared by several stages is counted once: for each role, busy + forced +
avoidable = members x span. Per stage pool only the avoidable idle is reported (what that
stage's ready work alone could have used; stages sharing members may each count the same idle
member), with whether the pool is late-bound and whether the guardrail checks it.

An event is ready from the time its data dependencies are met until its start, except at
instants where a semaphore it acquires could not have admitted it given everything else as
scheduled (:func:`_ready_spans`); a late-bound event already tied to
one core by its colocation partner only counts against that core. Program-order edges between
events pinned to one core are not data dependencies: they are how a pinned core queues its
work, so an event waiting behind its core's previous event is ready (that queueing is what late
binding could recover).

The steps of :func:`idle_decomposition`: busy intervals per resource, merged
(:func:`_merged_arrays`), and the events of each stage (:func:`_stage_events`), the pools to
judge (:func:`_pools`), per pool the instants its events were ready (:func:`_ready_points`) and
one sweep over those and the members' busy intervals (:func:`_sweep`); then the ledger per role
(:func:`_role_ledger`), a sweep whose ready events may each use a different set of members (a
maximum matching, :func:`_matched`). A pool or role where no event ever waited has a closed
form. The analysis runs on every simulation, so the hot loops read the table's arrays into
locals and the semaphore level curves are read (or rebuilt) only when an event waited.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import cast

import numpy as np

from moeopt.core.compiled import CompiledGraph
from moeopt.core.events import Event
from moeopt.core.schedule import Schedule
from moeopt.core.smallints import stable_order
from moeopt.megamoe.analysis.table import EPS, Columns, Table, events_on, packed, pair_numbers
from moeopt.megamoe.build import RankGraph
from moeopt.megamoe.results import IdleDecomposition, IdleSample, RoleIdle, StageIdle

VECTOR_SWEEPS = True
"""Whether the sweeps with no ready event tied to a member run as numpy arrays
(:func:`_free_stretches`) and the common ready spans are found together
(:meth:`_SpanCache.prime`); False runs the point-by-point code they are tested against."""

CORE_ROLES = ("AIC", "AIV0", "AIV1")
"""The roles whose idle is counted in the rank's core-µs totals (a graph from another adapter
may name other roles: they get a ledger of their own, outside the totals)."""

Interval = tuple[float, float]
Busy = list[Interval] | np.ndarray
"""A member's merged busy intervals: a list of pairs, or an ``(n, 2)`` array of them (as
:func:`_merged_all` gives them: the sweeps on arrays read them as arrays, and only the
point-by-point sweeps as pairs, see :func:`_rows`)."""
_Point = tuple[float, int, str, int]
"""A sweep point ``(t, kind, member, delta)``: kind 0 = a member's busy interval starts (+1) or
ends (-1), kind 1 = an event becomes ready (+1) or stops being ready (-1); ``member`` of a ready
point is the member it is bound to, ``""`` when any idle member could run it."""


@dataclass(frozen=True, slots=True)
class _Pool:
    """A group of members judged together, and the events judged against it."""

    key: str
    """its key in ``by_stage``: the stage"""
    stage: str
    members: tuple[str, ...]
    events: list[int]
    """indices (graph order) of the events that run on it"""
    late: bool
    """its events bind to a member at dispatch time (pinned events of a late-bound stage, such
    as the URMA GETs issued in program order from one AIV1, are a pool of their own that is not)"""


def idle_decomposition(
    rg: RankGraph,
    s: Schedule,
    span: float,
    max_samples: int = 5,
    table: Table | None = None,
    on: Mapping[str, list[int]] | None = None,
    cols: Columns | None = None,
    ready: list[float] | None = None,
) -> IdleDecomposition:
    """The idle ledger per role and the avoidable idle per stage pool (see the module docstring).

    For each pool or role, at each instant before ``span``: the idle members, and the ready
    events (see :func:`_ready_spans`). An event of a late-bound stage whose colocation partner
    has already started is bound to the partner's core, so it can only use that member; every
    other ready event can use any member of its stage's pool. Avoidable = the largest number of
    idle members that ready events could occupy at once (a maximum matching); forced = the other
    idle members. In statically pinned stages every ready event is counted as able to use any
    idle member of its pool: that idle is what late binding could recover.

    A late-bound stage's events that are pinned all the same (the URMA GETs and PUTs, issued in
    program order from one AIV1) form a pool ``"<stage>:pinned"`` that is not late-bound: the
    guardrail does not judge them, as it does not judge any statically pinned pool.

    ``on``: :func:`~moeopt.megamoe.analysis.table.events_on` of the table, ``cols``: its
    :class:`~moeopt.megamoe.analysis.table.Columns`, ``ready``: :func:`_data_ready` of it (as
    :func:`~moeopt.megamoe.analysis.bounds.data_paths` works it out with the floors' longest
    paths), if already made.
    """
    tab = table or Table.of(rg, s)
    cols_ = Columns(tab) if cols is None else cols
    on_ = events_on(tab, cols_) if on is None else on
    by_stage = _stage_events(rg, cols_)
    levels = _SemaphoreLevels(rg, tab)  # built on first use: often no event ever waits
    index = rg.graph.compiled().index  # event name -> position in graph order (the table's order)
    ready = _data_ready(rg, tab) if ready is None else ready
    spans = _SpanCache(tab, levels, ready, cols_, rg.graph.compiled())
    # every resource's busy intervals merged at once (on arrays), or each when first asked
    merged_busy: dict[str, Busy] = _merged_all(on_, cols_.start, cols_.end) if VECTOR_SWEEPS else {}
    member_sets: dict[tuple[str, ...], _Merged] = {}

    def merged_of(r: str) -> Busy:
        # a resource's busy intervals (its events', in graph order) merged
        got = merged_busy.get(r)
        if got is None:
            ids = on_.get(r, [])
            if VECTOR_SWEEPS and len(ids) >= _MERGE_ARRAYS_MIN:
                got = _merged_arrays(packed("n", ids, len(ids)), spans.start, spans.end_array())
            else:
                start, end = tab.start, tab.end
                got = _merge([(start[i], end[i]) for i in ids])
            merged_busy[r] = got
        return got

    def merged_for(members: Sequence[str]) -> _Merged:
        # one dict (and one array of its intervals) per member list: pools and roles share them
        key = tuple(members)
        got = member_sets.get(key)
        if got is None:
            got = member_sets[key] = _Merged((r, merged_of(r)) for r in key)
        return got

    by_key: dict[str, StageIdle] = {}
    samples: list[IdleSample] = []
    pools = _pools(rg, tab, by_stage)
    for pool in pools:
        # in pool order, not set order: the sums below must not depend on the hash seed
        merged = merged_for(pool.members)
        n_mem = len(set(pool.members))
        if merged.all_busy is None:  # pools on the same members share it
            merged.all_busy = _all_busy(merged)
        waits = _ready_points(pool, tab, ready, spans, index, merged.all_busy)
        found: list[IdleSample]
        if not len(waits):
            avoid, found = 0.0, []  # no event of the pool ever waited
        elif isinstance(waits, np.ndarray) or (VECTOR_SWEEPS and not any(bound for _a, _b, bound in waits)):
            avoid, found = _free_sweep(waits, merged, set(merged), n_mem, span, pool.key, max_samples)
        else:
            _forced, avoid, found = _sweep(_points(waits), merged, n_mem, span, pool.key, max_samples)
        by_key[pool.key] = {
            "avoidable_core_us": avoid,
            "late_bound": pool.late,
            "work_conservation_exempt": _exemption(rg, pool.stage, pool.late),
        }
        samples.extend(found)
    by_role = _role_ledger(rg, tab, pools, merged_for, spans, ready, index, span)
    return {
        "forced_core_us": sum(d["forced_core_us"] for role, d in by_role.items() if role in CORE_ROLES),
        "avoidable_core_us": sum(d["avoidable_core_us"] for role, d in by_role.items() if role in CORE_ROLES),
        "by_role": by_role,
        "by_stage": by_key,
        "samples": samples,
    }


def _stage_events(rg: RankGraph, cols: Columns) -> dict[str, list[int]]:
    """The indices of each stage's events that hold a resource (stages with members only, in
    order of first event), in graph order.

    Read off the columns the busy times read as well (each event's stage label code and how
    many resources it holds) rather than by a loop over the events: the events of the stages
    wanted that hold a resource, grouped by code by a stable sort (graph order kept within a
    stage), the stages ordered by their first such event."""
    labels = cols.stage_labels
    members = rg.stage_members
    wanted = np.zeros(len(labels), bool)
    for k, label in enumerate(labels):
        wanted[k] = label in members  # (a stage name, so a string; None never is)
    code = cols.stage_code
    idx = np.flatnonzero(wanted[code] & (cols.n_res > 0)) if len(code) else code
    if not len(idx):
        return {}
    c = code[idx]
    order = np.argsort(c, kind="stable")
    idx, c = idx[order], c[order]
    cuts = np.flatnonzero(c[1:] != c[:-1]) + 1
    starts = np.concatenate(([0], cuts)).tolist()
    ends = np.concatenate((cuts, [len(c)])).tolist()
    # (each run's first index is its stage's first event: graph order within a run)
    runs = sorted(zip(idx[starts].tolist(), c[starts].tolist(), starts, ends))
    return {cast(str, labels[k]): idx[a:b].tolist() for _first, k, a, b in runs}


def _pools(rg: RankGraph, tab: Table, by_stage: dict[str, list[int]]) -> list[_Pool]:
    """One pool per stage (a GMM tile is one event on its cube: its K-step load / compute
    pipeline inside); a late-bound stage's pinned events are a pool apart."""
    events = tab.events
    pools: list[_Pool] = []
    for st, idxs in by_stage.items():
        members = rg.stage_members[st]
        if st in rg.late_stages:
            # events of a late-bound stage that name a resource all the same (the URMA GETs and
            # PUTs, issued in program order from one AIV1) are pinned: judged as a pinned pool
            # (each distinct resource list asked once: the events of a stage share a few)
            res_of = [events[i].resources for i in idxs]
            has = {rs: _has_placeholder(rs) for rs in set(res_of)}
            pinned = [i for i, rs in zip(idxs, res_of) if not has[rs]]
            if pinned:
                pools.append(_Pool(f"{st}:pinned", st, members, pinned, False))
                idxs = [i for i, rs in zip(idxs, res_of) if has[rs]]
            pools.append(_Pool(st, st, members, idxs, True))
        else:
            pools.append(_Pool(st, st, members, idxs, False))
    return pools


def _has_placeholder(resources: Sequence[str]) -> bool:
    return any(r.endswith(":*") for r in resources)


class _SpanCache:
    """Each event's ready spans (:func:`_ready_spans`), computed once for the pools and the roles."""

    def __init__(
        self,
        tab: Table,
        levels: _SemaphoreLevels,
        ready: list[float],
        cols: Columns | None = None,
        cg: CompiledGraph | None = None,
    ) -> None:
        self._tab, self._levels, self._ready = tab, levels, ready
        self._cg = cg  # the table's graph compiled, if given (for its pair numbers)
        self._pairs: np.ndarray | None = None
        self._got: dict[int, list[tuple[float, float]]] = {}
        # per event: _UNKNOWN, or its spans are known: _WHOLE ([(ready, start)], the whole wait),
        # _NONE ([]) or _LISTED (in _got). prime() marks the first two on arrays, without a
        # list per event (most waits are whole, and the sweeps read them as arrays, see pairs())
        self.state = np.zeros(len(ready), np.int8)
        # (read-only arrays: the start and end times shared with the other analyses)
        self._cols = cols = Columns(tab) if cols is None else cols
        self.start = cols.start
        self.ready = packed("d", ready, len(ready))
        self._waited: dict[str, np.ndarray] = {}
        self.end: np.ndarray | None = None  # (made when first needed)
        # the spans _prime_group worked out, kept as rows of one array (state _ROWS): event i's
        # are rows row_at[i] .. row_at[i] + row_n[i] - 1 of the parts joined (see _rows_store)
        self._row_at = np.zeros(len(ready), np.intp)
        self._row_n = np.zeros(len(ready), np.intp)
        self._parts: list[np.ndarray] = []
        self._stored = 0
        self._store: np.ndarray | None = None

    def waited(self, pool: _Pool) -> np.ndarray:
        """The pool's events (indices, in pool order) that did not start as soon as they were
        ready (``start > ready + EPS``: the others never wait, see :func:`_ready_spans`)."""
        got = self._waited.get(pool.key)
        if got is None:
            idx = packed("n", pool.events, len(pool.events))
            got = self._waited[pool.key] = idx[self.start[idx] > self.ready[idx] + EPS]
        return got

    def of(self, i: int) -> list[tuple[float, float]]:
        got = self._got.get(i)
        if got is None:
            known = self.state[i]
            if known == _WHOLE:
                return [(self._ready[i], self._tab.start[i])]
            if known == _NONE:
                return []
            if known == _ROWS:
                a = int(self._row_at[i])
                rows = self._rows_store()[a : a + int(self._row_n[i])].tolist()
                got = self._got[i] = list(map(tuple, rows))
            else:
                got = self._got[i] = _ready_spans(i, self._tab, self._levels, self._ready[i])
            self.state[i] = _LISTED
        return got

    def _rows_store(self) -> np.ndarray:
        """The rows kept by :meth:`_prime_group`, as one ``(n, 2)`` array."""
        if self._store is None:
            self._store = np.concatenate(self._parts) if self._parts else np.empty((0, 2))
            self._parts = [self._store]
        return self._store

    def of_all(self, idxs: Sequence[int]) -> list[tuple[float, float]]:
        """The spans of the events ``idxs``, event after event, in one list."""
        return list(chain.from_iterable(map(self.of, idxs)))

    def pairs(self, idx: np.ndarray) -> np.ndarray:
        """:meth:`of_all` of the events ``idx`` as an ``(n, 2)`` array (what the sweeps on arrays
        read): the whole waits read off the ready and start arrays, the listed spans placed
        between them in event order, without a Python step per event but the listed ones."""
        state = self.state
        for i in idx[state[idx] == _UNKNOWN].tolist():
            self.of(i)
        known = state[idx]
        listed = np.flatnonzero(known == _LISTED)
        kept = np.flatnonzero(known == _ROWS)
        if not len(listed) and not len(kept):
            whole = idx[known == _WHOLE]
            return np.stack((self.ready[whole], self.start[whole]), axis=1)
        got = self._got
        spans = [got[i] for i in idx[listed].tolist()]
        count = (known == _WHOLE).astype(np.intp)
        count[listed] = list(map(len, spans))
        count[kept] = self._row_n[idx[kept]]
        at = np.cumsum(count) - count  # each event's first row
        out = np.empty((int(count.sum()), 2))
        one = known == _WHOLE
        out[at[one], 0] = self.ready[idx[one]]
        out[at[one], 1] = self.start[idx[one]]
        for sel in (listed, kept):
            c = count[sel]
            n_sel = int(c.sum())
            if not n_sel:
                continue
            within = np.arange(n_sel) - np.repeat(np.cumsum(c) - c, c)  # each row's place in its event
            rows = np.repeat(at[sel], c) + within
            if sel is listed:
                out[rows] = _pairs(chain.from_iterable(spans), n_sel)
            else:  # (the same floats, read from the rows _prime_group kept)
                out[rows] = self._rows_store()[np.repeat(self._row_at[idx[sel]], c) + within]
        return out

    def prime(self, idxs: Sequence[int] | np.ndarray) -> None:
        """Work out together, on numpy arrays, the spans of the events ``idxs`` (each waited:
        start > ready + EPS) in the common cases, and record them: no semaphore could have held
        the event back during its wait (``[(ready, start)]``), one held it back over the whole
        wait (``[]``), or the event makes one query and it finds one span (that span's cut, by
        the same :func:`_uncut`); the others are left to :meth:`of`, one by one.

        Why it is the same as :func:`_ready_spans` (which makes one query ``levels.below(sem, n,
        r, st)`` per acquire ``n``, and per ``take - back > 0``): it returns ``[(r, st)]`` exactly
        when no query finds a span, and :meth:`_SemaphoreLevels.find` makes the same two binary
        searches as ``below``. It returns ``[]`` when some cut ``(a, b)`` has ``a <= r + EPS`` and
        ``b >= st``: every cut sorted before it starts no later, so none opens a span (each start
        is <= r + EPS <= cur + EPS), and this one moves ``cur`` to >= ``st``. An acquire's first
        cut is ``(max(first span's start, r) - d, its end clipped to st)`` (its end reaches
        ``st`` only if it is the last span); a ``take - back`` cut is ``(r - 1, last span's end
        clipped to st - d)``. The same float operations as there are made here. Events sharing
        their acquire and release maps make the same queries, so they are asked together.

        When at least :data:`_GENERAL_MIN` events of a group are left, they are worked out
        together in general (:meth:`_prime_group`: every cut as a column)."""
        if not VECTOR_SWEEPS:
            return  # (the reference: every event one by one)
        events = self._tab.events
        idx = np.asarray(idxs, np.intp)
        # the groups worth it (a few events: one by one is cheaper), by the shape of their
        # queries: groups of one shape are worked out together (:meth:`_prime_batch`), their
        # queries' binary searches group by group
        shapes: dict[tuple[bool, ...], list[list[int]]] = {}
        for same in self._groups(idx[self.state[idx] == _UNKNOWN]):
            ev = events[same[0]]
            rel = ev.releases
            shape = tuple([take - rel.get(sem, 0) > 0 for sem, take in ev.acquires.items()])
            shapes.setdefault(shape, []).append(same)
        for shape, batch in shapes.items():
            self._prime_batch(shape, batch)

    def _groups(self, idx: np.ndarray) -> list[list[int]]:
        """The events ``idx`` grouped by their acquire and release maps (each group in the order
        of ``idx``), the groups of at least :data:`_PRIME_MIN` events: by the scheduler's pair
        numbers when the graph carries them (:func:`~moeopt.megamoe.analysis.table.pair_numbers`:
        the same groups as the maps' identities, as the compiled pairs are shared by identity),
        on arrays; else by the maps' identities, event by event."""
        if self._pairs is None and self._cg is not None:
            self._pairs = pair_numbers(self._cg)
            self._cg = None  # (asked once)
        if self._pairs is None:
            events = self._tab.events
            groups: dict[tuple[int, int], list[int]] = {}
            for i in idx.tolist():
                ev = events[i]
                groups.setdefault((id(ev.acquires), id(ev.releases)), []).append(i)
            return [same for same in groups.values() if len(same) >= _PRIME_MIN]
        keys = self._pairs[idx]
        order = stable_order(keys)  # (stable: each group in the order of idx)
        keys, idx = keys[order], idx[order]
        starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1]))) if len(keys) else keys
        sizes = np.diff(np.append(starts, len(keys)))
        big = sizes >= _PRIME_MIN
        return [idx[a : a + c].tolist() for a, c in zip(starts[big].tolist(), sizes[big].tolist())]

    def _prime_batch(self, shape: tuple[bool, ...], batch: list[list[int]]) -> None:
        """:meth:`prime`'s common cases for the groups ``batch`` (events sharing acquire and release
        maps, group by group), whose maps make queries of one ``shape`` (per acquire, whether it
        keeps units past its own release): each group's queries found by its own binary searches
        (:meth:`_SemaphoreLevels.find`) and the spans they find read, then every test of
        :meth:`prime` made once on the groups' columns joined (each a per-event operation, so
        the same values as group by group: a scenario_basic rank has 35 groups of GMM1 tiles of
        one shape, each of about 25 events). A value read where no span was found stands in
        for a span (0.0): every test using it is masked by whether one was found, as the
        group-by-group code only read spans where one was."""
        events = self._tab.events
        sizes = [len(same) for same in batch]
        same_ids = packed("n", chain.from_iterable(batch), sum(sizes))
        lo, hi = self.ready[same_ids], self.start[same_ids]
        d = self._end()[same_ids] - hi
        waited = hi > lo + EPS
        clear = waited.copy()
        blocked = np.zeros(len(same_ids), dtype=bool)
        single = len(shape) == 1 and not shape[0]  # one query alone decides
        # per acquire (in map order), the columns of its query and of its keep query
        cols: list[list[list[np.ndarray]]] = [[[] for _ in range(7)] for _ in shape]
        at = 0
        for same, size in zip(batch, sizes):
            ev = events[same[0]]
            rel = ev.releases
            g_lo, g_hi = lo[at : at + size], hi[at : at + size]
            at += size
            for j, (sem, take) in enumerate(ev.acquires.items()):
                c = cols[j]
                k, k2, sp_from, sp_to = self._levels.find(sem, take, g_lo, g_hi)
                c[0].append(k)
                c[1].append(k2)
                if len(sp_from):
                    first = np.minimum(k, len(sp_from) - 1)
                    c[2].append(sp_from[first])
                    c[3].append(sp_to[first])
                else:
                    c[2].append(np.zeros(size))
                    c[3].append(c[2][-1])
                if shape[j]:
                    k, k2, sp_from, sp_to = self._levels.find(sem, take - rel.get(sem, 0), g_lo, g_hi)
                    c[4].append(k)
                    c[5].append(k2)
                    c[6].append(sp_to[np.maximum(k2 - 1, 0)] if len(sp_to) else np.zeros(size))
        one: np.ndarray | None = None
        for j, keeps in enumerate(shape):
            k, k2, first_from, first_to = (np.concatenate(x) for x in cols[j][:4])
            hit = k2 > k
            clear &= ~hit
            cut_from = np.maximum(first_from, lo) - d
            blocked |= hit & (cut_from <= lo + EPS) & (first_to >= hi)
            if single:
                one = np.flatnonzero((k2 - k == 1) & waited)  # (~blocked: below)
                one_from, one_to = first_from, first_to  # (k = first where a span was found)
            if keeps:
                k, k2, last_to = (np.concatenate(x) for x in cols[j][4:])
                hit = k2 > k
                clear &= ~hit
                cut_to = np.minimum(last_to, hi) - d
                blocked |= hit & (cut_to >= hi)
        blocked &= waited
        self.state[same_ids[clear]] = _WHOLE
        self.state[same_ids[blocked]] = _NONE
        if one is not None:
            # one query, one span (clipped to [r, st) as below() clips it): _ready_spans's
            # only cut is (span start - d, span end), and _uncut gives the rest of the wait,
            # here for every such event at once (_uncut_flat: the same comparisons, column by
            # column), kept as rows
            one = one[~blocked[one]]
            if len(one):
                lo1, hi1, a1, b1 = lo[one], hi[one], one_from[one], one_to[one]
                cut_from = np.where(a1 < lo1, lo1, a1) - d[one]
                cut_to = np.where(b1 > hi1, hi1, b1)
                self._keep_rows(same_ids[one], *_uncut_flat(lo1, hi1, [cut_from], [cut_to]))
        at = 0
        for same, size in zip(batch, sizes):
            g_ids = same_ids[at : at + size]
            at += size
            rest = g_ids[self.state[g_ids] == _UNKNOWN]
            if len(rest) >= _GENERAL_MIN:
                self._prime_group(rest, events[same[0]])

    def end_array(self) -> np.ndarray:
        """The events' end times as an array (made when first asked)."""
        return self._end()

    def _end(self) -> np.ndarray:
        if self.end is None:
            self.end = self._cols.end
        return self.end

    def _prime_group(self, group: np.ndarray, ev: Event) -> None:
        """The spans of the events ``group`` (sharing ``ev``'s acquire and release maps) worked
        out together, in general; an event whose queries find more than
        :data:`_PRIME_MAX_CUTS` spans in all is left to :meth:`of`, one by one.

        Why it is :func:`_ready_spans`: per event it makes that function's queries by the same
        binary searches (:meth:`_SemaphoreLevels.find`) and clips the spans found as ``below``
        does (the first starts no earlier than ``r``, the last ends no later than ``st``); it
        makes the same cuts of them with the same float operations (``(start - d, end)`` per
        span of an acquire, ``(r - 1, last end - d)`` per ``take - back > 0``); no cut at all
        gives ``[(r, st)]``. It sorts each event's cuts by ``(from, to)``, as the sort of
        several lists does (one list is sorted already: its spans are disjoint, in order), and
        runs :func:`_uncut` on them column by column (:func:`_uncut_flat`), keeping the spans
        as rows of an array (state ``_ROWS``)."""
        lo, hi = self.ready[group], self.start[group]
        d = self._end()[group] - hi
        # every query of these events: (need, whether only its last span makes a cut)
        queries: list[tuple[str, int, bool]] = []
        for sem, take in ev.acquires.items():
            queries.append((sem, take, False))
            keep = take - ev.releases.get(sem, 0)
            if keep > 0:
                queries.append((sem, keep, True))
        found = [(last, *self._levels.find(sem, need, lo, hi)) for sem, need, last in queries]
        n_cuts = np.zeros(len(group), np.int64)
        for last, k, k2, _f, _t in found:
            n_cuts += (k2 > k) if last else (k2 - k)
        waited = hi > lo + EPS  # (else _ready_spans finds none: st <= r + EPS)
        # no cut: the whole wait (no semaphore could have held the event back)
        self.state[group[waited & (n_cuts == 0)]] = _WHOLE
        self.state[group[~waited]] = _NONE
        cut = np.flatnonzero(waited & (n_cuts > 0) & (n_cuts <= _PRIME_MAX_CUTS))
        if len(cut) < _PRIME_MIN:
            return  # (a few events with cuts: one by one is cheaper)
        lo, hi, d = lo[cut], hi[cut], d[cut]
        cut_from: list[np.ndarray] = []
        cut_to: list[np.ndarray] = []
        for last, k, k2, sp_from, sp_to in found:
            _cuts(cut_from, cut_to, last, k[cut], k2[cut], sp_from, sp_to, lo, hi, d)
        self._keep_rows(group[cut], *_uncut_flat(lo, hi, cut_from, cut_to))

    def _keep_rows(self, ids: np.ndarray, flat: np.ndarray, counts: np.ndarray) -> None:
        """Keep the spans of the events ``ids`` (:func:`_uncut_flat`'s rows ``flat``, ``counts``
        per event, in the order of ``ids``) as rows of the store (state ``_ROWS``)."""
        self._row_at[ids] = self._stored + np.cumsum(counts) - counts
        self._row_n[ids] = counts
        self._parts.append(flat)
        self._stored += len(flat)
        self._store = None
        self.state[ids] = _ROWS


def _cuts(
    cut_from: list[np.ndarray],
    cut_to: list[np.ndarray],
    last: bool,
    k: np.ndarray,
    k2: np.ndarray,
    sp_from: np.ndarray,
    sp_to: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    d: np.ndarray,
) -> None:
    """Append the cut columns of one query of :func:`_ready_spans` for every event (row) at once:
    the spans ``k .. k2 - 1`` of the query (``k2 <= k``: none) clipped to ``[lo, hi)`` as
    :meth:`_SemaphoreLevels.below` clips them, then ``(start - d, end)`` per span, or the one
    cut ``(lo - 1, last end - d)`` when ``last``. A missing cut is ``(inf, inf)``: it sorts
    after every real one and :func:`_uncut_rows` stops at it (``a >= st``)."""
    n = len(k)
    top = len(sp_from) - 1
    inf = np.full(n, np.inf)
    if last:
        has = k2 > k
        if has.any():
            end = sp_to[np.maximum(k2 - 1, 0)]  # (k2 > k >= 0 where it is read)
            end = np.where(end > hi, hi, end)
            cut_from.append(np.where(has, lo - 1.0, inf))
            cut_to.append(np.where(has, end - d, inf))
        return
    count = k2 - k
    for j in range(int(count.max()) if n else 0):
        has = count > j
        at = np.minimum(k + j, top)  # (k >= 0; past the last span only where not read)
        a, b = sp_from[at], sp_to[at]
        if j == 0:
            a = np.where(a < lo, lo, a)
        b = np.where((j == count - 1) & (b > hi), hi, b)
        cut_from.append(np.where(has, a - d, inf))
        cut_to.append(np.where(has, b, inf))


def _uncut_rows(
    r: np.ndarray, st: np.ndarray, cut_from: list[np.ndarray], cut_to: list[np.ndarray]
) -> list[list[tuple[float, float]]]:
    """:func:`_uncut_flat` as one list of spans per row."""
    flat, counts = _uncut_flat(r, st, cut_from, cut_to)
    pairs = list(map(tuple, flat.tolist()))
    out: list[list[tuple[float, float]]] = []
    at = 0
    for upto in np.cumsum(counts).tolist():
        out.append(pairs[at:upto])
        at = upto
    return out


def _uncut_flat(
    r: np.ndarray, st: np.ndarray, cut_from: list[np.ndarray], cut_to: list[np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_uncut` of every row at once, as ``(spans, count per row)``: the spans an ``(n, 2)``
    array of them all, row after row (kept so: read back as lists only when asked one event at
    a time, :meth:`_SpanCache.of`; the sweeps read them as arrays, and the lists and their
    packing back cost 7.3M instructions of pto M=2048's GMM2 pool, callgrind). Row ``i``'s cuts
    are ``(cut_from[c][i], cut_to[c][i])`` over the columns ``c`` (each row's real cuts sorted
    by ``(from, to)`` here first, missing ones ``(inf, inf)`` after them). The loop over the
    cuts runs column by column with the same comparisons (a row that would have left the loop
    keeps its ``cur``), and each row's spans are listed in the order the loop appends them."""
    n = len(r)
    a_all = np.stack(cut_from, 1) if cut_from else np.empty((n, 0))
    b_all = np.stack(cut_to, 1) if cut_to else np.empty((n, 0))
    if a_all.shape[1] > 1:
        by = np.lexsort((b_all, a_all), axis=1)  # by from, then to: Python's tuple order
        rows = np.arange(n)[:, None]
        a_all, b_all = a_all[rows, by], b_all[rows, by]
    cur = r.copy()
    alive = np.ones(n, bool)
    froms, tos, keep = [], [], []
    for c in range(a_all.shape[1]):
        a, b = a_all[:, c], b_all[:, c]
        alive &= ~(a >= st)  # if a >= st: break
        froms.append(cur)
        tos.append(np.where(st < a, st, a))  # min(a, st)
        keep.append(alive & (a > cur + EPS))
        cur = np.where(alive & (b > cur), b, cur)  # max(cur, b): b only when larger
        alive &= ~(cur >= st)  # if cur >= st: break
    froms.append(cur)
    tos.append(st)
    keep.append(cur < st - EPS)
    f, t = np.stack(froms, 1), np.stack(tos, 1)
    ok = np.stack(keep, 1) & (t > f + EPS)
    # row by row, in append order
    return np.stack((f[ok], t[ok]), axis=1), ok.sum(1)


_UNKNOWN, _WHOLE, _NONE, _LISTED, _ROWS = 0, 1, 2, 3, 4
"""What :class:`_SpanCache` knows of an event's ready spans (its ``state``): nothing yet, the
whole wait ``[(ready, start)]``, none, the list it keeps, or rows of its array of them."""

_GENERAL_MIN = 64
"""Events of a group left by :meth:`_SpanCache.prime`'s common cases from which they are worked
out together by :meth:`_SpanCache._prime_group` (measured, callgrind: its ~100 numpy calls cost
about as many instructions as 80 one-by-one :func:`_ready_spans`, ~20k each on pto M=2048)."""

_PRIME_MAX_CUTS = 12
"""Cuts (spans found by an event's queries) beyond which :meth:`_SpanCache.prime` leaves an
event to one-by-one :func:`_ready_spans` (assumed: each cut is a column of every row of its
group, so a rare event with many would widen every row's arrays; the answer is the same)."""

_PRIME_MIN = 8
"""Events sharing acquire / release maps below which :meth:`_SpanCache.prime` leaves them to
one-by-one :func:`_ready_spans` (assumed: numpy's per-call overhead is a few µs, about what one
event's spans cost in Python; the answer is the same either way)."""


def _bound_member(
    pool: _Pool, i: int, tab: Table, ready: list[float], index: Mapping[str, int], members: set[str]
) -> str:
    """The member a ready event of ``pool`` is tied to by its colocation partner (late-bound
    events whose partner started before the event was ready), else ``""`` (any member)."""
    if not pool.late:
        return ""
    ev = tab.events[i]
    if ev.colocate_with is None:
        return ""
    j = index.get(ev.colocate_with)
    if j is not None and tab.start[j] <= ready[i] + EPS:
        return next((r for r in tab.res[i] if r in members), "")
    return ""


def _ready_points(
    pool: _Pool,
    tab: Table,
    ready: list[float],
    spans: _SpanCache,
    index: Mapping[str, int],
    all_busy: tuple[list[float], list[float]],
) -> list[tuple[float, float, str]] | np.ndarray:
    """The spans ``(from, to, member)`` where the pool's events were ready but not started (empty
    when none of them ever waited); ``member``: the member the event is bound to, ``""`` when any
    idle member could run it.

    An event whose whole wait ``[ready, start)`` lies in one interval of ``all_busy`` (every
    member of the pool busy) is left out, without computing its ready spans: with no idle
    member, the sweep's avoidable idle is 0 over every stretch of its wait and no sample is
    taken there; and leaving out its points only merges stretches inside that interval (the
    interval's own ends are busy points, which stay), each adding 0 — the sums and samples are
    the same to the bit."""
    members = set(pool.members)
    idx = spans.waited(pool)  # the events that started as soon as they were ready never waited
    busy_from, busy_to = all_busy
    if busy_from and len(idx):
        # the same test as bisect_right(busy_from, ready) - 1 = k >= 0 and busy_to[k] >= start:
        # waited while every member was busy, nothing avoidable (see above)
        k = np.searchsorted(packed("d", busy_from, len(busy_from)), spans.ready[idx], side="right") - 1
        inside = (k >= 0) & (packed("d", busy_to, len(busy_to))[np.maximum(k, 0)] >= spans.start[idx])
        idx = idx[~inside]
    spans.prime(idx)
    ids: list[int] = idx.tolist()
    if not pool.late:  # (_bound_member: "" for every event of a pool that is not late-bound)
        if VECTOR_SWEEPS:  # (for _free_sweep: the spans as an array)
            return spans.pairs(idx)
        return [(a, b, "") for a, b in spans.of_all(ids)]
    of = spans.of
    return [(a, b, _bound_member(pool, i, tab, ready, index, members)) for i in ids for a, b in of(i)]


def _points(waits: list[tuple[float, float, str]]) -> list[_Point]:
    """The ready points of :func:`_sweep` of the spans of :func:`_ready_points`."""
    pts: list[_Point] = []
    for a, b, bound in waits:
        pts.append((a, 1, bound, 1))
        pts.append((b, 1, bound, -1))
    return pts


def _all_busy(merged: dict[str, Busy]) -> tuple[list[float], list[float]]:
    """The maximal intervals ``[from, to)`` in which every member of ``merged`` is busy, as two
    sorted lists (``to`` is ``inf`` for an interval still open at the end), by the state
    :func:`_sweep` holds between two points: every point at one time applied together."""
    n = len(merged)
    iv = _intervals(merged)
    if not len(iv):
        return [], []
    _t, level = _busy_level(merged)
    # a member's merged intervals are disjoint, so at most n are busy: "every member busy" is
    # level == n, and the intervals open where it becomes so and close where it stops
    full = level == n
    before = np.concatenate(([False], full[:-1]))
    froms: list[float] = _t[full & ~before].tolist()
    tos: list[float] = _t[~full & before].tolist()
    if len(froms) > len(tos):
        tos.append(math.inf)
    return froms, tos


def _intervals(merged: dict[str, Busy]) -> np.ndarray:
    """Every member's merged busy intervals as one ``(k, 2)`` array (members in dict order)."""
    if isinstance(merged, _Merged):
        if merged.array is None:
            merged.array = _joined(merged)
        return merged.array
    return _joined(merged)


def _joined(merged: dict[str, Busy]) -> np.ndarray:
    values = list(merged.values())
    if not any(isinstance(v, np.ndarray) for v in values):
        return _pairs(chain.from_iterable(values), sum(map(len, values)))
    return np.concatenate([v if isinstance(v, np.ndarray) else _pairs(v, len(v)) for v in values])


def _busy_level(merged: dict[str, Busy]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_level` of :func:`_intervals` of ``merged``: how many members are busy after each
    distinct time. Kept on a :class:`_Merged`: a pool and the role holding the same members
    share one (every pool of a scenario_basic rank is all of one role's members), and both the
    all-busy intervals (:func:`_all_busy`) and the idle windows (:func:`_idle_windows`) read it."""
    if isinstance(merged, _Merged):
        if merged.level is None:
            merged.level = _level(_intervals(merged))
        return merged.level
    return _level(_intervals(merged))


def _rows(iv: Busy) -> list[Interval] | list[list[float]]:
    """Merged intervals as pairs of Python floats, for the point-by-point sweeps."""
    return iv.tolist() if isinstance(iv, np.ndarray) else iv


def _pairs(pairs: Iterable[tuple[float, float]], n: int) -> np.ndarray:
    """``n`` pairs ``(a, b)`` as an ``(n, 2)`` float array, read flat (np.array of a list of
    tuples discovers each tuple's shape and type, which cost about twice as much)."""
    return packed("d", chain.from_iterable(pairs), 2 * n).reshape(n, 2)


def _as_pairs(pairs: Sequence[tuple[float, float]] | np.ndarray) -> np.ndarray:
    """Spans ``(a, b)`` as an ``(n, 2)`` float array (an array of them as it is)."""
    return pairs if isinstance(pairs, np.ndarray) else _pairs(pairs, len(pairs))


class _Merged(dict[str, Busy]):
    """Members -> merged busy intervals, and (once asked) all of them as one array."""

    array: np.ndarray | None = None
    all_busy: tuple[list[float], list[float]] | None = None
    level: tuple[np.ndarray, np.ndarray] | None = None


def _grouped(t: np.ndarray, *deltas: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """The distinct values of ``t`` in increasing order and, for each of ``deltas`` (one delta per
    entry of ``t``), its running sum after every change at or before each of them: the integer
    state a sweep holds between two distinct times when it applies all points at one time
    together (the sums are of integers, so exact in any order)."""
    order = np.argsort(t, kind="stable")
    ts = t[order]
    last = np.flatnonzero(np.append(ts[1:] != ts[:-1], True)) if len(ts) else np.zeros(0, dtype=np.intp)
    return ts[last], [np.cumsum(d[order])[last] for d in deltas]


def _level(iv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct start / end times of the intervals ``iv`` and how many are open after each."""
    k = len(iv)
    t, (level,) = _grouped(
        np.concatenate((iv[:, 0], iv[:, 1])), np.concatenate((np.ones(k, np.int64), -np.ones(k, np.int64)))
    )
    return t, level


def _free_stretches(
    waits: Sequence[tuple[float, float]] | np.ndarray,
    merged: dict[str, Busy],
    counted: set[str] | frozenset[str],
    n: int,
    span: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(from, to, avoidable, idle, ready)`` of the stretches of a sweep with avoidable idle,
    in time order, when no ready event is tied to a member: the numpy form of the stretches
    :func:`_sweep` (and :func:`_role_sweep` with one class) walks point by point.

    Why it is the same: between two consecutive distinct point times the sweeps hold integer
    state, the number of busy members among ``counted`` (each member's merged intervals are
    disjoint, so that is the running sum of +1 / -1 at their starts / ends) and the number of
    ready events (the running sum of the waits' +1 / -1), which :func:`_grouped` gives exactly.
    The sweeps account a stretch ``[prev, t)`` at each distinct point time ``t < span`` with
    ``t > prev``, where ``prev`` is the previous such time (0.0 at first), with the state before
    ``t``; with no tied event its avoidable members are ``min(ready, idle)`` (``_matched`` of one
    class), ``idle = n - busy``. Every member of ``merged`` contributes its times even when not
    counted, as in the sweeps: the stretches, and so the floating-point products summed, are the
    same ones."""
    iv = _intervals(merged)
    w = _as_pairs(waits)
    k, m = len(iv), len(w)
    mine = np.repeat(
        np.array([r in counted for r in merged], dtype=np.int64), [len(v) for v in merged.values()]
    )
    zeros = np.zeros(k, np.int64)
    t, (busy, ready) = _grouped(
        np.concatenate((iv[:, 0], iv[:, 1], w[:, 0], w[:, 1])),
        np.concatenate((mine, -mine, np.zeros(2 * m, np.int64))),
        np.concatenate((zeros, zeros, np.ones(m, np.int64), -np.ones(m, np.int64))),
    )
    cut = int(np.searchsorted(t, span, side="left"))  # the points before span
    t = t[:cut]
    busy_before = np.concatenate(([0], busy[: cut - 1])) if cut else busy[:0]
    ready_before = np.concatenate(([0], ready[: cut - 1])) if cut else ready[:0]
    prev = np.concatenate(([0.0], t[:-1]))
    prev = np.where(prev > 0.0, prev, 0.0)  # prev only moves forward, from 0.0
    idle = np.maximum(0, n - busy_before)
    av = np.minimum(ready_before, idle)
    keep = (t > prev) & (av > 0)  # a stretch with av == 0 adds exactly 0.0
    return prev[keep], t[keep], av[keep], idle[keep], ready_before[keep]


def _free_sweep(
    waits: list[tuple[float, float, str]] | np.ndarray,
    merged: dict[str, Busy],
    counted: set[str],
    n_mem: int,
    span: float,
    key: str,
    max_samples: int,
) -> tuple[float, list[IdleSample]]:
    """``(avoidable, samples)`` of :func:`_sweep` for a pool none of whose ready events is bound to
    a member, from :func:`_free_stretches`; the products are summed in time order, one by one,
    as the sweep sums them."""
    pairs = waits if isinstance(waits, np.ndarray) else [(a, b) for a, b, _m in waits]
    prev, t, av, idle, ready = _free_stretches(pairs, merged, counted, n_mem, span)
    avoid = 0.0
    for x in (av * (t - prev)).tolist():
        avoid += x
    samples: list[IdleSample] = []
    for j in np.flatnonzero(t - prev > EPS)[:max_samples].tolist():
        samples.append(
            {
                "stage": key,
                "from_us": float(prev[j]),
                "to_us": float(t[j]),
                "idle_members": int(idle[j]),
                "ready": int(ready[j]),
            }
        )
    return avoid, samples


def _sweep(
    pts: list[_Point],
    merged: dict[str, Busy],
    n_mem: int,
    span: float,
    key: str,
    max_samples: int,
) -> tuple[float, float, list[IdleSample]]:
    """``(forced, avoidable, samples)`` of one pool: one pass over its ready points and its
    members' busy intervals in time order, up to ``span`` (see :func:`idle_decomposition`)."""
    for r, iv in merged.items():
        for a, b in _rows(iv):
            pts.append((a, 0, r, 1))
            pts.append((b, 0, r, -1))
    pts.sort()
    samples: list[IdleSample] = []
    busy: dict[str, int] = defaultdict(int)
    bound_ready: dict[str, int] = defaultdict(int)
    # bound_idle: idle members with a bound ready event
    busy_n = free_ready = bound_idle = ready_n = 0
    prev = 0.0
    forced = avoid = 0.0
    k = 0
    while k < len(pts) and pts[k][0] < span:
        t = pts[k][0]
        if t > prev:
            idle_n = max(0, n_mem - busy_n)
            av = bound_idle + min(free_ready, idle_n - bound_idle)
            avoid += av * (t - prev)
            forced += (idle_n - av) * (t - prev)
            if av > 0 and t - prev > EPS and len(samples) < max_samples:
                samples.append(
                    {"stage": key, "from_us": prev, "to_us": t, "idle_members": idle_n, "ready": ready_n}
                )
            prev = t
        while k < len(pts) and pts[k][0] <= t:
            _t, kind, m, d = pts[k]
            k += 1
            if kind == 0:
                was_idle = busy[m] == 0
                busy[m] += d
                now_idle = busy[m] == 0
                if was_idle != now_idle:
                    busy_n += -1 if now_idle else 1
                    if bound_ready[m] > 0:
                        bound_idle += 1 if now_idle else -1
                continue
            ready_n += d
            if not m:
                free_ready += d
                continue
            before = bound_ready[m] > 0
            bound_ready[m] += d
            after = bound_ready[m] > 0
            if before != after and busy[m] == 0:
                bound_idle += 1 if after else -1
    if span > prev:
        forced += max(0, n_mem - busy_n) * (span - prev)
    return forced, avoid, samples


def _class_no(classes: list[frozenset[str]], own: frozenset[str]) -> int:
    """The number of the class ``own`` among ``classes``, appended if it is not there yet."""
    if own not in classes:
        classes.append(own)
    return classes.index(own)


def _role_ledger(
    rg: RankGraph,
    tab: Table,
    pools: list[_Pool],
    merged_for: Callable[[Sequence[str]], dict[str, Busy]],
    spans: _SpanCache,
    ready: list[float],
    index: Mapping[str, int],
    span: float,
) -> dict[str, RoleIdle]:
    """Per role: members, busy, forced and avoidable member-µs before ``span``, with busy +
    forced + avoidable = members x span. The ready events of every pool on the role compete for
    its idle members; each may use the members of its own pool (or only the one its colocation
    partner tied it to), and the avoidable idle at an instant is a maximum matching of ready
    events to idle members (:func:`_matched`)."""
    cg = rg.graph.compiled()
    role_members: dict[str, list[str]] = defaultdict(list)
    for name in cg.res_names:
        role_members[name.rsplit(".", 1)[-1]].append(name)
    out: dict[str, RoleIdle] = {}
    for role in sorted(role_members):
        members = role_members[role]
        mset = set(members)
        merged = merged_for(members)
        iv = _intervals(merged)
        before = iv[:, 0] < span
        # the same terms min(b, span) - a, in the same order (members, then their intervals),
        # summed by the same builtin sum as a generator over the lists would be
        busy = sum((np.minimum(iv[before, 1], span) - iv[before, 0]).tolist())
        classes: list[frozenset[str]] = []
        # the waiting events on the role, pool after pool: (events, class, []) for a pool that
        # is not late-bound (every event free, of the pool's class), (events, -1, rows) for a
        # late-bound one, a row (event, bound member, class) per event
        chunks: list[tuple[np.ndarray, int, list[tuple[int, str, int]]]] = []
        any_bound = False  # whether some row is tied to a member
        windows = _idle_windows(merged, span)
        w_starts = np.array([a for a, _b in windows], dtype=float)
        w_ends = np.array([b for _a, b in windows], dtype=float)
        for pool in pools:
            own = frozenset(m for m in pool.members if m in mset)
            if not own:
                continue
            cls = -1
            idx = spans.waited(pool)  # start > ready + EPS
            if not windows or not len(idx):
                continue
            # a wait during which every member was busy cannot make idle avoidable: skip the
            # (costly) ready spans of such events; the windows are disjoint and sorted, so the
            # last one starting before the event's start ends latest (k = bisect_left(w_starts,
            # start) == 0 or windows[k - 1] ends at or before ready: skipped)
            k = np.searchsorted(w_starts, spans.start[idx], side="left")
            idx = idx[(k > 0) & (w_ends[np.maximum(k - 1, 0)] > spans.ready[idx])]
            res = tab.res
            ids = idx.tolist()
            if not pool.late:
                # (_bound_member: "" for every event of a pool that is not late-bound) the
                # events on the role's members, all free: one class (whether an event holds a
                # member of the role asked once per distinct resource tuple)
                on_role = {rs: not mset.isdisjoint(rs) for rs in set(map(res.__getitem__, ids))}
                free = idx[np.fromiter(map(on_role.__getitem__, map(res.__getitem__, ids)), bool, len(ids))]
                if len(free):
                    chunks.append((free, _class_no(classes, own), []))
                continue
            rows: list[tuple[int, str, int]] = []
            for i in ids:
                if mset.isdisjoint(res[i]):
                    continue
                bound = _bound_member(pool, i, tab, ready, index, mset)
                if not bound and cls < 0:
                    cls = _class_no(classes, own)
                rows.append((i, bound, cls if not bound else -1))
                if bound:
                    any_bound = True
            if rows:
                chunks.append((np.array([i for i, _b, _c in rows], np.intp), -1, rows))
        if chunks:
            spans.prime(np.concatenate([ids for ids, _c, _rows in chunks]))
        idle = len(members) * span - busy
        if VECTOR_SWEEPS and not any_bound and len(classes) <= _VECTOR_CLASSES:
            # free ready events only (none tied to a member): the stretches on arrays, each
            # class's events in the order of the rows
            by_class: list[list[np.ndarray]] = [[] for _ in classes]
            for ids_of, cls, rows in chunks:
                by_class[rows[0][2] if rows else cls].append(ids_of)  # (a pool's rows: one class)
            waits_of = [spans.pairs(np.concatenate(x)) if x else np.empty((0, 2)) for x in by_class]
            avoid = 0.0
            if any(map(len, waits_of)):
                prev, t, av = _class_stretches(waits_of, merged, members, classes, span)
                for x in (av * (t - prev)).tolist():  # in time order, one by one, as _role_sweep sums
                    avoid += x
        else:
            pts: list[_RolePoint] = []
            for ids_of, cls, rows in chunks:
                for i, bound, c in rows or [(i, "", cls) for i in ids_of.tolist()]:
                    for a, b in spans.of(i):
                        pts.append((a, 1, bound, c, 1))
                        pts.append((b, 1, bound, c, -1))
            avoid = _role_sweep(pts, merged, members, classes, span) if pts else 0.0
        out[role] = {
            "members": len(members),
            "span_us": span,
            "busy_core_us": busy,
            "forced_core_us": idle - avoid,
            "avoidable_core_us": avoid,
        }
    return out


def _idle_windows(merged: dict[str, Busy], span: float) -> list[Interval]:
    """The maximal intervals of ``[0, span)`` in which at least one member is idle."""
    n = len(merged)
    iv = _intervals(merged)
    out: list[Interval] = []
    start: float | None = 0.0
    if len(iv):
        t, level = _busy_level(merged)
        cut = int(np.searchsorted(t, span, side="left"))
        # the windows change only where every member becomes busy or stops being so (at a time
        # where some end and others start, the ends come first: the level dips below n and
        # comes back at that one time, which opens and closes no window, as here)
        full = level[:cut] == n
        change = np.flatnonzero(full != np.concatenate(([False], full[:-1])))
        for at, now_full in zip(t[change].tolist(), full[change].tolist()):
            if now_full:
                if start is not None and at > start + EPS:
                    out.append((start, at))
                start = None
            else:
                start = at
    if start is not None and span > start + EPS:
        out.append((start, span))
    return out


_RolePoint = tuple[float, int, str, int, int]
"""``(t, kind, member, class, delta)``: kind 0 = a member's busy interval starts (+1) / ends
(-1); kind 1 = an event becomes ready (+1) / stops (-1), tied to ``member`` (``""``: free) or,
when free, able to use the members of ``classes[class]``."""


_VECTOR_CLASSES = 8
"""assumed: the most classes of free ready events on one role whose stretches are found on
arrays (:func:`_class_stretches` evaluates every one of the 2**classes - 1 class sets per stretch);
a role has a few (one per pool whose members it holds: two on the V1 profile's AIC)."""


def _class_stretches(
    waits_of: Sequence[Sequence[tuple[float, float]] | np.ndarray],
    merged: dict[str, Busy],
    members: list[str],
    classes: list[frozenset[str]],
    span: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(from, to, avoidable)`` of the stretches of :func:`_role_sweep` with avoidable idle, in
    time order, when no ready event is tied to a member: ``waits_of[c]`` are the ready spans of
    the free events of class ``c``.

    Why it is the same: between two consecutive distinct point times the sweep holds integer
    state -- the free ready events of each class, and the busy members of each *atom* (the
    members that the same classes may use; each member's merged intervals are disjoint, so an
    atom's busy members are the running sum of +1 / -1 at its members' interval starts and
    ends) -- which :func:`_grouped` gives exactly, and it accounts each stretch ``[prev, t)``
    with the state before ``t`` as :func:`_free_stretches` describes. The avoidable members of a
    stretch are :func:`_matched` of that state, here for every stretch at once: Hall's deficiency
    ``max(0, max over class sets T of Σ_{c∈T} waiting[c] − idle members of the atoms meeting T)``
    taken over every non-empty set of classes instead of the sets of waiting ones (adding a
    class with no waiting event to T adds nothing to its need and no less to its idle members,
    and a set of classes with none waiting has a deficiency <= 0), so the same integer."""
    n_cls = len(classes)
    mask_of = {m: sum(1 << c for c, cs in enumerate(classes) if m in cs) for m in members}
    atoms = sorted({a for a in mask_of.values() if a})
    size = [sum(1 for m in members if mask_of[m] == a) for a in atoms]
    iv = _intervals(merged)
    k = len(iv)
    row_mask = np.repeat(
        np.array([mask_of[r] for r in merged], dtype=np.int64), [len(v) for v in merged.values()]
    )
    times = [iv[:, 0], iv[:, 1]]
    zeros_iv = np.zeros(k, np.int64)
    n_w = [len(w) for w in waits_of]
    n_all = sum(n_w)
    pairs = [_as_pairs(w) for w in waits_of]
    times += [p[:, 0] for p in pairs] + [p[:, 1] for p in pairs]
    no_waits = np.zeros(2 * n_all, np.int64)
    deltas: list[np.ndarray] = []
    for a in atoms:
        mine = (row_mask == a).astype(np.int64)
        deltas.append(np.concatenate((mine, -mine, no_waits)))
    for c in range(n_cls):
        up = np.concatenate([np.full(n, 1 if d == c else 0, np.int64) for d, n in enumerate(n_w)])
        deltas.append(np.concatenate((zeros_iv, zeros_iv, up, -up)))
    t, state = _grouped(np.concatenate(times), *deltas)
    cut = int(np.searchsorted(t, span, side="left"))  # the points before span
    t = t[:cut]
    before = [np.concatenate(([0], x[: cut - 1])) if cut else x[:0] for x in state]
    idle = [size[j] - before[j] for j in range(len(atoms))]
    waiting = before[len(atoms) :]
    total = sum(waiting, np.zeros(len(t), np.int64))
    worst = np.zeros(len(t), np.int64)
    for chosen in range(1, 1 << n_cls):
        need = sum((waiting[c] for c in range(n_cls) if chosen >> c & 1), np.zeros(len(t), np.int64))
        have = sum((idle[j] for j, a in enumerate(atoms) if a & chosen), np.zeros(len(t), np.int64))
        worst = np.maximum(worst, need - have)
    av = total - worst
    prev = np.concatenate(([0.0], t[:-1]))
    prev = np.where(prev > 0.0, prev, 0.0)  # prev only moves forward, from 0.0
    keep = (t > prev) & (av > 0)  # a stretch with av == 0 adds exactly 0.0
    return prev[keep], t[keep], av[keep]


def _role_sweep(
    pts: list[_RolePoint],
    merged: dict[str, Busy],
    members: list[str],
    classes: list[frozenset[str]],
    span: float,
) -> float:
    """Avoidable member-µs of one role: one pass in time order over its members' busy intervals
    and its events' ready spans, up to ``span``."""
    for r, iv in merged.items():
        for a, b in _rows(iv):
            pts.append((a, 0, r, -1, 1))
            pts.append((b, 0, r, -1, -1))
    pts.sort()
    # atoms: members grouped by the classes that may use them
    sig_of = {m: frozenset(c for c, cs in enumerate(classes) if m in cs) for m in members}
    atoms = sorted(set(sig_of.values()), key=sorted)
    atom_of = {m: atoms.index(sig_of[m]) for m in members}
    free_idle = [0] * len(atoms)  # idle members of each atom with no tied ready event
    for m in members:
        free_idle[atom_of[m]] += 1
    busy: dict[str, int] = defaultdict(int)
    tied: dict[str, int] = defaultdict(int)
    waiting = [0] * len(classes)  # free ready events per class
    bound_idle = 0  # idle members with a tied ready event
    prev = 0.0
    avoid = 0.0
    k = 0
    while k < len(pts) and pts[k][0] < span:
        t = pts[k][0]
        if t > prev:
            av = bound_idle + (_matched(waiting, atoms, free_idle) if any(waiting) else 0)
            avoid += av * (t - prev)
            prev = t
        while k < len(pts) and pts[k][0] <= t:
            _t, kind, m, cls, d = pts[k]
            k += 1
            if kind == 0:
                was_idle = busy[m] == 0
                busy[m] += d
                now_idle = busy[m] == 0
                if was_idle != now_idle:
                    if tied[m] > 0:
                        bound_idle += 1 if now_idle else -1
                    else:
                        free_idle[atom_of[m]] += 1 if now_idle else -1
                continue
            if not m:
                waiting[cls] += d
                continue
            before = tied[m] > 0
            tied[m] += d
            after = tied[m] > 0
            if before != after and busy[m] == 0:
                bound_idle += 1 if after else -1
                free_idle[atom_of[m]] += -1 if after else 1
    return avoid


def _matched(waiting: list[int], atoms: list[frozenset[int]], free_idle: list[int]) -> int:
    """The largest number of free ready events that idle members can take at once: ``waiting[c]``
    events of class ``c``, each able to use the idle members of the atoms whose signature holds
    ``c``. By Hall's theorem (deficiency form) it is ``Σ waiting − max(0, max over class sets T of
    Σ_{c∈T} waiting[c] − idle members usable by some c ∈ T)``; a role has a few classes at most."""
    active = [c for c, n in enumerate(waiting) if n > 0]
    total = sum(waiting[c] for c in active)
    if len(active) == 1:
        c = active[0]
        return min(total, sum(n for a, n in zip(atoms, free_idle) if c in a))
    worst = 0
    for mask in range(1, 1 << len(active)):
        chosen = {active[j] for j in range(len(active)) if mask >> j & 1}
        need = sum(waiting[c] for c in chosen)
        have = sum(n for a, n in zip(atoms, free_idle) if a & chosen)
        worst = max(worst, need - have)
    return total - worst


def _exemption(rg: RankGraph, stage: str, late: bool) -> str | None:
    """Why the work-conservation guardrail does not check a pool of ``stage`` (None: it does)."""
    if not late:
        return "statically pinned pool"
    if stage in rg.colocated_stages:
        return "colocated with its producer tile"
    return None


class _SemaphoreLevels:
    """Free units of every semaphore over time in the final schedule (changes at one instant merged)."""

    def __init__(self, rg: RankGraph, tab: Table) -> None:
        self._rg, self._tab = rg, tab
        self._built = False
        self.cap: dict[str, int] = {}
        self._cache: dict[tuple[str, int], tuple[list[tuple[float, float]], list[float], list[float]]] = {}
        self._np: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._np_spans: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = {}
        self.times: dict[str, Sequence[float]] = {}
        self.levels: dict[str, Sequence[int]] = {}
        self._changes: dict[str, list[tuple[float, int]]] = {}

    def _build(self) -> None:
        self._built = True
        self.cap = dict(self._rg.graph.semaphores)

    def _changes_of(self, sem: str) -> list[tuple[float, int]]:
        """The (time, delta) changes of ``sem``, in no particular order; every semaphore's are
        collected in one pass when the first is asked for (only for schedules that carry no
        recorded levels, see :meth:`_curve`)."""
        if not self._changes:
            start, end = self._tab.start, self._tab.end
            cg = self._rg.graph.compiled()  # the same events in the same order, semaphores by index
            by_index: dict[int, list[tuple[float, int]]] = defaultdict(list)
            for i, pairs in enumerate(cg.acq):
                if pairs:
                    t = start[i]
                    for k, a in pairs:
                        by_index[k].append((t, -a))
            for i, pairs in enumerate(cg.rel):
                if pairs:
                    t = end[i]
                    for k, r in pairs:
                        by_index[k].append((t, r))
            self._changes = {name: by_index.get(k, []) for k, name in enumerate(cg.sem_names)}
        return self._changes.get(sem, [])

    def _curve(self, sem: str) -> tuple[Sequence[float], Sequence[int]]:
        """Breakpoint times and the free units from each on (changes at one time merged)."""
        if sem not in self.times:
            recorded = self._tab.schedule.semaphore_levels(sem)
            if recorded is not None:
                # the scheduler's own record of these start and end times: the same curve
                self.times[sem], self.levels[sem] = recorded
                return recorded
            lvl = self.cap.get(sem, 0)
            ts: list[float] = []
            ls: list[int] = []
            for t, d in sorted(self._changes_of(sem)):
                lvl += d
                if ts and ts[-1] == t:
                    ls[-1] = lvl
                else:
                    ts.append(t)
                    ls.append(lvl)
            self.times[sem] = ts
            self.levels[sem] = ls
        return self.times[sem], self.levels[sem]

    def _arrays(self, sem: str) -> tuple[np.ndarray, np.ndarray]:
        got = self._np.get(sem)
        if got is None:
            ts, ls = self._curve(sem)
            got = self._np[sem] = (np.asarray(ts, dtype=float), np.asarray(ls, dtype=np.int64))
        return got

    def below(self, sem: str, need: int, lo: float, hi: float) -> list[tuple[float, float]]:
        """Maximal spans (clipped to ``[lo, hi)``) where fewer than ``need`` units are free."""
        spans, starts, ends = self._spans(sem, need)
        k = bisect_right(ends, lo)  # first span ending after lo
        k2 = bisect_left(starts, hi, k)  # first span starting at or after hi
        if k2 <= k:
            return []
        out = spans[k:k2]  # disjoint and sorted: only the first and the last can stick out
        a, b = out[0]
        if a < lo:
            out[0] = (lo, b)
        a, b = out[-1]
        if b > hi:
            out[-1] = (a, hi)
        return out

    def find(
        self, sem: str, need: int, lo: np.ndarray, hi: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`below` for many queries at once: per query ``q``, the first span ending after
        ``lo[q]`` (``k``) and the first starting at or after ``hi[q]`` (``k2``, not below ``k``),
        by the same binary searches (``below`` is ``spans[k:k2]`` clipped, empty when ``k2 <=
        k``), and the spans' starts and ends."""
        key = (sem, need)
        arrs = self._np_spans.get(key)
        if arrs is None:
            _spans, starts, ends = self._spans(sem, need)
            arrs = self._np_spans[key] = (np.array(starts, dtype=float), np.array(ends, dtype=float))
        sp_from, sp_to = arrs
        k = np.searchsorted(sp_to, lo, side="right")
        k2 = np.maximum(k, np.searchsorted(sp_from, hi, side="left"))
        return k, k2, sp_from, sp_to

    def _spans(self, sem: str, need: int) -> tuple[list[tuple[float, float]], list[float], list[float]]:
        key = (sem, need)
        got = self._cache.get(key)
        if got is None:
            if not self._built:
                self._build()
            ts, ls = self._arrays(sem)
            # the runs of levels below ``need``, found on the whole curve at once: a shared
            # semaphore's curve has a breakpoint per use and is asked about for many ``need``
            low_at_0 = self.cap.get(sem, 0) < need
            low = ls < need
            before = np.empty_like(low)
            if len(low):
                before[0] = low_at_0
                before[1:] = low[:-1]
            starts: list[float] = ts[low & ~before].tolist()
            ends: list[float] = ts[~low & before].tolist()
            if low_at_0:
                starts.insert(0, -math.inf)
            if len(ends) < len(starts):
                ends.append(math.inf)
            spans = list(zip(starts, ends))
            got = (spans, starts, ends)
            self._cache[key] = got
        return got


def _data_ready(rg: RankGraph, tab: Table) -> list[float]:
    """Per event, when its data dependencies were met: the latest end + λ of its predecessors,
    program-order edges of pinned cores left out (0 for a source). Without chain edges that is
    the scheduler's ``ready_us``; it is computed here from the schedule's end times alone."""
    end = tab.end
    ready = [0.0] * len(tab.names)
    # the graph's events in the same order, predecessors by index
    for i, preds in enumerate(rg.data_preds()):
        if not preds:
            continue
        if len(preds) == 1:  # the common case, without the loop (the same comparison with 0.0)
            ((p, lam),) = preds
            v = end[p] + lam
            if v > 0.0:
                ready[i] = v
            continue
        best = 0.0
        for p, lam in preds:
            v = end[p] + lam
            if v > best:
                best = v
        ready[i] = best
    return ready


def _ready_spans(i: int, tab: Table, levels: _SemaphoreLevels, r: float) -> list[tuple[float, float]]:
    """When event ``i`` could have started, everything else kept as scheduled: from ``r`` (its
    data dependencies done, see :func:`_data_ready`) to its start, minus the instants ``τ`` at
    which some semaphore it acquires would not have admitted it. Starting at ``τ`` instead of at
    ``start`` it holds ``take`` units over ``[τ, min(τ + d, start))`` and, if it gives back only
    ``back < take`` itself, ``take - back`` from ``τ + d`` until ``start`` (later the final
    schedule already counts its holding).
    """
    ev = tab.events[i]
    st = tab.start[i]
    if st <= r + EPS:
        return []
    d = tab.end[i] - st
    # open-ended exclusions (a, b): τ in (a, b) is not admissible; each list is sorted already
    cuts: list[list[tuple[float, float]]] = []
    for sem, take in ev.acquires.items():
        below = levels.below(sem, take, r, st)
        if below:
            cuts.append([(b0 - d, b1) for b0, b1 in below])
        keep = take - ev.releases.get(sem, 0)
        if keep > 0:
            spans = levels.below(sem, keep, r, st)
            if spans:
                cuts.append([(r - 1.0, spans[-1][1] - d)])
    if not cuts:
        return [(r, st)]
    return _uncut(r, st, cuts[0] if len(cuts) == 1 else sorted(x for c in cuts for x in c))


def _uncut(r: float, st: float, cut: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The spans of ``[r, st)`` left by the sorted open-ended exclusions ``cut`` (see
    :func:`_ready_spans`)."""
    out: list[tuple[float, float]] = []
    cur = r
    for a, b in cut:
        if a >= st:
            break
        if a > cur + EPS:
            out.append((cur, min(a, st)))
        cur = max(cur, b)
        if cur >= st:
            break
    if cur < st - EPS:
        out.append((cur, st))
    return [(a, b) for a, b in out if b > a + EPS]


def _merged_arrays(ids: np.ndarray, start: np.ndarray, end: np.ndarray) -> list[tuple[float, float]]:
    """:func:`_merge` of the intervals ``(start[i], end[i])`` of the events ``ids``, on arrays.

    Why it is the same: both sort by ``(start, end)`` (equal pairs are interchangeable). The loop
    keeps ``hi``, the running maximum of the ends of its current run, and starts a new run at an
    interval whose start is above ``hi + EPS``. That running maximum is the running maximum of
    every end so far (``np.maximum.accumulate``): each interval ends no earlier than it starts,
    so a new run's first end is above every earlier one. A run opens at the first interval and
    at each start above the previous running maximum + EPS (the same float sum); it reaches
    from its first start to the running maximum at its last interval. ``np.maximum`` keeps its
    first operand on ties, as ``if b > hi`` keeps ``hi``."""
    if not len(ids):
        return []
    a, b = start[ids], end[ids]
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    hi = np.maximum.accumulate(b)
    opens = np.flatnonzero(a[1:] > hi[:-1] + EPS) + 1
    first = np.concatenate(([0], opens))
    last = np.concatenate((opens - 1, [len(a) - 1]))
    return list(zip(a[first].tolist(), hi[last].tolist()))


def _merged_all(on: Mapping[str, list[int]], start: np.ndarray, end: np.ndarray) -> dict[str, Busy]:
    """:func:`_merged_arrays` of every resource of ``on`` at once (each resource's events'
    intervals merged), in a dozen numpy calls for all of them instead of per resource (and
    instead of :func:`_merge` for those with few events: the same answer, see there).

    Each resource's runs come as an ``(n, 2)`` array (a view of one array of them all):
    building a tuple per run, which the sweeps on arrays packed back into arrays, cost more
    than the merge (callgrind, scenario_basic: 4.2M of 9.8M).

    Why it is the same: every (resource, event) pair is sorted by (resource, the event's
    place in (start, end) order), which is by (resource, start, end) (equal pairs are
    interchangeable), and each resource's running maximum of the ends is taken on integer keys
    ``resource x n + the event's place in end order``: within a resource the keys order as the
    ends do, and every key of a resource is above every key of the ones before it, so one
    running maximum over all keys is each resource's own running maximum, read back as the end
    of the event it places (equal ends are equal floats; a signed zero end, which ordering
    does not tell from 0.0, sends the merge to the per-resource form). Runs open at each
    resource's first interval and at each start above the previous running maximum + EPS of
    the same resource, as there."""
    names = [r for r, ids in on.items() if ids]
    out: dict[str, Busy] = {r: [] for r in on}
    if not names:
        return out
    sizes = [len(on[r]) for r in names]
    ids = packed("n", chain.from_iterable(on[r] for r in names), sum(sizes))
    if np.signbit(end[ids]).any():
        for r in names:
            out[r] = _merged_arrays(packed("n", on[r], len(on[r])), start, end)
        return out
    n = len(start)
    # each event's place in (start, end) order and in end order, then every (resource, event)
    # pair sorted by (resource, place): by (resource, start, end)
    by_start = np.lexsort((end, start))
    place = np.empty(n, np.intp)
    place[by_start] = np.arange(n)
    by_end = np.argsort(end, kind="stable")
    end_place = np.empty(n, np.intp)
    end_place[by_end] = np.arange(n)
    g = np.repeat(np.arange(len(names)), sizes)
    ids = ids[np.argsort(g * n + place[ids], kind="stable")]
    a = start[ids]
    top = np.maximum.accumulate(g * n + end_place[ids])
    hi = end[by_end[top - g * n]]
    new_res = np.concatenate(([True], g[1:] != g[:-1]))
    opens = np.flatnonzero(new_res | np.concatenate(([False], a[1:] > hi[:-1] + EPS)))
    last = np.concatenate((opens[1:] - 1, [len(a) - 1]))
    runs = np.stack((a[opens], hi[last]), axis=1)
    at = 0
    for r, count in zip(names, np.bincount(g[opens], minlength=len(names)).tolist()):
        out[r] = runs[at : at + count]
        at += count
    return out


_MERGE_ARRAYS_MIN = 64
"""assumed: a resource with fewer events has its busy intervals merged in Python
(:func:`_merge`); a dozen numpy calls cost about what merging that many intervals in Python does
(the answer is the same either way)."""


def _merge(iv: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """``iv`` sorted, with intervals that overlap or lie within EPS of each other joined."""
    out: list[tuple[float, float]] = []
    if not iv:
        return out
    it = iter(sorted(iv))
    lo, hi = next(it)
    for a, b in it:
        if a <= hi + EPS:
            if b > hi:  # max(hi, b), the earlier value on ties
                hi = b
        else:
            out.append((lo, hi))
            lo, hi = a, b
    out.append((lo, hi))
    return out
