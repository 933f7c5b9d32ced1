"""Parsers for what ``trtexec`` prints and writes (pure Python, no TensorRT).

Formats (reference ``tensorrt-dla.md`` §2.3-2.6; identical from TensorRT 8.4 to 11.1):

* the console **performance summary** (``=== Performance summary ===``, ``Throughput: <f> qps``,
  ``Latency: min = <f> ms, max = ..., mean = ..., median = ..., percentile(99%) = ...``, ...),
  every line prefixed by the sample logger (``[03/31/2022-15:12:38] [I] ``);
* the final ``&&&& PASSED`` / ``&&&& FAILED TensorRT.trtexec [TensorRT v8502] # <cmd>`` line
  and the version in it (``v8502`` = 8.5.2, ``v100300`` = 10.3.0); 10.x adds a build tag after the
  version (``[TensorRT v100700] [b23] # <cmd>``);
* ``--exportTimes`` JSON: one object per timed iteration (``startEnqMs`` ... ``latencyMs``);
* ``--exportProfile`` JSON: ``[{"count": N}, {"name", "timeMs", "averageMs", "medianMs",
  "percentage"}, ...]`` whose layer names are written **without JSON escaping** (a name
  with ``"`` or ``\\`` makes the file invalid JSON, or valid JSON with the wrong name), so
  names are read from the raw text;
* ``--exportLayerInfo`` JSON: the engine inspector's ``{"Layers": [...], "Bindings": [...]}``;
* the pre-8.0 per-window lines ``Average over 10 runs is 6.45 ms (host walltime is 6.63 ms,
  99% percentile time is 6.62).`` (seen in ``shared/seeds/003``), read as a fallback;
* the TensorRT 7 multi-line summary: a ``Host Latency`` (``GPU Compute``, ...) line, then
  ``min: 6.14 ms (end to end 6.15 ms)``, ..., ``percentile: 8.90 ms at 99% (...)``,
  ``throughput: 145.5 qps``, ``walltime: 3.02 s``, and the GPU Compute block's ``total compute time: 90.22 s``
  (tests/data/trt_corpus, 7.1.3 on Xavier);
* ``TensorRT version: 8001`` (8.0's device report: the integer code, 8.0.1).

The ``[DlaLayer]``/``[GpuLayer]`` placement sections are read by
:func:`placetune.backends.tensorrt.buildlog.parse_build_log`.

Example:
    >>> s = parse_summary([
    ...     "[03/31/2022-15:12:38] [I] === Performance summary ===",
    ...     "[03/31/2022-15:12:38] [I] Throughput: 305.926 qps",
    ...     "[03/31/2022-15:12:38] [I] Latency: min = 0.54895 ms, max = 13.481 ms, mean = 5.28364 ms, "
    ...     "median = 5.1907 ms, percentile(99%) = 8.7981 ms",
    ... ])
    >>> s.throughput_qps, s.latency_ms["median"], s.latency_ms["p99"]
    (305.926, 5.1907, 8.7981)
    >>> version_from_text("&&&& RUNNING TensorRT.trtexec [TensorRT v8502] # trtexec --help")
    '8.5.2'
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from placetune.backends.tensorrt.logprefix import is_bare, own_error_after_warning, split_prefix, unmarked_error

__all__ = [
    "PerfSummary", "ProfileEntry", "LayerInfo", "strip_prefix", "version_from_text", "version_from_code",
    "parse_summary", "parse_export_times", "parse_export_profile", "parse_layer_info", "error_lines",
    "TIME_FIELDS",
]

_STATUS = re.compile(r"&&&&\s+(?P<status>RUNNING|PASSED|FAILED|WAIVED)\s+(?P<name>\S+)"
                     r"(?:\s+\[TensorRT\s+v(?P<code>\d+)\])?(?:\s*\[b\d+\])?(?:\s*#\s*(?P<cmd>.*))?")
#: ``TensorRT version: 8.6.1``, ``TensorRT v8.6.1``, a script's ``TensorRT - Version: 10.0.1``
_VERSION_DOTTED = re.compile(r"TensorRT\s+(?:-\s+)?(?:version|v)\s*:?\s*(?P<v>\d+\.\d+(?:\.\d+)*)", re.I)
#: trtexec's own line, dotted (8.6 on): ``TensorRT version: 8.6.1``
_VERSION_LINE = re.compile(r"^TensorRT version:\s*(?P<v>\d+\.\d+(?:\.\d+)*)$")
_VERSION_CODE = re.compile(r"TensorRT\s+version\s*:\s*(?P<code>\d{4,6})\b", re.I)
#: the status line's version tag, also where the ``&&&&`` before it was cut (``RUNNING TensorRT.trtexec [TensorRT v8001] # ...``)
_VERSION_TAG = re.compile(r"\[TensorRT\s+v(?P<code>\d{4,6})\]")
#: Polygraphy's module report: ``[V] Loaded Module: tensorrt | Version: 8.6.0 | Path: [...]``
_VERSION_POLYGRAPHY = re.compile(r"Loaded Module:\s*tensorrt\s*\|\s*Version:\s*(?P<v>\d+\.\d+(?:\.\d+)*)")
#: Ultralytics' export: ``TensorRT: starting export with TensorRT 8.2.0.6...`` (the Python package's version)
_VERSION_ULTRALYTICS = re.compile(r"starting export with TensorRT\s+(?P<v>\d+\.\d+(?:\.\d+)*)")
#: the builder's resource library, which TensorRT (8.5 on) says it loads by its versioned name, whatever prefix the
#: application puts before the message (``Loaded shared library libnvinfer_builder_resource.so.8.5.2``)
_VERSION_RESOURCE = re.compile(r"(?:Trying to load|Loaded) shared library libnvinfer_builder_resource\.so\."
                               r"(?P<v>\d+\.\d+\.\d+(?:\.\d+)?)\b")
#: the TensorRT 7 multi-line summary: a block name alone, then ``stat: value ms (...)`` lines
_BLOCK7 = {"Host Latency": "latency_ms", "GPU Compute": "gpu_compute_ms", "Enqueue Time": "enqueue_ms",
           "H2D Latency": "h2d_ms", "D2H Latency": "d2h_ms"}
_STAT7 = re.compile(r"^(?P<name>min|max|mean|median|percentile|throughput|walltime|total compute time)\s*:\s*"
                    r"(?P<v>[-+0-9.eE]+)\s*"
                    r"(?P<unit>ms|s|qps)?(?:\s+at\s+(?P<pct>[0-9.]+)%)?")
_METRIC = re.compile(
    r"^(?P<key>Throughput|Latency|Enqueue Time|H2D Latency|GPU Compute Time|D2H Latency|"
    r"Total Host Walltime|Total GPU Compute Time|Host Latency)\s*:\s*(?P<rest>.*)$")
#: one statistic of a summary line; a figure copied by hand may have lost its ``=`` (``max 6.19507 ms``)
_STAT = re.compile(r"\b(?P<name>min|max|mean|median|percentile\((?P<pct>[0-9.]+)%\))\s*=?\s*(?P<v>[-+0-9.eEnaif]+)\s*ms")
#: a Total figure run together with the line before it (``... percentile(99%) 1.50879 ms Total Host Walltime: 3.05281 s``)
_TOTAL_INLINE = re.compile(r"(?P<key>Total Host Walltime|Total GPU Compute Time)\s*:\s*(?P<v>" + r"[-+]?\d+\.?\d*(?:[eE][-+]?\d+)?"
                           r")\s*(?P<unit>ms|s)\b")
_LEGACY = re.compile(r"Average over (?P<n>\d+) runs is (?P<ms>[0-9.eE+-]+) ms \(host walltime is "
                     r"(?P<host>[0-9.eE+-]+) ms, (?P<pct>[0-9.]+)% percentile time is (?P<p>[0-9.eE+-]+)")
_NUMBER = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|nan|inf|infinity)"
#: The fields of one ``--exportTimes`` record (all ms).
TIME_FIELDS = ("startEnqMs", "endEnqMs", "startH2dMs", "endH2dMs", "startComputeMs", "endComputeMs",
               "startD2hMs", "endD2hMs", "h2dMs", "computeMs", "d2hMs", "latencyMs")
_PROFILE_RECORD = re.compile(
    r"\{\s*\"name\"\s*:\s*\"(?P<name>.*?)\"\s*,\s*\"timeMs\"\s*:\s*(?P<t>" + _NUMBER + r")"
    r"\s*,\s*\"averageMs\"\s*:\s*(?P<a>" + _NUMBER + r")"
    r"(?:\s*,\s*\"medianMs\"\s*:\s*(?P<m>" + _NUMBER + r"))?"
    r"\s*,\s*\"percentage\"\s*:\s*(?P<p>" + _NUMBER + r")\s*\}",
    re.S | re.I,
)
_PROFILE_COUNT = re.compile(r"\{\s*\"count\"\s*:\s*(?P<n>\d+)\s*\}")
_TIME_KEYS = frozenset(TIME_FIELDS)


def strip_prefix(line: str) -> tuple[str | None, str]:
    """``"[03/31/2022-15:12:38] [I] [TRT] text"`` -> ``("I", "text")`` (severity None when absent;
    the prefix forms of :func:`placetune.backends.tensorrt.logprefix.split_prefix`)."""
    return split_prefix(line)


def version_from_code(code: str | int) -> str:
    """TensorRT's integer version -> dotted: ``8502`` -> ``8.5.2``, ``8601`` -> ``8.6.1``,
    ``100300`` -> ``10.3.0`` (from 10.0 the code is ``major*10000 + minor*100 + patch``)."""
    n = int(code)
    if n >= 100000:
        return f"{n // 10000}.{(n // 100) % 100}.{n % 100}"
    return f"{n // 1000}.{(n // 100) % 10}.{n % 100}"


def version_from_text(text: str) -> str | None:
    """The TensorRT version in trtexec output: the ``&&&& ... [TensorRT v8502]`` line (or its tag where the
    ``&&&&`` was cut), or a
    ``TensorRT version: 8.6.1`` / ``TensorRT version: 8001`` line, Polygraphy's ``Loaded Module:
    tensorrt | Version: 8.6.0``, Ultralytics' ``starting export with TensorRT 8.2.0.6`` (as printed) or the
    builder resource library TensorRT says it loads (``libnvinfer_builder_resource.so.8.5.2``). None when none is
    there."""
    for line in text.splitlines():
        m = _STATUS.search(line)
        if m and m.group("code"):
            return version_from_code(m.group("code"))
    m = _VERSION_TAG.search(text)
    if m:
        return version_from_code(m.group("code"))
    for pat in (_VERSION_DOTTED, _VERSION_POLYGRAPHY, _VERSION_ULTRALYTICS, _VERSION_RESOURCE):
        for m in pat.finditer(text):
            if _dotted_version(m.group("v")):
                return m.group("v")
    m = _VERSION_CODE.search(text)
    return version_from_code(m.group("code")) if m else None


def _dotted_version(text: str) -> bool:
    """Whether ``8.6.1`` / ``10.3.0.30`` is written as TensorRT writes a version: no number after the first has a
    leading zero. tkDNN's banner ``TensorRT v6.01`` runs the minor and patch numbers together (6.0.1): no version
    is read from it (``6.01`` could be 6.0.1 or 6.1; unknown, never guessed)."""
    return not any(len(part) > 1 and part.startswith("0") for part in text.split(".")[1:])


def _stats(rest: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for m in _STAT.finditer(rest):
        name = m.group("name")
        if m.group("pct"):
            pct = m.group("pct")
            name = "p" + (pct[:-2] if pct.endswith(".0") else pct)
        try:
            out[name] = float(m.group("v"))
        except ValueError:
            continue
    return out


@dataclass
class PerfSummary:
    """trtexec's console results.

    Attributes:
        throughput_qps: inferences (queries) per second; one query is one batch. None where none was
            printed or the printed figure is no measurement (``0 qps``).
        latency_ms: ``min``, ``max``, ``mean``, ``median``, ``p90``, ``p95``, ``p99`` ... of
            the end-to-end latency (H2D + GPU compute + D2H).
        enqueue_ms, h2d_ms, gpu_compute_ms, d2h_ms: the same statistics of each part.
        host_walltime_s: ``Total Host Walltime``.
        gpu_compute_s: ``Total GPU Compute Time``.
        legacy_ms: the ``Average over N runs is X ms`` values of pre-8.0 trtexec, in order.
        status: ``PASSED``, ``FAILED`` (the ``&&&&`` line) or None when trtexec ended without one.
        version: TensorRT version from the ``&&&&`` lines.
        command: the command line trtexec echoed after ``#``.
        has_summary: True when a ``Throughput`` or ``Latency`` line was found.
    """

    throughput_qps: float | None = None
    latency_ms: dict[str, float] = field(default_factory=dict)
    enqueue_ms: dict[str, float] = field(default_factory=dict)
    h2d_ms: dict[str, float] = field(default_factory=dict)
    gpu_compute_ms: dict[str, float] = field(default_factory=dict)
    d2h_ms: dict[str, float] = field(default_factory=dict)
    host_walltime_s: float | None = None
    gpu_compute_s: float | None = None
    legacy_ms: list[float] = field(default_factory=list)
    status: str | None = None
    version: str | None = None
    command: str | None = None
    has_summary: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The figures as a JSON-ready dict (empty parts left out)."""
        d = {
            "throughput_qps": self.throughput_qps, "latency_ms": self.latency_ms, "enqueue_ms": self.enqueue_ms,
            "h2d_ms": self.h2d_ms, "gpu_compute_ms": self.gpu_compute_ms, "d2h_ms": self.d2h_ms,
            "host_walltime_s": self.host_walltime_s, "gpu_compute_s": self.gpu_compute_s,
        }
        return {k: v for k, v in d.items() if v not in (None, {}, [])}


