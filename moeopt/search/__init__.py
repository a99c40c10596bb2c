"""Auto-tuning the MegaMoE orchestration with Optuna: ``python -m moeopt.search study.yaml``.

Library entry::

    import moeopt as m
    r = m.run_study("studies/quickstart.yaml", trials=20)
    r.best_value, r.best_overrides, r.files["best_toml"]

See :mod:`moeopt.search.config` for the study file, :mod:`moeopt.search.runner` for how trials
run, resume and share a storage, and :mod:`moeopt.search.outputs` for what is written.
"""

from moeopt.search.config import StudyConfig, load_study
from moeopt.search.errors import StudyError
from moeopt.search.runner import StudyInterrupted, StudyResult, run_study

__all__ = ["StudyConfig", "StudyError", "StudyInterrupted", "StudyResult", "load_study", "run_study"]
