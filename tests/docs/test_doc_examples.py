"""Every marked example in README.md and docs/*.md prints what the documentation shows.

See :mod:`tests.docs.blocks` for the marker syntax, the masks and the regenerate switch
(``MOEOPT_REGEN_DOCS=1``). Examples marked ``slow`` (the full quick-start study) run with
``pytest -m slow``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs import blocks as B

BLOCKS = B.all_blocks()


def _params() -> list[object]:
    return [
        pytest.param(b, id=b.name, marks=[pytest.mark.slow] if b.slow else [])
        for b in BLOCKS
    ]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # one scratch copy for all examples, as a user works in one checkout (outputs land in runs/)
    return B.scratch_copy(tmp_path_factory.mktemp("checkout"))


@pytest.mark.parametrize("block", _params())
def test_example_prints_what_the_docs_show(block: B.Block, workdir: Path) -> None:
    actual = B.run_block(block, workdir)
    if B.REGEN:
        B.regenerate(block, actual)
        return
    problems = B.compare(block, actual)
    assert not problems, "\n".join(problems)


def test_the_docs_have_tested_examples() -> None:
    # the README carries the quick start, one gap report and one library call (issue 8)
    readme = {b.name for b in BLOCKS if b.doc.name == "README.md"}
    assert {"quickstart", "simulate_basic", "library_simulate"} <= readme, readme
    assert any(b.lang == "python" for b in BLOCKS)


def test_every_expected_file_belongs_to_an_example() -> None:
    names = {b.name for b in BLOCKS}
    stale = sorted(p.stem for p in B.EXPECTED.glob("*.txt") if p.stem not in names)
    assert not stale, f"expected files without a doctest marker: {stale}"
