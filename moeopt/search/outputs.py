"""The output folder: ``best.toml``, ``trials.csv``, ``summary.json`` and ``report.html``.

``best.toml`` is the best point written as a complete scenario file (the base scenario with the
point's overrides, every shape-specific value included). Before it is reported, it is read back
with :func:`moeopt.load_scenario` and simulated again; ``summary.json`` says whether that gives
the trial's value exactly (``best.reproduced``).
"""

from __future__ import annotations

import collections
import csv
import json
import math
import multiprocessing
import os
import tempfile
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from moeopt.core import forked
from moeopt.errors import MoeoptError
from moeopt.megamoe.scenario import load_scenario
from moeopt.megamoe.simulate import simulate
from moeopt.plain import jsonable
from moeopt.search import exactgap, tomlw
from moeopt.search.config import StudyConfig
from moeopt.search.metrics import EXACT_METRICS, TIME_METRICS, metric_value
from moeopt.search.space import to_overrides
from moeopt.search.storage import StorageSpec
from moeopt.search.trials import (
    BASELINE_ATTR,
    BASELINE_TRIAL_ATTR,
    FAILED_KINDS,
    GAP_ATTR,
    PRUNED_KINDS,
    REASON_KINDS,
    RETRY_ATTR,
    WORKER_ATTR,
    WorkerStats,
    attrs,
    counts,
    set_study_record,
    study_record,
    target_trials,
    trials_per_minute,
)


@dataclass(frozen=True)
class StudyResult:
    """What :func:`moeopt.run_study` returns (the content of ``summary.json`` plus the paths)."""

    name: str
    out_dir: str
    storage: str
    n_trials: int
    states: Mapping[str, int]
    best_trial: int | None
    best_value: float | None
    best_values: Sequence[float] | None
    best_params: Mapping[str, Any]
    best_overrides: Mapping[str, Any]
    baseline_value: float | None
    delta_pct: float | None
    interrupted: bool
    files: Mapping[str, str]
    summary: Mapping[str, Any]
    status: str = "finished"
    """How the run ended: finished, interrupted, timeout or stopped (see ``runner.STATUSES``)."""


def _atomic_write(path: str, text: str) -> None:
    d = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=os.path.basename(path))
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def _finite(v: float | None) -> float | None:
    return v if v is not None and math.isfinite(v) else None


def pick_best(cfg: StudyConfig, study: optuna.Study) -> tuple[FrozenTrial | None, list[FrozenTrial]]:
    """The best trial (for several objectives: the Pareto trial best in the first) and the front."""
    complete = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)) if t.values]
    if not complete:
        return None, []
    sign = 1.0 if cfg.objective.direction == "minimize" else -1.0
    if cfg.multi_objective:
        front = list(study.best_trials)
        best = min(front, key=lambda t: (sign * t.values[0], t.number))
        return best, sorted(front, key=lambda t: t.number)
    best = min(complete, key=lambda t: (sign * t.values[0], t.number))
    return best, [best]


