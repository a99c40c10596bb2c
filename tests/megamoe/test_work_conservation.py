"""The work-conservation guardrail: it fires when a late-bound pool idles with ready work, and only then."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

import moeopt.megamoe as mm
from moeopt import registry
from moeopt.core.policies import CriticalPathFirst

# examples/scenario_basic.toml (megamoe-a8w8, 28 AIC, h 6144, hidden_dim 4096, tile 256x256, 2 m-groups
# per GMM1 wave, dispatch lookahead 2) with 8 local experts instead of 64, and the tiles late-bound
BASIC_E8_LATE_AIC = mm.Scenario(
    workload=mm.Workload(tokens=64, topk=8, world=4, local_experts=8, routing="uniform"),
    h=6144,
    hidden_dim=4096,
    aic_num=28,
    profile="megamoe-a8w8",
    p1_override=2,
    p2_override=1,
    kernel=mm.Kernel(tile_m=256, tile_n=256),
    policy=mm.PolicyConfig(dispatch_lookahead=2),
    # late-bound cube tiles need a GM hand-off to the activation (on-chip slots are per core)
    options=mm.Options(
        late_bind_pools=("AIC",),
        links=(mm.Link(producer="gmm1", consumer="activation", location="gm", depth=0, colocated_by_hardware=False),),
    ),
)


class ClaimsConservingCriticalPath(CriticalPathFirst):
    """Critical-path-first (commits the longest-tail event even when it starts later, so a core can
    sit idle in front of it) that wrongly declares itself work-conserving."""

    name = "test_claims_conserving_cpf"
    work_conserving = True


@pytest.fixture
def lying_policy():
    with registry.registered("policy", ClaimsConservingCriticalPath.name, ClaimsConservingCriticalPath) as name:
        yield name


def with_policy(s: mm.Scenario, name: str) -> mm.Scenario:
    return s.with_overrides({"policy.scheduling": name})


def free_units(rr: dict[str, Any], sem: str, t: float) -> int:
    """Free units of ``sem`` at time ``t`` from the schedule alone (acquire at start, release at end)."""
    g, s = rr["graph"], rr["schedule"]
    level = g.semaphores[sem]
    for ev in g:
        if sem in ev.acquires and s.start_us[ev.name] <= t:
            level -= ev.acquires[sem]
        if sem in ev.releases and s.end_us[ev.name] <= t:
            level += ev.releases[sem]
    return level


def test_fires_when_a_policy_only_claims_work_conservation(lying_policy):
    """With late-bound GMM tiles, critical-path-first commits long-tail tiles at later starts first and,
    without back-filling, leaves cubes idle while GMM2 tiles are ready: the guardrail must fire."""
    s = with_policy(BASIC_E8_LATE_AIC, lying_policy)
    with pytest.raises(mm.WorkConservationViolation, match=r"late-bound pool of stage 'gmm2'") as exc:
        mm.simulate(s)
    sample = exc.value.samples[0]
    # an independent witness in the same schedule: during the first sample interval one cube of the
    # pool runs nothing, while a GMM2 tile whose dependencies were done had not started and every
    # semaphore it takes had enough free units
    r = mm.simulate(s, check_work_conservation=False)
    rr = r["rank_results"][0]
    g, sch = rr["graph"], rr["schedule"]
    a, b = sample["from_us"], sample["to_us"]
    busy: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for name in sch.start_us:
        for res in sch.resources[name]:
            busy[res].append((sch.start_us[name], sch.end_us[name]))
    idle = [f"c{k}.AIC" for k in range(28) if all(e <= a or st >= b for st, e in busy[f"c{k}.AIC"])]
    assert idle
    ready = [
        ev.name
        for ev in g
        if ev.labels.get("stage") == "gmm2"
        and sch.waits[ev.name].ready_us <= a
        and sch.start_us[ev.name] >= b
        and all(free_units(rr, sem, a) >= n for sem, n in ev.acquires.items())
    ]
    assert ready


def test_a_policy_that_declares_itself_not_conserving_is_exempt():
    """The same orchestration under the honest critical_path_first: the idle is recorded, not raised."""
    r = mm.simulate(with_policy(BASIC_E8_LATE_AIC, "critical_path_first"))
    assert r["idle_decomposition"]["by_stage"]["gmm2"]["avoidable_core_us"] > 1.0


def test_statically_pinned_pools_are_exempt(lying_policy):
    """Pinned tiles cannot move to an idle core: whatever idles is the cost of the pinning."""
    s = with_policy(BASIC_E8_LATE_AIC.with_overrides({"options.late_bind_pools": []}), lying_policy)
    r = mm.simulate(s)
    assert all(
        d["work_conservation_exempt"] == "statically pinned pool"
        for d in r["idle_decomposition"]["by_stage"].values()
    )


def test_earliest_start_conserves_work_in_the_same_shape():
    """The late-bound GMM pools show no avoidable idle under earliest_start. The pinned vector
    stages do (an AIV queues its own work in program order while another idles): that is what
    late-binding them would recover, and it is exempt from the guardrail."""
    r = mm.simulate(BASIC_E8_LATE_AIC)
    by_stage = r["idle_decomposition"]["by_stage"]
    late = {st: d for st, d in by_stage.items() if d["late_bound"]}
    assert set(late) == {"gmm1", "gmm2"}
    for st, d in late.items():
        assert d["avoidable_core_us"] == pytest.approx(0.0, abs=1e-6), st
    assert all(d["work_conservation_exempt"] == "statically pinned pool" for st, d in by_stage.items() if st not in late)


def test_pinned_pools_count_program_order_queueing_as_avoidable():
    """The scenario_basic shape with 8 experts, pinned everywhere: late binding makes it faster
    (an independent witness that idle was recoverable), so the pinned pools must show avoidable
    idle -- a core idling while an event pinned to another core waits behind that core's previous
    event. Program-order edges are how a pinned core queues work, not data dependencies; counting
    them as dependencies hid all of it."""
    pinned_shape = BASIC_E8_LATE_AIC.with_overrides({"options.late_bind_pools": []})
    pinned = mm.simulate(pinned_shape)
    late = mm.simulate(pinned_shape.with_overrides({"options.late_bind_pools": ["AIC", "AIV"]}))
    assert late["kernel_total_us"] < pinned["kernel_total_us"] - 1.0
    assert pinned["idle_decomposition"]["avoidable_core_us"] > 1.0


@pytest.mark.parametrize("pools", [["AIC"], ["AIC", "AIV"]])
def test_no_false_alarm_for_a_work_conserving_policy(pools):
    """pto-a2a3, seed-002 shape at M = 128, late-bound pools, earliest_start (which never leaves a
    member idle while an event could start on it). Two situations once counted as avoidable idle:
    a GMM compute phase tied to the core of its load waiting for that core while others idle, and a
    combine blocked first by the HBM bandwidth semaphore and then by busy AIVs (the final wait record
    only shows the resource). Neither is idle a scheduler could have used: every late-bound pool
    shows none (a pinned pool may: what late binding it would recover)."""
    s = mm.Scenario(
        workload=mm.Workload(tokens=128, topk=8, world=8, local_experts=16, routing="cyclic"),
        h=7168,
        hidden_dim=4096,
        profile="pto-a2a3",
        options=mm.Options(late_bind_pools=tuple(pools)),
    )
    r = mm.simulate(s)  # raises WorkConservationViolation on a false alarm
    for st, d in r["idle_decomposition"]["by_stage"].items():
        if d["late_bound"]:
            assert d["avoidable_core_us"] == pytest.approx(0.0, abs=1e-6), st



def test_idle_analysis_is_the_same_with_or_without_the_recorded_levels(bs72):
    """The idle analysis reads the semaphore levels the greedy scheduler recorded; a schedule
    from elsewhere (or a copy with new times) has none and the analysis rebuilds them from the
    start and end times. Both ways must give every semaphore the same curve, and so the same
    decomposition."""
    import dataclasses
    import importlib

    from moeopt.core.scheduler import schedule
    from moeopt.megamoe.analysis import Table, idle_decomposition
    from moeopt.megamoe.analysis.idle import _SemaphoreLevels

    sim = importlib.import_module("moeopt.megamoe.simulate")
    (rg, _ranks), *_ = sim.build_graphs(bs72).values()
    s = schedule(rg.graph, policy=bs72.config.scheduling, normalize=False)
    bare = dataclasses.replace(s, recorded_levels=None)
    from_record = _SemaphoreLevels(rg, Table.of(rg, s))
    from_times = _SemaphoreLevels(rg, Table.of(rg, bare))
    for levels in (from_record, from_times):
        levels._build()  # the capacities (done on first use by the analysis itself)
    assert rg.graph.semaphores
    for sem in rg.graph.semaphores:
        assert s.semaphore_levels(sem) is not None
        assert bare.semaphore_levels(sem) is None
        recorded, rebuilt = from_record._curve(sem), from_times._curve(sem)
        assert recorded[0], sem  # every declared semaphore is used, so its curve has breakpoints
        assert (list(rebuilt[0]), list(rebuilt[1])) == (list(recorded[0]), list(recorded[1])), sem
    span = s.makespan_us
    assert idle_decomposition(rg, bare, span) == idle_decomposition(rg, s, span)
