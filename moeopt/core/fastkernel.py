"""The machine-code part of :mod:`moeopt.core.fastloop` (imported on its first use only: this
module imports numba). See there for what the loop does and why it gives the Python loop's
schedule; each function here names the Python code it mirrors."""

from __future__ import annotations

import heapq
import math
from typing import Any

import numba
import numpy as np

INF = math.inf

_jit = numba.njit(cache=True, nogil=True)


@_jit
def topo_order(indeg: Any, succ_ptr: Any, succ_idx: Any, sources: Any) -> Any:
    """Kahn's algorithm as ``moeopt.core.compiled._kahn`` runs it (breadth first from
    ``sources`` in their order, each event's successors in order): the same order, of every
    event or of fewer when the edges form a cycle. ``indeg`` is consumed."""
    n = indeg.shape[0]
    topo = np.empty(n, np.int64)
    count = 0
    for s in sources:
        topo[count] = s
        count += 1
    head = 0
    while head < count:
        i = topo[head]
        head += 1
        for k in range(succ_ptr[i], succ_ptr[i + 1]):
            j = succ_idx[k]
            left = indeg[j] - 1
            indeg[j] = left
            if left == 0:
                topo[count] = j
                count += 1
    return topo[:count]


@_jit
def skipped_edges(succ_ptr: Any, succ_idx: Any, a: Any, b: Any) -> Any:
    """Per successor entry (the flat index of ``succ_idx``), whether it is one of the edges
    ``a[k] -> b[k]``: an entry of row ``a[k]`` whose successor is ``b[k]`` (an event is a
    successor of another once; a pair that is no edge marks nothing)."""
    skip = np.zeros(succ_idx.shape[0], np.bool_)
    for k in range(a.shape[0]):
        i = a[k]
        j = b[k]
        for e in range(succ_ptr[i], succ_ptr[i + 1]):
            if succ_idx[e] == j:
                skip[e] = True
                break
    return skip


@_jit
def paths_without(
    topo: Any, dur: Any, succ_ptr: Any, succ_idx: Any, succ_lam: Any, skip: Any, end: Any
) -> Any:
    """``(tails, ready)`` per event over the edges not marked in ``skip``: the longest path from
    a source to the event's end (``max(0, tails[p] + λ) + dur``), and the latest ``end[p] + λ``
    of its predecessors (0 for none), each pushed along the successor entries in topological
    order (an event's value is final when it is reached: all its predecessors come before it).
    A maximum of the same float sums in any order, so the values of a walk over each event's
    predecessors, which ``moeopt.megamoe.analysis.bounds.data_paths`` makes."""
    n = topo.shape[0]
    best = np.zeros(n, np.float64)  # max(0, tails[p] + λ) over the predecessors so far
    tails = np.zeros(n, np.float64)
    ready = np.zeros(n, np.float64)
    for i in topo:
        t = best[i] + dur[i]
        tails[i] = t
        e_i = end[i]
        for e in range(succ_ptr[i], succ_ptr[i + 1]):
            if skip[e]:
                continue
            j = succ_idx[e]
            lam = succ_lam[e]
            v = t + lam
            if v > best[j]:
                best[j] = v
            v = e_i + lam
            if v > ready[j]:
                ready[j] = v
    return tails, ready


@_jit
def ancestors_or_self(topo: Any, succ_ptr: Any, succ_idx: Any, needed: Any) -> None:
    """Mark in ``needed`` (marked already: the ends) every event with a marked successor,
    in reverse topological order (every successor decided before its event)."""
    for k in range(topo.shape[0] - 1, -1, -1):
        i = topo[k]
        if needed[i]:
            continue
        for e in range(succ_ptr[i], succ_ptr[i + 1]):
            if needed[succ_idx[e]]:
                needed[i] = True
                break


