"""``moeopt.core.state.picked``, the C-level lookup the analyses' columns, the floors and the
validator share (``itemgetter`` for two or more keys, which returns a bare item for one and
takes none): every length against a comprehension, and a
numbering ``defaultdict`` numbering keys in order of first sight either way."""

from __future__ import annotations

import itertools
from collections import defaultdict

from moeopt.core.state import picked


def test_any_number_of_keys() -> None:
    table = {("a",): 0, (): 1, ("b", "c"): 2}
    for keys in ([], [("b", "c")], [(), ("a",), ("b", "c"), ()]):
        assert list(picked(table, keys)) == [table[k] for k in keys]


def test_a_numbering_defaultdict_numbers_in_order_of_first_sight() -> None:
    labels = ["gmm1", None, "gmm1", "combine", None, "flag"]
    for keys in (labels, labels[:1], []):
        number: defaultdict[str | None, int] = defaultdict(itertools.count().__next__)
        got = list(picked(number, keys))
        expect = list(dict.fromkeys(keys))
        assert list(number) == expect
        assert got == [expect.index(k) for k in keys]
