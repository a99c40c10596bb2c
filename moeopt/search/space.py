"""The study's search space: ``space`` and ``constraints`` of a study file parsed into
:class:`ParamSpec` dimensions, and a trial's point sampled from them.

A parameter is a dotted scenario path with a distribution (``choices``, ``int``, ``float``), or a
label -> overrides table. A parameter with ``when`` exists in a trial only if every parameter it
names took one of the listed values (a chain of conditions is followed in order). An inactive
parameter is not asked of the sampler and leaves the base scenario's value in place. A
constraint is arithmetic on parameters; a point that breaks one is pruned before any scenario is
built.

The functions take anything with the study's ``params`` and ``constraints`` (a
:class:`~moeopt.search.config.StudyConfig`, see :class:`Space`).
"""

from __future__ import annotations

import ast
import dataclasses
import json
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import optuna

from moeopt.errors import MoeoptError, did_you_mean
from moeopt.megamoe.scenario import apply_overrides
from moeopt.plain import plain
from moeopt.search.errors import FIELDS, StudyError

PARAM_FIELDS = ("choices", "int", "float", "step", "log", "when")
SCALARS = (bool, int, float, str, type(None))
"""The YAML scalars: a choice of one of these is its own label."""


@dataclass(frozen=True)
class ParamSpec:
    """One search dimension.

    ``kind`` is ``categorical`` / ``int`` / ``float``. For a categorical, ``labels`` are the values
    Optuna sees (scalars) and ``values`` what they stand for: the value written at the dotted
    path ``name`` (``mapped = False``), or a dict of dotted-path overrides (``mapped = True``,
    the ``label -> overrides`` form). ``when`` lists ``(parameter, allowed values)`` pairs that
    must all hold for this parameter to exist in a trial.
    """

    name: str
    kind: str
    labels: tuple[Any, ...] = ()
    values: tuple[Any, ...] = ()
    mapped: bool = False
    low: float = 0.0
    high: float = 0.0
    step: float | None = None
    log: bool = False
    when: tuple[tuple[str, tuple[Any, ...]], ...] = ()

    def decode(self, optuna_value: Any) -> Any:
        """The scenario value (or overrides dict) that an Optuna parameter value stands for."""
        if self.kind == "categorical":
            return self.values[self.labels.index(optuna_value)]
        return optuna_value

    def overrides(self, optuna_value: Any) -> dict[str, Any]:
        v = self.decode(optuna_value)
        if self.mapped:
            return dict(v)
        return {self.name: v}

    def grid_values(self) -> list[Any]:
        """Every value of this dimension, in Optuna's representation (for grid samplers)."""
        if self.kind == "categorical":
            return list(self.labels)
        step = self.step if self.step is not None else (1 if self.kind == "int" else None)
        if step is None:
            raise StudyError(
                f"space.{self.name}: a float range without step cannot be enumerated; allowed for the grid "
                f"sampler: choices, int, or float with step"
            )
        n = math.floor((self.high - self.low) / step + 1e-9) + 1
        if self.kind == "int":
            return [int(self.low + i * step) for i in range(n)]
        return [round(self.low + i * step, 12) for i in range(n)]


class Space(Protocol):
    """The search space of a study: its parameters in condition order and its constraints."""

    @property
    def params(self) -> tuple[ParamSpec, ...]: ...

    @property
    def constraints(self) -> tuple[str, ...]: ...


def param(space: Space, name: str) -> ParamSpec:
    for p in space.params:
        if p.name == name:
            return p
    raise KeyError(name)


# --------------------------------------------------------------------------- parsing
def overrides_field(where: str, v: Any) -> dict[str, Any]:
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise StudyError(f"{where} = {v!r}: must be a mapping 'dotted.path': value")
    out = {}
    for path, value in v.items():
        check_path(f"{where}.{path}", path)
        out[str(path)] = plain(value)
    return out


def check_path(where: str, path: Any) -> None:
    if not isinstance(path, str) or not path:
        raise StudyError(f"{where}: {path!r} is not a dotted scenario path such as 'kernel.tile_n'")
    try:
        apply_overrides({}, {path: 0})
    except MoeoptError as exc:
        raise StudyError(f"{where}: unknown scenario path: {exc}") from None


