"""Knob audit: each knob classified by perturbing it, on the seed's bs=72 shape."""

from __future__ import annotations

from pathlib import Path

import pytest

import moeopt.megamoe as mm
from moeopt.cli import main
from moeopt.megamoe.knobs import knob, knob_catalogue
from moeopt.trust import audit as au

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


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


def test_rule_or_number_knobs_also_try_numbers(bs72: mm.Scenario) -> None:
    """A rule may resolve to the current value on this shape (bs = 72, M = 72: combine's
    'kernel_rule' start is expert 0, the same as 'none'); the numbers still differ from it:
    the smallest but one and the largest of the allowed range."""
    assert au.candidates(knob("options.combine_start_after"), bs72) == ["kernel_rule", 1, 1 << 20]
    assert au.candidates(knob("options.swiglu_active"), bs72) == ["kernel_rule", 2, 1 << 20]
    # a choice knob without numbers is unchanged
    assert "kernel_rule" in au.candidates(knob("kernel.swiglu_segments"), bs72)


def test_core_group_candidates_include_one_core(bs72: mm.Scenario) -> None:
    """Half the die (14 of 28 cores) never crowds dispatch's 8 sources onto fewer AIVs; one core
    does (bs = 72: dispatch on one core is +13.6%)."""
    assert au.candidates(knob("options.core_groups.dispatch.cores"), bs72) == ["0-13", "14-27", "0"]
    assert au.candidates(knob("options.core_groups.dispatch"), bs72) == [{"cores": "0-13"}, {"cores": "0"}]


def test_a_knob_that_moves_only_the_unpermute_tail_is_judged_on_the_time_with_it() -> None:
    """The kernel's time ends at the last combine; the unpermute runs after the cross-rank
    barrier. A trial that leaves the first and moves the second moved the time with the tail."""
    base = (100.0, 110.0)
    same = au.Trial("a", 100.0, None, 110.0)
    tail = au.Trial("b", 100.0, None, 111.1)
    kern = au.Trial("c", 99.0, None, 109.0)
    assert au._moved(base, [same]) is None
    assert au._moved(base, [same, tail]) is tail
    assert au._moved(base, [tail, kern]) is kern  # the kernel's own time first
    v = au._moved_verdict(knob("options.unpermute"), None, tail, base, (tail,))
    # 111.1 / 110 - 1 = +1.00%
    assert v.verdict == au.EFFECTIVE
    assert v.detail == "'b': +1.00% of the time with the unpermute tail"
    # a change that rounds to 0.00% keeps two significant digits: 100.000001 / 100 - 1 = 1e-8 = 1e-6 %
    tiny = au.Trial("d", 100.000001, None, 110.0)
    assert au._moved_verdict(knob("options.unpermute"), "x", tiny, base, ()).detail == "on x: 'd': +1.0e-06%"


def test_every_probe_shape_is_accepted_by_the_examples(bs72: mm.Scenario) -> None:
    """A probe shape the scenario refuses is silently left out of the audit: on every shipped
    example each one must resolve (the staged barriers drop the look-ahead basic sets, the PTO
    profile takes its own tile where the scenario sets another, the split groups leave the
    activation's cores to GMM1 when the hand-off is on-chip, URMA on the PTO profile takes
    megamoe-a8w8's rates, and on a PTO profile, which has no URMA path, is the megamoe-a8w8 kernel)."""
    basic = mm.load_scenario(EXAMPLES / "scenario_basic.toml")
    seed002 = mm.load_scenario(EXAMPLES / "seed002_typical.toml")
    for s in (bs72, basic, seed002):
        for name, over in au.probe_shapes(s):
            assert s.with_overrides(over).config is not None, name
    # 8 x 2048 tokens x topk 8 = 131072 routes would sort on Pow4Ceil(ceil(131072 / 6144) = 22)
    # = 64 cores (48 AIV exist); 4 x: Pow4Ceil(11) = 16 cores
    assert dict(au.probe_shapes(seed002))["tokens 8192"] == {"workload.tokens": 8192}
    names = dict(au.probe_shapes(basic))
    assert names["barriers staged, GM links, no look-ahead"]["policy.dispatch_lookahead"] == 0
    pto = names["profile pto-a2a3 (its tile 128 x 256 x 512)"]
    assert (pto["kernel.tile_m"], pto["kernel.tile_n"]) == (128, 256)
    # seed002_typical is a PTO scenario (peer writes): its URMA probe switches kernel, never
    # builds URMA transport under the PTO kernel's name
    urma = [o for n, o in au.probe_shapes(seed002) if n.startswith("kernel.topo_urma = true")]
    assert urma == [{"profile": "megamoe-a8w8", "kernel.topo_urma": True}]


def test_the_many_rows_probe_has_four_m_blocks_per_expert(bs72: mm.Scenario) -> None:
    """bs = 72: topk 6 over 8 ranks needs 1 expert per rank; tokens = 4 x 256 x 1 // 6 = 170,
    so each expert gets 170 x 6 = 1020 rows (uniform routing): ceil(1020 / 256) = 4 M blocks."""
    name, over = au._many_row_blocks(bs72)
    assert over == {"workload.local_experts": 1, "workload.tokens": 170}
    assert name == "4 M blocks per expert (local_experts 1, tokens 170)"
    from moeopt.megamoe.routing import counts_matrix

    rows = counts_matrix(bs72.with_overrides(over).workload).sum(axis=0)
    assert rows.tolist() == [1020] * 8


