"""The baseline's scheduling-anomaly noise is computed in a forked child while the outputs are
written; the reference is computing it in this process (:func:`base_anomaly`)."""

from __future__ import annotations

import copy
import os
import threading
import time
from typing import Any

import pytest

import moeopt.search.outputs as outputs
from moeopt.search.config import load_study
from moeopt.search.outputs import BaseNoise, base_anomaly
from tests.search.conftest import TINY


@pytest.fixture
def cfg() -> Any:
    return load_study(copy.deepcopy(TINY))


def test_the_child_gives_what_this_process_computes(cfg: Any) -> None:
    noise = BaseNoise(cfg)
    assert noise._proc is not None  # computed in a child
    got = noise.result()
    assert noise._proc is None  # collected
    want = base_anomaly(cfg)
    assert got == want
    assert isinstance(want[cfg.shapes[0].name], float)


@pytest.fixture
def here(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """base_anomaly made cheap: {"tiny": 0.5}; the pids it ran in."""
    pids: list[int] = []

    def fake(cfg: Any) -> dict[str, float | None]:
        pids.append(os.getpid())
        return {"tiny": 0.5}

    monkeypatch.setattr(outputs, "base_anomaly", fake)
    return pids


def test_with_another_thread_running_no_child_is_forked(cfg: Any, here: list[int]) -> None:
    stop = threading.Event()
    th = threading.Thread(target=stop.wait)
    th.start()
    try:
        noise = BaseNoise(cfg)
    finally:
        stop.set()
        th.join()
    assert noise._proc is None
    assert noise.result() == {"tiny": 0.5}
    assert here == [os.getpid()]


def test_a_child_that_sends_nothing_is_replaced_by_this_process(
    cfg: Any, here: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(outputs, "_base_noise_child", lambda cfg, send: os._exit(3))
    noise = BaseNoise(cfg)
    assert noise._proc is not None
    assert noise.result() == {"tiny": 0.5}
    assert here == [os.getpid()]


def test_an_error_in_the_child_is_raised_here(cfg: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(cfg: Any) -> dict[str, float | None]:
        raise RuntimeError(f"broken in {os.getpid()}")

    monkeypatch.setattr(outputs, "base_anomaly", broken)
    noise = BaseNoise(cfg)
    with pytest.raises(RuntimeError, match=f"broken in {os.getpid()}$"):
        noise.result()


def test_close_stops_a_running_child(cfg: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outputs, "base_anomaly", lambda cfg: time.sleep(60))
    noise = BaseNoise(cfg)
    proc = noise._proc
    assert proc is not None
    assert proc.is_alive()
    t0 = time.perf_counter()
    noise.close()
    assert not proc.is_alive()
    assert time.perf_counter() - t0 < 10
