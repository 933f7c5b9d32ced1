"""What the tensorrt backend's worker jobs share on the parent side: the job context (the backend's
options a job is built and timed with, its worker pool, the model's source ONNX), a job run with
the clocks judged around its timed part only (:func:`run_timed`), a worker that failed as a
measurement, the timing cache file, engine specs keyed for the engine cache, and
reading each engine's build log back into the realised placement.

The engine mode (:mod:`placetune.backends.tensorrt.backend` and
:mod:`placetune.backends.tensorrt.engine_reply`) and the pipeline and replicas modes
(:mod:`placetune.backends.tensorrt.pipeline`) read these; the context is passed to the modes
explicitly, so that they read no backend's private state.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from placetune.backends.tensorrt.buildlog import BuildLog, locate, parse_build_log
from placetune.backends.tensorrt.cache import EngineCache, engine_key, file_digest
from placetune.backends.tensorrt.env import read_l4t
from placetune.backends.tensorrt.placement_known import decide, inspector_layers, say_unchecked, say_unknown
from placetune.backends.tensorrt.pool import WorkerPool, WorkerReply
from placetune.backends.tensorrt.worker_names import is_placement_line
from placetune.backends.clocks import ClockSampler, ClockWatch
from placetune.backends.jetson import UNEXPLAINED_FALLBACK
from placetune.hardware.locked_clocks import clocks_tag
from placetune.measurement import Measurement
from placetune.memo import Memo
from placetune.model.source import load_source
from placetune.placement.cut_formats import CutFormat, reformats_at_cuts
from placetune.placement.placement import dla_core

if TYPE_CHECKING:
    import onnx

    from placetune.hardware.platforms import Platform
    from placetune.model.model import Model
    from placetune.settings import Settings

__all__ = ["JobContext", "reply_failure", "run_timed", "timing_cache_path", "strongly_typed", "read_realised",
           "runtime_messages", "cache_set_aside", "cut_reformats", "cut_reformat_note", "ran_on",
           "keep_log", "INSPECTOR_KEEP"]

_LOG_KEEP = 400
#: how much of an engine's layer information a record keeps (DETAILED inspector JSON of big models is large)
INSPECTOR_KEEP = 500_000
log = logging.getLogger(__name__)
_RUNTIME_ERRORS_SAID: list[bool] = []  # a measurement with TensorRT errors was said in this process
_CUT_REFORMAT_SAID: list[bool] = []  # a GPU reformat at a native-format cut was said in this process


def strongly_typed(version: str) -> bool:
    """TensorRT 11 on builds strongly typed networks only."""
    m = re.match(r"(\d+)", version or "")
    return m is not None and int(m.group(1)) >= 11


def timing_cache_path(cache_dir: Path, platform: "Platform", version: str, power_mode: str,
                      locked: Mapping[str, int] | None = None) -> Path:
    """The timing cache file of one platform, TensorRT version and power mode (and clock lock,
    :func:`clocks_tag`) under the backend's cache directory."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", f"{platform.name}-trt{version}-{clocks_tag(power_mode, locked)}")
    return cache_dir / "timing" / f"{safe}.cache"


def reply_failure(reply: WorkerReply, base: dict[str, Any], extra: dict[str, Any],
                  timeout_s: float) -> Measurement | None:
    """The measurement of a worker that timed out (after ``timeout_s``), died or could not run
    the job (else None)."""
    if reply.kind == "timeout":
        extra["stderr_tail"] = reply.stderr_tail[-2000:]
        return Measurement.failure(
            "timeout", f"building and timing took longer than {timeout_s:g} s; the worker was "
            "killed (a new one starts for the next placement); a build that is slow, not hung, needs a longer "
            "limit: [backend_options] timeout_s (seconds per build)", extra=extra, **base)
    if reply.kind == "crashed":
        how = reply.signal or (f"exit status {reply.returncode}" if reply.returncode is not None else "no answer")
        last = reply.stderr_tail.strip().splitlines()[-1:] if reply.stderr_tail.strip() else []
        extra.update(returncode=reply.returncode, signal=reply.signal, stderr_tail=reply.stderr_tail[-2000:])
        return Measurement.failure(
            "crashed", f"the TensorRT worker died ({how}) while building/timing this placement"
            + (f": {last[0]}" if last else ""), extra=extra, **base)
    res = reply.result
    if res.get("status") in ("unavailable", "error"):
        extra["traceback"] = res.get("traceback")
        kind = "runtime_failed" if res.get("status") == "unavailable" else "crashed"
        return Measurement.failure(kind, f"TensorRT worker: {res.get('error')}", extra=extra, **base)
    return None


