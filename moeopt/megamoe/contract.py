"""The routing -> grouped-GEMM row contract (seed 004).

A grouped GEMM processes every expert's rows as one padded array. Four tables tie the routing
to the kernel's addressing:

=========================  ===================================================================
``group_sizes``            rows (token, expert pairs) per expert
``group_offsets``          start of each expert's rows in the compact, expert-sorted array
``group_padded_offsets``   start of each expert's rows in the padded array (no block straddles
                           two experts); each expert reserves ceil((size + 1) / padding_m)
                           blocks of rows, the +1 being a spare row the reference host code keeps
``group_idx_for_bx``       the expert a block ``bx`` of ``block_token`` padded rows belongs to
=========================  ===================================================================

The kernel recovers a compact row from a padded one with
``m_start = bx * block_token - group_padded_offsets[g] + group_offsets[g]``. The three
self-checks below verify that the host tables and that formula agree; a fourth
(:func:`check_builder_blocks`) verifies that the graph builder's M-blocks are the blocks the
kernel addresses. Every simulated rank passes all four (:func:`check_rank`, called by the
builder for each rank graph): a failure is a :class:`ContractError` naming the expert, the block
and the rows, and no time is returned.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain, islice, repeat
from operator import itemgetter, lt

import numpy as np

from moeopt.megamoe.errors import ContractError

__all__ = [
    "ContractError",
    "GroupedGemmContract",
    "build_contract",
    "check_builder_blocks",
    "check_coverage",
    "check_kernel_addressing",
    "check_padded_covers_compact",
    "check_rank",
    "contract_from_sizes",
    "self_check",
]


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class GroupedGemmContract:
    """Host-side tables of one grouped GEMM (see the module docstring)."""

    n_experts: int
    padding_m: int
    block_token: int
    flat_expert: tuple[int, ...]  # expert of each (token, route) pair, in route order
    flat_token: tuple[int, ...]  # token of each pair
    order: tuple[int, ...]  # route indices sorted by expert (stable)
    group_sizes: tuple[int, ...]
    group_offsets: tuple[int, ...]
    group_padded_offsets: tuple[int, ...]
    m_blocks: int
    group_idx_for_bx: tuple[int, ...]

    @property
    def group_sum(self) -> int:
        return len(self.flat_expert)

    def padded_span(self, g: int) -> int:
        """Rows reserved for expert ``g`` in the padded array."""
        return _ceil_div(self.group_sizes[g] + 1, self.padding_m) * self.padding_m

    def block_rows(self, bx: int) -> tuple[int, int, int]:
        """``(expert, m_start, actual_rows)`` of block ``bx`` as the kernel computes them."""
        g = self.group_idx_for_bx[bx]
        start_padded = bx * self.block_token
        rel = start_padded - self.group_padded_offsets[g]
        m_start = rel + self.group_offsets[g]
        actual = max(0, min(self.block_token, self.group_sizes[g] - rel))
        return g, m_start, actual


def build_contract(
    expert_of: Sequence[Sequence[int]],
    n_experts: int,
    padding_m: int = 128,
    block_token: int = 128,
    token_ids: Sequence[int] | None = None,
) -> GroupedGemmContract:
    """The contract for tokens whose routed experts are ``expert_of[i]`` (one list per token)."""
    if padding_m < 1 or block_token < 1 or n_experts < 1:
        raise ContractError("padding_m, block_token and n_experts must be >= 1")
    tokens = list(range(len(expert_of))) if token_ids is None else list(token_ids)
    flat_expert: list[int] = []
    flat_token: list[int] = []
    for tok, experts in zip(tokens, expert_of, strict=False):
        for e in experts:
            if not 0 <= e < n_experts:
                raise ContractError(f"token {tok} routes to expert {e}, outside 0..{n_experts - 1}")
            flat_expert.append(e)
            flat_token.append(tok)
    sizes = [0] * n_experts
    for e in flat_expert:
        sizes[e] += 1
    return _tables(n_experts, padding_m, block_token, sizes, tuple(flat_expert), tuple(flat_token))


def contract_from_sizes(group_sizes: Sequence[int], padding_m: int, block_token: int) -> GroupedGemmContract:
    """The contract for given rows per expert (tokens are then anonymous, one pair per row)."""
    # expert e repeated group_sizes[e] times, built in C (a size <= 0 repeats nothing, as a
    # range of it is empty): one tuple entry per row, the ranks' graphs have 10^4 - 10^5 rows
    flat_expert = tuple(chain.from_iterable(map(repeat, range(len(group_sizes)), group_sizes)))
    flat_token = tuple(range(len(flat_expert)))
    return _tables(
        len(group_sizes),
        padding_m,
        block_token,
        list(group_sizes),
        flat_expert,
        flat_token,
        order=flat_token,  # the pairs are in expert order already: the stable sort keeps them
    )


def _tables(
    n: int,
    padding_m: int,
    block_token: int,
    sizes: list[int],
    flat_expert: tuple[int, ...],
    flat_token: tuple[int, ...],
    order: tuple[int, ...] | None = None,
) -> GroupedGemmContract:
    if order is None:
        order = tuple(sorted(range(len(flat_expert)), key=lambda k: flat_expert[k]))
    offsets = []
    acc = 0
    for c in sizes:
        offsets.append(acc)
        acc += c
    padded = [0]
    for i in range(1, n):
        padded.append(padded[-1] + _ceil_div(sizes[i - 1] + 1, padding_m) * padding_m)
    m_blocks = _ceil_div(len(flat_expert), block_token) + n
    # the expert of block bx: the last i whose padded start is <= the block's start (0 if none)
    starts = range(0, m_blocks * block_token, block_token)
    if block_token >= 1 and all(map(lt, padded, islice(padded, 1, None))):
        # padded[0] = 0 <= every start (block_token >= 1) and the offsets increase: the experts
        # whose start is <= a block's are a prefix, found by bisection (the scan finds its end)
        idx = [bisect_right(padded, start, 0, n) - 1 for start in starts] if n else [0] * m_blocks
    else:  # offsets that do not increase (a size below -1, a padding below 1) or block_token < 1: the scan
        idx = []
        for start in starts:
            g = 0
            for i in range(n):
                if start >= padded[i]:
                    g = i
            idx.append(g)
    return GroupedGemmContract(
        n_experts=n,
        padding_m=padding_m,
        block_token=block_token,
        flat_expert=flat_expert,
        flat_token=flat_token,
        order=order,
        group_sizes=tuple(sizes),
        group_offsets=tuple(offsets),
        group_padded_offsets=tuple(padded),
        m_blocks=m_blocks,
        group_idx_for_bx=tuple(idx),
    )


def check_coverage(c: GroupedGemmContract) -> None:
    """Self-check 1: every (token, expert) pair appears exactly once, and the sizes add up."""
    # distinct tokens cannot repeat a pair (the anonymous rows of contract_from_sizes); else the pairs
    distinct = len(set(c.flat_token)) == len(c.flat_token)
    if not distinct and len(set(zip(c.flat_token, c.flat_expert, strict=False))) != len(c.flat_token):
        pairs = list(zip(c.flat_token, c.flat_expert, strict=False))
        dup = next(p for p in pairs if pairs.count(p) > 1)
        raise ContractError(f"(token, expert) pair {dup} appears more than once")
    if sum(c.group_sizes) != c.group_sum:
        raise ContractError(f"group sizes add up to {sum(c.group_sizes)}, expected {c.group_sum} pairs")
    # the experts of the routes in sorted order, gathered by one itemgetter call in C (turning
    # the two tuples into arrays cost twice as much as the check itself); an order that does not
    # index the routes raises the arrays' own error, as before
    try:
        sorted_experts = _gathered(c.flat_expert, c.order)
    except (IndexError, TypeError):
        exp = np.fromiter(c.flat_expert, dtype=np.int64, count=len(c.flat_expert))
        sorted_experts = exp[np.fromiter(c.order, dtype=np.int64, count=len(c.order))].tolist()
    for g in range(c.n_experts):
        seg = sorted_experts[c.group_offsets[g] : c.group_offsets[g] + c.group_sizes[g]]
        if seg.count(g) != len(seg):  # some row of another expert (counted in C)
            raise ContractError(f"compact rows of expert {g} hold routes of other experts")


def _gathered(values: tuple[int, ...], index: tuple[int, ...]) -> Sequence[int]:
    """``[values[i] for i in index]`` (an itemgetter of one item returns the item itself)."""
    if len(index) > 1:
        got: tuple[int, ...] = itemgetter(*index)(values)
        return got
    return [values[i] for i in index]


def check_padded_covers_compact(c: GroupedGemmContract) -> None:
    """Self-check 2: each expert's padded interval holds all of its rows and does not overlap
    the next expert's padded interval."""
    for g in range(c.n_experts):
        span = c.padded_span(g)
        if c.group_sizes[g] > span:
            raise ContractError(f"expert {g}: padded span {span} cannot hold its {c.group_sizes[g]} rows")
        if g + 1 < c.n_experts and c.group_padded_offsets[g] + span > c.group_padded_offsets[g + 1]:
            raise ContractError(f"expert {g}: padded interval overlaps expert {g + 1}'s")


