"""The store's connection: engine, one transaction at a time, and database errors as clear StoreErrors."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Callable, ContextManager, TypeVar

from sqlalchemy import Connection, create_engine
from sqlalchemy.engine import URL, Engine
from sqlalchemy.exc import (
    ArgumentError,
    IntegrityError,
    NoSuchModuleError,
    OperationalError,
    SQLAlchemyError,
)
from sqlalchemy.pool import StaticPool

from placetune.errors import PlacetuneError, StoreError
from placetune.store.sqlite import install_sqlite_hooks, lock_holder_text, readonly_why
from placetune.store.url import URL_PARTS, mask_url, sqlite_uri_path, url_secrets

__all__ = ["ConnectionMixin"]

_C = TypeVar("_C")


class ConnectionMixin:
    """The engine and transactions of a :class:`~placetune.store.store.Store` (set up by its ``__init__``)."""

    _url: URL
    url: str
    dialect: str
    busy_timeout: float
    _password: str | None
    _memory: bool
    _lock: ContextManager[Any]
    _engine: Engine
    _closed: bool
    _pid: int
    readonly: bool
    opened_readonly: bool
    #: True when the SQLite file holds nothing and the store only reads it: an empty schema in memory stands in
    #: for the file (:meth:`_read_as_empty`)
    read_as_empty: bool = False

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
                f"unknown database kind or driver in URL {self.url!r}: placetune takes sqlite:///file.db and "
                f"postgresql+psycopg URLs ({URL_PARTS})"
            ) from None
        except ImportError as exc:
            raise StoreError(
                f"the database driver for {self.url!r} is not installed ({exc.name or exc}): "
                "pip install 'placetune[postgres]' (psycopg) or use a sqlite:/// URL"
            ) from None
        except (ArgumentError, TypeError, ValueError) as exc:
            raise StoreError(f"bad database URL {self.url!r}: {self.scrub(str(exc))}") from None
        if self.dialect == "sqlite":
            install_sqlite_hooks(engine, self._url, busy_timeout=self.busy_timeout, memory=self._memory,
                                 readonly=self.readonly)
        return engine

    def _read_as_empty(self) -> None:
        """Read the SQLite file, which holds nothing (no table, index or view), as a store holding no study:
        the store reads an empty placetune schema kept in memory, and the file is never written. SQLite creates
        the file when it is first opened and placetune's tables come in a transaction after it, so a run stopped
        in between (Ctrl-C, a kill, a power cut) leaves such a file: it holds no study, like a new database."""
        self._engine.dispose()
        self._engine = create_engine("sqlite://", poolclass=StaticPool, connect_args={"check_same_thread": False})
        install_sqlite_hooks(self._engine, self._engine.url, busy_timeout=self.busy_timeout, memory=True)
        self._lock = threading.RLock()  # one connection for every thread, as for an in-memory store
        self.read_as_empty = True

    def close(self) -> None:
        """Close every connection. The store cannot be used afterwards (an in-memory one is gone)."""
        if not self._closed:
            self._closed = True
            self._engine.dispose()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (its ``repr`` masks the password)."""
        return self._engine

    @property
    def in_memory(self) -> bool:
        """True for an in-memory SQLite database (``:memory:``): what it holds is gone when it closes."""
        return self._memory

    @property
    def has_password(self) -> bool:
        """True when the database URL carries a password: :attr:`url` shows it masked, so that text
        cannot open the database again (a copy of the store needs the URL from its owner)."""
        return self._password is not None

    @property
    def sqlite_path(self) -> str | None:
        """The SQLite database file, or None (server database or in-memory)."""
        if self.dialect != "sqlite" or self._memory:
            return None
        db = self._url.database or ""
        if db.startswith("file:"):  # a SQLite URI: its path is percent-encoded
            try:
                return sqlite_uri_path(db, self._url.query)
            except StoreError:
                return db[5:].split("?", 1)[0]
        return db

    def scrub(self, text: str) -> str:
        """``text`` with this store's URL masked and its password and secret query values replaced by ``***``."""
        text = mask_url(text)
        for secret in url_secrets(self._url):  # the password and secret query values a driver may echo
            text = text.replace(secret, "***")
        return text

    def _check_usable(self) -> None:
        """StoreError when closed; after a fork, a fresh pool (never share pooled sockets or files)."""
        if self._closed:
            raise StoreError(f"the store {self.url} is closed: open a new Store")
        if not (self._memory or self.read_as_empty) and os.getpid() != self._pid:
            self._engine.dispose(close=False)
            self._pid = os.getpid()

    def _connect(self, connect: Callable[[], _C], action: str) -> _C:
        """``connect()``, its database errors as StoreErrors (cannot connect / open)."""
        try:
            return connect()
        except PlacetuneError:
            raise
        except (SQLAlchemyError, sqlite3.Error) as exc:
            raise self.database_error(exc, action, connecting=True) from None

    @contextmanager
    def transaction(self, action: str, *, write: bool = False) -> Iterator[Connection]:
        """One transaction; every database exception becomes a StoreError saying what to do.

        Also the way in for code that keeps tables of its own beside the store's (a fleet's
        placement claims): ``action`` says what the transaction does, for the error message;
        ``write`` takes SQLite's write lock at the start. An ``IntegrityError`` is raised as it is.
        """
        self._check_usable()
        with self._lock:
            conn = self._connect(self._engine.connect, action)
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
                raise self.database_error(exc, action) from None
            finally:
                conn.close()

    @contextmanager
    def _sqlite_txn(self, action: str, begin: str | None = "BEGIN") -> Iterator[sqlite3.Connection]:
        """SQLite only: the pooled driver connection itself, for the statements of every evaluation.

        Through SQLAlchemy a one-row look-up cost ten times what SQLite spends on it (connection
        wrapper, transaction object, result proxy). Here the pool's connection (set up by the same
        ``connect`` hook: busy timeout, WAL) runs ``begin`` (``BEGIN``, ``BEGIN IMMEDIATE`` for a
        write, or None: one statement in autocommit) and ``COMMIT``, or ``ROLLBACK`` on any error;
        database errors become StoreErrors as in :meth:`transaction`, except ``sqlite3.IntegrityError``,
        which the caller handles.
        """
        self._check_usable()
        with self._lock:
            fairy = self._connect(self._engine.raw_connection, action)
            db: sqlite3.Connection = fairy.driver_connection  # type: ignore[assignment]
            try:
                if begin is not None:
                    db.execute(begin)
                yield db
                if db.in_transaction:
                    db.execute("COMMIT")
            except BaseException as exc:
                if db.in_transaction:
                    try:
                        db.execute("ROLLBACK")
                    except sqlite3.Error:
                        fairy.invalidate()  # unusable: the pool opens a fresh one
                if isinstance(exc, sqlite3.Error) and not isinstance(exc, sqlite3.IntegrityError):
                    raise self.database_error(exc, action) from None
                raise
            finally:
                fairy.close()

    def database_error(self, exc: BaseException, action: str, *, connecting: bool = False) -> StoreError:
        """``exc``, a database error raised while ``action``, as one password-free StoreError saying what to do.

        ``connecting``: it was raised opening a connection (the message then names the server to check).
        """
        orig = getattr(exc, "orig", None) or exc
        lines = [ln.strip() for ln in str(orig).strip().splitlines() if ln.strip()]
        text = self.scrub(lines[0] if lines else type(orig).__name__)
        low = text.lower()
        if self.dialect == "sqlite":
            path = self.sqlite_path or "(in memory)"
            if "locked" in low or "busy" in low:
                return StoreError(
                    f"database {path} is locked: {lock_holder_text(path)} holds its write lock "
                    f"for longer than the busy timeout ({self.busy_timeout:g} s) while {action}: wait for "
                    "it to finish, stop it, raise the busy timeout, or use another --storage file"
                )
            unwritable = "unable to open" in low and os.path.isfile(path) and not (
                os.access(path, os.W_OK) and os.access(os.path.dirname(os.path.abspath(path)), os.W_OK))
            if "readonly" in low or "read-only" in low or "read only" in low or unwritable:
                return StoreError(f"database file {path} is read-only ({readonly_why(self._url, path)}) while "
                                  f"{action}: use a writable --storage path, or fix the permissions of the file and "
                                  "its directory (studies, report and export read it as it is)")
            if "unable to open" in low:
                return StoreError(
                    f"cannot open database file {path} while {action} ({text}): check that its directory "
                    "exists and is writable (SQLite also creates -wal and -shm files beside it)"
                )
            if "not a database" in low or "malformed" in low or "encrypted" in low:
                return StoreError(
                    f"{path} is not a usable SQLite database ({text}): point --storage at a placetune "
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
