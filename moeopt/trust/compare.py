"""Design space: several variants of one scenario in one table (seed 000, SPEC §7).

``compare_variants(scenario, {"name": {"dotted.path": value, ...}, ...})`` simulates every
variant (the first one is the baseline) and returns one :class:`VariantRow` each;
``format_design_space(rows)`` prints the seed's table: time, Δ, Δ%, utilisation per role,
bottleneck and the excess over it, the variant's own graph floor and the excess over it,
critical-path change per stage, total-busy change, the largest wait on the critical path, and
the invariants.

**Noise.** List scheduling is not monotone in its input (Graham 1969): the seed measured one
dependency edge made 0.01 µs longer changing the total by −2.81 %. A Δ is only a difference
when it exceeds what such a perturbation does to the same scenarios, so each row carries a
noise threshold measured on the baseline and the variant: one input on the critical path (an
event's duration or the λ of a dependency edge it follows) is made 0.01 µs longer, one at a
time (``probes`` of them, spread along the path), the greedy re-run, and the largest |Δ%| kept.
A 0.01 µs longer input can lengthen a monotone schedule by at most 0.01 µs, far below 0.01 % of
any MegaMoE time; anything larger is a timing anomaly. A row whose |Δ%| is below the larger of
the two thresholds is marked as noise (``~`` in the table). ``noise_pct`` replaces the
measurement with a fixed threshold.

**CP-SAT column** (``exact=True``): the CP-SAT best schedule and lower bound of the slowest
rank's event graph (whole graph, to the end of the tail), with the time limit given. The CP-SAT
optimum is monotone in durations and λ, so the difference of two proven optima is free of
scheduling anomalies; with a gap, the Δ is an interval ``[lb_v − best_b, best_v − lb_b]``.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from moeopt.core.events import EventGraph
from moeopt.core.scheduler import schedule
from moeopt.errors import InputError, MoeoptError
from moeopt.megamoe.errors import GuardrailError, ScenarioError
from moeopt.megamoe.results import CriticalStep, SimulateResult
from moeopt.megamoe.scenario import STAGES, Scenario, apply_overrides
from moeopt.megamoe.simulate import simulate

PERTURB_US = 0.01  # the seed's anomaly probe: one input made 0.01 µs longer
REL_EPS = 1e-9

Progress = Callable[[int, int, str], None]
"""``progress(done, total, name)`` after each variant."""


@dataclass(frozen=True)
class ExactColumn:
    """CP-SAT on the slowest rank's graph of one variant."""

    best_us: float | None
    lower_bound_us: float
    status: str
    greedy_span_us: float
    solve_s: float

    @property
    def proven(self) -> bool:
        return self.best_us is not None and self.best_us <= self.lower_bound_us * (1 + 1e-9) + 1e-9


@dataclass(frozen=True)
class VariantRow:
    """One variant of a design-space comparison (``error`` set: the variant was refused)."""

    name: str
    overrides: Mapping[str, Any]
    time_us: float | None = None
    delta_us: float | None = None
    delta_pct: float | None = None
    noise_pct: float | None = None
    role_utilization: Mapping[str, float] = field(default_factory=dict)
    binding: str = ""
    excess_pct: float | None = None
    floor: str = ""
    """this graph's binding floor: the busiest role (e.g. ``AIC``) or ``longest path``"""
    floor_us: float | None = None
    floor_excess_pct: float | None = None
    critical_path_us: Mapping[str, float] = field(default_factory=dict)
    critical_path_change_us: Mapping[str, float] = field(default_factory=dict)
    stage_busy_us: Mapping[str, float] = field(default_factory=dict)
    busy_change_us: Mapping[str, float] = field(default_factory=dict)
    largest_wait: tuple[str, float] | None = None
    work_conservation: str = ""
    pinned_avoidable_core_us: float = 0.0
    gm_to_l1_mb: float = 0.0
    out_of_domain: bool = False
    exact: ExactColumn | None = None
    exact_delta_us: tuple[float, float] | None = None
    error: str | None = None

    @property
    def is_noise(self) -> bool:
        """|Δ%| below the measured anomaly threshold: the sign of Δ is not a conclusion."""
        if self.delta_pct is None or self.noise_pct is None:
            return False
        return self.delta_pct != 0.0 and abs(self.delta_pct) < self.noise_pct

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["overrides"] = dict(self.overrides)
        d["is_noise"] = self.is_noise
        return d


