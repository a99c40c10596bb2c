"""Scheduling time with the idle-core stealing hook, against events, for growing graphs.

The generic scheduler calls a restructure hook after every commit (:mod:`moeopt.core.restructure`);
such a hook must not make scheduling quadratic in the event count. This prints, for the typical
PTO MegaMoE shape (world 8, K 7168, N 4096, topK 8, 16 experts per rank, profile pto-a2a3, both GMM
stages movable) at growing M, the events of the slowest rank's graph and the CPU seconds of one
``moeopt.schedule`` call

* ``none``: the same queued graph without a hook (``policy.restructure = core_queues``);
* ``stealing``: with :class:`~moeopt.megamoe.stealing.IdleCoreStealing` (amortised ``O(log n)``
  per commit, see its docstring);
* ``naive``: a hook with a similar rule written the straightforward way (it rescans every queued
  tile after each commit, as the original cost model's hook did): quadratic, run on the smaller
  graphs only.

Each figure is the median of ``--repeat`` calls (CPU seconds of this process). A near-linear hook
shows a roughly constant ``µs/event`` as the graph grows; the naive one's grows with it.

    python bench/bench_stealing.py [--repeat 3] [--tokens 128 512 2048 8192] [--naive-max 4000]
"""

from __future__ import annotations

import argparse
import statistics
import time

import moeopt.megamoe as mm
from moeopt.core.compiled import CompiledGraph
from moeopt.core.restructure import Restructure, RestructureControl
from moeopt.core.scheduler import schedule
from moeopt.megamoe.simulate import build_graphs
from moeopt.megamoe.stealing import STEAL_MIN_PENDING, restructure_rule


class NaiveStealing(Restructure):
    """The same stealing rule, recomputing every core's queue from scratch after each commit."""

    def __init__(self, queues: list[dict[str, list[str]]], min_pending: int) -> None:
        self._queues = queues
        self._min = min_pending

    def prepare(self, cg: CompiledGraph) -> None:
        self.members = [[cg.res_index[r] for r in per] for per in self._queues]
        self.events = [[cg.index[n] for names in per.values() for n in names] for per in self._queues]

    def after_commit(self, i: int, ctl: RestructureControl) -> None:
        for members, events in zip(self.members, self.events):
            pending: dict[int, list[int]] = {r: [] for r in members}
            for j in events:  # every tile of the stage, every commit
                if not ctl.done(j):
                    pending[ctl.fixed(j)[0]].append(j)
            thief = min(members, key=lambda r: (ctl.free_at(r), r))
            victim = max(members, key=lambda r: (len(pending[r]), -members.index(r)))
            if len(pending[thief]) < self._min <= len(pending[victim]) and victim != thief:
                ctl.repin(pending[victim][-1], victim, thief)


def pto(tokens: int) -> mm.Scenario:
    return mm.Scenario(
        workload=mm.Workload(tokens=tokens, topk=8, world=8, local_experts=16, routing="cyclic"),
        h=7168,
        hidden_dim=4096,
        profile="pto-a2a3",
    ).with_overrides({"policy.restructure": "core_queues"})


def cpu(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(repeat):
        t = time.process_time()
        fn()
        out.append(time.process_time() - t)
    return statistics.median(out)


def run(m: int, repeat: int, naive_max: int) -> tuple[int, float, float, float]:
    """(events, CPU s without a hook, with the stealing hook, with the naive hook or nan)."""
    rule = restructure_rule("idle_core_stealing")
    s = pto(m)
    cfg = s.config
    rg = max((rg for rg, _r in build_graphs(s).values()), key=lambda rg: len(rg.graph))
    g = rg.graph
    base = cpu(lambda: schedule(g, cfg.scheduling, normalize=False), repeat)
    steal = cpu(lambda: schedule(g, cfg.scheduling, normalize=False, restructure=rule.hook(rg, cfg)), repeat)
    naive = float("nan")
    if len(g) <= naive_max:
        queues = rule.hook(rg, cfg)._queues  # the same queues, handed to the naive hook
        hook = NaiveStealing(queues, STEAL_MIN_PENDING)
        naive = cpu(lambda: schedule(g, cfg.scheduling, normalize=False, restructure=hook), 1)
    return len(g), base, steal, naive


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tokens", type=int, nargs="+", default=[512, 2048, 8192, 32768])
    ap.add_argument(
        "--naive-max", type=int, default=8000, help="largest graph (events) the naive hook runs on"
    )
    args = ap.parse_args()
    print(
        f"{'tokens':>7} {'events':>7} {'none s':>8} {'stealing s':>10} {'naive s':>9}   µs/event: none  stealing  naive"
    )
    for m in args.tokens:
        n, base, steal, naive = run(m, args.repeat, args.naive_max)
        per = [1e6 * x / n for x in (base, steal, naive)]
        print(
            f"{m:>7} {n:>7} {base:>8.3f} {steal:>10.3f} {naive:>9.3f}   "
            f"{per[0]:>13.1f} {per[1]:>9.1f} {per[2]:>6.1f}"
        )


if __name__ == "__main__":
    main()
