"""Run a bench's measuring code in a child interpreter (for A/B runs of two checkouts).

The code runs as ``python -c CODE ARGS...`` from the temporary directory, outside any checkout:
``python -c`` puts the working directory first on the path, which would import this
checkout's moeopt whatever the interpreter (a wrapper that puts another checkout first on
``PYTHONPATH`` is how the benches compare two commits). The child's last line of output is read
as JSON."""

from __future__ import annotations

import json
import subprocess
import tempfile
from typing import Any


def run_child(python: str, code: str, args: list[str], what: str) -> dict[str, Any]:
    """The JSON object ``code`` printed last, run by ``python`` with ``args``; exits with the
    child's error output (``what`` names the run) when it fails."""
    out = subprocess.run(
        [python, "-c", code, *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=tempfile.gettempdir(),
    )
    if out.returncode != 0:
        raise SystemExit(f"{python} {what} failed:\n{out.stderr}")
    got: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return got


def machine_reference_ms(rounds: int = 5) -> float:
    """CPU milliseconds (median of ``rounds``) of a fixed pure-Python workload of the kinds the
    scheduler and the builders do (a heap of tuples, dict stores and lookups, small-object
    allocation): printed beside a bench's figures so that absolute seconds from two sessions can
    be compared. The machines these benches run on differed by ~1.7x between sessions (the same
    commit's DeepSeek-V3-like ``simulate`` took 3.13 s on one day and 1.85 s on another), far
    more than load explains; a ratio of two references says how far."""
    import heapq
    import statistics
    import time

    def work() -> int:
        heap: list[tuple[float, int]] = []
        seen: dict[str, int] = {}
        total = 0
        for i in range(60_000):
            heapq.heappush(heap, ((i * 7919) % 1000 / 7.0, i))
            seen[f"e{i}"] = i
            if i % 3 == 0:
                total += heapq.heappop(heap)[1]
        for i in range(0, 60_000, 2):
            total += seen[f"e{i}"]
        return total

    times = []
    for _ in range(rounds):
        t0 = time.process_time()
        work()
        times.append(time.process_time() - t0)
    return statistics.median(times) * 1e3


def machine_reference_line() -> str:
    """The line a bench prints with :func:`machine_reference_ms`."""
    return f"machine reference {machine_reference_ms():.1f} ms CPU (bench/child.py; compare across sessions, lower is faster)"
