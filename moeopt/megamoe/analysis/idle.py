"""Forced vs avoidable idle per stage pool of one rank's schedule.

At each instant, the idle members of a pool that ready events could have occupied are avoidable
(work was ready, with its dependencies and semaphores satisfied, while a member that could run
it idled); the rest is forced. An event is ready from the time its data dependencies are met
until its start, except at instants where a semaphore it acquires could not have admitted it
given everything else as scheduled (:func:`_ready_spans`); a late-bound event already tied to
one core by its colocation partner only counts against that core. Program-order edges between
events pinned to one core are not data dependencies: they are how a pinned core queues its
work, so an event waiting behind its core's previous event is ready (that queueing is what late
binding could recover).

The steps of :func:`idle_decomposition`: busy intervals per resource and the events of each
stage (:func:`_busy_intervals`), the pools to judge (:func:`_pools`), per pool the instants its
events were ready (:func:`_ready_points`) and one sweep over those and the members' busy
intervals (:func:`_sweep`); a pool where no event ever waited has a closed form. The analysis
runs on every simulation, so the hot loops read the table's arrays into locals and the
semaphore level curves are read (or rebuilt) only when an event waited.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from moeopt.core.schedule import Schedule
from moeopt.megamoe.analysis.table import EPS, Table
from moeopt.megamoe.build import RankGraph
from moeopt.megamoe.results import IdleDecomposition, IdleSample, StageIdle

Interval = tuple[float, float]
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
    in_totals: bool
    """counted in the rank's totals"""


def idle_decomposition(
    rg: RankGraph, s: Schedule, span: float, max_samples: int = 5, table: Table | None = None
) -> IdleDecomposition:
    """Forced vs avoidable idle per stage pool (see the module docstring).

    For each pool, at each instant before ``span``: the idle members, and the ready events (see
    :func:`_ready_spans`). An event of a late-bound stage whose colocation partner has already
    started is bound to the partner's core, so it can only use that member; every other ready
    event can use any member. Avoidable = the largest number of idle members that ready events
    could occupy (bound events first, on their own member if it is idle; the rest on any idle
    member); forced = the other idle members. In statically pinned stages every ready event is
    counted as able to use any idle member: that idle is what late binding could recover.

    """
    tab = table or Table.of(rg, s)
    busy_iv, by_stage = _busy_intervals(rg, tab)
    levels = _SemaphoreLevels(rg, tab)  # built on first use: often no event ever waits
    index = rg.graph.compiled().index  # event name -> position in graph order (the table's order)
    ready = _data_ready(rg, tab)
    forced_total = avoid_total = 0.0
    by_key: dict[str, StageIdle] = {}
    samples: list[IdleSample] = []
    for pool in _pools(rg, tab, by_stage):
        late = pool.stage in rg.late_stages
        # in pool order, not set order: the sums below must not depend on the hash seed
        merged = {r: _merge(busy_iv.get(r, [])) for r in pool.members}
        n_mem = len(set(pool.members))
        pts = _ready_points(pool, tab, ready, levels, index, late)
        if pts:
            forced, avoid, found = _sweep(pts, merged, n_mem, span, pool.key, max_samples)
        else:
            # no event of the pool ever waited: nothing is avoidable and every idle member-µs
            # before span is forced (each member's merged busy intervals are disjoint)
            busy_us = sum(min(b, span) - a for iv in merged.values() for a, b in iv if a < span)
            forced, avoid, found = n_mem * span - busy_us, 0.0, []
        by_key[pool.key] = {
            "forced_core_us": forced,
            "avoidable_core_us": avoid,
            "late_bound": late,
            "work_conservation_exempt": _exemption(rg, pool.stage, late),
        }
        if pool.in_totals:
            forced_total += forced
            avoid_total += avoid
        samples.extend(found)
    return {
        "forced_core_us": forced_total,
        "avoidable_core_us": avoid_total,
        "by_stage": by_key,
        "samples": samples,
    }


