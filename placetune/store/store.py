"""The measurement store: every measurement kept, nothing measured twice.

A :class:`Store` wraps one SQLAlchemy database (SQLite by default, PostgreSQL for a
fleet of Jetsons) holding the ``pt_*`` tables of :mod:`placetune.store.schema`.

A measurement is a cache entry keyed by its *cache scope* (model hash, machine
fingerprint hash, settings hash) and the key of the *realised* placement, so any
study, agent or process with the same scope reuses it. Every evaluation request is
logged too (``pt_requests``), so a study's history includes its cache hits.

Each write is one short transaction: a process killed mid-search loses at most the
measurement in flight. SQLite runs in WAL mode with ``synchronous=NORMAL`` (a killed
process never loses a committed measurement; a power cut may lose the last few,
never corrupt the file), a busy timeout and foreign keys on.

Example:
    >>> from placetune import Model
    >>> from placetune.measurement import Measurement
    >>> from placetune.store import Store
    >>> model = Model.load("tests/data/seed_block.onnx.gz")
    >>> with Store.memory() as store:
    ...     study = store.create_or_open_study(
    ...         "demo", model, platform="orin-agx", backend="simulate", mode="engine",
    ...         objective="latency", precision="fp16", batch=1,
    ...         settings={"mode": "engine"}, fingerprint={"sim": 1}, simulated=True)
    ...     mid = store.record(study, "k1", "k1", Measurement("ok", latency_samples_ms=[1.0, 2.0],
    ...                                                       simulated=True))
    ...     store.lookup(*study.scope, "k1").median_ms
    1.5
"""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
import os
import re
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any, ContextManager
from urllib.parse import parse_qsl

from sqlalchemy import Connection, Text, bindparam, create_engine, event, func, insert, select, type_coerce
from sqlalchemy import case as sa_case
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import (
    ArgumentError,
    IntegrityError,
    NoSuchModuleError,
    OperationalError,
    SQLAlchemyError,
)
from sqlalchemy.pool import StaticPool

from placetune.errors import ConfigError, PlacetuneError, StoreError, UnknownNameError
from placetune.measurement import Measurement
from placetune.store.schema import (
    SCHEMA_VERSION,
    Base,
    MeasurementRow,
    ModelRow,
    RawJSON,
    RequestRow,
    SchemaRow,
    StudyRow,
    dumps,
    finite_or_none,
    utcnow,
)

__all__ = [
    "Store",
    "StudyRecord",
    "MeasurementRecord",
    "RequestRecord",
    "SCHEMA_VERSION",
    "MIGRATIONS",
    "OBJECTIVES",
    "mask_url",
    "settings_hash",
    "fingerprint_hash",
]

log = logging.getLogger(__name__)

#: Objective name -> (measurement column, natural direction).
OBJECTIVES: dict[str, tuple[str, str]] = {
    "latency": ("median_ms", "minimize"),
    "throughput": ("throughput_fps", "maximize"),
    "energy": ("energy_mj", "minimize"),
}

#: ``MIGRATIONS[v](conn)`` upgrades the ``pt_*`` tables from schema ``v`` to ``v + 1``
#: inside the caller's transaction. Empty: version 1 is the first schema.
MIGRATIONS: dict[int, Callable[[Connection], None]] = {}

#: Measurement fields that have columns of their own (the rest goes to ``payload``).
_COLUMN_FIELDS = (
    "status",
    "reason",
    "latency_samples_ms",
    "throughput_fps",
    "requested",
    "realized",
    "energy_mj",
    "build_seconds",
    "simulated",
)
_FLOAT_FIELDS = ("throughput_fps", "energy_mj", "build_seconds")
_FIELD_NAMES = tuple(f.name for f in fields(Measurement))
assert set(_COLUMN_FIELDS) <= set(_FIELD_NAMES), "Measurement fields changed: update placetune.store"

_M = MeasurementRow.__table__
_R = RequestRow.__table__
_S = StudyRow.__table__
_MODELS = ModelRow.__table__

_MEASUREMENT_COLUMNS = (
    _M.c.id,
    _M.c.status,
    _M.c.reason,
    _M.c.latency_samples,
    _M.c.throughput_fps,
    _M.c.requested,
    _M.c.realized,
    _M.c.energy_mj,
    _M.c.build_seconds,
    _M.c.simulated,
    _M.c.payload,
)
_RECORD_COLUMNS = (
    *_MEASUREMENT_COLUMNS,
    _S.c.name.label("study_name"),
    _M.c.placement_key,
    _M.c.requested_key,
    _M.c.agent,
    _M.c.trial_number,
    _M.c.created_at,
)

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
_INSERT_REQUEST = insert(_R)


def _key_params(key: tuple[str, str, str, str]) -> dict[str, str]:
    return {"k_model": key[0], "k_fingerprint": key[1], "k_settings": key[2], "k_placement": key[3]}


# --------------------------------------------------------------------------- helpers
_PASSWORD_IN_URL = re.compile(r"(?P<head>://[^/@:?#\s]*:)(?P<pw>[^@/\s]*)(?P<at>@)")
_PASSWORD_IN_QUERY = re.compile(r"(?P<head>[?&](?:password|passwd|pwd|pass)=)(?P<pw>[^&#\s]*)", re.IGNORECASE)


def mask_url(url: str | URL | os.PathLike[str] | None) -> str:
    """A database URL safe to print: the password (in the netloc or the query) becomes ``***``.

    Works on malformed URLs too (it never raises).

    Example:
        >>> mask_url("postgresql+psycopg://tuner:s3cret@jetson-db:5432/placetune")
        'postgresql+psycopg://tuner:***@jetson-db:5432/placetune'
        >>> mask_url("sqlite:///runs/placetune.db")
        'sqlite:///runs/placetune.db'
    """
    if url is None:
        return ""
    if isinstance(url, URL):
        text = url.render_as_string(hide_password=True)
    else:
        text = os.fspath(url) if isinstance(url, os.PathLike) else str(url)
    text = _PASSWORD_IN_URL.sub(lambda m: m["head"] + "***" + m["at"], text)
    return _PASSWORD_IN_QUERY.sub(lambda m: m["head"] + "***", text)


