"""Analyses of one rank's schedule: bounds, idle decomposition, critical path, busy times.

* Bounds (a ruler, not a prediction): compute = MACs / (cube cores x cube rate); bandwidth =
  bytes the algorithm must move over each aggregate channel (HBM: every active expert's weights
  once plus the routed rows once; cross-rank in / out: the remote rows) divided by
  min(per-core rate x cores, aggregate); dependency chain = the longest path of the event graph
  (durations + λ, unlimited resources). Any valid schedule of the graph is at least the last one;
  a time below the first two means a cost formula missed something.
* Idle decomposition per stage pool: at each instant, the idle members that ready events could
  have occupied are avoidable (work was ready, with its dependencies and semaphores satisfied,
  while a member that could run it idled); the rest is forced. An event is ready from the time
  its data dependencies are met until its start, except at instants where a semaphore it
  acquires could not have admitted it given everything else as scheduled; a late-bound event
  already tied to one core by its colocation partner only counts against that core (see
  :func:`idle_decomposition`). Program-order edges between events pinned to one core are not
  data dependencies: they are how a pinned core queues its work, so an event waiting behind its
  core's previous event is ready (that queueing is what late binding could recover).
* Critical path: from the last event back, each step says what set its start: a dependency
  (``pred``), a resource held by the previous event on it, or semaphore capacity.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, overload

from moeopt.core.events import Event
from moeopt.core.schedule import Schedule, Wait
from moeopt.megamoe.builders import RankGraph
from moeopt.megamoe.scenario import Config

EPS = 1e-6


@dataclass(frozen=True)
class Table:
    """One rank's schedule as arrays in graph order, read once from the :class:`Schedule`.

    Every analysis walks all events; reading ``start_us`` / ``end_us`` / ``resources`` /
    ``waits`` by name once and sharing the arrays keeps the analyses linear and cheap.
    """

    names: list[str]
    events: list[Event]
    start: list[float]
    end: list[float]
    res: list[tuple[str, ...]]
    schedule: Schedule

    @classmethod
    def of(cls, rg: RankGraph, s: Schedule) -> Table:
        events = list(rg.graph)
        names = [ev.name for ev in events]
        st, en, rs = s.start_us, s.end_us, s.resources

        def in_order(m: Any) -> list[Any]:
            # a schedule from the greedy scheduler lists the events in graph order already
            if type(m) is dict and list(m) == names:
                return list(m.values())
            return [m[n] for n in names]

        return cls(
            names=names, events=events, start=in_order(st), end=in_order(en), res=in_order(rs), schedule=s
        )

    @cached_property
    def stage(self) -> list[Any]:
        """Per event, its ``stage`` label (None without one)."""
        return [ev.labels.get("stage") for ev in self.events]

    @cached_property
    def waits(self) -> list[Wait]:
        """Per event, what it waited for (read when first needed: only the event rows do)."""
        wt = self.schedule.waits
        return [wt[n] for n in self.names]


class EventRows(Sequence[dict[str, Any]]):
    """``rank_results[r]["events"]``: one row per event (start, end, core, what it waited for).

    Built on first access: most callers read the totals and never look at single events.
    """

    __slots__ = ("_rows", "_table")

    def __init__(self, table: Table) -> None:
        self._table = table
        self._rows: list[dict[str, Any]] | None = None

    def _all(self) -> list[dict[str, Any]]:
        if self._rows is None:
            t = self._table
            rows = []
            for i, ev in enumerate(t.events):
                wt = t.waits[i]
                kind = wt.kind
                rows.append(
                    {
                        "name": t.names[i],
                        "stage": ev.labels.get("stage"),
                        "start_us": t.start[i],
                        "end_us": t.end[i],
                        "core": "+".join(t.res[i]),
                        "waited_for": wt.pred if kind == "dependency" else (wt.resource or wt.semaphore),
                        "wait_kind": kind,
                        "wait_us": wt.queued_us,
                        "ready_us": wt.ready_us,
                    }
                )
            self._rows = rows
        return self._rows

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, i: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        return self._all()[i]

    def __len__(self) -> int:
        return len(self._table.names)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self._all())

    def __repr__(self) -> str:
        return f"EventRows({len(self)} events)"


def bounds(rg: RankGraph, cfg: Config) -> dict[str, Any]:
    n_aic = len({int(r.split(".")[0][1:]) for st in ("gmm1", "gmm2") for r in rg.stage_members[st]})
    cube = cfg.c("cube_mac_per_us_int8") if cfg.quant == "w8a8" else cfg.c("cube_mac_per_us_fp16")
    compute = rg.macs / (n_aic * cube)
    per_core = cfg.c("gm_l1_bytes_per_us") * n_aic
    bw = {
        "hbm": rg.algo_hbm_bytes / min(per_core, cfg.c("hbm_bytes_per_us")),
        "remote_in": rg.algo_remote_in_bytes / cfg.c("remote_in_bytes_per_us"),
        "remote_out": rg.algo_remote_out_bytes / cfg.c("remote_out_bytes_per_us"),
    }
    cg = rg.graph.compiled()
    # longest path over data dependencies only: program-order chains on a pinned resource are
    # resource constraints, so they are left out (else the bound would absorb the queueing)
    heads = [0.0] * cg.n
    dur = cg.dur
    preds = rg.data_preds()
    for i in cg.topo:
        best = 0.0
        for p, lam in preds[i]:
            v = heads[p] + dur[p] + lam
            if v > best:
                best = v
        heads[i] = best
    ends = rg.combine_events or [n for n in cg.names if n != rg.tail_event]
    # the time is measured to the last combine, so the chain bound ends there too
    dep = max((heads[cg.index[n]] + cg.dur[cg.index[n]] for n in ends), default=0.0)
    channel = max(bw, key=lambda k: bw[k])
    return {
        "compute_us": compute,
        "bandwidth_us": bw[channel],
        "bandwidth_channel": channel,
        "bandwidth_by_channel_us": bw,
        "dependency_us": dep,
    }


def judge_bounds(b: dict[str, Any], time_us: float) -> dict[str, Any]:
    vals = {"compute": b["compute_us"], "bandwidth": b["bandwidth_us"], "dependency": b["dependency_us"]}
    binding = max(vals, key=lambda k: vals[k])
    lb = vals[binding]
    out = dict(b)
    out["binding"] = binding
    out["lower_bound_us"] = lb
    out["excess_pct"] = (time_us / lb - 1.0) * 100.0 if lb > 0 else 0.0
    out["violated"] = time_us < lb * (1 - 1e-9) - EPS
    return out


def busy(rg: RankGraph, s: Schedule, span: float, table: Table | None = None) -> dict[str, Any]:
    t = table or Table.of(rg, s)
    res_busy: dict[str, float] = defaultdict(float)
    stage_busy: dict[str, float] = defaultdict(float)
    start, end, stage = t.start, t.end, t.stage
    for i, rs in enumerate(t.res):
        if not rs:
            continue
        d = end[i] - start[i]
        for r in rs:
            res_busy[r] += d
        stage_busy[str(stage[i])] += d * len(rs)
    all_res = sorted(set(rg.graph.resources()))
    rb = {r: res_busy.get(r, 0.0) for r in all_res}
    idle = {r: max(0.0, span - v) for r, v in rb.items()}
    util = {r: (v / span if span > 0 else 0.0) for r, v in rb.items()}
    roles: dict[str, list[float]] = defaultdict(list)
    for r, v in rb.items():
        roles[r.rsplit(".", 1)[1]].append(v)
    role_util = {role: (sum(v) / (len(v) * span) if span > 0 else 0.0) for role, v in sorted(roles.items())}
    return {
        "resource_busy_us": rb,
        "resource_idle_us": idle,
        "resource_utilization": util,
        "role_utilization": role_util,
        "stage_busy_us": dict(stage_busy),
    }


def idle_decomposition(
    rg: RankGraph, s: Schedule, span: float, max_samples: int = 5, table: Table | None = None
) -> dict[str, Any]:
    """Forced vs avoidable idle per stage pool (see the module docstring).

    For each pool, at each instant before ``span``: the idle members, and the ready events (see
    :func:`_ready_spans`). An event of a late-bound stage whose colocation partner has already
    started is bound to the partner's core, so it can only use that member; every other ready
    event can use any member. Avoidable = the largest number of idle members that ready events
    could occupy (bound events first, on their own member if it is idle; the rest on any idle
    member); forced = the other idle members. In statically pinned stages every ready event is
    counted as able to use any idle member: that idle is what late binding could recover.

    Late-bound GMM stages are also judged on their load phases against the MTE2 pipes
    (entries ``"gmm1:load"`` / ``"gmm2:load"``): the load is where a tile's core is chosen. Those
    entries count pipe-µs, not core-µs, and are not added to the totals.
    """
    tab = table or Table.of(rg, s)
    out: dict[str, Any] = {"forced_core_us": 0.0, "avoidable_core_us": 0.0, "by_stage": {}, "samples": []}
    by_stage: dict[str, list[int]] = defaultdict(list)
    busy_iv: dict[str, list[tuple[float, float]]] = defaultdict(list)
    start, end, events = tab.start, tab.end, tab.events
    stage_members_of = rg.stage_members
    for i, (rs, st) in enumerate(zip(tab.res, tab.stage)):
        if not rs:
            continue
        span_i = (start[i], end[i])
        for r in rs:
            busy_iv[r].append(span_i)
        if st in stage_members_of:  # a stage name, so a string
            by_stage[st].append(i)
    levels = _SemaphoreLevels(rg, tab)  # built on first use: often no event ever waits
    index = rg.graph.compiled().index  # event name -> position in graph order (the table's order)
    ready = _data_ready(rg, tab)
    pools: list[tuple[str, str, tuple[str, ...], list[int], bool]] = []
    for st, idxs in by_stage.items():
        stage_members = rg.stage_members[st]
        if st in ("gmm1", "gmm2"):
            # the cube is judged on compute phases; late-bound loads on the MTE2 pipes
            comp = [i for i in idxs if events[i].labels.get("phase") == "compute"]
            pools.append((st, st, stage_members, comp, True))
            if st in rg.late_stages:
                loads = [i for i in idxs if events[i].labels.get("phase") == "load"]
                mte = tuple(m.replace(".AIC", ".MTE2") for m in stage_members)
                pools.append((f"{st}:load", st, mte, loads, False))
        else:
            pools.append((st, st, stage_members, idxs, True))
    for key, st, pool_members, idxs, in_totals in pools:
        members = set(pool_members)
        late = st in rg.late_stages
        # in pool order, not set order: the sums below must not depend on the hash seed
        merged = {r: _merge(busy_iv.get(r, [])) for r in pool_members}
        pts: list[tuple[float, int, str, int]] = []  # (t, kind, member, delta); kinds below
        starts = tab.start
        has_ready = False
        for i in idxs:
            if starts[i] <= ready[i] + EPS:
                continue  # started as soon as it was ready: never waiting (see _ready_spans)
            ev = tab.events[i]
            bound = ""
            if late and ev.colocate_with is not None:
                j = index.get(ev.colocate_with)
                if j is not None and tab.start[j] <= ready[i] + EPS:
                    bound = next((r for r in tab.res[i] if r in members), "")
            for a, b in _ready_spans(i, tab, levels, ready[i]):
                pts.append((a, 1, bound, 1))
                pts.append((b, 1, bound, -1))
                has_ready = True
        n_mem = len(members)
        samples: list[dict[str, Any]] = []
        if not has_ready:
            # no event of the pool ever waited: nothing is avoidable and every idle member-µs
            # before span is forced (each member's merged busy intervals are disjoint)
            busy_us = sum(min(b, span) - a for iv in merged.values() for a, b in iv if a < span)
            forced, avoid = n_mem * span - busy_us, 0.0
        else:
            for r, iv in merged.items():
                for a, b in iv:
                    pts.append((a, 0, r, 1))
                    pts.append((b, 0, r, -1))
            pts.sort()
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
                            {
                                "stage": key,
                                "from_us": prev,
                                "to_us": t,
                                "idle_members": idle_n,
                                "ready": ready_n,
                            }
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
        exempt = None
        if not late:
            exempt = "statically pinned pool"
        elif st in rg.colocated_stages:
            exempt = "colocated with its producer tile"
        out["by_stage"][key] = {
            "forced_core_us": forced,
            "avoidable_core_us": avoid,
            "late_bound": late,
            "work_conservation_exempt": exempt,
        }
        if in_totals:
            out["forced_core_us"] += forced
            out["avoidable_core_us"] += avoid
        out["samples"].extend(samples)
    return out


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


def critical_path(
    rg: RankGraph, s: Schedule, last: str, limit: int = 10000, table: Table | None = None
) -> list[dict[str, Any]]:
    """Walk back from ``last``: each step names the event, its stage and why it started when it did."""
    t = table or Table.of(rg, s)
    ends_on: dict[str, list[tuple[float, str]]] = defaultdict(list)
    releasers: dict[str, list[tuple[float, str]]] = defaultdict(list)

    indexed: list[bool] = []

    def index_ends() -> None:
        # who ended on each resource / released each semaphore, when: built on the first step
        # that waited for a resource or a semaphore (a path of dependencies alone needs neither)
        if indexed:
            return
        indexed.append(True)
        for i, ev in enumerate(t.events):
            item = (t.end[i], t.names[i])
            for r in t.res[i]:
                ends_on[r].append(item)
            for sem in ev.releases:
                releasers[sem].append(item)

    path: list[dict[str, Any]] = []
    cur: str | None = last
    seen = set()
    while cur is not None and cur not in seen and len(path) < limit:
        seen.add(cur)
        ev = rg.graph[cur]
        w = s.waits[cur]
        kind = w.kind
        step = {
            "event": cur,
            "stage": ev.labels.get("stage"),
            "start_us": s.start_us[cur],
            "end_us": s.end_us[cur],
            "resources": list(s.resources[cur]),
            "why": {
                "dependency": "dependency",
                "resource": "resource queueing",
                "semaphore": "capacity",
                "none": "source",
            }[kind],
            "wait_us": {
                "dependency": 0.0,
                "resource": w.resource_wait_us,
                "semaphore": w.semaphore_wait_us,
                "none": 0.0,
            }[kind],
        }
        nxt: str | None = None
        if kind == "semaphore" and w.semaphore is not None:
            index_ends()
            nxt = _ended_at(releasers[w.semaphore], s.start_us[cur], cur)
            step["semaphore"] = w.semaphore
        elif kind == "resource" and w.resource is not None:
            index_ends()
            nxt = _ended_at(ends_on[w.resource], w.ready_us + w.resource_wait_us, cur)
            step["resource"] = w.resource
        if nxt is None:
            nxt = w.pred
            if kind != "none" and w.pred is not None:
                step["lambda_us"] = rg.graph[cur].deps.get(w.pred, 0.0)
        step["after"] = nxt
        path.append(step)
        cur = nxt
    path.reverse()
    return path


def _ended_at(items: list[tuple[float, str]], t: float, not_this: str) -> str | None:
    best: tuple[float, str] | None = None
    for end, name in items:
        if name != not_this and end <= t + EPS and (best is None or end > best[0]):
            best = (end, name)
    return None if best is None else best[1]
