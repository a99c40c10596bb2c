"""Chrome-trace JSON: export any schedule, read traces back (tolerating truncation).

The format is the Trace Event Format read by Perfetto (ui.perfetto.dev) and chrome://tracing:
``{"traceEvents": [...]}`` (or a bare array), times in µs.

Export (:func:`chrome_trace`, :func:`write_chrome_trace`): every event is one complete slice
(``"ph": "X"``) per resource it held; the process is the resource's site (``core3``) and the
thread its role (``AIC``), both named by metadata records so Perfetto shows ``core3 / AIC``.
Events without resources go to a last process named ``(no resource)``. ``cat`` is the event's
label under ``label_key`` (the stage, for MegaMoE graphs); ``args`` carry the event name, its
labels, all its resources and the scheduler's wait attribution. The header (``otherData``) is
written before the events and one event per line, so a cut file loses only its last events.

Read (:func:`read_chrome_trace`, :func:`parse_chrome_trace`): complete slices (``X``) and
begin/end pairs (``B``/``E``) become :class:`TraceEvent` s; process / thread names come from the
``M`` records; slices of one exported event on several resources are merged back into one event.
Times written as strings of digits (as profilers that keep full precision do) are read as
numbers. A truncated file (the writer died, the copy was cut) is read as far as its last complete event
with a :class:`TraceTruncatedWarning` (also listed in :attr:`Trace.notes`); anything else that is
not a valid trace raises one :class:`~moeopt.errors.InputError` naming the file, the event index
and the field.
"""

from __future__ import annotations

import gzip
import json
import re
import warnings
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moeopt.core.events import EventGraph, split_resource
from moeopt.core.schedule import Schedule
from moeopt.errors import InputError
from moeopt.fields import is_number
from moeopt.plain import jsonable

NO_RESOURCE = "(no resource)"
GENERATOR = "moeopt"


class TraceTruncatedWarning(UserWarning):
    """A trace ended before its last event (or its closing brackets): read as far as it goes."""


# --------------------------------------------------------------------------- model
@dataclass(frozen=True)
class TraceEvent:
    """One event of a trace: a named interval on one or more resources."""

    name: str
    start_us: float
    end_us: float
    resources: tuple[str, ...]
    label: str | None = None
    args: Mapping[str, Any] = field(default_factory=dict)

    @property
    def duration_us(self) -> float:
        return self.end_us - self.start_us


@dataclass
class Trace:
    """The events of a trace, in file order, plus what the reader noticed."""

    events: list[TraceEvent]
    source: str = ""
    label_key: str = "stage"
    metadata: dict[str, Any] = field(default_factory=dict)  # ``otherData`` of the file
    notes: list[str] = field(default_factory=list)
    truncated: bool = False

    @property
    def makespan_us(self) -> float:
        return max((e.end_us for e in self.events), default=0.0)

    def __len__(self) -> int:
        return len(self.events)


# --------------------------------------------------------------------------- export
def _natural_key(text: str) -> tuple[Any, ...]:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text))


