"""The trials of an evaluator on their way to the store and the Optuna study: written at once, or in batches.

Every evaluation becomes rows of the store (a measurement and its request, or a request
answered by a stored measurement) and, when the study keeps one, an Optuna trial. By default
each evaluation is written in a transaction of its own before
:meth:`~placetune.tuning.evaluator.Evaluator.evaluate` returns: a measurement from a real Jetson
(minutes of engine build) is durable the moment it is made. A simulated Jetson answers in a
millisecond, and a transaction per evaluation cost more than the simulator; after
:meth:`TrialLog.batch` the evaluations wait in this process and are written together, the
store's rows and the Optuna trials in one transaction:

* when ``trials`` evaluations wait, or the oldest has waited ``seconds``, checked at each new one;
* whenever :meth:`TrialLog.flush` is called: by the agent between rounds, by
  :meth:`Evaluator.best() <placetune.tuning.evaluator.Evaluator.best>` and
  :meth:`~placetune.tuning.evaluator.Evaluator.remeasure` (they read the store), by
  ``placetune tune`` when its agent stops (budget spent, Ctrl-C, SIGTERM, an error) and
  before it reports, and by :meth:`~placetune.tuning.evaluator.Evaluator.close`;
* at interpreter exit, for an evaluator nobody closed.

Callbacks (:meth:`~placetune.tuning.evaluator.Evaluator.add_callback`: progress lines, logs)
see an evaluation once it is written, with its measurement id: what a progress line shows is
stored. A process killed with SIGKILL loses the evaluations not yet written (at most one
batch), never a part of one; resuming the study measures them again.
"""

from __future__ import annotations

import atexit
import logging
import math
import numbers
import time
import weakref
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, Union

from placetune.errors import ConfigError
from placetune.store.batch import PendingMeasurement, PendingRequest

if TYPE_CHECKING:
    import sqlite3

    from sqlalchemy import Connection

    from placetune.measurement import Measurement
    from placetune.placement.placement import Placement
    from placetune.tuning.evaluator_view import EvaluatorView

__all__ = ["LoggedTrial", "TrialLog", "TrialSink", "DEFAULT_BATCH_TRIALS", "DEFAULT_BATCH_SECONDS"]

log = logging.getLogger(__name__)

#: Evaluations written together by a batched trial log (``placetune tune`` on a simulated backend).
DEFAULT_BATCH_TRIALS = 4
#: The longest an evaluation waits in a batched trial log, checked at each new evaluation.
DEFAULT_BATCH_SECONDS = 1.0


@dataclass(eq=False)
class LoggedTrial:
    """One evaluation in the log.

    Attributes:
        placement: the placement asked for.
        answer: what :meth:`Evaluator.evaluate` returned (the callbacks get the same object).
        stored: the evaluator's own copy of the measurement (None for a cache hit).
        row: the store's pending rows (None when they are already written: a re-measurement).
        started: when the evaluation began (local time, as Optuna keeps it).
        finished: when its answer was ready.
        agent: the agent that asked.
    """

    placement: "Placement"
    answer: "Measurement"
    stored: "Measurement | None"
    row: Union[PendingMeasurement, PendingRequest, None]
    started: datetime
    finished: datetime
    agent: str | None


class TrialSink(Protocol):
    """What else is written with a batch (the study's Optuna trials: :class:`placetune.tuning.optuna_study.OptunaStudy`)."""

    def write(self, conn: "Connection | sqlite3.Connection", trials: list[LoggedTrial]) -> None:
        """Write the batch's rows in the store's transaction (``conn``), once its ids are known."""

    def written(self, trials: list[LoggedTrial]) -> None:
        """After the transaction committed (what cannot be written in it)."""


