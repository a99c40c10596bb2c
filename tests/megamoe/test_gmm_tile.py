"""A GMM tile's time is its K-step load / compute pipeline (the K step is a tiling knob, not an
L1 check only).

Every expectation below is derived by hand from the tile geometry and the constants of the
scenario, never read back from a simulation: the seed-002 shape at M = 2048 (K = h = 7168 for
GMM1, tile 128 x 256, int8), with bandwidth contention off so that no HBM sharing stretches a tile.
"""

from __future__ import annotations

import pytest

import moeopt as m
from moeopt.core.events import Event

SHAPE = "examples/seed002_typical.toml"
BASE = {"workload.tokens": 2048, "options.bandwidth_contention": False}
K = 7168  # GMM1's K = h
ROWS, COLS = 128, 256  # the first tile of expert 0 is a full 128 x 256 tile


def first_gmm1_tile(over: dict[str, object]) -> tuple[Event, dict[str, float]]:
    s = m.load_scenario(SHAPE, {**BASE, **over})
    r = m.simulate(s, check_bounds=False)
    g = r["rank_results"][0]["graph"]
    tile = g.events["g1.e0.m0.n0.mm"]
    consts = {name: c.value for name, c in s.config.constants.items()}
    return tile, consts


def a_b_bytes(bpe: int, scale: int) -> tuple[float, float]:
    # A: rows x K activation bytes; B: cols x K weight bytes plus the per-channel scale (8 B per
    # column with w8a8, none with bf16)
    return ROWS * K * bpe, COLS * K * bpe + COLS * scale


def test_tile_time_is_k_steps_of_the_slower_of_load_and_compute() -> None:
    tile, c = first_gmm1_tile({})
    a, b = a_b_bytes(1, 8)
    load = (a + b) / c["gm_l1_bytes_per_us"]  # 2754560 B at the fitted rate: 20.93 µs
    compute = ROWS * COLS * K / c["cube_mac_per_us_int8"]  # 15.93 µs at the spec peak
    steps = K // 512  # 14 K steps of 512
    assert tile.labels["load_us"] == pytest.approx(load)
    assert tile.labels["compute_us"] == pytest.approx(compute)
    # two L1 stages: step i + 1 loads while step i computes, so n_k x max(L/n_k, C/n_k)
    assert tile.duration_us == pytest.approx(steps * max(load / steps, compute / steps))
    # the pipeline fill (one step of the faster phase) sits on the tile's data edge, after the flag
    (lam,) = tile.deps.values()
    assert lam == pytest.approx(c["flag_latency_us"] + min(load, compute) / steps)


def test_one_l1_stage_serialises_load_and_compute() -> None:
    tile, c = first_gmm1_tile({"kernel.l1_stages": 1})
    a, b = a_b_bytes(1, 8)
    load = (a + b) / c["gm_l1_bytes_per_us"]
    compute = ROWS * COLS * K / c["cube_mac_per_us_int8"]
    assert tile.duration_us == pytest.approx(load + compute)
    (lam,) = tile.deps.values()
    assert lam == pytest.approx(c["flag_latency_us"])  # no overlap, so no fill


def test_a_k_step_off_the_512_byte_boundary_loads_the_activation_rows_more_slowly() -> None:
    aligned, c = first_gmm1_tile({"kernel.tile_k": 512})
    half, _ = first_gmm1_tile({"kernel.tile_k": 256})
    a, b = a_b_bytes(1, 8)
    eff = c["gm_unaligned_load_efficiency"]
    assert eff < 1.0
    # int8 rows in steps of 256 B: A at the unaligned efficiency, B (layout unknown) unpenalised
    assert half.labels["load_us"] == pytest.approx((a / eff + b) / c["gm_l1_bytes_per_us"])
    assert half.labels["load_us"] > aligned.labels["load_us"]
    steps = K // 256  # 28 steps
    step_l, step_c = half.labels["load_us"] / steps, half.labels["compute_us"] / steps
    assert half.duration_us == pytest.approx(steps * max(step_l, step_c))
    (lam,) = half.deps.values()
    assert lam == pytest.approx(c["flag_latency_us"] + min(step_l, step_c))


def test_bf16_rows_of_256_elements_are_512_bytes_so_no_penalty() -> None:
    tile, c = first_gmm1_tile({"kernel.quant": "bf16", "kernel.tile_k": 256})
    a, b = a_b_bytes(2, 0)
    assert tile.labels["load_us"] == pytest.approx((a + b) / c["gm_l1_bytes_per_us"])


def test_the_k_step_moves_the_kernel_time() -> None:
    # the knob is read: the same shape at three K steps gives three different times
    s = m.load_scenario(SHAPE, {"workload.tokens": 2048})
    times = {k: m.simulate(s.with_overrides({"kernel.tile_k": k}))["kernel_total_us"] for k in (512, 256, 128)}
    assert len({round(t, 6) for t in times.values()}) == 3
