"""Knob audit: for every knob of the catalogue, does changing it move the simulated time?

Walks :func:`~moeopt.megamoe.knobs.knob_catalogue` and perturbs each path for real: candidate
values are derived from the knob's allowed values and its value in the scenario (every other
choice, the negated boolean, an integer doubled / halved / one step either side within its
range and multiple, a rule-or-number knob's other rules and two numbers, half the die or one
core for a core group, a constant x1.5 and x0.5), each simulated, and the time compared with
the unperturbed scenario. The time is the kernel's (``kernel_total_us``, to the last combine);
a knob that moves only the unpermute tail after the cross-rank barrier is judged on the time
with it (``kernel_dag_end_us``) and the detail says so. Classes (seed 000):

* ``effective``: some candidate moves the time on the audited scenario;
* ``moves only on another shape``: nothing moves here, but it does on one of the named probe
  shapes (:func:`probe_shapes`: the audited scenario with one other setting changed, e.g. URMA on,
  more tokens, late-bound pools, many rows per expert, transfers the link limits);
* ``rejected``: every candidate is refused by the scenario layer (not modelled, out of range,
  inconsistent with another field) here and on every probe shape where it did not move;
* ``capacity (only refuses)``: a hardware size (``l1_bytes``) that moved nothing on any shape
  and refused some value here: it decides which tilings are accepted, and an accepted one does
  not depend on it (a capacity that neither refuses nor moves is "not modelled");
* ``resolution (by design)``: a resolution of the model (the bandwidth quantum) that, halved,
  was accepted and moved nothing on any shape, as it was chosen to (the two kinds:
  :data:`~moeopt.megamoe.config.profiles.NOT_CALIBRATION_KIND`);
* ``not modelled``: accepted but moves nothing on any shape tried. The model should refuse
  such a value instead; each one listed is a finding;
* ``not probed``: no candidate value exists (one registered name) or none can be derived
  without a file.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from moeopt.errors import MoeoptError
from moeopt.megamoe.config.profiles import (
    NOT_CALIBRATION,
    NOT_CALIBRATION_KIND,
    PROFILE_DEFAULTS,
    profile_constants,
)
from moeopt.megamoe.knobs import Knob, knob_catalogue
from moeopt.megamoe.scenario import EDGES, LINK_FIELDS, Scenario, effective_table
from moeopt.megamoe.scenario.resolve import PEER_WRITE_ONLY, REQUIRED_URMA
from moeopt.megamoe.scenario.schema import WORKLOAD_DEFAULTS
from moeopt.megamoe.simulate import simulate

EFFECTIVE = "effective"
OTHER_SHAPE = "moves only on another shape"
REJECTED = "rejected"
CAPACITY = "capacity (only refuses)"
RESOLUTION = "resolution (by design)"
NOT_MODELLED = "not modelled"
NOT_PROBED = "not probed"
CLASSES = (EFFECTIVE, OTHER_SHAPE, REJECTED, CAPACITY, RESOLUTION, NOT_MODELLED, NOT_PROBED)
BY_DESIGN = {"capacity": CAPACITY, "resolution": RESOLUTION}
REL_TOL = 1e-9
INTERNAL = "internal error"

Times = tuple[float, float]
"""(the kernel's time, the time with the unpermute tail), µs."""

ProbeShape = tuple[str, tuple[str, ...], Scenario, Times]
"""(name, the paths it sets, the scenario, its times)."""


@dataclass(frozen=True)
class Trial:
    """One candidate value of a knob on one shape: the kernel's time (to the last combine) and
    the time with the unpermute tail (``None`` when refused)."""

    value: Any
    time_us: float | None
    error: str | None = None
    with_tail_us: float | None = None


@dataclass(frozen=True)
class KnobVerdict:
    path: str
    verdict: str
    shape: str | None  # the probe shape where it moved (OTHER_SHAPE), else None
    detail: str
    trials: tuple[Trial, ...] = field(default=(), repr=False)


def current_value(s: Scenario, path: str) -> Any:
    """The value ``path`` has in ``s`` after profile and defaults (``None``: unset)."""
    parts = path.split(".")
    if parts[0] == "calibration":
        c = s.config.constants.get(parts[1])
        return None if c is None else c.value
    if parts[0] == "aic_num":
        return s.config.aic_num
    node: Any = effective_table(s)
    for p in parts:
        if not isinstance(node, Mapping) or p not in node:
            # a workload field left out reads its default (the sampled routings' seed and skew)
            return WORKLOAD_DEFAULTS.get(parts[-1]) if parts[0] == "workload" else None
        node = node[p]
    if parts[-1] == "cores" and isinstance(node, (list, tuple)):
        return list(node)
    return node


def _choices(allowed: str) -> list[str]:
    if "one of" not in allowed:
        return []
    return re.findall(r"'([^']*)'", allowed.split("one of", 1)[1])


def _int_candidates(k: Knob, cur: Any) -> list[int]:
    m = re.search(r"\[(-?\d+), (-?\d+)\]", k.allowed)
    ge = re.search(r">= (-?\d+)", k.allowed)
    lo = int(m.group(1)) if m else (int(ge.group(1)) if ge else 0)
    hi = int(m.group(2)) if m else 1 << 30
    mult_m = re.search(r"multiple of (\d+)", k.allowed)
    step = int(mult_m.group(1)) if mult_m else 1
    c = int(cur) if isinstance(cur, int) and not isinstance(cur, bool) else lo
    raw = [c * 2, c // 2, lo, c + step, c - step, lo + step]
    if c == lo and m is None:
        # a threshold at its floor (e.g. combine_small_max_routes = 0): also far above any use
        raw.insert(1, 1 << 20)
    out: list[int] = []
    for v in raw:
        v = max(lo, min(hi, v))
        v -= v % step
        if v < lo:
            v += step
        if v != c and v not in out and lo <= v <= hi:
            out.append(v)
    return out[:5]


def candidates(k: Knob, s: Scenario) -> list[Any]:
    """Values to try for knob ``k`` on scenario ``s`` (different from its current value)."""
    cur = current_value(s, k.path)
    parts = k.path.split(".")
    if k.is_constant:
        if cur is None:
            return [1.0]
        if NOT_CALIBRATION_KIND.get(k.path.removeprefix("calibration.")) == "resolution":
            return [cur * 0.5]  # what a resolution must survive: halving it moves no result
        return [cur * 1.5, cur * 0.5] if cur > 0 else [1.0]
    if k.path == "options.links":
        return [[lk] for lk in _link_candidates(s)]
    if k.path == "workload.counts":
        return _counts_candidates(s)
    if k.path == "workload.file":
        return []
    if parts[1:2] == ["core_groups"] and len(parts) == 3:
        # half the die, and one core (where the stage's events queue, whatever the others do)
        return [{"cores": f"0-{max(0, s.config.aic_num // 2 - 1)}"}, {"cores": "0"}]
    if parts[-1] == "cores":
        n = s.config.aic_num
        return [f"0-{max(0, n // 2 - 1)}", f"{n // 2}-{n - 1}", "0"]
    if k.path == "options.event_granularity":
        return [{"dispatch": 2}, {"combine": 2}]
    if k.path == "options.roles":
        return [{"dispatch": "AIV0"}, {"combine": "AIV0"}, {"activation": "AIV1"}]
    if k.type == "bool":
        return [not bool(cur)]
    ch = _choices(k.allowed)
    if ch:
        if k.type.startswith("list"):
            have = list(cur or [])
            return [[c] for c in ch if [c] != have] + ([[]] if have else [])
        return [c for c in ch if c != cur] + [v for v in _rule_numbers(k.allowed) if v != cur]
    if k.type == "int":
        return _int_candidates(k, cur)
    if k.type == "float" and isinstance(cur, (int, float)) and math.isfinite(cur) and cur > 0:
        return [cur * 2, cur / 2]
    return []


def _rule_numbers(allowed: str) -> list[int]:
    """A rule-or-number knob (``one of 'none', 'kernel_rule', or integers in [0, 1048576]``): the
    smallest number but one, and the largest. Its rules may resolve to the current value on this
    shape; these numbers still differ from it (combine waiting for GMM2's second expert, or its
    last; SwiGLU on two cores, or on all)."""
    m = re.search(r"or integers in \[(-?\d+), (-?\d+)\]", allowed)
    if not m:
        return []
    lo, hi = int(m.group(1)), int(m.group(2))
    return [v for v in dict.fromkeys((lo + 1, hi)) if lo <= v <= hi]


def _link_candidates(s: Scenario) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for a, b in EDGES:
        lk = s.config.link(a, b)
        base = {"producer": a, "consumer": b}
        if lk.location == "onchip":
            out.append({**base, "location": "gm", "depth": 0, "colocated_by_hardware": False})
            out.append({**base, "depth": lk.depth + 1})
        else:
            out.append({**base, "location": "onchip", "depth": 1, "colocated_by_hardware": True})
        if lk.readiness == "whole":
            out.append({**base, "readiness": "per_chunk", "chunks": 2})
    assert all(set(x) <= set(LINK_FIELDS) for x in out)
    return out


def _counts_candidates(s: Scenario) -> list[Any]:
    from moeopt.megamoe.routing import counts_matrix

    m = counts_matrix(s.workload).tolist()
    # move one route of rank 0 from its busiest expert to its idlest one
    row = m[0]
    hi = max(range(len(row)), key=lambda j: row[j])
    lo = min(range(len(row)), key=lambda j: row[j])
    if hi == lo or row[hi] == 0:
        return [m]
    moved = [list(r) for r in m]
    moved[0][hi] -= 1
    moved[0][lo] += 1
    return [moved]


def probe_shapes(s: Scenario) -> list[tuple[str, dict[str, Any]]]:
    """Named variants of ``s`` on which a knob that does nothing here may still move the time."""
    from moeopt.megamoe.routing import counts_matrix

    cfg = s.config
    onchip = cfg.link("gmm1", "activation").location == "onchip"
    flip_act = (
        {"location": "gm", "depth": 0, "colocated_by_hardware": False}
        if onchip
        else {"location": "onchip", "depth": 1, "colocated_by_hardware": True}
    )
    w = s.workload
    shapes: list[tuple[str, dict[str, Any]]] = [
        _more_tokens(s),
        _urma_flip(s),
        (
            "late-bound pools AIC, AIV" + (", gmm1->activation in GM" if onchip else ""),
            {
                "options.late_bind_pools": ["AIC", "AIV"],
                # late-bound tiles cannot keep an on-chip slot per core (refused): hand off in GM
                **(
                    {"options.links": [{"producer": "gmm1", "consumer": "activation", **flip_act}]}
                    if onchip
                    else {}
                ),
            },
        ),
        (
            f"gmm1->activation {'in GM' if onchip else 'on-chip'}",
            {"options.links": [{"producer": "gmm1", "consumer": "activation", **flip_act}]},
        ),
        ("combine per_expert", {"options.combine_granularity": "per_expert"}),
        ("combine auto", {"options.combine_granularity": "auto"}),
        ("core_groups v1_fixed", {"options.core_groups": "v1_fixed"}),
        ("core groups split 2:1 (as a table)", _split_groups(cfg.aic_num, onchip)),
        (
            "core groups split 2:1, GMM1's group joining GMM2",
            {**_split_groups(cfg.aic_num, onchip), "options.core_groups.gmm2.join": "gmm1"},
        ),
        ("dispatch_lookahead 1", {"policy.dispatch_lookahead": 1}),
        ("routing zipf", {"workload.routing": "zipf"}),
        (
            "routing explicit",
            {"workload.routing": "explicit", "workload.counts": counts_matrix(w).tolist()},
        ),
        ("bandwidth_contention off", {"options.bandwidth_contention": not cfg.bandwidth_contention}),
        (
            # staged barriers take no look-ahead (a cycle: refused)
            "barriers staged, GM links" + (", no look-ahead" if cfg.dispatch_lookahead else ""),
            {
                "options.barriers": "staged",
                **_gm_links(),
                **({"policy.dispatch_lookahead": 0} if cfg.dispatch_lookahead else {}),
            },
        ),
        ("quant bf16", {"kernel.quant": "bf16", "kernel.tile_k": 256}),
        ("tile_k 256", {"kernel.tile_k": 256}),
        (
            "software-epoch sync",
            {
                "options.sync_protocol": (
                    "software_epochs" if cfg.sync_protocol == "hardware_flags" else "hardware_flags"
                )
            },
        ),
    ]
    if w.shared_expert_num == 0:
        shapes.append(("shared_expert_num 1", {"workload.shared_expert_num": 1}))
    if s.profile != "pto-a2a3":
        shapes.append(_pto_profile(s))
    few = max(1, w.tokens // 8)
    shapes += [
        _many_row_blocks(s),
        _link_bound(s),
        (f"p1_override {WIDE_WAVE}", {"p1_override": WIDE_WAVE}),
        (f"aic_num {2 * cfg.aic_num}", {"aic_num": 2 * cfg.aic_num}),
        (f"tokens {few}", {"workload.tokens": few}),
    ]
    return shapes


WIDE_WAVE = 64
"""m-groups per GMM1 wave on the wide-wave probe shape: waves of several experts, so that one
AIV pulls several segments of a source per wave (what ``event_granularity.dispatch`` packs)."""


def _more_tokens(s: Scenario) -> tuple[str, dict[str, Any]]:
    """Eight times the tokens, or four or two times where the scenario refuses more (the front
    reorder's sort cores outgrow the die's AIVs: examples/seed002_typical.toml, 2048 tokens x topk 8)."""
    for factor in (8, 4, 2):
        over = {"workload.tokens": s.workload.tokens * factor}
        try:
            s.with_overrides(over)
        except MoeoptError:
            continue
        break
    return f"tokens {over['workload.tokens']}", over


def _urma_flip(s: Scenario) -> tuple[str, dict[str, Any]]:
    """The other communication topology. A PTO profile's kernel has no URMA path (refused
    there), so on one the shape is the megamoe-a8w8 kernel with URMA: the URMA knobs are shown
    to act on the kernel that has them, and the detail names it. URMA needs its three rates;
    where the profile has none, the shape takes megamoe-a8w8's (the constants it supplies are
    still tried on it)."""
    cfg = s.config
    flip = not cfg.topo_urma
    name = f"kernel.topo_urma = {str(flip).lower()}"
    if not flip:
        return name, {"kernel.topo_urma": False}
    if s.profile in PEER_WRITE_ONLY:
        return (
            f"{name} (profile megamoe-a8w8: {s.profile} has no URMA path)",
            {"profile": "megamoe-a8w8", "kernel.topo_urma": True},
        )
    missing = [n for n in REQUIRED_URMA if n not in cfg.constants]
    if not missing:
        return name, {"kernel.topo_urma": True}
    a8w8 = profile_constants("megamoe-a8w8")
    return (
        f"{name} (URMA rates of megamoe-a8w8)",
        {"kernel.topo_urma": True, **{f"calibration.{n}": a8w8[n].value for n in missing}},
    )


ROW_BLOCKS = 4
"""M blocks per expert on the many-rows probe shape."""


def _many_row_blocks(s: Scenario) -> tuple[str, dict[str, Any]]:
    """Few experts with :data:`ROW_BLOCKS` M blocks each (uniform routing: ``tokens x topk /
    local_experts`` rows per expert), as few as the routing allows (``world x local_experts >=
    topk``): the order of an expert's tiles (swizzle) and the B panels a later M block finds in
    L2 (B-panel reuse) only exist with several M blocks per expert."""
    w = s.workload
    experts = max(1, -(-w.topk // w.world))
    tokens = max(1, ROW_BLOCKS * s.config.tile_m * experts // w.topk)  # at most ROW_BLOCKS blocks
    return (
        f"{ROW_BLOCKS} M blocks per expert (local_experts {experts}, tokens {tokens})",
        {"workload.local_experts": experts, "workload.tokens": tokens},
    )


def _link_bound(s: Scenario) -> tuple[str, dict[str, Any]]:
    """The many-rows shape (:func:`_many_row_blocks`: segments long enough for their bytes, not
    the first batch's latency, to set their time), one expert per GMM1 wave (so that the first
    wave, the one dispatch nothing hides, pulls from every source at once) and every AIV stream
    as fast as half the rank's link, so that two or more remote streams of a stage are limited
    by the link's aggregate (``remote_in`` / ``remote_out``): its fair share, the write-back
    queue's share of the cube's load paths and the contention switch only act where the link,
    not the stream, is the limit."""
    c = s.config.constants
    half_in, half_out = c["remote_in_bytes_per_us"].value / 2, c["remote_out_bytes_per_us"].value / 2
    name, rows = _many_row_blocks(s)
    return (
        f"{name.split(' (')[0]}, one expert per wave, AIV streams at half the link's rate",
        {
            **rows,
            "p1_override": 0,
            "calibration.aiv_remote_read_bytes_per_us": half_in,
            "calibration.aiv_remote_write_bytes_per_us": half_out,
            # this rank's own rows too, or the slower local stream would set the wave's time
            "calibration.aiv_local_bytes_per_us": half_in,
        },
    )


def _pto_profile(s: Scenario) -> tuple[str, dict[str, Any]]:
    """The pto-a2a3 profile (its hardware-flag protocol with group barriers, its budgets), with
    the profile's own tile where the scenario sets one (another profile's tile may not fit the
    PTO kernel's L1 / L0C)."""
    own = PROFILE_DEFAULTS["pto-a2a3"]["kernel"]
    tiles = {f: own[f] for f in ("tile_m", "tile_n", "tile_k") if getattr(s.kernel, f) is not None}
    name = "profile pto-a2a3" + (
        f" (its tile {own['tile_m']} x {own['tile_n']} x {own['tile_k']})" if tiles else ""
    )
    return name, {"profile": "pto-a2a3", **{f"kernel.{f}": v for f, v in tiles.items()}}


def _split_groups(aic: int, onchip: bool) -> dict[str, Any]:
    """The V1 fixed-group split written as a per-stage table, so its sub-knobs can be moved (the
    activation's cores only with a GM hand-off: on-chip, GMM1's group places it)."""
    n1 = max(1, round(aic * 2 / 3))
    first, second = f"0-{n1 - 1}", f"{n1}-{aic - 1}" if n1 < aic else f"0-{n1 - 1}"
    g = "options.core_groups"
    return {
        f"{g}.gmm1.cores": first,
        f"{g}.dispatch.cores": first,
        **({} if onchip else {f"{g}.activation.cores": first}),
        f"{g}.gmm2.cores": second,
        f"{g}.combine.cores": second,
    }


def _gm_links() -> dict[str, Any]:
    return {
        "options.links": [
            {"producer": a, "consumer": b, "location": "gm", "depth": 0, "colocated_by_hardware": False}
            for a, b in EDGES
        ]
    }


def _time(s: Scenario) -> Times:
    r = simulate(s)
    return float(r["kernel_total_us"]), float(r["kernel_dag_end_us"])


def _try(s: Scenario, path: str, value: Any) -> Trial:
    try:
        total, with_tail = _time(s.with_overrides({path: value}))
        return Trial(value, total, None, with_tail)
    except MoeoptError as exc:
        return Trial(value, None, f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
    except Exception as exc:  # a bug to report, not a reason to stop the audit
        return Trial(value, None, f"{INTERNAL} ({type(exc).__name__}: {exc})")


def _trials(s: Scenario, path: str, values: Sequence[Any], base: Times) -> tuple[Trial, ...]:
    """Try ``values`` in order, up to the first that moves the time."""
    out: list[Trial] = []
    for v in values:
        out.append(_try(s, path, v))
        if _moved(base, out[-1:]) is not None:
            break
    return tuple(out)


def _differs(a: float, b: float) -> bool:
    return abs(a - b) > REL_TOL * max(1.0, abs(b))


def _moved(base: Times, trials: Sequence[Trial]) -> Trial | None:
    """The first trial that moves the kernel's time, else the first that moves the time with
    the unpermute tail, else ``None``."""
    for t in trials:
        if t.time_us is not None and _differs(t.time_us, base[0]):
            return t
    for t in trials:
        if t.with_tail_us is not None and _differs(t.with_tail_us, base[1]):
            return t
    return None


def audit_knob(k: Knob, s: Scenario, base: Times, shapes: Sequence[ProbeShape]) -> KnobVerdict:
    """Classify one knob (see the module docstring)."""
    ch = _choices(k.allowed)
    if len(ch) == 1 and not _rule_numbers(k.allowed):
        return KnobVerdict(
            k.path, NOT_PROBED, None, f"only one value is allowed ({ch[0]!r}): nothing to compare"
        )
    trials = _trials(s, k.path, candidates(k, s), base)
    hit = _moved(base, trials)
    if hit is not None:
        return _moved_verdict(k, None, hit, base, trials)
    for name, sets, shape, t0 in shapes:
        if not k.is_constant and any(
            k.path == p or k.path.startswith(p + ".") or p.startswith(k.path + ".") for p in sets
        ):
            continue  # the shape sets this knob itself (a constant it supplies is tried around its value)
        h2 = _moved(t0, _trials(shape, k.path, candidates(k, shape), t0))
        if h2 is not None:
            return _moved_verdict(k, name, h2, t0, trials)
    if not trials:
        why = (
            f"only one value is registered ({k.allowed.removeprefix('one of ')}): nothing to compare"
            if _choices(k.allowed)
            else "no value can be derived for it alone (it needs a file or another field)"
        )
        return KnobVerdict(k.path, NOT_PROBED, None, why)
    ok = [t for t in trials if t.error is None]
    refused = [t for t in trials if t.error is not None]
    name = k.path.removeprefix("calibration.")
    kind = NOT_CALIBRATION_KIND.get(name) if k.is_constant else None
    # a capacity shows its consequence by refusing a value; a resolution by moving nothing at all
    if kind is not None and (refused if kind == "capacity" else ok and not refused):
        return KnobVerdict(k.path, BY_DESIGN[kind], None, _by_design_detail(name, kind, ok, refused), trials)
    if not ok:
        first = trials[0].error or ""
        return KnobVerdict(k.path, REJECTED, None, first[:160], trials)
    return KnobVerdict(
        k.path,
        NOT_MODELLED,
        None,
        f"accepted {', '.join(_short(t.value) for t in ok)} and the time did not move on any probe shape",
        trials,
    )


def _by_design_detail(name: str, kind: str, ok: Sequence[Trial], refused: Sequence[Trial]) -> str:
    """Why a capacity or a resolution moved nothing, and what the trials on this scenario did."""
    parts = [NOT_CALIBRATION[name]]
    if refused:
        why = (refused[0].error or "").split(": ", 1)[-1]
        parts.append(f"{', '.join(_short(t.value) for t in refused)} refused ({why[:70]}...)")
    if ok:
        how = "by design" if kind == "resolution" else "an accepted scenario does not depend on it"
        parts.append(f"{', '.join(_short(t.value) for t in ok)} moved nothing on any probe shape ({how})")
    return "; ".join(parts)


def _moved_verdict(
    k: Knob, shape: str | None, hit: Trial, t0: Times, trials: tuple[Trial, ...]
) -> KnobVerdict:
    assert hit.time_us is not None
    assert hit.with_tail_us is not None
    where = "" if shape is None else f"on {shape}: "
    if _differs(hit.time_us, t0[0]):
        delta = _percent(hit.time_us, t0[0])
    else:
        delta = _percent(hit.with_tail_us, t0[1]) + " of the time with the unpermute tail"
    detail = f"{where}{_short(hit.value)}: {delta}"
    return KnobVerdict(k.path, EFFECTIVE if shape is None else OTHER_SHAPE, shape, detail, trials)


def _percent(t: float, t0: float) -> str:
    """The change in percent, two decimals, or two significant digits where those read 0.00."""
    pct = 100 * (t / t0 - 1)
    return f"{pct:+.2f}%" if abs(pct) >= 0.005 else f"{pct:+.1e}%"


def _short(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def audit_knobs(
    scenario: Scenario,
    paths: Sequence[str] | None = None,
    *,
    progress: Callable[[int, int, str], None] | None = None,
) -> list[KnobVerdict]:
    """Audit every knob of the catalogue (or only ``paths``) on ``scenario``."""
    cat = knob_catalogue()
    if paths is not None:
        known = {k.path for k in cat}
        for p in paths:
            if p not in known:
                from moeopt.megamoe.scenario import unknown_key

                raise unknown_key("", p, sorted(known))
        cat = tuple(k for k in cat if k.path in set(paths))
    base = _time(scenario)
    shapes: list[ProbeShape] = []
    for name, ov in probe_shapes(scenario):
        try:
            sh = scenario.with_overrides(ov)
            shapes.append((name, tuple(ov), sh, _time(sh)))
        except MoeoptError:
            continue  # a probe shape this scenario cannot take is simply not tried
    out = []
    for i, k in enumerate(cat, 1):
        out.append(audit_knob(k, scenario, base, shapes))
        if progress:
            progress(i, len(cat), k.path)
    return out


def format_audit(verdicts: Sequence[KnobVerdict]) -> str:
    w = max(8, *(len(v.path) for v in verdicts)) if verdicts else 8
    lines = [f"{'knob':<{w}}  {'verdict':<27}  detail (first value that moved the time: Δ%)"]
    for v in verdicts:
        lines.append(f"{v.path:<{w}}  {v.verdict:<27}  {v.detail}")
    crashed = [(v.path, t) for v in verdicts for t in v.trials if t.error and t.error.startswith(INTERNAL)]
    counts = {c: sum(1 for v in verdicts if v.verdict == c) for c in CLASSES}
    lines.append("")
    lines.append(", ".join(f"{n} {c}" for c, n in counts.items()))
    for path, t in crashed:
        lines.append(f"BUG: {path} = {_short(t.value)} raised an {t.error} instead of a clear message")
    if counts[CAPACITY] or counts[RESOLUTION]:
        lines.append(
            "capacity = a hardware size that decides which scenarios are accepted; resolution = a "
            "resolution of the model chosen so that it moves no result: neither is a calibrated constant, "
            "and moving nothing on an accepted scenario is what each should do"
        )
    if counts[NOT_MODELLED]:
        lines.append(
            "not modelled = accepted but moved nothing on any probe shape: the model should refuse such "
            "values, or it only matters where two other settings change at once (each probe shape "
            "changes one)"
        )
    return "\n".join(lines) + "\n"
