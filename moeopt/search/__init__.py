"""Auto-tuning the MegaMoE orchestration with Optuna: ``python -m moeopt.search study.yaml``.

Library entry::

    import moeopt as m
    r = m.run_study("studies/quickstart.yaml", trials=20)
    r.best_value, r.best_overrides, r.files["best_toml"]

The modules, from the study file to what is written:

* :mod:`~moeopt.search.config`: the study file (``load_study`` -> :class:`StudyConfig`);
* :mod:`~moeopt.search.space`: the ``space`` and ``constraints`` fields, parsed and sampled;
* :mod:`~moeopt.search.samplers`, :mod:`~moeopt.search.metrics`: the sampler and metric tables;
* :mod:`~moeopt.search.evaluate`: one point -> complete, pruned or failed;
* :mod:`~moeopt.search.trials`: what a trial carries in the storage, which trials count;
* :mod:`~moeopt.search.runner`: the workers' ask-and-tell loop, resume, recovery;
* :mod:`~moeopt.search.storage`, :mod:`~moeopt.search.optuna_private`: where the study lives,
  and the only use of Optuna's private names;
* :mod:`~moeopt.search.outputs`, :mod:`~moeopt.search.report`: ``best.toml``, ``trials.csv``,
  ``summary.json``, ``report.html``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from moeopt.search.errors import StudyError

if TYPE_CHECKING:
    from moeopt.search.config import StudyConfig, load_study
    from moeopt.search.outputs import StudyResult
    from moeopt.search.runner import StudyInterrupted, run_study

__all__ = ["StudyConfig", "StudyError", "StudyInterrupted", "StudyResult", "load_study", "run_study"]

_WHERE = {
    "StudyConfig": "config",
    "load_study": "config",
    "StudyResult": "outputs",
    "StudyInterrupted": "runner",
    "run_study": "runner",
}


def __getattr__(name: str) -> Any:
    # these import Optuna: loaded on first use, so that ``moeopt search --help`` (and every other
    # command, whose parser includes it) does not pay for it
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(f"moeopt.search.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'moeopt.search' has no attribute {name!r}")
