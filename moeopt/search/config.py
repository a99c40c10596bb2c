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

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from moeopt.errors import MoeoptError
from moeopt.megamoe.scenario import (
    SECTIONS,
    Scenario,
    TOMLDecodeError,
    anchor_workload_file,
    apply_overrides,
    read_scenario_table,
    scenario_from_dict,
)
from moeopt.plain import plain
from moeopt.search.errors import FIELDS, StudyError
from moeopt.search.exactgap import ExactSpec
from moeopt.search.metrics import EXACT_METRICS, METRICS
from moeopt.search.samplers import SAMPLERS, SINGLE_OBJECTIVE_SAMPLERS, missing_packages, parse_sampler
from moeopt.search.space import (
    PARAM_FIELDS,
    ParamSpec,
    overrides_field,
    param,
    parse_constraints,
    parse_space,
)

__all__ = [  # the study file's API; the space, the metrics and the samplers have modules of their own
    "METRICS",
    "PARAM_FIELDS",
    "SAMPLERS",
    "ExactSpec",
    "ObjectiveSpec",
    "ParamSpec",
    "SecondarySpec",
    "ShapeSpec",
    "StudyConfig",
    "load_study",
    "missing_packages",
]

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


# --------------------------------------------------------------------------- typed config
@dataclass(frozen=True)
class ShapeSpec:
    """One workload shape: a base scenario (as a nested dict) plus dotted-path overrides."""

    name: str
    base: Mapping[str, Any]
    source: str
    overrides: Mapping[str, Any]
    weight: float = 1.0

    def table(self, trial_overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The scenario table of this shape with ``trial_overrides`` on top: everything
        :meth:`scenario` builds the scenario from (ScenarioError for an unknown path)."""
        data = apply_overrides(self.base, self.overrides)
        return apply_overrides(data, trial_overrides or {})

    def scenario(self, trial_overrides: Mapping[str, Any] | None = None) -> Scenario:
        """The validated scenario of this shape with ``trial_overrides`` on top (ScenarioError if not)."""
        return scenario_from_dict(self.table(trial_overrides))


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
class OptionNames:
    """How messages name the run options: the keyword arguments of :func:`moeopt.run_study`
    (``resume=True``, ``out=DIR``), or the command-line flags (``--resume``, ``--out DIR``)."""

    cli: bool = False

    def field(self, name: str) -> str:
        """``trials`` / ``--trials`` (``timeout_s`` is ``--timeout`` on the command line)."""
        return "--" + {"timeout_s": "timeout"}.get(name, name) if self.cli else name

    def set(self, name: str, value: str = "True") -> str:
        """``resume=True`` / ``--resume``; ``out=DIR`` / ``--out DIR``."""
        if not self.cli:
            return f"{name}={value}"
        return self.field(name) if value == "True" else f"{self.field(name)} {value}"


PYTHON_NAMES = OptionNames(cli=False)
CLI_NAMES = OptionNames(cli=True)


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
        return param(self, name)

    def search_fingerprint(self) -> dict[str, Any]:
        """What defines the search: a resumed study must match it (trials/timeout/workers may change)."""
        keep: tuple[str, ...] = ("scenario", "overrides", "shapes", "aggregate", "space", "constraints")
        keep += ("objective", "secondary", "sampler", "seed")
        out = {k: self.raw.get(k) for k in keep}
        out["base_scenarios"] = {s.name: plain(s.base) for s in self.shapes}
        return json.loads(json.dumps(out, sort_keys=True, default=str))

    def with_run_options(self, names: OptionNames = PYTHON_NAMES, **kw: Any) -> StudyConfig:
        """A copy with run options (trials, timeout_s, workers, storage, out) applied; a bad value
        is named as the caller wrote it (``names``)."""
        kw = {k: v for k, v in kw.items() if v is not None}
        if "trials" in kw:
            FIELDS.integer(names.field("trials"), kw["trials"], 1)
        if "workers" in kw:
            FIELDS.integer(names.field("workers"), kw["workers"], 1, 256)
        if "timeout_s" in kw:
            FIELDS.number(names.field("timeout_s"), kw["timeout_s"], 0.0, lo_open=True)
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

    overrides = overrides_field("overrides", data.get("overrides"))
    base = _scenario_source("scenario", data["scenario"], bdir)
    shapes = _shapes(data.get("shapes"), base, overrides, bdir)
    aggregate = FIELDS.choice("aggregate", data.get("aggregate", "mean"), AGGREGATES)
    if aggregate == "weighted" and all(s.weight == 1.0 for s in shapes) and len(shapes) > 1:
        pass  # equal weights: the same as mean, allowed
    params = parse_space(data["space"])
    _check_choices(params)
    constraints = parse_constraints(data.get("constraints"), params)
    objective = _objective(data.get("objective"))
    secondary = _secondary(data.get("secondary"))
    sampler, sampler_options = parse_sampler(data.get("sampler", "tpe"))
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


def _check_choices(params: tuple[ParamSpec, ...]) -> None:
    """A listed value that the scenario refuses whatever the other parameters are (a section's own
    field check: ``kernel.quant: int4``, an unknown policy name) is an error now, not a pruned trial
    on every draw of it. Values refused only together with others (tiles that do not fit L1 at
    some tile_n) stay: the trial that draws them is pruned with the reason."""
    for p in params:
        if p.kind != "categorical":
            continue
        for label, value in zip(p.labels, p.values):
            overrides = dict(value) if p.mapped else {p.name: value}
            for path, v in overrides.items():
                why = _refused(path, v)
                if why is not None:
                    shown = f"{label!r} ({path} = {v!r})" if p.mapped else repr(label)
                    raise StudyError(
                        f"space.{p.name}: the choice {shown} can never be simulated: {why}; "
                        "remove it from the choices"
                    )


def _refused(path: str, value: Any) -> str | None:
    """Why ``path = value`` is refused by its own field check, or None (checked alone: a section
    field in a section with nothing else set, so no other value takes part)."""
    from moeopt.megamoe.config.profiles import PROFILES
    from moeopt.megamoe.scenario.schema import check_choice

    parts = path.split(".")
    if parts == ["profile"]:
        try:
            check_choice("profile", value, PROFILES)
        except MoeoptError as exc:
            return str(exc)
        return None
    if parts[0] not in SECTIONS or parts[0] == "workload" or len(parts) < 2:
        return None  # workload and top-level sizes are checked against each other: left to the trial
    nested: Any = value
    for part in reversed(parts[2:]):
        nested = {part: nested}
    try:
        SECTIONS[parts[0]](**{parts[1]: nested})
    except MoeoptError as exc:
        return str(exc)
    except TypeError:
        return None
    return None


# --------------------------------------------------------------------------- sections
def _scenario_source(where: str, v: Any, bdir: str) -> tuple[dict[str, Any], str]:
    if isinstance(v, str):
        path = os.path.normpath(os.path.join(bdir, v))
        try:
            data = read_scenario_table(path)
        except FileNotFoundError:
            raise StudyError(f"{where} = {v!r}: no such scenario file ({path})") from None
        except TOMLDecodeError as exc:
            raise StudyError(f"{where} = {v!r}: not valid TOML: {exc}") from None
        anchor_workload_file(data, path)
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
            ov = {**overrides, **overrides_field(f"{w}.overrides", sh.get("overrides"))}
            weight = FIELDS.number(f"{w}.weight", sh.get("weight", 1.0), 0.0, lo_open=True)
            specs.append(ShapeSpec(name, src[0], src[1], ov, weight))
    for s in specs:
        label = "scenario" if raw is None else f"shape {s.name!r}"
        try:
            s.scenario()
        except MoeoptError as exc:
            raise StudyError(f"{label}: the base scenario is invalid: {exc}") from None
    return tuple(specs)


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
    if "exact" in raw and metric not in EXACT_METRICS:
        raise StudyError(
            f"objective.exact is set but objective.metric = {metric!r}; it applies to "
            + ", ".join(map(repr, EXACT_METRICS))
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
        metric = FIELDS.choice(f"{w}.metric", s["metric"], [m for m in METRICS if m not in EXACT_METRICS])
        out.append(
            SecondarySpec(metric, FIELDS.choice(f"{w}.direction", s.get("direction", "minimize"), DIRECTIONS))
        )
    return tuple(out)


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
