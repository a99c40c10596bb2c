"""Evaluating one point: feasibility, the lower bound, simulation, metrics, aggregation.

The order is the cheapest-first order a kernel engineer expects of an auto-tuner:

1. constraints of the study file (pure arithmetic on the parameters);
2. building every shape's scenario: a point the adapter rejects (buffers that do not fit the
   kernel's budgets, misaligned sizes, links the implementation cannot express, values that are
   not modelled; the rows a rank receives beyond the kernel's window when its graph is built)
   is *infeasible*, with the adapter's message as the reason;
3. the lower bound of each rank: the shape's physical bounds (compute / bandwidth / dependency
   chain, :func:`moeopt.megamoe.analysis.physical_bounds`) and the floors of the point's own event
   graph (its longest path and busiest role, :func:`moeopt.megamoe.analysis.graph_floors`: valid
   lower bounds of every schedule of that graph), aggregated like the objective: when it is
   already no better than the best value found, the point cannot win and is pruned without
   scheduling (valid because every aggregate used is monotone in each shape's time; the adapter
   guarantees time >= the physical bounds, raising ``BoundViolation`` otherwise, and no schedule
   of a graph undercuts its floors). In ``auto`` mode a point whose ranks decide it sooner is
   not checked (:meth:`Evaluator._ranks_decide`: a kernel-time objective on scenarios of several
   distinct ranks each, where building every rank's graph for the check costs more than timing
   the likely slowest ones);
4. :func:`moeopt.simulate` for every shape (and routing seed); a guardrail or any other error
   fails this trial only, with the reason stored. A study whose metrics are kernel times only
   (``kernel_total_us``, ``kernel_dag_end_us``) asks :func:`moeopt.megamoe.kerneltime.kernel_time`
   instead: the same times and guardrails, without the analyses. Such a point stops as soon as
   what is known proves it cannot win (:meth:`Evaluator.evaluate`): the shapes and routing
   seeds are timed in order, each with a *threshold*, the least time of that scenario at which
   the aggregate of its time with the others' known values (exact times of the scenarios done,
   lower bounds of the rest: their bound check's, else 0) reaches the best value. Its ranks are
   scheduled likely slowest first (the most rows on one expert), and it stops at the first
   rank whose time alone reaches the threshold (the kernel's time is its slowest rank's);
   after each scenario the aggregate of the known values is checked against the best. On a
   skewed routing a point that cannot win stops after a rank or two; in a study of several
   shapes, after the shapes that already decide it.
"""

from __future__ import annotations

import copy
import traceback
from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np

from moeopt.core.gcpause import gc_paused
from moeopt.errors import MoeoptError
from moeopt.megamoe.analysis import graph_floors, physical_bounds
from moeopt.megamoe.errors import GuardrailError, ScenarioError
from moeopt.megamoe.kerneltime import (
    KernelTime,
    Reached,
    kernel_time,
    kernel_time_below,
    kernel_time_built,
    kernel_time_built_below,
)
from moeopt.megamoe.scenario import Scenario
from moeopt.megamoe.simulate import BuiltGraphs, build_graphs, rank_groups, simulate, simulate_built
from moeopt.search.config import ShapeSpec, StudyConfig
from moeopt.search.metrics import TIME_METRICS, Result, metric_value
from moeopt.search.space import point_key, to_overrides, violated_constraint
from moeopt.search.trials import Outcome

TIME_ONLY_METRICS = ("kernel_total_us", "kernel_dag_end_us")
"""Metrics that :func:`moeopt.megamoe.kerneltime.kernel_time` gives (a study reading only these
runs no analysis)."""

# lower-bound checks in "auto" mode: always for the first AUTO_PROBE checks of a worker, then
# only while at least AUTO_MIN_RATE of the checks pruned; otherwise one evaluation in AUTO_EVERY
AUTO_PROBE = 10
AUTO_MIN_RATE = 0.25
AUTO_EVERY = 10


# --------------------------------------------------------------------------- statistics
def statistic(name: str, values: Sequence[float]) -> float:
    a = np.asarray(values, dtype=float)
    if name == "mean":
        return float(a.mean())
    if name == "median":
        return float(np.median(a))
    if name == "p90":
        return float(np.percentile(a, 90))
    if name == "max":
        return float(a.max())
    if name == "min":
        return float(a.min())
    raise KeyError(name)


