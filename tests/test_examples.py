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


PPO = Path(__file__).resolve().parents[1] / "search" / "examples" / "maskable_ppo.py"


def test_maskable_ppo_example_says_what_it_needs_without_sb3_contrib():
    """Issue 17 item 6: without sb3-contrib the RL example ended in an ImportError traceback."""
    import pytest

    try:
        import sb3_contrib  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("sb3-contrib is installed")
    proc = subprocess.run([sys.executable, str(PPO), "--timesteps", "64"], capture_output=True, text=True)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == "this example needs sb3-contrib: pip install sb3-contrib"


def test_maskable_ppo_example_optimises_energy_and_prints_its_gain_over_the_baselines():
    """Issue 17 item 6: the RL example optimised latency, where all-GPU is optimal, and printed no comparison."""
    import pytest

    pytest.importorskip("sb3_contrib")
    out = subprocess.run([sys.executable, str(PPO), "--model", "seed-block", "--timesteps", "256"],
                         capture_output=True, text=True, check=True, timeout=600).stdout
    assert "energy" in out and "SIMULATED" in out
    assert re.search(r"all-GPU [\d.]+: gain x[\d.]+", out) and re.search(r"all-DLA0 \(\+fallback\) [\d.]+: gain x", out)
