"""Measurements as ``pt_measurements`` rows: columns and payload on write; measurements and records on read."""

from __future__ import annotations

import json
import math
from dataclasses import fields, replace
from typing import Any

from placetune.errors import StoreError
from placetune.measurement import STATUSES, Measurement, check_extra, non_finite
from placetune.store.packing import pack_fields, shared_keys, shared_values, unpack_fields
from placetune.store.records import MeasurementRecord
from placetune.store.schema import MeasurementRow, StudyRow, finite_or_none

__all__ = ["split_measurement", "from_entry", "measurement_record", "checked_measurement", "RECORD_COLUMNS", "Entry"]

#: Measurement fields that have columns of their own (the rest goes to ``payload``).
_COLUMN_FIELDS = (
    "status",
    "reason",
    "latency_samples_ms",
    "throughput_fps",
    "requested",
    "realized",
    "energy_mj",
    "build_seconds",
    "simulated",
)
_FLOAT_FIELDS = ("throughput_fps", "energy_mj", "build_seconds")
_FIELD_NAMES = tuple(f.name for f in fields(Measurement))
assert set(_COLUMN_FIELDS) <= set(_FIELD_NAMES), "Measurement fields changed: update placetune.store"

_M = MeasurementRow.__table__
_S = StudyRow.__table__

_MEASUREMENT_COLUMNS = (
    _M.c.id,
    _M.c.status,
    _M.c.reason,
    _M.c.latency_samples,
    _M.c.throughput_fps,
    _M.c.requested,
    _M.c.realized,
    _M.c.energy_mj,
    _M.c.build_seconds,
    _M.c.simulated,
    _M.c.payload,
)
#: The columns :func:`measurement_record` reads (``pt_measurements`` joined with ``pt_studies``).
RECORD_COLUMNS = (
    *_MEASUREMENT_COLUMNS,
    _M.c.median_ms,
    _S.c.name.label("study_name"),
    _M.c.placement_key,
    _M.c.requested_key,
    _M.c.agent,
    _M.c.trial_number,
    _M.c.created_at,
)


def _fields(m: Measurement) -> dict[str, Any]:
    """``m.to_dict(timeline=True)`` without its deep copy (the values are serialised at once)."""
    return {name: getattr(m, name) for name in _FIELD_NAMES}


def split_measurement(m: Measurement) -> tuple[dict[str, Any], dict[str, Any]]:
    """Measurement -> (column values, payload). ``payload`` overrides columns on read.

    An ``ok`` measurement with a NaN or infinite figure (changed after it was made) is stored as
    the failure :class:`~placetune.measurement.Measurement` makes of it, never as ``ok``."""
    if m.ok and non_finite(m) is not None:
        m = replace(m)  # __post_init__ turns it into a runtime_failed measurement with the reason
    check_extra(m.extra)  # what a measurement gained after it was made (strict in the tests)
    d = _fields(m)
    payload = {k: v for k, v in d.items() if k not in _COLUMN_FIELDS}
    for k in _FLOAT_FIELDS:  # keep what a float column would not give back exactly
        v = d.get(k)
        if v is not None and (type(v) is not float or finite_or_none(v) is None):
            payload[k] = v
    if d["requested"] is not None and d["requested"] == d["realized"]:
        # the common case: what ran is what was asked; store the per-layer map once
        payload[_SAME] = True
    pack_fields(payload, d["realized"])
    lat = m.latency_ms or {}
    cols = {
        "status": m.status,
        "failure_class": None if m.ok else str(m.extra.get("failure_class") or m.status),
        "reason": m.reason,
        "latency_samples": d["latency_samples_ms"],
        "median_ms": finite_or_none(lat.get("median")),
        "p90_ms": finite_or_none(lat.get("p90")),
        "p99_ms": finite_or_none(lat.get("p99")),
        "throughput_fps": finite_or_none(m.throughput_fps),
        "energy_mj": finite_or_none(m.energy_mj),
        "build_seconds": finite_or_none(m.build_seconds),
        "requested": None if payload.get(_SAME) else d["requested"],
        "realized": d["realized"],
        "simulated": bool(m.simulated),
        "payload": payload,
    }
    return cols, payload


