"""The ``python -m moeopt`` command line.

Commands (a registry, :data:`COMMANDS`; each has ``add_arguments(parser)`` and ``run(args)``):

``gap FILE... [--set dotted.path=value ...] [--json [PATH]] [--markdown [PATH]] [--html FILE]``
    For every input (a directory stands for the input files in it, by name): the greedy with
    every policy, then CP-SAT hinted with the best greedy
    schedule; a table with one row per input as it finishes (the progress), and optionally
    ``--json`` / ``--markdown`` (to PATH, or to standard output without one or with ``-``; the
    table then goes to standard error). Graph inputs are read by the loader registered for their
    suffix (:func:`register_gap_input`; ``.sm`` = PSPLIB). Inputs with a *report* runner
    (:func:`register_gap_report`; ``.toml`` = a MegaMoE scenario, :mod:`moeopt.trust.gap`)
    produce their own report: per distinct rank, the greedy per policy, CP-SAT's best and bound,
    the physical bounds, the gaps and what the optimum does differently; ``--set`` overrides
    apply to them and ``--html`` writes one page with their Gantt charts. A bad input gives one
    ``error: FILE: ...`` line and the run goes on with the others; the exit code is 1 at the end
    if any input failed (or a guardrail fired), 2 for a usage error, 0 otherwise.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TextIO

from moeopt.cli.common import (
    Command,
    add_json_argument,
    add_quiet_argument,
    add_set_argument,
    parse_sets,
    positive_float,
    positive_int,
    write_json,
    write_text,
)
from moeopt.core.events import EventGraph
from moeopt.core.policies import BUILTIN_POLICIES, make_policy
from moeopt.core.psplib import KnownMakespan, load_psplib, load_psplib_known
from moeopt.errors import InputError, MoeoptError
from moeopt.megamoe.scenario import load_scenario
from moeopt.trust.gap import DEFAULT_TIME_LIMIT_S, RankGap, ScenarioGap, gap_html, optimality_gap
from moeopt.trust.gap import pct_text as _pct_text
from moeopt.trust.gap import us_text as _us

GapLoader = Callable[[Path], list[tuple[str, EventGraph]]]
"""Reads one input file into ``[(name, graph), ...]`` (several graphs for e.g. one per rank)."""

_GAP_LOADERS: dict[str, GapLoader] = {}


def register_gap_input(suffix: str, loader: GapLoader, *, replace: bool = False) -> None:
    """Let ``moeopt gap`` read files ending in ``suffix`` (e.g. ``".toml"``) with ``loader``.

    The loader raises :class:`~moeopt.errors.MoeoptError` (one line) for a bad file.
    """
    if not isinstance(suffix, str) or not suffix.startswith(".") or len(suffix) < 2:
        raise InputError(f"register_gap_input: suffix must look like '.toml', got {suffix!r}")
    key = suffix.lower()
    if key in _GAP_LOADERS and not replace:
        raise InputError(f"gap inputs {suffix!r} already have a loader; pass replace=True to override it")
    _GAP_LOADERS[key] = loader


def unregister_gap_input(suffix: str) -> None:
    """Forget the loader of ``suffix`` (a no-op when there is none)."""
    _GAP_LOADERS.pop(suffix.lower(), None)


class GapDocument(Protocol):
    """What a report runner returns for one input (e.g. :class:`moeopt.trust.gap.ScenarioGap`)."""

    def to_dict(self) -> dict[str, Any]: ...

    def text(self) -> str: ...

    def markdown(self) -> str: ...

    def proven_count(self) -> tuple[int, int]:
        """``(graphs proven optimal, graphs)`` of this report."""
        ...


GapReportRunner = Callable[[Path, argparse.Namespace, Callable[[str], None]], GapDocument]
"""``run(path, args, progress)``: one input's report (``progress(line)`` prints as it goes)."""
GapHtml = Callable[[Sequence[Any]], str]
"""One self-contained HTML page for the documents of one runner."""

