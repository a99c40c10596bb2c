"""The trust-tool subcommands of ``python -m moeopt``: ``compare``, ``audit``, ``domain``, ``conserving``.

``compare SCENARIO VARIANTS.yaml [--exact] [--sensitivity] [--json PATH]``
    The design-space table of :func:`~moeopt.trust.compare.compare_variants`; the YAML file
    maps a variant name to ``{dotted.path: value}`` (the first variant is the baseline). A
    progress bar on standard error while the variants run. ``--sensitivity`` adds the
    calibration intervals and flips (:mod:`moeopt.trust.sensitivity`).

``audit [SCENARIO] [--only PATH ...]``
    Every knob of the catalogue classified by perturbing it (:mod:`moeopt.trust.audit`);
    without a scenario, the bs = 72 shape of the original cost model's example.

``domain SCENARIO``
    Which constants the scenario uses outside the domain they were measured in.

``conserving [SCENARIO ...] [--only NAME ...]``
    Work conservation with every pool late-bound (:mod:`moeopt.trust.conserving`): the given
    scenarios, or every golden configuration; exit 1 on any violation.

Exit codes: 0 ok, 1 the baseline was stopped by a guardrail, 2 bad input.
"""

from __future__ import annotations

import argparse
from typing import Any

import yaml

from moeopt.cli.common import (
    Command,
    add_json_argument,
    add_quiet_argument,
    add_set_argument,
    emit,
    guarded,
    nonneg_float,
    nonneg_int,
    parse_sets,
    progress_bar,
    text_stream,
    write_json,
)
from moeopt.errors import InputError
from moeopt.megamoe.scenario import Scenario, Workload, load_scenario

SEED_BS72 = "the bs=72 example shape (h 5120, hidden_dim 9216, topk 6, 8 ranks, 3 experts/rank, megamoe-a8w8)"


def seed_bs72() -> Scenario:
    """The bs = 72 example shape of the original cost model (also ``studies/seed000_bs72.yaml``)."""
    return Scenario(
        workload=Workload(tokens=72, topk=6, world=8, local_experts=3, routing="uniform"),
        h=5120,
        hidden_dim=9216,
        aic_num=28,
        profile="megamoe-a8w8",
    )


def load_variants(path: str) -> dict[str, dict[str, Any]]:
    """A variants YAML file: ``name: {dotted.path: value}`` (or the same under ``variants:``)."""
    from moeopt.trust.compare import check_variants

    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except FileNotFoundError:
        raise InputError(f"{path}: no such variants file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML: {str(exc).splitlines()[0]}") from None
    if isinstance(data, dict) and set(data) == {"variants"}:
        data = data["variants"]
    return check_variants(data, where=path)


def _scenario_arg(p: argparse.ArgumentParser, optional: bool = False) -> None:
    if optional:
        p.add_argument(
            "scenario", nargs="?", metavar="SCENARIO", help=f"scenario TOML (default: {SEED_BS72})"
        )
    else:
        p.add_argument("scenario", metavar="SCENARIO", help="scenario TOML file")
    add_set_argument(p)


def _load(args: argparse.Namespace) -> Scenario:
    if getattr(args, "scenario", None) is None:
        base = seed_bs72()
        return base.with_overrides(parse_sets(args.set)) if args.set else base
    return load_scenario(args.scenario, parse_sets(args.set))


# --------------------------------------------------------------------------- compare
def _compare_arguments(p: argparse.ArgumentParser) -> None:
    _scenario_arg(p)
    p.add_argument(
        "variants", metavar="VARIANTS", help="YAML: name -> {dotted.path: value}; the first is the baseline"
    )
    p.add_argument(
        "--exact", action="store_true", help="add the CP-SAT column (anomaly-free optimum per variant)"
    )
    p.add_argument(
        "--time-limit", type=nonneg_float, default=10.0, metavar="S", help="CP-SAT seconds per variant"
    )
    p.add_argument("--workers", type=nonneg_int, default=1, help="CP-SAT worker threads (default 1)")
    p.add_argument(
        "--noise-pct",
        type=nonneg_float,
        metavar="PCT",
        help="fixed noise threshold in percent (default: measured per row by 0.01 µs perturbations)",
    )
    p.add_argument("--probes", type=nonneg_int, default=8, help="critical-path events perturbed per variant")
    p.add_argument(
        "--sensitivity", action="store_true", help="add calibration-uncertainty intervals and flips"
    )
    p.add_argument(
        "--range",
        action="append",
        metavar="NAME=LO:HI",
        help="calibration range of one constant for --sensitivity (default: measured ±10%%, assumed ±50%%)",
    )
    p.add_argument(
        "--rel",
        action="append",
        metavar="TAG=FRACTION",
        help="default relative range of a tag for --sensitivity, e.g. --rel measured=0.05",
    )
    add_json_argument(p, "the rows")
    add_quiet_argument(p)