@_jit
def first_at_least(levels: Any, k: int, hi: int, need: int) -> int:
    """The first index from ``k`` (below ``hi``) whose level is at least ``need``; ``hi`` when
    there is none."""
    while k < hi and levels[k] < need:
        k += 1
    return k


@_jit
def admit(
    times: Any, levels: Any, lo: int, hi: int, cap: int, t: float, take: int, back: int, dur: float,
    steps: Any,
) -> float:  # fmt: skip
    """``SemaphoreProfile.admit(t, take, back, dur)`` on the breakpoints ``times[lo:hi]``
    (levels ``levels[lo:hi]``, ``cap`` before the first): the earliest ``t' >= t`` at which
    ``take`` units can be held over ``[t', t' + dur)`` and ``take - back`` units from ``t' +
    dur`` on; ``INF`` when there is none with what is committed now. ``steps[0]`` counts the
    breakpoints walked over."""
    if dur > 0:
        head = take
    else:
        head = take - back
        if head <= 0:
            return t  # a zero-length hold gives its units back at the instant it takes them
    after = take - back
    if after > 0:
        # the time from which every level is at least ``after`` (SemaphoreProfile.free_from):
        # the breakpoint after the last one below it
        j = hi - 1
        while j >= lo and levels[j] >= after:
            j -= 1
        steps[0] += hi - 1 - j
        if j >= lo:
            if j + 1 == hi:
                return INF
            f = times[j + 1]
            if f > t:
                t = f
    # k: the first breakpoint after t
    a, b = lo, hi
    while a < b:
        m = (a + b) >> 1
        if times[m] <= t:
            a = m + 1
        else:
            b = m
    k = a
    k0 = k
    if (levels[k - 1] if k > lo else cap) < head:
        k = first_at_least(levels, k, hi, head)
        if k == hi:
            steps[0] += k - k0
            return INF
        t = times[k]
        k += 1
    if dur <= 0:
        steps[0] += k - k0
        return t
    end = t + dur
    # each breakpoint inside the hold [t, end) must leave take units; at the first that does
    # not, the next try starts at the next breakpoint with head units
    while k < hi:
        if times[k] >= end:
            steps[0] += k - k0
            return t
        if levels[k] < take:
            k = first_at_least(levels, k + 1, hi, head)
            if k == hi:
                steps[0] += k - k0
                return INF
            t = times[k]
            end = t + dur
        k += 1
    steps[0] += k - k0
    return t


@_jit
def breakpoint_at(
    times: Any, levels: Any, lo: int, hi: int, cap: int, t: float, first: int
) -> tuple[int, int]:
    """The index of the breakpoint at ``t`` in ``times[lo:hi]`` (searched from ``first``), made
    when missing at the level in force before it; and the new ``hi``."""
    a, b = first, hi
    while a < b:
        m = (a + b) >> 1
        if times[m] < t:
            a = m + 1
        else:
            b = m
    k = a
    if k == hi or times[k] != t:
        for j in range(hi, k, -1):
            times[j] = times[j - 1]
            levels[j] = levels[j - 1]
        levels[k] = levels[k - 1] if k > lo else cap
        times[k] = t
        hi += 1
    return k, hi


@_jit
def lower(levels: Any, a: int, b: int, units: int, low: Any, s: int) -> None:
    """The levels ``levels[a:b]`` lowered by ``units``, and ``low[s]`` (the lowest level the
    profile has had) kept up to date."""
    for j in range(a, b):
        v = levels[j] - units
        levels[j] = v
        if v < low[s]:
            low[s] = v


