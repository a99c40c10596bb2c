"""``python -m moeopt.search study.yaml [--trials N] [--timeout S] [--workers K] [--storage URL] ...``.

Other options: ``--resume``, ``--out DIR``, ``--quiet``, ``--debug``.

Exit status: 0 done, 2 bad input (one line on stderr, no traceback), 130 interrupted (resume
with ``--resume``), 1 an unexpected internal error (``--debug`` shows its traceback).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from typing import Any

from moeopt.errors import MoeoptError

USAGE_HINT = (
    "usage: python -m moeopt.search STUDY.yaml [--trials N] [--timeout S] [--workers K] [--storage URL] "
    "[--resume] [--out DIR]"
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"moeopt.search: {message}\n{USAGE_HINT}", file=sys.stderr)
        raise SystemExit(2)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m moeopt.search", description="Tune a MegaMoE scenario with Optuna.")
    p.add_argument("study", help="study YAML file (see studies/quickstart.yaml)")
    p.add_argument("--trials", type=int, help="total trials of the study (overrides the file)")
    p.add_argument("--timeout", type=float, dest="timeout_s", help="stop starting trials after S seconds")
    p.add_argument("--workers", type=int, help="local worker processes sharing the storage")
    p.add_argument("--storage", help="journal:PATH | sqlite | sqlite:///PATH | an Optuna RDB URL")
    p.add_argument("--resume", action="store_true", help="continue (or join) the study in the storage")
    p.add_argument("--out", help="output folder (default: the file's 'out', else ./runs/<name>)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from moeopt.search.runner import StudyInterrupted, run_study

    def say(msg: str) -> None:
        print(msg, file=sys.stderr)

    try:
        r = run_study(
            args.study,
            trials=args.trials,
            timeout_s=args.timeout_s,
            workers=args.workers,
            storage=args.storage,
            out=args.out,
            resume=args.resume,
            progress=not args.quiet and sys.stderr.isatty(),
            say=say,
        )
    except MoeoptError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"moeopt.search: {exc}", file=sys.stderr)
        return 2
    except StudyInterrupted as exc:  # the outputs were written for what was done
        _print_result(exc.result)
        print("moeopt.search: interrupted; continue with --resume", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("moeopt.search: interrupted; continue with --resume", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.debug:
            traceback.print_exc()
        print(
            f"moeopt.search: internal error {type(exc).__name__}: {exc} (run with --debug for the traceback)",
            file=sys.stderr,
        )
        return 1
    _print_result(r)
    return 0


def _print_result(r: Any) -> None:
    s = r.summary
    print(
        f"study {r.name}: {r.n_trials} trials ("
        + ", ".join(f"{k.lower()} {v}" for k, v in sorted(r.states.items()))
        + ")"
    )
    pr = ", ".join(f"{k} {v}" for k, v in s["pruned"].items())
    if pr:
        print(f"pruned: {pr}")
    if r.best_value is None:
        print("no trial completed: no best point")
    else:
        metric = s["objective"]["metric"]
        line = f"best {metric} = {r.best_value:.3f} (trial {r.best_trial})"
        if r.baseline_value is not None and r.delta_pct is not None:
            line += f"; baseline {r.baseline_value:.3f}, {r.delta_pct:+.2f}%"
            noise = s["best"].get("noise_pct") or {}
            worst = max(noise.values(), default=None)
            if worst is not None and len(noise) == 1 and r.delta_pct != 0 and abs(r.delta_pct) < worst:
                line += f" (within the measured scheduling-anomaly noise {worst:.2f}%)"
        print(line)
        print("best params: " + ", ".join(f"{k}={v}" for k, v in r.best_params.items()))
        if s["best"]["reproduced"] is False:
            print(f"WARNING: best.toml does not reproduce the trial: {s['best']['reproduce_note']}")
    gap = s["exact_gap"]
    if not gap.get("available"):
        print(f"optimality gap: not computed ({gap.get('reason')})")
    run = s["run"]
    print(
        f"{run['trials_per_minute']:.0f} trials/min over {run['elapsed_s']:.1f} s "
        f"with {run['workers']} worker(s)"
    )
    for key in ("best_toml", "trials_csv", "summary_json", "report_html"):
        if key in r.files:
            print(f"{key.replace('_', '.', 1) if key != 'best_toml' else 'best.toml'}: {r.files[key]}")


if __name__ == "__main__":
    raise SystemExit(main())