def chrome_trace(
    schedule: Schedule,
    graph: EventGraph | None = None,
    *,
    label_key: str = "stage",
    metadata: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The Chrome-trace document of ``schedule`` (see the module docstring for the layout).

    ``graph`` supplies the labels (``cat`` = ``labels[label_key]``); without it ``cat`` is empty.
    ``metadata`` is merged into ``otherData``.
    """
    if not isinstance(label_key, str) or not label_key:
        raise InputError(f"chrome trace: label_key must be a non-empty string, got {label_key!r}")
    if graph is not None:
        missing = [e for e in schedule.start_us if e not in graph]
        if missing:
            raise InputError(
                f"chrome trace: {len(missing)} scheduled event(s) are not in the graph, e.g. {missing[0]!r}"
            )
    sites: dict[str, dict[str, int]] = {}
    for res in schedule.resources.values():
        for r in res:
            sr = split_resource(r)
            site, role = sr if sr is not None else (r, "")
            sites.setdefault(site, {}).setdefault(role, 0)
    has_free = any(not schedule.resources.get(e) for e in schedule.start_us)
    out: list[dict[str, Any]] = []
    pid_of: dict[str, int] = {}
    tid_of: dict[tuple[str, str], int] = {}
    for p, site in enumerate(sorted(sites, key=_natural_key), start=1):
        pid_of[site] = p
        out.append({"ph": "M", "name": "process_name", "pid": p, "tid": 0, "args": {"name": site}})
        out.append({"ph": "M", "name": "process_sort_index", "pid": p, "tid": 0, "args": {"sort_index": p}})
        for t, role in enumerate(sorted(sites[site], key=_natural_key), start=1):
            tid_of[(site, role)] = t
            out.append({"ph": "M", "name": "thread_name", "pid": p, "tid": t, "args": {"name": role}})
            out.append(
                {"ph": "M", "name": "thread_sort_index", "pid": p, "tid": t, "args": {"sort_index": t}}
            )
    free_pid = len(sites) + 1
    if has_free:
        out.append(
            {"ph": "M", "name": "process_name", "pid": free_pid, "tid": 0, "args": {"name": NO_RESOURCE}}
        )
        out.append({"ph": "M", "name": "thread_name", "pid": free_pid, "tid": 1, "args": {"name": "events"}})
    for name, start, end, _binding in schedule.trace():
        res = tuple(schedule.resources.get(name, ()))
        ev = graph[name] if graph is not None else None
        label = None if ev is None else ev.labels.get(label_key)
        args: dict[str, Any] = {"event": name}
        if label is not None:
            args[label_key] = jsonable(label)
        if ev is not None and ev.labels:
            args["labels"] = jsonable(ev.labels)
        if len(res) > 1:
            args["resources"] = list(res)
        w = schedule.waits.get(name)
        if w is not None:
            args["wait"] = {
                "kind": w.kind,
                "ready_us": w.ready_us,
                "pred": w.pred,
                "resource": w.resource,
                "resource_wait_us": w.resource_wait_us,
                "semaphore": w.semaphore,
                "semaphore_wait_us": w.semaphore_wait_us,
            }
        base = {
            "name": name,
            "cat": "" if label is None else str(label),
            "ph": "X",
            "ts": start,
            "dur": end - start,
        }
        if not res:
            out.append({**base, "pid": free_pid, "tid": 1, "args": args})
        for r in res:
            sr = split_resource(r)
            site, role = sr if sr is not None else (r, "")
            out.append({**base, "pid": pid_of[site], "tid": tid_of[(site, role)], "args": args})
    other = {
        "generator": GENERATOR,
        "label_key": label_key,
        "policy": schedule.policy,
        "makespan_us": schedule.makespan_us,
        "events": len(schedule),
        **jsonable(dict(metadata or {})),
    }
    return {"otherData": other, "displayTimeUnit": "ns", "traceEvents": out}


def dumps_chrome_trace(doc: Mapping[str, Any]) -> str:
    """JSON text with one trace event per line (``otherData`` first: a cut loses only events)."""
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    lines = ["{"]
    for k, v in head.items():
        lines.append(f"{json.dumps(k)}: {json.dumps(v, allow_nan=False)},")
    lines.append('"traceEvents": [')
    evs = doc.get("traceEvents", [])
    for i, ev in enumerate(evs):
        lines.append(
            json.dumps(ev, separators=(",", ":"), allow_nan=False) + ("," if i + 1 < len(evs) else "")
        )
    lines.append("]}")
    return "\n".join(lines) + "\n"


def write_chrome_trace(
    path: str | Path,
    schedule: Schedule,
    graph: EventGraph | None = None,
    *,
    label_key: str = "stage",
    metadata: Mapping[str, Any] | None = None,
) -> Path:
    """Write :func:`chrome_trace` of ``schedule`` to ``path`` (gzip when it ends in ``.gz``)."""
    p = Path(path)
    text = dumps_chrome_trace(chrome_trace(schedule, graph, label_key=label_key, metadata=metadata))
    try:
        if p.suffix == ".gz":
            p.write_bytes(gzip.compress(text.encode()))
        else:
            p.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{p}: cannot write the trace: {exc.strerror or exc}") from None
    return p


def trace_from_schedule(
    schedule: Schedule, graph: EventGraph | None = None, *, label_key: str = "stage"
) -> Trace:
    """The :class:`Trace` a reader would get from the exported file (no file written)."""
    return parse_chrome_trace(chrome_trace(schedule, graph, label_key=label_key), source="(schedule)")


# --------------------------------------------------------------------------- read
_WS = " \t\r\n"


def _skip(text: str, i: int) -> int:
    n = len(text)
    while i < n and text[i] in _WS:
        i += 1
    return i


def _closes(text: str, i: int) -> bool:
    """Whether the object / array opening at ``text[i]`` is closed before the text ends."""
    depth = 0
    in_str = False
    esc = False
    for j in range(i, len(text)):
        c = text[j]
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return True
    return False


class _Cut(Exception):
    """The text ended inside the construct being read."""


class _Scanner:
    def __init__(self, text: str, source: str) -> None:
        self.text = text
        self.source = source
        self.dec = json.JSONDecoder()

    def where(self, i: int) -> str:
        line = self.text.count("\n", 0, i) + 1
        return f"line {line}, byte {i}"

    def value(self, i: int, what: str) -> tuple[Any, int]:
        text = self.text
        i = _skip(text, i)
        if i >= len(text):
            raise _Cut
        try:
            return self.dec.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            if text[i] in "{[" and not _closes(text, i):
                raise _Cut from None
            if text[i] == '"' and text.find('"', i + 1) < 0:
                raise _Cut from None
            if text[i] not in '{["' and _skip(text, exc.pos) >= len(text):
                raise _Cut from None  # a number or literal cut short at the very end
            raise InputError(
                f"{self.source}: not valid JSON in {what} at {self.where(exc.pos)}: {exc.msg}"
            ) from None

    def separator(self, i: int, close: str, where: str) -> tuple[int, bool]:
        """After a value: ``(index after ',', True)`` or ``(index after close, False)``."""
        text = self.text
        i = _skip(text, i)
        if i >= len(text):
            raise _Cut
        if text[i] == ",":
            return i + 1, True
        if text[i] == close:
            return i + 1, False
        raise InputError(
            f"{self.source}: not valid JSON: expected ',' or {close!r} {where} at {self.where(i)}, "
            f"found {text[i]!r}"
        )

    def array(self, i: int, what: str, out: list[Any]) -> int:
        """Read the elements of the array opening at ``text[i]`` into ``out``; index after it."""
        text = self.text
        i += 1
        i = _skip(text, i)
        if i < len(text) and text[i] == "]":
            return i + 1
        while True:
            v, i = self.value(i, f"{what}[{len(out)}]")
            out.append(v)
            i, more = self.separator(i, "]", f"after {what}[{len(out) - 1}]")
            if not more:
                return i


def _decode_bytes(data: bytes, source: str, notes: list[str]) -> str:
    if data[:2] == b"\x1f\x8b":
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            raw = d.decompress(data)
        except zlib.error as exc:
            raise InputError(f"{source}: damaged gzip data ({exc})") from None
        if not d.eof:
            notes.append("the gzip stream is cut short")
        data = raw
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start >= len(data) - 3:  # a multi-byte character cut by the truncation
            notes.append("the file ends inside a UTF-8 character")
            return data[: exc.start].decode("utf-8")
        raise InputError(
            f"{source}: not a Chrome trace: not UTF-8 text (byte {exc.start} is {data[exc.start]:#04x})"
        ) from None


def read_chrome_trace(path: str | Path, *, label_key: str | None = None) -> Trace:
    """Read a Chrome-trace file (JSON, optionally gzip) as far as it is complete.

    ``label_key``: the args key holding each event's label (default: the file's
    ``otherData.label_key`` when present, else ``"stage"``; ``cat`` is the fallback).
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{p}: no such trace file") from None
    except OSError as exc:
        raise InputError(f"{p}: cannot read: {exc.strerror or exc}") from None
    notes: list[str] = []
    text = _decode_bytes(data, str(p), notes)
    return _parse_text(text, str(p), label_key, notes)


