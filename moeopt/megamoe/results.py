"""The keys of a :func:`moeopt.simulate` result, one ``TypedDict`` per part.

At run time a result is made of plain dicts and lists (the product contract: ``r["bounds"]
["binding"]``, JSON-friendly apart from each rank's schedule and graph). These classes exist
for the type checker and for the reader: mypy checks every key that the adapter writes and that
the tools built on it read, and the string under each key is its documentation. The "The
``simulate`` result" section of ``docs/usage.md`` is generated from this module (key order,
types and those strings), and the generator checks a real result against these classes: a key
added to the result must be added here first.

How the parts nest::

    SimulateResult                      r = simulate(scenario)
    ├── rank_results: {rank: RankResult}
    │   ├── events: [EventRow]
    │   ├── contract: RowContract, waves: Waves
    │   └── (as below, for this rank)
    ├── bounds: Bounds                  (PhysicalBounds + the judgement against the time)
    ├── floors: Floors                  (GraphFloors + the judgement against the time)
    ├── idle_decomposition: IdleDecomposition
    │   ├── by_role: {role: RoleIdle}
    │   ├── by_stage: {pool: StageIdle}
    │   └── samples: [IdleSample]
    ├── critical_path: [CriticalStep]
    ├── implementation: Implementation (compile_point: CompilePoint, topology: Topology)
    ├── calibration: Calibration (domain: CalibrationDomainEntry or None)
    └── provenance: {constant: ConstantEntry}

Optional keys are those of the ``total=False`` base classes (``CriticalStepWait``,
``ConstantEntryDomain``): present only when they apply.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypedDict

from moeopt.core.events import EventGraph
from moeopt.core.schedule import Schedule, WaitKind

BoundKind = Literal["compute", "bandwidth", "dependency"]
"""The three physical lower bounds of a rank."""
FloorKind = Literal["longest_path", "pipe"]
"""The two floors of one rank's event graph."""
Channel = Literal["hbm", "remote_in", "remote_out"]
"""The aggregate channels the bandwidth bound is taken over."""
Why = Literal["dependency", "resource queueing", "capacity", "source"]
"""What set the start of a critical-path step."""


# --------------------------------------------------------------------------- bounds
class PhysicalBounds(TypedDict):
    """A rank's physical lower bounds, from the shape, the topology and the constants only: no
    tiling or orchestration moves them (what :func:`moeopt.megamoe.analysis.physical_bounds`
    returns)."""

    compute_us: float
    """MACs / (cube cores x cube rate)"""
    bandwidth_us: float
    """the largest per-channel bandwidth bound"""
    bandwidth_channel: Channel
    """which channel gives it"""
    bandwidth_by_channel_us: dict[Channel, float]
    """channel -> bytes the algorithm must move / the channel's aggregate rate"""
    dependency_us: float
    """one token's chain through the stages, each stage's smallest share with the whole die on
    it (its expert's weights streamed once, its row's GMM1 compute, an activation start-up)"""


class Bounds(PhysicalBounds):
    """The physical bounds judged against the rank's time (``r["bounds"]``)."""

    binding: BoundKind
    """the largest of the three: compute, bandwidth or dependency"""
    lower_bound_us: float
    """its value"""
    excess_pct: float
    """how far the time is above it, in %"""
    violated: bool
    """the time is below it (only with check_bounds=False; else BoundViolation)"""


class GraphFloors(TypedDict):
    """Lower bounds of this rank's event graph, which move with the tiling and the orchestration
    (what :func:`moeopt.megamoe.analysis.graph_floors` returns)."""

    longest_path_us: float
    """longest data-dependency path of this graph to the last combine (durations + λ, unlimited
    cores; program-order chains of pinned cores left out)"""
    pipe_us: dict[str, float]
    """per execution role (AIC, AIV0, AIV1): the larger of the most work pinned to one
    member and the role's work over its members, counting the work that must end before the last
    combine"""
    busiest_pipe: str
    """the role with the largest `pipe_us`"""
    busiest_pipe_us: float
    """its value"""


class Floors(GraphFloors):
    """This graph's floors judged against the rank's time (``r["floors"]``): the excess over them
    is what scheduling this graph could still win."""

    binding: FloorKind
    """the larger floor: `longest_path` or `pipe` (the busiest role)"""
    lower_bound_us: float
    """its value"""
    excess_pct: float
    """how far the time is above it, in %"""


