"""The emitter: the one place that records what the stages emit.

It owns, for one rank's graph:

* the events in emission order (the order is the graph's, and the scheduler breaks ties by it);
* stage membership (which events a stage emitted) and program order: ``emit(..., chain_on=r)``
  makes the event depend on the last event emitted on the pinned resource ``r`` and records it
  as ``r``'s new last event and the pair as a chain edge, in the one call;
* late dependencies: :meth:`Emitter.add_deps`, the only way to change an emitted event, and
  :meth:`Emitter.chain`, program order given once the events of several stages exist (an
  orchestration that interleaves stages on one resource, the layered one);
* the traffic counters, the MAC counter, the declared semaphores and pools, and the bandwidth
  units a transfer holds (:meth:`Emitter.units`);
* assembly into an :class:`~moeopt.core.events.EventGraph`, leaving out every semaphore that
  can never bind.

Speed (graph building is about a third of a ``simulate`` call): events are made with
:meth:`Event.trusted` from this package's own code (a test rebuilds every one with the checking
constructor); acquire / release maps that thousands of events share are one read-only object
(:meth:`Emitter.hold_maps`), so the assembly and the compiled graph work once per distinct map.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from itertools import chain as chain_iter
from itertools import compress, islice
from operator import attrgetter, itemgetter
from types import MappingProxyType
from typing import Any

import numpy as np

from moeopt.core import smallints
from moeopt.core.events import Event, EventGraph, positions
from moeopt.core.smallints import stable_order

Units = Mapping[str, int]  # an event's acquires or releases: semaphore -> units

_event = Event.trusted
"""Events are made with :meth:`Event.trusted`: their names, resources, λ and units come from this
package's own code. Those with late dependencies (:meth:`Emitter.add_deps`) or naming a dropped
semaphore are made again when the graph is assembled."""

_name_of = attrgetter("name")
_deps_of = attrgetter("deps")
_acq_of = attrgetter("acquires")
_rel_of = attrgetter("releases")
_first_of = itemgetter(0)

TRAFFIC_CHANNELS = ("gm_to_l1", "hbm", "remote_in", "remote_out", "gm_to_ub", "ub_to_gm")


def _is_chained(prev: str | None, had: bool) -> bool:
    """Whether a run's event has a chain edge from ``prev`` (see :meth:`ChainEdges.add_run`)."""
    return prev is not None and not had


class ChainEdges(AbstractSet[tuple[str, str]]):
    """The chain edges ``(prev, event)`` an emitter recorded: a set, made on first read.

    The edges of a run of events (:meth:`Emitter.emit_run`) are kept as the run's columns (each
    event's previous event on its resource, its name, and whether it already depended on it)
    and become pairs only when the set is read: ``kernel_time`` never reads them (only the
    analyses' data dependencies do, :meth:`RankGraph.data_preds`), and making a pair and adding
    it to a set for each of the DeepSeek-V3-like zipf shape's ~420k GMM tiles, then freeing
    them, cost ~2% of its serial time. Reading it as a set (iteration, ``in``, ``==``, ``len``)
    gives the pairs of every run and every :meth:`add`."""

    __slots__ = ("_runs", "_set")

    def __init__(self) -> None:
        self._set: set[tuple[str, str]] = set()
        self._runs: list[tuple[list[Any], Sequence[str], list[bool]]] = []

    def add(self, edge: tuple[str, str]) -> None:
        self._set.add(edge)

    def add_run(self, prevs: list[Any], names: Sequence[str], had: list[bool]) -> None:
        """The edges ``(prevs[i], names[i])`` where ``prevs[i]`` is not ``None`` and
        ``had[i]`` is false (the event did not already depend on it)."""
        self._runs.append((prevs, names, had))

    def _all(self) -> set[tuple[str, str]]:
        got = self._set
        for prevs, names, had in self._runs:
            got.update(compress(zip(prevs, names), map(_is_chained, prevs, had)))
        self._runs.clear()
        return got

    def endpoints(self) -> tuple[list[str], list[str]]:
        """The edges' first events and their second events, edge ``k`` being ``(first[k],
        second[k])``: every edge of the set once, in no particular order, without making the
        pairs of the runs (what the analyses' compiled walks read)."""
        first = [p for p, _q in self._set]
        second = [q for _p, q in self._set]
        for prevs, names, had in self._runs:
            keep = list(map(_is_chained, prevs, had))
            first.extend(compress(prevs, keep))
            second.extend(compress(names, keep))
        return first, second

    def __contains__(self, edge: object) -> bool:
        return edge in self._all()

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def __repr__(self) -> str:
        return f"ChainEdges({self._all()!r})"


