"""The layered orchestration (options.orchestration = "layered"): the URMA kernel's macro waves.

Expectations are worked out by hand from the kernel's rules as the builder docstrings state them
(macro waves of whole experts, 256-row receive batches that span experts, PUT commits every 256
rows of a channel's wave plus a flush, AIV1 order recv(w+1) -> combine(w), cube order GMM1(w) ->
GMM2(w)); each derivation is in a comment.
"""

from __future__ import annotations

import pytest

import moeopt.megamoe as mm
from moeopt.megamoe.build.layered import put_commits, receive_batches
from moeopt.megamoe.build.plan import layered_ranges
from moeopt.megamoe.errors import NotModelledError, ScenarioError
from moeopt.megamoe.scenario import scenario_from_dict
from moeopt.megamoe.simulate import build_graphs


@pytest.mark.parametrize(
    ("experts", "tokens", "topk", "want"),
    [
        # 64 x 8 = 512 routes <= 1024: one wave of every expert
        (64, 64, 8, [(0, 64)]),
        # 3072 routes, 1024 rows per expert (between 256 and 2048), 3 <= 8 experts: 2 waves;
        # first = min(ceil(1024 / 1024), ceil(3 / 2)) = 1, then ceil((3 - 1) / 1) = 2
        (3, 512, 6, [(0, 1), (1, 3)]),
        # 4096 routes, 256 rows per expert (<= 256): 2 waves; first = min(ceil(1024 / 256),
        # ceil(16 / 2)) = 4, then ceil(12 / 1) = 12
        (16, 512, 8, [(0, 4), (4, 16)]),
        # 32768 routes, 4096 rows per expert (>= 2048): 4 waves; first = min(ceil(1024 / 4096),
        # ceil(8 / 4)) = 1, then ceil(7 / 3) = 3 each, the last what is left
        (8, 4096, 8, [(0, 1), (1, 4), (4, 7), (7, 8)]),
        # 16384 routes, ceil(16384 / 20) = 820 rows per expert, 20 > 8 experts: 6 waves;
        # first = min(ceil(1024 / 820), ceil(20 / 6)) = 2, then ceil(18 / 5) = 4 each
        (20, 2048, 8, [(0, 2), (2, 6), (6, 10), (10, 14), (14, 18), (18, 20)]),
        # one expert: one wave
        (1, 4096, 8, [(0, 1)]),
    ],
)
def test_macro_waves_follow_the_kernel_rule(experts, tokens, topk, want):
    assert layered_ranges(experts, tokens, topk) == want


def test_receive_batches_span_experts_and_flush_at_the_wave_end():
    # 212 + 44 = 256 closes the first batch inside the second segment; the rest (44 + 156 + 44)
    # is the flushed last batch
    segs = [(0, 1, 212), (0, 2, 88), (1, 0, 156), (1, 1, 44)]
    assert receive_batches(segs, 256) == [
        [(0, 1, 212), (0, 2, 44)],
        [(0, 2, 44), (1, 0, 156), (1, 1, 44)],
    ]


def test_put_commits_count_the_full_batches_each_segment_completes_and_the_flush():
    # running totals 212, 300 (crosses 256), 456, 500; 500 % 256 != 0: the last pays the flush;
    # ceil(500 / 256) = 2 commits in all
    assert put_commits([212, 88, 156, 44], 256) == [0, 1, 0, 1]
    # exactly two full batches: no flush
    assert put_commits([256, 256], 256) == [1, 1]
    assert put_commits([], 256) == []


def _two_rank(orchestration: str = "layered", **extra) -> mm.Scenario:
    # world 2, 2 local experts per rank; rank 0's experts get (300, 300) and (100, 200) rows from
    # sources (0, 1); 600 routes per rank <= 1024: one macro wave
    d = {
        "profile": "megamoe-a8w8",
        "h": 1024,
        "hidden_dim": 2048,
        "aic_num": 8,
        "workload": {
            "tokens": 300,
            "topk": 2,
            "world": 2,
            "local_experts": 2,
            "routing": "explicit",
            "counts": [[300, 100, 100, 100], [300, 200, 50, 50]],
        },
        "kernel": {"topo_urma": True},
        "options": {"orchestration": orchestration},
        **extra,
    }
    return scenario_from_dict(d, where="")


