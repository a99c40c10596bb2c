"""The generic event model: :class:`Event` and :class:`EventGraph`.

An execution is unrolled into a finite set of events. An event has exactly five things
(SPEC §3): the exclusive ``resources`` it occupies, its ``deps`` (predecessor -> sync
latency λ), the counting semaphores it ``acquires`` at its start and ``releases`` at its end,
an optional ``colocate_with`` partner whose site it must share, and one ``duration_us``.
``labels`` are for analyses only; no scheduler reads them.

Resource names are ``<site>.<role>`` (e.g. ``core3.AIC``; the site is everything before the
last dot). A name ``<role>:*`` is a *pool placeholder*: the event needs one member of the
pool declared under ``role`` on the graph, chosen when the event is committed.

This layer knows nothing about any operator: no stage names, no hardware.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from moeopt.errors import GraphError

if TYPE_CHECKING:
    from networkx import DiGraph as _DiGraph  # (the class below has a property named ``nx``)

    from moeopt.core.compiled import CompiledGraph

_SITE_ROLE = re.compile(r"^(?P<site>[A-Za-z0-9_\-.\[\]/]+)\.(?P<role>[A-Za-z0-9_\-]+)$")
_PLACEHOLDER = re.compile(r"^(?P<role>[A-Za-z0-9_\-]+):\*$")
_ROLE = re.compile(r"^[A-Za-z0-9_\-]+$")


_SPLIT_MEMO: dict[str, tuple[str, str] | None] = {}
_ROLE_MEMO: dict[str, str | None] = {}


def split_resource(name: str) -> tuple[str, str] | None:
    """``"core3.AIC"`` -> ``("core3", "AIC")``; ``None`` when the name is not ``<site>.<role>``."""
    try:
        return _SPLIT_MEMO[name]
    except KeyError:
        m = _SITE_ROLE.match(name)
        out = None if m is None else (m.group("site"), m.group("role"))
        if len(_SPLIT_MEMO) < 100_000:
            _SPLIT_MEMO[name] = out
        return out


def placeholder_role(name: str) -> str | None:
    """``"AIC:*"`` -> ``"AIC"``; ``None`` when the name is not a pool placeholder."""
    try:
        return _ROLE_MEMO[name]
    except KeyError:
        m = _PLACEHOLDER.match(name)
        out = None if m is None else m.group("role")
        if len(_ROLE_MEMO) < 100_000:
            _ROLE_MEMO[name] = out
        return out


_INF = math.inf


def _finite_nonneg(value: Any) -> bool:
    if type(value) is float:  # the common case first: plain floats (NaN fails both comparisons)
        return 0.0 <= value < _INF
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def _plain_durations(durations: Sequence[float]) -> bool:
    """Whether every duration is a float in ``[0, inf)`` (what :meth:`Event.trusted` checks one
    by one), by C-level passes: all of type float, and their sum finite and their minimum >= 0.
    A NaN makes the sum NaN (and could hide from the minimum), an infinity makes it infinite once
    no entry is negative or NaN; a sum that overflows only sends the caller to the one-by-one
    check, which decides."""
    return not durations or (set(map(type, durations)) == {float} and _finite_sum(durations))


def _finite_sum(durations: Sequence[float]) -> bool:
    """:func:`_plain_durations` of floats (their type known to the caller): their sum finite
    and their minimum >= 0."""
    return not durations or (0.0 <= sum(durations) < _INF and min(durations) >= 0.0)


_NO_AMOUNTS: Mapping[str, int] = MappingProxyType({})
_NO_LABELS: Mapping[str, Any] = MappingProxyType({})
_NO_DEPS: Mapping[str, float] = MappingProxyType({})


# one read-only mapping per distinct acquire / release map (in insertion order): graphs repeat a
# few dozen of them over thousands of events, and consumers can key per-map work on its identity
_AMOUNTS_MEMO: dict[tuple[tuple[str, int], ...], Mapping[str, int]] = {}


def _shared_amounts(checked: Mapping[str, int] | None) -> Mapping[str, int]:
    """The shared read-only copy of an already checked acquire / release map (a read-only map
    is kept as it is: its caller shares it between events on purpose)."""
    if not checked:
        return _NO_AMOUNTS
    if type(checked) is MappingProxyType:
        return checked
    key = tuple(checked.items())
    out = _AMOUNTS_MEMO.get(key)
    if out is None:
        out = MappingProxyType(dict(checked))
        if len(_AMOUNTS_MEMO) < 100_000:
            _AMOUNTS_MEMO[key] = out
    return out


def _amounts(owner: str, what: str, raw: Mapping[str, int] | None) -> Mapping[str, int]:
    if not raw:
        return _NO_AMOUNTS
    out = dict(raw)
    for sem, amount in out.items():
        # fast path: a plain positive int under a plain non-empty name
        if type(amount) is int and amount > 0 and type(sem) is str and sem:
            continue
        if not isinstance(sem, str) or not sem:
            raise GraphError(f"event {owner!r}: {what} names must be non-empty strings, got {sem!r}")
        if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
            raise GraphError(
                f"event {owner!r}: {what}[{sem!r}] must be a positive integer number of units, "
                f"got {amount!r}"
            )
    return _shared_amounts(out)


@dataclass(frozen=True, slots=True, eq=False, init=False)
class Event:
    """One schedulable unit of work (SPEC §3). Immutable; use ``dataclasses.replace`` for variants.

    Args:
        name: unique name in its graph.
        resources: exclusive resources held for the whole duration, ``<site>.<role>`` or a pool
            placeholder ``<role>:*``.
        deps: predecessor name -> sync latency λ ≥ 0 (µs): ``start ≥ end(pred) + λ``.
        acquires: semaphore -> units taken at this event's start.
        releases: semaphore -> units given back at this event's end.
        colocate_with: name of an event whose site (core) this event must share.
        duration_us: duration ≥ 0, independent of concurrency.
        labels: free-form analysis labels (stage, expert, wave, tile, rank ...); never scheduled on.
    """

    name: str
    resources: Sequence[str] = ()
    deps: Mapping[str, float] = field(default_factory=dict)
    acquires: Mapping[str, int] = field(default_factory=dict)
    releases: Mapping[str, int] = field(default_factory=dict)
    colocate_with: str | None = None
    duration_us: float = 0.0
    labels: Mapping[str, Any] = field(default_factory=dict)

    def __init__(
        self,
        name: str,
        resources: Sequence[str] = (),
        deps: Mapping[str, float] | None = None,
        acquires: Mapping[str, int] | None = None,
        releases: Mapping[str, int] | None = None,
        colocate_with: str | None = None,
        duration_us: float = 0.0,
        labels: Mapping[str, Any] | None = None,
    ) -> None:
        # a hand-written __init__ (the dataclass's would set every field, then __post_init__
        # would set most of them again): builders create events by the ten thousand
        if not isinstance(name, str) or not name:
            raise GraphError(f"event name must be a non-empty string, got {name!r}")
        dur = duration_us
        if not (type(dur) is float and 0.0 <= dur < _INF) and not _finite_nonneg(dur):
            raise GraphError(f"event {name!r}: duration_us must be a finite number >= 0, got {dur!r}")
        if isinstance(resources, str):
            raise GraphError(
                f"event {name!r}: resources must be a list of names, got the string {resources!r}"
            )
        res = tuple(resources)
        memo = _SPLIT_MEMO
        for r in res:
            if type(r) is str and memo.get(r) is not None:
                continue  # a '<site>.<role>' name seen before
            if not isinstance(r, str):
                raise GraphError(f"event {name!r}: resource names must be strings, got {r!r}")
            if split_resource(r) is None and placeholder_role(r) is None:
                raise GraphError(
                    f"event {name!r}: resource {r!r} is neither '<site>.<role>' (e.g. 'core3.AIC') "
                    f"nor a pool placeholder '<role>:*' (e.g. 'AIC:*')"
                )
        if len(res) > 1 and len(set(res)) != len(res):
            dup = sorted({r for r in res if res.count(r) > 1})
            raise GraphError(f"event {name!r}: resource(s) {dup} listed more than once")
        dd: dict[str, float] = dict(deps) if deps else {}
        for pred, lam in dd.items():
            # fast path: a plain float λ in [0, inf) on a plain non-empty name other than this one
            if type(lam) is float and 0.0 <= lam < _INF and type(pred) is str and pred and pred != name:
                continue
            if not isinstance(pred, str) or not pred:
                raise GraphError(f"event {name!r}: dependency names must be strings, got {pred!r}")
            if not _finite_nonneg(lam):
                raise GraphError(
                    f"event {name!r}: sync latency λ on dependency {pred!r} must be a finite "
                    f"number >= 0, got {lam!r}"
                )
            if pred == name:
                raise GraphError(f"event {name!r} depends on itself (a cycle of length 1)")
            dd[pred] = float(lam)  # same key: the dict's size does not change
        if colocate_with is not None and (not isinstance(colocate_with, str) or not colocate_with):
            raise GraphError(
                f"event {name!r}: colocate_with must be an event name or None, got {colocate_with!r}"
            )
        if colocate_with == name:
            raise GraphError(f"event {name!r}: colocate_with names the event itself")
        s_name, s_res, s_deps, s_acq, s_rel, s_coloc, s_dur, s_labels = _SLOT_SETTERS
        s_name(self, name)
        s_res(self, res)
        s_deps(self, MappingProxyType(dd))
        s_acq(self, _amounts(name, "acquires", acquires))
        s_rel(self, _amounts(name, "releases", releases))
        s_coloc(self, colocate_with)
        s_dur(self, dur if type(dur) is float else float(dur))
        s_labels(self, MappingProxyType(dict(labels)) if labels else _NO_LABELS)

    @classmethod
    def trusted(
        cls,
        name: str,
        resources: Sequence[str] = (),
        deps: Mapping[str, float] | None = None,
        acquires: Mapping[str, int] | None = None,
        releases: Mapping[str, int] | None = None,
        colocate_with: str | None = None,
        duration_us: float = 0.0,
        labels: Mapping[str, Any] | None = None,
    ) -> Event:
        """An event from arguments its caller guarantees to be well formed, without the per-field
        checks of the constructor (about a third of its cost).

        For generators that make events by the ten thousand from their own code, not for user
        input. The caller guarantees what the constructor would check: a non-empty name; resource
        names that are ``<site>.<role>`` or ``<role>:*``, none twice; dependency names other than
        the event's own with float λ >= 0; positive integer units; float durations. It also hands
        the ``deps`` and ``labels`` mappings over: they are wrapped read-only, not copied, so the
        caller must not change them afterwards (the MegaMoE builders pass a fresh dict each time).
        Acquire and release maps are copied, once per distinct map: events with equal maps share
        one read-only copy, as with the checking constructor; a read-only map
        (``MappingProxyType``) is kept as it is, for callers that share one map between many
        events themselves (consumers such as ``compile_graph`` work once per shared map). The
        duration is still checked (a cost formula can still produce a negative or NaN time), and
        every cross-event rule is still checked by :meth:`EventGraph.validate`. ``tests/megamoe``
        rebuilds every builder event with the checking constructor to hold the MegaMoE builders to
        this contract.
        """
        if not (type(duration_us) is float and 0.0 <= duration_us < _INF):
            raise GraphError(
                f"event {name!r}: duration_us must be a finite float >= 0, got {duration_us!r}"
            )
        if cls is not Event:  # (a subclass may lay its slots out otherwise: the setters)
            return _trusted_by_setters(
                cls, name, resources, deps, acquires, releases, colocate_with, duration_us, labels
            )
        # the fields are stored on an instance of a class with Event's very slots and no frozen
        # __setattr__ (plain attribute stores, which the interpreter specialises for slots), and
        # the instance then becomes an Event: about half the cost of calling each slot's setter
        ev = _Unfrozen()
        ev.name = name
        ev.resources = tuple(resources)
        ev.deps = MappingProxyType(deps) if deps else _NO_DEPS
        # a non-empty read-only map is kept as it is (what _shared_amounts does with it, without
        # the call: the builders pass shared read-only maps for most events)
        ev.acquires = (
            acquires if type(acquires) is MappingProxyType and acquires else _shared_amounts(acquires)
        )
        ev.releases = (
            releases if type(releases) is MappingProxyType and releases else _shared_amounts(releases)
        )
        ev.colocate_with = colocate_with
        ev.duration_us = duration_us
        ev.labels = MappingProxyType(labels) if labels else _NO_LABELS
        ev.__class__ = Event  # type: ignore[assignment]
        return ev  # type: ignore[return-value]

    @classmethod
    def trusted_many(
        cls,
        names: Sequence[str],
        resources: Sequence[Sequence[str]],
        deps: Sequence[Mapping[str, float] | None],
        acquires: Sequence[Mapping[str, int] | None],
        releases: Sequence[Mapping[str, int] | None],
        colocate_with: Sequence[str | None] | None,
        durations: Sequence[float],
        labels: Sequence[Mapping[str, Any] | None],
        plain: bool = False,
    ) -> list[Event]:
        """``[cls.trusted(*args) for args in zip(names, resources, ...)]``: many events from
        columns (entry ``i`` of each is event ``i``'s argument; ``colocate_with`` None: none
        colocated), under :meth:`trusted`'s contract, in one call.

        The same events as :meth:`trusted` makes one by one (same field values, types and shared
        objects), made by one loop here instead of one Python call per event: a builder that
        emits tens of thousands of events spends about a third less on making them (callgrind,
        ``tests/core/test_trusted_many.py`` holds the two equal). A duration that is not a finite
        float >= 0 raises as :meth:`trusted` does, before any event is returned.

        ``plain``: the caller also guarantees that every ``resources`` entry is a tuple, every
        ``acquires`` / ``releases`` entry a ``MappingProxyType`` (empty or not) and every
        duration a float (builders whose columns gather a few such objects, checked once each):
        the C-level type tests of those four columns are skipped (about a fifth of the cost of a
        GMM run's events, callgrind); the durations' sign and finiteness are still checked."""
        coloc = repeat(None) if colocate_with is None else colocate_with
        if cls is not Event or not (_finite_sum(durations) if plain else _plain_durations(durations)):
            # one by one: a subclass (see trusted), or a duration that is not a finite float
            # >= 0 (each event made and checked in turn: the first bad one raises, by its name)
            return list(
                map(cls.trusted, names, resources, deps, acquires, releases, coloc, durations, labels)
            )
        proxy = MappingProxyType
        # every column that trusted would convert entry by entry is converted here by one
        # C-level pass (or kept as it is when no entry needs it: one C-level test), so that the
        # loop below only stores (no Python call, test or branch per event)
        if not plain and set(map(type, resources)) != {tuple}:
            resources = list(map(tuple, resources))  # (a tuple stays the same object)
        wrap: Callable[[Any], Any] = proxy  # (mypy: the type, called as a function of a map)
        deps = list(map(wrap, deps)) if all(deps) else [proxy(d) if d else _NO_DEPS for d in deps]
        labels = list(map(wrap, labels)) if all(labels) else [proxy(d) if d else _NO_LABELS for d in labels]
        # (_shared_amounts keeps a non-empty read-only map as it is: the builders pass those)
        if not all(acquires) or (not plain and set(map(type, acquires)) != {proxy}):
            acquires = list(map(_shared_amounts, acquires))
        if not all(releases) or (not plain and set(map(type, releases)) != {proxy}):
            releases = list(map(_shared_amounts, releases))
        out: list[Event] = []
        append = out.append
        unfrozen, event = _Unfrozen, Event
        # (the loop body is trusted's stores, with a local-bound name per global it reads)
        for name, res, dd, acq, rel, co, dur, lab in zip(
            names, resources, deps, acquires, releases, coloc, durations, labels
        ):
            ev = unfrozen()
            ev.name = name
            ev.resources = res
            ev.deps = dd
            ev.acquires = acq
            ev.releases = rel
            ev.colocate_with = co
            ev.duration_us = dur
            ev.labels = lab
            ev.__class__ = event  # type: ignore[assignment]
            append(ev)  # type: ignore[arg-type]
        return out

    def __repr__(self) -> str:
        parts = [repr(self.name)]
        if self.resources:
            parts.append(f"resources={list(self.resources)!r}")
        if self.deps:
            parts.append(f"deps={dict(self.deps)!r}")
        if self.acquires:
            parts.append(f"acquires={dict(self.acquires)!r}")
        if self.releases:
            parts.append(f"releases={dict(self.releases)!r}")
        if self.colocate_with:
            parts.append(f"colocate_with={self.colocate_with!r}")
        parts.append(f"duration_us={self.duration_us!r}")
        return "Event(" + ", ".join(parts) + ")"


_name_of = attrgetter("name")

_SLOT_SETTERS = tuple(
    Event.__dict__[f].__set__
    for f in ("name", "resources", "deps", "acquires", "releases", "colocate_with", "duration_us", "labels")
)


class _Unfrozen:
    """:class:`Event`'s slots without its frozen ``__setattr__``: :meth:`Event.trusted` fills one
    and turns it into an ``Event`` (a ``__class__`` assignment, which Python allows between
    classes of the same slot layout; the assertion below holds the two layouts equal)."""

    __slots__ = Event.__slots__
    name: str
    resources: tuple[str, ...]
    deps: Mapping[str, float]
    acquires: Mapping[str, int]
    releases: Mapping[str, int]
    colocate_with: str | None
    duration_us: float
    labels: Mapping[str, Any]


assert _Unfrozen.__slots__ == tuple(Event.__dataclass_fields__)


def _trusted_by_setters(
    cls: type[Event],
    name: str,
    resources: Sequence[str],
    deps: Mapping[str, float] | None,
    acquires: Mapping[str, int] | None,
    releases: Mapping[str, int] | None,
    colocate_with: str | None,
    duration_us: float,
    labels: Mapping[str, Any] | None,
) -> Event:
    """:meth:`Event.trusted` for a subclass of :class:`Event`: each field by its slot's setter
    (the frozen class's ``__setattr__`` refuses, ``object.__setattr__`` looks each name up)."""
    ev = object.__new__(cls)
    s_name, s_res, s_deps, s_acq, s_rel, s_coloc, s_dur, s_labels = _SLOT_SETTERS
    s_name(ev, name)
    s_res(ev, tuple(resources))
    s_deps(ev, MappingProxyType(deps) if deps else _NO_DEPS)
    s_acq(ev, acquires if type(acquires) is MappingProxyType and acquires else _shared_amounts(acquires))
    s_rel(ev, releases if type(releases) is MappingProxyType and releases else _shared_amounts(releases))
    s_coloc(ev, colocate_with)
    s_dur(ev, duration_us)
    s_labels(ev, MappingProxyType(labels) if labels else _NO_LABELS)
    return ev


def positions(d: dict[str, Any]) -> dict[str, int]:
    """A new dict of each key of ``d`` -> its position in ``d``'s order: ``dict(zip(d,
    range(len(d))))``, the same keys in the same order.

    Made from a copy of ``d``, whose table is copied as it is (no insertion and no growth per
    key), each value then replaced by the position: about three quarters of the instructions of
    ``dict(zip(...))`` (callgrind, 47k events)."""
    out: dict[str, Any] = d.copy()
    out.update(zip(d, range(len(out))))
    return out


class EventGraph:
    """A validated DAG of :class:`Event` objects on a ``networkx.DiGraph``.

    Nodes are event names carrying the event under the ``"event"`` attribute; an edge
    ``pred -> succ`` carries its sync latency under ``"lam"``. Semaphores (name -> capacity,
    the free units at t = 0) and pools (role -> member resources) are declared on the graph.

    The networkx graph is assembled from the events in one bulk step the first time it is needed
    (``g.nx``, naming a cycle) and cached until the graph changes; the schedulers work on the
    validated integer-indexed form instead.

    Events may be added in any order; structural checks that span events (cycles, missing
    dependencies, undeclared semaphores or pools, colocation partners) run once in
    :meth:`validate`, which every consumer calls (and which caches its result until the graph
    changes again).
    """

    def __init__(
        self,
        semaphores: Mapping[str, int] | None = None,
        pools: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self._g: Any = None  # the networkx DiGraph, built from the events on first use
        self._events: dict[str, Event] = {}
        self._semaphores: dict[str, int] = {}
        self._pools: dict[str, tuple[str, ...]] = {}
        self._compiled: CompiledGraph | None = None
        for sem, cap in dict(semaphores or {}).items():
            self.add_semaphore(sem, cap)
        for role, members in dict(pools or {}).items():
            self.add_pool(role, members)

    # ------------------------------------------------------------------ building
    def add_semaphore(self, name: str, capacity: int) -> None:
        """Declare a counting semaphore with ``capacity`` free units at t = 0."""
        if not isinstance(name, str) or not name:
            raise GraphError(f"semaphore name must be a non-empty string, got {name!r}")
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0:
            raise GraphError(f"semaphore {name!r}: capacity must be an integer >= 0, got {capacity!r}")
        if name in self._semaphores:
            raise GraphError(f"semaphore {name!r} is declared twice")
        self._semaphores[name] = capacity
        self._compiled = None

    def add_pool(self, role: str, members: Sequence[str]) -> None:
        """Declare the pool behind the placeholder ``<role>:*``: an ordered list of resources.

        Member order matters: when several members give the same start, the first one wins.
        """
        if not isinstance(role, str) or not _ROLE.match(role):
            raise GraphError(f"pool role must match [A-Za-z0-9_-]+, got {role!r}")
        if role in self._pools:
            raise GraphError(f"pool {role!r} is declared twice")
        if isinstance(members, str):
            raise GraphError(f"pool {role!r}: members must be a list of resource names, got {members!r}")
        members = tuple(members)
        if not members:
            raise GraphError(f"pool {role!r} has no members")
        for mem in members:
            if not isinstance(mem, str) or split_resource(mem) is None:
                raise GraphError(
                    f"pool {role!r}: member {mem!r} is not a resource name '<site>.<role>' (e.g. 'core0.AIC')"
                )
        if len(set(members)) != len(members):
            raise GraphError(f"pool {role!r}: a member is listed more than once")
        self._pools[role] = members
        self._compiled = None

    def add(self, event: Event) -> Event:
        """Add one event; returns it. Names must be unique."""
        if not isinstance(event, Event):
            raise GraphError(f"EventGraph.add takes an Event, got {type(event).__name__}")
        name = event.name
        if name in self._events:
            raise GraphError(f"event {name!r} is added twice")
        self._events[name] = event
        self._g = None
        self._compiled = None
        return event

    def add_all(self, events: Iterable[Event]) -> None:
        """Add many events (names unique); all or nothing: on an error none of them is added."""
        evs = list(events)
        own = self._events
        if not set(map(type, evs)) <= {Event}:  # the common case, checked in bulk
            bad = next((ev for ev in evs if not isinstance(ev, Event)), None)
            if bad is not None:
                raise GraphError(f"EventGraph.add takes an Event, got {type(bad).__name__}")
        batch = dict(zip(map(_name_of, evs), evs))
        if len(batch) != len(evs) or not own.keys().isdisjoint(batch):
            seen: set[str] = set(own)
            for ev in evs:
                if ev.name in seen:
                    raise GraphError(f"event {ev.name!r} is added twice")
                seen.add(ev.name)
        own.update(batch)
        self._g = None
        self._compiled = None

    # ------------------------------------------------------------------ reading
    @property
    def events(self) -> Mapping[str, Event]:
        """Events by name, in insertion order (read-only)."""
        return MappingProxyType(self._events)

    @property
    def semaphores(self) -> Mapping[str, int]:
        return MappingProxyType(self._semaphores)

    @property
    def pools(self) -> Mapping[str, tuple[str, ...]]:
        return MappingProxyType(self._pools)

    @property
    def nx(self) -> _DiGraph:
        """The validated ``networkx.DiGraph`` (a read-only view)."""
        self.validate()
        return self._raw_nx().copy(as_view=True)

    def __len__(self) -> int:
        return len(self._events)

    def __contains__(self, name: object) -> bool:
        return name in self._events

    def __iter__(self) -> Iterator[Event]:
        return iter(self._events.values())

    def __getitem__(self, name: str) -> Event:
        return self._events[name]

    def __repr__(self) -> str:
        return (
            f"EventGraph({len(self._events)} events, "
            f"{sum(len(e.deps) for e in self._events.values())} edges, "
            f"{len(self._semaphores)} semaphores, {len(self._pools)} pools)"
        )

    def resources(self) -> list[str]:
        """Every concrete resource named by an event or a pool, sorted."""
        if self._compiled is not None:  # the validated form already lists them
            return sorted(self._compiled.res_names)
        seen: set[str] = set()
        for ev in self._events.values():
            seen.update(r for r in ev.resources if placeholder_role(r) is None)
        for members in self._pools.values():
            seen.update(members)
        return sorted(seen)

    def copy_with(
        self,
        semaphores: Mapping[str, int] | None = None,
        events: Iterable[Event] | None = None,
    ) -> EventGraph:
        """A new graph with the same pools and the given semaphores / events (defaults: these)."""
        out = EventGraph(
            semaphores=self._semaphores if semaphores is None else semaphores, pools=self._pools
        )
        out.add_all(self._events.values() if events is None else events)
        return out

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        """Check every cross-event rule; raise one :class:`GraphError` listing all problems."""
        self.compiled()

    def compiled(self) -> CompiledGraph:
        """The validated integer-indexed form used by the schedulers (cached until the graph
        changes; frozen, so every reader sees the same form)."""
        if self._compiled is None:
            from moeopt.core.compiled import compile_graph

            self._compiled = compile_graph(self)
        return self._compiled

    def _positions(self) -> dict[str, int]:
        """A new dict of event name -> position in insertion order (``compile_graph``'s index):
        :func:`positions` of the events' own dict."""
        return positions(self._events)

    # used by compile_graph; kept here so the raw networkx graph stays private
    def _raw_nx(self) -> _DiGraph:
        """The networkx graph of the events (built in bulk on first use, cached until a change).

        A dependency on a missing event appears as a node without an ``"event"`` attribute.
        """
        if self._g is None:
            # (imported here, not with moeopt: networkx's import is about half of moeopt's, and
            # building, scheduling and analysing a graph never read this form)
            import networkx

            g = networkx.DiGraph()
            g.add_nodes_from((name, {"event": ev}) for name, ev in self._events.items())
            g.add_edges_from(
                (pred, name, {"lam": lam})
                for name, ev in self._events.items()
                for pred, lam in ev.deps.items()
            )
            self._g = g
        return self._g
