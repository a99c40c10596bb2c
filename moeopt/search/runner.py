"""The study loop: open or resume a study, run K workers on one storage, write the outputs.

Each worker is an ask-and-tell loop on the shared Optuna storage (so that the reason of every
pruned or failed point is stored with it and nothing Optuna does on its own can crash the run):

1. under the ask lock: recover the trials of dead workers (marked failed with ``interrupted``,
   their point queued again), count the trials that count, stop at the requested number,
   else ``study.ask()`` and record who runs the trial;
2. suggest the point (conditions followed); a point already evaluated in this study reuses
   that outcome (``duplicate_of``), else :class:`~moeopt.search.evaluate.Evaluator` decides:
   complete, pruned (constraint / infeasible / lower bound) or failed (guardrail / error);
3. tell the outcome; Ctrl-C or SIGTERM marks the running trial ``interrupted`` and queues its
   point again, so ``--resume`` continues with no point lost or run twice. A trial stopped
   before its first value was chosen is marked ``interrupted`` and not queued: no point was
   chosen, so none is lost (the sampler draws a new one).

A stop signal sent to the main process alone (``kill -TERM PID``) is passed on to the child
workers, which stop the same way; the main process waits for every one of them, writes the
outputs and says how the run ended (:data:`STATUSES`).

A trial *counts* towards the requested number when it is COMPLETE, PRUNED, RUNNING, or FAIL
for a reason other than an interruption (a failure is a result: a guardrail fired). What a trial
carries in the storage is :mod:`moeopt.search.trials`; Optuna's private names it needs are in
:mod:`moeopt.search.optuna_private`.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import queue
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from moeopt.megamoe.scenario import effective_table
from moeopt.search.config import PYTHON_NAMES, OptionNames, StudyConfig, load_study
from moeopt.search.errors import StudyError
from moeopt.search.evaluate import Evaluator
from moeopt.search.optuna_private import stale_trial_ids, storage_of, trial_id
from moeopt.search.outputs import StudyResult, write_outputs
from moeopt.search.progress import Progress, progress_mode
from moeopt.search.samplers import make_sampler
from moeopt.search.space import point_key, point_of, suggest
from moeopt.search.storage import (
    StorageSpec,
    ask_lock,
    check_journal,
    resolve_storage,
    worker_alive,
    worker_identity,
)
from moeopt.search.trials import (
    BASELINE_ATTR,
    BASELINE_TRIAL_ATTR,
    RESULT_ATTR,
    RETRY_ATTR,
    STUDY_ATTR,
    WORKER_ATTR,
    Outcome,
    WorkerStats,
    attrs,
    best_value,
    counts,
    finished,
    set_study_record,
    study_record,
    target_trials,
)

Say = Callable[[str], None]
Baseline = tuple[Outcome, dict[str, Any] | None]
"""The base scenarios' outcome (``evaluate({}, None)``) and the base's own point of the space."""


class Interrupted(KeyboardInterrupt):
    """SIGTERM, turned into the same orderly stop as Ctrl-C."""


class StudyInterrupted(KeyboardInterrupt):
    """Ctrl-C / SIGTERM stopped :func:`run_study` after it wrote the outputs of what was done.

    It stays a KeyboardInterrupt, so a tuning script that calls ``run_study`` in a loop stops
    too; ``result`` is the :class:`StudyResult` of the trials so far (``--resume`` continues).
    """

    def __init__(self, result: StudyResult, names: OptionNames = PYTHON_NAMES) -> None:
        super().__init__(f"study interrupted; continue it with {names.set('resume')}")
        self.result = result


# --------------------------------------------------------------------------- trial bookkeeping
def _tell(study: optuna.Study, trial: optuna.trial.Trial, **kw: Any) -> bool:
    """``study.tell``; False when the sampler says the space is exhausted.

    GridSampler and BruteForceSampler call ``Study.stop()`` from ``after_trial`` once every
    point is taken, which raises RuntimeError outside ``Study.optimize`` (optuna issues #4121,
    #5141). ``tell`` stores the state before that, so the trial is recorded either way.
    """
    try:
        study.tell(trial, **kw)
    except RuntimeError as exc:
        if "Study.stop" in str(exc):
            return False
        raise
    return True


def recover_stale(study: optuna.Study, trials: Sequence[FrozenTrial], local: bool) -> list[int]:
    """Mark RUNNING trials of dead workers ``interrupted`` and queue their points again.

    ``local``: the caller holds the ask lock of a file-backed storage, so a RUNNING trial that has
    no worker recorded yet belongs to a worker that died between ``ask`` and recording itself.
    """
    storage = storage_of(study)
    stale: list[FrozenTrial] = []
    for t in trials:
        if t.state != TrialState.RUNNING:
            continue
        ident = t.user_attrs.get(WORKER_ATTR)
        alive = worker_alive(ident) if ident is not None else (False if local else None)
        if alive is False:
            stale.append(t)
    # RDB storages also know other machines' dead workers through Optuna's heartbeat
    if isinstance(storage, optuna.storages.RDBStorage) and storage.get_heartbeat_interval():
        ids = set(stale_trial_ids(storage, study))
        stale += [t for t in trials if trial_id(t) in ids and t not in stale]
    done = []
    for t in stale:
        reason = f"worker {t.user_attrs.get(WORKER_ATTR, '?')} stopped while running it"
        try:
            storage.set_trial_user_attr(trial_id(t), RESULT_ATTR, {"kind": "interrupted", "reason": reason})
            storage.set_trial_state_values(trial_id(t), TrialState.FAIL)
        except (optuna.exceptions.UpdateFinishedTrialError, RuntimeError, KeyError):
            continue  # another worker recovered it first
        if t.params:
            study.enqueue_trial(dict(t.params), user_attrs={RETRY_ATTR: t.number})
        done.append(t.number)
    return done


# --------------------------------------------------------------------------- the worker loop
def worker_loop(
    cfg: StudyConfig,
    spec: StorageSpec,
    worker_index: int,
    deadline: float | None,
    on_trial: Callable[[int, float | None], None] | None = None,
    parent_pid: int | None = None,
    baseline: Baseline | None = None,
) -> WorkerStats:
    """Run trials until the study has ``cfg.trials`` counted trials, the deadline, or a stop.

    ``baseline``: the base scenarios' outcome evaluated by this run, and the base's own point of
    the space (see :meth:`Evaluator.take_baseline`)."""
    stats = WorkerStats()
    t_start = time.perf_counter()
    storage = spec.open()
    study = optuna.load_study(study_name=cfg.name, storage=storage, sampler=make_sampler(cfg, worker_index))
    target = target_trials(cfg)
    ev = Evaluator(cfg)
    if baseline is not None:
        ev.take_baseline(*baseline)
    ident = worker_identity()
    known: dict[str, FrozenTrial] = {}  # point key -> the first finished trial seen with that point
    entered: set[int] = set()  # the finished trials already looked at for ``known``
    trial: optuna.trial.Trial | None = None
    sig = _Signals()
    try:
        sig.install()
        while True:
            sig.check()  # a stop whose exception was swallowed (see _Signals) is raised here
            if deadline is not None and time.time() >= deadline:
                break
            if parent_pid is not None and os.getppid() != parent_pid:
                break  # the parent is gone: leave the study to --resume
            with sig.critical(), ask_lock(spec):
                trials = study.get_trials(deepcopy=False)
                rec = recover_stale(study, trials, spec.local)
                if rec:
                    stats.recovered += rec
                    trials = study.get_trials(deepcopy=False)
                n_counted = sum(1 for t in trials if counts(t))
                if n_counted >= target:
                    break
                with warnings.catch_warnings():
                    # Optuna warns that its heartbeat expects Study.optimize; this loop beats itself
                    warnings.filterwarnings("ignore", message="Heartbeat of storage")
                    trial = study.ask()
                trial.set_user_attr(WORKER_ATTR, ident)
                if not spec.local and _surplus(study, trial, target):
                    trial = None
                    break
            if cfg.duplicates:
                # a finished trial stays finished with its point: each is keyed once, in the
                # order of the trials as before (setdefault keeps the first trial of a point)
                for t in trials:
                    if t.number not in entered and finished(t) and t.params:
                        entered.add(t.number)
                        known.setdefault(point_key(t.params), t)
            best = best_value(trials, cfg)
            with _heartbeat(storage, trial_id(trial)):
                point = suggest(trial, cfg)
                prior = known.get(point_key(point)) if cfg.duplicates else None
                out = None if prior is not None else ev.evaluate(point, best)
                with sig.critical():  # a trial is told, or not at all
                    if out is None:
                        assert prior is not None
                        stats.duplicates += 1
                        ok = _tell_copy(study, trial, prior)
                    else:
                        stats.evaluated += 1
                        ok = _tell_outcome(study, trial, out)
                    trial = None
            if on_trial is not None:
                fresh = study.get_trials(deepcopy=False)
                on_trial(sum(1 for t in fresh if finished(t)), best_value(fresh, cfg))
            if not ok:
                stats.exhausted = True
                break
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM as Interrupted
        stats.interrupted = True
        if trial is not None:
            _interrupt(study, trial)
    finally:
        sig.restore()
        stats.lb_checked, stats.lb_pruned, stats.lb_skipped = ev.lb_checked, ev.lb_pruned, ev.lb_skipped
        stats.elapsed_s = time.perf_counter() - t_start
    return stats


class _Signals:
    """Ctrl-C / SIGTERM handling with critical sections.

    Inside ``critical()`` (asking for a trial and recording its worker; telling its outcome) a
    signal is held back and raised when the section ends, so a stop never leaves a trial half
    created or half told: it lands either between trials or while a trial is being evaluated,
    where the trial is then marked ``interrupted`` and its point queued again.

    A signal handler's exception can be lost: Python runs handlers between bytecodes, and when that
    point is inside a garbage-collector callback or a ``__del__`` method the exception is reported as
    "ignored" and the code goes on. So every received signal is also remembered, and ``check()``
    (called before each new trial) raises it again if it has not stopped the loop yet.
    """

    def __init__(self) -> None:
        self.depth = 0
        self.pending: int | None = None
        self.received: int | None = None
        self.old: dict[int, Any] = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be set from the main thread
        for s in (signal.SIGINT, signal.SIGTERM):
            self.old[s] = signal.signal(s, self._handler)

    def restore(self) -> None:
        for s, h in self.old.items():
            signal.signal(s, h)
        self.old.clear()

    def check(self) -> None:
        if self.received is not None and not self.depth:
            self._raise(self.received)

    def _handler(self, signum: int, frame: Any) -> None:
        self.received = signum
        if self.depth:
            self.pending = signum
            return
        self._raise(signum)

    @staticmethod
    def _raise(signum: int) -> None:
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Interrupted

    @contextlib.contextmanager
    def critical(self) -> Iterator[None]:
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            if not self.depth and self.pending is not None:
                signum, self.pending = self.pending, None
                self._raise(signum)


@contextlib.contextmanager
def _heartbeat(storage: optuna.storages.BaseStorage, trial_id: int) -> Iterator[None]:
    """Optuna's heartbeat for RDB storages, so that other machines can tell this worker is alive."""
    if not isinstance(storage, optuna.storages.RDBStorage) or not storage.get_heartbeat_interval():
        yield
        return
    stop = threading.Event()

    def beat() -> None:
        while True:
            with contextlib.suppress(Exception):
                storage.record_heartbeat(trial_id)  # RDBStorage only (checked above)
            if stop.wait(storage.get_heartbeat_interval() or 30):
                return

    th = threading.Thread(target=beat, daemon=True)
    th.start()
    try:
        yield
    finally:
        stop.set()
        th.join()


def _surplus(study: optuna.Study, trial: optuna.trial.Trial, target: int) -> bool:
    """On a shared RDB (no common lock) two workers may both take the last slot: the later one yields."""
    trials = study.get_trials(deepcopy=False)
    before = sum(1 for t in trials if counts(t) and t.number < trial.number)
    if before < target:
        return False
    trial.set_user_attr(RESULT_ATTR, {"kind": "surplus", "reason": "the requested trials were already taken"})
    _tell(study, trial, state=TrialState.FAIL)
    return True


def _tell_outcome(study: optuna.Study, trial: optuna.trial.Trial, out: Outcome) -> bool:
    trial.set_user_attr(RESULT_ATTR, out.attrs())
    if out.state == "complete":
        assert out.values is not None
        return _tell(study, trial, values=out.values if len(out.values) > 1 else out.values[0])
    if out.state == "pruned":
        if out.lower_bound_us is not None and len(study.directions) == 1:
            trial.report(out.lower_bound_us, 0)  # the sampler then ranks it by its bound
        return _tell(study, trial, state=TrialState.PRUNED)
    return _tell(study, trial, state=TrialState.FAIL)


def _tell_copy(study: optuna.Study, trial: optuna.trial.Trial, prior: FrozenTrial) -> bool:
    record = dict(attrs(prior))
    record.pop("detail", None)
    record["duplicate_of"] = record.get("duplicate_of", prior.number)
    trial.set_user_attr(RESULT_ATTR, record)
    if prior.state == TrialState.COMPLETE and prior.values:
        return _tell(study, trial, values=prior.values if len(prior.values) > 1 else prior.values[0])
    if prior.state == TrialState.PRUNED:
        if prior.intermediate_values and len(study.directions) == 1:
            step = max(prior.intermediate_values)
            trial.report(prior.intermediate_values[step], step)
        return _tell(study, trial, state=TrialState.PRUNED)
    return _tell(study, trial, state=TrialState.FAIL)


def _interrupt(study: optuna.Study, trial: optuna.trial.Trial) -> None:
    with contextlib.suppress(Exception):
        params = dict(storage_of(study).get_trial(trial_id(trial)).params)
        trial.set_user_attr(RESULT_ATTR, {"kind": "interrupted", "reason": "stopped by Ctrl-C / SIGTERM"})
        _tell(study, trial, state=TrialState.FAIL)
        if params:
            study.enqueue_trial(params, user_attrs={RETRY_ATTR: trial.number})


def _child_main(
    cfg: StudyConfig,
    spec: StorageSpec,
    index: int,
    deadline: float | None,
    parent: int,
    q: Any,
    baseline: Baseline | None = None,
) -> None:
    signal.signal(signal.SIGTERM, _raise_interrupted)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
    try:
        try:
            stats = worker_loop(cfg, spec, index, deadline, parent_pid=parent, baseline=baseline)
        finally:
            # the work is over: a stop request from now on has nothing to interrupt, and one
            # raised inside q.put below (the parent stops every child once one reports an error)
            # escaped as a traceback (tests/search/test_removed_study_file.py, two workers)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
    except KeyboardInterrupt:
        stats = WorkerStats(interrupted=True)
    except Exception as exc:  # reported by the parent; the other workers go on
        stats = WorkerStats(errors=[f"worker {index}: {type(exc).__name__}: {exc}"])
    q.put(stats)


def _raise_interrupted(signum: int, frame: Any) -> None:
    raise Interrupted()


def _stop(children: Sequence[Any]) -> None:
    """Ask every child worker still running to stop as the main one did (SIGTERM: mark the running
    trial interrupted, queue its point again, report). A signal sent to the main process alone
    (``kill -TERM PID``, a job scheduler) reaches the children only this way."""
    for p in children:
        if p.is_alive() and p.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGTERM)