# --------------------------------------------------------------------------- idle decomposition
class RoleIdle(TypedDict):
    """The idle ledger of one execution role: busy + forced + avoidable = members x span."""

    members: int
    """resources of this role on the rank (`c<k>.<role>`)"""
    span_us: float
    """the span the ledger covers: from 0 to the rank's time (µs)"""
    busy_core_us: float
    """member-µs busy within the span"""
    forced_core_us: float
    """idle member-µs while no ready work could use the idle member (forced by the DAG)"""
    avoidable_core_us: float
    """idle member-µs while ready work could have used it (a maximum matching of ready events to
    idle members at each instant)"""


class StageIdle(TypedDict):
    """Avoidable idle of one stage pool (what the work-conservation guardrail reads)."""

    avoidable_core_us: float
    """idle member-µs of this pool while this pool's own work was ready (stages sharing members
    may each count the same idle member: the ledger is `by_role`)"""
    late_bound: bool
    """the pool binds at dispatch time (else statically pinned)"""
    work_conservation_exempt: str | None
    """why the guardrail does not check it (statically pinned, or colocated with its producer
    tile), or null"""


class IdleSample(TypedDict):
    """One interval where a pool had avoidable idle (the first few of each pool)."""

    stage: str
    """the pool (a key of `by_stage`)"""
    from_us: float
    """start of the interval (µs)"""
    to_us: float
    """end of the interval (µs)"""
    idle_members: int
    """idle members of the pool during it"""
    ready: int
    """events of the pool ready to start during it"""


class IdleDecomposition(TypedDict):
    """Forced vs avoidable idle of one rank (``r["idle_decomposition"]``)."""

    forced_core_us: float
    """idle core-µs while no ready work could use the idle member (forced by the DAG), summed
    over the core roles AIC, AIV0, AIV1 of `by_role`"""
    avoidable_core_us: float
    """idle core-µs while ready work could have used it, summed over the same roles"""
    by_role: dict[str, RoleIdle]
    """execution role (AIC, AIV0, AIV1) -> its ledger, each member counted once"""
    by_stage: dict[str, StageIdle]
    """stage pool -> its avoidable idle (a late-bound stage's pinned events, such as the URMA GETs,
    are a pool `<stage>:pinned` of their own)"""
    samples: list[IdleSample]
    """sample avoidable-idle intervals, up to five per pool"""


# --------------------------------------------------------------------------- critical path
class _CriticalStepBase(TypedDict):
    event: str
    """event name"""
    stage: str | None
    """its stage label"""
    start_us: float
    """start (µs)"""
    end_us: float
    """end (µs)"""
    resources: list[str]
    """resources it held"""
    why: Why
    """what set its start"""
    wait_us: float
    """how long it waited past its dependencies (resource queueing or semaphore admission)"""


class CriticalStepWait(TypedDict, total=False):
    """The keys of a critical-path step that are present only when they apply."""

    semaphore: str
    """the semaphore whose capacity it waited for (steps whose `why` is `capacity`)"""
    resource: str
    """the resource it queued for (steps whose `why` is `resource queueing`)"""
    lambda_us: float
    """the sync latency λ of the edge from `after` (steps that name a predecessor)"""


class CriticalStep(_CriticalStepBase, CriticalStepWait):
    """One step of a critical path, which lists the events from the first to the last."""

    after: str | None
    """the event it waited for (null for the first step)"""


# --------------------------------------------------------------------------- per-event rows
class EventRow(TypedDict):
    """One event of a rank's schedule."""

    name: str
    """event name"""
    stage: str | None
    """stage label"""
    start_us: float
    """start (µs)"""
    end_us: float
    """end (µs)"""
    core: str
    """resources it held, joined with `+`"""
    waited_for: str | None
    """the predecessor, resource or semaphore that set its start (null for a source)"""
    wait_kind: WaitKind
    """what set its start"""
    wait_us: float
    """how long it waited after its dependencies were met"""
    ready_us: float
    """when its dependencies (plus λ) were met"""


# --------------------------------------------------------------------------- busy times
class BusyTimes(TypedDict):
    """Busy and idle time per resource, role and stage (what
    :func:`moeopt.megamoe.analysis.busy_times` returns; the rank result carries its keys)."""

    resource_busy_us: dict[str, float]
    """busy µs per resource"""
    resource_idle_us: dict[str, float]
    """idle µs per resource within the rank's span"""
    resource_utilization: dict[str, float]
    """busy / span per resource (0..1)"""
    role_utilization: dict[str, float]
    """busy / span summed over the resources of a role"""
    stage_busy_us: dict[str, float]
    """busy core-µs per stage"""


# --------------------------------------------------------------------------- one rank
class RowContract(TypedDict):
    """The grouped-GEMM row contract of one rank."""

    group_sizes: list[int]
    """rows (token, expert pairs) per expert"""
    group_offsets: list[int]
    """start of each expert's rows in the compact, expert-sorted array"""
    group_padded_offsets: list[int]
    """start of each expert's rows in the padded array (no block straddles two experts)"""
    m_blocks: int
    """blocks of padded rows the grouped GEMM walks"""


