"""Every relative link of README.md and docs/*.md points at a file that exists and a heading in it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs.blocks import DOC_FILES, REPO

LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"(?ms)^```.*?^```", "", text)  # headings inside code blocks do not count
    return {slug(m.group(1)) for m in re.finditer(r"(?m)^#{1,6} (.+)$", text)}


def links() -> list[tuple[str, str]]:
    out = []
    for rel in DOC_FILES:
        doc = REPO / rel
        if doc.is_file():
            text = re.sub(r"(?ms)^```.*?^```", "", doc.read_text(encoding="utf-8"))
            out += [(rel, m.group("target")) for m in LINK.finditer(text)]
    return [(d, t) for d, t in out if not re.match(r"[a-z]+://", t)]


def test_slug_follows_github() -> None:
    assert slug("The h / hidden_dim trap") == "the-h--hidden_dim-trap"
    assert slug("### `python -m moeopt gap`".lstrip("# ")) == "python--m-moeopt-gap"


@pytest.mark.parametrize(("doc", "target"), links(), ids=lambda v: str(v))
def test_link_resolves(doc: str, target: str) -> None:
    path_part, _, anchor = target.partition("#")
    base = (REPO / doc).parent
    dest = (base / path_part).resolve() if path_part else REPO / doc
    assert dest.exists(), f"{doc}: link to {target}: no such file"
    if anchor:
        assert dest.suffix == ".md", f"{doc}: anchor into a non-Markdown file: {target}"
        assert anchor in anchors(dest), f"{doc}: link to {target}: no such heading"
