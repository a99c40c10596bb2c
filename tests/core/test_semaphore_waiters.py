"""The semaphore profile's block index and the scheduler's semaphore gates, against references
that walk every breakpoint and rank every eligible event at every step.

Two fast paths are checked here:

* :class:`~moeopt.core.semaphores.SemaphoreProfile` keeps its breakpoints flat, then in blocks, each with
  an offset on its levels and its highest and lowest level, so that a change in the middle moves
  later blocks as a whole and admission skips long busy stretches; its answers (admission, the
  level curve, the final level, the time from which enough units stay free, the highest level
  ``add`` reports) must be those of a brute force over every breakpoint, after any sequence of
  changes (appends, changes at the last breakpoint, insertions in the middle), on profiles
  longer than one block.
* The scheduler parks events that semaphores alone delay in one gate per acquire signature
  (``moeopt.core.scheduler``); on graphs made of such waiters (many events on a shared
  semaphore, free resources, staggered ready times, mixed durations) every keyed policy must
  give the naive scheduler's schedule event for event.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from unittest import mock

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import moeopt as m
from moeopt.core import semaphores
from moeopt.core.events import Event, EventGraph
from moeopt.core.policies import BUILTIN_POLICIES, make_policy
from moeopt.core.semaphores import B, SemaphoreProfile
from moeopt.testing import naive_schedule

KEYED = [p for p in BUILTIN_POLICIES if not make_policy(p).wants_view]


def _level(changes: list[tuple[float, int]], cap: int, t: float) -> int:
    """Free units at ``t``: the capacity plus every change at or before ``t``."""
    return cap + sum(d for u, d in changes if u <= t)


def _drop_hint_holds(p: SemaphoreProfile) -> bool:
    """The flat form's search start ``_hd``: every time before it is earlier than the last drop
    (admission and hold search from there for times at or after the drop)."""
    return p._t is None or all(u < p._drop for u in p._t[: p._hd])


def _admit(changes: list[tuple[float, int]], cap: int, t: float, take: int, back: int, dur: float) -> float:
    """Brute force of SemaphoreProfile.admit: try ``t`` and every breakpoint after it, in time
    order; a start ``c`` is admitted when ``take`` units are free at ``c`` and at every
    breakpoint inside ``(c, c + dur)``, and ``take - back`` units at every breakpoint from
    ``c + dur`` on when that is positive (a zero-length hold needs only the latter, at ``c``
    too)."""
    after = max(take - back, 0)
    head = take if dur > 0 else after
    if head <= 0:
        return t
    times = sorted({u for u, _d in changes})
    for c in [t, *[u for u in times if u > t]]:
        if _level(changes, cap, c) < head:
            continue
        if any(_level(changes, cap, u) < take for u in times if c < u < c + dur):
            continue
        if after > 0 and any(_level(changes, cap, u) < after for u in times if u >= c + dur):
            continue
        return c
    return math.inf


change_ops = st.lists(
    st.tuples(st.integers(0, 3 * B), st.sampled_from([-2, -1, -1, 1, 1, 2])), min_size=1, max_size=4 * B
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=change_ops,
    appends_first=st.booleans(),
    queries=st.lists(
        st.tuples(
            st.integers(0, 3 * B),
            st.integers(1, 4),
            st.integers(0, 4),
            st.sampled_from([0.0, 0.5, 3.0, 17.0, 60.0]),
        ),
        min_size=1,
        max_size=12,
    ),
)
def test_profile_answers_as_a_walk_over_every_breakpoint(ops, appends_first, queries) -> None:
    _check_profile(ops, appends_first, queries)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=change_ops,
    appends_first=st.booleans(),
    queries=st.lists(
        st.tuples(st.integers(0, 3 * B), st.integers(1, 4), st.integers(0, 4), st.sampled_from([0.0, 0.5, 17.0])),
        min_size=1,
        max_size=12,
    ),
    tiny=st.sampled_from([1, 2, 3]),
    flat=st.sampled_from([1, 2, 5, 10_000]),
)
# a change before every breakpoint, on a first block whose levels are all below the capacity:
# the new first breakpoint starts at the capacity's level (3 - 1 = 2 free from t=2, above the
# block's old highest level 1)
@example(ops=[(5, -2), (2, -1)], appends_first=False, queries=[(0, 2, 2, 0.5)], tiny=1, flat=1)
def test_profile_with_tiny_blocks_splits_offsets_and_skips_correctly(ops, appends_first, queries, tiny, flat) -> None:
    # with 1-3 breakpoints per block (split beyond 2-6) and groups of 2 blocks, profiles of a few
    # dozen breakpoints span many blocks: changes in the middle split blocks and move the
    # offsets of every later one, and the searches step over single blocks and groups of blocks.
    # A flat profile turns into blocks after walks of 1, 2 or 5 breakpoints: at any point of the
    # sequence (a change, a threshold search, an admission), or never (10 000)
    with (
        mock.patch.object(semaphores, "B", tiny),
        mock.patch.object(semaphores, "_G", 2),
        mock.patch.object(semaphores, "_FLAT", flat),
    ):
        _check_profile(ops, appends_first, queries)


def _check_profile(
    ops: list[tuple[int, int]], appends_first: bool, queries: list[tuple[int, int, int, float]]
) -> None:
    cap = 3
    if appends_first:
        ops = sorted(ops)  # the scheduler's common order: changes at or after the last one
    p = SemaphoreProfile(cap)
    seen: list[tuple[float, int]] = []
    for step, (t, d) in enumerate(ops):
        hi = p.add(float(t), d)
        seen.append((float(t), d))
        assert _drop_hint_holds(p)
        # add returns the highest level from t on
        assert hi == max(_level(seen, cap, u) for u, _d in seen if u >= t)
        times = sorted({u for u, _d in seen})
        assert p.final_level() == _level(seen, cap, times[-1])
        if step % 7 == 0 or step == len(ops) - 1:
            # thresholds are asked between changes, so that their memo is kept up to date:
            # every level from free_from(a) on is at least a, and the breakpoint before it is
            # below a (-inf: none is; inf: the last one is)
            for a in (1, 2, 3):
                lows = [k for k, u in enumerate(times) if _level(seen, cap, u) < a]
                want = -math.inf  # no breakpoint below a
                if lows:
                    want = times[lows[-1] + 1] if lows[-1] + 1 < len(times) else math.inf
                assert p.free_from(a) == want
    assert p.low <= min(_level(seen, cap, u) for u, _d in seen)
    # the block summaries the searches skip by: a block's highest and lowest level (offset
    # applied) and its first time. A stale one only shows in an answer when a later search
    # starts in the right place, so they are checked themselves too. The last block's highest and
    # lowest level may be left stale by changes inside it (every search refreshes them first):
    # they are checked after that refresh, the others as they are
    if p._t is not None:  # still flat: one list of times, one of levels
        assert p._l is not None
        assert len(p._t) == len(p._l)
        assert p._bt == []
    if p._stale:
        p._fresh()
    for bt, bl, o, hi, lo, first in zip(p._bt, p._bl, p._off, p._hi, p._lo, p._first, strict=True):
        assert 0 < len(bt) == len(bl) <= 2 * semaphores.B
        assert (hi, lo, first) == (max(bl) + o, min(bl) + o, bt[0])
    times, levels = p.curve()
    assert times == sorted({u for u, _d in seen})
    assert levels == [_level(seen, cap, u) for u in times]
    for u in [-1.0, *[x + dx for x in times for dx in (-0.5, 0.0, 0.5)]]:
        assert p.level_at(u) == _level(seen, cap, u)
    for t, take, back, dur in queries:
        back = min(back, take)
        assert p.admit(float(t), take, back, dur) == _admit(seen, cap, float(t), take, back, dur)
    # every start time and need: the first breakpoint with enough units (a hold of 0.5 fits
    # between integer breakpoints; giving every unit back leaves nothing needed after it),
    # against a walk over the curve checked above
    for t in range(-1, int(times[-1]) + 2):
        for take in (1, 2, 3, 4):
            want = next((float(u) for u, v in zip(times, levels) if u > t and v >= take), math.inf)
            if _level(seen, cap, t) >= take:
                want = float(t)
            assert p.admit(float(t), take, take, 0.5) == want


@st.composite
def contention_graphs(draw: st.DrawFn) -> EventGraph:
    """Events competing for a shared semaphore while their resources are mostly free: a few
    chains give staggered ready times, each waiter holds 1-2 units of ``bw`` (sometimes a
    producer -> consumer ``slot`` too) for one of a few durations, on a pool of three members or
    none."""
    cap = draw(st.integers(1, 3))
    g = EventGraph(
        semaphores={"bw": cap, "slot": draw(st.integers(1, 4))},
        pools={"a": ["c0.a", "c1.a", "c2.a"]},
    )
    n_chain = draw(st.integers(1, 6))
    for k in range(n_chain):
        deps = {f"h{k - 1}": draw(st.sampled_from([0.0, 0.5]))} if k else {}
        g.add(Event(f"h{k}", resources=["c0.b"], deps=deps, duration_us=draw(st.sampled_from([0.5, 1.0, 4.0]))))
    open_slots: list[str] = []
    for k in range(draw(st.integers(2, 22))):
        deps = {}
        if draw(st.booleans()):
            deps[f"h{draw(st.integers(0, n_chain - 1))}"] = draw(st.sampled_from([0.0, 0.25, 2.0]))
        acquires = {"bw": draw(st.integers(1, cap))}
        releases = dict(acquires)
        mode = draw(st.sampled_from(["hold", "hold", "produce", "consume"]))
        if mode == "produce":
            acquires["slot"] = 1
            open_slots.append(f"w{k}")
        elif mode == "consume" and open_slots:
            prod = open_slots.pop(0)
            deps.setdefault(prod, 0.0)
            releases["slot"] = 1
        g.add(
            Event(
                f"w{k}",
                resources=draw(st.sampled_from([["a:*"], ["a:*"], []])),
                deps=deps,
                acquires=acquires,
                releases=releases,
                duration_us=draw(st.sampled_from([0.25, 1.0, 1.0, 2.5, 6.0])),
            )
        )
    return g


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=contention_graphs(), tiny_blocks=st.booleans())
def test_semaphore_waiters_are_scheduled_as_the_naive_scheduler_does(g: EventGraph, tiny_blocks: bool) -> None:
    # tiny blocks: profiles also leave the flat form after a walk of 2 breakpoints
    with (
        mock.patch.object(semaphores, "B", 2 if tiny_blocks else B),
        mock.patch.object(semaphores, "_FLAT", 2 if tiny_blocks else semaphores._FLAT),
    ):
        _check_against_naive(g)


def _check_against_naive(g: EventGraph) -> None:
    for policy in KEYED:
        try:
            ref = naive_schedule(g, make_policy(policy))
        except m.SchedulingError:
            with pytest.raises(m.SchedulingError):
                m.schedule(g, policy)
            continue
        s = m.schedule(g, policy)
        for name, (start, end, bound) in ref.items():
            assert s.start_us[name] == start, (policy, name)
            assert s.end_us[name] == end, (policy, name)
            assert s.resources[name] == bound, (policy, name)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(
        st.tuples(
            st.integers(0, 40),
            st.sampled_from([0, 0, 1, 3, 7]),
            st.integers(1, 3),
            st.integers(0, 3),
            st.booleans(),
        ),
        min_size=1,
        max_size=60,
    ),
    flat=st.sampled_from([1, 3, 10_000]),
    threshold=st.booleans(),
)
def test_hold_changes_the_profile_as_its_two_adds(ops, flat, threshold) -> None:
    # SemaphoreProfile.hold(s, e, take, back) (back <= take) in one pass must leave the curve, the
    # final level and the admissions of add(s, -take) then add(e, back); its lower bound ``low``
    # may be higher (it skips the instant levels between the two adds) but stays a lower bound.
    # Plain adds in between (a release of units taken elsewhere: ``extra``) and an asked threshold
    # (``free_from``) take the general path at times
    cap = 6
    with mock.patch.object(semaphores, "_FLAT", flat):
        p = SemaphoreProfile(cap)
        ref = SemaphoreProfile(cap)
        for s, dur, take, back, extra in ops:
            back = min(back, take)
            if p.low - take < 0 or ref.low - take < 0:
                continue  # keep every level at least 0: the scheduler never goes below
            p.hold(float(s), float(s + dur), take, back)
            ref.add(float(s), -take)
            ref.add(float(s + dur), back)
            if extra and ref.final_level() < cap:
                p.add(float(s + dur + 1), 1)
                ref.add(float(s + dur + 1), 1)
            if threshold:
                assert p.free_from(2) == ref.free_from(2)
            assert _drop_hint_holds(p)
            assert _drop_hint_holds(ref)
            assert p.curve() == ref.curve()
            assert p.final_level() == ref.final_level()
            assert ref.low <= p.low <= min(ref.curve()[1], default=cap)
        for t in range(-1, 45):
            for take in (1, 2, 3):
                for back in range(take + 1):
                    for dur in (0.0, 0.5, 4.0):
                        assert p.admit(float(t), take, back, dur) == ref.admit(float(t), take, back, dur)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=change_ops, appends_first=st.booleans(), thresholds=st.lists(st.integers(1, 3), max_size=3))
# a rise at the last breakpoint below a threshold: 1 free at 0 and 2 from 1 (free_from(2) == 1),
# then one more from 0 on leaves none below 2 (free_from(2) == -inf), found again only by a search
@example(ops=[(0, -2), (1, 1), (0, 1)], appends_first=False, thresholds=[2])
def test_flat_and_blocked_profiles_answer_alike(ops, appends_first, thresholds) -> None:
    # the flat form (never converted here) against the blocked form (converted while empty),
    # checked against a brute force above: after the same changes, the same curve, thresholds and
    # admission for every start on a half-unit grid, every need, give-back and a few durations
    # (breakpoints falling exactly at the end of a hold among them)
    if appends_first:
        ops = sorted(ops)
    with mock.patch.object(semaphores, "_FLAT", 10**9):
        flat = SemaphoreProfile(3)
        blocked = SemaphoreProfile(3)
        blocked._to_blocks()
        for t, d in ops:
            for a in thresholds:  # thresholds asked before changes are then kept up to date
                assert flat.free_from(a) == blocked.free_from(a)
            assert flat.add(float(t), d) == blocked.add(float(t), d)
        assert flat._t is not None
        assert blocked._t is None
        assert flat.curve() == blocked.curve()
        assert flat.final_level() == blocked.final_level()
        for a in (1, 2, 3):
            assert flat.free_from(a) == blocked.free_from(a)
        last = int(max(t for t, _d in ops))
        for k in range(-2, 2 * last + 4):
            t = k / 2
            assert flat.level_at(t) == blocked.level_at(t)
            for take in (1, 2, 3, 4):
                for back in range(take + 1):
                    for dur in (0.0, 0.5, 1.0, 2.0, 3.0, 17.0):
                        assert flat.admit(t, take, back, dur) == blocked.admit(t, take, back, dur), (t, take, back, dur)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    holds=st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 12), st.integers(1, 3), st.booleans()), min_size=1, max_size=50
    ),
    releases=st.lists(st.integers(0, 60), max_size=6),
)
def test_admission_after_the_last_drop_is_the_first_time_with_enough_units(holds, releases) -> None:
    # Holds committed in start order (as earliest_start commits them: each start at or after the
    # last), some keeping their units (a slot given back by a later event), then releases of
    # kept units: every unit was taken at a start no later than the last one (``_drop``), so
    # admissions from there on take the binary-search path, and those from before it the jump
    # over a stretch with too few units, or the walk. Every answer on a half-unit grid must be
    # the brute force's, and the drop the last start
    cap = 5
    p = SemaphoreProfile(cap)
    seen: list[tuple[float, int]] = []
    start = 0
    kept = 0
    for gap, dur, take, keep in holds:
        start += gap
        if p.low - take < 0:
            continue  # keep every level at least 0: the scheduler never goes below
        back = 0 if keep else take
        p.hold(float(start), float(start + dur), take, back)
        seen += [(float(start), -take), (float(start + dur), back)]
        kept += take - back
        # each hold after the last drop moves the search start to the drop's own breakpoint
        # (every earlier time is before it), so later searches skip every older breakpoint
        assert p._t is not None
        assert p._hd == bisect_left(p._t, p._drop)
    assert p._drop == max(t for t, d in seen if d < 0)
    for r in releases:
        if kept:
            p.add(float(start + r), 1)
            seen.append((float(start + r), 1))
            kept -= 1
    end = int(max(t for t, _d in seen))
    for k in range(-2, 2 * end + 4):
        t = k / 2
        for take in (1, 2, 3, 4):
            for back in (0, take):
                for dur in (0.0, 0.5, 3.0):
                    assert p.admit(t, take, back, dur) == _admit(seen, cap, t, take, back, dur), (t, take, back, dur)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(
        st.one_of(
            # a change: ("add", t, delta) or ("hold", s, length, take, back)
            st.tuples(st.just("add"), st.integers(0, 40), st.sampled_from([-2, -1, 1, 2])),
            st.tuples(
                st.just("hold"), st.integers(0, 40), st.integers(0, 6), st.integers(1, 2), st.sampled_from([0, 1, 2, 3])
            ),
            # admissions of every shape from a few starts, in any order (the blocked form
            # remembers, per shape, the stretch its last walk covered until the next change)
            st.tuples(st.just("ask"), st.lists(st.integers(0, 90), min_size=1, max_size=4)),
        ),
        min_size=1,
        max_size=30,
    )
)
# a hold that gives back more than it takes raises levels: 1 unit free from t=1 (capacity 3)
# refuses for ever a start keeping 2 units after its end, from 0 on (a stretch to INF); the
# hold at 0 taking 1 and giving 2 back leaves 2 free from 1 on, so a start at 0 is admitted
@example(steps=[("add", 1, -2), ("ask", [0]), ("hold", 0, 0, 1, 2), ("ask", [0])])
# an add of units raises levels: after 2 units taken from t=1, starts of 2 units held from 0 on
# are refused; one unit given back from 0 on admits some of them again
@example(steps=[("add", 1, -2), ("ask", [0]), ("add", 0, 1), ("ask", [0])])
# a start after a refused stretch's end is not in it: free units 1 in [0, 25), 0 in [25, 31),
# 2 in [31, 32), 0 from 32 on; a hold of 2 units for 0.5 asked from 0 is refused until 31 (the
# stretch [0, 31)) and admitted at 31; asked from 31.5 it is admitted there, where a stretch read
# past its end (to 32) would answer 31, before the start asked for
@example(steps=[("add", 0, -2), ("add", 32, -2), ("hold", 25, 6, 1, 2), ("ask", [0, 63])])
def test_admissions_between_changes_answer_as_a_walk_over_every_breakpoint(steps) -> None:
    # a blocked profile (tiny blocks: several of them) asked between changes, against the brute
    # force over every breakpoint with the changes made so far; a remembered answer that
    # outlived a change, or one reused from outside the stretch it was found for, differs here
    with mock.patch.object(semaphores, "B", 2), mock.patch.object(semaphores, "_G", 2):
        cap = 3
        p = SemaphoreProfile(cap)
        p._to_blocks()
        changes: list[tuple[float, int]] = []
        for step in steps:
            if step[0] == "add":
                _k, t, d = step
                p.add(float(t), d)
                changes.append((float(t), d))
            elif step[0] == "hold":
                # (mostly giving back at most what it takes, as the scheduler's holds do; one
                # unit more now and then: then levels from its end on rise)
                _k, s, length, take, back = step
                p.hold(float(s), float(s + length), take, back)
                changes += [(float(s), -take), (float(s + length), back)]
            else:
                for t in step[1]:
                    t2 = t / 2
                    for take in (1, 2, 3):
                        for back in range(take + 1):
                            for dur in (0.0, 0.5, 2.0, 9.0):
                                want = _admit(changes, cap, t2, take, back, dur)
                                assert p.admit(t2, take, back, dur) == want, (t2, take, back, dur)