def parse_summary(lines: Iterable[str]) -> PerfSummary:
    """Read the performance summary, the ``&&&&`` status and (pre-8.0) ``Average over`` lines.

    ``Latency``-style lines are taken from the ``=== Performance summary ===`` block when
    there is one (older versions print per-window "Trace averages" lines before it)."""
    out = PerfSummary()
    in_summary = False
    block7: str | None = None  # the TensorRT 7 summary block being read
    for line in _unwrapped(lines):
        sm = _STATUS.search(line)
        if sm:
            if sm.group("code") and out.version is None:
                out.version = version_from_code(sm.group("code"))
            if sm.group("status") in ("PASSED", "FAILED", "WAIVED"):
                out.status = sm.group("status")
                out.command = (sm.group("cmd") or "").strip() or out.command
            continue
        _, msg = strip_prefix(line)
        if msg.startswith("=== Performance summary"):
            in_summary = True
            continue
        if msg.startswith("===") and in_summary:
            in_summary = False
            continue
        if out.version is None:
            vm = _VERSION_CODE.search(msg) or _VERSION_TAG.search(msg)
            if vm:
                out.version = version_from_code(vm.group("code"))
            else:  # trtexec 8.6 on: "[I] TensorRT version: 8.6.1" in its Device Information block
                dm = _VERSION_LINE.match(msg)
                if dm and _dotted_version(dm.group("v")):
                    out.version = dm.group("v")
        if msg in _BLOCK7:
            block7 = msg
            continue
        if block7 is None and _STAT7.match(msg) and "(end to end " in msg:
            block7 = "Host Latency"  # quoted without its header: only that block gives "(end to end ...)"
        s7 = _STAT7.match(msg) if block7 else None
        if s7 and block7:
            _read_stat7(out, block7, s7)
            continue
        if msg and not s7:
            block7 = None
        lm = _LEGACY.search(msg)
        if lm:
            out.legacy_ms.append(float(lm.group("ms")))
            continue
        mm = _METRIC.match(msg)
        if not mm:
            continue
        key, rest = mm.group("key"), mm.group("rest")
        if key == "Throughput":
            num = re.match(r"\s*(" + _NUMBER + r")", rest, re.I)
            if num:
                out.throughput_qps = _measured_rate(float(num.group(1)))
                out.has_summary = True
            continue
        if key in ("Total Host Walltime", "Total GPU Compute Time"):
            # trtexec writes every total with its unit: a figure without one is a line cut in a
            # published excerpt ("Total GPU Compute Time: 3.0635"), whose digits may be cut too
            num = re.match(r"\s*(" + _NUMBER + r")\s*(ms|s)\s*$", rest, re.I)
            if num:
                _set_total(out, key, float(num.group(1)), num.group(2))
            continue
        stats = _stats(rest)
        for tm in _TOTAL_INLINE.finditer(rest):
            _set_total(out, tm.group("key"), float(tm.group("v")), tm.group("unit"))
        if not stats:
            continue
        target = {"Latency": out.latency_ms, "Host Latency": out.latency_ms, "Enqueue Time": out.enqueue_ms,
                  "H2D Latency": out.h2d_ms, "GPU Compute Time": out.gpu_compute_ms,
                  "D2H Latency": out.d2h_ms}[key]
        if in_summary or not target:
            target.clear()
            target.update(stats)
            if key in ("Latency", "Host Latency"):
                out.has_summary = True
    return out


