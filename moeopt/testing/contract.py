"""The policy contract as a test suite: subclass :class:`PolicyContract` in a pytest file.

::

    import pytest
    from moeopt.testing import PolicyContract

    class TestMyPolicy(PolicyContract):
        @pytest.fixture
        def policy(self):
            return MyPolicy()          # or a registered name, e.g. "my_policy"

Its three tests then run on that policy, on random graphs drawn by
:func:`moeopt.testing.event_graphs` (Hypothesis shrinks a failure to a small graph).

``test_every_schedule_keeps_the_contract``, on each graph:

* **valid and bounded**: the schedule passes :func:`moeopt.validate_schedule` and its makespan
  is at least every bound of :func:`moeopt.testing.lower_bounds`;
* **deterministic**: the same schedule (fingerprint) with a fresh policy object, with another
  fresh one, and with one object reused across every graph (the contract lets a policy be reused
  across runs, so it must not keep state between them);
* **unchanged by semaphore normalisation** (dropping the semaphores that provably never bind,
  which the scheduler does by default);
* **blind to labels**: other labels give the same schedule, unless the class sets
  ``reads_labels = True``.

``test_matches_the_naive_scheduler``: equal starts, ends and bindings to
:func:`moeopt.testing.naive_schedule` (the greedy rule recomputed from scratch at every step),
for keyed policies; a view policy skips it.

``test_same_schedules_in_a_fresh_interpreter``: the same schedules in another Python process
with another hash seed (no dependence on ``hash()`` order or on anything else in the process);
the policy object is sent by ``pickle``, so its class must be importable there (defined at
module level).

A graph that deadlocks (semaphore units never given back) must deadlock every way it is
scheduled, with "deadlock" in the error. Class attributes tune the run: ``max_examples``
(graphs per test), ``max_events`` (graph size), ``naive_max_events`` (graph size for the naive
comparison, which is quadratic), ``fresh_interpreter_graphs`` (graphs sent to the other
interpreter; 0 turns that test off) and ``reads_labels``.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import pickle
import subprocess
import sys
from collections.abc import Callable
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings

from moeopt.core.events import EventGraph
from moeopt.core.policies import Policy, make_policy
from moeopt.core.schedule import Schedule
from moeopt.core.scheduler import schedule
from moeopt.core.validate import validate_schedule
from moeopt.errors import SchedulingError
from moeopt.testing.bounds import lower_bounds
from moeopt.testing.naive import naive_schedule
from moeopt.testing.strategies import event_graphs

TOL_US = 1e-9

# the other interpreter: rebuild each graph from plain data, schedule it with the unpickled
# policy, send the fingerprints back (None: a deadlock)
_CHILD = """
import pickle, sys
from moeopt.core.events import Event, EventGraph
from moeopt.core.scheduler import schedule
from moeopt.errors import SchedulingError

policy, specs = pickle.load(sys.stdin.buffer)
out = []
for semaphores, pools, events in specs:
    g = EventGraph(semaphores=semaphores, pools=pools)
    g.add_all(Event(**fields) for fields in events)
    try:
        out.append(schedule(g, policy).fingerprint())
    except SchedulingError as exc:
        out.append(None if "deadlock" in str(exc) else f"error: {exc}")
