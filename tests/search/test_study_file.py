"""Study-file validation: every bad input is one StudyError naming the field, the value and what is allowed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from moeopt.search import StudyError, load_study
from moeopt.search.space import enumerate_points, grid_size, violated_constraint

from .conftest import write_study

ROOT = Path(__file__).resolve().parents[2]


def bad(tiny: dict[str, Any], **changes: Any) -> dict[str, Any]:
    d = dict(tiny)
    d.update(changes)
    return d


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        (
            {"sampelr": "tpe"},
            r"unknown field 'sampelr' \(did you mean 'sampler'.*\?\); allowed: name, scenario",
        ),
        (
            {"sampler": "tpee"},
            r"sampler = 'tpee': not allowed \(did you mean 'tpe'\?\); allowed: tpe, cmaes, gp",
        ),
        ({"space": {}}, r"space = \{\}: the search space is empty"),
        (
            {"space": {"kernel.tile_nn": {"choices": [128]}}},
            r"space.kernel.tile_nn: unknown scenario path: unknown field 'kernel.tile_nn' \(did you mean 'tile_n'",
        ),
        (
            {"space": {"kernel.tile_n": {"int": [256, 128]}}},
            r"`low <= high` must hold, but got \(low=256, high=128\)",
        ),
        (
            {"space": {"kernel.tile_n": {"choices": []}}},
            r"space.kernel.tile_n.choices = \[\]: must be a non-empty list",
        ),
        (
            {"space": {"kernel.tile_n": {"choises": [1]}}},
            r"unknown field 'space.kernel.tile_n.choises' \(did you mean",
        ),
        ({"trials": 0}, r"trials = 0: out of range; allowed: integers >= 1"),
        ({"trials": "ten"}, r"trials = 'ten': must be an integer >= 1"),
        (
            {"objective": {"metric": "kernel_time"}},
            r"objective.metric = 'kernel_time': not allowed.*allowed: kernel_total_us",
        ),
        ({"aggregate": "avg"}, r"aggregate = 'avg': not allowed; allowed: mean, max, weighted"),
        (
            {"prune": {"lower_bound": "sometimes"}},
            r"prune.lower_bound = 'sometimes': not allowed; allowed: auto",
        ),
        ({"scenario": "no_such.toml"}, r"scenario = 'no_such.toml': no such scenario file"),
        (
            {"overrides": {"workload.tokens": 0}},
            r"the base scenario is invalid: workload.tokens = 0: out of range; allowed: integers in \[1, ",
        ),
        (
            {"constraints": ["kernel.tile_n <= kernel.tile_k"]},
            r"constraints\[0\] = .*'kernel.tile_k' is not a parameter of the space",
        ),
        ({"constraints": ["__import__('os')"]}, r"constraints\[0\] = .*Call is not allowed"),
        (
            {"secondary": [{"metric": "aiv_busy_us"}], "sampler": "cmaes"},
            r"sampler = 'cmaes' optimises one objective",
        ),
        (
            {"sampler": "grid", "space": {"calibration.b_reuse_load_factor": {"float": [0.4, 1.0]}}},
            r"space.calibration.b_reuse_load_factor: a float range without step cannot be enumerated",
        ),
        (
            {"sampler": {"name": "tpe", "n_startup": 3}},
            r"unknown field 'sampler \(tpe\).n_startup' \(did you mean",
        ),
        ({"objective": {"seeds": 3}}, r"objective.seeds: shape 'base' has workload.routing = 'uniform'"),
    ],
)
def test_bad_study_gives_one_clear_message(tiny, change, pattern):
    with pytest.raises(StudyError, match=pattern) as info:
        load_study(bad(tiny, **change))
    assert "\n" not in str(info.value)  # one line


def test_conditions_are_checked_and_ordered(tiny):
    space = {
        "kernel.tile_m": {"choices": [128, 256], "when": {"kernel.topo_urma": False}},
        "kernel.topo_urma": {"choices": [False, True]},
    }
    cfg = load_study(bad(tiny, space=space))
    assert [p.name for p in cfg.params] == [
        "kernel.topo_urma",
        "kernel.tile_m",
    ]  # the condition's subject first
    # 2 points with topo_urma false (x 2 tile_m) + 1 with it true (tile_m inactive) = 3
    assert grid_size(cfg) == 3
    assert {tuple(sorted(p.items())) for p in enumerate_points(cfg)} == {
        (("kernel.tile_m", 128), ("kernel.topo_urma", False)),
        (("kernel.tile_m", 256), ("kernel.topo_urma", False)),
        (("kernel.topo_urma", True),),
    }
    with pytest.raises(
        StudyError, match=r"when.kernel.topo_urma = 'no': not one of that parameter's choices"
    ):
        load_study(
            bad(
                tiny, space={**space, "kernel.tile_m": {"choices": [128], "when": {"kernel.topo_urma": "no"}}}
            )
        )
    cyclic = {
        "kernel.tile_m": {"choices": [128], "when": {"kernel.tile_n": 128}},
        "kernel.tile_n": {"choices": [128], "when": {"kernel.tile_m": 128}},
    }
    with pytest.raises(
        StudyError, match=r"conditions form a cycle: kernel.tile_m -> kernel.tile_n -> kernel.tile_m"
    ):
        load_study(bad(tiny, space=cyclic))


def test_constraints_prune_by_arithmetic(tiny):
    cfg = load_study(bad(tiny, constraints=["kernel.tile_m * kernel.tile_n <= 32768"]))
    # 128 * 256 = 32768 holds (<=); 256 * 256 = 65536 does not
    assert violated_constraint(cfg, {"kernel.tile_m": 128, "kernel.tile_n": 256}) is None
    why = violated_constraint(cfg, {"kernel.tile_m": 256, "kernel.tile_n": 256})
    assert (
        why
        == "constraint 'kernel.tile_m * kernel.tile_n <= 32768' is false (kernel.tile_m=256, kernel.tile_n=256)"
    )


def test_missing_sampler_package_is_named(tiny, tmp_path):
    """gp needs torch and scipy: without them the run stops before any trial with their names."""
    from moeopt.search import run_study
    from moeopt.search.config import missing_packages

    missing = missing_packages("gp")
    if not missing:
        pytest.skip("torch and scipy are installed here")
    with pytest.raises(
        StudyError, match=r"sampler = 'gp' needs the Python package\(s\) " + ", ".join(missing)
    ):
        run_study(bad(tiny, sampler="gp"), out=tmp_path / "gp")
    assert not (tmp_path / "gp").exists()  # nothing half-written


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "moeopt.search", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_cli_bad_study_exits_2_with_one_line_and_no_traceback(tiny, tmp_path):
    path = write_study(tmp_path / "bad.yaml", bad(tiny, sampler="tpee"))
    p = _cli(str(path), cwd=tmp_path)
    assert p.returncode == 2
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert lines == [
        f"error: {path}: sampler = 'tpee': not allowed (did you mean 'tpe'?); "
        "allowed: tpe, cmaes, gp, random, grid, nsga2, bruteforce"
    ]
    assert not (tmp_path / "runs").exists()

    (tmp_path / "broken.yaml").write_text("space: [unclosed\n")
    p = _cli("broken.yaml", cwd=tmp_path)
    assert p.returncode == 2
    assert "Traceback" not in p.stderr
    assert p.stderr.startswith("error: broken.yaml: not valid YAML at line")

    good = write_study(tmp_path / "good.yaml", tiny)
    p = _cli(str(good), "--trials", "0", cwd=tmp_path)
    assert p.returncode == 2
    assert p.stderr.strip().endswith("--trials = 0: out of range; allowed: integers >= 1")


@pytest.mark.parametrize(
    ("path", "choices", "pattern"),
    [
        ("kernel.quant", ["w8a8", "int4"], r"space.kernel.quant: the choice 'int4' can never be simulated: "
         r"kernel.quant = 'int4': not allowed; allowed: 'w8a8', 'bf16'; remove it from the choices"),
        ("kernel.quant", ["w8a8", "w4a8"], r"the choice 'w4a8' can never be simulated: kernel.quant = 'w4a8': not modelled"),
        ("kernel.tile_n", [128, 100], r"the choice 100 can never be simulated: kernel.tile_n = 100: must be a multiple of 16"),
        ("policy.scheduling", ["earliest_start", "fastest"], r"the choice 'fastest' can never be simulated: "
         r"policy.scheduling = 'fastest': not allowed"),
        ("profile", ["megamoe-a8w8", "nope"], r"the choice 'nope' can never be simulated: profile = 'nope'"),
    ],
)
def test_a_choice_the_scenario_always_refuses_is_an_error_before_any_trial(tiny, tmp_path, path, choices, pattern):
    tiny["space"][path] = {"choices": choices}
    with pytest.raises(StudyError, match=pattern):
        load_study(tiny)
    from moeopt.search import run_study

    with pytest.raises(StudyError):
        run_study(tiny, out=tmp_path / "run")
    assert not (tmp_path / "run").exists()  # nothing was started


def test_a_label_table_choice_is_checked_path_by_path(tiny):
    tiny["space"]["hand_off"] = {"choices": {"gm": {"kernel.quant": "w8a8"}, "odd": {"kernel.quant": "fp4"}}}
    with pytest.raises(StudyError, match=r"space.hand_off: the choice 'odd' \(kernel.quant = 'fp4'\) can never"):
        load_study(tiny)


def test_a_choice_refused_only_with_other_values_is_left_to_the_trial(tiny):
    # tile_m 512 fits L1 with a narrow tile_n and not with a wide one: a trial-by-trial verdict
    tiny["space"]["kernel.tile_m"] = {"choices": [128, 512]}
    cfg = load_study(tiny)
    assert cfg.param("kernel.tile_m").labels == (128, 512)
