"""The measurement cache: lookups (through an in-process LRU), and writes of measurements and requests.

A realised placement has one row per cache scope; re-measuring it (more builds of the same
network) rewrites that row in place (:meth:`MeasurementsMixin.update_measurement`)."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections import OrderedDict
from datetime import datetime
from dataclasses import dataclass, field
from typing import Any, ContextManager

from sqlalchemy import Connection, Text, bindparam, insert, select, type_coerce, update
from sqlalchemy.exc import IntegrityError

from placetune.errors import ConfigError, StoreError
from placetune.measurement import Measurement
from placetune.store.packing import device_map_text
from placetune.store.records import MeasurementRecord, StudyRecord
from placetune.store.rows import RECORD_COLUMNS, Entry, from_entry, measurement_record, split_measurement
from placetune.store.schema import MeasurementRow, RawJSON, RequestRow, StudyRow, dumps, utcnow
from placetune.store.studies import StudiesMixin
from sqlalchemy.dialects import sqlite

__all__ = ["MeasurementsMixin", "MeasurementLru", "UnseenConflict"]

log = logging.getLogger(__name__)

_M = MeasurementRow.__table__
_R = RequestRow.__table__
_S = StudyRow.__table__

# Statements built once (SQLAlchemy then reuses their compiled form).
_KEY_MATCH = (
    _M.c.model_hash == bindparam("k_model"),
    _M.c.fingerprint_hash == bindparam("k_fingerprint"),
    _M.c.settings_hash == bindparam("k_settings"),
    _M.c.placement_key == bindparam("k_placement"),
)
_SELECT_ID = select(_M.c.id).where(*_KEY_MATCH)
# the cache path reads the JSON columns as text: decoded here, kept as text in the LRU
_SELECT_ENTRY = select(
    _M.c.id,
    _M.c.status,
    _M.c.reason,
    _M.c.throughput_fps,
    _M.c.energy_mj,
    _M.c.build_seconds,
    _M.c.simulated,
    type_coerce(_M.c.latency_samples, Text).label("latency_samples"),
    type_coerce(_M.c.requested, Text).label("requested"),
    type_coerce(_M.c.realized, Text).label("realized"),
    type_coerce(_M.c.payload, Text).label("payload"),
).where(*_KEY_MATCH)
_INSERT_MEASUREMENT = insert(_M)
_SELECT_KEY = select(_M.c.simulated, _M.c.model_hash, _M.c.fingerprint_hash, _M.c.settings_hash,
                     _M.c.placement_key).where(_M.c.id == bindparam("m_id"))
# SQLite (3.24+): insert unless the cache key is stored, in one statement instead of a look-up and an insert
_INSERT_REQUEST = insert(_R)

# SQLite: the three statements of every evaluation as driver SQL (still through SQLAlchemy's
# connection, events and errors, without its per-statement compile-cache and bind-processing work,
# which cost more than SQLite itself), their columns taken from the table definitions.
_M_COLUMNS = tuple(c.name for c in _M.columns if c.name != "id")
_R_COLUMNS = tuple(c.name for c in _R.columns if c.name != "id")
_ENTRY_COLUMNS = tuple(c.name for c in _SELECT_ENTRY.selected_columns)
_KEY_COLUMNS = ("model_hash", "fingerprint_hash", "settings_hash", "placement_key")


def _insert_sql(table: str, columns: tuple[str, ...]) -> str:
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"


#: insert unless the cache key is stored (SQLite 3.24+): one statement instead of a look-up and an insert
_SQLITE_UPSERT = (_insert_sql(_M.name, _M_COLUMNS) + f" ON CONFLICT ({', '.join(_KEY_COLUMNS)}) DO NOTHING"
                  if sqlite3.sqlite_version_info >= (3, 24) else None)
_SQLITE_INSERT_REQUEST = _insert_sql(_R.name, _R_COLUMNS)
_SQLITE_KEY_MATCH = " AND ".join(f"{c} = ?" for c in _KEY_COLUMNS)
_SQLITE_SELECT_ENTRY = f"SELECT {', '.join(_ENTRY_COLUMNS)} FROM {_M.name} WHERE {_SQLITE_KEY_MATCH}"
_SQLITE_SELECT_ID = f"SELECT id FROM {_M.name} WHERE {_SQLITE_KEY_MATCH}"
_SQLITE_TIME = None  # UTCDateTime's bind processor for SQLite, made on first use


def _sqlite_time(value: Any) -> Any:
    global _SQLITE_TIME
    if _SQLITE_TIME is None:
        dialect = sqlite.dialect()
        _SQLITE_TIME = _M.c.created_at.type.dialect_impl(dialect).bind_processor(dialect)
    return _SQLITE_TIME(value)


class UnseenConflict(Exception):
    """A measurement row conflicts with a stored one that this transaction cannot see (another writer's,
    not committed yet when read): the writer of the transaction (:meth:`MeasurementsMixin.record`, the
    batched writes of :mod:`placetune.store.batch`) runs it again, and gives a StoreError after three tries."""


def _request_values(st: StudyRecord, requested_key: str, placement_key: str, measurement_id: int,
                    agent: str | None, trial_number: int | None, cache_hit: bool,
                    created_at: datetime | None = None) -> tuple:
    """A ``pt_requests`` row's values for :data:`_SQLITE_INSERT_REQUEST`."""
    row = {"study_id": st.id, "requested_key": requested_key, "placement_key": placement_key,
           "measurement_id": measurement_id, "agent": agent, "trial_number": trial_number,
           "cache_hit": bool(cache_hit), "created_at": _sqlite_time(created_at or utcnow())}
    return tuple(row[c] for c in _R_COLUMNS)


