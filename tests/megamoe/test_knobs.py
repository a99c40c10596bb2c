"""The knob catalogue: one entry per scenario path, derived from the schema, usable with --set."""

from __future__ import annotations

import dataclasses

import pytest

import moeopt.megamoe as mm
from moeopt.megamoe import knobs
from moeopt.megamoe import scenario as sc
from moeopt.megamoe.config.profiles import CONSTANTS


def test_every_section_field_and_constant_is_a_knob() -> None:
    paths = {k.path for k in knobs.knob_catalogue()}
    for section, cls in sc.SECTIONS.items():
        for f in dataclasses.fields(cls):
            assert f"{section}.{f.name}" in paths
    for name in CONSTANTS:
        assert f"calibration.{name}" in paths
    for top in ("profile", "h", "hidden_dim", "aic_num", "p1_override", "p2_override"):
        assert top in paths
    # sections are tables, not knobs
    assert not paths & {"workload", "kernel", "policy", "options", "calibration"}
    assert len(paths) == len(knobs.knob_catalogue())  # no duplicates


def test_docs_cover_the_schema_exactly() -> None:
    """A knob without a meaning, or a meaning left behind by a removed knob, fails here."""
    cat = knobs.knob_catalogue()
    assert all(k.doc for k in cat), [k.path for k in cat if not k.doc]
    used = set()
    for k in cat:
        if k.is_constant:
            continue
        parts = k.path.split(".")
        star = ".".join(
            "*" if i == 2 and parts[1] in ("event_granularity", "roles", "core_groups") else x
            for i, x in enumerate(parts)
        )
        used.add(k.path if k.path in knobs.KNOB_DOCS else star)
    assert used == set(knobs.KNOB_DOCS)


def test_every_path_is_accepted_by_overrides(bs72: mm.Scenario) -> None:
    """Each catalogue path is one --set can address: setting the knob's default is not an unknown path."""
    for k in knobs.knob_catalogue():
        try:
            bs72.with_overrides({k.path: k.default if k.default is not None else 1})
        except mm.ScenarioError as exc:
            assert "unknown field" not in str(exc), k.path


def test_allowed_text_is_the_validators() -> None:
    by = {k.path: k for k in knobs.knob_catalogue()}
    # kernel.py: check_int("kernel.tile_n", v, 16, 4096, multiple=16)
    assert by["kernel.tile_n"].allowed == "a multiple of 16 in [16, 4096]"
    assert by["kernel.tile_n"].type == "int"
    assert by["kernel.tile_n"].default == 256  # GLOBAL_DEFAULTS
    assert by["kernel.tile_n"].profile_defaults["megamoe-a8w8"] == 256
    assert by["options.combine_granularity"].allowed == "one of 'per_tile', 'per_expert', 'by_source', 'auto'"
    assert by["options.late_bind_pools"].allowed.startswith("each one of 'AIC'")
    assert by["kernel.topo_urma"].type == "bool"
    # topk's upper bound is world x local_experts: the catalogue says it moves
    assert "depends on other fields" in by["workload.topk"].allowed
    # a measured rate names its unit and its per-profile value
    gm = by["calibration.gm_l1_bytes_per_us"]
    assert gm.unit == "B/µs per AIC"
    assert gm.profile_defaults["megamoe-a8w8"] == pytest.approx(51.9e3)
    assert gm.default is None  # no profile: it must be set


def test_scheduling_choices_follow_the_registry() -> None:
    from moeopt import registry

    allowed = knobs.knob("policy.scheduling").allowed
    for name in registry.names("policy"):
        assert repr(name) in allowed


def test_unknown_path_suggests() -> None:
    with pytest.raises(mm.ScenarioError, match="did you mean 'kernel.tile_n'"):
        knobs.knob("kernel.tile_nn")
