"""The trial gate of a fleet: every worker asks for trials, and the fleet runs exactly the study's budget."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
import warnings

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from placetune.tuning.fleet_locks import lock_key
from placetune.tuning.fleet_worker import FleetOptions, worker_id
from placetune._lazy import lazy_import

if TYPE_CHECKING:
    import optuna

    from placetune.store.store import Store

if TYPE_CHECKING:
    import optuna.trial as optuna_trial
else:
    optuna = lazy_import("optuna")
    optuna_trial = lazy_import("optuna.trial")

__all__ = ["fleet_trial_counts", "TrialGate"]

log = logging.getLogger(__name__)


def fleet_trial_counts(study: "optuna.Study") -> dict[str, int]:
    """Trials of a fleet study by state; ``complete`` counts finished trials (COMPLETE, and
    PRUNED: a placement that failed) except imported warm-start ones and repeats (a proposal the
    optuna agent answered from an earlier trial, nothing built): the study's requests, as one
    machine's budget counts them.

    Returns:
        ``{"complete", "running", "waiting", "failed", "imported", "repeats"}`` counts.
    """
    out = {"complete": 0, "running": 0, "waiting": 0, "failed": 0, "imported": 0, "repeats": 0}
    for t in study.get_trials(deepcopy=False):
        if t.state in (optuna_trial.TrialState.COMPLETE, optuna_trial.TrialState.PRUNED):
            if t.user_attrs.get("imported"):
                out["imported"] += 1
            elif t.user_attrs.get("repeat"):
                out["repeats"] += 1
            else:
                out["complete"] += 1
        elif t.state == optuna_trial.TrialState.RUNNING:
            out["running"] += 1
        elif t.state == optuna_trial.TrialState.WAITING:
            out["waiting"] += 1
        elif t.state == optuna_trial.TrialState.FAIL:
            out["failed"] += 1
    return out


class TrialGate:
    """Makes the fleet run exactly the study's budget of trials.

    Before each new trial a worker takes a database advisory lock, counts the study's
    finished (COMPLETE or PRUNED, not imported, not repeats: :func:`fleet_trial_counts`) and RUNNING trials, and asks for a trial only while
    they are below the budget; the lock is released once the new trial is RUNNING and
    its parameters are stored (so the next worker's constant-liar TPE sees them). When
    the budget is covered but not finished (trials still running), the worker waits:
    running trials finish, or a dead worker's trial goes stale, is failed and re-queued
    (Optuna's heartbeat) and this worker runs it.

    The hooks are called by :class:`search.optuna_search.OptunaAgent` (its ``coordinator``).

    Args:
        store: the shared store (its engine opens the lock connection).
        budget: trials of the study, for the whole fleet.
        worker: this worker's id (stored as the ``worker`` user attribute of its trials).
        options: polling.
        deadline: ``time.monotonic()`` after which the worker stops (``--timeout``), or None.
        stop: returns True when the worker must stop (Ctrl-C).
    """

    def __init__(self, store: "Store", budget: int, worker: str | None = None,
                 options: FleetOptions | None = None, deadline: float | None = None,
                 stop: Callable[[], bool] | None = None) -> None:
        self.store = store
        self.budget = int(budget)
        self.worker = worker or worker_id()
        self.options = options or FleetOptions()
        self.deadline = deadline
        self.stop = stop or (lambda: False)
        self._conn: Any = None
        self._key: int | None = None
        self.started = 0  # trials this worker started
        self.waited_s = 0.0
        self.counts: dict[str, int] = {}

    # ------------------------------------------------------------ the lock
    def _acquire(self, name: str) -> None:
        if self._conn is not None:
            return
        dialect = self.store.dialect
        if dialect not in ("postgresql", "mysql", "mariadb"):
            return  # no advisory locks: the budget may be exceeded by (workers - 1) trials
        key = lock_key("placetune-gate:" + name)
        conn = self.store.engine.connect()
        try:
            while True:
                if dialect == "postgresql":
                    got = conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar()
                else:
                    got = conn.execute(text("SELECT GET_LOCK(:n, 0)"), {"n": f"pt{key}"}).scalar() == 1
                conn.commit()
                if got:
                    break
                if self.stop():
                    raise _Stop()
                time.sleep(0.02)
        except BaseException:
            conn.close()
            raise
        self._conn, self._key = conn, key

    def release(self) -> None:
        """Release the lock if held (end of a run, errors); safe to call twice."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            if self.store.dialect == "postgresql":
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": self._key})
            else:
                conn.execute(text("SELECT RELEASE_LOCK(:n)"), {"n": f"pt{self._key}"})
            conn.commit()
        except SQLAlchemyError as exc:  # closing the connection releases it anyway
            log.debug("advisory unlock: %s", exc)
        finally:
            conn.close()

    def hold(self, name: str) -> None:
        """Take the lock early (serialises the workers' study set-up: warm start, enqueues)."""
        try:
            self._acquire(name)
        except _Stop:
            pass

    # ------------------------------------------------------------ agent hooks
    def before_optimize(self, study: "optuna.Study") -> bool:
        """Called before the first trial: True to start (the lock is then held)."""
        return self._may_ask(study)

    def after_trial(self, study: "optuna.Study", trial: "optuna.trial.FrozenTrial") -> bool:
        """Called after each trial: True to ask for another one (the lock is then held)."""
        return self._may_ask(study)

    def trial_started(self, study: "optuna.Study", trial: "optuna.Trial") -> None:
        """Called once a trial is RUNNING with its parameters stored: label it, release the lock."""
        self.started += 1
        try:
            trial.set_user_attr("worker", self.worker)
        finally:
            self.release()

    def may_start(self, study: "optuna.Study", *, wait: bool = True) -> bool:
        """Before each trial of an agent the study drives step by step (:mod:`placetune.tuning.fleet_steps`):
        True to start one (the lock is then held until :meth:`trial_started`). ``wait=False``: False
        at once when running trials cover the budget (the worker's own, not measured yet, among them)."""
        return self._may_ask(study, wait=wait)

    def _may_ask(self, study: "optuna.Study", wait: bool = True) -> bool:
        t0 = time.monotonic()
        try:
            while True:
                if self.stop() or (self.deadline is not None and time.monotonic() >= self.deadline):
                    self.release()
                    return False
                self._acquire(study.study_name)
                c = self.counts = fleet_trial_counts(study)
                if c["complete"] >= self.budget:
                    self.release()
                    return False
                if c["complete"] + c["running"] < self.budget:
                    return True  # keep the lock until the next trial is RUNNING
                # the budget is covered by running trials: wait for them (or for a dead
                # worker's trial to go stale, be failed and re-queued)
                self.release()
                if not wait:
                    return False
                time.sleep(self.options.poll_seconds)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                    optuna.storages.fail_stale_trials(study)
        except _Stop:
            return False
        finally:
            self.waited_s += time.monotonic() - t0


class _Stop(Exception):
    """Internal: a stop was requested while waiting for the gate."""
