"""Scenario layer: validation messages a user relies on (SPEC §9)."""

from __future__ import annotations

import os
import re

import pytest

import moeopt.megamoe as mm
from moeopt.megamoe.scenario import effective_table, scenario_from_dict

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "scenario_basic.toml")


def write(tmp_path, text: str) -> str:
    p = tmp_path / "s.toml"
    p.write_text(text)
    return str(p)


BASE = """
profile = "megamoe-a8w8"
h = 5120
hidden_dim = 9216
[workload]
tokens = 72
topk = 6
world = 8
local_experts = 3
"""


def test_example_loads_with_the_seed_values():
    s = mm.load_scenario(EXAMPLE)
    assert (s.h, s.hidden_dim, s.workload.local_experts, s.config.tile_m) == (6144, 4096, 64, 256)
    assert s.config.dispatch_lookahead == 2


def test_unknown_key_suggests_the_closest(tmp_path):
    with pytest.raises(mm.ScenarioError, match=r"unknown field 'kernel.tile_nn'.*did you mean 'tile_n'"):
        mm.load_scenario(write(tmp_path, BASE + "[kernel]\ntile_nn = 128\n"))


def test_intermediate_size_key_explains_the_h_hidden_dim_trap(tmp_path):
    with pytest.raises(
        mm.ScenarioError,
        match=r"hidden_dim = 2 x intermediate size.*h5120_i4608 is h = 5120, hidden_dim = 9216",
    ):
        mm.load_scenario(write(tmp_path, BASE + "intermediate_size = 4608\n"))


def test_odd_hidden_dim_is_rejected_with_the_trap_explained():
    with pytest.raises(mm.ScenarioError, match=r"hidden_dim = 4607: must be even.*gate \+ up"):
        mm.Scenario(
            workload=mm.Workload(tokens=8, topk=2, world=2, local_experts=2),
            h=5120,
            hidden_dim=4607,
            profile="megamoe-a8w8",
        )


def test_wrong_type_names_field_value_and_allowed(tmp_path):
    with pytest.raises(
        mm.ScenarioError, match=r"kernel.tile_n = 100: must be a multiple of 16 in \[16, 4096\]"
    ):
        mm.load_scenario(write(tmp_path, BASE + "[kernel]\ntile_n = 100\n"))
    with pytest.raises(mm.ScenarioError, match=r"workload.routing = 'zipff'.*did you mean 'zipf'.*allowed:"):
        mm.load_scenario(EXAMPLE, {"workload.routing": "zipff"})


def test_override_unknown_path_and_nothing_half_applied():
    s = mm.load_scenario(EXAMPLE)
    with pytest.raises(mm.ScenarioError, match=r"unknown field 'kernel.tile_nn'.*did you mean 'tile_n'"):
        s.with_overrides({"kernel.tile_m": 128, "kernel.tile_nn": 128})
    with pytest.raises(mm.ScenarioError, match=r"kernel.tile_n = 'x'"):
        s.with_overrides({"kernel.tile_m": 128, "kernel.tile_n": "x"})
    assert s.config.tile_m == 256  # the valid half of a failed override was not applied
    s2 = s.with_overrides({"kernel.tile_n": 128})
    assert (s2.config.tile_n, s.config.tile_n) == (128, 256)


def test_values_whose_effect_is_not_modelled_raise(bs72):
    with pytest.raises(mm.NotModelledError, match="quant = 'w4a8': not modelled"):
        bs72.with_overrides({"kernel.quant": "w4a8"})
    with pytest.raises(mm.NotModelledError, match="bounded GM workspace is not modelled"):
        bs72.with_overrides({"options.links": [{"producer": "activation", "consumer": "gmm2", "depth": 2}]})
    with pytest.raises(mm.NotModelledError, match=r"per_chunk.*not modelled on this edge"):
        bs72.with_overrides(
            {
                "options.links": [
                    {"producer": "gmm2", "consumer": "combine", "readiness": "per_chunk", "chunks": 2}
                ]
            }
        )
    with pytest.raises(mm.NotModelledError, match=r"event_granularity\.gmm1 = 2"):
        bs72.with_overrides({"options.event_granularity": {"gmm1": 2}})


def test_missing_constants_are_named_not_zeroed():
    with pytest.raises(mm.ScenarioError, match=r"without a profile there is no value for gm_l1_bytes_per_us"):
        mm.Scenario(
            workload=mm.Workload(tokens=8, topk=2, world=2, local_experts=2), h=512, hidden_dim=512, aic_num=4
        )


