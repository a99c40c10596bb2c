"""Routing: from a workload to the counts matrix ``counts[src_rank][global_expert]``.

Global expert ``g`` lives on rank ``g // local_experts`` as its local expert
``g % local_experts``. Every mode yields a ``world x (world * local_experts)`` integer matrix
whose rows each hold exactly ``tokens * topk`` routes; :func:`check_route_conservation` is the
guardrail that says so, and every mode passes through it.
"""

from __future__ import annotations

import json
import os
import sys
from collections import deque
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from moeopt.megamoe.errors import RouteConservationError, ScenarioError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[import-not-found,no-redef,unused-ignore]

if TYPE_CHECKING:
    from moeopt.megamoe.scenario import Workload

MAX_SAMPLED_CELLS = 50_000_000  # tokens x experts per source rank for random / zipf sampling


def counts_matrix(w: Workload) -> np.ndarray:
    """The routing counts matrix of ``w`` (int64, shape world x world*local_experts)."""
    n_exp = w.world * w.local_experts
    if w.routing == "uniform":
        counts = _uniform(w.world, n_exp, w.tokens * w.topk)
    elif w.routing == "cyclic":
        counts = _cyclic(w.world, n_exp, w.tokens, w.topk)
    elif w.routing in ("random", "zipf"):
        counts = _sampled(w, n_exp)
    elif w.routing == "explicit":
        counts = _as_matrix(w.counts or (), "workload.counts")
    elif w.routing == "file":
        counts = load_routing_file(w.file or "", w)
    else:  # pragma: no cover - validated by Workload
        raise ScenarioError(f"workload.routing = {w.routing!r}: unknown")
    check_route_conservation(counts, w, source=_source(w))
    return counts


def _source(w: Workload) -> str:
    return {"explicit": "workload.counts", "file": f"workload.file ({w.file})"}.get(
        w.routing, f"routing {w.routing!r}"
    )


def check_route_conservation(counts: np.ndarray, w: Workload, source: str = "counts") -> None:
    """Guardrail: shape world x world*local_experts, no negative cell, tokens*topk per source rank."""
    n_exp = w.world * w.local_experts
    if counts.ndim != 2 or counts.shape != (w.world, n_exp):
        raise RouteConservationError(
            f"{source}: shape {tuple(counts.shape)}; expected world x world*local_experts = ({w.world}, "
            f"{n_exp})"
        )
    if (counts < 0).any():
        src, g = (int(x) for x in np.argwhere(counts < 0)[0])
        raise RouteConservationError(f"{source}: counts[{src}][{g}] = {int(counts[src, g])} is negative")
    want = w.tokens * w.topk
    sums = counts.sum(axis=1)
    bad = [(s, int(v)) for s, v in enumerate(sums) if v != want]
    if bad:
        s, v = bad[0]
        raise RouteConservationError(
            f"{source}: source rank {s} sends {v} routes; must be tokens x topk = {w.tokens} x {w.topk} = "
            f"{want}" + (f" ({len(bad)} rank(s) wrong)" if len(bad) > 1 else "")
        )


def _uniform(world: int, n_exp: int, routes: int) -> np.ndarray:
    base, rem = divmod(routes, n_exp)
    counts = np.full((world, n_exp), base, dtype=np.int64)
    for s in range(world):
        # spread the remainder so that no expert collects it from every source
        for j in range(rem):
            counts[s, (s * rem + j) % n_exp] += 1
    return counts


def _cyclic(world: int, n_exp: int, tokens: int, topk: int) -> np.ndarray:
    """Route k of global token t -> expert (t*topk + k) mod n_exp (scripts/gen_data.py L175-181).

    The routes of source s are the consecutive integers [s*tokens*topk, (s+1)*tokens*topk)
    taken mod n_exp, so each expert's count is a closed form.
    """
    routes = tokens * topk
    counts = np.zeros((world, n_exp), dtype=np.int64)
    full, rem = divmod(routes, n_exp)
    for s in range(world):
        first = (s * routes) % n_exp
        counts[s, :] = full
        for j in range(rem):
            counts[s, (first + j) % n_exp] += 1
    return counts


