"""Profiles: named bundles of constants and knob defaults that reproduce one implementation.

* ``pto-a2a3``: the seed-002 kernel (PTO MegaMoE baseline, Ascend A2/A3, 24 AIC / 48 AIV,
  128x256 int8 output tiles, SwiGLU in two segments, combine small path when tokens x topK <= 4096).
  Its ``measured:`` constants come from :mod:`moeopt.megamoe.config.calibration`.
* ``megamoe-a8w8``: the seed-000 example (an arch35 wave kernel, 28 usable cube cores, fused
  on-chip SwiGLU), constants from ``hardware.md`` §5.
* no profile (``None``): fewest assumptions, reproducing nothing. Hardware spec values of one A3
  die are used; every rate that only a measurement could give must be set in ``[calibration]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from moeopt.megamoe.config.calibration import (
    HBM_COPY_DOMAIN,
    PTO_A2A3_DOMAIN,
    PTO_A2A3_V1_DOMAIN,
    fit_pto_a2a3,
    fit_pto_a2a3_v1,
)
from moeopt.megamoe.config.implementation import COMBINE_SMALL_MAX_ROUTES
from moeopt.megamoe.config.provenance import CalibrationDomain, Const

HW = "../shared/hardware.md"
A3_CUBE_MHZ = 1800.0

# name -> (unit, meaning); the complete list of constants a scenario may set in [calibration].
CONSTANTS: dict[str, tuple[str, str]] = {
    "cube_mac_per_us_int8": ("MAC/µs per AIC", "cube rate for int8 x int8 (w8a8)"),
    "cube_mac_per_us_fp16": ("MAC/µs per AIC", "cube rate for fp16/bf16"),
    "gm_l1_bytes_per_us": ("B/µs per AIC", "GM->L1 load rate of one cube core (its MTE2), contention-free"),
    "b_reuse_load_factor": (
        "ratio",
        "B-panel load time of a tile whose B block an earlier m-group loaded (L2 hit)",
    ),
    "hbm_bytes_per_us": ("B/µs per die", "aggregate HBM bandwidth shared by every core of a die"),
    "remote_in_bytes_per_us": ("B/µs per rank", "aggregate cross-rank bandwidth into one rank"),
    "remote_out_bytes_per_us": ("B/µs per rank", "aggregate cross-rank bandwidth out of one rank"),
    "aiv_remote_read_bytes_per_us": ("B/µs per AIV", "one AIV pulling rows from a peer window"),
    "aiv_remote_write_bytes_per_us": ("B/µs per AIV", "one AIV writing rows into a peer window"),
    "aiv_local_bytes_per_us": ("B/µs per AIV", "one AIV moving bytes GM<->UB on its own die"),
    "aiv_aggregate_local_bytes_per_us": ("B/µs per rank", "all AIV of a die streaming GM (front, unpermute)"),
    "act_bytes_per_us": ("B/µs per AIV", "SwiGLU + dynamic quant throughput in GMM1-output bytes"),
    "act_startup_us": ("µs", "fixed cost of one activation event"),
    "dispatch_call_us": ("µs", "fixed cost of one dispatch event"),
    "remote_latency_us": ("µs", "latency of the first remote row batch"),
    "urma_get_bytes_per_us": ("B/µs per stream", "URMA batched GET rate"),
    "urma_put_bytes_per_us": ("B/µs per stream", "URMA batched PUT rate"),
    "urma_op_us": ("µs", "fixed cost of one URMA batch"),
    "flag_latency_us": ("µs", "intra-rank cross-core flag, set to observed wait"),
    "syncall_us": ("µs", "all-AIV (or all-AIC) SYNCALL"),
    "cross_rank_flag_us": ("µs", "cross-rank flag / notify latency"),
    "launch_us": ("µs", "kernel launch to first instruction"),
    "front_sort_us_per_route": ("µs per route", "routing sort cost of the front reorder"),
    "l1_bytes": ("B", "L1 buffer of one AIC"),
    "bw_unit_bytes_per_us": ("B/µs", "quantum of the bandwidth semaphores"),
    "gm_unaligned_load_efficiency": (
        "ratio",
        "GM->L1 rate of activation rows whose K step does not start on a 512-B boundary, relative to aligned",
    ),
    "epoch_sync_us": ("µs", "a software-epoch stage boundary: arrivals, coordinator, ready, poll"),
    "remote_write_excess_share": (
        "share per stream",
        "share of the cube cores' GM->L1 paths one write-back stream takes while the link throttles it",
    ),
}

NOT_CALIBRATION: dict[str, str] = {
    "l1_bytes": "a buffer size: a hardware capacity, not a calibrated rate or latency",
    "bw_unit_bytes_per_us": "the model's bandwidth quantum: a resolution of the model, not of the hardware",
}
"""Constants that are not calibration uncertainties: sensitivity never perturbs them (moving a
capacity makes tiles fit or not, every variant at once)."""

NOT_CALIBRATION_KIND: dict[str, str] = {
    # decides which tiles are accepted (the L1 rules), and which panels stay in L1 where a whole
    # K extent fits; on a feasible scenario with larger panels it moves nothing
    "l1_bytes": "capacity",
    # chosen so that rounding to it moves no result (see its Const): by design it moves nothing
    "bw_unit_bytes_per_us": "resolution",
}
"""What each of :data:`NOT_CALIBRATION` is: a ``capacity`` (a size that decides what fits) or a
``resolution`` of the model (chosen to move nothing); the knob audit gives them verdicts of
their own instead of "not modelled"."""

_A3_SPEC = {
    "cube_mac_per_us_int8": Const(
        "cube_mac_per_us_int8",
        8192 * A3_CUBE_MHZ,
        "MAC/µs per AIC",
        "spec",
        f"{HW} §3: int8 cube 16x32x16 = 8192 MAC/cycle x 1.8 GHz (A3 die)",
    ),
    "cube_mac_per_us_fp16": Const(
        "cube_mac_per_us_fp16",
        4096 * A3_CUBE_MHZ,
        "MAC/µs per AIC",
        "spec",
        f"{HW} §3: fp16 cube 16x16x16 = 4096 MAC/cycle x 1.8 GHz (A3 die)",
    ),
    "hbm_bytes_per_us": Const(
        "hbm_bytes_per_us",
        1.6e6,
        "B/µs per die",
        "spec",
        f"{HW} §3: HBM 1.6 TB/s per A3 die (3rd-party simulator config)",
    ),
    "l1_bytes": Const("l1_bytes", 512 * 1024, "B", "spec", f"{HW} §3: L1 512 KiB"),
    "gm_unaligned_load_efficiency": Const(
        "gm_unaligned_load_efficiency",
        0.7,
        "ratio",
        "assumed",
        "CANN Ascend C best practices, 'Using 512-Byte Alignment for the GM Address' "
        "(hiascend.com, opdevg atlas_ascendc_best_practices_10_0014): GM reads of one core that "
        "are only 32-B aligned reach as little as 70% of the 512-B aligned bandwidth, measured on "
        "Atlas A2 products; taken for A3 (A2-class dies) as the rate of every K step of the "
        "activation rows when tile_k x bytes per element is not a multiple of 512 B",
    ),
    "bw_unit_bytes_per_us": Const(
        "bw_unit_bytes_per_us",
        1.0,
        "B/µs",
        "assumed",
        "1 MB/s per semaphore unit: rounding a transfer's rate up to whole units costs < 0.01% at "
        "the rates involved (a stream's fair share of a link included), so halving it moves no result",
    ),
    "remote_write_excess_share": Const(
        "remote_write_excess_share",
        0.0,
        "share per stream",
        "assumed",
        "not measured here: a throttled write-back stream takes nothing of the cube cores' GM->L1 paths",
    ),
}

_ZERO_LATENCY = {
    name: Const(name, 0.0, "µs", "assumed", "no profile: no latency assumed")
    for name in (
        "flag_latency_us",
        "syncall_us",
        "cross_rank_flag_us",
        "launch_us",
        "remote_latency_us",
        "act_startup_us",
        "dispatch_call_us",
        "urma_op_us",
        "epoch_sync_us",
    )
}

_PTO_SYNC = {
    "flag_latency_us": Const(
        "flag_latency_us",
        1000 / A3_CUBE_MHZ,
        "µs",
        "assumed",
        "no measurement for the MegaMoE flags; the 1000-cycle logical tile sync of the same repo's "
        "flash-attention cost model (fa_cost_model.py L77-107, hardware.md §4) at 1.8 GHz",
    ),
    "syncall_us": Const(
        "syncall_us",
        2000 / A3_CUBE_MHZ,
        "µs",
        "assumed",
        "no measurement; an all-core SYNCALL taken as two flag round trips (2000 cycles at 1.8 GHz)",
    ),
    "cross_rank_flag_us": Const(
        "cross_rank_flag_us",
        5.0,
        "µs",
        "assumed",
        "no measurement; a fraction of the 25-35 µs fixed overhead of a tiny fused kernel with "
        "cross-rank sync (hardware.md §1, zouzias dispatch_ffn_combine_v3 README)",
    ),
    "launch_us": Const(
        "launch_us",
        10904.8 / A3_CUBE_MHZ,
        "µs",
        "assumed",
        "launch overhead 10904.8 cycles of fa_cost_model.py L77-107 (hardware.md §4) at 1.8 GHz",
    ),
    "remote_latency_us": Const(
        "remote_latency_us",
        2.0,
        "µs",
        "assumed",
        "no measurement of the first remote batch; a few HCCS round trips",
    ),
    "act_startup_us": Const(
        "act_startup_us",
        1.48,
        "µs",
        "assumed",
        "not measured on A2/A3; the arch35 vector start-up per activation tile (hardware.md §5)",
    ),
    "dispatch_call_us": Const(
        "dispatch_call_us",
        1.006,
        "µs",
        "assumed",
        "not measured on A2/A3; the arch35 zero-row dispatch call (hardware.md §5)",
    ),
    "epoch_sync_us": Const(
        "epoch_sync_us",
        2 * 1000 / A3_CUBE_MHZ + 0.06,
        "µs",
        "assumed",
        "no measurement of the V1 kernel's software epochs: the producers' arrival writes and the "
        "coordinator's ready write taken as two flag hand-offs (2 x 1000 cycles at 1.8 GHz, as "
        "flag_latency_us), plus one poll back-off of 3 sys_cnt ticks = 60 ns (mega_expert_sync.hpp L163)",
    ),
}


def _pto_constants() -> dict[str, Const]:
    d = PTO_A2A3_DOMAIN.id
    out = dict(_A3_SPEC)
    out.update(_PTO_SYNC)
    for fit in fit_pto_a2a3_v1():
        out[fit.name] = Const(
            fit.name, fit.value, fit.unit, "measured", f"{HW} §1b: {fit.derivation}", PTO_A2A3_V1_DOMAIN.id
        )
    for fit in fit_pto_a2a3():
        out[fit.name] = Const(fit.name, fit.value, fit.unit, "measured", f"{HW} §1: {fit.derivation}", d)
    out["b_reuse_load_factor"] = Const(
        "b_reuse_load_factor",
        1.0,
        "ratio",
        "assumed",
        "the fitted gm_l1 rate already averages L2 hits over the 8 m-groups of the calibration shape",
    )
    out["aiv_local_bytes_per_us"] = Const(
        "aiv_local_bytes_per_us",
        out["aiv_remote_write_bytes_per_us"].value,
        "B/µs per AIV",
        "assumed",
        "no measurement of a stream to this rank's own window; the kernel takes the same window path "
        "for its own source rank as for the others (dispatch.h TLOAD / combine.h TSTORE on "
        "peer[srcRank] for every srcRank), so it is set to a per-stream rate fitted at §1b (the "
        "write-back's: one constant serves both directions; the read rate is 6% lower)",
    )
    out["hbm_bytes_per_us"] = Const(
        "hbm_bytes_per_us",
        1.264e6,
        "B/µs per die",
        "measured",
        f"{HW} §1 / §3: HBM copy of 256 MiB at 1.264 TB/s (read and write counted), on a 910B-class "
        "die (presumably 910B1, unverified): what every core streaming together reaches, against the "
        "1.6 TB/s spec, which no measurement shows",
        HBM_COPY_DOMAIN.id,
    )
    return out


A35 = f"{HW} §5 (recursion-ascend/cost-model README)"
A8W8_DOMAIN = CalibrationDomain(
    id="megamoe-a8w8/arch35/28core",
    implementation="megamoe-a8w8.wave",
    # hardware.md §5: GMM1 tiles of m = 256 rows (bs128 / bs8192, one m-group = 256 rows); the
    # tile_n 256 of the README's example configuration
    compile_point={"quant": "w8a8", "tile_m": 256, "tile_n": 256},
    # hardware.md §5: GMM1 tile times at batch 36, 128 and 8192 tokens; the README's runs are
    # labelled h5120_i4608 (h 5120, hidden_dim 9216)
    shape={"tokens": (36, 8192), "h": 5120, "hidden_dim": 9216},
    topology={"aic_num": 28},
    note=(
        "hardware.md §5 (recursion-ascend/cost-model README): single-point calibrations of the arch35 "
        "wave kernel on the 28 usable cube cores of one card, GMM1 tiles of 256 rows at batch 36, 128 "
        "and 8192 tokens, runs labelled h5120_i4608; topK, ranks and experts per rank of the runs are "
        "not documented, so they are not limited"
    ),
)


def _a8w8_constants() -> dict[str, Const]:
    d = A8W8_DOMAIN.id

    def meas(name: str, value: float, unit: str, what: str) -> Const:
        return Const(name, value, unit, "measured", f"{A35}: {what}", d)

    return {
        "cube_mac_per_us_int8": Const(
            "cube_mac_per_us_int8",
            1.35e7,
            "MAC/µs per AIC",
            "spec",
            f"{A35}: FP8 864 TFLOPS / 32 cores / 2 (the seed file's 2.7e7 is FLOPS read as MAC)",
        ),
        "cube_mac_per_us_fp16": Const(
            "cube_mac_per_us_fp16",
            486e6 / 32 / 2,
            "MAC/µs per AIC",
            "spec",
            f"{A35}: BF16 486 TFLOPS / 32 / 2",
        ),
        "gm_l1_bytes_per_us": meas("gm_l1_bytes_per_us", 51.9e3, "B/µs per AIC", "GM->L1 per core 51.9 GB/s"),
        "b_reuse_load_factor": meas(
            "b_reuse_load_factor",
            0.53,
            "ratio",
            "B-stream reuse across m-groups ~0.53 of a full B (L2 hits)",
        ),
        "hbm_bytes_per_us": Const(
            "hbm_bytes_per_us", 1.6e6, "B/µs per die", "spec", f"{A35}: 950PR HBM 1.6 TB/s"
        ),
        "remote_in_bytes_per_us": Const(
            "remote_in_bytes_per_us",
            2.0e6,
            "B/µs per rank",
            "spec",
            f"{A35}: chip-to-chip link 2 TB/s",
        ),
        "remote_out_bytes_per_us": Const(
            "remote_out_bytes_per_us",
            2.0e6,
            "B/µs per rank",
            "spec",
            f"{A35}: chip-to-chip link 2 TB/s",
        ),
        "aiv_remote_read_bytes_per_us": meas(
            "aiv_remote_read_bytes_per_us",
            31e3,
            "B/µs per AIV",
            "dispatch remote segment 31 GB/s",
        ),
        "aiv_remote_write_bytes_per_us": meas(
            "aiv_remote_write_bytes_per_us",
            33e3,
            "B/µs per AIV",
            "cross-card window 33 GB/s",
        ),
        "aiv_local_bytes_per_us": meas(
            "aiv_local_bytes_per_us",
            139.5e3,
            "B/µs per AIV",
            "UB->GM scattered combine writes 139.5 GB/s",
        ),
        "aiv_aggregate_local_bytes_per_us": meas(
            "aiv_aggregate_local_bytes_per_us",
            0.95e6,
            "B/µs per rank",
            "unpermute aggregate 0.95 TB/s",
        ),
        "act_bytes_per_us": meas("act_bytes_per_us", 93e3, "B/µs per AIV", "GM->UB (activation) 93 GB/s"),
        "act_startup_us": meas("act_startup_us", 1.48, "µs", "vector start-up per activation tile"),
        "dispatch_call_us": meas("dispatch_call_us", 1.006, "µs", "zero-row dispatch call per wave per core"),
        "remote_latency_us": Const(
            "remote_latency_us", 2.0, "µs", "assumed", "no measurement of the first remote batch"
        ),
        "urma_get_bytes_per_us": meas(
            "urma_get_bytes_per_us", 2.25e3, "B/µs per stream", "URMA GET 2.25 GB/s"
        ),
        "urma_put_bytes_per_us": Const(
            "urma_put_bytes_per_us",
            2.25e3,
            "B/µs per stream",
            "assumed",
            f"{A35}: PUT assumed symmetric to GET",
        ),
        "urma_op_us": Const(
            "urma_op_us", 1.006, "µs", "assumed", "taken equal to the measured dispatch call overhead"
        ),
        "flag_latency_us": Const("flag_latency_us", 0.5, "µs", "assumed", "no arch35 flag measurement"),
        "syncall_us": Const("syncall_us", 1.0, "µs", "assumed", "no arch35 SYNCALL measurement"),
        "epoch_sync_us": Const(
            "epoch_sync_us", 1.0, "µs", "assumed", "no arch35 measurement; taken as one SYNCALL"
        ),
        "cross_rank_flag_us": Const(
            "cross_rank_flag_us", 5.0, "µs", "assumed", "no arch35 cross-rank measurement"
        ),
        "launch_us": Const("launch_us", 6.0, "µs", "assumed", "no arch35 launch measurement"),
        "front_sort_us_per_route": Const(
            "front_sort_us_per_route",
            28.02 / 16384,
            "µs per route",
            "assumed",
            "no arch35 measurement; the pto-a2a3 fitted value (hardware.md §1)",
        ),
        "l1_bytes": Const(
            "l1_bytes", 512 * 1024, "B", "assumed", "arch35 L1 size not in hardware.md; A3 value"
        ),
        "bw_unit_bytes_per_us": _A3_SPEC["bw_unit_bytes_per_us"],
        "gm_unaligned_load_efficiency": Const(
            "gm_unaligned_load_efficiency",
            1.0,
            "ratio",
            "assumed",
            "the vendor documents the 512-B alignment penalty for Atlas A2 products only; nothing "
            "is known for arch35, so no penalty is assumed",
        ),
        "remote_write_excess_share": _A3_SPEC["remote_write_excess_share"],
    }


# Knob defaults: nested like a scenario file. The global defaults apply under every profile.
GLOBAL_DEFAULTS: dict[str, Any] = {
    "aiv_per_core": 2,
    "kernel": {
        "tile_m": 128,
        "tile_n": 256,
        "tile_k": 512,
        "l1_stages": 2,
        "quant": "w8a8",
        "topo_urma": False,
        "swizzle_n": 9,
        "swiglu_segments": "per_expert",
        "combine_small_max_routes": 0,
        "front_reorder": "single",
    },
    "policy": {
        "dispatch_lookahead": 0,
        "dispatch_lag": 0,
        "scheduling": "earliest_start",
        "wave_packing": "sequential_greedy",
        "core_assignment": "static_round_robin",
        "core_cursor": "per_stage",
        "restructure": "none",
    },
    "options": {
        "links": [
            {
                "producer": "dispatch",
                "consumer": "gmm1",
                "location": "gm",
                "depth": 0,
                "readiness": "whole",
                "chunks": 1,
                "colocated_by_hardware": False,
            },
            {
                "producer": "gmm1",
                "consumer": "activation",
                "location": "gm",
                "depth": 0,
                "readiness": "whole",
                "chunks": 1,
                "colocated_by_hardware": False,
            },
            {
                "producer": "activation",
                "consumer": "gmm2",
                "location": "gm",
                "depth": 0,
                "readiness": "whole",
                "chunks": 1,
                "colocated_by_hardware": False,
            },
            {
                "producer": "gmm2",
                "consumer": "combine",
                "location": "gm",
                "depth": 0,
                "readiness": "whole",
                "chunks": 1,
                "colocated_by_hardware": False,
            },
        ],
        "combine_granularity": "per_tile",
        "late_bind_pools": [],
        "bandwidth_contention": True,
        "core_groups": "shared",
        "event_granularity": {},
        "barriers": "fused",
        "builder": "megamoe",
        "tile_grid": "rect",
        "roles": {"dispatch": "AIV", "activation": "AIV", "combine": "AIV"},
        "sync_protocol": "hardware_flags",
        "gmm1_full_experts": 0,
        "gmm2_join_check": "none",
        "combine_start_after": "none",
        "swiglu_active": "all",
        "unpermute": "rank_barrier",
        "unpermute_ready_experts": 13,
        "gmm1_small_m_rebalance": False,
        "orchestration": "waves",
    },
}

PROFILE_DEFAULTS: dict[str, dict[str, Any]] = {
    "pto-a2a3": {
        "aic_num": 24,
        "kernel": {
            "tile_m": 128,
            "tile_n": 256,
            "tile_k": 512,
            "swiglu_segments": "kernel_rule",
            # DirectSmall (per GMM2 tile) iff M x topK <= 4096 (impl: combine.h@2d9d4288:30,73-85)
            "combine_small_max_routes": COMBINE_SMALL_MAX_ROUTES,
            # the front reorder picks FullLoad / OneCore / MultiCore (tiling_builder.cpp@HEAD L215-322)
            "front_reorder": "kernel_rule",
        },
        "options": {"combine_granularity": "auto"},
    },
    "megamoe-a8w8": {
        "aic_num": 28,
        "kernel": {"tile_m": 256, "tile_n": 256, "tile_k": 512},
        # the arch35 kernel's cursor startBlockIdx_ rolls on across stages and experts
        # (mega_moe_arch35.h, as the seed's model describes it; the kernel source is not public)
        "policy": {"core_cursor": "across_stages"},
        "options": {
            "links": [
                {
                    "producer": "gmm1",
                    "consumer": "activation",
                    "location": "onchip",
                    "depth": 1,
                    "colocated_by_hardware": True,
                },
            ],
            "combine_granularity": "per_tile",
            "roles": {"dispatch": "AIV1", "activation": "AIV0", "combine": "AIV1"},
        },
    },
}

# The V1 version of the PTO kernel as knobs on the baseline: pto-a2a3-v1 = pto-a2a3 + these
# (a test checks that the two give the same schedule). Sources: hardware.md §2 "V1 fixed groups",
# "Sync protocol", "Combine", "Unpermute"; overview_v1.md; pseudocode.md.
V1_OVERRIDES: dict[str, Any] = {
    "options.core_groups": "v1_fixed",  # GMM1 AIC 0-15, GMM2 AIC 16-23 (+ join), dispatch AIV0 / SwiGLU AIV1
    # of blocks 0-15, combine AIV0 of blocks 16-23 (mega_expert_sync.hpp@HEAD L31-68)
    "options.sync_protocol": "software_epochs",  # pseudocode.md L15-17, mega_expert_sync.hpp L181, L275, L297
    "options.gmm1_full_experts": 2,  # fullAicGmm1ExpertCount (gmm1.h@HEAD L158-160, L173-181)
    "options.gmm2_join_check": "kernel_rule",  # gmm2JoinCheckStartExpert (gmm2.h@HEAD L147-231)
    # combineStartAfterGmm2Expert (tiling_builder.cpp@HEAD L120-137)
    "options.combine_start_after": "kernel_rule",
    "options.combine_granularity": "by_source",  # full-row write-back by source rank (combine.h@HEAD L27-28)
    "options.swiglu_active": "kernel_rule",  # swigluActiveGroupSize (tiling_builder.cpp@HEAD L120-137)
    "options.unpermute": "two_phase",  # 32 AIV on ready tokens, then 48 (pseudocode.md L424-478)
    # unpermutePhase1ReadyExpertCount (tiling_builder.cpp@HEAD L120-137)
    "options.unpermute_ready_experts": 13,
    "options.gmm1_small_m_rebalance": True,  # gmm1.h@HEAD L33-41, L60-78
    "kernel.swiglu_segments": "per_expert",  # pseudocode.md L243-297
    # advance = coreLoops % coreNum, or 1 when that is 0 (gmm_common.h@HEAD L56-64)
    "policy.core_assignment": "static_round_robin_v1",
}


def _nest(dotted: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path, value in dotted.items():
        *heads, last = path.split(".")
        node = out
        for h in heads:
            node = node.setdefault(h, {})
        node[last] = value
    return out


PROFILES = ("pto-a2a3", "pto-a2a3-v1", "megamoe-a8w8")

IMPLEMENTATIONS: dict[str | None, dict[str, Any]] = {
    "pto-a2a3": {
        "id": "pto-a2a3.baseline",
        "source_refs": [
            "kernels/manual/a2a3/dispatch_mega_combine/op_kernel/dispatch_mega_combine.h@2d9d4288:113-142",
            "op_kernel/gmm_common.h@HEAD:20-23,36-91",
            "op_kernel/gmm1.h@2d9d4288:120-131",
            "op_kernel/gmm2.h@2d9d4288:125-131",
            "op_kernel/combine.h@2d9d4288:27-40,73-85,541-572",
            "op_kernel/utils/moe_swiglu_segment.hpp:23-45",
            "op_kernel/dispatch.h@HEAD:25-31,262-331",
        ],
        "domain": PTO_A2A3_DOMAIN,
    },
    "pto-a2a3-v1": {
        "id": "pto-a2a3.v1",
        "source_refs": [
            "kernels/manual/a2a3/dispatch_mega_combine/overview_v1.md:28-39,71-130",
            "op_kernel/utils/mega_expert_sync.hpp@HEAD:31-68,163,181,275,297",
            "op_kernel/tiling_builder.cpp@HEAD:104-137",
            "op_kernel/gmm1.h@HEAD:33-41,60-78,158-181",
            "op_kernel/gmm2.h@HEAD:147-231",
            "op_kernel/gmm_common.h@HEAD:56-64",
            "op_kernel/combine.h@HEAD:27-28",
            "pseudocode.md:15-17,243-297,357-478",
        ],
        "domain": PTO_A2A3_V1_DOMAIN,
    },
    "megamoe-a8w8": {
        "id": "megamoe-a8w8.wave",
        "source_refs": ["recursion-ascend/cost-model README.md (hardware.md §5)"],
        "domain": A8W8_DOMAIN,
    },
    None: {"id": "generic", "source_refs": [], "domain": None},
}


def profile_constants(profile: str | None) -> dict[str, Const]:
    """The constants of ``profile`` (``None``: spec values only, zero latencies)."""
    if profile in ("pto-a2a3", "pto-a2a3-v1"):
        return _pto_constants()
    if profile == "megamoe-a8w8":
        return _a8w8_constants()
    out = dict(_A3_SPEC)
    out.update(_ZERO_LATENCY)
    return out


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``; tables merge key by key, the ``links`` list merges by edge."""
    out = dict(base)
    for key, value in over.items():
        if key == "links" and isinstance(value, list) and isinstance(out.get(key), list):
            out[key] = merge_links(out[key], value)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def merge_links(base: list[Any], over: list[Any]) -> list[Any]:
    """Links keyed by (producer, consumer): a listed link's fields replace the base link's."""
    merged = [dict(x) for x in base]
    for link in over:
        key = (link.get("producer"), link.get("consumer"))
        for i, b in enumerate(merged):
            if (b.get("producer"), b.get("consumer")) == key:
                merged[i] = {**b, **{k: v for k, v in link.items() if v is not None}}
                break
        else:
            merged.append(dict(link))
    return merged


PROFILE_DEFAULTS["pto-a2a3-v1"] = deep_merge(PROFILE_DEFAULTS["pto-a2a3"], _nest(V1_OVERRIDES))
