"""The result of :func:`moeopt.solve_exact`: :class:`ExactResult` and :class:`SolveStatus`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from moeopt.core.schedule import Schedule
from moeopt.plain import jsonable

REL_TOL = 1e-9
ABS_TOL_US = 1e-9


class SolveStatus(str, Enum):
    """What is known about the real-valued instance after the solve.

    * ``optimal``: ``schedule`` is valid and its makespan equals ``lower_bound_us`` (proven).
    * ``feasible``: ``schedule`` is valid; the optimum lies in ``[lower_bound_us, best_us]``.
    * ``infeasible``: no schedule has a makespan within the model's horizon (``lower_bound_us``
      says how far any schedule must go; with a hint this cannot happen).
    * ``unknown``: no valid schedule within the time limit (or the replay failed and there was
      no hint); ``lower_bound_us`` still holds.
    * ``model_invalid``: CP-SAT rejected the model (a bug in moeopt; ``message`` says why).
    """

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    UNKNOWN = "unknown"
    MODEL_INVALID = "model_invalid"

    def __str__(self) -> str:
        return self.value


def same_time(a: float, b: float) -> bool:
    """``a`` and ``b`` are the same makespan up to float round-off."""
    return abs(a - b) <= ABS_TOL_US + REL_TOL * max(abs(a), abs(b))


@dataclass(frozen=True, slots=True)
class ExactResult:
    """Everything :func:`moeopt.solve_exact` found out about one event graph.

    Attributes:
        status: see :class:`SolveStatus`.
        lower_bound_us: a proven lower bound on the makespan of every schedule of the graph: the
            largest of the CP-SAT bound and the static bounds (``bounds_us``).
        best_us: makespan of ``schedule`` (``None`` without one).
        schedule: the best valid schedule found (checked by ``validate_schedule`` with the real
            durations), from the CP-SAT replay or, when that is not better, the hint.
        solve_s: wall seconds inside CP-SAT.
        mode: ``"exact"`` or ``"relaxed"``.
        params_used: every CP-SAT parameter moeopt set (name -> value).
        bound_source: which bound is ``lower_bound_us``: ``"cpsat"``, ``"longest_path"``,
            ``"resource:<name>"``, ``"pool:<role>"`` or ``"semaphore:<name>"``.
        bounds_us: every bound computed (source -> µs), ``"cpsat"`` included.
        cpsat_status: CP-SAT's own status name on the tick model.
        cpsat_bound_us: CP-SAT's objective bound times the tick.
        cpsat_best_us: CP-SAT's best objective times the tick (a tick-model value, not a real
            makespan when durations were rounded), ``None`` without a solution.
        best_source: ``"cpsat"`` (the replayed solver schedule), ``"hint"``, ``"improved"`` (the
            hint improved by forward-backward passes, :mod:`moeopt.exact.improve`), ``"window"``
            (the hint improved by CP-SAT on windows, :mod:`moeopt.exact.neighbourhood`),
            ``"restarted"`` (found after the solve by restarts of those passes, see
            :func:`moeopt.exact.gap.graph_optimality_gap`) or ``None``.
        replay_error: why the solver's schedule could not be replayed, or ``None``.
        tick_us: the model's time grid; ``durations_rounded``: some duration or λ was rounded down.
        horizon_us: the longest makespan the model allowed (the hint's, when there is one).
        semaphore_models: per semaphore ``"holding"``, ``"reservoir"`` or ``"dropped"``.
        total_s: wall seconds of the whole call (model building, solve, replay, validation).
        message: extra detail for ``infeasible`` / ``model_invalid`` / ``unknown``.
        symmetric_sites: sizes of the classes of interchangeable sites whose symmetry the model
            broke (exact mode, :mod:`moeopt.exact.symmetry`); empty when none.
        bound_methods: per bound source, the argument that reached its value (``"energy"``,
            ``"fit"`` / ``"dff<k>"`` for weighted energy, ``"machines<m>"``, ``"path"``, see
            :class:`moeopt.exact.bounds.Bound`); empty for CP-SAT and caller limits.
    """

    status: SolveStatus
    lower_bound_us: float
    best_us: float | None
    schedule: Schedule | None
    solve_s: float
    mode: str
    params_used: Mapping[str, Any]
    bound_source: str
    bounds_us: Mapping[str, float]
    cpsat_status: str
    cpsat_bound_us: float
    cpsat_best_us: float | None
    best_source: str | None
    replay_error: str | None
    tick_us: float
    durations_rounded: bool
    horizon_us: float
    semaphore_models: Mapping[str, str]
    total_s: float
    message: str = ""
    symmetric_sites: tuple[int, ...] = ()
    bound_methods: Mapping[str, str] = field(default_factory=dict)

    @property
    def bound_method(self) -> str:
        """The argument behind ``lower_bound_us`` (``""`` for CP-SAT and caller limits)."""
        return self.bound_methods.get(self.bound_source, "")

    @property
    def class_bounds(self) -> dict[str, tuple[str, float]]:
        """Per constraint class, the largest bound that class reaches alone and its source:
        ``{"semaphore": ("semaphore:hbm", 539.98), "precedence": ("longest_path", 356.5), ...}``
        (classes: :func:`moeopt.exact.bounds.constraint_class`), largest first. ``"cpsat"`` is
        the whole model, every class together."""
        from moeopt.exact.bounds import constraint_class

        best: dict[str, tuple[str, float]] = {}
        for source, value in self.bounds_us.items():
            cls = constraint_class(source)
            if cls not in best or value > best[cls][1]:
                best[cls] = (source, value)
        return dict(sorted(best.items(), key=lambda kv: -kv[1][1]))

    @property
    def class_bounds_us(self) -> dict[str, float]:
        """:attr:`class_bounds` without the sources: class -> µs."""
        return {cls: value for cls, (_src, value) in self.class_bounds.items()}

    def bound_explanation(self) -> str:
        """One line on where the certificate comes from: the winning bound, its argument, and how
        far each constraint class reaches alone (``""`` when the bound is proven optimal)."""
        from moeopt.exact.bounds import describe_method

        if self.proven_optimal or self.best_us is None:
            return ""
        method = self.bound_method
        won = self.bound_source + (f" ({describe_method(method)})" if method else "")
        parts = []
        for cls, (source, value) in self.class_bounds.items():
            if value <= 0:
                continue  # e.g. CP-SAT stopped before proving anything
            detail = "" if source == cls else f" [{source}]"
            parts.append(f"{cls} {value:.2f}{detail}")
        gap = self.gap
        gap_text = "" if gap is None else f"{100.0 * gap:.2f}% below the best schedule; "
        return f"bound from {won}, {gap_text}each class alone: " + ", ".join(parts)

    @property
    def proven_optimal(self) -> bool:
        """The best schedule's makespan equals the lower bound."""
        return self.status is SolveStatus.OPTIMAL

    @property
    def gap(self) -> float | None:
        """``best_us / lower_bound_us − 1`` (``None`` without a schedule or with a zero bound)."""
        if self.best_us is None or self.lower_bound_us <= 0 or math.isinf(self.lower_bound_us):
            return None
        return self.best_us / self.lower_bound_us - 1.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (the schedule itself is left out)."""
        return {
            "status": self.status.value,
            "lower_bound_us": self.lower_bound_us,
            "best_us": self.best_us,
            "proven_optimal": self.proven_optimal,
            "gap": self.gap,
            "bound_source": self.bound_source,
            "bounds_us": dict(self.bounds_us),
            "best_source": self.best_source,
            "solve_s": self.solve_s,
            "total_s": self.total_s,
            "mode": self.mode,
            "cpsat_status": self.cpsat_status,
            "cpsat_bound_us": self.cpsat_bound_us,
            "cpsat_best_us": self.cpsat_best_us,
            "replay_error": self.replay_error,
            "tick_us": self.tick_us,
            "durations_rounded": self.durations_rounded,
            "horizon_us": self.horizon_us,
            "semaphore_models": dict(self.semaphore_models),
            "params_used": jsonable(dict(self.params_used)),
            "message": self.message,
            "symmetric_sites": list(self.symmetric_sites),
            "bound_method": self.bound_method,
            "bound_methods": dict(self.bound_methods),
            "class_bounds_us": self.class_bounds_us,
            "class_bound_sources": {cls: src for cls, (src, _v) in self.class_bounds.items()},
        }