@_jit
def best_site(
    i: int, g: int, t: float, free: Any, ph_ptr: Any, ph_pool: Any, gs_ptr: Any, gs_site: Any,
    mat_ptr: Any, mem: Any, n_sites: int,
) -> int:  # fmt: skip
    """``SchedulerState._best_site``: the allowed site of group ``g`` at which event ``i``'s
    placeholders give the earliest start from ``t`` (the first such site in the group's order)."""
    best = -1
    best_t = INF
    for q in range(gs_ptr[g], gs_ptr[g + 1]):
        site = gs_site[q]
        ts = t
        for x in range(ph_ptr[i], ph_ptr[i + 1]):
            c = ph_pool[x] * n_sites + site
            mf = INF
            for y in range(mat_ptr[c], mat_ptr[c + 1]):
                if free[mem[y]] < mf:
                    mf = free[mem[y]]
            if mf > ts:
                ts = mf
        if ts < best_t:
            best_t = ts
            best = site
    return best


@_jit
def site_binding(
    i: int, g: int, t: float, free: Any, ph_ptr: Any, ph_pool: Any, gs_ptr: Any, gs_site: Any,
    mat_ptr: Any, mem: Any, mem_pos: Any, n_sites: int, chosen: Any,
) -> None:  # fmt: skip
    """``SchedulerState._site_binding``: in ``chosen``, the members event ``i`` (several
    placeholders, group ``g`` without a site) binds to when it starts at ``t``: at each allowed
    site where every placeholder has a member free by ``t``, the first such member of each; of
    those sites, the one whose members' places in their pools (``mem_pos``) come first."""
    nph = ph_ptr[i + 1] - ph_ptr[i]
    best_pos = np.empty(nph, np.int64)
    pick = np.empty(nph, np.int64)
    pos = np.empty(nph, np.int64)
    have = False
    for q in range(gs_ptr[g], gs_ptr[g + 1]):
        site = gs_site[q]
        ok = True
        for x in range(nph):
            c = ph_pool[ph_ptr[i] + x] * n_sites + site
            found = -1
            for y in range(mat_ptr[c], mat_ptr[c + 1]):
                if free[mem[y]] <= t:
                    found = y
                    break
            if found < 0:
                ok = False
                break
            pick[x] = mem[found]
            pos[x] = mem_pos[found]
        if not ok:
            continue
        better = not have
        if have:
            for x in range(nph):
                if pos[x] != best_pos[x]:
                    better = pos[x] < best_pos[x]
                    break
        if better:
            have = True
            for x in range(nph):
                best_pos[x] = pos[x]
                chosen[x] = pick[x]


