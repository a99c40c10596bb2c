"""``python -m moeopt simulate`` and ``python -m moeopt golden``, run as a user runs them (subprocess)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import moeopt.megamoe as mm
from moeopt.trust import golden

ROOT = Path(__file__).resolve().parents[2]

BS72 = (Path(__file__).resolve().parents[2] / "examples" / "scenario_bs72.toml").read_text()


def moeopt(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, "-m", "moeopt", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def bs72_file(tmp_path: Path) -> Path:
    p = tmp_path / "bs72.toml"
    p.write_text(BS72)
    return p


def numbers(line: str) -> list[float]:
    return [float(x) for x in re.findall(r"[-+]?\d+\.\d+", line)]


def test_simulate_prints_the_seed_style_summary(bs72_file):
    out = moeopt("simulate", str(bs72_file))
    assert out.returncode == 0, out.stderr
    lines = {ln.split()[0]: ln for ln in out.stdout.splitlines() if ln.strip()}
    r = mm.simulate(mm.load_scenario(bs72_file))
    # the command prints what the library computes
    assert (
        f"{r['kernel_total_us']:.2f} µs (to the last combine; with the tail {r['kernel_dag_end_us']:.2f} µs)"
        in (lines["time"])
    )
    # the bound line is self-consistent: the named binding bound is the largest of the three and the
    # excess is time / bound - 1
    compute, bandwidth, dependency, excess = numbers(lines["bounds"])
    named = re.search(r"-> (\w+)-bound", lines["bounds"]).group(1)
    bounds = {"compute": compute, "bandwidth": bandwidth, "dependency": dependency}
    assert named == max(bounds, key=bounds.get)
    assert excess == pytest.approx(100 * (r["kernel_total_us"] / bounds[named] - 1), abs=0.06)
    # utilisation per role of the seed-000 core: AIC (a GMM tile's K-step pipeline) and its two
    # vector cores
    assert re.findall(r"(AIC|AIV0|AIV1|MTE2) \d+\.\d%", lines["utilisation"]) == ["AIC", "AIV0", "AIV1"]
    assert "core-µs" in lines["avoidable"]
    assert f"{r['traffic_bytes']['gm_to_l1'] / 1e6:.1f} MB" in lines["GM->L1"]


def test_simulate_set_overrides_a_knob(bs72_file):
    """Halving tile_n on bs72 (one 72-row m-block per expert) doubles the GMM tiles along N; each tile
    loads its own A rows, B is loaded once either way, so GM->L1 bytes must rise."""
    base = moeopt("simulate", str(bs72_file))
    half = moeopt("simulate", str(bs72_file), "--set", "kernel.tile_n=128")
    assert base.returncode == 0, base.stderr
    assert half.returncode == 0, half.stderr
    gm = [
        numbers(next(ln for ln in o.stdout.splitlines() if ln.startswith("GM->L1")))[0] for o in (base, half)
    ]
    assert gm[1] > gm[0]
    assert "--set kernel.tile_n=128" in half.stdout


def test_simulate_json_carries_the_result_fields(bs72_file):
    out = moeopt("simulate", str(bs72_file), "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    for key in (
        "kernel_total_us",
        "kernel_dag_end_us",
        "slowest_rank",
        "bounds",
        "idle_decomposition",
        "critical_path",
        "traffic_bytes",
        "stage_busy_us",
        "resource_utilization",
        "implementation",
        "provenance",
        "rank_results",
    ):
        assert key in doc
    r = mm.simulate(mm.load_scenario(bs72_file))
    assert doc["kernel_total_us"] == r["kernel_total_us"]  # a JSON float round-trips exactly
    assert doc["rank_results"]["0"]["ranks_sharing_signature"] == list(range(8))


def test_simulate_slowest_ranks_only(bs72_file):
    # a skewed routing: every rank is a graph of its own; --ranks slowest times all of them and
    # keeps the slowest one's analyses (the same time as the full run)
    zipf = ["--set", "workload.routing='zipf'"]
    out = moeopt("simulate", str(bs72_file), *zipf, "--ranks", "slowest", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    full = mm.simulate(mm.load_scenario(bs72_file, {"workload.routing": "zipf"}))
    assert doc["kernel_total_us"] == full["kernel_total_us"]
    assert list(doc["rank_results"]) == [str(full["slowest_rank"])]
    assert doc["rank_kernel_total_us"] == {str(r): rr["kernel_total_us"] for r, rr in full["rank_results"].items()}
    text = moeopt("simulate", str(bs72_file), *zipf, "--ranks", "slowest")
    assert "all 8 timed and judged, the slowest one's routing signature analysed" in text.stdout
    bad = moeopt("simulate", str(bs72_file), "--ranks", "fastest")
    assert bad.returncode == 2
    assert "invalid choice: 'fastest'" in bad.stderr


def test_simulate_reports_progress_on_many_ranks_only(bs72_file):
    # bs72 with zipf routing: 8 distinct ranks, each built, scheduled and analysed (24 steps);
    # progress goes to standard error as lines (not a terminal), never with --quiet, and not
    # for a uniform routing (one graph stands for every rank: nothing to follow)
    zipf = ["--set", "workload.routing='zipf'"]
    out = moeopt("simulate", str(bs72_file), *zipf)
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("simulate: ")]
    assert lines[0] == "simulate: 0/24 steps"
    assert any("rank 7 analysed" in ln for ln in lines)
    cut = moeopt("simulate", str(bs72_file), *zipf, "--ranks", "slowest")
    assert "/9 steps" in cut.stderr  # 8 ranks timed, the slowest analysed
    assert moeopt("simulate", str(bs72_file), *zipf, "--quiet").stderr == ""
    assert moeopt("simulate", str(bs72_file)).stderr == ""


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (["--set", "kernel.tile_nn=128"], r"unknown field 'kernel.tile_nn'.*did you mean 'tile_n'"),
        (["--set", "kernel.tile_n"], r"--set 'kernel.tile_n': expected dotted.path=value"),
        (["--set", "kernel.tile_n=100"], r"kernel.tile_n = 100: must be a multiple of 16 in \[16, 4096\]"),
        (["--set", "workload.routing=zipff"], r"workload.routing = 'zipff'.*did you mean 'zipf'.*allowed:"),
    ],
)
def test_simulate_bad_input_is_one_clear_line(bs72_file, args, expect):
    out = moeopt("simulate", str(bs72_file), *args)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert out.stderr.startswith("error: ")
    assert re.search(expect, out.stderr)


def test_simulate_missing_file(tmp_path):
    out = moeopt("simulate", str(tmp_path / "nope.toml"))
    assert out.returncode == 2
    assert "no such scenario file" in out.stderr
    assert "Traceback" not in out.stderr


def test_packaged_golden_file_has_the_fixed_configurations():
    configs, expected = golden.load_golden(golden.GOLDEN_FILE)
    assert len(configs) >= 40
    assert len({c.name for c in configs}) == len(configs)
    assert all(re.fullmatch(r"[0-9a-f]{16}", expected[c.name]["fingerprint"]) for c in configs)
    # the stored configurations are the ones the code regenerates
    assert [c.as_dict() for c in configs] == [c.as_dict() for c in golden.default_configs()]


def test_golden_check_passes_on_the_packaged_file():
    out = moeopt("golden", "--check", "--only", "bs72", "bs72.late_aic", "pto_m16", "basic_e8")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "all 4 configuration(s) match" in out.stdout


def test_golden_check_fails_when_a_schedule_changes(tmp_path):
    """Perturb one stored configuration (tile_n 256 -> 128 on bs72) but keep its fingerprint: the
    schedule is different, so --check must fail and name it."""
    path = tmp_path / "golden.json"
    shutil.copy(golden.GOLDEN_FILE, path)
    doc = json.loads(path.read_text())
    row = next(r for r in doc["configs"] if r["name"] == "bs72")
    row["overrides"] = {"kernel.tile_n": 128}
    path.write_text(json.dumps(doc))
    out = moeopt("golden", "--check", "--file", str(path), "--only", "bs72", "bs72.tile_m128")
    assert out.returncode == 1
    assert re.search(r"error: golden mismatch: bs72: fingerprint [0-9a-f]{16} != stored", out.stderr)
    assert "bs72.tile_m128" not in out.stderr  # the untouched one still matches
    assert "1 of 2 configuration(s) changed their schedule" in out.stderr


def test_golden_regenerates_a_file_that_then_checks(tmp_path):
    path = tmp_path / "g.json"
    made = moeopt("golden", "--file", str(path), "--only", "bs72", "bs72.urma")
    assert made.returncode == 0, made.stderr
    assert json.loads(path.read_text())["configs"][0]["name"] == "bs72"
    again = moeopt("golden", "--check", "--file", str(path))
    assert again.returncode == 0, again.stderr
    assert "all 2 configuration(s) match" in again.stdout


def test_golden_bad_file_is_one_clear_line(tmp_path):
    path = tmp_path / "g.json"
    path.write_text("{not json")
    out = moeopt("golden", "--check", "--file", str(path))
    assert out.returncode == 2
    assert "not valid JSON" in out.stderr
    assert "Traceback" not in out.stderr
    out = moeopt("golden", "--check", "--only", "bs7")
    assert out.returncode == 2
    assert "did you mean 'bs72'" in out.stderr


@pytest.mark.slow
def test_golden_check_all():
    out = moeopt("golden", "--check", timeout=1200)
    assert out.returncode == 0, out.stdout + out.stderr
