"""Free-unit profile of one counting semaphore, as the greedy scheduler builds it.

The profile is a step function of time: ``level(t)`` free units, starting at the capacity and
changing at committed breakpoints (an acquire takes units at an event's start, a release gives
them back at an event's end). Several changes at one instant are merged; ``level(t)`` is the
value after every change at ``t`` has been applied, so a unit released at ``t`` can be
acquired at ``t``.

Units acquired by an event whose release has not been committed yet are taken for ever, as
far as this profile knows: that is what makes admission decisions safe while the consumer
that will free the slot is still unscheduled.

Storage: a blocked list. A change at time ``t`` moves the level at ``t`` and at every later
breakpoint by the same amount. Most changes land after (or at) the last breakpoint, but a
policy that commits events out of time order (critical_path_first on late-bound tiles) changes
profiles in the middle, thousands of breakpoints before their end; with one flat list of levels
each such change rewrote the whole suffix, and the scheduler's cost grew with the square of the
graph. So the breakpoints are kept in consecutive blocks of at most ``2 * B``: each block holds
its times and *raw* levels, and an additive offset that every raw level of the block carries
(``level = raw + offset``), with the block's highest and lowest level (offset applied). A change
in the middle rewrites the part of one block from ``t`` on and adds to the offset, highest and
lowest level of each later block: O(B + blocks) instead of O(breakpoints). The per-block
highest and lowest levels also let the searches (the next breakpoint with enough free units,
the last one with too few) skip whole blocks of a long busy stretch.

Flat first: a profile starts as one flat pair of lists (times, levels), the cheapest form while
every change lands near the end and every search stays short, which is what the greedy
scheduler does on pinned work (on scenario_basic every change lands within 7 breakpoints of the
end). The first operation that would walk more than ``_FLAT`` breakpoints (a change that far
before the end, a search that long) turns it into blocks for good, in one O(breakpoints) pass,
and repeats itself on them: a flat operation costs O(``_FLAT``), so the conversion keeps every
bound above. Both forms answer every question identically (they hold the same breakpoints
and levels; the tests check both against a brute force).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from itertools import chain

INF = math.inf


B = 64
"""Breakpoints per block: appends open a new block when the last one holds ``B``; a change
in the middle that grows a block beyond ``2 * B`` splits it in two. A change in the middle
costs O(B) inside its block plus O(1) per later block; a search steps over a block that
cannot hold its answer in O(1), and over groups of ``_G`` blocks at once with ``max`` /
``min`` over their entries."""

_G = 32
"""Blocks a search skips at once (one C-level ``max`` / ``min``) after stepping over a few
one by one."""

_STRETCHES = 8
"""The most refused stretches a profile keeps per admission shape (``SemaphoreProfile._seen``);
past it the earliest half is forgotten (a forgotten refusal costs a longer walk, nothing else).
assumed: a few; on the late-bound 30k synthetic graph under work_conserving_critical_path, whose
asks come from before and after one another, 145,640 admissions walked 140,739 times keeping 2
stretches, 120,099 keeping 4, 119,250 keeping 8, 118,995 keeping 32 (144,118 with one stretch
that the next walk replaced, as before); earliest_start kept up to 214 when unbounded."""

_FLAT = 128
"""The longest walk a flat profile makes (breakpoints stepped over by one change or one
search) before it turns into blocks. assumed: 2 * B, so that a flat step never costs more than
the block a blocked change rewrites; on scenario_basic and the PTO M = 2048 case no walk comes
near it (changes land within 7 breakpoints of the end), while critical_path_first on late-bound
tiles changes profiles thousands of breakpoints before their end and converts early."""


class SemaphoreProfile:
    __slots__ = (
        "_bl", "_bt", "_drop", "_end", "_fin", "_first", "_free", "_hd", "_hi", "_l", "_lo", "_off",
        "_raised", "_seen", "_seen_at", "_stale", "_t",
        "cap", "changes", "low",
    )

    def __init__(self, cap: int) -> None:
        self.cap = cap
        # the flat form (see the module docstring): every breakpoint time, ascending, and the
        # level in force from it until the next; both None once the profile is in blocks
        self._t: list[float] | None = []
        self._l: list[int] | None = []
        # block b: breakpoint times _bt[b] (ascending; every time of block b is before every
        # time of block b+1), raw levels _bl[b] (the level in force from _bt[b][k] until the
        # next breakpoint is _bl[b][k] + _off[b]), the block's highest and lowest level
        # _hi[b] / _lo[b] (offset applied) and its first time _first[b] (for bisect)
        self._bt: list[list[float]] = []
        self._bl: list[list[int]] = []
        self._off: list[int] = []
        self._hi: list[int] = []
        self._lo: list[int] = []
        # the last block's _hi / _lo are not kept up to date by changes inside it (most changes
        # land there, and keeping them cost a max / min over the block each time) while
        # _stale; every reader of them calls _fresh() first
        self._stale = False
        self._first: list[float] = []
        self._end = -INF  # the last breakpoint's time
        # the latest time of any change that took units away (-INF: none yet). No breakpoint
        # after it has a lower level than the one before it (a breakpoint's step is the sum of
        # the changes at its time, and every change after it gave units back), so from any
        # ``t >= _drop`` on the levels never fall: admission from there is the first time with
        # enough units, one binary search. The greedy scheduler under a policy that commits in
        # start order (earliest_start) takes units only at starts up to the one it commits, and
        # asks about later times: every admission of the pinned synthetic graphs takes this path
        self._drop = -INF
        # flat form: an index ``h`` with every time before it earlier than ``_drop``
        # (``times[:h] < _drop``), so a search for a time at or after the drop starts there
        # instead of at 0. It stays true whatever is inserted later (an insertion before ``h``
        # only shifts earlier times into ``times[:h]``) and while ``_drop`` only grows, so it is
        # moved forward only where that costs nothing (the index of a new drop already found);
        # any older value is still a valid, shorter start (``hold`` and an ``add`` taking units
        # after every breakpoint move it; a take in the middle leaves it). On the pinned
        # synthetic graph the bandwidth profile holds ~2 breakpoints per load and every
        # admission used to search all of them (bisect was ~7% of a schedule call's
        # instructions, callgrind)
        self._hd = 0
        self._fin = cap  # the level from the last breakpoint on
        # a lower bound of every level (the capacity included): the lowest level any change
        # has produced so far (a release raising the lowest levels leaves it low, still a bound)
        self.low = cap
        # how many changes (``add`` / ``hold`` calls) the profile has had: equal counts, equal
        # profile (a reader that cached an answer knows it still holds)
        self.changes = 0
        # threshold a -> the time from which every level is at least a (the breakpoint after
        # the last one below a; -INF: none below a; INF: the last breakpoint is below a), for
        # the thresholds admissions have asked about; kept up to date by ``add``. An event that
        # keeps ``a`` units after its end can start no earlier than that, so admission never
        # walks the long tail of a profile whose units are held until releases not committed
        # yet (the cost that made late-bound slots quadratic).
        self._free: dict[int, float] = {}
        # the blocked walk's refusals, per (take, head, duration): stretches ``[t, a)`` in
        # which every start was refused when a walk from ``t`` answered ``a`` (``INF``: every
        # start from ``t`` on), disjoint and in time order, as three lists (their starts, ends,
        # and the change count at which each end was found: while it is unchanged, the end is
        # still the answer). A change that only takes units (an ``add`` of fewer, a ``hold``
        # that gives back no more than it took) lowers levels and never raises one, so a start
        # refused before is refused after it, and the stretches stay true; a walk from inside
        # one starts at its end instead (the first admissible start from there is the first
        # from inside). Late-bound slots: many loads of one shape ask the blocked profile from
        # nearby times, commit after commit, and most commits are holds; under a policy that
        # does not commit in time order the asks come from before and after one another, so
        # the stretches found are kept (up to ``_STRETCHES``). ``_raised`` counts the changes
        # that raised a level (an ``add`` of more units); ``_seen_at``: its value when the
        # stretches were found (a raise may admit a refused start: they are forgotten)
        self._seen: dict[tuple[int, int, float], tuple[list[float], list[float], list[int]]] = {}
        self._raised = 0
        self._seen_at = 0

    # ------------------------------------------------------------------ reading

    def level_at(self, t: float) -> int:
        times = self._t
        if times is not None:
            k = bisect_right(times, t) - 1
            return self.cap if k < 0 else self._l[k]  # type: ignore[index]
        b = bisect_right(self._first, t) - 1
        if b < 0:
            return self.cap
        bt = self._bt[b]
        return self._bl[b][bisect_right(bt, t) - 1] + self._off[b]

    def final_level(self) -> int:
        """The level from the last breakpoint on (the capacity when there is none)."""
        return self._fin

    def curve(self) -> tuple[list[float], list[int]]:
        """``(times, levels)``: every breakpoint in time order and the level in force from it
        until the next (fresh lists)."""
        if self._t is not None:
            return list(self._t), list(self._l)  # type: ignore[arg-type]
        times = list(chain.from_iterable(self._bt))
        levels: list[int] = []
        for bl, o in zip(self._bl, self._off):
            levels.extend([v + o for v in bl] if o else bl)
        return times, levels

    def free_from(self, a: int) -> float:
        """The time from which every level is at least ``a``: the breakpoint after the last one
        whose level is below ``a`` (``-INF``: no level is below ``a``; ``INF``: the last
        breakpoint's level is)."""
        got = self._free.get(a)
        if got is None:
            self._free[a] = got = self._scan_free(a)
        return got

    def _scan_free(self, a: int) -> float:
        """``free_from(a)`` found afresh, in either form."""
        if self._t is None:
            return self._scan_free_blocks(a)
        # flat: walk back from the end over at most _FLAT breakpoints, then in blocks
        levels = self._l
        assert levels is not None
        j = len(levels) - 1
        stop = j - _FLAT if j >= _FLAT else -2
        while j >= 0 and levels[j] >= a:
            j -= 1
            if j == stop:
                self._to_blocks()
                return self._scan_free_blocks(a)
        if j < 0:
            return -INF
        return self._t[j + 1] if j + 1 < len(levels) else INF

    def _thresholds_at_end(self, v: int, t: float, appended: bool) -> None:
        """Bring the thresholds of ``free_from`` up to date after a change at the last
        breakpoint ``t`` left the final level ``v``, in either form. ``appended``: ``t`` is a
        new breakpoint (the one before it was the last one below a threshold whose answer was
        ``INF``); otherwise the change was at the existing last breakpoint (which was then that
        last one, so the one before it is searched for)."""
        free = self._free
        for a, f in free.items():
            if v < a:
                free[a] = INF
            elif f == INF:
                free[a] = t if appended else self._scan_free(a)

    def _to_blocks(self) -> None:
        """Turn the flat form into blocks of ``B`` breakpoints (offsets 0), for good."""
        times, levels = self._t, self._l
        assert times is not None
        assert levels is not None
        self._t = self._l = None
        size = B
        self._bt = [times[k : k + size] for k in range(0, len(times), size)]
        self._bl = bl = [levels[k : k + size] for k in range(0, len(levels), size)]
        self._off = [0] * len(bl)
        self._hi = [max(x) for x in bl]
        self._lo = [min(x) for x in bl]
        self._first = [x[0] for x in self._bt]
        self._stale = False

    def _fresh(self) -> None:
        """Bring the last block's highest and lowest level up to date."""
        self._stale = False
        last = self._bl[-1]
        o = self._off[-1]
        self._hi[-1] = max(last) + o
        self._lo[-1] = min(last) + o

    def _scan_free_blocks(self, a: int) -> float:
        """``free_from(a)`` by a search back from the end over the blocks' lowest levels."""
        if self._stale:
            self._fresh()
        lo = self._lo
        b = len(lo) - 1
        if b < 0:
            return -INF
        if lo[b] >= a:  # blocks one by one (a few), then groups of _G at once
            b -= 1
            stop = b - 8
            while b >= 0 and lo[b] >= a:
                b -= 1
                if b == stop:
                    while b >= 0 and min(lo[max(b - _G + 1, 0) : b + 1]) >= a:
                        b -= _G
                    stop = -2
            if b < 0:
                return -INF
        bl = self._bl[b]
        x = a - self._off[b]
        k = len(bl) - 1
        while bl[k] >= x:
            k -= 1
        bt = self._bt[b]
        if k + 1 < len(bt):
            return bt[k + 1]
        return self._first[b + 1] if b + 1 < len(lo) else INF

    def _seek(self, b: int, a: int) -> tuple[int, int]:
        """The first breakpoint after block ``b`` whose level is at least ``a``, as (block,
        index in it); ``(len(blocks), 0)``: none. (Admission walks block ``b`` itself.)"""
        if self._stale:
            self._fresh()
        hi = self._hi
        nb = len(hi)
        b += 1
        stop = b + 8  # blocks one by one (a few), then groups of _G at once
        while b < nb and hi[b] < a:
            b += 1
            if b == stop:
                while b < nb and max(hi[b : b + _G]) < a:
                    b += _G
                if b >= nb:
                    return nb, 0
                stop = -1
        if b >= nb:
            return nb, 0
        bl = self._bl[b]
        x = a - self._off[b]
        k = 0
        while bl[k] < x:
            k += 1
        return b, k

    def admit(self, t: float, take: int, give_back: int, dur: float) -> float:
        """Earliest ``t' >= t`` at which ``take`` units can be held over ``[t', t'+dur)`` and
        ``take - give_back`` units from ``t'+dur`` on, given the committed breakpoints.

        Returns ``INF`` when no such time exists with what is committed now (a later committed
        release may change that).

        Every instant at which too few units were free lies before the returned time, so a
        release committed later at a time ``r`` can make the answer earlier only if ``r`` is
        before it (the scheduler uses this to re-examine only the waiters a release can help).
        """
        if self.low >= take:
            # never fewer than ``take`` units free at any time: admitted at once (``take`` is
            # the most the event needs at any instant)
            return t
        # units needed at the start instant itself (after every change at that instant): a
        # zero-length hold gives its units back at the very instant it takes them. (``after``,
        # the units kept from the end on, max(take - give_back, 0), is found only past the
        # shortcuts below: with ``dur <= 0``, ``head`` is it whenever positive.) With a positive
        # duration ``head`` is ``take``, a positive number of units (events refuse any other),
        # so only a zero-length hold can need nothing
        if dur > 0:
            head = take
        else:
            head = take - give_back
            if head <= 0:
                return t
        if t >= self._end:
            # at or after the last breakpoint (an event ready after every committed change):
            # the final level, for ever
            return t if self._fin >= head else INF
        times = self._t
        if times is not None:
            # (no assert: both lists are set together, and this runs per admission)
            levels: list[int] = self._l  # type: ignore[assignment]
            drop = self._drop
            if t >= drop:
                # the first breakpoint after t: at or after _hd (times[:_hd] < drop <= t)
                k = bisect_right(times, t, self._hd)
                # the levels from t on never fall (see _drop): the start is the first time from
                # t with ``head`` units free, and every later level has at least ``head`` (which
                # is at least ``take`` and ``after``), so the hold and what it keeps after fit
                if (levels[k - 1] if k else self.cap) >= head:
                    return t
                k = bisect_left(levels, head, k)  # levels[k:] ascend
                return times[k] if k < len(levels) else INF
            # t before the last drop: when every level in force from t until the breakpoint
            # at the drop is below ``head`` (a waiter ready long ago on a busy semaphore: 97%
            # of the slow admissions on the pinned synthetic graph), no start lies there, and
            # from that breakpoint on the levels never fall, as above. (Both searches start
            # where every earlier time is known to be before what they look for: times[:k] <=
            # t < drop, times[:_hd] < drop)
            k = bisect_right(times, t)  # the first breakpoint after t
            hd = self._hd
            kd = bisect_left(times, drop, k if k > hd else hd)
            if kd - k < _FLAT and max(levels[k - 1 : kd] if k else [self.cap, *levels[:kd]]) < head:
                kd = bisect_left(levels, head, kd)  # levels[kd:] ascend
                return times[kd] if kd < len(levels) else INF
        after = take - give_back
        if after > 0:
            # ``after`` units are needed from t' on for ever: t' is no earlier than the time
            # from which every level is at least ``after``; from there on every level is high
            # enough for the part after the hold, so only the hold's own window is left to check
            f = self._free.get(after)
            if f is None:
                self._free[after] = f = self._scan_free(after)
            if f > t:
                if f == INF:
                    return INF
                t = f
            times = self._t  # the search may have turned the profile into blocks
        if times is None:
            seen = self._seen
            if self._seen_at != self._raised:
                seen.clear()
                self._seen_at = self._raised
            key = (take, head, dur)
            got = seen.get(key)
            if got is None:
                got = seen[key] = ([], [], [])
                k = 0
            else:
                starts, ends, ats = got
                k = bisect_right(starts, t)  # the stretches from k on start after t
                km = k - 1
                if k and t <= ends[km]:
                    # t is in a stretch whose every start is refused: the walk goes on from its
                    # end, which is the answer itself while nothing changed since it was found
                    e = ends[km]
                    if e == INF or ats[km] == self.changes:
                        return e
                    a = self._admit_blocks(e, take, head, dur)
                    # the stretch grows to [its start, a); those starting before a lie in it
                    # (mostly none: no slice deletions then, three of them cost as much as the
                    # rest of this path, callgrind)
                    j = bisect_left(starts, a, k)
                    if j > k:
                        del starts[k:j], ends[k:j], ats[k:j]
                    ends[km] = a
                    ats[km] = self.changes
                    return a
            a = self._admit_blocks(t, take, head, dur)
            if a > t:
                # [t, a) is refused: a stretch, in place of those starting inside it (each
                # ends by a: a start refused before is refused now, and a is admitted); none or
                # one of them in the common cases, done without slice assignments
                starts, ends, ats = got
                j = bisect_left(starts, a, k)
                if j == k:
                    starts.insert(k, t)
                    ends.insert(k, a)
                    ats.insert(k, self.changes)
                elif j == k + 1:
                    starts[k] = t
                    ends[k] = a
                    ats[k] = self.changes
                else:
                    starts[k:j] = (t,)
                    ends[k:j] = (a,)
                    ats[k:j] = (self.changes,)
                if len(starts) > _STRETCHES:
                    # the earliest half goes (forgetting a refusal costs a longer walk only)
                    del starts[: _STRETCHES // 2], ends[: _STRETCHES // 2], ats[: _STRETCHES // 2]
            return a
        # flat: the same walk as _admit_blocks over one list, bounded by _FLAT steps (past
        # it, the profile turns into blocks and the blocked walk answers from the same t)
        levels = self._l  # type: ignore[assignment]
        n = len(times)
        k = bisect_right(times, t)  # the first breakpoint after t
        stop = k + _FLAT
        if stop > n:
            stop = n
        t0 = t
        if (levels[k - 1] if k else self.cap) < head:
            while k < stop and levels[k] < head:
                k += 1
            if k == stop:
                if stop == n:
                    return INF
                self._to_blocks()
                return self._admit_blocks(t0, take, head, dur)
            t = times[k]
            k += 1
        if dur <= 0:
            return t
        end = t + dur
        # each try at t checks the breakpoints from k on that lie inside the hold [t, end): each
        # must leave ``take`` units free; at the first that does not, the next try starts at the
        # next breakpoint with ``head`` free
        while k < stop:
            if times[k] >= end:
                return t  # past the hold: every later level is at least ``after`` (see above)
            if levels[k] < take:
                # too few units inside the hold: start again at the next breakpoint with enough
                k += 1
                while k < stop and levels[k] < head:
                    k += 1
                if k == stop:
                    if stop == n:
                        return INF
                    self._to_blocks()
                    return self._admit_blocks(t0, take, head, dur)
                t = times[k]
                end = t + dur
            k += 1
        if stop == n:
            return t  # no breakpoint left inside the hold
        self._to_blocks()
        return self._admit_blocks(t0, take, head, dur)

    def _admit_blocks(self, t: float, take: int, head: int, dur: float) -> float:
        """``admit`` on the blocked form, from ``t`` on (the caller has applied the shortcuts
        before the walk: enough units always, past the end, the time enough units stay free)."""
        bts = self._bt
        nb = len(bts)
        bls = self._bl
        off = self._off
        # (b, k): the first breakpoint after t (k may be the block's length: the next block)
        first = self._first
        b = nb - 1 if t >= first[-1] else bisect_right(first, t) - 1  # mostly the last block
        if b < 0:
            lvl = self.cap
            b = k = 0
        else:
            k = bisect_right(bts[b], t)
            lvl = bls[b][k - 1] + off[b]
        bt = bts[b]
        bl = bls[b]
        n = len(bl)
        if lvl < head:
            # move to the first breakpoint where enough units are free: in this block (most
            # answers are that close), else through the block index
            x = head - off[b]
            while k < n and bl[k] < x:
                k += 1
            if k == n:
                b, k = self._seek(b, head)
                if b == nb:
                    return INF
                bt = bts[b]
                bl = bls[b]
                n = len(bl)
            t = bt[k]
            k += 1
        if dur <= 0:
            return t
        # the hold's own breakpoints, up to its end: each must leave ``take`` units free
        x = take - off[b]
        end = t + dur
        while True:
            if k == n:
                b += 1
                if b == nb:
                    return t
                bt = bts[b]
                bl = bls[b]
                n = len(bl)
                x = take - off[b]
                k = 0
            if bt[k] >= end:
                return t  # past the hold: every later level is at least ``after`` (see above)
            if bl[k] < x:
                # too few units inside the hold: start again at the next breakpoint with enough
                k += 1
                xh = head - off[b]
                while k < n and bl[k] < xh:
                    k += 1
                if k == n:
                    b, k = self._seek(b, head)
                    if b == nb:
                        return INF
                    bt = bts[b]
                    bl = bls[b]
                    n = len(bl)
                    x = take - off[b]
                t = bt[k]
                end = t + dur
            k += 1

    # ------------------------------------------------------------------ changing

    def add(self, t: float, delta: int) -> int:
        """Apply ``delta`` units at time ``t`` and every later time; return the highest level
        from ``t`` on (for the capacity check of releases)."""
        self.changes += 1
        if delta < 0:
            if t > self._drop:
                self._drop = t
        elif delta:
            self._raised += 1
        times = self._t
        if times is None:
            return self._add_blocks(t, delta)
        levels = self._l
        assert levels is not None
        free = self._free
        if t > self._end:  # the common case: a change after every breakpoint
            self._end = t
            v = self._fin = self._fin + delta
            if v < self.low:
                self.low = v
            if delta < 0:
                self._hd = len(times)  # (t is the drop now, after every earlier time)
            times.append(t)
            levels.append(v)
            if free:
                self._thresholds_at_end(v, t, True)
            return v
        if t == self._end:  # the next most common: a change at the latest breakpoint
            v = self._fin = self._fin + delta
            if v < self.low:
                self.low = v
            levels[-1] = v
            if free:
                self._thresholds_at_end(v, t, False)
            return v
        n = len(times)
        k = bisect_right(times, t)
        if n - k >= _FLAT:
            self._to_blocks()
            return self._add_blocks(t, delta)
        if k and times[k - 1] == t:
            k -= 1
        else:  # a new breakpoint, at the level in force before it
            times.insert(k, t)
            levels.insert(k, levels[k - 1] if k else self.cap)
            n += 1
        v = levels[k] + delta
        levels[k] = v
        top = low = v
        for j in range(k + 1, n):
            v = levels[j] + delta
            levels[j] = v
            if v > top:
                top = v
            elif v < low:
                low = v
        if low < self.low:
            self.low = low
        self._fin += delta
        if free:
            # only the levels from t on moved. Down: the last level below a is the last one in
            # that part if there is one there, else where it was (before t, unchanged). Up, or
            # no change with a new breakpoint: unchanged when every level from the old answer on
            # was already at least a and the answer is not after t (the part from t on only
            # rose, and a new breakpoint at t copies a level at or after the answer); otherwise
            # searched afresh
            for a, f in free.items():
                if delta < 0:
                    j = n - 1
                    while j >= k and levels[j] >= a:
                        j -= 1
                    if j >= k:
                        free[a] = times[j + 1] if j + 1 < n else INF
                elif f > t:
                    free[a] = self._scan_free(a)
        return top

    def hold(self, s: float, e: float, take: int, back: int) -> None:
        """``add(s, -take)`` then ``add(e, back)`` (``s <= e``, ``back >= 0``): an event that
        takes units at its start and gives some back at its end. The caller skips the capacity
        check: it uses this only where ``back <= take``, and then no level from ``e`` on rises
        (every level stays at most the capacity).

        Flat and without thresholds, and starting after the last breakpoint or within ``_FLAT``
        breakpoints of the end, it is done in one pass that leaves the same breakpoints, levels,
        final level and end as the two ``add`` calls; every other case makes the two calls. The
        lower bound ``low`` then counts the levels the hold leaves (the two calls also count the
        levels from ``e`` on as the first one left them, ``take`` lower for a moment): still a
        lower bound of every level, and admission answers the same with any lower bound (it is
        only its shortcut when every level is high enough)."""
        self.changes += 1
        if back > take:
            self._raised += 1  # (levels from e on rise: see _seen)
        times = self._t
        if times is None or self._free:
            self._by_adds(s, e, take, back)
            return
        levels: list[int] = self._l  # type: ignore[assignment]
        last = self._end
        if s > last:
            # add(s, -take) appends (s, fin - take); add(e, back) appends (e, that + back), or
            # at e == s changes that breakpoint. s is the drop now (the last one is a
            # breakpoint, so at most last), after every earlier time
            self._drop = s  # (take > 0: an acquire takes at least one unit)
            self._hd = len(times)
            v = self._fin - take
            if v < self.low:
                self.low = v
            times.append(s)
            levels.append(v)
            v += back
            if e > s:
                times.append(e)
                levels.append(v)
            else:
                levels[-1] = v
            self._end = e
            self._fin = v
            return
        n = len(times)
        # k: the breakpoint at s, the first at or after s (s <= last: there is one), inserted
        # if it is after s. The walk test is add's: more than _FLAT breakpoints after s's
        # (from k + 1 on when s is one, from k on when it is inserted at k). A hold after the
        # drop (the common case: starts committed in time order) is the new drop: its search
        # starts at _hd (times[:_hd] < the old drop < s), and k is the new _hd (times[:k] < s)
        if s > self._drop:
            self._drop = s
            k = self._hd = bisect_left(times, s, self._hd)
        else:
            k = bisect_left(times, s)
        if times[k] == s:
            if n - k > _FLAT:
                self._by_adds(s, e, take, back)
                return
        else:
            if n - k >= _FLAT:
                self._by_adds(s, e, take, back)
                return
            # a new breakpoint, at the level in force before it
            times.insert(k, s)
            levels.insert(k, levels[k - 1] if k else self.cap)
            n += 1
        low = self.low
        if e > last:
            # every level from s on drops by take, then (e, the final level + back) is appended
            for j in range(k, n):
                v = levels[j] - take
                levels[j] = v
                if v < low:
                    low = v
            self.low = low
            v = self._fin - take + back
            times.append(e)
            levels.append(v)
            self._end = e
            self._fin = v
            return
        # both inside: e is a breakpoint (inserted at the level in force before it, which add(e,
        # back) would give it too once lowered and raised again); the levels from s until e drop
        # by take, those from e on by take - back (not at all for a hold giving back all it took,
        # the common case)
        k2 = bisect_left(times, e, k)  # the first breakpoint at or after e (e <= last, s <= e)
        if times[k2] != e:
            times.insert(k2, e)
            levels.insert(k2, levels[k2 - 1])  # (k2 > k: times[k] == s < e here)
            n += 1
        if k2 - k == 1:
            # one level in the window (the loop below, without its range: the common case of
            # events of one start and one end holding together)
            v = levels[k] = levels[k] - take
            if v < low:
                low = v
        else:
            for j in range(k, k2):
                v = levels[j] - take
                levels[j] = v
                if v < low:
                    low = v
        if back != take:
            d = back - take
            for j in range(k2, n):
                v = levels[j] + d
                levels[j] = v
                if v < low:
                    low = v
            self._fin += d
        self.low = low

    def _by_adds(self, s: float, e: float, take: int, back: int) -> None:
        """``hold`` as its two ``add`` calls; the give-back is no raise of a level when it gives
        back no more than was taken (the two together only lower levels: see ``_seen``)."""
        raised = self._raised
        self.add(s, -take)
        self.add(e, back)
        if back <= take:
            self._raised = raised

    def _add_blocks(self, t: float, delta: int) -> int:
        """``add`` on the blocked form."""
        free = self._free
        if t > self._end:  # the common case: a change after every breakpoint
            self._end = t
            v = self._fin = self._fin + delta
            if v < self.low:
                self.low = v
            bl = self._bl
            if bl and len(bl[-1]) < B:
                bl[-1].append(v - self._off[-1])
                self._bt[-1].append(t)
                if self._stale:
                    pass
                elif v > self._hi[-1]:
                    self._hi[-1] = v
                elif v < self._lo[-1]:
                    self._lo[-1] = v
            else:  # the last block is full (or there is none): open one
                if self._stale:
                    self._fresh()  # it stops being the last block
                bl.append([v])
                self._bt.append([t])
                self._off.append(0)
                self._hi.append(v)
                self._lo.append(v)
                self._first.append(t)
            if free:
                self._thresholds_at_end(v, t, True)
            return v
        if t == self._end:  # the next most common: a change at the latest breakpoint
            v = self._fin = self._fin + delta
            if v < self.low:
                self.low = v
            self._bl[-1][-1] += delta
            if self._stale:
                pass
            elif delta > 0:
                if v > self._hi[-1]:
                    self._hi[-1] = v
                if v - delta == self._lo[-1]:  # it may have been the block's lowest
                    self._stale = True
            elif delta < 0:
                if v < self._lo[-1]:
                    self._lo[-1] = v
                if v - delta == self._hi[-1]:  # it may have been the block's highest
                    self._stale = True
            if free:
                self._thresholds_at_end(v, t, False)
            return v
        return self._add_inside(t, delta)

    def _add_inside(self, t: float, delta: int) -> int:
        """``add`` at a time before the last breakpoint."""
        first = self._first
        if t >= first[-1]:
            # inside the last block (most changes in the middle land there): no later block to
            # move, and its extremes are left stale
            bt = self._bt[-1]
            bl = self._bl[-1]
            k = bisect_right(bt, t) - 1  # >= 0: bt[0] <= t
            if bt[k] != t:
                if len(bt) >= 2 * B:  # the block is to be split: the general path
                    return self._add_inside_general(t, delta)
                k += 1  # a new breakpoint, at the level in force before it
                bt.insert(k, t)
                bl.insert(k, bl[k - 1])
            n = len(bl)
            o = self._off[-1]
            v = bl[k] + delta
            bl[k] = v
            top = v
            if delta < 0:
                low = v
                for j in range(k + 1, n):
                    v = bl[j] + delta
                    bl[j] = v
                    if v > top:
                        top = v
                    elif v < low:
                        low = v
                if low + o < self.low:
                    self.low = low + o
            else:
                for j in range(k + 1, n):
                    v = bl[j] + delta
                    bl[j] = v
                    if v > top:
                        top = v
            self._stale = True
            self._fin += delta
            free = self._free
            if free:
                for a in free:
                    free[a] = self._scan_free_blocks(a)
            return top + o
        return self._add_inside_general(t, delta)

    def _add_inside_general(self, t: float, delta: int) -> int:
        """``add`` at a time before the last breakpoint, in any block."""
        bts = self._bt
        bls = self._bl
        off = self._off
        his = self._hi
        los = self._lo
        b = bisect_right(self._first, t) - 1
        last_block = len(bls) - 1
        if self._stale and b < last_block:
            self._fresh()  # the later blocks' extremes are read below
        if b < 0:  # before every breakpoint: a new first breakpoint at the capacity's level
            b = 0
            k = 0
            cap = self.cap
            bts[0].insert(0, t)
            bls[0].insert(0, cap - off[0])
            self._first[0] = t
            if cap > his[0]:
                his[0] = cap
            if cap < los[0]:
                los[0] = cap
        else:
            bt = bts[b]
            k = bisect_right(bt, t) - 1  # >= 0: bt[0] <= t
            if bt[k] != t:
                k += 1  # a new breakpoint, at the level in force before it
                bt.insert(k, t)
                bl0 = bls[b]
                bl0.insert(k, bl0[k - 1])
        bt = bts[b]
        bl = bls[b]
        o = off[b]
        n = len(bl)
        # the block's part from t on moves by delta (the block's highest and lowest level
        # already count an inserted breakpoint, at the level in force before it)
        if n - k <= 16:  # a short part: one pass
            v = bl[k] + delta
            bl[k] = v
            phi = plo = v
            for j in range(k + 1, n):
                v = bl[j] + delta
                bl[j] = v
                if v > phi:
                    phi = v
                elif v < plo:
                    plo = v
        else:
            part = [v + delta for v in bl[k:]]
            bl[k:] = part
            phi = max(part)
            plo = min(part)
        top = phi = phi + o
        plo += o
        # the block's highest and lowest level: the part's, or the rest's when the part held
        # the old extreme and moved away from it (the last block's are left stale instead)
        if b == last_block:
            self._stale = True
            if delta < 0 and plo < self.low:
                self.low = plo
        elif delta > 0:
            if phi > his[b]:
                his[b] = phi
            if plo - delta == los[b]:
                los[b] = min(bl) + o
        elif delta < 0:
            if plo < los[b]:
                los[b] = plo
            if phi - delta == his[b]:
                his[b] = max(bl) + o
            if plo < self.low:
                self.low = plo
        b1 = b + 1
        if b1 < len(bls):  # every later block moves as a whole
            if len(bls) - b1 <= 8:
                for j in range(b1, len(bls)):
                    off[j] += delta
                    his[j] += delta
                    los[j] += delta
            else:
                off[b1:] = [v + delta for v in off[b1:]]
                his[b1:] = [v + delta for v in his[b1:]]
                los[b1:] = [v + delta for v in los[b1:]]
            h = max(his[b1:])
            if h > top:
                top = h
            if delta < 0:
                lo = min(los[b1:])
                if lo < self.low:
                    self.low = lo
        self._fin += delta
        if n > 2 * B:  # split the block in two halves, both at its offset
            h2 = n // 2
            bts.insert(b1, bt[h2:])
            bls.insert(b1, bl[h2:])
            del bt[h2:]
            del bl[h2:]
            off.insert(b1, o)
            self._first.insert(b1, bts[b1][0])
            his[b] = max(bl) + o
            los[b] = min(bl) + o
            his.insert(b1, max(bls[b1]) + o)
            los.insert(b1, min(bls[b1]) + o)
            if b == last_block:
                self._stale = False  # both halves' extremes were just computed
        free = self._free
        if free:
            # levels from ``t`` on moved by ``delta``: find each threshold's last low point
            # again, from the end back (at worst into the unchanged part before ``t``)
            for a in free:
                free[a] = self._scan_free_blocks(a)
        return top

    def __repr__(self) -> str:
        pts = ", ".join(f"{t:g}:{v}" for t, v in zip(*self.curve()))
        return f"SemaphoreProfile(cap={self.cap}, [{pts}])"
