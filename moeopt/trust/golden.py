"""Golden schedule fingerprints: a fixed set of configurations whose schedules must not move.

Each configuration is a named base scenario plus dotted-path overrides. Its fingerprint hashes
the schedule fingerprint (:meth:`moeopt.Schedule.fingerprint`: every event's start, end and
binding, rounded to 1e-6 µs) of every simulated rank together with the ranks it stands for, so a
change to any cost formula, builder rule, default or scheduler decision shows up as a mismatch.

The stored file (``golden.json`` beside this module) holds the configurations themselves, not
only their hashes: ``--check`` re-simulates exactly what is written there. Regenerate it on
purpose (``python -m moeopt golden``) when a change of behaviour is intended, and say why in
the commit.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from moeopt.errors import InputError, did_you_mean
from moeopt.megamoe.results import SimulateResult
from moeopt.megamoe.scenario import Scenario, scenario_from_dict
from moeopt.megamoe.simulate import simulate

GOLDEN_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden.json")
FORMAT = 1

# Base scenarios, as scenario-file tables (so a configuration is reproducible from the file alone).
BASES: dict[str, dict[str, Any]] = {
    # the seed-000 example shape: h 5120, intermediate 4608, topk 6, 8 ranks, 3 local experts
    "bs72": {
        "profile": "megamoe-a8w8",
        "h": 5120,
        "hidden_dim": 9216,
        "aic_num": 28,
        "workload": {"tokens": 72, "topk": 6, "world": 8, "local_experts": 3, "routing": "uniform"},
    },
    # the seed-002 typical case (world 8, K 7168, N 4096, topK 8, 16 experts per rank) at M = 16
    "pto_m16": {
        "profile": "pto-a2a3",
        "h": 7168,
        "hidden_dim": 4096,
        "workload": {"tokens": 16, "topk": 8, "world": 8, "local_experts": 16, "routing": "cyclic"},
    },
    # examples/scenario_basic.toml with 8 local experts instead of 64 (same knobs, smaller graph)
    "basic_e8": {
        "profile": "megamoe-a8w8",
        "h": 6144,
        "hidden_dim": 4096,
        "aic_num": 28,
        "p1_override": 2,
        "p2_override": 1,
        "workload": {"tokens": 64, "topk": 8, "world": 4, "local_experts": 8, "routing": "uniform"},
        "kernel": {"tile_m": 256, "tile_n": 256, "topo_urma": False},
        "policy": {"dispatch_lookahead": 2},
    },
}

_GM = {"location": "gm", "depth": 0, "colocated_by_hardware": False}
_ONCHIP = {"location": "onchip", "colocated_by_hardware": True}

# (name, base, overrides, check_bounds): every knob family of SPEC §6 appears at least once.
DEFAULT_CONFIGS: list[tuple[str, str, dict[str, Any], bool]] = [
    ("bs72", "bs72", {}, True),
    ("bs72.tile_n128", "bs72", {"kernel.tile_n": 128}, True),
    ("bs72.tile_m128", "bs72", {"kernel.tile_m": 128}, True),
    ("bs72.l1_stages1", "bs72", {"kernel.l1_stages": 1}, True),
    ("bs72.bf16", "bs72", {"kernel.quant": "bf16", "kernel.tile_m": 128, "kernel.tile_n": 128}, True),
    ("bs72.urma", "bs72", {"kernel.topo_urma": True}, True),
    (
        "bs72.act_depth2",
        "bs72",
        {"options.links": [{"producer": "gmm1", "consumer": "activation", "depth": 2}]},
        True,
    ),
    (
        "bs72.act_gm",
        "bs72",
        {"options.links": [{"producer": "gmm1", "consumer": "activation", **_GM}]},
        True,
    ),
    (
        "bs72.comb_onchip",
        "bs72",
        {"options.links": [{"producer": "gmm2", "consumer": "combine", **_ONCHIP, "depth": 2}]},
        True,
    ),
    (
        "bs72.per_chunk2",
        "bs72",
        {
            "options.links": [
                {"producer": "activation", "consumer": "gmm2", "readiness": "per_chunk", "chunks": 2}
            ]
        },
        True,
    ),
    (
        "bs72.staged",
        "bs72",
        {
            "options.barriers": "staged",
            "options.links": [{"producer": "gmm1", "consumer": "activation", **_GM}],
        },
        True,
    ),
    ("bs72.comb_per_expert", "bs72", {"options.combine_granularity": "per_expert"}, True),
    (
        "bs72.comb_per_expert_g2",
        "bs72",
        {"options.combine_granularity": "per_expert", "options.event_granularity": {"combine": 2}},
        True,
    ),
    ("bs72.disp_g2", "bs72", {"options.event_granularity": {"dispatch": 2}}, True),
    # late-bound cube tiles take a GM hand-off to the activation (on-chip slots are per core)
    (
        "bs72.late_aic_aiv1",
        "bs72",
        {
            "options.late_bind_pools": ["AIC", "AIV1"],
            "options.links": [{"producer": "gmm1", "consumer": "activation", **_GM}],
        },
        True,
    ),
    (
        "bs72.late_aic",
        "bs72",
        {
            "options.late_bind_pools": ["AIC"],
            "options.links": [{"producer": "gmm1", "consumer": "activation", **_GM}],
        },
        True,
    ),
    ("bs72.late_aiv", "bs72", {"options.late_bind_pools": ["AIV"]}, True),
    ("bs72.no_contention", "bs72", {"options.bandwidth_contention": False}, False),
    ("bs72.v1_fixed", "bs72", {"options.core_groups": "v1_fixed"}, True),
    ("bs72.roles_aiv", "bs72", {"options.roles": {"dispatch": "AIV", "combine": "AIV"}}, True),
    ("bs72.cpf", "bs72", {"policy.scheduling": "critical_path_first"}, True),
    ("bs72.wccp", "bs72", {"policy.scheduling": "work_conserving_critical_path"}, True),
    ("bs72.by_stage", "bs72", {"policy.scheduling": "priority_by_stage"}, True),
    ("bs72.lookahead_view", "bs72", {"policy.scheduling": "lookahead_one_step"}, True),
    ("bs72.least_busy", "bs72", {"policy.core_assignment": "greedy_least_busy"}, True),
    ("bs72.contiguous", "bs72", {"policy.core_assignment": "contiguous_block"}, True),
    ("bs72.rr_v1", "bs72", {"policy.core_assignment": "static_round_robin_v1"}, True),
    ("bs72.p1_1_p2_1", "bs72", {"p1_override": 1, "p2_override": 1}, True),
    ("bs72.lookahead1", "bs72", {"p1_override": 1, "policy.dispatch_lookahead": 1}, True),
    ("bs72.lag1", "bs72", {"p1_override": 1, "policy.dispatch_lag": 1}, True),
    (
        "bs72.longest_first",
        "bs72",
        {"p1_override": 1, "policy.wave_packing": "longest_expert_first", "workload.routing": "zipf"},
        True,
    ),
    ("bs72.balanced", "bs72", {"p1_override": 2, "policy.wave_packing": "balanced_waves"}, True),
    ("bs72.random", "bs72", {"workload.routing": "random", "workload.seed": 1}, True),
    ("bs72.zipf", "bs72", {"workload.routing": "zipf", "workload.seed": 2}, True),
    ("bs72.shared1", "bs72", {"workload.shared_expert_num": 1}, True),
    ("bs72.world4", "bs72", {"workload.world": 4, "workload.tokens": 36}, True),
    ("pto_m16", "pto_m16", {}, True),
    ("pto_m16.v1", "pto_m16", {"profile": "pto-a2a3-v1"}, True),
    ("pto_m512", "pto_m16", {"workload.tokens": 512}, True),
    ("pto_m512.v1", "pto_m16", {"workload.tokens": 512, "profile": "pto-a2a3-v1"}, True),
    ("pto_m2048.v1", "pto_m16", {"workload.tokens": 2048, "profile": "pto-a2a3-v1"}, True),
    ("pto_m16.front_single", "pto_m16", {"kernel.front_reorder": "single"}, True),
    ("bs72.cursor_per_stage", "bs72", {"policy.core_cursor": "per_stage"}, True),
    ("bs72.tile_k128", "bs72", {"kernel.tile_k": 128}, True),
    ("pto_m128", "pto_m16", {"workload.tokens": 128}, True),
    ("pto_m16.v1_fixed", "pto_m16", {"options.core_groups": "v1_fixed"}, True),
    ("pto_m16.late_aic", "pto_m16", {"options.late_bind_pools": ["AIC"]}, True),
    ("pto_m16.no_contention", "pto_m16", {"options.bandwidth_contention": False}, False),
    ("pto_m16.ep16", "pto_m16", {"workload.world": 16}, True),
    (
        "pto_m128.per_tile",
        "pto_m16",
        {"workload.tokens": 128, "options.combine_granularity": "per_tile"},
        True,
    ),
    (
        "pto_m128.per_expert",
        "pto_m16",
        {"workload.tokens": 128, "options.combine_granularity": "per_expert"},
        True,
    ),
    ("pto_m16.zipf", "pto_m16", {"workload.routing": "zipf", "workload.seed": 3}, True),
    ("basic_e8", "basic_e8", {}, True),
    ("basic_e8.urma", "basic_e8", {"kernel.topo_urma": True}, True),
    ("basic_e8.tile_n128", "basic_e8", {"kernel.tile_n": 128}, True),
    ("basic_e8.swizzle3", "basic_e8", {"kernel.swizzle_n": 3, "workload.tokens": 256}, True),
    (
        "basic_e8.act_depth2",
        "basic_e8",
        {"options.links": [{"producer": "gmm1", "consumer": "activation", "depth": 2}]},
        True,
    ),
    (
        "basic_e8.late_aic_aiv1",
        "basic_e8",
        {
            "options.late_bind_pools": ["AIC", "AIV1"],
            "options.links": [{"producer": "gmm1", "consumer": "activation", **_GM}],
        },
        True,
    ),
    ("basic_e8.no_lookahead", "basic_e8", {"policy.dispatch_lookahead": 0}, True),
    ("basic_e8.cpf", "basic_e8", {"policy.scheduling": "critical_path_first"}, True),
    ("basic_e8.least_busy", "basic_e8", {"policy.core_assignment": "greedy_least_busy"}, True),
    ("pto_m16.swiglu_per_expert", "pto_m16", {"kernel.swiglu_segments": "per_expert"}, True),
    (
        "pto_m16.act_onchip",
        "pto_m16",
        {"options.links": [{"producer": "gmm1", "consumer": "activation", **_ONCHIP, "depth": 2}]},
        True,
    ),
    # the URMA kernel's layered orchestration: one macro wave at bs = 72 (432 routes <= 1024), two
    # at 512 tokens (3 experts of 1024 rows: the latency count), three at 1024 tokens on 2 ranks
    # (3 experts of 2048 rows: the throughput count, at most one wave per expert)
    ("bs72.urma.layered", "bs72", {"kernel.topo_urma": True, "options.orchestration": "layered"}, True),
    (
        "bs72.urma.layered.t512",
        "bs72",
        {"kernel.topo_urma": True, "options.orchestration": "layered", "workload.tokens": 512},
        True,
    ),
    (
        "bs72.urma.layered.t1024_w2",
        "bs72",
        {
            "kernel.topo_urma": True,
            "options.orchestration": "layered",
            "workload.tokens": 1024,
            "workload.world": 2,
        },
        True,
    ),
    # idle-core stealing (policy.restructure) and its baseline, the per-core queues without it
    ("basic_e8.core_queues", "basic_e8", {"policy.restructure": "core_queues"}, True),
    ("basic_e8.stealing", "basic_e8", {"policy.restructure": "idle_core_stealing"}, True),
    (
        "bs72.zipf.stealing",
        "bs72",
        {"workload.routing": "zipf", "workload.seed": 2, "policy.restructure": "idle_core_stealing"},
        True,
    ),
    (
        "pto_m16.zipf.stealing",
        "pto_m16",
        {"workload.routing": "zipf", "workload.seed": 3, "policy.restructure": "idle_core_stealing"},
        True,
    ),
]


@dataclass(frozen=True)
class GoldenConfig:
    name: str
    base: str
    overrides: Mapping[str, Any]
    check_bounds: bool = True

    def scenario(self) -> Scenario:
        if self.base not in BASES:
            raise InputError(
                f"golden configuration {self.name!r}: unknown base {self.base!r}"
                f"{did_you_mean(self.base, BASES)}; allowed: {', '.join(BASES)}"
            )
        return scenario_from_dict(BASES[self.base], where=f"golden base {self.base!r}").with_overrides(
            self.overrides
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "base": self.base,
            "overrides": dict(self.overrides),
            "check_bounds": self.check_bounds,
        }


def default_configs() -> list[GoldenConfig]:
    return [GoldenConfig(n, b, o, cb) for n, b, o, cb in DEFAULT_CONFIGS]


def result_fingerprint(result: SimulateResult) -> str:
    """Hash of every simulated rank's schedule fingerprint and the ranks it stands for."""
    h = hashlib.sha256()
    for rep in result["simulated_ranks"]:
        rr = result["rank_results"][rep]
        ranks = ",".join(str(r) for r in rr["ranks_sharing_signature"])
        h.update(f"{rep}\t{ranks}\t{rr['schedule'].fingerprint()}\n".encode())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class GoldenRun:
    config: GoldenConfig
    fingerprint: str
    kernel_total_us: float
    seconds: float


