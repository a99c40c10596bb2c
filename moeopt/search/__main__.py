"""``moeopt search STUDY.yaml [--trials N] [--timeout S] [--workers K] [--storage URL] ...``
(also ``python -m moeopt.search STUDY.yaml ...``, the same options).

Other options: ``--resume``, ``--out DIR``, ``--json [PATH]``, ``--quiet``, ``--debug``.

Exit status: 0 the study finished (or stopped on its time limit), 2 bad input (one ``error:`` line
on stderr, no traceback), 130 interrupted (continue with ``--resume``), 1 an unexpected internal
error (``--debug`` shows its traceback).

:func:`add_arguments` and :func:`run` are also the ``search`` command of ``moeopt``.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from typing import Any, TextIO

from moeopt.errors import MoeoptError
from moeopt.plain import jsonable

HELP = "tune a scenario with Optuna: run (or resume) a study file and write best.toml, trials.csv, a report"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``moeopt search`` / ``python -m moeopt.search``."""
    p.add_argument("study", metavar="STUDY", help="study YAML file (see studies/quickstart.yaml)")
    p.add_argument("--trials", type=int, metavar="N", help="total trials of the study (overrides the file)")
    p.add_argument(
        "--timeout", type=float, dest="timeout_s", metavar="S", help="stop starting trials after S seconds"
    )
    p.add_argument("--workers", type=int, metavar="K", help="local worker processes sharing the storage")
    p.add_argument(
        "--storage", metavar="URL", help="journal:PATH | sqlite | sqlite:///PATH | an Optuna RDB URL"
    )
    p.add_argument("--resume", action="store_true", help="continue (or join) the study in the storage")
    p.add_argument(
        "--out", metavar="DIR", help="output folder (default: the file's 'out', else ./runs/<name>)"
    )
    p.add_argument(
        "--json",
        nargs="?",
        const="-",
        metavar="PATH",
        help="also write summary.json's content to PATH (no PATH or '-': standard output, the text "
        "then goes to standard error)",
    )
    p.add_argument(
        "--quiet", action="store_true", help="no progress (a bar on a terminal, periodic lines elsewhere)"
    )
    p.add_argument("--no-progress", action="store_true", dest="quiet", help=argparse.SUPPRESS)


def _parser() -> argparse.ArgumentParser:
    from moeopt import __version__

    p = argparse.ArgumentParser(prog="python -m moeopt.search", description=HELP)
    add_arguments(p)
    p.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    p.add_argument("--version", action="version", version=f"moeopt {__version__}")
    return p


def main(argv: list[str] | None = None) -> int:
    return run(_parser().parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """Run the study of ``args``; print the result; return the exit code."""
    from moeopt.search.config import CLI_NAMES
    from moeopt.search.runner import StudyInterrupted, run_study

    text: TextIO = sys.stderr if args.json == "-" else sys.stdout

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    try:
        r = run_study(
            args.study,
            trials=args.trials,
            timeout_s=args.timeout_s,
            workers=args.workers,
            storage=args.storage,
            out=args.out,
            resume=args.resume,
            progress=not args.quiet,
            say=say,
            names=CLI_NAMES,
        )
    except MoeoptError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except StudyInterrupted as exc:  # the outputs were written for what was done
        r = exc.result
    except KeyboardInterrupt:
        print("error: interrupted before any output was written; continue with --resume", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.debug:
            traceback.print_exc()
        print(
            f"error: internal error {type(exc).__name__}: {exc} (run with --debug for the traceback)",
            file=sys.stderr,
        )
        return 1
    _print_result(r, text)
    if args.json:
        doc = json.dumps(jsonable(r.summary, nonfinite="null"), indent=2) + "\n"
        try:
            if args.json == "-":
                sys.stdout.write(doc)
                sys.stdout.flush()
            else:
                with open(args.json, "w", encoding="utf-8") as fh:
                    fh.write(doc)
        except OSError as exc:
            print(f"error: {args.json}: cannot write: {exc.strerror or exc}", file=sys.stderr)
            return 2
    if r.status != "finished":
        print(f"{r.status}; continue with --resume", file=sys.stderr)
    return 130 if r.status == "interrupted" else 0


def _ended(r: Any) -> str:
    """How the run ended, in words (the status of :data:`moeopt.search.runner.STATUSES`)."""
    if r.status == "finished":
        return "finished"
    timeout = r.summary.get("timeout_s")
    return {
        "interrupted": "interrupted",
        "timeout": "stopped on the time limit" + (f" ({timeout:g} s)" if timeout else ""),
        "stopped": "stopped early (its workers ended on errors)",
    }.get(r.status, r.status)


def _print_result(r: Any, out: TextIO | None = None) -> None:
    s = r.summary
    stream = out or sys.stdout

    def put(line: str) -> None:
        stream.write(line + "\n")
        stream.flush()

    n = f"{r.n_trials}" if r.status == "finished" else f"{r.n_trials} of {s['target_trials']}"
    put(
        f"study {r.name} {_ended(r)}: {n} trials ("
        + ", ".join(f"{k.lower()} {v}" for k, v in sorted(r.states.items()))
        + ")"
    )
    pr = ", ".join(f"{k} {v}" for k, v in s["pruned"].items())
    if pr:
        put(f"pruned: {pr}")
    if r.best_value is None:
        put("no trial completed: no best point")
    else:
        metric = s["objective"]["metric"]
        line = f"best {metric} = {r.best_value:.3f} (trial {r.best_trial})"
        if r.baseline_value is not None and r.delta_pct is not None:
            line += f"; baseline {r.baseline_value:.3f}, {r.delta_pct:+.2f}%"
            noise = s["best"].get("noise_pct") or {}
            worst = max(noise.values(), default=None)
            if worst is not None and len(noise) == 1 and r.delta_pct != 0 and abs(r.delta_pct) < worst:
                line += f" (within the measured scheduling-anomaly noise {worst:.2f}%)"
        put(line)
        put("best params: " + ", ".join(f"{k}={v}" for k, v in r.best_params.items()))
        if s["best"]["reproduced"] is False:
            put(f"WARNING: best.toml does not reproduce the trial: {s['best']['reproduce_note']}")
    gap = s["exact_gap"]
    if not gap.get("available"):
        put(f"optimality gap: not computed ({gap.get('reason')})")
    run = s["run"]
    if run["evaluated"] + run["duplicates"] == 0 and r.status == "finished":
        put(f"no trial run: the study already had its {r.n_trials} trials (--trials N adds more)")
    else:
        put(
            f"{run['trials_per_minute']:.0f} trials/min over {run['elapsed_s']:.1f} s "
            f"with {run['workers']} worker(s)"
        )
    for key in ("best_toml", "trials_csv", "summary_json", "report_html"):
        if key in r.files:
            put(f"{key.replace('_', '.', 1) if key != 'best_toml' else 'best.toml'}: {r.files[key]}")


if __name__ == "__main__":
    raise SystemExit(main())