def _json_hash(doc: Any, length: int = 16) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:length]


def settings_hash(settings: Mapping[str, Any] | Any) -> str:
    """Hash of measurement settings; equals :attr:`placetune.settings.Settings.hash`.

    Args:
        settings: a :class:`~placetune.settings.Settings` or its ``to_dict()``.
    """
    return _json_hash(_as_dict(settings, "settings"))


def fingerprint_hash(fingerprint: Mapping[str, Any] | None, *, platform: str, backend: str, simulated: bool) -> str:
    """Hash of what identifies the measuring machine: the cache scope's machine part.

    Platform, backend and the simulated flag are part of it, so a simulated
    measurement is never served to a hardware study, nor an Orin one to a Xavier one,
    whatever the fingerprint dict holds.
    """
    doc = {
        "platform": platform,
        "backend": backend,
        "simulated": bool(simulated),
        "fingerprint": dict(fingerprint or {}),
    }
    return _json_hash(doc)


def _as_dict(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        value = to_dict()
    if not isinstance(value, Mapping):
        raise ConfigError(f"{what} must be a dict (or an object with to_dict()), not {type(value).__name__}")
    try:
        return json.loads(dumps(dict(value)))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{what} cannot be stored as JSON: {exc}") from None


def _fields(m: Measurement) -> dict[str, Any]:
    """``m.to_dict(timeline=True)`` without its deep copy (the values are serialised at once)."""
    return {name: getattr(m, name) for name in _FIELD_NAMES}


def _split(m: Measurement) -> tuple[dict[str, Any], dict[str, Any]]:
    """Measurement -> (column values, payload). ``payload`` overrides columns on read."""
    d = _fields(m)
    payload = {k: v for k, v in d.items() if k not in _COLUMN_FIELDS}
    for k in _FLOAT_FIELDS:  # keep what a float column would not give back exactly
        v = d.get(k)
        if v is not None and (type(v) is not float or finite_or_none(v) is None):
            payload[k] = v
    if d["requested"] is not None and d["requested"] == d["realized"]:
        # the common case: what ran is what was asked; store the per-layer map once
        payload[_SAME] = True
    lat = m.latency_ms or {}
    cols = {
        "status": m.status,
        "failure_class": None if m.ok else str(m.extra.get("failure_class") or m.status),
        "reason": m.reason,
        "latency_samples": d["latency_samples_ms"],
        "median_ms": finite_or_none(lat.get("median")),
        "p90_ms": finite_or_none(lat.get("p90")),
        "p99_ms": finite_or_none(lat.get("p99")),
        "throughput_fps": finite_or_none(m.throughput_fps),
        "energy_mj": finite_or_none(m.energy_mj),
        "build_seconds": finite_or_none(m.build_seconds),
        "requested": None if payload.get(_SAME) else d["requested"],
        "realized": d["realized"],
        "simulated": bool(m.simulated),
        "payload": payload,
    }
    return cols, payload


def _measurement_dict(row: Any) -> dict[str, Any]:
    """Measurement fields from a row whose JSON columns are decoded."""
    d = {
        "status": row.status,
        "reason": row.reason,
        "latency_samples_ms": row.latency_samples,
        "throughput_fps": row.throughput_fps,
        "requested": row.requested,
        "realized": row.realized,
        "energy_mj": row.energy_mj,
        "build_seconds": row.build_seconds,
        "simulated": bool(row.simulated),
    }
    d.update(row.payload or {})
    if d.pop(_SAME, False):
        d["requested"] = dict(d["realized"] or {})
    return d


#: payload flag: the requested placement equals the realised one (its column is NULL)
_SAME = "requested_is_realized"

#: ``(id, status, reason, throughput_fps, energy_mj, build_seconds, simulated,
#: latency_samples, requested, realized, payload)``, the last four as JSON text.
_Entry = tuple[Any, ...]


def _from_entry(e: _Entry) -> Measurement:
    """A fresh Measurement from a cache entry (every call decodes anew: no shared lists)."""

    def load(text: str | None) -> Any:
        return None if text is None else json.loads(text)

    d = {
        "status": e[1],
        "reason": e[2],
        "throughput_fps": e[3],
        "energy_mj": e[4],
        "build_seconds": e[5],
        "simulated": bool(e[6]),
        "latency_samples_ms": load(e[7]),
        "requested": load(e[8]),
        "realized": load(e[9]),
    }
    d.update(load(e[10]) or {})
    if d.pop(_SAME, False):
        d["requested"] = dict(d["realized"] or {})
    return Measurement.from_dict(d)


def _fmt(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


# --------------------------------------------------------------------------- records
@dataclass(frozen=True)
class StudyRecord:
    """A study as stored: its fixed settings, cache scope and counts.

    Attributes:
        id: database id.
        name: unique study name.
        model_id: ``pt_models`` id.
        model_hash: :attr:`placetune.model.model.Model.hash`.
        model_name: display name of the model.
        platform: Jetson platform name (``orin-agx``...).
        backend: measurement backend (``simulate``, ``tensorrt``, ``trtexec``).
        mode: ``engine``, ``pipeline`` or ``replicas``.
        objective: ``latency``, ``throughput`` or ``energy``.
        precision: ``fp16``, ``int8``...
        batch: batch size.
        settings: the measurement settings (``Settings.to_dict()``).
        settings_hash: their hash (``Settings.hash``).
        fingerprint: what identifies the measuring machine (JetPack, TensorRT, clocks...).
        fingerprint_hash: :func:`fingerprint_hash` of fingerprint, platform, backend, simulated.
        simulated: True when the study measures the simulated Jetson.
        created_at: creation time (UTC).
        n_requests: evaluation requests logged for the study (cache hits included).
        n_cache_hits: requests answered from the store without measuring.
        n_measured: measurements this study made (first in its cache scope).
        n_ok: those of them with status ``ok``.
    """

    id: int
    name: str
    model_id: int
    model_hash: str
    model_name: str
    platform: str
    backend: str
    mode: str
    objective: str
    precision: str
    batch: int
    settings: dict[str, Any]
    settings_hash: str
    fingerprint: dict[str, Any]
    fingerprint_hash: str
    simulated: bool
    created_at: datetime
    n_requests: int = 0
    n_cache_hits: int = 0
    n_measured: int = 0
    n_ok: int = 0

    @property
    def scope(self) -> tuple[str, str, str]:
        """``(model_hash, fingerprint_hash, settings_hash)``: the cache scope, for :meth:`Store.lookup`."""
        return (self.model_hash, self.fingerprint_hash, self.settings_hash)


@dataclass(frozen=True)
class MeasurementRecord:
    """A stored measurement with where it came from.

    Attributes:
        id: database id (``pt_measurements.id``).
        study: name of the study that measured it (other studies may reuse it).
        placement_key: key of the realised placement (the cache key).
        requested_key: key of the placement that was asked for when it was measured.
        requested: layer -> device asked for (None when unknown).
        realized: layer -> device that ran (None when unknown).
        measurement: the :class:`~placetune.measurement.Measurement`, exactly as recorded.
        agent: the agent that asked for it, if given.
        trial_number: the agent's trial number, if given.
        created_at: when it was stored (UTC).
    """

    id: int
    study: str
    placement_key: str
    requested_key: str
    requested: dict[str, str] | None
    realized: dict[str, str] | None
    measurement: Measurement
    agent: str | None
    trial_number: int | None
    created_at: datetime

    @property
    def status(self) -> str:
        """The measurement's status."""
        return self.measurement.status

    @property
    def simulated(self) -> bool:
        """True when the figures come from the simulated Jetson."""
        return self.measurement.simulated


@dataclass(frozen=True)
class RequestRecord:
    """One evaluation request of a study (``pt_requests``).

    Attributes:
        id: database id.
        study: study name.
        requested_key: key of the placement asked for.
        placement_key: key of the realised placement that answered it.
        measurement_id: the ``pt_measurements`` row that answered it.
        agent: the agent that asked, if given.
        trial_number: the agent's trial number, if given.
        cache_hit: True when answered from the store without measuring.
        created_at: when (UTC).
    """

    id: int
    study: str
    requested_key: str
    placement_key: str
    measurement_id: int
    agent: str | None
    trial_number: int | None
    cache_hit: bool
    created_at: datetime


# --------------------------------------------------------------------------- the store
@dataclass
class _Lru:
    """Thread-safe LRU of ``scope + key -> row entry``; stored measurements never change."""

    size: int
    data: OrderedDict[tuple[str, str, str, str], _Entry] = field(default_factory=OrderedDict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, key: tuple[str, str, str, str]) -> _Entry | None:
        if self.size <= 0:
            return None
        with self.lock:
            hit = self.data.get(key)
            if hit is not None:
                self.data.move_to_end(key)
            return hit

    def put(self, key: tuple[str, str, str, str], value: _Entry) -> None:
        if self.size <= 0:
            return
        with self.lock:
            self.data[key] = value
            self.data.move_to_end(key)
            while len(self.data) > self.size:
                self.data.popitem(last=False)


class Store:
    """The measurement database.

    Args:
        url: a SQLAlchemy URL (``sqlite:///runs/tune.db``,
            ``postgresql+psycopg://user:pw@host/db``), a plain file path (``tune.db``,
            made an absolute ``sqlite:///`` URL), ``":memory:"``, or None for
            ``placetune.db`` in the current directory.
        echo: log every SQL statement (SQLAlchemy's ``echo``).
        busy_timeout: SQLite: seconds to wait for another process's write lock before
            raising :class:`~placetune.errors.StoreError`.
        connect_timeout: server databases: seconds to wait for a connection.
        cache_size: measurements kept in the in-process lookup cache (0: none).

    Raises:
        StoreError: malformed URL, missing driver, unreachable server, unreadable or
            non-SQLite file, locked database, or a database of a newer placetune schema.

    Example:
        >>> with Store(":memory:") as store:
        ...     store.studies()
        []
    """

    def __init__(
        self,
        url: str | URL | os.PathLike[str] | None = None,
        *,
        echo: bool = False,
        busy_timeout: float = 30.0,
        connect_timeout: float = 10.0,
        cache_size: int = 4096,
    ) -> None:
        self._url = self._normalise_url(url)
        self.url = mask_url(self._url)
        self.busy_timeout = float(busy_timeout)
        self._password = self._url.password if isinstance(self._url.password, str) else None
        self._lru = _Lru(int(cache_size))
        self._studies: dict[str, StudyRecord] = {}
        self._closed = False
        self._pid = os.getpid()
        self.dialect = self._url.get_backend_name()
        self._memory = self.dialect == "sqlite" and self._url.database in (None, "", ":memory:")
        self._lock: ContextManager[Any] = threading.RLock() if self._memory else nullcontext()
        self._engine = self._make_engine(echo, connect_timeout)
        try:
            self._ensure_schema()
        except BaseException:
            self._engine.dispose()
            raise

    # ------------------------------------------------------------ construction
    @classmethod
    def memory(cls, *, echo: bool = False, cache_size: int = 4096) -> "Store":
        """An in-memory SQLite store shared by all threads of this process; touches no disk.

        Example:
            >>> Store.memory()
            Store('sqlite://')
        """
        return cls("sqlite://", echo=echo, cache_size=cache_size)

    @staticmethod
    def _normalise_url(url: str | URL | os.PathLike[str] | None) -> URL:
        if url is None:
            return make_url("sqlite:///" + str(Path.cwd() / "placetune.db"))
        if isinstance(url, URL):
            return url
        text = os.fspath(url) if isinstance(url, os.PathLike) else url
        if not isinstance(text, str) or not text.strip():
            raise StoreError(f"database URL {mask_url(str(text))!r} is empty or not text: give a file path or a URL")
        text = text.strip()
        if text == ":memory:":
            return make_url("sqlite://")
        if "://" not in text:
            return make_url("sqlite:///" + str(Path(text).expanduser().absolute()))
        try:
            return make_url(text)
        except (ArgumentError, ValueError) as exc:
            raise StoreError(
                f"malformed database URL {mask_url(text)!r} ({exc.__class__.__name__}): expected e.g. "
                "sqlite:///path/to/placetune.db or postgresql+psycopg://user:password@host:5432/dbname"
            ) from None

    def _make_engine(self, echo: bool, connect_timeout: float) -> Engine:
        kw: dict[str, Any] = {"echo": echo}
        connect_args: dict[str, Any] = {}
        if self.dialect == "sqlite":
            connect_args["check_same_thread"] = False
            if self._memory:
                kw["poolclass"] = StaticPool
            else:
                connect_args["timeout"] = self.busy_timeout
        elif self.dialect == "postgresql":
            kw["pool_pre_ping"] = True
            if self._url.get_driver_name() in ("psycopg", "psycopg2", "psycopg2cffi"):
                connect_args["connect_timeout"] = max(1, int(round(connect_timeout)))
        else:
            kw["pool_pre_ping"] = True
        try:
            engine = create_engine(self._url, connect_args=connect_args, **kw)
        except NoSuchModuleError:
            raise StoreError(
                f"unknown database kind or driver in URL {self.url!r}: use sqlite:///file.db or "
                "postgresql+psycopg://user:password@host/dbname"
            ) from None
        except ImportError as exc:
            raise StoreError(
                f"the database driver for {self.url!r} is not installed ({exc.name or exc}): "
                "pip install 'placetune[postgres]' (psycopg) or use a sqlite:/// URL"
            ) from None
        except (ArgumentError, TypeError, ValueError) as exc:
            raise StoreError(f"bad database URL {self.url!r}: {self._scrub(str(exc))}") from None
        if self.dialect == "sqlite":
            self._install_sqlite_hooks(engine)
        return engine

    def _install_sqlite_hooks(self, engine: Engine) -> None:
        busy_ms = int(self.busy_timeout * 1000)
        memory = self._memory

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            # placetune emits BEGIN itself (below): pysqlite's legacy implicit
            # transactions would not make a read-then-write atomic.
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            try:
                cur.execute(f"PRAGMA busy_timeout = {busy_ms}")
                cur.execute("PRAGMA foreign_keys = ON")
                if not memory:
                    mode = cur.execute("PRAGMA journal_mode").fetchone()[0]
                    if str(mode).lower() != "wal":
                        try:
                            cur.execute("PRAGMA journal_mode = WAL")
                        except sqlite3.OperationalError as exc:  # read-only file: keep its mode
                            log.debug("cannot switch %s to WAL: %s", mask_url(self._url), exc)
                    cur.execute("PRAGMA synchronous = NORMAL")
            finally:
                cur.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            write = conn.get_execution_options().get("placetune_write", False)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    # ------------------------------------------------------------ plumbing
    def __repr__(self) -> str:
        return f"Store({self.url!r})"

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every connection. The store cannot be used afterwards (an in-memory one is gone)."""
        if not self._closed:
            self._closed = True
            self._engine.dispose()

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (its ``repr`` masks the password)."""
        return self._engine

    @property
    def sqlite_path(self) -> str | None:
        """The SQLite database file, or None (server database or in-memory)."""
        if self.dialect != "sqlite" or self._memory:
            return None
        db = self._url.database or ""
        if db.startswith("file:"):
            db = db[5:].split("?", 1)[0]
        return db

    def _scrub(self, text: str) -> str:
        text = mask_url(text)
        if self._password:
            text = text.replace(self._password, "***")
        return text

    @contextmanager
    def _txn(self, action: str, *, write: bool = False) -> Iterator[Connection]:
        """One transaction; every database exception becomes a StoreError saying what to do."""
        if self._closed:
            raise StoreError(f"the store {self.url} is closed: open a new Store")
        if not self._memory and os.getpid() != self._pid:  # forked: never share pooled sockets
            self._engine.dispose(close=False)
            self._pid = os.getpid()
        with self._lock:
            try:
                conn = self._engine.connect()
            except PlacetuneError:
                raise
            except (SQLAlchemyError, sqlite3.Error) as exc:
                raise self._translate(exc, action, connecting=True) from None
            try:
                if write and self.dialect == "sqlite":
                    conn.execution_options(placetune_write=True)
                with conn.begin():
                    yield conn
            except PlacetuneError:
                raise
            except (SQLAlchemyError, sqlite3.Error) as exc:
                if isinstance(exc, IntegrityError):
                    raise
                raise self._translate(exc, action) from None
            finally:
                conn.close()

    def _translate(self, exc: BaseException, action: str, *, connecting: bool = False) -> StoreError:
        orig = getattr(exc, "orig", None) or exc
        lines = [ln.strip() for ln in str(orig).strip().splitlines() if ln.strip()]
        text = self._scrub(lines[0] if lines else type(orig).__name__)
        low = text.lower()
        if self.dialect == "sqlite":
            path = self.sqlite_path or "(in memory)"
            if "locked" in low or "busy" in low:
                return StoreError(
                    f"database {path} is locked: {self._lock_holder_text(path)} holds its write lock "
                    f"for longer than the busy timeout ({self.busy_timeout:g} s) while {action}: wait for "
                    "it to finish, stop it, raise the busy timeout, or use another --db file"
                )
            if "readonly" in low or "read-only" in low or "read only" in low:
                return StoreError(f"database file {path} is read-only ({self._readonly_why(path)}) while {action}: "
                                  "use a writable --db path, or fix the permissions of the file and its directory")
            if "unable to open" in low:
                return StoreError(
                    f"cannot open database file {path} while {action} ({text}): check that its directory "
                    "exists and is writable (SQLite also creates -wal and -shm files beside it)"
                )
            if "not a database" in low or "malformed" in low or "encrypted" in low:
                return StoreError(
                    f"{path} is not a usable SQLite database ({text}): point --db at a placetune "
                    "database or a new file name"
                )
            if "disk is full" in low or "disk i/o" in low:
                return StoreError(f"cannot write database {path} while {action} ({text}): free disk space or "
                                  "check the file system")
        elif connecting or (isinstance(exc, OperationalError) and getattr(exc, "connection_invalidated", False)):
            return StoreError(
                f"cannot connect to database {self.url} while {action}: {text}: check that the server "
                "is running and reachable, and the host, port, user, password and database name"
            )
        return StoreError(f"database error on {self.url} while {action}: {text}")

    def _readonly_why(self, path: str) -> str:
        query = dict(parse_qsl((self._url.database or "").partition("?")[2]))
        query.update({k: v for k, v in self._url.query.items() if isinstance(v, str)})
        if query.get("mode") == "ro" or query.get("immutable") == "1":
            return "it was opened read-only with mode=ro"
        why = []
        if os.path.exists(path) and not os.access(path, os.W_OK):
            why.append("no write permission on the file")
        directory = os.path.dirname(os.path.abspath(path))
        if not os.access(directory, os.W_OK):
            why.append(f"no write permission on its directory {directory}, where SQLite keeps the -wal and -shm "
                       "files; to only read it, copy it to a writable place")
        return "; ".join(why) or "the file system or SQLite refused writes"

    @staticmethod
    def _lock_holder_text(path: str) -> str:
        """Who holds a write lock on the SQLite file, from ``/proc/locks`` (Linux), best effort."""
        try:
            with open("/proc/locks") as f:
                lines = f.read().splitlines()
        except OSError:
            return "another connection"
        targets = set()
        for p in (path, path + "-shm", path + "-wal"):
            try:
                st = os.stat(p)
            except OSError:
                continue
            targets.add((os.major(st.st_dev), os.minor(st.st_dev), st.st_ino))
        pids: list[int] = []
        for line in lines:
            parts = line.split()
            if len(parts) < 6 or "->" in parts or parts[3] != "WRITE":
                continue
            try:
                maj, mnr, ino = parts[5].split(":")
                ident = (int(maj, 16), int(mnr, 16), int(ino))
                pid = int(parts[4])
            except ValueError:
                continue
            if ident in targets and pid not in pids:
                pids.append(pid)
        if not pids:
            return "another connection"
        out = []
        for pid in pids[:3]:
            if pid == os.getpid():
                out.append(f"another connection of this process (pid {pid})")
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = " ".join(f.read().replace(b"\0", b" ").decode(errors="replace").split())
            except OSError:
                cmd = ""
            out.append(f"pid {pid}" + (f" ({cmd[:80]})" if cmd else ""))
        return " and ".join(out)

    # ------------------------------------------------------------ schema
    def _ensure_schema(self) -> None:
        with self._txn("opening the database") as conn:
            version = self._schema_version(conn)
        if version == SCHEMA_VERSION:
            return
        self._check_version(version)
        for attempt in range(3):
            try:
                with self._txn("creating the placetune tables", write=True) as conn:
                    self._create_or_migrate(conn)
                return
            except (IntegrityError, StoreError) as exc:
                # another process may have created the tables at the same time
                with self._txn("opening the database") as conn:
                    version = self._schema_version(conn)
                if version == SCHEMA_VERSION:
                    return
                if isinstance(exc, StoreError) or attempt == 2:
                    raise exc if isinstance(exc, StoreError) else self._translate(exc, "creating tables") from None

    def _create_or_migrate(self, conn: Connection) -> None:
        version = self._schema_version(conn)
        self._check_version(version)
        if version is None:
            Base.metadata.create_all(conn)
            if conn.scalar(select(SchemaRow.version).where(SchemaRow.id == 1)) is None:
                conn.execute(insert(SchemaRow).values(id=1, version=SCHEMA_VERSION, created_at=utcnow()))
            log.info("created placetune schema v%d in %s", SCHEMA_VERSION, self.url)
        elif version < SCHEMA_VERSION:
            for v in range(version, SCHEMA_VERSION):
                MIGRATIONS[v](conn)
                log.info("migrated placetune schema v%d -> v%d in %s", v, v + 1, self.url)
            Base.metadata.create_all(conn)
            conn.execute(SchemaRow.__table__.update().where(SchemaRow.id == 1).values(version=SCHEMA_VERSION))

    @staticmethod
    def _schema_version(conn: Connection) -> int | None:
        if not conn.dialect.has_table(conn, SchemaRow.__tablename__):
            return None
        return conn.scalar(select(SchemaRow.version).where(SchemaRow.id == 1))

    def _check_version(self, version: int | None) -> None:
        if version is None or version == SCHEMA_VERSION:
            return
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"database {self.url} has placetune schema v{version}, newer than this placetune "
                f"(v{SCHEMA_VERSION}); upgrade placetune"
            )
        missing = [v for v in range(version, SCHEMA_VERSION) if v not in MIGRATIONS]
        if missing:
            raise StoreError(
                f"database {self.url} has placetune schema v{version}, older than this placetune "
                f"(v{SCHEMA_VERSION}), and no migration from v{missing[0]} exists: use a placetune "
                "version that matches the database, or a new database file"
            )

    @property
    def schema_version(self) -> int:
        """The placetune schema version of the database."""
        with self._txn("reading the schema version") as conn:
            return int(self._schema_version(conn) or 0)

    # ------------------------------------------------------------ models and studies
    def get_or_create_model(self, model: Any) -> int:
        """The ``pt_models`` id of a model, inserting it the first time.

        Args:
            model: a :class:`placetune.model.model.Model` (``hash``, ``name``, ``path``,
                ``input_shapes`` and ``len()`` are used).
        """
        with self._txn("reading models") as conn:
            mid = conn.scalar(select(_MODELS.c.id).where(_MODELS.c.hash == model.hash))
        if mid is not None:
            return int(mid)
        for attempt in range(2):
            try:
                with self._txn("storing a model", write=True) as conn:
                    return self._model_id(conn, model)
            except IntegrityError as exc:  # stored by another process meanwhile: re-read
                if attempt:
                    raise self._translate(exc, "storing a model") from None
        raise AssertionError("unreachable")

    @staticmethod
    def _model_id(conn: Connection, model: Any) -> int:
        mid = conn.scalar(select(_MODELS.c.id).where(_MODELS.c.hash == model.hash))
        if mid is not None:
            return int(mid)
        shapes = {name: list(shape) for name, shape in model.input_shapes.items()}
        return int(
            conn.execute(
                insert(_MODELS).values(
                    hash=model.hash,
                    name=str(model.name),
                    path=None if model.path is None else str(model.path),
                    shapes=shapes,
                    n_layers=len(model),
                    created_at=utcnow(),
                )
            ).inserted_primary_key[0]
        )

    def create_or_open_study(
        self,
        name: str,
        model: Any,
        platform: str,
        backend: str,
        mode: str,
        objective: str,
        precision: str,
        batch: int,
        settings: Mapping[str, Any] | Any,
        fingerprint: Mapping[str, Any] | None,
        simulated: bool,
    ) -> StudyRecord:
        """Create a study, or reopen it to resume when every setting is the same.

        Args:
            name: study name, unique in the database.
            model: the :class:`placetune.model.model.Model` searched.
            platform: Jetson platform name.
            backend: measurement backend name.
            mode: execution mode.
            objective: what the search optimises (``latency``, ``throughput``, ``energy``).
            precision: build precision.
            batch: batch size.
            settings: a :class:`~placetune.settings.Settings` or its ``to_dict()``.
            fingerprint: what identifies the measuring machine (versions, clocks...).
            simulated: True when measuring the simulated Jetson.

        Returns:
            The study, with counts.

        Raises:
            ConfigError: the study exists with other settings; the message names each one.
            StoreError: database problem.

        Example:
            >>> from placetune import Model
            >>> store = Store.memory()
            >>> s = store.create_or_open_study("a", Model.load("tests/data/seed_block.onnx.gz"),
            ...     "orin-agx", "simulate", "engine", "latency", "fp16", 1, {}, {}, True)
            >>> s.name, s.simulated
            ('a', True)
        """
        if not isinstance(name, str) or not name.strip():
            raise ConfigError("the study name must be a non-empty string: pass --study NAME")
        settings_d = _as_dict(settings, "settings")
        fingerprint_d = _as_dict(fingerprint, "fingerprint")
        want = {
            "platform": str(platform),
            "backend": str(backend),
            "mode": str(mode),
            "objective": str(objective),
            "precision": str(precision),
            "batch": int(batch),
            "settings": settings_d,
            "settings_hash": settings_hash(settings_d),
            "fingerprint": fingerprint_d,
            "fingerprint_hash": fingerprint_hash(
                fingerprint_d, platform=str(platform), backend=str(backend), simulated=bool(simulated)
            ),
            "simulated": bool(simulated),
        }
        existing = self._find_study(name)
        if existing is None:
            for attempt in range(2):
                try:
                    with self._txn(f"creating study {name!r}", write=True) as conn:
                        if conn.scalar(select(_S.c.id).where(_S.c.name == name)) is None:
                            model_id = self._model_id(conn, model)
                            conn.execute(insert(_S).values(name=name, model_id=model_id, created_at=utcnow(), **want))
                    break
                except IntegrityError as exc:  # created by another process meanwhile: re-read
                    if attempt:
                        raise self._translate(exc, f"creating study {name!r}") from None
            existing = self._find_study(name)
            assert existing is not None
        self._check_same(existing, model, want)
        self._studies[name] = existing
        return existing

    @staticmethod
    def _check_same(st: StudyRecord, model: Any, want: dict[str, Any]) -> None:
        old: list[str] = []
        new: list[str] = []
        if st.model_hash != model.hash:
            old.append(f"model={st.model_name} (hash {st.model_hash[:12]})")
            new.append(f"model={model.name} (hash {model.hash[:12]})")
        top = ("platform", "backend", "mode", "objective", "precision", "batch", "simulated")
        named = set()
        for key in top:
            if getattr(st, key) != want[key]:
                named.add(key)
                old.append(f"{key}={_fmt(getattr(st, key))}")
                new.append(f"{key}={_fmt(want[key])}")
        for part in ("settings", "fingerprint"):
            a, b = getattr(st, part), want[part]
            keys = [k for k in sorted(set(a) | set(b)) if a.get(k, None) != b.get(k, None)]
            if not keys and part == "settings" and st.settings_hash != want["settings_hash"]:
                # same dict, hash written by another hash function: name the hashes
                old.append(f"settings_hash={st.settings_hash}")
                new.append(f"settings_hash={want['settings_hash']}")
            for k in keys:
                if part == "settings" and k in named:  # e.g. mode: already named above
                    continue
                old.append(f"{part}.{k}={_fmt(a[k]) if k in a else '(unset)'}")
                new.append(f"{part}.{k}={_fmt(b[k]) if k in b else '(unset)'}")
        if old:
            raise ConfigError(
                f"study {st.name!r} exists with {', '.join(old)}; this run has {', '.join(new)}: "
                "use another --study name or the same settings"
            )

    def _study_select(self) -> Any:
        return select(_S, _MODELS.c.hash.label("model_hash"), _MODELS.c.name.label("model_name")).join(
            _MODELS, _MODELS.c.id == _S.c.model_id
        )

    def _find_study(self, name: str) -> StudyRecord | None:
        with self._txn(f"reading study {name!r}") as conn:
            row = conn.execute(self._study_select().where(_S.c.name == name)).first()
            if row is None:
                return None
            counts = self._counts(conn, [row.id])
        return self._study_record(row, counts.get(row.id, {}))

    @staticmethod
    def _study_record(row: Any, counts: Mapping[str, int]) -> StudyRecord:
        return StudyRecord(
            id=row.id,
            name=row.name,
            model_id=row.model_id,
            model_hash=row.model_hash,
            model_name=row.model_name,
            platform=row.platform,
            backend=row.backend,
            mode=row.mode,
            objective=row.objective,
            precision=row.precision,
            batch=row.batch,
            settings=row.settings,
            settings_hash=row.settings_hash,
            fingerprint=row.fingerprint,
            fingerprint_hash=row.fingerprint_hash,
            simulated=bool(row.simulated),
            created_at=row.created_at,
            **counts,
        )

    @staticmethod
    def _counts(conn: Connection, ids: list[int] | None) -> dict[int, dict[str, int]]:
        out: dict[int, dict[str, int]] = {}
        q1 = select(_R.c.study_id, func.count(), func.sum(sa_case((_R.c.cache_hit, 1), else_=0))).group_by(
            _R.c.study_id
        )
        q2 = select(_M.c.study_id, func.count(), func.sum(sa_case((_M.c.status == "ok", 1), else_=0))).group_by(
            _M.c.study_id
        )
        if ids is not None:
            q1 = q1.where(_R.c.study_id.in_(ids))
            q2 = q2.where(_M.c.study_id.in_(ids))
        for sid, n, hits in conn.execute(q1):
            out.setdefault(sid, {}).update(n_requests=int(n), n_cache_hits=int(hits or 0))
        for sid, n, ok in conn.execute(q2):
            out.setdefault(sid, {}).update(n_measured=int(n), n_ok=int(ok or 0))
        return out

    def study(self, name: str) -> StudyRecord:
        """The study called ``name``, with counts.

        Raises:
            UnknownNameError: no such study (the message lists close names).
        """
        st = self._find_study(name)
        if st is None:
            names = [s.name for s in self.studies()]
            close = difflib.get_close_matches(name, names, n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            known = f"; studies: {', '.join(names[:20])}" if names else "; the database has no study yet"
            raise UnknownNameError(f"no study {name!r} in {self.url}{hint}{known}")
        self._studies[name] = st
        return st

    def studies(self) -> list[StudyRecord]:
        """Every study, oldest first, with counts."""
        with self._txn("listing studies") as conn:
            rows = conn.execute(self._study_select().order_by(_S.c.id)).all()
            counts = self._counts(conn, None)
        return [self._study_record(r, counts.get(r.id, {})) for r in rows]

    def _resolve(self, study: StudyRecord | str) -> StudyRecord:
        if isinstance(study, StudyRecord):
            return study
        st = self._studies.get(study)
        return st if st is not None else self.study(study)

    # ------------------------------------------------------------ cache
    def lookup(
        self, model_hash: str, fingerprint_hash: str, settings_hash: str, placement_key: str
    ) -> Measurement | None:
        """The stored measurement of a realised placement in a cache scope, or None.

        Answers from an in-process LRU when it can (stored measurements never change),
        else from the unique index. Each call returns a fresh object.

        Example:
            ``store.lookup(*study.scope, placement.key)``
        """
        hit = self._lookup_entry((model_hash, fingerprint_hash, settings_hash, placement_key))
        return None if hit is None else hit[1]

    def _lookup_entry(self, key: tuple[str, str, str, str]) -> tuple[int, Measurement] | None:
        entry = self._lru.get(key)
        if entry is None:
            with self._txn("looking up a measurement") as conn:
                row = conn.execute(_SELECT_ENTRY, _key_params(key)).first()
            if row is None:
                return None
            entry = tuple(row)
            self._lru.put(key, entry)
        return int(entry[0]), _from_entry(entry)

    def lookup_requested(
        self, model_hash: str, fingerprint_hash: str, settings_hash: str, requested_key: str
    ) -> MeasurementRecord | None:
        """A measurement already made for this *requested* placement in the scope, or None.

        Lets a hardware evaluator skip an engine build whose realised placement is
        already known; ``record.placement_key`` is the realised key to log with
        :meth:`record_request`.
        """
        with self._txn("looking up a requested placement") as conn:
            row = conn.execute(
                select(*_RECORD_COLUMNS)
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
        return None if row is None else self._measurement_record(row)

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
        if bool(measurement.simulated) != st.simulated:
            what = "a simulated measurement" if measurement.simulated else "a hardware measurement"
            raise ConfigError(
                f"refusing to store {what} in study {st.name!r} (simulated={st.simulated}): "
                "label the measurement with the study's backend or use another study"
            )
        try:  # encode the JSON columns once: for the database and the LRU
            cols, payload = _split(measurement)
            texts = {
                name: None if cols[name] is None else RawJSON(dumps(cols[name]))
                for name in ("latency_samples", "requested", "realized", "payload")
            }
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"measurement cannot be stored as JSON: {exc}") from None
        cols.update(texts)
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
        mid: int | None = None
        inserted = False
        for attempt in range(3):
            try:
                with self._txn(f"recording a measurement of study {st.name!r}", write=True) as conn:
                    mid = self._existing_id(conn, key)
                    if mid is None:
                        row["created_at"] = utcnow()
                        mid = int(conn.execute(_INSERT_MEASUREMENT, row).inserted_primary_key[0])
                        inserted = True
                    else:
                        log.debug("placement %s already stored (id %d); the first measurement is kept",
                                  placement_key, mid)
                    self._insert_request(conn, st, requested_key, placement_key, mid, agent, trial_number, False)
                break
            except IntegrityError as exc:  # lost a race on the unique key: re-read
                if attempt == 2:
                    raise self._translate(exc, "recording a measurement") from None
                log.debug("unique-key race on %s; re-reading", placement_key)
        assert mid is not None
        if inserted:
            self._lru.put(
                key,
                (
                    mid, cols["status"], cols["reason"], cols["throughput_fps"], cols["energy_mj"],
                    cols["build_seconds"], cols["simulated"], *(
                        None if texts[n] is None else str(texts[n])
                        for n in ("latency_samples", "requested", "realized", "payload")
                    ),
                ),
            )
        return mid

    def _existing_id(self, conn: Connection, key: tuple[str, str, str, str]) -> int | None:
        mid = conn.scalar(_SELECT_ID, _key_params(key))
        return None if mid is None else int(mid)

    @staticmethod
    def _insert_request(
        conn: Connection,
        st: StudyRecord,
        requested_key: str,
        placement_key: str,
        measurement_id: int,
        agent: str | None,
        trial_number: int | None,
        cache_hit: bool,
    ) -> int:
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
                    "created_at": utcnow(),
                },
            ).inserted_primary_key[0]
        )

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
        with self._txn(f"logging a request of study {st.name!r}", write=True) as conn:
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
            except IntegrityError:
                raise StoreError(
                    f"cannot log a request of study {st.name!r}: measurement id {measurement_id} or the "
                    "study does not exist in this database"
                ) from None

    # ------------------------------------------------------------ queries
    @staticmethod
    def _measurement_record(row: Any) -> MeasurementRecord:
        m = Measurement.from_dict(_measurement_dict(row))
        return MeasurementRecord(
            id=row.id,
            study=row.study_name,
            placement_key=row.placement_key,
            requested_key=row.requested_key,
            requested=row.requested if row.requested is not None else m.requested,
            realized=row.realized,
            measurement=m,
            agent=row.agent,
            trial_number=row.trial_number,
            created_at=row.created_at,
        )

    def measurements(self, study_name: str | None = None, status: str | None = None) -> list[MeasurementRecord]:
        """Stored measurements, oldest first.

        Args:
            study_name: only those this study asked for (measured or cache hits);
                None: every measurement in the database.
            status: only this status (``ok``, ``build_failed``...).

        Raises:
            UnknownNameError: no such study.
        """
        q = select(*_RECORD_COLUMNS).join(_S, _S.c.id == _M.c.study_id)
        if study_name is not None:
            st = self._resolve(study_name)
            q = q.where(_M.c.id.in_(select(_R.c.measurement_id).where(_R.c.study_id == st.id)))
        if status is not None:
            q = q.where(_M.c.status == status)
        with self._txn("listing measurements") as conn:
            rows = conn.execute(q.order_by(_M.c.id)).all()
        return [self._measurement_record(r) for r in rows]

    def requests(self, study_name: str) -> list[RequestRecord]:
        """The study's evaluation requests in order, cache hits included.

        Raises:
            UnknownNameError: no such study.
        """
        st = self._resolve(study_name)
        with self._txn("listing requests") as conn:
            rows = conn.execute(select(_R).where(_R.c.study_id == st.id).order_by(_R.c.id)).all()
        return [
            RequestRecord(
                id=r.id,
                study=st.name,
                requested_key=r.requested_key,
                placement_key=r.placement_key,
                measurement_id=r.measurement_id,
                agent=r.agent,
                trial_number=r.trial_number,
                cache_hit=bool(r.cache_hit),
                created_at=r.created_at,
            )
            for r in rows
        ]

    def best(
        self, study_name: str, objective: str | None = None, direction: str | None = None
    ) -> MeasurementRecord | None:
        """The best ``ok`` measurement in the study's cache scope (any study with the same scope).

        Args:
            study_name: the study.
            objective: ``latency`` (median ms), ``throughput`` (fps) or ``energy`` (mJ);
                None: the study's objective. Of a pair (``latency+energy``) the first is used.
            direction: ``minimize`` or ``maximize``; None: the objective's natural one.

        Returns:
            The best record (ties: the earliest), or None when nothing ok with that
            objective is stored.

        Raises:
            UnknownNameError: no such study or objective.
            ConfigError: bad direction.
        """
        st = self._resolve(study_name)
        objective = (objective or st.objective).split("+")[0].strip().lower()  # a pair: its primary part
        if objective not in OBJECTIVES:
            raise UnknownNameError(f"unknown objective {objective!r}; objectives are {', '.join(OBJECTIVES)}")
        column_name, natural = OBJECTIVES[objective]
        direction = direction or natural
        if direction not in ("minimize", "maximize"):
            raise ConfigError(f"direction must be 'minimize' or 'maximize', not {direction!r}")
        col = _M.c[column_name]
        q = (
            select(*_RECORD_COLUMNS)
            .join(_S, _S.c.id == _M.c.study_id)
            .where(
                _M.c.model_hash == st.model_hash,
                _M.c.fingerprint_hash == st.fingerprint_hash,
                _M.c.settings_hash == st.settings_hash,
                _M.c.status == "ok",
                col.is_not(None),
            )
            .order_by(col.asc() if direction == "minimize" else col.desc(), _M.c.id)
            .limit(1)
        )
        with self._txn(f"finding the best measurement of study {st.name!r}") as conn:
            row = conn.execute(q).first()
        return None if row is None else self._measurement_record(row)

