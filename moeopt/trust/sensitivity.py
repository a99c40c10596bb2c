"""Calibration uncertainty -> an interval on the time and on every Δ of a comparison.

Every rate and latency tagged ``measured:`` or ``assumed:`` (and every one a scenario sets in
``[calibration]``, which the scenario layer tags ``assumed``) gets a range; ``spec:``, ``algo:``
and ``impl:`` values are taken as exact, and so are capacities and sizes whatever their tag
(``l1_bytes``: moving it makes tiles fit or not, every variant at once) and the model's
bandwidth quantum (:data:`~moeopt.megamoe.config.profiles.NOT_CALIBRATION`); an explicit range
for them is refused. Default ranges: ``measured`` ±10 % (a single-point
calibration; no per-constant spread is recorded), ``assumed`` ±50 % (nobody measured it);
``ranges={name: (lo, hi)}`` sets any constant's range explicitly.

Each constant is moved to each end of its range with the others nominal (one at a time), and
then all together to the two corners: the pessimistic corner puts every constant at the end
that made the baseline slower in the one-at-a-time runs, the optimistic corner at the other
end. The interval of a time (or of a Δ against the baseline) is the smallest and largest value
over all these runs and the nominal one. List scheduling is not monotone, so this is a sampled
interval, not a proven one. A conclusion **flips** when the sign of a Δ under some perturbation
differs from its nominal sign, or when another variant becomes the fastest; the perturbations
that do it are named.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from moeopt.errors import InputError, MoeoptError
from moeopt.megamoe.config.profiles import CONSTANTS, NOT_CALIBRATION
from moeopt.megamoe.scenario import Scenario
from moeopt.megamoe.simulate import simulate
from moeopt.trust.compare import check_variants

UNCERTAIN_TAGS = ("measured", "assumed")
DEFAULT_REL = {"measured": 0.10, "assumed": 0.50}


@dataclass(frozen=True)
class ConstantRange:
    """The range one constant is moved over, and why."""

    name: str
    tag: str
    nominal: float
    lo: float
    hi: float
    why: str


@dataclass(frozen=True)
class Perturbation:
    """One run of every variant: a label and the calibration values it changes."""

    label: str
    values: Mapping[str, float]


@dataclass
class SensitivityReport:
    """Times of every variant under every perturbation, and the intervals and flips read from them."""

    ranges: tuple[ConstantRange, ...]
    variants: tuple[str, ...]
    perturbations: tuple[Perturbation, ...]
    times: dict[str, dict[str, float | None]]  # perturbation label -> variant -> time (None: failed)
    errors: dict[str, dict[str, str]] = field(default_factory=dict)

    NOMINAL = "nominal"

    @property
    def baseline(self) -> str:
        return self.variants[0]

    def nominal(self, variant: str) -> float | None:
        return self.times[self.NOMINAL].get(variant)

    def time_interval(self, variant: str) -> tuple[float, float] | None:
        vals = [x for t in self.times.values() if (x := t.get(variant)) is not None]
        return (min(vals), max(vals)) if vals else None

    def deltas(self, variant: str) -> dict[str, float]:
        """Δ against the baseline under every perturbation where both ran."""
        out: dict[str, float] = {}
        for label, t in self.times.items():
            a, b = t.get(variant), t.get(self.baseline)
            if a is not None and b is not None:
                out[label] = a - b
        return out

    def delta_interval(self, variant: str) -> tuple[float, float] | None:
        d = list(self.deltas(variant).values())
        return (min(d), max(d)) if d else None

    def flips(self, variant: str, tol_us: float = 1e-6) -> list[str]:
        """Perturbations under which the sign of Δ differs from the nominal sign."""
        d = self.deltas(variant)
        nom = d.get(self.NOMINAL)
        if nom is None:
            return []
        sign = _sign(nom, tol_us)
        return [label for label, v in d.items() if _sign(v, tol_us) != sign]

    def best(self, label: str = NOMINAL) -> str | None:
        t = {v: x for v, x in self.times[label].items() if x is not None}
        return min(t, key=lambda v: (t[v], self.variants.index(v))) if t else None

    def best_changes(self) -> list[tuple[str, str]]:
        """``(perturbation, fastest variant)`` wherever the fastest differs from the nominal one."""
        nom = self.best()
        return [
            (p.label, b) for p in self.perturbations if (b := self.best(p.label)) is not None and b != nom
        ]

    def swing(self, variant: str) -> list[tuple[str, float, float]]:
        """Per constant: the variant's time at the two ends of its range (one at a time), widest first."""
        out = []
        for r in self.ranges:
            lo = self.times.get(f"{r.name} lo", {}).get(variant)
            hi = self.times.get(f"{r.name} hi", {}).get(variant)
            if lo is not None and hi is not None:
                out.append((r.name, lo, hi))
        return sorted(out, key=lambda x: (-abs(x[2] - x[1]), x[0]))


def _sign(v: float, tol: float) -> int:
    return 0 if abs(v) <= tol else (1 if v > 0 else -1)


