"""URMA batched transfers, shared by dispatch (GET) and combine (PUT).

With ``kernel.topo_urma`` a remote source's rows move as one batched operation issued from an
AIV1 of the dispatch group (round the group's cores by source rank), in program order on it.
"""

from __future__ import annotations

from typing import Any

from moeopt.megamoe.build.context import BuildContext
from moeopt.megamoe.build.emitter import Emitter

# direction -> (rate constant, cross-rank channel, local traffic channel)
_DIRECTION = {
    "get": ("urma_get_bytes_per_us", "remote_in", "ub_to_gm"),
    "put": ("urma_put_bytes_per_us", "remote_out", "gm_to_ub"),
}


def urma_batch(
    ctx: BuildContext,
    em: Emitter,
    direction: str,
    name: str,
    stage: str,
    src: int,
    nbytes: int,
    deps: dict[str, float],
    labels: dict[str, Any],
    ops: int = 1,
    chain: bool = True,
) -> str:
    """One batched GET (rows in from ``src``) or PUT (rows back to ``src``):
    ``ops × urma_op_us + bytes / urma_get_bytes_per_us`` (``urma_put_bytes_per_us``), holding the
    cross-rank channel (``remote_in`` / ``remote_out``) and ``hbm`` bandwidth for the bytes.
    ``ops``: the batch commits the event pays (one; a layered PUT segment pays those its rows
    complete, possibly none); ``chain``: in program order on its AIV1 now (the layered
    orchestration wires it later).

    Provenance (config/profiles.py): ``urma_get_bytes_per_us`` measured on arch35 (hardware.md
    §5), ``urma_put_bytes_per_us`` assumed symmetric to it, ``urma_op_us`` assumed equal to the
    measured dispatch call; the pto-a2a3 kernel has no URMA path (no values)."""
    rate, channel, local = _DIRECTION[direction]
    dur = ops * ctx.c("urma_op_us") + nbytes / ctx.c(rate)
    acq: dict[str, int] = {}
    rel: dict[str, int] = {}
    em.bw(acq, rel, channel, nbytes, dur)
    em.bw(acq, rel, "hbm", nbytes, dur)
    em.count(local, nbytes)
    res = ctx.layout.urma_resource(src)
    return em.emit(name, stage, res, deps, acq, rel, dur, labels, chain_on=res if chain else None)
