"""Stage timelines: what a kernel developer measures, compared with what a schedule predicts.

A *stage timeline* is the coarse picture a profiler run gives (and the one the kernel's own
pipeline figures show): one row per stage and unit (an expert, a segment, or ``*`` for the whole
stage) with the group of cores that ran it and a start and end time in µs from kernel start::

    stage,unit,group,start_us,end_us
    front,*,AIV 0-47,0,260
    dispatch,e0,AIV 0-47,256,318

Files are CSV (the header above, ``# key: value`` comment lines before it carry metadata) or JSON
(``{"meta": {...}, "rows": [{"stage": ..., "unit": ..., "group": ..., "start_us": ...,
"end_us": ...}]}``). Metadata keys are free text; two have a meaning here:

* ``kernel_us``: the measured kernel time (default: the latest end of any row);
* ``units``: ``envelopes`` (default: each unit's row spans its work on every core, so
  neighbouring units may overlap) or ``boundaries`` (the figure draws units back to back: a unit
  "starts" where the previous one ended, so only unit *ends* are comparable).

This module is generic: stage and unit names are data. :func:`timeline_from_schedule` builds a
timeline from any schedule given how to read an event's labels, and :func:`compare_timelines`
compares two timelines stage by stage and unit by unit. Reading a bad file raises one
:class:`~moeopt.errors.InputError` naming the file, the line and the field.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moeopt.core.events import EventGraph
from moeopt.core.schedule import Schedule
from moeopt.errors import InputError
from moeopt.fields import read_input_text

WHOLE = "*"
"""The unit of a row that stands for the whole stage."""

COLUMNS = ("stage", "unit", "group", "start_us", "end_us")
UNIT_KINDS = ("envelopes", "boundaries")


@dataclass(frozen=True)
class TimelineRow:
    """One bar of a timeline: ``stage`` / ``unit`` ran on ``group`` from ``start_us`` to ``end_us``."""

    stage: str
    unit: str
    group: str
    start_us: float
    end_us: float


@dataclass(frozen=True)
class Timeline:
    """Rows in file order plus metadata (``source`` names where they came from)."""

    rows: tuple[TimelineRow, ...]
    meta: Mapping[str, str] = field(default_factory=dict)
    source: str = ""

    def stages(self) -> list[str]:
        """Stage names in the order they first appear."""
        return list(dict.fromkeys(r.stage for r in self.rows))

    def stage_span(self, stage: str) -> tuple[float, float] | None:
        """(start, end) of ``stage``: its ``*`` row when it has one, else the envelope of its rows."""
        rows = [r for r in self.rows if r.stage == stage]
        if not rows:
            return None
        whole = [r for r in rows if r.unit == WHOLE]
        if whole:
            return whole[0].start_us, whole[0].end_us
        return min(r.start_us for r in rows), max(r.end_us for r in rows)

    def units(self, stage: str) -> dict[str, tuple[float, float]]:
        """unit -> (start, end) of ``stage``'s unit rows (the ``*`` row excluded)."""
        return {r.unit: (r.start_us, r.end_us) for r in self.rows if r.stage == stage and r.unit != WHOLE}

    @property
    def start_us(self) -> float:
        return min((r.start_us for r in self.rows), default=0.0)

    @property
    def end_us(self) -> float:
        return max((r.end_us for r in self.rows), default=0.0)

    @property
    def kernel_us(self) -> float:
        """The kernel time: metadata ``kernel_us`` when given, else the latest end."""
        text = self.meta.get("kernel_us")
        return float(text) if text not in (None, "") else self.end_us

    @property
    def span_us(self) -> float:
        """The time the timeline covers: from its first start to the kernel time."""
        return max(self.kernel_us, self.end_us) - min(0.0, self.start_us)

    @property
    def unit_kind(self) -> str:
        return self.meta.get("units", "envelopes")


# --------------------------------------------------------------------------- reading
def read_timeline(path: str | Path) -> Timeline:
    """Read a CSV or JSON stage timeline (chosen by the suffix; ``.json`` = JSON, else CSV)."""
    p = Path(path)
    text = read_input_text(p, "timeline file")
    if p.suffix.lower() == ".json":
        return parse_timeline_json(text, str(p))
    return parse_timeline_csv(text, str(p))