sys.stdout.buffer.write(pickle.dumps(out))
"""


def _spec(g: EventGraph) -> tuple[dict[str, int], dict[str, list[str]], list[dict[str, Any]]]:
    """A graph as plain data (events keep read-only mappings, which do not pickle)."""
    events = [
        {
            "name": ev.name,
            "resources": list(ev.resources),
            "deps": dict(ev.deps),
            "acquires": dict(ev.acquires),
            "releases": dict(ev.releases),
            "colocate_with": ev.colocate_with,
            "duration_us": ev.duration_us,
            "labels": dict(ev.labels),
        }
        for ev in g
    ]
    return dict(g.semaphores), {k: list(v) for k, v in g.pools.items()}, events


def _run(g: EventGraph, policy: str | Policy, *, normalize: bool = True) -> Schedule | None:
    """The schedule, or ``None`` for a deadlock (any other scheduling error fails the test)."""
    try:
        return schedule(g, policy, normalize=normalize)
    except SchedulingError as exc:
        if "deadlock" not in str(exc):
            pytest.fail(f"scheduling failed other than by a deadlock: {exc}")
        return None


def _fingerprint(s: Schedule | None) -> str | None:
    return None if s is None else s.fingerprint()


class PolicyContract:
    """Base class of a policy's contract tests (see the module docstring).

    A subclass defines the ``policy`` fixture: a :class:`~moeopt.core.policies.Policy` object
    (each test works on deep copies of it, so it may be configured) or a registered policy name.
    """

    max_examples: ClassVar[int] = 100
    max_events: ClassVar[int] = 9
    naive_max_events: ClassVar[int] = 7
    fresh_interpreter_graphs: ClassVar[int] = 20
    reads_labels: ClassVar[bool] = False

    @pytest.fixture
    def policy(self) -> str | Policy:
        """The policy under test; a subclass must define this fixture."""
        raise NotImplementedError(
            f"{type(self).__name__} must define a `policy` fixture returning a Policy object or a "
            f"registered policy name"
        )

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def fresh(policy: str | Policy) -> Policy:
        """A new policy object, never prepared: a deep copy of an object, or one made from a
        registered name."""
        if isinstance(policy, Policy):
            return copy.deepcopy(policy)
        return make_policy(policy)

    def examples(self, n: int | None = None) -> Callable[[Callable[..., None]], Callable[..., None]]:
        """The Hypothesis settings of these tests (``max_examples`` unless ``n``)."""
        return settings(
            max_examples=self.max_examples if n is None else n,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        )

    # ------------------------------------------------------------------ the contract
    def test_every_schedule_keeps_the_contract(self, policy: str | Policy) -> None:
        """Valid, bounded, deterministic, blind to labels, unchanged by normalisation (one drawn
        graph serves every check; the message says which one failed)."""
        reused = self.fresh(policy)
        reads_labels = self.reads_labels

        @self.examples()
        @given(event_graphs(max_events=self.max_events))
        def check(g: EventGraph) -> None:
            s = _run(g, self.fresh(policy))
            first = _fingerprint(s)
            if s is not None:
                validate_schedule(g, s)
                for name, bound in lower_bounds(g).items():
                    assert s.makespan_us >= bound - TOL_US * max(1.0, bound), (
                        f"makespan {s.makespan_us:g} µs is below the lower bound {name} = {bound:g} µs"
                    )
            assert _fingerprint(_run(g, self.fresh(policy))) == first, (
                "a second fresh policy object gives another schedule"
            )
            assert _fingerprint(_run(g, reused)) == first, (
                "one policy object reused across graphs gives another schedule: it keeps state "
                "between runs"
            )
            plain = _fingerprint(_run(g, self.fresh(policy), normalize=False))
            assert plain == first, "dropping the semaphores that never bind changes the schedule"
            if not reads_labels:
                relabelled = g.copy_with(events=[dataclasses.replace(ev, labels={"other": 1}) for ev in g])
                assert _fingerprint(_run(relabelled, self.fresh(policy))) == first, (
                    "other labels give another schedule (set reads_labels = True if the policy "
                    "ranks by labels on purpose)"
                )

        check()

    def test_same_schedules_in_a_fresh_interpreter(self, policy: str | Policy) -> None:
        if self.fresh_interpreter_graphs <= 0:
            pytest.skip("fresh_interpreter_graphs = 0 turns this test off")
        graphs: list[EventGraph] = []

        @self.examples(self.fresh_interpreter_graphs)
        @given(event_graphs(max_events=self.max_events))
        def collect(g: EventGraph) -> None:
            graphs.append(g)

        collect()
        here = [_fingerprint(_run(g, self.fresh(policy))) for g in graphs]
        try:
            payload = pickle.dumps((self.fresh(policy), [_spec(g) for g in graphs]))
        except (pickle.PicklingError, AttributeError, TypeError) as exc:
            pytest.fail(
                f"the policy cannot be sent to another interpreter ({exc}); define its class at "
                f"module level, or set fresh_interpreter_graphs = 0"
            )
        env = dict(os.environ)
        # another hash seed than this process's, and this process's import path (the policy's
        # module must be importable there)
        env["PYTHONHASHSEED"] = "2" if os.environ.get("PYTHONHASHSEED") == "1" else "1"
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD],
            input=payload,
            capture_output=True,
            env=env,
            timeout=600,
            check=False,
        )
        assert proc.returncode == 0, (
            "the other interpreter failed:\n" + proc.stderr.decode(errors="replace")[-3000:]
        )
        there = pickle.loads(proc.stdout)
        assert len(there) == len(here)
        differ = [k for k, (a, b) in enumerate(zip(here, there)) if a != b]
        assert not differ, (
            f"{len(differ)} of {len(here)} graphs get another schedule in an interpreter with "
            f"PYTHONHASHSEED={env['PYTHONHASHSEED']}; the first: {list(graphs[differ[0]])}"
        )

    def test_matches_the_naive_scheduler(self, policy: str | Policy) -> None:
        if self.fresh(policy).wants_view:
            pytest.skip(
                "a view policy chooses through the scheduler's view; the naive reference ranks by rank()"
            )

        @self.examples()
        @given(event_graphs(max_events=self.naive_max_events))
        def check(g: EventGraph) -> None:
            s = _run(g, self.fresh(policy))
            try:
                ref = naive_schedule(g, self.fresh(policy))
            except SchedulingError:
                assert s is None, "the naive scheduler deadlocks, the scheduler does not"
                return
            assert s is not None, "the scheduler deadlocks, the naive scheduler does not"
            for name, (start, end, bound) in ref.items():
                assert s.start_us[name] == pytest.approx(start, abs=TOL_US), name
                assert s.end_us[name] == pytest.approx(end, abs=TOL_US), name
                assert s.resources[name] == bound, name

        check()
