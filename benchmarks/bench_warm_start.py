"""The optuna agent's warm start: importing a study's stored measurements as Optuna trials.

A study of ``--stored`` random evaluations (resnet50, engine mode, fusion units: 100+ parameters
a trial) is measured into a fresh SQLite file; then the ``optuna`` agent starts a second study of
the same cache scope with a budget of one evaluation, once importing with ``Study.add_trials``
(Optuna's per-trial, per-parameter writes) and once with the rows written straight into Optuna's
tables in one transaction (placetune's writer), each on a copy of the same database. Prints the
seconds of each import and the ratio. Everything is simulated.

    python benchmarks/bench_warm_start.py [--stored 500]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import optuna  # noqa: E402

from placetune.tuning import optuna_study  # noqa: E402
from placetune.tuning.evaluator import Evaluator  # noqa: E402
from search import Budget, get_agent  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.WARNING)


def warm_start(db: Path, direct: bool) -> tuple[float, int]:
    """Seconds the optuna agent's import took, and the trials it imported."""
    ev = Evaluator("resnet50", "orin-agx", mode="engine", precision="int8", store=str(db), study="second")
    agent = get_agent("optuna", seed=0, granularity="fusion")
    study = agent.study(ev)
    saved = optuna_study._trial_rows
    if not direct:
        optuna_study._trial_rows = lambda s: None  # the add_trials path
    try:
        t0 = time.perf_counter()
        n = agent._import(study, ev, ev.space("fusion"))
        return time.perf_counter() - t0, n
    finally:
        optuna_study._trial_rows = saved
        ev.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stored", type=int, default=500)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "first.db"
        ev = Evaluator("resnet50", "orin-agx", mode="engine", precision="int8", store=str(src), study="first")
        get_agent("random", seed=0, granularity="fusion").run(ev, Budget(evaluations=args.stored))
        ev.close()
        times = {}
        for label, direct in (("Study.add_trials", False), ("rows in one transaction", True)):
            db = Path(tmp) / f"{int(direct)}.db"
            shutil.copy(src, db)
            secs, n = warm_start(db, direct)
            times[label] = secs
            print(f"{label:>24}: {n} trials imported in {secs:.2f} s ({1000 * secs / max(n, 1):.2f} ms a trial)")
    a, b = times.values()
    print(f"ratio: {a / b:.1f}x faster (simulated measurements; timings of placetune's own Python on this machine)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
