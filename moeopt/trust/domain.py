"""Calibration domain check: which constants a scenario uses outside the domain they were measured in.

A ``measured:`` constant is valid only inside its calibration domain (implementation, compile
point, shape, topology; :class:`~moeopt.megamoe.config.provenance.CalibrationDomain`). For a
scenario, every constant in force is listed with its tag, and for each measured one:

* whether the scenario is inside its domain (and if not, each reason: the field, the value
  here and the value it was calibrated at; also a routing other than the calibration's);
* whether the constant is **used**: the scenario's time moves when the constant is moved by
  1 % (one simulation per constant). An out-of-domain constant that does not move the time does
  not matter for this scenario; one that does is what the verdict is about.

Values set in the scenario's ``[calibration]`` replace the profile's and are reported as set by
the user (no domain), ``assumed:`` constants as never measured.
"""

from __future__ import annotations

from dataclasses import dataclass

from moeopt.errors import MoeoptError
from moeopt.megamoe.results import CalibrationDomainEntry
from moeopt.megamoe.scenario import Scenario
from moeopt.megamoe.simulate import simulate

USE_STEP = 0.01  # move a constant by 1 % to see whether the time depends on it


@dataclass(frozen=True)
class ConstantDomain:
    """One constant in force for a scenario, and where it stands against its calibration domain."""

    name: str
    value: float
    unit: str
    tag: str
    domain: str | None
    used: bool | None  # None: not probed
    effect_pct: float | None  # time change for +1 % of the constant
    verdict: str  # "inside", "OUT OF DOMAIN", "set by the scenario", "never measured", "exact"
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class DomainReport:
    scenario_domain: CalibrationDomainEntry | None
    out_of_domain: bool
    reasons: tuple[str, ...]
    constants: tuple[ConstantDomain, ...]

    @property
    def used_out_of_domain(self) -> list[ConstantDomain]:
        """Measured constants that this scenario both uses and runs outside their domain."""
        return [c for c in self.constants if c.verdict == "OUT OF DOMAIN" and c.used]


def domain_report(scenario: Scenario, probe_use: bool = True) -> DomainReport:
    """Every constant of ``scenario`` against its calibration domain (see the module docstring)."""
    r = simulate(scenario)
    base = float(r["kernel_total_us"])
    cal = r["calibration"]
    reasons = tuple(cal["reasons"])
    dom = cal["domain"]
    consts = scenario.config.constants
    user = set(scenario.calibration)
    rows: list[ConstantDomain] = []
    for name in sorted(consts):
        c = consts[name]
        used: bool | None = None
        effect: float | None = None
        why: tuple[str, ...]
        if probe_use and c.tag in ("measured", "assumed") and c.value > 0:
            try:
                t = float(
                    simulate(scenario.with_overrides({f"calibration.{name}": c.value * (1 + USE_STEP)}))[
                        "kernel_total_us"
                    ]
                )
                effect = (t / base - 1.0) * 100.0
                used = abs(t - base) > 1e-9 * max(1.0, base)
            except MoeoptError:
                used, effect = None, None
        if name in user:
            verdict, why = "set by the scenario", ()
        elif c.tag == "measured":
            inside = c.domain is not None and dom is not None and c.domain == dom["id"] and not reasons
            verdict = "inside" if inside else "OUT OF DOMAIN"
            why = () if inside else reasons
        elif c.tag == "assumed":
            verdict, why = "never measured", ()
        else:
            verdict, why = "exact", ()  # spec / algo / impl: not a calibration
        rows.append(ConstantDomain(name, c.value, c.unit, c.tag, c.domain, used, effect, verdict, tuple(why)))
    return DomainReport(dom, bool(cal["out_of_domain"]), reasons, tuple(rows))


def format_domain(rep: DomainReport) -> str:
    lines = []
    if rep.scenario_domain is None:
        lines.append(
            "calibration domain: none (no profile); every rate comes from [calibration] or a spec value"
        )
    else:
        d = rep.scenario_domain
        lines.append(
            f"calibration domain: {d['id']} (implementation {d['implementation']}; compile point "
            f"{d['compile_point']}; shape {d['shape']}; topology {d['topology']})"
        )
    if rep.out_of_domain:
        lines.append("this scenario is OUTSIDE it:")
        lines += [f"  - {x}" for x in rep.reasons]
    else:
        lines.append("this scenario is inside it")
    w = max(8, *(len(c.name) for c in rep.constants))
    lines.append(f"{'constant':<{w}}  {'tag':<8}  {'value':>12}  {'used':>14}  verdict")
    for c in rep.constants:
        use = "-" if c.used is None else f"yes {c.effect_pct:+.3f}%" if c.used else "no"
        lines.append(f"{c.name:<{w}}  {c.tag:<8}  {c.value:12.6g}  {use:>14}  {c.verdict}")
    bad = rep.used_out_of_domain
    unprobed = [c for c in rep.constants if c.verdict == "OUT OF DOMAIN" and c.used is None]
    lines.append("")
    if bad:
        lines.append(
            f"{len(bad)} measured constant(s) used outside their domain: " + ", ".join(c.name for c in bad)
        )
        lines.append("  their values were fitted elsewhere; treat times that depend on them as extrapolation")
    if unprobed:
        lines.append(
            f"{len(unprobed)} measured constant(s) outside their domain whose use was not probed: "
            + ", ".join(c.name for c in unprobed)
        )
        lines.append(
            "  whether this scenario's time depends on them is unknown (run without --no-use-probe to see)"
        )
    if not bad and not unprobed:
        lines.append("no measured constant is used outside its domain")
    lines.append("used: time change when the constant is 1% larger (measured / assumed constants only)")
    return "\n".join(lines) + "\n"