def _key_params(key: tuple[str, str, str, str]) -> dict[str, str]:
    return {"k_model": key[0], "k_fingerprint": key[1], "k_settings": key[2], "k_placement": key[3]}


_JSON_COLUMNS = ("latency_samples", "requested", "realized", "payload")


def _json_text(value: Any) -> str:
    """JSON text of a column value; a per-layer device map takes the fast path (same text)."""
    if type(value) is dict:
        text = device_map_text(value)
        if text is not None:
            return text
    return dumps(value)


def _encode(measurement: Measurement) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(column values, JSON texts)`` of a measurement's row: the JSON columns encoded once,
    for the database and the LRU."""
    try:
        cols, _ = split_measurement(measurement)
        texts = {name: None if cols[name] is None else RawJSON(_json_text(cols[name])) for name in _JSON_COLUMNS}
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"measurement cannot be stored as JSON: {exc}") from None
    cols.update(texts)
    return cols, texts


def _entry(mid: int, cols: dict[str, Any], texts: dict[str, Any]) -> Entry:
    """The LRU entry of a row written from :func:`_encode`'s values."""
    return (mid, cols["status"], cols["reason"], cols["throughput_fps"], cols["energy_mj"], cols["build_seconds"],
            cols["simulated"], *(None if texts[n] is None else str(texts[n]) for n in _JSON_COLUMNS))


@dataclass
class MeasurementLru:
    """Thread-safe LRU of ``scope + key -> row entry`` that the measurement lookups read first (``size`` entries at
    most; 0 keeps none); a row rewritten by this store (:meth:`MeasurementsMixin.update_measurement`) replaces its
    entry. The store makes one when it opens."""

    size: int
    data: OrderedDict[tuple[str, str, str, str], Entry] = field(default_factory=OrderedDict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, key: tuple[str, str, str, str]) -> Entry | None:
        if self.size <= 0:
            return None
        with self.lock:
            hit = self.data.get(key)
            if hit is not None:
                self.data.move_to_end(key)
            return hit

    def put(self, key: tuple[str, str, str, str], value: Entry) -> None:
        if self.size <= 0:
            return
        with self.lock:
            self.data[key] = value
            self.data.move_to_end(key)
            while len(self.data) > self.size:
                self.data.popitem(last=False)


