"""Sampling a trial's point from the study's space, conditions, constraints, and overrides.

A parameter with ``when`` exists in a trial only if every parameter it names took one of the
listed values (a chain of conditions is followed in order). An inactive parameter is not asked
of the sampler and leaves the base scenario's value in place.
"""

from __future__ import annotations

import ast
import json
import operator
from collections.abc import Callable, Mapping
from typing import Any

import optuna

from moeopt.search.config import ParamSpec, StudyConfig, constraint_names, dotted_name


def is_active(p: ParamSpec, point: Mapping[str, Any], cfg: StudyConfig) -> bool:
    """Whether ``p`` exists given the (Optuna-valued) ``point`` of the parameters before it."""
    for other, allowed in p.when:
        if other not in point:
            return False
        value = point[other]
        o = cfg.param(other)
        decoded = value if o.mapped else o.decode(value)
        if decoded not in allowed:
            return False
    return True


def suggest(trial: optuna.trial.Trial, cfg: StudyConfig) -> dict[str, Any]:
    """Ask the sampler for every active parameter; returns ``name -> Optuna value``."""
    point: dict[str, Any] = {}
    for p in cfg.params:
        if not is_active(p, point, cfg):
            continue
        if p.kind == "categorical":
            point[p.name] = trial.suggest_categorical(p.name, list(p.labels))
        elif p.kind == "int":
            point[p.name] = trial.suggest_int(
                p.name, int(p.low), int(p.high), step=int(p.step or 1), log=p.log
            )
        else:
            point[p.name] = trial.suggest_float(p.name, p.low, p.high, step=p.step, log=p.log)
    return point


def distributions(cfg: StudyConfig) -> dict[str, optuna.distributions.BaseDistribution]:
    """The Optuna distribution of every parameter (used to enqueue points and check storage)."""
    out: dict[str, optuna.distributions.BaseDistribution] = {}
    for p in cfg.params:
        if p.kind == "categorical":
            out[p.name] = optuna.distributions.CategoricalDistribution(list(p.labels))
        elif p.kind == "int":
            out[p.name] = optuna.distributions.IntDistribution(
                int(p.low), int(p.high), log=p.log, step=int(p.step or 1)
            )
        else:
            out[p.name] = optuna.distributions.FloatDistribution(p.low, p.high, log=p.log, step=p.step)
    return out


def to_overrides(cfg: StudyConfig, point: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted-path overrides of a point (parameters in space order; later ones win on a clash)."""
    out: dict[str, Any] = {}
    for p in cfg.params:
        if p.name in point:
            out.update(p.overrides(point[p.name]))
    return out


def point_key(point: Mapping[str, Any]) -> str:
    """A canonical text of a point, equal for equal points (duplicate detection)."""
    return json.dumps({k: point[k] for k in sorted(point)}, sort_keys=True, default=str)


def grid_search_space(cfg: StudyConfig) -> dict[str, list[Any]]:
    return {p.name: p.grid_values() for p in cfg.params}


def grid_size(cfg: StudyConfig) -> int:
    """Number of distinct points of a discrete space, following the conditions (counting stops
    once it passes a million)."""
    return len(enumerate_points(cfg, limit=1_000_000))


def enumerate_points(cfg: StudyConfig, limit: int | None = None) -> list[dict[str, Any]]:
    """Every distinct point of a discrete space (conditions followed), in a fixed order; with
    ``limit``, the expansion stops as soon as it holds more points than that."""
    points: list[dict[str, Any]] = [{}]
    for p in cfg.params:
        values = p.grid_values()
        nxt: list[dict[str, Any]] = []
        for pt in points:
            if is_active(p, pt, cfg):
                nxt.extend({**pt, p.name: v} for v in values)
            else:
                nxt.append(pt)
        points = nxt
        if limit is not None and len(points) > limit:
            break
    return points


# --------------------------------------------------------------------------- constraints
_BIN: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_CMP: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


def violated_constraint(cfg: StudyConfig, point: Mapping[str, Any]) -> str | None:
    """The first constraint that is false for ``point`` (``None`` if all hold).

    A constraint naming a parameter that is inactive in this point does not apply.
    """
    values = {p.name: p.decode(point[p.name]) for p in cfg.params if p.name in point and not p.mapped}
    for expr in cfg.constraints:
        names = constraint_names(expr)
        if any(n not in values for n in names):
            continue
        try:
            ok = _eval(ast.parse(expr, mode="eval").body, values)
        except (ArithmeticError, TypeError, ValueError) as exc:
            return f"constraint {expr!r} cannot be evaluated ({type(exc).__name__}: {exc})"
        if not ok:
            shown = ", ".join(f"{n}={values[n]!r}" for n in names)
            return f"constraint {expr!r} is false ({shown})"
    return None


def _eval(node: ast.AST, env: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Name, ast.Attribute)):
        return env[str(dotted_name(node))]
    if isinstance(node, ast.BinOp):
        return _BIN[type(node.op)](_eval(node.left, env), _eval(node.right, env))
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, env)
        if isinstance(node.op, ast.Not):
            return not v
        return -v if isinstance(node.op, ast.USub) else +v
    if isinstance(node, ast.BoolOp):
        vals = (_eval(v, env) for v in node.values)
        return all(vals) if isinstance(node.op, ast.And) else any(vals)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env)
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = _eval(comp, env)
            if not _CMP[type(op)](left, right):
                return False
            left = right
        return True
    raise TypeError(f"{type(node).__name__} is not allowed in a constraint")
