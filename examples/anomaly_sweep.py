"""How often, and by how much, does the greedy move the wrong way when a latency changes a little?

List scheduling is not monotone (Graham's timing anomaly): a shorter latency can give a longer
kernel. This script perturbs two global latencies (``flag_latency_us``, ``dispatch_call_us``) by
±0.01 and ±0.05 µs on 16 configurations (the seed-002 shape at M = 16 ... 512 and the example
scenario at M = 16 ... 128, each with pinned and with late-bound AIC pools; the example scenario's
late-bound variants hand GMM1's output over through GM) and counts the
changes of the wrong sign (shorter latency, longer time, or the reverse). docs/method.md quotes
its output. Takes under a minute.

Run: python examples/anomaly_sweep.py
"""

from __future__ import annotations

import moeopt as m

SHAPES = (
    ("examples/seed002_typical.toml", "seed002", (16, 32, 64, 128, 512)),
    ("examples/scenario_basic.toml", "basic", (16, 64, 128)),
)
CONSTANTS = ("flag_latency_us", "dispatch_call_us")
GM_LINK = {
    "producer": "gmm1",
    "consumer": "activation",
    "location": "gm",
    "depth": 0,
    "colocated_by_hardware": False,
}
DELTAS_US = (-0.05, -0.01, 0.01, 0.05)


def main() -> int:
    wrong: list[tuple[float, str]] = []
    total = 0
    largest_right = 0.0
    for path, label, tokens in SHAPES:
        for m_tokens in tokens:
            for bind in ((), ("AIC",)):
                over: dict[str, object] = {"workload.tokens": m_tokens, "options.late_bind_pools": list(bind)}
                if bind and label == "basic":
                    # late-bound cube tiles hand GMM1's output to the activation through GM: an
                    # on-chip slot belongs to one core, which late binding cannot model
                    over["options.links"] = [GM_LINK]
                base = m.load_scenario(path, over)
                t0 = m.simulate(base)["kernel_total_us"]
                where = f"{label} M={m_tokens} {'late-bound AIC' if bind else 'pinned'}"
                for const in CONSTANTS:
                    v = base.config.constants[const].value
                    for dv in DELTAS_US:
                        varied = base.with_overrides({f"calibration.{const}": v + dv})
                        t = m.simulate(varied)["kernel_total_us"]
                        pct = 100.0 * (t / t0 - 1.0)
                        total += 1
                        if (dv < 0 < pct) or (dv > 0 > pct):
                            wrong.append((abs(pct), f"{where:<28} {const:<17} {dv:+.2f} µs -> {pct:+.3f}%"))
                        else:
                            largest_right = max(largest_right, abs(pct))
    wrong.sort(key=lambda w: (-w[0], w[1]))
    print(f"perturbations {total}, of the wrong sign {len(wrong)}")
    if wrong:
        print(f"largest wrong-sign change {wrong[0][0]:.3f}%; largest right-sign change {largest_right:.3f}%")
    for _size, text in wrong[:5]:
        print("  " + text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
