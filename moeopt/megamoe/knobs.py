"""The knob catalogue: every dotted path a scenario accepts, derived from the scenario schema.

:func:`knob_catalogue` walks the override schema of :mod:`moeopt.megamoe.scenario` (the same
table ``--set`` and :meth:`Scenario.with_overrides` check paths against), so a field added to
a scenario dataclass appears here without a second list to maintain. For each path:

* ``type``: from the dataclass annotation (``int``, ``str``, ``bool``, ...), or, for
  calibration constants, ``float`` with the constant's unit;
* ``allowed``: what the validators accept, read from the validators themselves: the path is
  set to values that must fail (a string where a number is expected, a number out of any range,
  an unknown name) and the one-line error the scenario layer gives is kept, so the text cannot
  drift from the checks;
* ``default``: the value without a profile (``GLOBAL_DEFAULTS`` or the dataclass default, or
  the no-profile constant), with every profile's own value in ``profile_defaults``;
* ``doc``: one line of meaning (:data:`KNOB_DOCS`; a test keeps it in step with the schema).

The knob audit (:mod:`moeopt.trust.audit`) walks exactly this catalogue.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from moeopt.megamoe import scenario as sc
from moeopt.megamoe.config.profiles import (
    CONSTANTS,
    GLOBAL_DEFAULTS,
    PROFILE_DEFAULTS,
    PROFILES,
    profile_constants,
)
from moeopt.megamoe.errors import NotModelledError, ScenarioError
from moeopt.megamoe.scenario import schema
from moeopt.plain import plain

# One line of meaning per schema path (calibration constants take theirs from CONSTANTS).
# tests/megamoe/test_knobs.py checks that this table covers the schema exactly.
KNOB_DOCS: dict[str, str] = {
    "profile": "named bundle of constants and knob defaults reproducing one implementation (none = fewest "
    "assumptions)",
    "h": "model hidden size = GMM1's K and GMM2's N",
    "hidden_dim": "GMM1's output width = 2 x intermediate size (SwiGLU gate + up); GMM2's K = hidden_dim / 2",
    "aic_num": "cube cores of one die (one AIC and aiv_per_core AIV per core)",
    "p1_override": "m-groups per GMM1 wave (0 = the kernel's bucket rule, one local expert per wave)",
    "p2_override": "m-groups per GMM2 wave (0 = the kernel's bucket rule)",
    "workload.tokens": "tokens per rank",
    "workload.topk": "experts each token is routed to",
    "workload.world": "ranks (expert-parallel world size)",
    "workload.local_experts": "experts per rank",
    "workload.routing": "how routes are spread over experts (uniform, cyclic, seeded random / zipf, "
    "explicit, file)",
    "workload.seed": "seed of the random and zipf routings (refused with any other routing)",
    "workload.zipf_skew": "zipf routing: expert popularity ~ 1 / rank ** skew (refused with another routing)",
    "workload.counts": "explicit routing: counts[src_rank][global_expert] matrix",
    "workload.file": "file routing: TOML/JSON file with counts or expert ids",
    "workload.shared_expert_num": "shared experts every token of the rank also passes through, locally",
    "kernel.tile_m": "GMM output tile rows (M)",
    "kernel.tile_n": "GMM output tile columns (N)",
    "kernel.tile_k": "K step of one L1 load",
    "kernel.l1_stages": "L1 buffers per tile load pipeline (2 = double buffering)",
    "kernel.quant": "quantisation mode of the GMMs (cube rate and bytes per element)",
    "kernel.topo_urma": "communication topology: false = peer write, true = URMA batched GET/PUT with the "
    "AIV1 program-order chain (megamoe-a8w8; the PTO profiles' kernel has no URMA path and refuses true)",
    "kernel.swizzle_n": "N-columns per swizzle group (B-panel reuse across adjacent tiles)",
    "kernel.swiglu_segments": "how activation over GM is cut: the kernel's rule, per expert, or one segment",
    "kernel.front_reorder": "front reorder as one closed form (single) or the PTO kernel's three paths, "
    "FullLoad / OneCore / MultiCore (kernel_rule)",
    "kernel.combine_small_max_routes": "tokens x topk up to which combine takes the small (per-tile) path "
    "under combine_granularity auto (refused with another granularity or URMA)",
    "policy.dispatch_lookahead": "dispatch may run at most this many waves ahead of GMM1 (0 = no limit; "
    "refused with staged barriers)",
    "policy.dispatch_lag": "GMM1 of wave w waits until dispatch of wave w + lag is in",
    "policy.scheduling": "ready-set selection rule of the greedy list scheduler",
    "policy.wave_packing": "how experts are packed into waves",
    "policy.core_assignment": "build-time tile -> core rule for statically pinned pools",
    "policy.restructure": "runtime restructuring rule: none, core_queues (pinned GMM tiles queued per core), "
    "or idle_core_stealing (the queues, and an idle core takes the last queued tile of the busiest one)",
    "options.links": "stage edges: location (gm / onchip), depth (slots), readiness (whole / per_chunk), "
    "chunks, colocated_by_hardware",
    "options.combine_granularity": "combine window: per GMM2 tile, per expert slice in lanes, whole rows by "
    "source rank (V1), or the baseline kernel's small-path rule (auto)",
    "options.late_bind_pools": "roles whose events bind to a core at dispatch time (the others are pinned at "
    "build time)",
    "options.bandwidth_contention": "aggregate HBM / cross-rank limits as shared semaphores (false = the "
    "seed's contention-free model)",
    "options.core_groups": "which cores run each stage: shared, v1_fixed, or a table per stage",
    "options.event_granularity": "units one event packs, per stage",
    "options.barriers": "stage boundaries: fused per-wave flags or staged all-core barriers",
    "options.builder": "registered orchestration builder that lowers the plan into events",
    "options.tile_grid": "registered rule cutting an expert's output into tiles",
    "options.roles": "vector role (AIV0, AIV1 or both) per vector stage",
    "policy.core_cursor": "the core-assignment cursor restarts at each GMM stage (per_stage, the PTO kernel) "
    "or rolls on from GMM1 into GMM2 (across_stages, the arch35 kernel)",
    "options.sync_protocol": "how stages signal each other: hardware flags + all-AIV SYNCALLs (baseline) or "
    "software epochs in GM (V1)",
    "options.gmm1_full_experts": "first experts GMM1 runs on every cube core, an AIC-only SYNCALL after each "
    "(V1: 2)",
    "options.gmm2_join_check": "first expert at whose boundary GMM2 checks whether GMM1 is done to take over "
    "its cores (none, kernel_rule or an expert)",
    "options.combine_start_after": "GMM2 expert combine waits for before starting expert 0 (none, "
    "kernel_rule or an expert)",
    "options.swiglu_active": "activation cores that take rows (all, kernel_rule or a count; refused with "
    "gmm1->activation on-chip, where each tile's activation runs on its own core)",
    "options.unpermute": "unpermute after an all-rank barrier, or in two phases on ready tokens first (V1)",
    "options.unpermute_ready_experts": "two-phase unpermute: combine progress every producer reaches before "
    "phase 1",
    "options.gmm1_small_m_rebalance": "cut a one-M-tile GMM1 expert into one N slice per core (V1's small-M "
    "rule)",
    "options.orchestration": "waves of m-groups stage by stage, or the URMA kernel's layered macro waves "
    "(ranges of whole experts, each received, computed and combined in turn; needs kernel.topo_urma)",
    "options.event_granularity.*": "units of this stage packed into one event",
    "options.roles.*": "vector role running this stage",
    "options.core_groups.*": "core group of this stage",
    "options.core_groups.*.cores": "cores of this stage's group ('0-15', '0-3,8' or a list)",
    "options.core_groups.*.role": "execution role of this stage's group",
    "options.core_groups.*.join": "stage whose group this one joins once its own work is done",
    "options.core_groups.*.join_from_expert": "local expert from which the join takes effect",
}


@dataclass(frozen=True, slots=True)
class Knob:
    """One dotted path of a scenario (as ``--set PATH=VALUE`` takes it) and what it accepts."""

    path: str
    section: str
    type: str
    allowed: str
    default: Any
    doc: str
    profile_defaults: Mapping[str, Any] = field(default_factory=dict)
    unit: str = ""

    @property
    def is_constant(self) -> bool:
        return self.section == "calibration"


_BASE: dict[str, Any] = {
    "profile": "megamoe-a8w8",
    "h": 512,
    "hidden_dim": 512,
    "workload": {"tokens": 8, "topk": 2, "world": 2, "local_experts": 2},
}
# Values that every validator must refuse for some reason: a string where a number is expected,
# an unknown name where a choice is, numbers outside any range, a non-integer.
_PROBES: tuple[Any, ...] = ("\u00bf?", 1 << 40, -(1 << 40), 1.5, ["\u00bf?"], {"\u00bf?": 1})


def _probe(path: str, value: Any, base: Mapping[str, Any] = _BASE) -> str | None:
    """The scenario layer's message for ``path = value`` (``None``: accepted)."""
    try:
        sc.scenario_from_dict(sc.apply_overrides(base, {path: value}))
    except NotModelledError as exc:
        return "not modelled: " + _tail(str(exc), path)
    except ScenarioError as exc:
        return _tail(str(exc), path)
    except (TypeError, ValueError):
        # a validator that assumed a scalar (e.g. a list where a name is expected): no rule text
        return ""
    return None