def test_a_capacity_and_a_resolution_that_move_nothing_get_verdicts_of_their_own(bs72: mm.Scenario) -> None:
    """Judged on bs = 72 alone (no probe shape): L1 x0.5 = 256 KiB cannot hold two stages of
    (256 + 256) x 512 B = 512 KiB, x1.5 is accepted and holds no whole K panel either (A + B of
    a GMM1 tile: 144 x 5120 + 256 x 5120 B > 768 KiB), so it only refuses; the bandwidth quantum
    moves nothing, as chosen. Neither is "not modelled"."""
    base = au._time(bs72)
    cap = au.audit_knob(knob("calibration.l1_bytes"), bs72, base, [])
    assert cap.verdict == au.CAPACITY
    assert cap.detail.startswith("a buffer size")
    assert "262144 refused (kernel tiles do not fit L1" in cap.detail
    assert "786432 moved nothing on any probe shape" in cap.detail
    res = au.audit_knob(knob("calibration.bw_unit_bytes_per_us"), bs72, base, [])
    assert res.verdict == au.RESOLUTION
    assert "0.5 moved nothing" in res.detail  # halved only: what a resolution must survive
    text = au.format_audit([cap, res])
    assert "0 not modelled" in text
    assert "1 capacity (only refuses), 1 resolution (by design)" in text


def test_a_capacity_that_refuses_nothing_is_not_excused(bs72: mm.Scenario) -> None:
    """With tile_k 64, two L1 stages of (256 + 256) x 64 B = 64 KiB fit in x0.5 = 256 KiB too:
    both values are accepted and, on this scenario alone, neither moves the time, so nothing
    shows the capacity acting: "not modelled", not "capacity"."""
    s = bs72.with_overrides({"kernel.tile_k": 64})
    v = au.audit_knob(knob("calibration.l1_bytes"), s, au._time(s), [])
    assert v.verdict == au.NOT_MODELLED
    assert v.detail == "accepted 786432, 262144 and the time did not move on any probe shape"


@pytest.mark.slow
def test_knobs_that_act_only_elsewhere_or_by_design_are_classified_so(bs72: mm.Scenario) -> None:
    """On bs = 72 (3 experts, one M block each, per-stream transfers below the link):
    * l1_bytes x0.5 refuses the tiles, x1.5 moves nothing: a capacity;
    * bw_unit_bytes_per_us: the quantum chosen to move nothing: a resolution;
    * event_granularity.dispatch packs an AIV's segments of one wave: one expert per wave
      gives each AIV one segment; waves of 64 m-groups (all 3 experts) give it 3;
    * gmm1_small_m_rebalance needs fewer GMM1 tiles (9216 / 256 = 36) than cores: 56 cores;
    * the two-phase unpermute moves only the tail, where phase 1 runs on fewer AIVs than all
      (v1_fixed groups)."""
    got = {
        v.path: v
        for v in au.audit_knobs(
            bs72,
            [
                "calibration.l1_bytes",
                "calibration.bw_unit_bytes_per_us",
                "options.event_granularity.dispatch",
                "options.gmm1_small_m_rebalance",
                "options.unpermute",
            ],
        )
    }
    assert got["calibration.l1_bytes"].verdict == au.CAPACITY
    assert "262144 refused (kernel tiles do not fit L1" in got["calibration.l1_bytes"].detail
    assert got["calibration.bw_unit_bytes_per_us"].verdict == au.RESOLUTION
    assert got["options.event_granularity.dispatch"].shape == f"p1_override {au.WIDE_WAVE}"  # 64
    assert got["options.gmm1_small_m_rebalance"].shape == "aic_num 56"
    assert got["options.unpermute"].shape == "core_groups v1_fixed"
    assert got["options.unpermute"].detail.endswith("of the time with the unpermute tail")


EXAMPLE_SCENARIOS = sorted(p for p in EXAMPLES.glob("*.toml") if "[workload]" in p.read_text())


def test_the_shipped_scenarios_are_the_ones_audited() -> None:
    # examples/trace_mapping.toml maps a profiler trace; every other .toml is a scenario
    assert [p.name for p in EXAMPLE_SCENARIOS] == [
        "scenario_basic.toml",
        "scenario_bs72.toml",
        "seed002_typical.toml",
    ]


@pytest.mark.slow
@pytest.mark.parametrize("path", EXAMPLE_SCENARIOS, ids=lambda p: p.stem)
def test_no_knob_of_a_shipped_example_is_accepted_and_not_modelled(path: Path) -> None:
    """Every knob a shipped example accepts moves the time here or on a named probe shape, or is
    refused, or is a capacity / resolution that by design moves nothing."""
    verdicts = au.audit_knobs(mm.load_scenario(path))
    bad = [f"{v.path}: {v.detail}" for v in verdicts if v.verdict == au.NOT_MODELLED]
    assert not bad, "\n".join(bad)
    crashed = [v.path for v in verdicts for t in v.trials if t.error and t.error.startswith(au.INTERNAL)]
    assert not crashed