def parse_chrome_trace(
    doc: str | Mapping[str, Any] | Sequence[Any], *, source: str = "(trace)", label_key: str | None = None
) -> Trace:
    """Parse a trace given as JSON text or as the already-decoded document."""
    if isinstance(doc, str):
        return _parse_text(doc, source, label_key, [])
    if isinstance(doc, Mapping):
        if "traceEvents" not in doc:
            raise InputError(f"{source}: not a Chrome trace: the object has no 'traceEvents' key")
        other = doc.get("otherData")
        return _build(
            doc["traceEvents"], dict(other) if isinstance(other, Mapping) else {}, source, label_key, []
        )
    if isinstance(doc, Sequence):
        return _build(doc, {}, source, label_key, [])
    raise InputError(f"{source}: not a Chrome trace: expected JSON text, an object or a list")


def _parse_text(text: str, source: str, label_key: str | None, notes: list[str]) -> Trace:
    sc = _Scanner(text, source)
    i = _skip(text, 0)
    if i >= len(text):
        raise InputError(f"{source}: empty file, not a Chrome trace")
    raw: list[Any] = []
    other: dict[str, Any] = {}
    cut_where = ""
    if text[i] == "[":
        try:
            sc.array(i, "traceEvents", raw)
        except _Cut:
            cut_where = "inside the event array"
    elif text[i] == "{":
        seen_events = events_done = False
        keys: list[str] = []
        i += 1
        try:
            while True:
                i = _skip(text, i)
                if i >= len(text):
                    raise _Cut
                if text[i] == "}":
                    break
                key, i = sc.value(i, "a top-level key")
                if not isinstance(key, str):
                    raise InputError(
                        f"{source}: not valid JSON: a top-level key at {sc.where(i)} is not a string"
                    )
                keys.append(key)
                i = _skip(text, i)
                if i >= len(text):
                    raise _Cut
                if text[i] != ":":
                    raise InputError(f"{source}: not valid JSON: expected ':' after {key!r} at {sc.where(i)}")
                i = _skip(text, i + 1)
                if key == "traceEvents":
                    if i >= len(text):
                        raise _Cut
                    if text[i] != "[":
                        raise InputError(f"{source}: 'traceEvents' must be a list of events")
                    seen_events = True
                    i = sc.array(i, "traceEvents", raw)
                    events_done = True
                else:
                    v, i = sc.value(i, f"the value of {key!r}")
                    if key == "otherData" and isinstance(v, dict):
                        other = v
                i, more = sc.separator(i, "}", f"after the value of {key!r}")
                if not more:
                    break
        except _Cut:
            cut_where = (
                "after its event array (the rest of the object is missing)"
                if events_done
                else "inside the event array"
                if seen_events
                else "before its event array"
            )
            if not seen_events and not raw:
                notes.append("the file ends before any 'traceEvents' entry")
        if not seen_events and not cut_where:
            raise InputError(
                f"{source}: not a Chrome trace: the object has no 'traceEvents' key "
                f"(keys: {', '.join(map(repr, keys)) or 'none'})"
            )
    else:
        raise InputError(
            f"{source}: not a Chrome trace: expected a JSON array of events or an object with 'traceEvents', "
            f"found {text[i]!r} at {sc.where(i)}"
        )
    truncated = bool(cut_where) or bool(notes)
    if cut_where:
        notes.insert(
            0, f"the file is cut short {cut_where}: read the {len(raw)} complete record(s) before the cut"
        )
    tr = _build(raw, other, source, label_key, notes)
    tr.truncated = truncated
    if truncated:
        warnings.warn(
            TraceTruncatedWarning(f"{source}: truncated trace: " + "; ".join(tr.notes)), stacklevel=3
        )
    return tr


