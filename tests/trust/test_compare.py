"""compare_variants / format_design_space: the seed's design-space table on the seed's example."""

from __future__ import annotations

from pathlib import Path

import pytest

import moeopt.megamoe as mm
from moeopt.cli import main
from moeopt.cli.trust import load_variants
from moeopt.trust.compare import VariantRow, compare_variants, format_design_space

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "examples" / "scenario_bs72.toml"
VARIANTS = ROOT / "examples" / "variants_bs72.yaml"


@pytest.fixture(scope="module")
def seed_rows(bs72: mm.Scenario) -> list[VariantRow]:
    return compare_variants(bs72, load_variants(str(VARIANTS)), probes=4)


def test_example_files_are_the_seed_shape(bs72: mm.Scenario) -> None:
    assert mm.load_scenario(SCENARIO) == bs72
    assert list(load_variants(str(VARIANTS))) == [
        "baseline (pinned)",
        "late-bound pools",
        "GMM1 buffer 2 slots",
        "GMM2 per-K-chunk ready",
        "tile_n 128",
        "combine per expert",
    ]


def test_seed_table_has_the_seed_columns(seed_rows: list[VariantRow]) -> None:
    text = format_design_space(seed_rows)
    head = text.splitlines()[0]
    for col in (
        "variant",
        "time µs",
        "Δ µs",
        "Δ%",
        "utilisation",
        "bottleneck",
        "critical-path change",
        "busy change",
        "largest wait",
        "invariants",
    ):
        assert col in head
    # one line per variant, each naming its role utilisations and the binding bound
    lines = text.splitlines()[1:7]
    assert [ln.split("  ")[0].strip() for ln in lines] == [r.name for r in seed_rows]
    # the seed's late binding of the cube tiles meets bs72's on-chip GMM1 -> SwiGLU slot, which
    # belongs to a core: refused with the rule, a row that says so
    late = seed_rows[1]
    assert late.name == "late-bound pools"
    assert late.error is not None
    assert "on-chip slot belongs to the core its tile binds to" in late.error
    for ln, r in zip(lines, seed_rows, strict=True):
        if r.error is None:
            assert "AIC" in ln
            assert any(b in ln for b in ("bandwidth", "compute", "dependency"))
        else:
            assert "rejected" in ln
    assert all(r.error is None for r in seed_rows if r is not late)
    base = seed_rows[0]
    assert base.delta_us == 0.0
    assert base.critical_path_change_us
    assert all(v == 0.0 for v in base.critical_path_change_us.values())


def test_seed_variants_have_the_predicted_signs(seed_rows: list[VariantRow]) -> None:
    """Every Δ of the seed's example has the sign an operator developer predicts.

    A difference inside the row's measured anomaly noise is allowed either sign only where the
    prediction is "no worse" (≤ 0) or "no better" (≥ 0); where the prediction is strict, the Δ
    must also clear the noise.

    * late-bound pools (AIC, AIV1): refused on this shape (its on-chip GMM1 -> SwiGLU slot
      belongs to a core; see test_seed_table_has_the_seed_columns).
    * GMM1 buffer 2 slots: Δ ≤ 0. A second fixpipe slot only removes waits for a free slot;
      nothing else changes, so the total busy time is unchanged too.
    * GMM2 per-K-chunk ready: Δ ≤ 0. GMM2 may start on the first K half as soon as its
      activations are in, instead of waiting for the whole tile row; no extra work.
    * tile_n 128: Δ > 0, strictly. Halving the N tile doubles the GMM tiles, and each one
      loads its A panel again: more GM->L1 bytes and more GMM busy time on a bandwidth-bound
      shape.
    * combine per expert: Δ ≥ 0. A combine window now waits for every GMM2 tile of its expert
      slice, so the last combine cannot start earlier than with per-tile windows.
    """
    by = {r.name: r for r in seed_rows}

    def pct(name: str) -> tuple[float, float]:
        r = by[name]
        assert r.delta_pct is not None
        assert r.noise_pct is not None
        return r.delta_pct, r.noise_pct

    d, n = pct("GMM1 buffer 2 slots")
    assert d <= n
    assert by["GMM1 buffer 2 slots"].busy_change_us["gmm1"] == pytest.approx(0.0, abs=1e-6)
    d, n = pct("GMM2 per-K-chunk ready")
    assert d <= n
    d, n = pct("tile_n 128")
    assert d > n
    assert not by["tile_n 128"].is_noise
    assert by["tile_n 128"].gm_to_l1_mb > by["baseline (pinned)"].gm_to_l1_mb
    assert by["tile_n 128"].busy_change_us["gmm1"] > 0
    d, n = pct("combine per expert")
    assert d >= -n


