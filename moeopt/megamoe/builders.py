"""Builders: one destination rank's MegaMoE execution unrolled into a generic EventGraph.

Resources per core ``k``: ``c{k}.AIC`` (cube), ``c{k}.MTE2`` (the AIC's GM->L1 pipe, the load
phase of a GMM tile), ``c{k}.AIV0`` / ``c{k}.AIV1`` (vector cores). Stage names live only in
event labels; the scheduler never sees them.

What the graph encodes (SPEC §6, §6.1):

* head: the front reorder as one closed-form event on every AIV of the rank (launch + routing
  sort + quantised scatter of the packed rows at the all-AIV streaming rate);
* dispatch: (local expert, source rank) row segments, row-level software pipeline
  ``call + max(λ_remote, first batch) + extra rows x beat``; URMA: batched GET per (wave, source);
* gmm1 / gmm2: every output tile is a load phase on ``MTE2`` (A and B bytes GM->L1, B
  reuse via L2 for later m-groups, holding HBM bandwidth units for first-touch bytes) and a
  compute phase on ``AIC`` (MACs / cube rate); L1 stages are a per-core semaphore taken by the
  load and given back by the compute; each core's loads are chained in program order;
* activation: per GMM1 tile colocated on the same core when the link is on-chip (slots =
  depth), else per SwiGLU segment with rows split over the activation AIVs;
* combine: per GMM2 tile on the tile's paired AIVs, or per (expert, source rank, lane) rows;
  URMA: batched PUT per (expert, source) on AIV1 in program order;
* tail: unpermute as one closed-form event on every AIV after the last combine.

Stage boundaries are zero-duration flag events without resources; their sync latency sits on
the consumer edge (λ), not inside durations.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from moeopt.core.events import Event, EventGraph
from moeopt.megamoe.contract import GroupedGemmContract, contract_from_sizes
from moeopt.megamoe.planning import MGroup, Tile, check_grid, swizzle_order
from moeopt.megamoe.scenario import Config, CoreGroup
from moeopt.registry import lookup, register_builtin

DISPATCH_BATCH_ROWS = 2  # impl: kDispatchGatherUbMoveNum = 2 (dispatch.h@HEAD L25-31)
COMBINE_LANES = 2  # impl: kCombineLargeLanesPerRank = 2 (combine.h@2d9d4288 L27-28)
CUBE_M_ALIGN = 16  # spec: cube fractal M = 16 rows (int8 16x32x16, fp16 16x16x16)


_event = Event.trusted
"""Builders make their events with :meth:`Event.trusted`: their names, resources, λ and units
come from this module's own code (a test rebuilds every one with the checking constructor). A
few are revised later: late dependencies replace them, dropped semaphores are filtered out
when the graph is assembled."""

_Units = Mapping[str, int]  # an event's acquires or releases: semaphore -> units


@dataclass
class ExpertPlan:
    index: int  # position in the rank's expert list (local experts, then shared experts)
    name: str
    rows: int
    rows_by_src: tuple[int, ...]  # rows from each source rank (shared experts: all local)
    shared: bool
    g1_tiles: list[Tile] = field(default_factory=list)
    g2_tiles: list[Tile] = field(default_factory=list)


@dataclass
class RankGraph:
    """A built rank: the graph plus what the analyses need to read it."""

    rank: int
    graph: EventGraph
    experts: list[ExpertPlan]
    contract: GroupedGemmContract
    stage_members: dict[str, tuple[str, ...]]  # stage -> resources it may run on
    late_stages: set[str]
    colocated_stages: set[str]
    traffic_bytes: dict[str, float]
    macs: float
    algo_hbm_bytes: float
    algo_remote_in_bytes: float
    algo_remote_out_bytes: float
    combine_events: list[str]
    chain_edges: set[tuple[str, str]]
    tail_event: str
    head_event: str
    waves_gmm1: int
    waves_gmm2: int
    dropped_semaphores: list[str] = field(default_factory=list)  # could never bind; not declared
    _data_preds: list[tuple[tuple[int, float], ...]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def data_preds(self) -> list[tuple[tuple[int, float], ...]]:
        """Per event index (graph order), its predecessors ``(index, λ)`` without the edges that
        only chain it in program order on a pinned resource (data dependencies; built once)."""
        if self._data_preds is None:
            cg = self.graph.compiled()
            index = cg.index
            chained: dict[int, set[int]] = {}
            for a, b in self.chain_edges:
                chained.setdefault(index[b], set()).add(index[a])
            preds = list(cg.preds)
            for i, skip in chained.items():
                preds[i] = tuple([pl for pl in preds[i] if pl[0] not in skip])
            self._data_preds = preds
        return self._data_preds


class _Builder:
    def __init__(
        self,
        cfg: Config,
        tokens: int,
        topk: int,
        world: int,
        rows: np.ndarray,
        rank: int,
        shared_experts: int,
    ) -> None:
        self.cfg = cfg
        self.tokens = tokens
        self.topk = topk
        self.world = world
        self.rank = rank
        self.rows = rows  # rows[src][local expert]
        self.n_shared = shared_experts
        # events by name in the order they were added; the EventGraph is built once, at the end
        # of build(), with the late-added dependencies (lookahead, barriers) already applied
        self.g: dict[str, Event] = {}
        self.lookahead_targets: list[tuple[int, int]] = []
        self.pending_replace: dict[str, Event] = {}
        self.stage_done_flag: dict[str, str] = {}
        self.dropped_semaphores: list[str] = []
        self.traffic: dict[str, float] = {
            "gm_to_l1": 0.0,
            "hbm": 0.0,
            "remote_in": 0.0,
            "remote_out": 0.0,
            "gm_to_ub": 0.0,
            "ub_to_gm": 0.0,
        }
        self.sems: dict[str, int] = {}
        self.pools: dict[str, tuple[str, ...]] = {}
        self.stage_members: dict[str, tuple[str, ...]] = {}
        self.late_stages: set[str] = set()
        self.colocated_stages: set[str] = set()
        self.chain_last: dict[str, str] = {}  # pinned resource -> last event in program order
        self.unit = cfg.c("bw_unit_bytes_per_us")
        self.bpe = 1 if cfg.quant == "w8a8" else 2
        self.row_bytes = cfg.h + 32 if cfg.quant == "w8a8" else cfg.h * 2
        self.macs = 0.0
        self.chain_preds: list[str] = []
        self.chain_edges: set[tuple[str, str]] = set()
        self.stage_events: dict[str, list[str]] = {}
        self._const = {name: const.value for name, const in cfg.constants.items()}
        self._contention = cfg.bandwidth_contention
        self._src_rows_memo: dict[tuple[tuple[int, ...], int, int], tuple[tuple[int, int], ...]] = {}
        # combine writes: (rows, cols, readback, release) -> (µs, readback bytes, HBM bytes,
        # remote bytes, acquires, releases)
        self._write_memo: dict[Any, tuple[float, int, float, float, _Units, _Units]]
        self._write_memo = {}
        self._hold_memo: dict[tuple[str, int, str | None, str | None], tuple[_Units, _Units]] = {}
        self._core_res: dict[tuple[int, str], tuple[str, tuple[str]]] = {}
        # the baseline kernel runs every vector stage in program order on each AIV
        self.in_program_order = cfg.profile == "pto-a2a3" or cfg.barriers == "staged"

    # ------------------------------------------------------------ helpers
    def c(self, name: str) -> float:
        return self._const[name]

    def add(self, ev: Event, stage: str | None = None) -> str:
        name = ev.name
        if self.chain_preds:
            for p in self.chain_preds:
                if p in ev.deps:
                    self.chain_edges.add((p, name))
            self.chain_preds = []
        g = self.g
        n = len(g)
        g[name] = ev
        if len(g) == n:
            raise AssertionError(f"builder added event {name!r} twice")
        if stage is not None:
            names = self.stage_events.get(stage)
            if names is None:
                names = self.stage_events[stage] = []
            names.append(name)
        return name

    def flag(self, name: str, deps: Sequence[str]) -> str:
        return self.add(
            _event(name, deps=dict.fromkeys(deps, 0.0), labels={"stage": "flag", "rank": self.rank})
        )

    def units(self, channel: str, nbytes: float, dur: float, count: bool = True) -> int:
        """Bandwidth units of ``channel`` that moving ``nbytes`` in ``dur`` µs holds (the rate
        rounded up to units; 0 when nothing is held); ``count``: add ``nbytes`` to the channel's
        traffic (callers that reuse an earlier event's units count each event's traffic)."""
        if count:
            traffic = self.traffic
            traffic[channel] = traffic.get(channel, 0.0) + nbytes
        if not self._contention or nbytes <= 0 or dur <= 0:
            return 0
        u = math.ceil(nbytes / dur / self.unit - 1e-9)
        return min(max(u, 1), self.sems[channel])

    def bw(
        self, acq: dict[str, int], rel: dict[str, int], channel: str, nbytes: float, dur: float,
        count: bool = True,
    ) -> None:
        """Hold ``channel`` bandwidth units for the event's own duration (see :meth:`units`)."""
        u = self.units(channel, nbytes, dur, count)
        if u:
            acq[channel] = acq.get(channel, 0) + u
            rel[channel] = rel.get(channel, 0) + u

    def core_res(self, core: int, sub: str) -> tuple[str, tuple[str]]:
        """``("c3.AIV0", ("c3.AIV0",))``: a pinned resource's name and the one-resource list of
        it, one shared copy per (core, sub-core) (events by the thousand name the same few)."""
        key = (core, sub)
        got = self._core_res.get(key)
        if got is None:
            name = f"c{core}.{sub}"
            got = self._core_res[key] = (name, (name,))
        return got

    def hold_maps(
        self, channel: str, units: int, take: str | None = None, give: str | None = None
    ) -> tuple[_Units, _Units]:
        """(acquires, releases) of an event that holds ``units`` of ``channel`` for its own
        duration (0: none), takes one unit of ``take`` and gives one of ``give``: read-only maps
        shared by every event with the same arguments (thousands of tiles have a few distinct
        ones)."""
        key = (channel, units, take, give)
        got = self._hold_memo.get(key)
        if got is None:
            acq = {channel: units} if units else {}
            rel = dict(acq)
            if take is not None:
                acq[take] = 1
            if give is not None:
                rel[give] = 1
            got = self._hold_memo[key] = (MappingProxyType(acq), MappingProxyType(rel))
        return got

    def group_resources(self, grp: CoreGroup) -> list[str]:
        if grp.role == "AIV":
            return [f"c{k}.AIV{j}" for k in grp.cores for j in range(self.cfg.aiv_per_core)]
        return [f"c{k}.{grp.role}" for k in grp.cores]

    def is_late(self, stage: str) -> bool:
        role = self.cfg.core_groups[stage].role
        late = self.cfg.late_bind_pools
        return role in late or (role.startswith("AIV") and "AIV" in late)

    def pool(self, name: str, members: Sequence[str]) -> str:
        members = tuple(members)
        if name in self.pools and self.pools[name] != members:
            raise AssertionError(f"pool {name} declared twice with different members")
        self.pools[name] = members
        return f"{name}:*"

    def chain(self, res: str, ev_deps: dict[str, float], lam: float = 0.0) -> None:
        """Program order on a pinned resource: depend on the previous event issued on it."""
        prev = self.chain_last.get(res)
        if prev is not None and prev not in ev_deps:
            ev_deps[prev] = lam
            self.chain_preds.append(prev)

    # ------------------------------------------------------------ plan
    def plan(self) -> list[ExpertPlan]:
        cfg = self.cfg
        experts = []
        E = self.rows.shape[1]
        for e in range(E):
            col = tuple(int(x) for x in self.rows[:, e])
            experts.append(ExpertPlan(e, f"e{e}", sum(col), col, False))
        for j in range(self.n_shared):
            col = tuple(self.tokens if s == self.rank else 0 for s in range(self.world))
            experts.append(ExpertPlan(E + j, f"s{j}", self.tokens, col, True))
        grid = lookup("tile_grid", cfg.tile_grid)()
        # a tile grid is a function of (rows, cols, tile_m, tile_n): experts with the same row
        # count share one checked, swizzled walk (under uniform routing that is every expert)
        walks: dict[tuple[int, str], list[Tile]] = {}
        for ex in experts:
            if ex.rows == 0:
                continue
            for stage, cols in (("gmm1", cfg.hidden_dim), ("gmm2", cfg.h)):
                walk = walks.get((ex.rows, stage))
                if walk is None:
                    tiles = grid(ex.rows, cols, cfg.tile_m, cfg.tile_n)
                    check_grid(tiles, ex.rows, cols, f"tile grid {cfg.tile_grid!r} ({stage}, {ex.name})")
                    walk = walks[(ex.rows, stage)] = swizzle_order(tiles, cfg.swizzle_n)
                if stage == "gmm1":
                    ex.g1_tiles = list(walk)
                else:
                    ex.g2_tiles = list(walk)
        return experts

    def waves(self, experts: list[ExpertPlan], per_wave: int) -> list[list[MGroup]]:
        groups = [
            MGroup(ex.index, mb, min(self.cfg.tile_m, ex.rows - mb * self.cfg.tile_m))
            for ex in experts
            if ex.rows > 0
            for mb in range(-(-ex.rows // self.cfg.tile_m))
        ]
        return lookup("wave_packer", self.cfg.wave_packing)()(groups, per_wave)

    # ------------------------------------------------------------ build
    def build(self) -> RankGraph:
        cfg = self.cfg
        experts = self.plan()
        n = cfg.aic_num
        bw_cap = {
            "hbm": cfg.c("hbm_bytes_per_us"),
            "remote_in": cfg.c("remote_in_bytes_per_us"),
            "remote_out": cfg.c("remote_out_bytes_per_us"),
        }
        for ch, rate in bw_cap.items():
            self.sems[ch] = max(1, int(rate // self.unit))
        for st in ("dispatch", "gmm1", "activation", "gmm2", "combine"):
            self.stage_members[st] = tuple(self.group_resources(cfg.core_groups[st]))
            if self.is_late(st):
                self.late_stages.add(st)
        for st in ("gmm1", "gmm2"):
            grp = cfg.core_groups[st]
            if grp.join is not None:
                extra = [
                    r
                    for r in self.group_resources(cfg.core_groups[grp.join])
                    if r not in self.stage_members[st]
                ]
                self.stage_members[st] = self.stage_members[st] + tuple(extra)
        aiv_all = [f"c{k}.AIV{j}" for k in range(n) for j in range(cfg.aiv_per_core)]

        # L1 stage slots and on-chip link slots: per core when pinned, pooled when late-bound
        self.l1_late = "gmm1" in self.late_stages or "gmm2" in self.late_stages
        for k in range(n):
            if not self.l1_late:
                self.sems[f"c{k}.l1"] = cfg.l1_stages
        if self.l1_late:
            self.sems["l1"] = cfg.l1_stages * n
        for (a, b), key in ((("gmm1", "activation"), "act"), (("gmm2", "combine"), "comb")):
            lk = cfg.link(a, b)
            if lk.location == "onchip":
                if a in self.late_stages:
                    self.sems[f"onchip_{key}"] = lk.depth * n
                else:
                    for k in range(n):
                        self.sems[f"c{k}.onchip_{key}"] = lk.depth

        # ---- head: front reorder on every AIV of the rank
        routes = self.tokens * self.topk
        front_bytes = self.tokens * cfg.h * 2 + routes * self.row_bytes
        head_us = (
            self.c("launch_us")
            + routes * self.c("front_sort_us_per_route")
            + front_bytes / self.c("aiv_aggregate_local_bytes_per_us")
        )
        self.traffic["hbm"] += front_bytes
        head = self.add(
            _event(
                "head", resources=aiv_all, duration_us=head_us, labels={"stage": "head", "rank": self.rank}
            ),
            "head",
        )
        for r in aiv_all:
            self.chain_last[r] = head

        w1 = self.waves(experts, cfg.p1_override)
        w2 = self.waves(experts, cfg.p2_override)
        d2c = self.build_dispatch(experts, w1, head)
        g1_last = self.build_gmm(experts, w1, "gmm1", d2c, head)
        act_done = self.build_activation(experts, w1, w2, g1_last)
        g2_done = self.build_gmm2(experts, w2, act_done)
        combine = self.build_combine(experts, w2, g2_done)

        # ---- tail: unpermute on every AIV after every combine (cross-rank barrier)
        shared_tail = [g2_done["expert"][ex.index] for ex in experts if ex.shared and ex.rows]
        done = self.flag("combine_done", combine + shared_tail)
        tail_bytes = routes * cfg.h * 2 + self.tokens * cfg.h * 2 * (1 + self.n_shared)
        tail_us = tail_bytes / self.c("aiv_aggregate_local_bytes_per_us")
        self.traffic["hbm"] += tail_bytes
        deps = {done: self.c("cross_rank_flag_us")}
        for r in aiv_all:
            self.chain(r, deps)
        tail = self.add(
            _event(
                "tail",
                resources=aiv_all,
                deps=deps,
                duration_us=tail_us,
                labels={"stage": "tail", "rank": self.rank},
            ),
            "tail",
        )

        if cfg.barriers == "staged":
            self.add_stage_barriers()

        graph = self.assemble()

        sizes = [ex.rows for ex in experts if not ex.shared]
        contract = contract_from_sizes(sizes, cfg.tile_m, cfg.tile_m)
        remote_in = sum(int(self.rows[s].sum()) for s in range(self.world) if s != self.rank) * self.row_bytes
        local_src_rows = int(self.rows[self.rank].sum())
        remote_out = (int(self.rows.sum()) - local_src_rows) * cfg.h * 2
        active = [ex for ex in experts if ex.rows > 0]
        weight_bytes = sum(
            cfg.h * cfg.hidden_dim * self.bpe + (cfg.hidden_dim // 2) * cfg.h * self.bpe for _ in active
        )
        act_bytes = sum(ex.rows * cfg.h * self.bpe for ex in active)
        return RankGraph(
            rank=self.rank,
            graph=graph,
            experts=experts,
            contract=contract,
            stage_members=self.stage_members,
            late_stages=self.late_stages,
            colocated_stages=self.colocated_stages,
            traffic_bytes=self.traffic,
            macs=self.macs,
            algo_hbm_bytes=weight_bytes + act_bytes,
            algo_remote_in_bytes=remote_in,
            algo_remote_out_bytes=remote_out,
            combine_events=combine,
            chain_edges=self.chain_edges,
            tail_event=tail,
            head_event=head,
            waves_gmm1=len(w1),
            waves_gmm2=len(w2),
            dropped_semaphores=self.dropped_semaphores,
        )

    def assemble(self) -> EventGraph:
        """The EventGraph of every added event (late dependencies applied).

        A semaphore whose capacity covers the total amount ever acquired from it can never delay
        an event in any schedule (its free level stays >= capacity - total >= every single
        acquire), so it is not declared and no event names it: the schedule is the same with or
        without it (SPEC §4's normalisation criterion, its special case that needs no graph walk),
        and the scheduler is spared the cost of tracking it.
        """
        pending = self.pending_replace
        specs = [pending.get(name, ev) for name, ev in self.g.items()] if pending else list(self.g.values())
        # events with equal acquire / release maps share one mapping object (see Event.trusted):
        # the demand and the dropped-semaphore test are worked out once per distinct map
        acqs = [sp.acquires for sp in specs]
        acq_maps = dict(zip(map(id, acqs), acqs))
        demand: dict[str, int] = dict.fromkeys(self.sems, 0)
        for key, uses in Counter(map(id, acqs)).items():
            for sem, a in acq_maps[key].items():
                demand[sem] += a * uses
        sems = {name: cap for name, cap in self.sems.items() if cap < demand[name]}
        dropped = set(self.sems) - set(sems)
        self.dropped_semaphores = sorted(dropped)
        graph = EventGraph(semaphores=sems, pools=self.pools)
        events = specs
        rels = [sp.releases for sp in specs]
        touched = {key for key, m in acq_maps.items() if not dropped.isdisjoint(m)}
        touched.update(id(m) for m in dict(zip(map(id, rels), rels)).values() if not dropped.isdisjoint(m))
        if touched:
            events = []
            for sp in specs:
                acq, rel = sp.acquires, sp.releases
                if id(acq) not in touched and id(rel) not in touched:
                    events.append(sp)
                    continue
                events.append(
                    _event(
                        sp.name,
                        resources=sp.resources,
                        deps=sp.deps,
                        acquires={k: v for k, v in acq.items() if k not in dropped},
                        releases={k: v for k, v in rel.items() if k not in dropped},
                        colocate_with=sp.colocate_with,
                        duration_us=sp.duration_us,
                        labels=sp.labels,
                    )
                )
        graph.add_all(events)
        return graph

    # ------------------------------------------------------------ stages
    def vector_slot(self, stage: str, slot: int) -> str:
        members = self.stage_members[stage]
        return members[slot % len(members)]

    def vector_res(self, stage: str, slot: int) -> tuple[list[str], str | None]:
        """(resources, pinned resource or None) for a vector event of ``stage``."""
        if stage in self.late_stages:
            return [self.pool(f"AIV-{stage}", self.stage_members[stage])], None
        r = self.vector_slot(stage, slot)
        return [r], r


    def build_dispatch(self, experts: list[ExpertPlan], waves: list[list[MGroup]], head: str) -> list[str]:
        cfg = self.cfg
        tm = cfg.tile_m
        # wave of each (expert, source) segment: the first wave that needs any of its rows
        wave_of_mb = {(g.expert, g.mb): w for w, wave in enumerate(waves) for g in wave}
        seg_wave: dict[tuple[int, int], int] = {}
        for ex in experts:
            if ex.shared or ex.rows == 0:
                continue
            off = 0
            for s, n_rows in enumerate(ex.rows_by_src):
                if n_rows:
                    mbs = range(off // tm, (off + n_rows - 1) // tm + 1)
                    seg_wave[(ex.index, s)] = min(wave_of_mb[(ex.index, mb)] for mb in mbs)
                off += n_rows
        by_wave: dict[int, list[tuple[int, int]]] = {}
        for key, w in sorted(seg_wave.items(), key=lambda kv: (kv[1], kv[0][0], kv[0][1])):
            by_wave.setdefault(w, []).append(key)
        d2c: list[str] = []
        gran = cfg.event_granularity["dispatch"]
        self.c("cross_rank_flag_us")
        prev_flag: str | None = None
        for w in range(len(waves)):
            names: list[str] = []
            segs = by_wave.get(w, [])
            if cfg.topo_urma:
                names = self.urma_gets(w, segs, experts, head, prev_flag)
            else:
                # group segments by their AIV (source rank -> AIV slot), pack `gran` per event
                per_slot: dict[int, list[tuple[int, int]]] = {}
                for e, s in segs:
                    per_slot.setdefault(s, []).append((e, s))
                for s, items in sorted(per_slot.items()):
                    for i in range(0, len(items), gran):
                        pack = items[i : i + gran]
                        names.append(self.dispatch_event(w, s, pack, experts, head, prev_flag))
            deps = list(names)
            if not deps:
                deps = [head]
            la = cfg.dispatch_lookahead
            flag = self.flag(f"d2c.w{w}", deps)
            d2c.append(flag)
            prev_flag = flag
            if la and w - la >= 0:
                self.lookahead_targets.append((w, w - la))
        return d2c

    def dispatch_event(
        self,
        w: int,
        s: int,
        pack: list[tuple[int, int]],
        experts: list[ExpertPlan],
        head: str,
        prev_flag: str | None,
    ) -> str:
        remote = s != self.rank
        rate = self.c("aiv_remote_read_bytes_per_us") if remote else self.c("aiv_local_bytes_per_us")
        beat = self.row_bytes / rate
        lam = self.c("remote_latency_us") if remote else 0.0
        dur = 0.0
        rows = 0
        for e, _s in pack:
            n_rows = experts[e].rows_by_src[s]
            rows += n_rows
            first = min(n_rows, DISPATCH_BATCH_ROWS)
            dur += self.c("dispatch_call_us") + max(lam, first * beat) + (n_rows - first) * beat
        nbytes = rows * self.row_bytes
        acq: dict[str, int] = {}
        rel: dict[str, int] = {}
        if remote:
            self.bw(acq, rel, "remote_in", nbytes, dur)
        self.bw(acq, rel, "hbm", nbytes, dur)
        self.traffic["ub_to_gm"] += nbytes
        resources, pinned = self.vector_res("dispatch", s)
        deps: dict[str, float] = {head: self.c("cross_rank_flag_us")}
        if pinned is not None and self.in_program_order:
            # program order on the AIV; the next expert group starts after the SYNCALL of the last
            self.chain(pinned, deps)
            if prev_flag is not None:
                deps[prev_flag] = self.c("syncall_us")
        elif pinned is not None:
            self.chain(pinned, deps)
        name = f"disp.w{w}.src{s}.e{pack[0][0]}" + (f"+{len(pack) - 1}" if len(pack) > 1 else "")
        self.add(
            _event(
                name,
                resources=resources,
                deps=deps,
                acquires=acq,
                releases=rel,
                duration_us=dur,
                labels={
                    "stage": "dispatch",
                    "rank": self.rank,
                    "wave": w,
                    "expert": pack[0][0],
                    "src": s,
                    "rows": rows,
                },
            ),
            "dispatch",
        )
        if pinned is not None:
            self.chain_last[pinned] = name
        return name

    def urma_gets(
        self, w: int, segs: list[tuple[int, int]], experts: list[ExpertPlan], head: str, prev_flag: str | None
    ) -> list[str]:
        """URMA: one batched GET per (wave, remote source) issued from AIV1 in program order."""
        by_src: dict[int, int] = {}
        for e, s in segs:
            by_src[s] = by_src.get(s, 0) + experts[e].rows_by_src[s]
        names = []
        for s, rows in sorted(by_src.items()):
            if s == self.rank:
                names.append(
                    self.dispatch_event(w, s, [x for x in segs if x[1] == s], experts, head, prev_flag)
                )
                continue
            nbytes = rows * self.row_bytes
            dur = self.c("urma_op_us") + nbytes / self.c("urma_get_bytes_per_us")
            acq: dict[str, int] = {}
            rel: dict[str, int] = {}
            self.bw(acq, rel, "remote_in", nbytes, dur)
            self.bw(acq, rel, "hbm", nbytes, dur)
            self.traffic["ub_to_gm"] += nbytes
            name = f"get.w{w}.src{s}"
            res = self.urma_resource(s)
            deps: dict[str, float] = {head: self.c("cross_rank_flag_us")}
            self.chain(res, deps)
            self.add(
                _event(
                    name,
                    resources=[res],
                    deps=deps,
                    acquires=acq,
                    releases=rel,
                    duration_us=dur,
                    labels={"stage": "dispatch", "rank": self.rank, "wave": w, "src": s, "rows": rows},
                ),
                "dispatch",
            )
            self.chain_last[res] = name
            names.append(name)
        return names

    def urma_resource(self, s: int) -> str:
        cores = self.cfg.core_groups["dispatch"].cores
        return f"c{cores[s % len(cores)]}.AIV1"

    # ---- GMM
    def gmm_cores(self, stage: str, expert: ExpertPlan) -> tuple[list[int], list[int]]:
        """(cores of the stage's own group, cores that joined) for ``expert``."""
        grp = self.cfg.core_groups[stage]
        own = list(grp.cores)
        if grp.join is not None and expert.index >= grp.join_from_expert:
            joined = [k for k in self.cfg.core_groups[grp.join].cores if k not in own]
            return own, joined
        return own, []

    def tile_costs(self, stage: str, expert: ExpertPlan, tiles: Sequence[Tile]) -> list[float]:
        k = self.cfg.h if stage == "gmm1" else self.cfg.hidden_dim // 2
        rate = self.cube_rate()
        return [(t.m1 - t.m0) * (t.n1 - t.n0) * k / rate for t in tiles]

    def cube_rate(self) -> float:
        return self.c("cube_mac_per_us_int8") if self.cfg.quant == "w8a8" else self.c("cube_mac_per_us_fp16")

    def build_gmm(
        self, experts: list[ExpertPlan], waves: list[list[MGroup]], stage: str, d2c: list[str], head: str
    ) -> dict[tuple[int, int, Tile], tuple[str, str]]:
        """GMM1 tiles per wave; returns flags for the consumers."""
        cfg = self.cfg
        # wave dependency of each m-group: D2C of its wave, or of wave + lag
        lag = cfg.dispatch_lag
        tiles_by_expert: dict[int, list[tuple[int, Tile]]] = {}
        wave_of: dict[tuple[int, int], int] = {}
        for w, wave in enumerate(waves):
            for g in wave:
                wave_of[(g.expert, g.mb)] = w
        order = []  # (wave, expert, tile) in program order: waves, then the expert's swizzled walk
        for w, wave in enumerate(waves):
            mgs = {(g.expert, g.mb) for g in wave}
            seen: list[int] = []
            for g in wave:
                if g.expert not in seen:
                    seen.append(g.expert)
            for e in seen:
                for t in experts[e].g1_tiles:
                    if (e, t.mb) in mgs:
                        order.append((w, e, t))
                        tiles_by_expert.setdefault(e, []).append((w, t))
        events = self.gmm_tiles(stage, experts, order, lambda w, e: self.g1_deps(w, e, d2c, lag, head))
        self.g1_events = events
        # lookahead: dispatch of wave w waits until GMM1 of wave w - L has loaded its rows
        loads_of_wave: dict[int, list[str]] = {}
        for (ww, _e, _t), (ld, _mm) in events.items():
            loads_of_wave.setdefault(ww, []).append(ld)
        dispatch_of_wave: dict[Any, list[str]] = {}
        for name in self.stage_events.get("dispatch", []):
            dispatch_of_wave.setdefault(self.g[name].labels.get("wave"), []).append(name)
        for w, w_prev in self.lookahead_targets:
            loads = loads_of_wave.get(w_prev, [])
            if not loads:
                continue
            fl = self.flag(f"g1loaded.w{w_prev}", loads)
            for name in dispatch_of_wave.get(w, []):
                self.replace_deps(name, {fl: self.c("flag_latency_us")})
        return events

    def g1_deps(self, w: int, e: int, d2c: list[str], lag: int, head: str) -> dict[str, float]:
        if e >= self.rows.shape[1]:  # shared expert: local rows, ready after the front
            return {head: self.c("flag_latency_us")}
        target = min(len(d2c) - 1, w + lag)
        return {d2c[target]: self.c("flag_latency_us")}

    def replace_deps(self, name: str, extra: dict[str, float]) -> None:
        """Add dependencies to an already added event (rebuilds the graph's node)."""
        old = self.pending_replace.get(name) or self.g[name]
        deps = dict(old.deps)
        deps.update(extra)
        new = _event(
            old.name,
            resources=old.resources,
            deps=deps,
            acquires=old.acquires,
            releases=old.releases,
            colocate_with=old.colocate_with,
            duration_us=old.duration_us,
            labels=old.labels,
        )
        self.pending_replace[name] = new

    def gmm_tiles(
        self,
        stage: str,
        experts: list[ExpertPlan],
        order: list[tuple[int, int, Tile]],
        deps_of: Any,
        chunk_deps: Any = None,
        chunks: int = 1,
    ) -> dict[tuple[int, int, Tile], tuple[str, str]]:
        cfg = self.cfg
        k_dim = cfg.h if stage == "gmm1" else cfg.hidden_dim // 2
        rate = self.cube_rate()
        gm_l1 = self.c("gm_l1_bytes_per_us")
        reuse = self.c("b_reuse_load_factor")
        late = stage in self.late_stages
        # core assignment per expert group, cursor carried across experts in program order
        groups: list[list[tuple[int, int, Tile]]] = []
        for item in order:
            if not groups or groups[-1][0][1] != item[1] or groups[-1][0][0] != item[0]:
                groups.append([])
            groups[-1].append(item)
        cores_of: dict[tuple[int, int, Tile], int] = {}
        if not late:
            # one call per run of groups on the same cores, so that the rule's state (the rolling
            # start core of gmm1.h@2d9d4288 L120-131, the busy totals of greedy_least_busy) carries
            # from one expert group to the next; it restarts only where the core set changes
            # (a joining group, V1)
            assign = lookup("core_assignment", cfg.core_assignment)()
            runs: list[tuple[list[int], list[list[tuple[int, int, Tile]]]]] = []
            for grp in groups:
                own, joined = self.gmm_cores(stage, experts[grp[0][1]])
                cores = own + joined
                if runs and runs[-1][0] == cores:
                    runs[-1][1].append(grp)
                else:
                    runs.append((cores, [grp]))
            for cores, grps in runs:
                costs = [self.tile_costs(stage, experts[g[0][1]], [t for _w, _e, t in g]) for g in grps]
                for grp, slots in zip(grps, assign(costs, len(cores)), strict=True):
                    for item, slot in zip(grp, slots, strict=True):
                        cores_of[item] = cores[slot]
        first_b: set[tuple[int, int]] = set()
        first_a: set[tuple[int, int]] = set()
        last_on_core: dict[int, tuple[int, int, int]] = {}  # core -> (expert, mb, nb) of its previous tile
        out: dict[tuple[int, int, Tile], tuple[str, str]] = {}
        onchip = (
            cfg.link("gmm1", "activation").location == "onchip"
            if stage == "gmm1"
            else cfg.link("gmm2", "combine").location == "onchip"
        )
        slot_key = "act" if stage == "gmm1" else "comb"
        members = self.stage_members[stage]
        if late:
            mte_pool = self.pool(f"MTE2-{stage}", [m.replace(".AIC", ".MTE2") for m in members])
            aic_pool = self.pool(f"AIC-{stage}", members)
        pre = "g1" if stage == "gmm1" else "g2"
        join_flag: str | None = None
        grp_cfg = cfg.core_groups[stage]
        if grp_cfg.join is not None and not late:
            join_flag = self.stage_done_flag.get(grp_cfg.join)
        joined_cores: set[int] = (
            set(cfg.core_groups[grp_cfg.join].cores) - set(grp_cfg.cores)
            if grp_cfg.join is not None
            else set()
        )
        bpe = self.bpe
        scale_bytes = 8 if cfg.quant == "w8a8" else 0
        l1_bytes = self.c("l1_bytes")
        flag_lat = self.c("flag_latency_us") if join_flag is not None else 0.0
        traffic = self.traffic
        l1_late = self.l1_late
        # ``deps_of`` is a function of (wave, expert) alone: one dict per pair, copied per tile
        wave_deps: dict[tuple[int, int], dict[str, float]] = {}
        macs_total = self.macs  # accumulated locally, in the same order
        # per core: its L1 slot semaphore, MTE2 pipe, cube and on-chip slot names
        core_names: dict[int, tuple[str, str, str, str, tuple[str], tuple[str]]] = {}
        rank = self.rank
        chain_last = self.chain_last
        add = self.add

        for idx, item in enumerate(order):
            w, e, t = item
            ex = experts[e]
            k = cores_of.get(item, -1)
            t_rows, t_cols = t.m1 - t.m0, t.n1 - t.n0  # t.rows, t.cols
            rows_al = -(-t_rows // CUBE_M_ALIGN) * CUBE_M_ALIGN
            a_full = t_rows * k_dim * bpe
            b_full = t_cols * k_dim * bpe + t_cols * scale_bytes
            a_res = b_res = False
            if k >= 0 and k in last_on_core:
                pe, pmb, pnb = last_on_core[k]
                fits = a_full + b_full <= l1_bytes
                a_res = fits and pe == e and pmb == t.mb
                b_res = fits and pe == e and pnb == t.nb
            if k >= 0:
                last_on_core[k] = (e, t.mb, t.nb)
            b_seen = (e, t.nb) in first_b
            a_seen = (e, t.mb) in first_a
            first_b.add((e, t.nb))
            first_a.add((e, t.mb))
            base = f"{pre}.e{e}.m{t.mb}.n{t.nb}"
            cn = core_names.get(k)
            if cn is None:
                mte2, cube = self.core_res(k, "MTE2"), self.core_res(k, "AIC")
                onchip_slot = f"c{k}.onchip_{slot_key}"
                cn = core_names[k] = (f"c{k}.l1", mte2[0], cube[0], onchip_slot, mte2[1], cube[1])
            shared = ex.shared
            prev_mm: str | None = None
            last_ld = ""
            for c in range(chunks):
                frac = 1.0 / chunks
                a_b = 0.0 if a_res else a_full * frac
                b_b = 0.0 if b_res else b_full * frac
                load_bytes = a_b + b_b
                load_us = (a_b + (b_b * reuse if b_seen else b_b)) / gm_l1
                hbm_bytes = (0.0 if a_seen else a_b) + (0.0 if b_seen else b_b)
                traffic["gm_to_l1"] += load_bytes
                u = self.units("hbm", hbm_bytes, load_us) if hbm_bytes else 0
                l1 = "l1" if l1_late else cn[0]
                acq, rel = self.hold_maps("hbm", u, take=l1)
                shared_deps = wave_deps.get((w, e))
                if shared_deps is None:
                    shared_deps = wave_deps[(w, e)] = dict(deps_of(w, e))
                deps = dict(shared_deps)
                if chunk_deps is not None:
                    deps.update(chunk_deps(w, e, t, c))
                sfx = f".k{c}" if chunks > 1 else ""
                ld = f"{base}{sfx}.ld"
                resources: Sequence[str]
                if late:
                    resources = [mte_pool]
                else:
                    mres = cn[1]
                    resources = cn[4]
                    self.chain(mres, deps)
                    if join_flag is not None and k in joined_cores:
                        deps[join_flag] = flag_lat
                add(
                    _event(
                        ld,
                        resources=resources,
                        deps=deps,
                        acquires=acq,
                        releases=rel,
                        duration_us=load_us,
                        labels={
                            "stage": stage, "rank": rank, "wave": w, "expert": e, "tile": idx,
                            "shared": shared, "phase": "load", "chunk": c,
                        },
                    ),
                    stage,
                )
                if not late:
                    chain_last[cn[1]] = ld
                macs = rows_al * t_cols * k_dim * frac
                macs_total += t_rows * t_cols * k_dim * frac
                mm = f"{base}{sfx}.mm"
                mdeps = {ld: 0.0}
                if prev_mm is not None:
                    mdeps[prev_mm] = 0.0
                # the compute phase frees the load's L1 slot and, on the last chunk, takes an
                # on-chip slot of the link to the consumer (no bandwidth held)
                slot = ("onchip_" + slot_key if late else cn[3]) if onchip and c == chunks - 1 else None
                macq, mrel = self.hold_maps("hbm", 0, take=slot, give=l1)
                add(
                    _event(
                        mm,
                        resources=[aic_pool] if late else cn[5],
                        deps=mdeps,
                        acquires=macq,
                        releases=mrel,
                        colocate_with=ld if late else None,
                        duration_us=macs / rate,
                        labels={
                            "stage": stage, "rank": rank, "wave": w, "expert": e, "tile": idx,
                            "shared": shared, "phase": "compute", "chunk": c, "core": k,
                        },
                    ),
                    stage,
                )
                prev_mm = mm
                last_ld = ld
            assert prev_mm is not None
            out[item] = (last_ld, prev_mm)
        self.macs = macs_total
        return out

    # ---- activation
    def build_activation(
        self,
        experts: list[ExpertPlan],
        w1: list[list[MGroup]],
        w2: list[list[MGroup]],
        g1: dict[tuple[int, int, Tile], tuple[str, str]],
    ) -> dict[str, Any]:
        cfg = self.cfg
        inter = cfg.hidden_dim // 2
        act_rate = self.c("act_bytes_per_us")
        start = self.c("act_startup_us")
        lam = self.c("flag_latency_us")
        out: dict[str, Any] = {"by_mgroup": {}, "by_chunk": {}}
        self.stage_done_flag = {"gmm1": self.flag("gmm1_done", [mm for _ld, mm in g1.values()])}
        if cfg.link("gmm1", "activation").location == "onchip":
            self.colocated_stages.add("activation")
            late_aic = "gmm1" in self.late_stages
            role = cfg.core_groups["activation"].role
            chunks = (
                cfg.link("activation", "gmm2").chunks
                if cfg.link("activation", "gmm2").readiness == "per_chunk"
                else 1
            )
            aiv_subs = [f"AIV{j}" for j in range(cfg.aiv_per_core)]
            for (w, e, t), (_ld, mm) in g1.items():
                rows = t.rows
                in_bytes = rows * t.cols * 2  # GMM1 output tile in half precision, via L0C->UB
                out_bytes = rows * (t.cols // 2) * self.bpe
                dur = start + in_bytes / act_rate
                u = self.units("hbm", out_bytes, dur)
                self.traffic["ub_to_gm"] += out_bytes
                slot = "onchip_act" if late_aic else None
                core = self.g[mm].labels["core"]
                if slot is None:
                    slot = f"c{core}.onchip_act"
                acq, rel = self.hold_maps("hbm", u, give=slot)
                resources: Sequence[str]
                if "activation" in self.late_stages or late_aic:
                    resources = [self.pool("AIV-activation", self.stage_members["activation"])]
                else:
                    sub = role if role != "AIV" else aiv_subs[t.nb % cfg.aiv_per_core]
                    resources = self.core_res(core, sub)[1]
                name = mm.replace(".mm", ".act")
                self.add(
                    _event(
                        name,
                        resources=resources,
                        deps={mm: 0.0},
                        acquires=acq,
                        releases=rel,
                        colocate_with=mm,
                        duration_us=dur,
                        labels={"stage": "activation", "rank": self.rank, "expert": e, "wave": w},
                    ),
                    "activation",
                )
                out["by_mgroup"].setdefault((e, t.mb), []).append(name)
                c0, c1 = t.n0 // 2, t.n1 // 2
                for c in range(chunks):
                    lo, hi = c * inter // chunks, (c + 1) * inter // chunks
                    if c0 < hi and c1 > lo:
                        out["by_chunk"].setdefault((e, t.mb, c), []).append(name)
            return out
        # GM hand-off: SwiGLU per segment of experts, rows split over the activation AIVs
        segs = self.segments(experts)
        members = self.stage_members["activation"]
        g1_by_expert: dict[int, list[str]] = {}
        for (_w, e, _t), (_ld, mm) in g1.items():
            g1_by_expert.setdefault(e, []).append(mm)
        for si, seg in enumerate(segs):
            mms = [mm for e in seg for mm in g1_by_expert.get(e, [])]
            if not mms:
                continue
            c2v = self.flag(f"c2v.s{si}", mms)
            rows = sum(experts[e].rows for e in seg)
            parts = len(members)
            names = []
            for p in range(parts):
                r = rows * (p + 1) // parts - rows * p // parts
                if r == 0:
                    continue
                in_bytes = r * cfg.hidden_dim * 2
                out_bytes = r * inter * self.bpe
                dur = start + in_bytes / act_rate
                acq2: dict[str, int] = {}
                rel2: dict[str, int] = {}
                self.bw(acq2, rel2, "hbm", in_bytes + out_bytes, dur)
                self.traffic["gm_to_ub"] += in_bytes
                self.traffic["ub_to_gm"] += out_bytes
                resources, pinned = self.vector_res("activation", p)
                deps = {c2v: lam + self.c("syncall_us")}
                if pinned is not None and self.in_program_order:
                    self.chain(pinned, deps)
                name = f"act.s{si}.p{p}"
                self.add(
                    _event(
                        name,
                        resources=resources,
                        deps=deps,
                        acquires=acq2,
                        releases=rel2,
                        duration_us=dur,
                        labels={"stage": "activation", "rank": self.rank, "segment": si, "rows": r},
                    ),
                    "activation",
                )
                if pinned is not None and self.in_program_order:
                    self.chain_last[pinned] = name
                names.append(name)
            v2c = self.flag(f"v2c.s{si}", names)
            for e in seg:
                for mb in range(-(-experts[e].rows // cfg.tile_m)):
                    out["by_mgroup"][(e, mb)] = [v2c]
        return out

    def segments(self, experts: list[ExpertPlan]) -> list[list[int]]:
        local = [ex.index for ex in experts if not ex.shared]
        shared = [ex.index for ex in experts if ex.shared]
        rule = self.cfg.swiglu_segments
        if rule == "per_expert":
            segs = [[e] for e in local]
        elif rule == "single":
            segs = [local]
        else:  # kernel_rule: [0, E-3) and [E-3, E) for E > 4 (moe_swiglu_segment.hpp L23-45)
            E = len(local)
            segs = [local[: E - 3], local[E - 3 :]] if E > 4 else [local]
        segs = [s for s in segs if s]
        return segs + ([shared] if shared else [])

    # ---- GMM2
    def build_gmm2(
        self, experts: list[ExpertPlan], waves: list[list[MGroup]], act: dict[str, Any]
    ) -> dict[str, Any]:
        cfg = self.cfg
        lam = self.c("flag_latency_us")
        lk = cfg.link("activation", "gmm2")
        chunks = lk.chunks if lk.readiness == "per_chunk" else 1
        order = []
        wave_flags: dict[int, str] = {}
        for w, wave in enumerate(waves):
            deps: list[str] = []
            for g in wave:
                deps.extend(act["by_mgroup"].get((g.expert, g.mb), []))
            wave_flags[w] = self.flag(f"v2c.w{w}", sorted(set(deps)))
            mgs = {(g.expert, g.mb) for g in wave}
            seen: list[int] = []
            for g in wave:
                if g.expert not in seen:
                    seen.append(g.expert)
            for e in seen:
                for t in experts[e].g2_tiles:
                    if (e, t.mb) in mgs:
                        order.append((w, e, t))
        chunk_flags: dict[tuple[int, int, int], str] = {}

        def chunk_deps(w: int, e: int, t: Tile, c: int) -> dict[str, float]:
            key = (e, t.mb, c)
            if key not in chunk_flags:
                chunk_flags[key] = self.flag(f"v2c.e{e}.m{t.mb}.k{c}", act["by_chunk"].get(key, []))
            return {chunk_flags[key]: lam}

        if chunks > 1:
            events = self.gmm_tiles("gmm2", experts, order, lambda w, e: {}, chunk_deps, chunks)
        else:
            events = self.gmm_tiles("gmm2", experts, order, lambda w, e: {wave_flags[w]: lam})
        by_expert: dict[int, list[str]] = {}
        for (_w, e, _t), (_ld, mm) in events.items():
            by_expert.setdefault(e, []).append(mm)
        done = {e: self.flag(f"g2c.e{e}", mms) for e, mms in by_expert.items()}
        return {"tiles": events, "expert": done}

    # ---- combine
    def combine_mode(self) -> str:
        cfg = self.cfg
        if cfg.topo_urma:
            return "urma"
        if cfg.combine_granularity == "auto":
            small = self.tokens * self.topk <= cfg.combine_small_max_routes
            return "per_tile" if small else "per_expert"
        return cfg.combine_granularity

    def src_rows_in(self, ex: ExpertPlan, m0: int, m1: int) -> tuple[tuple[int, int], ...]:
        """(source rank, rows) of the expert's compact rows [m0, m1) (rows are ordered by source).

        Memoised: every N-tile of an M-block asks for the same rows."""
        key = (ex.rows_by_src, m0, m1)
        got = self._src_rows_memo.get(key)
        if got is None:
            out = []
            off = 0
            for s, n in enumerate(ex.rows_by_src):
                lo, hi = max(off, m0), min(off + n, m1)
                if hi > lo:
                    out.append((s, hi - lo))
                off += n
            got = self._src_rows_memo[key] = tuple(out)
        return got

    def write_cost(self, rows_by_src: Sequence[tuple[int, int]], cols: int) -> tuple[float, float, float]:
        """(µs, local bytes, remote bytes) of writing rows back to their source ranks."""
        us = loc = rem = 0.0
        for s, r in rows_by_src:
            b = r * cols * 2
            if s == self.rank:
                us += b / self.c("aiv_local_bytes_per_us")
                loc += b
            else:
                us += b / self.c("aiv_remote_write_bytes_per_us")
                rem += b
        return us, loc, rem

    def combine_event(
        self,
        name: str,
        resources: Sequence[str],
        pinned: str | None,
        deps: dict[str, float],
        rows_by_src: Sequence[tuple[int, int]],
        cols: int,
        readback: bool,
        labels: dict[str, Any],
        colocate: str | None = None,
        release: str | None = None,
    ) -> str:
        key = (tuple(rows_by_src), cols, readback, release)
        memo = self._write_memo.get(key)
        if memo is None:
            # every N-tile of an M-block writes the same rows: the same duration, bytes and
            # bandwidth shares (the traffic is still counted per event, below)
            rows = sum(r for _s, r in rows_by_src)
            w_us, loc, rem = self.write_cost(rows_by_src, cols)
            rb_bytes = rows * cols * 2 if readback else 0
            dur = self.c("dispatch_call_us") + rb_bytes / self.c("aiv_local_bytes_per_us") + w_us
            take: dict[str, int] = {}
            give: dict[str, int] = {}
            self.bw(take, give, "hbm", rb_bytes + loc, dur, count=False)
            if rem:
                self.bw(take, give, "remote_out", rem, dur, count=False)
            if release:
                give[release] = give.get(release, 0) + 1
            memo = self._write_memo[key] = (
                dur, rb_bytes, rb_bytes + loc, rem, MappingProxyType(take), MappingProxyType(give)
            )
        dur, rb_bytes, hbm_bytes, rem, acq, rel = memo
        traffic = self.traffic
        traffic["hbm"] += hbm_bytes
        if rem:
            traffic["remote_out"] += rem
        traffic["gm_to_ub"] += rb_bytes
        if pinned is not None and self.in_program_order:
            self.chain(pinned, deps)
        self.add(
            _event(
                name,
                resources=resources,
                deps=deps,
                acquires=acq,
                releases=rel,
                duration_us=dur,
                colocate_with=colocate,
                labels={"stage": "combine", "rank": self.rank, **labels},
            ),
            "combine",
        )
        if pinned is not None and self.in_program_order:
            self.chain_last[pinned] = name
        return name

    def build_combine(
        self, experts: list[ExpertPlan], waves: list[list[MGroup]], g2: dict[str, Any]
    ) -> list[str]:
        cfg = self.cfg
        lam = self.c("flag_latency_us")
        mode = self.combine_mode()
        names: list[str] = []
        gran = cfg.event_granularity["combine"]
        if mode == "per_tile":
            onchip = cfg.link("gmm2", "combine").location == "onchip"
            if onchip:
                self.colocated_stages.add("combine")
            role = cfg.core_groups["combine"].role
            late = "combine" in self.late_stages or (onchip and "gmm2" in self.late_stages)
            subs = [f"AIV{j}" for j in range(cfg.aiv_per_core)] if role == "AIV" else [role]
            splits: dict[tuple[int, int], list[tuple[int, int]]] = {}
            for (w, e, t), (_ld, mm) in g2["tiles"].items():
                ex = experts[e]
                if ex.shared:
                    continue
                core = self.g[mm].labels["core"]
                rows_split = splits.get((t.m0, t.rows))
                if rows_split is None:  # the tile's rows split evenly over the sub-cores
                    rows_split = splits[(t.m0, t.rows)] = [
                        (t.m0 + (t.rows * i) // len(subs), t.m0 + (t.rows * (i + 1)) // len(subs))
                        for i in range(len(subs))
                    ]
                for i, (sub, (m0, m1)) in enumerate(zip(subs, rows_split, strict=False)):
                    if m1 <= m0:
                        continue
                    colocate = mm if onchip else None
                    resources: Sequence[str]
                    if late:
                        resources, pinned = [self.pool("AIV-combine", self.stage_members["combine"])], None
                    elif "gmm2" in self.late_stages:
                        # the paired combine follows its GMM2 tile, whose core is only chosen when
                        # the tile is scheduled: the same sub-core of whichever core that is
                        every = [f"c{k}.{sub}" for k in range(cfg.aic_num)]
                        resources, pinned = [self.pool(f"{sub}-paired-combine", every)], None
                        colocate = mm
                    else:
                        pinned, resources = self.core_res(core, sub)
                    release = None
                    if onchip and i == len(subs) - 1:
                        release = "onchip_comb" if "gmm2" in self.late_stages else f"c{core}.onchip_comb"
                    names.append(
                        self.combine_event(
                            mm.replace(".mm", f".comb{i}"),
                            resources,
                            pinned,
                            {mm: lam},
                            self.src_rows_in(ex, m0, m1),
                            t.cols,
                            not onchip,
                            {"expert": e, "wave": w},
                            colocate=colocate,
                            release=release,
                        )
                    )
            return names
        # per expert (DirectLarge) or URMA PUT: rows of a whole expert slice by source rank
        task = 0
        for ex in experts:
            if ex.shared or ex.rows == 0:
                continue
            flag = g2["expert"][ex.index]
            segs = [(s, n) for s, n in enumerate(ex.rows_by_src) if n]
            if mode == "urma":
                for s, n in segs:
                    if s == self.rank:
                        res, pinned = self.vector_res("combine", task)
                        task += 1
                        names.append(
                            self.combine_event(
                                f"comb.e{ex.index}.src{s}",
                                res,
                                pinned,
                                {flag: lam},
                                [(s, n)],
                                cfg.h,
                                True,
                                {"expert": ex.index},
                            )
                        )
                        continue
                    nbytes = n * cfg.h * 2
                    dur = self.c("urma_op_us") + nbytes / self.c("urma_put_bytes_per_us")
                    acq: dict[str, int] = {}
                    rel: dict[str, int] = {}
                    self.bw(acq, rel, "remote_out", nbytes, dur)
                    self.bw(acq, rel, "hbm", nbytes, dur)
                    self.traffic["gm_to_ub"] += nbytes
                    res1 = self.urma_resource(s)
                    deps = {flag: lam}
                    self.chain(res1, deps)
                    name = f"put.e{ex.index}.src{s}"
                    self.add(
                        _event(
                            name,
                            resources=[res1],
                            deps=deps,
                            acquires=acq,
                            releases=rel,
                            duration_us=dur,
                            labels={"stage": "combine", "rank": self.rank, "expert": ex.index, "src": s},
                        ),
                        "combine",
                    )
                    self.chain_last[res1] = name
                    names.append(name)
                continue
            lanes = []
            for s, n in segs:
                for ln in range(COMBINE_LANES):
                    r = n * (ln + 1) // COMBINE_LANES - n * ln // COMBINE_LANES
                    if r:
                        lanes.append((s, r))
            for i in range(0, len(lanes), gran):
                pack = lanes[i : i + gran]
                res, pinned = self.vector_res("combine", task)
                task += 1
                names.append(
                    self.combine_event(
                        f"comb.e{ex.index}.t{i}",
                        res,
                        pinned,
                        {flag: lam},
                        pack,
                        cfg.h,
                        True,
                        {"expert": ex.index},
                    )
                )
        return names

    def add_stage_barriers(self) -> None:
        """``barriers = 'staged'``: every event of a stage waits for every event of the previous one."""
        order = ["dispatch", "gmm1", "activation", "gmm2", "combine"]
        for a, b in itertools.pairwise(order):
            evs_a = self.stage_events.get(a, [])
            evs_b = self.stage_events.get(b, [])
            if not evs_a or not evs_b:
                continue
            bar = self.flag(f"barrier.{a}", evs_a)
            for name in evs_b:
                self.replace_deps(name, {bar: self.c("syncall_us")})


def build_rank(
    cfg: Config, tokens: int, topk: int, world: int, counts: np.ndarray, rank: int, shared_experts: int = 0
) -> RankGraph:
    """The event graph of destination ``rank`` (the ``megamoe`` builder)."""
    E = counts.shape[1] // world
    rows = counts[:, rank * E : (rank + 1) * E]
    return _Builder(cfg, tokens, topk, world, rows, rank, shared_experts).build()


register_builtin("builder", "megamoe", lambda: build_rank)