#: a statistic's name left without its value at the end of a line (``..., percentile(95%) ``)
_CUT_STAT = re.compile(r"\b(?:min|max|mean|median|percentile\([0-9.]+%\))\s*$")


def _unwrapped(lines: Iterable[str]) -> Iterable[str]:
    """The lines, with a summary line broken before a value joined again: a reporter's paste wraps ``GPU Compute
    Time: ..., percentile(95%) `` and goes on ``= 820.003 ms, percentile(99%) = 820.003 ms`` on a bare line
    (tests/data/trt_corpus, TensorRT 10.3)."""
    held: str | None = None
    for raw in lines:
        for line in str(raw).splitlines() or [""]:
            if held is not None:
                rest = line.strip()
                if rest.startswith("=") and not rest.startswith("=="):
                    line = held.rstrip() + " " + rest
                else:
                    yield held
                held = None
            if _CUT_STAT.search(line) and _METRIC.match(strip_prefix(line)[1]):
                held = line
                continue
            yield line
    if held is not None:
        yield held


def _set_total(out: PerfSummary, key: str, value: float, unit: str) -> None:
    """``Total Host Walltime`` / ``Total GPU Compute Time``, in seconds."""
    v = value / (1000.0 if unit == "ms" else 1.0)
    if key == "Total Host Walltime":
        out.host_walltime_s = v
    else:
        out.gpu_compute_s = v


