"""From a profiler's Chrome trace to a stage timeline, through a small mapping file.

A measured trace names its events the profiler's way (``moe_dispatch_e3``, ``MatMul``, a kernel's
own stage markers), not moeopt's. A *mapping file* says which events make up the stage timeline
and what they are called; the events of one stage and unit are merged into one row (earliest
start, latest end), as :func:`moeopt.trace.timeline.timeline_from_schedule` does for a
prediction. TOML (``.toml``) or YAML (``.yaml`` / ``.yml``), every key optional except a way to
find the stage::

    # the stage: the value of one args key, or the group "stage" of a regex on the event name
    stage_arg = "stage"
    stage_regex = '^(?P<stage>[a-z0-9]+)_(?P<unit>e\\d+)$'
    select = "^moe_"             # only events whose name matches this regex
    origin = "first"             # time 0 = the earliest selected event ("first") or the trace's 0 ("zero")
    [units]                      # the unit (an expert, a segment): args key -> prefix of a number in it
    expert = "e"                 #   args {"expert": 3} -> unit e3
    segment = "seg"              #   args {"segment": 1} -> unit seg1 (a text value is taken as it is)
    [rename]                     # stage name in the trace -> stage name of the timeline
    front_reorder = "front"
    [meta]                       # metadata of the timeline (kernel_us, units, profile and shape, ...)
    units = "envelopes"

When both ``stage_arg`` and ``stage_regex`` are given, the args key is tried first. The unit is
the first ``[units]`` key an event's args have, else the regex group ``unit`` as it is, else the
whole stage (``*``). An event that gives no stage is left out (their number is reported).
Generic: no stage name is known here.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from moeopt.errors import InputError
from moeopt.fields import read_input_text
from moeopt.trace.chrome import Trace
from moeopt.trace.timeline import WHOLE, Timeline, TimelineRow, check_timeline

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib  # type: ignore[import-not-found,no-redef,unused-ignore]

KEYS = ("stage_arg", "stage_regex", "units", "select", "origin", "rename", "meta")
KEY_DOCS = {
    "stage_arg": "the args key whose value is the event's stage",
    "stage_regex": "a regular expression on the event name; its group `stage` is the stage, its group "
    "`unit` (optional) the unit, taken as it is",
    "units": "table: args key -> prefix; the first key an event has gives its unit, a number with the "
    "prefix (`expert = \"e\"`: 3 -> `e3`), a text as it is; none: the regex group `unit`, else the "
    "whole stage `*`",
    "select": "a regular expression: only events whose name matches are read",
    "origin": "`first` (default): time 0 is the earliest selected event (profilers use an absolute "
    "clock); `zero`: the trace's own times",
    "rename": "table: the trace's stage name -> the stage name of the timeline",
    "meta": "table: the timeline's metadata (`kernel_us`, `units` = envelopes | boundaries, and the "
    "profile and shape keys that let trace-compare build the scenario without a scenario file)",
}
"""What each key of a mapping file means (the usage docs are generated from it)."""
ORIGINS = ("first", "zero")


@dataclass(frozen=True)
class TraceMapping:
    """How a Chrome trace's events become rows of a stage timeline (see the module docstring)."""

    stage_arg: str | None = None
    stage_regex: re.Pattern[str] | None = None
    units: Mapping[str, str] = field(default_factory=dict)
    select: re.Pattern[str] | None = None
    origin: str = "first"
    rename: Mapping[str, str] = field(default_factory=dict)
    meta: Mapping[str, str] = field(default_factory=dict)
    source: str = ""

    def stage_unit(self, name: str, args: Mapping[str, Any]) -> tuple[str, str] | None:
        """(stage, unit) of one event, or ``None`` when it gives no stage (or is not selected)."""
        if self.select is not None and not self.select.search(name):
            return None
        stage: Any = None
        groups: dict[str, str | None] = {}
        if self.stage_arg is not None:
            stage = args.get(self.stage_arg)
        if self.stage_regex is not None:
            m = self.stage_regex.search(name)
            if m is not None:
                groups = m.groupdict()
                if stage is None:
                    stage = groups.get("stage")
        if stage is None or stage == "":
            return None
        stage = self.rename.get(str(stage), str(stage))
        for key, prefix in self.units.items():
            if args.get(key) not in (None, ""):
                return stage, _unit(args[key], prefix)
        unit = groups.get("unit")
        return stage, WHOLE if unit in (None, "") else str(unit)


def _unit(value: Any, prefix: str) -> str:
    number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if number and float(value).is_integer():
        return f"{prefix}{int(value)}"
    text = str(value)
    return f"{prefix}{text}" if text.isdigit() else text


def read_mapping(path: str | Path) -> TraceMapping:
    """Read a mapping file (TOML, or YAML for ``.yaml`` / ``.yml``); one :class:`InputError` for any
    problem, naming the file and the key."""
    p = Path(path)
    text = read_input_text(p, "mapping file")
    try:
        data = yaml.safe_load(text) if p.suffix.lower() in (".yaml", ".yml") else tomllib.loads(text)
    except (yaml.YAMLError, tomllib.TOMLDecodeError) as exc:
        kind = "YAML" if p.suffix.lower() in (".yaml", ".yml") else "TOML"
        raise InputError(f"{p}: not valid {kind}: {str(exc).splitlines()[0]}") from None
    return mapping_from_dict(data if data is not None else {}, str(p))


