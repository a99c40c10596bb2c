"""The per-tile activation and combine emitted as one run (issue 17, build9) are pinned to the
event-by-event code they replaced, kept as the reference in ``by_event_emitters.py`` and
swapped in for the comparison: whole rank graphs, event for event
and field for field in graph order, with every other field of the built rank (chain edges,
traffic, pools), on scenarios drawn over the knobs those two stages read (on-chip links,
late-bound cubes and vector cores, the per-tile combine forced on larger shapes, shared experts,
both sync protocols). The dispatch events' costs, worked out once per distinct (remote, rows,
concurrency) (the memo ``build_dispatch`` hands ``dispatch_event``), are compared the same way
with their per-event computation.

The emitter's assembly, which now tells shared acquire / release maps apart on arrays, is
compared with the rule it implements worked out event by event (SPEC §4's special case: a
semaphore whose capacity covers every unit ever acquired from it is left out, and so is every
event's mention of it)."""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import moeopt.megamoe.build.activation as activation
import moeopt.megamoe.build.combine as combine
import moeopt.megamoe.build.dispatch as dispatch
from moeopt.errors import GraphError, SchedulingError
from moeopt.megamoe.build.emitter import Emitter
from moeopt.megamoe.scenario import Scenario, scenario_from_dict
from moeopt.megamoe.simulate import build_graphs
from moeopt.testing.rankgraph import rank_graph_rows
from moeopt.trust.golden import BASES
from tests.megamoe.by_event_emitters import tile_activation_by_event, tile_combine_by_event
from tests.megamoe.knob_mixes import knob_mixes


def _rows(s: Scenario) -> dict[int, list[Any]] | str:
    try:
        return {rep: rank_graph_rows(rg) for rep, (rg, _r) in build_graphs(s).items()}
    except (SchedulingError, GraphError) as e:  # (a V1 build schedules its graph: both fail alike)
        return f"{type(e).__name__}: {e}"


def _without_memo(real: Any, *args: Any) -> str:
    """``dispatch_event`` without the memo it was given (its tenth argument)."""
    return str(real(*args[:9]))


def _by_run_and_by_event(s: Scenario) -> tuple[Any, Any]:
    by_run = _rows(s)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(activation, "tile_activation", tile_activation_by_event)
        mp.setattr(combine, "tile_combine", tile_combine_by_event)
        # every dispatch event costed on its own: the memo build_dispatch passes is dropped
        mp.setattr(dispatch, "dispatch_event", partial(_without_memo, dispatch.dispatch_event))
        by_event = _rows(s)
    return by_run, by_event


def _link(producer: str, consumer: str, **kw: Any) -> dict[str, Any]:
    return {"producer": producer, "consumer": consumer, **kw}


_ONCHIP_ACT = _link("gmm1", "activation", location="onchip", colocated_by_hardware=True, depth=2)
_ONCHIP_COMB = _link("gmm2", "combine", location="onchip", colocated_by_hardware=True, depth=2)
_GM_ACT = _link("gmm1", "activation", location="gm", depth=0, colocated_by_hardware=False)
_PER_CHUNK = _link("activation", "gmm2", readiness="per_chunk", chunks=2)

FAMILIES: list[dict[str, Any]] = [
    {"options.combine_granularity": "per_tile"},
    {"options.links": [_ONCHIP_ACT]},
    {"options.links": [_ONCHIP_COMB], "options.combine_granularity": "per_tile"},
    {"options.links": [_ONCHIP_ACT, _ONCHIP_COMB], "options.combine_granularity": "per_tile"},
    {"options.links": [_ONCHIP_ACT, _PER_CHUNK]},
    {"options.late_bind_pools": ["AIC"], "options.links": [_GM_ACT]},
    {"options.late_bind_pools": ["AIC", "AIV1"], "options.links": [_GM_ACT]},
    {"options.late_bind_pools": ["AIV1"]},
    {"options.bandwidth_contention": False},
    {"workload.shared_expert_num": 1},
    {"options.sync_protocol": "software_epochs"},
    {"policy.dispatch_lookahead": 1, "options.event_granularity": {"dispatch": 2}},
]


def scenarios() -> st.SearchStrategy[Scenario]:
    return knob_mixes(FAMILIES, [8, 16, 40])


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(scenarios())
def test_by_run_builds_the_by_event_graph(s: Scenario) -> None:
    by_run, by_event = _by_run_and_by_event(s)
    assert by_run == by_event


@pytest.mark.parametrize(
    ("base", "over"),
    [
        ("basic_e8", {}),  # the example's shape: on-chip activation, per-tile combine on AIV1
        ("basic_e8", {"options.links": [_ONCHIP_COMB]}),  # colocated combine, slot given back
        ("basic_e8", {"options.late_bind_pools": ["AIC", "AIV1"], "options.links": [_GM_ACT]}),
        # late-bound cubes, pinned combine: the paired combine is colocated with its GMM2 tile
        ("bs72", {"options.late_bind_pools": ["AIC"], "options.links": [_GM_ACT]}),
        ("pto_m16", {"profile": "pto-a2a3", "options.combine_granularity": "per_tile"}),  # 2 AIVs
        ("pto_m16", {"profile": "pto-a2a3", "options.links": [_ONCHIP_ACT, _ONCHIP_COMB],
                     "options.combine_granularity": "per_tile", "workload.tokens": 8}),
        ("bs72", {"options.links": [_ONCHIP_ACT, _PER_CHUNK]}),
    ],
)
def test_by_run_on_fixed_shapes(base: str, over: dict[str, Any]) -> None:
    s = scenario_from_dict(BASES[base]).with_overrides(over)
    by_run, by_event = _by_run_and_by_event(s)
    assert by_run == by_event
    assert not isinstance(by_run, str)
    stages = {row[9][0][1] for rows in by_run.values() for row in rows if isinstance(row, tuple) and len(row) == 11
              and row[9]}
    assert "combine" in stages


