"""The ``python -m moeopt`` command line (one module per command family, shared helpers in
:mod:`moeopt.cli.common`, the table of commands in :mod:`moeopt.cli.main`).

Commands (each a ``(help, add_arguments(parser), run(args))`` triple):

``gap FILE... [--set dotted.path=value ...] [--json [PATH]] [--markdown [PATH]] [--html FILE]``
    For every input: the greedy with every policy, then CP-SAT hinted with the best greedy
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

from moeopt.cli.gap import register_gap_input, register_gap_report, unregister_gap_input
from moeopt.cli.main import COMMANDS, build_parser, main

__all__ = [
    "COMMANDS",
    "build_parser",
    "main",
    "register_gap_input",
    "register_gap_report",
    "unregister_gap_input",
]
