"""The study file: schema, validation and the typed :class:`StudyConfig`.

A study file is YAML (or an equivalent dict passed to :func:`moeopt.run_study`)::

    name: quickstart                       # storage key and default output folder runs/<name>
    scenario: ../examples/scenario_basic.toml   # a scenario TOML (relative to this file) or an inline table
    overrides: {workload.tokens: 64}       # dotted-path values applied to every shape (optional)
    shapes:                                # optional: tune one configuration across several shapes
      - {name: M16, overrides: {workload.tokens: 16}, weight: 1}
    aggregate: mean                        # mean | max | weighted | mean_ratio (of value / baseline)
    space:                                 # dotted scenario paths -> a distribution
      kernel.tile_n: {choices: [128, 256, 512]}
      kernel.tile_m: {int: [64, 256], step: 64}
      calibration.b_reuse_load_factor: {float: [0.4, 1.0], step: 0.05}
      options.links:                       # a choice may be any value the path takes ...
        choices: [[], [{producer: gmm1, consumer: activation, location: onchip, depth: 2,
                        colocated_by_hardware: true}]]
      link_depth:                          # ... or a label -> overrides table
        choices: {shallow: {kernel.l1_stages: 1}, deep: {kernel.l1_stages: 2}}
        when: {kernel.topo_urma: false}    # conditional: only exists when another parameter has a value
    constraints: ["kernel.tile_m * kernel.tile_n <= 65536"]   # arithmetic on parameters, else pruned
    objective: {metric: kernel_total_us, direction: minimize, seeds: [0, 1, 2], statistic: p90}
    secondary: [{metric: aiv_busy_us, direction: minimize}]  # extra objectives (multi-objective)
    sampler: tpe                           # or {name: tpe, n_startup_trials: 8}
    seed: 0
    trials: 40
    timeout_s: null
    workers: 1
    storage: null                          # null: a journal file in the output folder; sqlite; an RDB URL
    out: null                              # output folder (relative to this file); null: ./runs/<name>
    prune: {lower_bound: auto, duplicates: true}
    baseline_trial: true                   # queue the base scenario's own values as the first trial
    outputs: {report: true, exact_gap: {time_limit_s: 10, workers: 1}}

Every problem is reported as one :class:`StudyError` line naming the file, the field, the value
and what is allowed ("did you mean" for names). Nothing is half-applied: the whole file is
checked, including that every shape's base scenario is valid, before any trial runs.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import inspect
import json
import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from moeopt.errors import MoeoptError, did_you_mean
from moeopt.megamoe.scenario import Scenario, apply_overrides, scenario_from_dict
from moeopt.plain import plain
from moeopt.search.errors import FIELDS, StudyError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib  # type: ignore[import-not-found,no-redef,unused-ignore]

TOP_FIELDS = (
    "name",
    "scenario",
    "overrides",
    "shapes",
    "aggregate",
    "space",
    "constraints",
    "objective",
    "secondary",
    "sampler",
    "seed",
    "trials",
    "timeout_s",
    "workers",
    "storage",
    "out",
    "prune",
    "outputs",
    "baseline_trial",
)
SHAPE_FIELDS = ("name", "scenario", "overrides", "weight")
PARAM_FIELDS = ("choices", "int", "float", "step", "log", "when")
OBJECTIVE_FIELDS = ("metric", "direction", "seeds", "statistic", "exact")
SECONDARY_FIELDS = ("metric", "direction")
PRUNE_FIELDS = ("lower_bound", "duplicates")
OUTPUT_FIELDS = ("report", "exact_gap")
EXACT_FIELDS = ("time_limit_s", "workers", "mode")

AGGREGATES = ("mean", "max", "weighted", "mean_ratio")
STATISTICS = ("mean", "median", "p90", "max", "min")
DIRECTIONS = ("minimize", "maximize")
LOWER_BOUND_MODES = ("auto", "always", "never")
EXACT_MODES = ("exact", "relaxed")

# metric name -> what it measures (the functions live in moeopt.search.evaluate)
METRICS: dict[str, str] = {
    "kernel_total_us": "greedy time to the last combine (the reference timing)",
    "kernel_dag_end_us": "greedy time including the unpermute tail",
    "cpsat_us": "CP-SAT best schedule of the same event graphs (anomaly-free; needs moeopt.exact)",
    "aic_busy_us": "sum of AIC busy time on the slowest rank",
    "aiv_busy_us": "sum of AIV busy time on the slowest rank",
    "aic_utilization": "mean AIC utilisation on the slowest rank (0..1)",
    "aiv_utilization": "mean AIV utilisation on the slowest rank (0..1)",
    "gm_to_l1_bytes": "bytes loaded GM -> L1 on the slowest rank",
    "hbm_bytes": "HBM bytes on the slowest rank",
    "excess_over_bound_pct": "how far the time is above its physical lower bound, in %",
}
# metrics that are a kernel time, so that the physical lower bound applies to them
TIME_METRICS = ("kernel_total_us", "kernel_dag_end_us", "cpsat_us")

# sampler name -> (optuna class name, packages it needs beyond optuna's own dependencies)
SAMPLERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "tpe": ("TPESampler", ()),
    "cmaes": ("CmaEsSampler", ("cmaes",)),
    "gp": ("GPSampler", ("torch", "scipy")),
    "random": ("RandomSampler", ()),
    "grid": ("GridSampler", ()),
    "nsga2": ("NSGAIISampler", ()),
    "bruteforce": ("BruteForceSampler", ()),
}
SINGLE_OBJECTIVE_SAMPLERS = ("cmaes",)

_SCALARS = (bool, int, float, str, type(None))


# --------------------------------------------------------------------------- typed config
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


@dataclass(frozen=True)
class ShapeSpec:
    """One workload shape: a base scenario (as a nested dict) plus dotted-path overrides."""

    name: str
    base: Mapping[str, Any]
    source: str
    overrides: Mapping[str, Any]
    weight: float = 1.0

    def scenario(self, trial_overrides: Mapping[str, Any] | None = None) -> Scenario:
        """The validated scenario of this shape with ``trial_overrides`` on top (ScenarioError if not)."""
        data = apply_overrides(self.base, self.overrides)
        data = apply_overrides(data, trial_overrides or {})
        return scenario_from_dict(data)


@dataclass(frozen=True)
class ExactSpec:
    time_limit_s: float = 10.0
    workers: int = 1
    mode: str = "exact"


@dataclass(frozen=True)
class ObjectiveSpec:
    metric: str = "kernel_total_us"
    direction: str = "minimize"
    seeds: tuple[int, ...] = ()
    statistic: str = "mean"
    exact: ExactSpec = field(default_factory=ExactSpec)


@dataclass(frozen=True)
class SecondarySpec:
    metric: str
    direction: str = "minimize"


@dataclass(frozen=True)
class StudyConfig:
    """A validated study. Paths are absolute; ``source`` names where it came from (for messages)."""

    name: str
    source: str
    base_dir: str
    shapes: tuple[ShapeSpec, ...]
    aggregate: str
    params: tuple[ParamSpec, ...]
    constraints: tuple[str, ...]
    objective: ObjectiveSpec
    secondary: tuple[SecondarySpec, ...]
    sampler: str
    sampler_options: Mapping[str, Any]
    seed: int
    trials: int
    timeout_s: float | None
    workers: int
    storage: str | None
    out: str
    lower_bound: str
    duplicates: bool
    report: bool
    exact_gap: ExactSpec | None
    baseline_trial: bool = True
    raw: Mapping[str, Any] = field(repr=False, compare=False, default_factory=dict)

    @property
    def directions(self) -> list[str]:
        return [self.objective.direction] + [s.direction for s in self.secondary]

    @property
    def metrics(self) -> list[str]:
        return [self.objective.metric] + [s.metric for s in self.secondary]

    @property
    def multi_objective(self) -> bool:
        return bool(self.secondary)

    def param(self, name: str) -> ParamSpec:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def search_fingerprint(self) -> dict[str, Any]:
        """What defines the search: a resumed study must match it (trials/timeout/workers may change)."""
        keep: tuple[str, ...] = ("scenario", "overrides", "shapes", "aggregate", "space", "constraints")
        keep += ("objective", "secondary", "sampler", "seed")
        out = {k: self.raw.get(k) for k in keep}
        out["base_scenarios"] = {s.name: plain(s.base) for s in self.shapes}
        return json.loads(json.dumps(out, sort_keys=True, default=str))

    def with_run_options(self, **kw: Any) -> StudyConfig:
        """A copy with command-line values (trials, timeout_s, workers, storage, out) applied."""
        kw = {k: v for k, v in kw.items() if v is not None}
        if "trials" in kw:
            FIELDS.integer("--trials", kw["trials"], 1)
        if "workers" in kw:
            FIELDS.integer("--workers", kw["workers"], 1, 256)
        if "timeout_s" in kw:
            FIELDS.number("--timeout", kw["timeout_s"], 0.0, lo_open=True)
        if "out" in kw:
            kw["out"] = os.path.abspath(os.fspath(kw["out"]))
        return dataclasses.replace(self, **kw)


# --------------------------------------------------------------------------- loading
def load_study(
    source: str | os.PathLike[str] | Mapping[str, Any], base_dir: str | None = None
) -> StudyConfig:
    """Read and validate a study (a YAML path or a dict); :class:`StudyError` on any problem.

    Relative paths in a file are taken relative to that file; in a dict, relative to
    ``base_dir`` (default: the current directory).
    """
    if isinstance(source, Mapping):
        where = "<study>"
        data: Any = source
        bdir = os.path.abspath(base_dir or os.getcwd())
        default_name = "study"
    else:
        path = os.fspath(source)
        where = path
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except FileNotFoundError:
            raise StudyError(f"{path}: no such study file") from None
        except OSError as exc:
            raise StudyError(f"{path}: cannot read the study file: {exc.strerror}") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise StudyError(f"{path}: not valid YAML{at}: {problem}") from None
        bdir = os.path.dirname(os.path.abspath(path))
        default_name = os.path.splitext(os.path.basename(path))[0]
    try:
        return _build(data, where, bdir, default_name)
    except StudyError as exc:
        msg = str(exc)
        raise StudyError(msg if msg.startswith(where + ":") else f"{where}: {msg}") from None


def _build(data: Any, where: str, bdir: str, default_name: str) -> StudyConfig:
    if data is None:
        raise StudyError("the study file is empty; it needs at least 'scenario' and 'space'")
    if not isinstance(data, Mapping):
        raise StudyError(f"a study must be a mapping of fields, got {type(data).__name__}")
    FIELDS.keys("", data, TOP_FIELDS)
    for need in ("scenario", "space"):
        if need not in data:
            raise StudyError(
                f"missing field {need!r}; a study needs 'scenario' (a path or a table) and 'space'"
            )

    name = data.get("name", default_name)
    if not isinstance(name, str) or not name.strip() or any(c in name for c in "/\\\n"):
        raise StudyError(
            f"name = {name!r}: must be a non-empty string without '/' (it names the output folder)"
        )

    overrides = _overrides_field("overrides", data.get("overrides"))
    base = _scenario_source("scenario", data["scenario"], bdir)
    shapes = _shapes(data.get("shapes"), base, overrides, bdir)
    aggregate = FIELDS.choice("aggregate", data.get("aggregate", "mean"), AGGREGATES)
    if aggregate == "weighted" and all(s.weight == 1.0 for s in shapes) and len(shapes) > 1:
        pass  # equal weights: the same as mean, allowed
    params = _space(data["space"])
    constraints = _constraints(data.get("constraints"), params)
    objective = _objective(data.get("objective"))
    secondary = _secondary(data.get("secondary"))
    sampler, sampler_options = _sampler(data.get("sampler", "tpe"))
    if sampler in SINGLE_OBJECTIVE_SAMPLERS and secondary:
        raise StudyError(
            f"sampler = {sampler!r} optimises one objective but 'secondary' adds {len(secondary)}; "
            "allowed for several objectives: tpe, nsga2, random, grid, gp, bruteforce"
        )
    if sampler == "grid":
        for p in params:
            p.grid_values()  # raises for a float range without step
    seed = FIELDS.integer("seed", data.get("seed", 0), 0)
    trials = FIELDS.integer("trials", data.get("trials", 100), 1)
    timeout_s = data.get("timeout_s")
    if timeout_s is not None:
        timeout_s = FIELDS.number("timeout_s", timeout_s, 0.0, lo_open=True)
    workers = FIELDS.integer("workers", data.get("workers", 1), 1, 256)
    storage = data.get("storage")
    if storage is not None and (not isinstance(storage, str) or not storage.strip()):
        raise StudyError(
            f"storage = {storage!r}: must be a string; allowed: null (a journal file in the output folder), "
            "'journal', 'sqlite', 'journal:PATH', or an RDB URL such as postgresql://user@host/db"
        )
    out = data.get("out")
    if out is None:
        out_dir = os.path.abspath(os.path.join("runs", name))
    elif isinstance(out, str) and out.strip():
        out_dir = os.path.normpath(os.path.join(bdir, out))
    else:
        raise StudyError(f"out = {out!r}: must be a folder path (relative to the study file)")
    lower_bound, duplicates = _prune(data.get("prune"))
    report, exact_gap = _outputs(data.get("outputs"))
    baseline_trial = data.get("baseline_trial", True)
    FIELDS.boolean("baseline_trial", baseline_trial)

    cfg = StudyConfig(
        name=name,
        source=where,
        base_dir=bdir,
        shapes=shapes,
        aggregate=aggregate,
        params=params,
        constraints=constraints,
        objective=objective,
        secondary=secondary,
        sampler=sampler,
        sampler_options=sampler_options,
        seed=seed,
        trials=trials,
        timeout_s=timeout_s,
        workers=workers,
        storage=storage,
        out=out_dir,
        lower_bound=lower_bound,
        duplicates=duplicates,
        report=report,
        exact_gap=exact_gap,
        baseline_trial=baseline_trial,
        raw=plain(data),
    )
    _check_metric_needs(cfg)
    return cfg


# --------------------------------------------------------------------------- sections
def _scenario_source(where: str, v: Any, bdir: str) -> tuple[dict[str, Any], str]:
    if isinstance(v, str):
        path = os.path.normpath(os.path.join(bdir, v))
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except FileNotFoundError:
            raise StudyError(f"{where} = {v!r}: no such scenario file ({path})") from None
        except tomllib.TOMLDecodeError as exc:
            raise StudyError(f"{where} = {v!r}: not valid TOML: {exc}") from None
        wl = data.get("workload")
        if isinstance(wl, dict) and isinstance(wl.get("file"), str) and not os.path.isabs(wl["file"]):
            wl["file"] = os.path.normpath(os.path.join(os.path.dirname(path), wl["file"]))
        return data, path
    if isinstance(v, Mapping):
        return plain(v), "inline"
    raise StudyError(f"{where} = {v!r}: must be a scenario TOML path or an inline scenario table")


def _shapes(
    raw: Any, base: tuple[dict[str, Any], str], overrides: dict[str, Any], bdir: str
) -> tuple[ShapeSpec, ...]:
    specs: list[ShapeSpec] = []
    if raw is None:
        specs.append(ShapeSpec("base", base[0], base[1], overrides))
    else:
        if not isinstance(raw, list) or not raw:
            raise StudyError(f"shapes = {raw!r}: must be a non-empty list of {{name, overrides, weight}}")
        for i, sh in enumerate(raw):
            w = f"shapes[{i}]"
            if not isinstance(sh, Mapping):
                raise StudyError(f"{w} = {sh!r}: must be a mapping with name, overrides, weight, scenario")
            FIELDS.keys(w, sh, SHAPE_FIELDS)
            name = sh.get("name", f"shape{i}")
            if not isinstance(name, str) or not name or any(c in name for c in "/\\"):
                raise StudyError(f"{w}.name = {name!r}: must be a non-empty string without '/'")
            if any(s.name == name for s in specs):
                raise StudyError(f"{w}.name = {name!r}: used by two shapes; shape names must be unique")
            src = _scenario_source(f"{w}.scenario", sh["scenario"], bdir) if "scenario" in sh else base
            ov = {**overrides, **_overrides_field(f"{w}.overrides", sh.get("overrides"))}
            weight = FIELDS.number(f"{w}.weight", sh.get("weight", 1.0), 0.0, lo_open=True)
            specs.append(ShapeSpec(name, src[0], src[1], ov, weight))
    for s in specs:
        label = "scenario" if raw is None else f"shape {s.name!r}"
        try:
            s.scenario()
        except MoeoptError as exc:
            raise StudyError(f"{label}: the base scenario is invalid: {exc}") from None
    return tuple(specs)


def _overrides_field(where: str, v: Any) -> dict[str, Any]:
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise StudyError(f"{where} = {v!r}: must be a mapping 'dotted.path': value")
    out = {}
    for path, value in v.items():
        _check_path(f"{where}.{path}", path)
        out[str(path)] = plain(value)
    return out


def _check_path(where: str, path: Any) -> None:
    if not isinstance(path, str) or not path:
        raise StudyError(f"{where}: {path!r} is not a dotted scenario path such as 'kernel.tile_n'")
    try:
        apply_overrides({}, {path: 0})
    except MoeoptError as exc:
        raise StudyError(f"{where}: unknown scenario path: {exc}") from None


def _space(raw: Any) -> tuple[ParamSpec, ...]:
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
            _check_path(w, name)
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
            values.append(_overrides_field(f"{w}.choices.{label}", ov))
        return ParamSpec(name, "categorical", tuple(labels), tuple(values), mapped=True)
    if not isinstance(choices, list) or not choices:
        raise StudyError(f"{w}.choices = {choices!r}: must be a non-empty list of values")
    labels = []
    values = []
    for v in choices:
        v = plain(v)
        if isinstance(v, float) and not math.isfinite(v):
            raise StudyError(f"{w}.choices: {v!r} is not a finite number")
        label = v if isinstance(v, _SCALARS) else json.dumps(v, sort_keys=True)
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


def _constraints(raw: Any, params: Sequence[ParamSpec]) -> tuple[str, ...]:
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


def _objective(raw: Any) -> ObjectiveSpec:
    if raw is None:
        return ObjectiveSpec()
    if isinstance(raw, str):
        raw = {"metric": raw}
    if not isinstance(raw, Mapping):
        raise StudyError(
            f"objective = {raw!r}: must be a metric name or a mapping with metric, direction ..."
        )
    FIELDS.keys("objective", raw, OBJECTIVE_FIELDS)
    metric = FIELDS.choice("objective.metric", raw.get("metric", "kernel_total_us"), list(METRICS))
    direction = FIELDS.choice("objective.direction", raw.get("direction", "minimize"), DIRECTIONS)
    seeds_raw = raw.get("seeds")
    seeds: tuple[int, ...] = ()
    if seeds_raw is not None:
        if isinstance(seeds_raw, int) and not isinstance(seeds_raw, bool):
            FIELDS.integer("objective.seeds", seeds_raw, 1, 10000)
            seeds = tuple(range(seeds_raw))
        elif isinstance(seeds_raw, list) and seeds_raw:
            seeds = tuple(FIELDS.integer(f"objective.seeds[{i}]", s, 0) for i, s in enumerate(seeds_raw))
            if len(set(seeds)) != len(seeds):
                raise StudyError(f"objective.seeds = {seeds_raw!r}: lists a seed twice")
        else:
            raise StudyError(
                f"objective.seeds = {seeds_raw!r}: must be a count (seeds 0..N-1) or a non-empty list "
                "of seeds"
            )
    statistic = FIELDS.choice("objective.statistic", raw.get("statistic", "mean"), STATISTICS)
    if "statistic" in raw and not seeds:
        raise StudyError(
            "objective.statistic is set but objective.seeds is not: a statistic needs routing seeds"
        )
    exact = _exact("objective.exact", raw.get("exact")) or ExactSpec()
    if "exact" in raw and metric != "cpsat_us":
        raise StudyError(
            f"objective.exact is set but objective.metric = {metric!r}; it applies to 'cpsat_us'"
        )
    return ObjectiveSpec(metric, direction, seeds, statistic, exact)


def _secondary(raw: Any) -> tuple[SecondarySpec, ...]:
    if raw is None:
        return ()
    if isinstance(raw, Mapping):
        raw = [raw]
    if not isinstance(raw, list):
        raise StudyError(f"secondary = {raw!r}: must be a list of {{metric, direction}}")
    out = []
    for i, s in enumerate(raw):
        w = f"secondary[{i}]"
        if isinstance(s, str):
            s = {"metric": s}
        if not isinstance(s, Mapping) or "metric" not in s:
            raise StudyError(f"{w} = {s!r}: must be a mapping with metric (and direction)")
        FIELDS.keys(w, s, SECONDARY_FIELDS)
        metric = FIELDS.choice(f"{w}.metric", s["metric"], [m for m in METRICS if m != "cpsat_us"])
        out.append(
            SecondarySpec(metric, FIELDS.choice(f"{w}.direction", s.get("direction", "minimize"), DIRECTIONS))
        )
    return tuple(out)


def _sampler(raw: Any) -> tuple[str, dict[str, Any]]:
    if isinstance(raw, str):
        name, opts = raw, {}
    elif isinstance(raw, Mapping) and "name" in raw:
        name, opts = raw["name"], {k: plain(v) for k, v in raw.items() if k != "name"}
    else:
        raise StudyError(f"sampler = {raw!r}: must be a sampler name or a mapping with name and options")
    name = FIELDS.choice("sampler", name, list(SAMPLERS))
    cls_name, _needs = SAMPLERS[name]
    import optuna

    cls = getattr(optuna.samplers, cls_name)
    allowed = [
        p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "seed", "search_space")
    ]
    for key in opts:
        if key not in allowed:
            raise FIELDS.unknown(f"sampler ({name})", key, allowed)
        if not isinstance(opts[key], (*_SCALARS, list)):
            raise StudyError(f"sampler.{key} = {opts[key]!r}: only plain values can be passed to {cls_name}")
    return name, opts


def missing_packages(sampler: str) -> list[str]:
    """The packages ``sampler`` needs that cannot be imported here."""
    return [p for p in SAMPLERS[sampler][1] if importlib.util.find_spec(p) is None]


def _prune(raw: Any) -> tuple[str, bool]:
    if raw is None:
        return "auto", True
    if not isinstance(raw, Mapping):
        raise StudyError(f"prune = {raw!r}: must be a mapping with lower_bound, duplicates")
    FIELDS.keys("prune", raw, PRUNE_FIELDS)
    lb = raw.get("lower_bound", "auto")
    if lb is True:
        lb = "always"
    elif lb is False:
        lb = "never"
    lb = FIELDS.choice("prune.lower_bound", lb, LOWER_BOUND_MODES)
    dup = FIELDS.boolean("prune.duplicates", raw.get("duplicates", True))
    return lb, dup


def _outputs(raw: Any) -> tuple[bool, ExactSpec | None]:
    if raw is None:
        return True, ExactSpec()
    if not isinstance(raw, Mapping):
        raise StudyError(f"outputs = {raw!r}: must be a mapping with report, exact_gap")
    FIELDS.keys("outputs", raw, OUTPUT_FIELDS)
    report = FIELDS.boolean("outputs.report", raw.get("report", True))
    gap = raw.get("exact_gap", {})
    exact = (
        None if gap is False else _exact("outputs.exact_gap", gap if gap is not True else {}) or ExactSpec()
    )
    return report, exact


def _exact(w: str, raw: Any) -> ExactSpec | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise StudyError(f"{w} = {raw!r}: must be a mapping with time_limit_s, workers, mode (or false)")
    FIELDS.keys(w, raw, EXACT_FIELDS)
    return ExactSpec(
        time_limit_s=FIELDS.number(f"{w}.time_limit_s", raw.get("time_limit_s", 10.0), 0.0, lo_open=True),
        workers=FIELDS.integer(f"{w}.workers", raw.get("workers", 1), 1, 64),
        mode=FIELDS.choice(f"{w}.mode", raw.get("mode", "exact"), EXACT_MODES),
    )


def _check_metric_needs(cfg: StudyConfig) -> None:
    if cfg.objective.seeds:
        for s in cfg.shapes:
            routing = s.scenario().workload.routing
            if routing not in ("random", "zipf"):
                raise StudyError(
                    f"objective.seeds: shape {s.name!r} has workload.routing = {routing!r}, which no seed "
                    "changes; allowed: routing 'random' or 'zipf' (set it in the scenario or in overrides)"
                )
            if "workload.seed" in cfg.raw.get("space", {}):
                raise StudyError(
                    "objective.seeds and space.workload.seed both set the routing seed; keep one"
                )