@_jit
def evaluate(
    i: int, ready: Any, fix_ptr: Any, fix_idx: Any, free: Any, pools: Any, group_site: Any, n_sites: int,
    sig: Any, acq_ptr: Any, acq_sem: Any, acq_take: Any, acq_back: Any, dur: Any, low: Any,
    times: Any, levels: Any, off: Any, used: Any, sem_cap: Any, lo_buf: Any, hi_buf: Any, chosen: Any,
    steps: Any, set_buf: Any,
) -> tuple[float, float, int, int, int, int]:  # fmt: skip
    """``SchedulerState.evaluate``: ``(start, t_base, the resource that set t_base, the
    semaphore that moved the start last, how many members were chosen, the candidate set that
    set t_base)`` (-1: none), the members bound to the placeholders in ``chosen``. ``pools``:
    the placeholder tables (see ``fastloop.LoopForm.pools``).

    The candidate set (see :func:`loop`'s gates) is a number for a set of resources every
    future evaluation of the event must bind one of: a fixed resource ``r`` is ``r``; a pool
    placeholder ``p`` of an event outside any colocation group, the pool's members, ``n_res +
    p``; a placeholder of a group whose site is fixed, the pool's members there, ``n_res +
    n_pools + p * n_sites + site``; the one placeholder of a group whose site is not fixed yet,
    its pool's members at the group's sites (``sm_row`` ``k``), ``n_res + n_pools * (1 +
    n_sites) + k``; -2 when t_base was set by a placeholder whose members may still change
    (one of several placeholders of a group whose site is not fixed yet, bound at the best
    site for now)."""
    ph_ptr, ph_pool, group, gs_ptr, gs_site, sm_ptr, pool_ptr, mat_ptr, mem, sm_row, mem_pos = pools
    n_res = free.shape[0]
    n_pools = pool_ptr.shape[0] - 1
    t = ready[i]
    rb = -1
    bset = -1
    for q in range(fix_ptr[i], fix_ptr[i + 1]):
        r = fix_idx[q]
        if free[r] > t:
            t = free[r]
            rb = r
            bset = r
    nph = ph_ptr[i + 1] - ph_ptr[i]
    nl = 0
    unsettled = -1  # the group of several placeholders without a site yet (-1: none)
    if nph:
        # the member lists of the placeholders (ranges of ``mem``) and their candidate sets
        g = group[i]
        if g < 0:
            for x in range(ph_ptr[i], ph_ptr[i + 1]):
                p = ph_pool[x]
                lo_buf[nl] = pool_ptr[p]
                hi_buf[nl] = pool_ptr[p + 1]
                set_buf[nl] = n_res + p
                nl += 1
        else:
            site = group_site[g]
            if site < 0 and sm_row[i] >= 0:
                # one placeholder: its pool's members at the group's sites (choosing the member
                # chooses the site); a group's site, once fixed, only narrows them to a subset,
                # so their earliest free time bounds the start for good
                k = sm_row[i]
                lo_buf[0] = sm_ptr[k]
                hi_buf[0] = sm_ptr[k + 1]
                set_buf[0] = n_res + n_pools * (1 + n_sites) + k
                nl = 1
            else:
                fixed_site = site >= 0
                if not fixed_site:
                    unsettled = g
                if site < 0:
                    site = best_site(i, g, t, free, ph_ptr, ph_pool, gs_ptr, gs_site, mat_ptr, mem, n_sites)
                for x in range(ph_ptr[i], ph_ptr[i + 1]):
                    c = ph_pool[x] * n_sites + site
                    lo_buf[nl] = mat_ptr[c]
                    hi_buf[nl] = mat_ptr[c + 1]
                    set_buf[nl] = n_res + n_pools + c if fixed_site else -2
                    nl += 1
        if nl == 1:
            lo, hi = lo_buf[0], hi_buf[0]
            if hi - lo == 1:
                best = mem[lo]
                if free[best] > t:
                    t = free[best]
                    rb = best
                    bset = set_buf[0]
                chosen[0] = best
            else:
                # the first member free by t, else the earliest to free up (first on ties)
                best = -1
                for y in range(lo, hi):
                    if free[mem[y]] <= t:
                        best = mem[y]
                        break
                if best < 0:
                    bf = INF
                    for y in range(lo, hi):
                        if free[mem[y]] < bf:
                            bf = free[mem[y]]
                            best = mem[y]
                    t = bf
                    rb = best
                    bset = set_buf[0]
                chosen[0] = best
        else:
            # the latest of each placeholder's earliest member; then, per placeholder, the
            # first member free by then
            for x in range(nl):
                mf = INF
                first = -1
                for y in range(lo_buf[x], hi_buf[x]):
                    if free[mem[y]] < mf:
                        mf = free[mem[y]]
                        first = mem[y]
                if mf > t:
                    t = mf
                    rb = first
                    bset = set_buf[x]
            for x in range(nl):
                for y in range(lo_buf[x], hi_buf[x]):
                    if free[mem[y]] <= t:
                        chosen[x] = mem[y]
                        break
    tb = t
    sb = -1
    g = sig[i]
    a0 = acq_ptr[g]
    m = acq_ptr[g + 1] - a0
    if m:
        d = dur[i]
        k = 0
        ok = 0
        while ok < m and t < INF:
            s = acq_sem[a0 + k]
            take = acq_take[a0 + k]
            if low[s] >= take:
                t2 = t
            else:
                t2 = admit(
                    times, levels, off[s], off[s] + used[s], sem_cap[s], t, take, acq_back[a0 + k], d, steps
                )
            if t2 > t:
                t = t2
                sb = s
                ok = 1
            else:
                ok += 1
            k = k + 1 if k + 1 < m else 0
        if t > tb and nl and t < INF:
            # semaphores moved the start: the first member free by then, per placeholder
            for x in range(nl):
                for y in range(lo_buf[x], hi_buf[x]):
                    if free[mem[y]] <= t:
                        chosen[x] = mem[y]
                        break
    if unsettled >= 0 and t < INF:
        # several placeholders and no site yet: the binding at the start found (see
        # site_binding; every site whose members are free by t gives that start)
        site_binding(
            i, unsettled, t, free, ph_ptr, ph_pool, gs_ptr, gs_site, mat_ptr, mem, mem_pos, n_sites, chosen
        )  # fmt: skip
    return t, tb, rb, sb, nl, bset


