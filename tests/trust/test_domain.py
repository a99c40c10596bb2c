"""Calibration domain check: which measured constants a scenario uses outside their domain."""

from __future__ import annotations

from pathlib import Path

import pytest

import moeopt.megamoe as mm
from moeopt.cli import main
from moeopt.trust.domain import domain_report, format_domain


def test_pto_constants_outside_their_domain_are_named() -> None:
    """pto-a2a3 was calibrated at 16 ranks, 2048 tokens, h 7168 (hardware.md §1); this scenario
    differs in world, tokens, h, hidden_dim and local experts, so every measured pto constant is
    out of domain. gm_l1_bytes_per_us is the GM->L1 rate every GMM tile load uses: with 4096 rows
    per expert (4096 tokens x topk 4 x 2 ranks / 8 experts) the weights are read from HBM once
    and reused from L2 by 32 m-blocks, so the tiles are load-bound, not HBM-bound, and the rate
    must be reported as used (a 1 % faster rate changes the time)."""
    s = mm.Scenario(
        workload=mm.Workload(tokens=4096, topk=4, world=2, local_experts=4),
        h=1024,
        hidden_dim=2048,
        profile="pto-a2a3",
    )
    rep = domain_report(s)
    assert rep.out_of_domain
    assert any("world = 2, calibrated at 16" in r for r in rep.reasons)
    by = {c.name: c for c in rep.constants}
    gm = by["gm_l1_bytes_per_us"]
    assert gm.tag == "measured"
    assert gm.verdict == "OUT OF DOMAIN"
    assert gm.used
    assert gm in rep.used_out_of_domain
    assert by["cube_mac_per_us_int8"].verdict == "exact"
    assert by["launch_us"].verdict == "never measured"
    text = format_domain(rep)
    assert "OUTSIDE" in text
    assert "gm_l1_bytes_per_us" in text.split("used outside their domain:")[1]


def test_seed_shape_is_inside_the_a8w8_domain(bs72: mm.Scenario) -> None:
    """The megamoe-a8w8 domain fixes only quant w8a8 and 28 cube cores; bs=72 has both."""
    rep = domain_report(bs72, probe_use=False)
    assert not rep.out_of_domain
    assert all(c.verdict == "inside" for c in rep.constants if c.tag == "measured")
    assert rep.used_out_of_domain == []
    moved = domain_report(bs72.with_overrides({"aic_num": 24}), probe_use=False)
    assert moved.out_of_domain
    assert any("aic_num = 24" in r for r in moved.reasons)


def test_a_scenario_value_is_not_a_calibration(bs72: mm.Scenario) -> None:
    rep = domain_report(bs72.with_overrides({"calibration.gm_l1_bytes_per_us": 60e3}), probe_use=False)
    by = {c.name: c for c in rep.constants}
    assert by["gm_l1_bytes_per_us"].verdict == "set by the scenario"


def test_cli_domain(capsys: pytest.CaptureFixture[str]) -> None:
    path = Path(__file__).resolve().parents[2] / "examples" / "scenario_bs72.toml"
    assert main(["domain", str(path), "--no-use-probe"]) == 0
    assert "megamoe-a8w8/arch35/28core" in capsys.readouterr().out
    assert main(["domain", "nope.toml"]) == 2
    assert "no such scenario file" in capsys.readouterr().err
