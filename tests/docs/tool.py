"""The repository's ``tools/gen_docs.py`` loaded as a module (it is not part of the package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TOOL = Path(__file__).resolve().parents[2] / "tools" / "gen_docs.py"


def load_gen_docs() -> ModuleType:
    """``tools/gen_docs.py`` as the module ``gen_docs`` (loaded once per process)."""
    if "gen_docs" in sys.modules:
        return sys.modules["gen_docs"]
    spec = importlib.util.spec_from_file_location("gen_docs", TOOL)
    assert spec is not None, TOOL
    assert spec.loader is not None, TOOL
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_docs"] = module
    spec.loader.exec_module(module)
    return module