def parse_timeline_csv(text: str, where: str = "timeline") -> Timeline:
    """A timeline from CSV text (see the module docstring for the layout)."""
    meta: dict[str, str] = {}
    body: list[tuple[int, str]] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            key, colon, value = stripped[1:].partition(":")
            if colon and not body and key.strip() and " " not in key.strip():
                meta[key.strip()] = value.strip()
            continue
        body.append((lineno, line))
    if not body:
        raise InputError(f"{where}: no header line {','.join(COLUMNS)}")
    header_line, header = body[0]
    cols = [c.strip() for c in next(csv.reader([header]))]
    missing = [c for c in COLUMNS if c not in cols]
    if missing:
        raise InputError(
            f"{where}:{header_line}: header {header.strip()!r} lacks {', '.join(missing)}; "
            f"expected the columns {','.join(COLUMNS)}"
        )
    rows = []
    for lineno, line in body[1:]:
        values = next(csv.reader(io.StringIO(line)))
        if len(values) != len(cols):
            raise InputError(f"{where}:{lineno}: {len(values)} fields, the header has {len(cols)}")
        rec = dict(zip(cols, (v.strip() for v in values), strict=True))
        rows.append(_row(rec, f"{where}:{lineno}"))
    return check_timeline(Timeline(tuple(rows), meta, where), where)


def parse_timeline_json(text: str, where: str = "timeline") -> Timeline:
    """A timeline from JSON text: ``{"meta": {...}, "rows": [...]}`` or a bare list of rows."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: not valid JSON: {exc.msg} (line {exc.lineno})") from None
    meta: dict[str, str] = {}
    if isinstance(data, dict):
        raw_meta = data.get("meta", {})
        if not isinstance(raw_meta, dict):
            raise InputError(f"{where}: meta = {raw_meta!r}: must be a table of key: value")
        meta = {str(k): str(v) for k, v in raw_meta.items()}
        data = data.get("rows")
    if not isinstance(data, list):
        raise InputError(
            f"{where}: expected a list of rows (or a table with 'rows'), got {type(data).__name__}"
        )
    rows = []
    for i, rec in enumerate(data):
        if not isinstance(rec, dict):
            raise InputError(f"{where}: rows[{i}] = {rec!r}: must be a table with {', '.join(COLUMNS)}")
        rows.append(_row({k: str(v) if v is not None else "" for k, v in rec.items()}, f"{where}: rows[{i}]"))
    return check_timeline(Timeline(tuple(rows), meta, where), where)


def _row(rec: Mapping[str, str], where: str) -> TimelineRow:
    stage = rec.get("stage", "")
    if not stage:
        raise InputError(f"{where}: stage is empty: every row names its stage")
    times = []
    for key in ("start_us", "end_us"):
        text = rec.get(key, "")
        try:
            value = float(text)
        except ValueError:
            raise InputError(f"{where}: {key} = {text!r}: must be a number of µs") from None
        if not math.isfinite(value):
            raise InputError(f"{where}: {key} = {text!r}: must be a finite number of µs")
        times.append(value)
    start, end = times
    if end < start:
        raise InputError(f"{where}: end_us = {end:g} is before start_us = {start:g}")
    return TimelineRow(stage, rec.get("unit", "") or WHOLE, rec.get("group", ""), start, end)


def check_timeline(t: Timeline, where: str) -> Timeline:
    if not t.rows:
        raise InputError(f"{where}: the timeline has no rows")
    kind = t.meta.get("units", "envelopes")
    if kind not in UNIT_KINDS:
        raise InputError(f"{where}: units = {kind!r}: allowed: {', '.join(UNIT_KINDS)}")
    if t.meta.get("kernel_us"):
        try:
            kernel = float(t.meta["kernel_us"])
        except ValueError:
            raise InputError(
                f"{where}: kernel_us = {t.meta['kernel_us']!r}: must be a number of µs"
            ) from None
        if not math.isfinite(kernel) or kernel <= 0:
            raise InputError(f"{where}: kernel_us = {t.meta['kernel_us']!r}: must be a number of µs > 0")
    seen: set[tuple[str, str]] = set()
    for r in t.rows:
        key = (r.stage, r.unit)
        if key in seen:
            raise InputError(f"{where}: stage {r.stage!r} unit {r.unit!r} appears twice")
        seen.add(key)
    return t


def write_timeline(path: str | Path, t: Timeline) -> Path:
    """Write ``t`` as CSV (``.json``: JSON)."""
    p = Path(path)
    if p.suffix.lower() == ".json":
        doc = {"meta": dict(t.meta), "rows": [r.__dict__ for r in t.rows]}
        text = json.dumps(doc, indent=1) + "\n"
    else:
        lines = [f"# {k}: {v}" for k, v in t.meta.items()]
        lines.append(",".join(COLUMNS))
        lines += [f"{r.stage},{r.unit},{r.group},{r.start_us:.3f},{r.end_us:.3f}" for r in t.rows]
        text = "\n".join(lines) + "\n"
    try:
        p.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{p}: cannot write: {exc.strerror or exc}") from None
    return p


# --------------------------------------------------------------------------- from a schedule
UnitOf = Callable[[Mapping[str, Any]], "tuple[str, str] | None"]
"""Maps an event's labels to its ``(stage, unit)`` in the timeline, or ``None`` to leave it out."""


