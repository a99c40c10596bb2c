"""Test helpers for code built on moeopt, as ``optuna.testing`` is for Optuna's.

* :class:`PolicyContract`: the scheduling-policy contract as a pytest base class; subclass it
  and define a ``policy`` fixture to check your own policy (valid, above the lower bounds,
  deterministic, the same in another interpreter, blind to labels, unchanged by semaphore
  normalisation, equal to the naive scheduler).
* :func:`event_graphs`: a Hypothesis strategy of small valid event graphs with every feature of
  the event model.
* :func:`naive_schedule`: the greedy rule recomputed from scratch at every step, a slow
  reference for keyed policies.
* :func:`lower_bounds`: bounds every valid schedule of a graph must reach.

Needs pytest and Hypothesis (``pip install "moeopt[testing]"``). ``import moeopt`` never
imports this package.
"""

import pytest

# pytest's assertion messages (the values compared) for the suite's own asserts too
pytest.register_assert_rewrite("moeopt.testing.contract")

from moeopt.testing.bounds import lower_bounds  # noqa: E402
from moeopt.testing.contract import PolicyContract  # noqa: E402
from moeopt.testing.naive import NaiveSchedule, naive_schedule  # noqa: E402
from moeopt.testing.strategies import event_graphs  # noqa: E402

__all__ = ["NaiveSchedule", "PolicyContract", "event_graphs", "lower_bounds", "naive_schedule"]
