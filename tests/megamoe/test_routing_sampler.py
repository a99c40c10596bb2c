"""The vectorised Gumbel top-k sampler of the random / zipf routings against the plain one.

The reference is what ``_sampled``'s exact fallback does (and what the sampler is documented
to draw): per source rank, ``logp + Generator.gumbel`` and the ``topk`` largest by
``argpartition``. The vectorised path (one log, a product with the weights, a sorted threshold)
must give the same counts bit for bit, on its own and on every fallback: near ties, a rejected
draw of 0, weights out of range.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import moeopt.megamoe as mm
from moeopt.megamoe import routing
from moeopt.megamoe.routing import counts_matrix


def _reference(w: mm.Workload) -> np.ndarray:
    n_exp = w.world * w.local_experts
    rng = np.random.default_rng(w.routing_seed)
    logp = -w.skew * np.log(rng.permutation(n_exp) + 1.0) if w.routing == "zipf" else np.zeros(n_exp)
    out = np.zeros((w.world, n_exp), dtype=np.int64)
    for s in range(w.world):
        keys = logp[None, :] + rng.gumbel(size=(w.tokens, n_exp))
        top = np.argpartition(-keys, w.topk - 1, axis=1)[:, : w.topk]
        out[s] = np.bincount(top.ravel(), minlength=n_exp)
    return out


@st.composite
def _workloads(draw: st.DrawFn) -> mm.Workload:
    world = draw(st.integers(1, 5))
    local = draw(st.integers(1, 12))
    topk = draw(st.integers(1, world * local))
    kw: dict[str, Any] = {
        "tokens": draw(st.integers(1, 200)),
        "topk": topk,
        "world": world,
        "local_experts": local,
        "routing": draw(st.sampled_from(["zipf", "random"])),
        "seed": draw(st.integers(0, 2**32 - 1)),
    }
    if kw["routing"] == "zipf":
        kw["zipf_skew"] = draw(st.floats(0.01, 10.0))
    return mm.Workload(**kw)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=_workloads())
def test_the_sampler_draws_what_gumbel_and_argpartition_draw(w: mm.Workload) -> None:
    assert (counts_matrix(w) == _reference(w)).all()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=_workloads())
def test_the_threaded_sampler_draws_what_gumbel_and_argpartition_draw(w: mm.Workload) -> None:
    # every workload of two or more ranks through the threaded loop (ranks drawn ahead, counted
    # in two threads), whatever its size
    with mock.patch.object(routing, "_THREADED_CELLS", 0):
        assert (counts_matrix(w) == _reference(w)).all()


# the one-thread loop, and the threaded one with every size admitted: the same draws either way
THREADED = [pytest.param(1 << 62, id="one-thread"), pytest.param(0, id="threaded")]


@pytest.mark.parametrize("cells", THREADED)
@pytest.mark.parametrize("routing_mode", ["zipf", "random"])
def test_forced_fallbacks_draw_the_same(routing_mode: str, cells: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # every rank decided the exact way (an infinite tie gap), then every rank's weights refused
    # (a weight bound below 1): both from the saved generator states, in rank order
    monkeypatch.setattr(routing, "_THREADED_CELLS", cells)
    w = mm.Workload(tokens=300, topk=4, world=4, local_experts=6, routing=routing_mode, seed=11)
    want = _reference(w)
    monkeypatch.setattr(routing, "_TIE_GAP", float("inf"))
    assert (counts_matrix(w) == want).all()
    monkeypatch.setattr(routing, "_TIE_GAP", 1e-9)
    monkeypatch.setattr(routing, "_MAX_WEIGHT", 0.5)
    assert (counts_matrix(w) == want).all()


class _ZeroOnCall:
    """A generator whose ``random`` draws of call ``at`` are 0 in their first column (as if the
    bit generator had drawn them; every token would then pick expert 0, which the reference does
    not); everything else is the wrapped generator's."""

    def __init__(self, rng: np.random.Generator, at: int) -> None:
        self._rng, self._at, self._calls = rng, at, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rng, name)

    def random(self, size: Any = None) -> Any:
        u = self._rng.random(size=size)
        if self._calls == self._at:
            u[:, 0] = 0.0
        self._calls += 1
        return u