def _compare_run(args: argparse.Namespace) -> int:
    from moeopt.trust.compare import compare_variants, format_design_space
    from moeopt.trust.sensitivity import (
        calibration_ranges,
        calibration_sensitivity,
        format_sensitivity,
        parse_ranges,
        parse_rel,
    )

    if args.exact and args.workers < 1:
        raise InputError("--workers: expected an integer >= 1")
    if args.exact and args.time_limit <= 0:
        raise InputError("--time-limit: expected a number of seconds > 0")
    scenario = _load(args)
    variants = load_variants(args.variants)
    ranges = parse_ranges(args.range)
    rel = parse_rel(args.rel)

    def run() -> list[Any]:
        with progress_bar(len(variants), "compare", not args.quiet, unit="variant") as step:
            return compare_variants(
                scenario,
                variants,
                exact=args.exact,
                exact_time_limit_s=args.time_limit,
                exact_workers=max(1, args.workers),
                noise_pct=args.noise_pct,
                probes=args.probes,
                progress=step,
            )

    rows = guarded("the baseline: ", run)
    if rows is None:
        return 1
    out = text_stream(args)
    emit(out, format_design_space(rows))
    doc: dict[str, Any] = {"rows": [r.to_dict() for r in rows]}
    if args.sensitivity:
        n_ranges = len(calibration_ranges(scenario, ranges, rel))
        total = 1 + 2 * n_ranges + (2 if n_ranges else 0)
        with progress_bar(total, "sensitivity", not args.quiet, unit="simulation") as step:
            rep = calibration_sensitivity(scenario, variants, ranges=ranges, rel=rel, progress=step)
        emit(out, "\n" + format_sensitivity(rep))
        doc["sensitivity"] = {
            "ranges": [r.__dict__ for r in rep.ranges],
            "times": rep.times,
            "errors": rep.errors,
        }
    if args.json:
        write_json(args.json, doc)
    return 0


COMPARE: Command = (
    "design-space table of several variants of one scenario (Δ, noise, bottleneck, critical path, CP-SAT)",
    _compare_arguments,
    _compare_run,
)


# --------------------------------------------------------------------------- audit
def _audit_arguments(p: argparse.ArgumentParser) -> None:
    _scenario_arg(p, optional=True)
    p.add_argument("--only", nargs="+", metavar="PATH", help="audit only these knob paths")
    add_json_argument(p, "the verdicts")
    add_quiet_argument(p)


def _audit_run(args: argparse.Namespace) -> int:
    from moeopt.megamoe.knobs import knob_catalogue
    from moeopt.trust.audit import audit_knobs, format_audit

    scenario = _load(args)
    n = len(args.only) if args.only else len(knob_catalogue())

    def run() -> list[Any]:
        with progress_bar(n, "audit", not args.quiet, unit="knob") as step:
            return audit_knobs(scenario, args.only, progress=step)

    verdicts = guarded("the audited scenario: ", run)
    if verdicts is None:
        return 1
    out = text_stream(args)
    emit(out, f"scenario: {args.scenario or SEED_BS72}\n" + format_audit(verdicts))
    if args.json:
        write_json(
            args.json,
            [{"path": v.path, "verdict": v.verdict, "shape": v.shape, "detail": v.detail} for v in verdicts],
        )
    return 0


AUDIT: Command = (
    "classify every knob (effective / only on another shape / rejected / capacity / resolution / "
    "not modelled) by perturbing it",
    _audit_arguments,
    _audit_run,
)


# --------------------------------------------------------------------------- domain
def _domain_arguments(p: argparse.ArgumentParser) -> None:
    _scenario_arg(p)
    p.add_argument(
        "--no-use-probe", action="store_true", help="do not simulate to see which constants are used"
    )
    add_json_argument(p, "the report")


def _domain_run(args: argparse.Namespace) -> int:
    from moeopt.trust.domain import domain_report, format_domain

    scenario = _load(args)
    rep = guarded("", lambda: domain_report(scenario, probe_use=not args.no_use_probe))
    if rep is None:
        return 1
    out = text_stream(args)
    emit(out, format_domain(rep))
    if args.json:
        write_json(
            args.json,
            {
                "domain": rep.scenario_domain,
                "out_of_domain": rep.out_of_domain,
                "reasons": list(rep.reasons),
                "constants": [c.__dict__ for c in rep.constants],
                "used_out_of_domain": [c.name for c in rep.used_out_of_domain],
            },
        )
    return 0


DOMAIN: Command = (
    "which calibrated constants this scenario uses outside the domain they were measured in",
    _domain_arguments,
    _domain_run,
)


# --------------------------------------------------------------------------- conserving
def _conserving_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "scenarios",
        nargs="*",
        metavar="SCENARIO",
        help="scenario TOML files (default: every golden configuration)",
    )
    add_set_argument(p)
    p.add_argument("--only", nargs="+", metavar="NAME", help="only these golden configurations")


def _conserving_run(args: argparse.Namespace) -> int:
    from moeopt.cli.common import out
    from moeopt.trust import golden
    from moeopt.trust.conserving import check_conserving, format_check, format_summary, golden_sweep

    if args.scenarios:
        if args.only:
            raise InputError("--only selects golden configurations; it does not apply to scenario files")
        checks = []
        for path in args.scenarios:
            c = check_conserving(load_scenario(path, parse_sets(args.set)), path)
            out(format_check(c))
            checks.append(c)
    else:
        if args.set:
            raise InputError("--set applies to scenario files; the golden configurations are fixed")
        configs = golden.select(golden.default_configs(), args.only)
        checks = golden_sweep(configs, progress=lambda c: out(format_check(c)))
    out(format_summary(checks))
    return 1 if any(c.violated for c in checks) else 0


CONSERVING: Command = (
    "work conservation with every pool late-bound: the given scenarios, or every golden configuration",
    _conserving_arguments,
    _conserving_run,
)