def _sampled(w: Workload, n_exp: int) -> np.ndarray:
    if w.tokens * n_exp > MAX_SAMPLED_CELLS:
        raise ScenarioError(
            f"workload: routing {w.routing!r} samples tokens x experts = {w.tokens * n_exp} cells per rank; "
            f"allowed up to {MAX_SAMPLED_CELLS} (use routing 'explicit' or 'file' for larger cases)"
        )
    rng = np.random.default_rng(w.routing_seed)
    if w.routing == "zipf":
        ranks = rng.permutation(n_exp) + 1.0
        logp = -w.skew * np.log(ranks)
    else:
        logp = np.zeros(n_exp)
    weight = _key_weight(logp)
    counts = np.zeros((w.world, n_exp), dtype=np.int64)
    big = w.world > 1 and w.tokens * n_exp >= _THREADED_CELLS
    if weight is not None and big and (os.cpu_count() or 1) > 1:
        _sampled_threaded(rng, logp, weight, w.tokens, w.topk, counts)
        return counts
    for s in range(w.world):
        # Gumbel top-k: topk distinct experts per token, drawn without replacement with weights exp(logp)
        state = rng.bit_generator.state
        u = rng.random(size=(w.tokens, n_exp))
        got = None if weight is None else _top_k_counts(u, weight, w.topk)
        if got is None:  # a near tie or a rejected draw: the same draws, the exact way
            rng.bit_generator.state = state
            got = _exact_top_k_counts(rng, logp, w.tokens, w.topk)
        counts[s] = got
    return counts


_THREADED_CELLS = 1 << 18
"""Tokens x experts per source rank from which the ranks' keys are sorted in two threads
(:func:`_sampled_threaded`; on a machine of more than one core). assumed: below about a
quarter million cells a rank takes a few milliseconds and a thread's start and hand-over would
cost a noticeable part of it; the DeepSeek-V3-like zipf shape (4096 x 256 = 1M cells, 32 ranks)
spends ~0.6 s here in one thread."""

_AHEAD = 3
"""Ranks drawn ahead of the one whose counts are taken next (each holds its draws, 8 bytes a
cell, until its keys are counted). assumed: enough to keep two threads busy while this one draws."""


def _sampled_threaded(
    rng: np.random.Generator,
    logp: np.ndarray,
    neg_weight: np.ndarray,
    tokens: int,
    topk: int,
    counts: np.ndarray,
) -> None:
    """``_sampled``'s loop over the source ranks with the keys of up to :data:`_AHEAD` ranks
    counted in two threads while this thread draws the next (numpy's draws, logs, products and
    sorts of whole arrays run without the interpreter lock). The draws are made in rank order,
    each from the state the one before left, exactly as the one-thread loop makes them; the
    counts are taken in rank order too. A rank that falls back to the exact way (a near tie, a
    rejected draw) is redrawn from its saved state as there, and since the exact draw may use a
    different number of values, every rank drawn after it is dropped and drawn again from the
    state the fallback leaves: the counts are the one-thread loop's, bit for bit."""
    world, n = counts.shape
    flight: deque[tuple[int, Mapping[str, Any], Future[np.ndarray | None]]] = deque()
    with ThreadPoolExecutor(2) as pool:
        drawn = 0  # the next rank to draw
        while flight or drawn < world:
            while drawn < world and len(flight) < _AHEAD:
                state = rng.bit_generator.state
                u = rng.random(size=(tokens, n))
                flight.append((drawn, state, pool.submit(_top_k_counts, u, neg_weight, topk)))
                drawn += 1
            r, state, fut = flight.popleft()
            got = fut.result()
            if got is None:
                for _r, _st, later in flight:
                    later.cancel()  # (one already running finishes on its own draws, unread)
                flight.clear()
                rng.bit_generator.state = state
                got = _exact_top_k_counts(rng, logp, tokens, topk)
                drawn = r + 1
            counts[r] = got