def test_receive_gets_are_256_row_batches_and_readiness_is_per_m_block():
    s = _two_rank()
    cfg = s.config
    rg = next(rg for rg, ranks in build_graphs(s).values() if 0 in ranks)
    g = rg.graph
    row_bytes = cfg.h + 32  # w8a8: int8 payload + fp32 scale + pad
    # source 1's rows on rank 0: expert 0 rows [300, 600) -> m-block 1: 212, m-block 2: 88;
    # expert 1 rows [100, 300) -> m-block 0: 156, m-block 1: 44 (tile_m 256): 500 rows, batches
    # of 256 and 244
    for b, rows in ((0, 256), (1, 244)):
        ev = g[f"get.w0.src1.b{b}"]
        assert ev.labels["rows"] == rows
        assert ev.resources == ("c1.AIV1",)  # channel of rank 1: core 1 % 8
        want = cfg.c("urma_op_us") + rows * row_bytes / cfg.c("urma_get_bytes_per_us")
        assert ev.duration_us == pytest.approx(want)
    assert "get.w0.src1.b2" not in g.events
    # source 0 (this rank) is copied per (expert, m-block): 256 + 44 of expert 0, 100 of expert 1
    copies = {n: g[n].labels["rows"] for n in g.events if n.startswith("copy.")}
    assert copies == {"copy.w0.e0.m0": 256, "copy.w0.e0.m1": 44, "copy.w0.e1.m0": 100}
    assert g["copy.w0.e0.m0"].duration_us == pytest.approx(256 * row_bytes / cfg.c("aiv_local_bytes_per_us"))
    # expert 0's m-block 2 (88 rows) is split over both batches; m-block 1 has local and remote rows
    assert set(g["d2c.e0.m2"].deps) == {"get.w0.src1.b0", "get.w0.src1.b1"}
    assert set(g["d2c.e0.m1"].deps) == {"copy.w0.e0.m1", "get.w0.src1.b0"}
    # a GMM1 tile waits for its own m-block's readiness, not the whole wave's (besides the tile
    # before it on its core, program order)
    chained = {b: a for a, b in rg.chain_edges}
    for name, ev in g.events.items():
        if ev.labels.get("stage") == "gmm1":
            e, mb = ev.labels["expert"], name.split(".")[2]
            assert set(ev.deps) - {chained.get(name)} == {f"d2c.e{e}.{mb}"}, name


def test_combine_puts_pay_the_commits_their_rows_complete():
    s = _two_rank()
    cfg = s.config
    rg = next(rg for rg, ranks in build_graphs(s).values() if 0 in ranks)
    g = rg.graph
    # destination 1's segments on rank 0 are the same pieces as its receive: 212, 88, 156, 44
    # rows -> commits 0, 1, 0, 1 (see put_commits); bf16 rows of h = 1024
    for name, rows, commits in (
        ("put.w0.e0.m1.dst1", 212, 0),
        ("put.w0.e0.m2.dst1", 88, 1),
        ("put.w0.e1.m0.dst1", 156, 0),
        ("put.w0.e1.m1.dst1", 44, 1),
    ):
        ev = g[name]
        assert (ev.labels["rows"], ev.labels["commits"]) == (rows, commits)
        want = commits * cfg.c("urma_op_us") + rows * cfg.h * 2 / cfg.c("urma_put_bytes_per_us")
        assert ev.duration_us == pytest.approx(want)
        assert set(ev.deps) >= {f"g2c.e{name.split('.')[2][1:]}.{name.split('.')[3]}"}


def _three_waves() -> mm.Scenario:
    # 3 local experts, 1024 x 6 = 6144 routes, 2048 rows per expert (>= 2048): 4 waves, at most 3
    # experts: 3 waves of one expert each
    d = {
        "profile": "megamoe-a8w8",
        "h": 1024,
        "hidden_dim": 2048,
        "aic_num": 8,
        "workload": {"tokens": 1024, "topk": 6, "world": 2, "local_experts": 3, "routing": "uniform"},
        "kernel": {"topo_urma": True},
        "options": {"orchestration": "layered"},
    }
    return scenario_from_dict(d, where="")


def test_program_order_interleaves_receive_combine_and_the_gmm_stages():
    r = mm.simulate(_three_waves())
    for rank, rr in r["rank_results"].items():
        assert rr["waves"] == {"gmm1": 3, "gmm2": 3}
        g = rr["graph"]
        by_res: dict[str, list[dict]] = {}
        for ev in rr["events"]:
            by_res.setdefault(ev["core"], []).append({**ev, "wave": g[ev["name"]].labels.get("wave")})
        aiv1_checked = aic_checked = 0
        for res, evs in by_res.items():
            evs.sort(key=lambda e: (e["start_us"], e["end_us"]))
            if res.endswith(".AIV1"):
                # the channel owner's program order R0, R1, C0, R2, C1, C2
                keys = [
                    2 * ev["wave"] - 1 if ev["stage"] == "dispatch" else 2 * ev["wave"] + 2
                    for ev in evs
                    if ev["stage"] in ("dispatch", "combine")
                ]
                if keys:
                    aiv1_checked += 1
                    assert keys == sorted(keys), (rank, res, keys)
                    assert 3 in keys
                    assert 2 in keys
            elif res.endswith(".AIC"):
                # GMM1(w) then GMM2(w), wave after wave
                keys = [2 * ev["wave"] + (ev["stage"] == "gmm2") for ev in evs]
                aic_checked += 1
                assert keys == sorted(keys), (rank, res, keys)
        assert aiv1_checked == 2
        assert aic_checked == 8


