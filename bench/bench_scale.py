"""Wall seconds and peak memory of the largest shapes users run, skewed and uniform.

Cases:

* ``dsv3_zipf``: a DeepSeek-V3-like shape (h 7168, hidden_dim 4096, topK 8, 256 experts over 32
  ranks, M = 4096 tokens per rank, zipf routing, profile pto-a2a3-v1): 32 distinct ranks, up to
  ~60k events each. Targets: ``simulate`` 3 s wall and 1 GB peak, the kernel time alone (the
  search objective, ``moeopt.megamoe.kernel_time``) 1.5 s.
* ``pto_m8192`` / ``pto_m8192_uniform``: the PTO MegaMoE case at M = 8192 (world 8, 16 experts
  per rank, pto-a2a3), the kernel's cyclic routing and uniform routing: one rank stands for all.
  Target 1 s.

Modes: ``simulate`` (the full result), ``simulate_slowest`` (``simulate(..., ranks="slowest")``:
every rank timed and judged, distinct ranks in worker processes, the slowest one analysed),
``kernel_time`` (the kernel's time alone, distinct ranks in worker processes),
``losing_point`` (what a search pays for a point that cannot beat the best: ``kernel_time_below``
with the scenario's own kernel time as the best found; not in the default set),
``losing_point_serial`` (the same in this process alone, ``workers=1``: what each worker of a
search with several workers pays, as it schedules its points' ranks itself), ``winning_point``
(``kernel_time_below`` with a best found 1% above the scenario's kernel time: the point wins,
every rank is timed and the kernel time returned); ``kernel_time_warm``, ``losing_point_warm``,
``winning_point_warm``: the same calls as a search trial makes them, in a process that has made
what a search's process has made before them: its first trial, a whole ``kernel_time`` (no best
time yet, so no threshold), then one call of the mode's own (the routing drawn, the compiled
loop loaded by its rule); the median of the ``WARM_CALLS`` calls after those (not in the
default set). CPU seconds
count the worker processes too. Every run is a fresh process, so that its peak memory is its
own: the figure is the peak resident size of that process plus the largest of its worker
processes (an upper bound of what the run held at once when it ran one worker at a time per
core).

A/B: ``--python A B`` runs each case with two interpreters (two checkouts' virtual
environments), alternating A, B, A, B, ... in the same load state, and prints the medians and
the ratio A / B of the medians. A mode a checkout does not have is reported as not available.

    python bench/bench_scale.py [--repeat 3] [--only dsv3_zipf] [--mode simulate kernel_time]
                                [--python /path/a/python /path/b/python]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

from child import machine_reference_line, run_child

# every mode the bench runs (see the docstring); each case has a target for each
_MODES = (
    "simulate",
    "simulate_slowest",
    "kernel_time",
    "losing_point",
    "losing_point_serial",
    "winning_point",
    "kernel_time_warm",
    "losing_point_warm",
    "winning_point_warm",
)
WARM_CALLS = 3
"""The calls timed after the first in a ``*_warm`` mode (their median is the figure)."""
_POINTS = {"losing_point", "losing_point_serial", "winning_point", "losing_point_warm", "winning_point_warm"}

CASES = {
    "dsv3_zipf": (
        {"tokens": 4096, "topk": 8, "world": 32, "local_experts": 8, "routing": "zipf"},
        "pto-a2a3-v1",
        {
            "simulate": 3.0,
            "simulate_slowest": 3.0,
            "kernel_time": 1.5,
            "losing_point": 1.5,
            "losing_point_serial": 1.5,
            "winning_point": 1.5,
            "kernel_time_warm": 1.5,
            "losing_point_warm": 1.5,
            "winning_point_warm": 1.5,
        },
    ),
    "pto_m8192": (
        {"tokens": 8192, "topk": 8, "world": 8, "local_experts": 16, "routing": "cyclic"},
        "pto-a2a3",
        dict.fromkeys(_MODES, 1.0),
    ),
    "pto_m8192_uniform": (
        {"tokens": 8192, "topk": 8, "world": 8, "local_experts": 16, "routing": "uniform"},
        "pto-a2a3",
        dict.fromkeys(_MODES, 1.0),
    ),
}

CHILD = r"""
import json, resource, sys, time
import moeopt.megamoe as mm
case, mode, warm_calls = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
warm = mode.endswith("_warm")
mode = mode.removesuffix("_warm")
s = mm.Scenario(workload=mm.Workload(**case["workload"]), h=7168, hidden_dim=4096, profile=case["profile"])
import importlib.util, inspect
kt = None
if importlib.util.find_spec("moeopt.megamoe.kerneltime") is not None:  # (a checkout may predate it)
    import moeopt.megamoe.kerneltime as kt
if (
    (mode == "kernel_time" and not hasattr(mm, "kernel_time"))
    or (mode == "simulate_slowest" and "ranks" not in inspect.signature(mm.simulate).parameters)
    or (mode in ("losing_point", "losing_point_serial", "winning_point") and not hasattr(kt, "kernel_time_below"))
):
    print(json.dumps({"missing": True}))
    raise SystemExit(0)