@pytest.mark.parametrize("profile", ["pto-a2a3", "pto-a2a3-v1"])
def test_urma_transport_is_refused_on_the_peer_write_kernel(profile: str) -> None:
    """The PTO kernel moves tokens by peer writes only: ``topo_urma = true`` is refused with the
    field, the value and what is allowed, even when [calibration] supplies every URMA rate (which
    would otherwise build the other kernel's GET/PUT transport and call it the PTO kernel's time)."""
    rates = {"urma_get_bytes_per_us": 2250.0, "urma_put_bytes_per_us": 2250.0, "urma_op_us": 1.0}
    for calibration in ({}, rates):
        with pytest.raises(
            mm.ScenarioError,
            match=rf"kernel.topo_urma = true: not allowed with profile '{profile}'.*allowed: false",
        ):
            mm.Scenario(
                workload=mm.Workload(tokens=8, topk=2, world=2, local_experts=2),
                h=512,
                hidden_dim=512,
                profile=profile,
                kernel=mm.Kernel(topo_urma=True),
                calibration=calibration,
            )


def test_tiles_that_do_not_fit_l1_are_rejected(bs72):
    # (512 + 512) x 512 x 1 B x 2 stages = 1 MiB > 512 KiB L1
    with pytest.raises(mm.ScenarioError, match="do not fit L1"):
        bs72.with_overrides({"kernel.tile_m": 512, "kernel.tile_n": 512})


def test_staged_barriers_with_onchip_link_is_refused_not_deadlocked(bs72):
    with pytest.raises(mm.ScenarioError, match="deadlock"):
        bs72.with_overrides({"options.barriers": "staged"})


def test_parse_override_value():
    assert mm.parse_override_value("128") == 128
    assert mm.parse_override_value("true") is True
    assert mm.parse_override_value("per_expert") == "per_expert"


def test_dispatch_lag_not_below_lookahead_is_rejected_not_a_cycle() -> None:
    # GMM1 of wave w waits for dispatch of wave w + lag; dispatch of wave w + lag waits for GMM1
    # of wave w + lag - lookahead. With lag >= lookahead > 0 that closes a cycle: the scenario
    # must be refused with the two fields named, before any graph is built.
    import moeopt as m

    s = m.Scenario(
        workload=m.Workload(tokens=72, topk=6, world=8, local_experts=3),
        h=5120, hidden_dim=9216, aic_num=28, profile="megamoe-a8w8",
    )
    with pytest.raises(m.MoeoptError, match=r"policy.dispatch_lag = 1 with policy.dispatch_lookahead = 1"):
        m.simulate(s.with_overrides({"policy.dispatch_lookahead": 1, "policy.dispatch_lag": 1}))
    ok = m.simulate(s.with_overrides({"policy.dispatch_lookahead": 2, "policy.dispatch_lag": 1}))
    assert ok["kernel_total_us"] > 0


def test_integer_ranges_print_as_integers() -> None:
    import moeopt as m

    with pytest.raises(m.MoeoptError, match=r"allowed: integers in \[1, 1048576\]"):
        m.Workload(tokens=0, topk=6, world=8, local_experts=3)


def test_a_list_where_a_name_is_expected_is_a_clear_error(bs72):
    # found by the knob audit: a list reached a dict lookup and raised "unhashable type"
    with pytest.raises(mm.ScenarioError, match=r"kernel.quant = \[1\]: not allowed; allowed: 'w8a8', 'bf16'"):
        bs72.with_overrides({"kernel.quant": [1]})


def test_rates_must_be_positive_latencies_may_be_zero(bs72):
    # a zero rate used to pass (its name ends in "_us", like a latency's) and divided by zero later
    with pytest.raises(mm.ScenarioError, match=r"calibration.gm_l1_bytes_per_us = 0: out of range; allowed: > 0"):
        bs72.with_overrides({"calibration.gm_l1_bytes_per_us": 0})
    assert bs72.with_overrides({"calibration.flag_latency_us": 0}).config.c("flag_latency_us") == 0


def test_core_group_join_is_refused_where_the_builders_ignore_it(bs72):
    # the builders let only a GMM stage take over another group's cores: a vector stage's join, or
    # a join_from_expert without a join, would otherwise be accepted and change nothing
    with pytest.raises(mm.NotModelledError, match=r"options.core_groups.combine.join = 'dispatch'"):
        bs72.with_overrides({"options.core_groups.combine.join": "dispatch"})
    with pytest.raises(mm.ScenarioError, match=r"join_from_expert = 3: has no effect without"):
        bs72.with_overrides({"options.core_groups.gmm1.join_from_expert": 3})