def test_layered_moves_the_time_against_the_wave_orchestration():
    layered = mm.simulate(_three_waves())["kernel_total_us"]
    waves = mm.simulate(_three_waves().with_overrides({"options.orchestration": "waves"}))["kernel_total_us"]
    assert layered != pytest.approx(waves, rel=1e-6)


def test_layered_is_refused_on_the_peer_write_path():
    with pytest.raises(ScenarioError) as ei:
        _three_waves().with_overrides({"kernel.topo_urma": False})
    msg = str(ei.value)
    assert "options.orchestration = 'layered'" in msg
    assert "kernel.topo_urma" in msg
    assert "allowed: 'waves'" in msg


def test_unknown_orchestration_names_the_choices():
    with pytest.raises(ScenarioError, match=r"options\.orchestration.*'waves'.*'layered'"):
        _three_waves().with_overrides({"options.orchestration": "mte"})


_GM_ACT = [
    {
        "producer": "gmm1",
        "consumer": "activation",
        "location": "gm",
        "depth": 0,
        "colocated_by_hardware": False,
    }
]


@pytest.mark.parametrize(
    ("overrides", "error", "field"),
    [
        ({"p1_override": 2}, NotModelledError, "p1_override = 2"),
        ({"p2_override": 1}, NotModelledError, "p2_override = 1"),
        ({"policy.dispatch_lookahead": 1}, NotModelledError, "policy.dispatch_lookahead = 1"),
        ({"policy.dispatch_lag": 1}, NotModelledError, "policy.dispatch_lag = 1"),
        ({"policy.wave_packing": "balanced_waves"}, NotModelledError, "policy.wave_packing"),
        (
            {"options.event_granularity.dispatch": 2},
            NotModelledError,
            "options.event_granularity.dispatch = 2",
        ),
        ({"options.event_granularity.combine": 2}, NotModelledError, "options.event_granularity.combine = 2"),
        ({"options.core_groups": "v1_fixed"}, ScenarioError, "options.core_groups.gmm2.join"),
        (
            {
                "options.core_groups.gmm1.cores": "0-5",
                "options.core_groups.gmm2.cores": "6-7",
                "options.gmm1_full_experts": 1,
            },
            ScenarioError,
            "options.gmm1_full_experts = 1",
        ),
        (
            {"options.barriers": "staged", "options.links": _GM_ACT},
            ScenarioError,
            "options.barriers = 'staged'",
        ),
        (
            {"options.links": _GM_ACT, "kernel.swiglu_segments": "single"},
            ScenarioError,
            "kernel.swiglu_segments = 'single'",
        ),
    ],
)
def test_layered_refuses_what_it_does_not_read_or_cannot_order(overrides, error, field):
    with pytest.raises(error) as ei:
        _three_waves().with_overrides(overrides)
    msg = str(ei.value)
    assert field in msg
    assert "options.orchestration = 'layered'" in msg
    assert "allowed" in msg
    assert "\n" not in msg


def test_every_layered_rank_receives_each_row_once():
    s = _two_rank()
    for rg, _ranks in build_graphs(s).values():
        got = sum(
            ev.labels["rows"] for ev in rg.graph.events.values() if ev.labels.get("stage") == "dispatch"
        )
        assert got == sum(ex.rows for ex in rg.experts if not ex.shared)
        put_rows = sum(
            ev.labels["rows"] for ev in rg.graph.events.values() if ev.labels.get("stage") == "combine"
        )
        assert put_rows == got


def test_shared_experts_are_computed_in_the_first_wave():
    s = _three_waves().with_overrides({"workload.shared_expert_num": 1})
    r = mm.simulate(s)
    g = r["rank_results"][0]["graph"]
    # the shared expert is index 3 (after the 3 local ones)
    shared = [ev for ev in g if ev.labels.get("stage") in ("gmm1", "gmm2") and ev.labels.get("shared")]
    assert shared
    assert {ev.labels["wave"] for ev in shared} == {0}
    assert {ev.labels["expert"] for ev in shared} == {3}


def test_the_layered_constants_are_listed_with_their_source():
    prov = mm.simulate(_three_waves())["provenance"]
    assert prov["layered_receive_batch_rows"]["value"] == 256
    assert prov["layered_receive_batch_rows"]["tag"] == "impl"
    assert "hardware.py@033f9f6:108-109" in prov["layered_receive_batch_rows"]["provenance"]
    assert prov["layered_put_batch_rows"]["tag"] == "assumed"
    assert {"layered_first_wave_rows", "layered_few_experts"} <= set(prov)
    waves = mm.simulate(_three_waves().with_overrides({"options.orchestration": "waves"}))["provenance"]
    assert not [n for n in waves if n.startswith("layered_")]
