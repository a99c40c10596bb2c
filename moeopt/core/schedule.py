"""The result of scheduling an event graph: :class:`Schedule` and its per-event :class:`Wait`."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from itertools import repeat
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol

import numpy as np

if TYPE_CHECKING:
    from moeopt.core.compiled import CompiledGraph

WaitKind = Literal["none", "dependency", "resource", "semaphore"]


class Wait(NamedTuple):
    """Why an event started when it did (an immutable record; a named tuple because a schedule
    holds one per event and analyses read them all).

    The start is ``max(ready_us, resource free time, semaphore admission)``, taken in that order:

    * ``ready_us``: when every predecessor had ended plus its λ (0 for a source); ``pred`` is the
      predecessor that set it (``None`` for a source).
    * ``resource`` / ``resource_wait_us``: the resource whose free time pushed the start past
      ``ready_us``, and by how much.
    * ``semaphore`` / ``semaphore_wait_us``: the semaphore whose admission pushed it further.
    """

    ready_us: float
    pred: str | None = None
    resource: str | None = None
    resource_wait_us: float = 0.0
    semaphore: str | None = None
    semaphore_wait_us: float = 0.0

    @property
    def kind(self) -> WaitKind:
        """What finally decided the start: the last constraint that moved it."""
        if self.semaphore_wait_us > 0:
            return "semaphore"
        if self.resource_wait_us > 0:
            return "resource"
        if self.pred is not None:
            return "dependency"
        return "none"

    @property
    def queued_us(self) -> float:
        """Time spent ready but not started (resource queueing plus semaphore admission)."""
        return self.resource_wait_us + self.semaphore_wait_us


_SIX = "{:.6f}"
_NEG_ZERO = "-0.000000"
_PLAIN = frozenset({float, int})


def _fmt(x: float) -> str:
    v = round(x, 6)
    if v == 0:
        v = 0.0
    return f"{v:.6f}"


class _Joined(Mapping[str, str]):
    __slots__ = ("_res",)

    def __init__(self, res: Mapping[str, tuple[str, ...]]) -> None:
        self._res = res

    def __getitem__(self, name: str) -> str:
        return "+".join(self._res[name])

    def __iter__(self) -> Iterator[str]:
        return iter(self._res)

    def __len__(self) -> int:
        return len(self._res)


class Deferred(Protocol):
    """What makes the fields of a :class:`Schedule` (or its :class:`SemaphoreLevels`) that its
    producer left to be made on first read (see :func:`deferred`)."""

    def get(self, name: str) -> Any:
        """The value of field ``name`` (the same object on every call)."""

    def end_values(self) -> Sequence[float]:
        """Every event's end, in the order of the ``end_us`` map ``get`` makes."""

    def size(self) -> int:
        """The number of events (of keys of each map ``get`` makes)."""


class TimeColumns(NamedTuple):
    """A greedy schedule's own columns by event position in its compiled graph ``cg`` (see
    :func:`deferred_columns`): ``start[i]`` / ``end[i]`` (float64 arrays, not to be written)
    and ``bound[i]``, the indices into ``cg.res_names`` of the resources event ``i`` occupied."""

    cg: CompiledGraph
    start: np.ndarray
    end: np.ndarray
    bound: Sequence[tuple[int, ...]]


_TIMES = ("start_us", "end_us", "resources")


def deferred_columns(obj: Any) -> TimeColumns | None:
    """The columns a schedule's ``start_us``, ``end_us`` and ``resources`` are still to be made
    from (its producer left them deferred, see :func:`deferred`, and none has been read yet, so
    they hold exactly these values); ``None`` otherwise. For a reader of every event's times
    that works on arrays (``validate_schedule(..., by_position=True)``): it then never makes
    the three maps only to turn them back into arrays."""
    own = object.__getattribute__(obj, "__dict__")
    maker = own.get(_DEFERRED)
    columns = getattr(maker, "columns", None)
    if columns is None or not own.keys().isdisjoint(_TIMES):
        return None
    got: TimeColumns = columns()
    return got


