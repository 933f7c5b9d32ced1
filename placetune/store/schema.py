"""The placetune tables (SQLAlchemy 2.x ORM), shared by SQLite and PostgreSQL.

Every table name starts with ``pt_`` so that Optuna's own tables (``studies``,
``trials``, ...) can live in the same database. The other modules of :mod:`placetune.store`
hold the queries; this module holds only the schema.

Tables:
    ``pt_schema``: one row, the schema version of the database.
    ``pt_models``: every model a study was run on (content hash, shapes).
    ``pt_studies``: a named search with its fixed settings, constraints and machine fingerprint.
    ``pt_measurements``: one row per measured *realised* placement and cache scope;
        unique on ``(model_hash, fingerprint_hash, settings_hash, placement_key)``.
    ``pt_requests``: one row per evaluation request (cache hits included).

JSON values are stored as text (see :class:`JSONText`): SQLite has no JSON type
anyway, and PostgreSQL's ``json`` types reject ``NaN`` and ``Infinity``, which a
failed timing may legitimately contain.
"""

from __future__ import annotations

import dataclasses
import json
import math
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from placetune.errors import StoreError

__all__ = [
    "SCHEMA_VERSION",
    "Base",
    "JSONText",
    "RawJSON",
    "UTCDateTime",
    "SchemaRow",
    "ModelRow",
    "StudyRow",
    "MeasurementRow",
    "RequestRow",
    "utcnow",
    "dumps",
    "finite_or_none",
]

#: Version of the ``pt_*`` tables written by this placetune. Bump it (and add a
#: migration to :data:`placetune.store.migration.MIGRATIONS`) whenever a table changes.
SCHEMA_VERSION = 2


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(timezone.utc)


def _json_default(value: Any) -> Any:
    """numpy scalars and arrays, paths and sets as plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    tolist = getattr(value, "tolist", None)
    if callable(tolist):  # numpy scalar or array
        return tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if hasattr(value, "__fspath__"):
        return str(value)
    raise TypeError(f"{type(value).__name__} value {value!r} cannot be stored as JSON")


def dumps(value: Any) -> str:
    """Compact JSON text; ``NaN``/``Infinity`` allowed (Python's ``json`` reads them back).

    numpy scalars/arrays become numbers/lists, paths strings, sets sorted lists.

    Raises:
        TypeError: a value JSON cannot represent.
    """
    return _ENCODER.encode(value)


_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=True, default=_json_default)


class RawJSON(str):
    """JSON text already encoded: :class:`JSONText` stores it as it is (no second encoding)."""

    __slots__ = ()


class JSONText(TypeDecorator[Any]):
    """A JSON value stored as text, identical on every database.

    Floats round-trip exactly (``repr`` precision), including ``NaN`` and ``±Infinity``.
    Tuples come back as lists and non-string dict keys as strings, as with any JSON.
    """

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        if value is None:
            return None
        return str(value) if isinstance(value, RawJSON) else dumps(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        try:
            return json.loads(value)
        except (ValueError, TypeError, RecursionError):
            shown = str(value)[:40]
            raise StoreError(f"a stored JSON value is corrupt ({shown!r}...): the database was edited or damaged; "
                             "restore it from a backup or use a new database") from None


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp stored in UTC and always read back timezone-aware.

    SQLite keeps no time zone, so values are converted to UTC before storing and
    labelled UTC when read.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def result_processor(self, dialect: Dialect, coltype: Any) -> Any:
        inner = super().result_processor(dialect, coltype)
        if inner is None:
            return None

        def process(value: Any) -> Any:
            try:
                return inner(value)
            except (ValueError, TypeError):
                raise StoreError(f"a stored timestamp is corrupt ({str(value)[:40]!r}): the database was edited or "
                                 "damaged; restore it from a backup or use a new database") from None

        return process

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        value = value.astimezone(timezone.utc)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)


def finite_or_none(value: float | None) -> float | None:
    """``value`` as a float when finite, else None (for indexed numeric columns)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


class Base(DeclarativeBase):
    """Declarative base of the placetune tables (its own ``MetaData``, nothing of Optuna's)."""


class SchemaRow(Base):
    """``pt_schema``: the one row that says which placetune schema the database has."""

    __tablename__ = "pt_schema"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[int] = mapped_column(Integer, nullable=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, default=utcnow)


class ModelRow(Base):
    """``pt_models``: a network, identified by :attr:`placetune.model.model.Model.hash`."""

    __tablename__ = "pt_models"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    hash: Mapped[str] = mapped_column(String(64), nullable=False, unique=True)
    name: Mapped[str] = mapped_column(String(255), nullable=False)
    path: Mapped[str | None] = mapped_column(Text, nullable=True)
    shapes: Mapped[Any] = mapped_column(JSONText, nullable=False)
    n_layers: Mapped[int] = mapped_column(Integer, nullable=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, default=utcnow)


class StudyRow(Base):
    """``pt_studies``: a named search; its settings are fixed when it is created."""

    __tablename__ = "pt_studies"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(255), nullable=False, unique=True)
    model_id: Mapped[int] = mapped_column(ForeignKey("pt_models.id"), nullable=False)
    platform: Mapped[str] = mapped_column(String(64), nullable=False)
    backend: Mapped[str] = mapped_column(String(64), nullable=False)
    mode: Mapped[str] = mapped_column(String(32), nullable=False)
    objective: Mapped[str] = mapped_column(String(32), nullable=False)
    precision: Mapped[str] = mapped_column(String(16), nullable=False)
    batch: Mapped[int] = mapped_column(Integer, nullable=False)
    settings: Mapped[Any] = mapped_column(JSONText, nullable=False)
    settings_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    fingerprint: Mapped[Any] = mapped_column(JSONText, nullable=False)
    fingerprint_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    simulated: Mapped[bool] = mapped_column(Boolean, nullable=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, default=utcnow)
    #: the bounds of a constrained study (``["latency<=0.8"]``; ``[]``: none). NULL: a study of
    #: schema v1, which did not record them (filled in by the next run that opens the study).
    constraints: Mapped[Any] = mapped_column(JSONText, nullable=True)


