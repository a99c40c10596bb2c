"""The scheduler's (acquire, release) pair numbers (``GraphTables.sig``): the identity-test
shortcut of :func:`moeopt.core.state.pair_numbers` must number the pairs exactly as one dict
``setdefault`` of the two tuples' ids per event does (the numbering the analyses read back as
the scheduler's pair numbers)."""

from __future__ import annotations

import random

from moeopt.core.state import pair_numbers, picked
from moeopt.synthetic import layered_graph


def _reference(acq: list[tuple[object, ...]], rel: list[tuple[object, ...]]) -> tuple[list[int], tuple[int, ...]]:
    # every event's pair keyed by the ids of its two tuples; numbered by first event
    first: dict[tuple[int, int], int] = {}
    first_of = [first.setdefault((id(a), id(r)), i) for i, (a, r) in enumerate(zip(acq, rel))]
    some = list(first.values())
    number = {e: k for k, e in enumerate(some)}
    return some, tuple(number[e] for e in first_of)


def test_runs_alternations_cycles_and_equal_but_distinct_tuples() -> None:
    # a few tuples, two of them equal in value but distinct objects (told apart by identity)
    pool: list[tuple[tuple[int, int], ...]] = [(), ((0, 1),), ((1, 2),), ((0, 1), (1, 1))]
    pool.append(tuple(pair for pair in pool[1]))  # equal to pool[1], another object
    assert pool[4] == pool[1]
    assert pool[4] is not pool[1]
    rnd = random.Random(7)
    patterns = [
        [0] * 5,  # one run
        [1, 2] * 6,  # two alternating pairs (the shortcut's second test)
        [1, 2, 3, 4] * 4,  # a cycle longer than the two remembered pairs
        [1, 4, 1, 4, 2],  # equal-valued tuples kept apart
        [rnd.randrange(5) for _ in range(300)],
        [],
    ]
    for pat in patterns:
        acq = [pool[k] for k in pat]
        rel = [pool[(k * 3 + len(pat)) % 5] for k in pat]
        assert pair_numbers(acq, rel) == _reference(acq, rel)
        rel2 = [pool[rnd.randrange(5)] for _ in pat]  # acquire and release changing apart
        assert pair_numbers(acq, rel2) == _reference(acq, rel2)


def test_compiled_graphs() -> None:
    for late in (False, True):
        cg = layered_graph(500, seed=3, sites=3, bandwidth_units=4, late_bind_tiles=late).compiled()
        assert pair_numbers(cg.acq, cg.rel) == _reference(list(cg.acq), list(cg.rel))


def test_picked_is_a_tuple_of_the_entries_for_any_number_of_keys() -> None:
    # itemgetter returns a bare item for one key and takes none: every length against a generator
    seq = ["a", "b", "c"]
    table = {(0,): "x", (): "y", (1, 2): "z"}
    for keys in ([], [2], [0, 2, 2, 1]):
        assert picked(seq, keys) == tuple(seq[k] for k in keys)
    for tkeys in ([], [(1, 2)], [(), (0,), ()]):
        assert picked(table, tkeys) == tuple(table[k] for k in tkeys)