class TrialLog:
    """An evaluator's evaluations on their way to the store and its sinks (see the module docstring).

    Args:
        evaluator: the evaluator whose store, study and callbacks are used.
    """

    def __init__(self, evaluator: "EvaluatorView") -> None:
        self.evaluator = evaluator
        self.sinks: list[TrialSink] = []
        self.pending: list[LoggedTrial] = []
        self.batch_trials = 1  # 1: every evaluation written at once
        self.batch_seconds = 0.0
        self._waiting: dict[str, PendingMeasurement] = {}  # realised key -> its measurement, not written yet
        self._oldest = 0.0
        self._atexit = False

    # ------------------------------------------------------------------ policy
    @property
    def batched(self) -> bool:
        """True when evaluations wait to be written together."""
        return self.batch_trials > 1

    def batch(self, trials: int = DEFAULT_BATCH_TRIALS, seconds: float = DEFAULT_BATCH_SECONDS,
              at_once: bool = False) -> None:
        """Write evaluations in batches of ``trials``, none waiting more than ``seconds``
        (checked at each new evaluation); ``trials=1`` writes each at once again, and so does
        ``at_once`` (a fleet worker), once ``trials`` and ``seconds`` are checked.

        Raises:
            ConfigError: ``trials`` not an integer >= 1 or ``seconds`` not a finite number >= 0.
        """
        if isinstance(trials, bool) or not isinstance(trials, numbers.Integral) or trials < 1:
            raise ConfigError(f"write_in_batches: trials must be an integer >= 1, got {str(trials)[:40]!r}")
        if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real) or not 0 <= seconds < math.inf:
            raise ConfigError(f"write_in_batches: seconds must be a finite number >= 0, got {str(seconds)[:40]!r}")
        trials = 1 if at_once else trials
        self.flush()
        self.batch_trials, self.batch_seconds = int(trials), float(seconds)
        if self.batched and not self._atexit:  # an evaluator nobody closed: written at interpreter exit
            ref = weakref.ref(self)
            atexit.register(_flush_at_exit, ref)
            self._atexit = True

    # ------------------------------------------------------------------ adding
    def measured(self, placement: "Placement", stored: "Measurement", answer: "Measurement", key: str,
                 agent: str | None, trial_number: int | None, started: datetime) -> None:
        """A new measurement: its rows, then its trial (written now, or with its batch)."""
        ev = self.evaluator
        finished = datetime.now()  # the measurement is ready; encoding its rows is the store's time
        row = ev.store.pending_measurement(ev.study, placement.key, key, stored, agent, trial_number)
        self._waiting[key] = row
        self._add(LoggedTrial(placement, answer, stored, row, started, finished, agent))

    def replaced(self, placement: "Placement", stored: "Measurement", answer: "Measurement", key: str,
                 agent: str | None, trial_number: int | None, started: datetime) -> None:
        """A new measurement of a placement whose stored one was taken under other clocks
        (:func:`~placetune.tuning.remeasure.measured_again`): the stored row is rewritten with it, as a
        re-measurement rewrites it (:meth:`Store.update_measurement
        <placetune.store.measurements.MeasurementsMixin.update_measurement>`), its request is logged
        (``cache_hit`` false), then its trial (a new one; the first attempt's trial stays)."""
        ev = self.evaluator
        self.flush()  # the untrusted row may still wait in this log
        mid = ev.store.rewrite(ev.study, placement.key, key, stored, agent, trial_number)
        if mid is None:  # no longer stored: a new row
            self.measured(placement, stored, answer, key, agent, trial_number, started)
            return
        stored.extra["_id"] = answer.extra["_id"] = mid
        self.stored(placement, answer, started, agent)

    def hit(self, placement: "Placement", answer: "Measurement", key: str, cached: "Measurement",
            agent: str | None, trial_number: int | None, started: datetime) -> None:
        """A request answered by a known measurement (stored, or waiting in this log)."""
        ev = self.evaluator
        finished = datetime.now()
        mid = cached.extra.get("_id")
        by: int | PendingMeasurement | None = self._waiting.get(key) if mid is None else int(mid)
        row = ev.store.pending_request(ev.study, placement.key, key, by, agent, trial_number, True)
        self._add(LoggedTrial(placement, answer, None, row, started, finished, agent))

    def stored(self, placement: "Placement", answer: "Measurement", started: datetime, agent: str | None) -> None:
        """An evaluation whose rows are already written (a re-measurement): its trial and callbacks only."""
        self._add(LoggedTrial(placement, answer, None, None, started, datetime.now(), agent))
        self.flush()

    def _add(self, trial: LoggedTrial) -> None:
        if not self.pending:
            self._oldest = time.monotonic()
        self.pending.append(trial)
        if len(self.pending) >= self.batch_trials or time.monotonic() - self._oldest >= self.batch_seconds:
            self.flush()

    # ------------------------------------------------------------------ writing
    def flush(self) -> None:
        """Write every waiting evaluation (one transaction), then call the callbacks in order.

        Raises:
            StoreError: a database problem: nothing of the batch is written, and it stays
                waiting (the next flush tries again).
        """
        batch = self.pending
        if not batch:
            return
        rows = [t.row for t in batch if t.row is not None]

        def also(conn: Any) -> None:  # in the store's transaction, once the rows have their ids
            _set_ids(batch)
            for sink in self.sinks:
                sink.write(conn, batch)

        try:
            self.evaluator.store.write_batch(rows, also=also)
        except BaseException:
            for t in batch:  # ids of rows that were not written
                if t.row is not None:
                    t.answer.extra.pop("_id", None)
                    if t.stored is not None:
                        t.stored.extra.pop("_id", None)
            raise
        self.pending = []
        self._waiting.clear()
        for sink in self.sinks:
            sink.written(batch)
        for t in batch:
            self.evaluator.notify_callbacks(t.placement, t.answer)


def _set_ids(batch: list[LoggedTrial]) -> None:
    """The measurement id of each written evaluation, on its answer (and the evaluator's copy)."""
    for t in batch:
        row = t.row
        if isinstance(row, PendingMeasurement):
            mid = row.id
        elif isinstance(row, PendingRequest):
            mid = row.answer.id if isinstance(row.answer, PendingMeasurement) else row.answer
        else:
            continue
        if mid is None:  # a cache hit found by its key: the id is that of its request's measurement
            continue
        t.answer.extra["_id"] = mid
        if t.stored is not None:
            t.stored.extra["_id"] = mid


def _flush_at_exit(ref: "weakref.ref[TrialLog]") -> None:
    trial_log = ref()
    if trial_log is None or not trial_log.pending:
        return
    try:
        trial_log.flush()
    except Exception as exc:  # noqa: BLE001 - at exit: say it, do not raise
        log.error("%d evaluations were not written at exit: %s", len(trial_log.pending), exc)
