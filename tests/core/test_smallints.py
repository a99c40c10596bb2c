"""moeopt.core.smallints against numpy's own ``unique`` and stable ``argsort``: every
array (values, first indices, inverse, counts; the order) equal, of the same dtype and shape,
on codes small enough to be counted, on codes that are not (numpy's path), and on other
integer dtypes and edge sizes. A slip in the counting (a value missed, an index off by one, a
first index that is not the first, an unstable order) fails here."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moeopt.core import smallints


def _same(want: object, got: object) -> None:
    w = want if isinstance(want, tuple) else (want,)
    g = got if isinstance(got, tuple) else (got,)
    assert len(w) == len(g)
    for x, y in zip(w, g, strict=True):
        assert isinstance(x, np.ndarray)
        assert isinstance(y, np.ndarray)
        assert x.dtype == y.dtype
        assert x.shape == y.shape
        assert (x == y).all()


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(0, 40), max_size=300)
    | st.lists(st.integers(-5, 10**7), max_size=60)
    | st.lists(st.integers(0, 2**33), max_size=60),
    st.sampled_from([np.int64, np.int32, np.intp]),
)
def test_unique_and_order_are_numpys(values: list[int], dtype: type) -> None:
    # values the dtype cannot hold (2**33 as int32) are dropped: numpy refuses to build such an array
    info = np.iinfo(dtype)
    a = np.array([v for v in values if info.min <= v <= info.max], dtype)
    for ri in (False, True):
        for rv in (False, True):
            for rc in (False, True):
                want = np.unique(a, return_index=ri, return_inverse=rv, return_counts=rc)
                _same(want, smallints.unique(a, return_index=ri, return_inverse=rv, return_counts=rc))
    assert (smallints.stable_order(a) == np.argsort(a, kind="stable")).all()


@pytest.mark.parametrize("n", [1, 29_000])
def test_counted_paths_on_tile_sized_codes(n: int) -> None:
    # the sizes of a rank's GMM tiles: many repeats of few codes, in runs and out of them
    rng = np.random.default_rng(n)
    for hi in (1, 24, 3000, 200_000, 2**31):
        a = rng.integers(0, hi, n)
        assert smallints._dense(a) == (int(a.max()) < 4 * n + 1024)
        _same(
            np.unique(a, return_index=True, return_inverse=True, return_counts=True),
            smallints.unique(a, return_index=True, return_inverse=True, return_counts=True),
        )
        assert (smallints.stable_order(a) == np.argsort(a, kind="stable")).all()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(2**40, 2**40 + 50), st.integers(1, 12)), min_size=1, max_size=40))
def test_runs_path_is_numpys(runs: list[tuple[int, int]]) -> None:
    # ids far beyond any count, in runs of equal consecutive values (events sharing a map): the
    # runs' path whenever they are at most half the values
    a = np.repeat(np.array([v for v, _ in runs], np.int64), [k for _, k in runs])
    for ri in (False, True):
        for rv in (False, True):
            for rc in (False, True):
                want = np.unique(a, return_index=ri, return_inverse=rv, return_counts=rc)
                _same(want, smallints.unique(a, return_index=ri, return_inverse=rv, return_counts=rc))


def test_numbered_in_order_of_first_appearance() -> None:
    numbered = smallints.numbered
    # 5 first at 0, 3 first at 1, 7 first at 3: numbers 0, 1, 2 in that order
    first, number = numbered(np.array([5, 3, 5, 7, 3], np.int64))
    assert first.tolist() == [0, 1, 3]
    assert number.tolist() == [0, 1, 0, 2, 1]
    first, number = numbered(np.zeros(0, np.int64))
    assert (first.tolist(), number.tolist()) == ([], [])
