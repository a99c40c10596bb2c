"""Named extension points: ``moeopt.register(kind, name, factory)``.

Scenario files and study files refer to pluggable parts by name (a scheduling policy, a core
assignment rule, a wave packer ...). Each kind has its own table; an unknown name fails with
the closest known names.

Two layers per kind, so that who registers first never matters:

* **Built-ins** are registered once, by the package's own modules while ``import moeopt`` runs
  (:func:`register_builtin`), before any user code can run. A built-in name is registered
  exactly once (a second built-in of the same name is a bug and raises); user registrations
  never replace a built-in entry and built-ins never replace a user entry.
* **User entries** (:func:`register`) sit in front of the built-ins. A user entry may take a
  built-in's name only with ``replace=True`` (an explicit override); :func:`unregister` removes
  the override and the built-in is visible again.

For tests and notebooks, :func:`scoped` and :func:`registered` undo every registration made
inside a ``with`` block; nothing outside this module touches the tables.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from moeopt.errors import InputError, did_you_mean

KINDS = ("policy", "tile_grid", "core_assignment", "wave_packer", "builder", "restructure")

Factory = Callable[..., Any]

_BUILTIN: dict[str, dict[str, Factory]] = {k: {} for k in KINDS}  # in registration order
_USER: dict[str, dict[str, Factory]] = {k: {} for k in KINDS}


def register(kind: str, name: str, factory: Callable[..., Any], *, replace: bool = False) -> None:
    """Make ``factory`` available under ``name`` for ``kind``.

    ``replace=False`` refuses to overwrite an existing entry, built-in or registered (a silent
    override would change the meaning of every scenario file that names it). ``replace=True``
    puts ``factory`` in front of a built-in of that name until :func:`unregister` removes it.
    """
    _check_kind(kind)
    _check_entry(kind, name, factory)
    if not replace and (name in _USER[kind] or name in _BUILTIN[kind]):
        what = "a built-in" if name in _BUILTIN[kind] and name not in _USER[kind] else "already registered"
        raise InputError(
            f"{kind} {name!r} is {what}; pass replace=True to override it "
            f"(moeopt.registry.unregister({kind!r}, {name!r}) takes the override back)"
        )
    _USER[kind][name] = factory


def register_builtin(kind: str, name: str, factory: Callable[..., Any]) -> None:
    """Register one of the package's own parts (for moeopt's modules, called once at import).

    Built-ins live apart from user entries: this never replaces a user's registration, and a
    user's registration of the same name (with ``replace=True``) stays in front of it.
    """
    _check_kind(kind)
    _check_entry(kind, name, factory)
    if name in _BUILTIN[kind]:
        raise InputError(f"built-in {kind} {name!r} is registered twice")
    _BUILTIN[kind][name] = factory


def unregister(kind: str, name: str) -> None:
    """Remove the user entry ``name`` of ``kind`` (an override of a built-in: the built-in is
    back). Built-ins cannot be removed."""
    _check_kind(kind)
    if name in _USER[kind]:
        del _USER[kind][name]
        return
    if name in _BUILTIN[kind]:
        raise InputError(f"{kind} {name!r} is a built-in and cannot be unregistered")
    known = sorted(_USER[kind])
    raise InputError(
        f"no registered {kind} {name!r} to unregister{did_you_mean(str(name), known)}; "
        f"registered: {', '.join(known) or 'none'}"
    )


def lookup(kind: str, name: str) -> Callable[..., Any]:
    """The factory registered as ``name`` for ``kind`` (a user entry before a built-in); a clear
    error if there is none."""
    _check_kind(kind)
    try:
        user = _USER[kind].get(name)
        return user if user is not None else _BUILTIN[kind][name]
    except (KeyError, TypeError):
        known = names(kind)
        raise InputError(
            f"unknown {kind} {name!r}{did_you_mean(str(name), known)}; known: {', '.join(known)}"
        ) from None


def names(kind: str) -> list[str]:
    """Every name ``kind`` knows (built-in or registered), sorted."""
    _check_kind(kind)
    return sorted(_BUILTIN[kind].keys() | _USER[kind].keys())


def builtin_names(kind: str) -> tuple[str, ...]:
    """The package's own names of ``kind``, in the order they were registered."""
    _check_kind(kind)
    return tuple(_BUILTIN[kind])


def is_builtin(kind: str, name: str) -> bool:
    """Whether ``name`` is one of the package's own ``kind`` entries (overridden or not)."""
    _check_kind(kind)
    return name in _BUILTIN[kind]


@contextmanager
def scoped() -> Iterator[None]:
    """Undo, on leaving the block, every registration, override and unregistration made inside
    it (the tables are as they were on entering it)."""
    saved = [(table, dict(table)) for layer in (_USER, _BUILTIN) for table in layer.values()]
    try:
        yield
    finally:
        for table, entries in saved:
            table.clear()
            table.update(entries)


@contextmanager
def registered(
    kind: str, name: str, factory: Callable[..., Any], *, replace: bool = False
) -> Iterator[str]:
    """``register(kind, name, factory, replace=replace)`` for the duration of a ``with`` block
    (yields ``name``); the tables are as they were afterwards."""
    with scoped():
        register(kind, name, factory, replace=replace)
        yield name


def _check_kind(kind: str) -> None:
    if kind not in _BUILTIN:
        raise InputError(
            f"unknown registry kind {kind!r}{did_you_mean(str(kind), KINDS)}; kinds: {', '.join(KINDS)}"
        )


def _check_entry(kind: str, name: str, factory: Callable[..., Any]) -> None:
    if not isinstance(name, str) or not name:
        raise InputError(f"register({kind!r}, ...): name must be a non-empty string, got {name!r}")
    if not callable(factory):
        raise InputError(f"register({kind!r}, {name!r}, ...): the factory must be callable, got {factory!r}")
