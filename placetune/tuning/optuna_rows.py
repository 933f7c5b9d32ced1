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
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import optuna
    from sqlalchemy import Connection

__all__ = ["FinishedTrial", "TrialRows", "supported"]

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
        from optuna.storages._rdb import models

        self.study_id = int(study_id)
        self._models = models
        tables = models.BaseModel.metadata.tables
        self._tables = {name: tables[name] for name in _LAYOUT}
        trials = self._tables["trials"]
        mapper = models.TrialModel.__mapper__
        # the attributes that hold the stored values (Optuna 5: naive UTC behind local-time properties)
        self._time_attrs = tuple(mapper.get_property_by_column(trials.c[c]).key
                                 for c in ("datetime_start", "datetime_complete"))
        self._known: dict[str, Any] = {}  # parameter name -> the distribution the study stores for it
        self._json: dict[int, tuple[Any, str, dict[Any, Any]]] = {}  # id(dist) -> (it, its JSON, internal values)
        self._sql: dict[str, tuple[str, tuple[tuple[int, Any], ...]]] = {}

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
        ids: list[int | None] = []
        rows: dict[str, list[tuple[Any, ...]]] = {name: [] for name in _LAYOUT if name != "trials"}
        number = self._count(conn, raw)
        kept = {id(t) for t in keep}
        for t in trials:
            if id(t) not in kept:
                ids.append(None)
                continue
            start, complete = self._times(t)
            trial_id = self._insert_trial(conn, raw, (number, self.study_id, t.state, start, complete))
            number += 1
            ids.append(trial_id)
            values = t.values
            if values is not None:  # add_trial: every objective's value (Optuna: one objective -> objective 0)
                for objective, v in enumerate(values):
                    stored, kind = self._models.TrialValueModel.value_to_stored_repr(v)
                    rows["trial_values"].append((trial_id, objective, stored, kind))
            for name, value in t.params.items():
                internal, text = self._param(t.distributions[name], value)
                rows["trial_params"].append((trial_id, name, internal, text))
            for key, value in t.user_attrs.items():
                rows["trial_user_attributes"].append((trial_id, key, json.dumps(value)))
            for key, value in t.system_attrs.items():
                rows["trial_system_attributes"].append((trial_id, key, json.dumps(value)))
            if t.intermediate_values:
                raise ValueError("TrialRows writes finished trials without intermediate values")
        for name, batch in rows.items():
            if batch:
                self._insert_many(conn, raw, name, batch)
        return ids

    def _compatible(self, conn: Any, raw: bool, trial: "FinishedTrial | optuna.trial.FrozenTrial") -> bool:
        from optuna.distributions import check_distribution_compatibility, json_to_distribution

        for name, dist in trial.distributions.items():
            known = self._known.get(name)
            if known is None:  # first time here: the distribution the study already stores, if any
                stored = self._stored_distribution(conn, raw, name)
                known = self._known[name] = dist if stored is None else json_to_distribution(stored)
            if known is dist or known == dist:
                continue
            try:
                check_distribution_compatibility(known, dist)
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

    def _param(self, dist: Any, value: Any) -> tuple[float, str]:
        """A parameter's internal value and its distribution's JSON, as Optuna stores them (both
        memoised per distribution object: a study's trials share them)."""
        hit = self._json.get(id(dist))
        if hit is None or hit[0] is not dist:
            from optuna.distributions import distribution_to_json

            hit = self._json[id(dist)] = (dist, distribution_to_json(dist), {})
        memo = hit[2]
        try:
            internal = memo.get(value)
        except TypeError:  # an unhashable choice
            return dist.to_internal_repr(value), hit[1]
        if internal is None:
            internal = memo[value] = dist.to_internal_repr(value)
        return internal, hit[1]

    def _count(self, conn: Any, raw: bool) -> int:
        """The study's trials so far (the next trial's number), its row locked on a server as Optuna locks it."""
        from sqlalchemy import func, select

        trials, studies = self._tables["trials"], self._models.StudyModel.__table__
        if raw:
            return int(conn.execute("SELECT COUNT(trial_id) FROM trials WHERE study_id = ?",
                                    (self.study_id,)).fetchone()[0])
        conn.execute(select(studies.c.study_id).where(studies.c.study_id == self.study_id).with_for_update())
        return int(conn.scalar(select(func.count(trials.c.trial_id)).where(trials.c.study_id == self.study_id)))

    def _stored_distribution(self, conn: Any, raw: bool, name: str) -> str | None:
        from sqlalchemy import select

        trials, params = self._tables["trials"], self._tables["trial_params"]
        if raw:
            row = conn.execute("SELECT p.distribution_json FROM trial_params p JOIN trials t ON t.trial_id = "
                               "p.trial_id WHERE t.study_id = ? AND p.param_name = ? LIMIT 1",
                               (self.study_id, name)).fetchone()
            return None if row is None else row[0]
        return conn.scalar(select(params.c.distribution_json).join(trials, trials.c.trial_id == params.c.trial_id)
                           .where(trials.c.study_id == self.study_id, params.c.param_name == name).limit(1))

    def _insert_trial(self, conn: Any, raw: bool, values: tuple[Any, ...]) -> int:
        if raw:
            sql, procs = self._raw_insert("trials")
            return int(conn.execute(sql, _bind(procs, values)).lastrowid)
        from sqlalchemy import insert

        table = self._tables["trials"]
        cols = _LAYOUT["trials"][1:]
        return int(conn.execute(insert(table).returning(table.c.trial_id), dict(zip(cols, values))).scalar_one())

    def _insert_many(self, conn: Any, raw: bool, name: str, rows: list[tuple[Any, ...]]) -> None:
        if raw:
            sql, procs = self._raw_insert(name)
            conn.executemany(sql, [_bind(procs, r) for r in rows] if procs else rows)
            return
        from sqlalchemy import insert

        cols = _LAYOUT[name][1:]
        conn.execute(insert(self._tables[name]), [dict(zip(cols, r)) for r in rows])

    def _raw_insert(self, name: str) -> tuple[str, tuple[tuple[int, Any], ...]]:
        """SQLite: the INSERT statement of a table (its primary key left to SQLite) and the
        bind processors of its columns that have one, by position (SQLAlchemy's: enums, times, floats)."""
        hit = self._sql.get(name)
        if hit is None:
            from sqlalchemy.dialects import sqlite

            dialect = sqlite.dialect()
            table = self._tables[name]
            cols = _LAYOUT[name][1:]
            procs = tuple((i, p) for i, p in enumerate(table.c[c].type.dialect_impl(dialect).bind_processor(dialect)
                                                       for c in cols) if p is not None)
            sql = f"INSERT INTO {name} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
            hit = self._sql[name] = (sql, procs)
        return hit


def _bind(procs: tuple[tuple[int, Any], ...], values: tuple[Any, ...]) -> tuple[Any, ...]:
    out = list(values)
    for i, p in procs:
        if out[i] is not None:
            out[i] = p(out[i])
    return tuple(out)