def _measured_rate(qps: float) -> float | None:
    """A printed throughput, or None where it is no measurement: timed queries make it positive, so a
    printed ``0 qps`` (TensorRT 7's ``throughput: 0 qps`` beside a 3 s walltime) or nan is unknown."""
    return qps if qps > 0 and math.isfinite(qps) else None


def _read_stat7(out: PerfSummary, block: str, m: re.Match[str]) -> None:
    """One ``name: value unit`` line of a TensorRT 7 summary block (the value before ``(end to end``)."""
    name, value = m.group("name"), float(m.group("v"))
    if name == "throughput":
        if block == "Host Latency":
            out.throughput_qps = _measured_rate(value)
        return
    if name == "walltime":
        if block == "Host Latency":
            out.host_walltime_s = value / (1000.0 if m.group("unit") == "ms" else 1.0)
        return
    if name == "total compute time":  # the GPU Compute block's last line (later 'Total GPU Compute Time')
        if block == "GPU Compute" and m.group("unit") in ("s", "ms"):
            out.gpu_compute_s = value / (1000.0 if m.group("unit") == "ms" else 1.0)
        return
    if name == "percentile":
        pct = m.group("pct") or "99"
        name = "p" + (pct[:-2] if pct.endswith(".0") else pct)
    getattr(out, _BLOCK7[block])[name] = value
    if block == "Host Latency":
        out.has_summary = True


