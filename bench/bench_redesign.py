"""Does the search find the kernel's V1 redesign from the baseline? Runs studies/seed002_redesign.yaml
(the baseline pto-a2a3 at world 8, M = 512 and 2048, its orchestration open) and prints, per M, the
baseline's time, the V1 version's (profile pto-a2a3-v1, one point of the same space) and the best
point found, with the wall time of the study and the trial at which the search first matched V1.

    python bench/bench_redesign.py [--trials 300] [--workers 2] [--out DIR]

Times are the model's (greedy, with the unpermute tail, slowest rank). A best point at or below V1 at
both M is what the search was asked for; the printed parameters say which of V1's mechanisms it took.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import tempfile
import time
from pathlib import Path

import moeopt as m
from moeopt.search import run_study

HERE = Path(__file__).resolve().parent
STUDY = HERE.parent / "studies" / "seed002_redesign.yaml"
TYPICAL = HERE.parent / "examples" / "seed002_typical.toml"


def kernel_us(profile: str, tokens: int, overrides: dict[str, object] | None = None) -> float:
    s = m.load_scenario(TYPICAL, {"profile": profile, "workload.tokens": tokens, **(overrides or {})})
    return float(m.simulate(s)["kernel_dag_end_us"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=None, help="study folder (default: a temporary one)")
    args = ap.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="redesign-"))
    t0 = time.perf_counter()
    run_study(str(STUDY), trials=args.trials, workers=args.workers, out=str(out), progress=False)
    wall = time.perf_counter() - t0
    summary = json.loads((out / "summary.json").read_text())
    best_params = summary["best"]["params"]
    base = {mm: kernel_us("pto-a2a3", mm) for mm in (512, 2048)}
    v1 = {mm: kernel_us("pto-a2a3-v1", mm) for mm in (512, 2048)}
    best = {mm: kernel_us("pto-a2a3", mm, summary["best"]["overrides"]) for mm in (512, 2048)}
    v1_ratio = sum(v1[mm] / base[mm] for mm in base) / len(base)
    first = None  # the first trial at or below V1 at both M
    with open(out / "trials.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            try:
                at = {mm: float(row[f"M{mm}:kernel_dag_end_us"]) for mm in (512, 2048)}
            except (KeyError, ValueError):
                continue
            if all(at[mm] <= v1[mm] + 1e-6 for mm in at):
                n = int(row["number"])
                first = n if first is None else min(first, n)
    print(
        f"study {STUDY.name}: {summary['n_trials']} trials, {args.workers} worker(s), {wall:.0f} s wall "
        f"(load average {os.getloadavg()[0]:.2f})"
    )
    print(f"{'M':>6} {'baseline':>10} {'V1':>10} {'best':>10} {'V1 gain':>8} {'best gain':>10}  best <= V1")
    for mm in (512, 2048):
        print(
            f"{mm:>6} {base[mm]:>10.1f} {v1[mm]:>10.1f} {best[mm]:>10.1f} {100 * (1 - v1[mm] / base[mm]):>7.1f}% "
            f"{100 * (1 - best[mm] / base[mm]):>9.1f}%  {'yes' if best[mm] <= v1[mm] + 1e-6 else 'NO'}"
        )
    print(
        f"mean time / baseline: V1 {v1_ratio:.4f}, best {summary['best']['value']:.4f}; "
        f"first trial at or below V1 at both M: {first if first is not None else 'none'}"
    )
    print("best point: " + ", ".join(f"{k}={v}" for k, v in best_params.items()))
    print(f"outputs in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
