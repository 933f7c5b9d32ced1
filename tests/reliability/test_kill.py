"""SIGKILL a single-machine tuner at random points: the database opens, no row is partial or lost,
and running the same command again completes the budget."""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

from placetune.store.store import Store

from tests.seeds import seed as run_seed

from ._harness import COUNTS, NOTES, acked, check_sqlite, fork_cli, wait

KILLS = 20
MODEL = Path(__file__).resolve().parents[1] / "data" / "seed_model_gn.onnx.gz"
BUDGET = 300


def test_sigkill_at_random_points_loses_nothing(tmp_path):
    seed = run_seed("PLACETUNE_FAULT_SEED")
    rng = random.Random(seed)
    db = tmp_path / "kill.db"
    argv = ["tune", "--model", str(MODEL), "--mode", "engine", "--precision", "int8",
            "--agent", "random", "--granularity", "layer", "--trials", str(BUDGET), "--study", "kill",
            "--storage", f"sqlite:///{db}", "--export", str(tmp_path / "kill.plan.json")]
    ack = tmp_path / "ack.txt"
    seen: set[int] = set()
    lost: set[int] = set()
    problems: list[str] = []
    where = []
    for i in range(KILLS):
        before = len(acked(ack))
        target = before + rng.randint(0, 12)  # kill after that many more stored measurements...
        delay = rng.uniform(0, 0.02)  # ...plus up to 20 ms: inside a transaction, a measurement, start-up
        pid = fork_cli(argv, tmp_path / f"run{i}.log", ack=ack)
        t_end = time.monotonic() + 30
        while len(acked(ack)) < target and time.monotonic() < t_end:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:  # finished (budget spent) before the kill point: not a fault, and not a crash
                assert os.waitstatus_to_exitcode(status) == 0, (tmp_path / f"run{i}.log").read_text()[-2000:]
                pid = 0
                break
            time.sleep(0.002)
        if pid:
            time.sleep(delay)
            os.kill(pid, signal.SIGKILL)
            rc = wait(pid)
            assert rc == -signal.SIGKILL, (tmp_path / f"run{i}.log").read_text()[-2000:]
            COUNTS["faults"] += 1
            COUNTS["kills"] += 1
        where.append(len(acked(ack)) - before)
        if not db.exists():
            continue  # killed before the database was created
        state = check_sqlite(db)  # opens, integrity ok, no partial row
        committed = set(acked(ack)) | seen
        missing = committed - state["ids"]  # type: ignore[operator]
        lost |= missing
        problems += state["partial"]  # type: ignore[arg-type]
        seen |= state["ids"]  # type: ignore[arg-type]
        with Store(f"sqlite:///{db}") as store:  # placetune opens it too
            store.studies()
        if not missing and not state["partial"]:
            COUNTS["survived"] += 1
    COUNTS["rows_lost"] += len(lost)
    # the same command again completes the budget, measuring nothing twice
    pid = fork_cli(argv, tmp_path / "resume.log", ack=ack)
    rc = wait(pid, timeout=180)
    log = (tmp_path / "resume.log").read_text()
    assert rc == 0, log[-3000:]
    state = check_sqlite(db)
    assert not state["partial"] and not (seen - state["ids"])  # type: ignore[operator]
    with Store(f"sqlite:///{db}") as store:
        assert store.study("kill").n_requests == BUDGET
    assert (tmp_path / "kill.plan.json").exists()
    NOTES.append(f"SIGKILL suite: seed {seed}, stored measurements between kills {where}, "
                 f"{len(state['ids'])} measurements at the end")  # type: ignore[arg-type]
    assert not problems, problems
    assert not lost, f"rows lost: {sorted(lost)}"
    assert COUNTS["kills"] >= KILLS - 2  # (a run may finish before its kill point)
