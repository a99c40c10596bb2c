"""The seed-style summary of one :func:`moeopt.simulate` result: a few lines a kernel developer
reads first (time, bounds, this graph's floors, utilisation, idle, traffic, implementation,
calibration domain).

The bounds are the shape's (no orchestration moves them); the graph floors are this tiling's and
orchestration's (the longest path of its graph, the busiest role's work). Time over the floors
is what scheduling the graph could still win; floors over the bounds is what the tiling and
orchestration cost."""

from __future__ import annotations

from moeopt.megamoe.results import SimulateResult


def _over(floor: float, bound: float) -> str:
    return f"{(floor / bound - 1) * 100:+.1f}% over" if bound > 0 else "n/a over"


def format_summary(r: SimulateResult) -> str:
    """The seed-style summary of one :func:`moeopt.simulate` result (several lines)."""
    b = r["bounds"]
    f = r["floors"]
    util = "  ".join(f"{role} {100 * u:.1f}%" for role, u in r["role_utilization"].items())
    idle = r["idle_decomposition"]
    late = {st: d for st, d in idle["by_stage"].items() if d["late_bound"]}
    pinned = sum(d["avoidable_core_us"] for st, d in idle["by_stage"].items() if st not in late)
    checked = sum(d["avoidable_core_us"] for d in late.values() if d["work_conservation_exempt"] is None)
    if late:
        verdict = "holds" if checked <= 1e-3 else "broken"
        conserve = f"late-bound pools {checked:.1f} core-µs, work conservation {verdict}"
    else:
        conserve = "no late-bound pool"
    impl = r["implementation"]
    ranks = r["simulated_ranks"]
    lines = [
        f"time            {r['kernel_total_us']:.2f} µs (to the last combine; "
        f"with the tail {r['kernel_dag_end_us']:.2f} µs), slowest rank {r['slowest_rank']}",
        f"bounds          compute {b['compute_us']:.2f} / bandwidth {b['bandwidth_us']:.2f} "
        f"[{b['bandwidth_channel']}] / dependency {b['dependency_us']:.2f} µs -> {b['binding']}-bound, "
        f"{b['excess_pct']:+.1f}% above it" + ("  ** BELOW THE BOUND **" if b.get("violated") else ""),
        f"graph floors    longest path {f['longest_path_us']:.2f} / busiest role {f['busiest_pipe']} "
        f"{f['busiest_pipe_us']:.2f} µs (this tiling and orchestration) -> {f['excess_pct']:+.1f}% above; "
        f"floor {_over(f['lower_bound_us'], b['lower_bound_us'])} the bounds",
        f"utilisation     {util}",
        f"avoidable idle  {idle['avoidable_core_us']:.1f} core-µs "
        f"(statically pinned pools {pinned:.1f}; {conserve})",
        f"GM->L1          {r['traffic_bytes']['gm_to_l1'] / 1e6:.1f} MB",
        f"implementation  {impl['id']} (profile {impl['profile']}), compile {impl['compile_fingerprint']}, "
        f"policy {r['policy']}",
        f"ranks           {len(ranks)} simulated of {impl['topology']['world']} "
        f"(identical routing signatures share one)"
        if "rank_kernel_total_us" not in r
        else f"ranks           all {impl['topology']['world']} timed and judged, the slowest one's "
        f"routing signature analysed (ranks = 'slowest')",
    ]
    cal = r["calibration"]
    dom = cal["domain"]
    if cal["out_of_domain"] or dom is None:  # (no domain is always out of domain)
        lines.append("calibration     OUT OF DOMAIN: " + "; ".join(cal["reasons"]))
    else:
        lines.append(f"calibration     inside domain {dom['id']}")
    return "\n".join(lines)
