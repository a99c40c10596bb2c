"""Scenario layer: :class:`Workload`, :class:`Scenario`, :func:`load_scenario` and overrides.

A scenario is what a user writes (a TOML file or constructor calls): the workload shape, the
model sizes, a profile, and the knobs that differ from the profile. Every field is validated
when the object is made; :func:`Scenario.resolve` merges global defaults, the profile and the
scenario into one :class:`Config` and checks the cross-field rules (on-chip links, readiness,
not-modelled values, missing constants). Nothing is half-applied: an override or a file is
turned into a new scenario in one step, or an error says which field, which value, and what is
allowed.

Shapes, the classic trap: ``h`` is the model hidden size (GMM1's K and GMM2's N);
``hidden_dim`` is GMM1's output width = 2 x intermediate size (SwiGLU gate + up), so GMM2's K
is ``hidden_dim / 2``. A run labelled ``h5120_i4608`` is ``h = 5120, hidden_dim = 9216``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from moeopt.errors import did_you_mean, range_text
from moeopt.megamoe.config.profiles import (
    CONSTANTS,
    GLOBAL_DEFAULTS,
    IMPLEMENTATIONS,
    PROFILE_DEFAULTS,
    PROFILES,
    deep_merge,
    profile_constants,
)
from moeopt.megamoe.config.provenance import Const
from moeopt.megamoe.errors import NotModelledError, ScenarioError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib  # type: ignore[import-not-found,no-redef,unused-ignore]

STAGES = ("dispatch", "gmm1", "activation", "gmm2", "combine")
VECTOR_STAGES = ("dispatch", "activation", "combine")
CUBE_STAGES = ("gmm1", "gmm2")
EDGES = (("dispatch", "gmm1"), ("gmm1", "activation"), ("activation", "gmm2"), ("gmm2", "combine"))
ROUTINGS = ("uniform", "cyclic", "random", "zipf", "explicit", "file")
QUANTS = ("w8a8", "bf16")
NOT_MODELLED_QUANTS = {"w4a8": "the int4 dequantisation cost of the a8w4 kernel is not modelled"}
ROLES = ("AIC", "AIV0", "AIV1", "AIV")

TRAP_HINT = (
    "h is the model hidden size (GMM1's K, GMM2's N); hidden_dim is GMM1's output width "
    "= 2 x intermediate size (SwiGLU gate + up), so GMM2's K = hidden_dim / 2. "
    "A run labelled h5120_i4608 is h = 5120, hidden_dim = 9216"
)
KEY_HINTS = {
    "hidden_size": "write h (the model hidden size)",
    "hidden": "write h (the model hidden size)",
    "k": "write h (GMM1's K is the model hidden size)",
    "n": "write hidden_dim (GMM1's N)",
    "intermediate_size": "write hidden_dim = 2 x intermediate size",
    "moe_intermediate_size": "write hidden_dim = 2 x intermediate size",
    "intermediate": "write hidden_dim = 2 x intermediate size",
    "i": "write hidden_dim = 2 x intermediate size",
    "ffn_dim": "write hidden_dim = 2 x intermediate size",
}


# --------------------------------------------------------------------------- field checks
def _isint(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _isnum(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def check_int(where: str, v: Any, lo: int | None = None, hi: int | None = None, multiple: int = 1) -> int:
    rng = range_text(lo, hi)
    if not _isint(v):
        raise ScenarioError(f"{where} = {v!r}: must be an integer{rng}")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise ScenarioError(f"{where} = {v!r}: out of range; allowed: integers{rng}")
    if multiple > 1 and v % multiple:
        raise ScenarioError(f"{where} = {v!r}: must be a multiple of {multiple}{rng}")
    return int(v)


def check_num(
    where: str, v: Any, lo: float | None = None, hi: float | None = None, lo_open: bool = False
) -> float:
    if not _isnum(v):
        raise ScenarioError(f"{where} = {v!r}: must be a finite number{range_text(lo, hi, lo_open)}")
    if (lo is not None and (v < lo or (lo_open and v == lo))) or (hi is not None and v > hi):
        raise ScenarioError(f"{where} = {v!r}: out of range; allowed: {range_text(lo, hi, lo_open).strip()}")
    return float(v)


def check_choice(where: str, v: Any, allowed: Sequence[str]) -> str:
    if not isinstance(v, str) or v not in allowed:
        hint = did_you_mean(v, allowed) if isinstance(v, str) else ""
        raise ScenarioError(f"{where} = {v!r}: not allowed{hint}; allowed: {', '.join(map(repr, allowed))}")
    return v


def check_bool(where: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise ScenarioError(f"{where} = {v!r}: must be true or false")
    return v


def unknown_key(where: str, key: str, allowed: Sequence[str]) -> ScenarioError:
    loc = f"{where}.{key}" if where else key
    hint = KEY_HINTS.get(str(key).lower())
    if hint is not None:
        return ScenarioError(f"unknown field {loc!r}: {hint}. {TRAP_HINT}")
    return ScenarioError(
        f"unknown field {loc!r}{did_you_mean(str(key), allowed)}; allowed: {', '.join(sorted(allowed))}"
    )


# --------------------------------------------------------------------------- sections
@dataclass(frozen=True)
class Workload:
    """The routed work: tokens per rank, topk, ranks, local experts per rank, routing.

    ``routing``: ``uniform`` (every global expert gets the same share, remainders spread
    deterministically), ``cyclic`` (the real kernel's rule: route k of global token t goes to
    expert ``(t*topk + k) mod (world*local_experts)``), ``random`` (seeded, distinct experts per
    token), ``zipf`` (seeded, expert popularity ~ 1/rank**zipf_skew), ``explicit`` (``counts``:
    a world x (world*local_experts) matrix), ``file`` (``file``: a TOML/JSON file with
    ``counts`` or ``expert_ids``).
    """

    tokens: int
    topk: int
    world: int
    local_experts: int
    routing: str = "uniform"
    seed: int = 0
    zipf_skew: float = 1.2
    counts: tuple[tuple[int, ...], ...] | None = None
    file: str | None = None
    shared_expert_num: int = 0

    def __post_init__(self) -> None:
        w = "workload"
        check_int(f"{w}.tokens", self.tokens, 1, 1 << 20)
        check_int(f"{w}.world", self.world, 1, 1024)
        check_int(f"{w}.local_experts", self.local_experts, 1, 1024)
        check_int(f"{w}.topk", self.topk, 1, self.world * self.local_experts)
        check_choice(f"{w}.routing", self.routing, ROUTINGS)
        check_int(f"{w}.seed", self.seed, 0)
        check_num(f"{w}.zipf_skew", self.zipf_skew, 0.0, 10.0, lo_open=True)
        check_int(f"{w}.shared_expert_num", self.shared_expert_num, 0, 16)
        if self.counts is not None:
            if isinstance(self.counts, (str, bytes)) or not isinstance(self.counts, Sequence):
                raise ScenarioError(f"{w}.counts = {self.counts!r}: must be a list of lists of integers")
            rows = []
            for i, row in enumerate(self.counts):
                if isinstance(row, (str, bytes)) or not isinstance(row, Sequence):
                    raise ScenarioError(f"{w}.counts[{i}] = {row!r}: must be a list of integers")
                rows.append(tuple(check_int(f"{w}.counts[{i}][{j}]", v, 0) for j, v in enumerate(row)))
            object.__setattr__(self, "counts", tuple(rows))
        if self.routing == "explicit" and self.counts is None:
            raise ScenarioError(
                f"{w}.routing = 'explicit' needs {w}.counts (a world x world*local_experts matrix)"
            )
        if self.routing != "explicit" and self.counts is not None:
            raise NotModelledError(
                f"{w}.counts is set but {w}.routing = {self.routing!r}: counts are only read with routing = "
                f"'explicit'"
            )
        if self.routing == "file" and not self.file:
            raise ScenarioError(f"{w}.routing = 'file' needs {w}.file (path to a counts or expert-id file)")
        if self.routing != "file" and self.file is not None:
            raise NotModelledError(
                f"{w}.file is set but {w}.routing = {self.routing!r}: only read with routing = 'file'"
            )
        if self.file is not None and not isinstance(self.file, str):
            raise ScenarioError(f"{w}.file = {self.file!r}: must be a path string")
        if self.routing in ("explicit", "file"):
            from moeopt.megamoe.routing import counts_matrix

            counts_matrix(self)  # validates the matrix / file now, so no error surfaces later


@dataclass(frozen=True)
class Kernel:
    """Compile-time point of the kernel. ``None`` = the profile's value."""

    tile_m: int | None = None
    tile_n: int | None = None
    tile_k: int | None = None
    l1_stages: int | None = None
    quant: str | None = None
    topo_urma: bool | None = None
    swizzle_n: int | None = None
    swiglu_segments: str | None = None
    combine_small_max_routes: int | None = None

    def __post_init__(self) -> None:
        k = "kernel"
        if self.tile_m is not None:
            check_int(f"{k}.tile_m", self.tile_m, 16, 1024, multiple=16)
        if self.tile_n is not None:
            check_int(f"{k}.tile_n", self.tile_n, 16, 4096, multiple=16)
        if self.tile_k is not None:
            check_int(f"{k}.tile_k", self.tile_k, 32, 8192, multiple=32)
        if self.l1_stages is not None:
            check_int(f"{k}.l1_stages", self.l1_stages, 1, 4)
        if self.quant is not None:
            if isinstance(self.quant, str) and self.quant in NOT_MODELLED_QUANTS:
                raise NotModelledError(
                    f"{k}.quant = {self.quant!r}: not modelled ({NOT_MODELLED_QUANTS[self.quant]}); "
                    f"allowed: {', '.join(map(repr, QUANTS))}"
                )
            check_choice(f"{k}.quant", self.quant, QUANTS)
        if self.topo_urma is not None:
            check_bool(f"{k}.topo_urma", self.topo_urma)
        if self.swizzle_n is not None:
            check_int(f"{k}.swizzle_n", self.swizzle_n, 1, 64)
        if self.swiglu_segments is not None:
            check_choice(
                f"{k}.swiglu_segments", self.swiglu_segments, ("kernel_rule", "per_expert", "single")
            )
        if self.combine_small_max_routes is not None:
            check_int(f"{k}.combine_small_max_routes", self.combine_small_max_routes, 0)


