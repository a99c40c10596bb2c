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


class SemaphoreProfile:
    __slots__ = ("_last_low", "cap", "levels", "low", "times")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.times: list[float] = []
        self.levels: list[int] = []  # level in force from times[k] until times[k+1]
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
            levels = self.levels
            k = len(levels) - 1
            while k >= 0 and levels[k] >= a:
                k -= 1
            self._last_low[a] = got = k
        return got

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
        if lvl < head:
            # move to the first breakpoint where enough units are free
            while j < n and levels[j] < head:
                j += 1
            if j >= n:
                return INF
            t = times[j]
            j += 1
        end = t + dur
        while j < n:
            if times[j] >= end:
                break  # past the hold: every later level is at least ``after`` (see above)
            if levels[j] < take:
                j += 1
                while j < n and levels[j] < head:
                    j += 1
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
            if last_low:
                n1 = len(levels) - 1
                for a, k in last_low.items():
                    if v < a:
                        last_low[a] = n1
                    elif k == n1:
                        del_k = n1 - 1
                        while del_k >= 0 and levels[del_k] >= a:
                            del_k -= 1
                        last_low[a] = del_k
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
        hi = -1
        lo = self.low
        for k in range(start, len(levels)):
            v = levels[k] + delta
            levels[k] = v
            if v > hi:
                hi = v
            if v < lo:
                lo = v
        self.low = lo
        if last_low:
            # levels from ``start`` on moved by ``delta``: find each threshold's last low point
            # again, from the end back (at worst into the unchanged part before ``start``)
            for a in last_low:
                k = len(levels) - 1
                while k >= 0 and levels[k] >= a:
                    k -= 1
                last_low[a] = k
        return hi

    def __repr__(self) -> str:
        pts = ", ".join(f"{t:g}:{v}" for t, v in zip(self.times, self.levels))
        return f"SemaphoreProfile(cap={self.cap}, [{pts}])"
