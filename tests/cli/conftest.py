from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.search.conftest import TINY


@pytest.fixture
def tiny_study() -> dict[str, Any]:
    """A study of a few seconds on the bs = 72 shape (tests/search/conftest.py)."""
    study = copy.deepcopy(TINY)
    study.update(trials=4, outputs={"exact_gap": False})
    return study
