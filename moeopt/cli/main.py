"""``python -m moeopt COMMAND``: the table of commands, the parser, and the one place that turns
an error into one line and an exit code."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import traceback
from collections.abc import Sequence

from moeopt.cli.common import Command
from moeopt.cli.fidelity import FIDELITY
from moeopt.cli.gap import GAP
from moeopt.cli.golden import GOLDEN
from moeopt.cli.report import REPORT, TRACE, TRACE_COMPARE
from moeopt.cli.simulate import SIMULATE
from moeopt.cli.trust import AUDIT, COMPARE, CONSERVING, DOMAIN
from moeopt.errors import MoeoptError

COMMANDS: dict[str, Command] = {
    "gap": GAP,
    "simulate": SIMULATE,
    "golden": GOLDEN,
    "report": REPORT,
    "trace": TRACE,
    "trace-compare": TRACE_COMPARE,
    "compare": COMPARE,
    "audit": AUDIT,
    "domain": DOMAIN,
    "conserving": CONSERVING,
    "fidelity": FIDELITY,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m moeopt", description="moeopt command line")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help_text, add_arguments, _run) in COMMANDS.items():
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        add_arguments(cmd)
        cmd.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit code (0 ok, 1 some input failed, 2 usage error)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    _help, _add, run = COMMANDS[args.command]
    try:
        return run(args)
    except BrokenPipeError:
        # the reader went away (``... | head``): stop quietly, as a Unix filter does
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - replaces the closed pipe until exit
        return 0
    except MoeoptError as exc:
        if getattr(args, "debug", False):
            traceback.print_exc()
        print(f"error: {str(exc).strip()}", file=sys.stderr)
        return 2