def run_timed(pool: WorkerPool, job: dict[str, Any], timeout_s: float, watch: ClockWatch | None) -> WorkerReply:
    """``pool.run(job)`` with the clocks judged around the job's timed part only: on a Jetson
    (``watch.first`` read), a :class:`~placetune.backends.clocks.ClockSampler` reads them in a thread
    while the worker builds and times, and the snapshots around the ``timed_window`` its result
    reports (``time.monotonic()`` seconds, the worker's timed loop or loops) are given to
    ``watch.timed``: a clock that moved during a build, over before the timing, says nothing about
    the figures. A reply without a window (a failed build, a worker that died) leaves the whole
    measurement judged. Every mode's job (engine, pipeline, replicas) is run through here."""
    clocks = ClockSampler(watch).start() if watch is not None and watch.first is not None else None
    try:
        reply = pool.run(job, timeout_s=timeout_s)
    finally:
        if clocks is not None:
            clocks.stop()
    window = reply.result.get("timed_window") if reply.kind == "result" else None
    if clocks is not None and watch is not None:
        if isinstance(window, list) and len(window) == 2:
            watch.timed(*clocks.window(float(window[0]), float(window[1])))
        else:  # no timed part (or a retried job's first try): the whole measurement is judged
            watch.window = None
    return reply


