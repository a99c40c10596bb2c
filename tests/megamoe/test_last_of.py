"""``simulate.last_of`` (the rank's last combine) against the ``max`` with a key tuple it replaces."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moeopt.megamoe.simulate import last_of

# few distinct ends, so that ties (and 0.0 against -0.0) are common
_ENDS = st.sampled_from([0.0, -0.0, 1.5, 2.25, 2.25 + 1e-12, float("inf")])


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text("abc", min_size=1, max_size=3), _ENDS, min_size=1, max_size=12), st.randoms())
def test_last_of_is_the_max_by_end_then_name(end, rnd):
    names = list(end)
    rnd.shuffle(names)  # the order of the names must not matter
    assert last_of(names, end) == max(names, key=lambda n: (end[n], n))


def test_last_of_ties_take_the_greatest_name():
    # b and c end last (2.0); of them c is the greatest name, wherever it stands
    assert last_of(["c", "a", "b"], {"a": 1.0, "b": 2.0, "c": 2.0}) == "c"
    assert last_of(["a", "b", "c"], {"a": 3.0, "b": 2.0, "c": 2.0}) == "a"


def test_last_of_nothing_is_an_error_as_max():
    with pytest.raises(ValueError):
        last_of([], {})
