"""Find, run and check the tested examples of the Markdown documentation.

A tested example is marked in the Markdown by a comment line right before its code block::

    <!-- doctest: NAME [slow] [exit=N] [mask=MASK,...] -->
    ```bash                      (or ```python)
    python -m moeopt simulate examples/scenario_basic.toml
    ```
    ```text
    ... the output exactly as the command prints it ...
    ```

The command block is run (bash: each line through the shell, with ``python`` being the test's own
interpreter and a leading ``pip install ... &&`` dropped, since the package is installed; python:
the block as a script) in a scratch copy of ``examples/`` and ``studies/``, with the repository
on ``PYTHONPATH``. Each command must exit 0 (``exit=N``: the one command of the block must exit
N, and its standard error is part of its output, for examples of error messages). The output
must equal ``tests/docs/expected/NAME.txt`` and the
``text`` block shown in the Markdown. Before comparing, the absolute paths of the scratch folder
and of the repository are written as ``/path/to/moeopt``, and each named mask hides one
machine-dependent value (wall-clock seconds, trials per minute) on both sides; nothing else is
normalised.

``MOEOPT_REGEN_DOCS=1 pytest tests/docs`` rewrites the expected files and the Markdown output
blocks from the real output (do it on purpose, and say why in the commit).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXPECTED = Path(__file__).resolve().parent / "expected"
DOC_FILES = ("README.md", "docs/method.md", "docs/usage.md", "docs/architecture.md")
PATH_PLACEHOLDER = "/path/to/moeopt"
REGEN = os.environ.get("MOEOPT_REGEN_DOCS") == "1"

MARKER = re.compile(r"^<!-- doctest: (?P<name>[\w.-]+)(?P<opts>(?: [\w=,.-]+)*) -->\s*$")
FENCE = re.compile(r"^```(?P<lang>\w*)\s*$")


def _mask_gap_seconds(text: str) -> str:
    # `moeopt gap` table rows end with the wall-clock seconds of that input
    return re.sub(r"(?m)^(\[\d+/\d+\].*\s)\d+\.\d+$", r"\1<seconds>", text)


def _mask_search_speed(text: str) -> str:
    # `moeopt.search` prints its speed: "<n> trials/min over <s> s with <k> worker(s)"
    return re.sub(r"\d+ trials/min over \d+(?:\.\d+)? s", "<n> trials/min over <s> s", text)


def _mask_gap_times(text: str) -> str:
    # `moeopt gap SCENARIO`: seconds on the progress line, in the settings line and in the
    # last column ("s") of the per-rank summary rows (they end with a percentage, then seconds)
    text = re.sub(r"(?m)(certified gap [+-]\d+\.\d+%, )\d+\.\d+ s$", r"\1<s> s", text)
    text = re.sub(r"; \d+\.\d+ s in all", "; <s> s in all", text)
    return re.sub(r"(?m)^(\d+\s.*%\s+)\d+\.\d+$", r"\1<s>", text)


def _mask_golden_seconds(text: str) -> str:
    # `moeopt golden --check`: each configuration line ends with its wall-clock seconds
    return re.sub(r"(?m)^(ok .* µs\s+)\d+\.\d+ s$", r"\1<s> s", text)


def _mask_datetimes(text: str) -> str:
    # Optuna's own tools print when a study or trial started: "2026-12-01 15:46:06"
    return re.sub(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?", "<datetime>", text)


def _mask_pytest_seconds(text: str) -> str:
    # pytest's last line: "3 passed in 10.15s", with "(0:01:02)" after a minute
    return re.sub(r"(?m)^(\d+ passed.* in )\d+\.\d+s(?: \(\d+:\d\d:\d\d\))?$", r"\1<s>s", text)


MASKS: dict[str, Callable[[str], str]] = {
    "datetimes": _mask_datetimes,
    "gap-seconds": _mask_gap_seconds,
    "gap-times": _mask_gap_times,
    "golden-seconds": _mask_golden_seconds,
    "pytest-seconds": _mask_pytest_seconds,
    "search-speed": _mask_search_speed,
}


@dataclass
class Block:
    """One tested example: where it is, what it runs and what the Markdown shows."""

    doc: Path
    line: int  # 1-based line of the marker
    name: str
    lang: str
    code: str
    shown: str  # the text block after the code block
    shown_span: tuple[int, int]  # lines (0-based, end exclusive) of the shown block's content
    slow: bool = False
    masks: list[str] = field(default_factory=list)
    exit_code: int = 0

    @property
    def where(self) -> str:
        doc = self.doc.relative_to(REPO) if self.doc.is_relative_to(REPO) else self.doc
        return f"{doc}:{self.line} ({self.name})"

    @property
    def expected_path(self) -> Path:
        return EXPECTED / f"{self.name}.txt"


def _fenced(lines: list[str], i: int, doc: Path) -> tuple[str, str, int, int]:
    """The fenced block starting at line ``i`` (blank lines skipped): (lang, text, first, end)."""
    while i < len(lines) and not lines[i].strip():
        i += 1
    m = FENCE.match(lines[i]) if i < len(lines) else None
    if m is None:
        raise ValueError(f"{doc}:{i + 1}: a doctest marker must be followed by a fenced code block")
    j = i + 1
    while j < len(lines) and not lines[j].startswith("```"):
        j += 1
    if j >= len(lines):
        raise ValueError(f"{doc}:{i + 1}: unterminated code block")
    text = "\n".join(lines[i + 1 : j]) + "\n" if j > i + 1 else ""
    return m.group("lang"), text, i + 1, j


def find_blocks(doc: Path) -> list[Block]:
    """Every marked example of one Markdown file."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    out = []
    for k, ln in enumerate(lines):
        m = MARKER.match(ln)
        if m is None:
            if ln.startswith("<!-- doctest"):
                raise ValueError(f"{doc}:{k + 1}: malformed doctest marker {ln!r}")
            continue
        opts = m.group("opts").split()
        masks: list[str] = []
        slow = False
        exit_code = 0
        for o in opts:
            if o == "slow":
                slow = True
            elif re.fullmatch(r"exit=\d+", o):
                exit_code = int(o[5:])
            elif o.startswith("mask="):
                masks += o[5:].split(",")
            else:
                raise ValueError(f"{doc}:{k + 1}: unknown doctest option {o!r} (slow, exit=N, mask=NAME,...)")
        for name in masks:
            if name not in MASKS:
                raise ValueError(f"{doc}:{k + 1}: unknown mask {name!r}; known: {', '.join(MASKS)}")
        lang, code, _c0, c1 = _fenced(lines, k + 1, doc)
        if lang not in ("bash", "python"):
            raise ValueError(f"{doc}:{k + 1}: a tested block must be bash or python, got {lang!r}")
        out_lang, shown, s0, s1 = _fenced(lines, c1 + 1, doc)
        if out_lang != "text":
            raise ValueError(f"{doc}:{k + 1}: the output block after a tested example must be ```text")
        out.append(Block(doc, k + 1, m.group("name"), lang, code, shown, (s0, s1), slow, masks, exit_code))
    return out


