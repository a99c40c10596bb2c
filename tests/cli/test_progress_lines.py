"""`moeopt compare` / `audit` with their output piped: one progress line per tenth of the work."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "moeopt", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_compare_piped_prints_progress_lines_on_stderr():
    p = _run("compare", "examples/scenario_bs72.toml", "examples/variants_bs72.yaml")
    assert p.returncode == 0, p.stderr
    # examples/variants_bs72.yaml holds 6 variants: a line at the start and after each one
    counts = [int(m.group(1)) for ln in p.stderr.splitlines() if (m := re.match(r"compare: (\d)/6 variants", ln))]
    assert counts == [0, 1, 2, 3, 4, 5, 6]
    assert "compare:" not in p.stdout  # the table alone on standard output


def test_audit_piped_prints_progress_lines_on_stderr():
    p = _run("audit", "examples/scenario_bs72.toml", "--only", "kernel.tile_n", "kernel.tile_m", "kernel.quant")
    assert p.returncode == 0, p.stderr
    counts = [int(m.group(1)) for ln in p.stderr.splitlines() if (m := re.match(r"audit: (\d)/3 knobs", ln))]
    assert counts == [0, 1, 2, 3]
