"""Validation of an :class:`EventGraph` and its integer-indexed form for the schedulers.

Everything that spans events is checked here once, and every problem found is reported in one
:class:`GraphError`. Only a graph that passes gets a :class:`CompiledGraph`.

Colocation: ``colocate_with`` links events into groups (connected components of the links).
All events of a group land on one site: their fixed resources must name one site, and each
pool placeholder in the group binds to a member at that site. The sites a group may use are
worked out here, so the scheduler can never run into a group that has no legal site left.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress, islice, repeat
from operator import attrgetter, is_not, itemgetter, lt, methodcaller, not_
from types import MappingProxyType
from typing import Any

import numpy as np

from moeopt.core import smallints
from moeopt.core.events import Event, EventGraph, placeholder_role, split_resource
from moeopt.core.smallints import packed as _packed
from moeopt.errors import GraphError


@dataclass(frozen=True, slots=True)
class Edges:
    """The dependency edges of a compiled graph as read-only arrays (CSR rows): event ``i``'s
    predecessors are ``pred_idx[pred_ptr[i]:pred_ptr[i + 1]]`` with their λ in ``pred_lam``, in
    the order of its dependencies; its successors ``succ_idx[succ_ptr[i]:succ_ptr[i + 1]]`` with
    theirs in ``succ_lam``, in event order. Positions are ``intp``, pointers ``int64``, λ
    ``float64`` (each λ is the event's own float). Readers that work on whole arrays (the
    compiled loop, the validator, the scheduler's tables) read these; the per-event tuples
    :attr:`CompiledGraph.preds` / :attr:`CompiledGraph.succs` are made from them on demand."""

    pred_ptr: np.ndarray
    pred_idx: np.ndarray
    pred_lam: np.ndarray
    succ_ptr: np.ndarray
    succ_idx: np.ndarray
    succ_lam: np.ndarray


def _rows(ptr: np.ndarray, idx: np.ndarray, lam: np.ndarray) -> tuple[tuple[tuple[int, float], ...], ...]:
    """The CSR rows ``ptr`` / ``idx`` / ``lam`` as a tuple of ``(index, λ)`` tuples per row
    (Python ints and floats): the pairs made by one C-level zip, each row a slice."""
    pairs = tuple(zip(idx.tolist(), lam.tolist()))
    at = ptr.tolist()
    # each row a slice of the tuple of pairs (a tuple), cut by C-level maps: no Python
    # statement per row
    return tuple(map(pairs.__getitem__, map(slice, at, islice(at, 1, None))))


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def _edges_from(
    n_deps: np.ndarray, pred_idx: np.ndarray, pred_lam: np.ndarray, n: int
) -> Edges:
    """The :class:`Edges` of ``n`` events from each event's number of predecessors and the
    flat predecessor positions and λ (event after event): the successor rows by a stable sort
    of the edges by predecessor (so each event's successors come in event order, as the edges
    do)."""
    pred_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(n_deps, out=pred_ptr[1:])
    own = np.repeat(np.arange(n, dtype=np.intp), n_deps)
    by_pred = np.argsort(pred_idx, kind="stable")
    succ_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(pred_idx, minlength=n), out=succ_ptr[1:])
    return Edges(
        _frozen(pred_ptr),
        _frozen(pred_idx),
        _frozen(pred_lam),
        _frozen(succ_ptr),
        _frozen(own[by_pred]),
        _frozen(pred_lam[by_pred]),
    )


def _csr(rows: Sequence[Sequence[tuple[int, float]]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(ptr, positions, λ)`` of per-event ``(position, λ)`` tuples (read-only arrays): the
    pairs packed as (intp, float64) records by one C loop (:func:`struct.pack`, about two
    thirds of the time of ``np.fromiter`` into records), then split into columns."""
    ptr = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(_packed("q", map(len, rows), len(rows)), out=ptr[1:])
    m = int(ptr[-1])
    flat = np.frombuffer(struct.pack("nd" * m, *chain.from_iterable(chain.from_iterable(rows))), _EDGE)
    return _frozen(ptr), _frozen(flat["j"].copy()), _frozen(flat["lam"].copy())


# one edge as struct's native "nd" packs it: a position, then λ (8 + 8 bytes, no padding)
_EDGE = np.dtype([("j", np.intp), ("lam", np.float64)])


@dataclass(frozen=True, slots=True)
class CompiledGraph:
    """Index-based arrays of a validated graph. Event ``i`` is the i-th event added.

    Frozen: every field is a tuple or a read-only mapping, and fields cannot be reassigned (but
    for a private store of what readers derive from them, :meth:`derived`). The
    form is cached on its :class:`EventGraph` and handed to every policy's ``prepare``, so a
    policy (or anything else) that tried to change it would change every later run; it cannot.
    The conversion to tuples happens once, in :func:`compile_graph`; reading a tuple costs what
    reading a list does.

    Per event ``i``: ``names[i]``, ``dur[i]``, ``preds[i]`` / ``succs[i]`` as ``(event, λ)``
    pairs (the same edges as arrays in ``edges``, see :class:`Edges`: the graph is compiled to
    one form, see :data:`COLUMNS_MIN_EVENTS`, and the other is made from it when first read),
    ``fixed[i]`` (resource indices), ``placeholders[i]`` (pool indices), ``acq[i]`` /
    ``rel[i]`` as ``(semaphore, units)`` pairs, ``group[i]`` (colocation group, -1 for none) and
    ``events[i]``. Per resource ``r``: ``res_names[r]``, ``res_site[r]``. Per pool ``p``:
    ``pool_names[p]``, ``pool_members[p]``. Per semaphore ``s``: ``sem_names[s]``,
    ``sem_cap[s]``. Per colocation group ``k``: ``group_sites[k]``, the sites it may use
    (``None``: no restriction). ``topo`` is a topological order of the events.
    """

    names: tuple[str, ...]
    index: Mapping[str, int]
    dur: tuple[float, ...]
    topo: tuple[int, ...]
    res_names: tuple[str, ...]
    res_index: Mapping[str, int]
    res_site: tuple[int, ...]
    site_names: tuple[str, ...]
    fixed: tuple[tuple[int, ...], ...]
    placeholders: tuple[tuple[int, ...], ...]
    pool_names: tuple[str, ...]
    pool_members: tuple[tuple[int, ...], ...]
    acq: tuple[tuple[tuple[int, int], ...], ...]
    rel: tuple[tuple[tuple[int, int], ...], ...]
    sem_names: tuple[str, ...]
    sem_cap: tuple[int, ...]
    group: tuple[int, ...]
    group_sites: tuple[tuple[int, ...] | None, ...]
    events: tuple[Event, ...]
    # events that could hold one resource twice (see :func:`_double_bound`), one line each
    double_bound: tuple[str, ...] = ()
    # the edges as compiled: per-event tuples ``(preds, succs)`` or arrays (one of the two;
    # the other form is made from it when first read: ``preds``, ``succs``, ``edges``); left
    # out of equality, which the events and the index (compared) decide for them
    rows: tuple[
        tuple[tuple[tuple[int, float], ...], ...], tuple[tuple[tuple[int, float], ...], ...]
    ] | None = field(default=None, repr=False, compare=False)
    columns: Edges | None = field(default=None, repr=False, compare=False)
    # what readers derive from the fields above alone and keep for the next call on the same
    # graph (the scheduler's per-event tables, the normalised form: see ``derived``); never
    # part of the graph's value, and a copy made by ``dataclasses.replace`` starts empty
    _derived: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def n(self) -> int:
        return len(self.names)

    @property
    def preds(self) -> tuple[tuple[tuple[int, float], ...], ...]:
        """Per event its predecessors ``(event, λ)`` in the order of its dependencies."""
        if self.rows is not None:
            return self.rows[0]
        return self._made("preds", lambda: _rows(*self.pred_arrays()))

    @property
    def succs(self) -> tuple[tuple[tuple[int, float], ...], ...]:
        """Per event its successors ``(event, λ)`` in event order."""
        if self.rows is not None:
            return self.rows[1]
        return self._made("succs", lambda: _rows(*self.succ_arrays()))

    @property
    def edges(self) -> Edges:
        """The edges as arrays (:class:`Edges`)."""
        if self.columns is not None:
            return self.columns
        return Edges(*self.pred_arrays(), *self.succ_arrays())

    def pred_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(pred_ptr, pred_idx, pred_lam)`` of :class:`Edges` (for a graph compiled to
        tuples, packed from them on the first call and kept, without the successors' side)."""
        if self.columns is not None:
            e = self.columns
            return e.pred_ptr, e.pred_idx, e.pred_lam
        return self._made("pred_arrays", lambda: _csr(self.preds))

    def succ_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(succ_ptr, succ_idx, succ_lam)`` of :class:`Edges` (as :meth:`pred_arrays`)."""
        if self.columns is not None:
            e = self.columns
            return e.succ_ptr, e.succ_idx, e.succ_lam
        return self._made("succ_arrays", lambda: _csr(self.succs))

    def _made(self, key: str, make: Callable[[], Any]) -> Any:
        """What is kept under ``key``, made by ``make`` (and kept) on the first call."""
        got = self._derived.get(key)
        return self.keep(key, make()) if got is None else got

    def indeg(self) -> list[int]:
        """Each event's number of predecessors."""
        if self.rows is not None:
            return list(map(len, self.rows[0]))
        got: list[int] = np.diff(self.edges.pred_ptr).tolist()
        return got

    def derived(self, key: str) -> Any:
        """What was kept under ``key`` by :meth:`keep` (``None``: nothing yet). Only immutable
        values, or values no reader changes, are kept: every later call on this graph shares them."""
        return self._derived.get(key)

    def keep(self, key: str, value: Any) -> Any:
        """Keep ``value``, found from this graph's fields alone, under ``key``; returns the value
        kept (the first one, when two threads found it at once)."""
        return self._derived.setdefault(key, value)

    def pool_members_at(self, pool: int, site: int) -> tuple[int, ...]:
        return tuple(m for m in self.pool_members[pool] if self.res_site[m] == site)

    def tails(self) -> list[float]:
        """Longest path from each event's start to the end of the graph (its duration included)."""
        return longest_paths(self.topo, self.dur, self.preds, self.succs)[1]

    def heads(self) -> list[float]:
        """Earliest start of each event from precedence alone (longest path from the sources)."""
        return longest_paths(self.topo, self.dur, self.preds, self.succs)[0]


_coloc_of = attrgetter("colocate_with")
_duration = attrgetter("duration_us")


def reachable(adj: Sequence[Sequence[tuple[int, float]]], start: int) -> set[int]:
    """Every event reachable from ``start`` along ``adj`` (``succs``: descendants, ``preds``:
    ancestors), ``start`` itself excluded."""
    seen: set[int] = set()
    stack = [start]
    while stack:
        i = stack.pop()
        for j, _lam in adj[i]:
            if j not in seen:
                seen.add(j)
                stack.append(j)
    return seen


def longest_paths(
    topo: Sequence[int],
    dur: Sequence[float],
    preds: Sequence[Sequence[tuple[int, float]]],
    succs: Sequence[Sequence[tuple[int, float]]],
) -> tuple[list[float], list[float]]:
    """``(head, tail)`` per event: the longest path (with λ) from the sources to its start, and
    from its start to the end (its own duration included), for the durations ``dur``."""
    n = len(dur)
    head = [0.0] * n
    for i in topo:
        best = 0.0
        for p, lam in preds[i]:
            v = head[p] + dur[p] + lam
            if v > best:
                best = v
        head[i] = best
    tail = [0.0] * n
    for i in reversed(topo):
        best = 0.0
        for j, lam in succs[i]:
            v = lam + tail[j]
            if v > best:
                best = v
        tail[i] = dur[i] + best
    return head, tail


def _sem_pairs(
    name: str,
    what: str,
    amounts: Mapping[str, int],
    sem_id: Mapping[str, int],
    sems: Mapping[str, int],
    problems: list[str],
) -> tuple[tuple[int, int], ...]:
    """``(semaphore index, units)`` of one event's acquires or releases when some semaphore is
    undeclared (reported in ``problems``; the declared ones are kept, for the later checks)."""
    pairs = []
    for sem, amount in amounts.items():
        k = sem_id.get(sem)
        if k is None:
            problems.append(
                f"event {name!r} {what} undeclared semaphore {sem!r} "
                f"(declared: {sorted(sems) or 'none'}); declare it with a capacity"
            )
            continue
        pairs.append((k, amount))
    return tuple(pairs)




def _double_bound(
    names: Sequence[str],
    res_names: Sequence[str],
    fixed: Sequence[tuple[int, ...]],
    placeholders: Sequence[tuple[int, ...]],
    pool_members: Sequence[tuple[int, ...]],
) -> tuple[str, ...]:
    """Events that could hold one resource twice: a member of two of their placeholders' pools, or
    of one pool and their fixed resources. The greedy scheduler binds each placeholder on its own
    and cannot keep such bindings apart, so it refuses these graphs (the validator's exact matching
    still judges a schedule of one). One line per event; empty when there is none."""
    if not any(placeholders):
        return ()
    seen: dict[tuple[tuple[int, ...], tuple[int, ...]], int | None] = {}
    out: list[str] = []
    for i, phs in enumerate(placeholders):
        fx = fixed[i]
        if not phs or not (fx or len(phs) > 1):
            continue
        key = (fx, phs)
        if key not in seen:
            held = set(fx)
            found: int | None = None
            for pool in phs:
                found = next((m for m in pool_members[pool] if m in held), None)
                if found is not None:
                    break
                held.update(pool_members[pool])
            seen[key] = found
        clash = seen[key]
        if clash is not None:
            out.append(
                f"event {names[i]!r}: resource {res_names[clash]!r} could be bound twice (it is in "
                "more than one of its placeholders' pools, or is one of its fixed resources and in such "
                "a pool); the list scheduler binds each placeholder on its own, so give the event pools "
                "with no member in common and none of its fixed resources"
            )
    return tuple(out)


def _linked_groups(n: int, ia: Sequence[int], ib: Sequence[int]) -> list[list[int]]:
    """The connected components of the links ``ia[k] -- ib[k]`` among ``n`` events with more
    than one member, each in index order, in order of their first member (union-find)."""
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in zip(ia, ib):
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    members_by_root: dict[int, list[int]] = {}
    for i in sorted({*ia, *ib}):
        members_by_root.setdefault(find(i), []).append(i)
    return [members for _root, members in sorted(members_by_root.items())]


def _group_sites(
    members: Sequence[int],
    fixed: Sequence[tuple[int, ...]],
    placeholders: Sequence[tuple[int, ...]],
    res_site: Sequence[int],
    pool_sites: Sequence[set[int]],
    names: Sequence[str],
    site_names: Sequence[str],
    problems: list[str],
) -> tuple[int, ...] | None:
    """The sites a colocation group of ``members`` may use (``None``: no restriction, or fixed
    resources on different sites, which is reported in ``problems`` like every other problem)."""
    allowed: set[int] | None = None
    fixed_sites: set[int] = set()
    for i in members:
        fixed_i, phs = fixed[i], placeholders[i]
        if not fixed_i and not phs:
            problems.append(
                f"event {names[i]!r} takes part in colocation but occupies no resource, "
                f"so it has no site"
            )
        for r_i in fixed_i:
            fixed_sites.add(res_site[r_i])
        for pool in phs:  # (allowed is replaced, never changed in place)
            allowed = pool_sites[pool] if allowed is None else allowed & pool_sites[pool]
    if len(fixed_sites) > 1:
        problems.append(
            f"colocated events {[names[i] for i in members]} have fixed resources on different "
            f"sites {sorted(site_names[s] for s in fixed_sites)}"
        )
        return None
    if fixed_sites:
        allowed = fixed_sites if allowed is None else allowed & fixed_sites
    if allowed is not None and not allowed:
        problems.append(
            f"colocated events {[names[i] for i in members]} have no site on which all their "
            f"resources exist (check the pools behind their placeholders)"
        )
    return None if allowed is None else tuple(sorted(allowed))


@dataclass(slots=True)
class _Scan:
    """What the per-event part of :func:`compile_graph` gathers (see there)."""

    res_names: list[str]
    res_index: dict[str, int]
    pool_members: list[tuple[int, ...]]
    # the edges: as per-event tuples and successor lists (_scan_rows, _scan_events) or as
    # arrays (_scan_columns)
    preds: list[tuple[tuple[int, float], ...]] | None
    succ_lists: list[list[tuple[int, float]]] | None
    edges: Edges | None
    acq: list[tuple[tuple[int, int], ...]]
    rel: list[tuple[tuple[int, int], ...]]
    # the distinct pair tuples (they stand for all the events that share them)
    acq_kinds: list[tuple[tuple[int, int], ...]]
    rel_kinds: list[tuple[tuple[int, int], ...]]
    fixed: list[tuple[int, ...]]
    placeholders: list[tuple[int, ...]]
    # the events without dependencies in index order, when the scan gathered them
    sources: list[int] | None = None
    # True when the scan knows that no event has a pool placeholder (no double-binding check)
    no_placeholders: bool = False
    # the events' durations, when the scan read them
    dur: list[float] | None = None
    # whether any event names a colocation partner (None: the scan did not look)
    linked: bool | None = None
    # moeopt.core.state.pair_numbers of acq and rel, when the scan found them
    pair_numbers: tuple[list[int], tuple[int, ...]] | None = None
    # the distinct acq tuples and each event's number among them, then the same of rel, when
    # the scan found them
    tuple_numbers: tuple[tuple[list[Any], np.ndarray], tuple[list[Any], np.ndarray]] | None = None


class _Resources:
    """Resource names numbered in order of first appearance: the pools' members first (in pool
    order), then the events' resources (in event order)."""

    __slots__ = ("index", "names", "one")

    def __init__(self) -> None:
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        self.one: list[tuple[int]] = []  # one shared 1-tuple per resource

    def rid(self, name: str) -> int:
        i = self.index.get(name)
        if i is None:
            i = len(self.names)
            self.index[name] = i
            self.names.append(name)
            self.one.append((i,))
        return i

    def resolve(
        self, rs: Sequence[str], pool_id: Mapping[str, int]
    ) -> tuple[list[int], list[int], list[tuple[str, str]]]:
        """An event's resources ``rs``: its fixed resources' numbers (new ones numbered here, in
        order), its pool placeholders' pool numbers, and the placeholders ``(name, role)`` whose
        pool is not declared (both scans report or reject those)."""
        fx: list[int] = []
        ph: list[int] = []
        bad: list[tuple[str, str]] = []
        for name in rs:
            j = self.index.get(name)
            if j is not None:
                fx.append(j)
                continue
            role = placeholder_role(name)
            if role is None:
                fx.append(self.rid(name))
            elif role in pool_id:
                ph.append(pool_id[role])
            else:
                bad.append((name, role))
        return fx, ph, bad


_resources_of = attrgetter("resources")


def _kahn(
    indeg: list[int], succ: Sequence[Sequence[tuple[int, float]]], sources: list[int] | None
) -> list[int]:
    """Kahn's algorithm, breadth first from the sources in index order (``sources``, when the
    scan gathered them): a topological order of every event, or of fewer when the edges form a
    cycle. ``indeg``: each event's number of predecessors (consumed); ``succ``: each event's
    ``(successor, λ)`` pairs. The order is its own queue (a list iterated while it grows
    reaches every appended item, in order), which saves a deque's pop and push per event."""
    n = len(indeg)
    topo = list(compress(range(n), map(not_, indeg))) if sources is None else list(sources)
    for i in topo:
        for j, _lam in succ[i]:
            # the count is tested against 1 before it is lowered: the last predecessor's visit
            # then costs one fused compare-and-jump and no subtraction (and j's count, never
            # read again, is not stored); ``topo.append`` as a method call, which the
            # interpreter specialises for lists
            k = indeg[j]
            if k == 1:
                topo.append(j)
            else:
                indeg[j] = k - 1
    return topo


COLUMNS_MIN_EVENTS: float = float("inf")
"""Graphs of at least this many events are compiled through :func:`_scan_columns` (their edges
as arrays first, :class:`Edges`; the per-event tuples made from them when first read), smaller
ones through :func:`_scan_rows` (the tuples first, the arrays made from them when first read):
set for a stretch of work by :func:`columns_from`. Both give the same graph; which is cheaper
depends on who reads it. The compiled loop, the validator's array check and the scheduler's
tables read arrays; the Python loop and the analyses read tuples, so by default (``simulate``,
whose analyses read every graph) the tuples come first. measured (stop 43): on the
DeepSeek-V3-like zipf rank 16 (58k events, 197k edges) the arrays path compiles in ~74 ms
against ~112 ms (see :func:`_scan_columns`), and ``kernel_time`` over the 32 ranks (compiled
loop, array check, no analysis) is 1.17x faster with it (so are ``simulate``'s forked workers
with the loop loaded: their analyses' longest-path walks read the arrays too, see
``moeopt.megamoe.analysis.bounds.data_paths``); on pto M=2048 (6.2k events)
compiling and reading both tuples costs ~15 ms through the arrays against ~11 ms through the
tuples, and a warm ``simulate`` there was 0.95x as fast."""


@contextlib.contextmanager
def columns_from(n_events: float) -> Iterator[None]:
    """Compile graphs of at least ``n_events`` events to arrays first (see
    :data:`COLUMNS_MIN_EVENTS`) while the block runs, for work whose readers are the array
    ones (``moeopt.megamoe.kernel_time`` with the compiled loop loaded). A process-wide
    setting: another thread compiling meanwhile gets the same graph either way, only its cost
    differs."""
    global COLUMNS_MIN_EVENTS
    saved, COLUMNS_MIN_EVENTS = COLUMNS_MIN_EVENTS, n_events
    try:
        yield
    finally:
        COLUMNS_MIN_EVENTS = saved


def _scan_fast(
    events: Sequence[Event],
    index: Mapping[str, int],
    sem_id: Mapping[str, int],
    pools: Mapping[str, Sequence[str]],
) -> _Scan | None:
    """The per-event part of :func:`compile_graph` for a graph in which no event has a problem
    of its own: :func:`_scan_columns` or :func:`_scan_rows` (see :data:`COLUMNS_MIN_EVENTS`);
    ``None`` as soon as an event has a problem (:func:`_scan_events` then reports them)."""
    if len(events) >= COLUMNS_MIN_EVENTS:
        return _scan_columns(events, index, sem_id, pools)
    return _scan_rows(events, index, sem_id, pools)


def _scan_rows(
    events: Sequence[Event],
    index: Mapping[str, int],
    sem_id: Mapping[str, int],
    pools: Mapping[str, Sequence[str]],
) -> _Scan | None:
    """The per-event part of :func:`compile_graph` for a graph in which no event has a problem
    of its own (a missing dependency, an undeclared semaphore or pool); ``None`` as soon as one
    has (:func:`_scan_events` then finds and reports every one, in event order). It gives exactly
    what :func:`_scan_events` gives (tests/core/test_compiled_lean_scan.py holds both to the
    earlier compile_graph), with less work per event: no problem to report in the loop, one to
    three dependencies unpacked, the previous event's semaphore pairs reused when its maps are
    the very same objects, the sources gathered on the way, the resources worked out once per
    distinct resource tuple, and the durations and whether any event is colocated read in the
    same loop (an attribute read in the loop costs about a tenth of a C-level ``attrgetter``
    call per event; callgrind)."""
    n = len(events)
    preds: list[tuple[tuple[int, float], ...]] = []
    # (one empty list per event: a comprehension over ``repeat`` skips range's int per event)
    succ_lists: list[list[tuple[int, float]]] = [[] for _ in repeat(None, n)]
    acq: list[tuple[tuple[int, int], ...]] = []
    rel: list[tuple[tuple[int, int], ...]] = []
    dur: list[float] = []
    no_pairs: tuple[tuple[int, int], ...] = ()
    # the pairs of each distinct acquire / release map, keyed by the map's identity, as in
    # _scan_events (every event with that map gets that very tuple: the scheduler's state
    # numbers the distinct tuples by identity)
    acq_of: dict[int, tuple[tuple[int, int], ...]] = {}
    rel_of: dict[int, tuple[tuple[int, int], ...]] = {}
    sources: list[int] = []
    pl: tuple[tuple[int, float], ...]
    get_acq, get_rel = acq_of.get, rel_of.get
    # the resources: the pools' members are numbered first, then each distinct resource tuple
    # when an event first names it (so in the order the events name them, as _scan_events does)
    res = _Resources()
    pool_id = {p: k for k, p in enumerate(pools)}
    pool_members = [tuple(map(res.rid, members)) for members in pools.values()]
    fx_of: dict[Sequence[str], tuple[int, ...]] = {}
    ph_of: dict[Sequence[str], tuple[int, ...]] = {}
    fixed: list[tuple[int, ...]] = []
    get_fx = fx_of.get
    linked = False

    def new_pairs(
        amounts: Mapping[str, int], memo: dict[int, tuple[tuple[int, int], ...]]
    ) -> tuple[tuple[int, int], ...]:
        # a map not seen yet (a KeyError: it names an undeclared semaphore)
        pairs = memo[id(amounts)] = tuple([(sem_id[sm], u) for sm, u in amounts.items()])
        return pairs

    def new_resources(rs: Sequence[str]) -> tuple[int, ...]:
        # a resource tuple not seen yet (a KeyError: it names an undeclared pool)
        fx, ph, bad = res.resolve(rs, pool_id)
        if bad:
            raise KeyError(bad[0][1])
        ph_of[rs] = tuple(ph)
        out = fx_of[rs] = tuple(fx)
        return out

    # the last two distinct maps met and their pairs (the one before last: ``prev_*``): one
    # stage's events are made in a row, often alternating between two maps (the sub-cores of
    # a tile's write-backs)
    last_a: Mapping[str, int] | None = None
    last_r: Mapping[str, int] | None = None
    prev_a: Mapping[str, int] | None = None
    prev_r: Mapping[str, int] | None = None
    a_pairs = r_pairs = pa_pairs = pr_pairs = no_pairs
    try:  # (a KeyError: a missing event, an undeclared semaphore or an undeclared pool)
        for i, ev in enumerate(events):
            d = ev.deps
            nd = len(d)
            # the names by unpacking the read-only map itself and each λ by subscript: about a
            # third of the instructions of unpacking ``d.items()`` (a method call through the
            # proxy, a view, an iterator and a pair tuple per entry; callgrind, DeepSeek-V3-like
            # rank 1 of 47k events: this scan 412M -> 386M instructions)
            if nd == 2:
                pn, pn2 = d
                lam, lam2 = d[pn], d[pn2]
                q, q2 = index[pn], index[pn2]
                pl = ((q, lam), (q2, lam2))
                succ_lists[q].append((i, lam))
                succ_lists[q2].append((i, lam2))
            elif nd == 3:
                pn, pn2, pn3 = d
                lam, lam2, lam3 = d[pn], d[pn2], d[pn3]
                q, q2, q3 = index[pn], index[pn2], index[pn3]
                pl = ((q, lam), (q2, lam2), (q3, lam3))
                succ_lists[q].append((i, lam))
                succ_lists[q2].append((i, lam2))
                succ_lists[q3].append((i, lam3))
            elif nd == 1:
                (pn,) = d
                lam = d[pn]
                q = index[pn]
                pl = ((q, lam),)
                succ_lists[q].append((i, lam))
            elif nd:
                # many (up to tens of thousands on a big rank): the pairs by C-level map and zip
                # (about half the instructions of a comprehension per edge, callgrind); the
                # successor lists by a plain loop (a map / zip chain appending through
                # list.append costs more per edge than this loop does)
                pl = tuple(zip(map(index.__getitem__, d), d.values()))
                for q, lam in pl:
                    succ_lists[q].append((i, lam))
            else:
                pl = ()
                sources.append(i)  # (in index order: Kahn's first ones)
            preds.append(pl)
            # consecutive events often share their maps (one stage's events are made in a row):
            # the previous event's pairs, by an identity test, before any lookup
            a_map, r_map = ev.acquires, ev.releases
            if a_map is not last_a:
                if a_map is prev_a:  # (the two swap places)
                    prev_a, last_a, pa_pairs, a_pairs = last_a, a_map, a_pairs, pa_pairs
                else:
                    prev_a, pa_pairs, last_a = last_a, a_pairs, a_map
                    # (a non-empty map's pairs are never empty)
                    a_pairs = (get_acq(id(a_map)) or new_pairs(a_map, acq_of)) if a_map else no_pairs
            acq.append(a_pairs)
            if r_map is not last_r:
                if r_map is prev_r:
                    prev_r, last_r, pr_pairs, r_pairs = last_r, r_map, r_pairs, pr_pairs
                else:
                    prev_r, pr_pairs, last_r = last_r, r_pairs, r_map
                    r_pairs = (get_rel(id(r_map)) or new_pairs(r_map, rel_of)) if r_map else no_pairs
            rel.append(r_pairs)
            rs = ev.resources
            fx = get_fx(rs)
            fixed.append(new_resources(rs) if fx is None else fx)
            dur.append(ev.duration_us)
            if ev.colocate_with is not None:
                linked = True
    except KeyError:
        return None
    no_ph: tuple[int, ...] = ()
    any_ph = any(ph_of.values())
    return _Scan(
        res_names=res.names,
        res_index=res.index,
        pool_members=pool_members,
        preds=preds,
        succ_lists=succ_lists,
        edges=None,
        acq=acq,
        rel=rel,
        acq_kinds=list(acq_of.values()),
        rel_kinds=list(rel_of.values()),
        fixed=fixed,
        placeholders=(
            list(map(ph_of.__getitem__, map(_resources_of, events))) if any_ph else [no_ph] * n
        ),
        sources=sources,
        no_placeholders=not any_ph,
        dur=dur,
        linked=linked,
    )


def _scan_columns(
    events: Sequence[Event],
    index: Mapping[str, int],
    sem_id: Mapping[str, int],
    pools: Mapping[str, Sequence[str]],
) -> _Scan | None:
    """:func:`_scan_rows` with the edges as arrays (:class:`Edges`) instead of tuples: the same
    contract (``None`` as soon as an event has a problem of its own), the same compiled graph
    (tests/core/test_compiled_lean_scan.py holds both to :func:`_scan_events`), by whole-column
    passes instead of a Python statement per event: each field of every event read by one
    C-level ``map``; the dependencies' positions looked up and their λ gathered edge after edge
    into arrays; the semaphore pairs worked out once per distinct acquire / release map (by
    identity: events with equal maps share one, see :meth:`Event.trusted`), and numbered, and
    the resources once per distinct resource tuple, then handed to every event by a C-level
    lookup. measured (DeepSeek-V3-like zipf rank 16, 58k events, 197k edges, the collector
    off, best of 5): ``compile_graph`` 112 ms through :func:`_scan_rows`, 94 ms this way; 74 ms
    with the pair numbering kept and Kahn's order from the compiled kernel."""
    n = len(events)
    deps = list(map(_deps_of, events))
    n_deps = _packed("q", map(len, deps), n)
    m = int(n_deps.sum())
    try:  # (a KeyError: a missing event, an undeclared semaphore or an undeclared pool)
        # the predecessors' positions by one C-level itemgetter call over every edge (fewer
        # instructions than a map of the dict's __getitem__), then packed by struct
        names = list(chain.from_iterable(deps))
        pred_idx = _packed("n", itemgetter(*names)(index) if m > 1 else map(index.__getitem__, names), m)
        try:  # (the events' read-only maps: that type's own values, without a lookup per map)
            lams: Iterable[float] = chain.from_iterable(map(MappingProxyType.values, deps))
            pred_lam = _packed("d", lams, m)
        except TypeError:
            pred_lam = _packed("d", chain.from_iterable(map(_values, deps)), m)
        # the pairs of each distinct acquire / release map, keyed by the map's identity (every
        # event with that map gets that very tuple: the scheduler's state numbers the distinct
        # tuples by identity); an empty map gets the empty tuple
        acq, acq_of, acq_no = _pairs_by_id(list(map(_acq_of, events)), sem_id)
        rel, rel_of, rel_no = _pairs_by_id(list(map(_rel_of, events)), sem_id)
        # the resources: the pools' members are numbered first, then each distinct resource
        # tuple's new names in the order the events first name them (as _scan_events does)
        res = _Resources()
        pool_id = {p: k for k, p in enumerate(pools)}
        pool_members = [tuple(map(res.rid, members)) for members in pools.values()]
        rs_list = list(map(_resources_of, events))
        fx_of: dict[Sequence[str], tuple[int, ...]] = {}
        ph_of: dict[Sequence[str], tuple[int, ...]] = {}
        for rs in dict.fromkeys(rs_list):
            fx, ph, bad = res.resolve(rs, pool_id)
            if bad:
                raise KeyError(bad[0][1])
            fx_of[rs] = tuple(fx)
            ph_of[rs] = tuple(ph)
    except KeyError:
        return None
    any_ph = any(ph_of.values())
    colocs = list(map(_coloc_of, events))
    no_ph: tuple[int, ...] = ()
    return _Scan(
        res_names=res.names,
        res_index=res.index,
        pool_members=pool_members,
        preds=None,
        succ_lists=None,
        edges=_edges_from(n_deps, pred_idx, pred_lam, n),
        acq=acq,
        rel=rel,
        # (the non-empty maps' pairs, in order of first appearance)
        acq_kinds=[pairs for pairs in acq_of.values() if pairs],
        rel_kinds=[pairs for pairs in rel_of.values() if pairs],
        fixed=list(map(fx_of.__getitem__, rs_list)),
        placeholders=list(map(ph_of.__getitem__, rs_list)) if any_ph else [no_ph] * n,
        sources=np.flatnonzero(n_deps == 0).tolist(),
        no_placeholders=not any_ph,
        dur=list(map(_duration, events)),
        linked=colocs.count(None) < n,
        pair_numbers=_pair_numbers(acq_no, rel_no),
        tuple_numbers=((_distinct_tuples(acq_of), acq_no), (_distinct_tuples(rel_of), rel_no)),
    )


_deps_of = attrgetter("deps")
_acq_of = attrgetter("acquires")
_rel_of = attrgetter("releases")
_values = methodcaller("values")


def _pairs_by_id(
    maps: Sequence[Mapping[str, int]], sem_id: Mapping[str, int]
) -> tuple[list[tuple[tuple[int, int], ...]], dict[int, tuple[tuple[int, int], ...]], np.ndarray]:
    """Each map's ``(semaphore index, units)`` pairs (``()`` for an empty map), one tuple per
    distinct map by identity; those tuples by the maps' ids, in order of first appearance; and
    each map's tuple's number among the distinct tuples by identity (every empty map has the
    one empty tuple), in order of first appearance. A KeyError for an undeclared semaphore."""
    ids = list(map(id, maps))
    distinct = dict(zip(ids, maps))  # (each map alive in its event meanwhile)
    of = {k: tuple([(sem_id[sm], u) for sm, u in mp.items()]) if mp else () for k, mp in distinct.items()}
    by_tuple: dict[int, int] = {}
    number = {k: by_tuple.setdefault(id(t), len(by_tuple)) for k, t in of.items()}
    many = len(ids) > 1
    per_event = list(itemgetter(*ids)(of)) if many else list(map(of.__getitem__, ids))
    numbers = _packed("q", itemgetter(*ids)(number) if many else map(number.__getitem__, ids), len(ids))
    return per_event, of, numbers


def _distinct_tuples(of: Mapping[int, tuple[tuple[int, int], ...]]) -> list[tuple[tuple[int, int], ...]]:
    """The distinct tuples of :func:`_pairs_by_id`'s ``of`` by identity, in the order of their
    numbers."""
    return list({id(t): t for t in of.values()}.values())


def _pair_numbers(a_no: np.ndarray, r_no: np.ndarray) -> tuple[list[int], tuple[int, ...]]:
    """:func:`moeopt.core.state.pair_numbers` from each event's acquire and release tuple
    numbers (:func:`_pairs_by_id`): the distinct (acquire, release) pairs numbered in order of
    their first event, each pair's first event, and each event's pair number; on arrays."""
    if not a_no.size:
        return [], ()
    first, number = smallints.numbered(a_no * (int(r_no.max()) + 1) + r_no)
    return first.tolist(), tuple(number.tolist())




def _scan_events(
    events: list[Event],
    index: Mapping[str, int],
    sems: Mapping[str, int],
    sem_id: Mapping[str, int],
    pools: Mapping[str, Sequence[str]],
    problems: list[str],
) -> _Scan:
    """The per-event part of :func:`compile_graph`, one event at a time: dependencies (missing
    ones reported), semaphore uses (undeclared ones reported), resources and pool placeholders
    (undeclared pools reported), each problem in ``problems`` in event order."""
    res = _Resources()
    res_index = res.index
    one_res = res.one
    rid = res.rid
    pool_names = list(pools)
    pool_id = {p: k for k, p in enumerate(pool_names)}
    pool_members = [tuple(rid(m) for m in pools[p]) for p in pool_names]
    n = len(events)
    preds: list[tuple[tuple[int, float], ...]] = []
    succ_lists: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    acq: list[tuple[tuple[int, int], ...]] = []
    rel: list[tuple[tuple[int, int], ...]] = []
    fixed: list[tuple[int, ...]] = []
    placeholders: list[tuple[int, ...]] = []
    no_pairs: tuple[tuple[int, int], ...] = ()
    # events with equal acquire / release maps share one mapping object (see Event): its index
    # pairs are made once per distinct map, keyed by the mapping's identity (every mapping stays
    # alive in its event until the end of this function)
    acq_of: dict[int, tuple[tuple[int, int], ...]] = {}
    rel_of: dict[int, tuple[tuple[int, int], ...]] = {}
    odd_acq: list[tuple[tuple[int, int], ...]] = []  # pairs of maps naming undeclared semaphores
    odd_rel: list[tuple[tuple[int, int], ...]] = []
    pl: tuple[tuple[int, float], ...]

    def first_pairs(
        amounts: Mapping[str, int],
        memo: dict[int, tuple[tuple[int, int], ...]],
        odd: list[tuple[tuple[int, int], ...]],
        name: str,
        what: str,
    ) -> tuple[tuple[int, int], ...]:
        # the index pairs of a map not seen yet; a map naming an undeclared semaphore is reported
        # and not memoised, so that every event naming it is reported
        try:
            pairs = memo[id(amounts)] = tuple([(sem_id[sm], u) for sm, u in amounts.items()])
        except KeyError:
            pairs = _sem_pairs(name, what, amounts, sem_id, sems, problems)
            odd.append(pairs)
        return pairs

    for i, ev in enumerate(events):
        d = ev.deps
        try:
            # one or two predecessors, the common cases: unpacked, without a comprehension (a
            # function call each in this Python)
            # (and the successor lists appended to without a loop; every index is looked up
            # before the first append, so a missing name leaves them as they were)
            nd = len(d)
            if nd == 1:
                ((pn, lam),) = d.items()
                q = index[pn]
                pl = ((q, lam),)
                succ_lists[q].append((i, lam))
            elif nd == 2:
                (pn, lam), (pn2, lam2) = d.items()
                q, q2 = index[pn], index[pn2]
                pl = ((q, lam), (q2, lam2))
                succ_lists[q].append((i, lam))
                succ_lists[q2].append((i, lam2))
            else:
                pl = tuple([(index[pn], lam) for pn, lam in d.items()])
                for p, lam in pl:
                    succ_lists[p].append((i, lam))
        except KeyError:
            missing = [pn for pn in d if pn not in index]
            problems.append(f"event {ev.name!r} depends on missing event(s) {missing}")
            pl = tuple([(index[pn], lam) for pn, lam in d.items() if pn in index])
            for p, lam in pl:
                succ_lists[p].append((i, lam))
        preds.append(pl)
        # capacities and use are checked after the loop (the pairs of a non-empty map are never
        # empty unless all its semaphores are undeclared, and then they are not memoised)
        a_map, r_map = ev.acquires, ev.releases
        acq.append(
            (acq_of.get(id(a_map)) or first_pairs(a_map, acq_of, odd_acq, ev.name, "acquires"))
            if a_map
            else no_pairs
        )
        rel.append(
            (rel_of.get(id(r_map)) or first_pairs(r_map, rel_of, odd_rel, ev.name, "releases"))
            if r_map
            else no_pairs
        )
        rs = ev.resources
        if len(rs) == 1:
            # the common case: one resource already seen (one shared tuple per resource)
            j = res_index.get(rs[0])
            if j is not None:
                fixed.append(one_res[j])
                placeholders.append(())
                continue
        fx, ph, bad = res.resolve(rs, pool_id)
        for r, role in bad:
            problems.append(
                f"event {ev.name!r} uses pool placeholder {r!r} but no pool {role!r} is declared "
                f"(declared pools: {pool_names or 'none'})"
            )
        fixed.append(tuple(fx))
        placeholders.append(tuple(ph))
    return _Scan(
        res_names=res.names,
        res_index=res_index,
        pool_members=pool_members,
        preds=preds,
        succ_lists=succ_lists,
        edges=None,
        acq=acq,
        rel=rel,
        acq_kinds=[*acq_of.values(), *odd_acq],
        rel_kinds=[*rel_of.values(), *odd_rel],
        fixed=fixed,
        placeholders=placeholders,
    )


def compile_graph(g: EventGraph) -> CompiledGraph:
    """Validate ``g`` and build its :class:`CompiledGraph`; raise :class:`GraphError` on any problem."""
    events = list(g.events.values())
    names = list(g.events)  # the keys are the events' names, in the same order
    index = g._positions()  # names -> positions, in the same order
    sems = dict(g.semaphores)
    pools = dict(g.pools)
    problems: list[str] = []
    pool_names = list(pools)
    sem_names = list(sems)
    sem_id = {s: k for k, s in enumerate(sem_names)}
    n = len(events)

    # --- the events one by one: dependencies, semaphore uses, resources and pool placeholders
    # (the lean scan when no event has a problem of its own, else the scan that reports each)
    scan = _scan_fast(events, index, sem_id, pools)
    if scan is None:
        scan = _scan_events(events, index, sems, sem_id, pools, problems)
    res_names, res_index, pool_members = scan.res_names, scan.res_index, scan.pool_members
    acq, rel = scan.acq, scan.rel
    fixed, placeholders = scan.fixed, scan.placeholders
    sem_cap = [sems[sm] for sm in sem_names]
    # the distinct pair tuples stand for all the events that share them
    acq_kinds = scan.acq_kinds
    acquired = {k for pairs in acq_kinds for k, _u in pairs}
    released = {k for pairs in scan.rel_kinds for k, _u in pairs}
    if any(u > sem_cap[k] for pairs in acq_kinds for k, u in pairs):
        for i, k, u in [(i, k, u) for i, pairs in enumerate(acq) for k, u in pairs if u > sem_cap[k]]:
            problems.append(
                f"event {names[i]!r} acquires {u} units of semaphore {sem_names[k]!r} whose "
                f"capacity is {sem_cap[k]}: it could never start"
            )
    for sem in sorted(sem_names[k] for k in released - acquired):
        who = [ev.name for ev in events if sem in ev.releases][:5]
        problems.append(f"semaphore {sem!r} is released (by {who}) but never acquired")

    site_names: list[str] = []
    site_index: dict[str, int] = {}
    res_site: list[int] = []
    for r in res_names:
        parts = split_resource(r)
        assert parts is not None  # checked when the event / pool was made
        site = parts[0]
        if site not in site_index:
            site_index[site] = len(site_names)
            site_names.append(site)
        res_site.append(site_index[site])

    # --- colocation groups
    partner: dict[str, str] = {}
    linked: Iterable[Event] = ()
    # (most graphs have no colocation: the lean scan says so, else one count, not a compress
    # over every event)
    if scan.linked is not False:
        colocs = list(map(_coloc_of, events))
        if colocs.count(None) < n:
            linked = compress(events, map(is_not, colocs, repeat(None)))
    for ev in linked:
        if ev.colocate_with not in index:
            problems.append(f"event {ev.name!r} is colocated with missing event {ev.colocate_with!r}")
            continue
        partner[ev.name] = ev.colocate_with
    group = [-1] * len(events)
    group_sites: list[tuple[int, ...] | None] = []
    if partner:
        # each group's members in index order, the groups in order of their first-added member
        ia = list(map(index.__getitem__, partner))
        ib = list(map(index.__getitem__, partner.values()))
        groups: Sequence[Sequence[int]]
        if len(set(ib)) == len(ib) and set(ib).isdisjoint(ia):
            # the common case: each event is linked to a partner that nothing else links to and
            # that links to nothing, so every group is one pair (what union-find finds then);
            # a partner made before its event (a write-back colocated with its tile) is the
            # pair's first member: one C-level test of every pair instead of a min and a max
            # call per pair (scenario_basic, 1,024 pairs: about 0.3 -> 0.12 ms)
            if all(map(lt, ib, ia)):
                groups = sorted(zip(ib, ia))
            else:
                groups = sorted(zip(map(min, ia, ib), map(max, ia, ib)))
        else:
            groups = _linked_groups(len(events), ia, ib)
        pool_sites = [{res_site[m] for m in members} for members in pool_members]
        # groups whose members occupy the same resources may use the same sites: worked out once
        # per distinct tuple of (fixed, placeholders) (a colocated stage repeats a few dozen over
        # a thousand groups); a group with a problem is not memoised, so each one is reported
        memo: dict[tuple[tuple[int, ...], ...], tuple[int, ...] | None] = {}
        for gid, members in enumerate(groups):
            if len(members) == 2:  # (the common case, without a comprehension and a loop)
                a, b = members
                key: tuple[tuple[int, ...], ...] = (fixed[a], placeholders[a], fixed[b], placeholders[b])
                group[a] = group[b] = gid
            else:
                key = tuple([x for i in members for x in (fixed[i], placeholders[i])])
                for i in members:
                    group[i] = gid
            if key in memo:
                group_sites.append(memo[key])
                continue
            seen = len(problems)
            sites = _group_sites(
                members, fixed, placeholders, res_site, pool_sites, names, site_names, problems
            )
            if len(problems) == seen:
                memo[key] = sites
            group_sites.append(sites)
    # events outside any group with several placeholders bind each placeholder independently.

    # --- a topological order (and the edges in the form the scan gave them)
    rows: tuple[tuple[tuple[tuple[int, float], ...], ...], tuple[tuple[tuple[int, float], ...], ...]] | None
    succ_rows = None  # (the successor tuples, when made here from the arrays)
    if scan.edges is not None:
        rows = None
        e = scan.edges
        from moeopt.core import fastloop  # (it imports this module)

        if fastloop.loaded() and scan.sources is not None:  # (the same order, in machine code)
            topo = fastloop.topo_order(np.diff(e.pred_ptr), e.succ_ptr, e.succ_idx, scan.sources)
        else:
            succ_rows = _rows(e.succ_ptr, e.succ_idx, e.succ_lam)
            topo = _kahn(np.diff(e.pred_ptr).tolist(), succ_rows, scan.sources)
    else:
        preds, succ_lists = scan.preds, scan.succ_lists
        assert preds is not None
        assert succ_lists is not None
        rows = (tuple(preds), tuple(map(tuple, succ_lists)))
        topo = _kahn(list(map(len, preds)), succ_lists, scan.sources)
    if len(topo) < n:
        done = set(topo)
        rest = [names[i] for i in range(n) if i not in done]
        # the dependency graph among the events left over (each has a predecessor among them),
        # nodes and edges in graph order
        left = [i for i in range(n) if i not in done]
        if rows is not None:
            pred_rows = rows[0]
        else:
            assert scan.edges is not None
            pred_rows = _rows(scan.edges.pred_ptr, scan.edges.pred_idx, scan.edges.pred_lam)
        import networkx as nx  # (only to name a cycle: see EventGraph._raw_nx)

        sub = nx.DiGraph()
        sub.add_nodes_from(rest)
        sub.add_edges_from((names[p], names[i]) for i in left for p, _lam in pred_rows[i] if p not in done)
        try:
            cyc = nx.find_cycle(sub)
            path = " -> ".join([str(u) for u, _v in cyc] + [str(cyc[0][0])])
            problems.append(f"the dependencies form a cycle: {path}")
        except nx.NetworkXNoCycle:  # pragma: no cover - Kahn left nodes, so a cycle exists
            problems.append(f"the dependencies form a cycle among {rest[:10]}")

    if problems:
        raise GraphError("invalid event graph:\n  " + "\n  ".join(problems))

    cg = CompiledGraph(
        names=tuple(names),
        index=MappingProxyType(index),
        dur=tuple(map(_duration, events)) if scan.dur is None else tuple(scan.dur),
        topo=tuple(topo),
        res_names=tuple(res_names),
        res_index=MappingProxyType(res_index),
        res_site=tuple(res_site),
        site_names=tuple(site_names),
        fixed=tuple(fixed),
        placeholders=tuple(placeholders),
        pool_names=tuple(pool_names),
        pool_members=tuple(pool_members),
        acq=tuple(acq),
        rel=tuple(rel),
        sem_names=tuple(sem_names),
        sem_cap=tuple(sem_cap),
        group=tuple(group),
        group_sites=tuple(group_sites),
        events=tuple(events),
        # (what _double_bound finds without placeholders, known from the scan without a look at
        # every event)
        double_bound=(
            ()
            if scan.no_placeholders
            else _double_bound(names, res_names, fixed, placeholders, pool_members)
        ),
        rows=rows,
        columns=scan.edges,
    )
    if succ_rows is not None:  # (made for Kahn's order: kept for the readers of succs)
        cg.keep("succs", succ_rows)
    if scan.pair_numbers is not None:  # (the scheduler's tables number the events' pairs)
        cg.keep("pair_numbers", scan.pair_numbers)
    if scan.tuple_numbers is not None:  # (the validator's array check spreads each tuple's uses)
        cg.keep("acq_numbers", scan.tuple_numbers[0])
        cg.keep("rel_numbers", scan.tuple_numbers[1])
    return cg
