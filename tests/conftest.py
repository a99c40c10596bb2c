from __future__ import annotations

from pathlib import Path

import pytest

import moeopt.megamoe as mm

BS72_FILE = Path(__file__).resolve().parents[1] / "examples" / "scenario_bs72.toml"


@pytest.fixture(scope="session")
def bs72() -> mm.Scenario:
    """The seed's bs=72 shape (examples/scenario_bs72.toml): h 5120, intermediate 4608, topk 6,
    8 ranks, 3 local experts."""
    return mm.load_scenario(BS72_FILE)
