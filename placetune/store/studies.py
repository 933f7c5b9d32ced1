"""Studies in the store: models, named searches with their fixed settings, and the cache scope they measure in."""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, func, insert, select, update
from sqlalchemy import case as sa_case
from sqlalchemy.exc import IntegrityError

from placetune.errors import ConfigError, StoreError, UnknownNameError
from placetune.hardware.locked_clocks import FINGERPRINT_KEY as LOCKED
from placetune.inputdata import RANDOM_INPUT
from placetune.hardware.locked_clocks import LOCK_TOLERANCE, lock_differences
from placetune.store.connection import ConnectionMixin
from placetune.store.records import StudyRecord
from placetune.store.schema import MeasurementRow, ModelRow, RequestRow, StudyRow, dumps, utcnow

__all__ = ["StudiesMixin", "settings_hash", "fingerprint_hash", "as_json_dict"]

log = logging.getLogger(__name__)

_M = MeasurementRow.__table__
_R = RequestRow.__table__
_S = StudyRow.__table__
_MODELS = ModelRow.__table__


def _json_hash(doc: Any, length: int = 16) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:length]


def settings_hash(settings: Mapping[str, Any] | Any) -> str:
    """Hash of measurement settings; equals :attr:`placetune.settings.Settings.hash`.

    Args:
        settings: a :class:`~placetune.settings.Settings` or its ``to_dict()``.
    """
    return _json_hash(as_json_dict(settings, "settings"))


def fingerprint_hash(fingerprint: Mapping[str, Any] | None, *, platform: str, backend: str, simulated: bool) -> str:
    """Hash of what identifies the measuring machine: the cache scope's machine part.

    Platform, backend and the simulated flag are part of it, so a simulated
    measurement is never served to a hardware study, nor an Orin one to a Xavier one,
    whatever the fingerprint dict holds.
    """
    doc = {
        "platform": platform,
        "backend": backend,
        "simulated": bool(simulated),
        "fingerprint": dict(fingerprint or {}),
    }
    return _json_hash(doc)


def as_json_dict(value: Any, what: str) -> dict[str, Any]:
    """``value`` (a mapping, an object with ``to_dict()``, or None) as a plain JSON dict, as the store keeps
    settings and fingerprints; ConfigError naming ``what`` when it is neither or cannot be JSON."""
    if value is None:
        return {}
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        value = to_dict()
    if not isinstance(value, Mapping):
        raise ConfigError(f"{what} must be a dict (or an object with to_dict()), not {type(value).__name__}")
    try:
        return json.loads(dumps(dict(value)))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{what} cannot be stored as JSON: {exc}") from None


