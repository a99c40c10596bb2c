"""``kernel_time``: the kernel's time without the analyses, distinct ranks in worker processes.

Its contract is that of ``simulate``: the same times and the same guardrail errors. The
reference here is ``simulate`` itself (the full pipeline, a different code path that keeps
every rank's graph, schedule and analyses in this process)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from moeopt.core import forked
from moeopt.errors import ScheduleError
from moeopt.megamoe import BoundViolation, Scenario, kerneltime, simulate
from moeopt.megamoe.build.context import BuildContext
from moeopt.megamoe.kerneltime import kernel_time, kernel_time_built
from moeopt.megamoe.simulate import build_graphs, rank_groups
from moeopt.trust.golden import default_configs


def _golden(name: str) -> Scenario:
    if name == "pto_m16.zipf.late_aic":
        # skewed routing with late-bound cube tiles: the guardrail's idle decomposition is
        # made while the ranks are timed, and simulate(..., ranks="slowest") takes it from there
        return _golden("pto_m16.zipf").with_overrides({"options.late_bind_pools": ["AIC"]})
    return next(c for c in default_configs() if c.name == name).scenario()


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize(
    "name", ["bs72.zipf", "pto_m16.zipf", "bs72.random", "basic_e8", "pto_m16.zipf.stealing"]
)
def test_same_times_as_simulate(name: str, workers: int) -> None:
    # skewed routings: every rank of the world is a graph of its own, so the slowest rank and
    # the barrier-delayed ends depend on all of them (basic_e8: one rank stands for all;
    # .stealing: a restructuring rule re-pins tiles while scheduling)
    sc = _golden(name)
    r = simulate(sc)
    k = kernel_time(sc, workers=workers)
    assert k["kernel_total_us"] == r["kernel_total_us"]
    assert k["kernel_dag_end_us"] == r["kernel_dag_end_us"]
    assert k["slowest_rank"] == r["slowest_rank"]
    assert k["simulated_ranks"] == r["simulated_ranks"]
    assert k["rank_kernel_total_us"] == {
        rank: rr["kernel_total_us"] for rank, rr in sorted(r["rank_results"].items())
    }
    assert k["workers"] == min(workers, len(r["simulated_ranks"]))  # one thread here: forked


@pytest.mark.parametrize("workers", [1, 2])
def test_same_times_with_graphs_compiled_to_arrays(monkeypatch: pytest.MonkeyPatch, workers: int) -> None:
    # kernel_time compiles its ranks to arrays first once the compiled loop is loaded (the
    # loop, the array check and the tables then read Edges; the per-event tuples are made
    # only if read): with every graph of the run compiled that way (in this process and in
    # the forked workers), the same times as simulate's through the tuples
    from moeopt.core import compiled, fastloop

    sc = _golden("pto_m16.zipf")
    r = simulate(sc)
    monkeypatch.setattr(compiled, "COLUMNS_MIN_EVENTS", 0)
    monkeypatch.setattr(fastloop, "MIN_EVENTS", 0)
    # (loaded for this test: kernel_time's ranks go to the compiled loop; the process's own
    # state comes back afterwards)
    monkeypatch.setattr(fastloop, "_LOOP", fastloop._LOOP)
    monkeypatch.setattr(fastloop, "_seen_events", fastloop._seen_events)
    fastloop.compiled()
    k = kernel_time(sc, workers=workers)
    assert k["kernel_total_us"] == r["kernel_total_us"]
    assert k["rank_kernel_total_us"] == {
        rank: rr["kernel_total_us"] for rank, rr in sorted(r["rank_results"].items())
    }


def test_loading_the_loop_loads_the_machine_code_workers_run() -> None:
    # numba loads a function's machine code on its first call in a process, for that call's
    # argument types: once fastloop.compiled() has run (before_fork runs it before forking the
    # workers), a rank scheduled and compiled to arrays loads nothing more, so that forked
    # workers do not each load it again on every fork. In a fresh interpreter: this one may
    # have loaded the code already
    script = """
