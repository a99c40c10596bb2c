"""Read PSPLIB single-mode RCPSP instances (``.sm``) into an :class:`EventGraph`.

Parsing is done by OR-Tools' own parser (``ortools.scheduling.python.rcpsp``); this module only
maps its problem onto the event model: job ``k`` (1-based, as in the file, the dummy source and
sink included) becomes event ``job<k>`` with the job's duration and a dependency (λ = 0) on each
of its predecessors; renewable resource ``r`` becomes semaphore ``R<r>`` with the resource's
capacity, acquired at the job's start and released at its end by the same event.

Only what the event model can express is accepted: a multi-mode job, a non-renewable resource
or a time-lagged precedence is rejected with a clear error rather than silently dropped.
"""

from __future__ import annotations

import contextlib
import csv
import os
from collections.abc import Iterator
from pathlib import Path

from moeopt.core.events import Event, EventGraph
from moeopt.errors import InputError


def load_psplib(path: str | os.PathLike[str]) -> EventGraph:
    """Load one PSPLIB ``.sm`` file as an :class:`EventGraph` (see the module docstring)."""
    from ortools.scheduling.python import rcpsp

    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such PSPLIB file")
    parser = rcpsp.RcpspParser()
    try:
        with _quiet_stderr():  # the C++ parser logs its own complaints; ours is the one message
            ok = parser.parse_file(str(p))
    except Exception as exc:  # the C++ parser reports problems in several ways
        raise InputError(f"{p}: OR-Tools could not parse this PSPLIB file: {exc}") from None
    if not ok:
        raise InputError(f"{p}: OR-Tools could not parse this file as a PSPLIB RCPSP instance")
    problem = parser.problem()
    if problem.is_rcpsp_max or problem.is_consumer_producer or problem.is_resource_investment:
        raise InputError(f"{p}: only plain single-mode RCPSP instances are supported")
    tasks = list(problem.tasks)
    if not tasks:
        raise InputError(f"{p}: the file holds no jobs")
    sems: dict[str, int] = {}
    for k, r in enumerate(problem.resources):
        if not r.renewable:
            raise InputError(
                f"{p}: resource R{k + 1} is non-renewable; the event model has no consumable resources"
            )
        sems[f"R{k + 1}"] = int(r.max_capacity)
    preds: dict[int, list[int]] = {j: [] for j in range(len(tasks))}
    for j, task in enumerate(tasks):
        if len(task.recipes) != 1:
            raise InputError(
                f"{p}: job {j + 1} has {len(task.recipes)} modes; only single-mode instances are supported"
            )
        if len(task.successor_delays):
            raise InputError(f"{p}: job {j + 1} has time-lagged precedences, which are not supported")
        for succ in task.successors:
            preds[int(succ)].append(j)
    g = EventGraph(semaphores=sems)
    for j, task in enumerate(tasks):
        recipe = task.recipes[0]
        demand = {
            f"R{int(res) + 1}": int(d) for res, d in zip(recipe.resources, recipe.demands) if int(d) > 0
        }
        g.add(
            Event(
                f"job{j + 1}",
                deps={f"job{q + 1}": 0.0 for q in sorted(preds[j])},
                acquires=demand,
                releases=demand,
                duration_us=float(recipe.duration),
                labels={"psplib_job": j + 1},
            )
        )
    g.validate()
    return g


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence file descriptor 2 (C++ logging) for the duration of the block."""
    try:
        saved = os.dup(2)
    except OSError:  # no usable stderr: nothing to silence
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def load_psplib_optima(csv_path: str | os.PathLike[str]) -> dict[str, int]:
    """``instance -> optimal makespan`` from a CSV with columns ``instance,optimal_makespan``."""
    p = Path(csv_path)
    try:
        with p.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
    except OSError as exc:
        raise InputError(f"{p}: cannot read optima: {exc}") from None
    try:
        return {row["instance"]: int(row["optimal_makespan"]) for row in rows}
    except (KeyError, ValueError) as exc:
        raise InputError(
            f"{p}: expected columns 'instance,optimal_makespan' with integer makespans ({exc})"
        ) from None
