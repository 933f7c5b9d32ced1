"""``python -m placetune`` runs the command line, as ``python -m optuna`` style entry points do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_python_m_placetune_is_the_command_line(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "placetune", "--version"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("placetune ")
    bad = subprocess.run([sys.executable, "-m", "placetune", "tune", "--trials", "-1"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120, check=False)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr and bad.stderr.startswith("placetune")
