"""Seconds per ``moeopt.simulate`` call on the scenarios that have a speed target.

Cases (targets on one core):

* ``bs72``: the bs = 72 example shape (tokens 72, topk 6, world 8, 3 local experts, h 5120,
  hidden_dim 9216, 28 AIC, profile megamoe-a8w8) -- target 0.2 s;
* ``scenario_basic``: ``examples/scenario_basic.toml`` -- target 0.2 s;
* ``pto M=16 / 128 / 512 / 2048``: the typical PTO MegaMoE cases (world 8, K 7168, N 4096, topK 8,
  16 experts per rank, profile pto-a2a3, the kernel's cyclic routing) -- target 2 s each.

Each figure is the median of ``--repeat`` calls in this one process (after ``--warmup`` calls
that are not counted, 2 by default): wall-clock seconds, and CPU seconds of this process (the fairer figure
on a shared machine, where the wall clock also counts time the process waited for a core).
The verdict compares the CPU median with the target. ``--breakdown`` also times (CPU s) the phases of one call separately: graph
building, scheduling, the independent validator, and the analyses.

    python bench/bench_simulate.py [--repeat 5] [--breakdown] [--core] [--only bs72 scenario_basic ...]

``--core`` times the generic core's functions alone on the same graph (Event construction,
EventGraph.add, compile, schedule with and without normalisation, validate_schedule, fingerprint).

``--python A B`` compares two interpreters (or wrappers that put two checkouts first on the path,
e.g. ``PYTHONPATH=/path/to/base exec python "$@"``): per case, ``--rounds`` rounds, each a fresh
process per interpreter in turn (A, B, A, B, ...: one load state for both), each process timing
``--repeat`` calls after its warm-up; it prints each round's medians and the ratio A/B of the
medians over the rounds (wall and CPU), the figure an ``N x faster than the base commit`` claim
quotes. The scenario files are this checkout's, read by both.

    python bench/bench_simulate.py --python /path/base-python python --only scenario_basic pto_m2048

A process that has already scheduled ``moeopt.core.fastloop.LOAD_EVENTS`` events of pinned
graphs (a search, a sweep: every process of ``moeopt search``) schedules them with the compiled
loop; a fresh process with a few calls does not. ``--warmup 30`` measures that warm state on
scenario_basic (30 x 5,570 events) and the PTO cases from M = 512 on; the default measures a
fresh process. ``--warmup 0 --repeat 1`` times the first call of a fresh process (what a single
``moeopt simulate`` pays after its imports): one call per process, so take more ``--rounds``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from child import machine_reference_line, run_child

import moeopt.megamoe as mm
from moeopt.core.events import Event, EventGraph
from moeopt.core.scheduler import schedule
from moeopt.core.validate import validate_schedule
from moeopt.megamoe.simulate import _last_combine, build_graphs, rank_result

HERE = os.path.dirname(os.path.abspath(__file__))
BASIC = os.path.join(HERE, "..", "examples", "scenario_basic.toml")
BS72 = os.path.join(HERE, "..", "examples", "scenario_bs72.toml")


PTO_WORKLOAD = {"topk": 8, "world": 8, "local_experts": 16, "routing": "cyclic"}
"""The typical PTO MegaMoE cases' workload but for its tokens (also what ``CHILD`` builds)."""


def pto(m: int) -> mm.Scenario:
    return mm.Scenario(workload=mm.Workload(tokens=m, **PTO_WORKLOAD), h=7168, hidden_dim=4096, profile="pto-a2a3")


