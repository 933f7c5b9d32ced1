"""Helpers of the reliability suite: forked tuners, database checks and the suite's counts.

A tuner to be killed runs in a child *forked* from the test process (the imports are
already done, so a start costs milliseconds, not the 1-2 s of a new interpreter); the child
runs ``placetune.cli.main.main`` exactly as the command line would and leaves with ``os._exit``.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sqlite3
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

#: What the suite did, printed at the end of the test session (tests/conftest.py; under pytest-xdist
#: each worker hands its counts to the controller, which adds them up).
COUNTS: Counter[str] = Counter()
#: Free-form lines for the end-of-session summary.
NOTES: list[str] = []


def summary_lines() -> list[str]:
    """What the suite did (faults, survivals, rows lost, fuzz counts), for the end of the session."""
    c = COUNTS
    lines = []
    if c["faults"]:
        lines.append(f"faults injected: {c['faults']} ({c['kills']} SIGKILL, {c['disk_full']} disk full, "
                     f"{c['locked']} locked database, {c['newer_schema']} newer schema); runs survived "
                     f"(database opens, no partial row, resume completes): {c['survived']}; rows lost: "
                     f"{c['rows_lost']}")
    for kind in ("onnx_backend", "onnx_mutations"):
        if c[f"{kind}_tried"]:
            lines.append(f"{kind.replace('_', ' ')}: {c[f'{kind}_tried']} tried, {c[f'{kind}_imported']} imported, "
                         f"{c[f'{kind}_refused']} refused with a PlacetuneError, {c[f'{kind}_crashed']} crashed")
    if c["plans_tried"]:
        lines.append(f"bad plan files: {c['plans_tried']} tried, {c['plans_refused']} refused with a clear error, "
                     f"{c['plans_crashed']} crashed")
    return lines + list(NOTES)


def fork_cli(argv: list[str], log: Path, *, ack: Path | None = None, fsize_limit: int | None = None,
             measure_delay: float = 0.0) -> int:
    """Fork a child that runs ``placetune <argv>``; returns its pid.

    Args:
        argv: the command line after ``placetune``.
        log: the child's stdout and stderr.
        ack: append ``<measurement id> <requested key>`` after each stored measurement.
        fsize_limit: ``RLIMIT_FSIZE`` in bytes (SIGXFSZ ignored: writes fail with EFBIG).
        measure_delay: seconds added to every simulated measurement.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    rc = 99
    try:  # the child: never returns into pytest
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        sys.stdout = sys.stderr = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        from placetune.backends.simulate.simulator import SimulatedJetson
        from placetune.cli.main import main
        from placetune.tuning.evaluator import Evaluator

        if measure_delay:
            measure = SimulatedJetson.measure

            def slow(self, *a, **kw):  # type: ignore[no-untyped-def]
                time.sleep(measure_delay)
                return measure(self, *a, **kw)

            SimulatedJetson.measure = slow  # type: ignore[method-assign]
        if ack is not None:
            out = open(ack, "a", buffering=1)  # noqa: SIM115
            init = Evaluator.__init__

            def init_with_ack(self, *a, **kw):  # type: ignore[no-untyped-def]
                init(self, *a, **kw)

                def note(placement, m):  # type: ignore[no-untyped-def]
                    if not m.extra.get("cache_hit") and m.extra.get("_id") is not None:
                        out.write(f"{m.extra['_id']} {m.extra.get('requested_key', '')}\n")

                self.add_callback(note)

            Evaluator.__init__ = init_with_ack  # type: ignore[method-assign]
        if fsize_limit is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize_limit, fsize_limit))
        rc = main(argv)
    except BaseException:  # noqa: BLE001 - a crash is reported through the exit code and the log
        traceback.print_exc()
        rc = 98
    finally:
        try:
            sys.stdout.flush()
        except BaseException:  # noqa: BLE001
            pass
        os._exit(rc)


def wait(pid: int, timeout: float = 120.0) -> int:
    """Wait for a forked child; its exit code, or ``-signal`` when killed."""
    end = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > end:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise TimeoutError(f"child {pid} still running after {timeout} s")
        time.sleep(0.01)


def acked(path: Path) -> dict[int, str]:
    """Measurement ids the child reported as stored (a torn last line is ignored)."""
    if not path.exists():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit():
            out[int(parts[0])] = parts[1]
    return out


def check_sqlite(db: Path) -> dict[str, object]:
    """Open a placetune SQLite database after a fault and check every row.

    Returns:
        ``{"ids": set of measurement ids, "requests": n, "partial": [problems]}``.

    Raises:
        AssertionError: the file is not a sound SQLite database.
    """
    con = sqlite3.connect(db)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert con.execute("PRAGMA foreign_key_check").fetchall() == []
        partial = []
        ids = set()
        for mid, status, samples, payload, median, key in con.execute(
                "SELECT id, status, latency_samples, payload, median_ms, placement_key FROM pt_measurements"):
            ids.add(mid)
            try:
                json.loads(samples)
                json.loads(payload)
            except (TypeError, ValueError):
                partial.append(f"measurement {mid}: undecodable JSON")
            if not status or not key or (status == "ok" and median is None):
                partial.append(f"measurement {mid}: incomplete row")
        orphans = con.execute(
            "SELECT count(*) FROM pt_requests r LEFT JOIN pt_measurements m ON m.id = r.measurement_id "
            "WHERE m.id IS NULL").fetchone()[0]
        if orphans:
            partial.append(f"{orphans} requests without their measurement")
        requests = con.execute("SELECT count(*) FROM pt_requests").fetchone()[0]
        dupes = con.execute("SELECT count(*) - count(DISTINCT placement_key) FROM pt_measurements").fetchone()[0]
        if dupes:
            partial.append(f"{dupes} placements measured twice")
    finally:
        con.close()
    return {"ids": ids, "requests": requests, "partial": partial}