@dataclass
class JobContext:
    """The backend's options a pipeline or replicas job is built and timed with (see
    :class:`~placetune.backends.tensorrt.backend.TensorRTBackend` for each), the worker pool
    that runs it and the model's source ONNX (the last model's kept in memory)."""

    pool: WorkerPool
    cache_dir: Path
    timeout_s: float
    warmup_ms: float
    iterations: int | None
    profile_iterations: int
    timing_cache: bool
    calibration_cache: str | None
    memory_pools: dict[str, int]
    verbose_log: bool
    engine_cache: bool
    gate: bool
    gate_tolerance: dict[str, float]
    timeline_frames: int
    replicas_duration_s: float
    cut_formats: bool
    test_wrong_cut: bool
    sources: Memo["onnx.ModelProto"] = field(default_factory=lambda: Memo(1))
    #: the run's clocks (None: not watched): a job's timed part is judged (:func:`run_timed`)
    clock_watch: ClockWatch | None = None
    #: read each DLA engine's layer information (the second source of its realised placement)
    inspector: bool = True
    #: the .npz of network inputs the worker times on and gates with (None: random input)
    input_data: str | None = None
    #: the frequencies the clocks were read locked at (the backend's last fingerprint; None: not locked)
    locked_clocks: dict[str, int] | None = None

    def run(self, job: dict[str, Any], timeout_s: float) -> WorkerReply:
        """The job run by the worker pool, the clocks around its timed part judged (:func:`run_timed`)."""
        return run_timed(self.pool, job, timeout_s, self.clock_watch)

    def source_onnx(self, model: "Model") -> "onnx.ModelProto":
        """The model's ONNX with its weights, which a pipeline cuts and a replica rebatches."""
        return self.sources.get(model.hash) or self.sources.put(model.hash, load_source(model))

    def common(self, platform: "Platform", settings: "Settings", version: str) -> dict[str, Any]:
        """Build fields every engine of one job shares (as in an ``engine`` mode job)."""
        st = strongly_typed(version)
        return {
            "precision": settings.precision,
            "strongly_typed": st,
            "gpu_fallback": settings.gpu_fallback,
            "timing_cache": str(timing_cache_path(self.cache_dir, platform, version, settings.power_mode,
                                                  self.locked_clocks)) if self.timing_cache else None,
            "calibration_cache": self.calibration_cache if settings.precision == "int8" and not st else None,
            "memory_pools": self.memory_pools,
            "verbose_log": self.verbose_log,
            "inspector": self.inspector,
        }

    def _options(self, settings: "Settings", common: dict[str, Any], dla_layers: list[str]) -> dict[str, Any]:
        """What besides content, device, precision, version and platform changes an engine."""
        calib = common.get("calibration_cache")
        return {"gpu_fallback": settings.gpu_fallback, "strongly_typed": common["strongly_typed"],
                "dla_layers": sorted(dla_layers), "pools": sorted(self.memory_pools.items()),
                "calibration": file_digest(calib) if calib else None}

    def key(self, device: str, content: str, settings: "Settings", platform: "Platform", version: str,
            common: dict[str, Any], dla_layers: list[str], input_shapes: dict[str, list[int]]) -> str:
        """The engine cache key (:func:`~placetune.backends.tensorrt.cache.engine_key`) of an engine built
        from the ONNX of content hash ``content`` with ``dla_layers`` on ``device`` (none: a GPU engine)."""
        dev = device if dla_layers and dla_core(device) is not None else "GPU"
        # the input shapes set the optimisation profile: a dynamic ONNX (the reference engine's is the
        # model's own file) built for another --shape is another engine
        return engine_key(content, dev, settings.precision, version, platform.name, l4t=read_l4t(),
                          input_shapes={k: [int(d) for d in v] for k, v in sorted(input_shapes.items())},
                          clocks=clocks_tag(settings.power_mode, self.locked_clocks),
                          **self._options(settings, common, dla_layers))

    def spec(self, cache: EngineCache, name: str, device: str, onnx_path: Path, content: str,
             settings: "Settings", platform: "Platform", version: str, common: dict[str, Any], dla_layers: list[str],
             input_shapes: dict[str, list[int]]) -> tuple[dict[str, Any], bool]:
        """A worker engine spec and whether its engine is in the cache already."""
        core = dla_core(device) if dla_layers else None
        key = self.key(device, content, settings, platform, version, common, dla_layers, input_shapes)
        spec = {"name": name, "device": device, "onnx": str(onnx_path), "dla_core": -1 if core is None else core,
                "dla_layers": list(dla_layers), "input_shapes": input_shapes,
                "plan_cache": str(cache.plan_path(key)) if self.engine_cache else None, "cache_key": key}
        return spec, bool(self.engine_cache and cache.has(key, version))


# =========================================================================================
# an engine's build log, read back
# =========================================================================================
def engine_log(info: dict[str, Any]) -> tuple[list[tuple[str, str]], BuildLog, list[tuple[str, str | None]]]:
    """An engine's build log lines, the log read, and its network's layers (name, ONNX node)."""
    lines = [(s, m) for s, m in info.get("log") or []]
    return lines, parse_build_log(lines), [(row[0], row[1]) for row in info.get("network_layers") or []]