def _fmt(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


class StudiesMixin(ConnectionMixin):
    """The models and studies of a :class:`~placetune.store.store.Store`."""

    _studies: dict[str, StudyRecord]

    def get_or_create_model(self, model: Any) -> int:
        """The ``pt_models`` id of a model, inserting it the first time.

        Args:
            model: a :class:`placetune.model.model.Model` (``hash``, ``name``, ``path``,
                ``input_shapes`` and ``len()`` are used).
        """
        with self.transaction("reading models") as conn:
            mid = conn.scalar(select(_MODELS.c.id).where(_MODELS.c.hash == model.hash))
        if mid is not None:
            return int(mid)
        for attempt in range(2):
            try:
                with self.transaction("storing a model", write=True) as conn:
                    return self._model_id(conn, model)
            except IntegrityError as exc:  # stored by another process meanwhile: re-read
                if attempt:
                    raise self.database_error(exc, "storing a model") from None
        raise AssertionError("unreachable")

    @staticmethod
    def _model_id(conn: Connection, model: Any) -> int:
        mid = conn.scalar(select(_MODELS.c.id).where(_MODELS.c.hash == model.hash))
        if mid is not None:
            return int(mid)
        shapes = {name: list(shape) for name, shape in model.input_shapes.items()}
        return int(
            conn.execute(
                insert(_MODELS).values(
                    hash=model.hash,
                    name=str(model.name),
                    path=None if model.path is None else str(model.path),
                    shapes=shapes,
                    n_layers=len(model),
                    created_at=utcnow(),
                )
            ).inserted_primary_key[0]
        )

    def model_row(self, model_hash: str) -> Any:
        """The ``pt_models`` row of a model (None when not stored), checked like every row read back.

        Raises:
            StoreError: the table cannot be read, or the row's shapes, name or path have the wrong type.
        """
        with self.transaction("reading the models table") as conn:
            row = conn.execute(select(_MODELS).where(_MODELS.c.hash == model_hash)).first()
        if row is not None and not _model_row_ok(row):
            raise StoreError(f"the stored model {model_hash[:12]} of {self.url} is corrupt (its shapes, name or path "
                             "have the wrong type): the database was edited or damaged")
        return row

    def create_or_open_study(
        self,
        name: str,
        model: Any,
        platform: str,
        backend: str,
        mode: str,
        objective: str,
        precision: str,
        batch: int,
        settings: Mapping[str, Any] | Any,
        fingerprint: Mapping[str, Any] | None,
        simulated: bool,
        constraints: Sequence[str] | None = None,
    ) -> StudyRecord:
        """Create a study, or reopen it to resume when every setting is the same.

        Args:
            name: study name, unique in the database.
            model: the :class:`placetune.model.model.Model` searched.
            platform: Jetson platform name.
            backend: measurement backend name.
            mode: execution mode.
            objective: what the search optimises (``latency``, ``throughput``, ``energy``).
            precision: build precision.
            batch: batch size.
            settings: a :class:`~placetune.settings.Settings` or its ``to_dict()``.
            fingerprint: what identifies the measuring machine (versions, clocks...).
            simulated: True when measuring the simulated Jetson.
            constraints: the study's bounds as written (``["latency<=0.8"]``): fixed like its
                settings, and read back by ``export``, ``studies`` and ``report`` to rank its
                measurements feasible first.

        Returns:
            The study, with counts.

        Raises:
            ConfigError: the study exists with other settings; the message names each one.
            StoreError: database problem.

        Example:
            >>> from placetune import Model, Store
            >>> store = Store.memory()
            >>> s = store.create_or_open_study("a", Model.load("tests/data/seed_block.onnx.gz"),
            ...     "orin-agx", "simulate", "engine", "latency", "fp16", 1, {}, {}, True)
            >>> s.name, s.simulated
            ('a', True)
        """
        if not isinstance(name, str) or not name.strip():
            raise ConfigError("the study name must be a non-empty string: pass --study NAME")
        settings_d = as_json_dict(settings, "settings")
        fingerprint_d = as_json_dict(fingerprint, "fingerprint")
        want = {
            "platform": str(platform),
            "backend": str(backend),
            "mode": str(mode),
            "objective": str(objective),
            "precision": str(precision),
            "batch": int(batch),
            "settings": settings_d,
            "settings_hash": settings_hash(settings_d),
            "fingerprint": fingerprint_d,
            "fingerprint_hash": fingerprint_hash(
                fingerprint_d, platform=str(platform), backend=str(backend), simulated=bool(simulated)
            ),
            "simulated": bool(simulated),
            "constraints": [str(c) for c in constraints or ()],
        }
        existing = self.find_study(name)
        if existing is not None and existing.model_hash != model.hash \
                and existing.model_hash == getattr(model, "legacy_hash", None):
            existing = self._migrate_model_hash(name, existing.model_hash, model.hash)
        if existing is None:
            for attempt in range(2):
                try:
                    with self.transaction(f"creating study {name!r}", write=True) as conn:
                        if conn.scalar(select(_S.c.id).where(_S.c.name == name)) is None:
                            model_id = self._model_id(conn, model)
                            conn.execute(insert(_S).values(name=name, model_id=model_id, created_at=utcnow(), **want))
                    break
                except IntegrityError as exc:  # created by another process meanwhile: re-read
                    if attempt:
                        raise self.database_error(exc, f"creating study {name!r}") from None
            existing = self.find_study(name)
            assert existing is not None
        if existing.constraints is None:  # schema v1 did not record them: this run's are the study's
            existing = self._record_constraints(name, want["constraints"])
        self._check_same(existing, model, want)
        self._studies[name] = existing
        return existing

    def _migrate_model_hash(self, name: str, old: str, new: str) -> StudyRecord | None:
        """A model stored under the hash of an older placetune (before small constants were
        hashed): its model row, and the measurements keyed by it, take the new hash, so that its
        studies resume and its cache answers (one transaction)."""
        with self.transaction(f"migrating the model hash of study {name!r}", write=True) as conn:
            new_id = conn.scalar(select(_MODELS.c.id).where(_MODELS.c.hash == new))
            old_id = conn.scalar(select(_MODELS.c.id).where(_MODELS.c.hash == old))
            if new_id is None:
                conn.execute(update(_MODELS).where(_MODELS.c.hash == old).values(hash=new))
            elif old_id is not None:  # both exist: the studies of the old row move to the new one
                conn.execute(update(_S).where(_S.c.model_id == old_id).values(model_id=new_id))
            # (a measurement whose key the new hash already holds keeps the old one: never overwritten)
            newer = _M.alias("newer")
            clash = select(newer.c.id).where(
                newer.c.model_hash == new, newer.c.fingerprint_hash == _M.c.fingerprint_hash,
                newer.c.settings_hash == _M.c.settings_hash, newer.c.placement_key == _M.c.placement_key)
            conn.execute(update(_M).where(_M.c.model_hash == old, ~clash.exists()).values(model_hash=new))
        self._studies.clear()
        return self.find_study(name)

    def _record_constraints(self, name: str, constraints: list[str]) -> StudyRecord:
        """Fill in the constraints of a study created before they were recorded (still NULL)."""
        with self.transaction(f"recording the constraints of study {name!r}", write=True) as conn:
            conn.execute(update(_S).where(_S.c.name == name, _S.c.constraints.is_(None))
                         .values(constraints=constraints))
        self._studies.pop(name, None)
        found = self.find_study(name)
        assert found is not None
        return found

    @staticmethod
    def _check_same(st: StudyRecord, model: Any, want: dict[str, Any]) -> None:
        old: list[str] = []
        new: list[str] = []
        if st.model_hash != model.hash:
            old.append(f"model={st.model_name} (hash {st.model_hash[:12]})")
            new.append(f"model={model.name} (hash {model.hash[:12]})")
        top = ("platform", "backend", "mode", "objective", "constraints", "precision", "batch", "simulated")
        named = set()
        for key in top:
            if getattr(st, key) != want[key]:
                named.add(key)
                old.append(f"{key}={_fmt(getattr(st, key))}")
                new.append(f"{key}={_fmt(want[key])}")
        for part in ("settings", "fingerprint"):
            a, b = getattr(st, part), want[part]
            keys = [k for k in sorted(set(a) | set(b)) if a.get(k, None) != b.get(k, None)]
            if not keys and part == "settings" and st.settings_hash != want["settings_hash"]:
                # same dict, hash written by another hash function: name the hashes
                old.append(f"settings_hash={st.settings_hash}")
                new.append(f"settings_hash={want['settings_hash']}")
            for k in keys:
                if part == "settings" and k in named:  # e.g. mode: already named above
                    continue
                if part == "fingerprint" and k == LOCKED:  # compared within a tolerance, clock by clock
                    if k not in a:  # a study recorded before the locked frequencies were
                        log.warning("study %r did not record the frequencies its clocks were locked at (made by an "
                                    "older placetune): they are not compared on resume", st.name)
                        continue
                    for clock, was, now in lock_differences(a[k], b.get(k)):
                        old.append(f"{part}.{k}.{clock}={was}")
                        new.append(f"{part}.{k}.{clock}={now}")
                    continue
                unset = RANDOM_INPUT if (part, k) == ("settings", "timed_input") else "(unset)"  # its default
                old.append(f"{part}.{k}={_fmt(a[k]) if k in a else unset}")
                new.append(f"{part}.{k}={_fmt(b[k]) if k in b else unset}")
        if old:
            locks = any(o.startswith(f"fingerprint.{LOCKED}.") for o in old)
            raise ConfigError(
                f"study {st.name!r} exists with {', '.join(old)}; this run has {', '.join(new)}: "
                "use another --study name or the same settings"
                + (f" (the clocks are locked at other frequencies than the study's, more than "
                   f"{LOCK_TOLERANCE:.0%} apart: run `sudo jetson_clocks` in the study's power mode, not "
                   "`--restore` of a file stored under another)" if locks else "")
            )

    def _study_select(self) -> Any:
        return select(_S, _MODELS.c.hash.label("model_hash"), _MODELS.c.name.label("model_name")).join(
            _MODELS, _MODELS.c.id == _S.c.model_id
        )

    def find_study(self, name: str) -> StudyRecord | None:
        """The study called ``name``, with counts, or None if there is none (:meth:`study` raises instead)."""
        with self.transaction(f"reading study {name!r}") as conn:
            row = conn.execute(self._study_select().where(_S.c.name == name)).first()
            if row is None:
                return None
            counts = self._counts(conn, [row.id])
        return self._study_record(row, counts.get(row.id, {}))

    @staticmethod
    def _study_record(row: Any, counts: Mapping[str, int]) -> StudyRecord:
        _check_study_row(row)
        return StudyRecord(
            id=row.id,
            name=row.name,
            model_id=row.model_id,
            model_hash=row.model_hash,
            model_name=row.model_name,
            platform=row.platform,
            backend=row.backend,
            mode=row.mode,
            objective=row.objective,
            precision=row.precision,
            batch=row.batch,
            settings=row.settings,
            settings_hash=row.settings_hash,
            fingerprint=row.fingerprint,
            fingerprint_hash=row.fingerprint_hash,
            simulated=bool(row.simulated),
            created_at=row.created_at,
            constraints=None if row.constraints is None else list(row.constraints),
            **counts,
        )

    @staticmethod
    def _counts(conn: Connection, ids: list[int] | None) -> dict[int, dict[str, int]]:
        out: dict[int, dict[str, int]] = {}
        q1 = select(_R.c.study_id, func.count(), func.sum(sa_case((_R.c.cache_hit, 1), else_=0))).group_by(
            _R.c.study_id
        )
        q2 = select(_M.c.study_id, func.count(), func.sum(sa_case((_M.c.status == "ok", 1), else_=0))).group_by(
            _M.c.study_id
        )
        if ids is not None:
            q1 = q1.where(_R.c.study_id.in_(ids))
            q2 = q2.where(_M.c.study_id.in_(ids))
        for sid, n, hits in conn.execute(q1):
            out.setdefault(sid, {}).update(n_requests=int(n), n_cache_hits=int(hits or 0))
        for sid, n, ok in conn.execute(q2):
            out.setdefault(sid, {}).update(n_measured=int(n), n_ok=int(ok or 0))
        return out

    def study(self, name: str) -> StudyRecord:
        """The study called ``name``, with counts.

        Raises:
            UnknownNameError: no such study (the message lists close names).
        """
        st = self.find_study(name)
        if st is None:
            names = [s.name for s in self.studies()]
            close = difflib.get_close_matches(name, names, n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            known = f"; studies: {', '.join(names[:20])}" if names else "; the database has no study yet"
            raise UnknownNameError(f"no study {name!r} in {self.url}{hint}{known}")
        self._studies[name] = st
        return st

    def studies(self) -> list[StudyRecord]:
        """Every study, oldest first, with counts."""
        with self.transaction("listing studies") as conn:
            rows = conn.execute(self._study_select().order_by(_S.c.id)).all()
            counts = self._counts(conn, None)
        return [self._study_record(r, counts.get(r.id, {})) for r in rows]

    def _resolve(self, study: StudyRecord | str) -> StudyRecord:
        if isinstance(study, StudyRecord):
            return study
        st = self._studies.get(study)
        return st if st is not None else self.study(study)


def _model_row_ok(row: Any) -> bool:
    """Whether a ``pt_models`` row read back has shapes, name and path of the right types."""
    shapes = row.shapes
    return (shapes is None or isinstance(shapes, dict) and all(
        isinstance(k, str) and isinstance(v, list) and all(isinstance(d, int) and not isinstance(d, bool)
                                                           and 0 <= d < 2**31 for d in v)
        for k, v in shapes.items())) and isinstance(row.name, str) and isinstance(row.path, (str, type(None)))


#: The schema of a ``pt_studies`` row read back: column -> (check, what is allowed).
_STUDY_ROW_SCHEMA: dict[str, tuple[Any, str]] = {
    **{c: (lambda v: isinstance(v, str), "text") for c in ("name", "platform", "backend", "mode", "objective",
                                                           "precision", "model_hash", "settings_hash",
                                                           "fingerprint_hash")},
    "batch": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "a positive integer"),
    "settings": (lambda v: isinstance(v, dict), "a JSON object"),
    "fingerprint": (lambda v: v is None or isinstance(v, dict), "a JSON object"),
    "constraints": (lambda v: v is None or (isinstance(v, list) and all(isinstance(c, str) for c in v)),
                    "a JSON list of texts"),
}


def _check_study_row(row: Any) -> None:
    """Refuse a ``pt_studies`` row whose columns have the wrong types (an edited or damaged database)."""
    for column, (ok, allowed) in _STUDY_ROW_SCHEMA.items():
        value = getattr(row, column, None)
        if not ok(value):
            shown = repr(value)
            shown = shown if len(shown) <= 60 else shown[:60] + "..."
            raise StoreError(f"stored study {getattr(row, 'id', '?')} is corrupt: {column} is {shown}, expected "
                             f"{allowed}; the database was edited or damaged (restore it from a backup)")
