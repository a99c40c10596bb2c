"""Write the small synthetic Chrome trace shipped as test data (tests/data/trace/megamoe_small.json).

It is moeopt's own prediction, exported: a small MegaMoE shape (16 tokens per rank, top-2,
2 ranks x 2 local experts, h = hidden_dim = 1024, 4 cube cores), the slowest rank's greedy
schedule. Open the file in https://ui.perfetto.dev or chrome://tracing.

    python examples/make_sample_trace.py [-o PATH]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import moeopt as m
from moeopt.trace import write_chrome_trace

DEFAULT = Path(__file__).resolve().parent.parent / "tests" / "data" / "trace" / "megamoe_small.json"


def sample_scenario() -> m.Scenario:
    return m.Scenario(
        workload=m.Workload(tokens=16, topk=2, world=2, local_experts=2, routing="uniform"),
        h=1024,
        hidden_dim=1024,
        aic_num=4,
        profile="megamoe-a8w8",
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", type=Path, default=DEFAULT)
    args = ap.parse_args()
    r = m.simulate(sample_scenario())
    rank = r["slowest_rank"]
    rr = r["rank_results"][rank]
    args.output.parent.mkdir(parents=True, exist_ok=True)
    write_chrome_trace(
        args.output,
        rr["schedule"],
        rr["graph"],
        label_key="stage",
        metadata={"source": "examples/make_sample_trace.py", "rank": rank},
    )
    print(f"wrote {args.output}: {rr['n_events']} events, makespan {rr['schedule'].makespan_us:.3f} µs")


if __name__ == "__main__":
    main()
