"""Implementation constants of the kernel that the graph builder and the analyses read: numbers
fixed in the kernel source (``impl:``, with ``file[@rev]:lines``), by the hardware (``spec:``) or
by the algorithm (``algo:``), each a :class:`Const`. The builder modules import the plain values
(``DISPATCH_BATCH_ROWS`` ...); :func:`implementation_constants_used` says which of them a
scenario's run uses, for ``r["provenance"]``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from moeopt.megamoe.config.provenance import Const

HW = "../shared/hardware.md"


@dataclass(frozen=True)
class ImplConst:
    """An implementation constant and when a run uses it (``used(config, routes per rank)``)."""

    const: Const
    used: Callable[[Any, int], bool]

    @property
    def value(self) -> int:
        return int(self.const.value)


def _always(_cfg: Any, _routes: int) -> bool:
    return True


def _w8a8(cfg: Any, _routes: int) -> bool:
    return bool(cfg.quant == "w8a8")


def _combine_large(cfg: Any, routes: int) -> bool:
    if cfg.topo_urma:
        return False
    g = cfg.combine_granularity
    return bool(g == "per_expert" or (g == "auto" and routes > cfg.combine_small_max_routes))


def _combine_auto_default(cfg: Any, _routes: int) -> bool:
    return bool(
        not cfg.topo_urma
        and cfg.combine_granularity == "auto"
        and cfg.combine_small_max_routes == COMBINE_SMALL_MAX_ROUTES
    )


def _swiglu_kernel_rule(cfg: Any, _routes: int) -> bool:
    return bool(cfg.link("gmm1", "activation").location == "gm" and cfg.swiglu_segments == "kernel_rule")


def _layered(cfg: Any, _routes: int) -> bool:
    return bool(cfg.orchestration == "layered")


def _stealing(cfg: Any, _routes: int) -> bool:
    return bool(cfg.restructure == "idle_core_stealing")


# the URMA (Layered) kernel's constants as the original cost model ports them
COST_MODEL = "recursion-ascend/cost-model src/moe_cost_model"
_LAYERED_RULE = (
    "the URMA kernel's macro-wave rule (CalcTargetWaveCount / CalcFirstWaveExpertCount / "
    f"CalcSteadyWaveExpertCount) as {COST_MODEL}/config/hardware.py@033f9f6:112-119 ports it"
)


def _layered_rule(name: str, value: int, unit: str, what: str) -> ImplConst:
    return ImplConst(Const(name, value, unit, "impl", f"{what}: {_LAYERED_RULE}"), _layered)


IMPL: dict[str, ImplConst] = {
    x.const.name: x
    for x in (
        ImplConst(
            Const(
                "dispatch_batch_rows",
                2,
                "rows",
                "impl",
                f"{HW} §2 Dispatch: kDispatchGatherUbMoveNum = 2, rows pulled per UB batch "
                "(dispatch.h@HEAD:25-31)",
            ),
            _always,
        ),
        ImplConst(
            Const(
                "row_pad_bytes",
                32,
                "B per row",
                "impl",
                f"{HW} §2 Dispatch: packed row stride K + 32 (int8 payload + fp32 scale + pad) "
                "(dispatch.h@HEAD:25-31,94)",
            ),
            _w8a8,
        ),
        ImplConst(
            Const(
                "scale_bytes",
                8,
                "B per column",
                "impl",
                f"{HW} §2 GMM: per-channel uint64 scale loaded GM->L1 per output tile, 2 KiB per L1 stage "
                "at tile_n 256 (utils/pto_gmm_preload_async_fixpipe_quant.hpp:100-124)",
            ),
            _w8a8,
        ),
        ImplConst(
            Const(
                "cube_m_align",
                16,
                "rows",
                "spec",
                f"{HW} §3: the cube works on 16-row fractals (int8 16x32x16, fp16 16x16x16)",
            ),
            _always,
        ),
        ImplConst(
            Const(
                "combine_large_lanes",
                2,
                "lanes per source rank",
                "impl",
                f"{HW} §2 Combine: kCombineLargeLanesPerRank = 2 (combine.h@2d9d4288:27-28,119-129)",
            ),
            _combine_large,
        ),
        ImplConst(
            Const(
                "combine_small_max_routes",
                4096,
                "routes",
                "impl",
                f"{HW} §2 Combine: small path iff M x topK <= 4096, kCombineSmallTokenThreshold "
                "(combine.h@2d9d4288:30,73-85)",
            ),
            _combine_auto_default,
        ),
        ImplConst(
            Const(
                "swiglu_tail_experts",
                3,
                "experts",
                "impl",
                f"{HW} §2 SwiGLU: segments of experts [0, E-3) and [E-3, E) "
                "(utils/moe_swiglu_segment.hpp:23-45)",
            ),
            _swiglu_kernel_rule,
        ),
        ImplConst(
            Const(
                "swiglu_split_min_experts",
                5,
                "experts",
                "impl",
                f"{HW} §2 SwiGLU: the split applies for E > 4 experts (utils/moe_swiglu_segment.hpp:23-45)",
            ),
            _swiglu_kernel_rule,
        ),
        _layered_rule("layered_first_wave_rows", 1024, "rows", "LAYERED_FIRST_WAVE_ROWS, the warm-up wave"),
        _layered_rule("layered_latency_waves", 2, "waves", "LAYERED_LATENCY_WAVE_COUNT, small / few experts"),
        _layered_rule("layered_balanced_waves", 6, "waves", "LAYERED_BALANCED_WAVE_COUNT, otherwise"),
        _layered_rule("layered_throughput_waves", 4, "waves", "LAYERED_THROUGHPUT_WAVE_COUNT, large experts"),
        _layered_rule(
            "layered_latency_rows", 256, "rows per expert", "LAYERED_LATENCY_ROWS_PER_EXPERT (L1_TILE_M_256)"
        ),
        _layered_rule(
            "layered_throughput_rows", 2048, "rows per expert", "LAYERED_THROUGHPUT_ROWS_PER_EXPERT"
        ),
        _layered_rule("layered_few_experts", 8, "experts", "LAYERED_FEW_EXPERT_THRESHOLD"),
        ImplConst(
            Const(
                "layered_receive_batch_rows",
                256,
                "rows",
                "impl",
                "DISPATCH_RECEIVE_BATCH_TOKEN_CAPACITY = L1_TILE_M_256, the rows of one batched URMA receive "
                f"and of one flag window ({COST_MODEL}/config/hardware.py@033f9f6:108-109)",
            ),
            _layered,
        ),
        ImplConst(
            Const(
                "layered_put_batch_rows",
                256,
                "rows",
                "assumed",
                "equal to the receive batch: the original cost model commits a channel's PUTs every 256 "
                f"rows and at the wave end ({COST_MODEL}/builders/comm/urma.py); no kernel constant is known",
            ),
            _layered,
        ),
        ImplConst(
            Const(
                "steal_min_pending",
                2,
                "tiles",
                "assumed",
                "the default threshold of the original cost model's idle-core stealing "
                f"({COST_MODEL}/analysis/stealing.py, min_pending = 2); no kernel steals work today",
            ),
            _stealing,
        ),
    )
}

DISPATCH_BATCH_ROWS = IMPL["dispatch_batch_rows"].value
ROW_PAD_BYTES = IMPL["row_pad_bytes"].value
SCALE_BYTES = IMPL["scale_bytes"].value
CUBE_M_ALIGN = IMPL["cube_m_align"].value
COMBINE_LANES = IMPL["combine_large_lanes"].value
COMBINE_SMALL_MAX_ROUTES = IMPL["combine_small_max_routes"].value
SWIGLU_TAIL_EXPERTS = IMPL["swiglu_tail_experts"].value
SWIGLU_SPLIT_MIN_EXPERTS = IMPL["swiglu_split_min_experts"].value
LAYERED_FIRST_WAVE_ROWS = IMPL["layered_first_wave_rows"].value
LAYERED_LATENCY_WAVES = IMPL["layered_latency_waves"].value
LAYERED_BALANCED_WAVES = IMPL["layered_balanced_waves"].value
LAYERED_THROUGHPUT_WAVES = IMPL["layered_throughput_waves"].value
LAYERED_LATENCY_ROWS = IMPL["layered_latency_rows"].value
LAYERED_THROUGHPUT_ROWS = IMPL["layered_throughput_rows"].value
LAYERED_FEW_EXPERTS = IMPL["layered_few_experts"].value
LAYERED_RECEIVE_BATCH_ROWS = IMPL["layered_receive_batch_rows"].value
LAYERED_PUT_BATCH_ROWS = IMPL["layered_put_batch_rows"].value
STEAL_MIN_PENDING = IMPL["steal_min_pending"].value


def implementation_constants_used(cfg: Any, routes: int) -> dict[str, Const]:
    """The implementation constants a run of ``cfg`` uses (``routes``: tokens x topk per rank)."""
    return {name: x.const for name, x in IMPL.items() if x.used(cfg, routes)}
