"""The GMM tile emission (issue 17, emit7) is pinned to the code it replaced, kept here verbatim:

* :func:`emit_whole_tiles_replaced`: ``gmm.emit_whole_tiles`` as it was (every tile's cost,
  readiness and unit map looked up by hashing per tile, one Python statement per tile in
  ``emit_run_replaced``);
* :func:`emit_run_replaced`: ``Emitter.emit_run`` as it was (chain edges event by event);
* the SYNCALL waits of ``options.gmm1_full_experts``, added to the tiles after they were emitted
  (``Emitter.add_deps``, applied at assembly) where they now go in with the tiles.

Whole rank graphs are built with the current code and with the replaced code swapped in, on
scenarios drawn over the knob families the emission depends on (both PTO profiles, w8a8 and
bf16, late-bound cubes, the layered orchestration, per-chunk readiness, on-chip links, staged
barriers, restructured stages, joins of GMM2 groups), and compared event for event, field for
field, in graph order, with every other field of the built rank (chain edges, traffic, MACs).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import repeat
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import moeopt.megamoe.build.activation as activation
import moeopt.megamoe.build.combine as combine
import moeopt.megamoe.build.gmm as gmm
from moeopt.core.events import Event
from moeopt.errors import SchedulingError
from moeopt.megamoe.build.emitter import Emitter
from moeopt.megamoe.build.handoff import GmmTiles
from moeopt.megamoe.planning import Tile
from moeopt.megamoe.scenario import Scenario, scenario_from_dict
from moeopt.megamoe.simulate import build_graphs
from moeopt.testing.rankgraph import rank_graph_rows
from moeopt.trust.golden import BASES
from tests.megamoe.by_event_emitters import tile_activation_by_event, tile_combine_by_event
from tests.megamoe.knob_mixes import knob_mixes

_event = Event.trusted
_fill_of = attrgetter("fill_us")
_dur_of = attrgetter("dur_us")
_hbm_units_of = attrgetter("hbm_units")
_load_units_of = attrgetter("load_units")
_first, _second = itemgetter(0), itemgetter(1)


def _added(total: float, values: Iterable[float]) -> float:
    for v in values:
        total += v
    return total


def emit_run_replaced(
    self: Emitter,
    stage: str,
    names: Sequence[str],
    resources: Sequence[Sequence[str]],
    deps: Sequence[dict[str, float]],
    acquires: Sequence[Any],
    releases: Sequence[Any],
    durations: Sequence[float],
    labels: Sequence[dict[str, Any]],
    chain: bool,
    sync_deps: Sequence[Mapping[str, float] | None] | None = None,
) -> None:
    """``Emitter.emit_run`` at db7e175."""
    events = self._events
    if not events.keys().isdisjoint(names) or len(set(names)) != len(names):
        seen = set(events)
        for name in names:
            if name in seen:
                raise AssertionError(f"builder emitted event {name!r} twice")
            seen.add(name)
    last = self._last
    edges = self.chain_edges
    syncs = repeat(None) if sync_deps is None else sync_deps
    for name, res, d, acq, rel, dur, lab, sync in zip(
        names, resources, deps, acquires, releases, durations, labels, syncs
    ):
        if chain:
            for r in res:
                prev = last.get(r)
                if prev is not None and prev not in d:
                    d[prev] = 0.0
                    edges.add((prev, name))
                last[r] = name
        if sync:
            d.update(sync)
        events[name] = _event(name, res, d, acq, rel, None, dur, lab)
    by_stage = self._by_stage
    if stage in by_stage:
        by_stage[stage].extend(names)
    else:
        by_stage[stage] = list(names)


def emit_whole_tiles_replaced(
    ctx: Any,
    em: Emitter,
    stage: str,
    experts: Sequence[Any],
    order: Sequence[gmm.Item],
    cores: Sequence[int],
    keys: Sequence[gmm.CostKey],
    costs: gmm.TileCosts,
    names: Sequence[str],
    wave_ready: gmm.WaveReady,
    join_flag: str | None,
    chain: bool = True,
    cols: gmm.TileColumns | None = None,
) -> GmmTiles:
    """``gmm.emit_whole_tiles`` at db7e175 (``names``: :func:`~moeopt.megamoe.build.gmm.tile_names`)."""
    layout = ctx.layout
    late = stage in layout.late
    onchip = ctx.cfg.link(stage, gmm.CONSUMER[stage]).location == "onchip"
    slot_key = gmm.SLOT_KEY[stage]
    n = len(order)
    pairs = list(zip(keys, costs.stretch if costs.stretch else repeat(1.0, n)))
    memo = costs.memo
    for key, stretch in dict.fromkeys(pairs):
        if (key, stretch) not in memo:
            costs.compute(key, stretch)
    tc = list(map(memo.__getitem__, pairs))
    takes: Iterable[str | None]
    if late:
        res: list[tuple[str]] = [(em.pool(f"AIC-{stage}", layout.members[stage]),)] * n
        takes = repeat("onchip_" + slot_key if onchip else None, n)
    else:
        cube = {k: layout.core_res(k, "AIC")[1] for k in dict.fromkeys(cores)}
        res = list(map(cube.__getitem__, cores))
        slots = {k: f"c{k}.onchip_{slot_key}" for k in cube}
        takes = map(slots.__getitem__, cores) if onchip else repeat(None, n)
    hkeys = list(zip(map(_hbm_units_of, tc), map(_load_units_of, tc), takes))
    holds = {h: em.hold_maps((("hbm", h[0]), ("gm_l1", h[1])), h[2]) for h in dict.fromkeys(hkeys)}
    held = list(map(holds.__getitem__, hkeys))
    c = gmm.TileColumns.of(order) if cols is None else cols
    waves, exps = c.wave.tolist(), c.expert.tolist()
    dkeys = list(zip(waves, exps, map(_fill_of, tc)))
    ready = {
        dk: {f: lam + dk[2] for f, lam in wave_ready(dk[0], dk[1]).items()} for dk in dict.fromkeys(dkeys)
    }
    deps = list(map(dict, map(ready.__getitem__, dkeys)))
    rank = ctx.rank
    shared = [ex.shared for ex in experts]
    labels = [
        {
            "stage": stage,
            "rank": rank,
            "wave": w,
            "expert": e,
            "tile": idx,
            "shared": shared[e],
            "chunk": 0,
            "core": k,
            "load_us": cost.load_us,
            "compute_us": cost.compute_us,
        }
        for idx, (w, e, k, cost) in enumerate(zip(waves, exps, cores, tc))
    ]
    syncs: list[Mapping[str, float] | None] | None = None
    if join_flag is not None and not late:
        grp = layout.groups[stage]
        joined = set(layout.groups[grp.join].cores) - set(grp.cores) if grp.join is not None else set()
        after = {join_flag: ctx.sync.flag_us}
        syncs = [after if k in joined else None for k in cores]
    events = [f"{b}.mm" for b in names]
    acqs, rels = list(map(_first, held)), list(map(_second, held))
    durs = list(map(_dur_of, tc))
    em.emit_run(stage, events, res, deps, acqs, rels, durs, labels, chain and not late, syncs)
    traffic = em.traffic
    traffic["gm_to_l1"] = _added(traffic["gm_to_l1"], map(attrgetter("load_bytes"), tc))
    traffic["hbm"] = _added(traffic["hbm"], filter(None, map(attrgetter("hbm_bytes"), tc)))
    em.macs = _added(em.macs, map(attrgetter("macs"), tc))
    return GmmTiles(tuple(order), tuple(events), tuple(cores), tuple(events))


def _emit_whole_tiles_by_replaced(
    ctx: Any,
    em: Emitter,
    stage: str,
    experts: Sequence[Any],
    order: Sequence[gmm.Item],
    cores: Sequence[int],
    keys: Sequence[gmm.CostKey],
    costs: gmm.TileCosts,
    wave_ready: gmm.WaveReady,
    join_flag: str | None,
    chain: bool = True,
    cols: gmm.TileColumns | None = None,
    waits: Mapping[int, Mapping[str, float]] | None = None,
    codes: gmm.KeyCodes | None = None,  # (the keys' numbering: the replaced code hashed the keys)
) -> GmmTiles:
    assert not waits  # (the replaced flow adds them late, see _replaced)
    names = gmm.tile_names(stage, order)
    return emit_whole_tiles_replaced(
        ctx, em, stage, experts, order, cores, keys, costs, names, wave_ready, join_flag, chain, cols
    )


def _wire_full_experts_replaced(ctx: Any, em: Emitter, tiles: GmmTiles) -> str | None:
    """gmm.wire_full_experts as of db7e175: the flags, and each next expert's tiles given the wait
    on its flag afterwards (Emitter.add_deps)."""
    if not ctx.layout.gmm1_full_experts:
        return None
    by_expert = tiles.events_by_expert()
    last: str | None = None
    for e, nxt in gmm._full_expert_order(ctx, by_expert):
        last = em.flag(f"g1sync.e{e}", by_expert[e])
        if nxt is not None:
            for name in by_expert[nxt]:
                em.add_deps(name, {last: ctx.sync.syncall_us})
    return last


def _replaced(mp: pytest.MonkeyPatch) -> None:
    """Swap the replaced code in: its emission, its emit_run, its late full-expert waits (and the
    per-tile activation and combine event by event, as they were: the replaced emit_run has no
    colocation column)."""
    mp.setattr(gmm, "emit_whole_tiles", _emit_whole_tiles_by_replaced)
    mp.setattr(activation, "tile_activation", tile_activation_by_event)
    mp.setattr(combine, "tile_combine", tile_combine_by_event)
    mp.setattr(Emitter, "emit_run", emit_run_replaced)
    mp.setattr(gmm, "full_expert_waits", lambda ctx, order: {})
    mp.setattr(gmm, "wire_full_experts", _wire_full_experts_replaced)




def _rows(s: Scenario) -> dict[int, list[Any]] | str:
    """Every built rank as rows, or the scheduling error the build raised (a V1 build schedules
    its graph to place GMM2's joins: both emissions must then fail alike)."""
    try:
        return {rep: rank_graph_rows(rg) for rep, (rg, _r) in build_graphs(s).items()}
    except SchedulingError as e:
        return f"{type(e).__name__}: {e}"


def _both(s: Scenario) -> tuple[dict[int, list[Any]] | str, dict[int, list[Any]] | str]:
    new = _rows(s)
    with pytest.MonkeyPatch.context() as mp:
        _replaced(mp)
        old = _rows(s)
    return new, old


_GM = {"producer": "gmm1", "consumer": "activation", "location": "gm", "depth": 0, "colocated_by_hardware": False}
_ONCHIP_ACT = {"producer": "gmm1", "consumer": "activation", "location": "onchip", "colocated_by_hardware": True, "depth": 2}
_ONCHIP_COMB = {"producer": "gmm2", "consumer": "combine", "location": "onchip", "colocated_by_hardware": True, "depth": 2}
_PER_CHUNK = {"producer": "activation", "consumer": "gmm2", "readiness": "per_chunk", "chunks": 2}

# knob families the emission reads: each a set of overrides (a drawn scenario takes a few)
FAMILIES: list[dict[str, Any]] = [
    {"kernel.quant": "bf16", "kernel.tile_m": 128, "kernel.tile_n": 128},
    {"options.late_bind_pools": ["AIC"], "options.links": [_GM]},
    {"options.late_bind_pools": ["AIC", "AIV1"], "options.links": [_GM]},
    {"kernel.topo_urma": True, "options.orchestration": "layered"},
    {"options.links": [_ONCHIP_ACT]},
    {"options.links": [_ONCHIP_COMB]},
    {"options.links": [_PER_CHUNK]},
    {"options.barriers": "staged", "options.links": [_GM]},
    {"options.core_groups": "v1_fixed"},
    {"policy.restructure": "core_queues"},
    {"policy.restructure": "idle_core_stealing"},
    {"policy.core_assignment": "greedy_least_busy"},
    {"policy.core_cursor": "per_stage"},
    {"options.bandwidth_contention": False},
    {"kernel.l1_stages": 1},
    {"workload.shared_expert_num": 1},
    {"p1_override": 1, "policy.dispatch_lookahead": 1},
]


def scenarios() -> st.SearchStrategy[Scenario]:
    return knob_mixes(FAMILIES, [8, 16, 40, 72, 128])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(scenarios())
def test_gmm_emission_builds_the_replaced_codes_graph(s: Scenario) -> None:
    new, old = _both(s)
    assert new == old


@pytest.mark.parametrize(
    ("base", "over"),
    [
        # GMM1's full-expert SYNCALLs (pto-a2a3-v1: 2 experts on every core) and GMM2's joined cores
        ("pto_m16", {"profile": "pto-a2a3-v1"}),
        ("pto_m16", {"profile": "pto-a2a3-v1", "workload.tokens": 64, "workload.routing": "zipf", "workload.seed": 3}),
        ("pto_m16", {"profile": "pto-a2a3-v1", "options.barriers": "staged"}),
        ("pto_m16", {"profile": "pto-a2a3-v1", "options.late_bind_pools": ["AIC"], "options.links": [_GM]}),
        ("pto_m16", {"profile": "pto-a2a3", "workload.world": 4}),
        ("bs72", {"kernel.topo_urma": True, "options.orchestration": "layered"}),
        ("bs72", {"kernel.topo_urma": True, "options.orchestration": "layered", "workload.tokens": 512}),
        ("basic_e8", {"options.late_bind_pools": ["AIC", "AIV1"], "options.links": [_GM]}),
    ],
)
def test_gmm_emission_on_fixed_shapes(base: str, over: dict[str, Any]) -> None:
    s = scenario_from_dict(BASES[base]).with_overrides(over)
    new, old = _both(s)
    assert new == old
    if s.config.gmm1_full_experts:  # (the case the late waits were for is there)
        assert any(str(row[0]).startswith("g1sync.") for rows in new.values() for row in rows)


@st.composite
def tile_columns(draw: st.DrawFn) -> list[gmm.Item]:
    n = draw(st.integers(1, 40))
    return [
        (draw(st.integers(0, 2)), draw(st.integers(0, 12)), Tile(0, 16, 0, 16, draw(st.integers(0, 30)), draw(st.integers(0, 130))))
        for _ in range(n)
    ]


@settings(max_examples=100, deadline=None)
@given(tile_columns(), st.sampled_from(["gmm1", "gmm2"]))
def test_tile_event_names_are_tile_names(order: list[gmm.Item], stage: str) -> None:
    got = gmm.tile_event_names(stage, gmm.TileColumns.of(order))
    assert got == [f"{b}.mm" for b in gmm.tile_names(stage, order)]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.floats(0, 1e12, allow_nan=False, allow_infinity=False), min_size=1, max_size=8),
    st.lists(st.integers(0, 7), min_size=1, max_size=60),
    st.floats(0, 1e12, allow_nan=False, allow_infinity=False),
)
def test_running_is_the_loop(per_class: list[float], cls: list[int], total: float) -> None:
    cls = [k % len(per_class) for k in cls]
    expected = total
    for k in cls:
        expected += per_class[k]
    got = gmm._running(total, per_class, np.array(cls, np.int64))
    assert type(got) is float
    assert got == expected