def _num(v: Any) -> bool:
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))


def _fin(v: Any) -> bool:
    """None or a finite number: a figure read back as NaN or infinity is a damaged or edited row."""
    return _num(v) and (v is None or math.isfinite(v))


def _str_map(v: Any) -> bool:
    return v is None or (isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, str) for k, x in v.items()))


#: The schema of a measurement read back from ``pt_measurements``: field -> (check, what is allowed).
_ROW_SCHEMA: dict[str, tuple[Any, str]] = {
    "status": (lambda v: v in STATUSES, "one of " + ", ".join(STATUSES)),
    "reason": (lambda v: v is None or isinstance(v, str), "text or null"),
    "latency_samples_ms": (lambda v: v is None or (isinstance(v, list) and all(_fin(x) and x is not None for x in v)),
                           "a list of finite numbers"),
    "latency_ms": (lambda v: isinstance(v, dict) and all(_fin(x) for x in v.values()), "an object of finite numbers"),
    "throughput_fps": (_fin, "a finite number or null"),
    "energy_mj": (_fin, "a finite number or null"),
    "power_w": (_fin, "a finite number or null"),
    "build_seconds": (lambda v: _num(v) and v is not None, "a number"),
    "requested": (_str_map, "an object of layer name -> device"),
    "realized": (_str_map, "an object of layer name -> device"),
    "dla_loadables": (lambda v: isinstance(v, dict) and all(_num(x) for x in v.values()), "an object of counts"),
    "fallback": (lambda v: isinstance(v, dict), "an object of layer name -> reason"),
    "segment_times_ms": (lambda v: isinstance(v, list) and all(isinstance(x, dict) for x in v), "a list of objects"),
    "layer_times_ms": (lambda v: isinstance(v, dict) and all(_num(x) for x in v.values()), "an object of numbers"),
    "timeline": (lambda v: isinstance(v, list) and all(isinstance(x, dict) for x in v), "a list of objects"),
    "simulated": (lambda v: isinstance(v, bool), "true or false"),
    "backend": (lambda v: isinstance(v, str), "text"),
    "mode": (lambda v: isinstance(v, str), "text"),
    "precision": (lambda v: isinstance(v, str), "text"),
    "batch": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "extra": (lambda v: isinstance(v, dict), "an object"),
}


def _corrupt(row_id: Any, what: str) -> StoreError:
    return StoreError(f"stored measurement {row_id} is corrupt: {what}; the database was edited or damaged "
                      "(restore it from a backup, or delete that row)")


def checked_measurement(d: Any, row_id: Any = "?") -> Measurement:
    """A Measurement from the fields read back from a ``pt_measurements`` row, checked against the row schema.

    Raises:
        StoreError: a field has a value of the wrong type (the row was edited or damaged).
    """
    if not isinstance(d, dict):
        raise _corrupt(row_id, f"its payload is a {type(d).__name__}, not an object")
    for key, (ok, allowed) in _ROW_SCHEMA.items():
        if key in d and not ok(d[key]):
            shown = repr(d[key])
            shown = shown if len(shown) <= 60 else shown[:60] + "..."
            raise _corrupt(row_id, f"field {key!r} is {shown}, expected {allowed}")
    try:
        return Measurement.from_dict(d)
    except (TypeError, ValueError) as exc:
        raise _corrupt(row_id, f"{type(exc).__name__}: {str(exc)[:200]}") from None