# --------------------------------------------------------------------------- study setup
def _open_study(
    cfg: StudyConfig, spec: StorageSpec, resume: bool, say: Say, names: OptionNames
) -> tuple[optuna.Study, bool]:
    storage = spec.open()
    directions = cfg.directions
    try:
        existing = optuna.load_study(study_name=cfg.name, storage=storage)
    except KeyError:
        existing = None
    if existing is None:
        if resume:
            say(f"nothing to resume in {spec.url}: starting study {cfg.name!r}")
        study = optuna.create_study(
            study_name=cfg.name,
            storage=storage,
            directions=[optuna.study.StudyDirection[d.upper()] for d in directions],
        )
        set_study_record(study, STUDY_ATTR, cfg.search_fingerprint())
        direction = cfg.objective.direction + (f" (+ {len(cfg.secondary)} more)" if cfg.secondary else "")
        study.set_user_attr("objective", f"{cfg.objective.metric}, {direction}")
        return study, True
    n = len(existing.trials)
    if n == 0 and study_record(existing, STUDY_ATTR) == cfg.search_fingerprint():
        return existing, True  # created by a run that stopped before its first trial: nothing to lose
    if not resume:
        raise StudyError(
            f"{cfg.source}: study {cfg.name!r} already exists in {spec.url} with {n} trial(s); "
            f"pass {names.set('resume')} to continue it (or to join it as another worker), "
            f"or {names.set('out', 'DIR')} for a fresh run"
        )
    stored = study_record(existing, STUDY_ATTR)
    now = cfg.search_fingerprint()
    if stored is not None and stored != now:
        diff = sorted(k for k in set(stored) | set(now) if stored.get(k) != now.get(k))
        raise StudyError(
            f"{cfg.source}: cannot resume study {cfg.name!r}: the study file changed its "
            f"{', '.join(diff)} since the stored trials were run; allowed to change on "
            f"{names.set('resume')}: trials, timeout_s, workers, outputs "
            f"(use {names.set('out', 'DIR')} for a new study)"
        )
    if [d.name.lower() for d in existing.directions] != directions:
        raise StudyError(f"{cfg.source}: study {cfg.name!r} in {spec.url} has other objective directions")
    return existing, False


