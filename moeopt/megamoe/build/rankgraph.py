"""The built rank: the event graph plus what the analyses need to read it."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

import numpy as np

from moeopt.core.events import EventGraph
from moeopt.core.schedule import Schedule
from moeopt.core.state import picked
from moeopt.megamoe.build.emitter import ChainEdges
from moeopt.megamoe.build.plan import ExpertPlan
from moeopt.megamoe.contract import GroupedGemmContract


@dataclass
class RankGraph:
    """A built rank: the graph plus what the analyses need to read it."""

    rank: int
    graph: EventGraph
    experts: list[ExpertPlan]
    contract: GroupedGemmContract
    stage_members: dict[str, tuple[str, ...]]  # stage -> resources it may run on
    late_stages: set[str]
    colocated_stages: set[str]
    traffic_bytes: dict[str, float]
    macs: float
    algo_hbm_bytes: float
    algo_remote_in_bytes: float
    algo_remote_out_bytes: float
    combine_events: list[str]
    chain_edges: AbstractSet[tuple[str, str]]  # (an emitter's ChainEdges)
    tail_event: str
    head_event: str
    waves_gmm1: int
    waves_gmm2: int
    paths: dict[str, str] = field(default_factory=dict)  # front_reorder, combine: the code paths taken
    dropped_semaphores: list[str] = field(default_factory=list)  # could never bind; not declared
    _data_preds: list[tuple[tuple[int, float], ...]] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    _greedy: tuple[object, Schedule] | None = field(default=None, init=False, repr=False, compare=False)

    def keep_schedule(self, policy: object, s: Schedule) -> None:
        """Keep the greedy schedule of this graph (``normalize=False``) that the builder made
        with ``policy`` (GMM2's join decision reads one): :meth:`take_schedule` hands it on."""
        self._greedy = (policy, s)

    def take_schedule(self, policy: object) -> Schedule | None:
        """The kept greedy schedule if it was made with ``policy``, once (``None`` otherwise):
        the graph is not scheduled twice when nothing changed it since the build."""
        kept, self._greedy = self._greedy, None
        return kept[1] if kept is not None and kept[0] == policy else None

    def chain_positions(self) -> tuple[np.ndarray, np.ndarray]:
        """The chain edges as positions (graph order) of their first and their second events,
        edge ``k`` being ``(first[k], second[k])`` (int64 arrays; each edge once, in no
        particular order)."""
        edges = self.chain_edges
        if isinstance(edges, ChainEdges):  # (without the pairs of its runs)
            first, second = edges.endpoints()
        else:
            first = [p for p, _q in edges]
            second = [q for _p, q in edges]
        index = self.graph.compiled().index
        return (
            np.fromiter(picked(index, first), np.int64, len(first)),
            np.fromiter(picked(index, second), np.int64, len(second)),
        )

    def data_preds(self) -> list[tuple[tuple[int, float], ...]]:
        """Per event index (graph order), its predecessors ``(index, λ)`` without the edges that
        only chain it in program order on a pinned resource (data dependencies; built once)."""
        if self._data_preds is None:
            cg = self.graph.compiled()
            index = cg.index
            # one pass over the chain edges, each dropping its predecessor from the event's
            # current tuple: an event chained after several events loses them one by one, in
            # whatever order the set yields them, and the pairs left keep their order. (Grouping
            # the edges per event first, in a dict, then filtering once per event cost a third
            # more instructions: callgrind, pto M=2048, 6,128 chain edges, 20.9M -> 14.0M.)
            preds = list(cg.preds)
            for a, b in self.chain_edges:
                i = index[b]
                j = index[a]
                ps = preds[i]
                if len(ps) == 2:  # the usual case: one data edge and the chain edge
                    p0, p1 = ps
                    preds[i] = (p1,) if p0[0] == j else (p0,) if p1[0] == j else ps
                else:  # a name is a predecessor once: at most one pair goes
                    preds[i] = tuple([pl for pl in ps if pl[0] != j])
            self._data_preds = preds
        return self._data_preds
