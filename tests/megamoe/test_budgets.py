"""Item 7 (feasibility the kernel enforces): every buffer of the PTO kernel is a rule of the
scenario, with a clear error naming the budget, and the search prunes such points as infeasible."""

from __future__ import annotations

import os

import pytest

import moeopt as m
import moeopt.megamoe as mm
from moeopt.megamoe.config.budgets import front_reorder_path

SEED002 = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "seed002_typical.toml")
BS72 = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "scenario_bs72.toml")


def load(over, path=SEED002):
    return mm.load_scenario(path, over)


def test_l1_budget_counts_the_per_channel_scales():
    """Item 7: tile_m 256 (the seed-002 study's best point) is refused: two L1 stages of
    A + B + scale at 256 x 256 x 512 = 2 x (256 x 512 + 256 x 512 + 256 x 8) = 2 x 264,192 =
    528,384 B (516 KiB) > 524,288 B (512 KiB). The kernel's own tile 128 x 256 x 512 needs
    2 x (65,536 + 131,072 + 2,048) = 397,312 B (388 KiB, hardware.md §2) and fits."""
    with pytest.raises(mm.ScenarioError, match=r"do not fit L1 .*scales.*= 528384 B > L1 524288 B"):
        load({"kernel.tile_m": 256})
    assert load({}).config.tile_m == 128
    # the same arithmetic without scales fits exactly (1 MiB / 2): the rule the scales make binding
    assert (256 + 256) * 512 * 2 == 524288


def test_l0c_holds_one_output_tile_of_fp32():
    """Item 7: a 256 x 256 output needs 256 x 256 x 4 B = 256 KiB of L0C, the kernel has one
    128 KiB buffer; tile_k 256 keeps L1 within budget, so L0C is the rule that refuses it."""
    with pytest.raises(mm.ScenarioError, match=r"does not fit L0C: tile_m 256 x tile_n 256 x 4 B .* = 262144 B"):
        load({"kernel.tile_m": 256, "kernel.tile_k": 256})
    assert load({"kernel.tile_m": 64, "kernel.tile_n": 384}).config.tile_n == 384  # 96 KiB fits


def test_k_alignment_dispatch_ub_and_front_sort_cores():
    """Item 7: K must be a multiple of the int8 cube's fractal K (32); the dispatch UB holds
    2 buffers x 2 rows x align32(h + 32) <= 128 KiB (h = 32768: 2 x 2 x 32,800 = 131,200 B); the
    MultiCore front reorder needs Pow4Ceil(ceil(routes / 6144)) sort cores <= 48 AIV
    (M = 16384, topk 8: 131,072 routes -> 22 -> 64 sort cores)."""
    with pytest.raises(mm.ScenarioError, match=r"h = 7176: a GEMM's K must be a multiple of the cube's fractal K 32"):
        load({"h": 7176})
    with pytest.raises(mm.ScenarioError, match=r"dispatch does not fit its UB budget: 2 buffers x 2 rows x 32800 B"):
        load({"h": 32768})
    with pytest.raises(mm.ScenarioError, match=r"front reorder of 131072 routes .* 64 sort cores.* 48 AIV"):
        load({"workload.tokens": 16384})
    # the megamoe-a8w8 profile (arch35) has no such documented budgets: its own tile stands
    assert mm.load_scenario(BS72).config.tile_m == 256


def test_front_reorder_path_matches_the_derived_thresholds():
    """Item 7: hardware.md §2 derives, from the kernel's formulas at K = 7168, topK = 8: FullLoad
    up to 2848 routes at EP8 (128 experts) and 2816 at EP16 (256 experts); M = 512 (4096 routes)
    OneCore; M = 1024 / 2048 MultiCore on 4 sort cores."""
    assert front_reorder_path(2848, 7168, 128)[0] == "FullLoad"
    assert front_reorder_path(2849, 7168, 128)[0] == "OneCore"
    assert front_reorder_path(2816, 7168, 256)[0] == "FullLoad"
    assert front_reorder_path(2817, 7168, 256)[0] == "OneCore"
    assert front_reorder_path(512 * 8, 7168, 128) == ("OneCore", 1)
    assert front_reorder_path(1024 * 8, 7168, 128) == ("MultiCore", 4)
    assert front_reorder_path(2048 * 8, 7168, 128) == ("MultiCore", 4)


def test_hccl_window_rows_under_skewed_routing():
    """Item 7: a rank may receive at most maxOutputSize = 81940 rows (run.sh L20). Uniform
    M = 8192 x topK 8 over 8 ranks sends each rank 65,536 rows (fits); a skewed zipf routing of
    the same shape sends rank 0 more, and the graph is not built."""
    from moeopt.megamoe.routing import counts_matrix
    from moeopt.megamoe.scenario.resolve import check_routing_budgets

    ok = load({"workload.tokens": 8192})
    rows = counts_matrix(ok.workload)[:, :16].sum()  # rank 0's 16 local experts
    assert rows == 65536
    check_routing_budgets(ok.config, {0: int(rows)})  # fits: no error
    skew = load({"workload.tokens": 8192, "workload.routing": "zipf", "workload.zipf_skew": 3.0})
    with pytest.raises(mm.ScenarioError, match=r"receives \d+ rows .* more than the kernel's maxOutputSize 81940"):
        m.simulate(skew)


def test_search_prunes_the_infeasible_tile_with_the_budget_as_reason(tmp_path):
    """Item 7: the search prunes tile_m 256 on the PTO kernel as infeasible, the L1 budget its
    recorded reason (before, it was simulated and reported as a win)."""
    study = {
        "name": "budget",
        "scenario": SEED002,
        "overrides": {"workload.tokens": 16},
        "space": {"kernel.tile_m": {"choices": [64, 256]}},
        "sampler": "grid",
        "trials": 3,
        "outputs": {"exact_gap": False},
    }
    r = m.run_study(study, out=tmp_path / "s")
    assert r.summary["pruned"] == {"infeasible": 1}
    reasons = r.summary["infeasible_reasons"]
    assert any("do not fit L1" in x["reason"] and "scales" in x["reason"] for x in reasons)
