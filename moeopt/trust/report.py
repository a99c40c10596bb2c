"""The single-page HTML report of a scenario (the ``report`` command is in :mod:`moeopt.cli.report`).

``report FILE -o report.html [--set PATH=VALUE ...] [--rank R] [--policy NAME ...] [--exact S]``
    Simulate the scenario and write one self-contained HTML page (no network at view time): the
    time, the three physical bounds (which binds, the excess over it), utilisation per role and
    per resource, idle decomposition per stage, stage busy time, traffic, the critical path's
    largest waits, the calibration domain, and a Gantt chart of one rank (default: the slowest)
    with one row per core and role, coloured by stage, wait attribution on hover. ``--policy``
    stacks the same graph scheduled by other greedy policies under it; ``--exact S`` stacks the
    CP-SAT schedule found within S seconds (hinted with the greedy one). Exit 0, 1 when a
    guardrail fired (the page is not written), 2 for bad input.

``trace FILE -o trace.json [--set ...] [--rank R] [--policy NAME]``
    Export one rank's schedule as Chrome-trace JSON (Perfetto / chrome://tracing; ``.gz`` for
    gzip): process = core, thread = role, ``cat`` = stage, waits and labels in ``args``.

``trace-compare FILE MEASURED.json [--set ...] [--rank R] [--json PATH] [--check]``
    Compare the predicted schedule of one rank with a measured (or exported) trace, stage by
    stage: event counts, order, per-core assignment, duration ratio, start shift
    (:mod:`moeopt.trace.compare`). A truncated trace is compared as far as it goes, with a
    warning. ``--check``: exit 1 unless the two are identical.

Library: :func:`report_html` / :func:`write_report`.
"""

from __future__ import annotations

import html
import math
import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from moeopt.core.policies import make_policy
from moeopt.errors import InputError
from moeopt.megamoe.results import SimulateResult
from moeopt.megamoe.scenario import Scenario
from moeopt.megamoe.simulate import simulate
from moeopt.megamoe.summary import format_summary
from moeopt.viz.gantt import GanttTrack, gantt_fragment, page_head, page_tail, write_page

_e = html.escape


# --------------------------------------------------------------------------- helpers
def pick_rank(r: SimulateResult, rank: int | None) -> int:
    """``rank`` checked against the world size, or the slowest rank when ``None``."""
    world = r["implementation"]["topology"]["world"]
    if rank is None:
        return int(r["slowest_rank"])
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world:
        raise InputError(
            f"--rank: must be an integer from 0 to {world - 1} (the world size is {world}), got {rank!r}"
        )
    return rank


def _num(x: Any, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, float):
        return f"{x:,.{digits}f}"
    return _e(str(x))


