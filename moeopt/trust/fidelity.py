"""Fidelity: the model against measured stage timelines of the real kernel, and the redesign it predicts.

Two measured timelines ship with moeopt (``moeopt/trust/timelines/``), one per implementation,
each that implementation's single calibration point:

* ``pto_a2a3_baseline_ep16_m2048.csv``: the PTO MegaMoE baseline (profile ``pto-a2a3``), 16 ranks,
  M = 2048 (hardware.md section 1);
* ``pto_a2a3_v1_ep8_m2048.csv``: its V1 redesign (profile ``pto-a2a3-v1``), 8 ranks, M = 2048
  (hardware.md section 1b).

:func:`fidelity_report` simulates the scenario a timeline's metadata describes (profile and shape)
and compares the predicted stage timeline of the slowest rank with the measured one, stage by
stage and expert by expert (:func:`moeopt.trace.timeline.compare_timelines`). :func:`version_sweep`
predicts both versions across M and the world sizes and the redesign's gain ``1 − V1 / baseline``:
the out-of-sample predictions a measurement will later judge.

The MegaMoE stage names of the model map onto the kernel's names as the figures label them:
``head`` = front reorder, ``activation`` = SwiGLU, ``tail`` = unpermute.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moeopt.errors import InputError
from moeopt.megamoe.scenario import Scenario, Workload
from moeopt.megamoe.simulate import simulate
from moeopt.trace.timeline import (
    Timeline,
    TimelineComparison,
    compare_timelines,
    read_timeline,
    timeline_from_schedule,
)

TIMELINE_DIR = Path(__file__).resolve().parent / "timelines"
CALIBRATION_TIMELINES = ("pto_a2a3_baseline_ep16_m2048.csv", "pto_a2a3_v1_ep8_m2048.csv")

# model stage label -> the kernel's stage name in measured timelines
STAGE_NAMES: Mapping[str, str] = {
    "head": "front",
    "dispatch": "dispatch",
    "gmm1": "gmm1",
    "activation": "swiglu",
    "gmm2": "gmm2",
    "combine": "combine",
    "tail": "unpermute",
}
STAGE_ORDER = tuple(STAGE_NAMES.values())

# timeline metadata -> scenario field (workload fields under "workload")
_SHAPE_KEYS: Mapping[str, Callable[[str], Any]] = {
    "tokens": int,
    "world": int,
    "topk": int,
    "local_experts": int,
    "h": int,
    "hidden_dim": int,
    "routing": str,
    "profile": str,
}


def calibration_timelines() -> list[Path]:
    """The measured timelines that ship with moeopt (one per implementation)."""
    return [TIMELINE_DIR / name for name in CALIBRATION_TIMELINES]


def unit_of(labels: Mapping[str, Any]) -> tuple[str, str] | None:
    """(stage, unit) of a MegaMoE event in the kernel's naming; ``None`` for flags and shared experts.

    The unit is the local expert (``e3``) where the event belongs to one, else the SwiGLU segment
    (``seg1``) of a segment-wide activation event, else the whole stage (``*``)."""
    stage = STAGE_NAMES.get(str(labels.get("stage")))
    if stage is None or labels.get("shared"):
        return None
    expert = labels.get("expert")
    if expert is not None:
        return stage, f"e{expert}"
    segment = labels.get("segment")
    if segment is not None:
        return stage, f"seg{segment}"
    return stage, "*"


def scenario_of(t: Timeline) -> Scenario:
    """The scenario a measured timeline describes (its metadata: profile and shape)."""
    where = t.source or "timeline"
    missing = [k for k in _SHAPE_KEYS if k not in t.meta]
    if missing:
        raise InputError(
            f"{where}: metadata lacks {', '.join(missing)}: a timeline compared with the model names its "
            f"profile and shape ('# key: value' lines: {', '.join(_SHAPE_KEYS)})"
        )
    values: dict[str, Any] = {}
    for key, conv in _SHAPE_KEYS.items():
        try:
            values[key] = conv(t.meta[key])
        except ValueError:
            raise InputError(f"{where}: {key} = {t.meta[key]!r}: must be a whole number") from None
    w = Workload(
        tokens=values["tokens"],
        topk=values["topk"],
        world=values["world"],
        local_experts=values["local_experts"],
        routing=values["routing"],
    )
    return Scenario(workload=w, h=values["h"], hidden_dim=values["hidden_dim"], profile=values["profile"])


def predicted_timeline(r: Mapping[str, Any], rank: int | None = None) -> Timeline:
    """The stage timeline of one rank of a :func:`moeopt.simulate` result (default: the slowest)."""
    rk = r["slowest_rank"] if rank is None else rank
    rr = r["rank_results"][rk]
    return timeline_from_schedule(
        rr["graph"], rr["schedule"], unit_of, meta={"kernel_us": str(r["kernel_dag_end_us"])}
    )


@dataclass(frozen=True)
class FidelityReport:
    """One measured timeline against the model's prediction of the same scenario."""

    timeline: Path
    implementation: str
    scenario: Scenario
    comparison: TimelineComparison

    def format(self) -> str:
        t = self.scenario.workload
        title = (
            f"{self.timeline.name}: {self.implementation}, world {t.world}, M = {t.tokens} "
            f"(predicted = slowest rank of the model, measured = the kernel's timeline)"
        )
        return self.comparison.format(title)

    def to_dict(self) -> dict[str, Any]:
        return {
            "timeline": str(self.timeline),
            "implementation": self.implementation,
            **self.comparison.to_dict(),
        }