def _stage_of(step: CriticalStep) -> str:
    st = step.get("stage")
    return str(st) if st is not None else "-"


def critical_path_by_stage(cp: Sequence[CriticalStep]) -> dict[str, float]:
    """Time on the critical path per stage: the durations of its events, summed."""
    out: dict[str, float] = defaultdict(float)
    for step in cp:
        out[_stage_of(step)] += step["end_us"] - step["start_us"]
    return dict(out)


def largest_wait(cp: Sequence[CriticalStep]) -> tuple[str, float] | None:
    """The kind of wait the critical path spends most time in: dependency (λ), capacity, queueing.

    Per kind, the time covered by the steps' waits: each step waited over ``[start - wait,
    start]`` (for a dependency, ``wait`` = the λ of its edge), and overlapping waits of one kind
    count once. A resource-queueing wait overlaps the previous holder of the resource, itself on
    the path, so summing them could exceed the schedule; the union cannot."""
    spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for step in cp:
        why = step["why"]
        start = float(step["start_us"])
        if why == "dependency":
            w, kind = float(step.get("lambda_us", 0.0)), "dependency λ"
        elif why in ("capacity", "resource queueing"):
            w, kind = float(step["wait_us"]), why
        else:
            continue
        if w > 0:
            spans[kind].append((start - w, start))
    tot = {kind: _covered(iv) for kind, iv in spans.items()}
    if not tot:
        return None
    kind = max(tot, key=lambda k: (tot[k], k))
    return (kind, tot[kind]) if tot[kind] > 0 else None


def _covered(iv: list[tuple[float, float]]) -> float:
    """Length of the union of the intervals ``iv``."""
    total = 0.0
    end = -math.inf
    for a, b in sorted(iv):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def _conservation(r: SimulateResult) -> tuple[str, float]:
    by = r["idle_decomposition"]["by_stage"]
    late = {st: d for st, d in by.items() if d["late_bound"]}
    pinned = sum(d["avoidable_core_us"] for st, d in by.items() if st not in late and ":" not in st)
    if not late:
        return "n/a (pinned)", pinned
    checked = sum(d["avoidable_core_us"] for d in late.values() if d["work_conservation_exempt"] is None)
    return ("holds" if checked <= 1e-3 else "broken"), pinned


def _last_combine(graph: EventGraph) -> list[str]:
    return [ev.name for ev in graph if ev.labels.get("stage") == "combine"]


def anomaly_pct(result: SimulateResult, probes: int = 8, policy: str | None = None) -> float:
    """Largest |Δ%| of the time when one input on the critical path is made 0.01 µs longer.

    The inputs are the durations of the slowest rank's critical-path events and the λ of the
    dependency edges the path follows (the seed's probe was such an edge); ``probes`` of them,
    spread evenly along the path, each perturbed alone and the greedy re-run (see the module
    docstring for why this is the noise).
    """
    if probes <= 0:
        return 0.0
    rr = result["rank_results"][result["slowest_rank"]]
    g: EventGraph = rr["graph"]
    base = float(rr["kernel_total_us"])
    if base <= 0:
        return 0.0
    ends = _last_combine(g) or [ev.name for ev in g]
    inputs: list[tuple[str, str | None]] = []  # (event, None: its duration | pred: the λ of that edge)
    for step in result["critical_path"]:
        name = step["event"]
        if g[name].duration_us > 0:
            inputs.append((name, None))
        pred = step.get("after")
        if step["why"] == "dependency" and pred in g[name].deps:
            inputs.append((name, pred))
    if not inputs:
        return 0.0
    k = min(probes, len(inputs))
    picks = sorted({inputs[round(i * (len(inputs) - 1) / max(1, k - 1))] for i in range(k)}, key=str)
    events = list(g)
    worst = 0.0
    pol = policy or result.get("policy", "earliest_start")
    for name, pred in picks:
        ev = g[name]
        if pred is None:
            longer = dataclasses.replace(ev, duration_us=ev.duration_us + PERTURB_US)
        else:
            longer = dataclasses.replace(ev, deps={**ev.deps, pred: ev.deps[pred] + PERTURB_US})
        g2 = g.copy_with(events=[longer if e.name == name else e for e in events])
        s = schedule(g2, policy=pol, normalize=False)
        t = max(s.end_us[n] for n in ends)
        worst = max(worst, abs(t / base - 1.0) * 100.0)
    return worst