class Paths(TypedDict):
    """Which of the kernel's code paths a rank took."""

    front_reorder: str
    """`FullLoad`, `OneCore`, `MultiCore` (the PTO kernel's rule, `kernel.front_reorder =
    kernel_rule`) or `closed_form` (one fitted cost)"""
    combine: str
    """`DirectSmall` (per GMM2 tile), `DirectLarge` (per expert, in lanes), `by_source` (whole rows
    per source rank, V1) or `urma` (batched PUT)"""


class Waves(TypedDict):
    """Waves of the two grouped GEMMs."""

    gmm1: int
    """waves of GMM1"""
    gmm2: int
    """waves of GMM2"""


class RankResult(TypedDict):
    """One rank's result (``r["rank_results"][rank]``; ranks with one routing signature share
    one dict)."""

    rank: int
    """this rank (the representative of those sharing the dict)"""
    kernel_total_us: float
    """end of this rank's last combine (µs)"""
    tail_end_us: float
    """end of the tail event in this rank's own schedule (µs)"""
    tail_us: float
    """duration of the unpermute tail (µs)"""
    head_us: float
    """duration of the front reorder head (µs)"""
    events: Sequence[EventRow]
    """one row per event, in graph order (a sequence built on first access)"""
    bounds: Bounds
    """physical lower bounds of this rank"""
    floors: Floors
    """lower bounds of this rank's event graph (longest path, busiest role)"""
    idle_decomposition: IdleDecomposition
    """forced / avoidable idle of this rank"""
    critical_path: list[CriticalStep]
    """critical path of this rank"""
    traffic_bytes: dict[str, float]
    """bytes moved per channel by this rank's events: `gm_to_l1` (global memory -> the cube
    cores' L1, GMM loads), `hbm` (through HBM), `remote_in` (read from other ranks, dispatch),
    `remote_out` (written to other ranks, combine), `gm_to_ub` / `ub_to_gm` (global memory <->
    the vector cores' unified buffer)"""
    contract: RowContract
    """grouped-GEMM row contract"""
    waves: Waves
    """number of GMM1 and GMM2 waves"""
    paths: Paths
    """the kernel code paths this rank took"""
    n_events: int
    """events in this rank's graph"""
    schedule: Schedule
    """the greedy `moeopt.Schedule` (starts, ends, bindings, waits, fingerprint())"""
    graph: EventGraph
    """the `moeopt.EventGraph` that was scheduled (from a worker process: rebuilt on first access)"""
    resource_busy_us: dict[str, float]
    """busy µs per resource"""
    resource_idle_us: dict[str, float]
    """idle µs per resource"""
    resource_utilization: dict[str, float]
    """busy / span per resource"""
    role_utilization: dict[str, float]
    """busy / span per role"""
    stage_busy_us: dict[str, float]
    """busy core-µs per stage"""
    ranks_sharing_signature: list[int]
    """every rank this result stands for"""
    kernel_dag_end_us: float
    """this rank's end including the unpermute tail (µs)"""


# --------------------------------------------------------------------------- implementation, calibration
class CompilePoint(TypedDict):
    """The compile-time parameters of the kernel."""

    tile_m: int
    """GMM output tile rows (M)"""
    tile_n: int
    """GMM output tile columns (N)"""
    tile_k: int
    """K step of one L1 load"""
    l1_stages: int
    """L1 buffers per tile load pipeline (2 = double buffering)"""
    quant: str
    """quantisation mode of the GMMs"""
    topo_urma: bool
    """communication topology: false = peer write, true = URMA batched GET/PUT"""
    swizzle_n: int
    """N-columns per swizzle group"""


class Topology(TypedDict):
    """The machine a result was simulated on."""

    world: int
    """ranks"""
    aic_num: int
    """cube cores per rank"""
    aiv_num: int
    """vector cores per rank (aic_num x vector cores per cube core)"""


class Implementation(TypedDict):
    """What was simulated (``r["implementation"]``)."""

    id: str
    """implementation id (`<profile>.<variant>`, `generic` without a profile)"""
    profile: str | None
    """the profile name or null"""
    source_refs: list[str]
    """kernel source references (`file@rev:lines`) the model was read from"""
    compile_fingerprint: str
    """12 hex digits hashing the compile point"""
    compile_point: CompilePoint
    """the compile point"""
    topology: Topology
    """world, aic_num, aiv_num"""


