"""``moeopt golden [--check] [--only NAME ...] [--file PATH] [--list] [--quiet]``

Schedule fingerprints of the fixed configurations of :mod:`moeopt.trust.golden`. Without
``--check`` it (re)writes the file; with ``--check`` it re-simulates every configuration stored
in the file and compares fingerprints bit for bit (exit 1 on any mismatch).
"""

from __future__ import annotations

import argparse
import json

from moeopt.cli.common import Command, add_quiet_argument, out
from moeopt.trust import golden


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
    add_quiet_argument(p, "no line per configuration, only mismatches and the summary")


def _golden_run(args: argparse.Namespace) -> int:
    if args.list:
        configs = golden.load_golden(args.file)[0] if args.check else golden.default_configs()
        for c in configs:
            out(f"{c.name:<28} {c.base:<10} {json.dumps(dict(c.overrides))}")
        return 0
    if args.check:
        bad = golden.check(args.file, args.only, progress=(lambda _line: None) if args.quiet else out)
        n = len(golden.select(golden.load_golden(args.file)[0], args.only))
        if bad:
            for line in bad:
                out(f"error: golden mismatch: {line}", err=True)
            out(f"{len(bad)} of {n} configuration(s) changed their schedule", err=True)
            return 1
        out(f"all {n} configuration(s) match {args.file}")
        return 0
    configs = golden.select(golden.default_configs(), args.only)
    runs = []
    for c in configs:
        run = golden.run_config(c)
        runs.append(run)
        us, sec = run.kernel_total_us, run.seconds
        if not args.quiet:
            out(f"{c.name:<28} {run.fingerprint}  {us:12.4f} µs  {sec:6.2f} s")
    golden.write_golden(args.file, runs, keep_others=bool(args.only))
    out(f"wrote {len(runs)} fingerprint(s) to {args.file}")
    return 0


GOLDEN: Command = (
    "schedule fingerprints of the fixed golden configurations (--check compares bit for bit)",
    _golden_arguments,
    _golden_run,
)