def check_kernel_addressing(c: GroupedGemmContract) -> int:
    """Self-check 3: for every block with valid rows, the kernel's ``m_start`` / ``actual_rows``
    stay inside the expert's compact rows, and every compact row is addressed exactly once (the
    blocks' row intervals, in order, tile ``[0, group_sum)``; the first row that is not covered
    once is named). Returns the number of blocks checked."""
    spans: list[tuple[int, int]] = []
    for bx in range(c.m_blocks):
        g, m_start, actual = c.block_rows(bx)
        if bx * c.block_token < c.group_padded_offsets[g] or actual <= 0:
            continue
        if m_start < c.group_offsets[g] or m_start + actual > c.group_offsets[g] + c.group_sizes[g]:
            raise ContractError(
                f"block {bx} (expert {g}) addresses compact rows [{m_start}, {m_start + actual}) outside "
                f"[{c.group_offsets[g]}, {c.group_offsets[g] + c.group_sizes[g]})"
            )
        if m_start + actual > c.group_sum:
            raise ContractError(f"block {bx} (expert {g}) addresses rows past the compact array")
        spans.append((m_start, m_start + actual))
    spans.sort()
    covered = 0  # rows [0, covered) are addressed exactly once so far
    bad: int | None = None
    for a, b in spans:
        if a != covered:
            bad = min(a, covered)  # a gap (row `covered` never) or an overlap (row `a` twice)
            break
        covered = b
    if bad is None and covered != c.group_sum:
        bad = covered
    if bad is not None:
        hits = sum(1 for a, b in spans if a <= bad < b)
        raise ContractError(f"compact row {bad} is addressed {hits} times (expected once)")
    return len(spans)


