"""Constants with provenance tags and calibration domains.

Every number the cost model uses is a :class:`Const`: a value, a unit, a tag saying where it
comes from and a source a human can check:

* ``spec:`` a datasheet / whitepaper / chip configuration value;
* ``algo:`` forced by the algorithm (a byte count, a row width);
* ``impl:`` read from the kernel source (``file:line``);
* ``measured:`` fitted from a measurement; valid only inside its calibration domain;
* ``assumed:`` nobody measured it; the source says why this value was chosen.

A measured constant names its :class:`CalibrationDomain`; a result computed outside that domain
is flagged ``out_of_domain`` by :func:`domain_check`, never silently generalised.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from moeopt.megamoe.results import CalibrationDomainEntry, ConstantEntry

TAGS = ("spec", "algo", "impl", "measured", "assumed")


@dataclass(frozen=True, slots=True)
class CalibrationDomain:
    """Where a measured constant is valid: implementation, compile point, shape domain, topology."""

    id: str
    implementation: str
    compile_point: Mapping[str, int | str | bool]
    shape: Mapping[str, int]
    topology: Mapping[str, int]
    note: str = ""

    def as_dict(self) -> CalibrationDomainEntry:
        return {
            "id": self.id,
            "implementation": self.implementation,
            "compile_point": dict(self.compile_point),
            "shape": dict(self.shape),
            "topology": dict(self.topology),
            "note": self.note,
        }


@dataclass(frozen=True, slots=True)
class Const:
    """One model constant: value, unit, provenance tag, checkable source, calibration domain."""

    name: str
    value: float
    unit: str
    tag: str
    source: str
    domain: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.tag not in TAGS:
            raise ValueError(f"constant {self.name!r}: tag {self.tag!r} is not one of {TAGS}")
        if self.tag == "measured" and not self.domain:
            raise ValueError(f"constant {self.name!r}: a measured constant must name its calibration domain")
        if not self.source:
            raise ValueError(f"constant {self.name!r}: a source is required")

    @property
    def provenance(self) -> str:
        return f"{self.tag}: {self.source}"

    def as_dict(self) -> ConstantEntry:
        out: ConstantEntry = {
            "value": self.value,
            "unit": self.unit,
            "tag": self.tag,
            "provenance": self.provenance,
        }
        if self.domain:
            out["domain"] = self.domain
        return out


def domain_check(
    domain: CalibrationDomain,
    implementation: str,
    compile_point: Mapping[str, object],
    shape: Mapping[str, object],
    topology: Mapping[str, object],
) -> list[str]:
    """Reasons why a run is outside ``domain`` (empty list = inside)."""
    reasons: list[str] = []
    if implementation != domain.implementation:
        reasons.append(f"implementation {implementation!r} != calibrated {domain.implementation!r}")
    for what, want, got in (
        ("compile point", domain.compile_point, compile_point),
        ("shape", domain.shape, shape),
        ("topology", domain.topology, topology),
    ):
        for key, value in want.items():
            if key in got and got[key] != value:
                reasons.append(f"{what} {key} = {got[key]!r}, calibrated at {value!r}")
    return reasons
