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
from typing import NamedTuple

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
    """``instance -> optimal makespan`` from a CSV with columns ``instance,optimal_makespan``
    whose every makespan is proven (a whole number). For sets with open instances (PSPLIB j60,
    j90, j120) see :func:`load_psplib_known`."""
    p = Path(csv_path)
    layout, known = _read_known(p)
    if layout != "optimal_makespan":
        raise InputError(f"{p}: expected columns 'instance,optimal_makespan' with integer makespans")
    out: dict[str, int] = {}
    for name, k in known.items():
        if k.optimum is None:
            raise InputError(
                f"{p}: instance {name!r} has the range {k}, not a proven optimum "
                "(load_psplib_known reads ranges)"
            )
        out[name] = k.optimum
    return out


class KnownMakespan(NamedTuple):
    """What is known of an instance's optimal makespan: it lies in ``[lower, upper]``; ``None``
    where nothing is known on that side. ``lower == upper`` is a proven optimum."""

    lower: int | None
    upper: int | None

    @property
    def optimum(self) -> int | None:
        """The proven optimum, or ``None`` while the instance is open."""
        return self.lower if self.lower is not None and self.lower == self.upper else None

    def bound_too_high(self, bound: float) -> bool:
        """Whether a lower bound exceeds what is known (the optimum, or the best known upper
        bound: a schedule of that makespan exists), so cannot be sound."""
        return self.upper is not None and bound > self.upper + 1e-9

    def makespan_too_low(self, makespan: float) -> bool:
        """Whether a schedule's makespan is below what is known (the optimum, or the best known
        lower bound): the schedule breaks a rule, or the known lower bound is wrong."""
        return self.lower is not None and makespan < self.lower - 1e-9

    def __str__(self) -> str:
        if self.optimum is not None:
            return str(self.optimum)
        return f"{'' if self.lower is None else self.lower}..{'' if self.upper is None else self.upper}"


_KNOWN_FORMS = (
    "a whole number (a proven optimum), 'L..U' (a lower and an upper bound), '..U' or 'L..' (one side)"
)


def load_psplib_known(csv_path: str | os.PathLike[str]) -> dict[str, KnownMakespan]:
    """``instance -> what is known of its optimal makespan`` from a CSV, for sets where some
    instances are still open (PSPLIB j60, j90, j120) as well as for proven ones (j30).

    Two layouts:

    * ``instance,optimal_makespan``: each value a whole number (proven), or a range ``L..U``
      (best known lower and upper bound), ``..U`` or ``L..`` (one side known);
    * ``instance,lower_bound,upper_bound``: whole numbers, either left empty when unknown
      (equal bounds: proven).

    An instance is named by its file's stem (``j601_1``); a trailing ``.sm`` is dropped, so
    tables that name files (``j601_1.sm``) read as well. A bad row raises one
    :class:`~moeopt.errors.InputError` naming its line, field and value."""
    return _read_known(Path(csv_path))[1]


def _read_known(p: Path) -> tuple[str, dict[str, KnownMakespan]]:
    """The layout (``"optimal_makespan"`` or ``"bounds"``) and the rows of
    :func:`load_psplib_known`, from one read of the file."""
    try:
        with p.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)
            reader.fieldnames = [c.strip() for c in reader.fieldnames or ()]
            rows = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"{p}: cannot read known makespans: {exc}") from None
    cols = set(reader.fieldnames)
    if "instance" in cols and "optimal_makespan" in cols:
        layout = "optimal_makespan"
    elif {"instance", "lower_bound", "upper_bound"} <= cols:
        layout = "bounds"
    else:
        raise InputError(
            f"{p}: expected columns 'instance,optimal_makespan' or 'instance,lower_bound,upper_bound', "
            f"got {', '.join(sorted(c for c in cols if c)) or 'none'}"
        )
    out: dict[str, KnownMakespan] = {}
    for line, row in enumerate(rows, 2):
        name = (row.get("instance") or "").strip().removesuffix(".sm")
        if not name:
            raise InputError(f"{p}: line {line}: field 'instance' is empty")
        if layout == "optimal_makespan":
            k = _known_value(p, line, "optimal_makespan", row.get("optimal_makespan"))
        else:
            k = KnownMakespan(
                _bound(p, line, "lower_bound", row.get("lower_bound")),
                _bound(p, line, "upper_bound", row.get("upper_bound")),
            )
        if k.lower is not None and k.upper is not None and k.lower > k.upper:
            raise InputError(
                f"{p}: line {line}: instance {name!r}: lower bound {k.lower} above upper bound {k.upper}"
            )
        if name in out:
            raise InputError(f"{p}: line {line}: instance {name!r} is listed twice")
        out[name] = k
    return layout, out


def _whole(text: str) -> int:
    """A whole number >= 0 (``ValueError`` otherwise)."""
    v = int(text)
    if v < 0:
        raise ValueError(text)
    return v


def _bound(p: Path, line: int, field: str, raw: str | None) -> int | None:
    text = (raw or "").strip()
    try:
        return _whole(text) if text else None
    except ValueError:
        raise InputError(
            f"{p}: line {line}: field {field!r} is {text!r}; allowed: a whole number >= 0 or empty"
        ) from None


def _known_value(p: Path, line: int, field: str, raw: str | None) -> KnownMakespan:
    text = (raw or "").strip()
    lo_s, dots, hi_s = text.partition("..")
    try:
        if not dots:
            v = _whole(text)
            return KnownMakespan(v, v)
        lo = _whole(lo_s) if lo_s.strip() else None
        hi = _whole(hi_s) if hi_s.strip() else None
        if lo is not None or hi is not None:
            return KnownMakespan(lo, hi)
    except ValueError:
        pass
    raise InputError(f"{p}: line {line}: field {field!r} is {text!r}; allowed: {_KNOWN_FORMS}")
