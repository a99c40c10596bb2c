"""``report.html``: one self-contained page (inline SVG, no JavaScript, no plotting package).

Sections: the run in one table; best vs baseline per shape with Δ and Δ%; the best parameters;
the optimisation history; parameter importances; the optimality gap of the best point from
the exact layer; why points were pruned or failed; the Pareto front for several objectives.
"""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

from optuna.trial import FrozenTrial, TrialState

from moeopt.search.config import StudyConfig

REPRO = {True: "identical", False: "MISMATCH", None: "n/a"}

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;font-size:13px;margin:6px 0}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
th{background:#f4f4f4}td.l,th.l{text-align:left}.better{color:#0a7a28;font-weight:600}.worse{color:#b3261e;font-weight:600}
.noise{color:#888}.note{color:#555;font-size:13px}code{background:#f4f4f4;padding:1px 4px}
svg text{font-size:11px;fill:#444}
"""


def _e(v: Any) -> str:
    return html.escape(str(v))


def _fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        if abs(v) >= 1e6:
            return f"{v:.4g}"
        return f"{v:.{digits}f}"
    return _e(v)


def render(
    cfg: StudyConfig, trials: Sequence[FrozenTrial], summary: Mapping[str, Any], best_runs: Mapping[str, Any]
) -> str:
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>moeopt study {_e(cfg.name)}</title><style>{CSS}</style></head><body>",
        f"<h1>Study <code>{_e(cfg.name)}</code></h1>",
        _overview(cfg, summary),
        _best_vs_baseline(cfg, summary, best_runs),
        _params(cfg, summary),
        _history(cfg, trials),
        _importances(summary),
        _gap(summary),
        _reasons(summary),
    ]
    if cfg.multi_objective:
        parts.append(_pareto(cfg, trials, summary))
    parts.append("</body></html>")
    return "\n".join(parts)


def _overview(cfg: StudyConfig, s: Mapping[str, Any]) -> str:
    run = s["run"]
    lb = run["lower_bound_checks"]
    obj = s["objective"]
    objective = f"{obj['direction']} {obj['metric']}"
    if obj["seeds"]:
        objective += f" ({obj['statistic']} over routing seeds {obj['seeds']})"
    if len(cfg.shapes) > 1:
        objective += f", {cfg.aggregate} over {len(cfg.shapes)} shapes"
    rows = [
        ("study file", s["source"]),
        ("objective", objective),
        ("secondary", ", ".join(f"{x['direction']} {x['metric']}" for x in s["secondary"]) or "–"),
        ("sampler", f"{s['sampler']} (seed {s['seed']}) {s['sampler_options'] or ''}"),
        (
            "trials",
            f"{s['n_trials']} of {s['target_trials']} requested; "
            + ", ".join(f"{k.lower()} {v}" for k, v in s["states"].items()),
        ),
        ("pruned", ", ".join(f"{k} {v}" for k, v in s["pruned"].items()) or "none"),
        ("failed", ", ".join(f"{k} {v}" for k, v in s["failed"].items()) or "none"),
        ("duplicates", f"{s['duplicates']} trial(s) repeated an evaluated point and reused its outcome"),
        (
            "lower-bound checks (this run)",
            f"{lb['checked']} checked, {lb['pruned']} pruned without scheduling, {lb['skipped']} skipped",
        ),
        (
            "this run",
            f"{run['elapsed_s']:.1f} s, {run['workers']} worker(s), {run['evaluated']} evaluated + "
            f"{run['duplicates']} duplicates = {run['trials_per_minute']:.0f} trials/min"
            + (" — interrupted (continue with --resume)" if run["interrupted"] else ""),
        ),
        ("storage", s["storage"]),
    ]
    body = "".join(f"<tr><th class=l>{_e(k)}</th><td class=l>{_e(v)}</td></tr>" for k, v in rows)
    return f"<table>{body}</table>"


def _delta_cell(best: float | None, base: float | None, minimize: bool, noise: float | None) -> str:
    """Δ and Δ% of ``best`` against ``base``, marked ≈ below ``noise`` (the measured
    scheduling-anomaly noise in %, ``None``: not measured)."""
    if best is None or base is None or base == 0:
        return "<td>–</td><td>–</td>"
    d = best - base
    pct = d / base * 100.0
    good = (d < 0) == minimize
    within = noise is not None and pct != 0.0 and abs(pct) < noise
    cls = "noise" if within else ("better" if good else "worse")
    mark = " ≈" if within else ""
    return f"<td class={cls}>{d:+.3f}</td><td class={cls}>{pct:+.2f}%{mark}</td>"


def _best_vs_baseline(cfg: StudyConfig, s: Mapping[str, Any], best_runs: Mapping[str, Any]) -> str:
    best = s.get("best")
    base = s.get("baseline") or {}
    minimize = cfg.objective.direction == "minimize"
    out = ["<h2>Best vs baseline</h2>"]
    if best is None:
        out.append("<p>No trial completed: there is no best point.</p>")
        return "".join(out)
    m = cfg.objective.metric
    out.append(
        f"<p class=note>Baseline = the study's base scenario(s) with no parameter changed. Best = trial "
        f"{best['trial']}, written to <code>best.toml</code>"
        + (" (one file per shape)" if len(cfg.shapes) > 1 else "")
        + f". Re-simulated from the file: <b>{_e(REPRO[best['reproduced']])}"
        f"</b> {_e(best.get('reproduce_note', ''))}</p>"
    )
    head = f"<tr><th class=l>shape</th><th>baseline {_e(m)}</th><th>best {_e(m)}</th><th>Δ</th><th>Δ%</th>"
    head += "<th class=l>best: binding bound</th><th>above bound</th><th class=l>best: utilisation</th>"
    head += "<th class=l>calibration domain</th></tr>"
    rows = []
    bps = base.get("per_shape", {})
    noise: dict[str, float] | None = best.get("noise_pct")
    for shape in cfg.shapes:
        b = bps.get(shape.name, {}).get(m)
        v = best["per_shape"].get(shape.name, {}).get(m)
        r = best_runs.get(shape.name)
        bind = above = util = dom = "–"
        if r is not None:
            reasons = r.get("calibration", {}).get("reasons") or []
            dom = "OUT: " + "; ".join(reasons) if r.get("out_of_domain") else "inside"
            bd = r["bounds"]
            bind = f"{bd['binding']} {bd['lower_bound_us']:.1f} µs"
            above = f"{bd['excess_pct']:+.1f}%"
            util = " ".join(f"{k} {100 * u:.0f}%" for k, u in r["role_utilization"].items())
        rows.append(
            f"<tr><td class=l>{_e(shape.name)}</td><td>{_fmt(b)}</td><td>{_fmt(v)}</td>"
            f"{_delta_cell(v, b, minimize, None if noise is None else noise.get(shape.name))}"
            f"<td class=l>{_e(bind)}</td><td>{_e(above)}</td><td class=l>{_e(util)}</td>"
            f"<td class=l>{_e(dom)}</td></tr>"
        )
    if len(cfg.shapes) > 1:
        bv = (base.get("values") or [None])[0]
        worst = max(noise.values(), default=None) if noise else None
        rows.append(
            f"<tr><th class=l>{_e(cfg.aggregate)}</th><td>{_fmt(bv)}</td><td>{_fmt(best['value'])}</td>"
            f"{_delta_cell(best['value'], bv, minimize, worst)}"
            "<td></td><td></td><td></td><td></td></tr>"
        )
    if base.get("state") not in (None, "complete"):
        out.append(f"<p class=worse>The baseline did not complete: {_e(base.get('reason'))}</p>")
    out.append(f"<table>{head}{''.join(rows)}</table>")
    out.append(
        "<p class=note>A shape outside the calibration domain of its profile is an extrapolation of the "
        "constants: rank configurations there, do not read absolute times.</p>"
        + _noise_note(noise)
    )
    return "".join(out)


def _noise_note(noise: Mapping[str, float] | None) -> str:
    if noise is None:
        return (
            "<p class=note>The objective is not a kernel time: no scheduling-anomaly noise is measured "
            "for it.</p>"
        )
    shown = ", ".join(f"{_e(k)} {v:.2f}%" for k, v in noise.items()) or "not measured"
    return (
        "<p class=note>Δ marked ≈ is below its shape's measured scheduling-anomaly noise "
        f"({shown}): the largest |Δ%| that one critical-path input of the baseline or the best point "
        "made 0.01 µs longer causes, as <code>python -m moeopt compare</code> measures it. Its sign is "
        "not a conclusion; compare CP-SAT optima (objective metric <code>cpsat_us</code>) before acting "
        "on it.</p>"
    )


def _params(cfg: StudyConfig, s: Mapping[str, Any]) -> str:
    best = s.get("best")
    if best is None:
        return ""
    rows = "".join(
        f"<tr><td class=l><code>{_e(p.name)}</code></td>"
        f"<td class=l>{_e(best['params'].get(p.name, '(inactive)'))}</td></tr>"
        for p in cfg.params
    )
    head = (
        "<h2>Best parameters</h2><table><tr><th class=l>parameter</th><th class=l>value</th></tr>"
        f"{rows}</table>"
    )
    if dict(best["overrides"]) == dict(best["params"]):
        return head  # every parameter is its own scenario path: the overrides would repeat the table
    ov = "".join(
        f"<tr><td class=l><code>{_e(k)}</code></td><td class=l>{_e(v)}</td></tr>"
        for k, v in best["overrides"].items()
    )
    return head + f"<p class=note>As scenario overrides:</p><table>{ov}</table>"


# --------------------------------------------------------------------------- SVG charts
def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=raw)
    start = math.ceil(lo / step) * step
    out = []
    v = start
    while v <= hi + 1e-9 * step:
        out.append(v)
        v += step
    return out


def _axes(
    x0: float, x1: float, y0: float, y1: float, w: int, h: int, pad: int, xl: str, yl: str
) -> tuple[Any, Any, str]:
    def sx(x: float) -> float:
        return pad + (x - x0) / ((x1 - x0) or 1) * (w - pad - 10)

    def sy(y: float) -> float:
        return h - pad + 10 - (y - y0) / ((y1 - y0) or 1) * (h - pad - 10)

    g = [f"<line x1={pad} y1={h - pad + 10} x2={w - 10} y2={h - pad + 10} stroke='#999'/>"]
    g.append(f"<line x1={pad} y1=0 x2={pad} y2={h - pad + 10} stroke='#999'/>")
    for t in _ticks(x0, x1):
        g.append(f"<text x={sx(t):.1f} y={h - pad + 24} text-anchor=middle>{t:g}</text>")
    for t in _ticks(y0, y1):
        g.append(f"<line x1={pad - 4} y1={sy(t):.1f} x2={w - 10} y2={sy(t):.1f} stroke='#eee'/>")
        g.append(f"<text x={pad - 6} y={sy(t) + 4:.1f} text-anchor=end>{t:.4g}</text>")
    g.append(f"<text x={(w + pad) / 2:.0f} y={h - 2} text-anchor=middle>{_e(xl)}</text>")
    g.append(
        f"<text x=12 y={(h - pad) / 2:.0f} transform='rotate(-90 12 {(h - pad) / 2:.0f})' "
        f"text-anchor=middle>{_e(yl)}</text>"
    )
    return sx, sy, "".join(g)


def _history(cfg: StudyConfig, trials: Sequence[FrozenTrial]) -> str:
    done = [t for t in trials if t.state == TrialState.COMPLETE and t.values]
    lbp = [
        t
        for t in trials
        if t.state == TrialState.PRUNED
        and isinstance(t.user_attrs.get("moeopt"), dict)
        and t.user_attrs["moeopt"].get("lower_bound_us") is not None
    ]
    head = "<h2>Optimisation history</h2>"
    if not done:
        return head + "<p>No completed trial.</p>"
    xs = [t.number for t in trials] or [0]
    ys = [t.values[0] for t in done] + [t.user_attrs["moeopt"]["lower_bound_us"] for t in lbp]
    y0, y1 = min(ys), max(ys)
    span = (y1 - y0) or abs(y1) * 0.05 or 1.0
    y0, y1 = y0 - 0.05 * span, y1 + 0.05 * span
    w, h, pad = 960, 320, 70
    sx, sy, axes = _axes(min(xs), max(max(xs), 1), y0, y1, w, h, pad, "trial number", cfg.objective.metric)
    pts = [
        f"<circle cx={sx(t.number):.1f} cy={sy(t.values[0]):.1f} r=3 fill='#3465a4' fill-opacity='.7'/>"
        for t in done
    ]
    pts += [
        f"<rect x={sx(t.number) - 2.5:.1f} y={sy(t.user_attrs['moeopt']['lower_bound_us']) - 2.5:.1f} "
        "width=5 height=5 "
        "fill=none stroke='#c17d11'/>"
        for t in lbp
    ]
    sign = 1.0 if cfg.objective.direction == "minimize" else -1.0
    best = None
    path = []
    for t in sorted(done, key=lambda t: t.number):
        if best is None or sign * t.values[0] < sign * best:
            best = t.values[0]
            path.append((sx(t.number), sy(best)))
    line = ""
    if path:
        d = f"M{path[0][0]:.1f},{path[0][1]:.1f}"
        for _prev, (x, y) in itertools.pairwise(path):
            d += f" H{x:.1f} V{y:.1f}"
        d += f" H{sx(max(xs)):.1f}"
        line = f"<path d='{d}' fill='none' stroke='#cc0000' stroke-width='1.5'/>"
    n_other = len(trials) - len(done) - len(lbp)
    legend = (
        "<p class=note>● completed trial &nbsp; <span style='color:#cc0000'>—</span> best so far &nbsp; "
        "<span style='color:#c17d11'>□</span> pruned by its lower bound (plotted at the bound) "
        "&nbsp; "
        f"{n_other} other trial(s) (infeasible, failed, interrupted) are not plotted</p>"
    )
    return f"{head}<svg width={w} height={h} xmlns='http://www.w3.org/2000/svg'>{axes}{''.join(pts)}{line}</svg>{legend}"


def _importances(s: Mapping[str, Any]) -> str:
    imp = s.get("importances") or {}
    head = "<h2>Parameter importances</h2>"
    if not imp.get("available"):
        return head + f"<p>Not available: {_e(imp.get('reason'))}</p>"
    vals = imp["values"]
    if not vals:
        return head + "<p>No parameter varied among completed trials.</p>"
    w, bar_h = 760, 22
    label_w = 300
    h = bar_h * len(vals) + 10
    top = max(vals.values()) or 1.0
    rows = []
    for i, (k, v) in enumerate(vals.items()):
        y = 5 + i * bar_h
        bw = (w - label_w - 60) * v / top
        rows.append(
            f"<text x={label_w - 6} y={y + 15} text-anchor=end>{_e(k)}</text>"
            f"<rect x={label_w} y={y + 3} width={bw:.1f} height={bar_h - 6} fill='#3465a4'/>"
            f"<text x={label_w + bw + 4:.1f} y={y + 15}>{v:.3f}</text>"
        )
    return (
        f"{head}<svg width={w} height={h} xmlns='http://www.w3.org/2000/svg'>{''.join(rows)}</svg>"
        f"<p class=note>Optuna {_e(imp.get('evaluator'))} on the completed trials (normalised to sum 1).</p>"
    )


def _gap(s: Mapping[str, Any]) -> str:
    g = s.get("exact_gap") or {}
    head = "<h2>Optimality gap of the best point (exact layer)</h2>"
    if not g.get("available"):
        return head + f"<p>Not computed: {_e(g.get('reason'))}</p>"
    rows = []
    for shape, d in g["shapes"].items():
        if "error" in d:
            rows.append(f"<tr><td class=l>{_e(shape)}</td><td colspan=8 class=l>{_e(d['error'])}</td></tr>")
            continue
        for rank, x in d["ranks"].items():
            rows.append(
                f"<tr><td class=l>{_e(shape)}</td><td>{_e(rank)}</td><td>{_fmt(x['greedy_us'])}</td>"
                f"<td>{_fmt(x['best_us'])}</td><td>{_fmt(x['lower_bound_us'])}</td>"
                f"<td>{_fmt(x['gap_to_best_pct'], 2)}%</td><td>{_fmt(x['gap_to_lower_bound_pct'], 2)}%</td>"
                f"<td class=l>{_e(x['status'])}</td>"
                f"<td>{_fmt(x['solve_s'], 1)} s / {_fmt(x['time_limit_s'], 0)} s</td></tr>"
            )
    return (
        head + "<table><tr><th class=l>shape</th><th>rank</th><th>greedy µs</th><th>CP-SAT best µs</th>"
        "<th>lower bound µs</th><th>gain proven reachable</th><th>gain at most</th><th class=l>status</th>"
        f"<th>solve</th></tr>{''.join(rows)}</table>"
        "<p class=note>Times are whole rank graphs (unpermute tail included). greedy / best − 1 is a "
        "gain some dispatch order provably reaches on this tiling; greedy / lower bound − 1 bounds what "
        "any order could "
        "gain.</p>"
    )


def _reasons(s: Mapping[str, Any]) -> str:
    r = s.get("infeasible_reasons") or []
    if not r:
        return ""
    rows = "".join(f"<tr><td>{x['trials']}</td><td class=l>{_e(x['reason'])}</td></tr>" for x in r)
    head = "<h2>Why points were rejected or failed</h2><table><tr><th>trials</th><th class=l>reason</th></tr>"
    return f"{head}{rows}</table>"


def _pareto(cfg: StudyConfig, trials: Sequence[FrozenTrial], s: Mapping[str, Any]) -> str:
    done = [t for t in trials if t.state == TrialState.COMPLETE and t.values and len(t.values) >= 2]
    head = "<h2>Pareto front</h2>"
    if not done:
        return head + "<p>No completed trial.</p>"
    front = {x["trial"] for x in s.get("pareto_front") or []}
    xs = [t.values[0] for t in done]
    ys = [t.values[1] for t in done]
    w, h, pad = 700, 360, 80
    sx, sy, axes = _axes(min(xs), max(xs), min(ys), max(ys), w, h, pad, cfg.metrics[0], cfg.metrics[1])
    pts = "".join(
        f"<circle cx={sx(t.values[0]):.1f} cy={sy(t.values[1]):.1f} r={4 if t.number in front else 2.5} "
        f"fill='{'#cc0000' if t.number in front else '#999'}'/>"
        for t in done
    )
    return f"{head}<svg width={w} height={h} xmlns='http://www.w3.org/2000/svg'>{axes}{pts}</svg>"
