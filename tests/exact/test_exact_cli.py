"""``python -m moeopt gap``, run as a user runs it: in a subprocess.

PSPLIB files are written here (a tiny hand-made instance in the .sm format), so these tests need
no external data.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# A 4-job RCPSP in PSPLIB .sm format: dummy source 1 -> jobs 2, 3 -> dummy sink 4. Jobs 2 and 3
# last 3 and 2 periods and need 2 units each of R1 (capacity 3), so they cannot overlap: the
# optimum is 3 + 2 = 5, and the energy bound (3 x 2 + 2 x 2) / 3 = 3.33 is below it.
TINY_SM = """\
************************************************************************
file with basedata            : tiny.bas
initial value random generator: 1
************************************************************************
projects                      :  1
jobs (incl. supersource/sink ):  4
horizon                       :  5
RESOURCES
  - renewable                 :  1   R
  - nonrenewable              :  0   N
  - doubly constrained        :  0   D
************************************************************************
PROJECT INFORMATION:
pronr.  #jobs rel.date duedate tardcost  MPM-Time
    1      2      0        5        0        5
************************************************************************
PRECEDENCE RELATIONS:
jobnr.    #modes  #successors   successors
   1        1          2           2   3
   2        1          1           4
   3        1          1           4
   4        1          0
************************************************************************
REQUESTS/DURATIONS:
jobnr. mode duration  R 1
------------------------------------------------------------------------
  1      1     0       0
  2      1     3       2
  3      1     2       2
  4      1     0       0
************************************************************************
RESOURCEAVAILABILITIES:
  R 1
    3
