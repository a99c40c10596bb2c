"""Load a local HTML page in a headless Chromium and collect what its console said.

Used by the tests of the self-contained pages (Gantt chart, report) and handy by hand::

    from moeopt.viz.browser import find_browser, load_page
    res = load_page("report.html", screenshot="report.png")
    res.console          # every console message / uncaught error of the page, one line each

The browser is ``$MOEOPT_BROWSER`` if set, else the first of ``chromium``, ``chromium-browser``,
``google-chrome``, ``google-chrome-stable`` on ``PATH``. Chromium prints console messages to
standard error under ``--enable-logging=stderr`` as ``...:CONSOLE(line)] "text", source: url``;
those lines are what :attr:`PageLoad.console` holds.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from moeopt.errors import InputError

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_browser() -> str | None:
    """Path of a Chromium-family browser, or ``None`` when none is installed."""
    env = os.environ.get("MOEOPT_BROWSER")
    if env:
        return shutil.which(env) or (env if Path(env).is_file() else None)
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass(frozen=True)
class PageLoad:
    """What one headless load of a page produced."""

    console: list[str]  # console messages and uncaught errors of the page
    stderr: str  # everything the browser printed (its own noise included)
    screenshot: Path | None  # the PNG, when one was asked for and written
    dom: str  # the serialised DOM after the page's scripts ran ("" with a screenshot)
    returncode: int


def load_page(
    page: str | Path,
    *,
    screenshot: str | Path | None = None,
    window: tuple[int, int] = (1400, 1000),
    timeout_s: float = 20.0,
    browser: str | None = None,
    fragment: str = "",
) -> PageLoad:
    """Open ``page`` (a local file, ``#fragment`` appended) headless; take a screenshot or dump the DOM.

    Raises :class:`InputError` when no browser is found, the page does not exist, or the browser
    does not finish within ``timeout_s`` (its process group is then killed).
    """
    exe = browser or find_browser()
    if exe is None:
        raise InputError(f"no Chromium-family browser found (tried $MOEOPT_BROWSER, {', '.join(BROWSERS)})")
    path = Path(page).resolve()
    if not path.is_file():
        raise InputError(f"{page}: no such page")
    with tempfile.TemporaryDirectory(prefix="moeopt-browser-") as profile:
        cmd = [
            exe,
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            f"--window-size={window[0]},{window[1]}",
        ]
        shot = Path(screenshot).resolve() if screenshot is not None else None
        cmd.append(f"--screenshot={shot}" if shot is not None else "--dump-dom")
        cmd.append(path.as_uri() + (f"#{fragment}" if fragment else ""))
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,  # its own process group: a timeout kills the renderers too
        )
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise InputError(f"{exe} did not finish loading {path} within {timeout_s:g} s") from None
    console = [line.split("] ", 1)[-1] for line in err.splitlines() if ":CONSOLE" in line]
    return PageLoad(
        console=console,
        stderr=err,
        screenshot=shot if shot is not None and shot.is_file() else None,
        dom=out if shot is None else "",
        returncode=proc.returncode,
    )
