"""Where a schedule leaves the binding capacity unused: the other half of a certificate that is not tight.

A capacity bound (:mod:`moeopt.exact.bounds`: energy, windows, packing, heads and tails raised
by a capacity) says, in essence, that the work on one capacity set needs at least its energy
divided by the capacity, after its earliest possible start and before its latest possible end.
When the best schedule is longer than the bound, that schedule leaves the capacity unused
somewhere between its first and its last use. Where it does tells a developer what could close
the gap: a better order if the unused time sits where work was available, a stronger bound if
the graph forces it (e.g. a ramp while the first inputs arrive).

:func:`capacity_use` measures, for the capacity set a bound names (``semaphore:S``,
``resource:R``, ``pool:P``, ``pools:P+Q``, or any of them behind ``joint:``), its use in a given
schedule, as the independent validator reads a schedule:

* a semaphore's units in use at ``t`` are its capacity minus its free units: each event takes
  its acquires at its start and gives its releases back at its end;
* a resource or a set of pool members is in use by each event bound to one of its members
  (``Schedule.resources``), one unit per member it occupies.

From the first instant anything is in use to the last, the unused capacity is
``∫ (C − u(t)) / C dt`` (µs of the whole capacity), reported in total and for the ``PARTS``
equal parts of that span where most of it lies. Generic: it reads the graph's declarations and
the schedule only, and knows no stage names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from moeopt.core.events import EventGraph
from moeopt.core.schedule import Schedule
from moeopt.exact.result import ExactResult

PARTS = 10
"""The span of use is cut into this many equal parts to say where the unused capacity lies."""
SHOWN = 3
"""Parts named in the one-line text (those with the most unused capacity)."""


@dataclass(frozen=True)
class CapacityUse:
    """One capacity set's use in one schedule (see the module docstring); times in µs."""

    source: str
    capacity: int
    first_us: float
    last_us: float
    work_us: float
    """``∫ u(t) dt / C``: the work done, in µs of the whole capacity"""
    unused_us: float
    """``(last − first) − work``: the whole capacity's time left unused inside the span"""
    parts: tuple[tuple[float, float, float], ...]
    """``(from, to, unused µs)`` for each of the :data:`PARTS` equal parts of the span"""

    def text(self) -> str:
        """One line: the span, the work and the unused time, and the parts holding most of it."""
        top = sorted(self.parts, key=lambda p: (-p[2], p[0]))[:SHOWN]
        # (a part whose unused time rounds to 0.0 at the line's precision is not named)
        where = ", ".join(f"{a:.1f}-{b:.1f}: {u:.1f}" for a, b, u in sorted(top) if round(u, 1) > 0)
        return (
            f"in the best schedule {self.source} (capacity {self.capacity}) is in use from "
            f"{self.first_us:.1f} to {self.last_us:.1f} µs: {self.work_us:.1f} µs of work at full "
            f"capacity, {self.unused_us:.1f} µs of its capacity unused in between"
            + (f" (most in {where} µs)" if where else "")
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "source": self.source,
            "capacity": self.capacity,
            "first_us": self.first_us,
            "last_us": self.last_us,
            "work_us": self.work_us,
            "unused_us": self.unused_us,
            "parts": [list(p) for p in self.parts],
        }


CAPACITY_KINDS = ("semaphore", "resource", "pool", "pools")
"""Bound source prefixes that name one capacity set (also behind ``joint:``)."""


def _kind_and_name(source: str) -> tuple[str, str]:
    """``("semaphore", "hbm")`` for ``semaphore:hbm`` or ``joint:semaphore:hbm`` (a joint bound
    names the set it raised); the kind is not one of :data:`CAPACITY_KINDS` for other sources."""
    kind, _, name = source.removeprefix("joint:").partition(":")
    return kind, name