def write_outputs(
    cfg: StudyConfig,
    spec: StorageSpec,
    study: optuna.Study,
    stats: WorkerStats,
    elapsed_s: float,
    status: str = "finished",
    phase: Callable[[str], None] | None = None,
) -> StudyResult:
    """Write the outputs of the study; ``phase`` is told what takes time (re-simulating the best
    point, CP-SAT on it) before it starts."""
    say = phase or (lambda _text: None)
    out = cfg.out
    os.makedirs(out, exist_ok=True)
    trials = study.get_trials(deepcopy=False)
    files = {"storage": spec.path or spec.url}

    files["trials_csv"] = os.path.join(out, "trials.csv")
    _atomic_write(files["trials_csv"], trials_csv(cfg, trials))

    best, front = pick_best(cfg, study)
    baseline = study_record(study, BASELINE_ATTR) or {}
    base_value = _finite((baseline.get("values") or [None])[0])

    best_info: dict[str, Any] | None = None
    gap: dict[str, Any] = {"available": False, "reason": "no completed trial"}
    best_runs: dict[str, Any] = {}
    base_noise = BaseNoise(cfg) if best is not None and cfg.objective.metric in TIME_METRICS else None
    try:
        if best is not None:
            best_info, best_runs, gap = _best_outputs(cfg, study, best, files, say, base_noise)
    finally:
        if base_noise is not None:
            base_noise.close()

    states = collections.Counter(t.state.name for t in trials)
    kinds = collections.Counter(attrs(t).get("kind", "?") for t in trials if t.state != TrialState.COMPLETE)
    n_counted = sum(1 for t in trials if counts(t) and t.state != TrialState.RUNNING)
    delta = None
    if best_info is not None and base_value:
        delta = (best_info["value"] / base_value - 1.0) * 100.0
    summary: dict[str, Any] = {
        "study": cfg.name,
        "source": cfg.source,
        "out": out,
        "storage": spec.url,
        "sampler": cfg.sampler,
        "sampler_options": dict(cfg.sampler_options),
        "seed": cfg.seed,
        "objective": {
            "metric": cfg.objective.metric,
            "direction": cfg.objective.direction,
            "seeds": list(cfg.objective.seeds),
            "statistic": cfg.objective.statistic if cfg.objective.seeds else None,
        },
        "secondary": [{"metric": s.metric, "direction": s.direction} for s in cfg.secondary],
        "aggregate": cfg.aggregate,
        "shapes": [
            {"name": s.name, "scenario": s.source, "overrides": dict(s.overrides), "weight": s.weight}
            for s in cfg.shapes
        ],
        "space": [p.name for p in cfg.params],
        "requested_trials": cfg.trials,
        "timeout_s": cfg.timeout_s,
        "target_trials": target_trials(cfg),
        "n_trials": n_counted,
        "states": dict(sorted(states.items())),
        "pruned": {k: kinds[k] for k in PRUNED_KINDS if kinds[k]},
        "failed": {k: kinds[k] for k in FAILED_KINDS if kinds[k]},
        "duplicates": sum(1 for t in trials if "duplicate_of" in attrs(t)),
        "infeasible_reasons": _top_reasons(trials),
        "best": best_info,
        "baseline": baseline,
        "delta_pct": delta,
        "pareto_front": [{"trial": t.number, "values": list(t.values)} for t in front]
        if cfg.multi_objective
        else None,
        "importances": importances(cfg, study),
        "exact_gap": gap,
        "run": {"status": status, **_run_summary(cfg, stats, elapsed_s)},
        "files": files,
    }
    files["summary_json"] = os.path.join(out, "summary.json")
    if cfg.report:
        from moeopt.search.report import render

        files["report_html"] = os.path.join(out, "report.html")
        _atomic_write(files["report_html"], render(cfg, trials, summary, best_runs))
    summary["files"] = files
    _atomic_write(
        files["summary_json"],
        json.dumps(jsonable(summary, nonfinite="null"), indent=2, sort_keys=False) + "\n",
    )
    return StudyResult(
        name=cfg.name,
        out_dir=out,
        storage=spec.url,
        n_trials=n_counted,
        states=dict(states),
        best_trial=None if best is None else best.number,
        best_value=None if best_info is None else best_info["value"],
        best_values=None if best_info is None else best_info["values"],
        best_params={} if best_info is None else best_info["params"],
        best_overrides={} if best_info is None else best_info["overrides"],
        baseline_value=base_value,
        delta_pct=delta,
        interrupted=stats.interrupted,
        files=files,
        summary=summary,
        status=status,
    )


