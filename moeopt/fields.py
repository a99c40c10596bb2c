"""Field checks shared by every input format: scenario files, study files, dotted-path overrides.

One :class:`Fields` per input format binds the error type it raises and how it lists names;
every check raises one line that names the field, the value and what is allowed::

    workload.tokens = 0: out of range; allowed: integers in [1, 1048576]
    kernel.tile_n = 100: must be a multiple of 16 in [16, 4096]
    calibration.act_startup_us = 'x': must be a finite number >= 0
    workload.routing = 'zipff': not allowed (did you mean 'zipf'?); allowed: 'uniform', 'cyclic', ...
    sampler = 'tpee': not allowed (did you mean 'tpe'?); allowed: tpe, cmaes, gp, random, ...
    unknown field 'kernel.tile_nn' (did you mean 'tile_n' or 'tile_m' or 'tile_k'?); allowed: ...

A check returns the value it accepted, so that parsing and checking are one step
(``tokens = fields.integer("workload.tokens", raw, 1)``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeGuard, TypeVar

from moeopt.errors import InputError, did_you_mean


def read_input_text(path: str | Path, what: str) -> str:
    """The UTF-8 text of an input file; one :class:`InputError` naming the file when it is missing
    or unreadable (``what``: the kind of file, e.g. ``"timeline file"``)."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{p}: no such {what}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{p}: cannot read the {what}: {exc}") from None


def _num_text(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


def range_text(lo: float | None, hi: float | None, lo_open: bool = False) -> str:
    """The allowed range in a message: ``" in [1, 8]"``, ``" > 0"``, ``" <= 64"`` or ``""``
    (whole numbers print as integers, never as ``1e+06``)."""
    if lo is not None and hi is not None:
        return f" in {'(' if lo_open else '['}{_num_text(lo)}, {_num_text(hi)}]"
    if lo is not None:
        return f" {'>' if lo_open else '>='} {_num_text(lo)}"
    if hi is not None:
        return f" <= {_num_text(hi)}"
    return ""


def is_int(v: Any) -> TypeGuard[int]:
    """An integer that is not a bool (``True`` is an ``int`` to Python, never to a user)."""
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v: Any) -> TypeGuard[float]:
    """A finite int or float that is not a bool."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


E = TypeVar("E", bound=InputError)


@dataclass(frozen=True)
class Fields(Generic[E]):
    """The checks of one input format.

    ``error``: the :class:`~moeopt.errors.InputError` subclass raised (``ScenarioError``,
    ``StudyError`` ...). How names are listed is the one thing a format chooses, and each keeps
    what its users' messages (and the generated reference built from them) have always said:
    ``quote_choices`` lists allowed values as ``'w8a8', 'bf16'`` (scenario files, where they are
    TOML strings) or bare as ``tpe, cmaes`` (study files); ``sort_fields`` lists the fields of a
    table alphabetically (scenario files) or in the order the format declares them (study
    files). ``key_hints``: keys users write by mistake (lower case) -> what to write instead,
    said in place of the list.
    """

    error: type[E]
    quote_choices: bool = True
    sort_fields: bool = False
    key_hints: Mapping[str, str] = field(default_factory=dict)

    def integer(
        self, where: str, v: Any, lo: int | None = None, hi: int | None = None, multiple: int = 1
    ) -> int:
        """``v`` if it is an integer in ``[lo, hi]`` (either end open when ``None``) and a
        multiple of ``multiple``."""
        rng = range_text(lo, hi)
        if not is_int(v):
            raise self.error(f"{where} = {v!r}: must be an integer{rng}")
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            raise self.error(f"{where} = {v!r}: out of range; allowed: integers{rng}")
        if multiple > 1 and v % multiple:
            raise self.error(f"{where} = {v!r}: must be a multiple of {multiple}{rng}")
        return int(v)

    def number(
        self, where: str, v: Any, lo: float | None = None, hi: float | None = None, lo_open: bool = False
    ) -> float:
        """``v`` as given (an int stays an int) if it is a finite number in the range; ``lo_open``
        excludes ``lo`` itself."""
        rng = range_text(lo, hi, lo_open)
        if not is_number(v):
            raise self.error(f"{where} = {v!r}: must be a finite number{rng}")
        if (lo is not None and (v < lo or (lo_open and v == lo))) or (hi is not None and v > hi):
            raise self.error(f"{where} = {v!r}: out of range; allowed:{rng}")
        return v

    def boolean(self, where: str, v: Any) -> bool:
        """``v`` if it is ``true`` or ``false`` (not 0 / 1, not a string)."""
        if not isinstance(v, bool):
            raise self.error(f"{where} = {v!r}: must be true or false")
        return v

    def choice(self, where: str, v: Any, allowed: Sequence[str]) -> str:
        """``v`` if it is one of the names ``allowed``; else the closest ones and the list."""
        if not isinstance(v, str) or v not in allowed:
            hint = did_you_mean(v, allowed) if isinstance(v, str) else ""
            raise self.error(f"{where} = {v!r}: not allowed{hint}; allowed: {self.names(allowed)}")
        return v

    def unknown(self, where: str, key: Any, allowed: Sequence[str]) -> E:
        """The error for a key that is not a field of the table ``where`` (``""``: the top level)."""
        loc = f"{where}.{key}" if where else str(key)
        mistake = self.key_hints.get(str(key).lower())
        if mistake is not None:
            return self.error(f"unknown field {loc!r}: {mistake}")
        hint = did_you_mean(str(key), list(allowed))
        listed = sorted(allowed) if self.sort_fields else allowed
        return self.error(f"unknown field {loc!r}{hint}; allowed: {', '.join(listed)}")

    def unread(
        self, where: str, v: Any, context: str, read_with: str, error: type[InputError] | None = None
    ) -> InputError:
        """The error for a value the model would not read in this ``context`` (another field's
        value), so that a sweep over it cannot read as "no effect": it names the field, the
        value, why it is not read and what is allowed (leaving it out, or ``read_with``).
        ``error``: the class to raise instead of this format's (e.g. a not-modelled error)."""
        return (error or self.error)(
            f"{where} = {v!r}: not read with {context}; allowed: leave it out, or {read_with}"
        )

    def keys(self, where: str, table: Mapping[Any, Any], allowed: Sequence[str]) -> None:
        """Every key of ``table`` is a field name (the first that is not raises :meth:`unknown`)."""
        for key in table:
            if key not in allowed:
                raise self.unknown(where, key, allowed)

    def names(self, allowed: Iterable[str]) -> str:
        """``allowed`` as this format lists names in a message."""
        return ", ".join(map(repr, allowed) if self.quote_choices else allowed)
