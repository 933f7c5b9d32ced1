"""Ctrl-C at any time of ``placetune tune``, its first second included: the documented interrupted exit
(exit code 130, one line or the interrupted run's summary), never a traceback, nothing half-written."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from placetune.cli.main import main

ROOT = Path(__file__).resolve().parents[1]


def _console_script() -> str:
    """What pip's ``placetune`` script runs: ``from MODULE import FUNCTION`` of pyproject's entry point."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    entry = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["placetune"]
    module, func = entry.split(":")
    # a line on standard output once Python has started (its own start-up is not placetune's to guard)
    return f"import sys; print('started', flush=True); from {module} import {func}; sys.exit({func}())"


def _interrupted_at(delay: float, tmp_path: Path, sig: int = signal.SIGINT) -> tuple[subprocess.Popen, str, str]:
    """``placetune tune`` started as the console script does, sent ``sig`` ``delay`` s after it said 'started'."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-c", _console_script(), "tune", "--storage", str(tmp_path / "pt.db")],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "started\n"
    time.sleep(delay)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=240)
    return proc, out, err


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.05, 0.15, 0.35, 0.6, 1.0, 2.0, 4.0])
def test_ctrl_c_at_any_time_of_the_first_seconds_is_the_documented_exit(delay, tmp_path):
    proc, out, err = _interrupted_at(delay, tmp_path)
    assert "Traceback" not in err, err
    assert proc.returncode == 130, (proc.returncode, err)
    lines = err.strip().splitlines()
    if "stopping after the evaluation in flight" in err:  # the study was open: the run's own first Ctrl-C
        assert "Resume with: placetune tune" in out, out
    else:  # before the study opened: one line, nothing measured
        assert lines == ["placetune: interrupted"], err
    db = tmp_path / "pt.db"
    if db.exists():  # whatever was written is whole: read back, and the same command resumes it
        with sqlite3.connect(db) as con:
            assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        again = subprocess.run([sys.executable, "-m", "placetune.cli", "studies", "--storage", str(db)], cwd=tmp_path,
                               capture_output=True, text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr


def test_ctrl_c_during_the_baselines_stops_after_the_one_in_flight(tmp_path, capsys, monkeypatch):
    """The baselines are measured before the search: a Ctrl-C then was a bare KeyboardInterrupt (one line,
    no summary, the baseline in flight lost); it is the run's first Ctrl-C like any later one."""
    from placetune.tuning.evaluator import Evaluator

    real = Evaluator.baseline

    def baseline(self, *a, **k):  # Ctrl-C as the all-GPU baseline is measured (the first evaluation)
        m = real(self, *a, **k)
        os.kill(os.getpid(), signal.SIGINT)
        return m

    monkeypatch.setattr(Evaluator, "baseline", baseline)
    code = main(["tune", "--model", "seed-block", "--trials", "8", "--storage", f"sqlite:///{tmp_path / 'pt.db'}",
                 "--export", str(tmp_path / "plan.json")])
    out, err = capsys.readouterr()
    assert code == 130, err
    assert "stopping after the evaluation in flight" in err and "placetune: interrupted" not in err
    assert "interrupted after 1 of 8 trials; everything measured is stored" in out
    with sqlite3.connect(tmp_path / "pt.db") as con:
        assert con.execute("SELECT COUNT(*) FROM pt_measurements").fetchone()[0] == 1
