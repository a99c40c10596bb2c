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

Large graphs are first checked on arrays (:func:`_passes`: the same rules in bulk, numpy, built
from the same events and mappings); only a schedule that check cannot accept goes through the
event-by-event check, which lists the violations. ``by_position=True`` (``kernel_time``, and
``simulate`` once numba is loaded) trades part of that independence for speed: the edges and
semaphore uses come from the compiled graph, and a greedy schedule whose maps are unmade is
read from the columns its maps would be made from (the same numbers; the rules are still this
module's own).
"""

from __future__ import annotations

import itertools
import struct
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from itertools import chain, compress, repeat
from operator import eq, is_not, itemgetter, methodcaller
from types import MappingProxyType
from typing import Any, cast

import numpy as np

from moeopt.core import smallints
from moeopt.core.events import Event, EventGraph, placeholder_role, split_resource
from moeopt.core.schedule import Schedule, deferred_columns
from moeopt.core.smallints import packed as _packed
from moeopt.core.state import picked
from moeopt.errors import ScheduleError

ABS_TOL_US = 1e-6
REL_TOL = 1e-9
# from this many events on the array check (:func:`_passes`) runs first. Measured (CPU ms, array
# check / event-by-event check): MegaMoE bs72 373 events 1.03 / 0.91, pto M=16 1.9k events
# 3.2 / 4.7, scenario_basic 5.6k events 9.9 / 15.6; moeopt.synthetic.layered_graph 1.1k events
# 1.9 / 2.0 (late-bound 1.9 / 2.3), 20k events 37 / 51 (late-bound 47 / 69)
VECTOR_MIN_EVENTS = 1000

_by_time = itemgetter(0)
_INF = float("inf")


def validate_schedule(
    graph: EventGraph, schedule: Schedule, *, durations_exact: bool = True, by_position: bool = False
) -> None:
    """Raise :class:`~moeopt.errors.ScheduleError` listing every rule ``schedule`` breaks.

    ``durations_exact=False`` accepts an event lasting longer than its duration (for schedules
    from a model with rounded durations); it must never last shorter.

    ``by_position=True``: the array check reads each event's predecessors (with their λ) and
    its semaphore uses from the graph's compiled form (``graph.compiled()``: the validated
    graph's index form, the one the schedulers read) instead of looking each predecessor up by
    name; the same values, so the same verdict, at a fraction of the cost on a large graph
    (see :func:`_passes`); a greedy schedule whose maps are still to be made is read from its
    own columns instead (:func:`_passes_columns`). What it gives up is independence from
    :func:`~moeopt.core.compiled.compile_graph`: a graph mis-compiled there would be checked as
    compiled. For callers that schedule many large graphs (``moeopt.megamoe.kernel_time``, and
    ``simulate`` in a process that has loaded the compiled loop, whose graphs are compiled to
    arrays first); the event-by-event check, run when the array check cannot accept, reads the
    events as always.
    """
    graph.validate()
    if len(graph) >= VECTOR_MIN_EVENTS:
        ok = _passes_columns(graph, schedule, durations_exact) if by_position else None
        if ok is None:
            ok = _passes(graph, schedule, durations_exact, by_position)
        if ok:
            return
    _check_every_rule(graph, schedule, durations_exact)


def _check_every_rule(graph: EventGraph, schedule: Schedule, durations_exact: bool) -> None:
    """Every rule, event by event; raise :class:`~moeopt.errors.ScheduleError` listing every
    violation (the reference the array check :func:`_passes` only ever accepts for)."""
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
        if not _bound_ok(name, got, wanted, pool_sets, pools, v) or not (wanted or got):
            continue  # a problem (reported), or an event occupying nothing
        if e > s:  # a zero-length event occupies nothing
            for r in got:
                occupied[r].append((s, e, name))
        if name in coloc:
            sites_of[name] = _sites(got)

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
        for level, t0, lim in _bad_instants(ch, cap):
            _semaphore_problem(v, graph, start, end, sem, cap, level, t0, lim)
    if v:
        raise ScheduleError(v)


def _bad_instants(ch: Iterable[tuple[float, int]], cap: int) -> Iterator[tuple[int, float, float]]:
    """``(level, t0, lim)`` of every instant ``[t0, lim]`` after whose changes the free units of
    a semaphore of capacity ``cap`` are outside ``[0, cap]``, for its changes ``(time, units)`` in
    time order. An instant is the changes within the time tolerance of its first one; they are
    applied together."""
    A, R = ABS_TOL_US, REL_TOL
    level = cap
    t0 = lim = -_INF
    for t, d in ch:
        if t > lim:
            # a new instant: judge the level the previous one left
            if level < 0 or level > cap:
                yield level, t0, lim
            t0 = t
            lim = t + A + R * abs(t)
        level += d
    if level < 0 or level > cap:
        yield level, t0, lim


def _bound_ok(
    name: str,
    got: Sequence[str],
    wanted: Sequence[str],
    pool_sets: Mapping[str, frozenset[str]],
    pools: Mapping[str, tuple[str, ...]],
    v: list[str],
) -> bool:
    """Whether an event's bound resources ``got`` keep its declared ``wanted`` ones (fixed
    resources kept, placeholders bound to members of their pools); each problem is appended to
    ``v``."""
    if len(wanted) == 1 and len(got) == 1:
        # the common case: one resource, fixed or one placeholder
        r0 = got[0]
        if r0 != wanted[0]:
            role = placeholder_role(wanted[0])
            if role is None:
                v.append(f"event {name!r} needs resource {wanted[0]!r} but is bound to {list(got)}")
                return False
            if r0 not in pool_sets.get(role, ()):
                v.append(
                    f"event {name!r} is bound to {list(got)} for placeholder(s) {[wanted[0]]}, "
                    f"which are not members of those pools"
                )
                return False
        return True
    if not wanted and not got:
        return True
    return _binding_ok(name, wanted, list(got), pools, v)


def _sites(got: Iterable[str]) -> set[str]:
    """The sites of the resources ``got`` (names that are not ``<site>.<role>`` have none)."""
    return {parts[0] for parts in map(split_resource, got) if parts is not None}


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


_values = methodcaller("values")
_first = itemgetter(0)
_FLOAT = frozenset({float})


def _bools(values: Iterable[bool]) -> np.ndarray:
    """``values`` (``bool`` objects) as a read-only bool array: ``bytes`` of Python bools is one
    C loop, cheaper still than :func:`_packed` (``smallints.packed``)."""
    return np.frombuffer(bytes(values), np.bool_)


def _flat_values(maps: list[Mapping[str, float]], code: str, count: int) -> np.ndarray:
    """The values of all ``maps``, map after map, as one array (:func:`_packed`). Events hold
    read-only ``MappingProxyType`` maps: that type's own ``values`` is called directly, about
    twice as fast as a method lookup per map (any other mapping: the lookup)."""
    try:
        return _packed(code, chain.from_iterable(map(MappingProxyType.values, maps)), count)  # type: ignore[arg-type]
    except TypeError:
        return _packed(code, chain.from_iterable(map(_values, maps)), count)


def _passes(graph: EventGraph, schedule: Schedule, durations_exact: bool, by_position: bool = False) -> bool:
    """Whether ``schedule`` keeps every rule, decided on arrays (one numpy operation per rule
    over all events, edges or semaphore changes): ``True`` only when :func:`_check_every_rule`
    would find nothing; ``False`` when it might find something (it is then run, and lists what
    it finds).

    The same rules, from the same inputs (the graph's events and the schedule's mappings, no
    scheduler data), in the same floating-point expressions (numpy's float64 arithmetic is the
    IEEE arithmetic of Python floats), so each test accepts exactly what the event-by-event one
    does:

    * time origin, durations, precedence with λ: elementwise, per event and per edge;
    * bindings: an event with one resource bound to exactly that resource, or with one placeholder
      bound to one member of its pool, keeps it, and one with none bound to none occupies nothing
      (the reference's first two cases); every other event goes through the same per-event check
      (:func:`_bound_ok`);
    * exclusive resources: the spans of positive length sorted by (resource, start) and each
      span against the next, as the reference does per resource; two spans starting together on
      one resource (an overlap, unless one lasts less than the tolerance) return ``False``, as
      the order the reference's stable sort keeps between them could decide its verdict;
    * colocation: each event's site (one site, or a marker for none / several) compared per pair;
    * semaphores: the changes sorted by (semaphore, time) and summed; the level after each run of
      equal times is checked. The reference applies the changes within the time tolerance of an
      instant together; an instant is a union of consecutive runs (a boundary is a time strictly
      after the previous one), so its level is the level of its last run: every level the
      reference judges is judged here too. A run outside ``[0, capacity]`` inside an instant that
      the tolerance merges can still be fine: that semaphore is then judged the reference's way
      (:func:`_bad_instants`).

    Anything outside this fast path (a schedule that is incomplete or in another order than the
    graph, times that are not floats or are NaN, amounts beyond 64-bit sums) returns ``False``.

    ``by_position``: the predecessors and their λ, and the semaphore uses, are read from the
    compiled graph by position (see :func:`validate_schedule`) instead of by name from the
    events: the same edges and amounts (``compile_graph`` keeps each event's dependencies as
    the arrays of :class:`~moeopt.core.compiled.Edges`, positions and λ as given, and its
    semaphore maps as ``(position, value)`` pairs in the graph's semaphore order), and the
    schedule's order is checked against the same names, so each test sees the same numbers. On
    the DeepSeek-V3-like zipf rank 1 (47k events, 174k edges) the by-name lookups of the
    predecessors' ends were about half of this check's wall-clock time; by position, the
    predecessors' ends are one gather from the compiled edges.
    """
    events = graph.events
    n = len(events)
    start, end, res = schedule.start_us, schedule.end_us, schedule.resources
    names = list(events)
    if len(start) != n or len(end) != n or list(start) != names or list(end) != names:
        return False
    if not _FLOAT.issuperset(map(type, start.values())) or not _FLOAT.issuperset(map(type, end.values())):
        return False  # times of another type (numpy's float32 adds in its own precision)
    evs = list(events.values())
    st = _packed("d", start.values(), n)
    en = _packed("d", end.values(), n)
    if np.isnan(st).any() or np.isnan(en).any():
        return False
    # time origin and durations
    # (the event fields are read by comprehensions: the interpreter specialises a slot read, about
    # half the instructions of an attrgetter mapped over the events, callgrind)
    du = _packed("d", [ev.duration_us for ev in evs], n)
    if not _times_ok(st, en, du, durations_exact):
        return False
    # precedence with λ, one entry per edge
    if by_position:
        if not _precedence_ok(st, en, *graph.compiled().pred_arrays()):
            return False
    else:
        deps = [ev.deps for ev in evs]
        n_deps = _packed("n", map(len, deps), n)
        m = int(n_deps.sum())
        # the predecessors' ends, looked up in one C loop (an itemgetter of every edge's predecessor)
        preds = chain.from_iterable(deps)
        ends: Iterable[float] = itemgetter(*preds)(end) if m > 1 else map(end.__getitem__, preds)
        if not _starts_after(st, n_deps, _packed("d", ends, m) + _flat_values(deps, "d", m)):
            return False
    # bindings (the events' positions, needed only for re-pins and colocation, built on demand)
    index: dict[str, int] | None = None
    v: list[str] = []
    moved = _repinned(graph, schedule, v)
    if v:
        return False
    wanted = [ev.resources for ev in evs]
    if moved:
        index = dict(zip(names, range(n)))
        for name, rs in moved.items():
            wanted[index[name]] = rs
    got: list[Sequence[str]] = list(res.values()) if list(res) == names else [res.get(x, ()) for x in names]
    # "simple": one resource bound to one, either the very one or, for a placeholder, a member of
    # its pool (the reference's one-resource case; (placeholder, member) pairs listed per pool)
    one_w = _packed("n", map(len, wanted), n)
    if got == wanted:
        # every event bound to exactly its declared resources (one C comparison of the lists;
        # the per-event equality below would find each pair equal)
        one_g, same = one_w, np.ones(n, bool)
    else:
        one_g, same = _packed("n", map(len, got), n), _bools(map(eq, got, wanted))
    empty = (one_w == 0) & (one_g == 0)  # occupies nothing
    one = (one_w == 1) & (one_g == 1)
    simple = one & same
    pools = graph.pools
    placed = np.flatnonzero(one & ~simple).tolist()
    if placed and pools:
        members = {(role, r) for role, rs in pools.items() for r in rs}
        roles = map(placeholder_role, map(_first, map(wanted.__getitem__, placed)))  # None: fixed
        pairs = zip(roles, map(_first, map(got.__getitem__, placed)))
        simple[np.array(placed, np.intp)] = _bools(map(members.__contains__, pairs))
    # the spans on resources as (event, position in its binding, resource name), and each
    # colocated event's site: the simple events first, then the others one by one
    simple_ev = span_ev = np.flatnonzero(simple)
    # each resource numbered on first sight (a defaultdict whose factory counts: the order of
    # dict.fromkeys over the spans' resources), the simple spans' numbers in one C-level pass
    # without a list of their names (callgrind, scenario_basic: the name list, then
    # dict.fromkeys and a lookup per span, 5.5M)
    res_id: defaultdict[str, int] = defaultdict(itertools.count().__next__)
    # (the numbers in order by picked's C-level itemgetter call, about half the instructions
    # of a map of the dict's __getitem__, callgrind)
    span_rid = list(picked(res_id, list(map(_first, compress(got, simple)))))
    others = np.flatnonzero(~(simple | empty)).tolist()
    site_set: dict[int, set[str]] = {}  # the sites of the other colocated events
    cw = [ev.colocate_with for ev in evs]
    if others:
        pool_sets = {role: frozenset(members) for role, members in pools.items()}
        extra_ev: list[int] = []
        for i in others:
            g_i, w_i = got[i], wanted[i]
            if not _bound_ok(names[i], g_i, w_i, pool_sets, pools, v):
                return False
            extra_ev.extend([i] * len(g_i))
            span_rid.extend(map(res_id.__getitem__, g_i))
            site_set[i] = _sites(g_i)
        span_ev = np.concatenate([span_ev, np.array(extra_ev, np.intp)])
    # exclusive resources
    rid_all = _packed("n", span_rid, len(span_rid))
    if not _spans_ok(rid_all, st[span_ev], en[span_ev]):
        return False
    # colocation: per event -1 (no site recorded: outside colocation or occupying nothing), a
    # site number, or -2 (no site or several)
    if cw.count(None) < n:
        colocated = _bools(map(is_not, cw, repeat(None)))
        site_no: dict[str | None, int] = {}
        site = np.full(n, -1, np.intp)
        parts = map(split_resource, res_id)
        res_site = np.array([site_no.setdefault(p and p[0], len(site_no)) for p in parts], np.intp)
        none = site_no.get(None, -3)
        site[simple_ev] = res_site[rid_all[: len(simple_ev)]]  # the simple events' spans come first
        site[site == none] = -2
        for i, sites in site_set.items():
            site[i] = site_no.get(next(iter(sites)), -2) if len(sites) == 1 else -2
        a = np.flatnonzero(colocated)
        # the partners' positions: read from the graph's own name -> position map (built with its
        # compiled form, which validate_schedule has just made sure of), not trusted but checked
        # here against this check's own list of names; cheaper than a map of every event's name
        partners = cast("list[str]", list(compress(cw, colocated)))  # (the colocated: names)
        pos = index if index is not None else graph.compiled().index
        try:
            b_list = list(map(pos.__getitem__, partners))
        except (KeyError, IndexError):
            return False
        if list(map(names.__getitem__, b_list)) != partners:
            return False  # (never for a validated graph: the event-by-event check decides)
        b = _packed("n", b_list, len(b_list))
        sa, sb = site[a], site[b]
        both = (sa != -1) & (sb != -1)
        if ((sa[both] < 0) | (sa[both] != sb[both])).any():
            return False
    return _semaphores_pass(graph, evs, st, en, by_position)


def _passes_columns(graph: EventGraph, schedule: Schedule, durations_exact: bool) -> bool | None:
    """:func:`_passes` with ``by_position``, for a greedy schedule whose ``start_us``,
    ``end_us`` and ``resources`` maps are still to be made (:func:`deferred_columns`): the
    times are its own float64 columns by event position and the bound resources its index
    tuples, the values the maps would hold (they are made from them), read without making
    the maps. ``None`` (then :func:`_passes` decides) unless the schedule is of this very
    compiled graph, binds every event to exactly its fixed resources (one C-level comparison
    of the index tuples: the rule "each fixed resource kept"), re-pins nothing, and no event
    has a placeholder or a colocation partner (those rules read names: :func:`_passes` has
    them).

    The rules left are :func:`_passes`' on the same arrays: time origin and durations (the
    compiled graph's, copies of the events'), precedence with λ (the compiled edges), no
    overlap on a resource (the spans of every event's fixed resources, numbered by the
    graph's resource index instead of on first sight: any numbering serves) and the
    semaphores (the compiled uses).

    Why: on the DeepSeek-V3-like zipf rank 16 (58k events) making the three maps cost ~12 ms
    and reading them back into arrays ~8 ms, of a ~30 ms check."""
    cg = graph.compiled()
    # (the graph's own conditions first: the columns are read only where they can serve)
    if schedule.repinned or any(cg.placeholders) or max(cg.group, default=-1) >= 0:
        return None
    cols = deferred_columns(schedule)
    if cols is None or cols.cg is not cg:
        return None
    n = cg.n
    st, en, bound = cols.start, cols.end, cols.bound
    if len(st) != n or len(en) != n or len(bound) != n:
        return None
    fixed = cg.fixed
    if (bound != list(fixed)) if isinstance(bound, list) else (tuple(bound) != fixed):
        return None  # (_passes finds what differs and sends it to the event-by-event check)
    if np.isnan(st).any() or np.isnan(en).any():
        return False
    du = _packed("d", cg.dur, n)
    if not _times_ok(st, en, du, durations_exact) or not _precedence_ok(st, en, *cg.pred_arrays()):
        return False
    width = _packed("n", map(len, fixed), n)
    span_ev = np.repeat(np.arange(n), width)
    rid = _packed("n", chain.from_iterable(fixed), len(span_ev))
    return _spans_ok(rid, st[span_ev], en[span_ev]) and _semaphores_pass(graph, [], st, en, True)


def _times_ok(st: np.ndarray, en: np.ndarray, du: np.ndarray, durations_exact: bool) -> bool:
    """Time origin and durations, elementwise (see :func:`_passes`)."""
    A, R = ABS_TOL_US, REL_TOL
    if (st < -(A + R * np.abs(st))).any():
        return False
    off = np.flatnonzero(en != st + du)
    if off.size:
        e, d = en[off], du[off]
        length = e - st[off]
        tol = A + R * np.maximum(np.abs(e), d)
        if (np.abs(length - d) > tol).any() if durations_exact else (length < d - tol).any():
            return False
    return True


def _precedence_ok(
    st: np.ndarray, en: np.ndarray, pred_ptr: np.ndarray, pred_idx: np.ndarray, pred_lam: np.ndarray
) -> bool:
    """Precedence with λ, one entry per compiled edge (see :func:`_passes`)."""
    return _starts_after(st, np.diff(pred_ptr), en[pred_idx] + pred_lam)


def _starts_after(st: np.ndarray, n_deps: np.ndarray, need: np.ndarray) -> bool:
    """Whether each event starts no earlier (within the tolerance) than each of its edges'
    ``need`` (its predecessor's end plus λ; the edges event after event, ``n_deps`` each)."""
    return not (np.repeat(st, n_deps) < need - (ABS_TOL_US + REL_TOL * np.abs(need))).any()


def _spans_ok(rid: np.ndarray, s1: np.ndarray, e1: np.ndarray) -> bool:
    """No two spans ``[s1, e1)`` overlap on one resource (numbered ``rid``), see :func:`_passes`."""
    A, R = ABS_TOL_US, REL_TOL
    keep = e1 > s1  # a zero-length event occupies nothing
    rid, s1, e1 = rid[keep], s1[keep], e1[keep]
    # (a stable sort: numpy's timsort for floats, which finds the runs already in time order
    # that graph order leaves; about 0.64x the instructions of the default quicksort on
    # scenario_basic's spans and 0.69x on its semaphore changes, callgrind. Any order of equal
    # starts would do: two spans starting together on one resource are refused below)
    order = np.argsort(s1, kind="stable")
    order = order[np.argsort(_small(rid[order]), kind="stable")]
    rid, s1, e1 = rid[order], s1[order], e1[order]
    same = rid[1:] == rid[:-1]
    nxt, e0 = s1[1:], e1[:-1]
    if (same & (nxt < e0 - (A + R * np.abs(e0)))).any():
        return False
    # two spans start together on one resource: the reference's verdict can depend on the
    # order it keeps between them (its sort is stable), which this sort does not keep
    return not (same & (nxt == s1[:-1])).any()


def _semaphores_pass(
    graph: EventGraph, evs: list[Event], st: np.ndarray, en: np.ndarray, by_position: bool = False
) -> bool:
    """The semaphore rule of :func:`_passes` (see there): ``True`` only when every semaphore's
    free units stay within ``[0, capacity]``. ``by_position``: the uses read from the compiled
    graph's ``(semaphore, units)`` pairs (semaphores numbered in the graph's order, as here)."""
    caps = graph.semaphores
    if by_position:
        cg = graph.compiled()
        acq_sem, acq_units, acq_ev = _pair_uses(cg.acq, cg.derived("acq_numbers"))
        rel_sem, rel_units, rel_ev = _pair_uses(cg.rel, cg.derived("rel_numbers"))
    else:
        sem_no = {sem: k for k, sem in enumerate(caps)}
        acq_sem, acq_units, acq_ev = _uses([ev.acquires for ev in evs], sem_no)
        rel_sem, rel_units, rel_ev = _uses([ev.releases for ev in evs], sem_no)
    if not (acq_ev.size or rel_ev.size):
        return True
    sem = np.concatenate([acq_sem, rel_sem])
    units = np.concatenate([-acq_units, rel_units])
    t = np.concatenate([st[acq_ev], en[rel_ev]])
    cap_of = np.array([min(c, _BIG) for c in caps.values()], np.int64)
    if float(np.abs(units).max()) * len(units) + float(cap_of.max()) >= _BIG:
        return False  # the running sums might not fit in 64 bits
    # by semaphore, then time: the order of the changes at one time does not matter (only the
    # level after the last of them is judged), so the time sort need not be stable; it is, as
    # the stable sort costs fewer instructions here (see the spans' sort in _passes)
    order = np.argsort(t, kind="stable")
    order = order[np.argsort(_small(sem[order]), kind="stable")]
    sem, t, units = sem[order], t[order], units[order]
    cum = np.cumsum(units)
    first = np.flatnonzero(np.concatenate([[True], sem[1:] != sem[:-1]]))
    cap = cap_of[sem]
    # the free units after each change: the capacity plus the changes of its semaphore so far
    level = cap + cum - np.repeat(cum[first] - units[first], np.diff(np.append(first, len(sem))))
    run_end = np.append((sem[1:] != sem[:-1]) | (t[1:] != t[:-1]), True)
    bad = run_end & ((level < 0) | (level > cap))
    if not bad.any():
        return True
    # runs out of range: judge each such semaphore with the tolerance's instants
    for k in np.unique(sem[bad]).tolist():
        mine = sem == k
        if next(_bad_instants(zip(t[mine].tolist(), units[mine].tolist()), caps[list(caps)[k]]), None):
            return False
    return True


def _small(a: np.ndarray) -> np.ndarray:
    """Non-negative integers ``a`` as 16-bit ones when they fit (numpy sorts those by radix, in
    about half the time)."""
    return a.astype(np.int16) if a.size and a.max() < 2**15 else a


_BIG = 2**62  # a bound on 64-bit running sums (with room for one more addition)


def _pair_uses(
    pairs: Sequence[Sequence[tuple[int, int]]], numbers: tuple[list[Any], np.ndarray] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_uses` of the compiled graph's per-event ``(semaphore, units)`` pairs (events share
    their pair tuples as they share their maps): each distinct tuple flattened once, its entries
    copied to its events by :func:`_spread`. ``numbers``: the distinct tuples and each event's
    number among them, when the compilation kept them (``compile_graph`` on arrays numbers
    them as it makes them), else found here by identity."""
    if numbers is not None:
        distinct, which = numbers
        size = _packed("n", map(len, distinct), len(distinct))
    else:
        distinct, size, which = _distinct_by_id(pairs)  # (each tuple alive in the compiled graph)
    k = int(size.sum())
    flat = list(chain.from_iterable(chain.from_iterable(distinct)))
    tab_sem = _packed("n", flat[0::2], k)
    return _spread(tab_sem, _units_or_big(lambda: _packed("q", flat[1::2], k), k), size, which)


def _distinct_by_id(objs: Sequence[Sized]) -> tuple[list[Any], np.ndarray, np.ndarray]:
    """The distinct objects of ``objs`` by identity (each kept alive by ``objs`` meanwhile), in
    the order of their ids, with their lengths and, per entry of ``objs``, its object's number
    among them (events in a row share their maps: smallints.unique sorts the runs' ids, not
    every one)."""
    ids = _packed("n", map(id, objs), len(objs))
    _ids, at_first, which = smallints.unique(ids, return_index=True, return_inverse=True)
    distinct = [objs[i] for i in at_first.tolist()]
    return distinct, _packed("n", map(len, distinct), len(distinct)), which


def _units_or_big(pack: Callable[[], np.ndarray], k: int) -> np.ndarray:
    """``pack()``, the ``k`` units packed as int64, or ``k`` times ``_BIG`` when some unit is
    beyond 64 bits (the caller's bound check refuses them)."""
    try:
        return pack()
    except (OverflowError, struct.error):
        return np.full(k, _BIG, np.int64)


def _spread(
    tab_sem: np.ndarray, tab_units: np.ndarray, size: np.ndarray, which: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(semaphore, units, event)`` of every event's entries, from the entries of the distinct
    maps (``tab_*``, map after map, ``size`` entries each) and each event's map (``which``)."""
    n = len(which)
    count = size[which]  # entries per event
    total = int(count.sum())
    ev = np.repeat(np.arange(n), count)
    # entry k of the output is entry (k - first output entry of its event) of its event's map
    out_start = np.cumsum(count) - count
    tab_start = np.cumsum(size) - size
    at = np.repeat(tab_start[which] - out_start, count) + np.arange(total)
    return tab_sem[at], tab_units[at], ev


def _uses(
    maps: list[Mapping[str, int]], sem_no: Mapping[str, int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(semaphore, units, event)`` arrays of every entry of the events' acquire (or release)
    maps, event by event. Events share few distinct maps (:class:`Event` keeps one read-only copy
    per distinct map): each distinct one is read once, and its entries are copied to its events
    by index arithmetic."""
    distinct, size, which = _distinct_by_id(maps)  # (each map alive in its event)
    k = int(size.sum())
    tab_sem = _packed("n", map(sem_no.__getitem__, chain.from_iterable(distinct)), k)
    return _spread(tab_sem, _units_or_big(lambda: _flat_values(distinct, "q", k), k), size, which)
