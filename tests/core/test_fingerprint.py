"""``Schedule.fingerprint`` formats its times in bulk; it must hash exactly the text of the
line-by-line definition (each time rounded with ``round(x, 6)``, a zero printed unsigned)."""

from __future__ import annotations

import hashlib

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import moeopt as m


def _by_lines(s: m.Schedule) -> str:
    # the definition: one line per event in name order, each time as f"{round(x, 6):.6f}" with
    # -0.0 printed as 0.0
    def fmt(x: float) -> str:
        v = round(x, 6)
        return f"{0.0 if v == 0 else v:.6f}"

    h = hashlib.sha256()
    for name in sorted(s.start_us):
        binding = "+".join(s.resources.get(name, ()))
        h.update(f"{name}\t{fmt(s.start_us[name])}\t{fmt(s.end_us[name])}\t{binding}\n".encode())
    return h.hexdigest()[:16]


# times near the 6th decimal's rounding boundary, signed zeros and tiny negatives, large values
EDGES = [0.0, -0.0, 5e-7, -5e-7, 4.9999999e-7, -4e-7, 2.5e-7, 0.0078125, 1.0000005, 123.4567895,
         -1.5, 1e-300, 4.2e9 + 0.1234565, 1e17, float("inf")]
times = st.one_of(
    st.sampled_from(EDGES),
    st.floats(allow_nan=False, min_value=-1e12, max_value=1e12),
    st.integers(-5, 5),
    # numpy rounds its own floats in another way than Python: such times are formatted as they were
    st.sampled_from(EDGES).map(np.float64),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(times, times, st.sampled_from([(), ("c0.a",), ("c0.a", "c1.b")])), max_size=8))
def test_fingerprint_hashes_the_line_by_line_text(rows: list[tuple[float, float, tuple[str, ...]]]) -> None:
    names = [f"e{k}" for k in range(len(rows))][::-1]  # not in name order
    s = m.Schedule(
        start_us={x: r[0] for x, r in zip(names, rows)},
        end_us={x: r[1] for x, r in zip(names, rows)},
        resources={x: r[2] for x, r in zip(names, rows) if r[2]},
    )
    assert s.fingerprint() == _by_lines(s)