def _baseline_point(cfg: StudyConfig) -> dict[str, Any] | None:
    """The base scenario's values of the space's parameters, if every one is in the space."""
    sc = cfg.shapes[0].scenario()
    table = effective_table(sc)
    consts = sc.config.constants

    def lookup(path: str) -> Any:
        parts = path.split(".")
        if parts[0] == "calibration" and len(parts) == 2 and parts[1] in consts:
            return consts[parts[1]].value
        node: Any = table
        for p in parts:
            if not isinstance(node, Mapping) or p not in node:
                raise KeyError(path)
            node = node[p]
        return node

    return point_of(cfg, lookup)


# --------------------------------------------------------------------------- entry point
def run_study(
    study: str | os.PathLike[str] | Mapping[str, Any] | StudyConfig,
    *,
    trials: int | None = None,
    timeout_s: float | None = None,
    workers: int | None = None,
    storage: str | None = None,
    out: str | os.PathLike[str] | None = None,
    resume: bool = False,
    progress: bool = False,
    say: Say | None = None,
    names: OptionNames = PYTHON_NAMES,
) -> StudyResult:
    """Run (or resume) a study and write its outputs; see :mod:`moeopt.search`.

    ``study`` is a study YAML path, a dict of the same fields, or a loaded :class:`StudyConfig`.
    Keyword arguments override the file's ``trials``, ``timeout_s``, ``workers``, ``storage`` and
    ``out``. Raises :class:`StudyError` for every input problem, before any trial runs.
    ``progress``: show progress on standard error (a bar on a terminal, lines elsewhere); ``say``
    receives the notes meant for the user (a repaired journal, recovered trials); messages name
    the keyword arguments (``resume=True``), or with ``names=CLI_NAMES`` the command-line flags.
    A finished study resumed with no more trials runs nothing and says so.
    """
    cfg = study if isinstance(study, StudyConfig) else load_study(study)
    cfg = cfg.with_run_options(
        names, trials=trials, timeout_s=timeout_s, workers=workers, storage=storage, out=out
    )
    tell_user: Say = say or (lambda _msg: None)
    spec = resolve_storage(cfg.storage, cfg.out)
    make_sampler(cfg, 0)  # a missing package or a bad option fails here, before anything is written
    os.makedirs(cfg.out, exist_ok=True)

    # a write cut short by a crash is repaired before anything is added
    check_journal(spec, tell_user, fresh_hint=names.set("out", "DIR"))
    baseline: Baseline | None = None
    with _quiet_optuna():
        study_obj, created = _open_study(cfg, spec, resume, tell_user, names)
        if study_record(study_obj, BASELINE_ATTR) is None:
            base = Evaluator(cfg).evaluate({}, None)
            if cfg.aggregate == "mean_ratio" and base.state != "complete":
                raise StudyError(
                    f"{cfg.source}: aggregate = 'mean_ratio' divides by the baseline, but the baseline "
                    f"did not complete: {base.reason}; allowed: mean, max, weighted"
                )
            set_study_record(
                study_obj,
                BASELINE_ATTR,
                {"state": base.state, "values": base.values, "reason": base.reason, **base.attrs()},
            )
            if base.values:
                study_obj.set_user_attr("baseline", round(base.values[0], 3))
            point = _baseline_point(cfg)
            if created and point is not None and cfg.baseline_trial:
                study_obj.enqueue_trial(point, user_attrs={BASELINE_TRIAL_ATTR: True})
            # the workers take this outcome as the base point's instead of simulating it again
            baseline = (base, point)
        target = target_trials(cfg)
        if target < cfg.trials:
            tell_user(f"the space has {target} distinct points: running {target} trials, not {cfg.trials}")
        deadline = None if cfg.timeout_s is None else time.time() + cfg.timeout_s
        t0 = time.perf_counter()
        done_before = sum(1 for t in study_obj.get_trials(deepcopy=False) if finished(t))
        shown = Progress(
            f"search {cfg.name}",
            target,
            mode=progress_mode(progress and done_before < target),
            unit="trial",
            initial=done_before,
        )
        if done_before >= target:  # a finished study, resumed without more trials: nothing to run
            tell_user(
                f"study {cfg.name!r} already has {done_before} trial(s) ({target} requested): nothing "
                f"to run; {names.set('trials', 'N')} with N > {done_before} adds trials"
            )
            stats = WorkerStats()
        else:
            stats = _run_workers(cfg, spec, deadline, target, shown, baseline)
        elapsed = time.perf_counter() - t0
        status = run_status(cfg, spec, stats, deadline, target)
        for err in stats.errors:
            tell_user(
                f"a worker stopped on an error (its trials are recovered on {names.set('resume')}): {err}"
            )
        if stats.recovered:
            tell_user(
                f"recovered {len(stats.recovered)} trial(s) of stopped workers "
                f"({', '.join(map(str, stats.recovered))}); "
                "their points were queued again"
            )
        result = write_outputs(
            cfg,
            spec,
            optuna.load_study(study_name=cfg.name, storage=spec.open()),
            stats,
            elapsed,
            status,
            phase=shown.say,
        )
    if stats.interrupted:
        raise StudyInterrupted(result, names)
    return result


