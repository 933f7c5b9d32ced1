"""Chrome-trace timelines of a measurement's schedule (open in https://ui.perfetto.dev or chrome://tracing).

The trace has one process (pid 1) and one thread per device (GPU, DLA0, DLA1), named with
``thread_name`` metadata events. Every engine / segment run is a complete event
(``"ph": "X"``) with ``ts`` and ``dur`` in microseconds; runs of zero length become instant
events (``"ph": "i"``) so they are still visible. Simulated schedules say so in the process
name and in ``otherData``.

Example:
    >>> from placetune import Evaluator
    >>> from placetune.trace import chrome_trace
    >>> m = Evaluator("seed-block", "orin-agx", mode="pipeline").baseline()
    >>> doc = chrome_trace(m)
    >>> {e["ph"] for e in doc["traceEvents"]} >= {"X", "M"}
    True
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from placetune.errors import ConfigError
from placetune.placement.placement import DEVICES
from placetune.files.write import write_file
from placetune.validate import dumps_json

if TYPE_CHECKING:
    from placetune.measurement import Measurement

__all__ = ["chrome_trace", "write_chrome_trace", "is_trace_file", "timeline_events", "device_order"]

#: The largest file :func:`is_trace_file` reads (a trace of a few thousand events is a few MB).
_MAX_TRACE_BYTES = 256 << 20


def device_order(devices: Any) -> list[str]:
    """Devices in display order: GPU, DLA0, DLA1, then any other name alphabetically."""
    seen = {str(d) for d in devices}
    return [d for d in DEVICES if d in seen] + sorted(seen - set(DEVICES))


def _get(source: Any, key: str) -> Any:
    if isinstance(source, Mapping):
        return source.get(key)
    return getattr(source, key, None)


def _num(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def timeline_events(source: "Measurement | Mapping[str, Any]") -> list[dict[str, Any]]:
    """The schedule of a measurement as ``{"device", "name", "start_ms", "end_ms", "frame"}`` events.

    Uses ``timeline`` when present, else ``segment_times_ms`` (one event per segment), sorted
    by start time. Events without a finite start and end are dropped.

    Args:
        source: a :class:`~placetune.measurement.Measurement`, or a mapping with
            ``timeline`` / ``segment_times_ms`` (a plan's ``measured`` section).
    """
    raw = list(_get(source, "timeline") or [])
    out: list[dict[str, Any]] = []
    if raw:
        for e in raw:
            s, t = _num(e.get("start_ms")), _num(e.get("end_ms"))
            if s is None or t is None:
                continue
            out.append({"device": str(e.get("device", "GPU")), "name": str(e.get("name", "")), "start_ms": s,
                        "end_ms": max(s, t), "frame": int(e.get("frame") or 0)})
    else:
        for i, seg in enumerate(_get(source, "segment_times_ms") or []):
            s = _num(seg.get("start_ms"))
            t = _num(seg.get("end_ms"))
            if s is None:
                continue
            if t is None:
                t = s + (_num(seg.get("time_ms")) or 0.0)
            out.append({"device": str(seg.get("device", "GPU")), "name": f"seg{seg.get('index', i)}",
                        "start_ms": s, "end_ms": max(s, t), "frame": 0})
    unread = _unread_segments(source)
    for e in out:  # a segment whose placement was not read: drawn where it was asked, and said so
        if e["name"] in unread:
            e["name"] = f"{e['name']} (placement unknown)"
    out.sort(key=lambda e: (e["start_ms"], device_order([e["device"]])[0], e["name"]))
    return out


def _unread_segments(source: Any) -> set[str]:
    """``seg1``... of the pipeline segments whose realised placement was not read (``extra["segment_placements"]``)."""
    extra = _get(source, "extra")
    rows = extra.get("segment_placements") if isinstance(extra, Mapping) else None
    return {f"seg{r.get('index')}" for r in rows or [] if isinstance(r, Mapping) and r.get("known") is False}


def chrome_trace(
    source: "Measurement | Mapping[str, Any]",
    *,
    title: str | None = None,
    simulated: bool | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A Chrome trace-event document of a measurement's schedule.

    Args:
        source: a :class:`~placetune.measurement.Measurement` or a mapping with ``timeline``
            or ``segment_times_ms`` (e.g. ``plan.measured``).
        title: process name shown by the viewer (default ``"placetune schedule"``).
        simulated: label the trace simulated (default: the source's ``simulated`` flag).
        metadata: extra ``otherData`` entries (study, model, platform...).

    Returns:
        ``{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}``: metadata
        events first, then the runs sorted by ``ts`` (µs).

    Raises:
        ConfigError: the source has neither a timeline nor segment times.
    """
    events = timeline_events(source)
    if not events:
        raise ConfigError("the measurement has no timeline and no segment times: nothing to draw "
                          "(measure it with a backend that records them, e.g. the simulated one)")
    if simulated is None:
        simulated = bool(_get(source, "simulated"))
    name = title or "placetune schedule"
    if simulated and "SIMULATED" not in name:
        name = f"{name} (SIMULATED)"
    devices = device_order(e["device"] for e in events)
    tid = {d: i + 1 for i, d in enumerate(devices)}
    out: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": name}}]
    for d in devices:
        out.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": tid[d], "args": {"name": d}})
        out.append({"name": "thread_sort_index", "ph": "M", "pid": 1, "tid": tid[d], "args": {"sort_index": tid[d]}})
    runs: list[dict[str, Any]] = []
    for e in events:
        ts = round(e["start_ms"] * 1000.0, 3)
        dur = round((e["end_ms"] - e["start_ms"]) * 1000.0, 3)
        base = {"name": e["name"] or e["device"], "cat": e["device"], "pid": 1, "tid": tid[e["device"]], "ts": ts,
                "args": {"device": e["device"], "frame": e["frame"], "start_ms": e["start_ms"],
                         "end_ms": e["end_ms"]}}
        if dur > 0:
            runs.append({**base, "ph": "X", "dur": dur})
        else:
            runs.append({**base, "ph": "i", "s": "t"})
    runs.sort(key=lambda r: (r["ts"], r["tid"]))
    other = {"simulated": bool(simulated), "time_unit_of_args": "ms", "generator": "placetune"}
    other.update(dict(metadata or {}))
    return {"traceEvents": out + runs, "displayTimeUnit": "ms", "otherData": other}


def is_trace_file(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a Chrome trace placetune wrote (``otherData.generator`` is ``placetune``)."""
    try:
        if os.stat(path).st_size > _MAX_TRACE_BYTES:
            return False
        with open(path, "rb") as f:
            doc = json.loads(f.read())
    except (OSError, ValueError, RecursionError):
        return False
    other = doc.get("otherData") if isinstance(doc, dict) else None
    return isinstance(other, dict) and other.get("generator") == "placetune" and isinstance(doc.get("traceEvents"),
                                                                                                list)


def write_chrome_trace(
    source: "Measurement | Mapping[str, Any]",
    path: str | os.PathLike[str],
    *,
    owned: Any = None,
    hint: str = "",
    **kw: Any,
) -> Path:
    """Write :func:`chrome_trace` of ``source`` as JSON to ``path``.

    Args:
        owned, hint: as for :func:`~placetune.files.write.write_file` (``trace -o`` without ``--force``:
            only over an earlier trace, see :func:`is_trace_file`).

    Raises:
        ConfigError: nothing to draw, or the file cannot be written.
    """
    doc = chrome_trace(source, **kw)
    return write_file(path, dumps_json(doc, indent=None, separators=(",", ":")), "trace file", owned=owned, hint=hint)
