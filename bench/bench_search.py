"""Search driver benchmark: TPE against exhaustive enumeration, and trials per minute.

1. A space of 162 points (tile_m x tile_n x p1 x p2 x dispatch_lookahead) on a scenario is
   enumerated exhaustively (two processes); then TPE runs with --seeds seeds, a budget of 25%
   of the points each, the baseline trial switched off. For each seed it prints the trial at
   which the best value first came within 1% of the exhaustive optimum, next to the odds of a
   uniform random sampler. The default shape is the bs=72 example one (6 of the 162 points
   within 1%, the worst 64% above the optimum); on examples/scenario_basic.toml the same space
   is flat (81 of 162 points within 1%, the worst 2.6% above), which makes the test trivial.
2. Trials per minute of ``run_study`` on examples/scenario_basic.toml with 1 and 2 workers:
   once with the defaults (duplicate reuse, lower-bound checks) and once with every trial
   simulated (no reuse, no bound check), which is the simulator-bound rate. ``--rate-routing zipf``
   runs that part on the same scenario with a skewed routing (its 4 ranks then differ).

    python bench/bench_search.py [--shape bs72|basic] [--seeds 0 1 2 3 4] [--rate-trials 40] [--skip-rate]
                                 [--skip-search] [--rate-routing uniform|zipf]
"""

from __future__ import annotations

import argparse
import copy
import math
import multiprocessing
import os
import tempfile
import time
from typing import Any

import optuna

from moeopt.search import load_study, run_study
from moeopt.search.evaluate import Evaluator
from moeopt.search.space import enumerate_points
from moeopt.search.storage import resolve_storage

HERE = os.path.dirname(os.path.abspath(__file__))
BASIC = os.path.join(HERE, "..", "examples", "scenario_basic.toml")
BS72 = {
    "profile": "megamoe-a8w8",
    "h": 5120,
    "hidden_dim": 9216,
    "aic_num": 28,
    "workload": {"tokens": 72, "topk": 6, "world": 8, "local_experts": 3, "routing": "uniform"},
}
SPACE = {
    "kernel.tile_m": {"choices": [64, 128, 256]},
    "kernel.tile_n": {"choices": [128, 256]},
    "p1_override": {"choices": [1, 2, 4]},
    "p2_override": {"choices": [1, 2, 4]},
    "policy.dispatch_lookahead": {"choices": [0, 2, 4]},
}


def study(scenario: Any, **kw: Any) -> dict[str, Any]:
    d: dict[str, Any] = {
        "name": "bench",
        "scenario": scenario,
        "space": copy.deepcopy(SPACE),
        "sampler": "tpe",
        "outputs": {"report": False, "exact_gap": False},
    }
    d.update(kw)
    return d


_CFG: Any = None


def _eval(point: dict[str, Any]) -> float:
    out = Evaluator(_CFG).evaluate(point, None)
    return out.values[0] if out.state == "complete" and out.values else math.inf


def exhaustive(scenario: Any) -> tuple[list[float], list[dict[str, Any]], float]:
    global _CFG
    _CFG = load_study(study(scenario), base_dir=HERE)
    points = enumerate_points(_CFG)
    t0 = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(2) as pool:
        values = pool.map(_eval, points, chunksize=1)
    return values, points, time.perf_counter() - t0


def tpe_run(scenario: Any, seed: int, budget: int, opt: float) -> tuple[int | None, float, int]:
    with tempfile.TemporaryDirectory() as d:
        s = study(scenario, seed=seed, trials=budget, baseline_trial=False)
        run_study(s, out=d, storage=None)
        trials = optuna.load_study(study_name="bench", storage=resolve_storage(None, d).open()).get_trials()
    best = math.inf
    hit = None
    seen = set()
    for t in sorted(trials, key=lambda t: t.number):
        seen.add(tuple(sorted(t.params.items())))
        if t.state == optuna.trial.TrialState.COMPLETE and t.value is not None:
            best = min(best, t.value)
        if hit is None and best <= opt * 1.01:
            hit = t.number + 1
    return hit, best, len(seen)


