"""Plain data and plain JSON: the one conversion every layer uses.

* :func:`plain` turns nested mappings and sequences (a parsed YAML or TOML file, a frozen
  ``MappingProxyType``, a tuple) into fresh ``dict`` / ``list`` containers with string keys and
  leaves the values alone, so a check can still refuse them with the value the user wrote.
* :func:`jsonable` goes all the way to what ``json.dumps`` writes without surprises: containers
  as above (sets too), numpy scalars as Python numbers, infinities and NaN as strings (or
  ``null``; JSON has neither) and anything else as its ``str``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal


def plain(v: Any) -> Any:
    """Mappings become dicts with ``str`` keys and lists / tuples become lists, recursively; a
    fresh copy of every container, the leaves unchanged."""
    if isinstance(v, Mapping):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    return v


def jsonable(v: Any, *, nonfinite: Literal["string", "null"] = "string") -> Any:
    """``v`` with JSON types only (see the module docstring); ``nonfinite`` says how an
    infinity or NaN is written: ``"string"`` (``"inf"``) or ``"null"``."""
    if isinstance(v, Mapping):
        return {str(k): jsonable(x, nonfinite=nonfinite) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [jsonable(x, nonfinite=nonfinite) for x in v]
    if isinstance(v, float):
        if math.isfinite(v):
            return v
        return str(v) if nonfinite == "string" else None
    if isinstance(v, (str, int, bool)) or v is None:
        return v
    if hasattr(v, "item"):  # numpy scalars
        return jsonable(v.item(), nonfinite=nonfinite)
    return str(v)
