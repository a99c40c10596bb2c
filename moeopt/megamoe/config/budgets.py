"""Buffer budgets the kernel enforces, as feasibility rules of a scenario.

A tiling the kernel as built cannot hold is refused by the scenario layer (and pruned as
infeasible by the search, with the rule as its reason), never simulated as if it ran. Each rule
names its budget and its source; the sizes are :class:`Const` values with provenance tags
(``../shared/hardware.md`` §2 for the kernel, §3 for the chip):

* **L1** (every profile): ``l1_stages`` stages of the A and B k-slices of one tile; the PTO
  kernel (``pto-a2a3``) also keeps the per-channel scales of the B columns in each stage
  (``L1 A 64 KiB + B 128 KiB + scale 2 KiB per stage`` at 128 x 256 x 512);
* **L0A / L0B** (``pto-a2a3``): two buffers each of ``tile_m x k`` and ``k x tile_n`` for the
  smallest K part the cube takes (its fractal K), so only a tile no K split could hold is
  refused;
* **L0C** (``pto-a2a3``): one buffer of ``tile_m x tile_n`` fp32 accumulators. A larger output
  tile would have to be computed as several L0 passes, which the model does not charge, so it is
  refused (not silently timed as one pass);
* **UB, dispatch** (``pto-a2a3``): the host check ``2 x dispatch tile <= 128 KiB`` with a tile
  of 2 rows of the packed row (``h + 32`` bytes int8, ``2h`` bf16, 32-byte aligned);
* **front reorder** (``pto-a2a3``): the kernel picks FullLoad / OneCore / MultiCore by the
  routes of a rank (:func:`front_reorder_path`); MultiCore needs ``Pow4Ceil(ceil(routes /
  6144))`` sort cores, at most the AIV count;
* **K alignment** (``pto-a2a3``): both GEMMs' K (``h``, ``hidden_dim / 2``) a multiple of the
  cube's fractal K (32 int8, 16 fp16);
* **HCCL window** (``pto-a2a3``, checked on the routing when a rank's graph is built): the rows a
  rank receives must fit ``maxOutputSize`` (81940 by default); the window is sized from it
  (``offsetA = window / 3`` holds ``maxOut x (K + 32)``), so the rows are the binding limit.

``megamoe-a8w8`` (arch35) and no profile check the L1 rule only: ``hardware.md`` gives no L0 / UB
sizes or host checks of that kernel (its profile's own default tile, 256 x 256 x 512, fits its
assumed 512 KiB L1 only without scales), so nothing more is claimed for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from moeopt.megamoe.config.provenance import Const

HW = "../shared/hardware.md"
KIB = 1024


def _c(name: str, value: float, unit: str, tag: str, source: str) -> Const:
    return Const(name, value, unit, tag, source)


BUDGET_CONSTANTS: dict[str, Const] = {
    c.name: c
    for c in (
        _c("l0a_bytes", 64 * KIB, "B", "spec", f"{HW} §3: L0A 64 KiB (utils/const_args.hpp@HEAD:19-27)"),
        _c("l0b_bytes", 64 * KIB, "B", "spec", f"{HW} §3: L0B 64 KiB (utils/const_args.hpp@HEAD:19-27)"),
        _c("l0c_bytes", 128 * KIB, "B", "spec", f"{HW} §3: L0C 128 KiB (utils/const_args.hpp@HEAD:19-27)"),
        _c("ub_bytes", 192 * KIB, "B", "spec", f"{HW} §3: UB 192 KiB (utils/const_args.hpp@HEAD:19-27)"),
        _c(
            "l0a_buffers",
            2,
            "buffers",
            "impl",
            f"{HW} §2 GMM: PtoGmmPreloadAsyncFixpipe<... L0A=2 ...> (op_kernel/gmm_common.h@HEAD:22-23)",
        ),
        _c(
            "l0b_buffers",
            2,
            "buffers",
            "impl",
            f"{HW} §2 GMM: PtoGmmPreloadAsyncFixpipe<... L0B=2 ...> (op_kernel/gmm_common.h@HEAD:22-23)",
        ),
        _c(
            "l0c_buffers",
            1,
            "buffers",
            "impl",
            f"{HW} §2 GMM: L0C=1, single L0C (utils/pto_gmm_preload_async_fixpipe_quant.hpp:158-173)",
        ),
        _c("l0c_element_bytes", 4, "B", "spec", f"{HW} §2 GMM: L0C 128 KiB = a 128 x 256 fp32 tile"),
        _c("cube_k_fractal_int8", 32, "elements", "spec", f"{HW} §3: int8 cube 16x32x16"),
        _c("cube_k_fractal_fp16", 16, "elements", "spec", f"{HW} §3: fp16 cube 16x16x16"),
        _c(
            "dispatch_ub_budget_bytes",
            128 * KIB,
            "B",
            "impl",
            f"{HW} §2 Dispatch: host check 2 x dispatchTileBytes <= 128 KiB "
            "(tiling_builder.cpp:43-49,409-421)",
        ),
        _c(
            "dispatch_ub_buffers",
            2,
            "buffers",
            "impl",
            f"{HW} §2 Dispatch: 2 ping-pong UB buffers at offset 0 and 96 KiB (dispatch.h@HEAD:262-301)",
        ),
        _c(
            "ub_align_bytes",
            32,
            "B",
            "spec",
            f"{HW} §2 Front reorder: UB sizes in align32 units (tiling_builder.cpp@HEAD:215-272)",
        ),
        _c(
            "sort_loop_max_routes",
            6144,
            "routes",
            "impl",
            f"{HW} §2 Front reorder: sortLoopMaxElement = 192 KiB / 32 B / 32*32 = 6144 "
            "(tiling_builder.cpp@HEAD:215-272)",
        ),
        _c(
            "full_load_max_k",
            8192,
            "elements",
            "impl",
            f"{HW} §2 Front reorder: FullLoad needs K <= 8192 (tiling_builder.cpp@HEAD:215-272)",
        ),
        _c(
            "max_output_rows",
            81940,
            "rows",
            "impl",
            f"{HW} §2 Workspace / window: maxOutputSize default 81940 (run.sh:20); the HCCL window is sized "
            "from it, offsetA = window/3 holds maxOut x (K+32) (tiling_builder.cpp:28-41, run.sh:75-90)",
        ),
    )
}


@dataclass(frozen=True)
class BudgetSet:
    """Which buffer rules a profile's kernel enforces (see the module docstring)."""

    l1_scales: bool = False
    l0: bool = False
    ub_dispatch: bool = False
    front: bool = False
    k_align: bool = False
    max_output_rows: bool = False

    def constants(self, quant: str = "w8a8") -> list[str]:
        """The constants these rules read: budget constants, and ``scale_bytes`` of
        :mod:`~moeopt.megamoe.config.implementation` (``l1_bytes`` is a profile constant)."""
        names: list[str] = []
        fractal = "cube_k_fractal_int8" if quant == "w8a8" else "cube_k_fractal_fp16"
        if self.l1_scales and quant == "w8a8":
            names.append("scale_bytes")
        if self.l0:
            names += [
                "l0a_bytes",
                "l0b_bytes",
                "l0c_bytes",
                "l0a_buffers",
                "l0b_buffers",
                "l0c_buffers",
                "l0c_element_bytes",
                fractal,
            ]
        if self.ub_dispatch:
            names += ["dispatch_ub_budget_bytes", "dispatch_ub_buffers", "ub_align_bytes"]
        if self.front:
            names += ["sort_loop_max_routes", "full_load_max_k", "ub_bytes", "ub_align_bytes"]
        if self.k_align:
            names.append(fractal)
        if self.max_output_rows:
            names.append("max_output_rows")
        return sorted(set(names))