def rate(workers: int, trials: int, defaults: bool, routing: str | None) -> tuple[float, float, int, float, float]:
    extra: dict[str, Any] = {} if defaults else {"prune": {"lower_bound": "never", "duplicates": False}}
    if routing is not None:
        extra["overrides"] = {"workload.routing": routing}
    with tempfile.TemporaryDirectory() as d:
        s = study(BASIC, trials=trials, seed=0, **extra)
        t0 = time.perf_counter()
        c0 = os.times()
        r = run_study(s, out=d, workers=workers)
        c1 = os.times()
        wall = time.perf_counter() - t0
        # CPU seconds of this process and of the worker processes it forked (joined, so counted)
        cpu = (c1.user + c1.system + c1.children_user + c1.children_system) - (
            c0.user + c0.system + c0.children_user + c0.children_system
        )
        done = optuna.load_study(study_name="bench", storage=resolve_storage(None, d).open()).get_trials()
    # time inside trials (ask -> tell: choosing the point, bound check, simulation), per trial
    inside = [(t.datetime_complete - t.datetime_start).total_seconds() for t in done if t.datetime_complete]
    run = r.summary["run"]
    return (
        run["trials_per_minute"],
        60.0 * r.n_trials / wall,
        run["duplicates"],
        sum(inside) / len(inside),
        cpu / trials,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=["bs72", "basic"], default="bs72")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--rate-trials", type=int, default=40)
    ap.add_argument("--skip-rate", action="store_true")
    ap.add_argument(
        "--rate-routing",
        choices=["uniform", "zipf"],
        default=None,
        help="routing of the trials-per-minute scenario (default: the file's); zipf makes its 4 ranks "
        "differ, where a point that cannot win stops at its first rank",
    )
    ap.add_argument("--skip-search", action="store_true", help="only the trials-per-minute part")
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    scenario: Any = BASIC if args.shape == "basic" else BS72
    label = "examples/scenario_basic.toml" if args.shape == "basic" else "bs=72 (the example shape)"

    if not args.skip_search:
        search_part(scenario, label, args.seeds)
    if not args.skip_rate:
        rate_part(args.rate_trials, args.rate_routing)


def search_part(scenario: Any, label: str, seeds: list[int]) -> None:
    values, points, secs = exhaustive(scenario)
    n = len(points)
    ok_values = sorted(v for v in values if math.isfinite(v))
    opt = ok_values[0]
    point = points[values.index(opt)]
    budget = n // 4
    near = sum(1 for v in values if v <= opt * 1.01)
    print(f"space: {n} points on {label}; exhaustive optimum {opt:.3f} us in {secs:.1f} s (2 processes)")
    print(f"  optimum point: {point}")
    print(
        f"  spread: median {ok_values[len(ok_values) // 2]:.3f}, worst {ok_values[-1]:.3f} us "
        f"({100 * (ok_values[-1] / opt - 1):.1f}% above the optimum); {n - len(ok_values)} infeasible; "
        f"{near} point(s) within 1%"
    )
    # a uniform random sampler draws with replacement: P(no point within 1% in k draws) = (1 - near/n)^k
    print(
        f"  random sampling reaches 1% within {budget} trials with probability {1 - (1 - near / n) ** budget:.2f}"
    )
    print(f"tpe, budget {budget} trials (25% of the points), baseline trial off:")
    print(
        f"  {'seed':>4} {'trials to <=1%':>15} {'best at budget':>15} {'vs optimum':>11} {'distinct points':>16}"
    )
    ok = 0
    for seed in seeds:
        hit, best, distinct = tpe_run(scenario, seed, budget, opt)
        ok += hit is not None
        print(
            f"  {seed:>4} {('-' if hit is None else str(hit)):>15} {best:>15.3f} {100 * (best / opt - 1):>10.2f}% "
            f"{distinct:>16}"
        )
    print(f"  within 1% of the optimum inside {budget} trials: {ok} of {len(seeds)} seeds")


def rate_part(n_trials: int, routing: str | None) -> None:
    how = f", routing {routing}" if routing else ""
    print(f"trials per minute on examples/scenario_basic.toml{how} ({n_trials} trials, wall clock incl. setup):")
    print(
        f"  {'workers':>7} {'mode':<31} {'loop trials/min':>15} {'incl. setup':>11} {'reused':>6} "
        f"{'wall s/trial':>12} {'CPU s/trial':>11} {'idle-core est./min':>18}"
    )
    for defaults in (True, False):
        for workers in (1, 2):
            loop, wall, dup, inside, cpu = rate(workers, n_trials, defaults, routing)
            mode = "defaults (reuse, bound checks)" if defaults else "every trial simulated"
            # on idle cores each worker runs one trial per CPU s/trial (a study's setup and outputs aside)
            est = 60.0 / cpu * workers
            print(
                f"  {workers:>7} {mode:<31} {loop:>15.0f} {wall:>11.0f} {dup:>6} {inside:>12.3f} {cpu:>11.3f} "
                f"{est:>18.0f}"
            )
    print(f"  (load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
