"""Locks between placetune processes on one database: advisory locks on a server, one writer on a SQLite file."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import logging
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from placetune.errors import StoreError

if TYPE_CHECKING:
    from placetune.store.store import Store

__all__ = ["lock_key", "schema_lock", "SingleWriterLock"]

log = logging.getLogger(__name__)


def lock_key(name: str) -> int:
    """A signed 64-bit advisory-lock key for a name."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


@contextmanager
def schema_lock(store: "Store", timeout: float = 120.0) -> Iterator[None]:
    """Serialise table creation between workers starting at once (a session advisory lock).

    Creating tables is not safe to run concurrently on PostgreSQL (two ``CREATE TABLE``
    of one name, Alembic's version table of Optuna's storage): the workers take turns.
    SQLite and other databases: no lock.
    """
    dialect = store.dialect
    if dialect not in ("postgresql", "mysql", "mariadb"):
        yield
        return
    key = lock_key("placetune-schema")
    try:
        conn = store.engine.connect()
    except SQLAlchemyError as exc:
        raise store._translate(exc, "connecting", connecting=True) from None
    try:
        t_end = time.monotonic() + timeout
        while True:
            if dialect == "postgresql":
                got = conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar()
            else:
                got = conn.execute(text("SELECT GET_LOCK(:n, 0)"), {"n": f"pt{key}"}).scalar() == 1
            conn.commit()
            if got:
                break
            if time.monotonic() > t_end:
                raise StoreError(f"another worker has been creating the tables of {store.url} for more than "
                                 f"{timeout:g} s: check that database and the other workers")
            time.sleep(0.05)
        try:
            yield
        finally:
            if dialect == "postgresql":
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
            else:
                conn.execute(text("SELECT RELEASE_LOCK(:n)"), {"n": f"pt{key}"})
            conn.commit()
    finally:
        conn.close()


class SingleWriterLock:
    """An exclusive lock that makes a SQLite database refuse a second ``placetune tune``.

    SQLite serialises writers with short locks; two tuners on one file would each wait on
    the other and eventually fail with "database is locked" (and Optuna's RDB storage
    does not support concurrent SQLite writers). The lock is ``flock`` on
    ``<database>.tune-lock`` (released by the kernel if the process dies; the file is
    removed on release).

    The lock belongs to the file, not to the name it was opened by: the path is resolved
    (symlinks followed) first, so two runs through a symlink and its target share one lock
    (issue 18 item 3).

    Args:
        db_path: the SQLite database file.
    """

    def __init__(self, db_path: str | os.PathLike[str]) -> None:
        self.db_path = Path(db_path)
        try:
            real = Path(os.path.realpath(self.db_path))
        except (OSError, ValueError):
            real = self.db_path
        self.path = Path(str(real) + ".tune-lock")
        self._fd: int | None = None

    def acquire(self) -> "SingleWriterLock":
        """Take the lock.

        Raises:
            StoreError: another process holds it (the message names it and says what to do).
        """
        for _ in range(20):
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                # a read-only directory: the store reports that itself; no lock possible
                log.debug("cannot create %s (%s): no single-writer lock", self.path, exc)
                return self
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                holder = ""
                try:
                    holder = os.pread(fd, 400, 0).decode(errors="replace").strip()
                except OSError:
                    pass
                os.close(fd)
                if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    log.debug("flock %s: %s", self.path, exc)
                    return self
                raise StoreError(
                    f"SQLite database {self.db_path} is already being written by another placetune tune"
                    f"{' (' + holder + ')' if holder else ''}: SQLite is for one writer. Wait for it to finish, "
                    "use another --storage file, or run several workers on one study with a PostgreSQL database: "
                    "--storage postgresql+psycopg://user@host/dbname (see docs/fleet.md)"
                ) from None
            try:  # the file may have been removed and re-created by a releasing holder: re-check
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except OSError:
                same = False
            if not same:
                os.close(fd)
                continue
            info = f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S')}"
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, info.encode(), 0)
            except OSError:
                pass
            self._fd = fd
            return self
        return self  # pragma: no cover - pathological churn: go on without the lock

    def release(self) -> None:
        """Release (and remove) the lock; safe to call twice."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.unlink(self.path)
        except OSError:
            pass
        os.close(fd)

    def __enter__(self) -> "SingleWriterLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