def _best_outputs(
    cfg: StudyConfig,
    study: optuna.Study,
    best: FrozenTrial,
    files: dict[str, str],
    say: Callable[[str], None],
    base_noise: BaseNoise | None,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The best point's outputs: ``best.toml`` checked by simulating it again, the optimality gap
    (CP-SAT), the scheduling-anomaly noise; returns the ``best`` record, the best point's
    results per shape and the gap (the files written are added to ``files``)."""
    best_info: dict[str, Any]
    best_runs: dict[str, Any]
    gap: dict[str, Any]
    shown = f"{best.values[0]:.3f} (trial {best.number})"
    if study.user_attrs.get("best") != shown:  # for people: optuna studies, optuna-dashboard
        study.set_user_attr("best", shown)
    overrides = to_overrides(cfg, best.params)
    best_info = {
        "trial": best.number,
        "value": best.values[0],
        "values": list(best.values),
        "params": dict(best.params),
        "overrides": overrides,
        "per_shape": attrs(best).get("per_shape", {}),
    }
    say(f"checking the best point (trial {best.number}): writing best.toml, simulating it again")
    best_info["files"], best_runs, best_info["reproduced"], best_info["reproduce_note"] = _write_best(
        cfg, best, overrides
    )
    files.update({f"best:{k}": v for k, v in best_info["files"].items()})
    files["best_toml"] = best_info["files"][cfg.shapes[0].name]
    stored = _stored_gap(cfg, study, best.number)
    if stored is not None:
        gap = stored
    else:
        if cfg.exact_gap is not None:
            say(
                "optimality gap of the best point: CP-SAT on each distinct rank "
                f"(a time limit of {cfg.exact_gap.time_limit_s:g} s each)"
            )
        gap = _gap(cfg, best_runs)
        if gap.get("available"):
            _store_gap(cfg, study, best.number, gap)
    best_info["noise_pct"] = _noise(cfg, best_runs, base_noise)

    return best_info, best_runs, gap


def _run_summary(cfg: StudyConfig, stats: WorkerStats, elapsed_s: float) -> dict[str, Any]:
    """How the run went (``summary.json`` ``run``): time, workers, lower-bound checks, recoveries."""
    return {
        "elapsed_s": elapsed_s,
        "workers": cfg.workers,
        "evaluated": stats.evaluated,
        "duplicates": stats.duplicates,
        "trials_per_minute": trials_per_minute(stats.evaluated + stats.duplicates, elapsed_s),
        "lower_bound_checks": {
            "checked": stats.lb_checked,
            "pruned": stats.lb_pruned,
            "skipped": stats.lb_skipped,
        },
        "recovered_trials": stats.recovered,
        "worker_errors": stats.errors,
        "interrupted": stats.interrupted,
        "space_exhausted": stats.exhausted,
    }


def _write_best(
    cfg: StudyConfig, best: FrozenTrial, overrides: Mapping[str, Any]
) -> tuple[dict[str, str], dict[str, Any], bool | None, str]:
    """Write one scenario file per shape, read each back, simulate it, compare with the trial."""
    files: dict[str, str] = {}
    runs: dict[str, Any] = {}
    per_shape = attrs(best).get("per_shape", {})
    reproduced: bool | None = True
    notes: list[str] = []
    for i, shape in enumerate(cfg.shapes):
        sc = shape.scenario(overrides)
        name = "best.toml" if i == 0 else f"best_{shape.name}.toml"
        path = os.path.join(cfg.out, name)
        header = (
            f"Best point of study {cfg.name!r} (trial {best.number}), shape {shape.name!r}.\n"
            f"{cfg.objective.metric} = {per_shape.get(shape.name, {}).get(cfg.objective.metric)!r}"
            + (f" (aggregate over shapes: {best.values[0]!r})" if len(cfg.shapes) > 1 else "")
            + "\nParameters: "
            + ", ".join(f"{k} = {v!r}" for k, v in best.params.items())
            + "\nRun it: python examples/run_scenario.py "
            + path
        )
        _atomic_write(path, tomlw.dumps(sc.to_dict(), header=header))
        files[shape.name] = path
        r = simulate(load_scenario(path))
        runs[shape.name] = r
        if cfg.objective.seeds:
            reproduced = None
            notes = ["the objective is a statistic over routing seeds; the file holds one seed"]
            continue
        want = per_shape.get(shape.name, {})
        notes += [
            f"{m} is not compared: a CP-SAT result can depend on its time limit"
            for m in EXACT_METRICS
            if m in want
        ]
        for m, v in want.items():
            if m in EXACT_METRICS:
                continue
            got = metric_value(m, r, cfg.objective.exact)
            if got != v:
                reproduced = False
                notes.append(f"{shape.name}: {m} re-simulated {got!r} != trial {v!r}")
    return files, runs, reproduced, "; ".join(notes)


def _exact_key(cfg: StudyConfig) -> dict[str, Any] | None:
    x = cfg.exact_gap
    return None if x is None else {"time_limit_s": x.time_limit_s, "workers": x.workers, "mode": x.mode}


def _stored_gap(cfg: StudyConfig, study: optuna.Study, best: int) -> dict[str, Any] | None:
    # the optimality gap of the best trial is kept on the study with the CP-SAT settings it was
    # found with, so that a rerun with the same best point does not solve it again
    rec = study_record(study, GAP_ATTR)
    if not isinstance(rec, dict) or rec.get("trial") != best or rec.get("exact") != _exact_key(cfg):
        return None
    gap = rec.get("gap")
    return {**gap, "stored": True} if isinstance(gap, dict) else None


def _store_gap(cfg: StudyConfig, study: optuna.Study, best: int, gap: Mapping[str, Any]) -> None:
    set_study_record(
        study,
        GAP_ATTR,
        {"trial": best, "exact": _exact_key(cfg), "gap": jsonable(dict(gap), nonfinite="null")},
    )


def _noise(
    cfg: StudyConfig, runs: Mapping[str, Any], base: BaseNoise | None = None
) -> dict[str, float] | None:
    """Per shape, the scheduling-anomaly noise of the best point against the baseline, measured
    as ``python -m moeopt compare`` measures it (:func:`moeopt.trust.compare.anomaly_pct`: the
    largest |Δ%| of the time when one critical-path input of the baseline or the best point is
    made 0.01 µs longer); ``None`` when the objective is not a kernel time. ``base``: the
    baseline's side, when it was started earlier (:class:`BaseNoise`)."""
    if cfg.objective.metric not in TIME_METRICS:
        return None
    from moeopt.trust.compare import anomaly_pct

    if base is None:
        base = BaseNoise(cfg, fork=False)
    base_pct = base.result()
    out: dict[str, float] = {}
    for shape in cfg.shapes:
        r = runs.get(shape.name)
        b = base_pct.get(shape.name)
        if r is None or b is None:  # the baseline may be refused or stopped: no Δ to judge then
            continue
        try:
            out[shape.name] = max(anomaly_pct(r), b)
        except MoeoptError:
            continue
    return out


def base_anomaly(cfg: StudyConfig) -> dict[str, float | None]:
    """Per shape, :func:`moeopt.trust.compare.anomaly_pct` of the base scenario (``None`` where
    simulating it or perturbing it raises a :class:`MoeoptError`)."""
    from moeopt.trust.compare import anomaly_pct

    out: dict[str, float | None] = {}
    for shape in cfg.shapes:
        try:
            out[shape.name] = anomaly_pct(simulate(shape.scenario({})))
        except MoeoptError:
            out[shape.name] = None
    return out


class BaseNoise:
    """The baseline's side of :func:`_noise` (:func:`base_anomaly`), computed in a forked child
    process while this one writes ``best.toml``, simulates the best point again and runs CP-SAT.

    It depends on the study file alone, and it is the larger half of the noise: a full
    ``simulate`` of the base scenario, then one schedule per probe (about 1.7 s of a study on
    examples/scenario_basic.toml went into the noise, with the two cores otherwise idle while
    the outputs are written). The child computes exactly what this process would (the same
    code on a copy of the same memory; the numbers come back pickled, bit for bit). Without
    ``fork``, with other threads running (a forked child gets no copy of them, and a lock one
    of them held would never be released there), or when the child does not deliver, the
    result is computed here, so any error is raised as it would be without the child.
    """

    def __init__(self, cfg: StudyConfig, fork: bool = True) -> None:
        self.cfg = cfg
        self._proc: Any = None
        self._conn: Any = None
        if not (fork and hasattr(os, "fork") and threading.active_count() == 1):
            return
        ctx = multiprocessing.get_context("fork")
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_base_noise_child, args=(cfg, send), daemon=True)
        with forked.stop_signals_held():  # (until the child has set its own: see there)
            proc.start()
        send.close()
        self._proc, self._conn = proc, recv

    def result(self) -> dict[str, float | None]:
        """The child's numbers, or (without a child, or when it delivered none) this process's."""
        got: Any = None
        if self._proc is not None:
            try:
                got = self._conn.recv()
            except (EOFError, OSError):  # it died without sending
                got = None
            finally:
                self.close()
        if isinstance(got, dict):
            return got
        return base_anomaly(self.cfg)

    def close(self) -> None:
        """Stop the child if it is still running (an error or Ctrl-C in this process meanwhile)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        self._conn.close()
        if proc.is_alive():
            proc.terminate()
        proc.join()


def _base_noise_child(cfg: StudyConfig, send: Any) -> None:
    # the parent handles Ctrl-C and stops this child itself (no traceback from here)
    forked.child_stop_signals()
    try:
        got: Any = base_anomaly(cfg)
    except BaseException:  # the parent computes it again and raises the error there
        got = None
    send.send(got)
    send.close()


def _gap(cfg: StudyConfig, runs: Mapping[str, Any]) -> dict[str, Any]:
    if cfg.exact_gap is None:
        return {"available": False, "reason": "disabled (outputs.exact_gap: false)"}
    why = exactgap.available()
    if why is not None:
        return {"available": False, "reason": why}
    out: dict[str, Any] = {"available": True, "shapes": {}}
    for name, r in runs.items():
        try:
            out["shapes"][name] = exactgap.scenario_gap(r, cfg.exact_gap)
        except Exception as exc:  # the report must still be written
            out["shapes"][name] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


def importances(cfg: StudyConfig, study: optuna.Study) -> dict[str, Any]:
    """Optuna's parameter importances (PED-ANOVA, the default evaluator) for the first objective."""
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if len(complete) < 2:
        return {
            "available": False,
            "reason": f"{len(complete)} completed trial(s); importances need at least 2",
        }
    try:
        target = (lambda t: t.values[0]) if cfg.multi_objective else None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. "some regimes have less than 2 trials" on small studies
            imp = optuna.importance.get_param_importances(study, target=target)
    except Exception as exc:
        return {"available": False, "reason": f"{type(exc).__name__}: {exc}"}
    return {"available": True, "evaluator": "PedAnovaImportanceEvaluator", "values": dict(imp)}


