"""Finished trials written straight into an Optuna RDB study's tables, many at a time.

``Study.add_trials`` adds one trial at a time, and Optuna's RDB storage checks every parameter
against the study's earlier ones with queries of its own: with the 56 parameters of a
ResNet-50 study, a trial cost 0.2 s after 600 trials (the check scans the earlier trials'
parameters), which held a simulated search to a few trials per second.
:class:`TrialRows` writes the rows ``add_trial`` writes (``trials``, ``trial_params``,
``trial_values``, ``trial_user_attributes``, ``trial_system_attributes``) with one statement
per table, inside the caller's transaction, so that a placetune study's measurements and
its Optuna trials are written together or not at all.

The rows are those of the installed Optuna: the tables and the value conversions come from
its ORM models (``TrialModel``'s start and end times, stored as naive UTC by Optuna 5 and as
local time before; enum columns by name; attribute values as JSON text), the trial numbers
count the study's earlier trials as ``add_trial`` does, and each parameter's distribution is
checked once against the one the study already stores for it. :func:`supported` says whether
the installed Optuna has the table layout this module knows; where it does not, callers use
``add_trials``.

Optuna is imported here lazily (never by ``import placetune``).
"""

from __future__ import annotations

import json
import logging
import math
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from placetune._lazy import lazy_import

if TYPE_CHECKING:
    import optuna
    from sqlalchemy import Connection

if TYPE_CHECKING:
    import optuna.distributions as optuna_distributions
    import optuna.storages._rdb.models as optuna_rdb_models
    import sqlalchemy
    import sqlalchemy.dialects.sqlite as sqlalchemy_sqlite
else:
    optuna_distributions = lazy_import("optuna.distributions")
    optuna_rdb_models = lazy_import("optuna.storages._rdb.models")
    sqlalchemy = lazy_import("sqlalchemy")
    sqlalchemy_sqlite = lazy_import("sqlalchemy.dialects.sqlite")

__all__ = ["FinishedTrial", "TrialRows", "supported"]

_encode_string = json.encoder.encode_basestring_ascii  # json.dumps of a str (ensure_ascii, its default)

log = logging.getLogger(__name__)

#: The columns this module writes, per table (their ids are the tables' primary keys).
_LAYOUT = {
    "trials": ("trial_id", "number", "study_id", "state", "datetime_start", "datetime_complete"),
    "trial_params": ("param_id", "trial_id", "param_name", "param_value", "distribution_json"),
    "trial_values": ("trial_value_id", "trial_id", "objective", "value", "value_type"),
    "trial_user_attributes": ("trial_user_attribute_id", "trial_id", "key", "value_json"),
    "trial_system_attributes": ("trial_system_attribute_id", "trial_id", "key", "value_json"),
}


@dataclass
class FinishedTrial:
    """A finished trial as :class:`TrialRows` writes it: the fields of Optuna's ``FrozenTrial`` that
    ``add_trial`` stores (a ``FrozenTrial`` is written alike). Its values are not validated
    (``optuna.trial.create_trial`` does that, and costs more than writing the rows).

    Attributes:
        state: ``TrialState.COMPLETE``, ``PRUNED``...
        values: the objective values (None: none).
        params: parameter name -> value (external representation).
        distributions: parameter name -> its distribution.
        user_attrs, system_attrs: JSON-serialisable attributes.
        datetime_start, datetime_complete: local times, as Optuna keeps them.
    """

    state: Any
    values: list[float] | None
    params: dict[str, Any]
    distributions: dict[str, Any]
    user_attrs: dict[str, Any]
    system_attrs: dict[str, Any]
    datetime_start: datetime | None
    datetime_complete: datetime | None
    intermediate_values: dict[int, float] = field(default_factory=dict)


@lru_cache(maxsize=1)
def supported() -> bool:
    """True when the installed Optuna's RDB tables are the ones this module writes."""
    try:
        from optuna.storages._rdb import models
    except ImportError:
        return False
    tables = models.BaseModel.metadata.tables
    return all(name in tables and set(tables[name].columns.keys()) == set(cols) for name, cols in _LAYOUT.items())