@dataclass(frozen=True)
class PolicyConfig:
    """Wave progression and the named rules. ``None`` = the profile's value.

    ``dispatch_lookahead``: dispatch may run at most this many waves ahead of GMM1 (0 = no
    limit); ``dispatch_lag``: GMM1 of wave w waits until dispatch of wave w + lag is in.
    """

    dispatch_lookahead: int | None = None
    dispatch_lag: int | None = None
    scheduling: str | None = None
    wave_packing: str | None = None
    core_assignment: str | None = None

    def __post_init__(self) -> None:
        p = "policy"
        if self.dispatch_lookahead is not None:
            check_int(f"{p}.dispatch_lookahead", self.dispatch_lookahead, 0, 1024)
        if self.dispatch_lag is not None:
            check_int(f"{p}.dispatch_lag", self.dispatch_lag, 0, 1024)
        for name, kind in (
            ("scheduling", "policy"),
            ("wave_packing", "wave_packer"),
            ("core_assignment", "core_assignment"),
        ):
            v = getattr(self, name)
            if v is not None:
                _check_registered(f"{p}.{name}", v, kind)


def _check_registered(where: str, value: Any, kind: str) -> None:
    from moeopt import registry
    from moeopt.megamoe import build  # noqa: F401  (registers the built-in rules and builders)

    check_choice(where, value, registry.names(kind))