class MeasurementsMixin(StudiesMixin):
    """The measurement cache of a :class:`~placetune.store.store.Store`: lookups and writes."""

    _lru: MeasurementLru

    def lookup(
        self, model_hash: str, fingerprint_hash: str, settings_hash: str, placement_key: str
    ) -> Measurement | None:
        """The stored measurement of a realised placement in a cache scope, or None.

        Answers from an in-process LRU when it can (this store's re-measurements replace their
        entries), else from the unique index. Each call returns a fresh object.

        Example:
            ``store.lookup(*study.scope, placement.key)``
        """
        hit = self._lookup_entry((model_hash, fingerprint_hash, settings_hash, placement_key))
        return None if hit is None else hit[1]

    def measurement_id(
        self, model_hash: str, fingerprint_hash: str, settings_hash: str, placement_key: str
    ) -> int | None:
        """The ``pt_measurements`` id of a realised placement in a cache scope (None when not stored);
        answered from the LRU when it can, like :meth:`lookup`."""
        hit = self._lookup_entry((model_hash, fingerprint_hash, settings_hash, placement_key))
        return None if hit is None else hit[0]

    def _lookup_entry(self, key: tuple[str, str, str, str]) -> tuple[int, Measurement] | None:
        entry = self._lru.get(key)
        if entry is None:
            if self.dialect == "sqlite":
                with self._sqlite_txn("looking up a measurement", begin=None) as db:  # one statement
                    row = db.execute(_SQLITE_SELECT_ENTRY, key).fetchone()
            else:
                with self.transaction("looking up a measurement") as conn:
                    row = conn.execute(_SELECT_ENTRY, _key_params(key)).first()
            if row is None:
                return None
            entry = tuple(row)
            self._lru.put(key, entry)
        return int(entry[0]), from_entry(entry)

    def lookup_requested(
        self, model_hash: str, fingerprint_hash: str, settings_hash: str, requested_key: str
    ) -> MeasurementRecord | None:
        """A measurement already made for this *requested* placement in the scope, or None.

        Lets a hardware evaluator skip an engine build whose realised placement is
        already known; ``record.placement_key`` is the realised key to log with
        :meth:`record_request`.
        """
        with self.transaction("looking up a requested placement") as conn:
            row = conn.execute(
                select(*RECORD_COLUMNS)
                .join(_S, _S.c.id == _M.c.study_id)
                .join(_R, _R.c.measurement_id == _M.c.id)
                .where(
                    _R.c.requested_key == requested_key,
                    _M.c.model_hash == model_hash,
                    _M.c.fingerprint_hash == fingerprint_hash,
                    _M.c.settings_hash == settings_hash,
                )
                .limit(1)
            ).first()
        return None if row is None else measurement_record(row)

    def cached(
        self,
        study: StudyRecord | str,
        requested_key: str,
        placement_key: str,
        *,
        agent: str | None = None,
        trial_number: int | None = None,
    ) -> Measurement | None:
        """Look up a realised placement in the study's scope; on a hit, log the request as a cache hit.

        Returns:
            The stored measurement, or None (then measure and :meth:`record` it).
        """
        st = self._resolve(study)
        hit = self._lookup_entry((*st.scope, placement_key))
        if hit is None:
            return None
        self.record_request(st, requested_key, placement_key, hit[0], agent, trial_number, cache_hit=True)
        return hit[1]

    # ------------------------------------------------------------ writes
    def record(
        self,
        study: StudyRecord | str,
        requested_key: str,
        placement_key: str,
        measurement: Measurement,
        agent: str | None = None,
        trial_number: int | None = None,
    ) -> int:
        """Store a measurement and log the request, in one transaction.

        The measurement is keyed by the study's cache scope and the *realised*
        ``placement_key``. If that key is already stored (another agent or process
        measured it first), the stored measurement is kept and its id returned.

        Args:
            study: the study (record or name) that asked.
            requested_key: key of the placement asked for.
            placement_key: key of the realised placement (the cache key).
            measurement: what the backend reported; its ``simulated`` flag must match the study's.
            agent: the agent's name, if any.
            trial_number: the agent's trial number, if any.

        Returns:
            The ``pt_measurements`` id.

        Raises:
            ConfigError: simulated flag differs from the study's.
            StoreError: database problem (read-only, locked, unreachable...).
        """
        st = self._resolve(study)
        key, row, cols, texts = self._measurement_row(st, requested_key, placement_key, measurement, agent,
                                                      trial_number)
        mid: int | None = None
        inserted = False
        action = f"recording a measurement of study {st.name!r}"
        for attempt in range(3):
            try:
                with self._write_txn(action) as conn:
                    mid, inserted = self._record_rows(conn, key, row, st, requested_key, agent, trial_number)
                break
            except (IntegrityError, sqlite3.IntegrityError, UnseenConflict) as exc:  # lost a race on the unique key
                if attempt == 2:
                    if isinstance(exc, UnseenConflict):
                        raise StoreError(f"recording a measurement of study {st.name!r}: placement "
                                         f"{placement_key} is stored by another writer but cannot be read") from None
                    raise self.database_error(exc, "recording a measurement") from None
                log.debug("unique-key race on %s; re-reading", placement_key)
        assert mid is not None
        if inserted:
            self._remember(key, mid, cols, texts)
        return mid

    @staticmethod
    def _measurement_row(st: StudyRecord, requested_key: str, placement_key: str, measurement: Measurement,
                         agent: str | None, trial_number: int | None,
                         ) -> tuple[tuple[str, str, str, str], dict[str, Any], dict[str, Any], dict[str, Any]]:
        """``(cache key, pt_measurements row, column values, JSON texts)`` of a measurement to record.

        Raises:
            ConfigError: its simulated flag differs from the study's, or it is not JSON.
        """
        if bool(measurement.simulated) != st.simulated:
            what = "a simulated measurement" if measurement.simulated else "a hardware measurement"
            raise ConfigError(
                f"refusing to store {what} in study {st.name!r} (simulated={st.simulated}): "
                "label the measurement with the study's backend or use another study"
            )
        cols, texts = _encode(measurement)
        key = (*st.scope, placement_key)
        row = {
            "study_id": st.id,
            "model_hash": key[0],
            "fingerprint_hash": key[1],
            "settings_hash": key[2],
            "placement_key": placement_key,
            "requested_key": requested_key,
            "agent": agent,
            "trial_number": trial_number,
            **cols,
        }
        return key, row, cols, texts

    def update_measurement(self, measurement_id: int, measurement: Measurement) -> None:
        """Rewrite a stored measurement in place (a re-measurement: more builds of the same placement).

        One write transaction rewrites the row's payload and its figure columns (status,
        median / p90 / p99 ms, throughput, energy, build seconds, samples, requested and
        realised maps), encoded by the code :meth:`record` uses; the row keeps its id, cache
        key, study, requested key, agent, trial number and creation time. This store's LRU
        answers the new measurement afterwards (other processes' LRUs keep the old one until
        it leaves them). Requests are not logged here: see :meth:`record_request`.

        Args:
            measurement_id: the ``pt_measurements`` id (:meth:`record`'s answer).
            measurement: the new measurement; its ``simulated`` flag must match the row's.

        Raises:
            StoreError: no such measurement, or a database problem.
            ConfigError: the simulated flag differs from the row's, or the measurement is not JSON.
        """
        mid = int(measurement_id)
        cols, texts = _encode(measurement)
        with self.transaction(f"updating measurement {mid}", write=True) as conn:
            row = conn.execute(_SELECT_KEY, {"m_id": mid}).first()
            if row is None:
                raise StoreError(f"no stored measurement with id {mid} in {self.url}: nothing to update")
            if bool(row.simulated) != bool(measurement.simulated):
                raise ConfigError(f"refusing to replace measurement {mid} (simulated={bool(row.simulated)}) by "
                                  f"one with simulated={bool(measurement.simulated)}")
            conn.execute(update(_M).where(_M.c.id == mid).values(cols))  # the columns split_measurement gives
        self._remember(tuple(row[1:]), mid, cols, texts)

    def _remember(self, key: tuple[str, str, str, str], mid: int, cols: dict[str, Any], texts: dict[str, Any]) -> None:
        """Keep a row this store has written (:func:`_encode`'s ``cols`` and ``texts``, id ``mid``) in the LRU."""
        self._lru.put(key, _entry(mid, cols, texts))

    def _write_txn(self, action: str, *,
                   one_statement: bool = False) -> ContextManager[Connection | sqlite3.Connection]:
        """A write transaction: on SQLite (3.24+) the driver connection's ``BEGIN IMMEDIATE``, or
        autocommit for ``one_statement``; else SQLAlchemy's (:meth:`transaction`)."""
        if self.dialect == "sqlite" and _SQLITE_UPSERT is not None:
            return self._sqlite_txn(action, None if one_statement else "BEGIN IMMEDIATE")
        return self.transaction(action, write=True)

    def _record_rows(self, conn: Connection | sqlite3.Connection, key: tuple[str, str, str, str],
                     row: dict[str, Any], st: StudyRecord, requested_key: str, agent: str | None,
                     trial_number: int | None) -> tuple[int, bool]:
        """:meth:`record`'s rows, in the caller's write transaction: ``(measurement id, whether
        this call inserted it)``."""
        mid = self._insert_measurement(conn, key, row)
        inserted = mid is not None
        if mid is None:
            mid = self._existing_id(conn, key)
            if mid is None:  # the conflicting row is not visible yet: read again
                raise UnseenConflict
            log.debug("placement %s already stored (id %d); the first measurement is kept", key[3], mid)
        self._insert_request(conn, st, requested_key, key[3], mid, agent, trial_number, False, row["created_at"])
        return mid, inserted

    def _insert_measurement(self, conn: Connection | sqlite3.Connection, key: tuple[str, str, str, str],
                            row: dict) -> int | None:
        """Insert a measurement row: its id, or None when its cache key is already stored."""
        row.setdefault("created_at", utcnow())  # a batched write keeps the time it was measured
        if isinstance(conn, sqlite3.Connection):  # insert unless stored, in one statement
            values = tuple(_sqlite_time(row[c]) if c == "created_at" else row[c] for c in _M_COLUMNS)
            cur = conn.execute(_SQLITE_UPSERT, values)  # type: ignore[arg-type]
            return int(cur.lastrowid) if cur.rowcount == 1 else None  # type: ignore[arg-type]
        if self._existing_id(conn, key) is not None:
            return None
        return int(conn.execute(_INSERT_MEASUREMENT, row).inserted_primary_key[0])

    def _existing_id(self, conn: Connection | sqlite3.Connection, key: tuple[str, str, str, str]) -> int | None:
        if isinstance(conn, sqlite3.Connection):
            found = conn.execute(_SQLITE_SELECT_ID, key).fetchone()
            return None if found is None else int(found[0])
        mid = conn.scalar(_SELECT_ID, _key_params(key))
        return None if mid is None else int(mid)

    @staticmethod
    def _insert_request(
        conn: Connection | sqlite3.Connection,
        st: StudyRecord,
        requested_key: str,
        placement_key: str,
        measurement_id: int,
        agent: str | None,
        trial_number: int | None,
        cache_hit: bool,
        created_at: datetime | None = None,
    ) -> int:
        if isinstance(conn, sqlite3.Connection):
            values = _request_values(st, requested_key, placement_key, measurement_id, agent, trial_number, cache_hit,
                                     created_at)
            return int(conn.execute(_SQLITE_INSERT_REQUEST, values).lastrowid)  # type: ignore[arg-type]
        if conn.dialect.name == "sqlite":  # (SQLite before 3.24)
            values = _request_values(st, requested_key, placement_key, measurement_id, agent, trial_number, cache_hit,
                                     created_at)
            return int(conn.exec_driver_sql(_SQLITE_INSERT_REQUEST, values).lastrowid)
        return int(
            conn.execute(
                _INSERT_REQUEST,
                {
                    "study_id": st.id,
                    "requested_key": requested_key,
                    "placement_key": placement_key,
                    "measurement_id": measurement_id,
                    "agent": agent,
                    "trial_number": trial_number,
                    "cache_hit": bool(cache_hit),
                    "created_at": created_at or utcnow(),
                },
            ).inserted_primary_key[0]
        )

    def rewrite(self, study: StudyRecord, requested_key: str, placement_key: str, measurement: Measurement,
                agent: str | None, trial_number: int | None) -> int | None:
        """Rewrite the stored measurement of ``placement_key`` in ``study``'s scope with ``measurement``
        (:meth:`update_measurement`) and log the request that asked for it (not a cache hit).

        Returns:
            The row's id, or None when no such row is stored (nothing is written then).
        """
        mid = self.measurement_id(*study.scope, placement_key)
        if mid is None:
            return None
        self.update_measurement(mid, measurement)
        self.record_request(study, requested_key, placement_key, mid, agent, trial_number, False)
        return mid

    def record_request(
        self,
        study: StudyRecord | str,
        requested_key: str,
        placement_key: str,
        measurement_id: int | None,
        agent: str | None = None,
        trial_number: int | None = None,
        cache_hit: bool = True,
    ) -> int:
        """Log one evaluation request (one small insert, one transaction).

        Args:
            study: the study (record or name).
            requested_key: key of the placement asked for.
            placement_key: key of the realised placement that answered.
            measurement_id: the answering measurement; None: find it by ``placement_key``
                in the study's scope.
            agent: the agent's name, if any.
            trial_number: the agent's trial number, if any.
            cache_hit: True when answered from the store without measuring.

        Returns:
            The ``pt_requests`` id.

        Raises:
            StoreError: no such measurement, or a database problem.
        """
        st = self._resolve(study)
        # a known measurement id: one insert, no transaction around it
        with self._write_txn(f"logging a request of study {st.name!r}",
                             one_statement=measurement_id is not None) as conn:
            if measurement_id is None:
                measurement_id = self._existing_id(conn, (*st.scope, placement_key))
                if measurement_id is None:
                    raise StoreError(
                        f"no stored measurement of placement {placement_key} in the scope of study "
                        f"{st.name!r}: record() the measurement before logging requests for it"
                    )
            try:
                return self._insert_request(conn, st, requested_key, placement_key, measurement_id, agent,
                                            trial_number, cache_hit)
            except (IntegrityError, sqlite3.IntegrityError):
                raise StoreError(
                    f"cannot log a request of study {st.name!r}: measurement id {measurement_id} or the "
                    "study does not exist in this database"
                ) from None
