"""The vectorised two-threshold energy bound equals its definition on random interval sets."""

from __future__ import annotations

import math
import random

import pytest

from moeopt.exact.bounds import Item, _energy_2d, energy_bound


def _by_definition(items: list[Item], capacity: int, integral: bool) -> float:
    """max over thresholds (h, t) of h + Σ_{head ≥ h, after ≥ t} q·len / C + t (module docstring
    of moeopt.exact.bounds), C-division rounded up on integer ticks."""
    best = 0.0
    for h in {it.head for it in items}:
        for t in {it.after for it in items}:
            energy = sum(it.demand * it.length for it in items if it.head >= h and it.after >= t)
            if energy:
                span = math.ceil(energy / capacity) if integral else energy / capacity
                best = max(best, h + span + t)
    return best


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("integral", [False, True])
def test_vectorised_equals_definition(seed, integral):
    rng = random.Random(seed)
    n = rng.randint(5, 60)
    num = (lambda: float(rng.randint(0, 40))) if integral else (lambda: rng.uniform(0, 40))
    items = [Item(num(), num() + 1, num(), rng.randint(1, 4)) for _ in range(n)]
    cap = rng.randint(1, 6)
    assert _energy_2d(items, cap, integral) == pytest.approx(_by_definition(items, cap, integral))
    # the public bound is at least the two-threshold one (it also takes the one-threshold sweeps)
    assert energy_bound(items, cap, integral=integral) >= _by_definition(items, cap, integral) - 1e-9