@st.composite
def emissions(draw: st.DrawFn) -> Emitter:
    """Events holding shared read-only maps (``hold_maps``) and plain dicts over a few semaphores
    of drawn capacities, some of them late dependencies."""
    em = Emitter(rank=0, contention=False, unit=1000.0)
    sems = [f"s{k}" for k in range(draw(st.integers(1, 4)))]
    for sem in sems:
        em.semaphore(sem, draw(st.integers(1, 6)))
    names: list[str] = []
    for k in range(draw(st.integers(1, 12))):
        take = draw(st.sampled_from([None, *sems]))
        give = draw(st.sampled_from([None, *sems]))
        held = tuple((sem, draw(st.integers(0, 2))) for sem in draw(st.lists(st.sampled_from(sems), max_size=2,
                                                                                unique=True)))
        if draw(st.booleans()):
            acq, rel = em.hold_maps(held, take, give)
        else:  # a plain dict of its own
            acq = {sem: u for sem, u in held if u}
            rel = dict(acq)
            if take is not None:
                acq[take] = acq.get(take, 0) + 1
            if give is not None:
                rel[give] = rel.get(give, 0) + 1
        deps = dict.fromkeys(draw(st.lists(st.sampled_from(names), max_size=2, unique=True)) if names else [], 0.5)
        em.emit(f"e{k}", "st", (f"c{k % 2}.AIV0",), deps, acq, rel, 1.0)
        names.append(f"e{k}")
    if len(names) > 1 and draw(st.booleans()):  # (a late dependency: that event is remade too)
        em.add_deps(names[-1], {names[0]: 0.25})
    return em


@settings(max_examples=150, deadline=None)
@given(emissions())
def test_assembly_leaves_out_what_never_binds(em: Emitter) -> None:
    emitted = {name: (dict(ev.acquires), dict(ev.releases)) for name, ev in em._events.items()}
    demand = dict.fromkeys(em._sems, 0)
    for acq, _rel in emitted.values():
        for sem, units in acq.items():
            demand[sem] += units
    dropped = {sem for sem, cap in em._sems.items() if cap >= demand[sem]}
    graph, left_out = em.assemble()
    assert left_out == sorted(dropped)
    assert dict(graph.semaphores) == {sem: cap for sem, cap in em._sems.items() if sem not in dropped}
    assert list(graph.events) == list(emitted)
    for name, (acq, rel) in emitted.items():
        ev = graph.events[name]
        assert dict(ev.acquires) == {k: v for k, v in acq.items() if k not in dropped}
        assert dict(ev.releases) == {k: v for k, v in rel.items() if k not in dropped}


def test_dispatch_memo_tells_concurrency_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    # a remote source's stream gets a fair share of remote_in among the wave's concurrent
    # sources: with the link's aggregate cut to 20,000 B/µs, one and eight concurrent sources
    # give different times (asserted below); the memo must keep them apart (in the golden
    # shapes every wave has the same concurrency, so the whole-graph test cannot tell)
    s = scenario_from_dict(BASES["bs72"]).with_overrides({"calibration.remote_in_bytes_per_us": 20000.0})
    got: dict[str, Any] = {}
    real = dispatch.build_dispatch

    def grab(ctx: Any, em: Emitter, plan: Any, head: str) -> Any:
        got.update(ctx=ctx, em=em, plan=plan, head=head)
        return real(ctx, em, plan, head)

    monkeypatch.setattr(dispatch, "build_dispatch", grab)
    import moeopt.megamoe.build.implementation as impl

    monkeypatch.setattr(impl, "implementation_for", lambda cfg: dataclasses.replace(impl.BASELINE, dispatch=grab))
    build_graphs(s)
    ctx, em, plan, head = got["ctx"], got["em"], got["plan"], got["head"]
    src = next(s_ for s_ in range(ctx.world) if s_ != ctx.rank)
    pack = [(e, src) for e, ex in enumerate(plan.experts) if not ex.shared and ex.rows_by_src[src]][:1]
    memo: dict[Any, Any] = {}
    names = [dispatch.dispatch_event(ctx, em, plan.experts, 900 + k, src, pack, head, None, conc, memo)
             for k, conc in enumerate((1, 8, 1, 8))]
    plain = [dispatch.dispatch_event(ctx, em, plan.experts, 950 + k, src, pack, head, None, conc)
             for k, conc in enumerate((1, 8, 1, 8))]
    evs = em._events
    cost = [(evs[n].duration_us, dict(evs[n].acquires)) for n in names]
    assert cost == [(evs[n].duration_us, dict(evs[n].acquires)) for n in plain]
    assert cost[0] != cost[1]  # (the case where concurrency matters is there)