PROFILE_BUDGETS: Mapping[str | None, BudgetSet] = {
    "pto-a2a3": BudgetSet(
        l1_scales=True, l0=True, ub_dispatch=True, front=True, k_align=True, max_output_rows=True
    ),
    "megamoe-a8w8": BudgetSet(),
    None: BudgetSet(),
}


def budget(name: str) -> float:
    return BUDGET_CONSTANTS[name].value


def align(x: int, to: int) -> int:
    return -(-x // to) * to


def pow4_ceil(n: int) -> int:
    """The smallest power of 4 at least ``n`` (the kernel's ``Pow4Ceil``)."""
    p = 1
    while p < n:
        p *= 4
    return p


def front_reorder_path(routes: int, k: int, experts: int) -> tuple[str, int]:
    """``(path, sort cores)`` the PTO kernel's front reorder takes for ``routes`` routes of one
    rank, ``K = k`` and ``experts`` experts in all (tiling_builder.cpp@HEAD L215-272, hardware.md
    §2 "Front reorder"): FullLoad iff the routes and K fit one UB (``36 align32(routes) + 13
    align32(K) + align32(4 experts) + 64 <= UB``, routes <= 6144, K <= 8192, K % 32 == 0), else
    OneCore iff routes <= 6144, else MultiCore on ``Pow4Ceil(ceil(routes / 6144))`` sort cores."""
    a = int(budget("ub_align_bytes"))
    most = int(budget("sort_loop_max_routes"))
    ub = int(budget("ub_bytes"))
    full = (
        routes <= most
        and k <= budget("full_load_max_k")
        and k % a == 0
        and 36 * align(routes, a) + 13 * align(k, a) + align(4 * experts, a) + 64 <= ub
    )
    if full:
        return "FullLoad", 1
    if routes <= most:
        return "OneCore", 1
    return "MultiCore", pow4_ceil(-(-routes // most))
