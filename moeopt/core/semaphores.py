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
    __slots__ = ("cap", "levels", "low", "times")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.times: list[float] = []
        self.levels: list[int] = []  # level in force from times[k] until times[k+1]
        # a lower bound of every level (the capacity included): the lowest level any change
        # has produced so far (a release raising the lowest levels leaves it low, still a bound)
        self.low = cap

    def level_at(self, t: float) -> int:
        k = bisect_right(self.times, t) - 1
        return self.cap if k < 0 else self.levels[k]

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
            tj = times[j]
            if tj < end:
                need = take
            elif after <= 0:
                break
            else:
                need = after
            if levels[j] < need:
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
        if not times or t > times[-1]:  # the common case: a change after every breakpoint
            v = (levels[-1] if times else self.cap) + delta
            times.append(t)
            levels.append(v)
            if v < self.low:
                self.low = v
            return v
        if t == times[-1]:  # the next most common: a change at the latest breakpoint
            v = levels[-1] + delta
            levels[-1] = v
            if v < self.low:
                self.low = v
            return v
        pos = bisect_right(times, t)
        if pos > 0 and times[pos - 1] == t:
            start = pos - 1
        else:
            times.insert(pos, t)
            levels.insert(pos, self.cap if pos == 0 else levels[pos - 1])
            start = pos
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
        return hi

    def __repr__(self) -> str:
        pts = ", ".join(f"{t:g}:{v}" for t, v in zip(self.times, self.levels))
        return f"SemaphoreProfile(cap={self.cap}, [{pts}])"

