"""Symmetry breaking between interchangeable sites (cores), exact mode.

A MegaMoE graph with late-bound pools offers 24-28 cores that nothing tells apart: any schedule
can move all the work of core 5 to core 9 and back. CP-SAT then explores (and must refute, to
prove a bound) every relabelling of every partial schedule. This module finds the sites that are
truly interchangeable and adds constraints that keep one relabelling of each schedule.

**Site permutations.** A permutation ``π`` of sites acts on resources by renaming the site part
(``c5.AIC`` -> ``c9.AIC``; resources without a site stay) and on a schedule by renaming every
event's bound resources, times unchanged. Call sites ``k`` and ``k'`` *interchangeable* when they
have the same *signature*: the same roles; for every pool, the same roles among its members; for
every event, the same roles among its fixed resources; and the same colocation groups allowing
them. Then the swap ``σ = (k k')`` maps every pool's member set, every event's fixed resources and
every group's allowed sites onto themselves, and so does any permutation of a class of pairwise
interchangeable sites (a product of such swaps).

**Lemma.** If ``S`` is a valid schedule and ``π`` permutes a class of interchangeable sites, then
``π(S)`` is valid with the same makespan. *Proof.* Times are unchanged, so precedences,
semaphores (global, not site-bound) and the makespan hold. ``π`` is a bijection on resources, so
two events overlap on a resource in ``π(S)`` iff they did in ``S``. Each event's fixed resources
map onto its own fixed set, each placeholder's member onto a member of the same pool, colocated
events stay on one (renamed) site, allowed by their group. ∎

**Value precedence.** For a class ``k_0 < k_1 < … < k_{m−1}`` pick a *lead pool* ``P`` with one
member at each of its sites, and the events ``e_0, e_1, …`` (in index order) that have exactly
one placeholder of ``P``. The constraint: *if* ``e_i`` *binds* ``P``'s *member at* ``k_j``
(``j ≥ 1``) *then some* ``e_{i'}`` *with* ``i' < i`` *binds the member at* ``k_{j−1}``.

**Theorem.** Every valid schedule ``S`` has a relabelling ``π(S)`` (same makespan) meeting the
constraint; so adding it keeps an optimal schedule and every bound stays sound. *Proof.* Let
``first(k)`` be the smallest ``i`` with ``e_i`` bound to ``k`` in ``S`` (``∞`` if none). Distinct
sites have distinct finite ``first`` (each ``e_i`` binds one member of ``P``). Let ``π`` send the
class's sites, sorted by ``first`` (ties at ``∞`` by index), to ``k_0, k_1, …`` in that order.
In ``π(S)`` the site of rank ``j`` is ``k_j``, and ``first(k_{j−1}) < first(k_j)``: whenever
``e_i`` binds ``k_j``, ``i ≥ first(k_j) > first(k_{j−1})``, so ``e_{first(k_{j−1})}`` with a
smaller index binds ``k_{j−1}``. By the lemma ``π(S)`` is valid. ∎

The same ``π``, computed from the hint's own bindings (:func:`canonical_permutation`), turns the
greedy hint into one that meets the constraint, so the solver still starts from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from moeopt.core.compiled import CompiledGraph
from moeopt.core.events import split_resource


@dataclass(frozen=True, slots=True)
class SiteClass:
    """Interchangeable sites (ascending) and the lead pool of their value-precedence constraint.

    ``member[j]`` is the lead pool's member at ``sites[j]``; ``events`` the events with exactly
    one placeholder of the lead pool, in index order; ``swap`` maps ``(site, role)`` to the
    resource index, for renaming resources.
    """

    sites: tuple[int, ...]
    pool: int
    member: tuple[int, ...]
    events: tuple[int, ...]
    roles: dict[tuple[int, str], int]


def _role(cg: CompiledGraph, r: int) -> str | None:
    sr = split_resource(cg.res_names[r])
    return None if sr is None else sr[1]


def site_classes(cg: CompiledGraph) -> list[SiteClass]:
    """The classes of two or more interchangeable sites that have a lead pool (module docstring)."""
    n_sites = len(cg.site_names)
    if n_sites < 2 or not cg.pool_members:
        return []
    roles: list[dict[str, int]] = [{} for _ in range(n_sites)]
    for r in range(len(cg.res_names)):
        k = cg.res_site[r]
        role = _role(cg, r)
        if k >= 0 and role is not None:
            roles[k][role] = r
    sig: list[list[object]] = [[frozenset(roles[k])] for k in range(n_sites)]
    for p, members in enumerate(cg.pool_members):
        per_site: dict[int, set[str]] = {}
        for m in members:
            if cg.res_site[m] >= 0:
                per_site.setdefault(cg.res_site[m], set()).add(str(_role(cg, m)))
        for k in range(n_sites):
            sig[k].append((p, frozenset(per_site.get(k, ()))))
    fixed_at: list[set[tuple[int, str]]] = [set() for _ in range(n_sites)]
    for i in range(cg.n):
        for r in cg.fixed[i]:
            if cg.res_site[r] >= 0:
                fixed_at[cg.res_site[r]].add((i, str(_role(cg, r))))
    groups_at: list[set[int]] = [set() for _ in range(n_sites)]
    for g, gs in enumerate(cg.group_sites):
        for k in gs or ():
            groups_at[k].add(g)
    classes: dict[tuple[object, ...], list[int]] = {}
    for k in range(n_sites):
        key = (*sig[k], frozenset(fixed_at[k]), frozenset(groups_at[k]))
        classes.setdefault(key, []).append(k)
    out: list[SiteClass] = []
    for sites in classes.values():
        if len(sites) < 2:
            continue
        lead = _lead_pool(cg, sites)
        if lead is None:
            continue
        p, member, events = lead
        table = {(k, role): r for k in sites for role, r in roles[k].items()}
        out.append(SiteClass(tuple(sites), p, member, events, table))
    return out


def _lead_pool(
    cg: CompiledGraph, sites: Sequence[int]
) -> tuple[int, tuple[int, ...], tuple[int, ...]] | None:
    """The pool with one member at each site of the class and the most single-placeholder events."""
    best: tuple[int, tuple[int, ...], tuple[int, ...]] | None = None
    for p, members in enumerate(cg.pool_members):
        at = {k: [m for m in members if cg.res_site[m] == k] for k in sites}
        if any(len(v) != 1 for v in at.values()):
            continue
        events = tuple(i for i in range(cg.n) if sum(1 for x in cg.placeholders[i] if x == p) == 1)
        if len(events) >= 2 and (best is None or len(events) > len(best[2])):
            best = (p, tuple(at[k][0] for k in sites), events)
    return best


def canonical_permutation(
    cg: CompiledGraph, classes: Sequence[SiteClass], bound: Sequence[set[int]]
) -> list[int]:
    """Resource renaming (index -> index) that makes the schedule with bindings ``bound`` (per
    event, resource indices) meet every class's value-precedence constraint (the ``π`` of the
    theorem); the identity on resources outside the classes."""
    perm = list(range(len(cg.res_names)))
    for sc in classes:
        site_of_member = dict(zip(sc.member, sc.sites))
        first: dict[int, int] = {}
        for pos, i in enumerate(sc.events):
            for r in bound[i]:
                k = site_of_member.get(r)
                if k is not None and k not in first:
                    first[k] = pos
        ranked = sorted(sc.sites, key=lambda k: (first.get(k, len(sc.events)), k))
        target = dict(zip(ranked, sc.sites))  # site of rank j -> k_j
        for (k, role), r in sc.roles.items():
            perm[r] = sc.roles[(target[k], role)]
    return perm