def parse_space(raw: Any) -> tuple[ParamSpec, ...]:
    if not isinstance(raw, Mapping):
        raise StudyError(f"space = {raw!r}: must be a mapping 'dotted.path': {{choices | int | float ...}}")
    if not raw:
        raise StudyError("space = {}: the search space is empty; give at least one parameter")
    specs: dict[str, ParamSpec] = {}
    pending_when: dict[str, Any] = {}
    for name, spec in raw.items():
        w = f"space.{name}"
        if not isinstance(spec, Mapping):
            raise StudyError(f"{w} = {spec!r}: must be a mapping with one of choices, int, float")
        FIELDS.keys(w, spec, PARAM_FIELDS)
        kinds = [k for k in ("choices", "int", "float") if k in spec]
        if len(kinds) != 1:
            raise StudyError(
                f"{w}: needs exactly one of choices, int, float (got {', '.join(kinds) or 'none'}); "
                "e.g. {choices: [128, 256]} or {int: [1, 4]} or {float: [0.5, 1.0], step: 0.1}"
            )
        kind = kinds[0]
        mapped = kind == "choices" and isinstance(spec["choices"], Mapping)
        if not mapped:
            check_path(w, name)
        if kind == "choices":
            specs[name] = _categorical(w, str(name), spec["choices"])
            for k in ("step", "log"):
                if k in spec:
                    raise StudyError(f"{w}.{k}: only applies to int and float ranges, not to choices")
        else:
            specs[name] = _numeric(w, str(name), kind, spec)
        if "when" in spec:
            pending_when[str(name)] = spec["when"]
    for name, when in pending_when.items():
        specs[name] = dataclasses.replace(specs[name], when=_when(f"space.{name}.when", name, when, specs))
    return tuple(specs[n] for n in _condition_order(specs))


def _categorical(w: str, name: str, choices: Any) -> ParamSpec:
    if isinstance(choices, Mapping):
        if not choices:
            raise StudyError(f"{w}.choices = {{}}: empty; give at least one label -> overrides")
        labels: list[Any] = []
        values: list[Any] = []
        for label, ov in choices.items():
            if not isinstance(label, (str, int, bool)):
                raise StudyError(f"{w}.choices: label {label!r} must be a string or integer")
            labels.append(label)
            values.append(overrides_field(f"{w}.choices.{label}", ov))
        return ParamSpec(name, "categorical", tuple(labels), tuple(values), mapped=True)
    if not isinstance(choices, list) or not choices:
        raise StudyError(f"{w}.choices = {choices!r}: must be a non-empty list of values")
    labels = []
    values = []
    for v in choices:
        v = plain(v)
        if isinstance(v, float) and not math.isfinite(v):
            raise StudyError(f"{w}.choices: {v!r} is not a finite number")
        label = v if isinstance(v, SCALARS) else json.dumps(v, sort_keys=True)
        if label in labels:
            raise StudyError(f"{w}.choices: {v!r} is listed twice")
        labels.append(label)
        values.append(v)
    return ParamSpec(name, "categorical", tuple(labels), tuple(values))


def _numeric(w: str, name: str, kind: str, spec: Mapping[str, Any]) -> ParamSpec:
    rng = spec[kind]
    if not isinstance(rng, list) or len(rng) != 2:
        raise StudyError(f"{w}.{kind} = {rng!r}: must be [low, high]")
    check = FIELDS.integer if kind == "int" else FIELDS.number
    low = check(f"{w}.{kind}[0]", rng[0])
    high = check(f"{w}.{kind}[1]", rng[1])
    if low > high:
        raise StudyError(f"{w}.{kind}: `low <= high` must hold, but got (low={low}, high={high})")
    log = FIELDS.boolean(f"{w}.log", spec.get("log", False))
    step = spec.get("step")
    if step is not None:
        if kind == "float":
            step = FIELDS.number(f"{w}.step", step, 0, lo_open=True)
        else:
            step = FIELDS.integer(f"{w}.step", step, 1)
        if log:
            raise StudyError(
                f"{w}: step and log cannot be combined (Optuna samples log ranges without a step)"
            )
    if log and low <= 0:
        raise StudyError(f"{w}.{kind}: a log range needs low > 0, got low={low}")
    if kind == "float":
        low, high = float(low), float(high)
        step = None if step is None else float(step)
    return ParamSpec(name, kind, low=low, high=high, step=step, log=log)


