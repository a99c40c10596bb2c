"""Generate ``docs/usage.md`` from the code's own schema, so the reference cannot drift.

A developer tool, not part of the installed package: ``python tools/gen_docs.py --write``
(from the repository root, with moeopt importable) rewrites the file; ``--check`` exits 1 when
the checked-in file differs from what the code generates now (the test
``tests/docs/test_usage_generated.py`` does the same).

What comes from where:

* command line: the argparse parsers themselves (:func:`moeopt.cli.build_parser` and the parser
  of ``python -m moeopt.search``): every command, argument, default and choice;
* scenario knobs: :func:`moeopt.megamoe.knobs.knob_catalogue`, the list the knob audit walks;
* constants: :data:`~moeopt.megamoe.config.profiles.CONSTANTS` and each profile's values with
  their provenance tags; registered names: :mod:`moeopt.registry`;
* study files: the field tuples and tables of :mod:`moeopt.search.config` (metrics, samplers,
  aggregates ...); the prose for each key is written here, and a key without prose, or prose for
  a key the code no longer has, fails the generation (:class:`DocsDriftError`);
* the ``simulate`` result: the ``TypedDict``\\ s of :mod:`moeopt.megamoe.results` (keys in
  order, types, and the documentation string under each key), checked against a real result of
  ``examples/scenario_basic.toml`` (:func:`result_problems`): a key the result has and the
  classes do not, a missing key or a value of another type fails the generation;
* the gap report: the keys of a real report of ``examples/scenario_bs72.toml``, with prose
  written here under the same rule as the study files.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import re
import sys
import types
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict

from moeopt.errors import MoeoptError

REPO = Path(__file__).resolve().parents[1]
USAGE_MD = REPO / "docs" / "usage.md"
BASIC_SCENARIO = REPO / "examples" / "scenario_basic.toml"
REGEN_COMMAND = "python tools/gen_docs.py --write"


class DocsDriftError(MoeoptError):
    """The prose of the generator and the code's schema disagree (a key without prose or vice versa)."""


# --------------------------------------------------------------------------- prose (checked for drift)
STUDY_TOP: dict[str, str] = {
    "name": "study name: the storage key and the default output folder `runs/<name>` (no `/`); "
    "default: the file name without suffix",
    "scenario": "base scenario: a TOML path (relative to the study file) or an inline table; required",
    "overrides": "dotted-path values applied to every shape before the trial's own values",
    "shapes": "several shapes tuned together: a list of `{name, scenario, overrides, weight}` "
    "(see below); default: the base scenario alone",
    "aggregate": "how the shapes' values combine into one objective (`mean` default)",
    "space": "dotted scenario path -> distribution (keys in `space.<dotted.path>` below); required",
    "constraints": "list of arithmetic expressions on parameters (`kernel.tile_m * kernel.tile_n "
    "<= 65536`); a point breaking one is pruned with the expression as reason",
    "objective": "a metric name, or `{metric, direction, seeds, statistic, exact}` (see below); "
    "default `kernel_total_us`, minimize",
    "secondary": "extra objectives `[{metric, direction}]` (multi-objective; `cpsat_us` not allowed)",
    "sampler": "sampler name or `{name: ..., <Optuna sampler options>}`; default `tpe`",
    "seed": "sampler seed (worker k uses seed + k); default 0",
    "trials": "total trials of the study (every worker together); default 100",
    "timeout_s": "stop starting trials after this many seconds; default none",
    "workers": "local worker processes sharing the storage; default 1",
    "storage": "null (a journal file in the output folder), `journal`, `sqlite`, `journal:PATH`, "
    "or an Optuna RDB URL",
    "out": "output folder, relative to the study file; default `./runs/<name>`",
    "prune": "`{lower_bound: auto|always|never, duplicates: true|false}`; default auto, true",
    "outputs": "`{report: true|false, exact_gap: {time_limit_s, workers, mode} | false}`",
    "baseline_trial": "queue the base scenario's own values as the first trial; default true",
}
STUDY_SHAPE: dict[str, str] = {
    "name": "shape name (names `best_<name>.toml` and the per-shape columns of `trials.csv`)",
    "scenario": "this shape's base scenario (path or table); default: the study's `scenario`",
    "overrides": "dotted-path values for this shape",
    "weight": "weight of this shape for `aggregate: weighted`; default 1",
}
STUDY_PARAM: dict[str, str] = {
    "choices": "a list of values, or a `label -> {dotted.path: value, ...}` table",
    "int": "`[low, high]` integers (inclusive)",
    "float": "`[low, high]` numbers",
    "step": "grid step of an `int` / `float` range",
    "log": "sample the range on a log scale (true/false)",
    "when": "`{other.parameter: value or [values]}`: the parameter exists only when all hold",
}
STUDY_OBJECTIVE: dict[str, str] = {
    "metric": "one of the metrics below; default `kernel_total_us`",
    "direction": "`minimize` (default) or `maximize`",
    "seeds": "routing seeds: a count N (seeds 0..N-1) or a list; needs routing `random` or `zipf`",
    "statistic": "statistic over the seeds (needs `seeds`); default `mean`",
    "exact": "`{time_limit_s, workers, mode}` for the `cpsat_us` metric",
}
STUDY_SECONDARY: dict[str, str] = {
    "metric": "one of the metrics below except `cpsat_us`",
    "direction": "`minimize` (default) or `maximize`",
}
STUDY_PRUNE: dict[str, str] = {
    "lower_bound": "`auto` (default: check the first points, keep checking while it prunes; a point of a "
    "kernel-time objective whose scenarios each have several distinct ranks is left to its ranks' times "
    "instead), "
    "`always`, `never` (true / false are always / never)",
    "duplicates": "reuse the stored outcome of a point already evaluated; default true",
}
STUDY_OUTPUTS: dict[str, str] = {
    "report": "write `report.html`; default true",
    "exact_gap": "optimality gap of the best point with CP-SAT (`false` turns it off); "
    "default `{time_limit_s: 10, workers: 1, mode: exact}`",
}
STUDY_EXACT: dict[str, str] = {
    "time_limit_s": "CP-SAT seconds per event graph (> 0); default 10",
    "workers": "CP-SAT worker threads (1..64); default 1",
    "mode": "`exact` (default) or `relaxed` (pools as one cumulative, colocation ignored)",
}