@_jit
def eligible(
    j: int, heap: Any, before: Any, ready: Any, after: Any, version: Any, key_start: Any, sig: Any,
    acq_ptr: Any, acq_sem: Any, gainful: Any, waiters: Any, waiters_off: Any, n_wait: Any,
) -> None:  # fmt: skip
    """Event ``j`` became eligible: its heap entry keyed by its ready time (a lower bound), and
    a place in the list of eligible acquirers of each semaphore some release gives back to."""
    heapq.heappush(heap, (before[j], ready[j], after[j], j, version[j]))
    key_start[j] = ready[j]
    g = sig[j]
    for q in range(acq_ptr[g], acq_ptr[g + 1]):
        s = acq_sem[q]
        if gainful[s]:
            waiters[waiters_off[s] + n_wait[s]] = j
            n_wait[s] += 1


@_jit
def leave_gate(
    i: int, gi: int, t_lb: float, gates: Any, in_gate: Any, by_rank: Any, key_start: Any, heap: Any,
    before: Any, after: Any, version: Any,
) -> None:  # fmt: skip
    """Event ``i``, gate ``gi``'s representative, leaves it; the next member (if any) gets the
    gate's heap entry, keyed with ``t_lb`` (a value the set's earliest free time had) or its own
    key start when later."""
    gh = gates[gi]
    heapq.heappop(gh)
    in_gate[i] = -1
    if gh:
        j = by_rank[gh[0]]
        if t_lb > key_start[j]:
            key_start[j] = t_lb
        heapq.heappush(heap, (before[j], key_start[j], after[j], j, version[j]))


