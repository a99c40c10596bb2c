"""Free-unit profile of one counting semaphore, as the greedy scheduler builds it.

The profile is a step function of time: ``level(t)`` free units, starting at the capacity and
changing at committed breakpoints (an acquire takes units at an event's start, a release gives
them back at an event's end). Several changes at one instant are merged; ``level(t)`` is the
value after every change at ``t`` has been applied, so a unit released at ``t`` can be
acquired at ``t``.

Units acquired by an event whose release has not been committed yet are taken for ever, as
far as this profile knows: that is what makes admission decisions safe while the consumer
that will free the slot is still unscheduled.
"""

from __future__ import annotations

import math
from bisect import bisect_right

INF = math.inf


B = 64
"""Breakpoints per block: the profile keeps the highest and the lowest level of each complete
run of ``B`` consecutive breakpoints, so that a search for the next breakpoint with enough (or
too few) free units skips whole blocks instead of walking every breakpoint of a long busy
stretch; groups of ``B`` blocks are skipped at once by ``max`` / ``min`` over their entries."""


class SemaphoreProfile:
    __slots__ = ("_last_low", "bmax", "bmin", "cap", "levels", "low", "times")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.times: list[float] = []
        self.levels: list[int] = []  # level in force from times[k] until times[k+1]
        # per indexed block b (levels[b*B : (b+1)*B]): its highest and lowest level; complete
        # blocks are indexed when a search first needs them, and kept up to date by ``add``
        self.bmax: list[int] = []
        self.bmin: list[int] = []
        # a lower bound of every level (the capacity included): the lowest level any change
        # has produced so far (a release raising the lowest levels leaves it low, still a bound)
        self.low = cap
        # threshold a -> index of the last breakpoint whose level is below a (-1: none), for the
        # thresholds admissions have asked about; kept up to date by ``add``. An event that keeps
        # ``a`` units after its end can start no earlier than the breakpoint after that one, so
        # admission never walks the long tail of a profile whose units are held until releases
        # not committed yet (the cost that made late-bound slots quadratic).
        self._last_low: dict[int, int] = {}

    def level_at(self, t: float) -> int:
        k = bisect_right(self.times, t) - 1
        return self.cap if k < 0 else self.levels[k]

    def last_below(self, a: int) -> int:
        """Index of the last breakpoint whose level is below ``a`` (-1: none)."""
        got = self._last_low.get(a)
        if got is None:
            self._last_low[a] = got = self._scan_last_below(a)
        return got

    def _index(self) -> None:
        """Index every complete block not indexed yet (``add`` leaves new blocks to this)."""
        levels = self.levels
        bmax = self.bmax
        if len(bmax) * B + B > len(levels):
            return
        bmin = self.bmin
        for k in range(len(bmax) * B, len(levels) - B + 1, B):
            block = levels[k : k + B]
            bmax.append(max(block))
            bmin.append(min(block))

    def _scan_last_below(self, a: int) -> int:
        self._index()
        levels = self.levels
        bmin = self.bmin
        k = len(levels) - 1
        stop = len(bmin) * B  # the breakpoints after the last complete block, one by one
        while k >= stop:
            if levels[k] < a:
                return k
            k -= 1
        b = len(bmin) - 1
        if b < 0:
            return -1
        first = b - b % B  # blocks one by one down to a group of B blocks, then groups at once
        while b >= first and bmin[b] >= a:
            b -= 1
        if b < first:
            while b >= 0 and min(bmin[max(b - B + 1, 0) : b + 1]) >= a:
                b -= B
            if b < 0:
                return -1
            while bmin[b] >= a:
                b -= 1
        k = b * B + B - 1
        while levels[k] >= a:
            k -= 1
        return k

    def first_at_least(self, j: int, a: int) -> int:
        """Index of the first breakpoint at or after ``j`` whose level is at least ``a``
        (``len(levels)``: none)."""
        self._index()
        levels = self.levels
        bmax = self.bmax
        n = len(levels)
        nb = len(bmax)
        b = j // B
        if b < nb:
            stop = b * B + B
            while j < stop:
                if levels[j] >= a:
                    return j
                j += 1
            b += 1
            stop = b - b % B + B  # blocks one by one up to a group of B blocks, then groups
            if stop > nb:
                stop = nb
            while b < stop and bmax[b] < a:
                b += 1
            if b == stop:
                while b < nb and max(bmax[b : b + B]) < a:
                    b += B
                if b > nb:
                    b = nb
                while b < nb and bmax[b] < a:
                    b += 1
            if b < nb:
                j = b * B
                while levels[j] < a:
                    j += 1
                return j
            j = nb * B
        while j < n:  # after the last complete block
            if levels[j] >= a:
                return j
            j += 1
        return n

    def first_below(self, j: int, a: int) -> int:
        """Index of the first breakpoint at or after ``j`` whose level is below ``a``
        (``len(levels)``: none)."""
        self._index()
        levels = self.levels
        bmin = self.bmin
        n = len(levels)
        nb = len(bmin)
        b = j // B
        if b < nb:
            stop = b * B + B
            while j < stop:
                if levels[j] < a:
                    return j
                j += 1
            b += 1
            stop = b - b % B + B  # as in first_at_least
            if stop > nb:
                stop = nb
            while b < stop and bmin[b] >= a:
                b += 1
            if b == stop:
                while b < nb and min(bmin[b : b + B]) >= a:
                    b += B
                if b > nb:
                    b = nb
                while b < nb and bmin[b] >= a:
                    b += 1
            if b < nb:
                j = b * B
                while levels[j] >= a:
                    j += 1
                return j
            j = nb * B
        while j < n:
            if levels[j] < a:
                return j
            j += 1
        return n

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
        times = self.times
        levels = self.levels
        after = take - give_back
        if after < 0:
            after = 0
        # units needed at the start instant itself (after every change at that instant): a
        # zero-length hold gives its units back at the very instant it takes them
        head = take if dur > 0 else after
        if head <= 0:
            return t
        n = len(times)
        if after > 0:
            # ``after`` units are needed from t' on for ever: t' lies after the last breakpoint
            # whose level is below ``after``; from there on every level is high enough for the
            # part after the hold, so only the hold's own window is left to check
            last = self.last_below(after)
            if last >= 0:
                if last == n - 1:
                    return INF
                if times[last + 1] > t:
                    t = times[last + 1]
        k = bisect_right(times, t) - 1
        lvl = self.cap if k < 0 else levels[k]
        j = k + 1
        # A walk to the next breakpoint with enough units steps through up to 32 breakpoints
        # inline (most answers are that close) and hands a longer one over to the block index;
        # the walk through a hold's own breakpoints stays inline (it ends at the hold's end).
        if lvl < head:
            # move to the first breakpoint where enough units are free
            stop = j + 32 if j + 32 < n else n
            while j < stop and levels[j] < head:
                j += 1
            if j == stop < n:  # 32 steps without enough units: the block index goes on
                j = self.first_at_least(j, head)
            if j >= n:
                return INF
            t = times[j]
            j += 1
        if dur <= 0:
            return t
        end = t + dur
        while j < n:
            if times[j] >= end:
                break  # past the hold: every later level is at least ``after`` (see above)
            if levels[j] < take:
                # too few units inside the hold: start again at the next breakpoint with enough
                j += 1
                stop = j + 32 if j + 32 < n else n
                while j < stop and levels[j] < head:
                    j += 1
                if j == stop < n:
                    j = self.first_at_least(j, head)
                if j >= n:
                    return INF
                t = times[j]
                end = t + dur
            j += 1
        return t

    def add(self, t: float, delta: int) -> int:
        """Apply ``delta`` units at time ``t`` and every later time; return the highest level
        from ``t`` on (for the capacity check of releases)."""
        times = self.times
        levels = self.levels
        last_low = self._last_low
        if not times or t > times[-1]:  # the common case: a change after every breakpoint
            v = (levels[-1] if times else self.cap) + delta
            times.append(t)
            levels.append(v)
            if v < self.low:
                self.low = v
            if last_low:
                n1 = len(levels) - 1
                for a in last_low:
                    if v < a:
                        last_low[a] = n1
            return v
        if t == times[-1]:  # the next most common: a change at the latest breakpoint
            v = levels[-1] + delta
            levels[-1] = v
            if v < self.low:
                self.low = v
            n = len(levels)
            if len(self.bmax) * B == n:  # the latest breakpoint closes an indexed block
                tail = levels[-B:]
                self.bmax[-1] = max(tail)
                self.bmin[-1] = min(tail)
            if last_low:
                n1 = n - 1
                for a, k in last_low.items():
                    if v < a:
                        last_low[a] = n1
                    elif k == n1:
                        last_low[a] = self._scan_last_below(a)
            return v
        pos = bisect_right(times, t)
        if pos > 0 and times[pos - 1] == t:
            start = pos - 1
        else:
            times.insert(pos, t)
            levels.insert(pos, self.cap if pos == 0 else levels[pos - 1])
            start = pos
            if last_low:
                for a, k in last_low.items():
                    if k >= pos:
                        last_low[a] = k + 1
        n = len(levels)
        if n - start <= 16:  # a short suffix: one pass
            hi = levels[start] + delta
            lo = self.low
            for k in range(start, n):
                v = levels[k] + delta
                levels[k] = v
                if v > hi:
                    hi = v
                if v < lo:
                    lo = v
            self.low = lo
        else:
            moved = [v + delta for v in levels[start:]]
            levels[start:] = moved
            hi = max(moved)
            if delta < 0:
                lo = min(moved)
                if lo < self.low:
                    self.low = lo
        # the complete blocks from the one holding ``start`` on: their breakpoints moved or changed
        b0 = start // B
        last = len(self.bmax) * B  # (blocks not indexed yet are indexed when a search needs them)
        if b0 * B < last:
            self.bmax[b0:] = [max(levels[k : k + B]) for k in range(b0 * B, last, B)]
            self.bmin[b0:] = [min(levels[k : k + B]) for k in range(b0 * B, last, B)]
        if last_low:
            # levels from ``start`` on moved by ``delta``: find each threshold's last low point
            # again, from the end back (at worst into the unchanged part before ``start``)
            for a in last_low:
                last_low[a] = self._scan_last_below(a)
        return hi

    def __repr__(self) -> str:
        pts = ", ".join(f"{t:g}:{v}" for t, v in zip(self.times, self.levels))
        return f"SemaphoreProfile(cap={self.cap}, [{pts}])"
