"""The grouped-GEMM contract's tables and self-check 1 (moeopt.megamoe.contract) against the
plain code they replaced: the rows per expert repeated in C, the block -> expert table by
bisection, the sorted routes gathered by one itemgetter call; and the builder's M-blocks read
with an attrgetter (``checked_contract``). Each must give the same tables, and raise the same
error on the same broken tables."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from moeopt.megamoe import contract as ct
from moeopt.megamoe.build import implementation as impl
from moeopt.megamoe.planning import Tile


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _reference_from_sizes(sizes: Sequence[int], padding_m: int, block_token: int) -> ct.GroupedGemmContract:
    """``contract_from_sizes`` as written before: a nested generator of the rows' experts, and
    each block's expert by scanning every expert's padded start."""
    n = len(sizes)
    flat_expert = tuple(e for e, k in enumerate(sizes) for _ in range(k))
    flat_token = tuple(range(len(flat_expert)))
    offsets, acc = [], 0
    for k in sizes:
        offsets.append(acc)
        acc += k
    padded = [0]
    for i in range(1, n):
        padded.append(padded[-1] + _ceil_div(sizes[i - 1] + 1, padding_m) * padding_m)
    m_blocks = _ceil_div(len(flat_expert), block_token) + n
    idx = []
    for bx in range(m_blocks):
        g = 0
        for i in range(n):
            if bx * block_token >= padded[i]:
                g = i
        idx.append(g)
    return ct.GroupedGemmContract(
        n, padding_m, block_token, flat_expert, flat_token, flat_token, tuple(sizes), tuple(offsets),
        tuple(padded), m_blocks, tuple(idx),
    )  # fmt: skip


def _reference_coverage(c: ct.GroupedGemmContract) -> None:
    """``check_coverage`` as written before (the sorted routes' experts on arrays)."""
    distinct = len(set(c.flat_token)) == len(c.flat_token)
    if not distinct and len(set(zip(c.flat_token, c.flat_expert, strict=False))) != len(c.flat_token):
        pairs = list(zip(c.flat_token, c.flat_expert, strict=False))
        dup = next(p for p in pairs if pairs.count(p) > 1)
        raise ct.ContractError(f"(token, expert) pair {dup} appears more than once")
    if sum(c.group_sizes) != c.group_sum:
        raise ct.ContractError(f"group sizes add up to {sum(c.group_sizes)}, expected {c.group_sum} pairs")
    exp = np.fromiter(c.flat_expert, dtype=np.int64, count=len(c.flat_expert))
    sorted_experts = exp[np.fromiter(c.order, dtype=np.int64, count=len(c.order))]
    for g in range(c.n_experts):
        seg = sorted_experts[c.group_offsets[g] : c.group_offsets[g] + c.group_sizes[g]]
        if (seg != g).any():
            raise ct.ContractError(f"compact rows of expert {g} hold routes of other experts")


def _outcome(check, c: ct.GroupedGemmContract) -> tuple[str, str] | None:  # type: ignore[no-untyped-def]
    try:
        check(c)
    except Exception as exc:  # the error's class and message must be the same
        return type(exc).__name__, str(exc)
    return None


nonzero = st.integers(-3, 9).filter(bool)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-3, 40), max_size=9), nonzero, nonzero)
def test_contract_from_sizes_is_the_scan(sizes: list[int], padding_m: int, block_token: int) -> None:
    # sizes below 0 (no rows, and padded starts that need not increase) and negative padding /
    # block sizes take the scan; the usual tables the bisection
    assert ct.contract_from_sizes(sizes, padding_m, block_token) == _reference_from_sizes(
        sizes, padding_m, block_token
    )


@st.composite
def contracts(draw: st.DrawFn) -> ct.GroupedGemmContract:
    """A contract from routing or from sizes, then maybe one table broken."""
    n = draw(st.integers(1, 5))
    if draw(st.booleans()):
        c = ct.contract_from_sizes(draw(st.lists(st.integers(0, 12), min_size=n, max_size=n)), 4, 4)
    else:
        routes = draw(st.lists(st.lists(st.integers(0, n - 1), max_size=3, unique=True), max_size=10))
        c = ct.build_contract(routes, n, padding_m=4, block_token=4)
    k = len(c.flat_expert)
    field = draw(
        st.sampled_from(["none", "flat_expert", "flat_token", "order", "group_offsets", "group_sizes"])
    )
    if field == "none" or (k == 0 and field in ("flat_expert", "flat_token", "order")):
        return c
    if field in ("flat_expert", "flat_token", "order"):
        old = list(getattr(c, field))
        # a value in range or (order) an index out of range either way
        old[draw(st.integers(0, k - 1))] = draw(
            st.integers(-k - 2, k + 2) if field == "order" else st.integers(0, n)
        )
        return dataclasses.replace(c, **{field: tuple(old)})
    old = list(getattr(c, field))
    old[draw(st.integers(0, n - 1))] += draw(st.integers(-3, 3))
    return dataclasses.replace(c, **{field: tuple(old)})


@settings(max_examples=400, deadline=None)
@given(contracts())
def test_check_coverage_is_the_array_check(c: ct.GroupedGemmContract) -> None:
    assert _outcome(ct.check_coverage, c) == _outcome(_reference_coverage, c)


def test_check_coverage_gathers_one_route() -> None:
    # one route: the itemgetter of one index returns the item, not a tuple (the single-item path)
    c = ct.build_contract([[1]], 2, padding_m=4, block_token=4)
    ct.check_coverage(c)
    broken = dataclasses.replace(c, flat_expert=(0,))
    assert _outcome(ct.check_coverage, broken) == _outcome(_reference_coverage, broken)


tiles = st.builds(Tile, *(st.integers(0, 6),) * 6)


@settings(max_examples=100, deadline=None)
@given(st.lists(tiles, max_size=12), st.lists(tiles, max_size=12))
def test_builder_blocks_read_by_attrgetter(g1: list[Tile], g2: list[Tile]) -> None:
    want = sorted({(t.mb, t.m0, t.m1) for t in (*g1, *g2)})
    assert sorted(set(map(impl._MB_M0_M1, [*g1, *g2]))) == want
