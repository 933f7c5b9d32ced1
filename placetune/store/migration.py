"""Creating the placetune tables in a database, and upgrading those of an older schema version."""

from __future__ import annotations

import logging
from collections.abc import Callable

from sqlalchemy import Connection, insert, select, text
from sqlalchemy.exc import IntegrityError

from placetune.errors import StoreError
from placetune.store.connection import ConnectionMixin
from placetune.store.schema import SCHEMA_VERSION, Base, SchemaRow, utcnow

__all__ = ["MIGRATIONS", "SchemaMixin"]

log = logging.getLogger(__name__)


def _v1_to_v2(conn: Connection) -> None:
    """v2 records a study's constraints (``pt_studies.constraints``, JSON text). A v1 study gets
    NULL, "not recorded": the next run that opens it with its constraints fills them in."""
    conn.execute(text("ALTER TABLE pt_studies ADD COLUMN constraints TEXT"))


#: ``MIGRATIONS[v](conn)`` upgrades the ``pt_*`` tables from schema ``v`` to ``v + 1``
#: inside the caller's transaction.
MIGRATIONS: dict[int, Callable[[Connection], None]] = {1: _v1_to_v2}


class SchemaMixin(ConnectionMixin):
    """The schema of a :class:`~placetune.store.store.Store`: created or migrated when it opens."""

    def _ensure_schema(self) -> None:
        with self.transaction("opening the database") as conn:
            version = self._schema_version(conn)
        if version == SCHEMA_VERSION:
            return
        self._check_version(version)
        version = self._check_tables(version)
        if version == SCHEMA_VERSION:  # another process created them since the first read
            return
        self._check_version(version)
        if self.readonly and version is None and self._holds_nothing():  # a new database, read as one
            self._read_as_empty()
            with self.transaction("opening the database", write=True) as conn:
                self._create(conn)
            return
        # a file that cannot be written: its tables cannot be created nor upgraded; a database only read
        # (studies, export, report) never gets placetune's tables: it may be another program's
        if self.opened_readonly or (self.readonly and version is None):
            what = "no placetune tables" if version is None else f"placetune schema v{version}, older than " \
                f"this placetune's (v{SCHEMA_VERSION})"
            how = "it is opened read-only" if self.opened_readonly else "this command only reads it"
            raise StoreError(f"database {self.url} has {what}, and {how}: point --storage at the "
                             "database placetune tune wrote" + ("" if version is None else
                                                               ", or run placetune tune on it once to upgrade it"))
        for attempt in range(3):
            try:
                with self.transaction("creating the placetune tables", write=True) as conn:
                    self._create_or_migrate(conn)
                return
            except (IntegrityError, StoreError) as exc:
                # another process may have created the tables at the same time
                with self.transaction("opening the database") as conn:
                    version = self._schema_version(conn)
                if version == SCHEMA_VERSION:
                    return
                if isinstance(exc, StoreError) or attempt == 2:
                    raise exc if isinstance(exc, StoreError) else self.database_error(exc, "creating tables") from None

    def _check_tables(self, version: int | None) -> int | None:
        """Refuse placetune tables without their schema version (``pt_schema`` dropped or emptied): the
        tables' version is unknown, and recording this placetune's would call tables of another version its own.
        Returns the version, read again after the tables are seen: a process that created them since
        ``version`` was read committed their version with them (one transaction), so tables with no version
        then are damaged, never a creation in progress."""
        if version is not None:
            return version
        with self.transaction("opening the database") as conn:
            have = [t for t in Base.metadata.tables if t != SchemaRow.__tablename__ and conn.dialect.has_table(conn, t)]
            if have:
                version = self._schema_version(conn)
        if version is not None:
            return version
        if have:
            raise StoreError(f"database {self.url} has placetune tables ({', '.join(sorted(have))}) but no schema "
                             f"version (pt_schema is missing or empty): the database was edited or damaged; restore "
                             "it from a backup or use a new database")
        return None

    def _create_or_migrate(self, conn: Connection) -> None:
        version = self._schema_version(conn)
        self._check_version(version)
        if version is None:
            self._create(conn)
            log.info("created placetune schema v%d in %s", SCHEMA_VERSION, self.url)
        elif version < SCHEMA_VERSION:
            for v in range(version, SCHEMA_VERSION):
                MIGRATIONS[v](conn)
                log.info("migrated placetune schema v%d -> v%d in %s", v, v + 1, self.url)
            Base.metadata.create_all(conn)
            conn.execute(SchemaRow.__table__.update().where(SchemaRow.id == 1).values(version=SCHEMA_VERSION))

    @staticmethod
    def _create(conn: Connection) -> None:
        Base.metadata.create_all(conn)
        if conn.scalar(select(SchemaRow.version).where(SchemaRow.id == 1)) is None:
            conn.execute(insert(SchemaRow).values(id=1, version=SCHEMA_VERSION, created_at=utcnow()))

    def _holds_nothing(self) -> bool:
        """True for an SQLite database with nothing in it (no table, index, view or trigger): the file SQLite
        creates on first opening it, with or without the header of WAL mode."""
        if self.dialect != "sqlite":
            return False
        with self.transaction("opening the database") as conn:
            return not conn.scalar(text("SELECT COUNT(*) FROM sqlite_master"))

    @staticmethod
    def _schema_version(conn: Connection) -> int | None:
        if not conn.dialect.has_table(conn, SchemaRow.__tablename__):
            return None
        return conn.scalar(select(SchemaRow.version).where(SchemaRow.id == 1))

    def _check_version(self, version: int | None) -> None:
        if version is None or version == SCHEMA_VERSION:
            return
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise StoreError(f"database {self.url} has a corrupt placetune schema version {str(version)[:40]!r} "
                             "(pt_schema.version must be an integer >= 0): the database was edited or damaged")
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
        with self.transaction("reading the schema version") as conn:
            version = self._schema_version(conn)
        if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
            self._check_version(version)  # a corrupt version: a one-line StoreError
        return int(version or 0)

