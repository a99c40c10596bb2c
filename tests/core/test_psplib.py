"""PSPLIB j30 (Kolisch & Sprecher 1996) read through the user-facing loader.

The instances are not shipped with moeopt: set MOEOPT_PSPLIB_DIR to a folder holding ``j30/``
and ``j30_opt.csv`` (``.ci/run`` points it at the shared data). The optima are the proven ones
of Demeulemeester & Herroelen (1995), as listed in PSPLIB's ``j30opt.sm``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import moeopt as m
from moeopt.core.policies import BUILTIN_POLICIES

DATA = os.environ.get("MOEOPT_PSPLIB_DIR")
needs_data = pytest.mark.skipif(
    not DATA, reason="MOEOPT_PSPLIB_DIR is not set (PSPLIB j30 instances are not shipped with moeopt)"
)


def _instances() -> list[Path]:
    assert DATA is not None
    return sorted((Path(DATA) / "j30").glob("*.sm"))


def _optima() -> dict[str, int]:
    assert DATA is not None
    return m.load_psplib_optima(Path(DATA) / "j30_opt.csv")


@needs_data
def test_j301_1_maps_jobs_resources_and_precedences() -> None:
    # j301_1.sm: 32 jobs (source 1 and sink 32 included), capacities R1..R4 = 12 13 4 12
    # (RESOURCEAVAILABILITIES), job 2 lasts 8 with demand 4 on R1; job 1 precedes 2, 3 and 4.
    g = m.load_psplib(Path(DATA or "") / "j30" / "j301_1.sm")
    assert len(g) == 32
    assert dict(g.semaphores) == {"R1": 12, "R2": 13, "R3": 4, "R4": 12}
    job2 = g["job2"]
    assert job2.duration_us == 8.0
    assert dict(job2.acquires) == {"R1": 4} == dict(job2.releases)
    assert dict(job2.deps) == {"job1": 0.0}
    assert list(g.nx.successors("job1")) == ["job2", "job3", "job4"]
    assert g["job32"].duration_us == 0.0


@needs_data
def test_greedy_is_feasible_and_never_below_the_optimum_on_a_sample() -> None:
    opt = _optima()
    for path in _instances()[::48]:
        g = m.load_psplib(path)
        for policy in BUILTIN_POLICIES:
            s = m.schedule(g, policy)
            m.validate_schedule(g, s)
            assert s.makespan_us >= opt[path.stem], (path.stem, policy)


@needs_data
def test_all_480_j30_instances_every_policy() -> None:
    opt = _optima()
    paths = _instances()
    assert len(paths) == 480
    for path in paths:
        g = m.load_psplib(path)
        for policy in BUILTIN_POLICIES:
            s = m.schedule(g, policy)
            m.validate_schedule(g, s)
            assert s.makespan_us >= opt[path.stem], (path.stem, policy)


def test_bad_files_give_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(m.InputError, match="no such PSPLIB file"):
        m.load_psplib(tmp_path / "missing.sm")
    junk = tmp_path / "junk.sm"
    junk.write_text("hello world\n")
    with pytest.raises(m.InputError, match=r"junk.sm: OR-Tools could not parse this file"):
        m.load_psplib(junk)


def test_optima_csv_errors(tmp_path: Path) -> None:
    bad = tmp_path / "opt.csv"
    bad.write_text("name,value\nj301_1,43\n")
    with pytest.raises(m.InputError, match="expected columns 'instance,optimal_makespan'"):
        m.load_psplib_optima(bad)


def test_known_makespans_both_layouts_and_ranges(tmp_path: Path) -> None:
    """PSPLIB j60/j120 list open instances as best-known ranges; both CSV layouts read, names
    with or without the .sm suffix."""
    a = tmp_path / "a.csv"
    a.write_text("instance,optimal_makespan\nj601_1.sm,77\nj609_1,82..87\nj6042_1,..83\nx,5..\n")
    k = m.load_psplib_known(a)
    assert k == {
        "j601_1": (77, 77),
        "j609_1": (82, 87),
        "j6042_1": (None, 83),
        "x": (5, None),
    }
    assert [v.optimum for v in k.values()] == [77, None, None, None]
    assert [str(v) for v in k.values()] == ["77", "82..87", "..83", "5.."]
    b = tmp_path / "b.csv"
    b.write_text("instance,lower_bound,upper_bound\np,3,\nq,,5\nr,4,4\n")
    assert m.load_psplib_known(b) == {"p": (3, None), "q": (None, 5), "r": (4, 4)}
    assert m.load_psplib_optima(_write(tmp_path, "instance,optimal_makespan\nz,9\n")) == {"z": 9}
    # a spreadsheet's CSV starts with a byte-order mark: the header still reads
    bom = tmp_path / "bom.csv"
    bom.write_text("instance,optimal_makespan\nz,9\n", encoding="utf-8-sig")
    assert m.load_psplib_known(bom) == {"z": (9, 9)}
    # the optima reader takes proven optima only, and says where a range is
    with pytest.raises(m.InputError, match=r"instance 'j609_1' has the range 82\.\.87, not a proven optimum"):
        m.load_psplib_optima(a)


def test_known_makespans_judge_bounds_and_schedules() -> None:
    """A bound above the known upper side cannot be sound; a schedule below the known lower side
    breaks a rule (or the lower side is wrong); an unknown side judges nothing."""
    k = m.KnownMakespan(82, 87)
    assert [k.bound_too_high(b) for b in (82.0, 87.0, 87.5)] == [False, False, True]
    assert [k.makespan_too_low(t) for t in (81.5, 82.0, 90.0)] == [True, False, False]
    assert not m.KnownMakespan(None, None).bound_too_high(1e9)
    assert not m.KnownMakespan(None, None).makespan_too_low(0.0)


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "w.csv"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("instance,optimal_makespan\nx,abc\n", r"line 2: field 'optimal_makespan' is 'abc'; allowed: a whole number"),
        ("instance,optimal_makespan\nx,..\n", r"line 2: field 'optimal_makespan' is '\.\.'; allowed"),
        ("instance,optimal_makespan\nx,-3\n", r"line 2: field 'optimal_makespan' is '-3'; allowed"),
        ("instance,optimal_makespan\nx,5..3\n", r"line 2: instance 'x': lower bound 5 above upper bound 3"),
        ("instance,lower_bound,upper_bound\nx,1.5,\n", r"field 'lower_bound' is '1\.5'; allowed: a whole number >= 0 or empty"),
        ("instance,optimal_makespan\nx,3\nx.sm,4\n", r"line 3: instance 'x' is listed twice"),
        ("instance,optimal_makespan\n,3\n", r"line 2: field 'instance' is empty"),
        ("name,value\nx,1\n", r"expected columns 'instance,optimal_makespan' or 'instance,lower_bound,upper_bound', got name, value"),
    ],
)
def test_known_makespans_bad_rows(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(m.InputError, match=message):
        m.load_psplib_known(_write(tmp_path, text))
