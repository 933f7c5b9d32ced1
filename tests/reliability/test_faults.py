"""Faults around the database: a full disk, a newer schema, a locked SQLite file."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from placetune import Placement, StoreError
from placetune.cli.main import main
from placetune.tuning.evaluator import Evaluator
from placetune.store.store import Store

from ._harness import COUNTS, acked, check_sqlite, fork_cli, wait

MODEL = Path(__file__).resolve().parents[1] / "data" / "seed_model_gn.onnx.gz"


def _argv(db: Path, trials: int, tmp: Path, study: str = "disk") -> list[str]:
    return ["tune", "--model", str(MODEL), "--mode", "engine", "--precision", "int8", "--agent", "random",
            "--granularity", "layer", "--trials", str(trials), "--study", study, "--storage", f"sqlite:///{db}",
            "--export", str(tmp / f"{study}.plan.json")]


def _one_error_line(log: str) -> str:
    errors = [line for line in log.splitlines() if line.startswith("placetune: error:")]
    assert len(errors) == 1 and "Traceback" not in log, log[-3000:]
    return errors[0]


def _disk_full_then_resume(db: Path, tmp: Path, run_full, budget: int) -> dict:
    """Tune until the disk is full: a clear error, every stored row intact; then the resume finishes."""
    ack = tmp / "ack.txt"
    rc = wait(fork_cli(_argv(db, 30, tmp), tmp / "first.log", ack=ack))
    assert rc == 0, (tmp / "first.log").read_text()[-2000:]
    with sqlite3.connect(db) as con:  # start the faulty run from an empty WAL
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = check_sqlite(db)
    rc, log = run_full(_argv(db, budget, tmp), ack)
    COUNTS["faults"] += 1
    COUNTS["disk_full"] += 1
    assert rc == StoreError.exit_code, log[-3000:]
    line = _one_error_line(log)
    assert "free disk space" in line and str(db) in line
    after = check_sqlite(db)
    assert not after["partial"]
    lost = (before["ids"] | set(acked(ack))) - after["ids"]  # type: ignore[operator]
    COUNTS["rows_lost"] += len(lost)
    assert not lost
    assert after["requests"] > before["requests"]  # it did get some way before the disk filled up
    return after


def test_disk_full_rlimit_clear_error_rows_intact(tmp_path):
    """RLIMIT_FSIZE: no file of the tuner may grow past the limit (works without root)."""
    db = tmp_path / "full.db"

    def run_full(argv, ack):
        limit = os.path.getsize(db) + 24 * 1024  # a few WAL frames
        log = tmp_path / "full.log"
        rc = wait(fork_cli(argv, log, ack=ack, fsize_limit=limit))
        return rc, log.read_text()

    _disk_full_then_resume(db, tmp_path, run_full, budget=200)
    rc = wait(fork_cli(_argv(db, 200, tmp_path), tmp_path / "resume.log"))
    assert rc == 0, (tmp_path / "resume.log").read_text()[-2000:]
    with Store(f"sqlite:///{db}") as store:
        assert store.study("disk").n_requests == 200
    assert not check_sqlite(db)["partial"]
    COUNTS["survived"] += 1


def _mount_tmpfs(path: Path, size: str) -> bool:
    if os.geteuid() != 0 or not shutil.which("mount"):
        return False
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    return r.returncode == 0


def test_disk_full_tmpfs_clear_error_rows_intact(tmp_path):
    """A real full file system: a tiny tmpfs (needs root and mount rights, else skipped)."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if not _mount_tmpfs(mnt, "6m"):
        pytest.skip("cannot mount a tmpfs here (needs root); the RLIMIT_FSIZE test covers a full disk")
    try:
        db = mnt / "full.db"

        def run_full(argv, ack):
            log = tmp_path / "full.log"  # the log lives outside the full file system
            return wait(fork_cli(argv, log, ack=ack)), log.read_text()

        _disk_full_then_resume(db, tmp_path, run_full, budget=100000)
        subprocess.run(["mount", "-o", "remount,size=64m", str(mnt)], check=True)
        with Store(f"sqlite:///{db}") as store:  # with room again, the study goes on
            done = store.study("disk").n_requests
        rc = wait(fork_cli(_argv(db, done + 20, tmp_path), tmp_path / "resume.log"))
        assert rc == 0, (tmp_path / "resume.log").read_text()[-2000:]
        assert not check_sqlite(db)["partial"]
        COUNTS["survived"] += 1
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_newer_schema_is_refused_untouched(tmp_path, capsys):
    db = tmp_path / "new.db"
    with Store(f"sqlite:///{db}"):
        pass
    with sqlite3.connect(db) as con:
        con.execute("UPDATE pt_schema SET version = 99")
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    COUNTS["faults"] += 1
    COUNTS["newer_schema"] += 1
    with pytest.raises(StoreError, match=r"schema v99, newer than this placetune \(v\d+\); upgrade placetune"):
        Store(f"sqlite:///{db}")
    capsys.readouterr()
    assert main(["tune", "--model", "seed-block", "--trials", "2", "--storage", f"sqlite:///{db}"]) == 7
    err = capsys.readouterr().err
    assert "newer than this placetune" in _one_error_line(err)
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT version FROM pt_schema").fetchone()[0] == 99
        assert con.execute("SELECT count(*) FROM pt_studies").fetchone()[0] == 0
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest
    COUNTS["survived"] += 1


def test_locked_sqlite_waits_then_clear_error(tmp_path):
    db = tmp_path / "locked.db"
    store = Store(f"sqlite:///{db}", busy_timeout=1.0)
    ev = Evaluator("seed-block", "orin-agx", mode="pipeline", store=store, study="locked")
    first = ev.evaluate(Placement.all_gpu(ev.model))
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys, time\n"
         f"c = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
         "c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        COUNTS["faults"] += 1
        COUNTS["locked"] += 1
        t0 = time.monotonic()
        with pytest.raises(StoreError) as info:
            ev.evaluate(Placement.all_dla(ev.model, 0))
        waited = time.monotonic() - t0
        msg = str(info.value)
        assert waited >= 0.9, waited  # it waited for the busy timeout...
        assert "is locked" in msg and f"pid {holder.pid}" in msg and "busy timeout (1 s)" in msg  # ...then said why
    finally:
        holder.kill()
        holder.wait()
    again = ev.evaluate(Placement.all_dla(ev.model, 0))  # the lock is gone: it works, nothing was lost
    assert again.ok and not again.extra["cache_hit"]
    assert ev.evaluate(Placement.all_gpu(ev.model)).extra["cache_hit"] and first.ok
    store.close()
    assert not check_sqlite(db)["partial"]
    COUNTS["survived"] += 1