LINK_FIELDS = ("producer", "consumer", "location", "depth", "readiness", "chunks", "colocated_by_hardware")


@dataclass(frozen=True)
class Link:
    """A stage edge: where the hand-off lives, how many slots, when the consumer may start."""

    producer: str
    consumer: str
    location: str | None = None
    depth: int | None = None
    readiness: str | None = None
    chunks: int | None = None
    colocated_by_hardware: bool | None = None

    def __post_init__(self) -> None:
        w = "options.links"
        check_choice(f"{w}.producer", self.producer, STAGES)
        check_choice(f"{w}.consumer", self.consumer, STAGES)
        if (self.producer, self.consumer) not in EDGES:
            raise ScenarioError(
                f"{w}: no stage edge {self.producer} -> {self.consumer}; edges: "
                + ", ".join(f"{a}->{b}" for a, b in EDGES)
            )
        w = f"options.links[{self.producer}->{self.consumer}]"
        if self.location is not None:
            check_choice(f"{w}.location", self.location, ("gm", "onchip"))
        if self.depth is not None:
            check_int(f"{w}.depth", self.depth, 0, 64)
        if self.readiness is not None:
            check_choice(f"{w}.readiness", self.readiness, ("whole", "per_chunk"))
        if self.chunks is not None:
            check_int(f"{w}.chunks", self.chunks, 1, 64)
        if self.colocated_by_hardware is not None:
            check_bool(f"{w}.colocated_by_hardware", self.colocated_by_hardware)

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in LINK_FIELDS if getattr(self, k) is not None}


OPTION_FIELDS = (
    "links",
    "combine_granularity",
    "late_bind_pools",
    "bandwidth_contention",
    "core_groups",
    "event_granularity",
    "barriers",
    "builder",
    "tile_grid",
    "roles",
)
CORE_GROUP_FIELDS = ("cores", "role", "join", "join_from_expert")


@dataclass(frozen=True)
class Options:
    """Orchestration knobs. ``None`` = the profile's value.

    * ``links``: stage edges (see :class:`Link`); listed links replace the profile's link fields.
    * ``combine_granularity``: ``per_tile`` (a window per GMM2 tile), ``per_expert`` (rows of a
      whole expert slice by source rank) or ``auto`` (the kernel's small-path rule).
    * ``late_bind_pools``: roles whose events bind to a core at dispatch time (``AIC``, ``AIV0``,
      ``AIV1``, ``AIV``); the others are pinned at build time by ``policy.core_assignment``.
    * ``bandwidth_contention``: aggregate HBM / cross-rank limits as shared semaphores (false =
      the seed's contention-free model).
    * ``core_groups``: ``shared`` (every stage on every core), ``v1_fixed`` (the kernel's V1
      fixed groups) or a table ``stage -> {cores, role, join, join_from_expert}``.
    * ``event_granularity``: ``stage -> units per event`` (vector stages).
    * ``barriers``: ``fused`` (per-wave flags) or ``staged`` (an all-core barrier between stages).
    * ``roles``: ``stage -> AIV0 | AIV1 | AIV`` for the vector stages.
    """

    links: tuple[Link, ...] | None = None
    combine_granularity: str | None = None
    late_bind_pools: tuple[str, ...] | None = None
    bandwidth_contention: bool | None = None
    core_groups: Any = None
    event_granularity: Mapping[str, int] | None = None
    barriers: str | None = None
    builder: str | None = None
    tile_grid: str | None = None
    roles: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        o = "options"
        if self.links is not None:
            if isinstance(self.links, (str, bytes)) or not isinstance(self.links, Sequence):
                raise ScenarioError(f"{o}.links = {self.links!r}: must be a list of link tables")
            links = []
            for i, raw in enumerate(self.links):
                if isinstance(raw, Link):
                    links.append(raw)
                elif isinstance(raw, Mapping):
                    for key in raw:
                        if key not in LINK_FIELDS:
                            raise unknown_key(f"{o}.links[{i}]", key, LINK_FIELDS)
                    for need in ("producer", "consumer"):
                        if need not in raw:
                            raise ScenarioError(
                                f"{o}.links[{i}]: missing {need!r} (one of {', '.join(STAGES)})"
                            )
                    links.append(Link(**raw))
                else:
                    raise ScenarioError(
                        f"{o}.links[{i}] = {raw!r}: must be a table with producer and consumer"
                    )
            object.__setattr__(self, "links", tuple(links))
        if self.combine_granularity is not None:
            check_choice(
                f"{o}.combine_granularity", self.combine_granularity, ("per_tile", "per_expert", "auto")
            )
        if self.late_bind_pools is not None:
            if isinstance(self.late_bind_pools, str) or not isinstance(self.late_bind_pools, Sequence):
                raise ScenarioError(
                    f"{o}.late_bind_pools = {self.late_bind_pools!r}: must be a list of roles"
                )
            for i, r in enumerate(self.late_bind_pools):
                check_choice(f"{o}.late_bind_pools[{i}]", r, ROLES)
            object.__setattr__(self, "late_bind_pools", tuple(self.late_bind_pools))
        if self.bandwidth_contention is not None:
            check_bool(f"{o}.bandwidth_contention", self.bandwidth_contention)
        if self.core_groups is not None:
            object.__setattr__(self, "core_groups", _check_core_groups(self.core_groups))
        if self.event_granularity is not None:
            if not isinstance(self.event_granularity, Mapping):
                raise ScenarioError(
                    f"{o}.event_granularity = {self.event_granularity!r}: must be a table stage -> int"
                )
            for st, n in self.event_granularity.items():
                if st not in STAGES:
                    raise unknown_key(f"{o}.event_granularity", st, STAGES)
                check_int(f"{o}.event_granularity.{st}", n, 1, 1024)
                if st not in ("dispatch", "combine") and n != 1:
                    raise NotModelledError(
                        f"{o}.event_granularity.{st} = {n}: packing {st} units into one event is not "
                        f"modelled "
                        "(GMM tiles are already split into load and compute phases; activation follows its "
                        "producer's units); allowed: 1 (values > 1 only for dispatch and combine)"
                    )
            object.__setattr__(self, "event_granularity", MappingProxyType(dict(self.event_granularity)))
        if self.barriers is not None:
            check_choice(f"{o}.barriers", self.barriers, ("fused", "staged"))
        if self.builder is not None:
            _check_registered(f"{o}.builder", self.builder, "builder")
        if self.tile_grid is not None:
            _check_registered(f"{o}.tile_grid", self.tile_grid, "tile_grid")
        if self.roles is not None:
            if not isinstance(self.roles, Mapping):
                raise ScenarioError(f"{o}.roles = {self.roles!r}: must be a table stage -> role")
            for st, role in self.roles.items():
                if st not in VECTOR_STAGES:
                    raise unknown_key(f"{o}.roles", st, VECTOR_STAGES)
                check_choice(f"{o}.roles.{st}", role, ("AIV0", "AIV1", "AIV"))
            object.__setattr__(self, "roles", MappingProxyType(dict(self.roles)))


