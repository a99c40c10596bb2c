"""Optuna's private names are used in one module only, so an Optuna upgrade is checked in one place."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "moeopt"
ALLOWED = PKG / "search" / "optuna_private.py"


def _private_uses(path: Path) -> list[str]:
    """``file:line what`` for every import of a private Optuna module and, in the search driver,
    every ``obj._name`` on anything but ``self`` / ``cls`` (the search driver's objects of that
    kind are Optuna's: studies, trials, storages)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        modules: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        for mod in modules:
            parts = mod.split(".")
            if parts[0] == "optuna" and any(p.startswith("_") for p in parts):
                found.append(f"{path.name}:{node.lineno} import {mod}")
        if (
            isinstance(node, ast.Attribute)
            and "search" in path.parts
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
        ):
            found.append(f"{path.name}:{node.lineno} .{node.attr}")
    return found


def test_only_optuna_private_touches_optuna_internals() -> None:
    offenders = [
        use
        for path in sorted(PKG.rglob("*.py"))
        if path != ALLOWED and "__pycache__" not in path.parts
        for use in _private_uses(path)
    ]
    assert not offenders, f"use moeopt/search/optuna_private.py instead: {offenders}"


def test_the_scan_finds_the_private_names_where_they_are_used() -> None:
    # the scanner itself: the one allowed module does use private names, and it sees them
    seen = _private_uses(ALLOWED)
    assert any("._storage" in s for s in seen)
    assert any("import optuna.storages.journal._file" in s for s in seen)