def error_lines(lines: Iterable[str], limit: int = 50) -> list[str]:
    """The lines that explain a failure: ``[E]`` lines (GStreamer's ``ERROR`` column too), ``&&&& FAILED``, and
    unmarked lines whose words report one (:func:`~placetune.backends.tensorrt.logprefix.unmarked_error`: an
    ``Error``, protobuf's ``[libprotobuf ERROR ...]``, NvMedia's ``NVMEDIA_DLA : 308, ERROR: ...``, an
    application's ``Building engine failed``), prefix stripped, in order, no repeats. A bare line right after a warning
    continues it (:func:`~placetune.backends.tensorrt.logprefix.own_error_after_warning` names the exceptions)."""
    out: list[str] = []
    in_warning = False  # within a warning: bare lines right after it continue it (no error of their own)
    for raw in lines:
        for line in str(raw).splitlines() or [""]:
            sev, msg = strip_prefix(line)
            if not msg:
                in_warning = False
                continue
            bare = sev is None and is_bare(line, msg)
            in_warning = sev == "W" or (in_warning and bare)
            if in_warning and bare and not own_error_after_warning(msg):
                continue
            # a line the logger marked [I]/[V]/[W] is no error, whatever words it holds (Polygraphy's
            # "[I] Error Metrics: out" is a report); unmarked lines are judged by their words
            if sev in ("E", "F") or msg.startswith("&&&& FAILED") or sev is None and unmarked_error(msg):
                if msg not in out:
                    out.append(msg)
                    if len(out) >= limit:
                        return out
    return out


