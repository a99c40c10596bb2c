"""Random event graphs with the shape of a MegaMoE kernel, for benchmarks and tests.

The generator knows nothing of the real kernel's costs; it reproduces the *structure* the
schedulers must handle at scale:

* per expert, a chain of dispatch segments on the vector cores (``AIV0``), pinned round robin;
* the expert's output tiles, each split into a load phase (GM -> L1, holding units of the shared
  ``hbm_bw`` semaphore for its duration, and taking one of its core's two L1 slots) and a compute
  phase on the cube (``AIC``, freeing the slot); tiles are dealt to cores by a rolling cursor and
  each core runs its loads and its computes in program order (dependency chains);
* per tile, an activation on ``AIV1`` colocated with the compute, and a combine write on a
  late-bound ``AIV0`` pool member.

With ``late_bind_tiles=True`` the tiles are not dealt to cores: load and compute take any free
``AIC`` pool member (colocated), with one global L1 slot semaphore of two slots per core — the
"dispatch-time binding" variant, where many tiles compete for the same pool and semaphores.

Sites are ``core<k>`` with the roles ``AIC``, ``AIV0`` and ``AIV1``, every role also pooled.
Tiles of one expert share their durations (one tile shape), as in a grouped GEMM.
"""

from __future__ import annotations

import random

from moeopt.core.events import Event, EventGraph

ROLES = ("AIC", "AIV0", "AIV1")


def layered_graph(
    num_events: int,
    *,
    seed: int = 0,
    sites: int = 24,
    tiles_per_expert: tuple[int, int] = (4, 24),
    dispatch_per_expert: tuple[int, int] = (2, 8),
    bandwidth_units: int = 16,
    late_bind_tiles: bool = False,
    with_semaphores: bool = True,
) -> EventGraph:
    """A MegaMoE-shaped random DAG with about ``num_events`` events (never fewer).

    Args:
        num_events: target size; experts are added until it is reached.
        seed: all randomness comes from ``random.Random(seed)``: same arguments, same graph.
        sites: number of cores; each has the roles AIC, AIV0, AIV1, all pooled.
        tiles_per_expert / dispatch_per_expert: inclusive ranges drawn per expert.
        bandwidth_units: capacity of the shared ``hbm_bw`` semaphore held by every load phase.
        late_bind_tiles: tiles on pool placeholders instead of a rolling core cursor.
        with_semaphores: ``False`` leaves every semaphore out (precedence and resources only).
    """
    if num_events < 1:
        raise ValueError(f"num_events must be >= 1, got {num_events}")
    rng = random.Random(seed)
    pools = {role: [f"core{k}.{role}" for k in range(sites)] for role in ROLES}
    sems: dict[str, int] = {}
    if with_semaphores:
        sems["hbm_bw"] = bandwidth_units
        if late_bind_tiles:
            sems["l1_slot"] = 2 * sites
        else:
            sems.update({f"l1_slot.core{k}": 2 for k in range(sites)})
    g = EventGraph(semaphores=sems, pools=pools)
    count = 0
    expert = 0
    cursor = 0  # rolling tile cursor over the cores
    disp_cursor = 0
    last_load: dict[int, str] = {}
    last_compute: dict[int, str] = {}

    while count < num_events:
        e = expert
        expert += 1
        n_disp = rng.randint(*dispatch_per_expert)
        prev = None
        disp_names = []
        for d in range(n_disp):
            name = f"e{e}.dispatch{d}"
            g.add(
                Event(
                    name,
                    resources=[f"core{disp_cursor}.AIV0"],
                    deps={prev: 0.5} if prev else {},
                    duration_us=round(rng.uniform(0.5, 3.0), 3),
                    labels={"stage": "dispatch", "expert": e},
                )
            )
            disp_cursor = (disp_cursor + 1) % sites
            disp_names.append(name)
            prev = name
            count += 1
        n_tiles = rng.randint(*tiles_per_expert)
        load_us = round(rng.uniform(1.0, 6.0), 3)
        compute_us = round(rng.uniform(2.0, 8.0), 3)
        act_us = round(rng.uniform(0.5, 2.5), 3)
        units = rng.randint(1, max(1, min(4, bandwidth_units // 4)))
        for t in range(n_tiles):
            load = f"e{e}.t{t}.load"
            comp = f"e{e}.t{t}.compute"
            act = f"e{e}.t{t}.act"
            comb = f"e{e}.t{t}.combine"
            # a tile needs the dispatch segments covering its rows: a random prefix of the chain
            need = disp_names[rng.randint(0, len(disp_names) - 1)]
            load_deps = {need: 0.3}
            comp_deps = {load: 0.0}
            if late_bind_tiles:
                aic = ["AIC:*"]
                slot = "l1_slot"
            else:
                core = cursor
                cursor = (cursor + 1) % sites
                aic = [f"core{core}.AIC"]
                slot = f"l1_slot.core{core}"
                if core in last_load:
                    load_deps[last_load[core]] = 0.0
                if core in last_compute:
                    comp_deps[last_compute[core]] = 0.0
                last_load[core] = load
                last_compute[core] = comp
            acq: dict[str, int] = {}
            rel_hbm: dict[str, int] = {}
            if with_semaphores:
                acq = {"hbm_bw": units, slot: 1}
                rel_hbm = {"hbm_bw": units}
            g.add(
                Event(
                    load,
                    resources=aic if late_bind_tiles else [],
                    deps=load_deps,
                    acquires=acq,
                    releases=rel_hbm,
                    duration_us=load_us,
                    labels={"stage": "gmm_load", "expert": e, "tile": t},
                )
            )
            g.add(
                Event(
                    comp,
                    resources=aic,
                    deps=comp_deps,
                    releases={slot: 1} if with_semaphores else {},
                    colocate_with=load if late_bind_tiles else None,
                    duration_us=compute_us,
                    labels={"stage": "gmm_compute", "expert": e, "tile": t},
                )
            )
            g.add(
                Event(
                    act,
                    resources=["AIV1:*"],
                    deps={comp: 0.2},
                    colocate_with=comp,
                    duration_us=act_us,
                    labels={"stage": "activation", "expert": e, "tile": t},
                )
            )
            g.add(
                Event(
                    comb,
                    resources=["AIV0:*"],
                    deps={act: 0.4},
                    duration_us=round(rng.uniform(0.5, 4.0), 3),
                    labels={"stage": "combine", "expert": e, "tile": t},
                )
            )
            count += 4
    return g
