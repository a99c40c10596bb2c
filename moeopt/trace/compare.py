"""Structural comparison of a predicted schedule (or trace) against a measured trace.

Per stage (the events' label, e.g. ``stage``), :func:`compare_traces` reports:

* **counts**: events predicted vs measured, and how many carry the same name on both sides
  (``matched``; the rest are listed, a few names each);
* **order**: of the matched events, the largest share that appear in the same relative order
  (by start time) on both sides — 100 % means the same order; computed as the longest
  increasing subsequence of the measured ranks taken in predicted order;
* **per-core assignment**: matched events on exactly the same resources; and, independent of
  names, the summed per-resource difference in the number of events of the stage
  (``core_count_diff``: 0 when every core holds as many as predicted);
* **durations**: measured / predicted total duration of the stage (over matched events when
  names match, over all events otherwise), and the smallest / largest per-event ratio;
* **start shift**: the largest ``|start measured - start predicted|`` over matched events.

Two traces are :attr:`~TraceComparison.identical` when every stage has the same events, in the
same order, on the same resources, with starts and durations equal within ``tolerance_us``.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from moeopt.core.events import EventGraph
from moeopt.core.schedule import Schedule
from moeopt.errors import InputError
from moeopt.trace.chrome import Trace, TraceEvent, trace_from_schedule

NO_LABEL = "(none)"


@dataclass
class StageComparison:
    stage: str
    predicted: int
    measured: int
    matched: int
    in_order: int  # matched events in the same relative order on both sides
    same_resources: int  # matched events on exactly the same resources
    core_count_diff: int  # sum over resources of |events predicted - events measured| (name-free)
    duration_ratio: float | None  # measured / predicted total duration
    ratio_min: float | None  # per matched event (events with a predicted duration > 0)
    ratio_max: float | None
    max_start_shift_us: float | None
    max_duration_diff_us: float | None
    only_predicted: list[str] = field(default_factory=list)  # a few names
    only_measured: list[str] = field(default_factory=list)

    @property
    def order_share(self) -> float | None:
        return None if self.matched == 0 else self.in_order / self.matched

    def identical(self, tolerance_us: float) -> bool:
        return (
            self.predicted == self.measured == self.matched
            and self.in_order == self.matched
            and self.same_resources == self.matched
            and self.core_count_diff == 0
            and (self.max_start_shift_us or 0.0) <= tolerance_us
            and (self.max_duration_diff_us or 0.0) <= tolerance_us
        )


@dataclass
class TraceComparison:
    stages: list[StageComparison]
    predicted_makespan_us: float
    measured_makespan_us: float
    tolerance_us: float
    label_key: str
    notes: list[str] = field(default_factory=list)  # from reading the measured trace

    @property
    def identical(self) -> bool:
        return all(s.identical(self.tolerance_us) for s in self.stages)

    def stage(self, name: str) -> StageComparison:
        for s in self.stages:
            if s.stage == name:
                return s
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "identical": self.identical,
            "label_key": self.label_key,
            "tolerance_us": self.tolerance_us,
            "predicted_makespan_us": self.predicted_makespan_us,
            "measured_makespan_us": self.measured_makespan_us,
            "notes": list(self.notes),
            "stages": [{**asdict(s), "order_share": s.order_share} for s in self.stages],
        }

    def format(self) -> str:
        """A fixed-width table, one row per stage, and a verdict line."""
        head = (
            f"{self.label_key:<12} {'pred':>6} {'meas':>6} {'matched':>7} {'order':>7} {'same core':>9} "
            f"{'core diff':>9} {'dur m/p':>8} {'per-event m/p':>17} {'max|dstart|':>11}"
        )
        lines = [head]
        for s in self.stages:
            share = "-" if s.order_share is None else f"{100 * s.order_share:.1f}%"
            same = "-" if s.matched == 0 else f"{100 * s.same_resources / s.matched:.1f}%"
            ratio = "-" if s.duration_ratio is None else f"{s.duration_ratio:.4f}"
            per = "-" if s.ratio_min is None else f"{s.ratio_min:.3f}..{s.ratio_max:.3f}"
            shift = "-" if s.max_start_shift_us is None else f"{s.max_start_shift_us:.3f}"
            lines.append(
                f"{s.stage:<12} {s.predicted:>6} {s.measured:>6} {s.matched:>7} {share:>7} {same:>9} "
                f"{s.core_count_diff:>9} {ratio:>8} {per:>17} {shift:>11}"
            )
            if s.only_predicted:
                lines.append(f"    only predicted: {', '.join(s.only_predicted)}")
            if s.only_measured:
                lines.append(f"    only measured:  {', '.join(s.only_measured)}")
        lines.append(
            f"makespan predicted {self.predicted_makespan_us:.3f} µs, "
            f"measured {self.measured_makespan_us:.3f} µs"
        )
        for n in self.notes:
            lines.append(f"note: {n}")
        lines.append(
            "IDENTICAL (every stage: same events, order, resources, times)"
            if self.identical
            else "DIFFERENT (see the rows above)"
        )
        return "\n".join(lines)


def _lis(seq: Sequence[int]) -> int:
    tails: list[int] = []
    for x in seq:
        k = bisect_left(tails, x)
        if k == len(tails):
            tails.append(x)
        else:
            tails[k] = x
    return len(tails)


def _by_stage(tr: Trace) -> dict[str, list[TraceEvent]]:
    out: dict[str, list[TraceEvent]] = {}
    for ev in tr.events:
        out.setdefault(ev.label if ev.label is not None else NO_LABEL, []).append(ev)
    return out


def _sample(names: list[str], n: int = 5) -> list[str]:
    names = sorted(names)
    return names[:n] + ([f"... {len(names) - n} more"] if len(names) > n else [])


def _compare_stage(stage: str, pred: list[TraceEvent], meas: list[TraceEvent]) -> StageComparison:
    pmap = {e.name: e for e in pred}
    mmap = {e.name: e for e in meas}
    common = [n for n in pmap if n in mmap]
    # order: matched events by (start, name) on each side
    p_order = sorted(common, key=lambda n: (pmap[n].start_us, n))
    m_rank = {n: k for k, n in enumerate(sorted(common, key=lambda n: (mmap[n].start_us, n)))}
    in_order = _lis([m_rank[n] for n in p_order])
    same_res = sum(1 for n in common if pmap[n].resources == mmap[n].resources)
    pc: Counter[str] = Counter(r for e in pred for r in e.resources)
    mc: Counter[str] = Counter(r for e in meas for r in e.resources)
    core_diff = sum(abs(pc[r] - mc[r]) for r in set(pc) | set(mc))
    if common:
        psum = sum(pmap[n].duration_us for n in common)
        msum = sum(mmap[n].duration_us for n in common)
        ratios = [mmap[n].duration_us / pmap[n].duration_us for n in common if pmap[n].duration_us > 0]
        shift: float | None = max(abs(mmap[n].start_us - pmap[n].start_us) for n in common)
        ddiff: float | None = max(abs(mmap[n].duration_us - pmap[n].duration_us) for n in common)
    else:
        psum = sum(e.duration_us for e in pred)
        msum = sum(e.duration_us for e in meas)
        ratios = []
        shift = ddiff = None
    ratio = msum / psum if psum > 0 and meas else None
    return StageComparison(
        stage=stage,
        predicted=len(pred),
        measured=len(meas),
        matched=len(common),
        in_order=in_order,
        same_resources=same_res,
        core_count_diff=core_diff,
        duration_ratio=ratio,
        ratio_min=min(ratios) if ratios else None,
        ratio_max=max(ratios) if ratios else None,
        max_start_shift_us=shift,
        max_duration_diff_us=ddiff,
        only_predicted=_sample([n for n in pmap if n not in mmap]),
        only_measured=_sample([n for n in mmap if n not in pmap]),
    )


def compare_traces(predicted: Trace, measured: Trace, *, tolerance_us: float = 1e-6) -> TraceComparison:
    """Compare two traces stage by stage (see the module docstring)."""
    if not (isinstance(tolerance_us, (int, float)) and math.isfinite(tolerance_us) and tolerance_us >= 0):
        raise InputError(f"trace comparison: tolerance_us must be a finite number >= 0, got {tolerance_us!r}")
    ps, ms = _by_stage(predicted), _by_stage(measured)
    order = sorted(
        set(ps) | set(ms),
        key=lambda st: (min((e.start_us for e in ps.get(st, []) or ms.get(st, [])), default=0.0), st),
    )
    return TraceComparison(
        stages=[_compare_stage(st, ps.get(st, []), ms.get(st, [])) for st in order],
        predicted_makespan_us=predicted.makespan_us,
        measured_makespan_us=measured.makespan_us,
        tolerance_us=float(tolerance_us),
        label_key=predicted.label_key,
        notes=list(measured.notes),
    )


def compare_schedule_to_trace(
    schedule: Schedule,
    graph: EventGraph | None,
    measured: Trace,
    *,
    label_key: str | None = None,
    tolerance_us: float = 1e-6,
) -> TraceComparison:
    """Compare a predicted schedule of ``graph`` against a measured trace.

    ``label_key`` defaults to the measured trace's (from its header, else ``"stage"``).
    """
    key = label_key or measured.label_key
    return compare_traces(
        trace_from_schedule(schedule, graph, label_key=key), measured, tolerance_us=tolerance_us
    )
