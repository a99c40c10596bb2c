"""The trial vocabulary shared by the runner, the evaluator and the outputs.

What a trial carries in the Optuna storage, which trials count towards the requested number,
and the record of one outcome. Nothing here runs a trial or writes a file; the runner and the
outputs both read it, and neither imports the other for it.

Names stored in the study (user attributes):

* on a trial: :data:`RESULT_ATTR` the outcome record (:meth:`Outcome.attrs`: ``kind``,
  ``reason``, ``lower_bound_us``, ``per_shape``, ``detail``, ``duplicate_of``),
  :data:`WORKER_ATTR` who runs it (host, pid, process start), :data:`RETRY_ATTR` the trial whose
  point it runs again, :data:`BASELINE_TRIAL_ATTR` set on the base scenario's own point;
* on the study, as *system* attributes (records for moeopt, kept out of the user attributes so
  that ``optuna studies`` and optuna-dashboard stay readable; :func:`study_record`):
  :data:`STUDY_ATTR` what defines the search (a resumed study must match it),
  :data:`BASELINE_ATTR` the base scenario's outcome, :data:`GAP_ATTR` the optimality gap of the
  best trial;
* on the study, as user attributes, a short summary for people (:data:`SUMMARY_ATTRS`).

A trial *counts* towards the requested number when it is COMPLETE, PRUNED, RUNNING, or FAIL for
a reason other than an interruption (a failure is a result: a guardrail fired).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from moeopt.search.optuna_private import storage_of
from moeopt.search.space import grid_size

if TYPE_CHECKING:
    from moeopt.search.config import StudyConfig

RESULT_ATTR = "moeopt"
WORKER_ATTR = "worker"
RETRY_ATTR = "retry_of"
BASELINE_TRIAL_ATTR = "baseline"
STUDY_ATTR = "moeopt_study"
BASELINE_ATTR = "moeopt_baseline"
GAP_ATTR = "moeopt_best_gap"
SUMMARY_ATTRS = ("objective", "baseline", "best")
"""The study's user attributes: ``objective`` (``kernel_total_us, minimize``), ``baseline`` (the
base scenario's value) and ``best`` (``1754.743 (trial 5)``), one short value each."""

# outcome kinds (``kind`` of the record): why a point was pruned, why a trial failed
PRUNED_KINDS = ("constraint", "infeasible", "lower_bound")
FAILED_KINDS = ("guardrail", "error", "internal", "interrupted", "surplus")
NOT_COUNTED_KINDS = ("interrupted", "surplus")  # a stop or a lost race, not a result of the point
REASON_KINDS = ("infeasible", "constraint", "guardrail", "error", "internal")  # the point's own fault


@dataclass
class Outcome:
    """What one point gave. ``state``: complete | pruned | failed; ``kind`` says why."""

    state: str
    kind: str
    values: list[float] | None = None
    reason: str | None = None
    lower_bound_us: float | None = None
    per_shape: dict[str, dict[str, float]] = field(default_factory=dict)
    detail: str | None = None

    def attrs(self) -> dict[str, Any]:
        """The JSON-able record stored on the trial (user attribute :data:`RESULT_ATTR`)."""
        out: dict[str, Any] = {"kind": self.kind}
        if self.reason is not None:
            out["reason"] = self.reason
        if self.lower_bound_us is not None:
            out["lower_bound_us"] = self.lower_bound_us
        if self.per_shape:
            out["per_shape"] = self.per_shape
        if self.detail is not None:
            out["detail"] = self.detail[-4000:]
        return out


def study_record(study: optuna.Study, key: str) -> Any:
    """A record moeopt keeps on the study (``None`` when absent). Studies written by earlier
    versions kept it as a user attribute, where it is still read."""
    storage = storage_of(study)
    found = storage.get_study_system_attrs(storage.get_study_id_from_name(study.study_name))
    return found[key] if key in found else study.user_attrs.get(key)


def set_study_record(study: optuna.Study, key: str, value: Any) -> None:
    storage = storage_of(study)
    storage.set_study_system_attr(storage.get_study_id_from_name(study.study_name), key, value)


def attrs(t: FrozenTrial) -> dict[str, Any]:
    """The outcome record of a trial (empty when it has none yet)."""
    a = t.user_attrs.get(RESULT_ATTR)
    return a if isinstance(a, dict) else {}


def is_interrupted(t: FrozenTrial) -> bool:
    return t.state == TrialState.FAIL and attrs(t).get("kind") in NOT_COUNTED_KINDS


def counts(t: FrozenTrial) -> bool:
    """Whether a trial counts towards the requested number of trials."""
    if t.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING):
        return True
    return t.state == TrialState.FAIL and not is_interrupted(t)


def finished(t: FrozenTrial) -> bool:
    return t.state != TrialState.RUNNING and counts(t)


def best_value(trials: Sequence[FrozenTrial], cfg: StudyConfig) -> float | None:
    vals = [t.values[0] for t in trials if t.state == TrialState.COMPLETE and t.values]
    if not vals:
        return None
    return min(vals) if cfg.objective.direction == "minimize" else max(vals)


def target_trials(cfg: StudyConfig) -> int:
    """The trials to run: the requested number, or fewer when a grid has fewer points."""
    if cfg.sampler in ("grid", "bruteforce"):
        return min(cfg.trials, grid_size(cfg))
    return cfg.trials


def trials_per_minute(n: int, elapsed_s: float) -> float:
    return 60.0 * n / elapsed_s if elapsed_s > 0 else math.inf


@dataclass
class WorkerStats:
    """What one worker did (the workers' statistics are added up for ``summary.json``)."""

    evaluated: int = 0
    duplicates: int = 0
    lb_checked: int = 0
    lb_pruned: int = 0
    lb_skipped: int = 0
    recovered: list[int] = field(default_factory=list)
    elapsed_s: float = 0.0
    interrupted: bool = False
    exhausted: bool = False
    errors: list[str] = field(default_factory=list)

    def add(self, other: WorkerStats) -> None:
        self.evaluated += other.evaluated
        self.duplicates += other.duplicates
        self.lb_checked += other.lb_checked
        self.lb_pruned += other.lb_pruned
        self.lb_skipped += other.lb_skipped
        self.recovered += other.recovered
        self.errors += other.errors
        self.interrupted = self.interrupted or other.interrupted
        self.exhausted = self.exhausted or other.exhausted
