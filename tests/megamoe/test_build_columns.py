"""The GMM pipeline's column forms are pinned to the tile-by-tile code they replaced:

* whole tiles emitted column by column (:func:`~moeopt.megamoe.build.gmm.emit_whole_tiles`, one
  :meth:`~moeopt.megamoe.build.emitter.Emitter.emit_run`) against the chunk loop
  (:func:`~moeopt.megamoe.build.gmm.emit_tiles`): the same graph, event for event and field for
  field, on the golden configurations;
* :func:`~moeopt.megamoe.build.gmm.l1_residency` on arrays against its loop, the HBM stretch
  against its ``+=`` loop, ``emit_run`` against ``emit`` per event, and
  the grouping of tiles by wave / expert against the append loop, on random inputs.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import moeopt.megamoe.build.gmm as gmm
from moeopt.core.events import Event
from moeopt.megamoe.build.emitter import Emitter
from moeopt.megamoe.build.handoff import GmmTiles
from moeopt.megamoe.planning import Tile
from moeopt.megamoe.simulate import build_graphs
from moeopt.testing.rankgraph import rank_graph_rows
from moeopt.trust.golden import default_configs


def l1_residency_by_tile(ctx: Any, stage: str, order: Any, cores: Any) -> list[gmm.CostKey]:
    """:func:`~moeopt.megamoe.build.gmm.l1_residency` tile by tile: the loop it replaced, the
    reference the column form is compared with."""
    k_dim = gmm.gemm_k(ctx, stage)
    bpe = ctx.bpe
    scale_bytes = 8 if ctx.cfg.quant == "w8a8" else 0
    l1_bytes = ctx.c("l1_bytes")
    first_a: set[tuple[int, int]] = set()
    first_b: set[tuple[int, int]] = set()
    last_on_core: dict[int, tuple[int, int, int]] = {}  # core -> (expert, mb, nb) of its previous tile
    keys: list[gmm.CostKey] = []
    for (_w, e, t), k in zip(order, cores, strict=True):
        m0, m1, n0, n1, mb, nb = t
        t_rows, t_cols = m1 - m0, n1 - n0
        a_res = b_res = False
        if k >= 0:
            prev = last_on_core.get(k)
            if prev is not None:
                pe, pmb, pnb = prev
                fits = t_rows * k_dim * bpe + (t_cols * k_dim * bpe + t_cols * scale_bytes) <= l1_bytes
                a_res = fits and pe == e and pmb == mb
                b_res = fits and pe == e and pnb == nb
            last_on_core[k] = (e, mb, nb)
        ka, kb = (e, mb), (e, nb)
        keys.append((t_rows, t_cols, a_res, b_res, ka in first_a, kb in first_b))
        first_a.add(ka)
        first_b.add(kb)
    return keys




SMALL = [c for c in default_configs() if c.scenario().workload.tokens <= 128]


@pytest.mark.parametrize("cfg", SMALL, ids=lambda c: c.name)
def test_whole_tiles_by_column_build_the_chunk_loops_graph(cfg, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    s = cfg.scenario()
    fast = {rep: rank_graph_rows(rg) for rep, (rg, _r) in build_graphs(s).items()}
    monkeypatch.setattr(gmm, "WHOLE_TILES_BY_COLUMN", False)
    slow = {rep: rank_graph_rows(rg) for rep, (rg, _r) in build_graphs(s).items()}
    assert fast == slow


@st.composite
def tile_orders(draw: st.DrawFn) -> tuple[list[gmm.Item], list[int]]:
    n = draw(st.integers(1, 40))
    order: list[gmm.Item] = []
    for _ in range(n):
        e, mb, nb = draw(st.integers(0, 3)), draw(st.integers(0, 3)), draw(st.integers(0, 3))
        rows, cols = draw(st.sampled_from([16, 100, 128])), draw(st.sampled_from([64, 256, 2048]))
        order.append((draw(st.integers(0, 2)), e, Tile(mb * 128, mb * 128 + rows, nb * 256, nb * 256 + cols, mb, nb)))
    cores = draw(st.lists(st.integers(-1, 3), min_size=n, max_size=n))
    return order, cores


@settings(max_examples=150, deadline=None)
@given(tile_orders(), st.sampled_from(["w8a8", "bf16"]), st.sampled_from([1 << 19, 300_000.0, 2_000_000]))
def test_l1_residency_on_arrays_is_the_loop(got: tuple[list[gmm.Item], list[int]], quant: str, l1: float) -> None:
    order, cores = got
    # k 7168 x bpe makes A / B fit or not in L1 depending on the drawn extents and l1_bytes
    ctx: Any = SimpleNamespace(cfg=SimpleNamespace(h=7168, hidden_dim=4096, quant=quant), bpe=1 if quant == "w8a8" else 2)
    ctx.c = {"l1_bytes": l1}.__getitem__
    for stage in ("gmm1", "gmm2"):
        assert gmm.l1_residency(ctx, stage, order, cores) == l1_residency_by_tile(ctx, stage, order, cores)


def _stretch_by_tile(costs: gmm.TileCosts, keys: list[gmm.CostKey], cores: list[int]) -> list[float]:
    """``TileCosts.share_hbm`` as written before it summed on arrays."""
    hbm = dur = 0.0
    for key in keys:
        got = costs._raw(key)
        hbm += got[5]
        dur += got[0]
    rho = hbm / dur if dur > 0 else 0.0
    return [max(1.0, min(p, len(keys)) * rho / costs._hbm) for p in cores]


def _cost_context(hbm_rate: float) -> tuple[Any, Emitter]:
    """A GMM1 tile-cost context (DeepSeek-V3-like h and hidden_dim, w8a8) and its emitter, with
    an HBM bandwidth of ``hbm_rate`` bytes/µs (0: no bandwidth contention)."""
    consts = {
        "l1_bytes": 1 << 19,
        "gm_l1_bytes_per_us": 64_000.0,
        "b_reuse_load_factor": 0.53,
        "gm_unaligned_load_efficiency": 0.8,
        "hbm_bytes_per_us": hbm_rate,
        "cube_mac_per_us_int8": 1.5e7,
    }
    contention = hbm_rate > 0
    cfg = SimpleNamespace(h=7168, hidden_dim=4096, quant="w8a8", tile_k=512, l1_stages=2, bandwidth_contention=contention)
    ctx: Any = SimpleNamespace(cfg=cfg, bpe=1, c=consts.__getitem__, cube_rate=lambda: 1.5e7)
    em = Emitter(0, contention, 1000.0)
    if contention:
        em.bandwidth("hbm", hbm_rate)
    return ctx, em


@settings(max_examples=60, deadline=None)
@given(tile_orders(), st.sampled_from([1000.0, 1.6e6, 3e7]))
def test_share_hbm_is_the_loop(got: tuple[list[gmm.Item], list[int]], hbm_rate: float) -> None:
    order, cores = got
    ctx, em = _cost_context(hbm_rate)
    costs = gmm.TileCosts(ctx, em, "gmm1", 1)
    keys = l1_residency_by_tile(ctx, "gmm1", order, cores)
    n_cores = [1 + abs(k) for k in cores]
    costs.share_hbm(keys, n_cores)
    assert costs.stretch == _stretch_by_tile(costs, keys, n_cores)
    assert all(type(x) is float for x in costs.stretch)


@settings(max_examples=60, deadline=None)
@given(tile_orders(), st.sampled_from([0.0, 1000.0, 1.6e6, 3e7]))
def test_coded_share_hbm_and_cost_classes_are_the_runs(
    got: tuple[list[gmm.Item], list[int]], hbm_rate: float
) -> None:
    """The coded paths (the keys' numbering from ``l1_residency_coded``): ``share_hbm`` gives
    the loop's stretches, the codes number the keys one to one, and ``_cost_classes`` numbers
    the (key, stretch) pairs as the runs path does (first appearance), with the same costs.
    ``hbm_rate`` 0: no contention (every stretch 1.0, one stretch number)."""
    order, cores = got
    contention = hbm_rate > 0
    ctx, em = _cost_context(hbm_rate)
    codes = gmm.l1_residency_coded(ctx, "gmm1", order, cores)
    keys = l1_residency_by_tile(ctx, "gmm1", order, cores)
    assert codes.keys == keys
    assert [codes.distinct[i] for i in codes.no.tolist()] == keys
    assert len(set(codes.distinct)) == len(codes.distinct)
    n_cores = [1 + abs(k) for k in cores]
    coded = gmm.TileCosts(ctx, em, "gmm1", 1)
    coded.share_hbm(codes.keys, np.array(n_cores), codes)
    plain = gmm.TileCosts(ctx, em, "gmm1", 1)
    plain.share_hbm(keys, n_cores)
    assert coded.stretch == plain.stretch
    if contention:
        assert coded.stretch == _stretch_by_tile(coded, keys, n_cores)
    assert all(type(x) is float for x in coded.stretch)
    assert coded.stretch_no is not None
    # equal stretch numbers exactly where the stretches are equal
    s_no = coded.stretch_no.tolist()
    assert all((s_no[i] == s_no[j]) == (coded.stretch[i] == coded.stretch[j]) for i in range(len(keys)) for j in range(i))
    cls, tc = gmm._cost_classes(codes.keys, coded, codes)
    ref_cls, ref_tc = gmm._cost_classes(keys, plain, None)
    assert cls.tolist() == ref_cls.tolist()
    assert tc == ref_tc


@settings(max_examples=100, deadline=None)
@given(tile_orders())
def test_tiles_by_wave_and_expert_are_the_append_loops(got: tuple[list[gmm.Item], list[int]]) -> None:
    order, _cores = got
    events = [f"t{i}" for i in range(len(order))]
    tiles = GmmTiles(tuple(order), tuple(events), ())
    by_wave: list[list[str]] = [[] for _ in range(3)]
    by_expert: dict[int, list[str]] = {}
    for (w, e, _t), ev in zip(order, events):
        by_wave[w].append(ev)
        by_expert.setdefault(e, []).append(ev)
    assert tiles.events_by_wave(3) == by_wave
    assert tiles.events_by_expert() == by_expert
    assert list(tiles.events_by_expert()) == list(by_expert)  # experts in order of first appearance


@st.composite
def runs(draw: st.DrawFn) -> tuple[list[Any], bool, bool]:
    n = draw(st.integers(1, 12))
    rows = []
    for k in range(n):
        res = tuple(draw(st.lists(st.sampled_from(["c0.AIC", "c1.AIC", "c0.AIV0"]), min_size=1, max_size=2, unique=True)))
        earlier = [f"pre{j}" for j in range(3)] + [f"x{j}" for j in range(k)]
        deps = dict.fromkeys(draw(st.lists(st.sampled_from(earlier), max_size=2, unique=True)), 0.5)
        sync = draw(st.sampled_from([None, {}, {"pre2": 1.0}, {"pre0": 0.25}]))
        colocate = draw(st.sampled_from([None, *earlier]))
        rows.append((f"x{k}", res, deps, float(k), sync, colocate))
    return rows, draw(st.booleans()), draw(st.booleans())


def _emitter_after_pre(chain: bool) -> Emitter:
    em = Emitter(0, False, 1000.0)
    for j, r in enumerate(["c0.AIC", "c1.AIC", "c0.AIV0"]):
        em.emit(f"pre{j}", "pre", (r,), {}, duration_us=1.0, chain_on=(r,) if chain else None)
    return em


@settings(max_examples=150, deadline=None)
@given(runs())
def test_emit_run_is_emit_per_event(drawn: tuple[list[Any], bool, bool]) -> None:
    rows, chain, with_sync = drawn
    one, many = _emitter_after_pre(True), _emitter_after_pre(True)
    acq = {"s": 1}
    for name, res, deps, dur, sync, colocate in rows:
        one.emit(name, "st", res, dict(deps), acq, None, dur, {"k": dur}, colocate, res if chain else None,
                 sync if with_sync else None)
    many.emit_run(
        "st",
        [r[0] for r in rows],
        [r[1] for r in rows],
        [dict(r[2]) for r in rows],
        [acq] * len(rows),
        [None] * len(rows),  # type: ignore[list-item]
        [r[3] for r in rows],
        [{"k": r[3]} for r in rows],
        chain,
        [r[4] for r in rows] if with_sync else None,
        colocate=[r[5] for r in rows],
    )

    def state(em: Emitter) -> Any:
        evs = [(e.name, e.resources, tuple(e.deps.items()), dict(e.acquires), e.duration_us, dict(e.labels),
                e.colocate_with) for e in em._events.values()]
        return evs, sorted(em.chain_edges), em._last, em._by_stage

    assert state(one) == state(many)


def test_emit_run_refuses_a_name_twice() -> None:
    em = _emitter_after_pre(False)
    with pytest.raises(AssertionError, match="twice"):
        em.emit_run("st", ["a", "a"], [(), ()], [{}, {}], [None, None], [None, None], [0.0, 0.0], [{}, {}], False)  # type: ignore[list-item]
    with pytest.raises(AssertionError, match="pre1"):
        em.emit_run("st", ["pre1"], [()], [{}], [None], [None], [0.0], [{}], False)  # type: ignore[list-item]


def test_trusted_events_are_events_and_subclasses_keep_theirs() -> None:
    ev = Event.trusted("e", ["c0.AIC"], {"a": 0.5}, {"s": 1}, None, None, 1.0, {"stage": "x"})
    assert type(ev) is Event
    assert (ev.name, ev.resources, dict(ev.deps), dict(ev.acquires), dict(ev.labels)) == (
        "e", ("c0.AIC",), {"a": 0.5}, {"s": 1}, {"stage": "x"}
    )

    @dataclasses.dataclass(frozen=True, slots=True, eq=False, init=False)
    class Tagged(Event):
        tag: int = 0

    sub = Tagged.trusted("f", (), None, None, None, None, 2.0, None)
    assert type(sub) is Tagged
    assert (sub.name, sub.duration_us) == ("f", 2.0)
    assert np.isfinite(sub.duration_us)
