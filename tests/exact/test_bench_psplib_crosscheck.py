"""``bench/bench_psplib_crosscheck.py``: moeopt's bounds against an independent CP-SAT model.

Its verdict is checked on hand-picked answers (each contradiction it must report, and answers
that can both be right), and the bench is run as a user runs it on a set written here: the tiny
instance of test_exact_cli, whose optimum 5 is derived by hand there (two jobs of 3 and 2
periods, each needing 2 of the resource's 2 units, so they run one after the other)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.exact.test_exact_cli import TINY_SM

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_psplib_crosscheck.py"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH.parent))  # (it imports its sibling psplib_set)
    return importlib.import_module("bench_psplib_crosscheck")


def test_each_contradiction_is_reported(bench: ModuleType) -> None:
    side = bench.Side
    # a bound of 10 cuts off the other model's schedule of 9
    (why,) = bench.contradictions(side(10.0, 12.0, False), side(5.0, 9.0, False))
    assert "bound 10 is above the other model's schedule 9" in why
    # a schedule of 7 under the other model's proven bound of 8
    (why,) = bench.contradictions(side(5.0, 7.0, False), side(8.0, 9.0, False))
    assert "schedule 7 is below the other model's bound 8" in why
    # two proofs at different makespans (each bound still below the other's schedule)
    (why,) = bench.contradictions(side(6.0, 6.0, True), side(6.0, 7.0, True))
    assert "both proven optimal, at 6 and 7" in why


def test_answers_that_can_both_be_right(bench: ModuleType) -> None:
    side = bench.Side
    # nested ranges, equal proofs, a side without a schedule: nothing to report
    assert bench.contradictions(side(8.0, 9.0, False), side(5.0, 12.0, False)) == []
    assert bench.contradictions(side(9.0, 9.0, True), side(9.0, 9.0, True)) == []
    assert bench.contradictions(side(9.0, None, False), side(3.0, 9.0, False)) == []
    assert bench.contradictions(side(4.0, 9.0, False), side(0.0, None, False)) == []


def test_the_bench_on_a_set_written_here(tmp_path: Path) -> None:
    (tmp_path / "t1").mkdir()
    (tmp_path / "t1" / "tiny.sm").write_text(TINY_SM)
    (tmp_path / "t1_opt.csv").write_text("instance,lower_bound,upper_bound\ntiny,,\n")  # nothing known
    r = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--data",
            str(tmp_path),
            "--set",
            "t1",
            "--time-limit",
            "5",
            "--other-time-limit",
            "5",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "contradictions:                0" in r.stdout
    # both prove the hand-derived optimum 5
    assert "proven optimal, moeopt / other: 1 / 1 of 1" in r.stdout
