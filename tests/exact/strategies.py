"""Hypothesis strategies for the exact layer's soundness tests: small graphs shaped like kernels.

:func:`held_graphs` draws graphs the brute force of :mod:`tests.exact.brute` solves exactly:
short per-site program-order chains (``c0.L`` -> ``c0.L``), a shared bandwidth-like semaphore
``bw`` held by events for their own duration with demands of several sizes (so that they pack
badly into its capacity), a narrow semaphore ``lane``, fixed resources, a two-member pool and λ.
"""

from __future__ import annotations

from hypothesis import strategies as st

import moeopt as m

DURATIONS = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0)
LAMBDAS = (0.0, 0.0, 0.5, 1.0)


@st.composite
def held_graphs(draw: st.DrawFn, max_events: int = 6) -> m.EventGraph:
    n = draw(st.integers(2, max_events))
    bw = draw(st.integers(2, 7))
    lane = draw(st.integers(1, 3))
    g = m.EventGraph(semaphores={"bw": bw, "lane": lane}, pools={"P": ["s0.P", "s1.P"]})
    names: list[str] = []
    last_on: dict[str, str] = {}
    for k in range(n):
        name = f"e{k}"
        kind = draw(st.sampled_from(["chain0", "chain1", "fixed", "pool", "none"]))
        deps: dict[str, float] = {}
        res: list[str] = []
        if kind.startswith("chain"):
            r = f"c{kind[-1]}.L"
            res = [r]
            if r in last_on and draw(st.booleans()):
                deps[last_on[r]] = 0.0  # program order on the site's pipe
            last_on[r] = name
        elif kind == "fixed":
            res = [draw(st.sampled_from(["c0.V", "c1.V"]))]
        elif kind == "pool":
            res = ["P:*"]
        if names:
            for p in draw(st.lists(st.sampled_from(names), max_size=2, unique=True)):
                deps.setdefault(p, draw(st.sampled_from(LAMBDAS)))
        held: dict[str, int] = {}
        if draw(st.booleans()):
            held["bw"] = draw(st.integers(1, bw))
        if draw(st.integers(0, 3)) == 0:
            held["lane"] = draw(st.integers(1, lane))
        g.add(
            m.Event(
                name,
                resources=res,
                deps=deps,
                acquires=held,
                releases=held,
                duration_us=draw(st.sampled_from(DURATIONS)),
            )
        )
        names.append(name)
    return g
