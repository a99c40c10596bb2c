"""Scenario files: a nested mapping or a TOML file into a :class:`Scenario`, dotted-path overrides.

An override or a file becomes a new scenario in one step, or an error says which field, which
value, and what is allowed: nothing is half-applied.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Mapping
from typing import Any

from moeopt.megamoe.errors import ScenarioError
from moeopt.megamoe.scenario.schema import (
    OVERRIDE_SCHEMA,
    SECTIONS,
    TOP_FIELDS,
    TRAP_HINT,
    Scenario,
    Workload,
    unknown_key,
)
from moeopt.plain import plain

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib  # type: ignore[import-not-found,no-redef,unused-ignore]

TOMLDecodeError = tomllib.TOMLDecodeError
"""What :func:`read_scenario_table` raises for text that is not TOML (on every Python version)."""


def scenario_from_dict(data: Mapping[str, Any], where: str = "") -> Scenario:
    """Build a :class:`Scenario` from a nested mapping (a parsed scenario file)."""
    pre = f"{where}: " if where else ""
    try:
        if not isinstance(data, Mapping):
            raise ScenarioError(f"a scenario must be a table, got {type(data).__name__}")
        for key in data:
            if key not in TOP_FIELDS:
                raise unknown_key("", key, TOP_FIELDS)
        for need in ("workload", "h", "hidden_dim"):
            if need not in data:
                hint = f" ({TRAP_HINT})" if need in ("h", "hidden_dim") else ""
                raise ScenarioError(f"missing field {need!r}{hint}")
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key in SECTIONS:
                kwargs[key] = _section(key, SECTIONS[key], value)
            elif key == "calibration":
                if not isinstance(value, Mapping):
                    raise ScenarioError(f"calibration = {value!r}: must be a table constant -> number")
                kwargs[key] = dict(value)
            else:
                kwargs[key] = value
        return Scenario(**kwargs)
    except ScenarioError as exc:
        raise type(exc)(pre + str(exc)) from None


def _section(name: str, cls: type, value: Any) -> Any:
    if not isinstance(value, Mapping):
        raise ScenarioError(f"[{name}] must be a table, got {value!r}")
    names = [f.name for f in dataclasses.fields(cls)]
    for key in value:
        if key not in names:
            raise unknown_key(name, key, names)
    if cls is Workload:
        for need in ("tokens", "topk", "world", "local_experts"):
            if need not in value:
                raise ScenarioError(f"missing field 'workload.{need}'")
    return cls(**dict(value))


def apply_overrides(data: Mapping[str, Any], overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """A deep copy of ``data`` with each ``"dotted.path": value`` set; unknown paths fail.

    A table given for a table field (``{"policy": {"dispatch_lookahead": 1}}``,
    ``--set 'policy={dispatch_lookahead = 1}'``) is merged key by key into what is there, exactly
    as the dotted form ``policy.dispatch_lookahead = 1`` would set it: the keys it does not name
    keep their values. A list (``options.links``) or a value replaces what is there."""
    out = plain(data)
    for path, value in (overrides or {}).items():
        if not isinstance(path, str) or not path:
            raise ScenarioError(f"override path {path!r}: must be a dotted path such as 'kernel.tile_n'")
        parts = path.split(".")
        schema: Any = OVERRIDE_SCHEMA
        node = out
        for depth, part in enumerate(parts):
            where = ".".join(parts[:depth])
            if not isinstance(schema, dict):
                raise ScenarioError(f"override {path!r}: {where!r} is a value, not a table")
            if part not in schema:
                raise unknown_key(where, part, list(schema))
            schema = schema[part]
            if depth == len(parts) - 1:
                if isinstance(value, Mapping) and isinstance(schema, dict):
                    _merge_table(node, part, value, schema, path)
                else:
                    node[part] = value
            else:
                nxt = node.get(part)
                if nxt is None:
                    nxt = {}
                elif not isinstance(nxt, dict):
                    # e.g. core_groups = "v1_fixed" then a per-stage override: start a table
                    nxt = {}
                node[part] = nxt
                node = nxt
    return out


def _merge_table(
    node: dict[str, Any], key: str, value: Mapping[str, Any], schema: dict[str, Any], path: str
) -> None:
    """Merge the table ``value`` into ``node[key]`` key by key (nested tables too), each key checked
    against ``schema``; a non-table value there (``core_groups = "v1_fixed"``) starts a new table."""
    target = node.get(key)
    if not isinstance(target, dict):
        target = {}
    node[key] = target
    for k, v in value.items():
        if not isinstance(k, str) or k not in schema:
            raise unknown_key(path, str(k), list(schema))
        sub = schema[k]
        if isinstance(v, Mapping) and isinstance(sub, dict):
            _merge_table(target, k, v, sub, f"{path}.{k}")
        else:
            target[k] = plain(v)


def parse_override_value(text: str) -> Any:
    """A command-line value: a TOML literal (``128``, ``true``, ``"x"``, ``[1, 2]``) or a bare string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def read_scenario_table(path: str) -> dict[str, Any]:
    """The table of a scenario TOML file as written (raises ``OSError``, or
    :data:`TOMLDecodeError` for text that is not TOML)."""
    with open(path, "rb") as fh:
        return tomllib.load(fh)


def anchor_workload_file(data: dict[str, Any], path: str) -> dict[str, Any]:
    """``data`` with a relative ``workload.file`` made relative to the scenario file at ``path``
    (not to the current directory), in place."""
    wl = data.get("workload")
    if isinstance(wl, dict) and isinstance(wl.get("file"), str) and not os.path.isabs(wl["file"]):
        wl["file"] = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(path)), wl["file"]))
    return data


def load_scenario(path: str | os.PathLike[str], overrides: Mapping[str, Any] | None = None) -> Scenario:
    """Read a scenario TOML file, apply dotted-path ``overrides``, validate, return a Scenario.

    Relative ``workload.file`` paths are taken relative to the scenario file.
    """
    p = os.fspath(path)
    try:
        data = read_scenario_table(p)
    except FileNotFoundError:
        raise ScenarioError(f"{p}: no such scenario file") from None
    except OSError as exc:
        raise ScenarioError(f"{p}: cannot read the scenario file: {exc.strerror or exc}") from None
    except TOMLDecodeError as exc:
        raise ScenarioError(f"{p}: not valid TOML: {exc}") from None
    try:
        data = apply_overrides(data, overrides)
    except ScenarioError as exc:
        raise ScenarioError(f"{p}: override: {exc}") from None
    return scenario_from_dict(anchor_workload_file(data, p), where=p)
