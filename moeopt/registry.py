"""Named extension points: ``moeopt.register(kind, name, factory)``.

Scenario files and study files refer to pluggable parts by name (a scheduling policy, a core
assignment rule, a wave packer ...). Each kind has its own table; an unknown name fails with
the closest known names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from moeopt.errors import InputError, did_you_mean

KINDS = ("policy", "tile_grid", "core_assignment", "wave_packer", "builder", "restructure")

_TABLES: dict[str, dict[str, Callable[..., Any]]] = {k: {} for k in KINDS}


def register(kind: str, name: str, factory: Callable[..., Any], *, replace: bool = False) -> None:
    """Make ``factory`` available under ``name`` for ``kind``.

    ``replace=False`` refuses to overwrite an existing entry (a silent override would change the
    meaning of every scenario file that names it).
    """
    table = _table(kind)
    if not isinstance(name, str) or not name:
        raise InputError(f"register({kind!r}, ...): name must be a non-empty string, got {name!r}")
    if name in table and not replace:
        raise InputError(f"{kind} {name!r} is already registered; pass replace=True to override it")
    table[name] = factory


def lookup(kind: str, name: str) -> Callable[..., Any]:
    """The factory registered as ``name`` for ``kind``; a clear error if there is none."""
    table = _table(kind)
    try:
        return table[name]
    except (KeyError, TypeError):
        known = sorted(table)
        raise InputError(
            f"unknown {kind} {name!r}{did_you_mean(str(name), known)}; known: {', '.join(known)}"
        ) from None


def names(kind: str) -> list[str]:
    return sorted(_table(kind))


def _table(kind: str) -> dict[str, Callable[..., Any]]:
    try:
        return _TABLES[kind]
    except KeyError:
        raise InputError(
            f"unknown registry kind {kind!r}{did_you_mean(kind, KINDS)}; kinds: {', '.join(KINDS)}"
        ) from None