STATUSES = ("finished", "interrupted", "timeout", "stopped")
"""How a run ended (``StudyResult.status``, ``summary.json`` ``run.status``): ``finished`` (the
study has its trials, or the space has no more points), ``interrupted`` (Ctrl-C / SIGTERM before
that), ``timeout`` (the time limit came first), ``stopped`` (the workers ended early on errors)."""


def run_status(
    cfg: StudyConfig, spec: StorageSpec, stats: WorkerStats, deadline: float | None, target: int
) -> str:
    """What happened, judged on the stored trials (a stop that came after the last trial does not
    make a finished study 'interrupted')."""
    trials = optuna.load_study(study_name=cfg.name, storage=spec.open()).get_trials(deepcopy=False)
    if stats.exhausted or sum(1 for t in trials if finished(t)) >= target:
        return "finished"
    if stats.interrupted:
        return "interrupted"
    if deadline is not None and time.time() >= deadline:
        return "timeout"
    return "stopped"


def _run_workers(
    cfg: StudyConfig,
    spec: StorageSpec,
    deadline: float | None,
    target: int,
    progress: Progress,
    baseline: Baseline | None = None,
) -> WorkerStats:
    def on_trial(n_done: int, best: float | None) -> None:
        progress.update(n_done, "" if best is None else f"best {best:.3f}")

    ctx: Any = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
    q = ctx.Queue()
    children: list[Any] = []
    old = signal.signal(signal.SIGTERM, _raise_interrupted)
    stats = WorkerStats()
    try:
        for i in range(1, cfg.workers):
            p = ctx.Process(
                target=_child_main, args=(cfg, spec, i, deadline, os.getpid(), q, baseline), daemon=False
            )
            p.start()
            children.append(p)
        # (the trials are read again after each one only to show the progress)
        shown = on_trial if progress.mode is not None else None
        stats = worker_loop(cfg, spec, 0, deadline, shown, baseline=baseline)
    except KeyboardInterrupt:  # a stop before the main worker's own handling was in place
        stats.interrupted = True
    except BaseException:
        stats.interrupted = True  # whatever stopped this worker stops the others too
        raise
    finally:
        if stats.interrupted:
            _stop(children)
        # collect every child's statistics; a child that died without sending any is not waited for
        received, alive = 0, list(children)
        while received < len(children) and (alive or not q.empty()):
            try:
                stats.add(q.get(timeout=0.5))
                received += 1
            except queue.Empty:
                alive = [p for p in alive if p.is_alive()]
            except KeyboardInterrupt:
                stats.interrupted = True
                _stop(children)  # a second signal while waiting: the same orderly stop
        for p in children:
            p.join(timeout=30)
            if p.is_alive():  # it sent its statistics but does not end: no worker is left behind
                p.kill()
                p.join()
        signal.signal(signal.SIGTERM, old)
        for p in children:
            if p.exitcode not in (0, None):
                stats.errors.append(f"worker process {p.pid} ended with exit code {p.exitcode}")
        if progress.mode is not None:
            fresh = optuna.load_study(study_name=cfg.name, storage=spec.open()).get_trials(deepcopy=False)
            on_trial(sum(1 for t in fresh if finished(t)), best_value(fresh, cfg))
        progress.close()
    return stats


@contextlib.contextmanager
def _quiet_optuna() -> Iterator[None]:
    level = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        try:
            yield
        finally:
            optuna.logging.set_verbosity(level)


logging.getLogger("moeopt.search").addHandler(logging.NullHandler())
