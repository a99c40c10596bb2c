"""Lower bounds of one rank's time: the physical bounds of the shape (a ruler) and the floors of
this event graph (what this tiling and orchestration can at best reach), and their judgement.

**Physical bounds** (:func:`physical_bounds`) depend on the shape, the topology and the
constants only, never on the tiling or the orchestration (waves, look-ahead, binding, links,
granularity, core groups, policy), so no variant of one shape moves them:

* compute = MACs / (cube cores x cube rate);
* bandwidth = bytes the algorithm must move over each aggregate channel (HBM: every active
  expert's weights once plus the routed rows once; cross-rank in / out: the remote rows) divided
  by min(per-core rate x cores, aggregate);
* dependency chain = one token's path through the stages, each stage's smallest share taken
  with the whole die on it (:func:`dependency_chain_us`).

A time below any of them means a cost formula missed something (:func:`judge_bounds` marks it
``violated`` and ``simulate`` raises ``BoundViolation``).

**Graph floors** (:func:`graph_floors`) are lower bounds of *this* graph's schedules: its longest
data-dependency path and, per execution role, the work that must run on the role's members
before the last combine. They move with the tiling and the orchestration; the excess of the time
over them is what scheduling alone could still win, the excess of the floors over the physical
bounds is what the tiling and orchestration cost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain
from typing import TypeVar

import numpy as np

from moeopt.core import fastloop
from moeopt.core.state import picked
from moeopt.megamoe.analysis.table import EPS, packed
from moeopt.megamoe.build import RankGraph
from moeopt.megamoe.config.implementation import CUBE_M_ALIGN, ROW_PAD_BYTES, SCALE_BYTES
from moeopt.megamoe.results import BoundKind, Bounds, Channel, FloorKind, Floors, GraphFloors, PhysicalBounds
from moeopt.megamoe.scenario import Config

_K = TypeVar("_K", bound=str)


def physical_bounds(rg: RankGraph, cfg: Config) -> PhysicalBounds:
    """The compute, bandwidth and dependency bounds of the rank (see the module docstring): the
    shape's MACs and algorithmic bytes (``rg`` counts them from the routing) over the rates of
    every cube core of the die."""
    n_aic = cfg.aic_num
    compute = rg.macs / (n_aic * _cube_rate(cfg))
    per_core = cfg.c("gm_l1_bytes_per_us") * n_aic
    bw: dict[Channel, float] = {
        "hbm": rg.algo_hbm_bytes / min(per_core, cfg.c("hbm_bytes_per_us")),
        "remote_in": rg.algo_remote_in_bytes / cfg.c("remote_in_bytes_per_us"),
        "remote_out": rg.algo_remote_out_bytes / cfg.c("remote_out_bytes_per_us"),
    }
    channel = max(bw, key=lambda k: bw[k])
    return {
        "compute_us": compute,
        "bandwidth_us": bw[channel],
        "bandwidth_channel": channel,
        "bandwidth_by_channel_us": bw,
        "dependency_us": dependency_chain_us(cfg),
    }


def _cube_rate(cfg: Config) -> float:
    return cfg.c("cube_mac_per_us_int8") if cfg.quant == "w8a8" else cfg.c("cube_mac_per_us_fp16")


def dependency_chain_us(cfg: Config) -> float:
    """One token's chain through the stages, each stage's smallest share with the whole die on
    it; a lower bound of every graph the model builds for this shape, whatever its tiling or
    orchestration.

    * dispatch: the token's row (``h + 32`` B int8 with scale and pad, ``2h`` bf16) arrives at
      the fastest per-AIV rate (remote read, local, URMA GET with URMA): ``arrive = row / max(rates)``;
    * GMM1: every compute of the row needs the row, and a row costs a 16-row fractal over all
      ``hidden_dim`` columns and ``K = h``, spread over all ``n`` cube cores:
      ``c1 = 16 x hidden_dim x h / (n x cube rate)``; every B panel of the row's expert is
      loaded once at full price (its first touch) before the row's last GMM1 output exists:
      ``L1 = B1 / R`` with ``B1 = h x hidden_dim x bpe + hidden_dim x scale`` and
      ``R = min(n x gm_l1_bytes_per_us, hbm_bytes_per_us)``; so GMM1 ends at least at
      ``max(arrive + c1, L1)``;
    * activation: the last activation of the row starts after that, and every activation event
      costs at least ``act_startup_us``;
    * GMM2: its weights (``B2 = (hidden_dim / 2) x h x bpe + h x scale``) are loaded once, over
      the same die, after or with GMM1's: the row's GMM2 ends at least at ``(B1 + B2) / R``.
      Its compute after the row's last activation can be as small as one K chunk of one
      fractal, so it is not counted;
    * combine: the write-back after the row's GMM2 is not counted (its smallest share is a
      per-event call cost that the URMA and peer-write paths do not share).

    ``dependency = max(max(arrive + c1, L1) + act_startup_us, (B1 + B2) / R)``. Sync latencies
    (flags, barriers) and the front reorder are left out: they belong to one orchestration.
    """
    h, hd = cfg.h, cfg.hidden_dim
    n = cfg.aic_num
    w8a8 = cfg.quant == "w8a8"
    bpe = 1 if w8a8 else 2
    scale = SCALE_BYTES if w8a8 else 0
    row = h + ROW_PAD_BYTES if w8a8 else 2 * h
    rates = [cfg.c("aiv_remote_read_bytes_per_us"), cfg.c("aiv_local_bytes_per_us")]
    if cfg.topo_urma:
        rates.append(cfg.c("urma_get_bytes_per_us"))
    arrive = row / max(rates)
    c1 = CUBE_M_ALIGN * hd * h / (n * _cube_rate(cfg))
    r = min(n * cfg.c("gm_l1_bytes_per_us"), cfg.c("hbm_bytes_per_us"))
    b1 = h * hd * bpe + hd * scale
    b2 = (hd // 2) * h * bpe + h * scale
    gmm1_end = max(arrive + c1, b1 / r)
    return max(gmm1_end + cfg.c("act_startup_us"), (b1 + b2) / r)


def _binding(vals: Mapping[_K, float], time_us: float) -> tuple[_K, float, float]:
    """The largest of ``vals`` (first on ties), its value, and how far ``time_us`` is above it (%)."""
    binding = max(vals, key=lambda k: vals[k])
    lb = vals[binding]
    return binding, lb, (time_us / lb - 1.0) * 100.0 if lb > 0 else 0.0


def judge_bounds(b: PhysicalBounds, time_us: float) -> Bounds:
    """``b`` with the binding bound, how far ``time_us`` is above it, and whether it is below."""
    vals: dict[BoundKind, float] = {
        "compute": b["compute_us"],
        "bandwidth": b["bandwidth_us"],
        "dependency": b["dependency_us"],
    }
    binding, lb, excess = _binding(vals, time_us)
    return {
        **b,
        "binding": binding,
        "lower_bound_us": lb,
        "excess_pct": excess,
        "violated": time_us < lb * (1 - 1e-9) - EPS,
    }


# --------------------------------------------------------------------------- this graph's floors
def graph_floors(rg: RankGraph, tails: Sequence[float] | None = None) -> GraphFloors:
    """The floors of this graph (see the module docstring): its longest path and, per execution
    role, the work its members must do before the last combine (``tails``: each event's longest
    data path with its duration, if already worked out, see :func:`data_paths`)."""
    cg = rg.graph.compiled()
    ends = _end_positions(rg)
    if fastloop.walks_compiled(cg.n):
        needed = fastloop.ancestors_or_self(cg, ends)
    else:
        needed = _ancestors_or_self(cg.succs, ends, cg.n, cg.topo)
    role_of = [name.rsplit(".", 1)[-1] for name in cg.res_names]
    members: dict[str, int] = {}
    for role in role_of:
        members[role] = members.get(role, 0) + 1
    pool_role = [role_of[m[0]] if m else "" for m in cg.pool_members]
    pinned, by_role = _needed_work(cg.dur, cg.fixed, cg.placeholders, needed, role_of, pool_role)
    pipe: dict[str, float] = {}
    for role, work in by_role.items():
        most = max((w for r, w in pinned.items() if role_of[r] == role), default=0.0)
        pipe[role] = max(most, work / members[role])
    busiest = max(sorted(pipe), key=lambda k: pipe[k]) if pipe else ""
    return {
        # (the same ends: their positions looked up once for the walk and the longest path)
        "longest_path_us": _longest_to(ends, _tails(rg) if tails is None else tails),
        "pipe_us": dict(sorted(pipe.items())),
        "busiest_pipe": busiest,
        "busiest_pipe_us": pipe.get(busiest, 0.0),
    }


def _needed_work(
    dur: Sequence[float],
    fixed: Sequence[tuple[int, ...]],
    places: Sequence[tuple[int, ...]],
    needed: list[bool],
    role_of: list[str],
    pool_role: list[str],
) -> tuple[dict[int, float], dict[str, float]]:
    """The work of the ``needed`` events per fixed resource they hold and per role (a fixed
    resource's role, or a placeholder's pool's): ``(pinned, by_role)``, each key present when
    some needed event adds to it.

    Each sum is the running sum of its terms in graph order (within one event its fixed
    resources first, then its placeholders), as one loop over the events adding to each key
    made it: ``np.bincount`` with weights adds its terms to each bin one by one in input order,
    in float64, from 0.0, so a stable sort of the terms by event gives every sum to the bit.
    The terms are read flat (``chain``) rather than event by event in Python, for every event
    at once (each column converted once, by :func:`packed`), and the needed ones picked on the
    arrays: picking them first (``compress``, then a conversion of each picked column) cost
    more instructions (callgrind, scenario_basic: 12.3M -> 9.0M)."""
    n = len(dur)
    keep = np.frombuffer(bytes(needed), bool) if n else np.zeros(0, bool)  # (True is byte 1)
    n_fixed = packed("n", map(len, fixed), n)
    res = packed("n", chain.from_iterable(fixed), int(n_fixed.sum()))
    d_all = packed("d", dur, n)
    fixed_of = np.repeat(np.arange(n), n_fixed)  # per fixed term, its event
    on = keep[fixed_of]
    res, fixed_of = res[on], fixed_of[on]
    d_res = d_all[fixed_of]
    flat_places = list(chain.from_iterable(places))
    if flat_places:
        n_places = packed("n", map(len, places), n)
        pools = packed("n", flat_places, len(flat_places))
        place_of = np.repeat(np.arange(n), n_places)
        on = keep[place_of]
        pools, place_of = pools[on], place_of[on]
    else:
        pools = place_of = np.zeros(0, np.intp)
    # per resource: the events holding it, in graph order
    n_res = len(role_of)
    pinned_w = np.bincount(res, weights=d_res, minlength=n_res).tolist()
    held = np.flatnonzero(np.bincount(res, minlength=n_res)).tolist()
    pinned = {r: pinned_w[r] for r in held}
    # per role: every term of its resources and pools, sorted by event (stable: fixed first)
    names = sorted(set(role_of) | set(pool_role))
    no = {name: j for j, name in enumerate(names)}
    role_no = np.array([no[x] for x in role_of] + [no[x] for x in pool_role], np.intp)
    terms = np.concatenate((res, pools + n_res))  # pools numbered after the resources
    by_event = np.concatenate((fixed_of, place_of))
    order = np.argsort(by_event, kind="stable")
    role_seq = role_no[terms[order]]
    w = np.concatenate((d_res, d_all[place_of]))[order]
    work = np.bincount(role_seq, weights=w, minlength=len(names)).tolist()
    used = np.flatnonzero(np.bincount(role_seq, minlength=len(names))).tolist()
    return pinned, {names[j]: work[j] for j in used}


def _ancestors_or_self(
    succs: Sequence[tuple[tuple[int, float], ...]], ends: list[int], n: int, topo: Sequence[int]
) -> list[bool]:
    """Whether each event is one of ``ends`` or an ancestor of one: decided in reverse
    topological order (every successor of an event is decided before it), an event is needed
    when one of its successors is. The scan of an event's successors stops at the first needed
    one: in these graphs nearly every event has one, often its first, so most events cost one
    look instead of a mark per predecessor edge (as marking from the ends back along ``preds``
    cost); the answer is the same set."""
    needed = [False] * n
    for i in ends:
        needed[i] = True
    for i in reversed(topo):
        if needed[i]:
            continue
        for s, _lam in succs[i]:
            if needed[s]:
                needed[i] = True
                break
    return needed


def longest_path_us(rg: RankGraph, tails: Sequence[float] | None = None) -> float:
    """Longest path over data dependencies only, to the last combine: program-order chains on a
    pinned resource are resource constraints, so they are left out (else the floor would absorb
    the queueing); the time is measured to the last combine, so the chain ends there too.
    ``tails``: :func:`_tails` of ``rg``, if already worked out (by :func:`data_paths`)."""
    return _longest_to(_end_positions(rg), _tails(rg) if tails is None else tails)


def _end_positions(rg: RankGraph) -> list[int]:
    """The positions (graph order) of the events the floors measure to: the combines, or every
    event but the tail in a graph without combines (by :func:`~moeopt.core.state.picked`: a
    ``map`` of the read-only index's ``__getitem__`` calls a slot wrapper per name)."""
    cg = rg.graph.compiled()
    names = rg.combine_events or [n for n in cg.names if n != rg.tail_event]
    return list(picked(cg.index, names))


def _longest_to(ends: list[int], tails: Sequence[float]) -> float:
    """The largest of ``tails`` at ``ends`` (0.0 for none): the same ``max`` over the same
    values in the same order as a generator over the ends gives."""
    return max(map(tails.__getitem__, ends), default=0.0)


def _tails(rg: RankGraph) -> list[float]:
    """Per event, the longest data path from a source to its end (its duration included)."""
    cg = rg.graph.compiled()
    # each event's head + duration, kept instead of its head: ``heads[p] + dur[p] + lam`` is
    # ``(heads[p] + dur[p]) + lam``, so every sum is the same float as when added per edge
    tails = [0.0] * cg.n
    dur = cg.dur
    preds = rg.data_preds()
    for i in cg.topo:
        ps = preds[i]
        if len(ps) == 1:  # the common case, without the loop (the same comparison with 0.0)
            ((p, lam),) = ps
            v = tails[p] + lam
            tails[i] = (v if v > 0.0 else 0.0) + dur[i]
            continue
        best = 0.0
        for p, lam in ps:
            v = tails[p] + lam
            if v > best:
                best = v
        tails[i] = best + dur[i]
    return tails


def data_paths(rg: RankGraph, end: Sequence[float]) -> tuple[list[float], list[float]]:
    """``(tails, ready)`` per event: :func:`_tails` (the longest data path to its end, what the
    floors read) and when its data dependencies were met given the events' ``end`` times
    (:func:`moeopt.megamoe.analysis.idle._data_ready`, what the idle ledger reads), in one walk.

    Both read each event's data predecessors and their λ; walked once, in topological order
    (which the ready times, reading only ``end``, do not depend on), each predecessor tuple is
    read and unpacked once instead of twice (callgrind, scenario_basic: 18.9M instructions for
    the two walks, 12.5M for this one). Each value is made by the same float operations, in the
    same order, as in the walk it replaces.

    In a process that has loaded the compiled loop, a graph it would take by size is walked
    by the compiled kernel instead (:func:`moeopt.core.fastloop.paths_without`, along the
    successors of every edge but the chain edges, on the graph's arrays: no per-event tuples):
    the same values (a maximum of the same sums). measured (stop 48, DeepSeek-V3-like zipf
    rank 16, 58k events): ~240 ms -> ~45 ms, most of it looking the chain edges' names up."""
    cg = rg.graph.compiled()
    n = cg.n
    if fastloop.walks_compiled(n):
        # the same walk by the compiled kernel, along the successors of every edge but the
        # chain edges (the graph's arrays, without the per-event tuples of data_preds)
        return fastloop.paths_without(cg, *rg.chain_positions(), end)
    tails = [0.0] * n
    ready = [0.0] * n
    dur = cg.dur
    preds = rg.data_preds()
    for i in cg.topo:
        ps = preds[i]
        if len(ps) == 1:  # the common case, without the loop (the same comparisons with 0.0)
            ((p, lam),) = ps
            v = tails[p] + lam
            tails[i] = (v if v > 0.0 else 0.0) + dur[i]
            v = end[p] + lam
            if v > 0.0:
                ready[i] = v
            continue
        best = 0.0
        met = 0.0
        for p, lam in ps:
            v = tails[p] + lam
            if v > best:
                best = v
            v = end[p] + lam
            if v > met:
                met = v
        tails[i] = best + dur[i]
        ready[i] = met
    return tails, ready


def judge_floors(f: GraphFloors, time_us: float) -> Floors:
    """``f`` with the binding floor and how far ``time_us`` is above it."""
    vals: dict[FloorKind, float] = {"longest_path": f["longest_path_us"], "pipe": f["busiest_pipe_us"]}
    binding, lb, excess = _binding(vals, time_us)
    return {**f, "binding": binding, "lower_bound_us": lb, "excess_pct": excess}
