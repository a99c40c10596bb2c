"""Colocation groups in the compiled graph: the pair shortcut of ``compile_graph`` (every event
linked to a partner that links to nothing and that nothing else links to) numbers the groups
exactly as union-find over the same links does, and the group of each event follows."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import moeopt as m
from moeopt.core.compiled import CompiledGraph, _linked_groups
from moeopt.errors import GraphError


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


def _brute_sites(cg: CompiledGraph, members: list[int]) -> tuple[int, ...] | None:
    # the definition: the one site of the members' fixed resources, if any, intersected with the
    # sites of every pool behind their placeholders (None: no restriction)
    fixed_sites = {cg.res_site[r] for i in members for r in cg.fixed[i]}
    allowed: set[int] | None = set(fixed_sites) if fixed_sites else None
    for i in members:
        for p in cg.placeholders[i]:
            sites = {cg.res_site[r] for r in cg.pool_members[p]}
            allowed = sites if allowed is None else allowed & sites
    return None if allowed is None else tuple(sorted(allowed))


_RES = ["c0.a", "c0.b", "c1.a", "c1.b", "c2.a", "P:*", "Q:*"]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(_RES), min_size=1, max_size=2, unique=True), min_size=2, max_size=14),
    st.data(),
)
def test_group_sites_memo_matches_the_definition(res: list[list[str]], data: st.DataObject) -> None:
    # compile_graph works out a group's sites once per distinct (fixed, placeholders) of its
    # members; many groups repeat a few kinds here, so a memo keyed wrongly would show
    n = len(res)
    partner = data.draw(st.lists(st.integers(0, n - 1), min_size=n, max_size=n))
    g = m.EventGraph(pools={"P": ["c0.x", "c1.x"], "Q": ["c1.y", "c2.y"]})
    for k in range(n):
        other = f"e{partner[k]}" if partner[k] != k and k % 2 == 0 else None
        g.add(m.Event(f"e{k}", resources=res[k], colocate_with=other, duration_us=1.0))
    links = {k: partner[k] for k in range(n) if partner[k] != k and k % 2 == 0}
    groups = _brute_groups(n, list(links.items()))
    pool_sites = {"P:*": {"c0", "c1"}, "Q:*": {"c1", "c2"}}
    bad = 0
    for members in groups:  # the rule again, on names: groups with no legal site
        fixed = {r.split(".")[0] for i in members for r in res[i] if r not in pool_sites}
        allowed = set(fixed) if fixed else {"c0", "c1", "c2"}
        for i in members:
            for r in res[i]:
                allowed &= pool_sites.get(r, allowed)
        bad += len(fixed) > 1 or not allowed
    try:
        cg = g.compiled()
    except GraphError as err:
        # every group without a legal site is reported, also when groups of one kind repeat
        assert str(err).count("colocated events") == bad > 0
        return
    assert bad == 0
    for gid, sites in enumerate(cg.group_sites):
        members = [i for i in range(n) if cg.group[i] == gid]
        assert sites == _brute_sites(cg, members)


def test_every_repeated_bad_group_is_reported() -> None:
    # two groups of the same kind (fixed resources on two sites): both named in the error
    g = m.EventGraph()
    for k in range(2):
        g.add(m.Event(f"a{k}", resources=["c0.a"], duration_us=1.0))
        g.add(m.Event(f"b{k}", resources=["c1.a"], colocate_with=f"a{k}", duration_us=1.0))
    with pytest.raises(GraphError) as err:
        g.compiled()
    assert "['a0', 'b0']" in str(err.value)
    assert "['a1', 'b1']" in str(err.value)


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 10).flatmap(lambda n: st.tuples(st.just(n), st.permutations(range(n)), st.booleans())))
def test_pair_groups_whichever_side_is_earlier(case: tuple[int, list[int], bool]) -> None:
    # disjoint pairs linked both ways round: every partner made before its event (the shortcut
    # without a min / max per pair), every one after it, and mixed; the groups numbered as
    # union-find numbers them (by first member) either way
    n, perm, later = case
    pairs = [(perm[k], perm[k + 1]) for k in range(0, n - 1, 2)]
    # (later: the event first, its partner after it; else its partner first)
    link = {min(a, b): max(a, b) for a, b in pairs} if later else {max(a, b): min(a, b) for a, b in pairs}
    if pairs and perm[0] % 2:  # (and one pair the other way round: the mixed case)
        a, b = pairs[0]
        link.pop(min(a, b), None)
        link.pop(max(a, b), None)
        link[min(a, b) if not later else max(a, b)] = max(a, b) if not later else min(a, b)
    g = m.EventGraph()
    for k in range(n):
        partner = f"e{link[k]}" if k in link else None
        g.add(m.Event(f"e{k}", resources=["c0.a"], colocate_with=partner, duration_us=1.0))
    cg = g.compiled()
    want = _brute_groups(n, list(link.items()))
    assert all(len(members) == 2 for members in want)
    for gid, members in enumerate(want):
        assert [cg.group[i] for i in members] == [gid, gid]
    assert sum(x >= 0 for x in cg.group) == 2 * len(want)