import json
from moeopt.core import compiled, fastkernel, fastloop
from moeopt.megamoe import kernel_time
from tests.megamoe.test_kerneltime import _golden
compiled.COLUMNS_MIN_EVENTS = 0
fastloop.MIN_EVENTS = 0
kernels = (fastkernel.loop, fastkernel.topo_order) if fastloop.compiled() else ()
loaded = [len(k.signatures) for k in kernels]
kernel_time(_golden("pto_m16.zipf"), workers=1)
print(json.dumps([loaded, [len(k.signatures) for k in kernels]]))
"""
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=root)
    # (one loaded each, by compiled(); none more by the run)
    assert json.loads(out.stdout) == [[1, 1], [1, 1]]


def test_a_stopped_point_stops_its_workers_whatever_the_parents_signal_handler() -> None:
    # a point that stops at a rank stops its pool while the other worker is busy. Two hangs were
    # seen here: a worker inherits the parent's Python signal handlers through the fork, and a
    # handler that does not end the process (here one that does nothing: what a lost exception
    # in a search's handler comes to) left it running, then waiting for a task; and with
    # multiprocessing.Pool, a worker stopped while handing back its result held the lock of the
    # pool's one result queue, for which Pool.terminate then waited for ever (about one run in
    # ten beside two busy loops; moeopt.core.forked.ForkPool shares no lock). In a fresh
    # interpreter with a time limit, so that a hang fails the test instead of the suite
    script = """
import signal
from moeopt.megamoe.kerneltime import Reached, kernel_time, kernel_time_below
from tests.megamoe.test_kerneltime import _golden
sc = _golden("pto_m16.zipf")
times = kernel_time(sc, workers=2)["rank_kernel_total_us"]
signal.signal(signal.SIGTERM, lambda signum, frame: None)
for _ in range(6):
    assert isinstance(kernel_time_below(sc, min(times.values()), workers=2), Reached)