def calibration_ranges(
    scenario: Scenario,
    ranges: Mapping[str, tuple[float, float]] | None = None,
    rel: Mapping[str, float] | None = None,
) -> list[ConstantRange]:
    """The range of every uncertain constant of ``scenario`` (see the module docstring)."""
    rel = {**DEFAULT_REL, **(rel or {})}
    ranges = dict(ranges or {})
    consts = scenario.config.constants
    for name, rng in ranges.items():
        if name not in CONSTANTS:
            from moeopt.megamoe.scenario import unknown_key

            raise unknown_key("sensitivity range", name, list(CONSTANTS))
        if name in NOT_CALIBRATION:
            raise InputError(
                f"sensitivity range {name} = {rng!r}: not perturbed, {NOT_CALIBRATION[name]}; allowed: "
                "rates and latencies (compare variants of it with python -m moeopt compare instead)"
            )
        lo, hi = rng
        if not (isinstance(lo, (int, float)) and isinstance(hi, (int, float))) or not (
            math.isfinite(lo) and math.isfinite(hi) and 0 <= lo <= hi
        ):
            raise InputError(f"sensitivity range {name} = {rng!r}: must be two numbers 0 <= lo <= hi")
    out: list[ConstantRange] = []
    for name in sorted(consts):
        c = consts[name]
        if name in ranges:
            lo, hi = ranges[name]
            out.append(ConstantRange(name, c.tag, c.value, float(lo), float(hi), "given"))
        elif c.tag in UNCERTAIN_TAGS and c.value > 0 and rel[c.tag] > 0 and name not in NOT_CALIBRATION:
            f = rel[c.tag]
            why = f"{c.tag} ±{100 * f:g}%"
            if c.source == "set in the scenario's [calibration]":
                why += " (set in the scenario)"
            out.append(ConstantRange(name, c.tag, c.value, c.value * (1 - f), c.value * (1 + f), why))
    return out


def _run(scenario: Scenario, ov: Mapping[str, Any], values: Mapping[str, float]) -> float:
    s = scenario.with_overrides(ov) if ov else scenario
    if values:
        s = s.with_overrides({f"calibration.{k}": v for k, v in values.items()})
    return float(simulate(s)["kernel_total_us"])