def timeline_from_schedule(
    graph: EventGraph,
    s: Schedule,
    unit_of: UnitOf,
    *,
    groups: Mapping[str, str] | None = None,
    meta: Mapping[str, str] | None = None,
) -> Timeline:
    """The stage timeline of a schedule: per (stage, unit), the envelope of its events (earliest
    start, latest end), plus one ``*`` row per stage with the stage's envelope. Events with zero
    duration are left out (flags); ``unit_of`` decides the rest. Stages appear in the order of
    their first start."""
    spans: dict[tuple[str, str], list[float]] = {}
    events = graph.events
    for name, start in s.start_us.items():
        end = s.end_us[name]
        if end <= start:
            continue
        key = unit_of(events[name].labels)
        if key is None:
            continue
        sp = spans.get(key)
        if sp is None:
            spans[key] = [start, end]
        else:
            sp[0] = min(sp[0], start)
            sp[1] = max(sp[1], end)
    stage_span: dict[str, list[float]] = {}
    for (stage, _unit), (a, b) in spans.items():
        sp = stage_span.setdefault(stage, [a, b])
        sp[0] = min(sp[0], a)
        sp[1] = max(sp[1], b)
    grp = groups or {}
    rows: list[TimelineRow] = []
    for stage in sorted(stage_span, key=lambda st: (stage_span[st][0], st)):
        a, b = stage_span[stage]
        rows.append(TimelineRow(stage, WHOLE, grp.get(stage, ""), a, b))
        units = sorted(
            ((u, sp) for (st, u), sp in spans.items() if st == stage and u != WHOLE),
            key=lambda x: (x[1][0], x[0]),
        )
        rows += [TimelineRow(stage, u, grp.get(stage, ""), a, b) for u, (a, b) in units]
    return Timeline(tuple(rows), dict(meta or {}), "schedule")


# --------------------------------------------------------------------------- comparison
@dataclass(frozen=True)
class SpanDiff:
    """Predicted against measured (start, end) of one stage or unit; differences predicted − measured."""

    stage: str
    unit: str
    predicted: tuple[float, float] | None
    measured: tuple[float, float] | None

    @property
    def start_diff_us(self) -> float | None:
        if self.predicted is None or self.measured is None:
            return None
        return self.predicted[0] - self.measured[0]

    @property
    def end_diff_us(self) -> float | None:
        if self.predicted is None or self.measured is None:
            return None
        return self.predicted[1] - self.measured[1]


