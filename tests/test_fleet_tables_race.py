"""Optuna's tables on a database server, created by another client at the same moment.

A fleet's workers take turns creating the tables (an advisory lock), but a client that takes no lock (the
optuna CLI, optuna-dashboard, a script polling the study) can be creating them at that very moment: the
second ``CREATE`` fails on PostgreSQL ("duplicate key value violates unique constraint
pg_type_typname_nsp_index"), and a worker that lost that race stopped with exit 7 ("database error ...
while opening the Optuna study tables"). A CI run caught it with the test's own poll as the other client.
A moment later the tables exist: opening them is tried again."""

from __future__ import annotations

import psycopg
import pytest
import sqlalchemy as sa

from placetune.store.store import Store
from placetune.tuning.fleet import Fleet
from placetune.tuning.optuna_study import storage_for
from tests.test_fleet import pg_url  # noqa: F401 - the fixture: a fresh PostgreSQL database


def _lost_race(monkeypatch, fail: int, code: type[Exception] = psycopg.errors.UniqueViolation) -> list[int]:
    """Optuna's RDBStorage fails its first ``fail`` openings as a CREATE that lost a race does."""
    import optuna

    real = optuna.storages.RDBStorage
    calls: list[int] = []

    class Racing(real):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs) -> None:
            calls.append(1)
            if len(calls) <= fail:
                raise sa.exc.IntegrityError("CREATE TABLE studies (...)", {},
                                            code("duplicate key value violates unique constraint"))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(optuna.storages, "RDBStorage", Racing)
    return calls


def test_opening_the_tables_while_another_client_creates_them_is_tried_again(pg_url, monkeypatch):  # noqa: F811
    calls = _lost_race(monkeypatch, fail=1)
    store = Store(pg_url)
    try:
        storage = storage_for(store)
        assert len(calls) == 2 and storage.get_all_studies() == []
        storage.engine.dispose()
    finally:
        store.close()


def test_a_fleet_worker_counting_trials_tries_again(pg_url, monkeypatch):  # noqa: F811
    calls = _lost_race(monkeypatch, fail=2)
    store = Store(pg_url)
    try:
        counts = Fleet.trial_counts(_FleetOn(store), "absent")
        assert counts["complete"] == 0 and len(calls) == 3
    finally:
        store.close()


def test_another_database_error_is_not_retried(pg_url, monkeypatch):  # noqa: F811
    calls = _lost_race(monkeypatch, fail=5, code=psycopg.errors.InsufficientPrivilege)
    store = Store(pg_url)
    try:
        with pytest.raises(sa.exc.IntegrityError):
            storage_for(store)
        assert len(calls) == 1
    finally:
        store.close()


class _FleetOn:
    """What :meth:`Fleet.trial_counts` reads of its fleet: the store."""

    def __init__(self, store: Store) -> None:
        self.store = store