def _tail(msg: str, path: str) -> str:
    """The part of an error after ``where = value: `` (the rule, not the probe value)."""
    leaf = path.rsplit(".", 1)[-1]
    m = re.search(r"(?:^|[\s.\[])" + re.escape(leaf) + r"(?:\[\d+\])?(?:\.\w+)? = .*?: (.*)$", msg)
    text = m.group(1) if m else msg
    text = re.sub(r"^out of range; allowed: ", "", text)
    text = re.sub(r"^not allowed(?: \(did you mean .*?\))?; allowed: ", "one of ", text)
    text = re.sub(r"^[^;]*; allowed: ", "", text)
    text = re.sub(r"^must be (a multiple)", r"\1", text)
    return text.strip()


def _allowed(path: str) -> str:
    seen: list[str] = []
    for value in _PROBES:
        msg = _probe(path, value)
        if not msg or msg in seen or msg.startswith("unknown field"):
            continue
        seen.append(msg)
    if not seen:
        return "any"
    # prefer the message that names a range or the choices over a bare type complaint
    ranked = sorted(seen, key=lambda t: (not t.startswith(("one of", "integers", "ranges")), len(t)))
    text = ranked[0]
    rng = re.search(r"\[(-?\d+), (-?\d+)\]|>= (-?\d+)", text)
    if rng:
        lo = int(rng.group(1) if rng.group(1) is not None else rng.group(3))
        step = _probe(path, lo + 1)  # integers in range: is there a multiple-of rule?
        if step is not None and "multiple of" in step:
            text = step
    # an upper bound that moves with another field (topk <= world x local_experts) says so
    other = {**_BASE, "workload": {**_BASE["workload"], "world": 3, "local_experts": 5}}
    alt = _probe(path, 1 << 40, other)
    if alt is not None and rng and alt != _probe(path, 1 << 40):
        text = f"integers >= {lo}; the upper bound depends on other fields of the shape"
    if text.startswith("one of") and "list" in _knob_type(path):
        text = "each " + text
    words = [t for t in seen if t.startswith("one of")]
    numbers = [t for t in seen if t.startswith("integers")]
    if words and numbers:  # a rule word or a whole number (options.gmm2_join_check)
        text = f"{words[0]}, or {numbers[0]}"
    return text