def _build(
    raw: Sequence[Any], other: dict[str, Any], source: str, label_key: str | None, notes: list[str]
) -> Trace:
    if not isinstance(raw, Sequence) or isinstance(raw, (str, bytes)):
        raise InputError(f"{source}: 'traceEvents' must be a list of events, got {type(raw).__name__}")
    key = (
        label_key or (other.get("label_key") if isinstance(other.get("label_key"), str) else None) or "stage"
    )
    pnames: dict[Any, str] = {}
    tnames: dict[tuple[Any, Any], str] = {}
    slices: list[tuple[int, str, float, float, Any, Any, str | None, dict[str, Any]]] = []
    open_b: dict[tuple[Any, Any], list[tuple[int, dict[str, Any]]]] = {}
    ignored: dict[str, int] = {}
    unmatched_e = 0
    for k, ev in enumerate(raw):
        where = f"{source}: traceEvents[{k}]"
        if not isinstance(ev, dict):
            raise InputError(f"{where}: expected an event object, got {json.dumps(ev)[:60]}")
        ph = ev.get("ph")
        if not isinstance(ph, str) or not ph:
            raise InputError(
                f"{where}: 'ph' (the event phase, e.g. \"X\") is missing or not a string: {ph!r}"
            )
        pid, tid = ev.get("pid", 0), ev.get("tid", 0)
        for fname, fval in (("pid", pid), ("tid", tid)):
            if not isinstance(fval, (int, str)) or isinstance(fval, bool):
                raise InputError(f"{where}: {fname!r} must be an integer or a string, got {fval!r}")
        if ph == "M":
            args = ev.get("args")
            nm = args.get("name") if isinstance(args, dict) else None
            if ev.get("name") == "process_name" and isinstance(nm, str):
                pnames[pid] = nm
            elif ev.get("name") == "thread_name" and isinstance(nm, str):
                tnames[(pid, tid)] = nm
            continue
        if ph not in ("X", "B", "E"):
            ignored[ph] = ignored.get(ph, 0) + 1
            continue
        ts = _numeric(ev.get("ts"))
        if not is_number(ts):
            raise InputError(f"{where} (ph {ph!r}): 'ts' must be a finite number of µs, got {ts!r}")
        args = ev.get("args", {})
        if not isinstance(args, dict):
            raise InputError(f"{where}: 'args' must be an object, got {args!r}")
        if ph == "E":
            stack = open_b.get((pid, tid))
            if not stack:
                unmatched_e += 1
                continue
            bk, bev = stack.pop()
            t0 = float(bev["ts"])
            if ts < t0:
                raise InputError(f"{where}: ends at {ts} before its begin at {t0} (traceEvents[{bk}])")
            merged = {**bev.get("args", {}), **args}
            slices.append(
                (
                    bk,
                    _name(bev, f"{source}: traceEvents[{bk}]"),
                    t0,
                    float(ts),
                    pid,
                    tid,
                    bev.get("cat"),
                    merged,
                )
            )
            continue
        name = _name(ev, where)
        if ph == "B":
            open_b.setdefault((pid, tid), []).append((k, ev))
            continue
        dur = _numeric(ev.get("dur"))
        if not is_number(dur) or dur < 0:
            raise InputError(
                f"{where} (name {name!r}, ph 'X'): 'dur' must be a number of µs >= 0, got {dur!r}"
            )
        slices.append((k, name, float(ts), float(ts) + float(dur), pid, tid, ev.get("cat"), args))
    unclosed = sum(len(s) for s in open_b.values())
    if unclosed:
        notes.append(f"{unclosed} slice(s) began ('B') but never ended: dropped")
    if unmatched_e:
        notes.append(f"{unmatched_e} end record(s) ('E') without a begin: ignored")
    if ignored:
        notes.append(
            "ignored records of phase " + ", ".join(f"{ph!r} x{n}" for ph, n in sorted(ignored.items()))
        )
    slices.sort(key=lambda s: s[0])  # file order (B/E pairs at their begin)
    events: list[TraceEvent] = []
    parts: dict[tuple[str, float, float], int] = {}
    for _k, name, t0, t1, pid, tid, cat, args in slices:
        res = _resource(pid, tid, pnames, tnames)
        ident = args.get("event")
        if isinstance(ident, str):
            j = parts.get((ident, t0, t1))
            if j is not None:
                old = events[j]
                if res != NO_RESOURCE:
                    events[j] = TraceEvent(old.name, t0, t1, (*old.resources, res), old.label, old.args)
                continue
            parts[(ident, t0, t1)] = len(events)
        lab = args.get(key)
        label = str(lab) if lab is not None else (cat if isinstance(cat, str) and cat else None)
        resources = () if res == NO_RESOURCE else (res,)
        events.append(
            TraceEvent(str(ident) if isinstance(ident, str) else name, t0, t1, resources, label, args)
        )
    # an exported event lists all its resources in args: restore that order
    for j, ev in enumerate(events):
        listed = ev.args.get("resources")
        if isinstance(listed, list) and len(ev.resources) > 1 and sorted(listed) == sorted(ev.resources):
            events[j] = TraceEvent(ev.name, ev.start_us, ev.end_us, tuple(listed), ev.label, ev.args)
    return Trace(events=events, source=source, label_key=key, metadata=other, notes=notes)


def _numeric(v: Any) -> Any:
    """A time as a number: profilers that keep full precision write it as a string
    (``"ts": "1700000123.456"``); anything else is returned as it is, for the error message."""
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return v
    return v


def _name(ev: Mapping[str, Any], where: str) -> str:
    name = ev.get("name")
    if not isinstance(name, str):
        raise InputError(f"{where}: 'name' must be a string, got {name!r}")
    return name


def _resource(pid: Any, tid: Any, pnames: Mapping[Any, str], tnames: Mapping[tuple[Any, Any], str]) -> str:
    p = pnames.get(pid, f"pid{pid}")
    if p == NO_RESOURCE:
        return NO_RESOURCE
    t = tnames.get((pid, tid), f"tid{tid}")
    return f"{p}.{t}" if t else p
