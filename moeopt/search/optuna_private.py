"""Every private name of Optuna the search driver uses, and why; nothing else in moeopt touches one.

Checked on Optuna 4.0.0 (the released wheel's source) and 5.0.0 (installed; the test suite runs
on it): each name below exists there with the same meaning. Optuna 3.6 has no
``optuna.storages.journal`` module at all (its journal classes lived elsewhere, under other
names), so the search driver needs Optuna >= 4.0. On a new Optuna release, check this module
first.

* :func:`storage_of` (``Study._storage``): the storage a study was opened with. The runner
  marks *other* workers' trials interrupted and reads a trial's stored point; Optuna's public
  API only changes the trial one is running.
* :func:`trial_id` (``Trial._trial_id``, ``FrozenTrial._trial_id``): storage methods take the
  storage's trial id, which trials expose only under this name (``number`` is per study).
* :func:`stale_trial_ids` (``RDBStorage._get_stale_trial_ids``, ``Study._study_id``): the
  trials whose heartbeat stopped. The public ``optuna.storages.fail_stale_trials`` fails them
  too, but cannot record why or queue their points again.
* :class:`BaseJournalFileLock` (``optuna.storages.journal._file``): the base of a journal
  file's lock. moeopt's lock is an ``flock``, which the kernel frees the moment a worker dies;
  the public locks (``JournalFileOpenLock``, ``JournalFileSymlinkLock``) are lock files that a
  killed worker leaves behind until their grace period has passed.
* :data:`PROGRESS_OPS`, :data:`CREATE_TRIAL`, :data:`SET_TRIAL_STATE`
  (``optuna.storages.journal._storage.JournalOperation``): the operation codes of the journal's
  records (a record is a JSON object with its code under ``op_code``; a trial's state change
  carries the new state under ``state``; a trial made by ``ask`` has no ``state``). moeopt's
  journal backend forces a record to the disk only when it settles something
  (:func:`moeopt.search.storage.settles`).
"""

from __future__ import annotations

import optuna
from optuna.storages.journal._file import BaseJournalFileLock
from optuna.storages.journal._storage import JournalOperation
from optuna.trial import FrozenTrial

__all__ = [
    "CREATE_TRIAL",
    "PROGRESS_OPS",
    "SET_TRIAL_STATE",
    "BaseJournalFileLock",
    "stale_trial_ids",
    "storage_of",
    "trial_id",
]

PROGRESS_OPS = frozenset(
    int(op)
    for op in (
        JournalOperation.SET_TRIAL_PARAM,
        JournalOperation.SET_TRIAL_INTERMEDIATE_VALUE,
        JournalOperation.SET_TRIAL_USER_ATTR,
        JournalOperation.SET_TRIAL_SYSTEM_ATTR,
    )
)
"""Journal records that only note a running trial's progress."""
CREATE_TRIAL = int(JournalOperation.CREATE_TRIAL)
SET_TRIAL_STATE = int(JournalOperation.SET_TRIAL_STATE_VALUES)


def storage_of(study: optuna.Study) -> optuna.storages.BaseStorage:
    """The storage object ``study`` was opened with."""
    return study._storage


def trial_id(trial: optuna.trial.Trial | FrozenTrial) -> int:
    """The storage's id of ``trial`` (what every storage method takes)."""
    return trial._trial_id


def stale_trial_ids(storage: optuna.storages.RDBStorage, study: optuna.Study) -> list[int]:
    """Ids of the RUNNING trials of ``study`` whose worker's heartbeat stopped."""
    return list(storage._get_stale_trial_ids(study._study_id))