def mapping_from_dict(data: Any, where: str = "mapping") -> TraceMapping:
    """A :class:`TraceMapping` from the parsed content of a mapping file."""
    if not isinstance(data, Mapping):
        raise InputError(f"{where}: a mapping file is a table of keys ({', '.join(KEYS)})")
    for key in data:
        if key not in KEYS:
            raise InputError(f"{where}: unknown key {key!r}; allowed: {', '.join(KEYS)}")

    def text(key: str) -> str | None:
        v = data.get(key)
        if v is None:
            return None
        if not isinstance(v, str) or not v:
            raise InputError(f"{where}: {key} = {v!r}: must be a non-empty string")
        return v

    def regex(key: str) -> re.Pattern[str] | None:
        v = text(key)
        if v is None:
            return None
        try:
            return re.compile(v)
        except re.error as exc:
            raise InputError(f"{where}: {key} = {v!r}: not a valid regular expression ({exc})") from None

    def table(key: str) -> dict[str, str]:
        v = data.get(key, {})
        if not isinstance(v, Mapping) or not all(
            isinstance(k, str) and isinstance(x, (str, int, float)) and not isinstance(x, bool)
            for k, x in v.items()
        ):
            raise InputError(f"{where}: {key} = {v!r}: must be a table of name = value")
        return {k: str(x) for k, x in v.items()}

    stage_regex = regex("stage_regex")
    if stage_regex is not None and "stage" not in stage_regex.groupindex:
        raise InputError(
            f"{where}: stage_regex = {stage_regex.pattern!r} has no group named 'stage', "
            "e.g. '^(?P<stage>[a-z0-9]+)_(?P<unit>e\\d+)$'"
        )
    stage_arg = text("stage_arg")
    if stage_arg is None and stage_regex is None:
        raise InputError(
            f"{where}: says nowhere where an event's stage is: give stage_arg (an args key) or "
            "stage_regex (a regex on the event name with a group named 'stage')"
        )
    origin = data.get("origin", "first")
    if origin not in ORIGINS:
        raise InputError(f"{where}: origin = {origin!r}: allowed: {', '.join(ORIGINS)}")
    return TraceMapping(
        stage_arg=stage_arg,
        stage_regex=stage_regex,
        units=table("units"),
        select=regex("select"),
        origin=origin,
        rename=table("rename"),
        meta=table("meta"),
        source=where,
    )


def timeline_from_trace(trace: Trace, mapping: TraceMapping) -> tuple[Timeline, list[str]]:
    """The stage timeline of a measured trace under ``mapping`` and notes on what was left out.

    Each (stage, unit) row is the envelope of its events (earliest start, latest end); ``group``
    names the trace's processes (or threads) its events ran on. Times are shifted so that the
    earliest selected event starts at 0 (``origin = "first"``) or kept (``"zero"``)."""
    spans: dict[tuple[str, str], list[float]] = {}
    where: dict[tuple[str, str], set[str]] = {}
    left_out = 0
    for ev in trace.events:
        key = mapping.stage_unit(ev.name, ev.args)
        if key is None:
            left_out += 1
            continue
        sp = spans.get(key)
        if sp is None:
            spans[key] = [ev.start_us, ev.end_us]
        else:
            sp[0] = min(sp[0], ev.start_us)
            sp[1] = max(sp[1], ev.end_us)
        where.setdefault(key, set()).update(r.split(".")[0] for r in ev.resources)
    if not spans:
        raise InputError(
            f"{trace.source}: no event gives a stage under {mapping.source or 'the mapping'} "
            f"({len(trace.events)} event(s) read; check stage_arg / stage_regex / select)"
        )
    t0 = min(a for a, _b in spans.values()) if mapping.origin == "first" else 0.0
    first_start: dict[str, float] = {}
    for (stage, _unit), (a, _b) in spans.items():
        first_start[stage] = min(first_start.get(stage, a), a)
    rows = []
    for stage in sorted(first_start, key=lambda st: (first_start[st], st)):
        units = sorted(
            ((u, sp) for (st, u), sp in spans.items() if st == stage),
            key=lambda x: (x[0] != WHOLE, x[1][0], x[0]),
        )
        for unit, (a, b) in units:
            rows.append(TimelineRow(stage, unit, _group(where[(stage, unit)]), a - t0, b - t0))
    notes = [f"{left_out} event(s) of the trace give no stage under the mapping: left out"][:left_out]
    where_ = f"{trace.source} under {mapping.source or 'the mapping'}"
    return check_timeline(Timeline(tuple(rows), dict(mapping.meta), trace.source), where_), notes


def _group(names: set[str]) -> str:
    shown = sorted(names)
    return " ".join(shown) if len(shown) <= 3 else f"{len(shown)} processes"
