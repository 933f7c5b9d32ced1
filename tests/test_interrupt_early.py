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


def _as_sqlite_leaves_it(db: Path, header: bool) -> bytes:
    """The file a ``placetune tune`` interrupted in its first second can leave: SQLite creates it (0 bytes) when
    the store first connects, and switching it to WAL writes its 4 KiB header; placetune's tables come next."""
    con = sqlite3.connect(db)
    con.isolation_level = None
    if header:
        assert con.execute("PRAGMA journal_mode = WAL").fetchone()[0] == "wal"
    con.close()
    return db.read_bytes()


@pytest.mark.parametrize("header", [False, True], ids=["created", "switched-to-wal"])
@pytest.mark.parametrize("argv", [["studies"], ["studies", "--json"], ["export", "-o", "plan.json"],
                                  ["report", "-o", "rep"], ["calibrate", "--study", "s"]])
def test_a_database_with_nothing_in_it_holds_no_study_for_a_command_that_only_reads(argv, header, tmp_path, capsys,
                                                                                      monkeypatch):
    """A Ctrl-C after SQLite had created the file and before placetune's tables were written left a file that
    ``placetune studies`` refused ("has no placetune tables, and this command only reads it", exit 7): an SQLite
    database with nothing in it is one holding no study, read as such and left unchanged."""
    from placetune.store import Store

    monkeypatch.chdir(tmp_path)
    Store(tmp_path / "new.db").close()  # what tune writes first: placetune's tables, no study yet
    expected = main([argv[0], "--storage", str(tmp_path / "new.db"), *argv[1:]]), capsys.readouterr()
    db = tmp_path / "pt.db"
    before = _as_sqlite_leaves_it(db, header)
    code = main([argv[0], "--storage", str(db), *argv[1:]])
    out, err = capsys.readouterr()
    assert (code, out, err) == (expected[0], *(t.replace("new.db", "pt.db") for t in expected[1])), err
    assert code == 0 if argv[0] == "studies" else code in (4, 6)
    assert db.read_bytes() == before and not (tmp_path / "pt.db-wal").exists() and "Traceback" not in err
    assert not (tmp_path / "plan.json").exists() and not (tmp_path / "rep").exists()


def test_a_database_with_a_table_of_another_program_is_still_refused(tmp_path, capsys):
    db = tmp_path / "pt.db"
    _as_sqlite_leaves_it(db, True)
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE notes (body TEXT)")
    assert main(["studies", "--storage", str(db)]) == 7
    assert "has no placetune tables, and this command only reads it" in capsys.readouterr().err


def test_ctrl_c_before_the_tables_are_written_leaves_a_file_studies_and_tune_take(tmp_path, capsys, monkeypatch):
    """The window of the first second, at its seam: the file created and in WAL, the tables not yet written."""
    from placetune.store.migration import SchemaMixin

    def interrupted(self, conn):
        raise KeyboardInterrupt

    db = tmp_path / "pt.db"
    tune = ["tune", "--model", "seed-block", "--trials", "3", "--storage", str(db), "--export", str(tmp_path / "p.json")]
    with monkeypatch.context() as m:
        m.setattr(SchemaMixin, "_create_or_migrate", interrupted)
        assert main(tune) == 130
    assert capsys.readouterr().err == "placetune: interrupted\n"
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0
    assert main(["studies", "--storage", str(db)]) == 0
    assert capsys.readouterr().out == f"no study in sqlite:///{db}\n"
    assert main(tune) == 0, capsys.readouterr().err
    assert "seed-block" in capsys.readouterr().out
    assert main(["studies", "--storage", str(db)]) == 0 and "seed-block" in capsys.readouterr().out


def test_a_store_that_only_reads_an_empty_file_names_the_file_and_writes_nothing(tmp_path):
    from placetune.store import Store

    db = tmp_path / "pt.db"
    before = _as_sqlite_leaves_it(db, True)
    with Store(db, readonly=True) as store:
        assert store.studies() == [] and store.schema_version > 0
        assert store.url == f"sqlite:///{db}" and store.sqlite_path == str(db) and not store.in_memory
    assert db.read_bytes() == before
    with Store(db) as store:  # a store that writes gives it placetune's tables, as to a new file
        assert store.studies() == []
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT COUNT(*) FROM pt_schema").fetchone()[0] == 1


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_inside_a_librarys_commit_is_the_documented_exit_not_a_traceback(signum, tmp_path, capsys,
                                                                                  monkeypatch):
    """Seen by interrupting ``placetune tune`` at every call of its opening: a signal that lands inside
    SQLAlchemy's commit, between the database's COMMIT and the transaction's bookkeeping, makes SQLAlchemy's
    own ``assert not self.is_active`` fail as the interrupt unwinds, and the run printed an AssertionError's
    traceback as placetune's internal error (exit 1) instead of the signal's one line."""
    from sqlalchemy.engine.base import RootTransaction

    from placetune.errors import Interrupted

    real = RootTransaction._deactivate_from_connection
    fired = []

    def deactivate(self):
        if not fired:  # the run's handler raising as the signal lands, once
            fired.append(1)
            raise Interrupted(signum)
        return real(self)

    monkeypatch.setattr(RootTransaction, "_deactivate_from_connection", deactivate)
    db = tmp_path / "pt.db"
    code = main(["tune", "--model", "seed-block", "--trials", "3", "--storage", str(db)])
    err = capsys.readouterr().err
    assert fired and (code, err) == (128 + signum, "placetune: " + (
        "interrupted" if signum == signal.SIGINT else "terminated") + "\n"), err
    monkeypatch.undo()
    assert main(["studies", "--storage", str(db)]) == 0, capsys.readouterr().err
