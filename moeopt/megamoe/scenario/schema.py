"""The scenario's schema: the sections a user writes, their field tables and checks, and the
resolved :class:`Config`.

Each section (:class:`Workload`, :class:`Kernel`, :class:`PolicyConfig`, :class:`Options` with
its :class:`Link` list) checks its own fields when it is made, with the checks of
:mod:`moeopt.fields`; :class:`Scenario` checks the top-level fields and resolves itself
(:mod:`moeopt.megamoe.scenario.resolve`). ``None`` in a section means "the profile's value".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from moeopt.fields import Fields
from moeopt.megamoe.config.profiles import CONSTANTS, PROFILES
from moeopt.megamoe.config.provenance import Const, RecordingValues, record
from moeopt.megamoe.errors import NotModelledError, ScenarioError
from moeopt.plain import plain

STAGES = ("dispatch", "gmm1", "activation", "gmm2", "combine")
VECTOR_STAGES = ("dispatch", "activation", "combine")
CUBE_STAGES = ("gmm1", "gmm2")
EDGES = (("dispatch", "gmm1"), ("gmm1", "activation"), ("activation", "gmm2"), ("gmm2", "combine"))
ROUTINGS = ("uniform", "cyclic", "random", "zipf", "explicit", "file")
QUANTS = ("w8a8", "bf16")
NOT_MODELLED_QUANTS = {"w4a8": "the int4 dequantisation cost of the a8w4 kernel is not modelled"}
ROLES = ("AIC", "AIV0", "AIV1", "AIV")
SEEDED_ROUTINGS = ("random", "zipf")
WORKLOAD_DEFAULTS: dict[str, Any] = {"seed": 0, "zipf_skew": 1.2}
"""What the sampled routings use for ``workload.seed`` / ``workload.zipf_skew`` left out (``None``)."""

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
FIELDS = Fields(
    ScenarioError,
    quote_choices=True,
    sort_fields=True,
    key_hints={k: f"{v}. {TRAP_HINT}" for k, v in KEY_HINTS.items()},
)
"""The checks of a scenario's fields (see :mod:`moeopt.fields`); the h / hidden_dim trap names
its own hint in place of the list of fields."""
check_int = FIELDS.integer
check_num = FIELDS.number
check_choice = FIELDS.choice
check_bool = FIELDS.boolean
unknown_key = FIELDS.unknown


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

    ``seed`` is read by ``random`` and ``zipf`` only, ``zipf_skew`` by ``zipf`` only; ``None``
    (left out) is :data:`WORKLOAD_DEFAULTS`, and a value the routing would not read is refused.
    """

    tokens: int
    topk: int
    world: int
    local_experts: int
    routing: str = "uniform"
    seed: int | None = None
    zipf_skew: float | None = None
    counts: tuple[tuple[int, ...], ...] | None = None
    file: str | None = None
    shared_expert_num: int = 0

    @property
    def routing_seed(self) -> int:
        """The seed the sampled routings use (``seed``, or its default when left out)."""
        return int(WORKLOAD_DEFAULTS["seed"] if self.seed is None else self.seed)

    @property
    def skew(self) -> float:
        """The zipf skew in force (``zipf_skew``, or its default when left out)."""
        return float(WORKLOAD_DEFAULTS["zipf_skew"] if self.zipf_skew is None else self.zipf_skew)

    def __post_init__(self) -> None:
        w = "workload"
        check_int(f"{w}.tokens", self.tokens, 1, 1 << 20)
        check_int(f"{w}.world", self.world, 1, 1024)
        check_int(f"{w}.local_experts", self.local_experts, 1, 1024)
        check_int(f"{w}.topk", self.topk, 1, self.world * self.local_experts)
        check_choice(f"{w}.routing", self.routing, ROUTINGS)
        if self.seed is not None:
            check_int(f"{w}.seed", self.seed, 0)
            if self.routing not in SEEDED_ROUTINGS:
                raise FIELDS.unread(
                    f"{w}.seed",
                    self.seed,
                    f"{w}.routing = {self.routing!r} (only the sampled routings read a seed)",
                    f"{w}.routing = 'random' or 'zipf'",
                    NotModelledError,
                )
        if self.zipf_skew is not None:
            check_num(f"{w}.zipf_skew", self.zipf_skew, 0.0, 10.0, lo_open=True)
            if self.routing != "zipf":
                raise FIELDS.unread(
                    f"{w}.zipf_skew",
                    self.zipf_skew,
                    f"{w}.routing = {self.routing!r} (only 'zipf' reads a skew)",
                    f"{w}.routing = 'zipf'",
                    NotModelledError,
                )
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
    front_reorder: str | None = None

    def __post_init__(self) -> None:
        k = "kernel"
        if self.front_reorder is not None:
            check_choice(f"{k}.front_reorder", self.front_reorder, ("single", "kernel_rule"))
        if self.tile_m is not None:
            check_int(f"{k}.tile_m", self.tile_m, 16, 1024, multiple=16)
        if self.tile_n is not None:
            check_int(f"{k}.tile_n", self.tile_n, 16, 4096, multiple=16)
        if self.tile_k is not None:
            check_int(f"{k}.tile_k", self.tile_k, 32, 8192, multiple=32)
        if self.l1_stages is not None:
            stages = self.l1_stages
            if isinstance(stages, int) and not isinstance(stages, bool) and stages > 2:
                raise NotModelledError(
                    f"{k}.l1_stages = {self.l1_stages}: a third L1 stage does not change a steady K-step "
                    "pipeline (the kernel builds 2, gmm_common.h L22-23), and what it would absorb "
                    "(jitter of single loads) is not modelled; allowed: 1 (no load / compute overlap) or 2"
                )
            check_int(f"{k}.l1_stages", self.l1_stages, 1, 2)
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
    limit); ``dispatch_lag``: GMM1 of wave w waits until dispatch of wave w + lag is in;
    ``core_cursor``: the core-assignment rule's state (the rolling start core) restarts at each
    GMM stage (``per_stage``) or rolls on from GMM1 into GMM2 (``across_stages``);
    ``restructure``: a registered runtime restructuring rule (``none``; ``core_queues``: the
    pinned GMM tiles in a queue per core; ``idle_core_stealing``: the queues, and an idle core
    takes the last queued tile of the busiest one; see :mod:`moeopt.megamoe.stealing`).
    """

    dispatch_lookahead: int | None = None
    dispatch_lag: int | None = None
    scheduling: str | None = None
    wave_packing: str | None = None
    core_assignment: str | None = None
    core_cursor: str | None = None
    restructure: str | None = None

    def __post_init__(self) -> None:
        p = "policy"
        if self.core_cursor is not None:
            check_choice(f"{p}.core_cursor", self.core_cursor, CORE_CURSORS)
        if self.dispatch_lookahead is not None:
            check_int(f"{p}.dispatch_lookahead", self.dispatch_lookahead, 0, 1024)
        if self.dispatch_lag is not None:
            check_int(f"{p}.dispatch_lag", self.dispatch_lag, 0, 1024)
        for name, kind in (
            ("scheduling", "policy"),
            ("wave_packing", "wave_packer"),
            ("core_assignment", "core_assignment"),
            ("restructure", "restructure"),
        ):
            v = getattr(self, name)
            if v is not None:
                check_registered(f"{p}.{name}", v, kind)


def check_registered(where: str, value: Any, kind: str) -> None:
    """``value`` names a registered part of ``kind`` (the built-in ones are registered first)."""
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
    "sync_protocol",
    "gmm1_full_experts",
    "gmm2_join_check",
    "combine_start_after",
    "swiglu_active",
    "unpermute",
    "unpermute_ready_experts",
    "gmm1_small_m_rebalance",
    "orchestration",
)
ORCHESTRATIONS = ("waves", "layered")
SYNC_PROTOCOLS = ("hardware_flags", "software_epochs")
CORE_CURSORS = ("per_stage", "across_stages")
UNPERMUTE_MODES = ("rank_barrier", "two_phase")
COMBINE_GRANULARITIES = ("per_tile", "per_expert", "by_source", "auto")
CORE_GROUP_FIELDS = ("cores", "role", "join", "join_from_expert")


@dataclass(frozen=True)
class Options:
    """Orchestration knobs. ``None`` = the profile's value.

    * ``links``: stage edges (see :class:`Link`); listed links replace the profile's link fields.
    * ``combine_granularity``: ``per_tile`` (a window per GMM2 tile), ``per_expert`` (rows of a
      whole expert slice by source rank, in lanes over the combine cores), ``by_source`` (the V1
      kernel: each combine core writes back whole rows of its source ranks, expert after
      expert) or ``auto`` (the baseline kernel's small-path rule).
    * ``late_bind_pools``: roles whose events bind to a core at dispatch time (``AIC``, ``AIV0``,
      ``AIV1``, ``AIV``); the others are pinned at build time by ``policy.core_assignment``.
    * ``bandwidth_contention``: aggregate HBM / cross-rank limits as shared semaphores (false =
      the seed's contention-free model).
    * ``core_groups``: ``shared`` (every stage on every core), ``v1_fixed`` (the kernel's V1
      fixed groups) or a table ``stage -> {cores, role, join, join_from_expert}``.
    * ``event_granularity``: ``stage -> units per event`` (vector stages).
    * ``barriers``: ``fused`` (per-wave flags) or ``staged`` (an all-core barrier between stages).
    * ``roles``: ``stage -> AIV0 | AIV1 | AIV`` for the vector stages.
    * ``sync_protocol``: ``hardware_flags`` (the baseline kernel: cross-core hard flags, an
      all-AIV SYNCALL after every dispatched expert group and around SwiGLU segments, an all-rank
      barrier before unpermute) or ``software_epochs`` (the V1 kernel: arrival / coordinator /
      ready epochs in GM, no all-AIV SYNCALL).
    * ``gmm1_full_experts``: the first experts GMM1 runs on every cube core (its own group and
      GMM2's), with an AIC-only SYNCALL after each (V1: 2).
    * ``gmm2_join_check``: ``none`` (a GMM2 group's join, if any, takes effect from the core
      group's ``join_from_expert``), ``kernel_rule`` or an expert index: from that expert on, at
      each expert boundary GMM2 checks whether GMM1 is done and, once it is, the GMM1 cores join.
    * ``combine_start_after``: ``none``, ``kernel_rule`` or a GMM2 expert index combine waits for
      before it starts expert 0.
    * ``swiglu_active``: ``all``, ``kernel_rule`` or how many of the activation group's cores take
      rows.
    * ``unpermute``: ``rank_barrier`` (every AIV after every rank's combine) or ``two_phase``
      (the dispatch and SwiGLU cores first, on the tokens whose routes are all back, then all).
    * ``unpermute_ready_experts``: ``two_phase``: combine progress (experts) every producer rank
      reaches before phase 1 starts.
    * ``gmm1_small_m_rebalance``: cut a GMM1 expert with one M-tile and fewer tiles than cores
      into one N slice per core (32-column units).
    * ``orchestration``: ``waves`` (GMM1 waves of m-groups, then GMM2 waves, each stage over all
      its waves) or ``layered`` (the URMA kernel's macro waves: ranges of whole experts, each
      received, computed through GMM1 and GMM2 and combined before the next; needs
      ``kernel.topo_urma``).
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
    sync_protocol: str | None = None
    gmm1_full_experts: int | None = None
    gmm2_join_check: str | int | None = None
    combine_start_after: str | int | None = None
    swiglu_active: str | int | None = None
    unpermute: str | None = None
    unpermute_ready_experts: int | None = None
    gmm1_small_m_rebalance: bool | None = None
    orchestration: str | None = None

    def __post_init__(self) -> None:
        o = "options"
        self._check_v1_knobs(o)
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
                f"{o}.combine_granularity", self.combine_granularity, COMBINE_GRANULARITIES
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
            check_registered(f"{o}.builder", self.builder, "builder")
        if self.tile_grid is not None:
            check_registered(f"{o}.tile_grid", self.tile_grid, "tile_grid")
        if self.roles is not None:
            if not isinstance(self.roles, Mapping):
                raise ScenarioError(f"{o}.roles = {self.roles!r}: must be a table stage -> role")
            for st, role in self.roles.items():
                if st not in VECTOR_STAGES:
                    raise unknown_key(f"{o}.roles", st, VECTOR_STAGES)
                check_choice(f"{o}.roles.{st}", role, ("AIV0", "AIV1", "AIV"))
            object.__setattr__(self, "roles", MappingProxyType(dict(self.roles)))
        if self.orchestration is not None:
            check_choice(f"{o}.orchestration", self.orchestration, ORCHESTRATIONS)

    def _check_v1_knobs(self, o: str) -> None:
        """The orchestration knobs that reach the V1 kernel from the baseline (one rule each)."""
        if self.sync_protocol is not None:
            check_choice(f"{o}.sync_protocol", self.sync_protocol, SYNC_PROTOCOLS)
        if self.gmm1_full_experts is not None:
            check_int(f"{o}.gmm1_full_experts", self.gmm1_full_experts, 0, 1 << 20)
        if self.gmm2_join_check is not None:
            _rule_or_int(f"{o}.gmm2_join_check", self.gmm2_join_check, ("none", "kernel_rule"), 0)
        if self.combine_start_after is not None:
            _rule_or_int(f"{o}.combine_start_after", self.combine_start_after, ("none", "kernel_rule"), 0)
        if self.swiglu_active is not None:
            _rule_or_int(f"{o}.swiglu_active", self.swiglu_active, ("all", "kernel_rule"), 1)
        if self.unpermute is not None:
            check_choice(f"{o}.unpermute", self.unpermute, UNPERMUTE_MODES)
        if self.unpermute_ready_experts is not None:
            check_int(f"{o}.unpermute_ready_experts", self.unpermute_ready_experts, 1, 1 << 20)
        if self.gmm1_small_m_rebalance is not None:
            check_bool(f"{o}.gmm1_small_m_rebalance", self.gmm1_small_m_rebalance)


def _rule_or_int(where: str, v: Any, words: tuple[str, ...], lo: int) -> Any:
    """A knob that is one of ``words`` or a whole number ``>= lo``."""
    if isinstance(v, str):
        return check_choice(where, v, words)
    if isinstance(v, bool) or not isinstance(v, int):
        raise ScenarioError(
            f"{where} = {v!r}: must be {' or '.join(repr(w) for w in words)} or a whole number >= {lo}"
        )
    return check_int(where, v, lo, 1 << 20)


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
            # latencies (``*_us``) and shares may be 0; rates (``*_per_us``), sizes and counts must be > 0
            latency = name.endswith("_us") and not name.endswith("_per_us")
            lo_open = name not in ("b_reuse_load_factor", "remote_write_excess_share") and not latency
            cal[name] = float(check_num(f"calibration.{name}", v, 0.0, None, lo_open=lo_open))
        object.__setattr__(self, "calibration", MappingProxyType(cal))
        # the cross-field rules read this module's classes, so they are imported when first needed
        from moeopt.megamoe.scenario.resolve import resolve

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
                    v = plain(v)
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
        from moeopt.megamoe.scenario.files import apply_overrides, scenario_from_dict

        return scenario_from_dict(apply_overrides(self.to_dict(), overrides), where="")


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
    front_reorder: str
    dispatch_lookahead: int
    dispatch_lag: int
    scheduling: str
    wave_packing: str
    core_assignment: str
    core_cursor: str
    restructure: str  # the registered runtime restructuring rule (none: nothing moves)
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
    sync_protocol: str
    gmm1_full_experts: int
    gmm2_join_check: int | None  # resolved: the first expert GMM2 checks GMM1 done at (None: no dynamic join)
    combine_start_after: int | None  # resolved: the GMM2 expert combine waits for first (None: none)
    swiglu_active: int  # resolved: activation cores that take rows
    unpermute: str
    unpermute_ready_experts: int
    gmm1_small_m_rebalance: bool
    orchestration: str  # waves or layered (the URMA kernel's macro waves of whole experts)
    routing: str  # the workload's routing mode (the two-phase unpermute reads token-level routing)
    constants: Mapping[str, Const]

    def c(self, name: str) -> float:
        """The value of constant ``name`` (noted as used by the run that reads it)."""
        record(name)
        return self.constants[name].value

    def constant_values(self) -> Mapping[str, float]:
        """Every constant's value by name, noting each one read (what the builder reads)."""
        return RecordingValues(self.constants)

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


# Every dotted path an override may set: a nested table per section, ``None`` for a value.
OVERRIDE_SCHEMA: dict[str, Any] = {
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