def _check_core_groups(v: Any) -> Any:
    w = "options.core_groups"
    if isinstance(v, str):
        return check_choice(w, v, ("shared", "v1_fixed"))
    if not isinstance(v, Mapping):
        raise ScenarioError(f"{w} = {v!r}: must be 'shared', 'v1_fixed' or a table stage -> group")
    out: dict[str, Any] = {}
    for st, grp in v.items():
        if st not in STAGES:
            raise unknown_key(w, st, STAGES)
        if not isinstance(grp, Mapping):
            raise ScenarioError(
                f"{w}.{st} = {grp!r}: must be a table with cores, role, join, join_from_expert"
            )
        for key in grp:
            if key not in CORE_GROUP_FIELDS:
                raise unknown_key(f"{w}.{st}", key, CORE_GROUP_FIELDS)
        g = dict(grp)
        if "cores" in g:
            g["cores"] = parse_cores(f"{w}.{st}.cores", g["cores"])
        if "role" in g:
            allowed = ("AIC",) if st in CUBE_STAGES else ("AIV0", "AIV1", "AIV")
            check_choice(f"{w}.{st}.role", g["role"], allowed)
        if "join" in g:
            check_choice(f"{w}.{st}.join", g["join"], [s for s in STAGES if s != st])
        if "join_from_expert" in g:
            check_int(f"{w}.{st}.join_from_expert", g["join_from_expert"], 0)
        out[st] = MappingProxyType(g)
    return MappingProxyType(out)


def parse_cores(where: str, v: Any) -> tuple[int, ...]:
    """``"0-15"``, ``"0-3,8"`` or a list of core indices -> a sorted tuple without duplicates."""
    cores: list[int] = []
    if isinstance(v, str):
        for part in v.split(","):
            part = part.strip()
            try:
                if "-" in part:
                    a, b = part.split("-", 1)
                    lo, hi = int(a), int(b)
                    if hi < lo:
                        raise ValueError
                    cores.extend(range(lo, hi + 1))
                else:
                    cores.append(int(part))
            except ValueError:
                raise ScenarioError(
                    f"{where} = {v!r}: not a core list; allowed: ranges like '0-15' or '0-3,8' or a list of "
                    f"integers"
                ) from None
    elif isinstance(v, Sequence):
        cores = [check_int(f"{where}[{i}]", c, 0) for i, c in enumerate(v)]
    else:
        raise ScenarioError(f"{where} = {v!r}: must be a range string like '0-15' or a list of integers")
    if not cores:
        raise ScenarioError(f"{where} = {v!r}: names no core")
    if min(cores) < 0:
        raise ScenarioError(f"{where} = {v!r}: core indices must be >= 0")
    return tuple(sorted(set(cores)))


SECTIONS: dict[str, type] = {
    "workload": Workload,
    "kernel": Kernel,
    "policy": PolicyConfig,
    "options": Options,
}
TOP_FIELDS = (
    "profile",
    "h",
    "hidden_dim",
    "aic_num",
    "p1_override",
    "p2_override",
    "workload",
    "kernel",
    "policy",
    "calibration",
    "options",
)


