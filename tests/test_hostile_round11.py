"""Hostile and odd input, round 11: the round's new code (``--help-all`` and the short help, standard
error wrapped on a terminal, the study checks, the registered objectives, ``--timeout``/``--shape``, the
deploy writers, the runtime's plan checks, the clocks read from sysfs).

Each input is checked against the rule of every round: a one-line error naming the field and what is
allowed, a documented exit code, never a traceback, a hang, a leaked secret or a change to what is stored.
The fuzz suites' seeds are printed in the header and at the end of every run (tests/seeds.py); replay one
with ``PLACETUNE_FUZZ_SEED=N python -m pytest -q -p no:cacheprovider tests/test_fuzz.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _cli(args: list[str], stdout: str | None = None) -> subprocess.CompletedProcess:
    cmd = " ".join(f"'{a}'" for a in [sys.executable, "-m", "placetune.cli", *args])
    if stdout:
        cmd += f" > '{stdout}'"
    return subprocess.run(["sh", "-c", cmd], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
@pytest.mark.parametrize("args", [["tune", "--help-all"], ["measure", "--help-all"], ["tune", "--help"],
                                  ["--version"]])
def test_help_written_to_a_full_disk_is_not_a_success(args):
    """argparse's help and version exit through SystemExit(0), past the check that standard output reached
    its reader: ``placetune tune --help-all > /dev/full`` said nothing and exited 0."""
    proc = _cli(args, stdout="/dev/full")
    assert proc.returncode == 6, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "placetune: error: the standard output is full (no space left on device): the command's output is incomplete"]
