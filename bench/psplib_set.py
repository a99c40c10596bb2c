"""The PSPLIB j30 set the PSPLIB benches read: ``--data DIR`` or ``$MOEOPT_PSPLIB_DIR``, holding
``j30/*.sm`` and ``j30_opt.csv`` (the proven optima)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import moeopt as m


def add_data_argument(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--data", default=os.environ.get("MOEOPT_PSPLIB_DIR"))


def open_set(data: str | None) -> tuple[Path, dict[str, int]] | None:
    """The data folder and the optima by instance name; ``None`` (after saying why) without data."""
    if not data:
        print("no data: pass --data DIR or set MOEOPT_PSPLIB_DIR", file=sys.stderr)
        return None
    folder = Path(data)
    if not (folder / "j30_opt.csv").is_file() or not (folder / "j30").is_dir():
        print(f"no PSPLIB j30 set in {folder}: it needs j30/*.sm and j30_opt.csv", file=sys.stderr)
        return None
    return folder, m.load_psplib_optima(folder / "j30_opt.csv")
