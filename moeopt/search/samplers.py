"""The samplers a study may name: the table, the ``sampler`` field, and building one per worker.

A sampler is an Optuna class named in :data:`SAMPLERS`; its options are passed to the class
as they are written (checked against its signature first). Some need packages beyond Optuna's
own dependencies; a study naming one fails before anything is written when they are missing.
"""

from __future__ import annotations

import importlib.util
import inspect
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import optuna

from moeopt.plain import plain
from moeopt.search.errors import FIELDS, StudyError
from moeopt.search.space import SCALARS, grid_search_space

if TYPE_CHECKING:
    from moeopt.search.config import StudyConfig

# sampler name -> (optuna class name, packages it needs beyond optuna's own dependencies)
SAMPLERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "tpe": ("TPESampler", ()),
    "cmaes": ("CmaEsSampler", ("cmaes",)),
    "gp": ("GPSampler", ("torch", "scipy")),
    "random": ("RandomSampler", ()),
    "grid": ("GridSampler", ()),
    "nsga2": ("NSGAIISampler", ()),
    "bruteforce": ("BruteForceSampler", ()),
}
SINGLE_OBJECTIVE_SAMPLERS = ("cmaes",)


def parse_sampler(raw: Any) -> tuple[str, dict[str, Any]]:
    """``sampler`` of a study file: a name, or a mapping with the name and the sampler's options
    (only parameters its class takes, plain values only)."""
    if isinstance(raw, str):
        name, opts = raw, {}
    elif isinstance(raw, Mapping) and "name" in raw:
        name, opts = raw["name"], {k: plain(v) for k, v in raw.items() if k != "name"}
    else:
        raise StudyError(f"sampler = {raw!r}: must be a sampler name or a mapping with name and options")
    name = FIELDS.choice("sampler", name, list(SAMPLERS))
    cls_name, _needs = SAMPLERS[name]
    cls = getattr(optuna.samplers, cls_name)
    allowed = [
        p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "seed", "search_space")
    ]
    for key in opts:
        if key not in allowed:
            raise FIELDS.unknown(f"sampler ({name})", key, allowed)
        if not isinstance(opts[key], (*SCALARS, list)):
            raise StudyError(f"sampler.{key} = {opts[key]!r}: only plain values can be passed to {cls_name}")
    return name, opts


def missing_packages(sampler: str) -> list[str]:
    """The packages ``sampler`` needs that cannot be imported here."""
    return [p for p in SAMPLERS[sampler][1] if importlib.util.find_spec(p) is None]


def make_sampler(cfg: StudyConfig, worker_index: int) -> optuna.samplers.BaseSampler:
    """The sampler of worker ``worker_index`` (seeded ``seed + worker_index``)."""
    missing = missing_packages(cfg.sampler)
    if missing:
        others = ", ".join(n for n in SAMPLERS if not missing_packages(n))
        raise StudyError(
            f"{cfg.source}: sampler = {cfg.sampler!r} needs the Python package(s) {', '.join(missing)}, "
            f"which are not installed here (pip install {' '.join(missing)}); allowed without them: {others}"
        )
    seed = cfg.seed + worker_index  # distinct per worker, else K workers would propose the same points
    opts = dict(cfg.sampler_options)
    try:
        if cfg.sampler == "grid":
            return optuna.samplers.GridSampler(grid_search_space(cfg), seed=seed, **opts)
        if cfg.sampler == "cmaes":
            opts.setdefault("warn_independent_sampling", False)
        cls = getattr(optuna.samplers, SAMPLERS[cfg.sampler][0])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            sampler: optuna.samplers.BaseSampler = cls(seed=seed, **opts)
        return sampler
    except (TypeError, ValueError) as exc:
        raise StudyError(f"{cfg.source}: sampler = {cfg.sampler!r} with options {opts}: {exc}") from None