def _when(
    w: str, name: str, raw: Any, specs: Mapping[str, ParamSpec]
) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    if not isinstance(raw, Mapping) or not raw:
        raise StudyError(f"{w} = {raw!r}: must be a mapping 'other parameter': value (or a list of values)")
    out = []
    for other, allowed in raw.items():
        if other == name:
            raise StudyError(f"{w}: a parameter cannot depend on itself")
        if other not in specs:
            raise StudyError(
                f"{w}: {other!r} is not a parameter of the space{did_you_mean(str(other), list(specs))}; "
                f"allowed: {', '.join(sorted(map(str, specs)))}"
            )
        values = tuple(plain(a) for a in (allowed if isinstance(allowed, list) else [allowed]))
        o = specs[other]
        for a in values:
            if o.kind == "categorical":
                if not o.mapped and a not in o.values:
                    raise StudyError(
                        f"{w}.{other} = {a!r}: not one of that parameter's choices; allowed: "
                        + ", ".join(repr(v) for v in o.values)
                    )
                if o.mapped and a not in o.labels:
                    raise StudyError(
                        f"{w}.{other} = {a!r}: not one of that parameter's labels; allowed: "
                        + ", ".join(repr(v) for v in o.labels)
                    )
            elif not isinstance(a, (int, float)) or isinstance(a, bool) or not o.low <= a <= o.high:
                raise StudyError(f"{w}.{other} = {a!r}: outside that parameter's range [{o.low}, {o.high}]")
        out.append((str(other), values))
    return tuple(out)


def _condition_order(specs: Mapping[str, ParamSpec]) -> list[str]:
    """Parameters ordered so that every condition names an earlier parameter; cycles fail."""
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(n: str, trail: list[str]) -> None:
        if state.get(n) == 2:
            return
        if state.get(n) == 1:
            cyc = " -> ".join([*trail[trail.index(n) :], n])
            raise StudyError(f"space: conditions form a cycle: {cyc}")
        state[n] = 1
        for other, _ in specs[n].when:
            visit(other, [*trail, n])
        state[n] = 2
        order.append(n)

    for n in specs:
        visit(n, [])
    return order


_ALLOWED_NODES = (
    ast.Expression,
    ast.BoolOp,
    ast.And,
    ast.Or,
    ast.UnaryOp,
    ast.Not,
    ast.USub,
    ast.UAdd,
    ast.BinOp,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.FloorDiv,
    ast.Mod,
    ast.Pow,
    ast.Compare,
    ast.Eq,
    ast.NotEq,
    ast.Lt,
    ast.LtE,
    ast.Gt,
    ast.GtE,
    ast.Name,
    ast.Load,
    ast.Attribute,
    ast.Constant,
)


def constraint_names(expr: str) -> list[str]:
    """The dotted parameter names an expression refers to (``kernel.tile_m`` ...)."""
    tree = ast.parse(expr, mode="eval")
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Name, ast.Attribute)):
            dotted = dotted_name(node)
            if dotted is not None and not any(n.startswith(dotted + ".") for n in names):
                names = [n for n in names if not dotted.startswith(n + ".") and n != dotted] + [dotted]
    return names