def test_effective_table_layers_scenario_over_profile_over_global_defaults(tmp_path):
    # the megamoe-a8w8 profile sets tile_m 256 (global default 128) and puts gmm1->activation
    # on-chip with depth 1; the scenario sets tile_n 128 and that link's depth 2; tile_k 512 and
    # the link's readiness 'whole' come from the global defaults
    s = mm.load_scenario(
        write(
            tmp_path,
            BASE
            + "[kernel]\ntile_n = 128\n"
            + '[[options.links]]\nproducer = "gmm1"\nconsumer = "activation"\ndepth = 2\n',
        )
    )
    table = effective_table(s)
    assert (table["kernel"]["tile_m"], table["kernel"]["tile_n"], table["kernel"]["tile_k"]) == (256, 128, 512)
    act = next(lk for lk in table["options"]["links"] if lk["consumer"] == "activation")
    assert (act["location"], act["depth"], act["readiness"]) == ("onchip", 2, "whole")
    assert (table["aic_num"], table["p1_override"]) == (28, 0)  # the profile's die; no override
    # the resolved configuration is read from the same table
    assert (s.config.tile_m, s.config.link("gmm1", "activation").depth) == (256, 2)


BS72 = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "scenario_bs72.toml")
SEED002 = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "seed002_typical.toml")


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"workload.seed": 3}, "workload.seed"),
        ({"workload.routing": "cyclic", "workload.seed": 0}, "workload.seed"),
        ({"workload.zipf_skew": 1.5}, "workload.zipf_skew"),
        ({"workload.routing": "random", "workload.zipf_skew": 1.5}, "workload.zipf_skew"),
    ],
)
def test_a_routing_knob_the_routing_does_not_read_is_refused(over, field):
    """Item 1 (no silently ignored knob): uniform / cyclic routing reads no seed and only zipf
    reads a skew, so writing them is refused with the field, the value and what is allowed
    (before, any value was accepted and the time never moved)."""
    with pytest.raises(
        mm.NotModelledError, match=rf"{field} = .*: not read with workload.routing = .*allowed:"
    ):
        mm.load_scenario(BS72, over)


def test_the_sampled_routings_read_their_seed_and_skew():
    """Item 1: where the knobs are read they are accepted and change the routing."""
    from moeopt.megamoe.routing import counts_matrix

    def counts(over):
        return counts_matrix(mm.load_scenario(BS72, over).workload).tolist()

    zipf = {"workload.routing": "zipf"}
    assert counts({**zipf, "workload.seed": 1}) != counts({**zipf, "workload.seed": 2})
    assert counts({**zipf, "workload.zipf_skew": 0.5}) != counts({**zipf, "workload.zipf_skew": 3.0})
    # left out = the documented defaults (seed 0, skew 1.2)
    assert counts(zipf) == counts({**zipf, "workload.seed": 0, "workload.zipf_skew": 1.2})
    assert counts({"workload.routing": "random"}) == counts(
        {"workload.routing": "random", "workload.seed": 0}
    )


def test_combine_threshold_is_refused_unless_the_combine_path_is_chosen_by_it():
    """Item 1: ``kernel.combine_small_max_routes`` only picks the small / large combine path
    under ``options.combine_granularity = 'auto'``; written with another granularity it is
    refused. The pto-a2a3 profile's own default (4096) never trips the rule."""
    with pytest.raises(
        mm.NotModelledError,
        match=r"kernel.combine_small_max_routes = 100: not read with options.combine_granularity = 'per_tile'",
    ):
        mm.load_scenario(BS72, {"kernel.combine_small_max_routes": 100})
    # the profile sets the threshold and 'auto'; a user changing only the granularity is fine
    s = mm.load_scenario(SEED002, {"options.combine_granularity": "per_expert"})
    assert s.config.combine_small_max_routes == 4096
    # and under 'auto' the user's threshold is read
    assert (
        mm.load_scenario(SEED002, {"kernel.combine_small_max_routes": 100}).config.combine_small_max_routes
        == 100
    )
    assert mm.load_scenario(
        BS72, {"options.combine_granularity": "auto", "kernel.combine_small_max_routes": 1}
    )


GM_ACTIVATION = {
    "options.links": [
        {"producer": "gmm1", "consumer": "activation", "location": "gm", "depth": 0, "colocated_by_hardware": False}
    ]
}


