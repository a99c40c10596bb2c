from __future__ import annotations

import pytest

import moeopt.megamoe as mm


@pytest.fixture(scope="session")
def bs72() -> mm.Scenario:
    """The seed's bs=72 shape: h 5120, intermediate 4608, topk 6, 8 ranks, 3 local experts."""
    return mm.Scenario(
        workload=mm.Workload(tokens=72, topk=6, world=8, local_experts=3, routing="uniform"),
        h=5120,
        hidden_dim=9216,
        aic_num=28,
        profile="megamoe-a8w8",
    )
