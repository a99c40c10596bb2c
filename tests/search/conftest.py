from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

# The seed's bs=72 shape (tests/megamoe/conftest.py): about 0.05 s per simulation, so a study of a
# dozen trials runs in a couple of seconds.
BS72 = {
    "profile": "megamoe-a8w8",
    "h": 5120,
    "hidden_dim": 9216,
    "aic_num": 28,
    "workload": {"tokens": 72, "topk": 6, "world": 8, "local_experts": 3, "routing": "uniform"},
}

TINY: dict[str, Any] = {
    "name": "tiny",
    "scenario": BS72,
    "space": {
        "kernel.tile_n": {"choices": [128, 256, 512]},
        "kernel.tile_m": {"choices": [128, 256]},
        "p1_override": {"int": [0, 2]},
        "policy.dispatch_lookahead": {"choices": [0, 1, 2]},
    },
    "sampler": "tpe",
    "seed": 1,
    "trials": 12,
    "outputs": {"exact_gap": False},
}


@pytest.fixture
def tiny() -> dict[str, Any]:
    return copy.deepcopy(TINY)


def write_study(path: Path, study: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path


@pytest.fixture
def ranks_scheduled(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The distinct ranks ``kernel_time`` and its relatives schedule in this process, in order."""
    import moeopt.megamoe.kerneltime as kt

    seen: list[int] = []
    real = kt._rank_time

    def counting(rep: int) -> Any:
        seen.append(rep)
        return real(rep)

    monkeypatch.setattr(kt, "_rank_time", counting)
    return seen