class Emitter:
    """Collects one rank's events; see the module docstring.

    Args:
        rank: the destination rank (every flag's ``rank`` label).
        contention: whether transfers hold bandwidth units (``options.bandwidth_contention``).
        unit: bytes per µs of one bandwidth unit.
    """

    def __init__(self, rank: int, contention: bool, unit: float) -> None:
        self.rank = rank
        # running totals in emission order (the order of the additions fixes the float sums): bytes
        # per channel, and the MACs of the GMM tiles' real rows; a hot loop may take a total,
        # add to it in order and store it back
        self.traffic: dict[str, float] = dict.fromkeys(TRAFFIC_CHANNELS, 0.0)
        self.macs = 0.0
        self.chain_edges = ChainEdges()
        self._events: dict[str, Event] = {}
        self._by_stage: dict[str, list[str]] = {}
        self._last: dict[str, str] = {}  # pinned resource -> last event emitted on it
        self._late: dict[str, dict[str, float]] = {}
        self._flags: set[str] = set()
        self._sems: dict[str, int] = {}
        self._pools: dict[str, tuple[str, ...]] = {}
        self._hold_memo: dict[
            tuple[tuple[tuple[str, int], ...], str | None, str | None], tuple[Units, Units]
        ] = {}
        self._contention = contention
        self._unit = unit

    # ------------------------------------------------------------ events
    def emit(
        self,
        name: str,
        stage: str | None,
        resources: Sequence[str],
        deps: dict[str, float],
        acquires: Units | None = None,
        releases: Units | None = None,
        duration_us: float = 0.0,
        labels: dict[str, Any] | None = None,
        colocate_with: str | None = None,
        chain_on: Sequence[str] | None = None,
        sync_deps: Mapping[str, float] | None = None,
    ) -> str:
        """Add one event; returns its name.

        ``deps`` (a fresh dict, handed over) holds the data dependencies. With ``chain_on`` (pinned
        resources, usually the event's own one-resource tuple) the event also depends, with λ = 0,
        on the last event emitted on each of them, unless it already depends on it; such an edge
        is recorded in :attr:`chain_edges`, and the event becomes the resources' last. Then
        ``sync_deps`` (edges of the sync protocol that come after program order: the previous
        expert group's SYNCALL, a joined group's done flag) are added. ``stage`` records the
        event as one of the stage's (``None``: a flag, in no stage).
        """
        events = self._events
        if name in events:
            raise AssertionError(f"builder emitted event {name!r} twice")
        if chain_on is not None:
            last = self._last
            for r in chain_on:
                prev = last.get(r)
                if prev is not None and prev not in deps:
                    deps[prev] = 0.0
                    self.chain_edges.add((prev, name))
        if sync_deps:
            deps.update(sync_deps)
        events[name] = _event(name, resources, deps, acquires, releases, colocate_with, duration_us, labels)
        if chain_on is not None:
            for r in chain_on:
                last[r] = name
        if stage is not None:
            by_stage = self._by_stage
            if stage in by_stage:
                by_stage[stage].append(name)
            else:
                by_stage[stage] = [name]
        return name

    def emit_run(
        self,
        stage: str,
        names: Sequence[str],
        resources: Sequence[Sequence[str]],
        deps: Sequence[dict[str, float]],
        acquires: Sequence[Units],
        releases: Sequence[Units],
        durations: Sequence[float],
        labels: Sequence[dict[str, Any]],
        chain: bool,
        sync_deps: Sequence[Mapping[str, float] | None] | None = None,
        res_no: np.ndarray | None = None,
        colocate: Sequence[str | None] | None = None,
        plain: bool = False,
    ) -> None:
        """:meth:`emit` of many events of ``stage`` in order, given as columns (entry ``i`` of
        each is event ``i``'s argument; ``colocate`` None: none colocated): the same events,
        dependencies, chain edges and stage order as one :meth:`emit` call per event, with
        ``chain_on`` the event's own resources when ``chain`` (else none) and ``sync_deps`` the
        column's entry. For the stages that emit thousands of tiles: one call instead of one per
        event, the events made by one :meth:`Event.trusted_many`, and program order found on
        arrays where every event has one resource (see :meth:`_chain_run`). ``res_no``: where
        every event has one resource, each event's resource as a number (equal numbers for equal
        resources, any numbering), if the caller has them (else they are worked out from
        ``resources``).

        The ``deps`` dicts are handed over as with :meth:`emit`; one dict may serve several
        events (it then becomes the read-only dependency map of each, see ``Event.trusted``)
        only where nothing is added to it: ``chain`` off and no ``sync_deps`` entry for them.
        A name emitted before, or twice in ``names``, raises ``AssertionError`` as :meth:`emit`
        does, but only once the run is recorded (a builder bug: the emitter is not used after it).
        ``plain``: as :meth:`Event.trusted_many`'s (every resources entry a tuple, every acquire
        / release entry a read-only map, every duration a float), for callers that gather those
        columns from a few objects they have checked."""
        events = self._events
        before = len(events)
        if chain:
            self._chain_run(names, resources, deps, res_no)
        if sync_deps is not None:
            # (after every chain edge: each event's own dict gets its chain edge, then its sync)
            _exhaust(map(dict.update, compress(deps, sync_deps), filter(None, sync_deps)))
        made = Event.trusted_many(
            names, resources, deps, acquires, releases, colocate, durations, labels, plain=plain
        )
        events.update(zip(names, made))
        if len(events) != before + len(names):
            # a name was there before or is repeated: the first such one, as emit reports it (the
            # names there before are the dict's first ``before`` keys: an update keeps its place)
            seen = set(islice(events, before))
            for name in names:
                if name in seen:
                    raise AssertionError(f"builder emitted event {name!r} twice")
                seen.add(name)
        by_stage = self._by_stage
        if stage in by_stage:
            by_stage[stage].extend(names)
        else:
            by_stage[stage] = list(names)

    def _chain_run(
        self,
        names: Sequence[str],
        resources: Sequence[Sequence[str]],
        deps: Sequence[dict[str, float]],
        res_no: np.ndarray | None = None,
    ) -> None:
        """The ``chain_on`` part of :meth:`emit` for each event of a run, in order: on each of its
        resources it depends (λ = 0) on the last event emitted there unless it already does, and
        becomes that resource's last.

        Where every event has one resource (GMM tiles on their core's cube; ``res_no``, if
        given, numbers them) the previous event on each event's resource is found on arrays (a
        stable sort by resource: within a resource, run order), gathered from an object array of
        the names, and the edges added by one plain loop (cheaper than the C-level maps of
        ``dict`` methods it replaced, callgrind); otherwise event by event."""
        last = self._last
        edges = self.chain_edges
        n = len(names)
        if not n:
            return
        if res_no is None and set(map(len, resources)) != {1}:
            for name, res, d in zip(names, resources, deps):
                for r in res:
                    prev = last.get(r)
                    if prev is not None and prev not in d:
                        d[prev] = 0.0
                        edges.add((prev, name))
                    last[r] = name  # (an event's resources are distinct: none is read again)
            return
        if res_no is None:
            on = list(map(_first_of, resources))
            number = dict(zip(dict.fromkeys(on), range(n)))  # resource -> its number
            res_no = np.fromiter(map(number.__getitem__, on), np.int64, n)
        by_res = stable_order(res_no)
        same = res_no[by_res[1:]] == res_no[by_res[:-1]]
        before = np.full(n, n, np.int64)  # the previous event on the same resource (n: none in the run)
        before[by_res[1:][same]] = by_res[:-1][same]
        with_none = np.fromiter(chain_iter(names, (None,)), object, n + 1)
        prevs: list[Any] = with_none[before].tolist()  # (str or None)
        for i in np.flatnonzero(before == n).tolist():  # each resource's first event of the run
            prevs[i] = last.get(resources[i][0])
        # (whether each event already depends on its previous one, in one C-level pass: None is
        # no name, so in no map)
        had = list(map(dict.__contains__, deps, prevs))
        for prev, d, h in zip(prevs, deps, had):
            if prev is not None and not h:
                d[prev] = 0.0
        edges.add_run(prevs, names, had)
        # each resource's last event of the run becomes its last, the resources taken in the
        # order of their first event (the order one by one would add a new one to the dict)
        firsts = by_res[np.append(True, ~same)]
        lasts = by_res[np.append(~same, True)]
        by_first = np.argsort(firsts)
        for i, j in zip(firsts[by_first].tolist(), lasts[by_first].tolist()):
            last[resources[i][0]] = names[j]

    def flag(self, name: str, deps: Iterable[str]) -> str:
        """A zero-duration flag without resources that waits for ``deps`` (λ = 0; the sync
        latency sits on the consumer's edge)."""
        self._flags.add(name)
        return self.emit(
            name, None, (), dict.fromkeys(deps, 0.0), labels={"stage": "flag", "rank": self.rank}
        )

    def add_deps(self, name: str, extra: Mapping[str, float]) -> None:
        """Add dependencies to an event already emitted, for a wait that is only known once a later
        stage is built (dispatch look-ahead, staged barriers). The event keeps its place in the
        order; its dependencies are its own followed by every added one, in the order added (a
        name added twice keeps its first place and its last λ). Applied when the graph is
        assembled; chain edges are not affected."""
        if name not in self._events:
            raise AssertionError(f"add_deps: no event {name!r} was emitted")
        self._late.setdefault(name, {}).update(extra)

    def chain(self, resource: str, units: Sequence[tuple[str, str]]) -> None:
        """Program order on the pinned ``resource`` given after the events were emitted (without
        ``chain_on``): each unit ``(first, last)`` (one event: ``(name, name)``; a tile cut into K
        chunks: its first and last chunk) starts after the previous unit's last event (λ = 0, a
        late dependency and a chain edge unless it already waits for it). The first unit keeps
        the dependencies it was emitted with (events emitted on ``resource`` with ``chain_on``
        form their own chain beside this one), and the last unit's last event becomes the
        resource's last, so a later ``chain_on`` emission follows it."""
        prev: str | None = None
        for first, last in units:
            if first not in self._events:
                raise AssertionError(f"chain: no event {first!r} was emitted")
            if (
                prev is not None
                and prev not in self._events[first].deps
                and prev not in self._late.get(first, ())
            ):
                self.add_deps(first, {prev: 0.0})
                self.chain_edges.add((prev, first))
            prev = last
        if prev is not None:
            self._last[resource] = prev

    def stage_events(self, stage: str) -> list[str]:
        """The events ``stage`` emitted, in order (a copy)."""
        return list(self._by_stage.get(stage, ()))

    # ------------------------------------------------------------ declarations
    def semaphore(self, name: str, capacity: int) -> None:
        self._sems[name] = capacity

    def has(self, name: str) -> bool:
        """Whether a semaphore or bandwidth channel ``name`` is declared."""
        return name in self._sems

    def capacity(self, name: str) -> int:
        """The declared capacity (units) of semaphore or channel ``name``."""
        return self._sems[name]

    def bandwidth(self, channel: str, bytes_per_us: float, paths: int = 1) -> None:
        """Declare an aggregate bandwidth channel: a semaphore of ``rate / unit`` units (>= 1).

        ``paths`` > 1: the channel is that many equal paths of ``bytes_per_us / paths`` each (one per
        core), and each path gets the units an event moving at the path's full rate holds
        (:meth:`units` rounds a rate up), so ``paths`` such events fit at once. Rounding the
        aggregate down instead would leave the last path short of a unit or so whenever the path
        rate is not a whole number of units: one core of the die could never load at full rate
        while all the others do."""
        if paths > 1:
            per_path = max(1, math.ceil(bytes_per_us / paths / self._unit - 1e-9))
            self._sems[channel] = paths * per_path
            return
        self._sems[channel] = max(1, int(bytes_per_us // self._unit))

    def pool(self, name: str, members: Sequence[str]) -> str:
        """Declare (once; again with the same members is a no-op) a pool; returns its placeholder."""
        members = tuple(members)
        if name in self._pools and self._pools[name] != members:
            raise AssertionError(f"pool {name} declared twice with different members")
        self._pools[name] = members
        return f"{name}:*"

    # ------------------------------------------------------------ traffic and bandwidth
    def count(self, channel: str, nbytes: float) -> None:
        self.traffic[channel] += nbytes

    def units(self, channel: str, nbytes: float, dur: float, count: bool = True) -> int:
        """Bandwidth units of ``channel`` that moving ``nbytes`` in ``dur`` µs holds (the rate
        rounded up to units, at most the channel's capacity; 0 when nothing is held);
        ``count``: add ``nbytes`` to the channel's traffic (callers that reuse an earlier
        event's units count each event's traffic themselves)."""
        if count:
            self.traffic[channel] += nbytes
        if not self._contention or nbytes <= 0 or dur <= 0:
            return 0
        u = math.ceil(nbytes / dur / self._unit - 1e-9)
        return min(max(u, 1), self._sems[channel])

    def bw(
        self,
        acq: dict[str, int],
        rel: dict[str, int],
        channel: str,
        nbytes: float,
        dur: float,
        count: bool = True,
    ) -> None:
        """Hold ``channel`` bandwidth units for the event's own duration (see :meth:`units`)."""
        u = self.units(channel, nbytes, dur, count)
        if u:
            acq[channel] = acq.get(channel, 0) + u
            rel[channel] = rel.get(channel, 0) + u

    def hold_maps(
        self, holds: tuple[tuple[str, int], ...], take: str | None = None, give: str | None = None
    ) -> tuple[Units, Units]:
        """(acquires, releases) of an event that holds ``units`` of each ``(channel, units)`` in
        ``holds`` for its own duration (0 units: none), takes one unit of ``take`` and gives one of
        ``give``: read-only maps shared by every event with the same arguments (thousands of tiles
        have a few distinct ones)."""
        key = (holds, take, give)
        got = self._hold_memo.get(key)
        if got is None:
            acq = {channel: units for channel, units in holds if units}
            rel = dict(acq)
            if take is not None:
                acq[take] = 1
            if give is not None:
                rel[give] = 1
            got = self._hold_memo[key] = (MappingProxyType(acq), MappingProxyType(rel))
        return got

    # ------------------------------------------------------------ assembly
    def assemble(self, early: Sequence[str] = ()) -> tuple[EventGraph, list[str]]:
        """The EventGraph of every emitted event (late dependencies applied) and the semaphores
        left out.

        The graph's order is the emission order (the scheduler breaks ties by it), except that the
        events of the stages in ``early`` move up to just after the last event they depend on
        (keeping their own order): at an instant where such an event and an event emitted before
        it could both start, the scheduler commits the ``early`` one first.

        A semaphore whose capacity covers the total amount ever acquired from it can never delay
        an event in any schedule (its free level stays >= capacity - total >= every single
        acquire), so it is not declared and no event names it: the schedule is the same with or
        without it (SPEC §4's normalisation criterion, its special case that needs no graph walk),
        and the scheduler is spared the cost of tracking it.
        """
        specs = list(self._events.values())
        late = self._late
        late_done = False
        if early:
            specs, late_done = self._reordered(specs, early, with_late=True)
        if late and not late_done:  # (the events named in it found by C-level passes, then remade)
            for i in compress(range(len(specs)), map(late.__contains__, map(_name_of, specs))):
                specs[i] = self._with_late_deps(specs[i])
        # events with equal acquire / release maps share one mapping object (see Event.trusted):
        # the demand and the dropped-semaphore test are worked out once per distinct map object,
        # the maps told apart by their ids on arrays (np.unique: each distinct id's first event,
        # every event's number among them, the events per id; hashing each event's id into a
        # dict and a Counter cost about twice the instructions, callgrind)
        n = len(specs)
        acqs = list(map(_acq_of, specs))
        acq_ids = np.fromiter(map(id, acqs), np.int64, n)
        # (consecutive events share their maps: the ids come in runs, which smallints.unique
        # sorts instead of every id)
        _ids, acq_first, acq_no, acq_uses = smallints.unique(
            acq_ids, return_index=True, return_inverse=True, return_counts=True
        )
        acq_maps = [acqs[i] for i in acq_first.tolist()]  # each distinct map
        demand: dict[str, int] = dict.fromkeys(self._sems, 0)
        for m, uses in zip(acq_maps, acq_uses.tolist()):
            for sem, a in m.items():
                demand[sem] += a * uses
        sems = {name: cap for name, cap in self._sems.items() if cap < demand[name]}
        dropped = set(self._sems) - set(sems)
        graph = EventGraph(semaphores=sems, pools=self._pools)
        if dropped:  # (the release maps are only read to find those naming a dropped semaphore)
            rels = list(map(_rel_of, specs))
            _ids, rel_first, rel_no = smallints.unique(
                np.fromiter(map(id, rels), np.int64, n), return_index=True, return_inverse=True
            )
            rel_maps = [rels[i] for i in rel_first.tolist()]
            acq_hit = np.fromiter((not dropped.isdisjoint(m) for m in acq_maps), bool, len(acq_maps))
            rel_hit = np.fromiter((not dropped.isdisjoint(m) for m in rel_maps), bool, len(rel_maps))
            # the events with a touched map remade without the dropped semaphores, each in its
            # place (each distinct map filtered once; the same filtered dict for its events)
            hits = np.flatnonzero(acq_hit[acq_no] | rel_hit[rel_no]).tolist()
            acq_kept: dict[int, dict[str, int]] = {}
            rel_kept: dict[int, dict[str, int]] = {}
            for i, a_no, r_no in zip(hits, acq_no[hits].tolist(), rel_no[hits].tolist()):
                acq = acq_kept.get(a_no)
                if acq is None:
                    acq = acq_kept[a_no] = {k: v for k, v in acq_maps[a_no].items() if k not in dropped}
                rel = rel_kept.get(r_no)
                if rel is None:
                    rel = rel_kept[r_no] = {k: v for k, v in rel_maps[r_no].items() if k not in dropped}
                sp = specs[i]
                specs[i] = _remade(sp, sp.deps, acq, rel)
        graph.add_all(specs)
        return graph, sorted(dropped)

    def _early_order(self, specs: list[Event], early: Sequence[str]) -> list[Event]:
        """:meth:`_reordered` without the late dependencies."""
        return self._reordered(specs, early)[0]

    def _reordered(
        self, specs: list[Event], early: Sequence[str], with_late: bool = False
    ) -> tuple[list[Event], bool]:
        """``specs`` (the events in emission order) with the events of the ``early`` stages, and
        the flags they wait for, each just after the last event it depends on (see
        :meth:`assemble`).

        The rule as a sort (``tests/megamoe/test_emitter_order.py`` keeps it as the reference):
        an event that stays has the key ``(i,)``, its emission position; a moved event the key of
        its anchor, the dependency with the largest key among those emitted before it (a late
        dependency emitted after it, a staged barrier, does not anchor it), followed by
        ``(seq,)``, its number among the moved events (``(-1, seq)`` without an anchor); the
        order is by key. Keys are never equal, and a key sorts just after its prefix and before
        any larger key of the prefix's length, so that order is a walk of the anchor tree: the
        moved events without an anchor (each followed by what is anchored to it, and so on),
        then every event that stays, each followed by the moved events anchored to it, in
        ``seq`` order, each followed by its own. Keys are kept only to pick anchors: the order
        itself is built from the tree, or, when every moved event is anchored to one that stays
        (no deeper tree), by one stable sort of the positions on arrays.

        ``with_late``: also remake the events with late dependencies (:meth:`assemble`'s step),
        each found at its position here instead of by a pass over every name, before the order
        is worked out: the flags that move are read off the emitted events, and an anchor is the
        same when an event's dependencies already hold its late ones (``_anchors`` takes the
        dependency with the largest position or key among its own and its late ones, each name
        having one position and one key). Also returns whether it did (not when nothing moves)."""
        moved = {name for st in early for name in self._by_stage.get(st, ())}
        if not moved:
            return specs, False
        events = self._events
        flags = self._flags
        # (the flags they wait for, found by C-level passes over their dependency maps)
        moved |= flags.intersection(chain_iter.from_iterable(map(_deps_of, map(events.__getitem__, moved))))
        position = positions(events)  # (specs: the events' values, in the same order)
        if with_late:
            for i in map(position.__getitem__, self._late):
                specs[i] = self._with_late_deps(specs[i])
        moved_at = sorted(map(position.__getitem__, moved))
        anchor_at = self._anchors(specs, moved, position, moved_at)
        n = len(specs)
        anchors = np.array(anchor_at, np.int64)
        is_moved = np.zeros(n, bool)
        is_moved[moved_at] = True
        if (anchors >= 0).all() and not is_moved[anchors].any():
            # no moved event is a root or an anchor (a stage whose events each wait for one
            # event that stays): the walk is every staying event followed by the moved events
            # anchored to it in order, the order of a stable sort by (anchor's position, 1)
            # for moved events, (position, 0) for staying ones
            sort_key = np.arange(0, 2 * n, 2, dtype=np.int64)
            sort_key[moved_at] = anchors * 2 + 1
            order = np.argsort(sort_key, kind="stable")
            out_specs: list[Event] = np.fromiter(specs, object, n)[order].tolist()
            return out_specs, with_late
        return _tree_order(specs, moved, position, moved_at, anchor_at), with_late

    def _anchors(
        self, specs: list[Event], moved: set[str], position: dict[str, int], moved_at: list[int]
    ) -> list[int]:
        """Each moved event's anchor's position (-1: none), the moved events taken at their
        positions ``moved_at`` (ascending): see :meth:`_early_order`."""
        late = self._late
        key: dict[str, tuple[int, ...]] = {}  # moved event -> its key
        anchor_at: list[int] = []
        add_anchor = anchor_at.append
        seq = 0
        for i in moved_at:
            sp = specs[i]
            name = sp.name
            deps = sp.deps
            if len(deps) == 1 and name not in late:
                # the common case, a write-back waiting for its tile: the one dependency is the
                # anchor if it stays and was emitted before this event (else the general rule)
                (d,) = deps
                if d not in moved:
                    last = position.get(d, i)
                    if last < i:
                        seq += 1
                        key[name] = (last, seq)
                        add_anchor(last)
                        continue
            elif len(deps) > 2 and name not in late and moved.isdisjoint(deps):
                # (a flag waiting for a stage's tiles: hundreds of dependencies) when none of them
                # moves, each key is (j,): the anchor is the one emitted last, if before this event
                last = max(map(position.__getitem__, deps)) if position.keys() >= deps.keys() else i
                if last < i:
                    seq += 1
                    key[name] = (last, seq)
                    add_anchor(last)
                    continue
            # the general rule without a key tuple per staying dependency: a staying one's key
            # (j,) is below a moved one's key k (two or more entries) iff j <= k[0], so the
            # anchor is the moved dependency with the largest key if its first entry is at least
            # the last position of a staying one, else that staying one
            last = -1  # the last position of a staying dependency emitted before this event
            stay: str | None = None
            best: tuple[int, ...] | None = None  # the largest key of a moved one
            mv: str | None = None
            for d in (*deps, *late[name]) if name in late else deps:
                j = position.get(d)
                if j is None or j >= i:  # not emitted, or emitted after this event
                    continue
                k = key.get(d)
                if k is None:
                    if j > last:
                        last, stay = j, d
                elif best is None or k > best:
                    best, mv = k, d
            seq += 1
            if best is not None and mv is not None and best[0] >= last:
                key[name] = (*best, seq)
                add_anchor(position[mv])
            elif stay is not None:
                key[name] = (last, seq)
                add_anchor(last)
            else:
                key[name] = (-1, seq)
                add_anchor(-1)
        return anchor_at

    def _with_late_deps(self, old: Event) -> Event:
        deps = dict(old.deps)
        deps.update(self._late[old.name])
        return _remade(old, deps, old.acquires, old.releases)


def _tree_order(
    specs: list[Event], moved: set[str], position: dict[str, int], moved_at: list[int], anchor_at: list[int]
) -> list[Event]:
    """:meth:`Emitter._early_order`'s walk of the anchor tree (``anchor_at``: each moved event's
    anchor's position, -1: none, the moved events at ``moved_at``)."""
    anchored: dict[str | None, list[Event]] = {}  # anchor (None: none) -> its moved events
    for i, a in zip(moved_at, anchor_at):
        anchored.setdefault(specs[a].name if a >= 0 else None, []).append(specs[i])

    out: list[Event] = []

    def walk(roots: list[Event]) -> None:  # each root, then what is anchored to it, depth first
        stack = roots[::-1]
        while stack:
            sp = stack.pop()
            out.append(sp)
            below = anchored.get(sp.name)
            if below:
                stack += below[::-1]

    walk(anchored.get(None, []))
    # the events that stay, in order: the runs between moved positions (slices, where a
    # filter would test every event)
    staying: list[Event] = []
    at = 0
    for j in moved_at:
        staying += specs[at:j]
        at = j + 1
    staying += specs[at:]
    done = 0  # events of ``staying`` already in ``out``
    # when no moved event is an anchor (a stage whose events each wait for one event that
    # stays), the walk from each anchor is its list of moved events: appended as it is
    flat = moved.isdisjoint(anchored)
    for i in sorted(position[a] for a in anchored if a is not None and a not in moved):
        upto = i - bisect_right(moved_at, i) + 1  # ``staying``'s events up to and with specs[i]
        out += staying[done:upto]
        done = upto
        if flat:
            out += anchored[specs[i].name]
        else:
            walk(anchored[specs[i].name])
    out += staying[done:]
    return out


def _exhaust(calls: Iterable[object]) -> None:
    """Run a C-level ``map`` of calls made for their effect, in order (no Python statement per
    call, no list of their results)."""
    deque(calls, maxlen=0)


def _remade(ev: Event, deps: Mapping[str, float], acquires: Units, releases: Units) -> Event:
    """``ev`` again with other dependencies or units (everything else as it was)."""
    return _event(
        ev.name, ev.resources, deps, acquires, releases, ev.colocate_with, ev.duration_us, ev.labels
    )
