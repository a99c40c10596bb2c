"""Colocation groups in the compiled graph: the pair shortcut of ``compile_graph`` (every event
linked to a partner that links to nothing and that nothing else links to) numbers the groups
exactly as union-find over the same links does, and the group of each event follows."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import moeopt as m
from moeopt.core.compiled import _linked_groups


def _brute_groups(n: int, links: list[tuple[int, int]]) -> list[list[int]]:
    # connected components by repeated merging, members sorted, ordered by first member
    comps: list[set[int]] = []
    for a, b in links:
        hit = [c for c in comps if a in c or b in c]
        merged = {a, b}.union(*hit)
        comps = [c for c in comps if c not in hit] + [merged]
    return sorted(sorted(c) for c in comps)


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 12).flatmap(lambda n: st.tuples(st.just(n), st.dictionaries(
    st.integers(0, n - 1), st.integers(0, n - 1), max_size=n))))
def test_groups_match_brute_force(case: tuple[int, dict[int, int]]) -> None:
    n, link = case
    link = {a: b for a, b in link.items() if a != b}
    names = [f"e{k}" for k in range(n)]
    g = m.EventGraph()
    for k in range(n):
        partner = names[link[k]] if k in link else None
        g.add(m.Event(names[k], resources=["c0.a"], colocate_with=partner, duration_us=1.0))
    cg = g.compiled()
    want = _brute_groups(n, list(link.items()))
    assert _linked_groups(n, list(link), list(link.values())) == want
    for gid, members in enumerate(want):
        assert [cg.group[i] for i in members] == [gid] * len(members)
    assert sum(x >= 0 for x in cg.group) == sum(map(len, want))
    assert cg.group_sites == tuple((0,) for _ in want)
