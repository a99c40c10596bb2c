"""Where GMM tiles land: the kernel's rolling start core, and paired combines following their tile."""

from __future__ import annotations

from collections import Counter

import moeopt.megamoe as mm


def gmm1_cores(r: dict) -> dict[str, str]:
    rr = r["rank_results"][0]
    return {e["name"]: e["core"] for e in rr["events"] if e["stage"] == "gmm1" and e["name"].endswith(".mm")}


def test_static_round_robin_carries_the_start_core_across_experts():
    """gmm1.h@2d9d4288 L120-131: within an expert tile i goes to core (start + i) mod n, and start
    advances by the expert's tile count. 3 cores, 4 experts of 80 rows, hidden_dim 1024 -> 1 m-block
    x 4 N-blocks of 256 = 4 tiles each: starts 0, 1, 2, 0, so expert 1 -> cores 1, 2, 0, 1 and the
    16 tiles split 6 / 5 / 5 (a start reset per expert would give 8 / 4 / 4)."""
    s = mm.Scenario(
        workload=mm.Workload(tokens=320, topk=1, world=1, local_experts=4, routing="uniform"),
        h=1024,
        hidden_dim=1024,
        aic_num=3,
        profile="pto-a2a3",
    )
    cores = gmm1_cores(mm.simulate(s))
    assert [cores[f"g1.e1.m0.n{n}.mm"] for n in range(4)] == ["c1.AIC", "c2.AIC", "c0.AIC", "c1.AIC"]
    assert [cores[f"g1.e2.m0.n{n}.mm"] for n in range(4)] == ["c2.AIC", "c0.AIC", "c1.AIC", "c2.AIC"]
    assert sorted(Counter(cores.values()).values()) == [5, 5, 6]


def test_paired_combine_follows_a_late_bound_gmm2_tile(bs72):
    """megamoe-a8w8 pairs each per-tile combine with its GMM2 tile's core (AIV1 of that core). With
    late-bound tiles that core is chosen at schedule time; the combine must land on it, and nothing
    may run on a core the die does not have (c0..c27)."""
    # late-bound cube tiles need a GM hand-off to the activation (on-chip slots are per core)
    gm = [{"producer": "gmm1", "consumer": "activation", "location": "gm", "depth": 0, "colocated_by_hardware": False}]
    r = mm.simulate(bs72.with_overrides({"options.late_bind_pools": ["AIC"], "options.links": gm}))
    rr = r["rank_results"][0]
    where = {e["name"]: e["core"] for e in rr["events"]}
    combines = [n for n in where if ".comb" in n]
    assert combines
    for n in combines:
        mm_core = where[n.split(".comb")[0] + ".mm"]
        assert where[n] == mm_core.replace(".AIC", ".AIV1")
    sites = {res.split(".")[0] for res in rr["graph"].resources()}
    assert sites <= {f"c{k}" for k in range(28)}
