"""numpy's ``unique`` and stable ``argsort`` for the small non-negative integer codes the builder
numbers its tiles by (cores, cost classes, (wave, expert, class) codes, m-blocks): the same
arrays, worked out by counting where the codes are small.

Why: on a rank's tens of thousands of GMM tiles numpy 2.4 sorts int64 codes by timsort
(``kind="stable"``, and ``unique`` when it returns first indices) or by its vectorised
quicksort (``unique`` returning the inverse alone), about 1.5-2.3 ms a call on 29k codes
(CPU, min of 3 x 20), where a count over the codes' range takes 0.1-0.4 ms and numpy's radix
sort of the same codes as int16 about 0.35 ms. Every output is determined by the input alone
(the distinct values ascending, each one's first index, count and number; a stable sort's
order is the one order that keeps equal keys in input order), so any algorithm gives the same
arrays: ``tests/megamoe/test_smallints.py`` holds both to numpy's own.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_I16_MAX = 2**15
"""int16's bound: numpy's stable sort is a radix sort for integers of 16 bits or less
(``numpy.sort``'s documentation)."""


def _dense(a: np.ndarray) -> bool:
    """Whether ``a`` is a 1-D integer array of non-negative values counted cheaply: at most
    32 slots per value and 2**16 more (assumed: a count that large still costs less than a sort; the
    key codes of a rank's GMM tiles reach about 18 per tile)."""
    return (
        a.ndim == 1
        and a.dtype.kind in "iu"
        and a.size > 0
        and int(a.min()) >= 0
        and int(a.max()) < 32 * a.size + 2**16
    )


def stable_order(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys, kind="stable")``, sorted as int16 when every key fits."""
    if (
        keys.ndim == 1
        and keys.dtype.kind in "iu"
        and keys.size
        and keys.dtype.itemsize > 2
        and int(keys.min()) >= -_I16_MAX
        and int(keys.max()) < _I16_MAX
    ):
        return np.argsort(keys.astype(np.int16), kind="stable")
    return np.argsort(keys, kind="stable")


def unique(
    a: np.ndarray, return_index: bool = False, return_inverse: bool = False, return_counts: bool = False
) -> Any:
    """``np.unique(a, return_index=..., return_inverse=..., return_counts=...)``: the same
    arrays (values of ``a``'s dtype, the others of ``intp``), by counting when ``a`` holds small
    non-negative integers (``np.minimum.at`` gives each value's first index), else on the runs
    of equal consecutive values when they are few (:func:`_unique_runs`)."""
    if not _dense(a):
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