def fidelity_report(path: str | Path, overrides: Mapping[str, Any] | None = None) -> FidelityReport:
    """Compare the model with the measured timeline in ``path`` (``overrides`` apply to the scenario)."""
    measured = read_timeline(path)
    scenario = scenario_of(measured)
    if overrides:
        scenario = scenario.with_overrides(dict(overrides))
    r = simulate(scenario, check_bounds=False)
    predicted = predicted_timeline(r)
    cmp = compare_timelines(
        predicted, measured, predicted_kernel_us=r["kernel_dag_end_us"], stages=_order(measured)
    )
    return FidelityReport(Path(path), str(r["implementation"]["id"]), scenario, cmp)


def _order(measured: Timeline) -> list[str]:
    names = measured.stages()
    return [s for s in STAGE_ORDER if s in names] + [s for s in names if s not in STAGE_ORDER]


# --------------------------------------------------------------------------- across M
SWEEP_TOKENS = (16, 32, 64, 128, 512, 1024, 2048)
SWEEP_WORLDS = (8, 16)


@dataclass(frozen=True)
class SweepRow:
    world: int
    tokens: int
    times_us: Mapping[str, float]  # profile -> predicted kernel time (with the unpermute tail)

    def gain(self, baseline: str, variant: str) -> float:
        """``1 − variant / baseline``: positive when the variant is faster."""
        return 1.0 - self.times_us[variant] / self.times_us[baseline]


def version_sweep(
    profiles: Sequence[str],
    base: Scenario,
    tokens: Sequence[int] = SWEEP_TOKENS,
    worlds: Sequence[int] = SWEEP_WORLDS,
    progress: Callable[[int, int, str], None] | None = None,
) -> list[SweepRow]:
    """Predicted kernel time of each profile at every (world, M), on ``base``'s shape otherwise."""
    rows = []
    total = len(tokens) * len(worlds) * len(profiles)
    done = 0
    for world in worlds:
        for m in tokens:
            times = {}
            for prof in profiles:
                s = base.with_overrides({"profile": prof, "workload.world": world, "workload.tokens": m})
                times[prof] = float(simulate(s, check_bounds=False)["kernel_dag_end_us"])
                done += 1
                if progress is not None:
                    progress(done, total, f"{prof} world {world} M {m}")
            rows.append(SweepRow(world, m, times))
    return rows


def format_sweep(rows: Sequence[SweepRow], profiles: Sequence[str]) -> str:
    """The sweep as a table: one row per (world, M), the time of each profile and each variant's gain
    over the first profile."""
    base = profiles[0]
    head = f"{'world':>5} {'M':>5} " + " ".join(f"{p:>14}" for p in profiles)
    head += "".join(f" {'gain ' + p:>20}" for p in profiles[1:])
    out = [head, "-" * len(head)]
    for r in rows:
        line = f"{r.world:>5} {r.tokens:>5} " + " ".join(f"{r.times_us[p]:>14.1f}" for p in profiles)
        line += "".join(f" {100 * r.gain(base, p):>+19.1f}%" for p in profiles[1:])
        out.append(line)
    out.append("")
    out.append(
        f"times in µs (kernel time with the unpermute tail, slowest rank); gain = 1 − time / time of {base}"
    )
    return "\n".join(out)


def sweep_to_dict(rows: Sequence[SweepRow], profiles: Sequence[str]) -> list[dict[str, Any]]:
    base = profiles[0]
    return [
        {
            "world": r.world,
            "tokens": r.tokens,
            "times_us": dict(r.times_us),
            "gain": {p: r.gain(base, p) for p in profiles[1:]},
        }
        for r in rows
    ]
