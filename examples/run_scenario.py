"""Simulate a scenario file and print the seed-style summary (same as ``moeopt simulate``).

Usage: python examples/run_scenario.py [SCENARIO.toml] [dotted.path=value ...]
"""

from __future__ import annotations

import os
import sys

from moeopt.cli.common import parse_sets
from moeopt.megamoe import load_scenario, simulate
from moeopt.megamoe.summary import format_summary


def main(argv: list[str]) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    path = argv[0] if argv else os.path.join(here, "scenario_basic.toml")
    print(format_summary(simulate(load_scenario(path, parse_sets(argv[1:])))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
