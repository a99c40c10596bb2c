"""The baseline's scheduling-anomaly noise is computed in a forked child while the outputs are
written; the reference is computing it in this process (:func:`base_anomaly`)."""

from __future__ import annotations

import copy
import os
import signal
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


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="needs signal masks")
def test_the_child_starts_with_the_stop_signals_held(
    cfg: Any, here: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # close() terminates a child that may not have set its own handlers yet: until it has, it
    # holds SIGTERM and SIGINT back (a terminate is then acted on as its own setting says, see
    # tests/core/test_forked.py), and lets them through once it has
    real = outputs._base_noise_child
    stop = {int(signal.SIGTERM), int(signal.SIGINT)}

    def held() -> list[int]:
        return sorted(stop & set(map(int, signal.pthread_sigmask(signal.SIG_BLOCK, []))))

    class Told:
        """The child's pipe, which adds the child's signal state to what it sends."""

        def __init__(self, send: Any, at_start: list[int]) -> None:
            self.pipe, self.at_start = send, at_start

        def send(self, got: dict[str, Any]) -> None:
            default = signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
            self.pipe.send({**got, "held at start": self.at_start, "held after": held(), "default": default})

        def close(self) -> None:
            self.pipe.close()

    monkeypatch.setattr(outputs, "_base_noise_child", lambda cfg, send: real(cfg, Told(send, held())))
    noise = BaseNoise(cfg)
    assert noise._proc is not None
    got = noise.result()
    assert got == {"tiny": 0.5, "held at start": sorted(stop), "held after": [], "default": True}
    assert here == []  # (computed in the child alone)
