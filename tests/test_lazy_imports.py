"""What a process imports: networkx and numba only when something reads what needs them.

``import moeopt`` and one ``simulate`` of a small scenario are what a command-line call or a
fresh worker process pays for before it does anything; networkx's import alone was about a
third of moeopt's (the event graph's networkx form is built only when ``EventGraph.nx`` is read)
and numba's import and load cost ~0.8 s (``moeopt.core.fastloop.LOAD_EVENTS``). Checked in a
fresh interpreter: this one has imported both already.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import json, sys
import moeopt
from moeopt.megamoe import simulate
from moeopt.trust.golden import default_configs
sc = next(c for c in default_configs() if c.name == "bs72").scenario()
r = simulate(sc)
seen = {m: m in sys.modules for m in ("networkx", "numba")}
g = r["rank_results"][0]["graph"]
view = g.nx  # the networkx form, made when read
print(json.dumps({"before": seen, "after": "networkx" in sys.modules,
                  "nodes": view.number_of_nodes(), "events": len(g)}))
"""


def test_a_small_simulate_imports_neither_networkx_nor_numba() -> None:
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True, cwd=root)
    got = json.loads(out.stdout)
    assert got["before"] == {"networkx": False, "numba": False}
    # reading the networkx form imports it and gives one node per event
    assert got["after"] is True
    assert got["nodes"] == got["events"] > 0