def _float(text: str) -> float:
    """A figure of trtexec's text: NaN (no figure) for what is no finite number (``inf``, as a C++ stream prints
    a float's infinity)."""
    try:
        out = float(text)
    except ValueError:
        return math.nan
    return out if math.isfinite(out) else math.nan


def parse_export_times(text: str) -> list[dict[str, float]]:
    """``--exportTimes`` records: one dict of ms values per timed iteration.

    Valid JSON is read as JSON; otherwise each ``{...}`` object is read field by field (a
    truncated file, e.g. from a killed trtexec, gives the complete records before the cut).
    """
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):  # (RecursionError: nested too deeply)
        doc = None
    if isinstance(doc, list):
        recs = [{k: _json_float(v) for k, v in rec.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
                for rec in doc if isinstance(rec, dict)]
    else:
        recs = [{k: _float(v) for k, v in re.findall(r"\"(\w+)\"\s*:\s*(" + _NUMBER + r")", body, re.I)}
                for body in re.findall(r"\{([^{}]*)\}", text)]
    # a record times an iteration: another file's objects (a profile's, the inspector's) are not records
    return [rec for rec in recs if _TIME_KEYS & rec.keys()]


@dataclass
class ProfileEntry:
    """One engine layer of ``--exportProfile``.

    Attributes:
        name: the engine layer name, exactly as trtexec wrote it (never unescaped).
        time_ms: total over all profiled iterations.
        average_ms: per iteration.
        median_ms: per-iteration median (None where the version does not write it).
        percentage: share of the total time.
    """

    name: str
    time_ms: float
    average_ms: float
    median_ms: float | None
    percentage: float


def parse_export_profile(text: str) -> tuple[int | None, list[ProfileEntry]]:
    """``--exportProfile``: ``(iteration count, entries in execution order)``.

    trtexec writes names between quotes without escaping them, so a name is everything
    between ``"name" : "`` and the ``", "timeMs" :`` that follows; a name with ``"``,
    ``\\`` or ``,`` in it is read intact. Files that are valid JSON and have no such
    records (another writer) are read as JSON.
    """
    count_m = _PROFILE_COUNT.search(text)
    count = int(count_m.group("n")) if count_m else None
    entries = [
        ProfileEntry(m.group("name"), _float(m.group("t")), _float(m.group("a")),
                     _float(m.group("m")) if m.group("m") is not None else None, _float(m.group("p")))
        for m in _PROFILE_RECORD.finditer(text)
    ]
    if entries:
        return count, entries
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):  # (RecursionError: nested too deeply)
        return count, []
    if not isinstance(doc, list):
        return count, []
    for rec in doc:  # a count or a time of another kind (a list, a string, null, past a float) is no figure
        if not isinstance(rec, dict):
            continue
        if "count" in rec and "name" not in rec:
            n = _json_float(rec["count"])
            count = int(n) if n >= 0 and n == int(n) else None  # (NaN >= 0 is False)
        elif isinstance(rec.get("name"), str):
            entries.append(ProfileEntry(rec["name"], _json_float(rec.get("timeMs")), _json_float(rec.get("averageMs")),
                                        _json_float(rec["medianMs"]) if "medianMs" in rec else None,
                                        _json_float(rec.get("percentage"))))
    return count, entries


