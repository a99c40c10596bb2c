"""Constants with provenance tags and calibration domains.

Every number the cost model uses is a :class:`Const`: a value, a unit, a tag saying where it
comes from and a source a human can check:

* ``spec:`` a datasheet / whitepaper / chip configuration value;
* ``algo:`` forced by the algorithm (a byte count, a row width);
* ``impl:`` read from the kernel source (``file:line``);
* ``measured:`` fitted from a measurement; valid only inside its calibration domain;
* ``assumed:`` nobody measured it; the source says why this value was chosen.

A measured constant names its :class:`CalibrationDomain`; a result computed outside that domain
is flagged ``out_of_domain`` by :func:`domain_check`, never silently generalised. An ``impl:``
source names the kernel file and its lines (``file[@rev]:line[-line][,line...]``); a
``measured:`` constant names its domain; the form is checked when the constant is made
(the kernel source is not in this repository, so only the form can be checked here).

Which constants a run used is recorded while it runs (:func:`recording`, :func:`record`): the
scenario's resolved configuration records every constant read through it, so ``r["provenance"]``
lists those and no others.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from moeopt.megamoe.results import CalibrationDomainEntry, ConstantEntry

TAGS = ("spec", "algo", "impl", "measured", "assumed")
IMPL_REF = re.compile(r"[\w./-]+\.(?:h|hpp|cpp|c|py|sh|md)(?:@[\w]+)?:\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*")
"""A kernel source reference: ``file[@rev]:line[-line][,line[-line]...]`` (a source file, or a
design document of the kernel's repository)."""

_USED: ContextVar[set[str] | None] = ContextVar("moeopt_constants_used", default=None)


@contextmanager
def recording() -> Iterator[set[str]]:
    """Collect the names of the constants read (:func:`record`) inside the ``with`` block."""
    used: set[str] = set()
    token = _USED.set(used)
    try:
        yield used
    finally:
        _USED.reset(token)


def record(name: str) -> None:
    """Note that constant ``name`` was read (a no-op outside :func:`recording`)."""
    used = _USED.get()
    if used is not None:
        used.add(name)


class RecordingValues(Mapping[str, float]):
    """Constant name -> value, noting every name read (into the set of the :func:`recording`
    block it was made in): what the graph builder reads its constants through."""

    __slots__ = ("_used", "_values")

    def __init__(self, consts: Mapping[str, Const]) -> None:
        self._values = {name: c.value for name, c in consts.items()}
        self._used = _USED.get()

    def __getitem__(self, name: str) -> float:
        if self._used is not None:
            self._used.add(name)
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


@dataclass(frozen=True, slots=True)
class CalibrationDomain:
    """Where a measured constant is valid: implementation, compile point, shape domain, topology."""

    id: str
    implementation: str
    compile_point: Mapping[str, int | str | bool]
    shape: Mapping[str, int | tuple[int, int]]
    """a value, or ``(lo, hi)``: the range the measurements span"""
    topology: Mapping[str, int]
    note: str = ""

    def as_dict(self) -> CalibrationDomainEntry:
        return {
            "id": self.id,
            "implementation": self.implementation,
            "compile_point": dict(self.compile_point),
            "shape": {k: list(v) if isinstance(v, tuple) else v for k, v in self.shape.items()},
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
        if self.tag == "impl" and not IMPL_REF.search(self.source):
            raise ValueError(
                f"constant {self.name!r}: an impl: source must name the kernel file and lines "
                f"(file[@rev]:line[-line]), got {self.source!r}"
            )

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
            if key not in got:
                continue
            v = got[key]
            if isinstance(value, tuple):
                lo, hi = value
                if not (isinstance(v, (int, float)) and lo <= v <= hi):
                    reasons.append(f"{what} {key} = {v!r}, calibrated over {lo}..{hi}")
            elif v != value:
                reasons.append(f"{what} {key} = {v!r}, calibrated at {value!r}")
    return reasons
