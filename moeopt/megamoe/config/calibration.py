"""The one calibration domain of ``pto-a2a3`` and the closed-form fits of its constants.

The measurements are the table of ``../shared/hardware.md`` §1 (PTO MegaMoE baseline on one
Atlas A3 die per rank, 16 ranks, M = 2048, h = 7168, hidden_dim = 4096, topK 8, 16 local
experts, int8, uniform routing). Each fit is a one-line formula over those numbers, so a reader
can redo it by hand; :func:`fit_pto_a2a3` returns every fitted constant with its derivation and
``examples/calibrate_pto_a2a3.py`` prints them. The model then uses these constants unchanged
for every other shape.
"""

from __future__ import annotations

from dataclasses import dataclass

from moeopt.megamoe.config.provenance import CalibrationDomain

PTO_A2A3_DOMAIN = CalibrationDomain(
    id="pto-a2a3/A3/ep16/m2048",
    implementation="pto-a2a3.baseline",
    compile_point={"tile_m": 128, "tile_n": 256, "tile_k": 512, "quant": "w8a8", "topo_urma": False},
    shape={"tokens": 2048, "h": 7168, "hidden_dim": 4096, "topk": 8, "local_experts": 16},
    topology={"world": 16, "aic_num": 24},
    note="hardware.md §1: stage timeline 2048_16rank_overlap_pipeline.svg and avl_l1_tile.png",
)

# Measured quantities (hardware.md §1), with the source line each comes from.
M = 2048
H = 7168
HIDDEN_DIM = 4096
TOPK = 8
LOCAL_EXPERTS = 16
ROWS_PER_EXPERT = M * TOPK // LOCAL_EXPERTS  # uniform round-robin routing: M/2 = 1024
AIV = 48

GMM1_TILE_US = 20.93  # [F][M] avl_l1_tile.png, 128x256 output tile, K 7168
GMM2_TILE_US = 10.1  # [M][D] timeline 2140 -> 3655 µs
DISPATCH_EXPERT_US = 62.6  # [M][D] per local expert, 1024 rows x 7200 B
COMBINE_EXPERT_US = (109.0, 115.0)  # [M][D] per local expert, 1024 rows x 7168 x 2 B
SWIGLU_STAGE_US = 376.0  # [M][D] 16384 rows on 48 AIV, two segments
FRONT_US = 260.0  # [M] 0 -> 260 µs, MultiCore path
UNPERMUTE_US = 416.0  # [M] reads 16384 x 7168 x 2 B, writes 2048 x 7168 x 2 B


@dataclass(frozen=True)
class Fit:
    name: str
    value: float
    unit: str
    derivation: str


def fit_pto_a2a3() -> list[Fit]:
    """Every ``measured:`` constant of ``pto-a2a3``, fitted in closed form at the one domain."""
    fits: list[Fit] = []
    # GMM tile: at cube peak (8192 int8 MAC/cycle x 1.8 GHz) the 128x256x7168 tile computes in
    # 15.93 µs < 20.93 µs measured, so the tile is load-bound: rate = bytes moved GM->L1 / time.
    tile_bytes = 128 * H + 256 * H + 256 * 8  # A int8 + B int8 + per-channel uint64 scale
    fits.append(
        Fit(
            "gm_l1_bytes_per_us",
            tile_bytes / GMM1_TILE_US,
            "B/µs per AIC",
            f"GMM1 tile (128x{H} + 256x{H} + 256x8 B = {tile_bytes} B) / {GMM1_TILE_US} µs; "
            "compute at spec peak is 15.93 µs, so the tile is load-bound",
        )
    )
    disp_bytes = ROWS_PER_EXPERT * (H + 32)
    fits.append(
        Fit(
            "remote_in_bytes_per_us",
            disp_bytes / DISPATCH_EXPERT_US,
            "B/µs per rank",
            f"dispatch of one local expert: {ROWS_PER_EXPERT} rows x {H + 32} B / {DISPATCH_EXPERT_US} µs",
        )
    )
    comb_bytes = ROWS_PER_EXPERT * H * 2
    comb_us = sum(COMBINE_EXPERT_US) / 2
    fits.append(
        Fit(
            "remote_out_bytes_per_us",
            comb_bytes / comb_us,
            "B/µs per rank",
            f"combine of one local expert: {ROWS_PER_EXPERT} rows x {H} x 2 B / {comb_us} µs "
            f"(midpoint of {COMBINE_EXPERT_US[0]}-{COMBINE_EXPERT_US[1]} µs)",
        )
    )
    rows = M * TOPK
    fits.append(
        Fit(
            "act_bytes_per_us",
            rows * HIDDEN_DIM * 2 / SWIGLU_STAGE_US / AIV,
            "B/µs per AIV",
            f"SwiGLU stage: {rows} rows x {HIDDEN_DIM} x 2 B of GMM1 output / {SWIGLU_STAGE_US} µs / {AIV} "
            f"AIV",
        )
    )
    unperm_bytes = rows * H * 2 + M * H * 2
    agg = unperm_bytes / UNPERMUTE_US
    fits.append(
        Fit(
            "aiv_aggregate_local_bytes_per_us",
            agg,
            "B/µs per rank (all AIV)",
            f"unpermute: ({rows} x {H} x 2 + {M} x {H} x 2) B / {UNPERMUTE_US} µs",
        )
    )
    fits.append(
        Fit(
            "aiv_local_bytes_per_us",
            agg / AIV,
            "B/µs per AIV",
            f"unpermute aggregate / {AIV} AIV (measured with all AIV active: contention is inside it)",
        )
    )
    front_bytes = M * H * 2 + rows * (H + 32)
    sort_us = FRONT_US - front_bytes / agg
    fits.append(
        Fit(
            "front_sort_us_per_route",
            sort_us / rows,
            "µs per route",
            f"front reorder {FRONT_US} µs minus its byte time ({front_bytes} B at the unpermute aggregate "
            f"rate = {front_bytes / agg:.2f} µs) = {sort_us:.2f} µs over {rows} routes",
        )
    )
    return fits


def gmm2_tile_check(gm_l1_bytes_per_us: float, cube_mac_per_us: float) -> tuple[float, float]:
    """(predicted, measured) GMM2 tile time: the one cross-check the domain offers.

    GMM2 ran while combine wrote back over the same HBM, so a gap here is expected; it is
    reported, not fitted away.
    """
    k = HIDDEN_DIM // 2
    load = (128 * k + 256 * k + 256 * 8) / gm_l1_bytes_per_us
    compute = 128 * 256 * k / cube_mac_per_us
    return max(load, compute), GMM2_TILE_US
