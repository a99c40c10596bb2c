"""A self-contained HTML Gantt chart of one or several :class:`~moeopt.core.schedule.Schedule` s.

Generic: it knows resources (``<site>.<role>``), event labels and waits, nothing of any
operator. The page needs no network at view time: data, CSS and JavaScript are inlined and the
bars are drawn on a ``<canvas>`` (tens of thousands of events draw in milliseconds; the page
holds one compact JSON record per event, about 60 bytes each).

API::

    from moeopt.viz import GanttTrack, gantt_page, write_gantt

    html = gantt_page(
        [GanttTrack("greedy", s_greedy, graph), GanttTrack("CP-SAT", s_exact, graph)],
        color_by="stage",          # a label key, or a callable (event name, Event | None) -> str,
                                   # or None (colour by the resource role)
        row_order="role",          # "role": all AIC rows, then all AIV0 rows ...; "site": per core
        title="rank 0",
    )
    write_gantt("gantt.html", tracks, color_by="stage")   # the same, written to a file

* One row per concrete resource (``core3.AIC``); an event holding several resources has a bar on
  each of its rows; events without resources are not drawn (counted in the track header).
* Several tracks stack one above the other on one shared time axis (zoom and pan move all).
* Hover text per bar: event name, label, resources, start / end / duration, and the wait
  attribution the scheduler recorded (:class:`~moeopt.core.schedule.Wait`): when the event was
  ready and after which predecessor, how long a resource and a semaphore then held it back, and
  which of them finally decided the start. A "show waits" switch draws each queued interval
  (ready -> start) as a thin line before the bar.
* In the page: mouse wheel zooms around the pointer, drag pans, double-click resets; the row
  order can be switched between "by role" and "by core". ``page.html#event=NAME`` opens with
  that event's hover text shown and its bars outlined (a link to one event).

To embed charts into a larger page (as :mod:`moeopt.trust.report` does), put
:func:`page_head` first, any number of :func:`gantt_fragment` outputs in the body, and
:data:`GANTT_SCRIPT` once before ``</body>`` (:func:`page_tail` does that).
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moeopt.core.events import Event, EventGraph, split_resource
from moeopt.core.schedule import Schedule, Wait
from moeopt.errors import InputError
from moeopt.viz._assets import GANTT_CSS, GANTT_JS

LabelFn = Callable[[str, "Event | None"], str]
ColorBy = str | LabelFn | None

ROW_ORDERS = ("role", "site")

# a categorical palette (colour-blind-safe first eight, then more); labels beyond it get a hue
PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#e15759",
    "#76b7b2",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
    "#1f77b4",
    "#aec7e8",
)

_WAIT_KINDS = ("none", "dependency", "resource", "semaphore", "not recorded")
_NOT_RECORDED = 4


def _derived_wait(start: float, ev: Event | None, s: Schedule) -> tuple[float, str | None]:
    """(ready, predecessor) from the graph, for a schedule that recorded no waits (e.g. CP-SAT's)."""
    if ev is None or not ev.deps:
        return (start if ev is None else 0.0), None
    best = max(ev.deps.items(), key=lambda kv: (s.end_us[kv[0]] + kv[1], kv[0]))
    return s.end_us[best[0]] + best[1], best[0]


@dataclass(frozen=True)
class GanttTrack:
    """One schedule to draw: a title, the schedule and (for labels) the graph it schedules."""

    title: str
    schedule: Schedule
    graph: EventGraph | None = None


def _natural_key(text: str) -> tuple[Any, ...]:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text))


def _row_key(resource: str, order: str) -> tuple[Any, ...]:
    sr = split_resource(resource)
    site, role = sr if sr is not None else (resource, "")
    if order == "role":
        return (_natural_key(role), _natural_key(site))
    return (_natural_key(site), _natural_key(role))


def _labeller(color_by: ColorBy, graph: EventGraph | None) -> LabelFn:
    if color_by is None:

        def by_role(name: str, ev: Event | None) -> str:
            return ""  # filled in per bar from the resource role

        return by_role
    if isinstance(color_by, str):
        key = color_by

        def by_key(name: str, ev: Event | None) -> str:
            if ev is None:
                return "(no graph)"
            v = ev.labels.get(key)
            return "(none)" if v is None else str(v)

        return by_key
    if callable(color_by):
        return color_by
    raise InputError(
        f"gantt: color_by must be a label key (str), a callable (name, event) -> str or None, "
        f"got {color_by!r}"
    )


def _r(x: float) -> float:
    """Times rounded to 0.1 ns: the page stays small, hover text stays exact to the shown digits."""
    v = round(float(x), 4)
    return 0.0 if v == 0 else v


class _Strings:
    def __init__(self) -> None:
        self.items: list[str] = []
        self.index: dict[str, int] = {}

    def __call__(self, s: str | None) -> int:
        if s is None:
            return -1
        k = self.index.get(s)
        if k is None:
            k = self.index[s] = len(self.items)
            self.items.append(s)
        return k