class CalibrationDomainEntry(TypedDict):
    """Where a profile's measured constants are valid."""

    id: str
    """the domain's name"""
    implementation: str
    """the implementation it was measured on"""
    compile_point: dict[str, int | str | bool]
    """the compile-point values it was measured at (only those that matter)"""
    shape: dict[str, int | list[int]]
    """the shape values it was measured at, or `[lo, hi]` the range its measurements span"""
    topology: dict[str, int]
    """the topology it was measured on (only what matters)"""
    note: str
    """where the measurement comes from"""


class Calibration(TypedDict):
    """Whether a result lies inside its profile's calibration domain (``r["calibration"]``)."""

    domain: CalibrationDomainEntry | None
    """the calibration domain, or null without one"""
    out_of_domain: bool
    """true when any reason below applies"""
    reasons: list[str]
    """why the result is outside the domain"""
    overridden_constants: list[str]
    """constants the scenario's `[calibration]` replaced"""


class ConstantEntryDomain(TypedDict, total=False):
    """The key of a constant's entry present only for a measured constant."""

    domain: str
    """the calibration domain it was measured in"""


class _ConstantEntryBase(TypedDict):
    value: float
    """the value used"""
    unit: str
    """its unit"""
    tag: str
    """provenance tag: `spec`, `algo`, `impl`, `measured` or `assumed`"""
    provenance: str
    """`<tag>: <source>`, the source a human can check"""


class ConstantEntry(_ConstantEntryBase, ConstantEntryDomain):
    """One model constant as used (``r["provenance"][name]``)."""


# --------------------------------------------------------------------------- the result
class _SimulateFields(TypedDict):
    """The fields every :class:`SimulateResult` has."""

    kernel_total_us: float
    """execution time: end of the last combine on the slowest rank (µs)"""
    kernel_dag_end_us: float
    """the same including the unpermute tail after the cross-rank barrier (µs)"""
    slowest_rank: int
    """the rank whose `kernel_total_us` is the time (lowest index on ties)"""
    rank_results: dict[int, RankResult]
    """rank -> that rank's result; ranks with one routing signature share one dict"""
    bounds: Bounds
    """the slowest rank's physical lower bounds (shape only)"""
    floors: Floors
    """the slowest rank's graph floors (this tiling and orchestration)"""
    idle_decomposition: IdleDecomposition
    """the slowest rank's forced / avoidable idle"""
    critical_path: list[CriticalStep]
    """the slowest rank's critical path, event by event from the start"""
    traffic_bytes: dict[str, float]
    """bytes moved per channel on the slowest rank (gm_to_l1, hbm, remote_in, remote_out,
    gm_to_ub, ub_to_gm; see the rank result)"""
    stage_busy_us: dict[str, float]
    """busy core-µs per stage (head and tail included) on the slowest rank"""
    resource_busy_us: dict[str, float]
    """busy µs per resource (`c<k>.AIC`, `c<k>.AIV0`, `c<k>.AIV1`)"""
    resource_idle_us: dict[str, float]
    """idle µs per resource within the rank's span"""
    resource_utilization: dict[str, float]
    """busy / span per resource (0..1)"""
    role_utilization: dict[str, float]
    """busy / span summed over the resources of a role (AIC, AIV0, AIV1)"""
    implementation: Implementation
    """implementation id, profile, source references, compile point and its fingerprint, topology"""
    policy: str
    """name of the scheduling policy used"""
    calibration: Calibration
    """calibration domain of the profile and whether this result is inside it"""
    out_of_domain: bool
    """true when the result lies outside the calibration domain (reasons in `calibration`)"""
    provenance: dict[str, ConstantEntry]
    """every constant used: value, unit, provenance tag and source, calibration domain"""
    simulated_ranks: list[int]
    """representative ranks actually simulated (one per routing signature)"""


class SimulateResult(_SimulateFields, total=False):
    """What :func:`moeopt.simulate` returns; the per-rank parts repeat the slowest rank's."""

    rank_kernel_total_us: dict[int, float]
    """every rank's time; only with ``simulate(..., ranks="slowest")``, whose ``rank_results``
    and ``simulated_ranks`` hold the slowest rank's routing signature alone"""


__all__ = [
    "BoundKind",
    "Bounds",
    "BusyTimes",
    "Calibration",
    "CalibrationDomainEntry",
    "Channel",
    "CompilePoint",
    "ConstantEntry",
    "ConstantEntryDomain",
    "CriticalStep",
    "CriticalStepWait",
    "EventRow",
    "FloorKind",
    "Floors",
    "GraphFloors",
    "IdleDecomposition",
    "IdleSample",
    "Implementation",
    "PhysicalBounds",
    "RankResult",
    "RoleIdle",
    "RowContract",
    "SimulateResult",
    "StageIdle",
    "Topology",
    "Waves",
    "Why",
]