def _exact_top_k_counts(rng: np.random.Generator, logp: np.ndarray, tokens: int, topk: int) -> np.ndarray:
    """The Gumbel top-k counts the plain way: ``argpartition`` of ``logp + Generator.gumbel``."""
    n = logp.shape[0]
    keys = logp[None, :] + rng.gumbel(size=(tokens, n))
    top = np.argpartition(-keys, topk - 1, axis=1)[:, :topk]
    return np.bincount(top.ravel(), minlength=n)


_TIE_GAP = 1e-9
"""Keys of the vectorised draw whose relative gap at the top-k boundary is below this are decided
the exact way (they and the exact keys round by a few ulps, relative, far less than this gap)."""

_MAX_WEIGHT = 1e150
"""assumed: a bound on ``exp(max(logp) - logp)`` that keeps every key ``-log(1 - u) * weight``
a normal float (``-log(1 - u)`` lies in [1.1e-16, 36.8] for ``u`` in [2^-53, 1 - 2^-53]), so that
its rounding stays relative. zipf weights reach ``n_exp ** 10`` (skew <= 10, n_exp <=
MAX_SAMPLED_CELLS), ~1e77, at most."""

_COUNT_ROWS = 65535
"""Rows of 0/1 summed at a time in 16-bit lanes, the most that cannot overflow one."""


def _key_weight(logp: np.ndarray) -> np.ndarray | None:
    """``-exp(max(logp) - logp)`` (each <= -1), or ``None`` when the weights leave the range in
    which the vectorised keys are exact enough (:data:`_MAX_WEIGHT`)."""
    weight = np.exp(logp.max() - logp)
    if not np.isfinite(weight).all() or weight.max() > _MAX_WEIGHT:
        return None
    return -weight


def _top_k_counts(u: np.ndarray, neg_weight: np.ndarray, topk: int) -> np.ndarray | None:
    """How often each expert is among the ``topk`` largest of ``logp + gumbel`` over the rows of
    ``u``, where ``Generator.gumbel`` makes ``-log(-log(1 - u))`` of these draws.

    ``logp_j - log(E_j)`` with ``E = -log(1 - u)`` is largest exactly where ``E_j * weight_j``
    is smallest (``weight = exp(max(logp) - logp)``; log is monotone), so one log of the whole
    array and a product stand in for gumbel's two scalar logs per draw. A threshold per token,
    the topk-th smallest product, finds the set ``argpartition`` finds whenever the next product
    is relatively farther than :data:`_TIE_GAP`: both round by a few ulps, relative. A draw of
    ``u = 0``, which gumbel rejects and redraws, is the one that makes a product of 0 (``log(1)``
    is 0, every other ``1 - u`` is below 1), so it shows as a smallest product <= 0, found
    without another pass over ``u``. ``None`` when ``topk >= n``, a boundary is closer or a
    draw was 0: the caller then redraws from the saved state the exact way. ``u`` is
    overwritten."""
    n = u.shape[1]
    if topk >= n:
        return None
    keys = np.subtract(1.0, u, out=u)
    np.log(keys, out=keys)
    np.multiply(keys, neg_weight, out=keys)  # E * weight = log(1 - u) * -weight
    edge = np.sort(keys, axis=1)  # faster than a partition at two places (a vectorised sort)
    kth, nxt = edge[:, topk - 1], edge[:, topk]
    if not (nxt - kth > _TIE_GAP * nxt).all() or not (edge[:, 0] > 0.0).all():
        return None
    chosen = (keys <= kth[:, None]).view(np.uint8)
    counts = np.zeros(n, dtype=np.int64)
    for i in range(0, chosen.shape[0], _COUNT_ROWS):  # 16-bit sums: ~4x faster than count_nonzero
        counts += chosen[i : i + _COUNT_ROWS].sum(axis=0, dtype=np.uint16)
    return counts