def cases() -> list[tuple[str, Callable[[], mm.Scenario], float]]:
    out: list[tuple[str, Callable[[], mm.Scenario], float]] = [
        ("bs72", lambda: mm.load_scenario(BS72), 0.2),
        ("scenario_basic", lambda: mm.load_scenario(BASIC), 0.2),
    ]
    for m in (16, 128, 512, 2048):
        out.append((f"pto_m{m}", (lambda m=m: pto(m)), 2.0))
    return out


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(CPU s of this process, result) of one call."""
    t0 = time.process_time()
    out = fn()
    return time.process_time() - t0, out


def timed2(fn: Callable[[], Any]) -> tuple[float, float]:
    """(wall s, CPU s of this process) of one call."""
    w0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w0, time.process_time() - c0


def breakdown(s: mm.Scenario) -> str:
    t_build, graphs = timed(lambda: build_graphs(s))
    t_sched = t_val = t_an = 0.0
    for rg, ranks in graphs.values():
        dt, sch = timed(lambda rg=rg: schedule(rg.graph, policy=s.config.scheduling, normalize=False))
        t_sched += dt
        t_val += timed(lambda rg=rg, sch=sch: validate_schedule(rg.graph, sch))[0]
        t_an += timed(
            lambda rg=rg, sch=sch, ranks=ranks: rank_result(rg, sch, s.config, _last_combine(rg, sch), ranks, 0.0)
        )[0]
    return f"build {t_build:.3f}  schedule {t_sched:.3f}  validate {t_val:.3f}  analyses {t_an:.3f}"


def core_costs(s: mm.Scenario) -> str:
    """CPU seconds of the generic core's functions on this scenario's first rank graph (a
    reproduction for the core's owner: the same graph rebuilt from its own events)."""
    g = next(iter(build_graphs(s).values()))[0].graph
    evs = list(g)

    def remake() -> list[Event]:
        # every event again through the checking constructor
        return [dataclasses.replace(e) for e in evs]

    def add() -> EventGraph:
        out = EventGraph(semaphores=dict(g.semaphores), pools=dict(g.pools))
        out.add_all(evs)
        return out

    t_event, _ = timed(remake)
    t_add, g2 = timed(add)
    t_compile, _ = timed(g2.compiled)
    t_sched, sch = timed(lambda: schedule(g2, policy=s.config.scheduling, normalize=False))
    t_norm, _ = timed(lambda: schedule(g2, policy=s.config.scheduling, normalize=True))
    t_val, _ = timed(lambda: validate_schedule(g2, sch))
    t_fp, _ = timed(sch.fingerprint)
    n = len(evs)
    return (
        f"core on {n} events: Event() {t_event:.3f}  EventGraph.add {t_add:.3f}  compile {t_compile:.3f}  "
        f"schedule {t_sched:.3f} (normalize=True {t_norm:.3f})  validate_schedule {t_val:.3f}  "
        f"fingerprint {t_fp:.3f}"
    )


CHILD = r"""
import json, statistics, sys, time
import moeopt.megamoe as mm
spec, repeat, warmup = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
if spec["file"]:
    s = mm.load_scenario(spec["file"])
else:
    s = mm.Scenario(workload=mm.Workload(**spec["workload"]), h=7168, hidden_dim=4096, profile="pto-a2a3")
for _ in range(warmup):  # warm-up (imports, registries, first-call caches)
    r = mm.simulate(s)
wall, cpu = [], []
for _ in range(repeat):
    w0, c0 = time.perf_counter(), time.process_time()
    r = mm.simulate(s)
    wall.append(time.perf_counter() - w0)
    cpu.append(time.process_time() - c0)
print(json.dumps({"moeopt": mm.__file__, "wall": statistics.median(wall), "cpu": statistics.median(cpu),
                  "total": r["kernel_total_us"]}))
"""


def _spec(name: str) -> dict[str, Any]:
    """What the child process needs to make case ``name``'s scenario."""
    if name == "bs72":
        return {"file": os.path.abspath(BS72)}
    if name == "scenario_basic":
        return {"file": os.path.abspath(BASIC)}
    m = int(name.removeprefix("pto_m"))
    return {"file": None, "workload": {"tokens": m, **PTO_WORKLOAD}}


def _child(python: str, name: str, repeat: int, warmup: int) -> dict[str, Any]:
    return run_child(python, CHILD, [json.dumps(_spec(name)), str(repeat), str(warmup)], name)


def compare(pythons: list[str], names: list[str], rounds: int, repeat: int, warmup: int) -> None:
    """The ``--python A B`` mode (see the module docstring)."""
    for name in names:
        runs: dict[str, list[dict[str, Any]]] = {py: [] for py in pythons}
        for k in range(rounds):
            for py in pythons:  # alternated, so that both see the same load
                runs[py].append(_child(py, name, repeat, warmup))
            a, b = (runs[py][-1] for py in pythons)
            print(
                f"{name:<16} round {k + 1}: A wall {a['wall'] * 1e3:7.1f} ms cpu {a['cpu'] * 1e3:7.1f} ms | "
                f"B wall {b['wall'] * 1e3:7.1f} ms cpu {b['cpu'] * 1e3:7.1f} ms | A/B cpu {a['cpu'] / b['cpu']:.2f}x",
                flush=True,
            )
        med = {py: {k: statistics.median(r[k] for r in runs[py]) for k in ("wall", "cpu")} for py in pythons}
        a, b = (med[py] for py in pythons)
        totals = " ".join(f"{runs[py][0]['total']:.3f}" for py in pythons)
        print(
            f"{name:<16} medians over {rounds} rounds: A/B wall {a['wall'] / b['wall']:.2f}x, "
            f"cpu {a['cpu'] / b['cpu']:.2f}x  (kernel_total_us A B: {totals}; "
            f"A {runs[pythons[0]][0]['moeopt']}, B {runs[pythons[1]][0]['moeopt']})",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--breakdown", action="store_true", help="also time the phases of one call")
    ap.add_argument("--core", action="store_true", help="also time the generic core's functions alone")
    ap.add_argument("--only", nargs="+", default=None, help="case names to run")
    ap.add_argument("--python", nargs=2, default=None, metavar=("A", "B"), help="compare two interpreters")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds per case with --python")
    ap.add_argument("--warmup", type=int, default=2, help="calls before the timed ones (see the docstring)")
    args = ap.parse_args()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{os.cpu_count()} CPUs, load average {load:.2f} (wall seconds include waiting for a core)")
    print(machine_reference_line())
    if args.python:
        names = [name for name, _make, _t in cases() if not args.only or name in args.only]
        compare(list(args.python), names, args.rounds, args.repeat, args.warmup)
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"load average {load:.2f} at end")
        return
    print(
        f"{'scenario':<16} {'events':>7} {'ranks':>5} {'wall s':>7} {'cpu s':>7} {'target s':>8}  "
        f"{'':<4} {'kernel_total_us':>15}"
    )
    for name, make, target in cases():
        if args.only and name not in args.only:
            continue
        s = make()
        for _ in range(max(args.warmup, 1)):  # warm-up (imports, registries, first-call caches)
            r = mm.simulate(s)
        runs = [timed2(lambda s=s: mm.simulate(s)) for _ in range(args.repeat)]
        wall = statistics.median(w for w, _c in runs)
        cpu = statistics.median(c for _w, c in runs)
        events = sum(r["rank_results"][k]["n_events"] for k in r["simulated_ranks"])
        verdict = "ok" if cpu <= target else "OVER"
        print(
            f"{name:<16} {events:>7} {len(r['simulated_ranks']):>5} {wall:>7.3f} {cpu:>7.3f} "
            f"{target:>8.1f}  {verdict:<4} {r['kernel_total_us']:>15.3f}",
            flush=True,
        )
        if args.breakdown:
            print(f"{'':<16} {breakdown(s)}", flush=True)
        if args.core:
            print(f"{'':<16} {core_costs(s)}", flush=True)


if __name__ == "__main__":
    main()
