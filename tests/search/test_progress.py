"""Progress that can be seen when the output is not a terminal (a CI log, nohup, a pipe)."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

from moeopt.search.progress import Progress, progress_mode

from .conftest import write_study

ROOT = Path(__file__).resolve().parents[2]


def test_a_piped_search_prints_progress_lines(tiny, tmp_path):
    tiny.update(trials=12, out="run", outputs={"exact_gap": {"time_limit_s": 2}})
    study = write_study(tmp_path / "s.yaml", tiny)
    p = subprocess.run(
        [sys.executable, "-m", "moeopt.search", str(study)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,  # both streams are pipes, not a terminal
        text=True,
        timeout=300,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    lines = p.stderr.splitlines()
    assert "\r" not in p.stderr  # lines, not a bar redrawn in place
    counts = [int(m.group(1)) for ln in lines if (m := re.fullmatch(r"search tiny: (\d+)/12 trials.*", ln))]
    # a line when the run starts, then one per tenth of the work at most, and one at the end
    assert counts[0] == 0
    assert counts[-1] == 12
    assert counts == sorted(set(counts))
    assert 3 <= len(counts) <= 11
    # what it does after the last trial, said before it starts (CP-SAT can take a while)
    after = lines[lines.index(next(ln for ln in lines if ln.startswith("search tiny: 12/12"))) + 1 :]
    assert after[0].startswith("search tiny: checking the best point (trial ")
    assert after[1] == (
        "search tiny: optimality gap of the best point: CP-SAT on each distinct rank (a time limit of 2 s each)"
    )
    assert p.stdout.startswith("study tiny finished: 12 trials")


def test_quiet_prints_no_progress(tiny, tmp_path):
    tiny.update(trials=3, out="run")
    study = write_study(tmp_path / "s.yaml", tiny)
    p = subprocess.run(
        [sys.executable, "-m", "moeopt.search", str(study), "--quiet"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""


def test_progress_lines_come_at_each_tenth_of_the_work():
    buf = io.StringIO()
    shown = Progress("job", 20, mode="lines", unit="step", stream=buf, every_s=1e9)
    for done in range(1, 21):
        shown.update(done)
    shown.close()
    counts = [int(re.match(r"job: (\d+)/20 steps", ln).group(1)) for ln in buf.getvalue().splitlines()]
    # 20 steps in tenths: a line at 2, 4, ..., 20, after the opening line at 0
    assert counts == [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20]


def test_progress_mode_follows_the_stream():
    assert progress_mode(False) is None
    assert progress_mode(True, io.StringIO()) == "lines"  # not a terminal