_DEFERRED = "_deferred_fields"
"""The key under which an object with deferred fields keeps their maker in its ``__dict__``
(the fields themselves are absent from it until read)."""


def deferred(obj: Any, maker: Deferred) -> None:
    """Leave the fields of ``obj`` that it lacks (made without them: ``object.__new__`` and
    ``__dict__`` filled by hand) to be made by ``maker`` when first read."""
    object.__getattribute__(obj, "__dict__")[_DEFERRED] = maker


def _deferred_field(obj: Any, name: str) -> Any:
    """``obj.name`` made by its maker and kept (``__getattr__``: read only when ``name`` is
    missing from ``obj.__dict__`` and its class, so a made field costs nothing on later reads)."""
    own = object.__getattribute__(obj, "__dict__")
    maker = own.get(_DEFERRED)
    names = _FIELD_NAMES.get(type(obj)) if maker is not None else None
    if names is None and maker is not None:
        names = frozenset(f.name for f in fields(obj))  # (a subclass)
    if names is None or name not in names:
        raise AttributeError(f"{type(obj).__name__!r} object has no attribute {name!r}")
    value = own[name] = maker.get(name)
    if names <= own.keys():
        # every field made: the maker (and the columns it holds) goes, and the fields take
        # their declared order (``vars`` as of the same object made eagerly)
        ordered = {f.name: own[f.name] for f in fields(obj)}
        own.clear()
        own.update(ordered)
    return value


def _full_state(obj: Any) -> dict[str, Any]:
    """``obj.__dict__`` with every field made, in field order, for pickling and copying (what
    the state of the same object made eagerly is)."""
    own = object.__getattribute__(obj, "__dict__")
    if _DEFERRED not in own:
        return own
    return {f.name: getattr(obj, f.name) for f in fields(obj)}


@dataclass(frozen=True, eq=False)
class SemaphoreLevels:
    """The free units of each semaphore over time, recorded by the scheduler that produced a
    schedule: ``curves[sem] = (times, levels)``, ``levels[k]`` in force from ``times[k]`` until
    ``times[k + 1]`` (the capacity before ``times[0]``; the changes at one instant merged).

    They hold for the start and end times they were recorded with (``for_start`` /
    ``for_end``, the schedule's own mappings): see :meth:`Schedule.semaphore_levels`.
    """

    for_start: Mapping[str, float]
    for_end: Mapping[str, float]
    curves: Mapping[str, tuple[Sequence[float], Sequence[int]]]

    if not TYPE_CHECKING:  # (hidden from type checkers: attribute typos stay errors)

        def __getattr__(self, name: str) -> Any:
            return _deferred_field(self, name)

    def __getstate__(self) -> dict[str, Any]:
        return _full_state(self)


