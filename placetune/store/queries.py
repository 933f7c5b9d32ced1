"""Queries of the store: measurements and requests of a study, and its best measurement."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from sqlalchemy import ColumnElement, or_, select

from placetune.errors import ConfigError, StoreError, UnknownNameError
from placetune.measurement import STATUSES
from placetune.store.records import MeasurementRecord, RequestRecord
from placetune.store.rows import RECORD_COLUMNS, measurement_record
from placetune.store.schema import MeasurementRow, RequestRow, StudyRow
from placetune.store.studies import StudiesMixin

__all__ = ["OBJECTIVES", "QueriesMixin"]

_M = MeasurementRow.__table__
_R = RequestRow.__table__
_S = StudyRow.__table__

#: Objective name -> (measurement column, natural direction).
OBJECTIVES: dict[str, tuple[str, str]] = {
    "latency": ("median_ms", "minimize"),
    "throughput": ("throughput_fps", "maximize"),
    "energy": ("energy_mj", "minimize"),
}


def _status_is(status: str) -> ColumnElement[bool]:
    """Rows of ``status``, and rows whose status is none of :data:`STATUSES` (an edited or damaged row: read,
    so that decoding it refuses it, never skipped as if it were of another status)."""
    return or_(_M.c.status == status, _M.c.status.is_(None), _M.c.status.not_in(STATUSES))


class QueriesMixin(StudiesMixin):
    """The read-only queries of a :class:`~placetune.store.store.Store`."""

    def measurements(self, study_name: str | None = None, status: str | None = None, *,
                     ids: Iterable[int] | None = None, keys: Iterable[str] | None = None) -> list[MeasurementRecord]:
        """Stored measurements, oldest first.

        Args:
            study_name: only those this study asked for (measured or cache hits);
                None: every measurement in the database.
            status: only this status (``ok``, ``build_failed``...).
            ids: only these ``pt_measurements`` ids.
            keys: only those whose requested or realised placement has one of these keys
                (``Placement.key``; the requested one is the first request's): a few rows of a
                long study read without decoding all of them.

        Raises:
            UnknownNameError: no such study.
        """
        q = select(*RECORD_COLUMNS).join(_S, _S.c.id == _M.c.study_id)
        if study_name is not None:
            st = self._resolve(study_name)
            q = q.where(_M.c.id.in_(select(_R.c.measurement_id).where(_R.c.study_id == st.id)))
        if status is not None:
            q = q.where(_status_is(status))
        if ids is not None:
            q = q.where(_M.c.id.in_([int(i) for i in ids]))
        if keys is not None:
            keys = list(keys)
            q = q.where(or_(_M.c.requested_key.in_(keys), _M.c.placement_key.in_(keys)))
        with self.transaction("listing measurements") as conn:
            rows = conn.execute(q.order_by(_M.c.id)).all()
        return [measurement_record(r) for r in rows]

    def each_measurement(self, study_name: str, status: str | None = None, *, after_id: int | None = None,
                         chunk: int = 1000) -> Iterator[MeasurementRecord]:
        """The study's measurements like :meth:`measurements`, oldest first, decoded one chunk of
        rows at a time (one read transaction, held until the last is read or the iterator is closed):
        a study of a million rows is read without holding them all, text or decoded, in memory.

        Args:
            study_name: the study.
            status: only this status.
            after_id: only rows with a larger id (those stored after a row already read).
            chunk: rows fetched from the database at a time.

        Raises:
            UnknownNameError: no such study.
            StoreError: a row is corrupt (it names the row), or a database problem.
        """
        st = self._resolve(study_name)
        q = select(*RECORD_COLUMNS).join(_S, _S.c.id == _M.c.study_id).where(
            _M.c.id.in_(select(_R.c.measurement_id).where(_R.c.study_id == st.id)))
        if status is not None:
            q = q.where(_status_is(status))
        if after_id is not None:
            q = q.where(_M.c.id > int(after_id))
        with self.transaction("listing measurements") as conn:
            result = conn.execution_options(stream_results=True).execute(q.order_by(_M.c.id))
            while True:
                rows = result.fetchmany(chunk)
                if not rows:
                    return
                for r in rows:
                    yield measurement_record(r)

    def request_keys(self, study_name: str) -> list[tuple[str, int]]:
        """``(placement_key, measurement_id)`` of each of the study's requests, in order: what
        :meth:`requests` says of them without a record per row (a resume of a million requests).

        Raises:
            UnknownNameError: no such study.
            StoreError: a ``measurement_id`` that is not an integer (the row was edited or damaged).
        """
        st = self._resolve(study_name)
        with self.transaction("listing requests") as conn:
            rows = conn.execute(select(_R.c.placement_key, _R.c.measurement_id).where(_R.c.study_id == st.id)
                                .order_by(_R.c.id)).all()
        out = [(key, mid) for key, mid in rows]
        for key, mid in out:
            if type(mid) is not int or type(key) is not str:
                raise StoreError(f"a stored request of study {st.name!r} is corrupt (placement_key {str(key)[:40]!r}, "
                                 f"measurement_id {str(mid)[:40]!r}): the database was edited or damaged")
        return out

    def measurements_in_scope(self, study_name: str, status: str | None = "ok") -> list[MeasurementRecord]:
        """The measurements of the study's cache scope (any study with the same model, fingerprint
        and settings), oldest first: what the cache may serve. A study's own results are
        :meth:`measurements` of that study (what :meth:`best` ranks).

        Raises:
            UnknownNameError: no such study.
        """
        st = self._resolve(study_name)
        q = select(*RECORD_COLUMNS).join(_S, _S.c.id == _M.c.study_id).where(
            _M.c.model_hash == st.model_hash, _M.c.fingerprint_hash == st.fingerprint_hash,
            _M.c.settings_hash == st.settings_hash)
        if status is not None:
            q = q.where(_status_is(status))
        with self.transaction(f"listing the measurements of study {st.name!r}") as conn:
            rows = conn.execute(q.order_by(_M.c.id)).all()
        return [measurement_record(r) for r in rows]

    def requests(self, study_name: str) -> list[RequestRecord]:
        """The study's evaluation requests in order, cache hits included.

        Raises:
            UnknownNameError: no such study.
        """
        st = self._resolve(study_name)
        with self.transaction("listing requests") as conn:
            rows = conn.execute(select(_R).where(_R.c.study_id == st.id).order_by(_R.c.id)).all()
        for r in rows:  # rows read back are checked like every other: the types the records promise
            ints = (r.measurement_id, r.trial_number)
            if not isinstance(r.measurement_id, int) or isinstance(r.trial_number, bool) or not isinstance(
                    r.trial_number, (int, type(None))) or not isinstance(r.agent, (str, type(None))) or any(
                    isinstance(v, bool) for v in ints):
                raise StoreError(f"stored request {r.id} of study {st.name!r} is corrupt (measurement_id, "
                                 "trial_number or agent of the wrong type): the database was edited or damaged")
        return [
            RequestRecord(
                id=r.id,
                study=st.name,
                requested_key=r.requested_key,
                placement_key=r.placement_key,
                measurement_id=r.measurement_id,
                agent=r.agent,
                trial_number=r.trial_number,
                cache_hit=bool(r.cache_hit),
                created_at=r.created_at,
            )
            for r in rows
        ]

    def best(
        self, study_name: str, objective: str | None = None, direction: str | None = None
    ) -> MeasurementRecord | None:
        """The best ``ok`` measurement the study requested (measured by it or reused from the cache).

        A study's results are the measurements it asked for: one another study of the same
        cache scope measured, and this one never requested, is not its result.

        Args:
            study_name: the study.
            objective: ``latency`` (median ms), ``throughput`` (fps), ``energy`` (mJ) or ``gpu_time``
                (GPU busy ms per frame);
                None: the study's objective. Of a pair (``latency+energy``) the first is used.
            direction: ``minimize`` or ``maximize``; None: the objective's natural one.

        Returns:
            The best record (ties: the earliest), or None when nothing ok with that
            objective is stored.

        Raises:
            UnknownNameError: no such study or objective.
            ConfigError: bad direction.
        """
        st = self._resolve(study_name)
        objective = (objective or st.objective).split("+")[0].strip().lower()  # a pair: its primary part
        if objective == "gpu_time":  # GPU busy ms per frame: in the payload, not a column
            sign = -1.0 if direction == "maximize" else 1.0
            best, key = None, None
            for rec in self.measurements(study_name, status="ok"):
                v = rec.measurement.objective("gpu_time")
                if v is not None and (key is None or sign * v < key):
                    best, key = rec, sign * v
            return best
        if objective not in OBJECTIVES:
            raise UnknownNameError(f"unknown objective {objective!r}; objectives are {', '.join(OBJECTIVES)}")
        column_name, natural = OBJECTIVES[objective]
        direction = direction or natural
        if direction not in ("minimize", "maximize"):
            raise ConfigError(f"direction must be 'minimize' or 'maximize', not {direction!r}")
        col = _M.c[column_name]
        q = (
            select(*RECORD_COLUMNS)
            .join(_S, _S.c.id == _M.c.study_id)
            .where(
                _M.c.model_hash == st.model_hash,
                _M.c.fingerprint_hash == st.fingerprint_hash,
                _M.c.settings_hash == st.settings_hash,
                _M.c.id.in_(select(_R.c.measurement_id).where(_R.c.study_id == st.id)),
                _M.c.status == "ok",
                col.is_not(None),
            )
            .order_by(col.asc() if direction == "minimize" else col.desc(), _M.c.id)
            .limit(1)
        )
        unknown = select(*RECORD_COLUMNS).join(_S, _S.c.id == _M.c.study_id).where(  # an edited status: refused
            _M.c.id.in_(select(_R.c.measurement_id).where(_R.c.study_id == st.id)),
            or_(_M.c.status.is_(None), _M.c.status.not_in(STATUSES))).limit(1)
        with self.transaction(f"finding the best measurement of study {st.name!r}") as conn:
            bad = conn.execute(unknown).first()
            row = conn.execute(q).first()
        if bad is not None:
            measurement_record(bad)  # raises StoreError naming the row and its status
        return None if row is None else measurement_record(row)