@dataclass(frozen=True)
class Scenario:
    """One simulation input (SPEC §10). Validated on construction; immutable.

    ``h`` = model hidden size (GMM1's K, GMM2's N); ``hidden_dim`` = GMM1's output width =
    2 x intermediate size; ``aic_num`` = cube cores of one die (``None``: the profile's);
    ``p1_override`` / ``p2_override`` = m-groups per GMM1 / GMM2 wave (0: the kernel's bucket
    rule, one local expert per wave); ``calibration`` = constant name -> value overriding the
    profile's constants.
    """

    workload: Workload
    h: int
    hidden_dim: int
    aic_num: int | None = None
    profile: str | None = None
    p1_override: int = 0
    p2_override: int = 0
    kernel: Kernel = field(default_factory=Kernel)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    calibration: Mapping[str, float] = field(default_factory=dict)
    options: Options = field(default_factory=Options)
    _config: Config = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.workload, Workload):
            raise ScenarioError(f"workload must be a Workload, got {type(self.workload).__name__}")
        for name, cls in (("kernel", Kernel), ("policy", PolicyConfig), ("options", Options)):
            if not isinstance(getattr(self, name), cls):
                raise ScenarioError(
                    f"{name} must be a {cls.__name__}, got {type(getattr(self, name)).__name__}"
                )
        if self.profile is not None:
            check_choice("profile", self.profile, PROFILES)
        check_int("h", self.h, 16, 65536)
        check_int("hidden_dim", self.hidden_dim, 2, 131072)
        if self.hidden_dim % 2:
            raise ScenarioError(f"hidden_dim = {self.hidden_dim}: must be even. {TRAP_HINT}")
        if self.aic_num is not None:
            check_int("aic_num", self.aic_num, 1, 256)
        check_int("p1_override", self.p1_override, 0, 1 << 16)
        check_int("p2_override", self.p2_override, 0, 1 << 16)
        if not isinstance(self.calibration, Mapping):
            raise ScenarioError(f"calibration = {self.calibration!r}: must be a table constant -> number")
        cal: dict[str, float] = {}
        for name, v in self.calibration.items():
            if name not in CONSTANTS:
                raise unknown_key("calibration", name, list(CONSTANTS))
            # latencies (``*_us``) may be 0; rates (``*_per_us``), sizes and counts must be > 0
            latency = name.endswith("_us") and not name.endswith("_per_us")
            lo_open = name not in ("b_reuse_load_factor",) and not latency
            cal[name] = check_num(f"calibration.{name}", v, 0.0, None, lo_open=lo_open)
        object.__setattr__(self, "calibration", MappingProxyType(cal))
        object.__setattr__(self, "_config", resolve(self))

    # --------------------------------------------------------------------- derived
    @property
    def config(self) -> Config:
        """Global defaults <- profile <- this scenario, with every cross-field rule checked."""
        return self._config

    def to_dict(self) -> dict[str, Any]:
        """The values set in this scenario (not the profile's), nested like a scenario file."""
        out: dict[str, Any] = {"h": self.h, "hidden_dim": self.hidden_dim}
        if self.profile is not None:
            out["profile"] = self.profile
        if self.aic_num is not None:
            out["aic_num"] = self.aic_num
        if self.p1_override:
            out["p1_override"] = self.p1_override
        if self.p2_override:
            out["p2_override"] = self.p2_override
        wl = {f.name: getattr(self.workload, f.name) for f in dataclasses.fields(Workload)}
        wl = {k: v for k, v in wl.items() if v is not None}
        if wl.get("counts") is not None:
            wl["counts"] = [list(r) for r in wl["counts"]]
        out["workload"] = wl
        for name in ("kernel", "policy", "options"):
            sec = getattr(self, name)
            d = {}
            for f in dataclasses.fields(sec):
                v = getattr(sec, f.name)
                if v is None:
                    continue
                if f.name == "links":
                    v = [lk.as_dict() for lk in v]
                elif isinstance(v, Mapping):
                    v = _plain(v)
                elif isinstance(v, tuple):
                    v = list(v)
                d[f.name] = v
            if d:
                out[name] = d
        if self.calibration:
            out["calibration"] = dict(self.calibration)
        return out

    def with_overrides(self, overrides: Mapping[str, Any]) -> Scenario:
        """A new scenario with dotted-path overrides applied (all or nothing)."""
        return scenario_from_dict(apply_overrides(self.to_dict(), overrides), where="")


def _plain(v: Any) -> Any:
    if isinstance(v, Mapping):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, tuple):
        return list(v)
    return v


# --------------------------------------------------------------------------- resolution
@dataclass(frozen=True)
class CoreGroup:
    cores: tuple[int, ...]
    role: str
    join: str | None = None
    join_from_expert: int = 0


@dataclass(frozen=True)
class LinkCfg:
    producer: str
    consumer: str
    location: str
    depth: int
    readiness: str
    chunks: int
    colocated_by_hardware: bool


@dataclass(frozen=True)
class Config:
    """Every knob resolved (no ``None``), plus the constants in force with their provenance."""

    profile: str | None
    implementation: str
    source_refs: tuple[str, ...]
    h: int
    hidden_dim: int
    aic_num: int
    aiv_per_core: int
    p1_override: int
    p2_override: int
    tile_m: int
    tile_n: int
    tile_k: int
    l1_stages: int
    quant: str
    topo_urma: bool
    swizzle_n: int
    swiglu_segments: str
    combine_small_max_routes: int
    dispatch_lookahead: int
    dispatch_lag: int
    scheduling: str
    wave_packing: str
    core_assignment: str
    links: Mapping[tuple[str, str], LinkCfg]
    combine_granularity: str
    late_bind_pools: tuple[str, ...]
    bandwidth_contention: bool
    core_groups: Mapping[str, CoreGroup]
    event_granularity: Mapping[str, int]
    barriers: str
    builder: str
    tile_grid: str
    roles: Mapping[str, str]
    constants: Mapping[str, Const]

    def c(self, name: str) -> float:
        return self.constants[name].value

    def link(self, producer: str, consumer: str) -> LinkCfg:
        return self.links[(producer, consumer)]

    def compile_point(self) -> dict[str, Any]:
        return {
            "tile_m": self.tile_m,
            "tile_n": self.tile_n,
            "tile_k": self.tile_k,
            "l1_stages": self.l1_stages,
            "quant": self.quant,
            "topo_urma": self.topo_urma,
            "swizzle_n": self.swizzle_n,
        }