_GAP_REPORTS: dict[str, tuple[GapReportRunner, GapHtml | None]] = {}


def register_gap_report(suffix: str, run: GapReportRunner, html: GapHtml | None = None) -> None:
    """Let ``moeopt gap`` produce a full report for files ending in ``suffix`` (see the module
    docstring); ``html`` renders ``--html`` for them. Raises :class:`MoeoptError` for a bad file."""
    if not isinstance(suffix, str) or not suffix.startswith(".") or len(suffix) < 2:
        raise InputError(f"register_gap_report: suffix must look like '.toml', got {suffix!r}")
    _GAP_REPORTS[suffix.lower()] = (run, html)


def gap_suffixes() -> list[str]:
    return sorted(set(_GAP_LOADERS) | set(_GAP_REPORTS))


def _load_sm(path: Path) -> list[tuple[str, EventGraph]]:
    return [(path.stem, load_psplib(path))]


register_gap_input(".sm", _load_sm)


# ---------------------------------------------------------------------- formatting
def _num(x: float | None) -> str:
    if x is None:
        return "-"
    if math.isinf(x):
        return "inf"
    return f"{x:.6g}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100.0 * x:.2f}%"


@dataclass
class GapRow:
    """One finished input of ``moeopt gap``."""

    input: str
    name: str
    report: Any  # GapReport (imported lazily: OR-Tools loads only when the command runs)
    known: KnownMakespan | None
    """what ``--optima`` says of this instance's optimal makespan (``None``: not listed)"""
    use: Any = None
    """where the best schedule leaves the bound's capacity unused, when not proven
    (``moeopt.exact.usage.CapacityUse``; ``None``: proven, or no bound names a capacity)"""

    @property
    def known_optimum_us(self) -> float | None:
        """The proven optimum from ``--optima``, or ``None`` (not listed, or still open)."""
        opt = None if self.known is None else self.known.optimum
        return None if opt is None else float(opt)

    def known_text(self) -> str:
        """The known optimum, or its range ``L..U`` for an open instance, or ``-``."""
        return "-" if self.known is None else str(self.known)

    def to_dict(self) -> dict[str, Any]:
        k = self.known
        return {
            "input": self.input,
            "known_optimum_us": self.known_optimum_us,
            "known_lower_us": None if k is None or k.lower is None else float(k.lower),
            "known_upper_us": None if k is None or k.upper is None else float(k.upper),
            **self.report.to_dict(),
            "binding_use": None if self.use is None else self.use.to_dict(),
        }


TABLE_COLUMNS = (
    ("#", 7, ">"),
    ("input", 18, "<"),
    ("events", 6, ">"),
    ("best greedy", 11, ">"),
    ("policy", 29, "<"),
    ("CP best", 10, ">"),
    ("bound", 10, ">"),
    ("bound from", 16, "<"),
    ("status", 9, "<"),
    ("greedy/bound-1", 14, ">"),
    ("greedy/best-1", 13, ">"),
    ("known", 9, ">"),
    ("seconds", 7, ">"),
)


def _table_line(cells: Sequence[str]) -> str:
    return "  ".join(f"{c:{al}{w}}" for c, (_h, w, al) in zip(cells, TABLE_COLUMNS))


def _table_row(k: int, total: int, row: GapRow) -> str:
    rep = row.report
    x = rep.exact
    best = rep.best_policy
    return _table_line(
        [
            f"[{k}/{total}]",
            row.name,
            str(rep.num_events),
            _num(None if best is None else best.makespan_us),
            "-" if best is None else best.policy,
            _num(x.best_us),
            _num(x.lower_bound_us),
            x.bound_source,
            x.status.value,
            _pct(None if best is None else best.gap_to_bound),
            _pct(None if best is None else best.gap_to_best),
            row.known_text(),
            f"{x.total_s:.2f}",
        ]
    )


