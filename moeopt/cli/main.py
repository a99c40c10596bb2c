"""``moeopt COMMAND`` (the console script; ``python -m moeopt COMMAND`` is the same): the table of
commands, the parser, and the one place that turns an error into one line and an exit code.

The conventions every command shares: ``--json [PATH]`` (JSON to PATH, or to standard output
with no PATH or ``-``, the text then on standard error), ``--quiet`` (no progress output),
``--set PATH=VALUE`` (scenario overrides), ``--debug`` (tracebacks of internal errors); exit 0 ok,
1 some input failed or a guardrail fired, 2 bad input (one ``error:`` line), 130 interrupted."""

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
from moeopt.search.__main__ import HELP as SEARCH_HELP
from moeopt.search.__main__ import add_arguments as search_arguments
from moeopt.search.__main__ import run as search_run

SEARCH: Command = (SEARCH_HELP, search_arguments, search_run)

COMMANDS: dict[str, Command] = {
    "search": SEARCH,
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


PROG = "moeopt"


def version() -> str:
    """The installed package's version (the package itself, run from a checkout: its ``__version__``)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("moeopt")
    except PackageNotFoundError:
        return str(getattr(sys.modules.get("moeopt"), "__version__", "unknown"))


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="moeopt: simulate, bound and tune the MegaMoE fused operator on Ascend NPUs.",
        epilog=f"Run '{prog} COMMAND --help' for the options of one command. Shared by every command: "
        "--json [PATH] (JSON to PATH, or to standard output), --quiet (no progress output), "
        "--debug (tracebacks of internal errors).",
    )
    parser.add_argument("--version", action="version", version=f"moeopt {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for name, (help_text, add_arguments, _run) in COMMANDS.items():
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        add_arguments(cmd)
        cmd.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    return parser


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    """Run one command; return its exit code (0 ok, 1 some input failed, 2 usage error)."""
    parser = build_parser(prog)
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