def _json_float(value: object) -> float:
    """A JSON number as a finite float; NaN for anything else (a string, a list, null, true, a number past a float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan
    try:
        out = float(value)
    except OverflowError:  # an integer of 400 digits
        return math.nan
    return out if math.isfinite(out) else math.nan


@dataclass
class LayerInfo:
    """``--exportLayerInfo`` (the engine inspector's JSON).

    Attributes:
        layers: per engine layer: a dict (``--profilingVerbosity=detailed``: ``Name``,
            ``LayerType``, ``Inputs``...) or ``{"Name": name}`` (names only).
        bindings: the engine's I/O tensor names.
        valid_json: False when the file was not valid JSON and was read line by line.
        unreadable: why valid JSON could not be read as layer information ("" when it could).
        text: the file as written.
    """

    layers: list[dict[str, Any]] = field(default_factory=list)
    bindings: list[str] = field(default_factory=list)
    valid_json: bool = True
    unreadable: str = ""
    text: str = ""

    @property
    def names(self) -> list[str]:
        """Engine layer names in order."""
        return [str(x.get("Name", "")) for x in self.layers]


def parse_layer_info(text: str) -> LayerInfo:
    """Read ``--exportLayerInfo``; an invalid file (unescaped names) still gives the names
    of the layers it can delimit (``"Name" : "..."`` up to the next ``", "`` key)."""
    out = LayerInfo(text=text)
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):  # (RecursionError: nested too deeply)
        doc = None
    if isinstance(doc, dict):
        layers, bindings = doc.get("Layers") or [], doc.get("Bindings") or []
        if not isinstance(layers, list) or not isinstance(bindings, list):
            out.unreadable = '"Layers" and "Bindings" must be lists'
            return out
        for item in layers:
            out.layers.append(item if isinstance(item, dict) else {"Name": str(item)})
        out.bindings = [str(b) for b in bindings]
        return out
    if doc is not None:  # valid JSON, but not an object
        out.unreadable = "not a JSON object"
        return out
    out.valid_json = False
    # detailed: {"Name" : "<raw>", "LayerType" : ...}; names-only: "Layers": ["<raw>", ...]. A name
    # never runs past the next `", "` (else a tensor's "Name" in Inputs/Outputs of a file cut short
    # swallows the keys up to the next layer's name); the LayerType right after it is kept (a Myelin
    # ForeignNode is no DLA loadable)
    detailed = re.findall(r"\"Name\"\s*:\s*\"((?:(?!\"\s*,\s*\").)*?)\"\s*,\s*"
                          r"\"(LayerType|Inputs|Outputs|ParameterType)\"(?:\s*:\s*\"([^\"\n]*)\")?", text, re.S)
    if detailed:
        out.layers = [{"Name": n, "LayerType": t} if key == "LayerType" and t else {"Name": n} for n, key, t in detailed]
    else:
        m = re.search(r"\"Layers\"\s*:\s*\[(?P<body>.*?)\]\s*,\s*\"Bindings\"", text, re.S)
        if m:
            body = m.group("body").strip()
            if body.startswith("\"") and body.endswith("\""):
                out.layers = [{"Name": n} for n in re.split(r"\"\s*,\s*\n?\s*\"", body[1:-1])]
        else:  # a names-only file cut short (trtexec killed): the names on complete lines
            m = re.search(r"\"Layers\"\s*:\s*\[\s*\"", text)
            if m:
                lines = text[m.end() - 1:].split("\n")
                out.layers = [{"Name": x.strip().lstrip(",")[1:-1]} for x in lines
                              if x.strip().lstrip(",").startswith("\"") and x.strip().endswith("\"")]
    bm = re.search(r"\"Bindings\"\s*:\s*\[(?P<body>.*?)\]\s*\}\s*$", text, re.S)
    if bm:
        out.bindings = re.findall(r"\"(.*?)\"(?=\s*(?:,|$))", bm.group("body").strip(), re.S)
    return out