def dotted_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted_name(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def parse_constraints(raw: Any, params: Sequence[ParamSpec]) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise StudyError(
            f"constraints = {raw!r}: must be a list of expressions such as 'kernel.tile_m <= 256'"
        )
    names = {p.name for p in params if not p.mapped}
    out = []
    for i, expr in enumerate(raw):
        w = f"constraints[{i}]"
        if not isinstance(expr, str):
            raise StudyError(f"{w} = {expr!r}: must be an expression string")
        try:
            tree = ast.parse(expr, mode="eval")
        except SyntaxError as exc:
            raise StudyError(f"{w} = {expr!r}: not an expression ({exc.msg})") from None
        for node in ast.walk(tree):
            if not isinstance(node, _ALLOWED_NODES):
                raise StudyError(
                    f"{w} = {expr!r}: {type(node).__name__} is not allowed; allowed: numbers, parameter "
                    "names, "
                    "+ - * / // % **, comparisons, and / or / not"
                )
        for n in constraint_names(expr):
            if n not in names:
                raise StudyError(
                    f"{w} = {expr!r}: {n!r} is not a parameter of the space{did_you_mean(n, sorted(names))}; "
                    f"allowed: {', '.join(sorted(names))}"
                )
        out.append(expr)
    return tuple(out)


# --------------------------------------------------------------------------- sampling
def is_active(p: ParamSpec, point: Mapping[str, Any], space: Space) -> bool:
    """Whether ``p`` exists given the (Optuna-valued) ``point`` of the parameters before it."""
    for other, allowed in p.when:
        if other not in point:
            return False
        value = point[other]
        o = param(space, other)
        decoded = value if o.mapped else o.decode(value)
        if decoded not in allowed:
            return False
    return True


def suggest(trial: optuna.trial.Trial, space: Space) -> dict[str, Any]:
    """Ask the sampler for every active parameter; returns ``name -> Optuna value``."""
    point: dict[str, Any] = {}
    for p in space.params:
        if not is_active(p, point, space):
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


def distributions(space: Space) -> dict[str, optuna.distributions.BaseDistribution]:
    """The Optuna distribution of every parameter (used to enqueue points and check storage)."""
    out: dict[str, optuna.distributions.BaseDistribution] = {}
    for p in space.params:
        if p.kind == "categorical":
            out[p.name] = optuna.distributions.CategoricalDistribution(list(p.labels))
        elif p.kind == "int":
            out[p.name] = optuna.distributions.IntDistribution(
                int(p.low), int(p.high), log=p.log, step=int(p.step or 1)
            )
        else:
            out[p.name] = optuna.distributions.FloatDistribution(p.low, p.high, log=p.log, step=p.step)
    return out


def to_overrides(space: Space, point: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted-path overrides of a point (parameters in space order; later ones win on a clash)."""
    out: dict[str, Any] = {}
    for p in space.params:
        if p.name in point:
            out.update(p.overrides(point[p.name]))
    return out


def point_key(point: Mapping[str, Any]) -> str:
    """A canonical text of a point, equal for equal points (duplicate detection)."""
    return json.dumps({k: point[k] for k in sorted(point)}, sort_keys=True, default=str)


def grid_search_space(space: Space) -> dict[str, list[Any]]:
    return {p.name: p.grid_values() for p in space.params}


def grid_size(space: Space) -> int:
    """Number of distinct points of a discrete space, following the conditions (counting stops
    once it passes a million)."""
    return len(enumerate_points(space, limit=1_000_000))


def enumerate_points(space: Space, limit: int | None = None) -> list[dict[str, Any]]:
    """Every distinct point of a discrete space (conditions followed), in a fixed order; with
    ``limit``, the expansion stops as soon as it holds more points than that."""
    points: list[dict[str, Any]] = [{}]
    for p in space.params:
        values = p.grid_values()
        nxt: list[dict[str, Any]] = []
        for pt in points:
            if is_active(p, pt, space):
                nxt.extend({**pt, p.name: v} for v in values)
            else:
                nxt.append(pt)
        points = nxt
        if limit is not None and len(points) > limit:
            break
    return points


def point_of(space: Space, lookup: Callable[[str], Any]) -> dict[str, Any] | None:
    """The point (Optuna values) whose parameters take the values ``lookup(path)`` gives, if
    every active parameter can: a value among its choices, a label whose overrides all hold,
    or a number on its range and step. ``None`` otherwise, or when ``lookup`` raises KeyError."""
    point: dict[str, Any] = {}
    try:
        for p in space.params:
            if not is_active(p, point, space):
                continue
            if p.mapped:
                hits = [
                    lab
                    for lab, ov in zip(p.labels, p.values, strict=True)
                    if all(lookup(k) == v for k, v in ov.items())
                ]
                if not hits:
                    return None
                point[p.name] = hits[0]
                continue
            v = lookup(p.name)
            if p.kind == "categorical":
                if v not in p.values:
                    return None
                point[p.name] = p.labels[p.values.index(v)]
            else:
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not p.low <= v <= p.high:
                    return None
                if p.step is not None and abs((v - p.low) / p.step - round((v - p.low) / p.step)) > 1e-9:
                    return None
                point[p.name] = int(v) if p.kind == "int" else float(v)
    except KeyError:
        return None
    return point


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


def violated_constraint(space: Space, point: Mapping[str, Any]) -> str | None:
    """The first constraint that is false for ``point`` (``None`` if all hold).

    A constraint naming a parameter that is inactive in this point does not apply.
    """
    values = {p.name: p.decode(point[p.name]) for p in space.params if p.name in point and not p.mapped}
    for expr in space.constraints:
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
