"""Generate ``docs/usage.md`` from the code's own schema, so the reference cannot drift.

``python -m moeopt.docs_gen --write`` rewrites the file; ``--check`` exits 1 when the checked-in
file differs from what the code generates now (the test ``tests/docs/test_usage_generated.py``
does the same).

What comes from where:

* command line: the argparse parsers themselves (:func:`moeopt.cli.build_parser` and the parser
  of ``python -m moeopt.search``): every command, argument, default and choice;
* scenario knobs: :func:`moeopt.megamoe.knobs.knob_catalogue`, the list the knob audit walks;
* constants: :data:`~moeopt.megamoe.config.profiles.CONSTANTS` and each profile's values with
  their provenance tags; registered names: :mod:`moeopt.registry`;
* study files: the field tuples and tables of :mod:`moeopt.search.config` (metrics, samplers,
  aggregates ...); the prose for each key is written here, and a key without prose, or prose for
  a key the code no longer has, fails the generation (:class:`DocsDriftError`);
* the ``simulate`` result: the keys of a real result of ``examples/scenario_basic.toml``, with
  prose written here under the same rule.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from moeopt.errors import MoeoptError

REPO = Path(__file__).resolve().parents[1]
USAGE_MD = REPO / "docs" / "usage.md"
BASIC_SCENARIO = REPO / "examples" / "scenario_basic.toml"
REGEN_COMMAND = "python -m moeopt.docs_gen --write"


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
    "lower_bound": "`auto` (default: check the first points, keep checking while it prunes), "
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

RESULT_TOP: dict[str, str] = {
    "kernel_total_us": "execution time: end of the last combine on the slowest rank (µs)",
    "kernel_dag_end_us": "the same including the unpermute tail after the cross-rank barrier (µs)",
    "slowest_rank": "the rank whose `kernel_total_us` is the time (lowest index on ties)",
    "rank_results": "rank -> that rank's result (below); ranks with one routing signature share one dict",
    "bounds": "the slowest rank's physical lower bounds (below)",
    "idle_decomposition": "the slowest rank's forced / avoidable idle (below)",
    "critical_path": "the slowest rank's critical path, event by event from the start (below)",
    "traffic_bytes": "bytes moved per channel on the slowest rank (gm_to_l1, hbm, remote_in, "
    "remote_out, gm_to_ub, ub_to_gm)",
    "stage_busy_us": "busy core-µs per stage (head and tail included) on the slowest rank",
    "resource_busy_us": "busy µs per resource (`c<k>.AIC`, `c<k>.MTE2`, `c<k>.AIV0`, `c<k>.AIV1`)",
    "resource_idle_us": "idle µs per resource within the rank's span",
    "resource_utilization": "busy / span per resource (0..1)",
    "role_utilization": "busy / span summed over the resources of a role (AIC, AIV0, AIV1, MTE2)",
    "implementation": "implementation id, profile, source references, compile point and its "
    "fingerprint, topology",
    "policy": "name of the scheduling policy used",
    "calibration": "calibration domain of the profile and whether this result is inside it",
    "out_of_domain": "true when the result lies outside the calibration domain (reasons in `calibration`)",
    "provenance": "every constant used: value, unit, provenance tag (`spec`/`algo`/`impl`/`measured`/"
    "`assumed`), source, calibration domain",
    "simulated_ranks": "representative ranks actually simulated (one per routing signature)",
}
RESULT_RANK: dict[str, str] = {
    "rank": "this rank",
    "kernel_total_us": "end of this rank's last combine (µs)",
    "kernel_dag_end_us": "this rank's end including the unpermute tail (µs)",
    "tail_end_us": "end of the tail event in this rank's own schedule (µs)",
    "tail_us": "duration of the unpermute tail (µs)",
    "head_us": "duration of the front reorder head (µs)",
    "events": "one row per event, in graph order (a sequence built on first access; fields below)",
    "bounds": "physical lower bounds of this rank (fields below)",
    "idle_decomposition": "forced / avoidable idle of this rank (fields below)",
    "critical_path": "critical path of this rank (fields below)",
    "traffic_bytes": "bytes per channel of this rank",
    "contract": "grouped-GEMM row contract: group_sizes, group_offsets, group_padded_offsets, m_blocks",
    "waves": "number of GMM1 and GMM2 waves",
    "n_events": "events in this rank's graph",
    "schedule": "the greedy `moeopt.Schedule` (starts, ends, bindings, waits, fingerprint())",
    "graph": "the `moeopt.EventGraph` that was scheduled",
    "resource_busy_us": "busy µs per resource",
    "resource_idle_us": "idle µs per resource",
    "resource_utilization": "busy / span per resource",
    "role_utilization": "busy / span per role",
    "stage_busy_us": "busy core-µs per stage",
    "ranks_sharing_signature": "every rank this result stands for",
}
RESULT_BOUNDS: dict[str, str] = {
    "compute_us": "MACs / (cube cores x cube rate)",
    "bandwidth_us": "the largest per-channel bandwidth bound",
    "bandwidth_channel": "which channel gives it (hbm, remote_in, remote_out)",
    "bandwidth_by_channel_us": "channel -> bytes the algorithm must move / the channel's aggregate rate",
    "dependency_us": "longest data-dependency chain to the last combine (durations + λ, unlimited cores)",
    "binding": "the largest of the three: compute, bandwidth or dependency",
    "lower_bound_us": "its value",
    "excess_pct": "how far the time is above it, in %",
    "violated": "the time is below it (only with check_bounds=False; else BoundViolation)",
}
RESULT_IDLE: dict[str, str] = {
    "forced_core_us": "idle core-µs while no ready work could use the idle member (forced by the DAG)",
    "avoidable_core_us": "idle core-µs while ready work could have used it",
    "by_stage": "stage pool -> {forced_core_us, avoidable_core_us, late_bound, work_conservation_exempt}",
    "samples": "sample avoidable-idle intervals (stage, member, from_us, to_us ...)",
}
RESULT_IDLE_STAGE: dict[str, str] = {
    "forced_core_us": "forced idle of this pool",
    "avoidable_core_us": "avoidable idle of this pool",
    "late_bound": "the pool binds at dispatch time (else statically pinned)",
    "work_conservation_exempt": "why the guardrail does not check it (e.g. colocated), or null",
}
RESULT_CRITICAL: dict[str, str] = {
    "event": "event name",
    "stage": "its stage label",
    "start_us": "start (µs)",
    "end_us": "end (µs)",
    "resources": "resources it held",
    "why": "what set its start: `source`, `dependency`, `resource` or `semaphore`",
    "wait_us": "how long it waited past its dependencies",
    "lambda_us": "the sync latency λ of the edge that set it (dependency steps)",
    "after": "the event it waited for",
}
RESULT_EVENT: dict[str, str] = {
    "name": "event name",
    "stage": "stage label",
    "start_us": "start (µs)",
    "end_us": "end (µs)",
    "core": "resources it held, joined with `+`",
    "waited_for": "the predecessor, resource or semaphore that set its start",
    "wait_kind": "`none`, `dependency`, `resource` or `semaphore`",
    "wait_us": "how long it waited after its dependencies were met",
    "ready_us": "when its dependencies (plus λ) were met",
}
RESULT_CALIBRATION: dict[str, str] = {
    "domain": "the calibration domain (id, implementation, compile point, shape, topology, note) or null",
    "out_of_domain": "true when any reason below applies",
    "reasons": "why the result is outside the domain",
    "overridden_constants": "constants the scenario's `[calibration]` replaced",
}
RESULT_IMPLEMENTATION: dict[str, str] = {
    "id": "implementation id (`<profile>.<variant>`, `generic` without a profile)",
    "profile": "the profile name or null",
    "source_refs": "kernel source references (`file@rev:lines`) the model was read from",
    "compile_fingerprint": "12 hex digits hashing the compile point",
    "compile_point": "tile_m, tile_n, tile_k, l1_stages, quant, topo_urma, swizzle_n",
    "topology": "world, aic_num, aiv_num",
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
    "exact": "the full `moeopt.ExactResult` of the solve (status, bounds_us, params_used, ...)",
}


def _check_prose(what: str, prose: Mapping[str, str], keys: Iterable[str]) -> None:
    have, need = set(prose), set(keys)
    missing, extra = sorted(need - have), sorted(have - need)
    if missing or extra:
        raise DocsDriftError(
            f"docs_gen: {what}: "
            + (f"no prose for {', '.join(missing)}" if missing else "")
            + ("; " if missing and extra else "")
            + (f"prose for keys the code does not have: {', '.join(extra)}" if extra else "")
            + " (edit moeopt/docs_gen.py, then run " + REGEN_COMMAND + ")"
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
    actions = [a for a in p._actions if not isinstance(a, argparse._HelpAction)]
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
    from moeopt.search.__main__ import _parser as search_parser

    main = build_parser()
    subs = _subcommands(main)
    lines = [
        "## Command line",
        "",
        "Exit codes of `python -m moeopt COMMAND`: 0 ok, 1 some input failed or a guardrail fired, "
        "2 bad input or usage (one `error:` line, no traceback; `--debug` shows it). "
        "`python -m moeopt.search`: 0 done, 2 bad input, 130 interrupted (continue with `--resume`), "
        "1 internal error.",
        "",
        "Commands of `python -m moeopt`: " + ", ".join(f"[`{n}`](#python--m-moeopt-{n})" for n in subs) + ".",
        "",
    ]
    for name, sp in subs.items():
        lines += _parser_section(f"python -m moeopt {name}", f"python -m moeopt {name}", sp)
    lines += _parser_section("python -m moeopt.search", "python -m moeopt.search", search_parser())
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
    from moeopt.megamoe import builders  # noqa: F401  (registers the built-in names)

    where = {
        "policy": "`policy.scheduling`, `moeopt.schedule(g, policy=...)`, `gap --policies`",
        "tile_grid": "`options.tile_grid`",
        "core_assignment": "`policy.core_assignment`",
        "wave_packer": "`policy.wave_packing`",
        "builder": "`options.builder`",
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


# --------------------------------------------------------------------------- result dict
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


def result_section() -> list[str]:
    from moeopt.megamoe import load_scenario, simulate

    r = simulate(load_scenario(BASIC_SCENARIO))
    rr = r["rank_results"][r["slowest_rank"]]
    crit: dict[str, Any] = {}
    for step in rr["critical_path"]:
        for k, v in step.items():
            crit.setdefault(k, v)
    events = rr["events"]
    first_event = events[0]
    stage_idle = next(iter(rr["idle_decomposition"]["by_stage"].values()))
    lines = [
        "## The `simulate` result",
        "",
        "`r = moeopt.simulate(scenario, check_bounds=True, check_work_conservation=True, validate=True)` "
        "returns a dict; `python -m moeopt simulate FILE --json` prints the same without the per-rank "
        "`events`, `schedule` and `graph` (each rank then carries `schedule_fingerprint`). Keys in order, "
        "types as in a real result of `examples/scenario_basic.toml`:",
        "",
    ]
    lines += _fields_table("result", RESULT_TOP, r)
    lines += ["### `r[\"rank_results\"][rank]`", ""]
    lines += _fields_table("rank result", RESULT_RANK, rr)
    lines += ["### `bounds`", ""]
    lines += _fields_table("bounds", RESULT_BOUNDS, rr["bounds"])
    lines += ["### `idle_decomposition`", ""]
    lines += _fields_table("idle_decomposition", RESULT_IDLE, rr["idle_decomposition"])
    lines += ["### `idle_decomposition[\"by_stage\"][stage]`", ""]
    lines += _fields_table("idle by stage", RESULT_IDLE_STAGE, stage_idle)
    lines += ["### `critical_path[i]`", ""]
    lines += _fields_table("critical path step", RESULT_CRITICAL, crit)
    lines += ["### `rank_results[rank][\"events\"][i]`", ""]
    lines += _fields_table("event row", RESULT_EVENT, first_event)
    lines += ["### `calibration`", ""]
    lines += _fields_table("calibration", RESULT_CALIBRATION, r["calibration"])
    lines += ["### `implementation`", ""]
    lines += _fields_table("implementation", RESULT_IMPLEMENTATION, r["implementation"])
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
        "Contents: [command line](#command-line) · [scenario files](#scenario-files) · "
        "[profiles and constants](#profiles-and-constants) · [registered names](#registered-names) · "
        "[study files](#study-files) · [the simulate result](#the-simulate-result) · "
        "[the gap report](#the-gap-report)",
        "",
    ]
    for part in (
        cli_section,
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
    p = argparse.ArgumentParser(prog="python -m moeopt.docs_gen", description="Generate docs/usage.md.")
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


__all__ = ["DocsDriftError", "generate_usage", "knob_paths", "main"]
