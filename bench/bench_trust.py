"""Seconds per trust-tool call on the bs=72 example shape (no speed target; figures for the docs).

Cases:

* ``compare``: ``compare_variants`` on the six variants of ``examples/variants_bs72.yaml``
  (8 noise probes per variant, no CP-SAT);
* ``sensitivity``: ``calibration_sensitivity`` on the same six variants (default ranges);
* ``domain``: ``domain_report`` with the used-constant probe;
* ``audit``: ``audit_knobs`` over the whole knob catalogue (run once: it is the slow one).

Each figure is the median of ``--repeat`` runs (``audit``: one), wall-clock and CPU seconds of
this process (the CPU figure is the fairer one on a shared machine).

    python bench/bench_trust.py [--repeat 3] [--only compare sensitivity domain audit]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import moeopt.megamoe as mm
import moeopt.trust as tr
from moeopt.cli.trust import load_variants

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIO = os.path.join(HERE, "..", "examples", "scenario_bs72.toml")
VARIANTS = os.path.join(HERE, "..", "examples", "variants_bs72.yaml")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", nargs="+", choices=("compare", "sensitivity", "domain", "audit"))
    args = ap.parse_args()
    s = mm.load_scenario(SCENARIO)
    v = load_variants(VARIANTS)
    cases: dict[str, tuple[Callable[[], object], int]] = {
        "compare": (lambda: tr.compare_variants(s, v), args.repeat),
        "sensitivity": (lambda: tr.calibration_sensitivity(s, v), args.repeat),
        "domain": (lambda: tr.domain_report(s), args.repeat),
        "audit": (lambda: tr.audit_knobs(s), 1),
    }
    print(f"{'case':<12} {'runs':>4} {'wall s':>8} {'cpu s':>8}")
    for name, (fn, n) in cases.items():
        if args.only and name not in args.only:
            continue
        walls, cpus = [], []
        for _ in range(max(1, n)):
            w0, c0 = time.perf_counter(), time.process_time()
            fn()
            walls.append(time.perf_counter() - w0)
            cpus.append(time.process_time() - c0)
        print(f"{name:<12} {len(walls):>4} {statistics.median(walls):8.2f} {statistics.median(cpus):8.2f}", flush=True)


if __name__ == "__main__":
    main()
