"""Batched writes: the rows of many evaluations in one transaction (how simulated studies are written).

A simulated Jetson answers in about a millisecond, and one transaction per evaluation costs
as much again. :meth:`BatchMixin.pending_measurement` and :meth:`BatchMixin.pending_request`
encode an evaluation's rows the moment it is made (same rows, same ``created_at`` as
:meth:`~placetune.store.measurements.MeasurementsMixin.record` and
:meth:`~placetune.store.measurements.MeasurementsMixin.record_request` would write);
:meth:`BatchMixin.write_batch` writes a list of them, in order, in one transaction, together
with whatever else the caller writes in it (the Optuna trials of the same evaluations).
Until then they live only in this process: a killed process loses them, never a part of one.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Union

from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError

from placetune.errors import StoreError
from placetune.measurement import Measurement
from placetune.store.measurements import MeasurementsMixin, UnseenConflict
from placetune.store.records import StudyRecord
from placetune.store.schema import utcnow

__all__ = ["BatchMixin", "PendingMeasurement", "PendingRequest"]

log = logging.getLogger(__name__)


@dataclass(eq=False)
class PendingMeasurement:
    """A measurement and its request, encoded and waiting to be written.

    Attributes:
        study: the study that asked.
        key: the cache key (scope and realised placement key).
        row: the ``pt_measurements`` row (``created_at``: when it was measured).
        entry: the columns and JSON texts the LRU keeps once the row is written.
        id: the ``pt_measurements`` id once written (the stored one when another writer was first).
    """

    study: StudyRecord
    key: tuple[str, str, str, str]
    row: dict[str, Any]
    entry: tuple[dict[str, Any], dict[str, Any]]
    id: int | None = None
    inserted: bool = False


@dataclass(eq=False)
class PendingRequest:
    """A request answered by a stored (or pending) measurement, waiting to be written.

    Attributes:
        study: the study that asked.
        requested_key: key of the placement asked for.
        placement_key: key of the realised placement that answered.
        answer: the answering measurement's id, the pending measurement that answers it, or None
            (found by ``placement_key`` in the study's scope when written).
        agent: the agent's name, if any.
        trial_number: the agent's trial number, if any.
        cache_hit: True when answered without measuring.
        created_at: when it was asked.
        id: the ``pt_requests`` id once written.
    """

    study: StudyRecord
    requested_key: str
    placement_key: str
    answer: Union[int, PendingMeasurement, None]
    agent: str | None
    trial_number: int | None
    cache_hit: bool
    created_at: datetime
    id: int | None = None


Pending = Union[PendingMeasurement, PendingRequest]


class BatchMixin(MeasurementsMixin):
    """Batched writes of a :class:`~placetune.store.store.Store` (see the module docstring)."""

    def pending_measurement(self, study: StudyRecord | str, requested_key: str, placement_key: str,
                            measurement: Measurement, agent: str | None = None,
                            trial_number: int | None = None) -> PendingMeasurement:
        """:meth:`record`'s rows, encoded now and written by :meth:`write_batch`.

        Raises:
            ConfigError: the measurement's simulated flag differs from the study's, or it is not JSON.
        """
        st = self._resolve(study)
        key, row, cols, texts = self._measurement_row(st, requested_key, placement_key, measurement, agent,
                                                      trial_number)
        row["created_at"] = utcnow()
        return PendingMeasurement(st, key, row, (cols, texts))

    def pending_request(self, study: StudyRecord | str, requested_key: str, placement_key: str,
                        answer: int | PendingMeasurement | None, agent: str | None = None,
                        trial_number: int | None = None, cache_hit: bool = True) -> PendingRequest:
        """:meth:`record_request`'s row, written by :meth:`write_batch`; ``answer`` may be a
        measurement written earlier in the same batch."""
        return PendingRequest(self._resolve(study), requested_key, placement_key, answer, agent, trial_number,
                              bool(cache_hit), utcnow())

    def write_batch(self, items: Sequence[Pending], also: Callable[[Connection | sqlite3.Connection], None]
                    | None = None) -> None:
        """Write pending rows in order, in one transaction, and set their ids.

        Args:
            items: from :meth:`pending_measurement` and :meth:`pending_request`; a request answered
                by a pending measurement comes after it (in this batch or an earlier one).
            also: called with the transaction's connection after the rows (more rows to write
                atomically with them); it may be called again if the transaction is retried.

        Raises:
            StoreError: a database problem; nothing of the batch is written, and the items may be
                written again.
        """
        if not items and also is None:
            return
        action = f"recording {len(items)} evaluation{'s' if len(items) != 1 else ''}"
        for attempt in range(3):
            try:
                with self._write_txn(action) as conn:
                    for item in items:
                        self._write_pending(conn, item)
                    if also is not None:
                        also(conn)
                break
            except (IntegrityError, sqlite3.IntegrityError, UnseenConflict) as exc:  # lost a race on a unique key
                for item in items:
                    item.id = None
                if attempt == 2:
                    if isinstance(exc, UnseenConflict):
                        raise StoreError(f"{action}: a placement is stored by another writer but cannot be "
                                         "read") from None
                    raise self.database_error(exc, action) from None
                log.debug("unique-key race while %s; writing again", action)
            except BaseException:
                for item in items:
                    item.id = None
                raise
        for item in items:
            if isinstance(item, PendingMeasurement) and item.inserted:
                self._remember(item.key, item.id, *item.entry)  # type: ignore[arg-type]

    def _write_pending(self, conn: Connection | sqlite3.Connection, item: Pending) -> None:
        if isinstance(item, PendingMeasurement):
            st, row = item.study, item.row
            item.id, item.inserted = self._record_rows(conn, item.key, row, st, row["requested_key"], row["agent"],
                                                       row["trial_number"])
            return
        answer = item.answer
        if isinstance(answer, PendingMeasurement):
            if answer.id is None:
                raise StoreError(f"a request of study {item.study.name!r} is answered by a measurement that "
                                 "was not written before it")
            mid: int | None = answer.id
        else:
            mid = answer
        if mid is None:
            mid = self._existing_id(conn, (*item.study.scope, item.placement_key))
            if mid is None:
                raise StoreError(f"no stored measurement of placement {item.placement_key} in the scope of study "
                                 f"{item.study.name!r}: record() the measurement before logging requests for it")
        item.id = self._insert_request(conn, item.study, item.requested_key, item.placement_key, mid, item.agent,
                                       item.trial_number, item.cache_hit, item.created_at)
