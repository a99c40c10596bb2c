"""Knob audit: for every knob of the catalogue, does changing it move the simulated time?

Walks :func:`~moeopt.megamoe.knobs.knob_catalogue` and perturbs each path for real: candidate
values are derived from the knob's allowed values and its value in the scenario (every other
choice, the negated boolean, an integer doubled / halved / one step either side within its
range and multiple, a constant x1.5 and x0.5), each simulated, and the time compared with the
unperturbed scenario. Classes (seed 000):

* ``effective``: some candidate moves the time on the audited scenario;
* ``moves only on another shape``: nothing moves here, but it does on one of the named probe
  shapes (:func:`probe_shapes`: the audited scenario with one other setting changed, e.g. URMA on,
  more tokens, late-bound pools);
* ``rejected``: every candidate is refused by the scenario layer (not modelled, out of range,
  inconsistent with another field) here and on every probe shape where it did not move;
* ``not modelled``: accepted but moves nothing on any shape tried. SPEC §7 asks that such a
  value raise an error instead; each one listed is a finding (or a limit such as ``l1_bytes``
  that only decides what is accepted);
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
from moeopt.megamoe.knobs import Knob, knob_catalogue
from moeopt.megamoe.scenario import EDGES, LINK_FIELDS, Scenario, effective_table
from moeopt.megamoe.scenario.schema import WORKLOAD_DEFAULTS
from moeopt.megamoe.simulate import simulate

EFFECTIVE = "effective"
OTHER_SHAPE = "moves only on another shape"
REJECTED = "rejected"
NOT_MODELLED = "not modelled"
NOT_PROBED = "not probed"
CLASSES = (EFFECTIVE, OTHER_SHAPE, REJECTED, NOT_MODELLED, NOT_PROBED)
REL_TOL = 1e-9
INTERNAL = "internal error"


ProbeShape = tuple[str, tuple[str, ...], Scenario, float]
"""(name, the paths it sets, the scenario, its time)."""


@dataclass(frozen=True)
class Trial:
    """One candidate value of a knob on one shape."""

    value: Any
    time_us: float | None
    error: str | None = None


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
        return [cur * 1.5, cur * 0.5] if cur > 0 else [1.0]
    if k.path == "options.links":
        return [[lk] for lk in _link_candidates(s)]
    if k.path == "workload.counts":
        return _counts_candidates(s)
    if k.path == "workload.file":
        return []
    if parts[1:2] == ["core_groups"] and len(parts) == 3:
        return [{"cores": f"0-{max(0, s.config.aic_num // 2 - 1)}"}]
    if parts[-1] == "cores":
        n = s.config.aic_num
        return [f"0-{max(0, n // 2 - 1)}", f"{n // 2}-{n - 1}"]
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
        return [c for c in ch if c != cur]
    if k.type == "int":
        return _int_candidates(k, cur)
    if k.type == "float" and isinstance(cur, (int, float)) and math.isfinite(cur) and cur > 0:
        return [cur * 2, cur / 2]
    return []


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
        (f"tokens {w.tokens * 8}", {"workload.tokens": w.tokens * 8}),
        (f"kernel.topo_urma = {str(not cfg.topo_urma).lower()}", {"kernel.topo_urma": not cfg.topo_urma}),
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
        ("core groups split 2:1 (as a table)", _split_groups(cfg.aic_num)),
        (
            "core groups split 2:1, GMM1's group joining GMM2",
            {**_split_groups(cfg.aic_num), "options.core_groups.gmm2.join": "gmm1"},
        ),
        ("dispatch_lookahead 1", {"policy.dispatch_lookahead": 1}),
        ("routing zipf", {"workload.routing": "zipf"}),
        (
            "routing explicit",
            {"workload.routing": "explicit", "workload.counts": counts_matrix(w).tolist()},
        ),
        ("bandwidth_contention off", {"options.bandwidth_contention": not cfg.bandwidth_contention}),
        ("barriers staged, GM links", {"options.barriers": "staged", **_gm_links()}),
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
        shapes.append(("profile pto-a2a3", {"profile": "pto-a2a3"}))
    return shapes


def _split_groups(aic: int) -> dict[str, Any]:
    """The V1 fixed-group split written as a per-stage table, so its sub-knobs can be moved."""
    n1 = max(1, round(aic * 2 / 3))
    first, second = f"0-{n1 - 1}", f"{n1}-{aic - 1}" if n1 < aic else f"0-{n1 - 1}"
    g = "options.core_groups"
    return {
        f"{g}.gmm1.cores": first,
        f"{g}.dispatch.cores": first,
        f"{g}.activation.cores": first,
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


def _time(s: Scenario) -> float:
    return float(simulate(s)["kernel_total_us"])


def _try(s: Scenario, path: str, value: Any) -> Trial:
    try:
        return Trial(value, _time(s.with_overrides({path: value})))
    except MoeoptError as exc:
        return Trial(value, None, f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
    except Exception as exc:  # a bug to report, not a reason to stop the audit
        return Trial(value, None, f"{INTERNAL} ({type(exc).__name__}: {exc})")


def _trials(s: Scenario, path: str, values: Sequence[Any], base: float) -> tuple[Trial, ...]:
    """Try ``values`` in order, up to the first that moves the time."""
    out: list[Trial] = []
    for v in values:
        out.append(_try(s, path, v))
        if _moved(base, out[-1:]) is not None:
            break
    return tuple(out)


def _moved(base: float, trials: Sequence[Trial]) -> Trial | None:
    for t in trials:
        if t.time_us is not None and abs(t.time_us - base) > REL_TOL * max(1.0, base):
            return t
    return None


def audit_knob(k: Knob, s: Scenario, base_us: float, shapes: Sequence[ProbeShape]) -> KnobVerdict:
    """Classify one knob (see the module docstring)."""
    ch = _choices(k.allowed)
    if len(ch) == 1:
        return KnobVerdict(
            k.path, NOT_PROBED, None, f"only one value is allowed ({ch[0]!r}): nothing to compare"
        )
    trials = _trials(s, k.path, candidates(k, s), base_us)
    hit = _moved(base_us, trials)
    if hit is not None:
        return _moved_verdict(k, None, hit, base_us, trials)
    for name, sets, shape, t0 in shapes:
        if any(k.path == p or k.path.startswith(p + ".") or p.startswith(k.path + ".") for p in sets):
            continue  # the shape sets this knob itself
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
    if all(t.error is not None for t in trials):
        first = trials[0].error or ""
        return KnobVerdict(k.path, REJECTED, None, first[:160], trials)
    ok = [t for t in trials if t.error is None]
    return KnobVerdict(
        k.path,
        NOT_MODELLED,
        None,
        f"accepted {', '.join(_short(t.value) for t in ok)} and the time did not move on any probe shape",
        trials,
    )


def _moved_verdict(
    k: Knob, shape: str | None, hit: Trial, t0: float, trials: tuple[Trial, ...]
) -> KnobVerdict:
    assert hit.time_us is not None
    where = "" if shape is None else f"on {shape}: "
    detail = f"{where}{_short(hit.value)}: {100 * (hit.time_us / t0 - 1):+.2f}%"
    return KnobVerdict(k.path, EFFECTIVE if shape is None else OTHER_SHAPE, shape, detail, trials)


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
    if counts[NOT_MODELLED]:
        lines.append(
            "not modelled = accepted but moved nothing on any probe shape: the model should refuse such "
            "values (SPEC §7), or it only matters where two other settings change at once (each probe "
            "shape changes one), or it is a limit that only decides what is accepted (l1_bytes)"
        )
    return "\n".join(lines) + "\n"