def run_config(cfg: GoldenConfig) -> GoldenRun:
    t0 = time.perf_counter()
    r = simulate(cfg.scenario(), check_bounds=cfg.check_bounds)
    return GoldenRun(cfg, result_fingerprint(r), float(r["kernel_total_us"]), time.perf_counter() - t0)


def load_golden(path: str) -> tuple[list[GoldenConfig], dict[str, dict[str, Any]]]:
    """(configurations, ``name -> {"fingerprint", "kernel_total_us"}``) from a golden file."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise InputError(f"{path}: no golden file (create it with: python -m moeopt golden)") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON: {exc}") from None
    if (
        not isinstance(data, dict)
        or data.get("format") != FORMAT
        or not isinstance(data.get("configs"), list)
    ):
        raise InputError(
            f"{path}: not a golden file of format {FORMAT} (a table with 'format' and 'configs')"
        )
    configs: list[GoldenConfig] = []
    expected: dict[str, dict[str, Any]] = {}
    for i, row in enumerate(data["configs"]):
        where = f"{path}: configs[{i}]"
        if not isinstance(row, dict):
            raise InputError(f"{where}: must be a table")
        for key in ("name", "base", "overrides", "fingerprint"):
            if key not in row:
                raise InputError(f"{where}: missing {key!r}")
        if not isinstance(row["overrides"], dict):
            raise InputError(
                f"{where}.overrides = {row['overrides']!r}: must be a table dotted.path -> value"
            )
        name = str(row["name"])
        if name in expected:
            raise InputError(f"{where}: configuration name {name!r} appears twice")
        configs.append(
            GoldenConfig(name, str(row["base"]), row["overrides"], bool(row.get("check_bounds", True)))
        )
        expected[name] = {"fingerprint": row["fingerprint"], "kernel_total_us": row.get("kernel_total_us")}
    return configs, expected


def _row(run: GoldenRun) -> dict[str, Any]:
    row = run.config.as_dict()
    row["fingerprint"] = run.fingerprint
    row["kernel_total_us"] = round(run.kernel_total_us, 6)
    return row


def write_golden(path: str, runs: Sequence[GoldenRun], keep_others: bool = False) -> None:
    """Write ``runs`` to ``path``; ``keep_others`` keeps the stored rows of other configurations."""
    rows: dict[str, dict[str, Any]] = {}
    if keep_others and os.path.exists(path):
        configs, expected = load_golden(path)
        for c in configs:
            rows[c.name] = {**c.as_dict(), **expected[c.name]}
    for run in runs:
        rows[run.config.name] = _row(run)
    text = json.dumps({"format": FORMAT, "configs": list(rows.values())}, indent=1)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text + "\n")


def select(configs: Sequence[GoldenConfig], only: Sequence[str] | None) -> list[GoldenConfig]:
    if not only:
        return list(configs)
    names = [c.name for c in configs]
    for n in only:
        if n not in names:
            raise InputError(f"--only {n!r}: no such golden configuration{did_you_mean(n, names)}")
    return [c for c in configs if c.name in only]


def check(
    path: str, only: Sequence[str] | None = None, progress: Callable[[str], None] | None = None
) -> list[str]:
    """Re-simulate every configuration of ``path``; one line per mismatch (empty: all match)."""
    configs, expected = load_golden(path)
    bad = []
    for cfg in select(configs, only):
        run = run_config(cfg)
        want = expected[cfg.name]["fingerprint"]
        ok = run.fingerprint == want
        if progress is not None:
            mark = "ok  " if ok else "FAIL"
            us, sec = run.kernel_total_us, run.seconds
            progress(f"{mark} {cfg.name:<28} {run.fingerprint}  {us:12.4f} µs  {sec:6.2f} s")
        if not ok:
            was = expected[cfg.name].get("kernel_total_us")
            was_txt = f"{was:.4f}" if isinstance(was, (int, float)) else "?"
            bad.append(
                f"{cfg.name}: fingerprint {run.fingerprint} != stored {want} "
                f"(kernel_total_us {run.kernel_total_us:.4f}, stored {was_txt})"
            )
    return bad
