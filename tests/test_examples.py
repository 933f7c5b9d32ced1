"""The README's custom-agent example runs, uses only public names and improves on all-GPU."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import placetune

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "custom_agent.py"


def test_custom_agent_uses_only_the_public_api():
    tree = ast.parse(EXAMPLE.read_text())
    used = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name) and n.value.id == "pt"}
    assert used and used <= set(placetune.__all__), used - set(placetune.__all__)
    assert len(EXAMPLE.read_text().splitlines()) <= 30


def test_custom_agent_runs_and_improves():
    out = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, check=True).stdout
    base, best = map(float, re.search(r"all-GPU ([\d.]+) mJ -> best ([\d.]+) mJ", out).groups())
    assert best < base and "simulated" in out
