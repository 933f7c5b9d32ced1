"""Measurements as ``pt_measurements`` rows: columns and payload on write; measurements and records on read."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

from placetune.measurement import Measurement
from placetune.store.records import MeasurementRecord
from placetune.store.schema import MeasurementRow, StudyRow, finite_or_none

__all__ = ["split_measurement", "from_entry", "measurement_record", "RECORD_COLUMNS", "Entry"]

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
    """Measurement -> (column values, payload). ``payload`` overrides columns on read."""
    d = _fields(m)
    payload = {k: v for k, v in d.items() if k not in _COLUMN_FIELDS}
    for k in _FLOAT_FIELDS:  # keep what a float column would not give back exactly
        v = d.get(k)
        if v is not None and (type(v) is not float or finite_or_none(v) is None):
            payload[k] = v
    if d["requested"] is not None and d["requested"] == d["realized"]:
        # the common case: what ran is what was asked; store the per-layer map once
        payload[_SAME] = True
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


def _measurement_dict(row: Any) -> dict[str, Any]:
    """Measurement fields from a row whose JSON columns are decoded."""
    d = {
        "status": row.status,
        "reason": row.reason,
        "latency_samples_ms": row.latency_samples,
        "throughput_fps": row.throughput_fps,
        "requested": row.requested,
        "realized": row.realized,
        "energy_mj": row.energy_mj,
        "build_seconds": row.build_seconds,
        "simulated": bool(row.simulated),
    }
    d.update(row.payload or {})
    if d.pop(_SAME, False):
        d["requested"] = dict(d["realized"] or {})
    return d


#: payload flag: the requested placement equals the realised one (its column is NULL)
_SAME = "requested_is_realized"

#: ``(id, status, reason, throughput_fps, energy_mj, build_seconds, simulated,
#: latency_samples, requested, realized, payload)``, the last four as JSON text.
Entry = tuple[Any, ...]


def from_entry(e: Entry) -> Measurement:
    """A fresh Measurement from a cache entry (every call decodes anew: no shared lists)."""

    def load(text: str | None) -> Any:
        return None if text is None else json.loads(text)

    d = {
        "status": e[1],
        "reason": e[2],
        "throughput_fps": e[3],
        "energy_mj": e[4],
        "build_seconds": e[5],
        "simulated": bool(e[6]),
        "latency_samples_ms": load(e[7]),
        "requested": load(e[8]),
        "realized": load(e[9]),
    }
    d.update(load(e[10]) or {})
    if d.pop(_SAME, False):
        d["requested"] = dict(d["realized"] or {})
    return Measurement.from_dict(d)


def measurement_record(row: Any) -> MeasurementRecord:
    """A :class:`MeasurementRecord` from a row of :data:`RECORD_COLUMNS`."""
    m = Measurement.from_dict(_measurement_dict(row))
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