def gantt_data(
    tracks: Sequence[GanttTrack], *, color_by: ColorBy = "stage", row_order: str = "role"
) -> dict[str, Any]:
    """The JSON document the page draws (exposed for tests and for other front ends).

    ``{"key", "labels", "colors", "legend", "strings", "tracks": [{"title", "makespan", "policy",
    "rows", "events", "bars", "hidden"}]}`` where ``events[i]`` is ``[name, start, end, label,
    ready, pred, resource, resource_wait, semaphore, semaphore_wait, kind, resources]`` (names as
    indices into ``strings``, -1 for none; ``kind`` indexes ``kinds``: ``none / dependency /
    resource / semaphore``, or ``not recorded`` for a schedule without waits, e.g. CP-SAT's, whose
    ready time and predecessor are then derived from the graph) and ``bars`` is the flat list
    ``[row, event, row, event, ...]``. ``legend[i]`` is how many events of label ``i`` one
    schedule has (one count per track when the tracks differ).
    """
    if not tracks:
        raise InputError("gantt: give at least one schedule to draw")
    if row_order not in ROW_ORDERS:
        raise InputError(f"gantt: row_order must be one of {', '.join(ROW_ORDERS)}, got {row_order!r}")
    strings = _Strings()
    label_index: dict[str, int] = {}
    label_first: dict[str, float] = {}
    out_tracks = []
    for ti, tr in enumerate(tracks):
        if not isinstance(tr, GanttTrack):
            raise InputError(f"gantt: track {ti} must be a GanttTrack, got {type(tr).__name__}")
        s, g = tr.schedule, tr.graph
        if g is not None:
            missing = [e for e in s.start_us if e not in g]
            if missing:
                raise InputError(
                    f"gantt: track {tr.title!r}: {len(missing)} scheduled event(s) are not in its graph, "
                    f"e.g. {missing[0]!r}"
                )
        label_of = _labeller(color_by, g)
        rows: dict[str, int] = {}
        events: list[list[Any]] = []
        bars: list[int] = []
        hidden = 0
        # events in start order: the page's per-row bar lists come out sorted for hit-testing
        for name, start, end, _binding in s.trace():
            res = s.resources.get(name, ())
            if not res:
                hidden += 1
                continue
            ev = g[name] if g is not None else None
            label = label_of(name, ev)
            if color_by is None:
                sr = split_resource(res[0])
                label = sr[1] if sr is not None else res[0]
            if not isinstance(label, str):
                label = str(label)
            li = label_index.get(label)
            if li is None:
                li = label_index[label] = len(label_index)
                label_first[label] = start
            else:
                label_first[label] = min(label_first[label], start)
            w = s.waits.get(name)
            if w is None:
                ready, pred = _derived_wait(start, ev, s)
                w = Wait(ready_us=ready, pred=pred)
                kind = _NOT_RECORDED
            else:
                kind = _WAIT_KINDS.index(w.kind)
            ei = len(events)
            events.append(
                [
                    strings(name),
                    _r(start),
                    _r(end),
                    li,
                    _r(w.ready_us),
                    strings(w.pred),
                    strings(w.resource),
                    _r(w.resource_wait_us),
                    strings(w.semaphore),
                    _r(w.semaphore_wait_us),
                    kind,
                    strings("+".join(res)),
                ]
            )
            for r in res:
                k = rows.get(r)
                if k is None:
                    k = rows[r] = len(rows)
                bars.append(k)
                bars.append(ei)
        # rows in the requested order; bars renumbered
        ordered = sorted(rows, key=lambda r: _row_key(r, row_order))
        renum = {rows[r]: i for i, r in enumerate(ordered)}
        for j in range(0, len(bars), 2):
            bars[j] = renum[bars[j]]
        out_tracks.append(
            {
                "title": str(tr.title),
                "policy": s.policy,
                "makespan": _r(s.makespan_us),
                "rows": ordered,
                "events": events,
                "bars": bars,
                "hidden": hidden,
            }
        )
    # colours in order of first appearance in time (pipeline order reads left to right)
    labels = sorted(label_index, key=lambda lb: label_index[lb])
    by_time = sorted(labels, key=lambda lb: (label_first[lb], label_index[lb]))
    colors = [""] * len(labels)
    for k, lb in enumerate(by_time):
        colors[label_index[lb]] = _color(k)
    return {
        "key": color_by if isinstance(color_by, str) else ("role" if color_by is None else "label"),
        "labels": labels,
        "colors": colors,
        "legend": _legend_counts(len(labels), out_tracks),
        "strings": strings.items,
        "kinds": list(_WAIT_KINDS),
        "rowOrder": row_order,
        "tracks": out_tracks,
    }


