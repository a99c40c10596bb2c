"""Idle-core stealing (policy.restructure = "idle_core_stealing"), the MegaMoE adapter's restructure
hook on the generic scheduler. Hand-derived expectations carry their derivation in a comment."""

from __future__ import annotations

import pytest

import moeopt as m
import moeopt.megamoe as mm
from moeopt.megamoe.errors import ScenarioError
from moeopt.megamoe.simulate import build_graphs
from moeopt.megamoe.stealing import IdleCoreStealing, steal_pool


def test_an_idle_core_takes_the_last_queued_tile_of_the_busiest_one():
    # c0 queues t1..t4 (unit tiles, no dependencies), c1 none; steal below 2 tiles left.
    # commit 1: t1 on c0 [0, 1]; first call: c1 has 0 < 2 -> takes c0's last, t4 (c0 3 left, c1 1);
    #   then t1's commit leaves c0 2 -> no steal.
    # commit 2: t4 on c1 [0, 1] (start 0 beats t2's 1); c1 has 0 left -> takes c0's last, t3.
    # commit 3: t2 on c0 [1, 2] (tie at 1 with t3: t2 was added first); c0 0 left, c1 1 < 2: none.
    # commit 4: t3 on c1 [1, 2]. Makespan 2 instead of 4.
    g = m.EventGraph(pools={"AIC-gmm1-steal": ["c0.AIC", "c1.AIC"]})
    for k in (1, 2, 3, 4):
        g.add(m.Event(f"t{k}", resources=["c0.AIC"], duration_us=1.0, labels={"stage": "gmm1"}))
    hook = IdleCoreStealing([{"c0.AIC": ["t1", "t2", "t3", "t4"], "c1.AIC": []}], min_pending=2)
    s = m.schedule(g, restructure=hook)
    assert [(n, s.start_us[n], s.resources[n][0]) for n in ("t1", "t2", "t3", "t4")] == [
        ("t1", 0.0, "c0.AIC"),
        ("t2", 1.0, "c0.AIC"),
        ("t3", 1.0, "c1.AIC"),
        ("t4", 0.0, "c1.AIC"),
    ]
    assert dict(s.repinned) == {"t3": ("c0.AIC", "c1.AIC"), "t4": ("c0.AIC", "c1.AIC")}
    m.validate_schedule(g, s)
    # the same hook object scheduled again starts afresh (its first-call steal included)
    again = m.schedule(g, restructure=hook)
    assert (dict(again.start_us), dict(again.repinned)) == (dict(s.start_us), dict(s.repinned))


@pytest.fixture(scope="module")
def stolen(bs72):
    # 4 ranks of 36 tokens: GMM2 (a GM hand-off to combine on megamoe-a8w8) is the movable stage
    s = bs72.with_overrides({"workload.world": 4, "workload.tokens": 36})
    return s, mm.simulate(s.with_overrides({"policy.restructure": "idle_core_stealing"}))


def test_stealing_moves_gmm2_tiles_within_their_own_cores_and_the_validator_agrees(stolen):
    s, r = stolen
    steal = s.with_overrides({"policy.restructure": "idle_core_stealing"})
    cfg = steal.config
    own = {f"c{k}.AIC" for k in cfg.core_groups["gmm2"].cores}
    built = {rep: rg for rep, (rg, _ranks) in build_graphs(steal).items()}
    moved = 0
    for rep in r["simulated_ranks"]:
        rr = r["rank_results"][rep]
        sched, g = rr["schedule"], rr["graph"]
        for name, (frm, to) in sched.repinned.items():
            moved += 1
            assert g[name].labels["stage"] == "gmm2"  # on-chip GMM1 tiles never move
            assert {frm, to} <= own
            assert sched.resources[name] == (to,)
            assert g[name].resources == (to,)  # the result's graph has the tile where it ran
            assert built[rep].graph[name].resources == (frm,)  # as built, on its assigned core
        # the schedule is valid for the graph as built, given the moves it records
        m.validate_schedule(built[rep].graph, sched)
        assert steal_pool("gmm2") in built[rep].graph.pools
    assert moved > 0


def test_the_exact_layer_takes_the_stolen_schedule_as_its_hint(stolen):
    from moeopt.exact.solve import solve_exact

    _s, r = stolen
    rr = r["rank_results"][r["slowest_rank"]]
    x = solve_exact(rr["graph"], time_limit_s=2.0, hint=rr["schedule"])
    assert x.best_us <= rr["schedule"].makespan_us + 1e-6
    assert x.lower_bound_us <= x.best_us + 1e-6


def test_core_queues_moves_nothing_and_differs_from_stealing_only_by_the_moves(bs72):
    s = bs72.with_overrides({"workload.world": 4, "workload.tokens": 36})
    queued = s.with_overrides({"policy.restructure": "core_queues"})
    q = mm.simulate(queued)
    assert all(not rr["schedule"].repinned for rr in q["rank_results"].values())
    # the queues alone: the GMM2 tiles of a core are no longer chained in program order (they are
    # without the rule)
    for scenario, chained in ((queued, False), (s, True)):
        rg = next(rg for rg, _ranks in build_graphs(scenario).values())
        g2_chain = [(a, b) for a, b in rg.chain_edges if a.startswith("g2.") and b.startswith("g2.")]
        assert bool(g2_chain) == chained


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        (
            {
                "options.links": [
                    {
                        "producer": "gmm2",
                        "consumer": "combine",
                        "location": "onchip",
                        "depth": 1,
                        "colocated_by_hardware": True,
                    },
                ]
            },
            "both GMM stages hand their tiles to their consumer on chip",
        ),
        (
            {
                "options.late_bind_pools": ["AIC"],
                "options.links": [
                    {
                        "producer": "gmm1",
                        "consumer": "activation",
                        "location": "gm",
                        "depth": 0,
                        "colocated_by_hardware": False,
                    },
                ],
            },
            "the cube is late-bound",
        ),
        ({"kernel.topo_urma": True, "options.orchestration": "layered"}, "options.orchestration = 'layered'"),
    ],
)
def test_stealing_is_refused_where_no_tile_may_move(bs72, overrides, match):
    with pytest.raises(ScenarioError, match=match) as ei:
        bs72.with_overrides({"policy.restructure": "idle_core_stealing", **overrides})
    assert "policy.restructure = 'idle_core_stealing'" in str(ei.value)
    assert "allowed" in str(ei.value)


def test_an_unknown_rule_names_the_registered_ones(bs72):
    with pytest.raises(ScenarioError, match=r"policy\.restructure.*idle_core_stealing"):
        bs72.with_overrides({"policy.restructure": "steal_everything"})


def test_the_stealing_threshold_is_listed_as_assumed(stolen):
    _s, r = stolen
    assert r["provenance"]["steal_min_pending"]["value"] == 2
    assert r["provenance"]["steal_min_pending"]["tag"] == "assumed"
