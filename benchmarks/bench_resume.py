"""How long ``placetune tune`` takes to resume a study that already holds N evaluations.

For each size N a fresh SQLite database gets a real study: ``placetune tune --agent random
--trials 10`` on the model, which writes the study, its Optuna study, its baselines and a few
measurements. Then evaluations are added, up to N stored in all (N = 1,000,000: 20 fewer, the budget
of a study being at most a million trials), straight into the store's own tables, inside
SQLite (``INSERT ... SELECT`` over a counter, about 10 s per 100,000 evaluations here): each one a
``pt_measurements`` row copied from the study's last measured row under a key of its own, its
``pt_requests`` row, and its Optuna trial (the ``trials`` row, its parameters, values and user
attributes, ``measurement_id`` naming the new row), as a tune would have written them. Then the
same ``placetune tune`` command resumes the study with a budget of ``--extra`` more trials, in a
subprocess, and the wall time of that command is printed (its import and start-up included:
the ``N = 0`` line is a study of only the first 10 trials).

The copied rows repeat one measurement's figures under new keys (a seed-block study has only
243 placements): what is timed is the reading, checking and counting of N stored rows, which is
what a resume does with them; no figure of the copies is compared with a real one.

    python benchmarks/bench_resume.py [--sizes 10000,100000,300000,1000000] [--extra 20]
        [--model seed-block] [--agent random] [--profile DIR] [--keep DIR]

``--profile DIR`` writes a cProfile of each resume to ``DIR/resume-N.prof``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEED_TRIALS = 10
MAX_TRIALS = 1_000_000  # the largest budget a study takes


def _tune(db: Path, model: str, agent: str, trials: int, profile: Path | None = None) -> float:
    """Run ``placetune tune`` on ``db`` in a subprocess; its wall time in seconds."""
    cmd = [sys.executable]
    if profile is not None:
        cmd += ["-m", "cProfile", "-o", str(profile)]
    cmd += ["-m", "placetune.cli", "tune", "--model", model, "--agent", agent, "--trials", str(trials),
            "--storage", str(db), "--study", "bench", "--export", str(db.with_suffix(".plan.json"))]
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=db.parent, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"placetune tune failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return seconds


def _fill(db: Path, n: int) -> None:
    """Add ``n`` evaluations to the study ``bench`` (see the module docstring), in one transaction."""
    if n <= 0:
        return
    con = sqlite3.connect(db, isolation_level=None)
    try:
        con.execute("BEGIN IMMEDIATE")
        mid, study_id = con.execute("SELECT MAX(id), MIN(study_id) FROM pt_measurements").fetchone()
        base_m = mid
        cols = [r[1] for r in con.execute("PRAGMA table_info(pt_measurements)") if r[1] != "id"]
        sub = {"placement_key": "printf('bench%035d', c.i)", "requested_key": "printf('bench%035d', c.i)",
               "trial_number": "c.i"}
        select = ", ".join(sub.get(c, f"t.{c}") for c in cols)
        counter = f"WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < {n}) "
        con.execute(f"INSERT INTO pt_measurements (id, {', '.join(cols)}) {counter}"
                    f"SELECT {base_m} + c.i, {select} FROM c, pt_measurements t WHERE t.id = {mid}")
        con.execute(f"INSERT INTO pt_requests (study_id, requested_key, placement_key, measurement_id, agent, "
                    f"trial_number, cache_hit, created_at) SELECT study_id, requested_key, placement_key, id, "
                    f"'random', trial_number, 0, created_at FROM pt_measurements WHERE id > {base_m}")
        # the Optuna trial of the template measurement, copied once per new measurement
        tid = con.execute("SELECT trial_id FROM trial_user_attributes WHERE key = 'measurement_id' AND "
                          "value_json = ?", (str(mid),)).fetchone()[0]
        ostudy, number = con.execute("SELECT study_id, (SELECT MAX(number) FROM trials WHERE study_id = t.study_id) "
                                     "FROM trials t WHERE trial_id = ?", (tid,)).fetchone()
        base_t = con.execute("SELECT MAX(trial_id) FROM trials").fetchone()[0]
        con.execute(f"INSERT INTO trials (trial_id, number, study_id, state, datetime_start, datetime_complete) "
                    f"{counter}SELECT {base_t} + c.i, {number} + c.i, study_id, state, datetime_start, "
                    f"datetime_complete FROM c, trials t WHERE t.trial_id = {tid}")
        for table, cols_t in (("trial_params", "param_name, param_value, distribution_json"),
                              ("trial_values", "objective, value, value_type"),
                              ("trial_system_attributes", "key, value_json")):
            con.execute(f"INSERT INTO {table} (trial_id, {cols_t}) {counter}SELECT {base_t} + c.i, {cols_t} "
                        f"FROM c, {table} t WHERE t.trial_id = {tid}")
        con.execute(f"INSERT INTO trial_user_attributes (trial_id, key, value_json) {counter}"
                    f"SELECT {base_t} + c.i, key, CASE key WHEN 'measurement_id' THEN CAST({base_m} + c.i AS TEXT) "
                    f"WHEN 'agent' THEN '\"random\"' ELSE value_json END FROM c, trial_user_attributes t "
                    f"WHERE t.trial_id = {tid}")
        assert ostudy and study_id
        con.execute("COMMIT")
    finally:
        con.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,300000,1000000",
                    help="stored evaluations per database, comma-separated (0: the seed study alone)")
    ap.add_argument("--extra", type=int, default=20, help="trials the resumed run adds")
    ap.add_argument("--model", default="seed-block")
    ap.add_argument("--agent", default="random")
    ap.add_argument("--profile", type=Path, help="write a cProfile of each resume into this folder")
    ap.add_argument("--keep", type=Path, help="keep the databases in this folder (default: a temporary one)")
    args = ap.parse_args()
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    tmp = Path(tempfile.mkdtemp(prefix="bench-resume-")) if args.keep is None else args.keep
    tmp.mkdir(parents=True, exist_ok=True)
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    print(f"model {args.model}, agent {args.agent}, resume adds {args.extra} trials; databases in {tmp}")
    print(f"{'N stored':>10} {'fill s':>8} {'DB MB':>8} {'resume s':>9} {'us / stored row':>16}")
    try:
        for n in sizes:
            db = tmp / f"resume-{n}.db"
            for p in tmp.glob(f"resume-{n}.*"):
                p.unlink()
            _tune(db, args.model, args.agent, SEED_TRIALS)
            # a study's budget is at most 1,000,000 trials: the largest size stores that many less the resume's
            added = max(0, min(n - SEED_TRIALS, MAX_TRIALS - SEED_TRIALS - args.extra)) if n else 0
            t0 = time.perf_counter()
            _fill(db, added)
            fill = time.perf_counter() - t0
            size = sum(p.stat().st_size for p in tmp.glob(f"resume-{n}.db*")) / 1e6
            prof = args.profile / f"resume-{n}.prof" if args.profile else None
            seconds = _tune(db, args.model, args.agent, SEED_TRIALS + added + args.extra, prof)
            n = SEED_TRIALS + added if n else 0
            per = f"{seconds / n * 1e6:16.1f}" if n else f"{'-':>16}"
            print(f"{n:>10,} {fill:8.1f} {size:8.0f} {seconds:9.2f} {per}", flush=True)
            if args.keep is None:
                for p in tmp.glob(f"resume-{n}.*"):
                    p.unlink()
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