def cpu_s():  # this process and its joined worker processes
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + ch.ru_utime + ch.ru_stime
def call():
    if mode == "simulate":
        r = mm.simulate(s)
        events = max(r["rank_results"][k]["n_events"] for k in r["simulated_ranks"])
        return r["kernel_total_us"], len(r["simulated_ranks"]), events
    if mode == "simulate_slowest":
        r = mm.simulate(s, ranks="slowest")
        events = max(r["rank_results"][k]["n_events"] for k in r["simulated_ranks"])
        return r["kernel_total_us"], len(r["rank_kernel_total_us"]), events
    if mode == "winning_point":
        r = kt.kernel_time_below(s, case["best_us"] * 1.01)
        return r["kernel_total_us"], len(r["simulated_ranks"]), -1
    if mode.startswith("losing_point"):
        r = kt.kernel_time_below(s, case["best_us"], **({"workers": 1} if mode.endswith("serial") else {}))
        if isinstance(r, dict):  # no rank reached the best before the last (one distinct rank)
            return r["kernel_total_us"], len(r["simulated_ranks"]), -1
        return r.total_us, -1, -1  # a Reached: stopped at a rank that reaches the best
    r = mm.kernel_time(s)
    return r["kernel_total_us"], len(r["simulated_ranks"]), -1
if warm:
    # what a search trial pays: a process that has made a search's first trial (a whole
    # kernel_time: a search has no best time to stop at before its first trial) and one call of
    # this kind (the routing drawn, the compiled loop loaded where its rule says), timed over
    # the calls after those
    if mode != "kernel_time":
        mm.kernel_time(s)
    call()
    walls, cpus = [], []
    for _ in range(warm_calls):
        w0, c0 = time.perf_counter(), cpu_s()
        total, ranks, events = call()
        walls.append(time.perf_counter() - w0)
        cpus.append(cpu_s() - c0)
    wall, cpu = sorted(walls)[len(walls) // 2], sorted(cpus)[len(cpus) // 2]
else:
    w0, c0 = time.perf_counter(), cpu_s()
    total, ranks, events = call()
    wall, cpu = time.perf_counter() - w0, cpu_s() - c0
mb = lambda who: resource.getrusage(who).ru_maxrss / 1024
print(json.dumps({"moeopt": mm.__file__, "wall": wall, "cpu": cpu, "rss_self": mb(resource.RUSAGE_SELF),
                  "rss_child": mb(resource.RUSAGE_CHILDREN), "total": total, "ranks": ranks,
                  "events": events}))
"""


def run_one(python: str, name: str, mode: str, best_us: float = 0.0) -> dict[str, float] | None:
    workload, profile, _targets = CASES[name]
    arg = json.dumps({"workload": workload, "profile": profile, "best_us": best_us})
    got = run_child(python, CHILD, [arg, mode, str(WARM_CALLS)], f"{name} {mode}")
    return None if got.get("missing") else got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", nargs="+", default=None, choices=sorted(CASES))
    ap.add_argument(
        "--mode",
        nargs="+",
        default=["simulate", "simulate_slowest", "kernel_time"],
        choices=_MODES,
    )
    ap.add_argument("--python", nargs="+", default=[sys.executable], help="interpreters to compare (A/B)")
    args = ap.parse_args()
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start")
    print(machine_reference_line())
    for name in args.only or list(CASES):
        _w, _p, targets = CASES[name]
        best_us = 0.0
        if set(args.mode) & _POINTS:
            # the search's losing point: the scenario itself against a best found equal to its
            # own kernel time (a point that cannot beat the best; kernel_time_below stops at the
            # first rank that reaches it); its winning point: against a best 1% above it
            got0 = run_one(sys.executable, name, "kernel_time")
            best_us = got0["total"] if got0 else 0.0
        for mode in args.mode:
            runs: dict[str, list[dict[str, float]]] = {py: [] for py in args.python}
            for _ in range(args.repeat):
                for py in args.python:  # alternate the interpreters in one load state
                    got = run_one(py, name, mode, best_us)
                    if got is not None:
                        runs[py].append(got)
            med: dict[str, float] = {}
            for k, py in enumerate(args.python):
                rs = runs[py]
                if not rs:
                    print(f"{name:<18} {mode:<16} [{'AB'[k] if len(args.python) > 1 else ''}] not available")
                    continue
                wall = statistics.median(r["wall"] for r in rs)
                cpu = statistics.median(r["cpu"] for r in rs)
                rss = max(r["rss_self"] + r["rss_child"] for r in rs)
                med[py] = wall
                tag = f"[{'AB'[k]}] " if len(args.python) > 1 else ""
                verdict = "ok" if wall <= targets[mode] and (name != "dsv3_zipf" or rss <= 1024) else "OVER"
                each = " ".join(f"{r['wall']:.2f}" for r in rs)
                print(
                    f"{name:<18} {mode:<16} {tag}ranks {rs[0]['ranks']:>3}  wall {wall:7.2f} s (runs "
                    f"{each})  cpu {cpu:7.2f} s  peak {rss:7.0f} MB  "
                    f"target {targets[mode]:.1f} s  {verdict}  kernel_total_us {rs[0]['total']:.3f}",
                    flush=True,
                )
            if len(med) == 2:
                a, b = (med[py] for py in args.python)
                print(f"{name:<18} {mode:<16} ratio A/B of median wall: {a / b:.2f}x", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
