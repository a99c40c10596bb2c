"""The integer time grid of the CP-SAT model, and the rounding that keeps its bound sound.

CP-SAT works on integers. Every duration and sync latency λ (µs, real numbers) is turned into a
whole number of *ticks* of ``tick_us`` µs by rounding **down**. Rounding down is what makes the
model a relaxation of the real instance (see :mod:`moeopt.exact.model` for the proof): every real
schedule maps onto a tick schedule of the model whose makespan is ``floor(makespan / tick)``, so
the model's optimum, and every lower bound CP-SAT proves on it, times ``tick_us``, never exceeds
the real optimum. Rounding up or to nearest would break that: three events of 2/3 µs in a chain
take 2 µs, but at 1 ns ticks "nearest" gives 3 × 667 ticks = 2.001 µs.

The grid is chosen automatically as the coarsest of 1, 0.1, 0.01 and 0.001 µs on which every
duration and λ is a whole number of ticks (then nothing is rounded and the model is the exact
instance: PSPLIB durations are integers and land on 1 µs ticks), falling back to 1 ns with
rounding down. A value within ``SNAP_REL`` (relative, float round-off) of a whole number of ticks
counts as that number: 0.3 µs is 3 ticks of 0.1 µs although ``0.3 / 0.1 == 2.9999999999999996``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from moeopt.errors import InputError

AUTO_TICKS_US = (1.0, 0.1, 0.01, 0.001)
"""Candidate grids, coarsest first; the last one is the fallback (1 ns)."""

SNAP_REL = 1e-9
"""Relative float round-off under which a value counts as a whole number of ticks."""

MAX_HORIZON_TICKS = 10**12
"""Horizons above this many ticks make the grid coarser (still rounding down, still sound)."""


def _snap(x: float) -> int | None:
    """``round(x)`` when ``x`` is a whole number up to float round-off, else ``None``."""
    k = round(x)
    if abs(x - k) <= SNAP_REL * max(1.0, abs(x)):
        return int(k)
    return None


@dataclass(frozen=True, slots=True)
class TimeGrid:
    """A tick size and the rounding of real times onto it.

    Attributes:
        tick_us: length of one tick in µs.
        exact: every duration and λ of the graph is a whole number of ticks (nothing rounded).
    """

    tick_us: float
    exact: bool

    def down(self, x_us: float) -> int:
        """``x_us`` in ticks, rounded down (snapped when it is a whole number up to round-off)."""
        x = x_us / self.tick_us
        k = _snap(x)
        return k if k is not None else math.floor(x)

    def is_whole(self, x_us: float) -> bool:
        """Whether ``x_us`` is a whole number of ticks (up to float round-off)."""
        return _snap(x_us / self.tick_us) is not None

    def to_us(self, ticks: float) -> float:
        return ticks * self.tick_us


def choose_grid(
    values_us: Iterable[float], horizon_us: float, tick_us: float | None = None
) -> TimeGrid:
    """The grid for a graph whose durations and λ are ``values_us`` (see the module docstring).

    ``tick_us`` forces a tick size (it must be a finite number > 0); ``horizon_us`` (the longest
    makespan the model must represent) makes an automatic grid coarser when the horizon would not
    fit in ``MAX_HORIZON_TICKS``.
    """
    vals = [float(v) for v in values_us]
    if tick_us is not None:
        if (
            isinstance(tick_us, bool)
            or not isinstance(tick_us, (int, float))
            or not math.isfinite(tick_us)
            or tick_us <= 0
        ):
            raise InputError(f"tick_us must be a finite number of µs > 0, got {tick_us!r}")
        tick = float(tick_us)
        return TimeGrid(tick, all(_snap(v / tick) is not None for v in vals))
    for tick in AUTO_TICKS_US:
        if all(_snap(v / tick) is not None for v in vals):
            return _fit_horizon(TimeGrid(tick, True), vals, horizon_us)
    return _fit_horizon(TimeGrid(AUTO_TICKS_US[-1], False), vals, horizon_us)


def _fit_horizon(grid: TimeGrid, vals: list[float], horizon_us: float) -> TimeGrid:
    tick = grid.tick_us
    if not math.isfinite(horizon_us) or horizon_us / tick <= MAX_HORIZON_TICKS:
        return grid
    while horizon_us / tick > MAX_HORIZON_TICKS:
        tick *= 10.0
    return TimeGrid(tick, all(_snap(v / tick) is not None for v in vals))