class TrialRows:
    """Writes finished trials of one Optuna study into its RDB tables (see the module docstring).

    Args:
        study_id: the study's ``studies.study_id`` (``study._study_id``).

    Example:
        ``TrialRows(study._study_id).write(connection, [optuna.trial.create_trial(...)])``
        inside a transaction of the study's database, then commit.
    """

    def __init__(self, study_id: int) -> None:
        self.study_id = int(study_id)
        self._models = optuna_rdb_models
        tables = optuna_rdb_models.BaseModel.metadata.tables
        self._tables = {name: tables[name] for name in _LAYOUT}
        trials = self._tables["trials"]
        mapper = optuna_rdb_models.TrialModel.__mapper__
        # the attributes that hold the stored values (Optuna 5: naive UTC behind local-time properties)
        self._time_attrs = tuple(mapper.get_property_by_column(trials.c[c]).key
                                 for c in ("datetime_start", "datetime_complete"))
        self._known: dict[str, Any] = {}  # parameter name -> the distribution the study stores for it
        self._json: dict[int, tuple[Any, str, dict[Any, Any]]] = {}  # id(dist) -> (it, its JSON, internal values)
        self._sql: dict[str, tuple[str, tuple[tuple[int, Any], ...]]] = {}
        dialect = sqlalchemy_sqlite.dialect()  # SQLite: values bound as SQLAlchemy binds them (enum names, times, floats)
        self._procs = {(name, c): self._tables[name].c[c].type.dialect_impl(dialect).bind_processor(dialect)
                       for name, cols in _LAYOUT.items() for c in cols}
        self._param_proc = self._procs["trial_params", "param_value"]

    # ------------------------------------------------------------------ writing
    def write(self, conn: "Connection | sqlite3.Connection",
              trials: Sequence["FinishedTrial | optuna.trial.FrozenTrial"]) -> list[int | None]:
        """Insert finished trials in order; returns each one's ``trial_id`` (None: not written,
        its parameters have other choices than the study's; a warning says so).

        ``conn`` is the pooled SQLite driver connection or a SQLAlchemy connection, in a write
        transaction the caller commits.
        """
        if not trials:
            return []
        raw = isinstance(conn, sqlite3.Connection)
        keep = [t for t in trials if self._compatible(conn, raw, t)]
        number = self._count(conn, raw)
        trial_ids = self._insert_trials(conn, raw, [(number + i, self.study_id, t.state, *self._times(t))
                                                    for i, t in enumerate(keep)])
        rows: dict[str, list[tuple[Any, ...]]] = {name: [] for name in _LAYOUT if name != "trials"}
        params, values, user, system = (rows["trial_params"], rows["trial_values"], rows["trial_user_attributes"],
                                        rows["trial_system_attributes"])
        to_stored = self._models.TrialValueModel.value_to_stored_repr
        for trial_id, t in zip(trial_ids, keep):
            if t.values is not None:  # add_trial: every objective's value (Optuna: one objective -> objective 0)
                values += [(trial_id, objective, *to_stored(v)) for objective, v in enumerate(t.values)]
            dists = t.distributions
            params += [(trial_id, name, *self._param(dists[name], value, raw)) for name, value in t.params.items()]
            user += [(trial_id, key, _json(value)) for key, value in t.user_attrs.items()]
            system += [(trial_id, key, _json(value)) for key, value in t.system_attrs.items()]
            if t.intermediate_values:
                raise ValueError("TrialRows writes finished trials without intermediate values")
        for name, batch in rows.items():
            if batch:
                self._insert_many(conn, raw, name, batch)
        written = dict(zip(map(id, keep), trial_ids))
        return [written.get(id(t)) for t in trials]

    def _compatible(self, conn: Any, raw: bool, trial: "FinishedTrial | optuna.trial.FrozenTrial") -> bool:
        for name, dist in trial.distributions.items():
            known = self._known.get(name)
            if known is None:  # first time here: the distribution the study already stores, if any
                stored = self._stored_distribution(conn, raw, name)
                known = self._known[name] = dist if stored is None else optuna_distributions.json_to_distribution(stored)
            if known is dist or known == dist:
                continue
            try:
                optuna_distributions.check_distribution_compatibility(known, dist)
            except ValueError as exc:  # a parameter stored with other choices (another granularity)
                log.warning("not added to the Optuna study (study_id %d): %s", self.study_id, exc)
                return False
        return True

    # ------------------------------------------------------------- statements
    def _times(self, trial: "FinishedTrial | optuna.trial.FrozenTrial") -> tuple[Any, Any]:
        """The stored values of a trial's start and end times, converted by Optuna's own model."""
        m = self._models.TrialModel()
        m.datetime_start = trial.datetime_start
        m.datetime_complete = trial.datetime_complete
        return getattr(m, self._time_attrs[0]), getattr(m, self._time_attrs[1])

    def _param(self, dist: Any, value: Any, raw: bool) -> tuple[Any, str]:
        """A parameter's stored value (its internal representation; on SQLite bound as SQLAlchemy
        binds it) and its distribution's JSON, as Optuna stores them (memoised per distribution
        object: a study's trials share them)."""
        hit = self._json.get(id(dist))
        if hit is None or hit[0] is not dist:
            hit = self._json[id(dist)] = (dist, optuna_distributions.distribution_to_json(dist), {})
        memo = hit[2]
        try:
            stored = memo.get((value, raw))
        except TypeError:  # an unhashable choice
            return self._bind_param(dist.to_internal_repr(value), raw), hit[1]
        if stored is None:
            stored = memo[(value, raw)] = self._bind_param(dist.to_internal_repr(value), raw)
        return stored, hit[1]

    def _bind_param(self, internal: Any, raw: bool) -> Any:
        proc = self._param_proc if raw else None
        return internal if proc is None or internal is None else proc(internal)

    def _count(self, conn: Any, raw: bool) -> int:
        """The study's trials so far (the next trial's number), its row locked on a server as Optuna locks it."""
        trials, studies = self._tables["trials"], self._models.StudyModel.__table__
        if raw:
            return int(conn.execute("SELECT COUNT(trial_id) FROM trials WHERE study_id = ?",
                                    (self.study_id,)).fetchone()[0])
        conn.execute(sqlalchemy.select(studies.c.study_id).where(studies.c.study_id == self.study_id).with_for_update())
        return int(conn.scalar(sqlalchemy.select(sqlalchemy.func.count(trials.c.trial_id)).where(trials.c.study_id == self.study_id)))

    def _stored_distribution(self, conn: Any, raw: bool, name: str) -> str | None:
        trials, params = self._tables["trials"], self._tables["trial_params"]
        if raw:
            row = conn.execute("SELECT p.distribution_json FROM trial_params p JOIN trials t ON t.trial_id = "
                               "p.trial_id WHERE t.study_id = ? AND p.param_name = ? LIMIT 1",
                               (self.study_id, name)).fetchone()
            return None if row is None else row[0]
        return conn.scalar(sqlalchemy.select(params.c.distribution_json).join(trials, trials.c.trial_id == params.c.trial_id)
                           .where(trials.c.study_id == self.study_id, params.c.param_name == name).limit(1))

    def _insert_trials(self, conn: Any, raw: bool, rows: list[tuple[Any, ...]]) -> list[int]:
        """Insert ``trials`` rows; their ids (SQLite: the ones after the largest, as it would
        give them, in the caller's write transaction; a server: each as the database gives it)."""
        if not rows:
            return []
        if raw:
            first = int(conn.execute("SELECT COALESCE(MAX(trial_id), 0) FROM trials").fetchone()[0]) + 1
            ids = list(range(first, first + len(rows)))
            sql, procs = self._raw_insert("trials", with_id=True)
            conn.executemany(sql, [_bind(procs, (i, *r)) for i, r in zip(ids, rows)])
            return ids
        table = self._tables["trials"]
        cols = _LAYOUT["trials"][1:]
        stmt = sqlalchemy.insert(table).returning(table.c.trial_id)
        return [int(conn.execute(stmt, dict(zip(cols, r))).scalar_one()) for r in rows]

    def _insert_many(self, conn: Any, raw: bool, name: str, rows: list[tuple[Any, ...]]) -> None:
        if raw:
            sql, procs = self._raw_insert(name)
            conn.executemany(sql, [_bind(procs, r) for r in rows] if procs else rows)
            return
        cols = _LAYOUT[name][1:]
        conn.execute(sqlalchemy.insert(self._tables[name]), [dict(zip(cols, r)) for r in rows])

    def _raw_insert(self, name: str, with_id: bool = False) -> tuple[str, tuple[tuple[int, Any], ...]]:
        """SQLite: the INSERT statement of a table (its primary key given, or left to SQLite) and the
        bind processors of its columns that have one, by position (SQLAlchemy's: enums, times, floats;
        a parameter's value is bound by :meth:`_param`)."""
        hit = self._sql.get(f"{name}:{with_id}")
        if hit is None:
            cols = _LAYOUT[name] if with_id else _LAYOUT[name][1:]
            procs = tuple((i, self._procs[name, c]) for i, c in enumerate(cols)
                          if self._procs[name, c] is not None and (name, c) != ("trial_params", "param_value"))
            sql = f"INSERT INTO {name} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
            hit = self._sql[f"{name}:{with_id}"] = (sql, procs)
        return hit

def _json(value: Any) -> str:
    """``json.dumps(value)`` (what Optuna stores for an attribute), without its cost for the scalars
    every trial has."""
    kind = type(value)
    if kind is float and math.isfinite(value):
        return float.__repr__(value)
    if kind is int:
        return int.__repr__(value)
    if kind is bool:
        return "true" if value else "false"
    if value is None:
        return "null"
    if kind is str:
        return _encode_string(value)
    return json.dumps(value)


def _bind(procs: tuple[tuple[int, Any], ...], values: tuple[Any, ...]) -> tuple[Any, ...]:
    out = list(values)
    for i, p in procs:
        if out[i] is not None:
            out[i] = p(out[i])
    return tuple(out)
