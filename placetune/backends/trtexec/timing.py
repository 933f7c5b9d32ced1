"""Reading a timed trtexec run: latency records and statistics, the timed window, energy and per-layer profile."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from placetune.hardware.power import PowerReading, energy_per_inference_mj
from placetune.measurement import latency_stats
from placetune.backends.tensorrt.buildlog import BuildLog
from placetune.backends.tensorrt.layer_profile import attribute_profile
from placetune.backends.trtexec.parse import PerfSummary, parse_export_profile, parse_export_times
from placetune.backends.trtexec.process import Run

if TYPE_CHECKING:
    from placetune.model.model import Model

__all__ = ["END_MARKERS", "read_times", "summary_stats", "thin", "absolute_times", "window", "energy", "profile_into"]

#: Output lines trtexec prints right after the timed iterations (their arrival anchors the timed window).
END_MARKERS = ("Timing trace has", "=== Trace details ===", "=== Performance summary ===")
_MAX_SAMPLES = 5000


def read_times(path: Path | None) -> list[dict[str, float]]:
    """The per-iteration records of an ``--exportTimes`` file (none when it is missing)."""
    if path is None:
        return []
    try:
        return parse_export_times(path.read_text(errors="replace"))
    except OSError:
        return []


def summary_stats(summary: PerfSummary) -> dict[str, float]:
    """Latency statistics from the console summary when there are no per-iteration records."""
    s = {k: v for k, v in summary.latency_ms.items() if k in ("median", "mean", "min", "max", "p90", "p99")}
    if "median" not in s and summary.legacy_ms:
        s = latency_stats(summary.legacy_ms)
    return s


def thin(samples: list[float]) -> list[float]:
    """At most 5000 evenly spread latency samples."""
    if len(samples) <= _MAX_SAMPLES:
        return [float(x) for x in samples]
    step = len(samples) / _MAX_SAMPLES
    return [float(samples[int(i * step)]) for i in range(_MAX_SAMPLES)]


def _span_ms(records: list[dict[str, float]]) -> tuple[float, float] | None:
    starts = [s for r in records if (s := r.get("startEnqMs", r.get("startH2dMs"))) is not None]
    ends = [e for r in records if (e := r.get("endD2hMs", r.get("endComputeMs"))) is not None]
    if not starts or not ends:
        return None
    return min(starts), max(ends)


def absolute_times(run: Run, records: list[dict[str, float]], summary: PerfSummary) -> list[tuple[float, float]]:
    """Per timed iteration ``(start, end)`` in ``time.monotonic()`` terms.

    trtexec's time origin is its own; the end of the timed phase is anchored at the arrival
    of the first line printed after it (``Timing trace has``/``=== Performance summary ===``),
    which trtexec prints before any separate profiling run."""
    span = _span_ms(records)
    end_mark = min(run.marks.values()) if run.marks else None
    if span is None or end_mark is None:
        return []
    last = span[1]
    out = []
    for r in records:
        s = r.get("startEnqMs", r.get("startH2dMs"))
        e = r.get("endD2hMs", r.get("endComputeMs"))
        if s is None or e is None:
            continue
        out.append((end_mark - (last - s) / 1000.0, end_mark - (last - e) / 1000.0))
    return out


def window(run: Run, records: list[dict[str, float]], summary: PerfSummary) -> tuple[float, float] | None:
    """The timed iterations' window in ``time.monotonic()`` terms (None: unknown)."""
    times = absolute_times(run, records, summary)
    if times:
        return times[0][0], times[-1][1]
    end_mark = min(run.marks.values()) if run.marks else None
    if end_mark is not None and summary.host_walltime_s:
        return end_mark - summary.host_walltime_s, end_mark
    return None


def energy(reading: PowerReading, qps: float | None) -> float | None:
    """Energy per inference (mJ) from the mean power and the inference rate."""
    return energy_per_inference_mj(reading.mean_w, qps=qps)


def profile_into(path: Path, blog: BuildLog | None, network: list[tuple[str, str | None]] | None, model: "Model",
                 core: int, extra: dict[str, Any], kw: dict[str, Any]) -> None:
    """Per-layer times of an ``--exportProfile`` file into ``extra`` and ``kw`` (segment and layer times),
    attributed to the model's layers through the engine's build log ``blog`` and the parser's ``network``."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        extra.setdefault("notes", []).append("trtexec wrote no --exportProfile file")
        return
    count, entries = parse_export_profile(text)
    if not entries:
        extra.setdefault("notes", []).append("the --exportProfile file has no layer records")
        return
    rows = [(e.name, e.average_ms) for e in entries]
    prof = attribute_profile(rows, blog or BuildLog(), model.names, network,
                             dla_device=f"DLA{core}" if core >= 0 else "DLA0")
    extra.update(engine_layer_times_ms={name: ms for name, ms in rows}, profile_iterations=count,
                 dla_ms=prof.dla_ms, gpu_ms=prof.gpu_ms)
    kw.update(segment_times_ms=prof.segments, layer_times_ms=prof.layer_times_ms)
