"""``bench/bench_psplib.py`` on a set other than j30, with open instances given as best-known
ranges (the form of PSPLIB j60/j120): run as a user runs it, on a set written here (the tiny
instance of test_exact_cli, whose optimum is 5), so no external data is needed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.exact.test_exact_cli import TINY_SM

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_psplib.py"


def _set(tmp_path: Path, known: str) -> Path:
    (tmp_path / "j60").mkdir(exist_ok=True)
    (tmp_path / "j60" / "j601_1.sm").write_text(TINY_SM)
    (tmp_path / "j60_opt.csv").write_text(f"instance,optimal_makespan\nj601_1,{known}\n")
    return tmp_path


def _bench(data: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), "--data", str(data), "--time-limit", "5", *extra],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_open_instance_range_that_the_result_fits(tmp_path: Path) -> None:
    r = _bench(_set(tmp_path, "4..6"), "--set", "j60")  # the optimum 5 lies in 4..6
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PSPLIB j60: 1 instances (0 with a proven optimum, 1 open)" in r.stdout
    assert "bound <= optimum / best known upper bound: 1/1 (exceptions: 0)" in r.stdout
    # CP-SAT proves 5: an instance the file lists as open is closed here, and listed
    assert "open instances proven here:    1/1" in r.stdout
    assert "best below the best known upper bound: 1 j601_1" in r.stdout
    assert "bound above the best known lower bound: 1 j601_1" in r.stdout


@pytest.mark.parametrize(
    ("known", "verdict"),
    [
        ("..4", "BOUND ABOVE OPTIMUM OR UPPER BOUND: j601_1"),  # the proven bound 5 is above 4
        ("6..", "BELOW OPTIMUM OR LOWER BOUND: j601_1"),  # the valid schedule of 5 is below 6
    ],
)
def test_a_contradicted_range_fails_the_run(tmp_path: Path, known: str, verdict: str) -> None:
    r = _bench(_set(tmp_path, known), "--set", "j60")
    assert r.returncode == 1, r.stdout + r.stderr
    assert verdict in r.stdout


def test_benches_that_need_optima_refuse_an_open_set(tmp_path: Path) -> None:
    greedy = BENCH.with_name("bench_psplib_greedy.py")
    r = subprocess.run(
        [sys.executable, str(greedy), "--data", str(_set(tmp_path, "4..6")), "--set", "j60"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 2
    assert "instance 'j601_1' has the range 4..6, not a proven optimum" in r.stderr
    assert "this bench needs proven optima" in r.stderr


def test_an_instance_the_csv_leaves_out_is_one_message(tmp_path: Path) -> None:
    data = _set(tmp_path, "5")
    (data / "j60" / "j601_2.sm").write_text(TINY_SM)  # in the folder, not in j60_opt.csv
    r = _bench(data, "--set", "j60")
    assert r.returncode == 2
    assert "j60_opt.csv lists no makespan for j601_2" in r.stderr
    assert "Traceback" not in r.stderr


def test_generated_set_of_sixty_jobs_runs_with_nothing_known(tmp_path: Path) -> None:
    """bench/gen_rcpsp.py writes a set the benches read (.sm files OR-Tools' parser accepts, and
    a known-makespans file with nothing known): the size of PSPLIB j60, whose instances are not
    shipped."""
    gen = BENCH.with_name("gen_rcpsp.py")
    made = subprocess.run(
        [sys.executable, str(gen), "--jobs", "60", "--count", "2", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    import moeopt as m

    g = m.load_psplib(tmp_path / "g60" / "g60_1.sm")
    assert len(g) == 62  # 60 real jobs, the dummy source and sink
    r = _bench(tmp_path, "--set", "g60", "--time-limit", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PSPLIB g60: 2 instances (0 with a proven optimum, 2 open)" in r.stdout
    assert "returned schedules valid:      2/2" in r.stdout