def markdown(rows: Sequence[GapRow], policies: Sequence[str]) -> str:
    """A Markdown table: one row per input, one column per policy (makespan and gap to bound)."""
    head = ["input", "events", *policies, "CP-SAT best", "lower bound", "bound from", "status"]
    if any(r.known is not None for r in rows):
        head.append("known optimum")
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in rows:
        rep = r.report
        cells = [r.name, str(rep.num_events)]
        for p in policies:
            pr = rep.policy(p)
            cells.append(
                "failed" if pr.makespan_us is None else f"{_num(pr.makespan_us)} ({_pct(pr.gap_to_bound)})"
            )
        cells += [_num(rep.exact.best_us), _num(rep.exact.lower_bound_us), rep.exact.bound_source]
        cells.append(rep.exact.status.value)
        if len(head) > len(cells):
            cells.append(r.known_text())
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(
        "Greedy cells: makespan (greedy / lower bound − 1). Times in µs (PSPLIB: periods)."
    )
    return "\n".join(lines) + "\n"


def _expanded(files: Sequence[str]) -> list[str]:
    """``files`` with each directory replaced by the files in it (not below it) of a supported
    input type, by name (a PSPLIB set's folder: ``moeopt gap j60/ --optima j60_opt.csv``); a
    directory holding none is an error before any work."""
    out: list[str] = []
    supported = set(gap_suffixes())
    for f in files:
        path = Path(f)
        if not path.is_dir():
            out.append(f)
            continue
        inside = sorted(str(q) for q in path.iterdir() if q.is_file() and q.suffix.lower() in supported)
        if not inside:
            raise InputError(f"{f}: a directory with no input files (supported: {', '.join(gap_suffixes())})")
        out.extend(inside)
    return out


def _against_known(rep: Any, known: KnownMakespan | None) -> list[str]:
    """What contradicts the known makespans: a lower bound above the known optimum or best
    known upper bound (the bound is unsound), or a schedule below the known optimum or best
    known lower bound (the schedule breaks a rule the validator missed, or the known lower
    bound is wrong)."""
    if known is None:
        return []
    out = []
    bound, best = rep.lower_bound_us, rep.exact.best_us
    if known.bound_too_high(bound):
        what = "known optimum" if known.optimum is not None else "best known upper bound"
        out.append(f"lower bound {bound:g} exceeds the {what} {known.upper} (a bug)")
    if best is not None and known.makespan_too_low(best):
        what = "known optimum" if known.optimum is not None else "best known lower bound"
        out.append(f"best schedule {best:g} is below the {what} {known.lower} (a bug, or a wrong bound)")
    return out


# ---------------------------------------------------------------------- gap command
def _gap_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help=f"inputs ({', '.join(gap_suffixes())}), or directories of them",
    )
    p.add_argument(
        "--time-limit",
        type=positive_float,
        default=None,
        metavar="S",
        help="CP-SAT seconds per graph (default 10; scenarios: 30 per distinct rank)",
    )
    p.add_argument("--workers", type=positive_int, default=1, help="CP-SAT worker threads (default 1)")
    p.add_argument(
        "--mode",
        default="auto",
        choices=("auto", "exact", "relaxed"),
        help="exact, relaxed (pools as cumulatives) or auto (default: exact, "
        "relaxed for large pooled scenario graphs)",
    )
    p.add_argument(
        "--policies",
        default=",".join(BUILTIN_POLICIES),
        help="comma-separated greedy policies (default: every built-in one)",
    )
    p.add_argument(
        "--optima",
        metavar="CSV",
        help="known optima to compare: instance,optimal_makespan (a whole number, or L..U, ..U, L.. for "
        "open instances) or instance,lower_bound,upper_bound",
    )
    add_json_argument(p, "the full results")
    p.add_argument(
        "--markdown",
        nargs="?",
        const="-",
        metavar="PATH",
        help="write the results as Markdown to PATH (no PATH or '-': standard output; the text then goes "
        "to standard error)",
    )
    p.add_argument(
        "--html", metavar="FILE", help="scenario inputs: one HTML page with the greedy and best Gantt charts"
    )
    add_set_argument(p, "scenario inputs: ")
    p.add_argument(
        "--divergences",
        type=positive_int,
        default=10,
        metavar="N",
        help="scenario inputs: first divergences listed per rank (default 10)",
    )
    add_quiet_argument(p, "no progress: no row per input as it finishes, only errors and the summary")


