"""A Hypothesis strategy shared by the tests that compare two ways of building the same graph:
a golden base scenario with a few knob families mixed in and a small drawn workload."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import reject
from hypothesis import strategies as st

from moeopt.errors import InputError
from moeopt.megamoe.scenario import Scenario, scenario_from_dict
from moeopt.trust.golden import BASES


@st.composite
def knob_mixes(draw: st.DrawFn, families: Sequence[dict[str, Any]], tokens: Sequence[int]) -> Scenario:
    """A golden base (pto_m16 under either PTO profile), up to two of ``families`` (each a set
    of overrides), ``tokens`` tokens, any routing and seed, world 2 or 4; a mix the scenario
    checks refuse is rejected (drawn again)."""
    base = draw(st.sampled_from(sorted(BASES)))
    over: dict[str, Any] = {}
    if base == "pto_m16":
        over["profile"] = draw(st.sampled_from(["pto-a2a3", "pto-a2a3-v1"]))
    for fam in draw(st.lists(st.sampled_from(list(families)), max_size=2, unique_by=id)):
        over.update(fam)
    over["workload.tokens"] = draw(st.sampled_from(list(tokens)))
    over["workload.routing"] = draw(st.sampled_from(["uniform", "cyclic", "zipf", "random"]))
    over["workload.seed"] = draw(st.integers(0, 3))
    over["workload.world"] = draw(st.sampled_from([2, 4]))
    try:
        return scenario_from_dict(BASES[base]).with_overrides(over)
    except InputError:
        reject()
