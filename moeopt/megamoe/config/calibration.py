"""The calibration domains of ``pto-a2a3`` (the baseline kernel) and ``pto-a2a3-v1`` (its V1
version), and the closed-form fits of their constants.

The measurements are the table of ``../shared/hardware.md`` §1 (PTO MegaMoE baseline on one
Atlas A3 die per rank, 16 ranks, M = 2048, h = 7168, hidden_dim = 4096, topK 8, 16 local
experts, int8, uniform routing); V1's are its own timeline (§1b: 8 ranks, otherwise the same).
Each fit is a one-line formula over those numbers, so a reader can redo it by hand;
:func:`fit_pto_a2a3` and :func:`fit_pto_a2a3_v1` return every fitted constant with its
derivation and ``examples/calibrate_pto_a2a3.py`` prints them. A constant is fitted at the one
point that can measure it (the per-stream rates need V1's streams below the link's aggregate;
everything else is the baseline's) and then used unchanged for every shape and both versions.
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

PTO_A2A3_V1_DOMAIN = CalibrationDomain(
    id="pto-a2a3-v1/A3/ep8/m2048",
    implementation="pto-a2a3.v1",
    compile_point={"tile_m": 128, "tile_n": 256, "tile_k": 512, "quant": "w8a8", "topo_urma": False},
    shape={"tokens": 2048, "h": 7168, "hidden_dim": 4096, "topk": 8, "local_experts": 16},
    topology={"world": 8, "aic_num": 24},
    note="hardware.md §1b: V1 stage timeline v1_2048_overlap_pipeline.png (rank 0, one profiled run)",
)

HBM_COPY_DOMAIN = CalibrationDomain(
    id="hbm-copy/910B-class",
    implementation="any",
    compile_point={},
    shape={},
    topology={},
    note="hardware.md §1/§3: a 256 MiB HBM copy benchmark on one die (read + write counted)",
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
WORLD = 16
GMM2_E0_US = 57.0  # [M][F] timeline bar GMM2 E0 2140-2197: before combine starts (C0 at 2232)
GMM2_WITH_COMBINE_US = (3655.0 - 2197.0) / 15  # [M][F] bars E1..E15 2197-3655, beside combine
# impl: tasks = rankSize x kCombineLargeLanesPerRank = 16 x 2 (combine.h@2d9d4288 L27-28)
COMBINE_STREAMS = 32

# the profile's assumed per-event costs the fits subtract (their provenance: config/profiles.py)
DISPATCH_CALL_US = 1.006
REMOTE_LATENCY_US = 2.0

# V1 timeline (hardware.md §1b), its own domain: 8 ranks, otherwise the shape above
V1_WORLD = 8
V1_DISPATCH_US = 1290.0 - 247.0  # [M][F] D0 start 247 -> D15 end 1290, 8 AIV streams
V1_GMM2_EXPERT_US = (2811.0 - 2131.0) / 4  # [M][F] GMM2 E7 end 2131 -> E11 end 2811 on 8 AIC
# [M][F] bars C7..C12, each starting after its GMM2 expert
V1_COMBINE_EXPERT_US = (118 + 119 + 118 + 119 + 119 + 121) / 6


@dataclass(frozen=True)
class Fit:
    name: str
    value: float
    unit: str
    derivation: str


def fit_pto_a2a3() -> list[Fit]:
    """Every ``measured:`` constant of ``pto-a2a3`` fitted at its domain (hardware.md §1), in closed
    form. The assumed per-event costs the fits subtract (``dispatch_call_us``, ``remote_latency_us``)
    are the profile's own (config/profiles.py)."""
    call, lam = DISPATCH_CALL_US, REMOTE_LATENCY_US
    fits: list[Fit] = []
    # GMM tile: at cube peak (8192 int8 MAC/cycle x 1.8 GHz) the 128x256x7168 tile computes in
    # 15.93 µs < 20.93 µs measured, so the tile is load-bound: its 14 K steps of 512 stream
    # A + B (and the per-channel scale once) GM->L1 back to back at this rate.
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
    # dispatch: 15 remote sources of 64 rows each share the link; one expert took 62.6 µs, of
    # which each stream's call and first-batch latency are not link time
    remote_rows = ROWS_PER_EXPERT * (WORLD - 1) // WORLD
    remote_in = remote_rows * (H + 32) / (DISPATCH_EXPERT_US - call - lam)
    fits.append(
        Fit(
            "remote_in_bytes_per_us",
            remote_in,
            "B/µs per rank",
            f"dispatch of one local expert at 16 ranks: {remote_rows} remote rows x {H + 32} B / "
            f"({DISPATCH_EXPERT_US} µs - dispatch_call_us {call} - remote_latency_us {lam}); 15 streams, "
            "more than the link serves at full rate",
        )
    )
    comb_us = sum(COMBINE_EXPERT_US) / 2
    remote_out = remote_rows * H * 2 / (comb_us - call)
    fits.append(
        Fit(
            "remote_out_bytes_per_us",
            remote_out,
            "B/µs per rank",
            f"combine of one local expert at 16 ranks: {remote_rows} remote rows x {H} x 2 B / ({comb_us} µs "
            f"(midpoint of {COMBINE_EXPERT_US[0]}-{COMBINE_EXPERT_US[1]}) - dispatch_call_us {call}); 32 "
            "write-back streams, more than the link serves at full rate",
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
    # a write-back stream the link throttles takes a share of the cube cores' GM->L1 paths:
    # GMM2 ran expert 0 in 57 µs before combine started and the later experts in 97.2 µs each
    # beside combine's 32 streams, of which the link served remote_out / r at full rate
    v1 = {f.name: f.value for f in fit_pto_a2a3_v1()}
    excess = COMBINE_STREAMS - remote_out / v1["aiv_remote_write_bytes_per_us"]
    lost = 1.0 - GMM2_E0_US / GMM2_WITH_COMBINE_US
    fits.append(
        Fit(
            "remote_write_excess_share",
            lost / excess,
            "share of gm_l1 per throttled stream",
            f"GMM2 expert 0 {GMM2_E0_US} µs alone, experts 1-15 {GMM2_WITH_COMBINE_US} µs each beside "
            f"combine: the cube paths lost 1 - {GMM2_E0_US}/{GMM2_WITH_COMBINE_US} = {lost:.3f} to "
            f"{COMBINE_STREAMS} - remote_out / aiv_remote_write_bytes_per_us = {excess:.2f} throttled "
            "streams",
        )
    )
    return fits


def fit_pto_a2a3_v1() -> list[Fit]:
    """The constants only the V1 timeline (hardware.md §1b, 8 ranks) can measure: one vector
    core's stream rate when the link is not the limit (its 8 dispatch and 8 combine streams stay
    below the aggregates fitted at §1). Tagged with V1's domain."""
    call, lam = DISPATCH_CALL_US, REMOTE_LATENCY_US
    fits: list[Fit] = []
    rows = ROWS_PER_EXPERT // V1_WORLD  # one source rank's rows of one expert, one stream
    per_expert = V1_DISPATCH_US / LOCAL_EXPERTS
    fits.append(
        Fit(
            "aiv_remote_read_bytes_per_us",
            (rows - 2) * (H + 32) / (per_expert - call - lam),
            "B/µs per AIV",
            f"V1 dispatch: 16 experts in {V1_DISPATCH_US} µs on 8 AIV, one source rank each: "
            f"({rows} - 2 first-batch rows) x {H + 32} B / ({per_expert:.2f} µs - dispatch_call_us {call} - "
            f"remote_latency_us {lam})",
        )
    )
    fits.append(
        Fit(
            "aiv_remote_write_bytes_per_us",
            rows * H * 2 / (V1_COMBINE_EXPERT_US - call),
            "B/µs per AIV",
            f"V1 combine: one expert in {V1_COMBINE_EXPERT_US} µs (mean of C7-C12, each after its GMM2 "
            f"expert) on 8 AIV, one source rank each: {rows} rows x {H} x 2 B / ({V1_COMBINE_EXPERT_US} - "
            f"dispatch_call_us {call}) µs",
        )
    )
    return fits


def gmm2_tile_check(gm_l1_bytes_per_us: float, cube_mac_per_us: float) -> tuple[float, float]:
    """(predicted, measured beside combine) GMM2 tile time: the model's 4 K steps of 512, each
    ``max(load, compute)``, from the GMM1 fit, against the §1 timeline's GMM2 tile while combine
    wrote back (reported, not fitted: the fitted share of the throttled write-back streams is
    what slows GMM2 there; :data:`GMM2_E0_US` and the V1 timeline show GMM2 alone)."""
    k = HIDDEN_DIM // 2
    steps = k // 512
    load = (128 * k + 256 * k + 256 * 8) / gm_l1_bytes_per_us
    compute = 128 * 256 * k / cube_mac_per_us
    return steps * max(load / steps, compute / steps), GMM2_TILE_US
