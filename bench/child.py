"""Run a bench's measuring code in a child interpreter (for A/B runs of two checkouts).

The code runs as ``python -c CODE ARGS...`` from the temporary directory, outside any checkout:
``python -c`` puts the working directory first on the path, which would import this
checkout's moeopt whatever the interpreter (a wrapper that puts another checkout first on
``PYTHONPATH`` is how the benches compare two commits). The child's last line of output is read
as JSON."""

from __future__ import annotations

import json
import subprocess
import tempfile
from typing import Any


def run_child(python: str, code: str, args: list[str], what: str) -> dict[str, Any]:
    """The JSON object ``code`` printed last, run by ``python`` with ``args``; exits with the
    child's error output (``what`` names the run) when it fails."""
    out = subprocess.run(
        [python, "-c", code, *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=tempfile.gettempdir(),
    )
    if out.returncode != 0:
        raise SystemExit(f"{python} {what} failed:\n{out.stderr}")
    got: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return got