def all_blocks() -> list[Block]:
    blocks = []
    for rel in DOC_FILES:
        p = REPO / rel
        if p.is_file():
            blocks += find_blocks(p)
    names = [b.name for b in blocks]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"doctest names used twice: {', '.join(dup)}")
    return blocks


# --------------------------------------------------------------------------- running
def scratch_copy(dest: Path) -> Path:
    """What a user has after cloning, minus the package: examples/ and studies/ (outputs go here)."""
    for sub in ("examples", "studies"):
        shutil.copytree(REPO / sub, dest / sub, ignore=shutil.ignore_patterns("__pycache__", "runs"))
    return dest


def _bash_lines(code: str) -> list[str]:
    cmds = []
    for ln in code.splitlines():
        ln = ln.strip()
        if not ln or ln.startswith("#"):
            continue
        ln = re.sub(r"^pip install [^&]*&&\s*", "", ln)  # the package is installed already
        if ln.startswith("pip install"):
            continue
        cmds.append(ln)
    return cmds


def run_block(block: Block, workdir: Path, timeout_s: float = 600) -> str:
    """Run the block in ``workdir``; its standard output with the path placeholder applied."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["COLUMNS"] = "100"
    env.pop("MOEOPT_REGEN_DOCS", None)
    outs = []
    if block.lang == "python":
        runs = [[sys.executable, "-c", block.code]]
        shell = False
    else:
        runs = [[c] for c in _bash_lines(block.code)]
        shell = True
    for argv in runs:
        p = subprocess.run(
            argv[0] if shell else argv,
            shell=shell,
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        if p.returncode != block.exit_code or (block.exit_code and len(runs) != 1):
            raise AssertionError(
                f"{block.where}: {argv[0] if shell else 'python block'} exited {p.returncode}, "
                f"expected {block.exit_code} (one command per block with exit=N)\n"
                f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}"
            )
        outs.append(p.stdout + (p.stderr if block.exit_code else ""))
    text = "".join(outs)
    for path in (workdir.resolve(), workdir, REPO):  # the user's checkout, wherever it is
        text = text.replace(str(path), PATH_PLACEHOLDER)
    return text


# --------------------------------------------------------------------------- comparing
def normalise(text: str, masks: list[str]) -> str:
    for name in masks:
        text = MASKS[name](text)
    return text


def _diff(a: str, b: str, a_name: str, b_name: str) -> str:
    import difflib

    return "".join(
        difflib.unified_diff(a.splitlines(True), b.splitlines(True), a_name, b_name, n=1)
    )


def compare(block: Block, actual: str, expected_path: Path | None = None) -> list[str]:
    """Problems (empty: fine) between the real output, the expected file and the shown block."""
    path = expected_path or block.expected_path
    problems = []
    if not path.is_file():
        return [f"{block.where}: no expected file {path} (run with MOEOPT_REGEN_DOCS=1 to create it)"]
    expected = path.read_text(encoding="utf-8")
    got, want, shown = (normalise(t, block.masks) for t in (actual, expected, block.shown))
    if got != want:
        problems.append(
            f"{block.where}: output differs from {path.name} "
            f"(regenerate on purpose with MOEOPT_REGEN_DOCS=1):\n" + _diff(want, got, "expected", "actual")
        )
    if shown != want:
        problems.append(
            f"{block.where}: the output shown in the Markdown differs from {path.name}:\n"
            + _diff(want, shown, "expected", "shown")
        )
    return problems


def regenerate(block: Block, actual: str) -> None:
    """Write the expected file and the Markdown output block from ``actual``."""
    EXPECTED.mkdir(exist_ok=True)
    block.expected_path.write_text(actual, encoding="utf-8")
    current = next(b for b in find_blocks(block.doc) if b.name == block.name)  # earlier edits move lines
    lines = block.doc.read_text(encoding="utf-8").splitlines()
    s0, s1 = current.shown_span
    lines[s0:s1] = actual.rstrip("\n").split("\n") if actual else []
    block.doc.write_text("\n".join(lines) + "\n", encoding="utf-8")