def _top_reasons(trials: Sequence[FrozenTrial], n: int = 10) -> list[dict[str, Any]]:
    c = collections.Counter(
        attrs(t).get("reason", "")
        for t in trials
        if attrs(t).get("kind") in REASON_KINDS and "duplicate_of" not in attrs(t)
    )
    return [{"reason": r, "trials": k} for r, k in c.most_common(n)]


def trials_csv(cfg: StudyConfig, trials: Sequence[FrozenTrial]) -> str:
    metrics = cfg.metrics
    value_cols = metrics if len(metrics) > 1 else ["value"]
    shape_cols = (
        [f"{s.name}:{m}" for s in cfg.shapes for m in dict.fromkeys(metrics)] if len(cfg.shapes) > 1 else []
    )
    params = [p.name for p in cfg.params]
    head = ["number", "state", "kind", *value_cols, *shape_cols, *params]
    head += ["lower_bound_us", "reason", "duplicate_of", "retry_of", "baseline", "worker_pid", "duration_s"]
    head += ["datetime_start", "datetime_complete"]
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(head)
    for t in sorted(trials, key=lambda t: t.number):
        a = attrs(t)
        vals = list(t.values) if t.state == TrialState.COMPLETE and t.values else [None] * len(value_cols)
        ps = a.get("per_shape", {})
        shape_vals = [ps.get(c.split(":", 1)[0], {}).get(c.split(":", 1)[1]) for c in shape_cols]
        worker = t.user_attrs.get(WORKER_ATTR) or {}
        dur = (
            (t.datetime_complete - t.datetime_start).total_seconds()
            if t.datetime_complete and t.datetime_start
            else None
        )
        row = [t.number, t.state.name, a.get("kind", "" if t.state != TrialState.COMPLETE else "ok")]
        row += [_cell(v) for v in vals] + [_cell(v) for v in shape_vals]
        row += [_cell(t.params.get(p)) for p in params]
        row += [
            _cell(a.get("lower_bound_us")),
            a.get("reason", ""),
            _cell(a.get("duplicate_of")),
            _cell(t.user_attrs.get(RETRY_ATTR)),
            "1" if t.user_attrs.get(BASELINE_TRIAL_ATTR) else "",
            _cell(worker.get("pid") if isinstance(worker, dict) else None),
            _cell(dur),
            t.datetime_start.isoformat() if t.datetime_start else "",
            t.datetime_complete.isoformat() if t.datetime_complete else "",
        ]
        w.writerow(row)
    return buf.getvalue()


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (list, dict)):
        return json.dumps(v, sort_keys=True)
    return str(v)
