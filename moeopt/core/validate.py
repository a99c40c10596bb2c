"""An independent checker for any schedule of an event graph (greedy, CP-SAT or hand-written).

It recomputes every rule from the events and the schedule's start times, end times and bound
resources alone; it shares no code with the schedulers (no profiles, no compiled indices), so a
bug in a scheduler cannot hide itself here. Every violation found is listed, not just the first.

Rules: every event scheduled once; ``end - start = duration``; ``start >= 0``;
``start >= end(pred) + λ``; each placeholder bound to a member of its pool and each fixed
resource kept, except where the schedule records that a restructure hook re-pinned the event
(``Schedule.repinned``) from that fixed resource to another member of a pool containing it;
no two events overlap on one resource; colocated events on one site; every
semaphore's free units within ``[0, capacity]`` at every instant (changes at one instant are
applied together, within the time tolerance).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from operator import itemgetter

from moeopt.core.events import Event, EventGraph, placeholder_role, split_resource
from moeopt.core.schedule import Schedule
from moeopt.errors import ScheduleError

ABS_TOL_US = 1e-6
REL_TOL = 1e-9

_by_time = itemgetter(0)
_INF = float("inf")


def validate_schedule(graph: EventGraph, schedule: Schedule, *, durations_exact: bool = True) -> None:
    """Raise :class:`~moeopt.errors.ScheduleError` listing every rule ``schedule`` breaks.

    ``durations_exact=False`` accepts an event lasting longer than its duration (for schedules
    from a model with rounded durations); it must never last shorter.
    """
    graph.validate()
    v: list[str] = []
    events = graph.events
    start = schedule.start_us
    end = schedule.end_us
    res = schedule.resources

    names = events.keys()
    ok: Iterable[tuple[str, Event]] = events.items()
    complete = len(start) == len(end) == len(events) and names == start.keys() == end.keys()
    if not complete:
        for name in sorted(names - set(start)):
            v.append(f"event {name!r} has no start time")
        for name in sorted(names - set(end)):
            v.append(f"event {name!r} has no end time")
        for name in sorted((set(start) | set(end)) - set(names)):
            v.append(f"schedule names {name!r}, which is not an event of the graph")
        ok = [(n, ev) for n, ev in ok if n in start and n in end]

    # one pass over the events: durations and time origin, precedence with λ, bindings (fixed
    # resources kept, placeholders bound to pool members). Each rule tests the exact inequality
    # first and computes the tolerance only when that fails (the common case is a clean pass).
    A, R = ABS_TOL_US, REL_TOL
    pools = graph.pools
    moved = _repinned(graph, schedule, v)
    pool_sets = {role: frozenset(members) for role, members in pools.items()}
    occupied: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    sites_of: dict[str, set[str]] = {}
    changes: dict[str, list[tuple[float, int]]] = defaultdict(list)
    # sites are recorded only for events that take part in colocation
    pairs = [(name, ev.colocate_with) for name, ev in ok if ev.colocate_with is not None]
    coloc: set[str] = {a for a, _b in pairs} | {b for _a, b in pairs}
    # each event with its start and end (read in step when the schedule lists the events in graph
    # order, as the schedulers do)
    order = list(names)
    rows: Iterable[tuple[tuple[str, Event], float, float]]
    if complete and list(start) == order and list(end) == order:
        rows = zip(events.items(), start.values(), end.values())
    else:
        rows = [((n, ev), start[n], end[n]) for n, ev in ok]
    # a predecessor without an end time (reported above) ends at -inf: it never binds
    end_of = end if complete else {n: end.get(n, -_INF) for n in names}
    for (name, ev), s, e in rows:
        d = ev.duration_us
        if s < 0.0 and s < -(A + R * abs(s)):
            v.append(f"event {name!r} starts at {s:g} µs, before t = 0")
        if e != s + d:
            # (e == s + d in floating point puts e - s within an ulp of d, far inside the tolerance)
            length = e - s
            tol = A + R * max(abs(e), d)
            if durations_exact:
                if abs(length - d) > tol:
                    v.append(f"event {name!r} lasts {length:g} µs but its duration is {d:g} µs")
            elif length < d - tol:
                v.append(f"event {name!r} lasts {length:g} µs, shorter than its duration {d:g} µs")
        for pred, lam in ev.deps.items():
            need = end_of[pred] + lam
            if s < need and s < need - (A + R * abs(need)):
                v.append(
                    f"event {name!r} starts at {s:g} µs, before its predecessor {pred!r} "
                    f"ends ({end_of[pred]:g}) plus λ {lam:g} = {need:g}"
                )
        for sem, a in ev.acquires.items():
            changes[sem].append((s, -a))
        for sem, units in ev.releases.items():
            changes[sem].append((e, units))
        got = res.get(name, ())
        wanted = moved.get(name, ev.resources) if moved else ev.resources
        if len(wanted) == 1 and len(got) == 1:
            # the common case: one resource, fixed or one placeholder
            r0 = got[0]
            if r0 != wanted[0]:
                role = placeholder_role(wanted[0])
                if role is None:
                    v.append(f"event {name!r} needs resource {wanted[0]!r} but is bound to {list(got)}")
                    continue
                if r0 not in pool_sets.get(role, ()):
                    v.append(
                        f"event {name!r} is bound to {list(got)} for placeholder(s) {[wanted[0]]}, "
                        f"which are not members of those pools"
                    )
                    continue
            if e > s:  # a zero-length event occupies nothing
                occupied[r0].append((s, e, name))
            if name in coloc:
                parts = split_resource(r0)
                sites_of[name] = {parts[0]} if parts is not None else set()
            continue
        if not wanted and not got:
            continue  # occupies nothing
        if not _binding_ok(name, wanted, list(got), pools, v):
            continue
        sites = set()
        for r in got:
            if e > s:
                occupied[r].append((s, e, name))
            parts = split_resource(r)
            if parts is not None:
                sites.add(parts[0])
        sites_of[name] = sites

    # exclusive resources (the spans of positive length)
    for r, spans in occupied.items():
        spans.sort(key=_by_time)  # by start; equal starts overlap whatever their order
        for (s1, e1, n1), (s2, e2, n2) in itertools.pairwise(spans):
            if s2 < e1 and s2 < e1 - (A + R * abs(e1)):
                v.append(
                    f"events {n1!r} [{s1:g}, {e1:g}) and {n2!r} [{s2:g}, {e2:g}) overlap on resource {r!r}"
                )

    # colocation
    for name, partner in pairs:
        if name not in sites_of or partner not in sites_of:
            continue
        mine, theirs = sites_of[name], sites_of[partner]
        if len(mine) != 1 or mine != theirs:
            v.append(
                f"event {name!r} on site(s) {sorted(mine)} is not colocated with {partner!r} "
                f"on site(s) {sorted(theirs)}"
            )

    # semaphores: free units within [0, capacity] at every instant (changes within the time
    # tolerance of an instant's first change are applied together)
    for sem, ch in changes.items():
        cap = graph.semaphores[sem]
        ch.sort(key=_by_time)  # the order inside one instant does not matter
        level = cap
        t0 = lim = -_INF
        for t, d in ch:
            if t > lim:
                # a new instant: judge the level the previous one left
                if level < 0 or level > cap:
                    _semaphore_problem(v, graph, start, end, sem, cap, level, t0, lim)
                t0 = t
                lim = t + A + R * abs(t)
            level += d
        if level < 0 or level > cap:
            _semaphore_problem(v, graph, start, end, sem, cap, level, t0, lim)
    if v:
        raise ScheduleError(v)


def _repinned(graph: EventGraph, schedule: Schedule, v: list[str]) -> dict[str, tuple[str, ...]]:
    """The declared resources of each event the schedule says was re-pinned, with the move
    applied, for the re-pins that are legal (the event declares the fixed resource it moved from,
    and some pool contains both); each illegal one is reported."""
    out: dict[str, tuple[str, ...]] = {}
    for name, (frm, to) in schedule.repinned.items():
        ev = graph.events.get(name)
        if ev is None:
            v.append(f"schedule re-pins {name!r}, which is not an event of the graph")
            continue
        if frm not in ev.resources and to in ev.resources:
            continue  # the graph already has the event where it ran (moeopt.repinned_graph)
        if frm not in ev.resources or placeholder_role(frm) is not None:
            v.append(f"schedule re-pins {name!r} from {frm!r}, which is not one of its fixed resources")
            continue
        if not any(frm in members and to in members for members in graph.pools.values()):
            v.append(f"schedule re-pins {name!r} from {frm!r} to {to!r}: no pool of the graph contains both")
            continue
        out[name] = tuple(to if r == frm else r for r in ev.resources)
    return out


def _semaphore_problem(
    v: list[str],
    graph: EventGraph,
    start: Mapping[str, float],
    end: Mapping[str, float],
    sem: str,
    cap: int,
    level: int,
    t0: float,
    lim: float,
) -> None:
    # the changes of the instant [t0, lim] in time order, named (looked up only when there is a
    # problem to report)
    group = []
    for name, ev in graph.events.items():
        if name not in start or name not in end:
            continue
        if sem in ev.acquires and t0 <= start[name] <= lim:
            group.append((start[name], name))
        if sem in ev.releases and t0 <= end[name] <= lim:
            group.append((end[name], name))
    group.sort(key=_by_time)
    who = [name for _t, name in group][:5]
    if level < 0:
        v.append(
            f"semaphore {sem!r} has {level} free units at t = {t0:g} µs (capacity {cap}), "
            f"when {who} start/end"
        )
    else:
        v.append(
            f"semaphore {sem!r} has {level} free units at t = {t0:g} µs, above its capacity "
            f"{cap}, when {who} start/end"
        )


def _binding_ok(
    name: str, wanted: tuple[str, ...] | Sequence[str], got: list[str], pools: Mapping[str, tuple[str, ...]],
    v: list[str],
) -> bool:
    """Check one event's bound resources against its declared ones; append problems to ``v``."""
    fixed = [r for r in wanted if placeholder_role(r) is None]
    roles = [str(placeholder_role(r)) for r in wanted if placeholder_role(r) is not None]
    if len(got) != len(wanted) or len(set(got)) != len(got):
        v.append(f"event {name!r} is bound to {got}, which does not match its resources {list(wanted)}")
        return False
    rest = list(got)
    ok = True
    for r in fixed:
        if r in rest:
            rest.remove(r)
        else:
            v.append(f"event {name!r} needs resource {r!r} but is bound to {got}")
            ok = False
    if ok and not _matches(rest, roles, pools):
        v.append(
            f"event {name!r} is bound to {rest} for placeholder(s) "
            f"{[f'{r}:*' for r in roles]}, which are not members of those pools"
        )
        ok = False
    return ok


def _matches(bound: list[str], roles: list[str], pool_map: Mapping[str, tuple[str, ...]]) -> bool:
    """Whether the bound resources can be assigned one-to-one to the placeholders' pools: a
    perfect matching in the bipartite graph placeholder -- member of its pool, found by
    augmenting paths (Kuhn's algorithm), exact for any number of placeholders.

    Each placeholder in turn looks for a free resource of its pool, or for one whose current
    placeholder can move to another resource of its own pool (recursively, each resource
    visited once per search). A placeholder that finds neither proves, by the visited set, that
    some set of placeholders has fewer usable resources than members (Hall's condition fails),
    so no assignment exists.
    """
    if len(bound) != len(roles):
        return False
    # the resources each placeholder may take, as positions in ``bound``
    options = [[k for k, r in enumerate(bound) if r in pool_map.get(role, ())] for role in roles]
    owner = [-1] * len(bound)  # resource position -> the placeholder holding it

    def augment(p: int, seen: list[bool]) -> bool:
        for k in options[p]:
            if seen[k]:
                continue
            seen[k] = True
            if owner[k] < 0 or augment(owner[k], seen):
                owner[k] = p
                return True
        return False

    return all(augment(p, [False] * len(bound)) for p in range(len(roles)))
