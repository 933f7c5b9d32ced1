"""The generated tables of docs/simulator.md and README.md are what the code gives now.

docs/simulator_tables.py writes them from the simulator's constants, the fit's parameters and
bounds, the published rows and the stored fit; a constant, a bound, a row or the fit that
changes without ``python docs/simulator_tables.py`` fails here.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("simulator_tables", ROOT / "docs" / "simulator_tables.py")
tables = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = tables
_spec.loader.exec_module(tables)


@pytest.mark.parametrize("file", sorted(tables.FILES))
def test_committed_tables_match_the_code(file):
    text = tables.FILES[file].read_text()
    assert tables.render(text, file) == text, f"run: python docs/simulator_tables.py ({file} is stale)"


def test_constants_table_shows_the_values_in_use():
    from placetune.backends.simulate import costs

    row = next(line for line in tables.constants_table().splitlines() if line.startswith("| `gpu_sensitivity` |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == f"{costs.PRIOR_ARCH['volta'].gpu_sensitivity:.4g}"
    assert cells[2] == f"{costs.ARCH['volta'].gpu_sensitivity:.4g}" and "fit" in cells[5]


def test_a_stale_table_is_detected():
    text = tables.FILES["simulator.md"].read_text()
    stale = text.replace("| `gpu_sensitivity` | 0.2 |", "| `gpu_sensitivity` | 1.4 |", 1)
    assert stale != text
    assert tables.render(stale, "simulator.md") != stale
