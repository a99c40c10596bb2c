"""Runtime restructuring rules of the MegaMoE adapter (``policy.restructure``, registry kind
``"restructure"``): which events the generic scheduler's restructure hook may move, and when.

A rule is registered as a factory returning an object with

* ``stages(config) -> tuple[str, ...]``: the GMM stages whose pinned tiles it may move. The builder
  puts those tiles in a *queue per core* instead of a program-order chain (a core takes its queued
  tiles as they become ready, ties in program order, as a kernel with per-core work queues does)
  and declares each stage's own cores as a pool ``AIC-<stage>-steal``, the pool a tile may move in;
* ``hook(rank_graph, config) -> moeopt.Restructure | None``: the hook for one rank graph.

Built in:

* ``none`` (the default): nothing moves, every pinned tile follows its core's program order;
* ``core_queues``: the queues without stealing, the baseline that ``idle_core_stealing`` is to be
  compared with (the queue alone already changes the order a core takes its ready tiles in);
* ``idle_core_stealing`` (:class:`IdleCoreStealing`): the queues, and a core whose queue of a
  stage runs low takes the last queued tile of the busiest core of that stage: what dynamic load
  balancing would win over the build-time core assignment (``policy.core_assignment``).

Both move or queue the tiles of every pinned GMM stage whose tiles are not tied to their core
(the stage's hand-off to its consumer is in GM; an on-chip hand-off keeps the tile's output, its
slot and its colocated consumer on its core). A moved tile keeps its duration, which the builder
worked out for the core it was assigned to (what that core's L1 already held), and its consumers.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from moeopt.core.compiled import CompiledGraph
from moeopt.core.restructure import Restructure, RestructureControl
from moeopt.megamoe.config.implementation import STEAL_MIN_PENDING as IMPL_STEAL_MIN_PENDING
from moeopt.registry import register_builtin

if TYPE_CHECKING:
    from moeopt.megamoe.build.rankgraph import RankGraph
    from moeopt.megamoe.scenario import Config

GMM_CONSUMER = {"gmm1": "activation", "gmm2": "combine"}

# a core steals when it has fewer than this many tiles of the stage left, from a core that has at
# least this many (steal_min_pending, assumed: config/implementation.py)
STEAL_MIN_PENDING = IMPL_STEAL_MIN_PENDING


def steal_pool(stage: str) -> str:
    """The pool a stage's queued tiles may move in (the stage's own cores)."""
    return f"AIC-{stage}-steal"


def movable_stages(late_bind_pools: Sequence[str], onchip: Mapping[str, bool]) -> tuple[str, ...]:
    """The GMM stages whose tiles are pinned (the cube is not late-bound) and not tied to their
    core (``onchip[stage]``: the stage hands its output to its consumer on chip)."""
    if "AIC" in late_bind_pools:
        return ()
    return tuple(st for st in ("gmm1", "gmm2") if not onchip[st])


class NoRestructure:
    """``none``: nothing moves."""

    def stages(self, cfg: Config) -> tuple[str, ...]:
        return ()

    def hook(self, rg: RankGraph, cfg: Config) -> Restructure | None:
        return None


class CoreQueues:
    """``core_queues``: the pinned tiles of the movable GMM stages in a queue per core (no program
    order between them), nothing moves."""

    def stages(self, cfg: Config) -> tuple[str, ...]:
        onchip = {st: cfg.link(st, GMM_CONSUMER[st]).location == "onchip" for st in GMM_CONSUMER}
        return movable_stages(cfg.late_bind_pools, onchip)

    def hook(self, rg: RankGraph, cfg: Config) -> Restructure | None:
        return None


class IdleCoreStealingRule(CoreQueues):
    """``idle_core_stealing``: see :class:`IdleCoreStealing`."""

    def hook(self, rg: RankGraph, cfg: Config) -> Restructure | None:
        queues: list[dict[str, list[str]]] = []
        for st in self.stages(cfg):
            own = [f"c{k}.AIC" for k in cfg.core_groups[st].cores]
            per: dict[str, list[str]] = {r: [] for r in own}
            for name, ev in rg.graph.events.items():
                if ev.labels.get("stage") == st and len(ev.resources) == 1 and ev.resources[0] in per:
                    per[ev.resources[0]].append(name)
            queues.append(per)
        return IdleCoreStealing(queues, STEAL_MIN_PENDING)


class IdleCoreStealing(Restructure):
    """An idle core takes the last queued tile of the busiest core.

    ``queues``: per stage, each member core's tiles in program order (the graph's order). After
    a tile of a stage is committed on core ``c``, if ``c`` has fewer than ``min_pending`` tiles
    of the stage left (not committed), the core with the most left (the first in pool order on
    ties) gives up its last one to ``c``, if it has at least ``min_pending``. On the first call,
    every core that starts with fewer than ``min_pending`` does the same once (a core with no
    tile of its own commits none, so it would never ask otherwise). At most one tile moves per
    commit (plus one per core on the first call).

    Near-linear cost. Per stage the hook keeps each core's count of tiles left, a max-heap of
    ``(-count, pool position)`` with lazy deletion (an entry is current iff its count is the
    core's count now), and each core's list of tiles in program order with tiles moved in
    appended at the end. A commit costs one count update and one heap push; a steal costs two
    counts, two pushes, one append and one re-pin (``O(log n)`` in the scheduler). Stale heap
    entries are popped at most once each, and so are committed or moved tiles at a list's end;
    each push or append pays for its later pop. With ``n`` events and ``m`` commits there are
    at most ``m + members`` steals, so the hook's total work is ``O((n + m) log n)``: amortised
    ``O(log n)`` per commit, and the scheduler stays near-linear (``bench/bench_stealing.py``
    prints events against time for growing graphs).
    """

    name = "idle_core_stealing"

    def __init__(self, queues: Sequence[Mapping[str, Sequence[str]]], min_pending: int) -> None:
        self._queues = queues
        self._min = min_pending
        self._started = False

    def prepare(self, cg: CompiledGraph) -> None:
        n = cg.n
        self._started = False  # a hook scheduled twice starts afresh each time
        self.group = [-1] * n  # stage group of each movable tile (-1: not movable)
        self.owner = [-1] * n  # the core (resource index) a movable tile is queued on now
        self.lists: list[dict[int, list[int]]] = []  # group -> core -> tiles (program order, then moved in)
        self.count: list[dict[int, int]] = []  # group -> core -> tiles left
        self.pos: list[dict[int, int]] = []  # group -> core -> position in the pool
        self.heap: list[list[tuple[int, int, int]]] = []  # group -> (-count, position, core)
        for g, per in enumerate(self._queues):
            lists: dict[int, list[int]] = {}
            for res, names in per.items():
                r = cg.res_index.get(res, -1)
                if r < 0:
                    continue  # a core with no event in this graph: no resource index to move to
                idx = [cg.index[nm] for nm in names]
                lists[r] = idx
                for j in idx:
                    self.group[j] = g
                    self.owner[j] = r
            self.lists.append(lists)
            self.count.append({r: len(v) for r, v in lists.items()})
            self.pos.append({r: k for k, r in enumerate(lists)})
            hp = [(-len(v), k, r) for k, (r, v) in enumerate(lists.items())]
            heapq.heapify(hp)
            self.heap.append(hp)

    def after_commit(self, i: int, ctl: RestructureControl) -> None:
        if not self._started:
            self._started = True
            for g, counts in enumerate(self.count):
                for r in list(counts):
                    if counts[r] < self._min:
                        self._steal_for(g, r, ctl)
        g = self.group[i]
        if g < 0:
            return
        r = self.owner[i]
        counts = self.count[g]
        counts[r] -= 1
        heapq.heappush(self.heap[g], (-counts[r], self.pos[g][r], r))
        if counts[r] < self._min:
            self._steal_for(g, r, ctl)

    def _steal_for(self, g: int, thief: int, ctl: RestructureControl) -> None:
        counts, hp = self.count[g], self.heap[g]
        while hp and -hp[0][0] != counts[hp[0][2]]:
            heapq.heappop(hp)  # stale: that core's count has changed since
        if not hp or -hp[0][0] < self._min or hp[0][2] == thief:
            return
        victim = hp[0][2]
        lst = self.lists[g][victim]
        while lst and (ctl.done(lst[-1]) or self.owner[lst[-1]] != victim):
            lst.pop()  # committed, or moved away: never the victim's to give again
        if not lst:  # pragma: no cover - a count >= min_pending means a tile is left
            return
        j = lst.pop()
        ctl.repin(j, victim, thief)
        self.owner[j] = thief
        self.lists[g][thief].append(j)
        counts[victim] -= 1
        counts[thief] += 1
        heapq.heappush(hp, (-counts[victim], self.pos[g][victim], victim))
        heapq.heappush(hp, (-counts[thief], self.pos[g][thief], thief))


def restructure_rule(name: str) -> Any:
    """The registered rule ``name`` (``policy.restructure``)."""
    from moeopt.registry import lookup

    return lookup("restructure", name)()


register_builtin("restructure", "none", NoRestructure)
register_builtin("restructure", "core_queues", CoreQueues)
register_builtin("restructure", "idle_core_stealing", IdleCoreStealingRule)
