"""What every stage reads and no stage writes: the rank's inputs, its core layout, its sync protocol.

:class:`BuildContext` is made once per rank graph by the composition
(:func:`moeopt.megamoe.build.implementation.compose`) and handed to every stage builder. It holds
no state of the build: the only mutable parts are memo tables of names (:meth:`Layout.core_res`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from moeopt.megamoe.build.emitter import Emitter
from moeopt.megamoe.build.plan import ExpertPlan
from moeopt.megamoe.build.sync import SyncProtocol
from moeopt.megamoe.scenario import Config, CoreGroup
from moeopt.megamoe.stealing import restructure_rule

STAGES = ("dispatch", "gmm1", "activation", "gmm2", "combine")


@dataclass(frozen=True, eq=False)
class Layout:
    """Which resources each stage runs on, from the implementation's core groups.

    Resources per core ``k``: ``c{k}.AIC`` (cube: a GMM tile's K-step load / compute pipeline),
    ``c{k}.AIV0`` / ``c{k}.AIV1`` (vector cores). A late-bound stage names a
    pool placeholder instead, and the scheduler picks the member."""

    groups: Mapping[str, CoreGroup]
    members: Mapping[str, tuple[str, ...]]  # stage -> resources it may run on (joined cores included)
    late: frozenset[str]  # stages bound to a pool member at schedule time
    aiv_all: tuple[str, ...]  # every vector core of the rank
    aic_num: int
    aiv_per_core: int
    l1_late: bool  # the L1 stage slots are one pooled semaphore (a GMM stage is late-bound)
    gmm1_full_experts: int = 0  # the first experts GMM1 runs on every cube core
    gmm2_join_from: int | None = (
        None  # expert from which GMM2's joining cores take part (None: the group's own)
    )
    # GMM stages whose pinned tiles a runtime restructuring rule may move (policy.restructure):
    # queued per core, not chained in program order
    queued: frozenset[str] = frozenset()
    _core_res: dict[tuple[int, str], tuple[str, tuple[str]]] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, cfg: Config, groups: Mapping[str, CoreGroup], gmm2_join_from: int | None = None) -> Layout:
        """The layout of ``groups``; ``gmm2_join_from`` overrides the GMM2 group's static
        ``join_from_expert`` (the dynamic join, once the composition knows the expert)."""

        def resources(grp: CoreGroup) -> list[str]:
            if grp.role == "AIV":
                return [f"c{k}.AIV{j}" for k in grp.cores for j in range(cfg.aiv_per_core)]
            return [f"c{k}.{grp.role}" for k in grp.cores]

        members = {st: tuple(resources(groups[st])) for st in STAGES}
        late = frozenset(st for st in STAGES if _is_late(groups[st].role, cfg.late_bind_pools))
        for st in ("gmm1", "gmm2"):
            grp = groups[st]
            if grp.join is not None:
                extra = [r for r in resources(groups[grp.join]) if r not in members[st]]
                members[st] = members[st] + tuple(extra)
        return cls(
            groups=groups,
            members=members,
            late=late,
            aiv_all=tuple(f"c{k}.AIV{j}" for k in range(cfg.aic_num) for j in range(cfg.aiv_per_core)),
            aic_num=cfg.aic_num,
            aiv_per_core=cfg.aiv_per_core,
            l1_late="gmm1" in late or "gmm2" in late,
            gmm1_full_experts=cfg.gmm1_full_experts,
            gmm2_join_from=gmm2_join_from,
            queued=frozenset(restructure_rule(cfg.restructure).stages(cfg)),
        )

    def core_res(self, core: int, sub: str) -> tuple[str, tuple[str]]:
        """``("c3.AIV0", ("c3.AIV0",))``: a pinned resource's name and the one-resource tuple of
        it, one shared copy per (core, sub-core) (events by the thousand name the same few)."""
        key = (core, sub)
        got = self._core_res.get(key)
        if got is None:
            name = f"c{core}.{sub}"
            got = self._core_res[key] = (name, (name,))
        return got

    def vector_res(self, em: Emitter, stage: str, slot: int) -> tuple[Sequence[str], Sequence[str] | None]:
        """(resources, the pinned resource as a one-resource tuple or None when late-bound) of the
        vector event ``slot`` of ``stage``: slots go round the stage's members."""
        members = self.members[stage]
        if stage in self.late:
            return (em.pool(f"AIV-{stage}", members),), None
        r = (members[slot % len(members)],)
        return r, r

    def urma_resource(self, src: int) -> tuple[str]:
        """The AIV1 that issues the URMA GETs and PUTs of source rank ``src`` in program order
        (round the dispatch group's cores)."""
        cores = self.groups["dispatch"].cores
        return (f"c{cores[src % len(cores)]}.AIV1",)

    def gmm_cores(self, stage: str, expert: ExpertPlan) -> tuple[list[int], list[int]]:
        """(cores of the stage's own group, cores that joined) for ``expert``: GMM1's first
        ``gmm1_full_experts`` experts also run on GMM2's cores (joined without a wait); a group
        with a join takes the joined group's cores from its join expert on."""
        grp = self.groups[stage]
        own = list(grp.cores)
        if stage == "gmm1" and expert.index < self.gmm1_full_experts and not expert.shared:
            return own, [k for k in self.groups["gmm2"].cores if k not in own]
        if grp.join is not None:
            start = (
                grp.join_from_expert
                if self.gmm2_join_from is None or stage != "gmm2"
                else self.gmm2_join_from
            )
            if expert.index >= start:
                return own, [k for k in self.groups[grp.join].cores if k not in own]
        return own, []


def _is_late(role: str, late_bind_pools: Sequence[str]) -> bool:
    return role in late_bind_pools or (role.startswith("AIV") and "AIV" in late_bind_pools)


@dataclass(frozen=True, eq=False)
class BuildContext:
    """The read-only inputs of one rank's build."""

    cfg: Config
    rank: int
    world: int
    tokens: int
    topk: int
    rows: np.ndarray  # rows[src][local expert]
    own_routes: np.ndarray  # routes of this rank's own tokens to every global expert (counts[rank])
    shared_experts: int
    layout: Layout
    sync: SyncProtocol
    const: Mapping[str, float]  # constant name -> value (config/profiles.py, with provenance)
    row_bytes: int  # one dispatched row: int8 payload + fp32 scale + pad, or a bf16 row
    bpe: int  # bytes per weight / activation element

    def c(self, name: str) -> float:
        """A model constant's value (the one place stage builders read constants through)."""
        return self.const[name]

    def cube_rate(self) -> float:
        """Cube MACs per µs of one AIC at the scenario's precision."""
        return self.c("cube_mac_per_us_int8") if self.cfg.quant == "w8a8" else self.c("cube_mac_per_us_fp16")
