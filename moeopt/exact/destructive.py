"""A destructive lower bound: refute candidate makespans by constraint propagation and shaving.

For a trial makespan ``T`` (whole ticks of the model of :mod:`moeopt.exact.model`), every event
``i`` gets a window ``[es_i, ls_i]`` for its start, first from its head and tail (every schedule
of the tick model starts ``i`` in ``[head_i, T − tail_i]``, see :class:`TickInstance`). Sound
rules remove from the windows only start times that no schedule of makespan ``≤ T`` uses; when a
window becomes empty (or a capacity is overloaded for sure), no schedule of makespan ``≤ T``
exists, so the makespan of every schedule is at least ``T + 1`` (Klein & Scholl 1999,
"Computing lower bounds by destructive improvement"). Each refuted ``T`` is a proof on its own.

The rules, each of them removing only starts that no schedule of makespan ``≤ T`` with the
current windows uses (so, by induction over the rules applied, no schedule is lost):

* **Precedence distances.** ``dist[i][j]``, the longest path of start-to-start distances
  (``d_i + λ`` along the arcs, and the energy distances of
  :func:`moeopt.exact.bounds.energy_delays`, all valid in every tick schedule), closed by
  Floyd–Warshall: ``S_j ≥ S_i + dist[i][j]`` gives ``es_j ≥ es_i + dist`` and
  ``ls_i ≤ ls_j − dist``.
* **Time-tabling** (per capacity set of :func:`moeopt.exact.bounds.capacity_sets`, capacity
  ``C``). An interval that starts in ``[est, lst]`` and ends in ``[ect, lct]`` with
  ``lst < ect`` covers ``[lst, ect)`` in every schedule (its compulsory part). The compulsory
  parts of all intervals of the set, weighted by demand, are a lower bound on the usage at every
  tick; above ``C`` somewhere: refuted. An event interval (the event's own ``[S, S + d)``,
  demand ``q``) may start at ``s`` only if ``q`` plus the compulsory usage of the *other*
  intervals stays within ``C`` on ``[s, s + d)``: starts that break it, on any set, are removed
  (only from the ends of the window: the windows stay intervals).
* **Energetic reasoning** (Baptiste, Le Pape & Nuijten 2001; the overlap bound ``MI`` of
  :mod:`moeopt.exact.windows`, with ``est``/``lct`` from the windows and the interval's minimum
  length ``p``). ``W(t1, t2) = Σ q·MI(t1, t2) ≤ C (t2 − t1)`` on every window; an overload
  refutes. Adjustment: with ``avail = ⌊(C (t2 − t1) − W + q_i·MI_i) / q_i⌋`` the most event ``i``
  may overlap the window (the others need ``W − q_i MI_i`` at least), if ``i`` started at ``est``
  would overlap it by more (``min(p, t2 − t1, est + p − t1) > avail``), then every start below
  ``t2 − avail`` overlaps it by more than ``avail`` (for ``s < t1`` the overlap is
  ``min(s + p, t2) − t1``, more than ``avail`` since ``s ≥ est > t1 + avail − p``; for ``s ≥ t1``
  it is ``min(p, t2 − s) > avail``): ``es_i ≥ t2 − avail``. Mirrored: ``ls_i ≤ t1 + avail − p``.
  Windows: every pair of whole ticks in ``[0, T]`` when ``T`` is small (``MI`` is piecewise linear
  with whole breakpoints, so this is the complete check), else the characteristic points
  (``est, lst, ect`` on the left, ``lct, ect, lst`` on the right); any subset is sound.
* **Disjunctions.** Two event intervals of one set with ``q_i + q_j > C`` cannot overlap: one
  ends before the other starts. If ``es_i + d_i > ls_j``, ``i`` cannot come first, so ``j``
  does: ``es_i ≥ es_j + d_j`` and ``ls_j ≤ ls_i − d_j``; both orders impossible: refuted.

**Shaving** (Martin & Shmoys 1996; Carlier & Pinson 1994), optional: for an event, tentatively
fix its start to the first (last) value of its window and propagate; a contradiction proves that
no schedule of makespan ``≤ T`` starts it there, so the value is removed for good.

**LP** (the preemptive relaxation of Brucker & Knust 2000, on the windows above). Cut ``[0, T]``
at every ``es, ls, es + d, ls + d``; in each piece ``k`` (length ``len_k``) the events whose
window allows them to run there (``es ≤`` its start, its end ``≤ ls + d``) are *available*. A
column is a maximal subset of the available events that may run at once (pairwise compatible:
no distance forces one to end before the other starts, no capacity set's demand above its
capacity). Variables ``x_{k,S} ≥ 0`` (how long ``S`` runs in piece ``k``), rows
``Σ_S x_{k,S} ≤ len_k``, for each event ``Σ_{k, S ∋ i} x_{k,S} ≥ d_i``, and for each piece inside
its compulsory part ``[ls_i, es_i + d_i)``: ``Σ_{S ∋ i} x_{k,S} ≥ len_k``. *A schedule of makespan
≤ T gives a solution*: in piece ``k`` the events running at an instant fit together and are
available there, so they are within some maximal column; give it that instant (an event credited
more than it runs only helps the ``≥`` rows). *Refutation by certificate*: the LP minimises the
shortfall of the ``≥`` rows; when it is positive, its duals give multipliers ``w_r ≥ 0`` of the
``≥`` rows (right-hand sides ``b_r``), ``c_{i,k}`` the sum of those whose row counts ``i`` in piece
``k``, and ``y_k = max(0, max_S Σ_{i∈S} c_{i,k})`` (computed here, not taken from the solver). Any
solution would give ``Σ_r w_r b_r ≤ Σ_{k,S} x_{k,S} Σ_{i∈S} c_{i,k} ≤ Σ_k y_k len_k``; so
``Σ w b − Σ y len > LP_TOL`` proves that there is none, whatever the solver's round-off.

**Search.** From a bound already proven (``lower``: makespan ``lower − 1`` is refuted) and below
a known schedule's makespan ``upper`` (which no sound rule refutes), the makespans ``lower,
lower + 1, lower + 3, …`` are tested while refuted (doubling steps), then the gap is bisected.
The test at ``T`` propagates (and shaves when asked), then runs the LP on the windows.

**Which graphs.** The tick model's events have fixed sizes except *flexible* ones (a reservoir's
releasers on a rounded grid); graphs with one get no destructive bound (:func:`applies`), nor
graphs above ``MAX_EVENTS`` events or a horizon above ``MAX_TICKS`` ticks (the time-tabling
keeps one row of ``T + 1`` ticks per event). Holding intervals of paired semaphores (one event
acquires, a descendant releases) and units never released (held from the acquirer's start to the
end, ``T``) take part through their compulsory parts and energies; only event intervals are
adjusted. Semaphores without a pairing (reservoirs) are left out: leaving a constraint out only
relaxes. Nothing here knows what the events mean.

**The windows as CP-SAT domains (measured, not used).** The windows of :func:`shaved_windows` at
``T = best − 1`` may restrict the starts of a CP-SAT decision model "makespan ``≤ T``" (every
schedule it must find or refute respects them), so that ``INFEASIBLE`` proves ``best`` optimal.
On the six PSPLIB j30 instances CP-SAT cannot prove within a 2 s solve (OR-Tools 9.15, one
worker, ``T = OPT − 1``, ``bench_psplib_timeidx.py --variants base,winp,win``): propagation
alone narrows nothing beyond the heads and tails (same deterministic time as without); shaving
narrows the windows by 2-13% in all and changes CP-SAT's refutation by −28% to +6% against the
mean of three seeds (j3029_6 3.05-3.67 -> 2.36 units, j3029_3 not refuted in 5 -> 4.55, j3029_8
0.86-0.90 -> 0.74, j3013_2 3.00-3.28 -> 2.72-3.35, j3013_5 1.44-1.76 -> 1.65, j3013_6
1.63-1.91 -> 1.82), while the shaving itself took 0.3-4.5 CPU s (load ~7 on 2 cores). Still
0.74-4.55 units where a 2 s solve has about 0.7: not enough for those proofs, so ``solve_exact``
does not do it. Stronger windows do not refute ``OPT − 1`` either: shaving with energetic
reasoning in the probes (2-14 CPU s; refutations no faster: j3013_6 2.23, j3029_8 0.85), or with
the LP test on every probe (j3013_5, j3013_6, j3029_8: 160-260 LPs, 19-33 CPU s, windows 6-11%
narrower, not refuted); nor does "order shaving" (a probe per ordered pair of events "``i`` ends
before ``j`` starts", about 1,200 probes, 1.3 s): 5 and 16 new distances on j3013_6 and j3013_5,
windows unchanged, CP-SAT's refutation unchanged.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from moeopt.exact.bounds import capacity_sets
from moeopt.exact.model import TickInstance

MAX_EVENTS = 300
"""Graphs with more events get no destructive bound. assumed: the cliques' limit
(:mod:`moeopt.exact.cliques`); the shaving runs a propagation per event and window end."""
MAX_TICKS = 4000
"""Trial makespans above this many ticks are not tested (dense rows of ``T + 1`` ticks per event).
assumed: PSPLIB j30 horizons are below 200 ticks; kernel graphs on fine grids are far above."""
DENSE_WINDOWS = 256
"""Energetic reasoning takes every whole tick as a window end when ``T`` is at most this, else the
characteristic points. assumed: ``T²/2`` windows × events stays under a few 10⁵ for j30."""
ENERGETIC_WORK = 4_000_000
"""Windows × intervals of one energetic-reasoning pass on the characteristic points; beyond it
the points are thinned evenly (any subset of windows is sound). assumed: a few ms of numpy."""
PROBE_ENERGETIC = False
"""Whether the tentative propagations of the shaving use energetic reasoning (the main state
always does)."""
NEG = -(10**9)
"""No path between two events (start-to-start distance)."""


class _Refuted(Exception):
    """Propagation found that no schedule of makespan ``≤ T`` exists."""


@dataclass(slots=True)
class _Set:
    """One capacity set: event intervals ``ev`` (event index, demand) and the other intervals
    ``other`` as ``(first, last, length, demand)`` (last ``-1``: held until the end)."""

    capacity: int
    ev: np.ndarray  # event indices
    q: np.ndarray  # their demands
    other: list[tuple[int, int, int, int]]
    pairs: np.ndarray  # (k, 2) event pairs that cannot overlap


@dataclass(slots=True)
class Problem:
    """The tick instance in the form the propagation uses (built once per graph)."""

    n: int
    dur: np.ndarray
    dist: np.ndarray  # (n, n) start-to-start distances, NEG where no path
    head: np.ndarray
    tail: np.ndarray
    sets: list[_Set]


def applies(inst: TickInstance) -> bool:
    """Whether :func:`destructive_bound` handles this instance (module docstring, "Which graphs")."""
    return 0 < inst.cg.n <= MAX_EVENTS and not any(inst.flexible)


def build(inst: TickInstance) -> Problem:
    """Distances, heads, tails and capacity sets of ``inst`` as arrays."""
    cg = inst.cg
    n = cg.n
    dur = np.array(inst.dur, dtype=np.int64)
    dist = np.full((n, n), NEG, dtype=np.int64)
    for j in range(n):
        for i, lam in inst.preds[j]:
            dist[i, j] = max(dist[i, j], inst.dur[i] + lam)
    for i, j, d in inst.delays:
        dist[i, j] = max(dist[i, j], d)
    for k in range(n):  # longest paths (a DAG: no positive cycles)
        via = dist[:, k : k + 1] + dist[k : k + 1, :]
        ok = (dist[:, k : k + 1] > NEG) & (dist[k : k + 1, :] > NEG)
        np.maximum(dist, np.where(ok, via, NEG), out=dist)
    sets: list[_Set] = []
    for cs in capacity_sets(cg, inst.pairings, [float(d) for d in inst.dur], inst.succs):
        ev: list[tuple[int, int]] = []
        other: list[tuple[int, int, int, int]] = []
        for f, la, ln, q in cs.items:
            if q <= 0:
                continue
            if f == la:
                if inst.dur[f] > 0:
                    ev.append((f, q))
            else:
                other.append((f, la, int(ln), q))
        pairs = [
            (a, b)
            for x, (a, qa) in enumerate(ev)
            for (b, qb) in ev[x + 1 :]
            if a != b and qa + qb > cs.capacity
        ]
        sets.append(
            _Set(
                cs.capacity,
                np.array([e for e, _q in ev], dtype=np.int64),
                np.array([q for _e, q in ev], dtype=np.int64),
                other,
                np.array(pairs, dtype=np.int64).reshape(-1, 2),
            )
        )
    return Problem(
        n,
        dur,
        dist,
        np.array(inst.head, dtype=np.int64),
        np.array(inst.tail, dtype=np.int64),
        sets,
    )


class Propagator:
    """The rules of the module docstring on one :class:`Problem` for one trial makespan ``T``."""

    def __init__(self, prob: Problem, makespan: int, *, energetic: bool = True) -> None:
        self.prob = prob
        self.T = makespan
        self.energetic = energetic
        self.ticks = np.arange(makespan + 1, dtype=np.int64)
        self.dense = makespan <= DENSE_WINDOWS
        if self.dense:  # every window [t1, t2] of whole ticks, t1 < t2
            g1, g2 = np.meshgrid(self.ticks, self.ticks, indexing="ij")
            keep = g1 < g2
            self.t1, self.t2 = g1[keep], g2[keep]
        else:
            self.t1 = self.t2 = np.zeros(0, dtype=np.int64)

    # ---------------------------------------------------------------- windows
    def initial(self) -> tuple[np.ndarray, np.ndarray]:
        """``(es, ls)`` from the heads and tails; raises :class:`_Refuted` when one is empty."""
        es = self.prob.head.copy()
        ls = self.T - self.prob.tail
        if np.any(es > ls):
            raise _Refuted
        return es, ls

    def propagate(self, es: np.ndarray, ls: np.ndarray, energetic: bool | None = None) -> None:
        """Apply every rule until nothing changes (in place); raises :class:`_Refuted`.
        ``energetic``: whether energetic reasoning takes part (default: the propagator's choice)."""
        use_er = self.energetic if energetic is None else energetic
        while True:
            before_e = es.copy()
            before_l = ls.copy()
            while True:
                e0, l0 = es.copy(), ls.copy()
                self._precedence(es, ls)
                self._disjunctions(es, ls)
                self._timetable(es, ls)
                if np.array_equal(e0, es) and np.array_equal(l0, ls):
                    break
            if use_er:
                self._energetic(es, ls)
            if np.array_equal(before_e, es) and np.array_equal(before_l, ls):
                return

    @staticmethod
    def _check(es: np.ndarray, ls: np.ndarray) -> None:
        if np.any(es > ls):
            raise _Refuted

    def _precedence(self, es: np.ndarray, ls: np.ndarray) -> None:
        dist = self.prob.dist
        has = dist > NEG
        np.maximum(es, np.max(np.where(has, es[:, None] + dist, NEG), axis=0), out=es)
        np.minimum(ls, np.min(np.where(has, ls[None, :] - dist, -NEG), axis=1), out=ls)
        self._check(es, ls)

    def _disjunctions(self, es: np.ndarray, ls: np.ndarray) -> None:
        dur = self.prob.dur
        for s in self.prob.sets:
            if not len(s.pairs):
                continue
            a, b = s.pairs[:, 0], s.pairs[:, 1]
            a_first_no = es[a] + dur[a] > ls[b]  # a cannot end before b's latest start
            b_first_no = es[b] + dur[b] > ls[a]
            if np.any(a_first_no & b_first_no):
                raise _Refuted
            # b first: es[a] >= es[b] + d[b], ls[b] <= ls[a] - d[b]
            k = a_first_no
            np.maximum.at(es, a[k], es[b[k]] + dur[b[k]])
            np.minimum.at(ls, b[k], ls[a[k]] - dur[b[k]])
            k = b_first_no
            np.maximum.at(es, b[k], es[a[k]] + dur[a[k]])
            np.minimum.at(ls, a[k], ls[b[k]] - dur[a[k]])
        self._check(es, ls)

    def _other_bounds(
        self, s: _Set, es: np.ndarray, ls: np.ndarray
    ) -> list[tuple[int, int, int, int, int, int]]:
        """``(est, lst, ect, lct, length, demand)`` of the non-event intervals of ``s``: their
        start window, earliest and latest end, minimum length given, demand."""
        dur = self.prob.dur
        out = []
        for f, la, ln, q in s.other:
            if la >= 0:
                ect = max(int(es[f]) + ln, int(es[la] + dur[la]))
                lct = int(ls[la] + dur[la])
            else:  # held until the end of the schedule
                ect = lct = self.T
            out.append((int(es[f]), int(ls[f]), ect, lct, ln, q))
        return out

    def _timetable(self, es: np.ndarray, ls: np.ndarray) -> None:
        T = self.T
        dur = self.prob.dur
        n = self.prob.n
        ok_start = None  # (n, T + 1): start allowed by every set
        for s in self.prob.sets:
            if not len(s.ev) and not s.other:
                continue
            prof = np.zeros(T + 2, dtype=np.int64)  # difference array
            ev, q = s.ev, s.q
            lo = ls[ev]
            hi = es[ev] + dur[ev]
            has = lo < hi
            np.add.at(prof, np.clip(lo[has], 0, T + 1), q[has])
            np.add.at(prof, np.clip(hi[has], 0, T + 1), -q[has])
            for _e, lst, ect, _l, _p, qq in self._other_bounds(s, es, ls):
                if lst < ect:
                    prof[max(0, lst)] += qq
                    prof[min(T + 1, ect)] -= qq
            usage = np.cumsum(prof)[: T + 1]
            if np.any(usage > s.capacity):
                raise _Refuted
            if not len(ev):
                continue
            # per event: free[e, τ] = usage without e's own compulsory part + q_e <= C
            own = (self.ticks[None, :] >= lo[:, None]) & (self.ticks[None, :] < hi[:, None])
            load = usage[None, :] - np.where(own, q[:, None], 0) + q[:, None]
            bad = load > s.capacity
            if not np.any(bad):
                continue
            cum = np.zeros((len(ev), T + 2), dtype=np.int64)
            np.cumsum(bad, axis=1, out=cum[:, 1:])
            starts = self.ticks[None, :]
            end = np.minimum(starts + dur[ev][:, None], T + 1)
            fits = (np.take_along_axis(cum, end, axis=1) - cum[:, : T + 1]) == 0
            if ok_start is None:
                ok_start = np.ones((n, T + 1), dtype=bool)
            np.logical_and.at(ok_start, ev, fits)  # an event twice in a set: both rows count
        if ok_start is None:
            return
        inwin = (self.ticks[None, :] >= es[:, None]) & (self.ticks[None, :] <= ls[:, None])
        allowed = ok_start & inwin
        anyok = allowed.any(axis=1)
        if not np.all(anyok | (es > ls)):
            raise _Refuted
        first = np.argmax(allowed, axis=1)
        last = T - np.argmax(allowed[:, ::-1], axis=1)
        np.maximum(es, first, out=es)
        np.minimum(ls, last, out=ls)
        self._check(es, ls)

    def _energetic(self, es: np.ndarray, ls: np.ndarray) -> None:
        dur = self.prob.dur
        for s in self.prob.sets:
            ev = s.ev
            others = self._other_bounds(s, es, ls)
            est = np.concatenate([es[ev], np.array([o[0] for o in others], dtype=np.int64)])
            lct = np.concatenate([ls[ev] + dur[ev], np.array([o[3] for o in others], dtype=np.int64)])
            p = np.concatenate([dur[ev], np.array([max(o[4], o[2] - o[1]) for o in others], dtype=np.int64)])
            q = np.concatenate([s.q, np.array([o[5] for o in others], dtype=np.int64)])
            if not len(p):
                continue
            if self.dense:
                t1, t2 = self.t1, self.t2
            else:
                left = _thin(np.unique(np.concatenate([est, lct - p, est + p])), len(p))
                right = _thin(np.unique(np.concatenate([lct, est + p, lct - p])), len(p))
                g1, g2 = np.meshgrid(left, right, indexing="ij")
                keep = g1 < g2
                t1, t2 = g1[keep], g2[keep]
            if not len(t1):
                continue
            width = t2 - t1
            mi = np.minimum(
                np.minimum(p[:, None], width[None, :]),
                np.minimum(est[:, None] + p[:, None] - t1[None, :], t2[None, :] - lct[:, None] + p[:, None]),
            )
            np.maximum(mi, 0, out=mi)
            work = q @ mi
            slack = s.capacity * width - work
            if np.any(slack < 0):
                raise _Refuted
            m = len(ev)
            if not m:
                continue
            qe = q[:m, None]
            avail = (slack[None, :] + qe * mi[:m]) // qe
            pe = p[:m, None]
            left_ov = np.maximum(
                np.minimum(np.minimum(pe, width[None, :]), est[:m, None] + pe - t1[None, :]), 0
            )
            right_ov = np.maximum(
                np.minimum(np.minimum(pe, width[None, :]), t2[None, :] - lct[:m, None] + pe), 0
            )
            new_es = np.max(np.where(left_ov > avail, t2[None, :] - avail, NEG), axis=1)
            new_ls = np.min(np.where(right_ov > avail, t1[None, :] + avail - pe, -NEG), axis=1)
            np.maximum.at(es, ev, new_es)
            np.minimum.at(ls, ev, new_ls)
            self._check(es, ls)


def _thin(points: np.ndarray, items: int) -> np.ndarray:
    """At most ``sqrt(ENERGETIC_WORK / items)`` of ``points``, evenly spread."""
    k = max(2, int((ENERGETIC_WORK / max(1, items)) ** 0.5))
    if len(points) <= k:
        return points
    return points[np.linspace(0, len(points) - 1, k).round().astype(int)]


def _past(deadline: float | None) -> bool:
    """Whether ``deadline`` (a ``time.perf_counter()`` value; ``None``: none) has passed."""
    return deadline is not None and time.perf_counter() > deadline


def shaved_windows(
    prob: Problem,
    makespan: int,
    *,
    shave: bool = True,
    deadline: float | None = None,
    probe_energetic: bool = PROBE_ENERGETIC,
) -> tuple[np.ndarray, np.ndarray, bool] | None:
    """``None`` when makespan ``≤ makespan`` is refuted, else ``(es, ls, cut)``: start windows that
    every schedule of makespan ``≤ makespan`` respects (``cut``: the deadline stopped the shaving,
    the windows hold but are not a fixpoint)."""
    if makespan < 0:
        return None
    if makespan > MAX_TICKS:
        raise ValueError(f"makespan {makespan} is above MAX_TICKS = {MAX_TICKS}")
    prop = Propagator(prob, makespan)
    try:
        es, ls = prop.initial()
        prop.propagate(es, ls)
    except _Refuted:
        return None
    if not shave:
        return es, ls, False
    dur = prob.dur
    used = {int(e) for s in prob.sets for e in s.ev}
    order = sorted((i for i in range(prob.n) if i in used), key=lambda i: -int(dur[i]))
    changed = True
    while changed:
        changed = False
        for i in order:
            for side in (0, 1):
                while es[i] < ls[i]:
                    if _past(deadline):
                        return es, ls, True
                    e2, l2 = es.copy(), ls.copy()
                    if side == 0:
                        l2[i] = es[i]
                    else:
                        e2[i] = ls[i]
                    try:
                        prop.propagate(e2, l2, probe_energetic)
                    except _Refuted:
                        if side == 0:
                            es[i] += 1
                        else:
                            ls[i] -= 1
                        changed = True
                        try:
                            prop.propagate(es, ls)
                        except _Refuted:
                            return None
                        continue
                    break
    return es, ls, False


@dataclass(frozen=True, slots=True)
class DestructiveResult:
    """``bound``: ticks, the largest refuted makespan plus one (or the starting ``lower``);
    ``refuted``: the makespans refuted; ``tests``: makespans tested; ``cpu_s``: process time;
    ``complete``: the search ended by itself (not at the deadline)."""

    bound: int
    refuted: tuple[int, ...]
    tests: int
    cpu_s: float
    complete: bool


def check_makespan(
    prob: Problem, makespan: int, *, lp: bool = True, shave: bool = False, deadline: float | None = None
) -> bool | None:
    """``True``: no schedule of makespan ``≤ makespan`` (propagation, then shaving when asked,
    then the LP of :func:`lp_refutes` when asked); ``False``: not refuted; ``None``: the deadline
    came first."""
    if makespan < 0:
        return True
    if makespan > MAX_TICKS:
        return False
    got = shaved_windows(prob, makespan, shave=shave, deadline=deadline)
    if got is None:
        return True
    es, ls, cut = got
    if lp:
        if _past(deadline):
            return None
        if lp_refutes(prob, es, ls, makespan, deadline):
            return True
        if _past(deadline):  # the LP may have given up for the deadline
            return None
    return None if cut else False


def destructive_bound(
    inst: TickInstance,
    lower: int,
    upper: int,
    *,
    deadline: float | None = None,
    lp: bool = True,
    shave: bool = False,
) -> DestructiveResult:
    """The destructive bound of ``inst`` in ticks, searched in ``[lower, upper]``: ``lower`` is a
    bound already proven, ``upper`` the makespan of a known schedule (never refuted). Trial
    makespans ``lower, lower + 1, lower + 3, …`` (doubling steps) while refuted, then bisection
    between the largest refuted one and the smallest not refuted. Every refuted makespan ``T``
    is a proof on its own (the bound is ``T + 1``), so a test that is not monotone in ``T`` or a
    ``deadline`` (``time.perf_counter()``) that stops the search only weakens the result."""
    c0 = time.process_time()
    if not applies(inst) or lower >= upper:
        return DestructiveResult(lower, (), 0, 0.0, True)
    prob = build(inst)
    refuted: list[int] = []
    tests = 0

    def test(t: int) -> bool | None:
        nonlocal tests
        tests += 1
        got = check_makespan(prob, t, lp=lp, shave=shave, deadline=deadline)
        if got:
            refuted.append(t)
        return got

    best = lower - 1  # largest makespan known refuted
    hi: int | None = None  # smallest makespan tested and not refuted
    step = 1
    complete = True
    while best + step < upper:
        if _past(deadline):
            complete = False
            break
        t = best + step
        got = test(t)
        if got is None:
            complete = False
            break
        if not got:
            hi = t
            break
        best = t
        step *= 2
    if complete and hi is None and best + 1 < upper:
        hi = upper
    while complete and hi is not None and hi - best > 1:
        if _past(deadline):
            complete = False
            break
        t = (best + hi) // 2
        got = test(t)
        if got is None:
            complete = False
            break
        if got:
            best = t
        else:
            hi = t
    return DestructiveResult(max(lower, best + 1), tuple(refuted), tests, time.process_time() - c0, complete)


# ---------------------------------------------------------------------------- LP test
LP_MAX_COLUMNS = 20_000
"""The LP test is skipped (nothing refuted) when the feasible subsets exceed this many columns.
assumed: GLOP solves a j30-sized LP of that many columns in well under a second."""
LP_MAX_NODES = 400_000
"""The LP test is also skipped when listing the maximal subsets takes more than this many steps
of the enumeration (the steps, not only the subsets found, grow exponentially with the events
available in one piece: a random 290-event graph spent 147 s in it for one test of a 1.5 s
share). assumed: about a second of Python."""
LP_TOL = 1e-6
"""Margin of the Farkas certificate (unit-time) below which the LP refutes nothing."""


def _compatible(prob: Problem) -> np.ndarray:
    """``ok[i, j]``: events ``i`` and ``j`` may run at the same instant (neither must end before
    the other starts by the distances, no capacity set holds both above its capacity)."""
    dur, dist = prob.dur, prob.dist
    ok = ~((dist >= dur[:, None]) & (dist > NEG))
    ok &= ok.T
    for s in prob.sets:
        if len(s.pairs):
            ok[s.pairs[:, 0], s.pairs[:, 1]] = False
            ok[s.pairs[:, 1], s.pairs[:, 0]] = False
    np.fill_diagonal(ok, False)
    return ok


def _maximal_subsets(
    avail: list[int],
    ok: np.ndarray,
    prob: Problem,
    limit: int,
    steps: list[int] | None = None,
    deadline: float | None = None,
) -> list[tuple[int, ...]] | None:
    """Every maximal subset of ``avail`` that may run at once (pairwise compatible, within every
    set's capacity); ``None`` when there are more than ``limit``, when the enumeration takes more
    than ``steps[0]`` steps (decremented in place, so that a caller's budget is shared by its
    calls) or when ``deadline`` (``time.perf_counter()``) passes."""
    budget = steps if steps is not None else [LP_MAX_NODES]
    m = len(avail)
    sets = [(s.capacity, dict(zip(s.ev.tolist(), s.q.tolist()))) for s in prob.sets if len(s.ev)]
    need = [tuple(d.get(j, 0) for _c, d in sets) for j in avail]
    caps = tuple(c for c, _d in sets)
    compat = [sum(1 << b for b in range(m) if ok[avail[a], avail[b]]) for a in range(m)]
    out: list[tuple[int, ...]] = []

    def fit(load: tuple[int, ...], b: int) -> bool:
        return all(x + y <= c for x, y, c in zip(load, need[b], caps))

    def rec(cand: int, common: int, chosen: int, load: tuple[int, ...]) -> bool:
        # cand: members still to decide on (compatible with every chosen one and fitting)
        budget[0] -= 1
        if budget[0] < 0 or (
            not budget[0] & 4095 and _past(deadline)
        ):
            return False  # out of steps or time: the caller gives up the LP test
        if not cand:
            rest = common & ~chosen
            while rest:
                low = rest & -rest
                if fit(load, low.bit_length() - 1):
                    return True  # not maximal
                rest ^= low
            out.append(tuple(avail[b] for b in range(m) if chosen >> b & 1))
            return len(out) <= limit
        low = cand & -cand
        b = low.bit_length() - 1
        new_load = tuple(x + y for x, y in zip(load, need[b]))
        nc = (cand ^ low) & compat[b]
        keep = 0
        while nc:
            lo2 = nc & -nc
            if fit(new_load, lo2.bit_length() - 1):
                keep |= lo2
            nc ^= lo2
        if not rec(keep, common & compat[b], chosen | low, new_load):
            return False
        return rec(cand ^ low, common, chosen, load)

    full = (1 << m) - 1
    if not rec(full, full, 0, tuple(0 for _ in caps)):
        return None
    return out


def lp_refutes(
    prob: Problem, es: np.ndarray, ls: np.ndarray, makespan: int, deadline: float | None = None
) -> bool:
    """Whether the preemptive relaxation with start windows ``[es, ls]`` (valid for every
    schedule of makespan ``≤ makespan``) has no solution, proven by a Farkas certificate.
    ``False`` (nothing refuted) also when the columns are too many (:data:`LP_MAX_COLUMNS`,
    :data:`LP_MAX_NODES`) or ``deadline`` passes while they are listed, or GLOP is stopped by it."""
    from ortools.linear_solver import pywraplp

    dur = prob.dur
    acts = [i for i in range(prob.n) if dur[i] > 0]
    if not acts:
        return False
    lct = ls + dur
    pts = sorted({0, makespan, *es[acts].tolist(), *lct[acts].tolist(), *ls[acts].tolist(),
                  *(es[acts] + dur[acts]).tolist()})
    pts = [t for t in pts if 0 <= t <= makespan]
    ok = _compatible(prob)
    columns: list[tuple[int, tuple[int, ...]]] = []
    lengths = []
    seen: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
    steps = [LP_MAX_NODES]
    for k in range(len(pts) - 1):
        a, b = pts[k], pts[k + 1]
        lengths.append(b - a)
        avail = tuple(i for i in acts if es[i] <= a and b <= lct[i])
        subs = seen.get(avail)
        if subs is None:
            got = _maximal_subsets(list(avail), ok, prob, LP_MAX_COLUMNS - len(columns), steps, deadline)
            if got is None:
                return False
            subs = seen[avail] = got
        columns.extend((k, s) for s in subs if s)
        if len(columns) > LP_MAX_COLUMNS:
            return False
    solver = pywraplp.Solver.CreateSolver("GLOP")
    if solver is None:
        return False
    inf = solver.infinity()
    nk = len(lengths)
    # a[i, k]: how long i runs in interval k (only where i is available)
    index = {pts[k]: k for k in range(len(pts))}
    avail_k: dict[int, list[int]] = {}
    for k in range(nk):
        for i in acts:
            if es[i] <= pts[k] and pts[k + 1] <= lct[i]:
                avail_k.setdefault(i, []).append(k)
    a_var = {(i, k): solver.NumVar(0.0, inf, "") for i, ks in avail_k.items() for k in ks}
    link = {ik: solver.Constraint(0.0, 0.0) for ik in a_var}
    for ik, v in a_var.items():
        link[ik].SetCoefficient(v, 1.0)
    cap_rows = [solver.Constraint(-inf, float(ln)) for ln in lengths]
    for k, sub in columns:
        v = solver.NumVar(0.0, inf, "")
        cap_rows[k].SetCoefficient(v, 1.0)
        for i in sub:
            link[(i, k)].SetCoefficient(v, -1.0)
    # rows (i, k0, k1, rhs): i runs at least rhs in the intervals k0 <= k < k1
    rows: list[tuple[int, int, int, int]] = []
    for i in acts:
        p_i, lo, hi = int(dur[i]), int(es[i]), int(lct[i])
        lst, ect = int(ls[i]), int(es[i] + dur[i])
        k_lo, k_hi = index[lo], index[min(hi, makespan)]
        rows.append((i, k_lo, k_hi, p_i))
        for k in range(nk):
            if lst <= pts[k] and pts[k + 1] <= ect:
                rows.append((i, k, k + 1, lengths[k]))
    short = {i: solver.NumVar(0.0, inf, "") for i in acts}
    cons = []
    for i, k0, k1, rhs in rows:
        r = solver.Constraint(float(rhs), inf)
        r.SetCoefficient(short[i], 1.0)
        for k in range(k0, k1):
            v = a_var.get((i, k))
            if v is not None:
                r.SetCoefficient(v, 1.0)
        cons.append(r)
    obj = solver.Objective()
    for v in short.values():
        obj.SetCoefficient(v, 1.0)
    obj.SetMinimization()
    if deadline is not None:
        left_ms = int(1000 * (deadline - time.perf_counter()))
        if left_ms <= 0:
            return False
        solver.SetTimeLimit(left_ms)
    if solver.Solve() != pywraplp.Solver.OPTIMAL or solver.Objective().Value() <= LP_TOL:
        return False
    # Farkas certificate (module docstring, "LP"): multipliers w >= 0 of the rows from the duals,
    # c[i, k] the total multiplier of i in interval k, y_k the most a column of k earns
    w = [max(0.0, r.dual_value()) for r in cons]
    c = np.zeros((prob.n, nk))
    for (i, k0, k1, _rhs), wr in zip(rows, w):
        if wr > 0:
            c[i, k0:k1] += wr
    y = [0.0] * nk
    for k, sub in columns:
        gain = float(sum(c[i, k] for i in sub))
        if gain > y[k]:
            y[k] = gain
    lhs = sum(wr * rhs for (_i, _k0, _k1, rhs), wr in zip(rows, w))
    rhs_total = sum(yk * ln for yk, ln in zip(y, lengths))
    return lhs - rhs_total > LP_TOL