def _natural(item: tuple[str, Any]) -> tuple[Any, ...]:
    """Sort key of a resource name read as people count: c2.AIC before c10.AIC."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", item[0]))


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]], left: int = 1) -> str:
    """An HTML table; the first ``left`` columns are text (left-aligned), the rest numbers."""
    th = "".join(f'<th class="{"l" if k < left else ""}">{_e(h)}</th>' for k, h in enumerate(head))
    body = []
    for row in rows:
        cells = []
        for k, v in enumerate(row):
            cls = ' class="l"' if k < left else ""
            text = v if isinstance(v, _Raw) else _num(v) if k >= left else _e(str(v))
            cells.append(f"<td{cls}>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f'<table class="mg"><tr>{th}</tr>' + "".join(body) + "</table>\n"


class _Raw(str):
    """Cell HTML that is already safe (a utilisation bar)."""


def _bar(frac: float) -> _Raw:
    pct = max(0.0, min(100.0, 100.0 * frac))
    return _Raw(
        f'<span style="display:inline-block;width:120px;background:#eee;vertical-align:middle">'
        f'<span style="display:block;width:{pct:.1f}%;height:10px;background:#4e79a7"></span></span> '
        f"{100.0 * frac:.1f}%"
    )


# --------------------------------------------------------------------------- report
def report_html(
    scenario: Scenario,
    *,
    result: SimulateResult | None = None,
    rank: int | None = None,
    policies: Sequence[str] = (),
    exact_time_limit_s: float | None = None,
    title: str = "moeopt report",
    source: str = "",
) -> str:
    """The report page of ``scenario`` (``result``: an existing :func:`simulate` result to reuse)."""
    r = result if result is not None else simulate(scenario)
    rk = pick_rank(r, rank)
    rr = r["rank_results"][rk]
    g, s = rr["graph"], rr["schedule"]
    tracks = [GanttTrack(f"rank {rk}, greedy ({s.policy or r['policy']})", s, g)]
    for p in policies:
        pol = make_policy(p)  # an unknown name fails here with the known names
        # simulated like the scenario itself, so both guardrails judge this policy's schedule
        other = simulate(scenario.with_overrides({"policy.scheduling": pol.name}))
        tracks.append(GanttTrack(f"rank {rk}, greedy ({pol.name})", other["rank_results"][rk]["schedule"], g))
    exact_note = ""
    if exact_time_limit_s is not None:
        from moeopt.exact import solve_exact

        x = solve_exact(g, time_limit_s=exact_time_limit_s, hint=s)
        exact_note = (
            f"CP-SAT ({exact_time_limit_s:g} s): status {x.status.value}, best "
            f"{_num(x.best_us)} µs, lower bound {_num(x.lower_bound_us)} µs ({x.bound_source})"
        )
        if x.schedule is not None:
            tracks.append(GanttTrack(f"rank {rk}, CP-SAT {x.status.value}", x.schedule, g))

    parts = [page_head(title), f"<h1>{_e(title)}</h1>\n"]
    if source:
        parts.append(f"<p>scenario <code>{_e(source)}</code></p>\n")
    parts.append(f'<pre class="mg">{_e(format_summary(r))}</pre>\n')

    b = r["bounds"]
    parts.append("<h2>Time and physical bounds (slowest rank)</h2>\n")
    parts.append(
        _table(
            ["quantity", "µs"],
            [
                ["kernel time (to the last combine)", r["kernel_total_us"]],
                ["with the unpermute tail", r["kernel_dag_end_us"]],
                ["compute bound", b["compute_us"]],
                [f"bandwidth bound [{b['bandwidth_channel']}]", b["bandwidth_us"]],
                *[[f"  bandwidth: {ch}", v] for ch, v in b.get("bandwidth_by_channel_us", {}).items()],
                ["dependency-chain bound", b["dependency_us"]],
                [f"binding: {b['binding']}, excess over it", _Raw(f"{b['excess_pct']:+.2f}%")],
            ],
        )
    )
    if b.get("violated"):
        parts.append("<p><b>The time is below a physical bound: a cost is missing from the model.</b></p>\n")

    parts.append("<h2>Utilisation per role</h2>\n")
    parts.append(_table(["role", "utilisation"], [[k, _bar(v)] for k, v in r["role_utilization"].items()]))
    ru = r["resource_utilization"]
    busy, idle = r["resource_busy_us"], r["resource_idle_us"]
    parts.append(f"<details><summary>per resource ({len(ru)})</summary>\n")
    parts.append(
        _table(
            ["resource", "busy µs", "idle µs", "utilisation"],
            [[k, busy.get(k), idle.get(k), _bar(v)] for k, v in sorted(ru.items(), key=_natural)],
        )
    )
    parts.append("</details>\n")

    parts.append(f"<h2>Schedule of rank {rk}</h2>\n")
    parts.append(
        "<p>One row per core and role; colour = stage. Hover a bar for the event, its times and what it "
        "waited for; wheel to zoom, drag to pan, double-click to reset.</p>\n"
    )
    if exact_note:
        parts.append(f"<p>{_e(exact_note)}</p>\n")
    parts.append(gantt_fragment(tracks, color_by="stage", row_order="role", chart_id="schedule"))
    idl = r["idle_decomposition"]
    parts.append("<h2>Idle ledger per role (member-µs; busy + forced + avoidable = members x span)</h2>\n")
    parts.append(
        _table(
            ["role", "members", "busy", "forced", "avoidable"],
            [
                [role, d["members"], d["busy_core_us"], d["forced_core_us"], d["avoidable_core_us"]]
                for role, d in idl["by_role"].items()
            ],
        )
    )
    parts.append("<h2>Avoidable idle per stage pool (core-µs)</h2>\n")
    parts.append(
        _table(
            ["stage", "avoidable", "late-bound", "work conservation"],
            [
                [
                    st,
                    d["avoidable_core_us"],
                    _Raw("yes" if d["late_bound"] else "no"),
                    _Raw(_e(d["work_conservation_exempt"] or "checked")),
                ]
                for st, d in idl["by_stage"].items()
            ],
        )
    )

    parts.append("<h2>Stage busy time and traffic</h2>\n")
    parts.append(_table(["stage", "busy core-µs"], list(r["stage_busy_us"].items())))
    parts.append(_table(["channel", "MB"], [[k, v / 1e6] for k, v in r["traffic_bytes"].items()]))

    cp = r["critical_path"]
    on_cp: dict[str, float] = defaultdict(float)
    for c in cp:
        on_cp[str(c.get("stage"))] += c["end_us"] - c["start_us"]
    parts.append(f"<h2>Critical path ({len(cp)} events)</h2>\n")
    parts.append(_table(["stage", "µs on the critical path"], sorted(on_cp.items(), key=lambda kv: -kv[1])))
    waits = sorted((c for c in cp if c.get("wait_us", 0) > 0), key=lambda c: -c["wait_us"])[:10]
    if waits:
        parts.append("<h3>Largest waits on the critical path</h3>\n")
        parts.append(
            _table(
                ["event", "stage", "why", "after", "wait µs", "start µs"],
                [
                    [c["event"], c.get("stage"), c["why"], c.get("after") or "-", c["wait_us"], c["start_us"]]
                    for c in waits
                ],
                left=4,
            )
        )
    else:
        parts.append(
            "<p>No event on the critical path queued: every step waited only for its dependency.</p>\n"
        )

    cal = r["calibration"]
    dom = cal["domain"]
    parts.append("<h2>Calibration domain</h2>\n")
    if cal["out_of_domain"] or dom is None:  # (no domain is always out of domain)
        parts.append("<p><b>Out of domain:</b> " + _e("; ".join(cal["reasons"])) + "</p>\n")
    else:
        parts.append(f"<p>Inside domain <code>{_e(str(dom['id']))}</code>.</p>\n")

    parts.append("<h2>Ranks</h2>\n")
    rows = []
    for rep in r["simulated_ranks"]:
        rep_r = r["rank_results"][rep]
        rows.append(
            [
                str(rep),
                ", ".join(map(str, rep_r["ranks_sharing_signature"])),
                rep_r["kernel_total_us"],
                rep_r["n_events"],
                _Raw(f"<code>{rep_r['schedule'].fingerprint()}</code>"),
            ]
        )
    parts.append(_table(["rank", "ranks sharing it", "time µs", "events", "fingerprint"], rows, left=2))

    parts.append(page_tail())
    return "".join(parts)


def write_report(path: str | Path, scenario: Scenario, **kwargs: Any) -> Path:
    """Write :func:`report_html` to ``path``."""
    return write_page(path, report_html(scenario, **kwargs), "report")
