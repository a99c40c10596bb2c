"""A second operator adapter, written without touching the scheduler: AllGather + MatMul.

The operator (a common fused kernel next to MegaMoE): every rank holds ``rows`` rows of X; the
kernel gathers all ranks' rows and multiplies them by a local weight W (K x N). Per source rank
a vector core pulls that rank's chunk into GM (communication), then the cube cores compute the
chunk's output tiles, each tile loaded into one of two L1 buffers (double buffering), and a
vector core on the same core writes the tile back.

An adapter is nothing more than a function ``shape -> moeopt.EventGraph``: it decides the events,
their five fields and their closed-form durations. Everything after that is the generic layer,
unchanged: the greedy scheduler with any policy, the independent validator, CP-SAT's optimum and
lower bound. Stage names live only in ``labels``, which no scheduler reads.

Run: python examples/second_adapter.py
"""

from __future__ import annotations

from dataclasses import dataclass

import moeopt as m

# assumed rates for the example (not calibrated): bytes or MACs per µs
PULL_BYTES_PER_US = 30e3  # one AIV pulling a peer's rows
L1_LOAD_BYTES_PER_US = 60e3  # one core's GM -> L1
CUBE_MAC_PER_US = 8192 * 1800.0  # int8 MACs per cycle x MHz
WRITE_BYTES_PER_US = 100e3  # one AIV writing a tile back to GM
FLAG_US = 0.5  # cross-core flag on every stage edge (λ)


@dataclass(frozen=True)
class AllGatherMatmul:
    world: int = 4  # ranks
    rows: int = 128  # rows of X per rank
    k: int = 1024
    n: int = 512
    tile_n: int = 256
    cores: int = 2


def lower(shape: AllGatherMatmul) -> m.EventGraph:
    """The adapter: one rank's AllGather + MatMul as a generic event graph."""
    cores = [f"core{c}" for c in range(shape.cores)]
    g = m.EventGraph(
        semaphores={f"{c}.l1": 2 for c in cores},  # two L1 buffers per core
        pools={"AIV0": [f"{c}.AIV0" for c in cores], "AIV1": [f"{c}.AIV1" for c in cores]},
    )
    chunk_bytes = shape.rows * shape.k  # int8 rows
    tiles_per_chunk = shape.n // shape.tile_n
    tile = 0
    for src in range(shape.world):
        pull = f"pull.r{src}"
        g.add(
            m.Event(
                pull,
                resources=["AIV0:*"],  # any vector core, bound when committed
                duration_us=chunk_bytes / PULL_BYTES_PER_US,
                labels={"stage": "allgather", "src": src},
            )
        )
        for j in range(tiles_per_chunk):
            core = cores[tile % len(cores)]  # tiles dealt round robin, pinned at build time
            tile += 1
            load_bytes = shape.rows * shape.k + shape.k * shape.tile_n
            load = f"load.r{src}.t{j}"
            mm = f"mm.r{src}.t{j}"
            g.add(
                m.Event(
                    load,
                    resources=[f"{core}.MTE2"],
                    deps={pull: FLAG_US},
                    acquires={f"{core}.l1": 1},
                    duration_us=load_bytes / L1_LOAD_BYTES_PER_US,
                    labels={"stage": "load"},
                )
            )
            g.add(
                m.Event(
                    mm,
                    resources=[f"{core}.AIC"],
                    deps={load: 0.0},
                    releases={f"{core}.l1": 1},
                    duration_us=shape.rows * shape.k * shape.tile_n / CUBE_MAC_PER_US,
                    labels={"stage": "matmul"},
                )
            )
            g.add(
                m.Event(
                    f"write.r{src}.t{j}",
                    resources=["AIV1:*"],
                    deps={mm: FLAG_US},
                    colocate_with=mm,  # the L0C -> UB hand-off exists only inside one core
                    duration_us=shape.rows * shape.tile_n * 2 / WRITE_BYTES_PER_US,
                    labels={"stage": "write"},
                )
            )
    return g


def main() -> int:
    shape = AllGatherMatmul()
    g = lower(shape)
    print(f"AllGather+MatMul: {shape.world} ranks x {shape.rows} rows, K {shape.k}, N {shape.n}, "
          f"{shape.cores} cores -> {len(g)} events")
    for policy in ("earliest_start", "critical_path_first", "priority_by_stage"):
        s = m.schedule(g, policy=policy)
        m.validate_schedule(g, s)  # the independent checker accepts every schedule
        print(f"greedy {policy:<22} {s.makespan_us:8.3f} µs   last write on {s.binding['write.r3.t1']}")
    x = m.solve_exact(g, time_limit_s=20, workers=1)
    print(f"CP-SAT {x.status.value:<22} {x.best_us:8.3f} µs   lower bound {x.lower_bound_us:.3f} µs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
