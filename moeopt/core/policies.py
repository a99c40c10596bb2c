"""Scheduling policies: which eligible event the greedy commits next.

The contract (every policy, built-in or registered by a user):

* A *keyed* policy (``wants_view = False``) ranks each eligible event by the key
  ``(before, start_us, after, index)`` compared left to right, where ``(before, after) =
  rank(i)`` are numbers fixed per event (asked once per event per run, after ``prepare``),
  ``start_us`` is when the event could start now and ``index`` the order it was added to the
  graph. The scheduler commits the smallest key. The key's shape is fixed: a policy chooses
  ``rank`` only, and a policy class that defines a ``key`` method of its own is refused (the
  scheduler would never call it). Keeping the start-dependent part in this fixed shape is what
  lets the scheduler park events that wait for the same resource in one queue instead of
  re-ranking each of them after every commit.
* A *view* policy (``wants_view = True``) is asked ``choose(view)`` at every step and returns
  the name of an eligible event. The :class:`~moeopt.core.view.SchedulerView` it receives is
  read-only: it can ask, probe and compare, never commit or undo. A view policy that only ever
  picks among the ``k`` eligible events that can start earliest (``view.earliest(k)``)
  declares ``candidates = k``: the scheduler then finds those with the same lazy heap as
  ``earliest_start`` (linear cost) instead of evaluating every eligible event at every step
  (quadratic where many are eligible at once), and refuses a choice outside them.
* ``prepare(cg)`` is called once per run with the :class:`~moeopt.core.compiled.CompiledGraph`
  (frozen: tuples and read-only mappings), before any ``rank`` or ``choose`` call; a policy
  object may be reused across runs but must not keep state between them otherwise.
* ``work_conserving`` declares whether the policy promises to start ready work whenever a
  pool member is free; the work-conservation guardrail is not checked for policies that
  declare ``False``.

Policies must be deterministic: same graph in, same choices out. :mod:`moeopt.testing` has a
test suite that checks a policy against this contract (``PolicyContract``).

The built-in policies are registered once, below; :data:`BUILTIN_POLICIES` lists them in that
order, read back from the registry.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from moeopt.core.compiled import CompiledGraph
from moeopt.errors import InputError
from moeopt.registry import builtin_names, lookup, register_builtin

if TYPE_CHECKING:
    from moeopt.core.view import SchedulerView


class Policy:
    """Base class of scheduling policies (see the module docstring for the contract)."""

    name: str = "policy"
    work_conserving: bool = True
    wants_view: bool = False
    #: For a view policy: ``k`` when ``choose`` only ever picks among ``view.earliest(k)`` (the
    #: ``k`` eligible events that can start earliest). The scheduler then finds those ``k`` with
    #: the lazy heap of ``earliest_start`` instead of evaluating every eligible event at every
    #: step, which made view policies quadratic where many events are eligible at once. A
    #: choice outside them is refused. ``None``: ``choose`` may pick any eligible event.
    candidates: int | None = None

    def prepare(self, cg: CompiledGraph) -> None:
        """Precompute what ``rank`` (or ``choose``) needs for this graph."""

    def rank(self, i: int) -> tuple[float, float]:
        """``(before, after)`` of event ``i``: the scheduler's key is ``(before, start_us, after, i)``."""
        return (0.0, 0.0)

    def choose(self, view: SchedulerView) -> str:
        """For ``wants_view`` policies: the name of the eligible event to commit next."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class EarliestStart(Policy):
    """Commit the eligible event that can start earliest (ties: first added). The default."""

    name = "earliest_start"


class CriticalPathFirst(Policy):
    """Commit the eligible event with the longest path to the end of the graph first, wherever
    it starts (serial list scheduling by priority; equal tails go by earliest start). Not
    work-conserving: a core may idle while
    a less critical event is ready."""

    name = "critical_path_first"
    work_conserving = False

    def __init__(self) -> None:
        self._neg_tail: list[float] = []

    def prepare(self, cg: CompiledGraph) -> None:
        self._neg_tail = [-t for t in cg.tails()]

    def rank(self, i: int) -> tuple[float, float]:
        return (self._neg_tail[i], 0.0)


class WorkConservingCriticalPath(Policy):
    """Among the events that can start earliest, commit the one with the longest tail."""

    name = "work_conserving_critical_path"

    def __init__(self) -> None:
        self._neg_tail: list[float] = []

    def prepare(self, cg: CompiledGraph) -> None:
        self._neg_tail = [-t for t in cg.tails()]

    def rank(self, i: int) -> tuple[float, float]:
        return (0.0, self._neg_tail[i])


class PriorityByStage(Policy):
    """Commit events of an earlier stage first, then by earliest start.

    ``order`` lists stage names, highest priority first; the stage of an event is its label
    ``label`` (default ``"stage"``; this is a policy, the scheduler itself never reads labels).
    Events whose stage is not listed come after every listed one. Without ``order``, stages rank
    in the order they first appear in the graph's topological order (upstream first).
    Not work-conserving: a core waits for higher-priority work rather than start lower-priority
    work that is ready.
    """

    name = "priority_by_stage"
    work_conserving = False

    def __init__(self, order: Sequence[str] | None = None, label: str = "stage") -> None:
        if order is not None and (isinstance(order, str) or not all(isinstance(s, str) for s in order)):
            raise InputError(f"priority_by_stage: order must be a list of stage names, got {order!r}")
        self.order = None if order is None else list(order)
        self.label = label
        self._rank: list[int] = []

    def prepare(self, cg: CompiledGraph) -> None:
        stage_of = [ev.labels.get(self.label) for ev in cg.events]
        if self.order is not None:
            rank_of = {s: k for k, s in enumerate(self.order)}
        else:
            rank_of = {}
            for i in cg.topo:
                s = stage_of[i]
                if s is not None and s not in rank_of:
                    rank_of[s] = len(rank_of)
        unknown = len(rank_of)
        self._rank = [rank_of.get(s, unknown) if s is not None else unknown for s in stage_of]

    def rank(self, i: int) -> tuple[float, float]:
        return (float(self._rank[i]), 0.0)

    def __repr__(self) -> str:
        return f"PriorityByStage(order={self.order!r}, label={self.label!r})"


class LookaheadOneStep(Policy):
    """A baseline view policy: try each of the ``width`` earliest eligible events, probe how the
    others could start after it (``start_if``), and commit the one minimising a one-step lower
    bound on the makespan (max over probed events of start + tail). Ties: earlier start, then
    first added.

    Expected to be no better than ``earliest_start`` (minimising a loose bound is not minimising
    the makespan) and slower (``width``² probes per step); it exists to exercise the view
    contract and as a baseline. It declares ``candidates = width``.
    """

    name = "lookahead_one_step"
    wants_view = True

    def __init__(self, width: int = 6) -> None:
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            raise InputError(f"lookahead_one_step: width must be an integer >= 1, got {width!r}")
        self.width = width
        self.candidates = width

    def choose(self, view: SchedulerView) -> str:
        cands = view.earliest(self.width)
        if len(cands) == 1:
            return cands[0]
        starts = {e: view.earliest_start(e) for e in cands}
        best: tuple[float, float, int] | None = None
        best_name = cands[0]
        for c in cands:
            s_c = starts[c]
            if s_c == float("inf"):
                continue
            end_c = s_c + view.duration(c)
            occupied = dict.fromkeys(view.binding_if(c), end_c)
            bound = s_c + view.tail(c)
            for o in cands:
                if o == c:
                    continue
                s_o = view.start_if(o, occupied)
                v = s_o + view.tail(o)
                if v > bound:
                    bound = v
            score = (bound, s_c, view.position(c))
            if best is None or score < best:
                best = score
                best_name = c
        return best_name

    def __repr__(self) -> str:
        return f"LookaheadOneStep(width={self.width})"


for _cls in (EarliestStart, CriticalPathFirst, WorkConservingCriticalPath, PriorityByStage, LookaheadOneStep):
    register_builtin("policy", _cls.name, _cls)

BUILTIN_POLICIES: tuple[str, ...] = builtin_names("policy")
"""The built-in policy names, in the order they were registered (read back from the registry)."""


def make_policy(policy: str | Policy) -> Policy:
    """A policy object from a registered name or an instance."""
    if isinstance(policy, Policy):
        obj = policy
    elif isinstance(policy, str):
        obj = lookup("policy", policy)()
        if not isinstance(obj, Policy):
            raise InputError(f"policy {policy!r} was registered with a factory that does not build a Policy")
    else:
        raise InputError(f"policy must be a registered name or a Policy object, got {policy!r}")
    k = obj.candidates
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1 or not obj.wants_view):
        raise InputError(
            f"policy {obj.name!r}: candidates must be None or an integer >= 1 on a view policy "
            f"(wants_view = True), got {k!r}" + ("" if obj.wants_view else " on a keyed policy")
        )
    if getattr(type(obj), "key", None) is not None:
        raise InputError(
            f"policy {obj.name!r} ({type(obj).__name__}) defines key(), which the scheduler never calls: "
            f"the key is always (before, start_us, after, index); define rank(i) -> (before, after) "
            f"instead, or set wants_view = True and define choose(view)"
        )
    return obj