GAP_TOP: dict[str, str] = {
    "scenario": "the input's label (the file path from the command line)",
    "policy": "the scenario's own scheduling policy (what `simulate` uses)",
    "policies": "every greedy policy that was run",
    "time_limit_s": "CP-SAT seconds per distinct rank",
    "workers": "CP-SAT worker threads",
    "mode": "requested mode: `auto`, `exact` or `relaxed`",
    "total_s": "wall seconds of the whole report",
    "slowest_rank": "the rank with the longest greedy time (the kernel's time)",
    "worst_rank": "the rank with the largest certified gap",
    "ranks": "one entry per distinct rank (below)",
}
GAP_RANK: dict[str, str] = {
    "rank": "the representative rank",
    "ranks": "every rank sharing its routing signature (and graph)",
    "num_events": "events in the rank graph",
    "policy": "the scenario's policy",
    "greedy_us": "greedy makespan with the scenario's policy (to the end of the unpermute tail)",
    "greedy_by_policy_us": "policy -> greedy makespan (null when the policy failed)",
    "greedy_errors": "policy -> why it could not schedule the graph",
    "best_us": "makespan of the best valid schedule (CP-SAT's replay or a greedy one)",
    "best_from": "`cpsat` or `greedy:<policy>`",
    "lower_bound_us": "proven lower bound on every schedule of the graph",
    "bound_from": "which bound it is: `cpsat`, `longest_path`, `resource:<r>`, `pool:<role>`, "
    "`semaphore:<s>` or a physical limit",
    "mode": "the mode used for this rank: `exact` or `relaxed`",
    "status": "`optimal`, `feasible`, `unknown`, `infeasible` or `model_invalid`",
    "proven_optimal": "the best schedule's makespan equals the lower bound",
    "certified_gap": "greedy / lower bound − 1: no orchestration of this graph gains more",
    "reachable_gap": "greedy / best − 1: gained by a schedule that was found and validated",
    "bound_gap": "best / lower bound − 1: how far the certificate is from the best schedule",
    "physical_bounds_kernel_us": "the kernel's compute / bandwidth (with channel) / dependency bounds, "
    "to the last combine",
    "tail_offset_us": "shortest distance from any combine's end to the graph's end",
    "physical_limits_us": "the physical bounds plus the tail offset: makespan limits given to the solver",
    "divergences": "where the best schedule departs from the greedy: compared_with, identical, "
    "resources_reordered, events_rebound, events_moved_by_stage, first",
    "binding_use": "where the best schedule leaves the winning bound's capacity unused (the strongest "
    "capacity's when CP-SAT's own bound wins; null when proven or when no bound names a capacity): source, "
    "capacity, first_us, last_us, work_us, unused_us, parts ([from, to, unused µs] for ten equal parts "
    "of the span)",
    "exact": "the full `moeopt.ExactResult` of the solve (status, bounds_us, params_used, ...)",
}