def read_realised(layers: tuple[str, ...] | list[str], device: str, predicted: dict[str, str], info: dict[str, Any],
                  realized: dict[str, str], fallback: dict[str, str], notes: list[str], label: str,
                  unknown: list[str], report_as: str | None = None,
                  guessed: list[str] | None = None, unchecked: list[str] | None = None,
                  record: dict[str, Any] | None = None) -> tuple[int, list[Any]]:
    """Read one engine's build log into ``realized`` / ``fallback``; (loadables, DLA subgraphs).

    The same reading as an engine-mode measurement's (:func:`~placetune.backends.tensorrt.placement_known.decide`):
    a log that says nothing of the placement, contradicts itself, names no layer of the engine or
    leaves layers asked on the DLA unplaced after a candidate subgraph was not offloaded makes the
    engine's placement unknown (``label (why)`` added to ``unknown``), never "realised = requested".
    A layer neither source names keeps its requested device and is added to ``guessed`` (engine
    mode's ``extra["placement_from_request"]``). Of an unknown placement, a layer asked on the DLA
    that a fallback warning names is the GPU's in ``realized``, with its warning in ``fallback``
    (``placetune build`` reports it so; the measurement keeps no placement). A placement resting on
    the log alone (``Known.unchecked``) is noted and added to ``unchecked`` (``label: why``).

    ``record`` (a pipeline segment's) is filled with how far this engine's placement is known:
    ``known``, ``source`` (``GPU engine``: known by construction, a GPU engine has no DLA layer),
    ``reason`` and ``unknown_layers`` (its layers asked on the DLA that no source places: a
    fallback warning's layers are the GPU's) when it is not, ``unchecked`` when it rests on the log alone."""
    _, blog, network = engine_log(info)
    target = report_as or device
    dla = [n for n in layers if predicted[n] != "GPU"]
    rec: dict[str, Any] = record if record is not None else {}
    if not dla or device == "GPU":
        rec.update(known=True, source="GPU engine")
        return 0, []
    loc = locate(blog, list(layers), network or None, [n for n in layers if predicted[n] == "GPU"])
    ins = inspector_layers(info.get("inspector"))
    if info.get("inspector"):  # the layer information read, kept with the record: checkable in the morning
        rec["engine_inspector"] = str(info["inspector"])[:INSPECTOR_KEEP]
    elif info.get("inspector_error"):
        rec["inspector_error"] = str(info["inspector_error"])[:300]
    if not blog.reports_placement and ins is None:
        why = str(info.get("inspector_error") or "")[:200]
        no_info = f"; its layer information was not read ({why})" if why else ""
        notes.append(f"{label}: the build log has no DLA/GPU placement sections{no_info}: its realised placement "
                     "is UNKNOWN (placement_known=False)")
        unknown.append(f"{label} (no placement report in its build log{no_info})")
        rec.update(known=False, source="none", reason=f"no placement report in its build log{no_info}",
                   unknown_layers=list(dla))
        for n in dla:
            realized[n] = target
        return 0, []
    if not blog.reports_placement:
        notes.append(f"{label}: the build log has no DLA/GPU placement sections: realised placement from the "
                     "engine's layer information only")
    core = dla_core(device)
    asked = {n: (f"DLA{core}" if predicted[n] != "GPU" else "GPU") for n in layers}
    known = decide(asked, -1 if core is None else core, blog, loc, list(layers), network or None, ins)
    if not known.known or known.realized is None:
        notes.append(f"{label}: its realised placement is UNKNOWN (placement_known=False): {known.reason}")
        unknown.append(f"{label} ({known.reason})")
        rec.update(known=False, source=known.source, reason=known.reason,
                   unknown_layers=[n for n in dla if n not in known.fallback_warned])
        if known.fallback_warned:
            rec["fallback_warned"] = list(known.fallback_warned)
        for n in dla:
            realized[n] = "GPU" if n in known.fallback_warned else target
        for n in known.fallback_warned:
            fallback[n] = loc.fallback[n]
        return 0, loc.subgraphs
    rec.update(known=True, source=known.source)
    if known.unchecked:
        rec["unchecked"] = known.unchecked
        notes.append(f"{label}: {known.unchecked}")
        if unchecked is not None:
            unchecked.append(f"{label}: {known.unchecked}")
    if known.from_request:
        notes.append(f"{label}: {len(known.from_request)} layer(s) no placement line names keep their requested "
                     f"device ({', '.join(known.from_request[:5])})")
        if guessed is not None:
            guessed.extend(known.from_request)
    for n in dla:
        on_dla = known.realized[n] != "GPU"
        realized[n] = target if on_dla else "GPU"
        if not on_dla:
            fallback[n] = loc.fallback.get(n) or UNEXPLAINED_FALLBACK
    return (known.loadables if known.loadables is not None else loc.loadables), loc.subgraphs