print("stopped")
"""
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=root, timeout=120
    )
    assert out.stdout.split() == ["stopped"]


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="needs signal masks")
def test_rank_workers_start_with_the_stop_signals_held(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # a terminate that reached a worker between its fork and its own handlers would run the
    # parent's handler there (see tests/core/test_forked.py). Each worker of a rank pool must
    # start with SIGTERM and SIGINT held back, and let them through once it has set its own
    # handlers (SIGTERM: the default)
    stop = {int(signal.SIGTERM), int(signal.SIGINT)}
    real = forked.child_stop_signals

    def spy() -> None:
        at_start = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        real()
        after = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        seen = [sorted(stop & set(map(int, at_start))), sorted(stop & set(map(int, after)))]
        seen.append(signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)
        part = tmp_path / f"{os.getpid()}.part"
        part.write_text(json.dumps(seen))
        part.rename(tmp_path / f"{os.getpid()}.json")

    monkeypatch.setattr(forked, "child_stop_signals", spy)
    sc = _golden("bs72.zipf")
    counts, _groups = rank_groups(sc)
    parent_mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    with kerneltime._pool(kerneltime._Job(sc, counts, False), 2):
        assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == parent_mask  # (this thread's restored)
        deadline = time.monotonic() + 60
        while len(list(tmp_path.glob("*.json"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        got = [json.loads(f.read_text()) for f in sorted(tmp_path.glob("*.json"))]
    assert got == [[sorted(stop), [], True]] * 2


def test_built_graphs_give_the_same_time() -> None:
    sc = _golden("bs72.zipf")
    assert kernel_time_built(sc, build_graphs(sc)) == {**kernel_time(sc), "workers": 1}


def test_guardrail_error_is_simulates(monkeypatch: pytest.MonkeyPatch) -> None:
    # the cube and the GM->L1 loads made 1000x too fast inside the builder only (the bounds use
    # the true constants): the simulated time drops below the compute / bandwidth bounds. On a
    # skewed routing with the ranks in forked workers (which inherit the patch), the error of
    # the same rank must come back, with its bounds
    real = BuildContext.c

    def cheap(self: BuildContext, name: str) -> float:
        v = real(self, name)
        return v * 1000 if name in ("gm_l1_bytes_per_us", "cube_mac_per_us_int8") else v

    monkeypatch.setattr(BuildContext, "c", cheap)
    sc = _golden("bs72.zipf").with_overrides({"options.bandwidth_contention": False})
    with pytest.raises(BoundViolation) as ref:
        simulate(sc)
    with pytest.raises(BoundViolation) as got:
        kernel_time(sc, workers=2)
    assert str(got.value) == str(ref.value)
    assert got.value.bounds == ref.value.bounds
    # simulate(..., ranks="slowest") judges every rank too, not only the slowest one
    with pytest.raises(BoundViolation) as cut:
        simulate(sc, ranks="slowest")
    assert str(cut.value) == str(ref.value)
    off = kernel_time(sc, workers=2, check_bounds=False)
    assert off["kernel_total_us"] == simulate(sc, check_bounds=False)["kernel_total_us"]


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_bad_workers_named(bad: object) -> None:
    sc = _golden("bs72.zipf")
    with pytest.raises(ValueError, match=r"workers = .*allowed: an integer >= 1, or None"):
        kernel_time(sc, workers=bad)  # type: ignore[arg-type]


def test_worker_error_crosses_intact(monkeypatch: pytest.MonkeyPatch) -> None:
    # an error raised in a worker comes back as itself: the validator's ScheduleError takes a
    # list of violations in its constructor (plain pickling would rebuild it from its message);
    # the lowest rank's error is raised, as simulate schedules the ranks in rank order
    import moeopt.megamoe.kerneltime as kt

    def refuse(graph: object, s: object, **_options: object) -> None:
        raise ScheduleError([f"made up for the graph of {len(graph)} events"])  # type: ignore[arg-type]

    monkeypatch.setattr(kt, "validate_schedule", refuse)
    monkeypatch.setattr(sys.modules["moeopt.megamoe.simulate"], "validate_schedule", refuse)
    sc = _golden("bs72.zipf")
    with pytest.raises(ScheduleError) as ref:
        simulate(sc)
    with pytest.raises(ScheduleError) as got:
        kernel_time(sc, workers=2)
    assert type(got.value) is ScheduleError
    assert got.value.violations == ref.value.violations
    assert str(got.value) == str(ref.value)


def test_workers_with_another_thread_running() -> None:
    # a program with a thread running (a search worker's heartbeat) must not fork (a child could
    # inherit a lock that thread holds): the ranks are scheduled in this process, same times
    import threading

    stop = threading.Event()
    t = threading.Thread(target=stop.wait, daemon=True)
    t.start()
    try:
        sc = _golden("bs72.zipf")
        got = kernel_time(sc, workers=2)
    finally:
        stop.set()
        t.join()
    assert got["workers"] == 1
    assert got == {**kernel_time(sc, workers=2), "workers": 1}


@pytest.mark.parametrize("workers", [False, True])
@pytest.mark.parametrize(
    "name", ["bs72.zipf", "pto_m16.zipf", "basic_e8", "pto_m16.zipf.stealing", "pto_m16.zipf.late_aic"]
)
def test_slowest_only_is_the_full_result_cut_down(
    monkeypatch: pytest.MonkeyPatch, name: str, workers: bool
) -> None:
    # simulate(..., ranks="slowest") is simulate(...) with rank_results and simulated_ranks cut
    # down to the slowest rank's routing signature, plus every rank's time: the reference is
    # the full pipeline, which analyses every rank in this process. The slowest rank is
    # analysed where it was timed (in a worker, or here), not built a second time
    from moeopt.cli.common import result_to_jsonable

    sc = _golden(name)
    full = simulate(sc)
    _in_workers(monkeypatch, workers)
    build_pkg = sys.modules["moeopt.megamoe.build"]  # (the registered builder reads it there)
    real_build = build_pkg.build_rank
    built: list[int] = []

    def build(*args: Any, **kw: Any) -> object:
        built.append(args[5])  # (cfg, tokens, topk, world, counts, rank, ...)
        return real_build(*args, **kw)

    monkeypatch.setattr(build_pkg, "build_rank", build)
    cut = simulate(sc, ranks="slowest")
    n = len(full["simulated_ranks"])
    assert len(built) == (0 if workers and n > 1 else n)  # (in the workers, or each once here)
    rep = next(
        rr["rank"]
        for rr in full["rank_results"].values()
        if full["slowest_rank"] in rr["ranks_sharing_signature"]
    )
    assert cut["simulated_ranks"] == [rep]
    assert sorted(cut["rank_results"]) == sorted(full["rank_results"][rep]["ranks_sharing_signature"])
    assert cut["rank_kernel_total_us"] == {
        r: rr["kernel_total_us"] for r, rr in sorted(full["rank_results"].items())
    }
    a, b = result_to_jsonable(full), result_to_jsonable(cut)
    for key in ("rank_results", "representative_of_rank", "simulated_ranks"):
        a.pop(key)
        b.pop(key)
    b.pop("rank_kernel_total_us")
    assert a == b  # every other field, value for value (provenance, bounds, idle, critical path...)
    f, c = full["rank_results"][rep], cut["rank_results"][rep]
    assert c["schedule"].fingerprint() == f["schedule"].fingerprint()
    assert list(c["events"]) == list(f["events"])
    assert {k: v for k, v in c.items() if k not in ("schedule", "graph", "events")} == {
        k: v for k, v in f.items() if k not in ("schedule", "graph", "events")
    }


@pytest.mark.parametrize("bad", ["fastest", "", None, 1])
def test_bad_rank_detail_named(bad: object) -> None:
    with pytest.raises(ValueError, match=r"ranks = .*not allowed; allowed: 'all', 'slowest'"):
        simulate(_golden("bs72.zipf"), ranks=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(("ranks", "per_rank", "extra"), [("all", 3, 0), ("slowest", 1, 1)])
def test_progress_counts_every_step(ranks: str, per_rank: int, extra: int) -> None:
    # all: each distinct rank built, scheduled and analysed; slowest: each timed, then the
    # slowest one analysed. Steps come in order, one by one, up to the announced total
    sc = _golden("bs72.zipf")
    calls: list[tuple[int, int, str]] = []
    r = simulate(sc, ranks=ranks, progress=lambda d, t, w: calls.append((d, t, w)))
    n = len(set(r.get("rank_kernel_total_us", r["rank_results"])))  # 8 distinct ranks
    assert n == 8
    total = per_rank * n + extra
    assert [d for d, _t, _w in calls] == list(range(1, total + 1))
    assert {t for _d, t, _w in calls} == {total}
    assert (
        calls[-1][2]
        == f"rank {r['slowest_rank'] if ranks == 'slowest' else max(r['simulated_ranks'])} analysed"
    )


# --------------------------------------------------------------------------- simulate(ranks="all")
# in worker processes: each distinct rank built, scheduled, validated and analysed in a worker,
# its result packed (moeopt.megamoe.packed) and rebuilt here. The reference is the same call
# with the ranks in this process (a process that may not fork runs them so).


def _plain(x: object) -> object:
    """``x`` with every graph, schedule and event table as plain values (they compare by
    identity, or through lazy maps, as they are): what a user reads of them."""
    from moeopt.core.events import EventGraph
    from moeopt.core.schedule import Schedule

    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_plain(v) for v in x]
    if isinstance(x, EventGraph):
        return (
            [repr(ev) for ev in x],
            [dict(ev.labels) for ev in x],
            dict(x.semaphores),
            dict(x.pools),
        )
    if isinstance(x, Schedule):
        levels = x.recorded_levels
        return (
            x,  # its own == (starts, ends, bindings, waits, policy, order, moves)
            list(x.start_us),  # (in order)
            dict(x.waits),
            None if levels is None else {sem: x.semaphore_levels(sem) for sem in levels.curves},
            x.fingerprint(),
        )
    if type(x).__name__ == "EventRows":
        return list(x)  # type: ignore[call-overload]
    return x


def _in_workers(monkeypatch: pytest.MonkeyPatch, on: bool) -> None:
    import moeopt.megamoe.kerneltime as kt

    # two workers whatever the scenario's size and this machine's cores, or none at all
    monkeypatch.setattr(kt, "_default_workers", lambda rows: min(2, len(rows)) if on else 1)


@pytest.mark.parametrize("name", ["basic_zipf", "bs72.zipf", "pto_m16.zipf.stealing", "basic_e8"])
def test_all_ranks_in_workers_is_the_same_result(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    # skewed routings (every rank a graph of its own; .stealing: a restructuring rule re-pins
    # tiles, so the result's graph is the re-pinned one), and one rank standing for all
    # (basic_e8: nothing to send to workers, the ranks stay here)
    import moeopt.megamoe as mm

    if name == "basic_zipf":
        sc = mm.load_scenario("examples/scenario_basic.toml").with_overrides({"workload.routing": "zipf"})
    else:
        sc = _golden(name)
    _in_workers(monkeypatch, False)
    ref = simulate(sc)
    _in_workers(monkeypatch, True)
    import moeopt.megamoe.kerneltime as kt

    unpacked: list[int] = []
    real_unpack = kt.unpack
    monkeypatch.setattr(kt, "unpack", lambda p, *a: unpacked.append(1) or real_unpack(p, *a))
    calls: list[tuple[int, int, str]] = []
    got = simulate(sc, progress=lambda d, t, w: calls.append((d, t, w)))
    # every distinct rank came from a worker (none when one rank stands for all)
    n = len(ref["simulated_ranks"])
    assert len(unpacked) == (n if n > 1 else 0)
    assert _plain(got) == _plain(ref)
    assert list(got) == list(ref)
    for r, rr in got["rank_results"].items():
        assert list(rr) == list(ref["rank_results"][r])  # the keys in order too
        # ranks sharing a routing signature share one result, as here
        assert rr is got["rank_results"][rr["ranks_sharing_signature"][0]]
    # each distinct rank's three steps, in the order the ranks come back
    assert [d for d, _t, _w in calls] == list(range(1, 3 * n + 1))
    assert {t for _d, t, _w in calls} == {3 * n}


@pytest.mark.parametrize("in_workers", [True, False])
@pytest.mark.parametrize("name", ["basic_zipf", "bs72.zipf", "pto_m16.zipf.stealing"])
def test_simulate_with_the_compiled_loop_is_the_same_result(
    monkeypatch: pytest.MonkeyPatch, name: str, in_workers: bool
) -> None:
    # with the compiled loop loaded, simulate (in its workers, or in this process) compiles
    # each rank's graph to arrays and the analyses' walks (each event's longest data path and
    # data-ready time, the floors' ancestors of the last combines) run on those arrays in
    # machine code: the same result, value for value, as this process makes with the Python
    # loop and the Python walks
    import moeopt.megamoe as mm
    from moeopt.core import compiled, fastloop
    from moeopt.megamoe.analysis import bounds
    from moeopt.megamoe.build import RankGraph

    if name == "basic_zipf":
        sc = mm.load_scenario("examples/scenario_basic.toml").with_overrides({"workload.routing": "zipf"})
    else:
        sc = _golden(name)
    monkeypatch.setattr(fastloop, "_LOOP", None)
    monkeypatch.setattr(fastloop, "_WALKS", False)
    monkeypatch.setattr(fastloop, "LOAD_EVENTS", 1 << 60)  # (never loaded for the reference)
    _in_workers(monkeypatch, False)
    ref = simulate(sc)
    fastloop.compiled()
    fastloop.load_walks()  # (its two-event graph compiled here, before compiling is watched)
    monkeypatch.setattr(fastloop, "MIN_EVENTS", 0)

    def refuse(*_args: object) -> None:
        raise AssertionError("a graph compiled to tuples, or a Python walk, with the compiled loop loaded")

    # (set before the workers fork: a worker that compiled to tuples or walked in Python
    # fails its rank)
    monkeypatch.setattr(compiled, "_scan_rows", refuse)
    monkeypatch.setattr(RankGraph, "data_preds", refuse)
    monkeypatch.setattr(bounds, "_ancestors_or_self", refuse)
    _in_workers(monkeypatch, in_workers)
    got = simulate(sc)
    assert len(got["simulated_ranks"]) > 1
    assert _plain(got) == _plain(ref)


@pytest.mark.parametrize("in_workers", [True, False])
def test_simulate_with_the_compiled_loop_refuses_a_broken_schedule(
    monkeypatch: pytest.MonkeyPatch, in_workers: bool
) -> None:
    # with the compiled loop loaded, simulate's validator reads the graph by position (the
    # compiled edges, the schedule's own columns): a schedule that breaks a dependency is still
    # refused, and the message is the event-by-event check's, naming the edge. The schedule
    # here is the greedy one of the graph with one event's dependencies left out.
    import dataclasses

    from moeopt.core import fastloop, validate
    from moeopt.core.scheduler import schedule as real_schedule

    sim = sys.modules["moeopt.megamoe.simulate"]
    # (loaded for this test alone: the process's state is restored after it)
    monkeypatch.setattr(fastloop, "_LOOP", None)
    fastloop.compiled()
    monkeypatch.setattr(fastloop, "MIN_EVENTS", 0)
    _in_workers(monkeypatch, in_workers)
    cut: list[str] = []

    def broken(g: Any, **options: Any) -> object:
        ref = real_schedule(g, **options)
        # the last event that waited for a dependency (it starts later than 0)
        name = max((ev.name for ev in g if ev.deps and ref.start_us[ev.name] > 0.0), key=ref.start_us.get)
        cut.append(name)
        events = [dataclasses.replace(ev, deps={}) if ev.name == name else ev for ev in g]
        return real_schedule(g.copy_with(events=events), **options)

    monkeypatch.setattr(sim, "schedule", broken)
    # (the array check, which reads by position, runs on graphs of VECTOR_MIN_EVENTS or more:
    # pto_m16's ranks have ~1.9k events; it is watched here, in this process)
    checks: list[bool] = []
    real_passes = validate._passes

    def passes(graph: Any, s: Any, exact: bool, by_position: bool = False) -> bool:
        checks.append(by_position)
        return real_passes(graph, s, exact, by_position)

    monkeypatch.setattr(validate, "_passes", passes)
    with pytest.raises(ScheduleError, match="before its predecessor") as err:
        simulate(_golden("pto_m16.zipf"))
    if not in_workers:  # (in workers the names and checks were noted in the worker processes)
        assert any(f"event {name!r} starts at" in str(err.value) for name in cut)
        assert checks
        assert all(checks)


def test_all_ranks_in_workers_raise_simulates_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # the validator refuses the schedules of some ranks and the builder fails on others: simulate
    # builds every rank before it schedules one, so the lowest rank's build error is raised,
    # whichever worker finished first; without build errors, the lowest rank's validation error
    import moeopt.megamoe.kerneltime as kt
    from moeopt.errors import GraphError

    sc = _golden("bs72.zipf")
    reps = simulate(sc)["simulated_ranks"]
    assert len(reps) >= 4
    refused, broken = set(reps[1::2]), set(reps[2::2])  # ranks 1, 3, 5, 7 and 2, 4, 6
    sim = sys.modules["moeopt.megamoe.simulate"]
    build_pkg = sys.modules["moeopt.megamoe.build"]  # (the registered builder reads it there)
    real_validate, real_build = sim.validate_schedule, build_pkg.build_rank

    def validate(graph: Any, s: object, **options: Any) -> None:
        rank = graph["head"].labels["rank"]
        if rank in refused:
            raise ScheduleError([f"made up for rank {rank}"])
        real_validate(graph, s, **options)

    def build(*args: Any, **kw: Any) -> object:
        if args[5] in broken:  # (cfg, tokens, topk, world, counts, rank, ...)
            raise GraphError(f"made up for rank {args[5]}")
        return real_build(*args, **kw)

    monkeypatch.setattr(sim, "validate_schedule", validate)
    for patched, want in (
        (False, "rank 1"),
        (True, "rank 2"),
    ):  # validation errors alone, then with build errors
        if patched:
            monkeypatch.setattr(build_pkg, "build_rank", build)
        errors = []
        for on in (False, True):
            _in_workers(monkeypatch, on)
            with pytest.raises(Exception) as err:
                simulate(sc)
            errors.append(err.value)
        ref, got = errors
        assert type(got) is type(ref) is (GraphError if patched else ScheduleError)
        assert str(got) == str(ref)
        assert want in str(got)
        assert vars(got) == vars(ref)
    assert kt._FULL is None  # (the job lives in the workers only)


def test_rank_groups_kept_for_the_last_workload_are_a_fresh_draw(tmp_path: Any) -> None:
    # a run asks for the counts and rank groups up to three times (progress bar, step count,
    # build): the last workload's are kept, and must be what a fresh draw gives, whatever a
    # caller does to the copies it was handed
    import numpy as np

    import moeopt.megamoe as mm
    from moeopt.megamoe.routing import counts_matrix

    sim = sys.modules["moeopt.megamoe.simulate"]  # (the package's ``simulate`` is the function)
    sc = _golden("bs72.zipf")
    sim._LAST_GROUPS.clear()
    c1, g1 = sim.rank_groups(sc)
    c1[0, 0] += 5
    g1[0].append(99)
    c2, g2 = sim.rank_groups(sc)  # (kept)
    assert sc.workload in sim._LAST_GROUPS
    assert np.array_equal(c2, counts_matrix(sc.workload))
    sim._LAST_GROUPS.clear()
    c3, g3 = sim.rank_groups(sc)  # (drawn again)
    assert np.array_equal(c2, c3)
    assert g2 == g3
    # a routing file is read again on every call (it may have changed in between)
    path = tmp_path / "routes.json"
    path.write_text('{"counts": [[2, 2, 2, 2], [2, 2, 2, 2]]}')
    w = mm.Workload(tokens=4, topk=2, world=2, local_experts=2, routing="file", file=str(path))
    fs = mm.Scenario(workload=w, h=7168, hidden_dim=4096, profile="pto-a2a3")
    assert sim.rank_groups(fs)[0].tolist() == [[2, 2, 2, 2], [2, 2, 2, 2]]
    path.write_text('{"counts": [[8, 0, 0, 0], [0, 0, 0, 8]]}')
    assert sim.rank_groups(fs)[0].tolist() == [[8, 0, 0, 0], [0, 0, 0, 8]]


def _in_daemon(q: Any) -> None:
    import moeopt.megamoe.kerneltime as kt

    sc = _golden("bs72.zipf")
    kt._default_workers = lambda rows: 2  # (this process only)
    q.put((kernel_time(sc, workers=2), simulate(sc)["kernel_total_us"]))


def test_workers_from_a_daemonic_process() -> None:
    # a worker of a user's multiprocessing pool is daemonic and may not start processes: the
    # ranks are scheduled in it (simulate's too), same times
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_in_daemon, args=(q,), daemon=True)
    p.start()
    got, total = q.get(timeout=120)
    p.join(timeout=60)
    assert got["workers"] == 1
    sc = _golden("bs72.zipf")
    assert got == {**kernel_time(sc, workers=2), "workers": 1}
    assert total == got["kernel_total_us"]


def test_only_the_slowest_ranks_keep_their_analyses() -> None:
    # simulate(..., ranks="slowest") analyses every rank that may be the slowest when it is
    # timed; once a slower one is in, the faster one's analyses are dropped (never read), the
    # ranks tied for the greatest time keep theirs, a rank never analysed stays so
    from moeopt.megamoe.kerneltime import _drop_slower, _RankTime

    def t(rep: int, total: float, analysed: object) -> _RankTime:
        return _RankTime(rep, total, 0.0, 0.0, 1, {}, None, analysed=analysed)  # type: ignore[arg-type]

    got: list[Any] = [
        t(0, 5.0, "r0"),
        ("build", ValueError("x")),
        t(2, 7.0, "r2"),
        t(3, 7.0, "r3"),
        t(4, 6.0, None),
    ]
    _drop_slower(got)
    assert [g.analysed if isinstance(g, _RankTime) else g[0] for g in got] == [
        None,
        "build",
        "r2",
        "r3",
        None,
    ]


def test_slowest_analysis_error_only_for_the_slowest(monkeypatch: pytest.MonkeyPatch) -> None:
    # ranks="slowest" analyses a rank as soon as it may be the slowest; the analyses of a rank
    # that turns out faster are never read, so their error is not raised either, while the
    # slowest rank's is (here, with the ranks timed in this process in an order that puts the
    # slowest last: the first rank is always analysed, and is not the slowest)
    import moeopt.megamoe.kerneltime as kt

    sc = _golden("bs72.zipf")
    _in_workers(monkeypatch, False)
    ref = simulate(sc, ranks="slowest")
    slow_rep = ref["simulated_ranks"][0]
    real_order = kt._slowest_first

    def slowest_last(counts: Any, groups: list[list[int]], e: int) -> list[int]:
        order = real_order(counts, groups, e)
        return sorted(order, key=lambda k: groups[k][0] == slow_rep)  # (stable: the rest as they were)

    monkeypatch.setattr(kt, "_slowest_first", slowest_last)
    counts, groups = sys.modules["moeopt.megamoe.simulate"].rank_groups(sc)
    first_rep = groups[slowest_last(counts, groups, sc.workload.local_experts)[0]][0]
    assert first_rep != slow_rep  # (the case this test is about)
    assert _plain(simulate(sc, ranks="slowest")) == _plain(ref)  # the order changes nothing
    real = kt.rank_result

    def failing(rep: int) -> Any:
        def analyse(rg: Any, *args: Any) -> Any:
            if rg.rank == rep:
                raise ArithmeticError(f"made up for rank {rep}")
            return real(rg, *args)

        return analyse

    monkeypatch.setattr(kt, "rank_result", failing(first_rep))
    got = simulate(sc, ranks="slowest")
    assert _plain(got) == _plain(ref)
    monkeypatch.setattr(kt, "rank_result", failing(slow_rep))
    with pytest.raises(ArithmeticError, match=f"made up for rank {slow_rep}"):
        simulate(sc, ranks="slowest")


# --------------------------------------------------------------------------- the order ranks are timed in
def test_slowest_first_by_the_heaviest_expert() -> None:
    import numpy as np

    from moeopt.megamoe.kerneltime import _slowest_first

    # two source ranks, four destination ranks of two experts each; per expert, the rows from
    # both sources: rank 0 [5, 5], rank 1 [9, 0], rank 2 [5, 6], rank 3 [9, 1]. By the heaviest
    # expert, then the rows in all: rank 3 (9, 10), rank 1 (9, 9), rank 2 (6, 11), rank 0 (5, 10)
    # (by the rows in all it would be 2, 0 and 3, 1)
    counts = np.array([[2, 3, 4, 0, 5, 1, 9, 0], [3, 2, 5, 0, 0, 5, 0, 1]])
    assert _slowest_first(counts, [[0], [1], [2], [3]], 2) == [3, 1, 2, 0]
    # ranks sharing a signature are keyed by their representative; equal keys in rank order
    assert _slowest_first(counts, [[1, 3], [0], [2]], 2) == [0, 2, 1]
    assert _slowest_first(np.zeros((2, 4), dtype=np.int64), [[0], [1]], 2) == [0, 1]


@pytest.mark.parametrize("name", ["bs72.zipf", "pto_m16.zipf"])
def test_built_graphs_in_the_same_order(name: str) -> None:
    # kernel_time_built_below orders built graphs by the plan's experts as _timed orders the
    # ranks by the routing counts
    import moeopt.megamoe.kerneltime as kt

    sc = _golden(name)
    counts, groups = sys.modules["moeopt.megamoe.simulate"].rank_groups(sc)
    graphs = build_graphs(sc)
    want = [groups[k][0] for k in kt._slowest_first(counts, groups, sc.workload.local_experts)]
    assert sorted(graphs, key=lambda rep: kt._built_key(graphs[rep][0])) == want


def test_below_in_workers_reads_each_rank_as_it_is_done(monkeypatch: pytest.MonkeyPatch) -> None:
    # the ranks in an order that puts the slowest last: the first is timed in this process and
    # does not reach the threshold (the kernel time); the first rank handed to a worker never
    # finishes in time (it waits on an event nobody sets), the other worker's ranks go on and
    # the last, the slowest, reaches the threshold and stops the run. Read in the order handed
    # out, the held rank would come back first, after the wait, with a time that reaches the
    # threshold (made up here), and be the one reported
    import multiprocessing

    import moeopt.megamoe.kerneltime as kt

    sc = _golden("bs72.zipf")
    full = kernel_time(sc, workers=1)
    times, slow = full["rank_kernel_total_us"], full["slowest_rank"]
    assert sorted(times.values())[-2] < times[slow]  # (one slowest rank)
    real_order = kt._slowest_first

    def slowest_last(counts: Any, groups: list[list[int]], e: int) -> list[int]:
        return sorted(real_order(counts, groups, e), key=lambda k: groups[k][0] == slow)

    monkeypatch.setattr(kt, "_slowest_first", slowest_last)
    counts, groups = sys.modules["moeopt.megamoe.simulate"].rank_groups(sc)
    held_rep = groups[slowest_last(counts, groups, sc.workload.local_experts)[1]][0]
    never = multiprocessing.get_context("fork").Event()
    real = kt._rank_time

    def held(rep: int) -> Any:
        got = real(rep)
        if rep == held_rep and not never.wait(timeout=20.0):  # assumed: far longer than a rank takes
            return got._replace(total_us=float("inf"))
        return got

    monkeypatch.setattr(kt, "_rank_time", held)
    got = kt.kernel_time_below(sc, times[slow], workers=2)
    assert got == kt.Reached(slow, times[slow])


@pytest.mark.parametrize("name", ["bs72.zipf", "pto_m16.zipf"])
def test_expected_events_are_the_gmm_tiles_of_a_rectangular_grid(name: str) -> None:
    # the estimate that decides whether to load the compiled loop before forking counts each
    # rank's GMM tiles on the rectangular grid: on these configs (rect grid, no split tiles)
    # exactly the events the builds label gmm1 and gmm2
    import moeopt.megamoe.kerneltime as kt

    sc = _golden(name)
    assert sc.config.tile_grid == "rect"
    counts, groups = sys.modules["moeopt.megamoe.simulate"].rank_groups(sc)
    reps = [g[0] for g in groups]
    graphs = build_graphs(sc)
    tiles = sum(
        1
        for rep in reps
        for ev in graphs[rep][0].graph.events.values()
        if ev.labels.get("stage") in ("gmm1", "gmm2")
    )
    assert kt._expected_events(sc.config, counts, reps, sc.workload.local_experts) == tiles