def _type_text(owner: type | None, name: str, fallback: str) -> str:
    if owner is None:
        return fallback
    hints = typing.get_type_hints(owner)
    t = hints.get(name)
    if t is None:
        return fallback
    text = _typing_text(t)
    return text.replace(" | None", "").replace("None | ", "") or fallback


def _typing_text(t: Any) -> str:
    text = getattr(t, "__name__", None) if not typing.get_args(t) else None
    if text:
        return text
    s = str(t).replace("typing.", "").replace("collections.abc.", "").replace(f"{schema.__name__}.", "")
    while True:  # tuples are written as TOML lists
        s2 = re.sub(r"tuple\[([\w\[\]]+), \.\.\.\]", r"list[\1]", s)
        if s2 == s:
            break
        s = s2
    return "any" if s == "Any" else s


def _lookup(tree: Any, parts: list[str]) -> Any:
    node = tree
    for p in parts:
        if not isinstance(node, Mapping) or p not in node:
            return None
        node = node[p]
    return node


_SECTION_TYPES: dict[str, type] = {**sc.SECTIONS}


def _knob_type(path: str) -> str:
    """The dataclass annotation of the field (nested tables: their value type)."""
    parts = path.split(".")
    section = parts[0] if len(parts) > 1 else "top"
    if section == "calibration":
        return "float"
    if path == "options.core_groups":
        return "str | table"
    if section == "top":
        return _type_text(sc.Scenario, parts[0], "any")
    if len(parts) == 2:
        return _type_text(_SECTION_TYPES.get(section), parts[1], "any")
    if parts[1] == "core_groups" and len(parts) == 4:
        return _type_text(sc.CoreGroup, parts[3], "any")
    if parts[1] == "core_groups":
        return "table"
    # options.event_granularity.<stage>, options.roles.<stage>
    outer = _type_text(_SECTION_TYPES.get(section), parts[1], "any")
    m = re.search(r"Mapping\[str, (\w+)\]", outer)
    return m.group(1) if m else "any"


