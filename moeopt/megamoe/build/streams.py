"""Transfer streams of the vector cores: how fast one runs, and what the link's queue costs the cube.

A *stream* is one vector core moving rows to or from another rank's window (dispatch pulls,
combine writes back) or its own (the local source goes through the same window path). Three
rules, each a closed form the stage builders apply per event:

1. **Per-stream rate.** One AIV moves ``aiv_remote_read_bytes_per_us`` (pulling) or
   ``aiv_remote_write_bytes_per_us`` (writing back) when nothing limits it but itself; the rows
   of this rank's own source move at ``aiv_local_bytes_per_us`` either way (on pto-a2a3 the
   kernel takes the same window path for them, so the profile sets it to the per-stream rate; the
   arch35 kernel has a local path of its own, measured separately).
2. **Fair share of the link.** ``S`` remote streams of a stage that run together (the
   stage's structure says how many: the sources of a dispatch wave, the write-back tasks of a
   combine expert, at most the stage's cores) share the rank's aggregate
   (``remote_in_bytes_per_us`` / ``remote_out_bytes_per_us``): each runs at
   ``f = min(r, aggregate / S)``. The stream's event holds ``f`` of the channel's units, so the
   aggregate semaphore still binds where stages overlap.
3. **A throttled stream takes a share of the cube cores' GM->L1 paths.** When ``S`` streams
   write back through a link that serves fewer at full rate, the share ``1 − f / r`` of each
   stream waits in the die's queues; each such stream holds
   ``remote_write_excess_share × (1 − f / r)`` of the ``gm_l1`` channel (the cube cores' load
   paths, :func:`~moeopt.megamoe.build.gmm.declare_gmm_semaphores`), so ``S`` streams take
   ``remote_write_excess_share × (S − aggregate / r)`` of it: GMM tiles load more slowly while
   an over-subscribed write-back runs. The kernel's own notes describe the effect: more combine
   AIVs, or batched combine writes, contend with GMM2 for HBM and slow it (overview.md@2d9d4288
   "有效的优化点" / "无效的优化点"); the V1 redesign moved combine to 8 AIVs for that reason
   (overview_v1.md "优化原则" 3). The share is calibrated where the effect was measured
   (hardware.md §1: GMM2 expert 0 ran 57 µs before combine started, later experts about 97 µs
   beside combine's 32 write-back streams); its linear form in the throttled streams is assumed.

With ``options.bandwidth_contention = false`` none of this applies: every stream runs at its own
rate and holds nothing (the seed's contention-free model).
"""

from __future__ import annotations

from typing import NamedTuple

from moeopt.megamoe.build.context import BuildContext
from moeopt.megamoe.build.emitter import Emitter

# direction -> (per-stream rate constant, the rank's aggregate channel)
_DIRECTION = {
    "read": ("aiv_remote_read_bytes_per_us", "remote_in"),
    "write": ("aiv_remote_write_bytes_per_us", "remote_out"),
}


class StreamRate(NamedTuple):
    """One stream's rate and the share of its own rate the link denies it."""

    bytes_per_us: float
    throttle: float  # 1 - f / r: 0 when the stream runs at its own rate


def stream_rate(ctx: BuildContext, direction: str, remote: bool, concurrent: int) -> StreamRate:
    """The rate of one stream among ``concurrent`` remote streams of its stage (rules 1 and 2)."""
    if not remote:
        return StreamRate(ctx.c("aiv_local_bytes_per_us"), 0.0)
    const, channel = _DIRECTION[direction]
    r = ctx.c(const)
    if not ctx.cfg.bandwidth_contention or concurrent <= 1:
        return StreamRate(r, 0.0)
    f = min(r, ctx.c(f"{channel}_bytes_per_us") / concurrent)
    return StreamRate(f, 1.0 - f / r)


def queue_units(ctx: BuildContext, em: Emitter, throttle: float, busy_share: float = 1.0) -> int:
    """Units of ``gm_l1`` a write-back stream holds while ``throttle`` of its rate waits in the
    link's queue (rule 3); ``busy_share``: the part of the event's time its remote bytes take."""
    if throttle <= 0 or not em.has("gm_l1"):
        return 0
    share = ctx.c("remote_write_excess_share") * throttle * busy_share
    return min(em.capacity("gm_l1"), round(share * em.capacity("gm_l1")))
