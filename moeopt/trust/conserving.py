"""Work conservation under dispatch-time binding: the check behind ``simulate --assert-conserving``
and ``python -m moeopt conserving``.

A statically pinned pool may idle while work waits elsewhere: the kernel's tile assignment put
the work there, and that idle is a result (what late binding could recover). A late-bound pool
may not: the work could have gone to the idle member, so a policy that declares itself
work-conserving and still leaves it idle is a defect of the scheduler (or of the analysis), and
``simulate`` raises :class:`~moeopt.megamoe.errors.WorkConservationViolation`. This module forces
late binding on every pool (``options.late_bind_pools = ["AIC", "AIV"]``: the cube and both
vector cores) and reports, per scenario, whether the guardrail holds, and over
the golden configurations, how many violate it (the expected answer is none).

An on-chip hand-off (the GMM1 output kept in the producing core for SwiGLU) is taken through
GM for the check, and the verdict says so: its slots belong to the core a tile binds to, which
the model does not choose at binding time (it refuses that combination).

Not checked, and said so: policies that declare ``work_conserving = False`` (they keep a core
idle on purpose), stages colocated with their producer tile (an on-chip activation must land on
its GMM1 tile's core), and events of a late-bound stage that stay pinned (the URMA GETs and PUTs
are issued in program order from one AIV1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from moeopt.core.policies import make_policy
from moeopt.errors import MoeoptError
from moeopt.megamoe.errors import BoundViolation, WorkConservationViolation
from moeopt.megamoe.scenario import Scenario
from moeopt.megamoe.simulate import simulate
from moeopt.trust.golden import GoldenConfig, default_configs

LATE_ALL = ("AIC", "AIV")
"""Every pool late-bound: the cube and both vector cores."""

HOLDS, VIOLATED, NOT_CHECKED, REFUSED = "holds", "VIOLATED", "not checked", "refused"


@dataclass(frozen=True)
class ConservationCheck:
    """One scenario simulated with every pool late-bound, and the guardrail's verdict."""

    name: str
    verdict: str
    """``holds``, ``VIOLATED``, ``not checked`` (a non-conserving policy) or ``refused``"""
    detail: str
    time_us: float | None = None
    exempt: tuple[str, ...] = ()
    """late-bound pools the guardrail does not check, with the reason"""

    @property
    def violated(self) -> bool:
        return self.verdict == VIOLATED


def check_conserving(
    scenario: Scenario, name: str = "scenario", *, force_late: bool = True, check_bounds: bool = True
) -> ConservationCheck:
    """Simulate ``scenario`` (with every pool late-bound unless ``force_late`` is false) and
    report whether the work-conservation guardrail holds (see the module docstring)."""
    note = ""
    try:
        s = scenario.with_overrides(_late_overrides(scenario)) if force_late else scenario
    except MoeoptError as exc:
        return ConservationCheck(name, REFUSED, f"late binding on every pool is refused: {exc}")
    if force_late and _onchip_links(scenario):
        note = f"; on-chip hand-off(s) {', '.join(_onchip_links(scenario))} taken through GM"
    pol = make_policy(s.config.scheduling)
    if not pol.work_conserving:
        why = f"policy {pol.name!r} declares itself not work-conserving (it idles on purpose)"
        return ConservationCheck(name, NOT_CHECKED, why)
    try:
        r = simulate(s, check_bounds=check_bounds)
    except WorkConservationViolation as exc:
        return ConservationCheck(name, VIOLATED, str(exc))
    except BoundViolation as exc:
        return ConservationCheck(name, REFUSED, f"BoundViolation: {exc}")
    exempt = tuple(
        sorted(
            {
                f"{st} ({d['work_conservation_exempt']})"
                for st, d in r["idle_decomposition"]["by_stage"].items()
                if d["late_bound"] and d["work_conservation_exempt"] is not None
            }
        )
    )
    late = [d for d in r["idle_decomposition"]["by_stage"].values() if d["late_bound"]]
    checked = sum(d["avoidable_core_us"] for d in late if d["work_conservation_exempt"] is None)
    return ConservationCheck(
        name,
        HOLDS,
        f"{len(late)} late-bound pool(s), avoidable idle in the checked ones {checked:.3f}{note}",
        float(r["kernel_total_us"]),
        exempt,
    )


def _onchip_links(scenario: Scenario) -> list[str]:
    return [f"{p}->{c}" for (p, c), link in scenario.config.links.items() if link.location == "onchip"]


def _late_overrides(scenario: Scenario) -> dict[str, object]:
    """Every pool late-bound; an on-chip hand-off becomes a GM one, since on-chip slots belong to
    the core a tile binds to and the model refuses to choose them at binding time."""
    over: dict[str, object] = {"options.late_bind_pools": list(LATE_ALL)}
    links = [
        {"producer": p, "consumer": c, "location": "gm", "depth": 0, "colocated_by_hardware": False}
        for (p, c), link in scenario.config.links.items()
        if link.location == "onchip"
    ]
    if links:
        over["options.links"] = links
    return over


def golden_sweep(
    configs: Sequence[GoldenConfig] | None = None, progress: Callable[[ConservationCheck], None] | None = None
) -> list[ConservationCheck]:
    """:func:`check_conserving` on every golden configuration (default: the packaged list)."""
    out: list[ConservationCheck] = []
    for cfg in default_configs() if configs is None else configs:
        try:
            sc = cfg.scenario()
        except MoeoptError as exc:
            got = ConservationCheck(cfg.name, REFUSED, str(exc))
        else:
            got = check_conserving(sc, cfg.name, check_bounds=cfg.check_bounds)
        out.append(got)
        if progress is not None:
            progress(got)
    return out


def format_check(c: ConservationCheck) -> str:
    time = "" if c.time_us is None else f"{c.time_us:10.2f} µs  "
    line = f"{c.verdict:<11}  {c.name:<28} {time}{c.detail}"
    if c.exempt:
        line += f"; not checked: {', '.join(c.exempt)}"
    return line


def format_summary(checks: Sequence[ConservationCheck]) -> str:
    n = len(checks)
    counts = {v: sum(1 for c in checks if c.verdict == v) for v in (HOLDS, VIOLATED, NOT_CHECKED, REFUSED)}
    return (
        f"{n} configuration(s) with every pool late-bound: {counts[VIOLATED]} violation(s); "
        f"holds {counts[HOLDS]}, not checked {counts[NOT_CHECKED]}, refused {counts[REFUSED]}"
    )