def _check_prose(what: str, prose: Mapping[str, str], keys: Iterable[str]) -> None:
    have, need = set(prose), set(keys)
    missing, extra = sorted(need - have), sorted(have - need)
    if missing or extra:
        raise DocsDriftError(
            f"gen_docs: {what}: "
            + (f"no prose for {', '.join(missing)}" if missing else "")
            + ("; " if missing and extra else "")
            + (f"prose for keys the code does not have: {', '.join(extra)}" if extra else "")
            + " (edit tools/gen_docs.py, then run " + REGEN_COMMAND + ")"
        )


# --------------------------------------------------------------------------- markdown helpers
def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(head: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return [*out, ""]


def _code(text: str) -> str:
    return f"`{text}`"


def _num(v: float) -> str:
    if float(v).is_integer() and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.6g}"


# --------------------------------------------------------------------------- command line
def _metavar(a: argparse.Action) -> str:
    """The value part of an option: ``PATH``, ``[PATH]`` (optional value), ``NAME ...``."""
    mv = a.metavar if isinstance(a.metavar, str) else a.dest.upper()
    if a.nargs == "?":
        return f"[{mv}]"
    if a.nargs in ("+", "*"):
        return f"{mv} ..."
    return mv


def _arg_name(a: argparse.Action) -> str:
    if a.option_strings:
        name = ", ".join(a.option_strings)
        return name if a.nargs == 0 else f"{name} {_metavar(a)}"
    name = a.metavar if isinstance(a.metavar, str) else a.dest
    return name + (" ..." if a.nargs in ("+", "*") else "")


def _arg_usage(a: argparse.Action) -> str:
    if a.option_strings:
        text = a.option_strings[-1] if a.option_strings[-1].startswith("--") else a.option_strings[0]
        if a.nargs != 0:
            text += " " + _metavar(a)
        return text if a.required else f"[{text}]"
    name = _arg_name(a)
    return f"[{name}]" if a.nargs == "?" else name


def _arg_default(a: argparse.Action) -> str:
    if a.nargs == 0 or a.default in (None, argparse.SUPPRESS):
        return ""
    if isinstance(a.default, str) and a.default.startswith(str(REPO)):  # a packaged file: no machine path
        return _code(Path(a.default).relative_to(REPO).as_posix())
    return _code(_num(a.default) if isinstance(a.default, float) else str(a.default))


def _parser_section(title: str, prog: str, p: argparse.ArgumentParser, level: str = "###") -> list[str]:
    actions = [
        a for a in p._actions if not isinstance(a, argparse._HelpAction) and a.help != argparse.SUPPRESS
    ]
    lines = [f"{level} `{title}`", ""]
    if p.description:
        desc = p.description[0].upper() + p.description[1:]
        lines += [desc + ("" if desc.endswith(".") else "."), ""]
    lines += ["```", " ".join([prog, *(_arg_usage(a) for a in actions)]), "```", ""]
    rows = []
    for a in actions:
        choices = ", ".join(map(str, a.choices)) if a.choices else ""
        rows.append([_code(_arg_name(a)), a.help or "", _arg_default(a), choices])
    lines += _table(["argument", "meaning", "default", "choices"], rows)
    return lines


