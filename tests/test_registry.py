"""The registry: built-ins registered once, user entries in front of them, and a scoped API that
puts every table back as it was."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import moeopt as m
from moeopt import registry
from moeopt.core.policies import BUILTIN_POLICIES, EarliestStart, Policy


class Mine(Policy):
    name = "test_registry_mine"


def test_the_builtin_policy_list_is_read_from_the_registry() -> None:
    # every class-based built-in is registered under its own name, in the order of the module
    assert registry.builtin_names("policy") == BUILTIN_POLICIES
    assert BUILTIN_POLICIES[0] == "earliest_start"
    assert set(BUILTIN_POLICIES) <= set(registry.names("policy"))
    for name in BUILTIN_POLICIES:
        assert registry.lookup("policy", name)().name == name


def test_each_kind_has_its_builtins_after_import_moeopt() -> None:
    # a fresh interpreter: `import moeopt` alone registers every built-in (no other module has
    # to be imported first) and does not import the test suite package
    code = textwrap.dedent(
        """
        import sys
        import moeopt
        from moeopt import registry
        for kind in registry.KINDS:
            print(kind, ",".join(registry.builtin_names(kind)))
        print("testing" if "moeopt.testing" in sys.modules else "-",
              "hypothesis" if "hypothesis" in sys.modules else "-")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    lines = dict(ln.split(" ", 1) for ln in out.splitlines())
    # the names the scenario files and docs use (docs/architecture.md, extension points)
    assert lines["policy"].split(",") == list(BUILTIN_POLICIES)
    assert lines["builder"] == "megamoe"
    assert lines["tile_grid"] == "rect"
    assert lines["wave_packer"] == "sequential_greedy,longest_expert_first,balanced_waves"
    assert lines["core_assignment"] == "static_round_robin,static_round_robin_v1,greedy_least_busy,contiguous_block"
    assert lines["-"] == "-"  # neither moeopt.testing nor hypothesis was imported


def test_a_builtin_is_overridden_only_on_purpose_and_comes_back() -> None:
    with registry.scoped():
        with pytest.raises(m.InputError, match=r"policy 'earliest_start' is a built-in; pass replace=True"):
            m.register("policy", "earliest_start", Mine)
        assert registry.lookup("policy", "earliest_start") is EarliestStart
        m.register("policy", "earliest_start", Mine, replace=True)
        assert registry.lookup("policy", "earliest_start") is Mine
        assert registry.is_builtin("policy", "earliest_start")
        registry.unregister("policy", "earliest_start")
        assert registry.lookup("policy", "earliest_start") is EarliestStart
        with pytest.raises(m.InputError, match="'earliest_start' is a built-in and cannot be unregistered"):
            registry.unregister("policy", "earliest_start")
    assert registry.lookup("policy", "earliest_start") is EarliestStart


def test_a_builtin_registers_once_and_never_over_a_user_entry() -> None:
    with registry.scoped():
        with pytest.raises(m.InputError, match="built-in policy 'earliest_start' is registered twice"):
            registry.register_builtin("policy", "earliest_start", Mine)
        assert registry.lookup("policy", "earliest_start") is EarliestStart
        # whichever comes first, a user entry stays in front of a built-in of the same name
        m.register("wave_packer", "test_registry_first", Mine)
        registry.register_builtin("wave_packer", "test_registry_first", EarliestStart)
        registry.register_builtin("wave_packer", "test_registry_second", EarliestStart)
        m.register("wave_packer", "test_registry_second", Mine, replace=True)
        for name in ("test_registry_first", "test_registry_second"):
            assert registry.lookup("wave_packer", name) is Mine
            registry.unregister("wave_packer", name)
            assert registry.lookup("wave_packer", name) is EarliestStart
    assert "test_registry_first" not in registry.names("wave_packer")
    assert "test_registry_second" not in registry.builtin_names("wave_packer")


def test_scoped_undoes_registrations_overrides_and_removals() -> None:
    before = {kind: registry.names(kind) for kind in registry.KINDS}
    m.register("policy", "test_registry_outer", Mine)
    try:
        with registry.scoped():
            m.register("policy", "test_registry_inner", Mine)
            m.register("policy", "priority_by_stage", Mine, replace=True)
            registry.unregister("policy", "test_registry_outer")
            assert "test_registry_outer" not in registry.names("policy")
        assert "test_registry_outer" in registry.names("policy")
        assert "test_registry_inner" not in registry.names("policy")
        assert registry.lookup("policy", "priority_by_stage") is m.PriorityByStage
    finally:
        registry.unregister("policy", "test_registry_outer")
    assert {kind: registry.names(kind) for kind in registry.KINDS} == before


def test_registered_is_undone_even_when_the_block_fails() -> None:
    def fail_inside() -> None:
        with registry.registered("policy", "test_registry_block", Mine) as name:
            assert registry.lookup("policy", name) is Mine
            raise RuntimeError("inside")

    with pytest.raises(RuntimeError, match="inside"):
        fail_inside()
    assert "test_registry_block" not in registry.names("policy")


def test_bad_registrations_are_refused_with_the_reason() -> None:
    with pytest.raises(m.InputError, match=r"unknown registry kind 'polcy' \(did you mean 'policy'"):
        m.register("polcy", "x", Mine)
    with pytest.raises(m.InputError, match="name must be a non-empty string, got ''"):
        m.register("policy", "", Mine)
    with pytest.raises(m.InputError, match=r"the factory must be callable, got 3"):
        m.register("policy", "test_registry_three", 3)  # type: ignore[arg-type]
    with pytest.raises(m.InputError, match=r"no registered policy 'test_registry_none' to unregister"):
        registry.unregister("policy", "test_registry_none")
    with pytest.raises(m.InputError, match=r"unknown policy 'earliest_strat' \(did you mean 'earliest_start'"):
        registry.lookup("policy", "earliest_strat")