def _as_matrix(rows: Sequence[Sequence[Any]], where: str) -> np.ndarray:
    if not rows or any(isinstance(r, (str, bytes)) or not isinstance(r, Sequence) for r in rows):
        raise ScenarioError(f"{where}: must be a non-empty list of lists of integers")
    widths = {len(r) for r in rows}
    if len(widths) != 1:
        raise RouteConservationError(f"{where}: rows have different lengths {sorted(widths)}")
    for i, r in enumerate(rows):
        for j, v in enumerate(r):
            if isinstance(v, bool) or not isinstance(v, int):
                raise ScenarioError(f"{where}[{i}][{j}] = {v!r}: must be an integer >= 0")
    return np.asarray(rows, dtype=np.int64)


def load_routing_file(path: str, w: Workload) -> np.ndarray:
    """Read ``counts`` (world x world*local_experts) or ``expert_ids`` (per source rank, per token,
    ``topk`` distinct global expert ids) from a TOML or JSON file."""
    where = f"workload.file {path!r}"
    if not os.path.isfile(path):
        raise ScenarioError(f"{where}: no such file")
    try:
        if path.endswith(".json"):
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        else:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"{where}: cannot parse: {exc}") from None
    if not isinstance(data, dict) or ("counts" in data) == ("expert_ids" in data):
        raise ScenarioError(f"{where}: must hold exactly one of 'counts' or 'expert_ids'")
    if "counts" in data:
        return _as_matrix(data["counts"], f"{where}: counts")
    return counts_from_expert_ids(data["expert_ids"], w, f"{where}: expert_ids")


def counts_from_expert_ids(ids: Any, w: Workload, where: str = "expert_ids") -> np.ndarray:
    """Counts matrix from ``ids[src][token] = [topk global expert ids]`` (each token's ids distinct)."""
    n_exp = w.world * w.local_experts
    if not isinstance(ids, list) or len(ids) != w.world:
        raise RouteConservationError(f"{where}: needs one list per source rank ({w.world}), got {_len(ids)}")
    counts = np.zeros((w.world, n_exp), dtype=np.int64)
    for s, toks in enumerate(ids):
        if not isinstance(toks, list) or len(toks) != w.tokens:
            raise RouteConservationError(f"{where}[{s}]: needs {w.tokens} tokens, got {_len(toks)}")
        for t, row in enumerate(toks):
            if not isinstance(row, list) or len(row) != w.topk:
                raise RouteConservationError(
                    f"{where}[{s}][{t}]: needs topk = {w.topk} expert ids, got {row!r}"
                )
            if len(set(row)) != len(row):
                raise RouteConservationError(f"{where}[{s}][{t}] = {row}: a token routes to an expert twice")
            for g in row:
                if isinstance(g, bool) or not isinstance(g, int) or not 0 <= g < n_exp:
                    raise ScenarioError(f"{where}[{s}][{t}]: expert id {g!r}; allowed 0..{n_exp - 1}")
                counts[s, g] += 1
    return counts


def _len(v: Any) -> str:
    return str(len(v)) if isinstance(v, list) else type(v).__name__


def rank_rows(counts: np.ndarray, rank: int, local_experts: int) -> np.ndarray:
    """``rows[src][local_expert]`` received by destination ``rank``."""
    return counts[:, rank * local_experts : (rank + 1) * local_experts]


def routing_signature(counts: np.ndarray, rank: int, local_experts: int) -> tuple[Any, ...]:
    """What the graph of ``rank`` depends on, with sources named relative to the rank.

    Rank r's graph sees the rows it receives from each source (the source equal to r is its
    local segment) and the routes it sends back; rotating the source axis by r makes two ranks
    whose traffic is the same up to relabelling of peers share one signature.
    """
    world = counts.shape[0]
    order = [(rank + d) % world for d in range(world)]
    recv = rank_rows(counts, rank, local_experts)[order]
    sent = counts[rank].reshape(world, local_experts)[order]
    return (recv.tobytes(), sent.tobytes(), recv.shape)
