"""The V1 kernel's full-core GMM1 experts and the wave packers.

The V1 profile runs its first ``options.gmm1_full_experts`` local experts on every cube core,
each followed by an AIC-only SYNCALL that the next expert's tiles wait for (gmm1.h@HEAD
L158-181): those experts run first, whole and in order. A wave packer that puts another expert's
m-groups before or among theirs (on a skewed routing) asks for a program
order in which a tile waits for a flag set after it. That point is refused as a scenario error
naming the knobs (a search counts it infeasible), not built into a graph whose cycle only the
graph check finds.
"""

from __future__ import annotations

import pytest

from moeopt.megamoe import Scenario, Workload, kernel_time
from moeopt.megamoe.build.plan import plan_rank
from moeopt.megamoe.errors import ScenarioError
from moeopt.megamoe.simulate import rank_groups


def _v1(packing: str, p1: int, routing: str = "zipf") -> Scenario:
    s = Scenario(
        workload=Workload(tokens=256, topk=8, world=8, local_experts=16, routing=routing),
        h=7168,
        hidden_dim=4096,
        profile="pto-a2a3-v1",
    )
    return s.with_overrides({"policy.wave_packing": packing, "p1_override": p1})


def _out_of_order(s: Scenario) -> bool:
    """Whether some rank's GMM1 program order runs a tile of another expert before the last tile
    of a full-core expert that comes earlier in that order: worked out from the plan alone, apart
    from the builder's check (every expert whose first tile precedes a full expert's last one,
    other than that expert itself, breaks "first, whole and in order")."""
    cfg = s.config
    full = cfg.gmm1_full_experts
    counts, groups = rank_groups(s)
    e = s.workload.local_experts
    for g in groups:
        rank = g[0]
        rows = counts[:, rank * e : (rank + 1) * e]
        plan = plan_rank(cfg, rows, s.workload.tokens, rank, s.workload.world, s.workload.shared_expert_num)
        seq = [item[1] for item in plan.gmm1.order]
        fulls = [x for x in dict.fromkeys(seq) if x < full]
        for x in fulls:
            last = max(i for i, y in enumerate(seq) if y == x)
            if any(y != x and y not in fulls[: fulls.index(x)] for y in seq[:last]):
                return True
    return False


@pytest.mark.parametrize("packing", ["sequential_greedy", "longest_expert_first", "balanced_waves"])
@pytest.mark.parametrize("p1", [1, 2, 3])
def test_refused_exactly_when_the_full_experts_do_not_run_first(packing: str, p1: int) -> None:
    s = _v1(packing, p1)
    assert s.config.gmm1_full_experts == 2  # (the V1 profile's own value)
    if _out_of_order(s):
        with pytest.raises(ScenarioError) as err:
            kernel_time(s, workers=1)
        msg = str(err.value)
        assert f"policy.wave_packing = {packing!r} with options.gmm1_full_experts = 2" in msg
        assert "(a cycle" in msg
        assert "allowed: a wave packing that keeps local experts 0..1 first and whole" in msg
    else:
        assert kernel_time(s, workers=1)["kernel_total_us"] > 0.0


def test_the_cases_above_include_both_outcomes() -> None:
    # (so that neither branch of the test above is vacuous: sequential packing keeps the full
    # experts first; longest-first packing on a skewed routing with two m-groups per wave puts
    # a longer expert ahead of them)
    assert not _out_of_order(_v1("sequential_greedy", 2))
    assert _out_of_order(_v1("longest_expert_first", 2))
    # on a uniform routing every expert is as long as the next, and longest-first keeps the order
    assert not _out_of_order(_v1("longest_expert_first", 2, "uniform"))
    assert kernel_time(_v1("longest_expert_first", 2, "uniform"), workers=1)["kernel_total_us"] > 0.0
