"""What one stage hands to the next: frozen, typed values of event names.

Program order (a stage's events in the order it emitted them) is kept in every sequence here.
A stage reads another stage's output only through these; it never looks another stage's events
up in the emitter.
"""

from __future__ import annotations

from collections.abc import Mapping
from operator import itemgetter
from types import MappingProxyType
from typing import NamedTuple

import numpy as np

from moeopt.megamoe.build.plan import Item


class DispatchOut(NamedTuple):
    flags: tuple[str, ...]  # d2c.w{w}: wave w's rows are in (one flag per GMM1 wave; none when layered)
    events: tuple[tuple[str, ...], ...]  # each wave's dispatch events (URMA GETs included), in order
    # layered: (expert, m-block) -> the flag d2c.e{e}.m{mb} on the receives that bring its rows
    ready: Mapping[tuple[int, int], str] = MappingProxyType({})
    # layered: the AIV1 each event of ``events`` issues from (its program order is wired later)
    owners: tuple[tuple[str, ...], ...] = ()


class GmmTiles(NamedTuple):
    """A GMM stage's tiles in program order, one entry per tile in every column."""

    items: tuple[Item, ...]  # (wave, expert, tile)
    events: tuple[str, ...]  # the tile's (last K chunk's) event on its core
    cores: tuple[int, ...]  # the core the tile is pinned to (-1: late-bound)
    heads: tuple[str, ...] = ()  # the tile's first K chunk's event (the same as events when not cut)

    def events_by_wave(self, waves: int) -> list[list[str]]:
        out: list[list[str]] = [[] for _ in range(waves)]
        for w, a, b in self._runs(0):
            out[w].extend(self.events[a:b])
        return out

    def events_by_expert(self) -> dict[int, list[str]]:
        """Expert -> its tiles' events, experts in order of first appearance."""
        out: dict[int, list[str]] = {}
        for e, a, b in self._runs(1):
            if e in out:
                out[e].extend(self.events[a:b])
            else:
                out[e] = list(self.events[a:b])
        return out

    def _runs(self, field: int) -> list[tuple[int, int, int]]:
        """``(value, first, end)`` of each run of consecutive tiles with one value of the items'
        ``field`` (0: wave, 1: expert): tiles come in such runs by the thousand, and a run's
        events are taken by one slice."""
        items, n = self.items, len(self.items)
        if len(self.events) != n:
            raise ValueError("GmmTiles: items and events differ in length")
        if not n:
            return []
        vals = np.fromiter(map(itemgetter(field), items), np.int64, n)
        cut = (np.flatnonzero(vals[1:] != vals[:-1]) + 1).tolist()
        starts = [0, *cut]
        return list(zip(vals[starts].tolist(), starts, [*cut, n]))


class Gmm1Out(NamedTuple):
    tiles: GmmTiles
    done: str  # gmm1_done: every GMM1 tile computed (a joining GMM2 group waits for it)
    full_sync: str | None = None  # the AIC-only SYNCALL after the last GMM1 expert on every core


class ActivationOut(NamedTuple):
    by_mgroup: Mapping[tuple[int, int], tuple[str, ...]]  # (expert, m-block) -> what GMM2 waits on
    by_chunk: Mapping[tuple[int, int, int], tuple[str, ...]]  # (expert, m-block, K chunk) -> the same
    colocated: bool  # activation events share the core of their GMM1 tile (on-chip hand-off)


class Gmm2Out(NamedTuple):
    tiles: GmmTiles
    expert_done: Mapping[int, str]  # g2c.e{e}: every GMM2 tile of expert e computed


class CombineOut(NamedTuple):
    events: tuple[str, ...]  # every combine event (URMA PUTs included), in order
    colocated: bool  # combine events share the core of their GMM2 tile (on-chip hand-off)
    experts: tuple[int, ...] = ()  # the local expert of each event
    waves: tuple[int, ...] = ()  # layered: the macro wave of each event
    owners: tuple[str, ...] = ()  # layered: the AIV1 each event issues from (program order wired later)
