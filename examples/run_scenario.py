"""Simulate a scenario file and print the seed-style summary.

Usage: python examples/run_scenario.py [SCENARIO.toml] [dotted.path=value ...]
"""

from __future__ import annotations

import os
import sys

from moeopt.megamoe import load_scenario, parse_override_value, simulate


def summary(r: dict) -> str:
    b = r["bounds"]
    util = "  ".join(f"{role} {100 * u:.1f}%" for role, u in r["role_utilization"].items())
    return "\n".join(
        [
            f"time            {r['kernel_total_us']:.2f} µs (to the last combine; "
            f"with the tail {r['kernel_dag_end_us']:.2f} µs)",
            f"bounds          compute {b['compute_us']:.2f} / bandwidth {b['bandwidth_us']:.2f} "
            f"[{b['bandwidth_channel']}] / dependency {b['dependency_us']:.2f} µs -> {b['binding']}-bound, "
            f"{b['excess_pct']:+.1f}% above it",
            f"utilisation     {util}",
            f"avoidable idle  {r['idle_decomposition']['avoidable_core_us']:.1f} core-µs",
            f"GM->L1          {r['traffic_bytes']['gm_to_l1'] / 1e6:.1f} MB",
            f"implementation  {r['implementation']['id']}  out_of_domain={r['out_of_domain']}",
        ]
    )


def main(argv: list[str]) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    path = argv[0] if argv else os.path.join(here, "scenario_basic.toml")
    overrides = {}
    for item in argv[1:]:
        key, _, value = item.partition("=")
        overrides[key] = parse_override_value(value)
    print(summary(simulate(load_scenario(path, overrides))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