def test_noise_marking_follows_the_threshold(bs72: mm.Scenario) -> None:
    # a half K step shortens each GMM tile's pipeline fill: a change well below 50%, above 0%
    v = {"base": {}, "k256": {"kernel.tile_k": 256}}
    loud = compare_variants(bs72, v, noise_pct=50.0)
    quiet = compare_variants(bs72, v, noise_pct=0.0)
    assert loud[1].delta_pct is not None
    assert loud[1].delta_pct != 0.0
    assert loud[1].is_noise
    assert not quiet[1].is_noise
    assert not loud[0].is_noise  # Δ = 0 is no change, not noise
    row = format_design_space(loud).splitlines()[2]
    assert "~" in row
    assert "~" not in format_design_space(quiet).splitlines()[2]


def test_measured_noise_covers_baseline_and_variant(seed_rows: list[VariantRow]) -> None:
    base = seed_rows[0].noise_pct
    assert base is not None
    assert base >= 0.0
    for r in seed_rows[1:]:
        if r.error is not None:  # a refused variant has no time, so no noise
            continue
        assert r.noise_pct is not None
        assert r.noise_pct >= base


def test_a_refused_variant_is_a_row_not_a_crash(bs72: mm.Scenario) -> None:
    rows = compare_variants(bs72, {"base": {}, "bad tile": {"kernel.tile_n": 100}}, probes=0)
    assert rows[1].error is not None
    assert "kernel.tile_n = 100" in rows[1].error
    assert "rejected" in format_design_space(rows)
    with pytest.raises(mm.ScenarioError, match="baseline 'bad'"):
        compare_variants(bs72, {"bad": {"kernel.tile_n": 100}})


def test_bad_variants_table_names_the_variant(bs72: mm.Scenario) -> None:
    from moeopt.errors import InputError

    with pytest.raises(InputError, match="variants.x = 3"):
        compare_variants(bs72, {"x": 3})  # type: ignore[dict-item]
    with pytest.raises(InputError, match="non-empty"):
        compare_variants(bs72, {})


def test_cli_compare(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    vf = tmp_path / "v.yaml"
    vf.write_text("base: {}\ntile_n 128: {kernel.tile_n: 128}\n")
    out_json = tmp_path / "rows.json"
    rc = main(["compare", str(SCENARIO), str(vf), "--probes", "0", "--no-progress", "--json", str(out_json)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "tile_n 128" in text
    assert "bottleneck" in text
    assert '"delta_pct"' in out_json.read_text()


def test_cli_compare_bad_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    vf = tmp_path / "v.yaml"
    vf.write_text("base: {}\nbad: [1, 2]\n")
    assert main(["compare", str(SCENARIO), str(vf), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "bad = [1, 2]" in err
    assert main(["compare", str(SCENARIO), str(tmp_path / "none.yaml")]) == 2
    assert "no such variants file" in capsys.readouterr().err
    # a typo in a path is an input error of the file, found before anything runs
    vf.write_text("base: {}\nx: {kernel.tile_nn: 1}\n")
    assert main(["compare", str(SCENARIO), str(vf), "--no-progress", "--probes", "0"]) == 2
    err = capsys.readouterr().err
    assert "v.yaml.x: unknown field 'kernel.tile_nn'" in err
    assert "did you mean 'tile_n'" in err


def test_exact_column_brackets_the_greedy() -> None:
    """CP-SAT hinted with the greedy: lower bound <= best <= greedy (same graph, to the tail)."""
    small = mm.Scenario(
        workload=mm.Workload(tokens=16, topk=2, world=2, local_experts=2),
        h=512,
        hidden_dim=1024,
        profile="megamoe-a8w8",
    )
    rows = compare_variants(
        small,
        {"base": {}, "late": {"options.late_bind_pools": ["AIC"], "options.links": [{"producer": "gmm1", "consumer": "activation", "location": "gm", "depth": 0, "colocated_by_hardware": False}]}},
        exact=True,
        exact_time_limit_s=3.0,
        probes=0,
    )
    for r in rows:
        x = r.exact
        assert x is not None
        assert x.best_us is not None
        assert x.lower_bound_us <= x.best_us + 1e-6 <= x.greedy_span_us + 2e-6
    d = rows[1].exact_delta_us
    assert d is not None
    assert d[0] <= d[1] + 1e-9
    assert "CP-SAT best / bound" in format_design_space(rows)
