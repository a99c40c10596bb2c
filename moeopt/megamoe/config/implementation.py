"""Implementation constants of the kernel that the graph builder reads: numbers fixed in the
kernel source (``impl:``), by the hardware (``spec:``) or by the algorithm (``algo:``), each a
:class:`Const` with its ``file:line`` source. The builder modules import the plain values below;
``r["provenance"]`` lists the constants a run used (see :func:`implementation_constants_used`).
"""

from __future__ import annotations

from moeopt.megamoe.config.provenance import Const

HW = "../shared/hardware.md"

DISPATCH_BATCH_ROWS_C = Const(
    "dispatch_batch_rows",
    2,
    "rows",
    "impl",
    f"{HW} §2 Dispatch: kDispatchGatherUbMoveNum = 2, rows pulled per UB batch (dispatch.h@HEAD:25-31)",
)
DISPATCH_BATCH_ROWS = int(DISPATCH_BATCH_ROWS_C.value)