def ran_on(label: str, layers: Sequence[str], device: str, realized: Mapping[str, str], unknown: Sequence[str],
           notes: list[str]) -> str:
    """The device a pipeline engine asked on ``device`` ran on: ``GPU`` when its build log (read into
    ``realized`` by :func:`read_realised`) puts every one of its ``layers`` on the GPU (TensorRT's GPU
    fallback; said in ``notes``), else ``device``, also when its placement is unknown (``label`` in
    ``unknown``): its timeline and busy time are then drawn where the work ran."""
    if device == "GPU" or any(u.startswith(f"{label} ") for u in unknown) or \
            any(realized.get(n, device) != "GPU" for n in layers):
        return device
    notes.append(f"{label}: asked on {device}, every layer ran on the GPU (TensorRT's GPU fallback): its timeline, "
                 "segment time and busy time are the GPU's")
    return "GPU"


def mark_unknown(kw: dict[str, Any], unknown: list[str], unchecked: Sequence[str] = ()) -> None:
    """No realised placement when an engine's build log cannot say it (``placement_known``); the
    engines whose placement rests on the log alone (``placement_unchecked``). Each is said on the
    terminal at its first occurrence in the process, as engine mode says it."""
    kw["extra"]["placement_known"] = not unknown
    if unchecked:
        kw["extra"]["placement_unchecked"] = "; ".join(unchecked)
        say_unchecked(kw["extra"]["placement_unchecked"])
    if unknown:  # nor could the worker count their loadables against a core's 16
        kw["extra"]["placement_unknown"] = (f"the realised placement of {'; '.join(unknown)} is unknown: their DLA "
                                            "loadables, and the 16-per-core check, are unknown too")
        kw["realized"] = None
        kw["dla_loadables"] = {}
        say_unknown(kw["extra"]["placement_unknown"])


def runtime_messages(extra: dict[str, Any], res: dict[str, Any]) -> list[str]:
    """TensorRT's errors and warnings of deserialising and running a job's engines (the worker's
    ``runtime_log``, kept apart from the builds') into ``runtime_errors`` / ``runtime_warnings``,
    20 of each, as every mode records them; the errors are returned (a failure's reason, its DLA class)."""
    log_lines = res.get("runtime_log") or []
    errors = [str(m) for s, m in log_lines if s in ("ERROR", "INTERNAL_ERROR")]
    if errors:
        extra["runtime_errors"] = errors[:20]
        if res.get("status") == "ok":  # timed all the same: kept, but never only in an extra
            extra.setdefault("notes", []).append(f"TensorRT reported {len(errors)} error(s) while deserialising or "
                                                 f"running the engines, yet the run completed: {errors[0][:200]} "
                                                 "(all in runtime_errors); its figures may not be the engine's")
            (log.debug if _RUNTIME_ERRORS_SAID else log.warning)(
                "TENSORRT ERRORS IN A COMPLETED RUN: %s; the measurement is kept with its runtime_errors and a note "
                "(later ones are noted only)", errors[0][:300])
            _RUNTIME_ERRORS_SAID.append(True)
    if warned := [str(m) for s, m in log_lines if s == "WARNING"]:
        extra["runtime_warnings"] = warned[:20]
    return errors


def cache_set_aside(info: dict[str, Any], notes: list[str]) -> None:
    """The worker's line when it set an unreadable timing cache aside for a build (``info``: a reply, or one
    engine's record of a pipeline or replicas job; worker_cache.load_timing_cache): said where it happened
    and kept in the measurement's ``notes``, in every mode."""
    if said := info.get("timing_cache_set_aside"):
        log.warning("%s", said)
        notes.append(str(said))


