"""Policy registry, the read-only scheduler view, LookaheadOneStep and determinism across processes."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap

import pytest

import moeopt as m
from moeopt import registry
from moeopt.core.compiled import CompiledGraph
from moeopt.core.view import SchedulerView
from moeopt.synthetic import layered_graph


def test_unknown_policy_suggests_the_closest_name() -> None:
    g = m.EventGraph()
    g.add(m.Event("a"))
    with pytest.raises(m.InputError, match=r"unknown policy 'earliest_strat' \(did you mean 'earliest_start'"):
        m.schedule(g, "earliest_strat")


class LongestFirst(m.Policy):
    name = "test_longest_first"
    work_conserving = False

    def prepare(self, cg):  # type: ignore[no-untyped-def]
        self._neg = [-d for d in cg.dur]

    def rank(self, i: int) -> tuple[float, float]:
        return (self._neg[i], 0.0)


def test_a_user_policy_can_be_registered_by_name() -> None:
    g = m.EventGraph()
    g.add(m.Event("short", resources=["c0.x"], duration_us=1.0))
    g.add(m.Event("long", resources=["c0.x"], duration_us=5.0))
    # registered for this block only: generated docs list the registered policies
    with registry.registered("policy", "test_longest_first", LongestFirst):
        s = m.schedule(g, "test_longest_first")
        # longest first on the shared resource: long [0, 5), short [5, 6)
        assert (s.start_us["long"], s.start_us["short"]) == (0.0, 5.0)
        with pytest.raises(m.InputError, match="already registered"):
            m.register("policy", "test_longest_first", LongestFirst)
    assert "test_longest_first" not in registry.names("policy")


def test_a_policy_defining_key_is_refused() -> None:
    # the scheduler's key is always (before, start, after, index): a key() of its own would be
    # silently ignored, so such a policy is refused with the way out
    class OwnKey(m.Policy):
        name = "own_key"

        def key(self, i: int, start_us: float) -> tuple[float, ...]:
            return (-start_us,)

    g = m.EventGraph()
    g.add(m.Event("a", duration_us=1.0))
    with pytest.raises(m.InputError, match=r"policy 'own_key' \(OwnKey\) defines key\(\), which the scheduler never calls.*rank\(i\)"):
        m.schedule(g, OwnKey())


def test_a_policy_cannot_change_the_compiled_graph() -> None:
    # the compiled graph is cached on the graph and shared by every later run: a policy that
    # tries to change it in prepare() fails there, and the next run sees the graph unchanged
    tried: list[str] = []

    class Vandal(m.Policy):
        name = "vandal"

        def prepare(self, cg: CompiledGraph) -> None:
            attempts = {
                "dur[0] = 99": lambda: cg.dur.__setitem__(0, 99.0),  # type: ignore[attr-defined]
                "dur.append": lambda: cg.dur.append(1.0),  # type: ignore[attr-defined]
                "preds[1] = ()": lambda: cg.preds.__setitem__(1, ()),  # type: ignore[attr-defined]
                "fixed[1] = ()": lambda: cg.fixed.__setitem__(1, ()),  # type: ignore[attr-defined]
                "topo.reverse": lambda: cg.topo.reverse(),  # type: ignore[attr-defined]
                "index['a'] = 1": lambda: cg.index.__setitem__("a", 1),  # type: ignore[attr-defined]
                "res_index.clear": lambda: cg.res_index.clear(),  # type: ignore[attr-defined]
                "sem_cap[0] = 9": lambda: cg.sem_cap.__setitem__(0, 9),  # type: ignore[attr-defined]
                "cg.dur = ...": lambda: setattr(cg, "dur", (99.0, 99.0)),
                "events[0] = ...": lambda: cg.events.__setitem__(0, cg.events[1]),  # type: ignore[attr-defined]
            }
            for what, attempt in attempts.items():
                try:
                    attempt()
                except (TypeError, AttributeError, dataclasses.FrozenInstanceError):
                    continue
                tried.append(what)  # the change went through

    g = m.EventGraph(semaphores={"s": 1})
    g.add(m.Event("a", resources=["c0.x"], acquires={"s": 1}, releases={"s": 1}, duration_us=1.0))
    g.add(m.Event("b", resources=["c0.x"], deps={"a": 0.0}, duration_us=2.0))
    before = m.schedule(g).fingerprint()
    m.schedule(g, Vandal())
    assert tried == []
    cg = g.compiled()
    assert (cg.dur, cg.index["a"], cg.sem_cap) == ((1.0, 2.0), 0, (1,))
    assert m.schedule(g).fingerprint() == before


def test_priority_by_stage_lets_a_core_wait_for_the_higher_stage() -> None:
    # combine (low priority) is ready at 0, dispatch (high priority) only at 2, after pre (also
    # a dispatch-stage event); both need c0.v. earliest_start runs combine first [0, 3) and
    # dispatch at 3. priority_by_stage with dispatch first commits pre, then disp at 2 (ahead
    # of the combine that could have started at 0), leaving c0.v idle over [0, 2); combine
    # follows at 3.
    g = m.EventGraph()
    g.add(m.Event("pre", resources=["c1.v"], duration_us=2.0, labels={"stage": "dispatch"}))
    g.add(m.Event("comb", resources=["c0.v"], duration_us=3.0, labels={"stage": "combine"}))
    g.add(m.Event("disp", resources=["c0.v"], deps={"pre": 0.0}, duration_us=1.0, labels={"stage": "dispatch"}))
    es = m.schedule(g)
    assert (es.start_us["comb"], es.start_us["disp"]) == (0.0, 3.0)
    pb = m.schedule(g, m.PriorityByStage(order=["dispatch", "combine"]))
    assert (pb.start_us["disp"], pb.start_us["comb"]) == (2.0, 3.0)
    assert m.PriorityByStage.work_conserving is False


def test_view_is_read_only_and_probes_one_step() -> None:
    seen: dict[str, object] = {}

    class Probe(m.Policy):
        name = "probe"
        wants_view = True

        def choose(self, view: SchedulerView) -> str:
            elig = view.eligible()
            if "seen" not in seen and elig == ["a", "b"]:
                seen["seen"] = True
                # a and b share c0.x and could both start at 0
                seen["starts"] = (view.earliest_start("a"), view.earliest_start("b"))
                # if c0.x were busy until 4, b would start at 4
                seen["probe"] = view.start_if("b", {"c0.x": 4.0})
                seen["free"] = view.resource_free("c0.x")
                seen["methods"] = [k for k in dir(view) if not k.startswith("_")]
            return elig[0]

    g = m.EventGraph()
    g.add(m.Event("a", resources=["c0.x"], duration_us=2.0))
    g.add(m.Event("b", resources=["c0.x"], duration_us=1.0))
    s = m.schedule(g, Probe())
    assert seen["starts"] == (0.0, 0.0)
    assert seen["probe"] == 4.0
    assert seen["free"] == 0.0
    verbs = ("commit", "undo", "rollback", "set", "apply", "push", "pop")
    assert not any(name.startswith(verbs) for name in seen["methods"])  # type: ignore[attr-defined]
    assert (s.start_us["a"], s.start_us["b"]) == (0.0, 2.0)


def test_view_policy_choosing_a_non_eligible_event_is_an_error() -> None:
    class Bad(m.Policy):
        name = "bad"
        wants_view = True

        def choose(self, view: SchedulerView) -> str:
            return "b"

    g = m.EventGraph()
    g.add(m.Event("a", duration_us=1.0))
    g.add(m.Event("b", deps={"a": 0.0}, duration_us=1.0))
    with pytest.raises(m.SchedulingError, match="chose 'b', which is not an eligible event"):
        m.schedule(g, Bad())


def test_lookahead_one_step_gives_valid_schedules_on_a_benchmark_graph() -> None:
    g = layered_graph(600, seed=3, late_bind_tiles=True)
    s = m.schedule(g, "lookahead_one_step")
    m.validate_schedule(g, s)
    assert s.policy == "lookahead_one_step"


def test_fingerprint_is_identical_in_another_process() -> None:
    # hash randomisation differs per process; the fingerprint must not depend on it
    code = textwrap.dedent(
        """
        import moeopt as m
        from moeopt.synthetic import layered_graph
        g = layered_graph(2000, seed=7, late_bind_tiles=True)
        print(m.schedule(g).fingerprint())
        """
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True,
            env={"PYTHONHASHSEED": seed, "PATH": ""},
        ).stdout.strip()
        for seed in ("1", "2")
    }
    here = m.schedule(layered_graph(2000, seed=7, late_bind_tiles=True)).fingerprint()
    assert outs == {here}


def test_fingerprint_rounds_to_a_micro_microsecond() -> None:
    base = m.Schedule(start_us={"a": 1.0}, end_us={"a": 2.0}, resources={"a": ("c0.x",)})
    tiny = m.Schedule(start_us={"a": 1.0 + 1e-9}, end_us={"a": 2.0}, resources={"a": ("c0.x",)})
    moved = m.Schedule(start_us={"a": 1.00001}, end_us={"a": 2.0}, resources={"a": ("c0.x",)})
    rebound = m.Schedule(start_us={"a": 1.0}, end_us={"a": 2.0}, resources={"a": ("c1.x",)})
    assert base.fingerprint() == tiny.fingerprint()
    assert len({base.fingerprint(), moved.fingerprint(), rebound.fingerprint()}) == 3