def aggregate(
    cfg: StudyConfig, per_shape: Mapping[str, float], base: Mapping[str, float] | None = None
) -> float:
    """Combine the shapes' values: mean, max, weighted mean, or mean of value / baseline value.

    Every one is non-decreasing in each shape's value, so an aggregate of lower bounds is a lower
    bound of the aggregate.
    """
    vals = [per_shape[s.name] for s in cfg.shapes]
    if cfg.aggregate == "mean_ratio":
        assert base is not None
        return float(sum(v / base[s.name] for v, s in zip(vals, cfg.shapes, strict=True)) / len(vals))
    if cfg.aggregate == "max":
        return max(vals)
    if cfg.aggregate == "weighted":
        w = [s.weight for s in cfg.shapes]
        return float(sum(a * b for a, b in zip(vals, w, strict=True)) / sum(w))
    return float(sum(vals) / len(vals))


def scenario_overrides(cfg: StudyConfig, overrides: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The trial overrides of the scenarios a shape stands for: the point's, or the point's with
    each routing seed."""
    if not cfg.objective.seeds:
        return [overrides]
    return [{**overrides, "workload.seed": s} for s in cfg.objective.seeds]


def shape_scenarios(cfg: StudyConfig, shape: ShapeSpec, overrides: Mapping[str, Any]) -> list[Scenario]:
    """The scenarios one shape stands for: one, or one per routing seed."""
    return [shape.scenario(o) for o in scenario_overrides(cfg, overrides)]


_LEAVES = (str, int, float, bool, type(None))


def identical(a: Any, b: Any) -> bool:
    """Whether two scenario tables are one input: dicts with the same keys in the same order,
    lists / tuples of the same length, and leaves of the same plain type that print the same
    (so ``1`` and ``1.0``, ``True`` and ``1``, ``0.0`` and ``-0.0`` differ, and NaN differs from
    itself), recursively; any other kind of value is never taken as identical."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(identical(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(identical(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return a == b and repr(a) == repr(b)  # (repr tells 0.0 from -0.0; NaN != NaN)
    return isinstance(a, _LEAVES) and a == b


def is_base_point(cfg: StudyConfig, point: Mapping[str, Any]) -> bool:
    """Whether ``point`` stands for the base scenarios themselves: it breaks no constraint, and
    for every shape (and routing seed) its overrides leave the scenario table exactly as the
    base's (:func:`identical`). ``evaluate`` builds each scenario from its table alone, so such a
    point evaluated without a best gives the base's outcome bit for bit."""
    if violated_constraint(cfg, point) is not None:
        return False
    try:
        ov = scenario_overrides(cfg, to_overrides(cfg, point))
        base = scenario_overrides(cfg, {})
        return all(
            identical(shape.table(o), shape.table(b))
            for shape in cfg.shapes
            for o, b in zip(ov, base, strict=True)
        )
    except MoeoptError:  # an override the adapter refuses: not the base
        return False


Graphs = BuiltGraphs


def lower_bound_us(scenario: Scenario, graphs: Graphs | None = None) -> float:
    """Lower bound of ``kernel_total_us``: max over ranks of the physical bounds (compute /
    bandwidth / chain) and the floors of the rank's graph (longest path / busiest role)."""
    lb = 0.0
    with gc_paused():
        for rg, _ranks in (build_graphs(scenario) if graphs is None else graphs).values():
            b = physical_bounds(rg, scenario.config)
            f = graph_floors(rg)
            lb = max(lb, b["compute_us"], b["bandwidth_us"], b["dependency_us"])
            lb = max(lb, f["longest_path_us"], f["busiest_pipe_us"])
    return lb


def built(scenario: Scenario) -> Graphs:
    with gc_paused():
        return build_graphs(scenario)


# --------------------------------------------------------------------------- evaluator
class BaselineError(RuntimeError):
    """The baseline a ratio aggregate divides by could not be computed."""


class Evaluator:
    """Evaluates points of one study in one worker; keeps the lower-bound check statistics."""

    def __init__(self, cfg: StudyConfig) -> None:
        self.cfg = cfg
        self.lb_checked = 0
        self.lb_pruned = 0
        self.lb_skipped = 0
        self._since_check = 0
        self._baseline: dict[str, dict[str, float]] | None = None
        self.lb_applies = (
            cfg.lower_bound != "never"
            and not cfg.multi_objective
            and cfg.objective.direction == "minimize"
            and cfg.objective.metric in TIME_METRICS
        )
        # the metrics read nothing but the kernel's times: no analysis needs to run
        self.time_only = set(cfg.metrics) <= set(TIME_ONLY_METRICS)
        # point key -> what evaluate(point, None) gives, known without running it (take_baseline)
        self._exact: dict[str, Outcome] = {}

    def take_baseline(self, base: Outcome, point: Mapping[str, Any] | None) -> None:
        """Use the base scenarios' outcome ``base``, which ``evaluate({}, None)`` gave in this
        run (for the same study, by this code), instead of evaluating the base again.

        A complete ``base`` gives the per-shape baseline values (``mean_ratio`` divides by them;
        ``evaluate({}, None)`` is what :meth:`_base` would run for them), and when ``point`` (the
        base scenario's own values of the space, queued as the study's first trial) stands for
        the base scenarios themselves (:func:`is_base_point`), it is that point's outcome when
        evaluated without a best. Without a best ``evaluate`` neither checks a bound nor counts
        anything, so the copy leaves nothing different. Failed or pruned baselines are not used:
        they are cheap to evaluate again."""
        if base.state != "complete":
            return
        if self._baseline is None:
            self._baseline = copy.deepcopy(base.per_shape)
        if point is not None and is_base_point(self.cfg, point):
            self._exact[point_key(point)] = copy.deepcopy(base)

    def _base(self, metric: str) -> dict[str, float] | None:
        """Per-shape baseline values of ``metric`` (only the ``mean_ratio`` aggregate needs them)."""
        if self.cfg.aggregate != "mean_ratio":
            return None
        if self._baseline is None:
            base = Evaluator(self.cfg).evaluate({}, None)
            if base.state != "complete":
                raise BaselineError(
                    f"aggregate 'mean_ratio' needs the baseline, which did not complete: {base.reason}"
                )
            self._baseline = base.per_shape
        out = {name: v[metric] for name, v in self._baseline.items()}
        zero = [n for n, v in out.items() if v <= 0]
        if zero:
            raise BaselineError(
                f"aggregate 'mean_ratio': the baseline {metric} of shape(s) {zero} is not > 0"
            )
        return out

    def _want_lb(self, scenarios: Mapping[str, Sequence[Scenario]], best: float) -> bool:
        if not self.lb_applies:
            return False
        if self.cfg.lower_bound == "always":
            return True
        if self._ranks_decide(scenarios, best):
            return False
        if self.lb_checked < AUTO_PROBE:
            return True
        if self.lb_pruned >= AUTO_MIN_RATE * self.lb_checked:
            return True
        self._since_check += 1
        if self._since_check >= AUTO_EVERY:
            self._since_check = 0
            return True
        return False

    def _ranks_decide(self, scenarios: Mapping[str, Sequence[Scenario]], best: float) -> bool:
        """Whether, in ``auto`` mode, the bound check is left out because the point's own ranks
        decide it sooner: its scenarios are timed with thresholds (:meth:`_stops_early`) and each
        has several distinct ranks. The check builds every distinct rank's graph in this
        process, one after another (on the V1 profile, whose GMM2 join reads a greedy schedule,
        that schedules each rank too), while the timing schedules the likely slowest ranks first
        (in worker processes when it may) and stops at the first one whose time reaches the
        threshold; a rank's time is at least its graph's floors. measured (stop 45, the
        DeepSeek-V3-like zipf study, ``studies/dsv3_zipf.yaml``, 32 distinct ranks): the check
        took 36 s on a point with tile_m 64 and tile_n 128 that the timing then pruned at its
        first rank in 2 s; on the base point building every rank took 3.0-3.6 s, as long as
        timing every rank in this process (3.0-3.6 s) and longer than in two workers (1.8-2.0
        s). With one distinct rank (uniform routing) the check's graph is the one timed,
        and ``always`` checks every point whatever the ranks."""
        if not self._stops_early(best):
            return False
        return all(len(rank_groups(s)[1]) > 1 for scs in scenarios.values() for s in scs)

    def _stops_early(self, best: float | None) -> bool:
        """Whether the point's scenarios are timed with thresholds (see the module docstring):
        a minimised kernel-time objective whose metrics need no analysis. A rank's time is a
        lower bound of its scenario's ``kernel_total_us``, which is at most its
        ``kernel_dag_end_us``, so a rank's time bounds either objective from below."""
        cfg = self.cfg
        return (
            best is not None
            and self.lb_applies
            and self.time_only
            and cfg.objective.metric in TIME_ONLY_METRICS
        )

    def _known_aggregate(self, known: Mapping[str, Sequence[float]]) -> float:
        """The objective's aggregate of ``known`` (per shape, one value per scenario): a lower
        bound of the point's objective when each value is a lower bound of its scenario's
        (every statistic and aggregate used is non-decreasing in each value)."""
        cfg = self.cfg
        per = {name: statistic(cfg.objective.statistic, vals) for name, vals in known.items()}
        return aggregate(cfg, per, self._base(cfg.objective.metric))

    def _threshold(self, known: dict[str, list[float]], name: str, k: int, best: float) -> float | None:
        """A time ``t`` of scenario ``k`` of shape ``name`` such that every time ``v >= t`` of it
        makes the point's objective at least ``best`` (the other scenarios at their ``known``
        values); ``None`` when no time of it alone does.

        Found by bisection on the aggregate itself, so that the check is the one the pruning
        makes: the aggregate is non-decreasing in the value, so any ``t`` at which it reaches
        ``best`` is sound, and the bisection narrows it to the least such float (the best value
        itself for a one-shape study without seeds)."""
        vals = known[name]
        saved = vals[k]

        def reaches(v: float) -> bool:
            vals[k] = v
            return self._known_aggregate(known) >= best

        try:
            lo = saved
            if reaches(lo):
                return lo
            hi = max(2.0 * lo, best, 1.0)
            for _ in range(64):
                if reaches(hi):
                    break
                lo, hi = hi, 2.0 * hi
            else:
                return None
            while True:
                mid = lo + (hi - lo) / 2.0
                if not lo < mid < hi:
                    return hi
                if reaches(mid):
                    hi = mid
                else:
                    lo = mid
        finally:
            vals[k] = saved

    def _workers(self) -> dict[str, Any]:
        # several study workers already share the cores: this one schedules its ranks itself
        # (kernel_time never forks beside a running thread, such as the worker's heartbeat)
        return {"workers": 1} if self.cfg.workers > 1 else {}

    def _run(self, s: Scenario, graphs: Graphs | None) -> Result:
        """One scenario's result: the kernel's time alone when every metric reads only that
        (the same times and guardrails as ``simulate``, without its analyses), else the whole
        ``simulate`` result."""
        if self.time_only:
            k = kernel_time(s, **self._workers()) if graphs is None else kernel_time_built(s, graphs)
            return cast(Result, k)
        return simulate(s) if graphs is None else simulate_built(s, graphs)

    def _below(self, s: Scenario, graphs: Graphs | None, threshold_us: float) -> KernelTime | Reached:
        """The kernel's time of ``s``, or the first rank found whose time reaches
        ``threshold_us`` while ranks are left (on graphs already built, when there are)."""
        if graphs is not None:
            return kernel_time_built_below(s, graphs, threshold_us)
        return kernel_time_below(s, threshold_us, **self._workers())

    def _reached_reason(self, name: str, k: int, got: Reached, lb: float, best: float, todo: int) -> str:
        cfg = self.cfg
        where = ""
        if len(cfg.shapes) > 1:
            where = f"shape {name}: "
        if cfg.objective.seeds:
            where += f"routing seed {cfg.objective.seeds[k]}: "
        rest = f"; {todo} more scenario(s) not simulated" if todo else ""
        return (
            f"{where}rank {got.rank} alone takes {got.total_us:.3f} µs, so the kernel time is no less: "
            f"{lb:.3f} >= best {best:.3f} (the other ranks were not scheduled{rest})"
        )

    def evaluate(self, point: Mapping[str, Any], best: float | None) -> Outcome:
        cfg = self.cfg
        if best is None and self._exact:
            same = self._exact.get(point_key(point))
            if same is not None:
                return copy.deepcopy(same)
        why = violated_constraint(cfg, point)
        if why is not None:
            return Outcome("pruned", "constraint", reason=why)
        overrides = to_overrides(cfg, point)
        scenarios: dict[str, list[Scenario]] = {}
        for shape in cfg.shapes:
            try:
                scenarios[shape.name] = shape_scenarios(cfg, shape, overrides)
            except MoeoptError as exc:
                where = f"shape {shape.name}: " if len(cfg.shapes) > 1 else ""
                return Outcome("pruned", "infeasible", reason=where + str(exc))

        lb: float | None = None
        per_shape: dict[str, dict[str, float]] = {}
        # per shape, per scenario: a lower bound of its objective value (0 until one is known;
        # its exact value once it is timed), for the early stop
        known = {name: [0.0] * len(scs) for name, scs in scenarios.items()}
        try:
            graphs: dict[int, Graphs] = {}  # built for the bound, reused by the simulation
            if best is not None and self._want_lb(scenarios, best):
                for scs in scenarios.values():
                    for s in scs:
                        graphs[id(s)] = built(s)
                for name, scs in scenarios.items():
                    known[name] = [lower_bound_us(s, graphs[id(s)]) for s in scs]
                lb = self._known_aggregate(known)
                self.lb_checked += 1
                if lb >= best:
                    self.lb_pruned += 1
                    return Outcome(
                        "pruned",
                        "lower_bound",
                        reason=f"lower bound {lb:.3f} µs (physical, graph floors) >= best {best:.3f} µs",
                        lower_bound_us=lb,
                    )
            elif best is not None and self.lb_applies:
                self.lb_skipped += 1
            early = self._stops_early(best)
            todo = sum(map(len, scenarios.values()))
            stat, exact = cfg.objective.statistic, cfg.objective.exact
            for name, scs in scenarios.items():
                runs: list[Result] = []
                for k, s in enumerate(scs):
                    todo -= 1
                    if not early:
                        runs.append(self._run(s, graphs.get(id(s))))
                        continue
                    assert best is not None
                    t = self._threshold(known, name, k, best)
                    got = None if t is None else self._below(s, graphs.get(id(s)), t)
                    if isinstance(got, Reached):
                        # the scenario's time is at least this rank's
                        known[name][k] = max(known[name][k], got.total_us)
                        lb = self._known_aggregate(known)
                        if lb >= best:
                            return Outcome(
                                "pruned",
                                "lower_bound",
                                reason=self._reached_reason(name, k, got, lb, best, todo),
                                lower_bound_us=lb,
                            )
                        got = None  # (a threshold a rounding put a hair too low: time it all)
                    run = self._run(s, graphs.get(id(s))) if got is None else cast(Result, got)
                    runs.append(run)
                    known[name][k] = metric_value(cfg.objective.metric, run, exact)
                    if todo:
                        lb = self._known_aggregate(known)
                        if lb >= best:
                            return Outcome(
                                "pruned",
                                "lower_bound",
                                reason=f"the scenarios timed so far give {lb:.3f} >= best {best:.3f} with "
                                f"the others at their lower bounds ({todo} scenario(s) not simulated)",
                                lower_bound_us=lb,
                            )
                per_shape[name] = {
                    m: statistic(stat, [metric_value(m, r, exact) for r in runs])
                    for m in dict.fromkeys(cfg.metrics)
                }
        except ScenarioError as exc:  # the adapter rejects the point while planning it
            return Outcome("pruned", "infeasible", reason=str(exc), lower_bound_us=lb)
        except GuardrailError as exc:
            return Outcome("failed", "guardrail", reason=f"{type(exc).__name__}: {exc}", lower_bound_us=lb)
        except MoeoptError as exc:
            return Outcome("failed", "error", reason=f"{type(exc).__name__}: {exc}", lower_bound_us=lb)
        except Exception as exc:  # one failing point never stops the study
            return Outcome(
                "failed",
                "internal",
                reason=f"internal error {type(exc).__name__}: {exc}",
                lower_bound_us=lb,
                detail=traceback.format_exc(),
            )
        if point == {} and self._baseline is None:
            self._baseline = per_shape
        values = [aggregate(cfg, {n: v[m] for n, v in per_shape.items()}, self._base(m)) for m in cfg.metrics]
        return Outcome("complete", "ok", values=values, lower_bound_us=lb, per_shape=per_shape)
