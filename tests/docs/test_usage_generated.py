"""docs/usage.md is generated from the code (by the repository's tools/gen_docs.py, which is not
part of the installed package) and must stay equal to what the code generates now."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import moeopt
from moeopt.cli import COMMANDS
from moeopt.megamoe.knobs import knob_catalogue
from tests.docs.tool import TOOL, load_gen_docs

docs_gen = load_gen_docs()


@pytest.fixture(scope="module")
def generated() -> str:
    return docs_gen.generate_usage()


@pytest.fixture(scope="module")
def checked_in() -> str:
    return docs_gen.USAGE_MD.read_text(encoding="utf-8")


def test_usage_md_equals_the_generated_text() -> None:
    # in a fresh interpreter: names other tests registered in this process must not leak in. It
    # imports the moeopt under test (this process's), not whichever one the interpreter's
    # site-packages point to (an editable install of another checkout would document that one).
    package_root = str(Path(moeopt.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p
    )}
    p = subprocess.run(
        [sys.executable, str(TOOL), "--check"],
        cwd=docs_gen.REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert p.returncode == 0, p.stderr + p.stdout


def _knob_rows(text: str) -> list[str]:
    """The first column of every table row in the '### Knobs' section of the Markdown."""
    section = text.split("### Knobs", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"(?m)^\| `([^`]+)` \|", section)


def test_usage_lists_every_knob_the_audit_knows_and_no_other(checked_in: str) -> None:
    listed = _knob_rows(checked_in)
    known = [k.path for k in knob_catalogue()]
    assert listed == known
    assert len(set(listed)) == len(listed)


def test_every_command_and_argument_is_documented(checked_in: str) -> None:
    from moeopt.cli import build_parser

    subs = docs_gen._subcommands(build_parser())
    assert list(subs) == list(COMMANDS)
    for name, parser in subs.items():
        section = checked_in.split(f"### `moeopt {name}`", 1)[1].split("\n### ", 1)[0]
        for action in parser._actions:
            if action.help == argparse.SUPPRESS:  # an older spelling kept for scripts (--no-progress)
                continue
            for opt in action.option_strings:
                if opt.startswith("--") and opt != "--help":
                    assert re.search(rf"`[^`]*{re.escape(opt)}\b[^`]*`", section), (name, opt)


def test_prose_without_a_key_or_a_key_without_prose_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    import moeopt.search.config as sc

    monkeypatch.setattr(sc, "TOP_FIELDS", (*sc.TOP_FIELDS, "new_key"))
    with pytest.raises(docs_gen.DocsDriftError, match="no prose for new_key"):
        docs_gen.study_section()
    monkeypatch.setattr(sc, "TOP_FIELDS", tuple(k for k in sc.TOP_FIELDS if k not in ("new_key", "seed")))
    with pytest.raises(docs_gen.DocsDriftError, match="keys the code does not have: seed"):
        docs_gen.study_section()


def test_check_mode_reports_drift(tmp_path: Path, generated: str) -> None:
    out = tmp_path / "usage.md"
    out.write_text(generated.replace("## Study files", "## Study file"), encoding="utf-8")
    assert docs_gen.main(["--check", "--out", str(out)]) == 1
    assert docs_gen.main(["--write", "--out", str(out)]) == 0
    assert docs_gen.main(["--check", "--out", str(out)]) == 0