@pytest.mark.parametrize(
    ("over", "field", "shown"),
    [
        ({"options.swiglu_active": 2}, "options.swiglu_active", "2"),
        ({"options.swiglu_active": "kernel_rule"}, "options.swiglu_active", "'kernel_rule'"),
        ({"options.core_groups.activation.cores": "0-3,8"}, "options.core_groups.activation.cores", "'0-3,8'"),
    ],
)
def test_activation_placement_knobs_are_refused_with_an_onchip_hand_off(over, field, shown):
    """With GMM1's output handed to the activation on-chip (bs = 72's profile), each tile's
    activation runs on that tile's own core: the activation group's cores and the number of
    active SwiGLU cores are not read (pinned: the knob audit saw no change on any shape;
    late-bound, a group without some GMM1 core made an invalid graph). Refused with the field,
    the value and what is allowed; read with a GM hand-off."""
    with pytest.raises(
        mm.NotModelledError,
        match=rf"{re.escape(field)} = {re.escape(shown)}: not read with gmm1->activation on-chip.*"
        r"allowed: leave it out, or options.links gmm1->activation location = 'gm'",
    ):
        mm.load_scenario(BS72, over)
    with pytest.raises(mm.NotModelledError, match=re.escape(field)):
        mm.load_scenario(BS72, {**over, "options.late_bind_pools": ["AIV"]})
    s = mm.load_scenario(BS72, {**GM_ACTIVATION, **over})
    if field == "options.swiglu_active":
        # 'kernel_rule' at M = 72 (not in the kernel's table) is 16 of the 28 AIV0 of the group
        assert s.config.swiglu_active == (2 if over[field] == 2 else 16)
    else:
        assert s.config.core_groups["activation"].cores == (0, 1, 2, 3, 8)


def test_the_activation_role_stays_read_with_an_onchip_hand_off():
    """The role picks the sub-core of the tile's core, so it is still accepted on-chip."""
    s = mm.load_scenario(BS72, {"options.core_groups.activation.role": "AIV1"})
    assert s.config.core_groups["activation"].role == "AIV1"


def test_staged_barriers_refuse_a_dispatch_look_ahead():
    """Staged barriers make every GMM1 event wait for every dispatch event; a look-ahead makes
    dispatch of wave w wait for GMM1 of wave w - L: a cycle. Before, the scenario was accepted
    and the build failed with an invalid event graph (the knob audit's staged probe shape was
    silently lost on examples/scenario_basic.toml, which sets dispatch_lookahead = 2)."""
    staged = {"options.barriers": "staged", **GM_ACTIVATION}
    with pytest.raises(
        mm.ScenarioError,
        match=r"policy.dispatch_lookahead = 2 with options.barriers = 'staged'.*cycle.*allowed: "
        r"dispatch_lookahead = 0",
    ):
        mm.load_scenario(BS72, {**staged, "policy.dispatch_lookahead": 2})
    assert mm.simulate(mm.load_scenario(BS72, staged))["kernel_total_us"] > 0


def test_onchip_gmm2_combine_link_needs_the_per_tile_combine():
    # only the per-tile combine gives a GMM2 tile's on-chip slot back: with V1's by-source
    # combine (pto-a2a3-v1's default) the tiles took slots never returned, and a scenario with
    # more tiles per core than slots deadlocked in the scheduler instead of being refused here
    link = {"producer": "gmm2", "consumer": "combine", "location": "onchip", "colocated_by_hardware": True, "depth": 2}
    base = {
        "h": 1024,
        "hidden_dim": 1024,
        "workload": {"tokens": 16, "topk": 8, "world": 2, "local_experts": 16, "routing": "zipf"},
        "options": {"links": [link]},
    }
    with pytest.raises(mm.NotModelledError, match=r"gmm2->combine\] on-chip with options.combine_granularity = 'by_source'"):
        scenario_from_dict({**base, "profile": "pto-a2a3-v1"})
    # 'auto' resolves to per-expert past kernel.combine_small_max_routes: 16 x 8 = 128 routes > 64
    auto = {**base, "profile": "pto-a2a3", "kernel": {"combine_small_max_routes": 64}}
    auto["options"] = {**base["options"], "combine_granularity": "auto"}
    with pytest.raises(mm.NotModelledError, match=r"'per_expert' \('auto' picks it: tokens x topk = 128 > "):
        scenario_from_dict(auto)
    # the per-tile combine consumes the slots: accepted, and it runs
    tile = {**base, "profile": "pto-a2a3-v1", "options": {**base["options"], "combine_granularity": "per_tile"}}
    assert mm.simulate(scenario_from_dict(tile))["kernel_total_us"] > 0