def _measurement_dict(row: Any) -> dict[str, Any]:
    """Measurement fields from a row whose JSON columns are decoded."""
    d = {
        "status": row.status,
        "reason": row.reason,
        "latency_samples_ms": shared_values(row.latency_samples),
        "throughput_fps": row.throughput_fps,
        "requested": shared_keys(row.requested),
        "realized": shared_keys(row.realized),
        "energy_mj": row.energy_mj,
        "build_seconds": row.build_seconds,
        "simulated": bool(row.simulated),
    }
    payload = shared_values(row.payload) or {}
    if not isinstance(payload, dict):
        raise _corrupt(row.id, f"its payload is a {type(payload).__name__}, not an object")
    d.update(payload)
    _unpack(d, row.id)
    if d.pop(_SAME, False):
        if not _str_map(d["realized"]):
            raise _corrupt(row.id, "field 'realized' is not an object of layer name -> device")
        d["requested"] = dict(d["realized"] or {})
    return d


def _unpack(d: dict[str, Any], row_id: Any) -> None:
    wrong = unpack_fields(d)
    if wrong is not None:
        raise _corrupt(row_id, wrong)


#: payload flag: the requested placement equals the realised one (its column is NULL)
_SAME = "requested_is_realized"

#: ``(id, status, reason, throughput_fps, energy_mj, build_seconds, simulated,
#: latency_samples, requested, realized, payload)``, the last four as JSON text.
Entry = tuple[Any, ...]


def from_entry(e: Entry) -> Measurement:
    """A fresh Measurement from a cache entry (every call decodes anew: no shared lists)."""

    def load(text: str | None) -> Any:
        try:
            return None if text is None else json.loads(text)
        except (ValueError, TypeError, RecursionError):
            raise _corrupt(e[0], "a JSON column holds invalid JSON") from None

    d = {
        "status": e[1],
        "reason": e[2],
        "throughput_fps": e[3],
        "energy_mj": e[4],
        "build_seconds": e[5],
        "simulated": bool(e[6]),
        "latency_samples_ms": shared_values(load(e[7])),
        "requested": shared_keys(load(e[8])),
        "realized": shared_keys(load(e[9])),
    }
    payload = shared_values(load(e[10])) or {}
    if not isinstance(payload, dict):
        raise _corrupt(e[0], f"its payload is a {type(payload).__name__}, not an object")
    d.update(payload)
    _unpack(d, e[0])
    if d.pop(_SAME, False):
        if not _str_map(d["realized"]):
            raise _corrupt(e[0], "field 'realized' is not an object of layer name -> device")
        d["requested"] = dict(d["realized"] or {})
    return checked_measurement(d, e[0])


def measurement_record(row: Any) -> MeasurementRecord:
    """A :class:`MeasurementRecord` from a row of :data:`RECORD_COLUMNS`."""
    m = checked_measurement(_measurement_dict(row), row.id)
    if m.ok:  # the columns the store ranks by must say what the row says (an edited column is refused)
        for column, value in (("median_ms", m.latency_ms.get("median")), ("throughput_fps", m.throughput_fps),
                              ("energy_mj", m.energy_mj)):
            stored = getattr(row, column, None)
            if stored is not None and (not _fin(stored) or value is None
                                       or not math.isclose(float(stored), float(value), rel_tol=1e-9, abs_tol=1e-12)):
                raise _corrupt(row.id, f"column {column} is {str(stored)[:40]}, its figures say {value!r}")
    for column in ("requested", "realized"):  # the columns the record carries as they are: checked too
        if not _str_map(getattr(row, column)):
            raise _corrupt(row.id, f"column {column} is {str(getattr(row, column))[:40]!r}, expected an object of "
                                   "layer name -> device")
    if not isinstance(row.trial_number, (int, type(None))) or isinstance(row.trial_number, bool):
        raise _corrupt(row.id, f"trial_number is {str(row.trial_number)[:40]!r}, expected an integer")
    return MeasurementRecord(
        id=row.id,
        study=row.study_name,
        placement_key=row.placement_key,
        requested_key=row.requested_key,
        requested=row.requested if row.requested is not None else m.requested,
        realized=row.realized,
        measurement=m,
        agent=row.agent,
        trial_number=row.trial_number,
        created_at=row.created_at,
    )
