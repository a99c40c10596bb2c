"""Gantt page and Chrome-trace speed on 10k / 50k-event schedules (synthetic MegaMoE-shaped graphs).

Per size: build the page (median of 3), its size, export + read back the Chrome trace (median of 3),
and, when a Chromium-family browser is installed, the wall time of one headless load that runs the
page's script and paints every bar (launch included; --no-browser skips it).

    python bench/bench_gantt.py [--sizes 10000,50000] [--no-browser]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import moeopt as m
from moeopt.synthetic import layered_graph
from moeopt.trace import read_chrome_trace, write_chrome_trace
from moeopt.viz import GanttTrack, gantt_page
from moeopt.viz.browser import find_browser, load_page


def median_s(fn, n: int = 3) -> float:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,50000")
    ap.add_argument("--no-browser", action="store_true")
    args = ap.parse_args()
    browser = None if args.no_browser else find_browser()
    print(f"{'events':>7} {'page s':>7} {'page MB':>8} {'trace w+r s':>11} {'trace MB':>9} {'browser s':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in args.sizes.split(",")):
            g = layered_graph(n, seed=1)
            s = m.schedule(g)
            tracks = [GanttTrack("greedy", s, g)]
            page_s = median_s(lambda: gantt_page(tracks, color_by="stage"))  # noqa: B023
            page = Path(tmp) / f"g{n}.html"
            page.write_text(gantt_page(tracks, color_by="stage"))
            tr = Path(tmp) / f"t{n}.json"
            trace_s = median_s(lambda: read_chrome_trace(write_chrome_trace(tr, s, g)))  # noqa: B023
            shown = "-"
            if browser is not None:
                t = time.perf_counter()
                res = load_page(page, timeout_s=120)
                shown = f"{time.perf_counter() - t:.2f}" + ("" if 'data-drawn="' in res.dom else " (not drawn!)")
                if res.console:
                    shown += f" console: {res.console[:2]}"
            print(
                f"{len(g):>7} {page_s:>7.2f} {page.stat().st_size / 1e6:>8.2f} {trace_s:>11.2f} "
                f"{tr.stat().st_size / 1e6:>9.2f} {shown:>10}"
            )


if __name__ == "__main__":
    main()
