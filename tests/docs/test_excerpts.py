"""Code shown as an excerpt of a file is that file's text, verbatim.

A block marked ``<!-- excerpt: PATH -->`` in README.md or docs/*.md must appear, as one
contiguous piece, in ``PATH`` (relative to the repository root). Editing the file without the
documentation (or the reverse) fails here.
"""

from __future__ import annotations

import re

import pytest

from tests.docs.blocks import DOC_FILES, REPO

MARK = re.compile(r"^<!-- excerpt: (?P<path>\S+) -->\s*$")


def excerpts() -> list[tuple[str, int, str, str]]:
    """(doc, line, path, code) for every marked excerpt."""
    out = []
    for rel in DOC_FILES:
        doc = REPO / rel
        if not doc.is_file():
            continue
        lines = doc.read_text(encoding="utf-8").splitlines()
        for k, ln in enumerate(lines):
            m = MARK.match(ln)
            if m is None:
                continue
            assert lines[k + 1].startswith("```"), f"{rel}:{k + 1}: an excerpt marker needs a code block"
            end = next(j for j in range(k + 2, len(lines)) if lines[j].startswith("```"))
            out.append((rel, k + 1, m.group("path"), "\n".join(lines[k + 2 : end]) + "\n"))
    return out


def test_there_is_an_excerpt() -> None:
    assert any(path == "examples/second_adapter.py" for _d, _l, path, _c in excerpts())


@pytest.mark.parametrize(("doc", "line", "path", "code"), excerpts(), ids=lambda v: str(v)[:40])
def test_excerpt_is_verbatim(doc: str, line: int, path: str, code: str) -> None:
    text = (REPO / path).read_text(encoding="utf-8")
    assert code in text, f"{doc}:{line}: the excerpt is no longer a verbatim piece of {path}"


def test_a_changed_line_is_caught() -> None:
    _doc, _line, path, code = next(e for e in excerpts() if e[2] == "examples/second_adapter.py")
    changed = code.replace("two L1 buffers per core", "three L1 buffers per core")
    assert changed != code
    assert changed not in (REPO / path).read_text(encoding="utf-8")