def _exact_column(result: SimulateResult, time_limit_s: float, workers: int) -> ExactColumn:
    from moeopt.exact.solve import solve_exact

    rr = result["rank_results"][result["slowest_rank"]]
    s = rr["schedule"]
    x = solve_exact(rr["graph"], time_limit_s=time_limit_s, workers=workers, hint=s)
    return ExactColumn(
        best_us=x.best_us,
        lower_bound_us=x.lower_bound_us,
        status=x.status.value,
        greedy_span_us=s.makespan_us,
        solve_s=x.solve_s,
    )


def check_variants(variants: Any, where: str = "variants") -> dict[str, dict[str, Any]]:
    """``{name: {dotted.path: value}}`` checked for shape (names non-empty, overrides tables)."""
    if not isinstance(variants, Mapping) or not variants:
        raise InputError(
            f"{where}: must be a non-empty table name -> {{dotted.path: value}}, got {variants!r}"
        )
    out: dict[str, dict[str, Any]] = {}
    for name, ov in variants.items():
        if not isinstance(name, str) or not name.strip():
            raise InputError(f"{where}: variant name {name!r} must be a non-empty string")
        if ov is None:
            ov = {}
        if not isinstance(ov, Mapping):
            raise InputError(
                f"{where}.{name} = {ov!r}: must be a table of dotted.path: value (e.g. kernel.tile_n: 128)"
            )
        for path in ov:
            if not isinstance(path, str) or not path:
                raise InputError(f"{where}.{name}: override path {path!r} must be a dotted path string")
        try:
            apply_overrides({}, ov)  # an unknown path is a typo in the file: fail before any run
        except ScenarioError as exc:
            raise InputError(f"{where}.{name}: {exc}") from None
        out[name] = dict(ov)
    return out


def simulate_variant(scenario: Scenario, overrides: Mapping[str, Any]) -> SimulateResult:
    """The result of ``scenario`` with ``overrides`` (raises the scenario / guardrail error)."""
    return simulate(scenario.with_overrides(overrides) if overrides else scenario)