def _gap_run(args: argparse.Namespace) -> int:
    from moeopt.exact.gap import graph_optimality_gap
    from moeopt.exact.usage import certificate_use

    to_stdout = args.json == "-" or args.markdown == "-"
    term: TextIO = sys.stderr if to_stdout else sys.stdout
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    if not policies:
        raise InputError("--policies: give at least one policy name")
    for p in policies:
        make_policy(p)  # an unknown name fails here, once, with the known names
    optima: dict[str, KnownMakespan] = {}
    if args.optima:
        optima = load_psplib_known(args.optima)
    parse_sets(args.set)  # a malformed --set fails here, before any work
    args.files = _expanded(args.files)
    report_inputs = [f for f in args.files if Path(f).suffix.lower() in _GAP_REPORTS]
    if args.set and not report_inputs:
        raise InputError(f"--set applies to scenario inputs ({', '.join(sorted(_GAP_REPORTS))}) only")
    if args.html and not report_inputs:
        raise InputError(
            f"--html draws the schedules of scenario inputs ({', '.join(sorted(_GAP_REPORTS))}); none given"
        )
    graph_mode = "exact" if args.mode == "auto" else args.mode
    time_limit = 10.0 if args.time_limit is None else args.time_limit
    header_done = False
    rows: list[GapRow] = []
    docs: list[tuple[str, Any]] = []
    errors: list[dict[str, str]] = []
    total = len(args.files)

    def fail(path: str, msg: str) -> None:
        for prefix in (f"{path}: ", f"{Path(path)}: "):
            msg = msg.removeprefix(prefix)  # loaders often name the file themselves
        errors.append({"input": path, "error": msg})
        print(f"error: {path}: {msg}", file=sys.stderr, flush=True)

    def say(line: str) -> None:
        if not args.quiet:
            print(line, file=term, flush=True)

    for k, f in enumerate(args.files, 1):
        path = Path(f)
        suffix = path.suffix.lower()
        loader = _GAP_LOADERS.get(suffix)
        runner = _GAP_REPORTS.get(suffix)
        if loader is None and runner is None:
            kind = path.suffix or "(no suffix)"
            fail(f, f"unsupported input type {kind!r} (supported: {', '.join(gap_suffixes())})")
            continue
        if not path.is_file():
            fail(f, "no such file")
            continue
        try:
            if runner is not None:
                say(f"[{k}/{total}] {f}")
                doc = runner[0](path, args, say)
                docs.append((suffix, doc))
                say(doc.text())
                continue
            assert loader is not None
            graphs = loader(path)
            for name, graph in graphs:
                rep = graph_optimality_gap(
                    graph,
                    time_limit_s=time_limit,
                    workers=args.workers,
                    mode=graph_mode,
                    policies=policies,
                    name=name,
                )
                known = optima.get(name)
                use = certificate_use(graph, rep.exact, rep.exact.schedule)
                row = GapRow(f, name, rep, known, use)
                rows.append(row)
                if not header_done:
                    say(_table_line([h for h, _w, _a in TABLE_COLUMNS]))
                    header_done = True
                say(_table_row(k, total, row))
                why = rep.exact.bound_explanation()  # ("" when proven)
                if why:
                    say(f"        {why}")
                if use is not None:
                    say(f"        {use.text()}")
                for problem in _against_known(rep, known):
                    fail(f, problem)
        except MoeoptError as exc:
            fail(f, str(exc).strip().replace("\n", " "))
        except Exception as exc:
            if args.debug:
                raise
            fail(f, f"internal error ({type(exc).__name__}: {exc}); rerun with --debug for the traceback")
    proven = sum(1 for r in rows if r.report.proven_optimal)
    if report_inputs:
        counts = [d.proven_count() for _sfx, d in docs]
        ranks = sum(n for _p, n in counts)
        what = f"{len(docs)} scenario report(s) ({ranks} distinct rank(s))"
        if rows:
            what = f"{len(rows)} graph(s) and " + what
        proven += sum(p for p, _n in counts)
    else:
        what = f"{len(rows)} graph(s)"
    what += f" from {total} input(s): {proven} proven optimal, {len(errors)} failed"
    print(what, file=term, flush=True)
    if args.json:
        # the CP-SAT time limit each kind of input was given (the defaults differ)
        limits = {}
        if rows or len(report_inputs) < len(args.files):
            limits["graphs"] = time_limit
        if report_inputs:
            limits["scenarios"] = DEFAULT_TIME_LIMIT_S if args.time_limit is None else args.time_limit
        used = set(limits.values())
        doc_json: dict[str, Any] = {
            "settings": {
                "time_limit_s": used.pop() if len(used) == 1 else None,
                "time_limit_s_by_input": limits,
                "workers": args.workers,
                "mode": args.mode,
                "policies": policies,
                "overrides": parse_sets(args.set),
            },
            "results": [r.to_dict() for r in rows],
            "errors": errors,
        }
        if report_inputs:
            doc_json["reports"] = [d.to_dict() for _sfx, d in docs]
        write_json(args.json, doc_json)
    if args.markdown:
        parts = [markdown(rows, policies)] if rows else []
        parts += [d.markdown() for _sfx, d in docs]
        write_text(args.markdown, "\n".join(parts))
    if args.html:
        by_runner: dict[str, list[Any]] = {}
        for sfx, d in docs:
            by_runner.setdefault(sfx, []).append(d)
        pages = [html(ds) for sfx, ds in by_runner.items() if (html := _GAP_REPORTS[sfx][1]) is not None]
        if pages:
            write_text(args.html, pages[0] if len(pages) == 1 else "\n".join(pages))
            print(f"wrote {args.html}", file=term, flush=True)
    return 1 if errors else 0


