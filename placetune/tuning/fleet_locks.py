"""Locks between placetune processes on one database: advisory locks on a server, one writer on a SQLite file."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import logging
import os
import re
import socket
import stat
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
        raise store.database_error(exc, "connecting", connecting=True) from None
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

    The lock belongs to the file, not to the name it was opened by:

    * the path is resolved (symlinks followed) first, so two runs through a symlink and its
      target share one lock;
    * a database with several hard links is refused: each name would get its own lock and its
      own write-ahead log, and two runs would write at once, losing one run's measurements;
    * the lock file is opened with ``O_NOFOLLOW`` and must be a regular file with one link that
      is empty or holds a placetune lock line: a planted symlink or hard link to another file is
      refused, never truncated, written or removed; release removes the lock file only while it
      is still the file this process locked. The lock line records the database's
      ``(device, inode)``;
    * the database file itself is ``flock``-ed too, through a descriptor held for the whole run
      (SQLite's own locks are ``fcntl`` byte ranges, which ``flock`` does not touch on Linux):
      deleting ``<database>.tune-lock`` from under a run does not let a second run write the
      same database at once.

    Args:
        db_path: the SQLite database file.
    """

    _LINE = re.compile(rb"pid \d+ on .* since [-0-9: ]+( database \d+:\d+)?")

    def __init__(self, db_path: str | os.PathLike[str]) -> None:
        self.db_path = Path(db_path)
        try:
            real = Path(os.path.realpath(self.db_path))
        except (OSError, ValueError):
            real = self.db_path
        self.path = Path(str(real) + ".tune-lock")
        self._fd: int | None = None
        self._db_fd: int | None = None  # the database file's own flock, held while the lock is

    def _identity(self) -> str:
        """``device:inode`` of the database (refusing one with several hard links); empty before it exists."""
        try:
            st = os.stat(self.db_path)
        except (OSError, ValueError):
            return ""
        if st.st_nlink > 1:
            raise StoreError(
                f"SQLite database {self.db_path} has {st.st_nlink} hard links: each name would take its own lock "
                "and write-ahead log, and two runs could write at once and lose measurements. Use a single name "
                "(remove the other links, or copy the file)")
        return f"{st.st_dev}:{st.st_ino}"

    def _refuse(self, what: str) -> StoreError:
        return StoreError(f"{self.path} {what}: it is not a placetune lock file and is left alone; remove it "
                          f"if nothing else needs it, then run again")

    def acquire(self) -> "SingleWriterLock":
        """Take the lock.

        Raises:
            StoreError: another process holds it (the message names it and says what to do),
                the database has several hard links, or the lock file's name holds something
                else (a symlink, a file with other links or other content).
        """
        identity = self._identity()
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        for _ in range(20):
            try:
                fd = os.open(self.path, flags, 0o644)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise self._refuse("is a symbolic link") from None
                if os.path.lexists(self.path) and not os.path.isfile(self.path):
                    raise self._refuse("is not a regular file") from None
                # a read-only directory: the store reports that itself; no lock possible
                log.debug("cannot create %s (%s): no single-writer lock", self.path, exc)
                return self
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    raise self._refuse("is not a regular file")
                if st.st_nlink != 1:
                    raise self._refuse(f"has {st.st_nlink} hard links")
                if st.st_size > 4096:
                    raise self._refuse("is larger than a lock line")
            except BaseException:
                os.close(fd)
                raise
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
                    f"{' (' + holder[:200] + ')' if holder else ''}: SQLite is for one writer. Wait for it to finish, "
                    "use another --storage file, or run several workers on one study with a PostgreSQL database: "
                    "--storage postgresql+psycopg://user@host/dbname (see docs/fleet.md)"
                ) from None
            try:  # the file may have been removed and re-created by a releasing holder: re-check
                now = os.lstat(self.path)
                same = (now.st_dev, now.st_ino) == (os.fstat(fd).st_dev, os.fstat(fd).st_ino)
            except OSError:
                same = False
            if not same:
                os.close(fd)
                continue
            try:
                old = os.pread(fd, 4096, 0).strip()
            except OSError:
                old = b""
            if old and not self._LINE.fullmatch(old):
                os.close(fd)
                raise self._refuse("holds something else than a lock line")
            try:
                self._db_fd = self._lock_database(holder=old.decode(errors="replace"))
            except BaseException:
                os.close(fd)
                raise
            info = f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S')}"
            if identity:
                info += f" database {identity}"
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, info.encode(), 0)
            except OSError:
                pass
            self._fd = fd
            return self
        return self  # pragma: no cover - pathological churn: go on without the lock

    def _lock_database(self, holder: str) -> int | None:
        """``flock`` the database file itself (its descriptor returned, kept open); None when it
        does not exist yet or cannot be opened (the store reports that itself).

        Raises:
            StoreError: another process holds it: a second run whose lock file was removed.
        """
        try:
            fd = os.open(self.db_path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                return None
            raise StoreError(
                f"SQLite database {self.db_path} is already being written by another placetune tune (it holds a "
                f"lock on the database file itself{'; ' + holder[:200] if holder else ''}; its {self.path.name} was "
                "removed): SQLite is for one writer. Wait for it to finish or use another --storage file") from None
        return fd

    def release(self) -> None:
        """Release (and remove) the lock; safe to call twice. The name is removed only while it
        is still the file this process locked."""
        fd, self._fd = self._fd, None
        db_fd, self._db_fd = self._db_fd, None
        if db_fd is not None:
            os.close(db_fd)
        if fd is None:
            return
        try:
            mine, now = os.fstat(fd), os.lstat(self.path)
            if (mine.st_dev, mine.st_ino) == (now.st_dev, now.st_ino):
                os.unlink(self.path)
        except OSError:
            pass
        os.close(fd)

    def __enter__(self) -> "SingleWriterLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