def _subcommands(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            return dict(a.choices)
    return {}


def cli_section() -> list[str]:
    from moeopt.cli import build_parser

    main = build_parser()
    subs = _subcommands(main)
    lines = [
        "## Command line",
        "",
        "`moeopt COMMAND` (the console script `pip install` puts on the path; `python -m moeopt COMMAND` "
        "is the same, and `python -m moeopt.search` is `moeopt search`). `moeopt --help` lists the "
        "commands, `moeopt --version` prints the version.",
        "",
        "Shared by every command: `--json [PATH]` writes the command's result as JSON to PATH, or with "
        "no PATH (or `-`) to standard output, the text then going to standard error; `--quiet` turns "
        "off progress output (a bar on a terminal, periodic lines elsewhere); `--debug` shows the "
        "traceback of an internal error.",
        "",
        "Exit codes: 0 ok, 1 some input failed or a guardrail fired, 2 bad input or usage (one "
        "`error:` line, no traceback), 130 interrupted (`moeopt search`: continue with `--resume`).",
        "",
        "Commands: " + ", ".join(f"[`{n}`](#moeopt-{n})" for n in subs) + ".",
        "",
    ]
    for name, sp in subs.items():
        lines += _parser_section(f"moeopt {name}", f"moeopt {name}", sp)
    return lines


# --------------------------------------------------------------------------- measured inputs
def measured_section() -> list[str]:
    from moeopt.trace.mapping import KEY_DOCS, KEYS
    from moeopt.trace.timeline import COLUMNS, UNIT_KINDS

    _check_prose("trace mapping keys", KEY_DOCS, KEYS)
    example = (REPO / "examples" / "trace_mapping.toml").read_text(encoding="utf-8").rstrip("\n")
    lines = [
        "## Measured inputs of trace-compare",
        "",
        "`moeopt trace-compare [SCENARIO] MEASURED` compares the predicted schedule with what was "
        "measured, stage by stage (and with `--units`, expert by expert). MEASURED is one of:",
        "",
        "* a **stage timeline**: CSV with the columns "
        + ", ".join(_code(c) for c in COLUMNS)
        + " (`unit` = an expert `e3`, a segment `seg1`, or `*` for the whole stage; times in µs from "
        "the kernel's start), `# key: value` metadata lines before the header; or JSON "
        '`{"meta": {...}, "rows": [{"stage": ..., "unit": ..., "group": ..., "start_us": ..., '
        '"end_us": ...}]}`. Metadata `kernel_us` is the measured kernel time, `units` is '
        + " or ".join(_code(u) for u in UNIT_KINDS)
        + " (unit bars that overlap, or drawn back to back: then only their ends are compared); "
        "with the profile and shape keys (`profile`, `tokens`, `world`, `topk`, `local_experts`, "
        "`h`, `hidden_dim`, `routing`) the scenario file may be left out. The two calibration "
        "timelines of the kernel ship in `moeopt/trust/timelines/`;",
        "* a **profiler's Chrome trace** (JSON, or gzip) with `--mapping FILE`, a TOML or YAML file "
        "saying which events give which stage and unit (below); times may be numbers or strings;",
        "* a **Chrome trace moeopt exported** (`moeopt trace`), without `--mapping`: compared event "
        "by event (counts, order, cores, durations).",
        "",
        "`--check` exits 1 when a measured stage's start or end is further from the prediction than "
        "`--tolerance` (µs, or `N%` of the measured span), or the model lacks a measured stage.",
        "",
        "Keys of a mapping file (all optional but one of `stage_arg`, `stage_regex`):",
        "",
    ]
    lines += _table(["key", "meaning"], [[_code(k), KEY_DOCS[k]] for k in KEYS])
    lines += ["", "An example (`examples/trace_mapping.toml`):", "", "```toml", example, "```", ""]
    return lines


# --------------------------------------------------------------------------- scenario
def _knobs() -> Any:
    try:
        from moeopt.megamoe import knobs
    except ImportError:
        return None
    return knobs.knob_catalogue()


def knob_paths() -> list[str]:
    """Every knob path usage.md lists (the knob audit's catalogue); empty without the catalogue."""
    cat = _knobs()
    return [] if cat is None else [k.path for k in cat]


def _allowed_text(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    if isinstance(v, (list, tuple, frozenset, set)):
        items = sorted(v, key=str) if isinstance(v, (set, frozenset)) else list(v)
        return ", ".join(_code(repr(x) if isinstance(x, str) else str(x)) for x in items)
    return str(v)


def _default_text(v: Any) -> str:
    if isinstance(v, float):
        return _code(_num(v))
    if isinstance(v, bool):
        return _code("true" if v else "false")
    if v is None:
        return ""
    return _code(repr(v) if isinstance(v, str) else str(v))


def scenario_section() -> list[str]:
    from moeopt.megamoe.scenario import SECTIONS, TOP_FIELDS

    lines = [
        "## Scenario files",
        "",
        "A scenario is a TOML file (or `moeopt.Scenario(...)`): top-level fields "
        + ", ".join(_code(f) for f in TOP_FIELDS if f not in SECTIONS and f != "calibration")
        + ", and the tables "
        + ", ".join(_code(f"[{f}]") for f in TOP_FIELDS if f in SECTIONS or f == "calibration")
        + ". Every field is reachable as a dotted path: `--set kernel.tile_n=128` on the command "
        "line, `overrides={\"kernel.tile_n\": 128}` in `load_scenario`, a key of a study's `space`. "
        "A table given for a table (`--set 'policy={scheduling = \"critical_path_first\"}'`, "
        "`overrides={\"policy\": {...}}`) is merged key by key, like the dotted form: the keys it "
        "does not name keep the file's values. "
        "An unknown field fails with the closest names; a value the model cannot represent "
        "fails with `NotModelledError` instead of being ignored. Unset knobs take the profile's value, "
        "then the global default.",
        "",
        "`h` is the model hidden size (GMM1's K, GMM2's N); `hidden_dim` is GMM1's output width = "
        "2 x the intermediate size (SwiGLU gate + up). A run labelled `h5120_i4608` is "
        "`h = 5120, hidden_dim = 9216`.",
        "",
    ]
    cat = _knobs()
    lines += ["### Knobs", ""]
    if cat is None:
        lines += ["(The knob catalogue `moeopt.megamoe.knobs` is not available in this version.)", ""]
    else:
        lines += [
            "Every knob the knob audit (`moeopt.megamoe.knobs.knob_catalogue()`) knows, in its order. "
            "Default: the global default when no profile sets one.",
            "",
        ]
        by_section: dict[str, list[Any]] = {}
        for k in cat:
            by_section.setdefault(k.section if k.section not in ("", "top") else "top level", []).append(k)
        for section, ks in by_section.items():
            lines += [f"#### {section}", ""]
            lines += _table(
                ["path", "type", "allowed", "default", "meaning"],
                [
                    [_code(k.path), k.type, _allowed_text(k.allowed), _default_text(k.default), k.doc]
                    for k in ks
                ],
            )
    return lines


def constants_section() -> list[str]:
    from moeopt.megamoe.config.profiles import CONSTANTS, IMPLEMENTATIONS, PROFILES, profile_constants

    profiles: list[str | None] = [*PROFILES, None]
    consts = {p: profile_constants(p) for p in profiles}
    lines = [
        "## Profiles and constants",
        "",
        "A profile is a bundle of constants and knob defaults reproducing one implementation; "
        "no profile means the fewest assumptions (A3 spec values, zero latencies) and reproduces "
        "nothing. Every constant can be replaced in a scenario's `[calibration]` table (it is then "
        "tagged `assumed`). Cells: value and provenance tag; `-` = the profile has no value "
        "(a scenario must set it).",
        "",
    ]
    rows = []
    for p in profiles:
        impl = IMPLEMENTATIONS.get(p, IMPLEMENTATIONS[None])
        dom = impl["domain"]
        rows.append([_code(str(p)) if p else "(none)", _code(impl["id"]), _code(dom.id) if dom else "-"])
    lines += _table(["profile", "implementation", "calibration domain"], rows)
    head = ["constant", "unit", "meaning", *[p or "(none)" for p in profiles]]
    rows = []
    for name, (unit, meaning) in CONSTANTS.items():
        cells = []
        for p in profiles:
            c = consts[p].get(name)
            cells.append("-" if c is None else f"{_num(c.value)} ({c.tag})")
        rows.append([_code(name), unit, meaning, *cells])
    lines += _table(head, rows)
    return lines


def registry_section() -> list[str]:
    from moeopt import registry
    from moeopt.megamoe import build  # noqa: F401  (registers the built-in names)

    where = {
        "policy": "`policy.scheduling`, `moeopt.schedule(g, policy=...)`, `gap --policies`",
        "tile_grid": "`options.tile_grid`",
        "core_assignment": "`policy.core_assignment`",
        "wave_packer": "`policy.wave_packing`",
        "builder": "`options.builder`",
        "restructure": "`policy.restructure` (a MegaMoE adapter rule giving a `moeopt.Restructure` hook "
        "per rank graph)",
    }
    _check_prose("registry kinds", where, registry.KINDS)
    lines = [
        "## Registered names",
        "",
        "Pluggable parts are named; `moeopt.register(kind, name, factory)` adds one without editing "
        "the package.",
        "",
    ]
    rows = [[_code(k), where[k], ", ".join(_code(n) for n in registry.names(k))] for k in registry.KINDS]
    return lines + _table(["kind", "used by", "built-in names"], rows)


# --------------------------------------------------------------------------- study files
def study_section() -> list[str]:
    import moeopt.search.config as sc

    groups = [
        ("top level", STUDY_TOP, sc.TOP_FIELDS),
        ("`shapes[]`", STUDY_SHAPE, sc.SHAPE_FIELDS),
        ("`space.<dotted.path>` (a parameter)", STUDY_PARAM, sc.PARAM_FIELDS),
        ("`objective`", STUDY_OBJECTIVE, sc.OBJECTIVE_FIELDS),
        ("`secondary[]`", STUDY_SECONDARY, sc.SECONDARY_FIELDS),
        ("`prune`", STUDY_PRUNE, sc.PRUNE_FIELDS),
        ("`outputs`", STUDY_OUTPUTS, sc.OUTPUT_FIELDS),
        ("`outputs.exact_gap`, `objective.exact`", STUDY_EXACT, sc.EXACT_FIELDS),
    ]
    doc = sc.__doc__ or ""
    example = doc.split("::", 1)[1].split("\n\n", 2)[1] if "::" in doc else ""
    lines = [
        "## Study files",
        "",
        "A study is YAML (or the same mapping passed to `moeopt.run_study`). Every key, from "
        "`moeopt/search/config.py`:",
        "",
        "```yaml",
        *[ln[4:] if ln.startswith("    ") else ln for ln in example.splitlines()],
        "```",
        "",
    ]
    for title, prose, keys in groups:
        _check_prose(f"study {title}", prose, keys)
        lines += [f"### {title}", ""]
        lines += _table(["key", "meaning"], [[_code(k), prose[k]] for k in keys])
    lines += ["### Metrics (`objective.metric`, `secondary[].metric`)", ""]
    lines += _table(["metric", "what it measures"], [[_code(k), v] for k, v in sc.METRICS.items()])
    lines += ["### Samplers", ""]
    lines += _table(
        ["sampler", "Optuna class", "extra packages"],
        [[_code(k), _code(cls), ", ".join(pk) or "-"] for k, (cls, pk) in sc.SAMPLERS.items()],
    )
    lines += [
        "Other value sets: `aggregate` "
        + " | ".join(_code(x) for x in sc.AGGREGATES)
        + "; `objective.statistic` "
        + " | ".join(_code(x) for x in sc.STATISTICS)
        + "; `direction` "
        + " | ".join(_code(x) for x in sc.DIRECTIONS)
        + "; `prune.lower_bound` "
        + " | ".join(_code(x) for x in sc.LOWER_BOUND_MODES)
        + "; exact `mode` "
        + " | ".join(_code(x) for x in sc.EXACT_MODES)
        + ".",
        "",
    ]
    return lines


# --------------------------------------------------------------------------- tables typed by a sample
def _type_name(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "str"
    if v is None:
        return "null"
    if isinstance(v, Mapping):
        return "mapping"
    if isinstance(v, (list, tuple)):
        return "list"
    return type(v).__name__


def _fields_table(title: str, prose: Mapping[str, str], sample: Mapping[str, Any]) -> list[str]:
    _check_prose(title, prose, sample.keys())
    return _table(["key", "type", "meaning"], [[_code(k), _type_name(sample[k]), prose[k]] for k in sample])


# --------------------------------------------------------------------------- the simulate result
RESULT_PARTS: tuple[tuple[str, str], ...] = (
    # (heading, TypedDict of moeopt.megamoe.results), in the order of the page; the first is the
    # result itself, under the section's own heading
    ("", "SimulateResult"),
    ('`r["rank_results"][rank]`', "RankResult"),
    ("`bounds`", "Bounds"),
    ("`floors`", "Floors"),
    ("`idle_decomposition`", "IdleDecomposition"),
    ('`idle_decomposition["by_role"][role]`', "RoleIdle"),
    ('`idle_decomposition["by_stage"][stage]`', "StageIdle"),
    ('`idle_decomposition["samples"][i]`', "IdleSample"),
    ("`critical_path[i]`", "CriticalStep"),
    ('`rank_results[rank]["events"][i]`', "EventRow"),
    ('`rank_results[rank]["contract"]`', "RowContract"),
    ('`rank_results[rank]["waves"]`', "Waves"),
    ('`rank_results[rank]["paths"]`', "Paths"),
    ("`calibration`", "Calibration"),
    ('`calibration["domain"]`', "CalibrationDomainEntry"),
    ("`implementation`", "Implementation"),
    ('`implementation["compile_point"]`', "CompilePoint"),
    ('`implementation["topology"]`', "Topology"),
    ("`provenance[name]`", "ConstantEntry"),
)


class _KeyDocs:
    """The documentation string under each key of the classes of one module, read from its
    source (a string statement right after the key's annotation), and each class's bases."""

    def __init__(self, module: types.ModuleType) -> None:
        self._own: dict[str, dict[str, str]] = {}
        self._bases: dict[str, list[str]] = {}
        for node in ast.parse(inspect.getsource(module)).body:
            if not isinstance(node, ast.ClassDef):
                continue
            self._bases[node.name] = [b.id for b in node.bases if isinstance(b, ast.Name)]
            docs: dict[str, str] = {}
            for k, stmt in enumerate(node.body):
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    after = node.body[k + 1] if k + 1 < len(node.body) else None
                    text = ""
                    if (
                        isinstance(after, ast.Expr)
                        and isinstance(after.value, ast.Constant)
                        and isinstance(after.value.value, str)
                    ):
                        text = after.value.value
                    docs[stmt.target.id] = _markdown(text)
            self._own[node.name] = docs

    def doc(self, cls: str, key: str) -> str:
        """The documentation of ``key`` in ``cls`` or the base that declares it ("" if none)."""
        if key in self._own.get(cls, {}):
            return self._own[cls][key]
        for base in self._bases.get(cls, []):
            text = self.doc(base, key)
            if text:
                return text
        return ""


def _markdown(text: str) -> str:
    """A docstring's reST inline markup as Markdown, on one line: ``x`` and :func:`~a.x` -> `x`."""
    text = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", " ".join(text.split()))
    return text.replace("``", "`")


def _type_text(tp: Any) -> str:
    """A type as the page shows it: ``dict[int, RankResult]``, ``str | None``, a literal's
    values as ``'a' | 'b'``."""
    origin, args = get_origin(tp), get_args(tp)
    if tp is type(None):
        return "None"
    if origin is Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (Union, types.UnionType):
        return " | ".join(_type_text(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(_type_text(a) for a in args)}]"
    return str(getattr(tp, "__name__", tp))


def _typeddicts_in(tp: Any, seen: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every TypedDict reachable from ``tp`` through its keys' types, by name."""
    seen = {} if seen is None else seen
    if is_typeddict(tp):
        if tp.__name__ in seen:
            return seen
        seen[tp.__name__] = tp
        for hint in get_type_hints(tp).values():
            _typeddicts_in(hint, seen)
    for arg in get_args(tp):
        _typeddicts_in(arg, seen)
    return seen


def result_problems(value: Any, tp: Any = None, where: str = "r") -> list[str]:
    """Where ``value`` differs from the type ``tp`` (default: the ``SimulateResult`` TypedDict):
    a missing or unknown key, or a value of another type (an int is a float; a bool is neither).
    Empty when it conforms. A list or a mapping reports its first wrong item only."""
    if tp is None:
        from moeopt.megamoe.results import SimulateResult

        tp = SimulateResult
    origin, args = get_origin(tp), get_args(tp)
    if is_typeddict(tp):
        if not isinstance(value, Mapping):
            return [f"{where}: {type(value).__name__}, expected a mapping ({tp.__name__})"]
        hints = get_type_hints(tp)
        required = tp.__required_keys__
        out = [f"{where}: no key {k!r} ({tp.__name__})" for k in hints if k in required and k not in value]
        out += [f"{where}: key {k!r} is not in {tp.__name__}" for k in value if k not in hints]
        for k, v in value.items():
            if k in hints:
                out += result_problems(v, hints[k], f"{where}[{k!r}]")
        return out
    if tp is Any or tp is object:
        return []
    if origin is Literal:
        return [] if value in args else [f"{where}: {value!r}, expected one of {_type_text(tp)}"]
    if origin in (Union, types.UnionType):
        if any(not result_problems(value, a, where) for a in args):
            return []
        return [f"{where}: {type(value).__name__} {value!r:.60}, expected {_type_text(tp)}"]
    if tp is type(None):
        return [] if value is None else [f"{where}: {type(value).__name__}, expected None"]
    if origin is dict:
        if not isinstance(value, Mapping):
            return [f"{where}: {type(value).__name__}, expected {_type_text(tp)}"]
        for k, v in value.items():
            bad = result_problems(k, args[0], f"{where} key {k!r}") + result_problems(
                v, args[1], f"{where}[{k!r}]"
            )
            if bad:
                return bad
        return []
    if origin in (list, Sequence):
        if not isinstance(value, list if origin is list else Sequence) or isinstance(value, str):
            return [f"{where}: {type(value).__name__}, expected {_type_text(tp)}"]
        for i, v in enumerate(value):
            bad = result_problems(v, args[0], f"{where}[{i}]")
            if bad:
                return bad
        return []
    if tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, tp)
    return [] if ok else [f"{where}: {type(value).__name__} {value!r:.60}, expected {_type_text(tp)}"]


def _typed_table(td: Any, docs: _KeyDocs) -> list[str]:
    hints = get_type_hints(td)
    rows = []
    for key in td.__annotations__:
        text = docs.doc(td.__name__, key)
        if not text:
            raise DocsDriftError(
                f"gen_docs: key {key!r} of {td.__name__} has no documentation string "
                "(write one under it in moeopt/megamoe/results.py)"
            )
        kind = _code(_type_text(hints[key])) + (", optional" if key in td.__optional_keys__ else "")
        rows.append([_code(key), kind, text])
    return _table(["key", "type", "meaning"], rows)


def result_section() -> list[str]:
    from moeopt.megamoe import load_scenario, results, simulate

    problems = result_problems(simulate(load_scenario(BASIC_SCENARIO)))
    if problems:
        raise DocsDriftError(
            "gen_docs: a result of examples/scenario_basic.toml does not match the TypedDicts of "
            "moeopt/megamoe/results.py: " + "; ".join(problems[:10]) + (" ..." if len(problems) > 10 else "")
        )
    listed = [name for _heading, name in RESULT_PARTS]
    unlisted = sorted(set(_typeddicts_in(results.SimulateResult)) - set(listed))
    if unlisted:
        raise DocsDriftError(f"gen_docs: no section for {', '.join(unlisted)} (add it to RESULT_PARTS)")
    docs = _KeyDocs(results)
    lines = [
        "## The `simulate` result",
        "",
        "`r = moeopt.simulate(scenario, check_bounds=True, check_work_conservation=True, validate=True)` "
        "returns a dict; `python -m moeopt simulate FILE --json` prints the same without the per-rank "
        "`events`, `schedule` and `graph` (each rank then carries `schedule_fingerprint`). Each table "
        "below is a `TypedDict` of `moeopt.megamoe.results` (plain dicts at run time): its keys in "
        "order, their types, and the documentation under each key. Annotate code that reads a result "
        "with them (`from moeopt.megamoe import SimulateResult`, then `r: SimulateResult`) and mypy "
        "checks every key it reads.",
        "",
    ]
    for heading, name in RESULT_PARTS:
        td = getattr(results, name)
        if heading:
            lines += [f"### {heading}", ""]
        if not td.__doc__:
            raise DocsDriftError(f"gen_docs: {name} in moeopt/megamoe/results.py has no docstring")
        lines += [f"`{name}`: {_markdown(td.__doc__)}", ""]
        lines += _typed_table(td, docs)
    return lines


def gap_section() -> list[str]:
    from moeopt.megamoe import load_scenario
    from moeopt.trust.gap import optimality_gap

    d = optimality_gap(load_scenario(BASIC_SCENARIO.parent / "scenario_bs72.toml")).to_dict()
    lines = [
        "## The gap report",
        "",
        "`moeopt.optimality_gap(scenario, time_limit_s=30, workers=1, mode=\"auto\")` returns a report "
        "whose `to_dict()` is one entry of `reports` in what `python -m moeopt gap SCENARIO.toml --json` "
        "writes (PSPLIB inputs go to `results`, failed inputs to `errors`). Types as in a real report "
        "of `examples/scenario_bs72.toml`:",
        "",
    ]
    lines += _fields_table("gap report", GAP_TOP, d)
    lines += ["### `ranks[i]`", ""]
    lines += _fields_table("gap report rank", GAP_RANK, d["ranks"][0])
    return lines


# --------------------------------------------------------------------------- the document
def generate_usage() -> str:
    """The complete text of ``docs/usage.md``."""
    lines = [
        "# Usage reference",
        "",
        f"<!-- GENERATED by `{REGEN_COMMAND}` from the code's own schema: do not edit by hand. "
        "tests/docs/test_usage_generated.py fails when this file and the code disagree. -->",
        "",
        "Everything a scenario, a study or a command accepts, generated from the parsers and schemas "
        "in the code. For what the numbers mean, see [method.md](method.md); for a first run, the "
        "[README](../README.md).",
        "",
        "Contents: [command line](#command-line) · [measured inputs](#measured-inputs-of-trace-compare) · "
        "[scenario files](#scenario-files) · "
        "[profiles and constants](#profiles-and-constants) · [registered names](#registered-names) · "
        "[study files](#study-files) · [the simulate result](#the-simulate-result) · "
        "[the gap report](#the-gap-report)",
        "",
    ]
    for part in (
        cli_section,
        measured_section,
        scenario_section,
        constants_section,
        registry_section,
        study_section,
        result_section,
        gap_section,
    ):
        lines += part()
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python tools/gen_docs.py", description="Generate docs/usage.md.")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", action="store_true", help="rewrite the file")
    g.add_argument("--check", action="store_true", help="exit 1 when the file differs from the code")
    p.add_argument("--out", default=str(USAGE_MD), metavar="PATH", help="the file (default docs/usage.md)")
    args = p.parse_args(argv)
    try:
        text = generate_usage()
    except MoeoptError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    path = Path(args.out)
    if args.write:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        sys.stdout.write(f"wrote {path}\n")
        return 0
    current = path.read_text(encoding="utf-8") if path.is_file() else ""
    if current != text:
        sys.stderr.write(f"{path} is out of date; run: {REGEN_COMMAND}\n")
        return 1
    sys.stdout.write(f"{path} is up to date\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["DocsDriftError", "generate_usage", "knob_paths", "main", "result_problems"]
