"""Seconds per ``moeopt.simulate`` call on the scenarios that have a speed target.

Cases (targets on one core):

* ``bs72``: the bs = 72 example shape (tokens 72, topk 6, world 8, 3 local experts, h 5120,
  hidden_dim 9216, 28 AIC, profile megamoe-a8w8) -- target 0.2 s;
* ``scenario_basic``: ``examples/scenario_basic.toml`` -- target 0.2 s;
* ``pto M=16 / 128 / 512 / 2048``: the typical PTO MegaMoE cases (world 8, K 7168, N 4096, topK 8,
  16 experts per rank, profile pto-a2a3, the kernel's cyclic routing) -- target 2 s each.

Each figure is the median of ``--repeat`` calls in this one process (after one warm-up call
that is not counted): wall-clock seconds, and CPU seconds of this process (the fairer figure
on a shared machine, where the wall clock also counts time the process waited for a core).
The verdict compares the CPU median with the target. ``--breakdown`` also times (CPU s) the phases of one call separately: graph
building, scheduling, the independent validator, and the analyses.

    python bench/bench_simulate.py [--repeat 5] [--breakdown] [--core] [--only bs72 scenario_basic ...]

``--core`` times the generic core's functions alone on the same graph (Event construction,
EventGraph.add, compile, schedule with and without normalisation, validate_schedule, fingerprint).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import moeopt.megamoe as mm
from moeopt.core.events import Event, EventGraph
from moeopt.core.scheduler import schedule
from moeopt.core.validate import validate_schedule
from moeopt.megamoe.simulate import _last_combine, build_graphs, rank_result

HERE = os.path.dirname(os.path.abspath(__file__))
BASIC = os.path.join(HERE, "..", "examples", "scenario_basic.toml")
BS72 = os.path.join(HERE, "..", "examples", "scenario_bs72.toml")


def pto(m: int) -> mm.Scenario:
    return mm.Scenario(
        workload=mm.Workload(tokens=m, topk=8, world=8, local_experts=16, routing="cyclic"),
        h=7168,
        hidden_dim=4096,
        profile="pto-a2a3",
    )


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--breakdown", action="store_true", help="also time the phases of one call")
    ap.add_argument("--core", action="store_true", help="also time the generic core's functions alone")
    ap.add_argument("--only", nargs="+", default=None, help="case names to run")
    args = ap.parse_args()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{os.cpu_count()} CPUs, load average {load:.2f} (wall seconds include waiting for a core)")
    print(
        f"{'scenario':<16} {'events':>7} {'ranks':>5} {'wall s':>7} {'cpu s':>7} {'target s':>8}  "
        f"{'':<4} {'kernel_total_us':>15}"
    )
    for name, make, target in cases():
        if args.only and name not in args.only:
            continue
        s = make()
        r = mm.simulate(s)  # warm-up (imports, registries, first-call caches)
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