def _legend_counts(n_labels: int, tracks: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per label, its events in one schedule: ``"541"`` when every track has as many (the same graph
    scheduled several ways), else one count per track (``"12 / 15"``); never the sum of the charts."""
    per_track = []
    for t in tracks:
        c = [0] * n_labels
        for ev in t["events"]:
            c[ev[3]] += 1
        per_track.append(c)
    out = []
    for i in range(n_labels):
        counts = [c[i] for c in per_track]
        out.append(str(counts[0]) if len(set(counts)) == 1 else " / ".join(map(str, counts)))
    return out


def _color(k: int) -> str:
    if k < len(PALETTE):
        return PALETTE[k]
    hue = (k * 137.508) % 360  # golden-angle hues: neighbours stay apart
    return f"hsl({hue:.0f},55%,55%)"


def _json_for_script(doc: Any) -> str:
    """JSON safe inside ``<script>``: no ``<``, ``>`` or ``&`` can end the element early."""
    text = json.dumps(doc, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]*$")


def gantt_fragment(
    tracks: Sequence[GanttTrack],
    *,
    color_by: ColorBy = "stage",
    row_order: str = "role",
    chart_id: str = "gantt",
    row_height: int | None = None,
) -> str:
    """One chart as an HTML fragment (a ``<div>`` plus its JSON data); needs :data:`GANTT_SCRIPT`.

    ``row_height`` in CSS pixels (default: 14, smaller when there are many rows).
    """
    if not isinstance(chart_id, str) or not _ID.match(chart_id):
        raise InputError(f"gantt: chart_id must match [A-Za-z][A-Za-z0-9_-]*, got {chart_id!r}")
    if row_height is not None and (
        isinstance(row_height, bool) or not isinstance(row_height, int) or not 2 <= row_height <= 64
    ):
        raise InputError(f"gantt: row_height must be an integer from 2 to 64 pixels, got {row_height!r}")
    doc = gantt_data(tracks, color_by=color_by, row_order=row_order)
    for t in doc["tracks"]:
        if not math.isfinite(t["makespan"]):
            raise InputError(f"gantt: track {t['title']!r} has a non-finite makespan")
    n_rows = sum(len(t["rows"]) for t in doc["tracks"])
    doc["rowHeight"] = row_height or (14 if n_rows <= 160 else 10 if n_rows <= 400 else 6)
    return (
        f'<div class="mg-gantt" id="{chart_id}" data-src="{chart_id}-data">'
        '<div class="mg-bar">'
        '<label>rows <select class="mg-order"><option value="role">by role</option>'
        '<option value="site">by core</option></select></label> '
        '<label><input type="checkbox" class="mg-waits"> show waits (ready &rarr; start)</label> '
        '<button type="button" class="mg-reset">reset zoom</button> '
        '<span class="mg-view"></span></div>'
        '<div class="mg-legend"></div><div class="mg-tracks"></div>'
        '<div class="mg-tip" hidden></div></div>\n'
        f'<script type="application/json" id="{chart_id}-data">{_json_for_script(doc)}</script>\n'
    )


GANTT_SCRIPT = f"<script>{GANTT_JS}</script>"
"""The page script; include it once, after every :func:`gantt_fragment`."""


def page_head(title: str) -> str:
    """``<!DOCTYPE html>`` up to ``<body>``: charset, title, the inline stylesheet, no external link."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'
        f"<title>{html.escape(title)}</title><style>{GANTT_CSS}</style></head><body>\n"
    )


def page_tail() -> str:
    return f"{GANTT_SCRIPT}\n</body></html>\n"


def gantt_page(
    tracks: Sequence[GanttTrack],
    *,
    title: str = "Schedule",
    color_by: ColorBy = "stage",
    row_order: str = "role",
    header_html: str = "",
    footer_html: str = "",
    row_height: int | None = None,
) -> str:
    """A complete, self-contained HTML page with one chart of ``tracks`` (stacked)."""
    return (
        page_head(title)
        + f"<h1>{html.escape(title)}</h1>\n"
        + header_html
        + gantt_fragment(tracks, color_by=color_by, row_order=row_order, row_height=row_height)
        + footer_html
        + page_tail()
    )


def write_page(path: str | Path, text: str, what: str = "page") -> Path:
    """Write an HTML page (UTF-8); an unwritable path is one :class:`InputError` naming it."""
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)  # like the other outputs: -o runs/x.html works
        p.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{p}: cannot write the {what}: {exc.strerror or exc}") from None
    return p


def write_gantt(path: str | Path, tracks: Sequence[GanttTrack], **kwargs: Any) -> Path:
    """Write :func:`gantt_page` to ``path``; returns the path."""
    return write_page(path, gantt_page(tracks, **kwargs), "chart")


def tracks_from(schedules: Mapping[str, Schedule], graph: EventGraph | None = None) -> list[GanttTrack]:
    """``{"greedy": s1, "optimal": s2}`` -> tracks over one graph, in the mapping's order."""
    return [GanttTrack(title, s, graph) for title, s in schedules.items()]
