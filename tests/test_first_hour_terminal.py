"""In an 80-column terminal standard output was wrapped and standard error was not: an unknown model's error
ran to 376 columns, Orin Nano's refusal to 237, a mistyped option's to 123; `placetune doctor`'s fixes to 603
and `placetune trace`'s closing line to 101. On a terminal each is wrapped at word boundaries now; in a log
(or a pipe) each message stays one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_first_hour_cli import _in_a_terminal, _widest

ROOT = Path(__file__).resolve().parents[1]


def _logged(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "placetune.cli", *argv], cwd=cwd, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "COLUMNS": "80"}, timeout=300)


@pytest.mark.parametrize("argv, words", [
    (["check", "yolov9"], "is neither an ONNX file nor a zoo model"),
    (["tune", "--platform", "orin-nano"], "has no DLA core"),
    (["tune", "--trails", "5"], "unrecognized argument: --trails (did you mean --trials?)"),
])
def test_an_error_fits_an_80_column_terminal_and_stays_one_line_in_a_log(argv, words, tmp_path):
    log = _logged(argv, tmp_path)
    assert log.returncode in (2, 4, 6) and log.stdout == ""
    assert len(log.stderr.splitlines()) == 1 and _widest(log.stderr) >= 80 and words in log.stderr
    shown = _in_a_terminal(argv, tmp_path)
    assert _widest(shown) < 80, shown
    assert " ".join(shown.split()) == " ".join(log.stderr.split())  # the same words
    assert "\\" not in shown  # a message, not a command to copy: no shell continuations


def test_doctor_fits_an_80_column_terminal_and_keeps_one_line_a_check_in_a_log(tmp_path):
    log = _logged(["doctor"], tmp_path)
    assert _widest(log.stdout) >= 80
    shown = _in_a_terminal(["doctor"], tmp_path)
    assert _widest(shown) < 80, shown
    assert " ".join(shown.split()) == " ".join(log.stdout.split())
    fail = next(line for line in shown.splitlines() if line.startswith("[FAIL] tensorrt"))
    follow = shown.splitlines()[shown.splitlines().index(fail) + 1]
    assert follow.startswith("       ")  # a check's continuation under its own text


def test_trace_says_where_it_wrote_within_80_columns(tmp_path):
    from placetune.cli.main import main

    plan = tmp_path / "p.json"
    assert main(["tune", "--model", "seed-block", "--trials", "3", "--agent", "random", "--storage",
                 f"sqlite:///{tmp_path}/t.db", "--study", "s", "--export", str(plan)]) == 0
    shown = _in_a_terminal(["trace", str(plan), "-o", "trace.json"], tmp_path)
    assert "wrote SIMULATED trace trace.json" in shown and _widest(shown) < 80, shown