# ---------------------------------------------------------------------- scenario inputs
def scenario_gap_input(path: Path, args: Any, progress: Callable[[str], None]) -> ScenarioGap:
    """``moeopt gap`` runner for scenario files (:func:`register_gap_report`).

    Reads ``args.set`` (overrides), ``time_limit`` (default :data:`DEFAULT_TIME_LIMIT_S` per
    distinct rank), ``workers``, ``mode``, ``policies`` and ``divergences``.
    """
    overrides = parse_sets(getattr(args, "set", None))
    scenario = load_scenario(path, overrides)
    label = str(path) + "".join(f" --set {k}={v}" for k, v in overrides.items())
    limit = DEFAULT_TIME_LIMIT_S if args.time_limit is None else args.time_limit
    pols = [p.strip() for p in args.policies.split(",") if p.strip()]

    def each(r: RankGap) -> None:
        progress(
            f"  rank {r.rank} ({r.num_events} events): greedy {_us(r.greedy_us)}, best {_us(r.best_us)}, "
            f"bound {_us(r.lower_bound_us)} [{r.exact.bound_source}], "
            f"certified gap {_pct_text(r.certified_gap)}, {r.exact.total_s:.1f} s"
        )

    return optimality_gap(
        scenario,
        time_limit_s=limit,
        workers=args.workers,
        mode=args.mode,
        policies=pols,
        divergences=args.divergences,
        label=label,
        progress=each,
    )


register_gap_report(".toml", scenario_gap_input, gap_html)

GAP: Command = (
    "greedy (every policy) against CP-SAT's best schedule and lower bound, per input",
    _gap_arguments,
    _gap_run,
)
