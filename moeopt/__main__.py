"""``python -m moeopt``: see :mod:`moeopt.cli`."""

from moeopt.cli import main

raise SystemExit(main(prog="python -m moeopt"))