@pytest.mark.parametrize("cells", THREADED)
@pytest.mark.parametrize("at", [0, 2])
def test_a_rejected_draw_is_redrawn_from_the_saved_state(at: int, cells: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # the injected 0 never reaches the counts: that rank is redrawn with Generator.gumbel from the
    # state before its draw, and the ranks after it continue from the state gumbel leaves (the
    # threaded loop has drawn them ahead from the state the rejected draw left, and draws them
    # again from there: see the next test for a fallback that leaves another state)
    monkeypatch.setattr(routing, "_THREADED_CELLS", cells)
    w = mm.Workload(tokens=90, topk=3, world=4, local_experts=5, routing="zipf", seed=4, zipf_skew=2.0)
    want = _reference(w)
    real = np.random.default_rng
    monkeypatch.setattr(routing.np.random, "default_rng", lambda seed: _ZeroOnCall(real(seed), at))
    assert (counts_matrix(w) == want).all()


def test_a_tie_at_the_boundary_is_left_to_the_exact_way() -> None:
    # the weights go in negated (routing._key_weight); -log(1 - 0.5) twice with equal weights:
    # the 2nd and 3rd smallest keys tie for topk = 2
    u = np.array([[0.5, 0.5, 0.1]])
    ones = -np.ones(3)
    assert routing._top_k_counts(u.copy(), ones, 2) is None
    # no tie at topk = 1: -log(0.9) = 0.105 < 0.693
    assert _list(routing._top_k_counts(u.copy(), ones, 1)) == [0, 0, 1]
    # weights that bring two keys within a relative 1e-12 of each other (below the 1e-9 gap)
    u = np.array([[0.3, 0.6, 0.9]])
    e = -np.log1p(-u[0])
    near = -np.array([e[1] / e[0] * (1 + 1e-12), 1.0, 1e3])
    assert routing._top_k_counts(u.copy(), near, 1) is None
    far = -np.array([e[1] / e[0] * (1 + 1e-6), 1.0, 1e3])  # expert 1 the smallest, by a relative 1e-6
    assert _list(routing._top_k_counts(u.copy(), far, 1)) == [0, 1, 0]
    assert routing._top_k_counts(np.array([[0.3, 0.6]]), -np.ones(2), 2) is None  # topk = experts


def test_a_draw_of_zero_is_left_to_the_exact_way() -> None:
    # u = 0 makes the product -log(1 - 0) * weight = 0 (as -0.0), the smallest of its row; the
    # boundaries themselves are far from ties (topk = 1: 0.105 vs 0.223 in row 0)
    u = np.array([[0.5, 0.2, 0.1], [0.0, 0.5, 0.9]])
    assert routing._top_k_counts(u.copy(), -np.ones(3), 1) is None
    u[1, 0] = 2.0**-53  # the smallest draw above 0: -log(1 - 2^-53) = 1.1e-16 > 0
    assert _list(routing._top_k_counts(u.copy(), -np.ones(3), 1)) == [1, 0, 1]


def test_the_counts_are_summed_in_blocks_of_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    # 16-bit sums over at most _COUNT_ROWS rows at a time; blocks of 3 rows over 10 tokens
    u = np.random.default_rng(8).random((10, 7))
    w = -np.arange(1.0, 8.0)
    want = _list(routing._top_k_counts(u.copy(), w, 3))
    assert sum(want) == 30
    monkeypatch.setattr(routing, "_COUNT_ROWS", 3)
    assert _list(routing._top_k_counts(u.copy(), w, 3)) == want


def test_weights_out_of_range_are_refused() -> None:
    assert routing._key_weight(np.array([0.0, -400.0])) is None  # exp(400) > 1e150
    assert routing._key_weight(np.array([0.0, -np.inf])) is None
    assert _list(routing._key_weight(np.array([-1.0, -3.0]))) == [-1.0, -float(np.exp(2.0))]


def _list(a: np.ndarray | None) -> list[Any]:
    assert a is not None
    return list(a.tolist())


@pytest.mark.parametrize("at", [0, 1, 3])
def test_ranks_drawn_ahead_of_a_fallback_are_drawn_again_after_it(at: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # gumbel redraws a value that would be 0 (one in 2**53), so a fallback may leave the generator
    # further on than the vectorised draw did; here the exact way is made to use one value more
    # (an extra draw after it), at rank ``at`` (a rejected draw there). The one-thread loop is the
    # definition: every rank after ``at`` draws from the state the fallback left. The threaded
    # loop, which drew those ranks ahead from the state before, must draw them again
    w = mm.Workload(tokens=90, topk=3, world=5, local_experts=5, routing="zipf", seed=4, zipf_skew=2.0)
    real_exact = routing._exact_top_k_counts

    def exact_one_more(rng: Any, logp: np.ndarray, tokens: int, topk: int) -> np.ndarray:
        got = real_exact(rng, logp, tokens, topk)
        rng.random()
        return got

    monkeypatch.setattr(routing, "_exact_top_k_counts", exact_one_more)
    real = np.random.default_rng
    monkeypatch.setattr(routing.np.random, "default_rng", lambda seed: _ZeroOnCall(real(seed), at))
    monkeypatch.setattr(routing, "_THREADED_CELLS", 1 << 62)
    want = counts_matrix(w)
    monkeypatch.setattr(routing, "_THREADED_CELLS", 0)
    got = counts_matrix(w)
    assert (got == want).all()
    # (and the extra value did move every later rank: without the redraw they would differ)
    assert (want[at + 1 :] != _reference(w)[at + 1 :]).any() or at == w.world - 1


def test_one_core_draws_in_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    # on a machine of one core the threads would only take turns: the one-thread loop draws
    # (the threaded one, if called, fails here), with the same counts
    w = mm.Workload(tokens=200, topk=3, world=3, local_experts=4, routing="zipf", seed=7)
    want = _reference(w)

    def refused(*_a: Any) -> None:
        raise AssertionError("threaded sampling on one core")

    monkeypatch.setattr(routing, "_THREADED_CELLS", 0)
    monkeypatch.setattr(routing, "_sampled_threaded", refused)
    monkeypatch.setattr(routing.os, "cpu_count", lambda: 1)
    assert (counts_matrix(w) == want).all()
    monkeypatch.setattr(routing.os, "cpu_count", lambda: 2)
    with pytest.raises(AssertionError, match="one core"):
        counts_matrix(w)