REQUIRED_ALWAYS = (
    "cube_mac_per_us_int8",
    "cube_mac_per_us_fp16",
    "gm_l1_bytes_per_us",
    "hbm_bytes_per_us",
    "remote_in_bytes_per_us",
    "remote_out_bytes_per_us",
    "aiv_remote_read_bytes_per_us",
    "aiv_remote_write_bytes_per_us",
    "aiv_local_bytes_per_us",
    "aiv_aggregate_local_bytes_per_us",
    "act_bytes_per_us",
    "act_startup_us",
    "dispatch_call_us",
    "remote_latency_us",
    "flag_latency_us",
    "syncall_us",
    "cross_rank_flag_us",
    "launch_us",
    "front_sort_us_per_route",
    "l1_bytes",
    "bw_unit_bytes_per_us",
    "b_reuse_load_factor",
)
REQUIRED_URMA = ("urma_get_bytes_per_us", "urma_put_bytes_per_us", "urma_op_us")


def resolve(s: Scenario) -> Config:
    raw = deep_merge(GLOBAL_DEFAULTS, PROFILE_DEFAULTS.get(s.profile or "", {}))
    raw = deep_merge(raw, {k: v for k, v in s.to_dict().items() if k not in ("workload", "calibration")})
    kern, pol, opt = raw["kernel"], raw["policy"], raw["options"]
    if "aic_num" not in raw:
        raise ScenarioError(
            "aic_num is not set and no profile gives it: set aic_num (cube cores per die) or a profile"
        )
    aic = int(raw["aic_num"])
    impl = IMPLEMENTATIONS.get(s.profile, IMPLEMENTATIONS[None])

    consts = profile_constants(s.profile)
    for name, value in s.calibration.items():
        consts[name] = Const(
            name, value, CONSTANTS[name][0], "assumed", "set in the scenario's [calibration]"
        )
    needed = list(REQUIRED_ALWAYS) + (list(REQUIRED_URMA) if kern["topo_urma"] else [])
    missing = [n for n in needed if n not in consts]
    if missing:
        why = (
            f"profile {s.profile!r} has no value for"
            if s.profile
            else "without a profile there is no value for"
        )
        extra = (
            " (the PTO A2/A3 kernel has no URMA path)"
            if s.profile == "pto-a2a3" and kern["topo_urma"]
            else ""
        )
        raise ScenarioError(
            f"{why} {', '.join(missing)}{extra}; set them under [calibration] "
            f"(e.g. calibration.{missing[0]} = <{CONSTANTS[missing[0]][0]}>) or pick a profile: "
            f"{', '.join(PROFILES)}"
        )

    # --- tiles fit L1 (double-buffered A and B k-slices)
    bpe = 1 if kern["quant"] == "w8a8" else 2
    l1_need = (kern["tile_m"] + kern["tile_n"]) * kern["tile_k"] * bpe * kern["l1_stages"]
    if l1_need > consts["l1_bytes"].value:
        raise ScenarioError(
            f"kernel tiles do not fit L1: (tile_m {kern['tile_m']} + tile_n {kern['tile_n']}) x tile_k "
            f"{kern['tile_k']} x {bpe} B x l1_stages {kern['l1_stages']} = {l1_need} B > L1 "
            f"{int(consts['l1_bytes'].value)} B; allowed: a geometry within L1"
        )

    # --- links
    links: dict[tuple[str, str], LinkCfg] = {}
    for lk in opt["links"]:
        key = (lk["producer"], lk["consumer"])
        links[key] = LinkCfg(**{f: lk[f] for f in LINK_FIELDS})
    for a, b in EDGES:
        lk = links[(a, b)]
        w = f"options.links[{a}->{b}]"
        if lk.location == "onchip":
            if (a, b) not in (("gmm1", "activation"), ("gmm2", "combine")):
                raise NotModelledError(
                    f"{w}.location = 'onchip': no on-chip path from {a} to {b} is modelled "
                    "(on-chip hand-off exists only through the fixpipe L0C->UB: gmm1->activation, "
                    "gmm2->combine)"
                )
            if not lk.colocated_by_hardware:
                raise ScenarioError(
                    f"{w}: location 'onchip' needs colocated_by_hardware = true (on-chip data never leaves "
                    f"its core)"
                )
            if lk.depth < 1:
                raise ScenarioError(
                    f"{w}.depth = {lk.depth}: an on-chip link needs at least 1 slot; allowed: 1..64"
                )
        else:
            if lk.colocated_by_hardware:
                raise ScenarioError(f"{w}: colocated_by_hardware = true only applies to location 'onchip'")
            if lk.depth != 0:
                hint = "; for dispatch->gmm1 use policy.dispatch_lookahead" if (a, b) == EDGES[0] else ""
                raise NotModelledError(
                    f"{w}.depth = {lk.depth}: a bounded GM workspace is not modelled (allowed: 0 = "
                    f"unbounded){hint}"
                )
        if lk.readiness == "per_chunk":
            if (a, b) != ("activation", "gmm2"):
                raise NotModelledError(
                    f"{w}.readiness = 'per_chunk': not modelled on this edge (allowed on activation->gmm2 "
                    f"only)"
                )
            if links[("gmm1", "activation")].location != "onchip":
                raise NotModelledError(
                    f"{w}.readiness = 'per_chunk' needs per-tile activation (gmm1->activation on-chip): with "
                    "segment activation every activation event covers all K columns, so chunks would "
                    "change nothing"
                )
            if lk.chunks < 2:
                raise ScenarioError(f"{w}.chunks = {lk.chunks}: per_chunk readiness needs chunks >= 2")
        elif lk.chunks != 1:
            raise NotModelledError(
                f"{w}.chunks = {lk.chunks}: chunks are only read with readiness = 'per_chunk'"
            )
    onchip_act = links[("gmm1", "activation")].location == "onchip"
    if onchip_act and "swiglu_segments" in s.to_dict().get("kernel", {}):
        raise NotModelledError(
            "kernel.swiglu_segments is set but gmm1->activation is on-chip (activation runs per GMM1 tile); "
            "segments only apply to a GM hand-off"
        )
    if kern["topo_urma"] and links[("gmm2", "combine")].location == "onchip":
        raise NotModelledError(
            "options.links[gmm2->combine] on-chip with kernel.topo_urma: URMA combine PUTs are batched per "
            "wave from GM"
        )

    if opt["barriers"] == "staged" and any(lk.location == "onchip" for lk in links.values()):
        raise ScenarioError(
            "options.barriers = 'staged' with an on-chip link: the producer stage cannot finish while its "
            "on-chip slots wait for a consumer held behind the barrier (a deadlock); allowed: 'fused', "
            "or GM links"
        )
    # --- core groups
    groups = _resolve_groups(opt["core_groups"], opt["roles"], aic, s.workload.local_experts)
    eg = dict.fromkeys(STAGES, 1)
    eg.update(dict(opt["event_granularity"]))
    late = tuple(opt["late_bind_pools"])
    if eg["combine"] != 1 and opt["combine_granularity"] == "per_tile" and not kern["topo_urma"]:
        raise NotModelledError(
            f"options.event_granularity.combine = {eg['combine']}: packing per-tile combine windows is not "
            "modelled; it applies to combine_granularity 'per_expert' (or 'auto' on the large path) and URMA"
        )
    for name, kind in (
        ("scheduling", "policy"),
        ("wave_packing", "wave_packer"),
        ("core_assignment", "core_assignment"),
    ):
        _check_registered(f"policy.{name}", pol[name], kind)
    _check_registered("options.builder", opt["builder"], "builder")
    _check_registered("options.tile_grid", opt["tile_grid"], "tile_grid")
    look, lag = pol["dispatch_lookahead"], pol["dispatch_lag"]
    if look and lag is not None and lag >= look:
        # GMM1 of wave w would wait for dispatch of wave w + lag, which waits for GMM1 of wave
        # w + lag - lookahead >= w: a cycle, not a slow schedule
        raise ScenarioError(
            f"policy.dispatch_lag = {lag} with policy.dispatch_lookahead = {look}: the lag must be "
            f"smaller than the look-ahead (allowed: 0 <= dispatch_lag < {look}), or set "
            f"dispatch_lookahead = 0 for no limit"
        )
    return Config(
        profile=s.profile,
        implementation=impl["id"],
        source_refs=tuple(impl["source_refs"]),
        h=s.h,
        hidden_dim=s.hidden_dim,
        aic_num=aic,
        aiv_per_core=int(raw["aiv_per_core"]),
        p1_override=s.p1_override,
        p2_override=s.p2_override,
        tile_m=kern["tile_m"],
        tile_n=kern["tile_n"],
        tile_k=kern["tile_k"],
        l1_stages=kern["l1_stages"],
        quant=kern["quant"],
        topo_urma=kern["topo_urma"],
        swizzle_n=kern["swizzle_n"],
        swiglu_segments=kern["swiglu_segments"],
        combine_small_max_routes=kern["combine_small_max_routes"],
        dispatch_lookahead=pol["dispatch_lookahead"],
        dispatch_lag=pol["dispatch_lag"],
        scheduling=pol["scheduling"],
        wave_packing=pol["wave_packing"],
        core_assignment=pol["core_assignment"],
        links=MappingProxyType(links),
        combine_granularity=opt["combine_granularity"],
        late_bind_pools=late,
        bandwidth_contention=opt["bandwidth_contention"],
        core_groups=MappingProxyType(groups),
        event_granularity=MappingProxyType(eg),
        barriers=opt["barriers"],
        builder=opt["builder"],
        tile_grid=opt["tile_grid"],
        roles=MappingProxyType(dict(opt["roles"])),
        constants=MappingProxyType(consts),
    )