@_jit
def loop(
    dur: Any, ready0: Any, indeg: Any, succ_ptr: Any, succ_idx: Any, succ_lam: Any,
    fix_ptr: Any, fix_idx: Any, n_res: int, pools: Any, group_site0: Any, res_site: Any, n_sites: int,
    sig: Any,
    acq_ptr: Any, acq_sem: Any, acq_take: Any, acq_back: Any,
    hold_ptr: Any, hold_sem: Any, hold_take: Any, hold_back: Any,
    take_ptr: Any, take_sem: Any, take_units: Any,
    give_ptr: Any, give_sem: Any, give_units: Any,
    sem_cap: Any, off: Any, waiters_off: Any, before: Any, after: Any, rank: Any, by_rank: Any,
    budgets: Any,
) -> Any:  # fmt: skip
    """``_run_keyed``: ``(status, start, end, ready, ready_pred, wait_res,
    t_base, wait_sem, order, times, levels, used, chosen)``; ``status`` 0: done, 1: no eligible event
    can ever start, 2: a release lifts a semaphore above its capacity, 4: it gave up (the caller
    runs the Python loop). ``indeg`` is used up.

    ``budgets``: ``(wakes per commit, wakes base, breakpoints per commit, breakpoints base,
    pushes per commit, pushes base)``. The loop gives up as soon as, with ``c`` events
    committed so far, releases have woken waiters more than ``wakes per commit * c + wakes
    base`` times (many events waiting for one shared semaphore: the Python loop's gates wake
    one entry per class), admissions have walked over more breakpoints than ``breakpoints per
    commit * c + breakpoints base`` (a semaphore whose levels stay low for long stretches: the
    Python loop's profiles skip them in blocks), or keys that moved went back to the heap more
    than ``pushes per commit * c + pushes base`` times (events held back by a semaphore, which
    no gate here holds, re-keyed at every commit that moves its level). Counted against the
    commits so far, a graph that costs too much is given up early, before the waste is large.

    Per signature (``sig[i]``, CSR by ``*_ptr``): the acquire triples ``(sem, take, back)`` in
    the order of the state's ``acq3``, and the changes of ``SchedulerState.sem_ops``: holds
    ``(sem, take, back)``, other takes ``(sem, units)``, other gives ``(sem, units)``.
    ``waiters_off``: per semaphore, where its list of eligible acquirers lives in one array
    (room for every event that acquires it). ``rank``: each event's place in the order of
    ``(before, after, index)`` (``by_rank`` its inverse).

    *Gates.* An event whose key moved because a busy candidate set held it back (t_base after
    its ready time, set by a fixed resource or a pool's members that every later evaluation of
    it binds one of, and no semaphore moving it further: see :func:`evaluate`) waits in that
    set's gate instead of going back to the heap. Every event in the gate starts no earlier
    than the set's earliest free time ``T``, which only grows; so one heap entry stands for the
    whole gate, its member first in ``(before, after, index)`` (the gate's own heap of ranks)
    keyed ``(before, T', after, index)`` with ``T'`` a value ``T`` had: a lower bound of every
    member's key, so the lazy heap's argument holds and the same event is committed next.
    Without gates, a commit on a set that many ready events wait for re-keys every one of them
    (20,000 independent events on one core took 90 s against 0.1 s in the Python loop, whose
    gates this follows for the resource-held case; it gates more cases). A member leaves only
    as the gate's representative: committed, starved, or held by another set or a semaphore;
    the next member then gets the entry, keyed with the leaver's ``T'``. A release cannot bring
    a member's start below ``T``, so the release wake-ups never push a member (its key start
    is a value ``T`` had)."""
    n = dur.shape[0]
    n_sem = sem_cap.shape[0]
    start = np.zeros(n, np.float64)
    end = np.zeros(n, np.float64)
    ready = ready0.copy()
    rpred = np.full(n, -1, np.int64)
    wres = np.full(n, -1, np.int64)
    tbase = np.zeros(n, np.float64)
    wsem = np.full(n, -1, np.int64)
    order = np.empty(n, np.int64)
    free = np.zeros(n_res, np.float64)
    times = np.empty(off[n_sem], np.float64)
    levels = np.empty(off[n_sem], np.int64)
    used = np.zeros(n_sem, np.int64)
    done_ = np.zeros(n, np.bool_)
    version = np.zeros(n, np.int64)
    # the lowest level each profile has had (SemaphoreProfile.low): a semaphore whose every
    # level was always at least ``take`` admits at once
    low = sem_cap.copy()
    # per semaphore that some event gives units back to beyond what it took (a release can then
    # bring a start forward): its eligible acquirers, re-evaluated after each such release
    gainful = np.zeros(n_sem, np.bool_)
    for q in range(give_sem.shape[0]):
        gainful[give_sem[q]] = True
    waiters = np.empty(waiters_off[n_sem], np.int64)
    n_wait = np.zeros(n_sem, np.int64)
    ph_ptr = pools[0]
    group = pools[2]
    group_site = group_site0.copy()
    max_ph = 1
    for i in range(n):
        if ph_ptr[i + 1] - ph_ptr[i] > max_ph:
            max_ph = ph_ptr[i + 1] - ph_ptr[i]
    lo_buf = np.empty(max_ph, np.int64)
    hi_buf = np.empty(max_ph, np.int64)
    chosen = np.empty(max_ph, np.int64)
    scratch = np.empty(max_ph, np.int64)
    chosen_out = np.full(ph_ptr[n], -1, np.int64)
    set_buf = np.empty(max_ph, np.int64)
    # per event, the start of its live heap entry's key (INF: starved, no entry)
    key_start = np.full(n, INF, np.float64)
    # the gates, one per candidate set (see evaluate): their members' ranks (a heap each; the
    # first is the representative, the one member with a heap entry) and each event's gate
    n_sets = n_res + (pools[6].shape[0] - 1) * (1 + n_sites) + pools[5].shape[0] - 1
    gates = [[np.int64(0)] for _ in range(n_sets)]
    for gh in gates:
        gh.pop()
    in_gate = np.full(n, -1, np.int64)
    pushes = 0
    wakes = 0
    steps = np.zeros(1, np.int64)  # breakpoints walked by admission
    # heap entries (before, a lower bound of the start, after, event, version)
    heap = [(0.0, 0.0, 0.0, 0, 0)]
    heap.pop()

    for j in range(n):
        if indeg[j] == 0:
            eligible(
                j, heap, before, ready, after, version, key_start, sig, acq_ptr, acq_sem, gainful, waiters,
                waiters_off, n_wait,
            )  # fmt: skip
    done = 0
    status = 0
    while heap:
        bk, sk, ak, i, ver = heapq.heappop(heap)
        if ver != version[i] or done_[i]:
            continue  # an entry replaced after a release
        t, tb, rb, sb, nch, bset = evaluate(
            i, ready, fix_ptr, fix_idx, free, pools, group_site, n_sites, sig, acq_ptr, acq_sem,
            acq_take, acq_back, dur, low, times, levels, off, used, sem_cap, lo_buf, hi_buf, chosen, steps,
            set_buf,
        )  # fmt: skip
        if steps[0] > budgets[2] * done + budgets[3]:
            status = 4  # (see budgets)
            break
        gi = in_gate[i]
        if t != sk and t < INF and sb < 0 and bset >= 0 and tb > ready[i]:
            # held back by a busy candidate set: it waits in the set's gate
            key_start[i] = t
            if gi == bset:
                # the gate's representative, keyed afresh (T has grown)
                heapq.heappush(heap, (bk, t, ak, i, ver))
                continue
            if gi >= 0:
                leave_gate(i, gi, sk, gates, in_gate, by_rank, key_start, heap, before, after, version)
            gh = gates[bset]
            rep = by_rank[gh[0]] if gh else -1
            heapq.heappush(gh, rank[i])
            in_gate[i] = bset
            if rep < 0 or rank[i] < rank[rep]:
                if rep >= 0:
                    version[rep] += 1  # (its entry retired: the gate's is i's now)
                heapq.heappush(heap, (bk, t, ak, i, ver))
            continue
        if gi >= 0:
            leave_gate(i, gi, sk, gates, in_gate, by_rank, key_start, heap, before, after, version)
        if t == INF:
            # starved until a release: it waits in its semaphores' lists of acquirers only
            # (a release re-evaluates it); a starved event nothing can release is left over
            key_start[i] = INF
            continue
        if t != sk:
            # the key moved: back with the start found (a lower bound again)
            key_start[i] = t
            pushes += 1
            if pushes > budgets[4] * done + budgets[5]:
                status = 4
                break
            heapq.heappush(heap, (bk, t, ak, i, ver))
            continue
        # SchedulerState.commit
        e = t + dur[i]
        done_[i] = True
        start[i] = t
        end[i] = e
        order[done] = i
        done += 1
        for q in range(fix_ptr[i], fix_ptr[i + 1]):
            free[fix_idx[q]] = e
        p0 = ph_ptr[i]
        for x in range(nch):
            free[chosen[x]] = e
            chosen_out[p0 + x] = chosen[x]
        grp = group[i]
        if grp >= 0 and group_site[grp] < 0:
            # the group's site: that of the event's first resource (fixed ones first)
            first = fix_idx[fix_ptr[i]] if fix_ptr[i + 1] > fix_ptr[i] else chosen[0]
            group_site[grp] = res_site[first]
        wres[i] = rb
        tbase[i] = tb
        wsem[i] = sb
        g = sig[i]
        for q in range(hold_ptr[g], hold_ptr[g + 1]):
            # SemaphoreProfile.hold: take units over [t, e), keep take - back from e on
            s = hold_sem[q]
            lo = off[s]
            hi = lo + used[s]
            k, hi = breakpoint_at(times, levels, lo, hi, sem_cap[s], t, lo)
            k2, hi = breakpoint_at(times, levels, lo, hi, sem_cap[s], e, k)
            used[s] = hi - lo
            take = hold_take[q]
            lower(levels, k, k2, take, low, s)
            keep = take - hold_back[q]
            if keep:
                lower(levels, k2, hi, keep, low, s)
        for q in range(take_ptr[g], take_ptr[g + 1]):
            # SemaphoreProfile.add(t, -units)
            s = take_sem[q]
            lo = off[s]
            k, hi = breakpoint_at(times, levels, lo, lo + used[s], sem_cap[s], t, lo)
            used[s] = hi - lo
            lower(levels, k, hi, take_units[q], low, s)
        for q in range(give_ptr[g], give_ptr[g + 1]):
            # SemaphoreProfile.add(e, units) and the capacity check
            s = give_sem[q]
            lo = off[s]
            k, hi = breakpoint_at(times, levels, lo, lo + used[s], sem_cap[s], e, lo)
            used[s] = hi - lo
            u = give_units[q]
            for j in range(k, hi):
                v = levels[j] + u
                levels[j] = v
                if v > sem_cap[s]:
                    status = 2
            if status:
                break
            # the release may bring an eligible acquirer's start forward, but only one whose
            # key's start is after the release: every instant that refused an earlier start
            # lies before that start (SemaphoreProfile.admit), and a start refused since by a
            # later commit lies at or after the key, which stays a lower bound. Each such one
            # is evaluated afresh and, when it can start earlier than its key, gets a new entry
            # (the older one retired by its version)
            w0 = waiters_off[s]
            kept = 0
            for q2 in range(n_wait[s]):
                j = waiters[w0 + q2]
                if done_[j]:
                    continue
                waiters[w0 + kept] = j
                kept += 1
                if key_start[j] <= e or in_gate[j] >= 0:
                    # (a gate's member starts no earlier than its key start: see Gates)
                    continue
                wakes += 1
                tj = evaluate(
                    j, ready, fix_ptr, fix_idx, free, pools, group_site, n_sites, sig, acq_ptr,
                    acq_sem, acq_take, acq_back, dur, low, times, levels, off, used, sem_cap,
                    lo_buf, hi_buf, scratch, steps, set_buf,
                )[0]  # fmt: skip
                if tj < key_start[j]:
                    key_start[j] = tj
                    version[j] += 1
                    heapq.heappush(heap, (before[j], tj, after[j], j, version[j]))
            n_wait[s] = kept
            if wakes > budgets[0] * done + budgets[1]:
                # waiters woken again and again (many events waiting for one shared semaphore:
                # the Python loop's gates handle them in one entry per class); it runs instead
                status = 4
                break
        if status:
            break
        for q in range(succ_ptr[i], succ_ptr[i + 1]):
            j = succ_idx[q]
            v = e + succ_lam[q]
            if v > ready[j]:
                ready[j] = v
                rpred[j] = i
            indeg[j] -= 1
            if indeg[j] == 0:
                eligible(
                    j, heap, before, ready, after, version, key_start, sig, acq_ptr, acq_sem, gainful,
                    waiters, waiters_off, n_wait,
                )  # fmt: skip
    if not status and done < n:
        status = 1  # events left that can never start
    return (status, start, end, ready, rpred, wres, tbase, wsem, order, times, levels, used, chosen_out)