def _knob(path: str) -> Knob:
    parts = path.split(".")
    section = parts[0] if len(parts) > 1 else "top"
    if section == "calibration":
        name = parts[1]
        unit, meaning = CONSTANTS[name]
        consts = {p: profile_constants(p) for p in PROFILES}
        values = {p: c[name].value for p, c in consts.items() if name in c}
        base = profile_constants(None).get(name)
        return Knob(
            path=path,
            section=section,
            type=_knob_type(path),
            allowed=_allowed(path),
            default=None if base is None else base.value,
            doc=meaning,
            profile_defaults=MappingProxyType(values),
            unit=unit,
        )
    typ = _knob_type(path)
    # the default: no profile = global defaults / dataclass defaults; every profile's own value
    default = _lookup(GLOBAL_DEFAULTS, parts)
    if default is None and section == "workload":
        f = {f.name: f for f in dataclasses.fields(sc.Workload)}[parts[1]]
        default = None if f.default is dataclasses.MISSING else f.default
        default = schema.WORKLOAD_DEFAULTS.get(parts[1], default)
    elif default is None and section == "top" and parts[0] in ("p1_override", "p2_override"):
        default = {f.name: f for f in dataclasses.fields(sc.Scenario)}[parts[0]].default
    per_profile: dict[str, Any] = {}
    for p in PROFILES:
        v = _lookup(PROFILE_DEFAULTS.get(p, {}), parts)
        if v is not None:
            per_profile[p] = plain(v)
    doc_key = ".".join(
        "*" if i == 2 and parts[1] in ("event_granularity", "roles", "core_groups") else x
        for i, x in enumerate(parts)
    )
    return Knob(
        path=path,
        section=section,
        type=typ,
        allowed=_allowed(path),
        default=plain(default),
        doc=KNOB_DOCS.get(path) or KNOB_DOCS.get(doc_key, ""),
        profile_defaults=MappingProxyType(per_profile),
    )


def schema_paths() -> list[str]:
    """Every dotted path of the scenario override schema, in schema order."""
    out: list[str] = []

    def walk(prefix: str, node: Any) -> None:
        for key, sub in node.items():
            path = f"{prefix}.{key}" if prefix else key
            out.append(path)
            if isinstance(sub, dict):
                walk(path, sub)

    walk("", sc.OVERRIDE_SCHEMA)
    # sections themselves are tables, not knobs
    return [p for p in out if p not in sc.SECTIONS and p != "calibration"]


@functools.lru_cache(maxsize=1)
def knob_catalogue() -> tuple[Knob, ...]:
    """One :class:`Knob` per scenario path, derived from the scenario schema (see the module doc)."""
    return tuple(_knob(p) for p in schema_paths())


def knob(path: str) -> Knob:
    """The catalogue entry of ``path`` (an unknown path fails with the closest names)."""
    for k in knob_catalogue():
        if k.path == path:
            return k
    raise sc.unknown_key("", path, [k.path for k in knob_catalogue()])