def _busy_intervals(rg: RankGraph, tab: Table) -> tuple[dict[str, list[Interval]], dict[str, list[int]]]:
    """Every resource's busy intervals, and the indices of each stage's events (stages with
    members only)."""
    by_stage: dict[str, list[int]] = defaultdict(list)
    busy_iv: dict[str, list[Interval]] = defaultdict(list)
    start, end = tab.start, tab.end
    stage_members_of = rg.stage_members
    for i, (rs, st) in enumerate(zip(tab.res, tab.stage)):
        if not rs:
            continue
        span_i = (start[i], end[i])
        for r in rs:
            busy_iv[r].append(span_i)
        if st in stage_members_of:  # a stage name, so a string
            by_stage[st].append(i)
    return busy_iv, by_stage


def _pools(rg: RankGraph, tab: Table, by_stage: dict[str, list[int]]) -> list[_Pool]:
    """One pool per stage (a GMM tile is one event on its cube: load and compute pipelined)."""
    return [_Pool(st, st, rg.stage_members[st], idxs, True) for st, idxs in by_stage.items()]


def _ready_points(
    pool: _Pool,
    tab: Table,
    ready: list[float],
    levels: _SemaphoreLevels,
    index: dict[str, int],
    late: bool,
) -> list[_Point]:
    """The sweep points of the spans where the pool's events were ready but not started (empty
    when none of them ever waited)."""
    members = set(pool.members)
    starts = tab.start
    pts: list[_Point] = []
    for i in pool.events:
        if starts[i] <= ready[i] + EPS:
            continue  # started as soon as it was ready: never waiting (see _ready_spans)
        ev = tab.events[i]
        bound = ""
        if late and ev.colocate_with is not None:
            j = index.get(ev.colocate_with)
            if j is not None and starts[j] <= ready[i] + EPS:
                bound = next((r for r in tab.res[i] if r in members), "")
        for a, b in _ready_spans(i, tab, levels, ready[i]):
            pts.append((a, 1, bound, 1))
            pts.append((b, 1, bound, -1))
    return pts


def _sweep(
    pts: list[_Point],
    merged: dict[str, list[Interval]],
    n_mem: int,
    span: float,
    key: str,
    max_samples: int,
) -> tuple[float, float, list[IdleSample]]:
    """``(forced, avoidable, samples)`` of one pool: one pass over its ready points and its
    members' busy intervals in time order, up to ``span`` (see :func:`idle_decomposition`)."""
    for r, iv in merged.items():
        for a, b in iv:
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
        self._cache: dict[tuple[str, int], tuple[list[tuple[float, float]], list[float]]] = {}
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

    def below(self, sem: str, need: int, lo: float, hi: float) -> list[tuple[float, float]]:
        """Maximal spans (clipped to ``[lo, hi)``) where fewer than ``need`` units are free."""
        spans, ends = self._spans(sem, need)
        k = bisect_right(ends, lo)  # first span ending after lo
        out: list[tuple[float, float]] = []
        while k < len(spans) and spans[k][0] < hi:
            a, b = spans[k]
            out.append((max(a, lo), min(b, hi)))
            k += 1
        return out

    def _spans(self, sem: str, need: int) -> tuple[list[tuple[float, float]], list[float]]:
        key = (sem, need)
        got = self._cache.get(key)
        if got is None:
            if not self._built:
                self._build()
            ts, ls = self._curve(sem)
            spans: list[tuple[float, float]] = []
            start: float | None = -math.inf if self.cap.get(sem, 0) < need else None
            for t, level in zip(ts, ls):
                if level < need and start is None:
                    start = t
                elif level >= need and start is not None:
                    spans.append((start, t))
                    start = None
            if start is not None:
                spans.append((start, math.inf))
            got = (spans, [b for _a, b in spans])
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
    cut: list[tuple[float, float]] = []  # open-ended exclusions (a, b): τ in (a, b) is not admissible
    for sem, take in ev.acquires.items():
        for b0, b1 in levels.below(sem, take, r, st):
            cut.append((b0 - d, b1))
        keep = take - ev.releases.get(sem, 0)
        if keep > 0:
            spans = levels.below(sem, keep, r, st)
            if spans:
                cut.append((r - 1.0, spans[-1][1] - d))
    if not cut:
        return [(r, st)]
    cut.sort()
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


def _merge(iv: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1] + EPS:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out
