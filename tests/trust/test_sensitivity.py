"""Calibration uncertainty -> intervals on times and Δs, and the flips read from them."""

from __future__ import annotations

from pathlib import Path

import pytest

import moeopt.megamoe as mm
from moeopt.cli import main
from moeopt.errors import InputError
from moeopt.trust.sensitivity import (
    ConstantRange,
    Perturbation,
    SensitivityReport,
    calibration_ranges,
    calibration_sensitivity,
    format_sensitivity,
    parse_ranges,
)


@pytest.fixture(scope="module")
def small() -> mm.Scenario:
    return mm.Scenario(
        workload=mm.Workload(tokens=16, topk=2, world=2, local_experts=2),
        h=512,
        hidden_dim=1024,
        profile="megamoe-a8w8",
    )


def test_ranges_follow_the_provenance_tags(small: mm.Scenario) -> None:
    consts = small.config.constants
    rngs = {r.name: r for r in calibration_ranges(small)}
    # measured ±10 %, assumed ±50 %, spec values exact (not moved)
    gm = consts["gm_l1_bytes_per_us"]
    assert gm.tag == "measured"
    assert rngs["gm_l1_bytes_per_us"].lo == pytest.approx(0.9 * gm.value)
    assert rngs["gm_l1_bytes_per_us"].hi == pytest.approx(1.1 * gm.value)
    launch = consts["launch_us"]
    assert launch.tag == "assumed"
    assert (rngs["launch_us"].lo, rngs["launch_us"].hi) == pytest.approx(
        (0.5 * launch.value, 1.5 * launch.value)
    )
    assert consts["hbm_bytes_per_us"].tag == "spec"
    assert "hbm_bytes_per_us" not in rngs
    given = {r.name: r for r in calibration_ranges(small, {"hbm_bytes_per_us": (1.0e6, 2.0e6)})}
    assert (given["hbm_bytes_per_us"].lo, given["hbm_bytes_per_us"].why) == (1.0e6, "given")


def test_bad_ranges_are_refused(small: mm.Scenario) -> None:
    with pytest.raises(mm.ScenarioError, match="did you mean 'launch_us'"):
        calibration_ranges(small, {"lanch_us": (1.0, 2.0)})
    with pytest.raises(InputError, match="0 <= lo <= hi"):
        calibration_ranges(small, {"launch_us": (2.0, 1.0)})
    with pytest.raises(InputError, match="NAME=LO:HI"):
        parse_ranges(["launch_us=1"])
    assert parse_ranges(["launch_us=1:2.5"]) == {"launch_us": (1.0, 2.5)}


def test_intervals_contain_the_nominal_and_flags_a_faster_rate(small: mm.Scenario) -> None:
    rep = calibration_sensitivity(
        small,
        {"base": {}, "tile_n 128": {"kernel.tile_n": 128}},
        ranges={"gm_l1_bytes_per_us": (40e3, 60e3)},
        rel={"measured": 0.0, "assumed": 0.0},
    )
    # with every other range zero-width, only gm_l1 moves; its two ends are real runs
    for v in rep.variants:
        nom = rep.nominal(v)
        lo_hi = rep.time_interval(v)
        assert nom is not None
        assert lo_hi is not None
        assert lo_hi[0] <= nom <= lo_hi[1]
    base_lo = rep.times["gm_l1_bytes_per_us lo"]["base"]
    base_hi = rep.times["gm_l1_bytes_per_us hi"]["base"]
    assert base_lo is not None
    assert base_hi is not None
    # a slower GM->L1 rate cannot make a load-heavy kernel faster here
    assert base_lo >= base_hi
    di = rep.delta_interval("tile_n 128")
    assert di is not None
    assert di[0] <= rep.deltas("tile_n 128")["nominal"] <= di[1]
    text = format_sensitivity(rep)
    assert "tile_n 128" in text
    assert "interval" in text


def _report(times: dict[str, dict[str, float | None]]) -> SensitivityReport:
    rngs = (ConstantRange("x", "measured", 1.0, 0.9, 1.1, "measured ±10%"),)
    perts = tuple(Perturbation(k, {"x": 1.0}) for k in times if k != "nominal")
    return SensitivityReport(rngs, ("a", "b", "c"), perts, times)


def test_flips_and_best_changes_are_read_from_the_runs() -> None:
    """Hand-made times: b is faster than a nominally (Δ = -1) but slower under 'x lo' (Δ = +1);
    c is slower everywhere. The fastest is b, except under 'x lo' where a is."""
    rep = _report(
        {
            "nominal": {"a": 10.0, "b": 9.0, "c": 12.0},
            "x lo": {"a": 11.0, "b": 12.0, "c": 13.0},
            "x hi": {"a": 9.0, "b": 8.0, "c": 11.0},
        }
    )
    assert rep.flips("b") == ["x lo"]
    assert rep.flips("c") == []
    assert rep.delta_interval("b") == (-1.0, 1.0)
    assert rep.time_interval("a") == (9.0, 11.0)
    assert rep.best() == "b"
    assert rep.best_changes() == [("x lo", "a")]
    text = format_sensitivity(rep)
    assert "FLIPS under x lo" in text
    assert "slower over the whole interval" in text  # c
    assert "'a' under x lo" in text


def test_a_failed_run_is_left_out_and_listed() -> None:
    rep = _report({"nominal": {"a": 10.0, "b": 9.0, "c": 12.0}, "x lo": {"a": None, "b": 9.5, "c": 12.0}})
    rep.errors["x lo"] = {"a": "ScenarioError: tiles do not fit"}
    assert rep.deltas("b") == {"nominal": -1.0}
    assert "tiles do not fit" in format_sensitivity(rep)


def test_cli_compare_with_sensitivity(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sc = tmp_path / "s.toml"
    sc.write_text(
        'profile = "megamoe-a8w8"\nh = 512\nhidden_dim = 1024\n'
        "[workload]\ntokens = 16\ntopk = 2\nworld = 2\nlocal_experts = 2\n"
    )
    vf = tmp_path / "v.yaml"
    vf.write_text("base: {}\ntile_n 128: {kernel.tile_n: 128}\n")
    args = ["compare", str(sc), str(vf), "--no-progress", "--probes", "0", "--sensitivity"]
    rc = main([*args, "--rel", "measured=0.05", "--rel", "assumed=0", "--range", "launch_us=1:20"])
    assert rc == 0
    out = capsys.readouterr().out
    # measured constants of megamoe-a8w8 at ±5 %, launch_us given, the other assumed ones fixed
    assert "measured ±5%" in out
    assert "given" in out
    assert "assumed ±" not in out
    assert "conclusion" in out
    assert main([*args, "--rel", "spec=0.1"]) == 2
    assert "TAG one of measured, assumed" in capsys.readouterr().err
