"""SQLite specifics of the store: connection pragmas and transactions, and why a file is locked or read-only."""

from __future__ import annotations

import logging
import os
import sqlite3
from typing import Any
from urllib.parse import parse_qsl, quote

from sqlalchemy import Connection, event
from sqlalchemy.engine import URL, Engine

from placetune.store.url import mask_url

__all__ = ["install_sqlite_hooks", "readonly_url", "readonly_why", "lock_holder_text"]

log = logging.getLogger(__name__)

#: WAL pages (4 KiB by default) between automatic checkpoints; SQLite's default is 1,000
WAL_AUTOCHECKPOINT_PAGES = 10_000


def install_sqlite_hooks(engine: Engine, url: URL, *, busy_timeout: float, memory: bool, readonly: bool = False) -> None:
    """Set up every new connection (busy timeout, foreign keys, WAL) and make writes ``BEGIN IMMEDIATE``.
    ``readonly``: a store that only reads keeps the file's journal mode (switching it to WAL rewrites the
    file's header: another program's database, which the store then refuses, came back changed)."""
    busy_ms = int(busy_timeout * 1000)

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
                if str(mode).lower() != "wal" and not readonly:
                    try:
                        cur.execute("PRAGMA journal_mode = WAL")
                    except sqlite3.OperationalError as exc:  # read-only file: keep its mode
                        log.debug("cannot switch %s to WAL: %s", mask_url(url), exc)
                cur.execute("PRAGMA synchronous = NORMAL")
                # checkpoint (and fsync) every ~40 MB of WAL instead of every 4 MB: a search writing a
                # row per evaluation spent a fifth of its store time in checkpoints; durability is the same
                cur.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}")
        finally:
            cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get("placetune_write", False)
        # straight to the driver: a statement of its own through SQLAlchemy costs more than the
        # look-up it opens (sqlite3 errors are translated by the store like SQLAlchemy's)
        conn.connection.driver_connection.execute("BEGIN IMMEDIATE" if write else "BEGIN")


def readonly_url(url: URL) -> URL:
    """The URL that reads the SQLite file of ``url`` where it cannot be written (read-only media, a
    folder without write permission): ``url`` itself where the file and its folder are writable.

    SQLite opens a WAL database read-write, and even a reader needs to create its ``-shm`` file beside
    it: on read-only media nothing could be read. Such a file is opened as a ``file:`` URI with
    ``mode=ro``, and with ``immutable=1`` too when no write-ahead log holds pages the file lacks (then
    no ``-shm`` is needed; read-only media cannot change under the reader). A log with pages and no
    ``-shm`` to read it by cannot be read without writing: the open fails, and the store says so.
    """
    db = url.database or ""
    if db.startswith("file:") or not db or db == ":memory:":
        return url  # a URI of the caller's own: its options are the caller's
    path = os.path.abspath(db)
    if not os.path.isfile(path) or (os.access(path, os.W_OK) and os.access(os.path.dirname(path), os.W_OK)):
        return url
    try:
        logged = os.path.getsize(path + "-wal") > 0
    except OSError:
        logged = False
    query = {k: v for k, v in url.query.items() if k not in ("mode", "immutable", "uri")}
    query.update({"uri": "true", "mode": "ro", **({} if logged else {"immutable": "1"})})
    return url.set(database="file:" + quote(path), query=query)


def readonly_why(url: URL, path: str) -> str:
    """Why the SQLite file at ``path`` (opened through ``url``) refuses writes, best effort."""
    query = dict(parse_qsl((url.database or "").partition("?")[2]))
    query.update({k: v for k, v in url.query.items() if isinstance(v, str)})
    if query.get("mode") == "ro" or query.get("immutable") == "1":
        return "it was opened read-only with mode=ro"
    why = []
    if os.path.exists(path) and not os.access(path, os.W_OK):
        why.append("no write permission on the file")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.access(directory, os.W_OK):
        why.append(f"no write permission on its directory {directory}, where SQLite keeps the -wal and -shm "
                   "files")
    return "; ".join(why) or "the file system or SQLite refused writes"


def lock_holder_text(path: str) -> str:
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
    if any(pid != os.getpid() for pid in pids):
        # this process's own connection holds WRITE locks on slots of the -shm file (a reader's mark) while
        # another process holds the write lock: name only the others, never this process as a holder
        pids = [pid for pid in pids if pid != os.getpid()]
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