def capacity_source(bound_source: str, bounds_us: Mapping[str, float]) -> str | None:
    """The capacity set whose use explains a certificate: the winning bound's own when it names
    one; else (CP-SAT's bound, the longest path, a caller's limit) the capacity set with the
    highest bound of its own among ``bounds_us`` (ties: the first in name order); ``None`` when
    no bound names a capacity set."""
    if _kind_and_name(bound_source)[0] in CAPACITY_KINDS:
        return bound_source
    own = sorted((-v, src) for src, v in bounds_us.items() if _kind_and_name(src)[0] in CAPACITY_KINDS)
    return own[0][1] if own else None


def certificate_use(graph: EventGraph, exact: ExactResult, schedule: Schedule | None) -> CapacityUse | None:
    """What the gap reports print under a certificate that is not tight: the use in ``schedule``
    (the best one) of :func:`capacity_source`'s capacity set; ``None`` when ``exact`` is proven
    optimal, without a schedule, or when no bound names a capacity set."""
    if exact.proven_optimal or schedule is None:
        return None
    source = capacity_source(exact.bound_source, exact.bounds_us)
    return None if source is None else capacity_use(graph, schedule, source)


def capacity_use(graph: EventGraph, schedule: Schedule, source: str) -> CapacityUse | None:
    """The use of the capacity set named by the bound source ``source`` in ``schedule`` (a
    schedule of ``graph``); ``None`` for a source that names no capacity set of the graph
    (the longest path, CP-SAT's own bound, a caller's limit) or when nothing uses it."""
    kind, name = _kind_and_name(source)
    source = f"{kind}:{name}"  # (a joint bound's set, by its own name)
    changes: list[tuple[float, int]] = []  # (time, change of the units in use)
    start, end = schedule.start_us, schedule.end_us
    if kind == "semaphore":
        cap = graph.semaphores.get(name)
        if cap is None or cap <= 0:
            return None
        for e, ev in graph.events.items():
            take, back = ev.acquires.get(name, 0), ev.releases.get(name, 0)
            if take:
                changes.append((start[e], take))
            if back:
                changes.append((end[e], -back))
    elif kind in CAPACITY_KINDS:
        if kind == "resource":
            members = {name}
        else:
            roles = name.split("+") if kind == "pools" else [name]
            if any(r not in graph.pools for r in roles):
                return None
            members = {m for r in roles for m in graph.pools[r]}
        cap = len(members)
        for e, bound in schedule.resources.items():
            q = sum(1 for r in bound if r in members)
            if q and end[e] > start[e]:
                changes.append((start[e], q))
                changes.append((end[e], -q))
    else:
        return None
    return _use(source, cap, changes)


def _use(source: str, cap: int, changes: Sequence[tuple[float, int]]) -> CapacityUse | None:
    """:class:`CapacityUse` from the changes of the units in use (all at one instant applied
    together, as the validator applies them)."""
    if not changes:
        return None
    steps: dict[float, int] = {}
    for t, d in changes:
        steps[t] = steps.get(t, 0) + d
    times = sorted(steps)
    # the piecewise-constant use: level[k] over [times[k], times[k + 1])
    level, levels = 0, []
    for t in times:
        level += steps[t]
        levels.append(level)
    used = [k for k, lv in enumerate(levels[:-1]) if lv > 0]
    if not used:
        return None
    first, last = times[used[0]], times[used[-1] + 1]
    span = last - first
    work = sum(levels[k] * (times[k + 1] - times[k]) for k in range(len(times) - 1)) / cap
    width = span / PARTS
    parts = []
    for p in range(PARTS):
        a = first + p * width
        b = last if p == PARTS - 1 else first + (p + 1) * width
        done = 0.0
        for k in range(len(times) - 1):
            lo, hi = max(a, times[k]), min(b, times[k + 1])
            if hi > lo:
                done += levels[k] * (hi - lo)
        parts.append((a, b, max(0.0, (b - a) - done / cap)))
    return CapacityUse(source, cap, first, last, work, max(0.0, span - work), tuple(parts))