def _resolve_groups(raw: Any, roles: Mapping[str, str], aic: int, experts: int) -> dict[str, CoreGroup]:
    every = tuple(range(aic))
    shared = {
        "gmm1": CoreGroup(every, "AIC"),
        "gmm2": CoreGroup(every, "AIC"),
        **{st: CoreGroup(every, roles.get(st, "AIV")) for st in VECTOR_STAGES},
    }
    if raw == "shared":
        return shared
    if raw == "v1_fixed":
        # hardware.md §2 "V1 fixed groups" at 24 AIC: GMM1 on AIC 0..15, GMM2 on 16..23 joined by the
        # GMM1 group once GMM1 is done (from expert E-3 on), dispatch on AIV0 and SwiGLU on AIV1 of
        # blocks 0..15, combine on AIV0 of blocks 16..23. Other core counts keep the 2:1 split.
        if aic < 3:
            raise ScenarioError(f"options.core_groups = 'v1_fixed' needs aic_num >= 3, got {aic}")
        n1 = round(aic * 2 / 3)
        g1, g2 = tuple(range(n1)), tuple(range(n1, aic))
        return {
            "gmm1": CoreGroup(g1, "AIC"),
            "gmm2": CoreGroup(g2, "AIC", join="gmm1", join_from_expert=max(0, experts - 3)),
            "dispatch": CoreGroup(g1, "AIV0"),
            "activation": CoreGroup(g1, "AIV1"),
            "combine": CoreGroup(g2, "AIV0"),
        }
    out = dict(shared)
    for st, g in dict(raw).items():
        base = shared[st]
        cores = tuple(g.get("cores", base.cores))
        bad = [c for c in cores if c >= aic]
        if bad:
            raise ScenarioError(
                f"options.core_groups.{st}.cores names core(s) {bad}; allowed: 0..{aic - 1} (aic_num = {aic})"
            )
        join = g.get("join")
        out[st] = CoreGroup(cores, g.get("role", base.role), join, int(g.get("join_from_expert", 0)))
    for st, g in out.items():
        if g.join is None and g.join_from_expert:
            raise ScenarioError(
                f"options.core_groups.{st}.join_from_expert = {g.join_from_expert}: has no effect without "
                f"options.core_groups.{st}.join; set join (the stage whose cores this group takes over) "
                f"or leave join_from_expert at 0"
            )
        if g.join is not None and st in VECTOR_STAGES:
            raise NotModelledError(
                f"options.core_groups.{st}.join = {g.join!r}: joining another group's cores is modelled "
                f"for the GMM stages only (the V1 kernel's GMM2 group taking over GMM1's cores); "
                f"allowed for {st}: no join"
            )
        if g.join is not None and (st in CUBE_STAGES) != (g.join in CUBE_STAGES):
            raise ScenarioError(
                f"options.core_groups.{st}.join = {g.join!r}: a group can only join a stage on the same "
                f"kind of unit "
                f"(cube stages: {', '.join(CUBE_STAGES)}; vector stages: {', '.join(VECTOR_STAGES)})"
            )
    return out