@dataclass(frozen=True)
class TimelineComparison:
    """Stage by stage and unit by unit; errors are also given as a share of the measured span."""

    stages: tuple[SpanDiff, ...]
    units: tuple[SpanDiff, ...]
    predicted_kernel_us: float
    measured_kernel_us: float
    span_us: float
    unit_kind: str
    measured_source: str = ""

    @property
    def total_error(self) -> float:
        """predicted / measured kernel time − 1."""
        return self.predicted_kernel_us / self.measured_kernel_us - 1.0

    def stage_error(self, stage: str) -> float:
        """max(|start diff|, |end diff|) of ``stage`` as a share of the measured span (inf when a
        side lacks the stage)."""
        for d in self.stages:
            if d.stage == stage:
                if d.start_diff_us is None or d.end_diff_us is None:
                    return math.inf
                return max(abs(d.start_diff_us), abs(d.end_diff_us)) / self.span_us
        raise KeyError(stage)

    @property
    def worst_stage_error(self) -> float:
        """The largest :meth:`stage_error` over the stages both sides have."""
        errs = [self.stage_error(d.stage) for d in self.stages if d.predicted and d.measured]
        return max(errs, default=0.0)

    def format(self, title: str = "") -> str:
        out = [title] if title else []
        span = self.span_us
        head = (
            f"{'stage':<12} {'unit':<6} {'predicted':>17} {'measured':>17} "
            f"{'Δstart':>8} {'Δend':>8} {'of span':>8}"
        )
        out.append(head)
        out.append("-" * len(head))
        for d in self.stages:
            out.append(_line(d, span))
        if self.units:
            out.append("")
            out.append(
                "per unit"
                + (
                    " (measured bars are back to back: compare ends)"
                    if self.unit_kind == "boundaries"
                    else ""
                )
            )
            out.append(head)
            out.append("-" * len(head))
            for d in self.units:
                out.append(_line(d, span, ends_only=self.unit_kind == "boundaries"))
        out.append("")
        out.append(
            f"kernel time: predicted {self.predicted_kernel_us:.1f} µs, "
            f"measured {self.measured_kernel_us:.1f} µs "
            f"({100 * self.total_error:+.1f}%); worst stage error {100 * self.worst_stage_error:.1f}% of the "
            f"{span:.0f} µs span"
        )
        return "\n".join(out)

    def to_dict(self) -> dict[str, Any]:
        def one(d: SpanDiff) -> dict[str, Any]:
            return {
                "stage": d.stage,
                "unit": d.unit,
                "predicted": list(d.predicted) if d.predicted else None,
                "measured": list(d.measured) if d.measured else None,
                "start_diff_us": d.start_diff_us,
                "end_diff_us": d.end_diff_us,
            }

        return {
            "measured_source": self.measured_source,
            "predicted_kernel_us": self.predicted_kernel_us,
            "measured_kernel_us": self.measured_kernel_us,
            "total_error": self.total_error,
            "span_us": self.span_us,
            "worst_stage_error": self.worst_stage_error,
            "unit_kind": self.unit_kind,
            "stages": [one(d) for d in self.stages],
            "units": [one(d) for d in self.units],
        }


def _fmt_span(sp: tuple[float, float] | None) -> str:
    return "-" if sp is None else f"{sp[0]:7.0f}-{sp[1]:<7.0f}"


def _fmt_diff(x: float | None) -> str:
    return "-" if x is None else f"{x:+8.0f}"


def _line(d: SpanDiff, span: float, ends_only: bool = False) -> str:
    ds = None if ends_only else d.start_diff_us
    de = d.end_diff_us
    parts = [abs(x) for x in (ds, de) if x is not None]
    share = f"{100 * max(parts) / span:7.1f}%" if parts and span > 0 else "-"
    return (
        f"{d.stage:<12} {d.unit:<6} {_fmt_span(d.predicted):>17} {_fmt_span(d.measured):>17} "
        f"{_fmt_diff(ds):>8} {_fmt_diff(de):>8} {share:>8}"
    )


def compare_timelines(
    predicted: Timeline,
    measured: Timeline,
    *,
    predicted_kernel_us: float | None = None,
    stages: Sequence[str] | None = None,
) -> TimelineComparison:
    """Compare ``predicted`` with ``measured``: every stage of either side (``stages`` picks and
    orders them), and every unit both sides name. ``predicted_kernel_us`` defaults to the
    predicted timeline's kernel time."""
    names = list(stages) if stages is not None else _union(measured.stages(), predicted.stages())
    stage_rows = tuple(SpanDiff(st, WHOLE, predicted.stage_span(st), measured.stage_span(st)) for st in names)
    unit_rows: list[SpanDiff] = []
    for st in names:
        pu, mu = predicted.units(st), measured.units(st)
        unit_rows += [SpanDiff(st, u, pu[u], mu[u]) for u in mu if u in pu]
    return TimelineComparison(
        stages=stage_rows,
        units=tuple(unit_rows),
        predicted_kernel_us=predicted.kernel_us if predicted_kernel_us is None else predicted_kernel_us,
        measured_kernel_us=measured.kernel_us,
        span_us=measured.span_us,
        unit_kind=measured.unit_kind,
        measured_source=measured.source,
    )


def _union(first: Iterable[str], second: Iterable[str]) -> list[str]:
    return list(dict.fromkeys([*first, *second]))
