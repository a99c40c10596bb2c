"""The layering of docs/architecture.md, enforced by scanning every import of the package.

Each top-level part of ``moeopt`` may import only the parts listed for it in :data:`LAYERS`
(function-level and ``TYPE_CHECKING`` imports count too: a lazy import is still a dependency).
A new part must be given its place here and in docs/architecture.md.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "moeopt"

# the base: error types, the registry, field checks of every input format, plain-JSON conversion
BASE = {"errors", "registry", "fields", "plain"}
# part -> the parts it may import (itself always allowed)
LAYERS: dict[str, set[str]] = {
    "errors": set(),
    "plain": set(),
    "fields": {"errors"},
    "registry": {"errors"},
    "core": BASE,
    "exact": BASE | {"core"},
    "viz": BASE | {"core"},
    "trace": BASE | {"core"},
    "synthetic": BASE | {"core"},
    # the test helpers shipped for users (policy contract suite, graph strategies, naive
    # scheduler); nothing in the package imports them
    "testing": BASE | {"core", "exact"},
    # the MegaMoE adapter: the model only (scenario -> routing -> planning -> build -> simulate ->
    # analysis); it asks no questions of itself, so it needs neither CP-SAT nor charts
    "megamoe": BASE | {"core"},
    # the questions asked of the adapter (gap, compare, sensitivity, audit, domain, golden, report)
    "trust": BASE | {"core", "exact", "megamoe", "viz", "trace"},
    "search": BASE | {"core", "exact", "megamoe", "trust", "viz", "api"},
    # entry points: may use every layer
    "cli": BASE | {"core", "exact", "megamoe", "trust", "search", "viz", "trace"},
    "__main__": {"cli"},
    "__init__": BASE | {"core", "exact", "megamoe", "trust", "search", "viz", "trace"},  # the public API
}
# generic layers: may not mention an operator's stage names in code (docstrings may)
GENERIC = ("core", "exact")
STAGE_WORDS = ("dispatch", "gmm1", "gmm2", "activation", "combine", "swiglu")


def _part(path: Path) -> str:
    rel = path.relative_to(PKG)
    return rel.parts[0].removesuffix(".py")


def _imported_parts(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, part) for every import of a moeopt module; a bare ``import moeopt`` is ``api``."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # from moeopt import registry / from moeopt import simulate: the imported names count
            names = [f"moeopt.{a.name}" for a in node.names] if node.module == "moeopt" else [node.module]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] != "moeopt":
                continue
            if len(parts) == 1:
                out.append((node.lineno, "api"))
            elif (PKG / parts[1]).is_dir() or (PKG / f"{parts[1]}.py").is_file():
                out.append((node.lineno, parts[1]))
            else:  # a name re-exported by moeopt/__init__.py
                out.append((node.lineno, "api"))
    return out


def _modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_part_has_a_layer() -> None:
    parts = sorted({_part(p) for p in _modules()})
    unknown = [p for p in parts if p not in LAYERS]
    assert not unknown, (
        f"moeopt parts without a layer: {unknown}; add them to LAYERS in {Path(__file__).name} "
        "and to docs/architecture.md"
    )


@pytest.mark.parametrize("module", _modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_imports_follow_the_layers(module: Path) -> None:
    part = _part(module)
    allowed = LAYERS.get(part, set()) | {part}
    bad = [
        f"{module.relative_to(PKG.parent)}:{line} imports moeopt.{imp}"
        for line, imp in _imported_parts(ast.parse(module.read_text(encoding="utf-8")))
        if imp not in allowed
    ]
    assert not bad, f"{part} may import only {sorted(allowed)}: " + "; ".join(bad)


def _docstring_ids(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        value = first.value if isinstance(first, ast.Expr) else None
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            ids.add(id(value))
    return ids


@pytest.mark.parametrize("part", GENERIC)
def test_generic_layers_know_no_stage_names(part: str) -> None:
    found = []
    for module in sorted((PKG / part).rglob("*.py")):
        tree = ast.parse(module.read_text(encoding="utf-8"))
        docs = _docstring_ids(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                low = node.value.lower()
                found += [f"{module.name}:{node.lineno} {node.value!r}" for w in STAGE_WORDS if w in low]
    assert not found, f"moeopt/{part} names operator stages: {found}"


def test_the_scanner_sees_lazy_and_from_package_imports() -> None:
    # the scanner itself: a function-level import and `from moeopt import registry` are found
    tree = ast.parse(
        "def f():\n    from moeopt.search import run_study\n"
        "from moeopt import registry\nimport moeopt\nfrom moeopt import simulate\n"
    )
    assert sorted(_imported_parts(tree)) == [(2, "search"), (3, "registry"), (4, "api"), (5, "api")]


# The adapter stays readable stage by stage: a function longer than this is a stage doing two
# things (the architecture rule that split the builder into stage modules).
MAX_ADAPTER_FUNCTION_LINES = 120


def test_no_adapter_function_longer_than_the_rule() -> None:
    long = []
    for path in sorted((PKG / "megamoe").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno is not None
                n = node.end_lineno - node.lineno + 1
                if n > MAX_ADAPTER_FUNCTION_LINES:
                    long.append(f"{path.relative_to(PKG)}:{node.lineno} {node.name} ({n} lines)")
    assert not long, "split these functions: " + "; ".join(long)
