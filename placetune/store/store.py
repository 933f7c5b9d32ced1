"""The measurement store: every measurement kept, nothing measured twice.

A :class:`Store` wraps one SQLAlchemy database (SQLite by default, PostgreSQL for a
fleet of Jetsons) holding the ``pt_*`` tables of :mod:`placetune.store.schema`. It is
composed of one mixin per concern, each in a module of its own:
:mod:`~placetune.store.connection` (engine, transactions, errors),
:mod:`~placetune.store.migration` (schema), :mod:`~placetune.store.studies`,
:mod:`~placetune.store.measurements` (the cache), :mod:`~placetune.store.batch` (many
evaluations in one transaction) and :mod:`~placetune.store.queries`.

A measurement is a cache entry keyed by its *cache scope* (model hash, machine
fingerprint hash, settings hash) and the key of the *realised* placement, so any
study, agent or process with the same scope reuses it. Every evaluation request is
logged too (``pt_requests``), so a study's history includes its cache hits.

Each write is one short transaction: a process killed mid-search loses at most the
measurement in flight (or, with :meth:`~placetune.store.batch.BatchMixin.write_batch`, the
evaluations not yet written). SQLite runs in WAL mode with ``synchronous=NORMAL`` (a killed
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

import os
import threading
from contextlib import nullcontext
from typing import Any, ContextManager

from sqlalchemy.engine import URL

from placetune.errors import ConfigError, StoreError
from placetune.store.batch import BatchMixin
from placetune.store.measurements import MeasurementLru
from placetune.store.migration import SchemaMixin
from placetune.store.queries import QueriesMixin
from placetune.store.records import StudyRecord
from placetune.store.url import mask_url, normalise_url, sqlite_file

__all__ = ["Store"]


class Store(BatchMixin, QueriesMixin, SchemaMixin):
    """The measurement database.

    Args:
        url: a SQLAlchemy URL (``sqlite:///runs/tune.db``,
            ``postgresql+psycopg://user:pw@host/db``), a plain file path (``tune.db``,
            made an absolute ``sqlite:///`` URL), ``":memory:"``, or None for
            ``placetune.db`` in the current directory.
        echo: log every SQL statement (SQLAlchemy's ``echo``).
        busy_timeout: SQLite: seconds to wait for another process's write lock before
            raising :class:`~placetune.errors.StoreError`; a URL's own ``?timeout=S`` wins (the
            search's Optuna engine, on the same URL, waits that long too).
        connect_timeout: server databases: seconds to wait for a connection.
        cache_size: measurements kept in the in-process lookup cache (0: none).
        readonly: the caller only reads: a SQLite file on read-only media (or in a folder without write
            permission) is opened read-only instead of refused; a database it would have to create or
            upgrade is a StoreError, except an SQLite file with nothing in it (a first run stopped before its
            tables were written): it holds no study, and is left unwritten.

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
        readonly: bool = False,
    ) -> None:
        self._url = normalise_url(url)
        #: True when the database is only read (``studies``, ``report``, ``export``): a SQLite file that
        #: cannot be written is opened read-only (:func:`~placetune.store.sqlite.readonly_url`), never
        #: created, upgraded or switched to WAL.
        self.readonly = bool(readonly)
        self.opened_readonly = False  # True when the SQLite file is opened read-only (it cannot be written)
        if self.readonly and self._url.get_backend_name() == "sqlite":
            from placetune.store.sqlite import readonly_url

            path = sqlite_file(self._url)
            if path is not None and not os.path.lexists(path):  # SQLite would create it, empty
                raise StoreError(f"no database at {mask_url(self._url)} ({path} does not exist): pass --storage URL "
                                 "of the database the search wrote (placetune tune --storage ...)")

            url_ro = readonly_url(self._url)
            self._url, self.opened_readonly = url_ro, url_ro is not self._url
        self.url = mask_url(self._url)
        url_timeout = self._url.query.get("timeout") if self._url.get_backend_name() == "sqlite" else None
        if isinstance(url_timeout, tuple):  # given twice: the driver takes the last
            url_timeout = url_timeout[-1]
        #: seconds a SQLite write waits for another's lock: the URL's ``timeout`` (checked by normalise_url)
        #: where it has one, the one every engine on this URL uses, else ``busy_timeout``
        try:
            self.busy_timeout = float(url_timeout) if url_timeout is not None else float(busy_timeout)
        except ValueError:  # a URL object, which skips the text's checks
            raise StoreError(f"SQLite URL {mask_url(self._url)!r}: timeout must be a number of seconds, "
                             f"got {str(url_timeout)[:40]!r}") from None
        self._password = self._url.password if isinstance(self._url.password, str) else None
        self._lru = MeasurementLru(int(cache_size))
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

    @classmethod
    def of(cls, store: "Store | str | os.PathLike[str] | None") -> "Store":
        """``store`` as it is, an in-memory store for None, or the store of a URL or SQLite path; anything else
        is refused (``Store(str(5))`` made a database file named ``5``).

        Raises:
            ConfigError: ``store`` is none of these.
        """
        if isinstance(store, Store):
            return store
        if store is None:
            return cls.memory()
        if not isinstance(store, (str, os.PathLike)):
            raise ConfigError(f"store must be a Store, a SQLAlchemy URL, a SQLite path or None (in memory), got "
                              f"{type(store).__name__}")
        return cls(os.fspath(store))

    def __repr__(self) -> str:
        return f"Store({self.url!r})"

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
