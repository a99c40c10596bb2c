"""The doc-example checker itself: it must fail when an example's output changes.

No command runs here: each test feeds the checker a known text as the "actual" output, so
these tests are cheap and say exactly which kind of change is caught.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs import blocks as B

BASIC_OUTPUT = """time            1764.76 µs (to the last combine)
bounds          compute 51.13 / bandwidth 1664.65 [hbm]
"""
GAP_OUTPUT = """#        input   events  best greedy  seconds
[1/1]    a.rank0    8130      1777.21     4.52
1 graph(s) from 1 input(s): 1 proven optimal, 0 failed
"""


def _doc(tmp_path: Path, name: str, body: str, opts: str = "") -> B.Block:
    """A Markdown file with one marked example whose shown output is ``body``."""
    doc = tmp_path / "doc.md"
    doc.write_text(
        f"# t\n\n<!-- doctest: {name}{opts} -->\n```bash\npython -V\n```\n\n```text\n{body}```\n",
        encoding="utf-8",
    )
    [block] = B.find_blocks(doc)
    return block


def _expected(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "expected.txt"
    p.write_text(text, encoding="utf-8")
    return p


def test_identical_output_passes(tmp_path: Path) -> None:
    block = _doc(tmp_path, "basic", BASIC_OUTPUT)
    assert B.compare(block, BASIC_OUTPUT, _expected(tmp_path, BASIC_OUTPUT)) == []


def test_one_changed_digit_fails(tmp_path: Path) -> None:
    block = _doc(tmp_path, "basic", BASIC_OUTPUT)
    perturbed = BASIC_OUTPUT.replace("1764.76", "1764.77")
    problems = B.compare(block, perturbed, _expected(tmp_path, BASIC_OUTPUT))
    assert len(problems) == 1
    assert "output differs" in problems[0]
    assert "1764.77" in problems[0]


def test_a_perturbed_checked_in_expected_file_fails(tmp_path: Path) -> None:
    # the real README example and its real expected file: perturb a copy of the file in tmp
    block = next(b for b in B.all_blocks() if b.name == "simulate_basic")
    real = block.expected_path.read_text(encoding="utf-8")
    assert B.compare(block, real) == []
    i = next(k for k, ch in enumerate(real) if ch.isdigit())
    wrong = real[:i] + str((int(real[i]) + 1) % 10) + real[i + 1 :]
    problems = B.compare(block, real, _expected(tmp_path, wrong))
    assert problems
    assert all("differs" in p for p in problems)


def test_the_shown_block_must_match_too(tmp_path: Path) -> None:
    block = _doc(tmp_path, "basic", BASIC_OUTPUT.replace("51.13", "51.14"))
    problems = B.compare(block, BASIC_OUTPUT, _expected(tmp_path, BASIC_OUTPUT))
    assert len(problems) == 1
    assert "shown in the Markdown" in problems[0]


SCENARIO_GAP_OUTPUT = """  rank 0 (541 events): greedy 312.76, best 312.76, bound 312.76 [longest_path], certified gap +0.00%, 0.0 s
policy earliest_start; CP-SAT 30 s per rank, 1 worker(s), mode auto; 0.2 s in all
0     0-7    541     312.76    312.76       312.76       longest_path  exact  optimal  +0.00%     +0.00%     +0.00%        0.0
0     80.89    147.64 [hbm]  129.47      bandwidth  10.43        158.07
"""
SEARCH_OUTPUT = "best kernel_total_us = 1754.743 (trial 5)\n126 trials/min over 11.4 s with 1 worker(s)\n"
GOLDEN_OUTPUT = "ok   bs72                         a517dbfdf808cf96      302.3228 µs    0.04 s\n"


@pytest.mark.parametrize(
    ("mask", "text", "hidden", "caught"),
    [
        # (what the mask may hide: old -> new), (changes it must still catch)
        ("gap-seconds", GAP_OUTPUT, ("4.52", "17.03"), [("1777.21", "1777.22"), ("8130", "8131")]),
        (
            "gap-times",
            SCENARIO_GAP_OUTPUT,
            ("0.0 s\n", "3.5 s\n"),
            [("312.76,", "312.77,"), ("30 s per", "10 s per"), ("158.07", "158.08"), ("+0.00%     +0.00%", "+0.01%     +0.00%")],
        ),
        ("gap-times", SCENARIO_GAP_OUTPUT, ("0.2 s in all", "41.7 s in all"), []),
        ("gap-times", SCENARIO_GAP_OUTPUT, ("+0.00%        0.0", "+0.00%        12.9"), []),
        ("search-speed", SEARCH_OUTPUT, ("126 trials/min over 11.4", "90 trials/min over 16"), [("1754.743", "1754.744"), ("1 worker", "2 worker")]),
        ("golden-seconds", GOLDEN_OUTPUT, ("0.04 s", "1.20 s"), [("a517dbfd", "a517dbfe"), ("302.3228", "302.3229")]),
    ],
)
def test_masks_hide_only_the_wall_clock(
    tmp_path: Path, mask: str, text: str, hidden: tuple[str, str], caught: list[tuple[str, str]]
) -> None:
    block = _doc(tmp_path, "m", text, f" mask={mask}")
    exp = _expected(tmp_path, text)
    assert hidden[0] in text
    assert B.compare(block, text.replace(*hidden), exp) == []
    for old, new in caught:
        assert old in text
        assert B.compare(block, text.replace(old, new, 1), exp), (mask, old, new)


def test_missing_expected_file_fails(tmp_path: Path) -> None:
    block = _doc(tmp_path, "basic", BASIC_OUTPUT)
    problems = B.compare(block, BASIC_OUTPUT, tmp_path / "nope.txt")
    assert problems
    assert "MOEOPT_REGEN_DOCS=1" in problems[0]


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("<!-- doctest: x mask=nope -->", "unknown mask 'nope'"),
        ("<!-- doctest: x fast -->", "unknown doctest option 'fast'"),
        ("<!-- doctest x -->", "malformed doctest marker"),
    ],
)
def test_bad_markers_are_refused(tmp_path: Path, marker: str, message: str) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(f"{marker}\n```bash\nls\n```\n```text\n```\n", encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        B.find_blocks(doc)


def test_regenerate_rewrites_file_and_markdown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(B, "EXPECTED", tmp_path / "expected")
    block = _doc(tmp_path, "basic", "old\n")
    B.regenerate(block, BASIC_OUTPUT)
    assert (tmp_path / "expected" / "basic.txt").read_text(encoding="utf-8") == BASIC_OUTPUT
    [again] = B.find_blocks(block.doc)
    assert again.shown == BASIC_OUTPUT
    assert B.compare(again, BASIC_OUTPUT) == []
