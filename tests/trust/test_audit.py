"""Knob audit: each knob classified by perturbing it, on the seed's bs=72 shape."""

from __future__ import annotations

import pytest

import moeopt.megamoe as mm
from moeopt.cli import main
from moeopt.megamoe.knobs import knob, knob_catalogue
from moeopt.trust import audit as au


def test_candidates_respect_the_validators(bs72: mm.Scenario) -> None:
    # tile_n = 256 here; allowed: multiples of 16 in [16, 4096]
    vals = au.candidates(knob("kernel.tile_n"), bs72)
    assert vals
    assert all(v % 16 == 0 and 16 <= v <= 4096 and v != 256 for v in vals)
    assert au.candidates(knob("kernel.topo_urma"), bs72) == [True]
    assert set(au.candidates(knob("options.combine_granularity"), bs72)) == {"per_expert", "by_source", "auto"}
    # a constant: x1.5 and x0.5 of the profile's value
    gm = bs72.config.constants["gm_l1_bytes_per_us"].value
    assert au.candidates(knob("calibration.gm_l1_bytes_per_us"), bs72) == [1.5 * gm, 0.5 * gm]


def test_each_class_on_knobs_whose_class_is_known(bs72: mm.Scenario) -> None:
    """* kernel.tile_n: the GMM tile width sets the tile count and the load bytes: effective.
    * calibration.urma_get_bytes_per_us: only the URMA path reads it (kernel.topo_urma = true):
      moves only on that shape, and the audit must name it.
    * options.event_granularity.gmm1: packing GMM tiles is refused as not modelled: rejected.
    * options.builder: one builder is registered, nothing to compare: not probed."""
    got = {
        v.path: v
        for v in au.audit_knobs(
            bs72,
            [
                "kernel.tile_n",
                "calibration.urma_get_bytes_per_us",
                "options.event_granularity.gmm1",
                "options.builder",
            ],
        )
    }
    assert got["kernel.tile_n"].verdict == au.EFFECTIVE
    urma = got["calibration.urma_get_bytes_per_us"]
    assert urma.verdict == au.OTHER_SHAPE
    assert urma.shape == "kernel.topo_urma = true"
    assert got["options.event_granularity.gmm1"].verdict == au.REJECTED
    assert "not modelled" in got["options.event_granularity.gmm1"].detail
    assert got["options.builder"].verdict == au.NOT_PROBED


def test_unknown_path_is_refused(bs72: mm.Scenario) -> None:
    with pytest.raises(mm.ScenarioError, match="did you mean 'kernel.tile_n'"):
        au.audit_knobs(bs72, ["kernel.tile_nn"])


def test_cli_audit_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--only", "kernel.tile_m", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "kernel.tile_m" in out
    assert "effective" in out
    assert "bs=72" in out


@pytest.mark.slow
def test_full_audit_classifies_every_knob(bs72: mm.Scenario) -> None:
    verdicts = au.audit_knobs(bs72)
    assert [v.path for v in verdicts] == [k.path for k in knob_catalogue()]
    assert all(v.verdict in au.CLASSES for v in verdicts)
    by = {v.path: v.verdict for v in verdicts}
    # the shape itself always moves the time
    for p in ("h", "hidden_dim", "workload.tokens", "kernel.tile_n"):
        assert by[p] == au.EFFECTIVE
    text = au.format_audit(verdicts)
    assert text.count("\n") >= len(verdicts)


def test_an_internal_error_is_reported_not_raised(bs72: mm.Scenario, monkeypatch: pytest.MonkeyPatch) -> None:
    """A value the scenario layer lets through but the model crashes on is a bug to list."""
    real = au.simulate

    def crash_on_wide_tiles(s: mm.Scenario) -> dict[str, object]:
        if s.config.tile_n != 256:
            raise ZeroDivisionError("float division by zero")
        return real(s)

    monkeypatch.setattr(au, "simulate", crash_on_wide_tiles)
    (v,) = au.audit_knobs(bs72, ["kernel.tile_n"])
    assert v.verdict == au.REJECTED
    assert "BUG: kernel.tile_n = " in au.format_audit([v])
    assert "ZeroDivisionError" in au.format_audit([v])
