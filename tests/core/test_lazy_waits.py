"""``Schedule.waits`` is built per event on first read, and in one pass once a caller has read
many: every order of reads gives the same values, and the one pass starts only after at least
``BULK_AFTER`` reads and a ``BULK_SHARE``-th of the events."""

from __future__ import annotations

import random

import pytest

import moeopt as m
from moeopt.core.scheduler import _LazyByEvent
from moeopt.synthetic import layered_graph


def test_waits_read_one_by_one_and_in_bulk_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    g = layered_graph(400, seed=3)
    names = list(g.events)
    # reference: every wait built on its own (the bulk pass never starts)
    monkeypatch.setattr(_LazyByEvent, "BULK_AFTER", len(names) + 1)
    ref = m.schedule(g, "earliest_start").waits
    expected = {n: ref[n] for n in names}
    # small thresholds: one pass after max(8, n // 4) reads
    monkeypatch.setattr(_LazyByEvent, "BULK_AFTER", 8)
    monkeypatch.setattr(_LazyByEvent, "BULK_SHARE", 4)
    waits = m.schedule(g, "earliest_start").waits
    order = names[:]
    random.Random(0).shuffle(order)
    threshold = max(8, len(names) // 4)
    for k, n in enumerate(order):
        # the k-th read (0-based) finds k values built; the pass runs on the read that finds
        # `threshold` of them, not before (with the absolute threshold alone it ran at 8)
        assert waits._all is (k > threshold)  # type: ignore[attr-defined]
        assert waits[n] == expected[n]
    assert waits._all  # type: ignore[attr-defined]
