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
