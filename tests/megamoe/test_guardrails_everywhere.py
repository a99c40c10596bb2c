"""Item 6 (guardrails everywhere): every entry point that shows a greedy schedule of a scenario
applies the work-conservation guardrail, the URMA configurations no longer raise a false alarm
when every pool is late-bound, and the seed's check is a command."""

from __future__ import annotations

import pytest

import moeopt as m
import moeopt.megamoe as mm
from moeopt import registry
from moeopt.cli.main import main
from moeopt.core.policies import CriticalPathFirst
from moeopt.megamoe.scenario import scenario_from_dict
from moeopt.search.tomlw import dumps
from moeopt.trust import golden
from moeopt.trust.conserving import check_conserving, golden_sweep

# the golden base basic_e8 (examples/scenario_basic.toml with 8 local experts) with late-bound tiles
# (its on-chip GMM1 -> SwiGLU hand-off taken through GM: late binding refuses on-chip slots)
BASIC_E8_LATE_AIC = scenario_from_dict(golden.BASES["basic_e8"]).with_overrides(
    {
        "options.late_bind_pools": ["AIC"],
        "options.links": [
            {"producer": "gmm1", "consumer": "activation", "location": "gm", "depth": 0, "colocated_by_hardware": False}
        ],
    }
)


class _Claims(CriticalPathFirst):
    """Critical-path-first (idles a cube core in front of a long tail) that wrongly declares
    itself work-conserving: on BASIC_E8_LATE_AIC it leaves late-bound cube cores idle."""

    name = "test_claims_conserving"
    work_conserving = True


@pytest.fixture
def lying():
    with registry.registered("policy", _Claims.name, _Claims):
        yield _Claims.name


@pytest.fixture
def late_e8_file(tmp_path):
    p = tmp_path / "e8_late.toml"
    p.write_text(dumps(BASIC_E8_LATE_AIC.to_dict()))
    return p


@pytest.mark.parametrize("name", ["bs72.urma", "basic_e8.urma"])
def test_urma_with_every_pool_late_bound_is_not_a_false_violation(name):
    """Item 6: with URMA the GETs and PUTs stay pinned to the AIV1 that issues them in program
    order, even when the vector pools are late-bound; the analysis counted their queueing as
    idle of a late-bound pool and raised WorkConservationViolation. They are a pinned pool."""
    cfg = next(c for c in golden.default_configs() if c.name == name)
    s = cfg.scenario().with_overrides(
        {
            "options.late_bind_pools": ["AIC", "AIV"],
            "options.links": [
                {"producer": "gmm1", "consumer": "activation", "location": "gm", "depth": 0, "colocated_by_hardware": False}
            ],
        }
    )
    r = mm.simulate(s)
    by = r["idle_decomposition"]["by_stage"]
    assert by["dispatch:pinned"]["late_bound"] is False
    assert by["dispatch:pinned"]["avoidable_core_us"] > 1.0  # the pinned GETs did queue
    assert by["dispatch"]["late_bound"] is True


def test_a_real_violation_still_fires_in_every_entry_point(lying, late_e8_file, tmp_path, capsys):
    """Item 6: the lying policy violates work conservation; simulate raised it before, and now
    so do the gap report, ``schedule_rank``, ``trace --policy`` and ``report --policy`` (which
    scheduled without the guardrail)."""
    from moeopt.trust.gap import optimality_gap

    with pytest.raises(mm.WorkConservationViolation, match="late-bound pool of stage 'gmm2'"):
        optimality_gap(BASIC_E8_LATE_AIC, policies=[lying], time_limit_s=1, mode="relaxed")
    (rg, _ranks), *_ = mm.build_graphs(BASIC_E8_LATE_AIC).values()
    with pytest.raises(mm.WorkConservationViolation):
        mm.schedule_rank(BASIC_E8_LATE_AIC, rg, policy=lying)
    # the documented opt-out: the generic scheduler on a built graph has no guardrail
    assert m.schedule(rg.graph, policy=lying, normalize=False).makespan_us > 0
    assert mm.schedule_rank(BASIC_E8_LATE_AIC, rg).makespan_us > 0  # the scenario's policy holds
    for cmd in (["trace", "-o", str(tmp_path / "t.json")], ["report", "-o", str(tmp_path / "r.html")]):
        assert main([cmd[0], str(late_e8_file), *cmd[1:], "--policy", lying]) == 1
        assert "WorkConservationViolation" in capsys.readouterr().err
    assert not (tmp_path / "t.json").exists()
    assert not (tmp_path / "r.html").exists()


def test_simulate_assert_conserving_and_the_conserving_command(lying, late_e8_file, tmp_path, capsys):
    """Item 6: ``simulate --assert-conserving`` simulates again with every pool late-bound and
    fails unless work conservation holds; ``conserving`` does it for files or golden configurations."""
    pinned = tmp_path / "pinned.toml"
    pinned.write_text(dumps(BASIC_E8_LATE_AIC.with_overrides({"options.late_bind_pools": []}).to_dict()))
    assert main(["simulate", str(pinned), "--assert-conserving"]) == 0
    assert "every pool late-bound: holds" in capsys.readouterr().out
    assert main(["simulate", str(pinned), "--set", f"policy.scheduling={lying}", "--assert-conserving"]) == 1
    assert "VIOLATED" in capsys.readouterr().out
    assert main(["conserving", "--only", "bs72.urma", "basic_e8.urma", "bs72.cpf"]) == 0
    text = capsys.readouterr().out
    assert "3 configuration(s) with every pool late-bound: 0 violation(s); holds 2, not checked 1" in text
    assert check_conserving(BASIC_E8_LATE_AIC.with_overrides({"policy.scheduling": lying})).violated


@pytest.mark.slow
def test_every_golden_configuration_conserves_work_with_every_pool_late_bound():
    """Item 6 (the seed's sweep): all golden configurations with late binding forced on every
    pool: zero violations (two URMA ones raised a false alarm before). A configuration with a
    restructure hook (idle-core stealing, core queues) moves pinned cube tiles; with every pool
    late-bound there is none to move, so those are refused by that rule, and only those."""
    configs = golden.default_configs()
    checks = golden_sweep()
    assert len(checks) == len(configs)
    assert [c.name for c in checks if c.violated] == []
    hooked = {g.name for g in configs if g.scenario().config.restructure != "none"}
    refused = {c.name: c.detail for c in checks if c.verdict == "refused"}
    assert set(refused) == hooked
    assert all("policy.restructure" in d and "already bind at dispatch time" in d for d in refused.values())
    assert all(c.verdict in ("holds", "not checked") for c in checks if c.name not in hooked)
