"""``moeopt.core.events.positions``: each key of a dict -> its place in the dict's order, the
same dict as ``dict(zip(d, range(len(d))))`` (compile_graph's index and the emitter's early
order read it)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from moeopt.core.events import positions


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=6), unique=True, max_size=40), st.data())
def test_positions_match_zip(keys: list[str], data: st.DataObject) -> None:
    d: dict[str, object] = {k: object() for k in keys}
    # (a dict with deleted entries too: its table has holes that a copy must not keep as keys)
    for k in data.draw(st.lists(st.sampled_from(keys), unique=True)) if keys else []:
        del d[k]
    got = positions(d)
    want = dict(zip(d, range(len(d))))
    assert got == want
    assert list(got) == list(want)
    assert all(type(v) is int for v in got.values())
    got["new"] = -1  # a new dict: the argument is not changed
    assert "new" not in d
