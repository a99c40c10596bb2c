"""The MegaMoE subcommands of ``python -m moeopt``: ``simulate`` and ``golden``.

Each command is a ``(help, add_arguments(parser), run(args) -> exit code)`` triple, the shape of
:data:`moeopt.cli.COMMANDS`, so wiring one in is one line there.

``simulate FILE [--set dotted.path=value ...] [--json] [--no-check-bounds]``
    Simulate a scenario file and print the seed-style summary: time (and with the unpermute
    tail), the three physical bounds with the binding one and the excess over it, utilisation
    per role, avoidable idle, GM->L1 bytes. ``--json`` prints the result instead (every field
    of SPEC §7 except the per-rank graphs and schedules). Exit codes: 0 ok, 1 a guardrail fired
    (the time must not be used), 2 bad input.

``golden [--check] [--only NAME ...] [--file PATH] [--list]``
    Schedule fingerprints of the fixed configurations of :mod:`moeopt.megamoe.golden`. Without
    ``--check`` it (re)writes the file; with ``--check`` it re-simulates every configuration
    stored in the file and compares fingerprints bit for bit (exit 1 on any mismatch).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from moeopt.errors import InputError
from moeopt.megamoe import golden
from moeopt.megamoe.errors import GuardrailError
from moeopt.megamoe.scenario import load_scenario, parse_override_value
from moeopt.megamoe.simulate import simulate

Command = tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]


def _out(text: str, *, err: bool = False) -> None:
    """One line (or block) to standard output / error, flushed (progress is read live)."""
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")
    stream.flush()


# --------------------------------------------------------------------------- summary
def format_summary(r: Mapping[str, Any]) -> str:
    """The seed-style summary of one :func:`moeopt.simulate` result (several lines)."""
    b = r["bounds"]
    util = "  ".join(f"{role} {100 * u:.1f}%" for role, u in r["role_utilization"].items())
    idle = r["idle_decomposition"]
    late = {st: d for st, d in idle["by_stage"].items() if d["late_bound"]}
    pinned = sum(d["avoidable_core_us"] for st, d in idle["by_stage"].items() if st not in late)
    checked = sum(d["avoidable_core_us"] for d in late.values() if d["work_conservation_exempt"] is None)
    if late:
        verdict = "holds" if checked <= 1e-3 else "broken"
        conserve = f"late-bound pools {checked:.1f} core-µs, work conservation {verdict}"
    else:
        conserve = "no late-bound pool"
    impl = r["implementation"]
    ranks = r["simulated_ranks"]
    lines = [
        f"time            {r['kernel_total_us']:.2f} µs (to the last combine; "
        f"with the tail {r['kernel_dag_end_us']:.2f} µs), slowest rank {r['slowest_rank']}",
        f"bounds          compute {b['compute_us']:.2f} / bandwidth {b['bandwidth_us']:.2f} "
        f"[{b['bandwidth_channel']}] / dependency {b['dependency_us']:.2f} µs -> {b['binding']}-bound, "
        f"{b['excess_pct']:+.1f}% above it" + ("  ** BELOW THE BOUND **" if b.get("violated") else ""),
        f"utilisation     {util}",
        f"avoidable idle  {idle['avoidable_core_us']:.1f} core-µs "
        f"(statically pinned pools {pinned:.1f}; {conserve})",
        f"GM->L1          {r['traffic_bytes']['gm_to_l1'] / 1e6:.1f} MB",
        f"implementation  {impl['id']} (profile {impl['profile']}), compile {impl['compile_fingerprint']}, "
        f"policy {r['policy']}",
        f"ranks           {len(ranks)} simulated of {impl['topology']['world']} "
        f"(identical routing signatures share one)",
    ]
    cal = r["calibration"]
    if cal["out_of_domain"]:
        lines.append("calibration     OUT OF DOMAIN: " + "; ".join(cal["reasons"]))
    else:
        lines.append(f"calibration     inside domain {cal['domain']['id']}")
    return "\n".join(lines)


def result_to_jsonable(r: Mapping[str, Any]) -> dict[str, Any]:
    """The result dict without graphs and schedules, with plain JSON types only."""
    out = {k: v for k, v in r.items() if k != "rank_results"}
    ranks: dict[str, Any] = {}
    for rep in r["simulated_ranks"]:
        rr = r["rank_results"][rep]
        ranks[str(rep)] = {
            "ranks_sharing_signature": rr["ranks_sharing_signature"],
            "kernel_total_us": rr["kernel_total_us"],
            "kernel_dag_end_us": rr["kernel_dag_end_us"],
            "n_events": rr["n_events"],
            "schedule_fingerprint": rr["schedule"].fingerprint(),
            "bounds": rr["bounds"],
            "waves": rr["waves"],
            "contract": rr["contract"],
        }
    out["rank_results"] = ranks
    return _plain(out)


def _plain(v: Any) -> Any:
    if isinstance(v, (Mapping, MappingProxyType)):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [_plain(x) for x in v]
    if isinstance(v, float):
        return v if math.isfinite(v) else str(v)
    if isinstance(v, (str, int, bool)) or v is None:
        return v
    if hasattr(v, "item"):  # numpy scalars
        return _plain(v.item())
    return str(v)


# --------------------------------------------------------------------------- simulate
def parse_sets(items: list[str] | None) -> dict[str, Any]:
    """``["kernel.tile_n=128", ...]`` -> ``{"kernel.tile_n": 128}`` (values read as TOML literals)."""
    out: dict[str, Any] = {}
    for item in items or []:
        path, eq, value = item.partition("=")
        path = path.strip()
        if not eq or not path:
            raise InputError(f"--set {item!r}: expected dotted.path=value, e.g. --set kernel.tile_n=128")
        out[path] = parse_override_value(value.strip())
    return out


def add_set_argument(p: argparse.ArgumentParser, applies_to: str = "") -> None:
    """The ``--set PATH=VALUE`` option every scenario command takes (read with :func:`parse_sets`);
    ``applies_to`` prefixes the help when only some inputs take it."""
    p.add_argument(
        "--set",
        action="append",
        metavar="PATH=VALUE",
        help=f"{applies_to}dotted-path override, e.g. --set kernel.tile_n=128 "
        "(repeatable; values are TOML literals)",
    )


def _simulate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="scenario TOML file")
    add_set_argument(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON instead of the summary")
    p.add_argument(
        "--no-check-bounds",
        action="store_true",
        help="record a time below the physical bounds in the result instead of failing",
    )


def _simulate_run(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.file, parse_sets(args.set))
    try:
        r = simulate(scenario, check_bounds=not args.no_check_bounds)
    except GuardrailError as exc:
        _out(f"error: {args.file}: guardrail {type(exc).__name__}: {exc}", err=True)
        return 1
    if args.json:
        _out(json.dumps(result_to_jsonable(r), indent=1))
    else:
        _out(f"scenario        {args.file}" + (f"  (--set {', '.join(args.set)})" if args.set else ""))
        _out(format_summary(r))
    return 0


SIMULATE: Command = (
    "simulate a scenario file and print the summary (time, bounds, utilisation, idle, traffic)",
    _simulate_arguments,
    _simulate_run,
)


# --------------------------------------------------------------------------- golden
def _golden_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--check",
        action="store_true",
        help="re-simulate the stored configurations and compare fingerprints bit for bit",
    )
    p.add_argument(
        "--file", default=golden.GOLDEN_FILE, metavar="PATH", help="golden file (default: the packaged one)"
    )
    p.add_argument("--only", nargs="+", metavar="NAME", help="only these configurations")
    p.add_argument("--list", action="store_true", help="list the configurations and exit")


def _golden_run(args: argparse.Namespace) -> int:
    if args.list:
        configs = golden.load_golden(args.file)[0] if args.check else golden.default_configs()
        for c in configs:
            _out(f"{c.name:<28} {c.base:<10} {json.dumps(dict(c.overrides))}")
        return 0
    if args.check:
        bad = golden.check(args.file, args.only, progress=_out)
        n = len(golden.select(golden.load_golden(args.file)[0], args.only))
        if bad:
            for line in bad:
                _out(f"error: golden mismatch: {line}", err=True)
            _out(f"{len(bad)} of {n} configuration(s) changed their schedule", err=True)
            return 1
        _out(f"all {n} configuration(s) match {args.file}")
        return 0
    configs = golden.select(golden.default_configs(), args.only)
    runs = []
    for c in configs:
        run = golden.run_config(c)
        runs.append(run)
        us, sec = run.kernel_total_us, run.seconds
        _out(f"{c.name:<28} {run.fingerprint}  {us:12.4f} µs  {sec:6.2f} s")
    golden.write_golden(args.file, runs, keep_others=bool(args.only))
    _out(f"wrote {len(runs)} fingerprint(s) to {args.file}")
    return 0


GOLDEN: Command = (
    "schedule fingerprints of the fixed golden configurations (--check compares bit for bit)",
    _golden_arguments,
    _golden_run,
)

COMMANDS: dict[str, Command] = {"simulate": SIMULATE, "golden": GOLDEN}