def calibration_sensitivity(
    scenario: Scenario,
    variants: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    ranges: Mapping[str, tuple[float, float]] | None = None,
    rel: Mapping[str, float] | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> SensitivityReport:
    """Every variant (default: the scenario alone) under every perturbation of its constants.

    Args:
        scenario: the base scenario.
        variants: ``{name: {dotted.path: value}}``, the first is the baseline (as
            :func:`~moeopt.trust.compare.compare_variants`).
        ranges: explicit ``{constant: (lo, hi)}``; the others get the default relative range.
        rel: default relative half-width per tag, e.g. ``{"measured": 0.05}``.
        progress: called after each perturbation with ``(done, total, label)``.
    """
    vs = check_variants(variants if variants is not None else {"scenario": {}})
    names = tuple(vs)
    rngs = calibration_ranges(scenario, ranges, rel)
    times: dict[str, dict[str, float | None]] = {}
    errors: dict[str, dict[str, str]] = {}

    def run_all(label: str, values: Mapping[str, float]) -> None:
        row: dict[str, float | None] = {}
        for v, ov in vs.items():
            try:
                row[v] = _run(scenario, ov, values)
            except MoeoptError as exc:
                row[v] = None
                errors.setdefault(label, {})[v] = f"{type(exc).__name__}: {exc}"
        times[label] = row

    perts: list[Perturbation] = []
    total = 1 + 2 * len(rngs) + (2 if rngs else 0)
    done = 0

    def tick(label: str) -> None:
        nonlocal done
        done += 1
        if progress:
            progress(done, total, label)

    run_all(SensitivityReport.NOMINAL, {})
    if times[SensitivityReport.NOMINAL][names[0]] is None:
        msg = errors[SensitivityReport.NOMINAL][names[0]]
        raise InputError(f"sensitivity: the baseline {names[0]!r} does not simulate: {msg}")
    tick(SensitivityReport.NOMINAL)
    for r in rngs:
        for end, value in (("lo", r.lo), ("hi", r.hi)):
            p = Perturbation(f"{r.name} {end}", {r.name: value})
            perts.append(p)
            run_all(p.label, p.values)
            tick(p.label)
    if rngs:
        base = names[0]
        slow: dict[str, float] = {}
        fast: dict[str, float] = {}
        for r in rngs:
            t_lo = times[f"{r.name} lo"][base]
            t_hi = times[f"{r.name} hi"][base]
            if t_lo is None or t_hi is None:
                continue  # an end the scenario refuses (e.g. tiles no longer fit L1): corners keep nominal
            slow[r.name], fast[r.name] = (r.lo, r.hi) if t_lo > t_hi else (r.hi, r.lo)
        for label, values in (("all pessimistic", slow), ("all optimistic", fast)):
            p = Perturbation(label, values)
            perts.append(p)
            run_all(label, values)
            tick(label)
    return SensitivityReport(tuple(rngs), names, tuple(perts), times, errors)


def format_sensitivity(rep: SensitivityReport, top: int = 5) -> str:
    """Intervals per variant, the flips, and the constants that move the baseline most."""
    lines = []
    tags = sorted({r.why for r in rep.ranges})
    lines.append(
        f"calibration ranges: {len(rep.ranges)} constant(s) ({'; '.join(tags) or 'none uncertain'}); "
        f"{len(rep.perturbations)} perturbation(s): each end of each range, then all pessimistic / optimistic"
    )
    w = max(8, *(len(v) for v in rep.variants))
    lines.append(
        f"{'variant':<{w}}  {'time µs':>8}  {'interval':>19}  {'Δ µs':>8}  {'Δ interval':>19}  conclusion"
    )
    for v in rep.variants:
        nom = rep.nominal(v)
        ti = rep.time_interval(v)
        if nom is None or ti is None:
            err = rep.errors.get(SensitivityReport.NOMINAL, {}).get(v, "failed")
            lines.append(f"{v:<{w}}  rejected: {err[:100]}")
            continue
        if v == rep.baseline:
            lines.append(f"{v:<{w}}  {nom:8.2f}  [{ti[0]:8.2f}, {ti[1]:8.2f}]  {'-':>8}  {'-':>19}  baseline")
            continue
        d = rep.deltas(v)
        di = rep.delta_interval(v)
        assert di is not None
        flips = rep.flips(v)
        nd = d[SensitivityReport.NOMINAL]
        word = "faster" if nd < -1e-6 else ("slower" if nd > 1e-6 else "no change")
        if flips:
            concl = f"{word} nominally; FLIPS under {', '.join(flips[:3])}" + (
                f" (+{len(flips) - 3} more)" if len(flips) > 3 else ""
            )
        else:
            concl = f"{word} over the whole interval"
        lines.append(
            f"{v:<{w}}  {nom:8.2f}  [{ti[0]:8.2f}, {ti[1]:8.2f}]  {nd:+8.2f}  "
            f"[{di[0]:+8.2f}, {di[1]:+8.2f}]  {concl}"
        )
    best = rep.best()
    changes = rep.best_changes()
    if len(rep.variants) > 1 and best is not None:
        if changes:
            shown = "; ".join(f"{b!r} under {p}" for p, b in changes[:3])
            lines.append(f"fastest: {best!r} nominally, but {shown}")
        else:
            lines.append(f"fastest: {best!r} under every perturbation")
    sw = rep.swing(rep.baseline)[:top]
    if sw:
        nom = rep.nominal(rep.baseline) or 1.0
        parts = [f"{n} [{100 * (lo / nom - 1):+.1f}%, {100 * (hi / nom - 1):+.1f}%]" for n, lo, hi in sw]
        lines.append(f"most sensitive constants ({rep.baseline}, time at range lo / hi): " + ", ".join(parts))
    failed = sum(len(v) for v in rep.errors.values())
    if failed:
        lines.append(
            f"{failed} run(s) failed (refused or a guardrail fired); they are left out of the intervals:"
        )
        for label, errs in rep.errors.items():
            first = next(iter(errs.values()))
            lines.append(f"  {label}: {len(errs)} variant(s), e.g. {first[:140]}")
    lines.append(
        "Sampled intervals (list scheduling is not monotone): not a proof that nothing in between flips."
    )
    return "\n".join(lines) + "\n"


def parse_rel(items: Sequence[str] | None) -> dict[str, float]:
    """``["measured=0.05", ...]`` -> ``{"measured": 0.05}`` (relative half-width per tag)."""
    out: dict[str, float] = {}
    for item in items or []:
        tag, eq, val = item.partition("=")
        tag = tag.strip()
        try:
            if not eq:
                raise ValueError
            f = float(val)
        except ValueError:
            f = -1.0
        if tag not in UNCERTAIN_TAGS or not (0.0 <= f < 1.0):
            raise InputError(
                f"--rel {item!r}: expected TAG=FRACTION with TAG one of {', '.join(UNCERTAIN_TAGS)} "
                f"and 0 <= FRACTION < 1, e.g. --rel measured=0.05"
            )
        out[tag] = f
    return out


def parse_ranges(items: Sequence[str] | None) -> dict[str, tuple[float, float]]:
    """``["gm_l1_bytes_per_us=45e3:55e3", ...]`` -> ``{name: (lo, hi)}``."""
    out: dict[str, tuple[float, float]] = {}
    for item in items or []:
        name, eq, rng = item.partition("=")
        lo_s, colon, hi_s = rng.partition(":")
        try:
            if not eq or not colon:
                raise ValueError
            out[name.strip()] = (float(lo_s), float(hi_s))
        except ValueError:
            raise InputError(
                f"--range {item!r}: expected NAME=LO:HI, e.g. --range gm_l1_bytes_per_us=45e3:55e3"
            ) from None
    return out
