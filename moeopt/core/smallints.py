"""numpy's ``unique`` and stable ``argsort`` for the integer codes the builder numbers its tiles
by (cores, cost classes, (wave, expert, class) codes, m-blocks) and for the ids of the maps
events share: the same arrays, worked out by counting, by numpy's radix sort, or on runs.

Why: on a rank's tens of thousands of GMM tiles numpy 2.4 sorts int64 codes by timsort
(``kind="stable"``, and ``unique`` when it returns first indices), by its vectorised quicksort
(``unique`` returning the inverse alone) or hashes them (``unique`` alone): about 1.5-2.3 ms a
call on 29k codes (CPU, min of 3 x 20), where a count over a small range takes 0.1-0.4 ms and
numpy's radix sort of the same codes as 16-bit integers about 0.35 ms a pass. Every output is
determined by the input alone (the distinct values ascending, each one's first index, count and
number; a stable sort's order is the one order that keeps equal keys in input order), so any
algorithm gives the same arrays: ``tests/core/test_smallints.py`` holds every output to numpy's.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any

import numpy as np

_I16_MAX = 2**15
"""int16's bound: numpy's stable sort is a radix sort for integers of 16 bits or less
(``numpy.sort``'s documentation)."""


def _dense(a: np.ndarray) -> bool:
    """Whether ``a`` is a 1-D integer array of non-negative values counted cheaply: at most
    4 slots per value and 1024 more (assumed: counts that size cost less than a sort, and no
    more memory than a few copies of ``a``; a wider range is sorted by :func:`stable_order`)."""
    return (
        a.ndim == 1
        and a.dtype.kind in "iu"
        and a.size > 0
        and int(a.min()) >= 0
        and int(a.max()) < 4 * a.size + 1024
    )


def _radix_order(keys: np.ndarray) -> np.ndarray | None:
    """The stable order of a 1-D integer array by numpy's radix sort: one pass as int16 when
    every key fits, two passes on 16-bit halves (the low half first, then the high half, each
    stable: the order of the whole keys) when they are non-negative and below 2**32; ``None``
    otherwise."""
    if keys.ndim != 1 or keys.dtype.kind not in "iu" or not keys.size:
        return None
    lo, hi = int(keys.min()), int(keys.max())
    if lo >= -_I16_MAX and hi < _I16_MAX:
        return np.argsort(keys.astype(np.int16), kind="stable")
    if lo >= 0 and hi < 2**32:
        order = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
        high: np.ndarray = order[np.argsort((keys[order] >> 16).astype(np.uint16), kind="stable")]
        return high
    return None


def stable_order(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys, kind="stable")``, by radix sorts of 16-bit keys where the keys fit
    (:func:`_radix_order`)."""
    order = _radix_order(keys) if keys.dtype.itemsize > 2 else None
    return np.argsort(keys, kind="stable") if order is None else order


def unique(
    a: np.ndarray, return_index: bool = False, return_inverse: bool = False, return_counts: bool = False
) -> Any:
    """``np.unique(a, return_index=..., return_inverse=..., return_counts=...)``: the same
    arrays (values of ``a``'s dtype, the others of ``intp``), by counting when ``a`` holds small
    non-negative integers (``np.minimum.at`` gives each value's first index), else on the runs
    of equal consecutive values when they are few (:func:`_unique_runs`)."""
    if not _dense(a):
        order = _radix_order(a) if a.dtype.itemsize > 2 else None
        if order is not None:
            return _unique_sorted(a, order, return_index, return_inverse, return_counts)
        if a.ndim == 1 and a.size > 1:
            runs = _unique_runs(a, return_index, return_inverse, return_counts)
            if runs is not None:
                return runs
        flags: dict[str, Any] = {
            "return_index": return_index,
            "return_inverse": return_inverse,
            "return_counts": return_counts,
        }
        return np.unique(a, **flags)
    counts = np.bincount(a)
    present = np.flatnonzero(counts)
    out: list[np.ndarray] = [present.astype(a.dtype)]
    if return_index:
        first = np.full(len(counts), a.size, np.intp)
        np.minimum.at(first, a, np.arange(a.size, dtype=np.intp))
        out.append(first[present])
    if return_inverse:
        number = np.zeros(len(counts), np.intp)
        number[present] = np.arange(len(present), dtype=np.intp)
        out.append(number[a])
    if return_counts:
        out.append(counts[present].astype(np.intp))
    return out[0] if len(out) == 1 else tuple(out)


def _unique_runs(
    a: np.ndarray, return_index: bool, return_inverse: bool, return_counts: bool
) -> Any:
    """``np.unique`` of a 1-D array made of few runs of equal consecutive values (the ids of
    the maps consecutive events share: a DeepSeek-V3-like rank's 47k events hold their
    acquire maps in 4.8k runs): the runs' values are sorted instead of every value, each
    distinct value's first index is the start of its first run, the inverse is its runs'
    repeated and the count the sum of its runs' lengths. ``None`` when the runs are more than
    half the values (the sort of all of them is then as cheap)."""
    starts = np.flatnonzero(np.concatenate(([True], a[1:] != a[:-1])))
    if 2 * len(starts) > a.size:
        return None
    values, first_run, run_no = np.unique(a[starts], return_index=True, return_inverse=True)
    out: list[np.ndarray] = [values]
    if return_index:
        out.append(starts[first_run])
    if return_inverse or return_counts:
        lens = np.diff(np.append(starts, a.size))
        if return_inverse:
            out.append(np.repeat(run_no, lens))
        if return_counts:
            counts = np.zeros(len(values), np.intp)
            np.add.at(counts, run_no, lens)
            out.append(counts)
    return out[0] if len(out) == 1 else tuple(out)


def _unique_sorted(
    a: np.ndarray, order: np.ndarray, return_index: bool, return_inverse: bool, return_counts: bool
) -> Any:
    """``np.unique`` of ``a`` given its stable order (what numpy itself does after its sort):
    the first of each run of equal sorted values is its value's first index."""
    s = a[order]
    head = np.concatenate(([True], s[1:] != s[:-1]))
    out: list[np.ndarray] = [s[head]]
    if return_index:
        out.append(order[head])
    if return_inverse:
        inverse = np.empty(a.size, np.intp)
        inverse[order] = np.cumsum(head) - 1
        out.append(inverse)
    if return_counts:
        out.append(np.diff(np.append(np.flatnonzero(head), a.size)))
    return out[0] if len(out) == 1 else tuple(out)


def numbered(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ``keys`` numbered 0, 1, ... in order of their first appearance: each
    number's first index (ascending) and each key's number (int64)."""
    _values, first, inverse = unique(keys, return_index=True, return_inverse=True)
    by_first = np.argsort(first, kind="stable")
    number = np.empty(len(first), np.int64)
    number[by_first] = np.arange(len(first))
    return first[by_first], number[inverse]


def packed(code: str, values: Iterable[object], count: int) -> np.ndarray:
    """The ``count`` ``values`` as a read-only array of the struct type ``code`` (``d``: float64,
    ``n``: intp, ``q``: int64), each converted as :func:`struct.pack` converts it (``d``: by
    ``float()``, what ``np.fromiter`` does for Python numbers; the integer codes refuse what does
    not fit, with :class:`struct.error`). ``struct`` converts a sequence in one C loop, about half
    the instructions of ``np.fromiter``, which goes through numpy's generic per-item assignment
    (callgrind: 47k Python floats 4.1M instructions against 9.5M, 43k ints 4.2M against 9.1M).
    Raises :class:`struct.error` unless there are exactly ``count`` values."""
    return np.frombuffer(struct.pack(f"{count}{code}", *values), _CODE_DTYPE[code])


_CODE_DTYPE = {"d": np.dtype(np.float64), "n": np.dtype(np.intp), "q": np.dtype(np.int64)}
