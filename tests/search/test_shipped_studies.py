"""Every study file shipped in ``studies/`` loads, and its base scenario resolves: a user's first
``moeopt search studies/<file>`` must not stop on the file itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from moeopt.search.config import load_study

STUDIES = sorted((Path(__file__).resolve().parents[2] / "studies").glob("*.yaml"))


def test_the_studies_are_found() -> None:
    assert len(STUDIES) >= 10  # (quickstart, the seed-002 cases, the redesign, bs72, dsv3_zipf ...)


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.name)
def test_a_shipped_study_loads_and_its_base_resolves(path: Path) -> None:
    cfg = load_study(path)
    assert cfg.name == path.stem
    for shape in cfg.shapes:
        assert shape.scenario({}).config is not None