class MeasurementRow(Base):
    """``pt_measurements``: one measured realised placement in one cache scope.

    The cache scope is ``(model_hash, fingerprint_hash, settings_hash)``; with the
    realised ``placement_key`` it is unique, so a placement is measured once across
    studies, agents and processes; re-measuring it (more builds) rewrites the row in place. ``payload`` holds the rest of
    ``Measurement.to_dict(timeline=True)`` so the measurement round-trips exactly;
    the numeric columns are for queries (non-finite values are NULL there and exact
    in ``payload``).
    """

    __tablename__ = "pt_measurements"
    __table_args__ = (
        UniqueConstraint(
            "model_hash", "fingerprint_hash", "settings_hash", "placement_key", name="uq_pt_measurements_key"
        ),
        Index("ix_pt_measurements_study", "study_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("pt_studies.id"), nullable=False)
    model_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    fingerprint_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    settings_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    placement_key: Mapped[str] = mapped_column(String(64), nullable=False)
    requested_key: Mapped[str] = mapped_column(String(64), nullable=False)
    requested: Mapped[Any] = mapped_column(JSONText, nullable=True)
    realized: Mapped[Any] = mapped_column(JSONText, nullable=True)
    status: Mapped[str] = mapped_column(String(32), nullable=False)
    failure_class: Mapped[str | None] = mapped_column(String(128), nullable=True)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    latency_samples: Mapped[Any] = mapped_column(JSONText, nullable=False)
    median_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    p90_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    p99_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    throughput_fps: Mapped[float | None] = mapped_column(Float, nullable=True)
    energy_mj: Mapped[float | None] = mapped_column(Float, nullable=True)
    build_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    agent: Mapped[str | None] = mapped_column(String(128), nullable=True)
    trial_number: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, default=utcnow)
    simulated: Mapped[bool] = mapped_column(Boolean, nullable=False)
    payload: Mapped[Any] = mapped_column(JSONText, nullable=False)


class RequestRow(Base):
    """``pt_requests``: every evaluation request of a study, cache hits included.

    Kept cheap: no JSON, two secondary indexes (by study for history, by requested
    key so a requested placement already realised once need not be built again).
    """

    __tablename__ = "pt_requests"
    __table_args__ = (
        Index("ix_pt_requests_study", "study_id"),
        Index("ix_pt_requests_requested", "requested_key"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("pt_studies.id"), nullable=False)
    requested_key: Mapped[str] = mapped_column(String(64), nullable=False)
    placement_key: Mapped[str] = mapped_column(String(64), nullable=False)
    measurement_id: Mapped[int] = mapped_column(ForeignKey("pt_measurements.id"), nullable=False)
    agent: Mapped[str | None] = mapped_column(String(128), nullable=True)
    trial_number: Mapped[int | None] = mapped_column(Integer, nullable=True)
    cache_hit: Mapped[bool] = mapped_column(Boolean, nullable=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False, default=utcnow)