# --------------------------------------------------------------------------- dict / file / overrides
def scenario_from_dict(data: Mapping[str, Any], where: str = "") -> Scenario:
    """Build a :class:`Scenario` from a nested mapping (a parsed scenario file)."""
    pre = f"{where}: " if where else ""
    try:
        if not isinstance(data, Mapping):
            raise ScenarioError(f"a scenario must be a table, got {type(data).__name__}")
        for key in data:
            if key not in TOP_FIELDS:
                raise unknown_key("", key, TOP_FIELDS)
        for need in ("workload", "h", "hidden_dim"):
            if need not in data:
                hint = f" ({TRAP_HINT})" if need in ("h", "hidden_dim") else ""
                raise ScenarioError(f"missing field {need!r}{hint}")
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key in SECTIONS:
                kwargs[key] = _section(key, SECTIONS[key], value)
            elif key == "calibration":
                if not isinstance(value, Mapping):
                    raise ScenarioError(f"calibration = {value!r}: must be a table constant -> number")
                kwargs[key] = dict(value)
            else:
                kwargs[key] = value
        return Scenario(**kwargs)
    except ScenarioError as exc:
        raise type(exc)(pre + str(exc)) from None


def _section(name: str, cls: type, value: Any) -> Any:
    if not isinstance(value, Mapping):
        raise ScenarioError(f"[{name}] must be a table, got {value!r}")
    names = [f.name for f in dataclasses.fields(cls)]
    for key in value:
        if key not in names:
            raise unknown_key(name, key, names)
    if cls is Workload:
        for need in ("tokens", "topk", "world", "local_experts"):
            if need not in value:
                raise ScenarioError(f"missing field 'workload.{need}'")
    return cls(**dict(value))


_SCHEMA: dict[str, Any] = {
    "profile": None,
    "h": None,
    "hidden_dim": None,
    "aic_num": None,
    "p1_override": None,
    "p2_override": None,
    "workload": {f.name: None for f in dataclasses.fields(Workload)},
    "kernel": {f.name: None for f in dataclasses.fields(Kernel)},
    "policy": {f.name: None for f in dataclasses.fields(PolicyConfig)},
    "calibration": dict.fromkeys(CONSTANTS),
    "options": {
        **dict.fromkeys(OPTION_FIELDS),
        "event_granularity": dict.fromkeys(STAGES),
        "roles": dict.fromkeys(VECTOR_STAGES),
        "core_groups": {st: dict.fromkeys(CORE_GROUP_FIELDS) for st in STAGES},
    },
}


def apply_overrides(data: Mapping[str, Any], overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """A deep copy of ``data`` with each ``"dotted.path": value`` set; unknown paths fail."""
    out = _deepcopy(data)
    for path, value in (overrides or {}).items():
        if not isinstance(path, str) or not path:
            raise ScenarioError(f"override path {path!r}: must be a dotted path such as 'kernel.tile_n'")
        parts = path.split(".")
        schema: Any = _SCHEMA
        node = out
        for depth, part in enumerate(parts):
            where = ".".join(parts[:depth])
            if not isinstance(schema, dict):
                raise ScenarioError(f"override {path!r}: {where!r} is a value, not a table")
            if part not in schema:
                raise unknown_key(where, part, list(schema))
            schema = schema[part]
            if depth == len(parts) - 1:
                node[part] = value
            else:
                nxt = node.get(part)
                if nxt is None:
                    nxt = {}
                elif not isinstance(nxt, dict):
                    # e.g. core_groups = "v1_fixed" then a per-stage override: start a table
                    nxt = {}
                node[part] = nxt
                node = nxt
    return out


def _deepcopy(v: Any) -> Any:
    if isinstance(v, Mapping):
        return {k: _deepcopy(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_deepcopy(x) for x in v]
    return v


def parse_override_value(text: str) -> Any:
    """A command-line value: a TOML literal (``128``, ``true``, ``"x"``, ``[1, 2]``) or a bare string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def load_scenario(path: str | os.PathLike[str], overrides: Mapping[str, Any] | None = None) -> Scenario:
    """Read a scenario TOML file, apply dotted-path ``overrides``, validate, return a Scenario.

    Relative ``workload.file`` paths are taken relative to the scenario file.
    """
    p = os.fspath(path)
    try:
        with open(p, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ScenarioError(f"{p}: no such scenario file") from None
    except OSError as exc:
        raise ScenarioError(f"{p}: cannot read the scenario file: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{p}: not valid TOML: {exc}") from None
    try:
        data = apply_overrides(data, overrides)
    except ScenarioError as exc:
        raise ScenarioError(f"{p}: override: {exc}") from None
    wl = data.get("workload")
    if isinstance(wl, dict) and isinstance(wl.get("file"), str) and not os.path.isabs(wl["file"]):
        wl["file"] = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(p)), wl["file"]))
    return scenario_from_dict(data, where=p)
