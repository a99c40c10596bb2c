"""The stage builders pass ``plain=True`` to ``Event.trusted_many`` only for columns that keep
its contract (every resource list a tuple, every acquire / release map read-only, every duration
a float): checked here on every run of several builds, so a builder change that breaks the
contract fails here rather than skipping a type test silently."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest

import moeopt.megamoe as mm
from moeopt.core.events import Event
from moeopt.megamoe.scenario import scenario_from_dict
from moeopt.megamoe.simulate import build_graphs
from moeopt.trust.golden import BASES


@pytest.mark.parametrize(
    "scenario",
    [
        scenario_from_dict(BASES["pto_m16"]),
        mm.Scenario(
            workload=mm.Workload(tokens=256, topk=8, world=8, local_experts=4, routing="zipf"),
            h=1024,
            hidden_dim=512,
            profile="pto-a2a3-v1",
        ),
    ],
    ids=["pto_m16", "v1_zipf"],
)
def test_plain_runs_keep_the_contract(monkeypatch: pytest.MonkeyPatch, scenario: mm.Scenario) -> None:
    made = Event.trusted_many.__func__  # type: ignore[attr-defined]
    plain_runs = 0

    def checked(cls: type[Event], *cols: Any, plain: bool = False) -> list[Event]:
        nonlocal plain_runs
        if plain:
            plain_runs += 1
            _names, res, _deps, acq, rel, _coloc, durs, _labels = cols
            assert all(type(r) is tuple for r in res)
            assert all(type(m) is MappingProxyType for m in (*acq, *rel))
            assert all(type(d) is float for d in durs)
        out: list[Event] = made(cls, *cols, plain=plain)
        return out

    monkeypatch.setattr(Event, "trusted_many", classmethod(checked))
    build_graphs(scenario)
    assert plain_runs > 0
