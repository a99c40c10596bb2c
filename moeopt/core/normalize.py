"""Semaphore normalisation: drop the semaphores that provably cannot bind.

**Theorem.** Let ``s`` be a semaphore of capacity ``C``. For an event ``e`` write ``A(e)`` for
the units of ``s`` it acquires, ``R(e)`` for the units it releases, ``anc(e)`` / ``desc(e)``
for its strict DAG ancestors / descendants, and ``A_tot`` for the sum of ``A`` over all events.
If for every event ``e`` with ``A(e) > 0``::

    C + Σ_{x ∈ anc(e)} R(x) - (A_tot - Σ_{y ∈ desc(e)} A(y)) >= 0          (*)

then in the greedy scheduler the admission test of ``s`` never moves any start, so removing
``s`` leaves every start, end and binding unchanged.

*Proof.* When ``e`` is evaluated, every committed event is either an ancestor of ``e`` or
unrelated to it; no descendant is committed (it is not eligible before ``e``). Every ancestor
``x`` has ended by ``end(x) <= end(x) + λ <= t_base(e)``, so its release counts in the free level
at every instant ``τ >= t_base(e)``. The acquires committed so far are acquires of events that
are not descendants of ``e``. Hence for every ``τ >= t_base(e)`` the free level the scheduler
sees (units whose release is not committed count as taken for ever) is at least
``C + Σ_anc R - Σ_{non-descendants other than e} A``, and (*) says this is ``>= A(e)``. So ``e``
is admitted at ``t_base(e)`` and the window it holds is never short of units: the semaphore
does not change ``e``'s start. As this holds for every acquirer, and a semaphore only ever acts
through admission, the schedule is identical without it. ∎

The special case ``C >= A_tot`` (capacity covers all demand) satisfies (*) trivially and costs
nothing to check; the general condition needs an ancestor / descendant walk per acquirer and is
only tried while that stays cheap. Keeping a semaphore is always correct, so skipping the check
is sound.

The capacity ceiling (free units never above ``C``) is not the scheduler's to enforce; the
validator checks it on the original graph.
"""

from __future__ import annotations

import dataclasses
from itertools import compress

from moeopt.core.compiled import CompiledGraph, reachable
from moeopt.core.events import EventGraph

WALK_BUDGET = 50_000  # acquirers x events; above it only the cheap criterion is used


def nonbinding_semaphores(cg: CompiledGraph) -> list[int]:
    """Indices of semaphores that satisfy the theorem's condition (*)."""
    n_sem = len(cg.sem_names)
    if n_sem == 0:
        return []
    acquirers: list[list[int]] = [[] for _ in range(n_sem)]
    a_tot = [0] * n_sem
    acqs = cg.acq
    # (only the events that acquire: most acquire nothing, and compress skips them in C where
    # a loop over every event cost about 2% of a schedule call on the pinned synthetic graph)
    for i in compress(range(cg.n), acqs):
        for s, a in acqs[i]:
            acquirers[s].append(i)
            a_tot[s] += a
    out: list[int] = []
    for s in range(n_sem):
        cap = cg.sem_cap[s]
        if cap >= a_tot[s]:
            out.append(s)
            continue
        if len(acquirers[s]) * cg.n > WALK_BUDGET:
            continue
        a_of: dict[int, int] = {}
        r_of: dict[int, int] = {}
        for i in range(cg.n):
            for s2, a in cg.acq[i]:
                if s2 == s:
                    a_of[i] = a
            for s2, r in cg.rel[i]:
                if s2 == s:
                    r_of[i] = r
        ok = True
        for e in acquirers[s]:
            anc_rel = sum(r_of.get(x, 0) for x in reachable(cg.preds, e))
            desc_acq = sum(a_of.get(y, 0) for y in reachable(cg.succs, e))
            if cap + anc_rel - (a_tot[s] - desc_acq) < 0:
                ok = False
                break
        if ok:
            out.append(s)
    return out


def drop_nonbinding_semaphores(graph: EventGraph) -> CompiledGraph:
    """The compiled graph with every acquire / release of a non-binding semaphore removed
    (found once per compiled graph and kept on it, as is the normalised copy, whose own derived
    tables are then kept too: a repeated schedule of one graph pays for neither again)."""
    cg: CompiledGraph = graph.compiled()
    drop: frozenset[int] | None = cg.derived("nonbinding")
    if drop is None:
        drop = cg.keep("nonbinding", frozenset(nonbinding_semaphores(cg)))
    if not drop:
        return cg
    got: CompiledGraph | None = cg.derived("normalized")
    if got is None:
        got = dataclasses.replace(
            cg,
            acq=tuple([tuple([(s, a) for s, a in acq if s not in drop]) for acq in cg.acq]),
            rel=tuple([tuple([(s, r) for s, r in rel if s not in drop]) for rel in cg.rel]),
        )
        got = cg.keep("normalized", got)
    return got