def check_builder_blocks(c: GroupedGemmContract, blocks: Sequence[Sequence[tuple[int, int, int]]]) -> int:
    """Self-check 4, the builder against the tables: ``blocks[g]`` holds the M-blocks the graph
    builder computes for expert ``g`` as ``(mb, m0, m1)`` (rows ``[m0, m1)`` of the expert, from
    its GMM tiles). Each must be the kernel's block ``bx = group_padded_offsets[g] / block_token
    + mb``: the same expert, compact rows ``[group_offsets[g] + m0, group_offsets[g] + m1)``
    exactly; and together they must be every block with rows of the expert. Returns the number
    of blocks checked."""
    if len(blocks) != c.n_experts:
        raise ContractError(
            f"the builder computes {len(blocks)} experts; the grouped-GEMM tables have {c.n_experts}"
        )
    checked = 0
    for g, used in enumerate(blocks):
        want = set(range(_ceil_div(c.group_sizes[g], c.block_token)))
        seen = set()
        for mb, m0, m1 in used:
            seen.add(mb)
            bx = c.group_padded_offsets[g] // c.block_token + mb
            got = c.block_rows(bx) if mb >= 0 and bx < c.m_blocks else None
            if got is None or got[0] != g or (got[1], got[2]) != (c.group_offsets[g] + m0, m1 - m0):
                where = (
                    "no block of the expert"
                    if got is None or got[0] != g
                    else f"compact rows [{got[1]}, {got[1] + got[2]})"
                )
                raise ContractError(
                    f"expert {g}: the builder's M-block {mb} holds rows [{m0}, {m1}) of the expert, "
                    f"compact rows [{c.group_offsets[g] + m0}, {c.group_offsets[g] + m1}), but the kernel "
                    f"addresses {where} there (block_token {c.block_token}; a tile must not straddle "
                    "two blocks or leave part of one)"
                )
            checked += 1
        if seen != want:
            missing = sorted(want - seen)
            raise ContractError(
                f"expert {g}: the builder computes M-blocks {sorted(seen)} of its {c.group_sizes[g]} rows; "
                f"the kernel addresses blocks 0..{len(want) - 1}"
                + (f" (block {missing[0]} is never computed)" if missing else "")
            )
    return checked


def self_check(c: GroupedGemmContract) -> None:
    """Run the three self-checks of the tables."""
    check_coverage(c)
    check_padded_covers_compact(c)
    check_kernel_addressing(c)


def check_rank(c: GroupedGemmContract, blocks: Sequence[Sequence[tuple[int, int, int]]]) -> None:
    """The four self-checks of one rank graph: the tables (:func:`self_check`) and the builder's
    M-blocks against them (:func:`check_builder_blocks`)."""
    self_check(c)
    check_builder_blocks(c, blocks)
