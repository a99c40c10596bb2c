"""The builder: one destination rank's MegaMoE execution unrolled into a generic EventGraph.

Resources per core ``k``: ``c{k}.AIC`` (cube: a GMM tile's K-step load / compute pipeline),
``c{k}.AIV0`` / ``c{k}.AIV1`` (vector cores). Stage names live only in
event labels; the scheduler never sees them. Stage boundaries are zero-duration flag events
without resources; their sync latency sits on the consumer edge (λ), not inside durations.

How it is built (:func:`build_rank` -> :func:`~moeopt.megamoe.build.implementation.compose`):

1. ``plan``: experts, tile walks, GMM1 / GMM2 waves and program order, once, as frozen values;
2. ``context``: the read-only inputs of every stage (:class:`BuildContext`: constants, core
   layout from the implementation's core groups, sync protocol);
3. the stages, in order, each a function ``(ctx, emitter, plan, hand-offs...) -> hand-off``
   (``handoff``: frozen named tuples of event names): ``head`` (front reorder), ``dispatch``
   (incl. URMA GETs), ``gmm`` (GMM1 and GMM2: core assignment, L1/L2 residency, cost formulas,
   naming, emission), ``activation``, ``gmm`` again, ``combine`` (incl. URMA PUTs), ``head``'s
   tail (unpermute). Each documents the formula it encodes; the constants and their provenance
   are in ``config/profiles.py``;
4. ``emitter``: the only state of a build. It owns the event list, stage membership, program
   order (``emit(..., chain_on=resource)``), traffic and MAC counters, semaphores and pools, and
   the one late edit (``add_deps``: dispatch look-ahead, staged barriers, both in ``sync``);
5. ``rankgraph``: the result, :class:`RankGraph`.

Modules: ``plan``, ``context``, ``emitter``, ``sync``, ``handoff``, ``head``, ``dispatch``,
``gmm``, ``activation``, ``combine``, ``urma`` (the batched GET / PUT both use),
``implementation``, ``rankgraph``.

Adding an implementation (the V1 kernel next). An :class:`Implementation` names a sync protocol,
core groups and one builder per stage; :data:`BASELINE` is today's. V1 would be:

* core groups: a function returning V1's fixed groups (GMM1 on AIC 0-15, GMM2 on 16-23 joining
  all cores after GMM1, dispatch / SwiGLU on AIV0 / AIV1 of blocks 0-15, combine on AIV0 of
  16-23); :class:`Layout` turns them into resources, :meth:`Layout.gmm_cores` decides per expert
  which cores a GMM stage uses (where V1's "all 24 AIC for the first experts" would go);
* sync protocol: a :class:`SyncProtocol` of software epochs (its λ from arrival, coordinator,
  ready and poll constants), ``program_order = False`` (no all-AIV SYNCALLs) and its own rank
  barrier latency;
* stages: the shared builders where V1 does the same (``build_dispatch``, ``build_gmm1``,
  ``build_gmm2``, which already take a join flag), new functions with the same signature where
  it does not: per-expert SwiGLU on the active group, a combine that also waits for GMM2's
  ``expert_done`` of its start expert, a tail with the two-phase unpermute and no all-rank
  barrier;
* :func:`~moeopt.megamoe.build.implementation.implementation_for` returns it for V1's
  implementation id. ``compose`` and the emitter do not change.
"""

from moeopt.megamoe.build.context import BuildContext, Layout
from moeopt.megamoe.build.emitter import Emitter
from moeopt.megamoe.build.implementation import (
    BASELINE,
    Implementation,
    build_rank,
    compose,
    implementation_for,
)
from moeopt.megamoe.build.plan import ExpertPlan, RankPlan
from moeopt.megamoe.build.rankgraph import RankGraph
from moeopt.megamoe.build.sync import SyncProtocol
from moeopt.registry import register

__all__ = [
    "BASELINE",
    "BuildContext",
    "Emitter",
    "ExpertPlan",
    "Implementation",
    "Layout",
    "RankGraph",
    "RankPlan",
    "SyncProtocol",
    "build_rank",
    "compose",
    "implementation_for",
]

register("builder", "megamoe", lambda: build_rank, replace=True)
