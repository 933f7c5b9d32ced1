"""Golden test: the embedded default tune (``placetune tune``) prints the same trial lines.

The file ``tests/data/golden/default_tune_trials.txt`` holds the ``trial=`` lines of the default tune
(everything but ``elapsed_s``, which is wall time): 36 of its budget's 300, the guided agent stopping once nothing
it could build can change its answer (``stop_when_settled``, the default; the 36 are the first 36 of the 300 that
``--no-stop-when-settled`` prints). A refactor keeps them to the character. A change that means
to alter what the search does (a new agent rule, a simulator change) regenerates the file in its own commit,
saying why the lines moved:

    cd "$(mktemp -d)" && placetune tune | grep '^trial=' | sed -E 's/ elapsed_s=[0-9.]+//' \
        > /path/to/tests/data/golden/default_tune_trials.txt
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "data" / "golden" / "default_tune_trials.txt"


@pytest.mark.slow
def test_the_default_tune_prints_the_golden_trial_lines(tmp_path):
    run = subprocess.run([sys.executable, "-m", "placetune.cli", "tune"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-2000:]
    got = [re.sub(r" elapsed_s=[0-9.]+", "", x) for x in run.stdout.splitlines() if x.startswith("trial=")]
    want = GOLDEN.read_text().splitlines()
    assert len(want) == 36
    # the first 50 first, so a failure names the earliest line that moved
    for i, (g, w) in enumerate(zip(got[:50], want[:50]), 1):
        assert g == w, f"trial line {i} moved:\n got  {g}\n want {w}"
    assert got == want
