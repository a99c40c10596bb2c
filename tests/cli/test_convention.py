"""One command-line convention: the `moeopt` console script with every command (search included),
--version, one --json [PATH] form, one --quiet, help listing every command, and user-facing text
that cites no document a user does not have."""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

import moeopt
from moeopt.cli import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).parent / "moeopt"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
BS72 = str(ROOT / "examples" / "scenario_bs72.toml")


def run(argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, env=ENV, timeout=300, check=False, **kw)


def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            return dict(a.choices)
    raise AssertionError("no subcommands")


def test_the_console_script_is_declared_and_installed():
    scripts = {e.name: e.value for e in entry_points(group="console_scripts")}
    assert scripts.get("moeopt") == "moeopt.cli:main"
    # pip install -e . (the README's first command) puts it next to the interpreter
    assert SCRIPT.is_file(), f"{SCRIPT} is missing: reinstall with pip install -e ."
    p = run([str(SCRIPT), "--version"])
    assert (p.returncode, p.stdout.strip()) == (0, f"moeopt {moeopt.__version__}")


def test_help_lists_every_command():
    p = run([str(SCRIPT), "--help"])
    assert p.returncode == 0
    listed = re.findall(r"(?m)^    ([a-z-]+)", p.stdout)
    assert listed == list(COMMANDS)
    assert "search" in listed
    same = run([sys.executable, "-m", "moeopt", "--help"])
    assert same.stdout.startswith("usage: python -m moeopt ")
    assert re.findall(r"(?m)^    ([a-z-]+)", same.stdout) == listed


def test_search_is_a_command_and_python_m_moeopt_search_still_works(tmp_path):
    study = tmp_path / "s.yaml"
    study.write_text(
        "name: two\nscenario: " + BS72 + "\nspace:\n  kernel.tile_n: {choices: [128, 256]}\n"
        "trials: 2\noutputs: {exact_gap: false, report: false}\n"
    )
    a = run([str(SCRIPT), "search", str(study), "--quiet", "--out", str(tmp_path / "a")])
    b = run([sys.executable, "-m", "moeopt.search", str(study), "--quiet", "--out", str(tmp_path / "b")])
    assert (a.returncode, b.returncode) == (0, 0), a.stderr + b.stderr
    first = a.stdout.splitlines()[:3]
    assert first == b.stdout.splitlines()[:3]
    assert first[0] == "study two finished: 2 trials (complete 2)"


def test_json_has_one_form_on_every_command_that_has_it():
    with_json = []
    for name, p in _subparsers(build_parser()).items():
        for a in p._actions:
            if "--json" in a.option_strings:
                # --json [PATH]: no PATH (or '-') = standard output
                assert (a.nargs, a.const, a.metavar) == ("?", "-", "PATH"), name
                with_json.append(name)
    assert set(with_json) >= {"search", "gap", "simulate", "compare", "audit", "domain", "fidelity", "trace-compare"}


def test_quiet_is_the_one_progress_switch():
    for name in ("search", "gap", "compare", "audit", "fidelity", "golden"):
        p = _subparsers(build_parser())[name]
        quiet = [a for a in p._actions if "--quiet" in a.option_strings]
        assert len(quiet) == 1, name
        older = [a for a in p._actions if "--no-progress" in a.option_strings]
        # the older spelling still works for scripts, but is not shown
        assert all(a.dest == "quiet" and a.help == argparse.SUPPRESS for a in older), name


def test_simulate_json_to_stdout_or_to_a_file(tmp_path):
    p = run([str(SCRIPT), "simulate", BS72, "--json"])
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)  # standard output holds the JSON alone
    q = run([str(SCRIPT), "simulate", BS72, "--json", str(tmp_path / "r.json")])
    assert q.returncode == 0, q.stderr
    assert q.stdout.startswith("scenario ")  # the summary, and the JSON in the file
    assert json.loads((tmp_path / "r.json").read_text())["kernel_total_us"] == doc["kernel_total_us"]


def test_audit_json_dash_keeps_stdout_for_json():
    p = run([str(SCRIPT), "audit", BS72, "--only", "kernel.tile_n", "--quiet", "--json"])
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)[0]["path"] == "kernel.tile_n"
    assert "kernel.tile_n" in p.stderr  # the table went to standard error


# --------------------------------------------------------------------------- cited documents
# what a user does not have: the design seeds, the product spec, the issue tracker, the shared
# hardware notes
CITATION = re.compile(r"seed-0\d\d|\bseeds/|\bSPEC\b|§|\bissue \d+|hardware\.md")


def _help_texts() -> list[tuple[str, str]]:
    out = []
    main = build_parser()
    out += [("moeopt", main.description or ""), ("moeopt", main.epilog or "")]
    for name, p in _subparsers(main).items():
        out.append((name, p.description or ""))
        out += [(name, a.help or "") for a in p._actions if a.help != argparse.SUPPRESS]
    return out


def test_help_texts_cite_no_document_a_user_does_not_have():
    bad = [(where, text) for where, text in _help_texts() if CITATION.search(text)]
    assert bad == []


@pytest.mark.parametrize("doc", ["README.md", "studies/README.md", "docs/architecture.md"])
def test_user_docs_cite_no_document_a_user_does_not_have(doc):
    lines = (ROOT / doc).read_text(encoding="utf-8").splitlines()
    bad = [f"{doc}:{k}: {ln}" for k, ln in enumerate(lines, 1) if CITATION.search(ln)]
    assert bad == []


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "bench").glob("*.py")))
def test_bench_docstrings_cite_no_document_a_user_does_not_have(script):
    tree = ast.parse((ROOT / "bench" / script).read_text(encoding="utf-8"))
    doc = ast.get_docstring(tree) or ""
    assert not CITATION.search(doc), doc