def compare_variants(
    scenario: Scenario,
    variants: Mapping[str, Mapping[str, Any]],
    *,
    exact: bool = False,
    exact_time_limit_s: float = 10.0,
    exact_workers: int = 1,
    noise_pct: float | None = None,
    probes: int = 8,
    progress: Progress | None = None,
) -> list[VariantRow]:
    """Simulate every variant of ``scenario``; the first one is the baseline of every Δ.

    Args:
        scenario: the base scenario; each variant is ``scenario.with_overrides(overrides)``.
        variants: ``{name: {dotted.path: value}}`` (an empty table = the scenario itself).
        exact: add the CP-SAT column (slowest rank's graph, ``exact_time_limit_s`` each).
        noise_pct: a fixed noise threshold in percent instead of the measured one.
        probes: critical-path events perturbed per variant to measure the noise (0: none).
        progress: called after each variant with ``(done, total, name)``.

    A variant refused by the scenario layer or stopped by a guardrail gets a row with
    ``error`` (the message), so one bad variant does not lose the others. If the baseline
    itself fails, no Δ can be formed and the error is raised.
    """
    vs = check_variants(variants)
    if noise_pct is not None and (not math.isfinite(noise_pct) or noise_pct < 0):
        raise InputError(f"noise_pct = {noise_pct!r}: must be a number >= 0 (percent)")
    rows: list[VariantRow] = []
    base: SimulateResult | None = None
    base_noise = 0.0
    base_exact: ExactColumn | None = None
    base_cp: dict[str, float] = {}
    total = len(vs)
    for k, (name, ov) in enumerate(vs.items(), 1):
        try:
            r = simulate_variant(scenario, ov)
        except (MoeoptError, GuardrailError) as exc:
            if base is None:
                raise type(exc)(f"baseline {name!r}: {exc}") from None
            rows.append(VariantRow(name=name, overrides=ov, error=f"{type(exc).__name__}: {exc}"))
            if progress:
                progress(k, total, name)
            continue
        t = float(r["kernel_total_us"])
        cp = critical_path_by_stage(r["critical_path"])
        noise = noise_pct if noise_pct is not None else anomaly_pct(r, probes)
        ex = _exact_column(r, exact_time_limit_s, exact_workers) if exact else None
        if base is None:
            base, base_noise, base_exact, base_cp = r, noise, ex, cp
        bt = float(base["kernel_total_us"])
        conserve, pinned = _conservation(r)
        stages = [st for st in (*STAGES, "head", "tail") if st in cp or st in base_cp]
        cp_change = {st: cp.get(st, 0.0) - base_cp.get(st, 0.0) for st in stages}
        busy_change = {
            st: float(r["stage_busy_us"].get(st, 0.0)) - float(base["stage_busy_us"].get(st, 0.0))
            for st in sorted(set(r["stage_busy_us"]) | set(base["stage_busy_us"]))
        }
        ex_delta = None
        if (
            ex is not None
            and base_exact is not None
            and ex.best_us is not None
            and base_exact.best_us is not None
        ):
            ex_delta = (ex.lower_bound_us - base_exact.best_us, ex.best_us - base_exact.lower_bound_us)
        b = r["bounds"]
        fl = r["floors"]
        rows.append(
            VariantRow(
                name=name,
                overrides=ov,
                time_us=t,
                delta_us=t - bt,
                delta_pct=(t / bt - 1.0) * 100.0 if bt > 0 else 0.0,
                noise_pct=max(noise, base_noise),
                role_utilization=dict(r["role_utilization"]),
                binding=str(b["binding"]),
                excess_pct=float(b["excess_pct"]),
                floor=fl["busiest_pipe"] if fl["binding"] == "pipe" else "longest path",
                floor_us=float(fl["lower_bound_us"]),
                floor_excess_pct=float(fl["excess_pct"]),
                critical_path_us=cp,
                critical_path_change_us=cp_change,
                stage_busy_us=dict(r["stage_busy_us"]),
                busy_change_us=busy_change,
                largest_wait=largest_wait(r["critical_path"]),
                work_conservation=conserve,
                pinned_avoidable_core_us=pinned,
                gm_to_l1_mb=float(r["traffic_bytes"].get("gm_to_l1", 0.0)) / 1e6,
                out_of_domain=bool(r["out_of_domain"]),
                exact=ex,
                exact_delta_us=ex_delta,
            )
        )
        if progress:
            progress(k, total, name)
    return rows


# --------------------------------------------------------------------------- formatting
def _changes(d: Mapping[str, float], limit: int = 3, tol: float = 0.05) -> str:
    items = sorted(((k, v) for k, v in d.items() if abs(v) >= tol), key=lambda kv: (-abs(kv[1]), kv[0]))
    if not items:
        return "-"
    short = {"activation": "act", "dispatch": "disp", "combine": "comb"}
    return ", ".join(f"{short.get(k, k)}{v:+.1f}" for k, v in items[:limit])


def _util(u: Mapping[str, float]) -> str:
    return " ".join(
        f"{role}:{100 * v:.0f}%" for role, v in u.items() if role in ("AIC", "AIV0", "AIV1", "AIV")
    )