************************************************************************
"""


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "moeopt", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    good = tmp_path / "tiny.sm"
    good.write_text(TINY_SM)
    bad = tmp_path / "broken.sm"
    bad.write_text("this is not a PSPLIB file\n")
    other = tmp_path / "notes.txt"
    other.write_text("hello\n")
    optima = tmp_path / "opt.csv"
    optima.write_text("instance,optimal_makespan\ntiny,5\n")
    return {"good": good, "bad": bad, "other": other, "optima": optima}


def test_gap_table_errors_one_line_each_and_exit_code(files: dict[str, Path], tmp_path: Path) -> None:
    r = _run(
        "gap",
        str(files["bad"]),
        str(files["good"]),
        str(tmp_path / "missing.sm"),
        str(files["other"]),
        "--time-limit",
        "5",
        "--optima",
        str(files["optima"]),
        cwd=tmp_path,
    )
    assert r.returncode == 1, r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 3, r.stderr
    assert f"error: {files['bad']}: OR-Tools could not parse this file as a PSPLIB RCPSP instance" in errors
    assert f"error: {tmp_path / 'missing.sm'}: no such file" in errors
    assert f"error: {files['other']}: unsupported input type '.txt' (supported: .sm, .toml)" in errors
    assert "Traceback" not in r.stderr
    # the good file still ran, after the bad one: its row shows the optimum 5, proven
    row = next(ln for ln in r.stdout.splitlines() if "tiny" in ln)
    assert row.split()[0] == "[2/4]"
    assert " 5 " in row
    assert "optimal" in row
    assert "1 graph(s) from 4 input(s): 1 proven optimal, 3 failed" in r.stdout


def test_gap_json_and_markdown(files: dict[str, Path], tmp_path: Path) -> None:
    md = tmp_path / "gap.md"
    r = _run("gap", str(files["good"]), "--time-limit", "5", "--json", "-", "--markdown", str(md), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # stdout holds only the JSON; the table went to stderr
    assert "tiny" in r.stderr
    assert doc["errors"] == []
    (res,) = doc["results"]
    assert res["name"] == "tiny"
    assert res["num_events"] == 4
    assert res["best_us"] == 5
    assert res["lower_bound_us"] == 5
    assert res["proven_optimal"] is True
    assert res["binding_use"] is None  # (proven: no capacity left to account for)
    assert set(res["greedy"]) == {
        "earliest_start",
        "critical_path_first",
        "work_conserving_critical_path",
        "priority_by_stage",
        "lookahead_one_step",
    }
    assert res["exact"]["params_used"]["num_workers"] == 1
    text = md.read_text()
    assert text.startswith("| input | events | earliest_start |")
    assert "| tiny | 4 |" in text


def test_gap_usage_errors(files: dict[str, Path], tmp_path: Path) -> None:
    r = _run("gap", str(files["good"]), "--policies", "earliest_strat", cwd=tmp_path)
    assert r.returncode == 2
    assert "unknown policy 'earliest_strat' (did you mean 'earliest_start'?)" in r.stderr
    r = _run("gap", str(files["good"]), "--time-limit", "0", cwd=tmp_path)
    assert r.returncode == 2
    assert "expected a number of seconds > 0, got '0'" in r.stderr
    r = _run(cwd=tmp_path)
    assert r.returncode == 2


def test_new_input_types_plug_in(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A later input type (e.g. scenario files, one graph per rank) registers a loader for its
    # suffix; a loader error is one line and the other inputs still run.
    import moeopt as m
    from moeopt.cli import main, register_gap_input, unregister_gap_input

    def load_pair(path: Path) -> list[tuple[str, m.EventGraph]]:
        if "bad" in path.name:
            raise m.InputError(f"{path}: rank 3: tile_n must be a multiple of 16, got 100")
        out = []
        for rank in range(2):
            g = m.EventGraph()
            g.add(m.Event("a", duration_us=1.0 + rank))
            out.append((f"{path.stem}:rank{rank}", g))
        return out

    (tmp_path / "ok.fake").write_text("")
    (tmp_path / "bad.fake").write_text("")
    register_gap_input(".fake", load_pair)
    try:
        with pytest.raises(m.InputError, match=r"gap inputs '.fake' already have a loader"):
            register_gap_input(".fake", load_pair)
        code = main(["gap", str(tmp_path / "bad.fake"), str(tmp_path / "ok.fake"), "--time-limit", "2"])
    finally:
        unregister_gap_input(".fake")
    out, err = capsys.readouterr()
    assert code == 1
    assert f"error: {tmp_path / 'bad.fake'}: rank 3: tile_n must be a multiple of 16, got 100" in err
    assert "ok:rank0" in out
    assert "ok:rank1" in out
    assert "2 graph(s) from 2 input(s): 2 proven optimal, 1 failed" in out


def test_gap_against_open_instance_ranges(files: dict[str, Path], tmp_path: Path) -> None:
    """``--optima`` with best-known ranges (the form of PSPLIB j60/j120, where some instances are
    open): a range the result fits is shown and kept in the JSON; a range the result contradicts
    is one error line each. tiny's optimum is 5 (the comment of TINY_SM), and CP-SAT proves it."""
    fits = tmp_path / "fits.csv"
    fits.write_text("instance,optimal_makespan\ntiny.sm,4..6\n")  # 4 <= 5 <= 6; a file name reads too
    r = _run("gap", str(files["good"]), "--time-limit", "5", "--optima", str(fits), "--json", "-", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    row = next(ln for ln in r.stderr.splitlines() if "tiny" in ln)
    assert "4..6" in row.split()
    (res,) = json.loads(r.stdout)["results"]
    assert (res["known_lower_us"], res["known_upper_us"], res["known_optimum_us"]) == (4.0, 6.0, None)
    # an upper bound of 4 is below the optimum 5 (so below the proven bound 5), and a lower bound
    # of 6 above it (so above the best schedule 5): either would mean a bug in moeopt if the file
    # were right
    wrong = tmp_path / "wrong.csv"
    for known, message in (
        ("..4", "lower bound 5 exceeds the best known upper bound 4 (a bug)"),
        ("6..", "best schedule 5 is below the best known lower bound 6"),
    ):
        wrong.write_text(f"instance,lower_bound,upper_bound\ntiny,{known.replace('..', ',')}\n")
        r = _run("gap", str(files["good"]), "--time-limit", "5", "--optima", str(wrong), cwd=tmp_path)
        assert r.returncode == 1, r.stderr
        (err,) = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
        assert err.startswith(f"error: {files['good']}: {message}"), err


def test_gap_on_a_directory_of_instances(tmp_path: Path) -> None:
    """A PSPLIB set's folder stands for its instance files, by name (other files ignored); a
    folder with none is one usage error."""
    folder = tmp_path / "j60"
    folder.mkdir()
    (folder / "b.sm").write_text(TINY_SM)
    (folder / "a.sm").write_text(TINY_SM)
    (folder / "notes.txt").write_text("not an input\n")
    r = _run("gap", str(folder), "--time-limit", "5", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = [ln.split()[:2] for ln in r.stdout.splitlines() if ln.lstrip().startswith("[")]
    assert rows == [["[1/2]", "a"], ["[2/2]", "b"]]
    assert "2 graph(s) from 2 input(s): 2 proven optimal, 0 failed" in r.stdout
    empty = tmp_path / "empty"
    empty.mkdir()
    r = _run("gap", str(empty), cwd=tmp_path)
    assert r.returncode == 2
    assert f"{empty}: a directory with no input files (supported: .sm, .toml)" in r.stderr
    assert "Traceback" not in r.stderr