@dataclass(frozen=True)
class Schedule:
    """Start, end and bound resources of every event of one graph (times in µs).

    ``resources[e]`` lists the concrete resources event ``e`` occupied (placeholders resolved);
    ``binding[e]`` is the same joined with ``"+"`` (``"core0.AIC"`` for a one-resource event,
    ``""`` for an event without resources). ``waits[e]`` says what it waited for. ``order`` is
    the commit order of the scheduler that produced it (empty for a schedule from elsewhere).
    ``recorded_levels``: the semaphore level curves that scheduler built, if any (read them with
    :meth:`semaphore_levels`). ``repinned``: events a restructure hook moved while scheduling
    (:mod:`moeopt.core.restructure`): event -> (the fixed resource the graph declares, the member
    of a pool containing it where the event ran); empty without a hook.
    """

    start_us: Mapping[str, float]
    end_us: Mapping[str, float]
    resources: Mapping[str, tuple[str, ...]]
    waits: Mapping[str, Wait] = field(default_factory=dict)
    policy: str = ""
    # (a default by factory: a plain default would be a class attribute, read instead of the
    # field's maker when the scheduler leaves the field to be made on first read)
    order: tuple[str, ...] = field(default_factory=tuple)
    recorded_levels: SemaphoreLevels | None = field(default=None, compare=False, repr=False)
    repinned: Mapping[str, tuple[str, str]] = field(default_factory=dict)

    # The greedy scheduler leaves ``start_us``, ``end_us``, ``resources`` and ``order`` (and
    # its recorded levels' two maps) to be made when first read (:func:`deferred`): building the three
    # 100k-entry maps of a large graph touched every event name's string object, about a tenth
    # of the wall time of scheduling the pinned 100k graph, paid also by callers that read the
    # makespan alone. Once read, a field is a plain attribute, as if made eagerly.
    if not TYPE_CHECKING:  # (hidden from type checkers: attribute typos stay errors)

        def __getattr__(self, name: str) -> Any:
            return _deferred_field(self, name)

    def __getstate__(self) -> dict[str, Any]:
        return _full_state(self)

    def semaphore_levels(self, sem: str) -> tuple[Sequence[float], Sequence[int]] | None:
        """``(times, levels)`` of ``sem`` as the scheduler recorded them (see
        :class:`SemaphoreLevels`); ``None`` when not recorded, or recorded for other start / end
        times (a copy made with ``dataclasses.replace`` and new times)."""
        rec = self.recorded_levels
        if rec is None or rec.for_start is not self.start_us or rec.for_end is not self.end_us:
            return None
        return rec.curves.get(sem)

    @property
    def makespan_us(self) -> float:
        own = self.__dict__
        if "end_us" not in own and _DEFERRED in own:
            # the ends in the order of the map's values: the same max (ties, NaNs) without it
            return max(own[_DEFERRED].end_values(), default=0.0)
        return max(self.end_us.values(), default=0.0)

    @property
    def binding(self) -> Mapping[str, str]:
        """``event -> "core0.AIC"`` (its resources joined with ``"+"``), computed on access."""
        return _Joined(self.resources)

    def __len__(self) -> int:
        own = self.__dict__
        if "start_us" not in own and _DEFERRED in own:
            return int(own[_DEFERRED].size())
        return len(self.start_us)

    def fingerprint(self) -> str:
        """A stable hash of every event's start, end and binding, rounded to 1e-6 µs.

        Independent of dict order, of the process (no use of ``hash()``) and of the policy name.
        """
        names = sorted(self.start_us)
        n = len(names)
        times = list(map(self.start_us.__getitem__, names))
        times += map(self.end_us.__getitem__, names)
        # each distinct time formatted once (a schedule repeats its times: 1.1k distinct among the
        # 11k starts and ends of scenario_basic). "{:.6f}" rounds the exact binary value to 6
        # decimals as round(x, 6) does, and the double nearest that decimal prints as it, so
        # _fmt's text is the plain format's, except for a zero from a negative time
        # ("-0.000000"), which _fmt prints without its sign: such a time takes _fmt, and so does
        # any time that is not a plain float or int (numpy's round is not Python's)
        distinct = dict.fromkeys(times)  # (equal values of different types count once)
        six = list(map(_SIX.format, distinct))
        if _NEG_ZERO in six or not _PLAIN.issuperset(map(type, times)):
            texts = list(map(_fmt, times))
        else:
            text_of = dict(zip(distinct, six))
            texts = list(map(text_of.__getitem__, times))
        res = self.resources
        bindings = map("+".join, map(res.get, names, repeat((), n)))
        # one line per event, "name\tstart\tend\tbinding\n", hashed as one stream
        text = "\n".join(map("\t".join, zip(names, texts[:n], texts[n:], bindings)))
        if n:
            text += "\n"
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def trace(self) -> list[tuple[str, float, float, str]]:
        """``[(event, start_us, end_us, binding), ...]`` sorted by start, then name."""
        rows = [
            (e, self.start_us[e], self.end_us[e], "+".join(self.resources.get(e, ())))
            for e in self.start_us
        ]
        rows.sort(key=lambda r: (r[1], r[0]))
        return rows


_FIELD_NAMES: dict[type, frozenset[str]] = {
    cls: frozenset(f.name for f in fields(cls)) for cls in (Schedule, SemaphoreLevels)
}
"""The fields a maker may make, per class (any other missing attribute is an ``AttributeError``)."""
