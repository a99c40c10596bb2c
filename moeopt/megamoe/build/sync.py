"""The sync protocol: how the stages of one rank wait for each other.

A stage boundary is a zero-duration flag event without resources; the latency of the signal
sits on the consumer's edge (λ), not inside any duration. :class:`SyncProtocol` holds those
latencies and the protocol's rules; the stage builders read them from here, never from the
constants directly, so an implementation with another protocol (the V1 kernel's software
epochs) changes them in one place.

Two waits are only known once a later stage is built; they are added to events already emitted
through the emitter's one documented late edit, :meth:`Emitter.add_deps`:

* dispatch look-ahead (:func:`wire_lookahead`): dispatch of wave ``w`` waits until GMM1 of wave
  ``w - L`` has loaded its rows;
* staged barriers (:func:`wire_stage_barriers`): every event of a stage waits for every event of
  the previous one.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from moeopt.megamoe.build.emitter import Emitter
from moeopt.megamoe.scenario import Config


@dataclass(frozen=True)
class SyncProtocol:
    """Latencies (µs, on the consumer's edge) and rules of one implementation's sync protocol."""

    name: str
    cross_rank_us: float  # a cross-rank flag: the front reorder done on every rank -> dispatch
    flag_us: float  # a cross-core flag, producer -> consumer (D2C, V2C, G2C, look-ahead, join)
    syncall_us: float  # an all-AIV SYNCALL (around SwiGLU segments, between dispatch expert groups)
    rank_barrier_us: float  # every combine of every rank in -> unpermute
    program_order: bool  # vector stages issue in program order on each AIV
    group_barriers: bool  # an all-AIV SYNCALL after every dispatched expert group and around SwiGLU segments
    lookahead: int  # dispatch of wave w waits for GMM1 of wave w - lookahead to load (0: no limit)
    lag: int  # GMM1 of wave w starts on the D2C flag of wave w + lag
    staged_barriers: bool  # every event of a stage waits for every event of the previous one


def hardware_flags(cfg: Config) -> SyncProtocol:
    """The baseline kernel's protocol: hardware cross-core flags, ``SYNCALL<AIVOnly>`` after every
    dispatched expert group and around every SwiGLU segment, a cross-rank barrier before the
    unpermute (hardware.md §2 "Sync protocol": dispatch.h@2d9d4288 L310-336, swiglu.h L627-653,
    combine.h L300-316). The baseline kernel (profile ``pto-a2a3``) runs every vector stage in
    program order on each AIV (dispatch_mega_combine.h@2d9d4288 L113-142); other profiles only
    under ``options.barriers = 'staged'``.

    Provenance (config/profiles.py): every latency is assumed, none is measured: pto-a2a3
    ``flag_latency_us`` = 1000 cycles, ``syncall_us`` = 2000 cycles at 1.8 GHz (a cost model of
    the same repository, hardware.md §4), ``cross_rank_flag_us`` = 5 µs (a fraction of the fixed
    overhead of a small fused kernel, §1); megamoe-a8w8 0.5, 1 and 5 µs."""
    return SyncProtocol(
        name="hardware_flags",
        cross_rank_us=cfg.c("cross_rank_flag_us"),
        flag_us=cfg.c("flag_latency_us"),
        syncall_us=cfg.c("syncall_us"),
        rank_barrier_us=cfg.c("cross_rank_flag_us"),
        program_order=_program_order(cfg),
        group_barriers=_program_order(cfg),
        lookahead=cfg.dispatch_lookahead,
        lag=cfg.dispatch_lag,
        staged_barriers=cfg.barriers == "staged",
    )


def software_epochs(cfg: Config) -> SyncProtocol:
    """The V1 kernel's protocol: a producer group writes arrival epochs to GM, a coordinator reads
    them in one MTE batch and publishes ready epochs its consumers poll (pseudocode.md L15-17;
    mega_expert_sync.hpp@HEAD L163, L181, L275, L297); no all-AIV SYNCALL (each group runs its own
    stage, expert after expert), an AIC-only SYNCALL only after each GMM1 expert on every cube
    core (gmm1.h@HEAD L173-181); no all-rank barrier: unpermute waits for the producer ranks'
    progress notifications (``TNOTIFY``, pseudocode.md L404-421).

    Provenance (config/profiles.py): ``epoch_sync_us`` assumed (two flag hand-offs plus a 60 ns
    poll back-off, mega_expert_sync.hpp L163); ``syncall_us`` and ``cross_rank_flag_us`` as for
    :func:`hardware_flags`."""
    return SyncProtocol(
        name="software_epochs",
        cross_rank_us=cfg.c("cross_rank_flag_us"),
        flag_us=cfg.c("epoch_sync_us"),
        syncall_us=cfg.c("syncall_us"),
        rank_barrier_us=cfg.c("cross_rank_flag_us"),
        program_order=_program_order(cfg),
        group_barriers=False,
        lookahead=cfg.dispatch_lookahead,
        lag=cfg.dispatch_lag,
        staged_barriers=cfg.barriers == "staged",
    )


def _program_order(cfg: Config) -> bool:
    """The PTO kernels run each AIV's stages in program order (dispatch_mega_combine.h@2d9d4288
    L113-142; V1: each group's stage expert after expert); other profiles only when staged."""
    return cfg.profile in ("pto-a2a3", "pto-a2a3-v1") or cfg.barriers == "staged"


PROTOCOLS = {"hardware_flags": hardware_flags, "software_epochs": software_epochs}


def wire_lookahead(
    em: Emitter,
    sync: SyncProtocol,
    dispatch_by_wave: Sequence[Sequence[str]],
    tiles_by_wave: Sequence[Sequence[str]],
) -> None:
    """Dispatch look-ahead: for every wave ``w >= L``, a flag ``g1loaded.w{w-L}`` on GMM1's tiles
    of wave ``w - L`` (a tile has read its rows when it is done), and every dispatch event of wave
    ``w`` waits for it (λ = flag latency)."""
    la = sync.lookahead
    if not la:
        return
    for w in range(la, len(dispatch_by_wave)):
        loads = tiles_by_wave[w - la]
        if not loads:
            continue
        fl = em.flag(f"g1loaded.w{w - la}", loads)
        for name in dispatch_by_wave[w]:
            em.add_deps(name, {fl: sync.flag_us})


def wire_stage_barriers(em: Emitter, sync: SyncProtocol, stages: Sequence[str]) -> None:
    """``options.barriers = 'staged'``: a flag ``barrier.{a}`` on every event of stage ``a``, and
    every event of the next stage waits for it (λ = one SYNCALL)."""
    for a, b in itertools.pairwise(stages):
        evs_a = em.stage_events(a)
        evs_b = em.stage_events(b)
        if not evs_a or not evs_b:
            continue
        bar = em.flag(f"barrier.{a}", evs_a)
        for name in evs_b:
            em.add_deps(name, {bar: sync.syncall_us})