def format_design_space(rows: Sequence[VariantRow]) -> str:
    """The seed's design-space table (one line per variant) and how to read it."""
    if not rows:
        return "(no variants)\n"
    have_exact = any(r.exact is not None for r in rows)
    head = [
        ("variant", "<"),
        ("time µs", ">"),
        ("Δ µs", ">"),
        ("Δ%", ">"),
        ("utilisation", "<"),
        ("bottleneck", "<"),
        ("graph floor", "<"),
        ("critical-path change µs", "<"),
        ("busy change core-µs", "<"),
        ("GM->L1 Δ MB", ">"),
        ("largest wait on CP", "<"),
        ("invariants", "<"),
    ]
    if have_exact:
        head += [("CP-SAT best / bound µs", ">"), ("CP-SAT Δ µs", ">")]
    table: list[list[str]] = []
    base_mb = rows[0].gm_to_l1_mb
    for r in rows:
        if r.error is not None:
            table.append([r.name, "rejected", "", "", r.error[:100]] + [""] * (len(head) - 5))
            continue
        assert r.time_us is not None
        assert r.delta_us is not None
        assert r.delta_pct is not None
        noise = "~" if r.is_noise else ""
        wait = "-" if r.largest_wait is None else f"{r.largest_wait[0]} {r.largest_wait[1]:.1f}"
        inv = f"conservation {r.work_conservation}; pinned idle {r.pinned_avoidable_core_us:.0f}"
        if r.out_of_domain:
            inv += "; out of domain"
        cells = [
            r.name,
            f"{r.time_us:.2f}",
            f"{noise}{r.delta_us:+.2f}",
            f"{noise}{r.delta_pct:+.1f}%",
            _util(r.role_utilization),
            f"{r.binding} {r.excess_pct:+.0f}%",
            f"{r.floor} {r.floor_us:.0f} {r.floor_excess_pct:+.0f}%" if r.floor_us is not None else "-",
            _changes(r.critical_path_change_us),
            _changes(r.busy_change_us),
            f"{r.gm_to_l1_mb - base_mb:+.1f}",
            wait,
            inv,
        ]
        if have_exact:
            x = r.exact
            if x is None:
                cells += ["-", "-"]
            else:
                best = "-" if x.best_us is None else f"{x.best_us:.2f}"
                mark = "" if x.proven else " (gap)"
                cells.append(f"{best} / {x.lower_bound_us:.2f}{mark}")
                d = r.exact_delta_us
                if d is None:
                    cells.append("-")
                elif abs(d[1] - d[0]) < 5e-3:
                    cells.append(f"{d[0]:+.2f}")
                else:
                    cells.append(f"[{d[0]:+.2f}, {d[1]:+.2f}]")
        table.append(cells)
    widths = [max(len(h), *(len(row[i]) for row in table)) for i, (h, _a) in enumerate(head)]
    widths[0] = max(widths[0], 8)

    def line(cells: Sequence[str]) -> str:
        return "  ".join(f"{c:{a}{w}}" for c, (_h, a), w in zip(cells, head, widths)).rstrip()

    out = [line([h for h, _a in head])]
    out += [line(c) for c in table]
    ok = [r for r in rows if r.error is None]
    thr = max((r.noise_pct or 0.0) for r in ok) if ok else 0.0
    base = rows[0].name
    out.append("")
    out.append(
        f"Δ against {base!r}. '~' marks a Δ smaller than the scheduling-anomaly noise of its row "
        f"(largest here {thr:.2f}%: the |Δ%| one critical-path event 0.01 µs longer caused on the "
        f"baseline or the variant); its sign is not a conclusion."
    )
    out.append(
        "Bottleneck: the shape's binding physical bound and the time above it; graph floor: this "
        "variant's own floor (its busiest role's work or its longest path, µs) and the time above it, "
        "what scheduling this graph could still win."
    )
    out.append(
        "Critical-path change: time per stage on the critical path vs the baseline (busy unchanged "
        "but path changed = a different route); busy change: core-µs per stage (the work itself); "
        "largest wait on CP: the time the path's waits of one kind cover (overlaps counted once)."
    )
    if have_exact:
        out.append(
            "CP-SAT: best schedule / lower bound of the slowest rank's whole graph (to the end of the "
            "tail); its Δ is anomaly-free, an interval when the optimum is not proven."
        )
    return "\n".join(out) + "\n"
