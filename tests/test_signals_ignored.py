"""A signal ignored when ``placetune tune`` starts stays ignored: ``nohup`` ignores SIGHUP so that a night
survives the ssh session that started it (the README's overnight command is ``nohup placetune tune ... &``),
and a non-interactive shell ignores SIGINT in the commands it puts in the background. The run's own stop
handler took every stop signal regardless, so a dropped ssh session stopped a nohup'd night after the
evaluation in flight, and a Ctrl-C meant for a script's foreground command stopped the tune behind it."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from placetune.cli.main import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGINT])
def test_a_signal_ignored_at_start_does_not_stop_the_run(signum, tmp_path, capsys, monkeypatch):
    from placetune.backends.simulate.simulator import SimulatedJetson

    real = SimulatedJetson.measure
    calls = []

    def measure(self, *args, **kwargs):  # the signal lands as the third evaluation is measured
        calls.append(1)
        if len(calls) == 3:
            os.kill(os.getpid(), signum)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(SimulatedJetson, "measure", measure)
    monkeypatch.chdir(tmp_path)  # the study's plan file is written beside it
    previous = signal.signal(signum, signal.SIG_IGN)  # as nohup (SIGHUP) or a shell's `cmd &` (SIGINT) leave it
    try:
        db = tmp_path / "n.db"
        code = main(["tune", "--model", "seed-block", "--agent", "random", "--trials", "6", "--storage", str(db),
                     "--study", "n"])
        assert signal.getsignal(signum) is signal.SIG_IGN  # still ignored after the run
    finally:
        signal.signal(signum, previous)
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "stopping after the evaluation in flight" not in out.err and "interrupted" not in out.out, out
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM pt_requests").fetchone()[0] == 6


def test_under_nohup_a_hangup_leaves_the_night_running(tmp_path):
    """The README's command, as a process: ``nohup`` (SIGHUP ignored), then the session's hangup."""
    script = ("import os, signal, sys\n"
              "from placetune.backends.simulate.simulator import SimulatedJetson\n"
              "real = SimulatedJetson.measure\n"
              "n = [0]\n"
              "def measure(self, *a, **k):\n"
              "    n[0] += 1\n"
              "    if n[0] == 3:\n"
              "        os.kill(os.getpid(), signal.SIGHUP)\n"
              "    return real(self, *a, **k)\n"
              "SimulatedJetson.measure = measure\n"
              "from placetune.cli.main import main\n"
              "sys.exit(main(sys.argv[1:]))\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(["nohup", sys.executable, "-c", script, "tune", "--model", "seed-block", "--agent",
                           "random", "--trials", "6", "--storage", str(tmp_path / "n.db")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "hung up" not in proc.stderr and "stopping after the evaluation in flight" not in proc.stderr