def logs_into(extra: dict[str, Any], label: str, info: dict[str, Any]) -> None:
    """An engine's build errors, warnings and (placement) log lines into a measurement's extras
    (:func:`keep_log`: the engines' logs share one record, in the order they are read)."""
    lines, blog, _ = engine_log(info)
    extra.setdefault("build_errors", []).extend(f"{label}: {e}" for e in blog.errors[:20])
    extra.setdefault("build_warnings", []).extend(f"{label}: {w}" for w in blog.warnings[:40])
    keep_log(extra.setdefault("build_log", []), lines, f"{label} ")


def keep_log(kept: list[str], lines: Sequence[tuple[str, str]], prefix: str = "") -> list[str]:
    """Append to ``kept`` a build log's lines as a record keeps them: no VERBOSE line but the placement
    lines, the first :data:`_LOG_KEEP` lines of the record, then every placement line (the record of where
    TensorRT put the layers: a pipeline's later DLA engines' lines are never lost behind its earlier
    engines' logs) and one line saying how many others were left out."""
    dropped = 0
    for s, m in lines:
        if s == "VERBOSE" and not is_placement_line(m):
            continue
        if len(kept) < _LOG_KEEP or is_placement_line(m):
            kept.append(f"{prefix}[{s[0]}] {m}")
        else:
            dropped += 1
    if dropped:
        kept.append(f"{prefix}({dropped} log line(s) left out: a record keeps its first {_LOG_KEEP} lines, then "
                    "the placement lines only)")
    return kept


def cache_counts(infos: list[dict[str, Any]]) -> dict[str, int]:
    """Engines taken from the engine cache and engines built."""
    hits = sum(1 for i in infos if i.get("cached"))
    return {"hits": hits, "misses": len(infos) - hits}


def cut_reformats(rows: Sequence[Mapping[str, Any]], infos: Sequence[Mapping[str, Any]],
                  formats: Mapping[str, CutFormat], profiles: Sequence[Any]) -> list[dict[str, Any]]:
    """Every GPU reformat the pipeline's DLA engines (``rows``: ``extra["engines"]``, with each engine's
    record in ``infos`` and layer profile in ``profiles``) still run at a cut tensor given a native
    format: :func:`~placetune.placement.cut_formats.reformats_at_cuts` of each DLA engine's layer
    information, with ``engine`` (``seg<k>``)."""
    found: list[dict[str, Any]] = []
    for k, (row, info) in enumerate(zip(rows, infos)):
        if row.get("device") != "GPU" and formats:
            found += [{"engine": f"seg{row['index']}", **r} for r in reformats_at_cuts(
                inspector_layers(info.get("inspector")), formats, profiles[k] if k < len(profiles) else ())]
    return found


def cut_reformat_note(found: Sequence[Mapping[str, Any]]) -> str:
    """The note of a pipeline whose DLA engines still reformat cut tensors given their native format on
    the GPU (``extra["cut_reformats"]``, :func:`cut_reformats`); the first of the process is also said as a
    warning (later ones at debug level). Its figures are kept: they are what ran, GPU reformat included,
    not what the cut formats were chosen for."""
    ms = [float(r["ms"]) for r in found if r.get("ms") is not None]
    cuts = "; ".join(f"{r['engine']}: {r['tensor']} ({r['layer']})" for r in found[:6])
    note = (f"TensorRT still runs {len(found)} GPU reformat(s) in the DLA engines at cut tensors given the DLA's "
            f"native format (for a layer there that fell back to the GPU, or because it promises the native layout "
            f"only without GPU fallback): {cuts}"
            + (f"; {sum(ms):.4g} ms per frame in the layer profile" if ms else "") + "; they are in the figures")
    (log.debug if _CUT_REFORMAT_SAID else log.warning)("CUT REFORMAT: %s (extra cut_reformats)", note)
    _CUT_REFORMAT_SAID.append(True)
    return note
