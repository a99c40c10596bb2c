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
``streams`` (a vector core's transfer rate and its share of the link), ``gmm``, ``activation``,
``combine``, ``urma`` (the batched GET / PUT both use), ``layered`` (the URMA kernel's layered
orchestration), ``implementation``, ``rankgraph``.

Implementations. An :class:`Implementation` names a sync protocol, core groups and one builder
per stage. :data:`BASELINE` is the PTO kernel as it ships; :data:`V1` is its rewrite, with
software epochs (``sync.software_epochs``: no all-AIV SYNCALLs, an epoch boundary per stage
hand-off) and the two-phase unpermute (``head.build_two_phase_tail``). The rest of V1 is read by
the shared stage builders from the scenario's knobs, so each mechanism is also a knob on the
baseline: fixed core groups (``options.core_groups = "v1_fixed"``, :class:`Layout`), the first
experts of GMM1 on every cube core (``options.gmm1_full_experts``, :meth:`Layout.gmm_cores`),
GMM2 taking over GMM1's cores at the first expert boundary where GMM1 is done
(``options.gmm2_join_check``; :func:`~moeopt.megamoe.build.implementation.join_expert` decides
it from a first schedule, as the kernel decides at run time), SwiGLU on an active subset
(``options.swiglu_active``), combine by source rank starting after a GMM2 expert
(``options.combine_granularity = "by_source"``, ``options.combine_start_after``).
:data:`~moeopt.megamoe.build.implementation.LAYERED` is the URMA kernel's layered orchestration
(``options.orchestration = 'layered'``, :mod:`~moeopt.megamoe.build.layered`): its own receive,
GMM1, GMM2 and combine builders and a program-order step that interleaves the stages on the
AIV1s and the cube cores.
:func:`~moeopt.megamoe.build.implementation.implementation_for` picks the composition from
``options.orchestration``, ``options.sync_protocol`` and ``options.unpermute``; ``compose`` and
the emitter are shared.
"""

from moeopt.megamoe.build.context import BuildContext, Layout
from moeopt.megamoe.build.emitter import Emitter
from moeopt.megamoe.build.implementation import (
    BASELINE,
    LAYERED,
    Implementation,
    build_rank,
    compose,
    implementation_for,
)
from moeopt.megamoe.build.plan import ExpertPlan, RankPlan
from moeopt.megamoe.build.rankgraph import RankGraph
from moeopt.megamoe.build.sync import SyncProtocol
from moeopt.registry import register_builtin

__all__ = [
    "BASELINE",
    "LAYERED",
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

register_builtin("builder", "megamoe", lambda: build_rank)
