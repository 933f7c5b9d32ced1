"""ruff and mypy are clean on placetune/ and search/ with the configuration of pyproject.toml
([tool.ruff], [tool.mypy]): CI runs the test suite, so this is how CI runs them. Both come with
the ``test`` extra, at the versions of constraints.txt."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str, timeout: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          check=False)


def test_ruff_is_clean():
    p = _run("ruff", "check", "--no-cache", "placetune", "search", timeout=300)
    assert p.returncode == 0, p.stdout[-6000:] + p.stderr[-2000:]


@pytest.mark.slow
def test_mypy_is_clean():
    p = _run("mypy", "placetune", "search", timeout=900)
    assert p.returncode == 0, p.stdout[-6000:] + p.stderr[-2000:]
    assert "Success: no issues found" in p.stdout
