"""A table given as an override merges key by key, as the dotted form does (never replaces the table)."""

from __future__ import annotations

from pathlib import Path

import pytest

import moeopt as m
from moeopt.cli import main

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "scenario_basic.toml")


def test_a_table_override_keeps_the_keys_it_does_not_name():
    # the file sets [policy] dispatch_lookahead = 2; the override names only the scheduling rule
    s = m.load_scenario(EXAMPLE, overrides={"policy": {"scheduling": "critical_path_first"}})
    dotted = m.load_scenario(EXAMPLE, overrides={"policy.scheduling": "critical_path_first"})
    assert s.to_dict()["policy"] == dotted.to_dict()["policy"]
    assert s.to_dict()["policy"]["dispatch_lookahead"] == 2
    assert s.to_dict()["policy"]["scheduling"] == "critical_path_first"
    # and it is the same scenario, so the same time
    assert m.simulate(s)["kernel_total_us"] == m.simulate(dotted)["kernel_total_us"]


def test_nested_tables_merge_at_every_level():
    base = m.load_scenario(EXAMPLE)
    s = base.with_overrides({"options": {"event_granularity": {"dispatch": 2}}})
    s = s.with_overrides({"options": {"combine_granularity": "per_expert", "event_granularity": {"combine": 2}}})
    opts = s.to_dict()["options"]
    assert opts["event_granularity"] == {"dispatch": 2, "combine": 2}
    assert opts["combine_granularity"] == "per_expert"
    # the kernel table of the file keeps tile_n when only tile_m is given as a table
    k = base.with_overrides({"kernel": {"tile_m": 128}}).to_dict()["kernel"]
    assert (k["tile_m"], k["tile_n"], k["topo_urma"]) == (128, 256, False)


def test_an_unknown_key_inside_a_table_override_is_named():
    with pytest.raises(m.ScenarioError, match=r"unknown field 'policy.dispatch_lookahed'.*dispatch_lookahead"):
        m.load_scenario(EXAMPLE, overrides={"policy": {"dispatch_lookahed": 1}})


def test_set_with_an_inline_table_merges(capsys):
    assert main(["simulate", EXAMPLE, "--set", "policy={scheduling = 'critical_path_first'}", "--json"]) == 0
    merged = capsys.readouterr().out
    assert main(["simulate", EXAMPLE, "--set", "policy.scheduling=critical_path_first", "--json"]) == 0
    dotted = capsys.readouterr().out
    assert merged == dotted
