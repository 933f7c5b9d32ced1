"""``pipeline`` and ``replicas`` modes of the tensorrt backend (parent side).

**pipeline**: the realised placement's segments (``Placement.segments(pipeline=True)``) are
cut out of the ONNX model (:func:`placetune.placement.cut.cut`), one engine is built per segment in
the worker (GPU, or DLA core *k* with GPU fallback) or taken from the engine cache
(:mod:`placetune.backends.tensorrt.cache`), and the worker runs them as a DAG: one CUDA stream
per engine, an event per cross-engine dependency, ``max(2, K)`` device buffers per cut
tensor for ``K = frames_in_flight`` frames at once. Before timing, the pipeline's outputs
on random input are compared with one all-GPU engine of the whole model (the **gate**,
tolerance per precision: :data:`~placetune.backends.tensorrt.backend.GATE_TOLERANCE`); a mismatch
is ``runtime_failed`` with the numbers. INT8 without a calibration cache is compared with the
unsplit engine instead (the same placement in one engine, the same placeholder ranges), so the
default INT8 study is checked too. The outputs of an NMS plugin that reach the network outputs
(:mod:`~placetune.backends.tensorrt.nms_graph`) are compared as a set of detections (``worker_nms``).
Reported like the simulator's pipeline mode: single-frame latency samples, throughput from the
period with K frames in flight (``extra["period_ms"]``), ``segment_times_ms``, ``timeline`` (from
CUDA events), ``extra["engine_cache"]``, ``extra["gate"]``, ``extra["engines"]``; each segment's
placement is read on its own (:mod:`~placetune.backends.tensorrt.segment_known`).

**replicas**: one whole-network engine per device of ``settings.replicas`` (its own batch, its own stream; DLA
instances run the placement's DLA layers on their core), each timed alone, then all run at once in closed loops
for ``replicas_duration_s``; per instance and total throughput in ``extra["replicas"]`` like the simulator.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import onnx

from placetune.model.int8_placeholder import placeholder_ranges
from placetune.model.source import with_batch
from placetune.placement.cut import SegmentModel, cut, swap_inputs
from placetune.placement.cut_formats import CutFormat, cut_formats, refused_by_build
from placetune.measurement import Measurement
from placetune.placement.placement import dla_core
from placetune.backends.tensorrt.buildlog import TIMED, dla_failure, parse_build_log
from placetune.backends.tensorrt.cache import EngineCache, file_digest
from placetune.backends.tensorrt.layer_profile import attribute_profile
from placetune.backends.tensorrt.nms_graph import nms_elementwise, nms_outputs
from placetune.backends.tensorrt.jobs import (
    JobContext,
    cache_counts,
    cache_set_aside,
    cut_reformat_note,
    cut_reformats,
    engine_log,
    logs_into,
    mark_unknown,
    ran_on,
    read_realised,
    reply_failure,
    runtime_messages,
)
from placetune.backends.tensorrt.pool import WorkerReply
from placetune.backends.tensorrt.segment_known import mark_segments
from placetune.backends.onnx_prep import convert_to_fp16, has_qdq, prepare_onnx
from placetune.files.cache import cached_file
from placetune.backends.jetson import realized_vs_predicted
from placetune.backends.timing_method import REPLICAS_TIMED
from placetune.settings import resolve_replicas

if TYPE_CHECKING:
    from placetune.model.model import Model
    from placetune.hardware.platforms import Platform
    from placetune.placement.realise import Realisation
    from placetune.settings import Settings

__all__ = ["measure_pipeline", "measure_replicas", "int8_ranges"]

log = logging.getLogger(__name__)

_MAX_EVENTS = 2000


def int8_ranges(source: "onnx.ModelProto") -> dict[str, float]:
    """trtexec's INT8 ranges without calibration, once on the full network
    (:func:`placetune.model.int8_placeholder.placeholder_ranges`), passed to every segment."""
    return placeholder_ranges([source.graph])


# =========================================================================================
# pipeline
# =========================================================================================
def measure_pipeline(ctx: JobContext, r: "Realisation", platform: "Platform", settings: "Settings",
                     base: dict[str, Any], version: str, cores: int | None) -> Measurement:
    """Cut, build (or reuse), check and time a pipeline placement; failures are returned."""
    model = r.realized.model
    predicted = r.realized.as_dict()
    segments = r.realized.segments(pipeline=True)
    for s in segments:
        c = dla_core(s.device)
        if c is not None and cores is not None and c >= int(cores):
            return Measurement.failure(
                "infeasible", f"segment {s.index} runs on {s.device} but TensorRT {version} reports {cores} DLA "
                "core(s) here", realized=predicted, **base)
    common = ctx.common(platform, settings, version)
    fp16 = common["strongly_typed"] and settings.precision == "fp16"
    cache = EngineCache(ctx.cache_dir)
    try:
        source = ctx.source_onnx(model)
        cuts = cut(model, segments, source)
        if ctx.test_wrong_cut:
            cuts = _wrong_cut(cuts)
        ref_path = prepare_onnx(model, ctx.cache_dir, fp16=fp16)
    except Exception as exc:  # noqa: BLE001 - a model placetune cannot cut is a build failure
        return Measurement.failure("build_failed", f"cannot cut the model into pipeline segments: "
                                   f"{type(exc).__name__}: {exc}", **base)
    formats = cut_formats(cuts, settings.precision, strongly_typed=common["strongly_typed"],
                          network_outputs=[o.name for o in source.graph.output],
                          qdq=has_qdq(source)) if ctx.cut_formats else {}
    job, timeout, gate_skipped = _pipeline_job(ctx, r, cuts, source, ref_path, settings, platform, version, common,
                                               cache, formats, fp16)
    job["dla_cores"] = cores
    reply = ctx.run(job, timeout_s=timeout)
    why = None
    if formats and refused_by_build(reply.result, job["engines"]):
        # the native cut formats did not build (a TensorRT that refuses one of them): the
        # pipeline with TensorRT's default I/O formats instead, and the reason kept
        why = str(reply.result.get("error") or "build failed")
        formats = {}
        job, timeout, gate_skipped = _pipeline_job(ctx, r, cuts, source, ref_path, settings, platform, version,
                                                   common, cache, formats, fp16)
        job["dla_cores"] = cores
        reply = ctx.run(job, timeout_s=timeout)
    return _pipeline_measurement(ctx, reply, r, cuts, job["engines"], settings, base, version, timeout, gate_skipped,
                                 formats, why, job["gate"]["reference"])


def _pipeline_job(ctx: JobContext, r: "Realisation", cuts: list[SegmentModel], source: "onnx.ModelProto",
                  ref_path: Path, settings: "Settings", platform: "Platform", version: str, common: dict[str, Any],
                  cache: EngineCache, formats: dict[str, CutFormat], fp16: bool
                  ) -> tuple[dict[str, Any], float, str | None]:
    """The worker's ``pipeline`` job (one engine spec per segment, cut tensors in ``formats``
    with their native type and format on both sides, the all-GPU reference, the timing fields),
    its timeout and why the gate is skipped (None when it runs)."""
    model = r.realized.model
    net_outputs = {o.name for o in source.graph.output}
    specs, cached_before = [], []
    # a Q/DQ model brings its own ranges: none are set (trtexec: sampleEngines.cpp hasQDQLayers)
    ranges = int8_ranges(source) if settings.precision == "int8" and not common["calibration_cache"] \
        and not common["strongly_typed"] and not has_qdq(source) else None
    for c in cuts:
        content = c.hash + ("-fp16" if fp16 else "")
        # the producer and the readers of a cut tensor give it the same INT8 range
        seg_ranges = {t: ranges[t] for t in (*c.inputs, *c.outputs) if t in ranges and t not in net_outputs} \
            if ranges else None
        io = {t: formats[t].as_job() for t in (*c.inputs, *c.outputs) if t in formats}
        path = cache.segment_file(c.hash + ("-fp16" if fp16 else ""),
                                  partial(convert_to_fp16, c.proto) if fp16 else c.proto)
        if seg_ranges:  # part of the cache key; the worker sets them as trtexec's walk (resolve_given_ranges)
            content += "-r" + hashlib.sha1(json.dumps(["walk", sorted(seg_ranges.items())]).encode()).hexdigest()[:16]
        if io:  # so do the I/O formats
            content += "-io" + hashlib.sha1(json.dumps(sorted(io.items())).encode()).hexdigest()[:16]
        spec, hit = ctx.spec(cache, f"seg{c.index}", c.device, path, content, settings, platform, version, common,
                          list(c.layers) if c.device != "GPU" else [], {})
        if seg_ranges:
            spec["int8_ranges"] = seg_ranges
        if io:
            spec["io_formats"] = io
        specs.append(spec)
        cached_before.append(hit)
    ref_spec = None
    gate_skipped = None
    reference = "the all-GPU engine"
    if not ctx.gate:
        gate_skipped = "the gate is off (TensorRTBackend(gate=False))"
    elif len(cuts) == 1 and cuts[0].device == "GPU":
        gate_skipped = "one all-GPU engine of the whole model: nothing to check it against"
    else:
        shapes = {k: list(v) for k, v in model.input_shapes.items()}
        dla = [n for c in cuts if c.device != "GPU" for n in c.layers]
        if ranges and dla:
            # INT8 with placeholder ranges: the DLA runs its layers in INT8 while a GPU engine may pick
            # FP16 kernels for the same layers (INT8 is a permission there), so an all-GPU engine is
            # not the same arithmetic. The reference is the unsplit engine: the same placement (its
            # DLA layers on one core), the same precision and ranges; only the cuts differ.
            core = min(k for c in cuts if (k := dla_core(c.device)) is not None)
            ref_spec, hit = ctx.spec(cache, "reference", f"DLA{core}", ref_path, file_digest(ref_path), settings,
                                  platform, version, common, dla, shapes)
            ref_spec["int8_ranges"] = ranges
            reference = f"the unsplit engine (the same placement in one engine, its DLA layers on DLA{core})"
        else:
            ref_spec, hit = ctx.spec(cache, "reference", "GPU", ref_path, file_digest(ref_path), settings, platform,
                                  version, common, [], shapes)
        cached_before.append(hit)
    k = settings.frames_in_flight
    opset = next((int(o.version) for o in source.opset_import if o.domain in ("", "ai.onnx")), None)
    job = {
        "op": "pipeline", "engines": specs, "reference": ref_spec, "common": common,
        "network_inputs": {n: list(v) for n, v in model.input_shapes.items()},
        "network_outputs": [o.name for o in source.graph.output],
        "frames_in_flight": k, "iterations": ctx.iterations or settings.iterations, "warmup_ms": ctx.warmup_ms,
        "profile_iterations": ctx.profile_iterations, "timeline_frames": max(ctx.timeline_frames, 2 * k + 2),
        "gate": {"tolerance": ctx.gate_tolerance[settings.precision], "enforce": True, "reference": reference,
                 "nms": nms_outputs(source.graph, opset), "nms_elementwise": nms_elementwise(source.graph, opset)},
        "seed": settings.seed, "input_data": ctx.input_data,
    }
    builds = sum(1 for h in cached_before if not h)
    return job, ctx.timeout_s * max(1, builds), gate_skipped


_GATE_SAID: list[bool] = []  # a gate that checked nothing was said in this process


def gate_unverified(gate: dict[str, Any]) -> str | None:
    """Why a gate that passed checked nothing, or None: every output of the reference was all zeros
    (``vacuous``), or the reference gave the very same outputs for every random input
    (``same_for_every_input``: a detector's NMS that keeps no box of random input), so a wrong cut
    would have passed it too."""
    if not gate.get("checked") or not gate.get("passed"):
        return None
    if gate.get("vacuous"):
        return (f"every output of {gate.get('reference', 'the reference')} was all zeros on random input, so a wrong "
                "cut would pass it too")
    if gate.get("same_for_every_input"):
        return (f"{gate.get('reference', 'the reference')} gave the same outputs for every random input (e.g. an "
                "NMS that keeps no box of random input), so they say nothing of the cut tensors")
    return None


def _wrong_cut(cuts: list[SegmentModel]) -> list[SegmentModel]:
    """Test hook: the first segment with two same-typed inputs reads them swapped."""
    for i, c in enumerate(cuts):
        try:
            bad = swap_inputs(c)
        except ValueError:
            continue
        log.warning("test_wrong_cut: segment %d reads its inputs %s swapped", c.index, bad.inputs[:2])
        return cuts[:i] + [bad] + cuts[i + 1:]
    raise ValueError("test_wrong_cut: no segment has two inputs of the same type to swap")


def _pipeline_measurement(ctx: JobContext, reply: WorkerReply, r: "Realisation", cuts: list[SegmentModel],
                          specs: list[dict[str, Any]], settings: "Settings", base: dict[str, Any], version: str,
                          timeout_s: float, gate_skipped: str | None = None,
                          formats: dict[str, CutFormat] | None = None, formats_failed: str | None = None,
                          reference: str = "the all-GPU engine") -> Measurement:
    model = r.realized.model
    predicted = r.realized.as_dict()
    extra: dict[str, Any] = {"trt_version": version, "worker_seconds": round(reply.seconds, 3),
                             "frames_in_flight": settings.frames_in_flight, "segments": len(cuts),
                             "islands": sum(1 for c in cuts if c.device != "GPU"),
                             "boundaries": sum(1 for c in cuts for x in c.inputs if x not in model.input_shapes)}
    failed = reply_failure(reply, base, extra, timeout_s)
    if failed is not None:
        return failed
    res = reply.result
    infos = list(res.get("engines") or [])
    ref = res.get("reference")
    extra["engine_cache"] = {**cache_counts(infos), "reference": None if ref is None else bool(ref.get("cached"))}
    realized = dict(predicted)
    fallback = dict(r.fallback)
    notes: list[str] = []
    unknown: list[str] = []
    unchecked: list[str] = []
    guessed: list[str] = []
    loadables: dict[str, int] = {}
    rows = []
    segs: list[dict[str, Any]] = []  # how far each segment's placement is read (segment_known)
    build_s = 0.0
    for c, spec, info in zip(cuts, specs, infos):
        label = f"seg{c.index}"
        logs_into(extra, label, info)
        cache_set_aside(info, notes)  # an unreadable timing cache set aside for this engine's build
        segs.append({"index": c.index, "device": c.device, "layers": len(c.layers)})
        n_load, subgraphs = read_realised(c.layers, c.device, predicted, info, realized, fallback, notes, label,
                                          unknown=unknown, guessed=guessed, unchecked=unchecked, record=segs[-1])
        if c.device != "GPU":
            loadables[c.device] = loadables.get(c.device, 0) + n_load
        if not info.get("cached"):
            build_s += float(info.get("build_seconds") or 0.0)
        ran = ran_on(label, c.layers, c.device, realized, unknown, notes)  # GPU: every layer fell back
        rows.append({"index": c.index, "device": c.device, "ran_on": ran, "layers": len(c.layers), "first": c.layers[0],
                     "last": c.layers[-1], "inputs": list(c.inputs), "outputs": list(c.outputs),
                     "predecessors": list(c.predecessors), "cached": bool(info.get("cached")),
                     "build_seconds": info.get("build_seconds"), "engine_bytes": info.get("engine_bytes"),
                     "dla_loadables": n_load, "dla_subgraphs": subgraphs, "content_hash": c.hash,
                     "cache_key": spec.get("cache_key")})
    if ref is not None:
        logs_into(extra, "reference", ref)
        cache_set_aside(ref, notes)
        if not ref.get("cached"):
            build_s += float(ref.get("build_seconds") or 0.0)
    extra["engines"] = rows
    # the cut tensors' I/O type and format; the engines say what they got
    extra["cut_formats"] = {t: {"dtype": f.dtype, "format": f.format, "shape": list(f.shape), "producer": f.producer,
                                "consumers": list(f.consumers)} for t, f in (formats or {}).items()}
    again = (" with its cut formats and with TensorRT's default I/O too" if formats_failed and res.get("status") ==
             "build_failed" else "")  # built again without the formats, it failed again: not the formats' doing
    if formats_failed and not again:
        extra["cut_formats_failed"] = formats_failed
        notes.append("the cut tensors in the DLA's native formats did not build, so the pipeline was built with "
                     f"TensorRT's default FP32 linear I/O (GPU reformats at every cut): {formats_failed}")
    elif again:
        notes.append(f"the build failed{again} (first: {formats_failed}): the formats are not the cause")
    for row, info in zip(rows, infos):
        row["io_formats"] = info.get("io_formats") or {}
        if info.get("int8_io_ranges"):  # INT8 cut tensors' ranges from the calibration cache (trtexec's rule)
            row["int8_io_ranges"] = info["int8_io_ranges"]
    if found := cut_reformats(rows, infos, formats or {}, res.get("layer_profiles") or []):
        extra["cut_reformats"] = found  # a DLA engine that still reformats a native-format cut on the GPU
        notes.append(cut_reformat_note(found))
    extra["realized_vs_predicted"] = realized_vs_predicted(predicted, realized)
    if guessed:  # as engine mode's mark_known: the layers whose realised device is the request
        extra["placement_from_request"] = guessed[:50]
    if notes:
        extra["notes"] = notes
    if res.get("traceback"):
        extra["traceback"] = res["traceback"]
    if res.get("gate"):
        extra["gate"] = res["gate"]
        checked = list((res["gate"].get("outputs") or {}).values())
        sets = [row for row in checked if row.get("metric") == "nms_detections"]
        indices = [f"{row['op']} {row['node']!r}" for row in checked if row.get("metric") == "nms_indices"]
        rows_of = [row for row in checked if row.get("metric") == "nms_rows"]
        if rows_of:
            notes.append("the correctness gate compared the selected rows of " + ", ".join(
                f"{row['op']} {row['node']!r}" for row in rows_of) + " as a set of detections (one to one by class, "
                f"IoU >= {rows_of[0]['iou_match']}, scores within the tolerance; rows near the score or IoU threshold "
                "or beyond the row cap may be unmatched), not element by element")
        for row in rows_of:
            if row.get("images_without_rows"):
                notes.append(f"{row['op']} {row['node']!r}: the export writes detection rows for its first "
                             f"{row['images'] - row['images_without_rows']} images only (one NMS per image of the "
                             f"batch it was exported at); the last {row['images_without_rows']} of this batch of "
                             f"{row['images']} are empty in the reference too and were not checked")
        if indices:
            notes.append("the correctness gate compared the selected indices of " + ", ".join(indices) +
                         " as a set of (batch, class, box) rows, not element by element")
        if res["gate"].get("nms_elementwise"):
            notes.append("the correctness gate compared element by element (reordered or borderline detections "
                         "fail it): " + "; ".join(res["gate"]["nms_elementwise"]))
        if notes:
            extra["notes"] = notes
        if sets:
            notes.append("the correctness gate compared the outputs of " + ", ".join(
                f"{row['op']} {row['node']!r}" for row in sets) + " as a set of detections (one to one by class, "
                f"IoU >= {sets[0]['iou_match']}, scores within the tolerance; detections near the score or IoU "
                "threshold may be unmatched), not element by element")
            extra["notes"] = notes
        unverified = gate_unverified(res["gate"])
        if unverified:
            extra["gate_unverified"] = unverified
            notes.append(f"the correctness gate checked nothing: {unverified}")
            extra["notes"] = notes
            (log.debug if _GATE_SAID else log.warning)("GATE CHECKED NOTHING: %s; the pipeline's outputs are "
                                                       "recorded as unchecked (extra gate_unverified)", unverified)
            _GATE_SAID.append(True)
    elif gate_skipped:
        extra["gate"] = {"checked": False, "reason": gate_skipped}
    extra.update({"int8_ranges_moved": res["int8_ranges_moved"]} if res.get("int8_ranges_moved") else {})
    runtime = runtime_messages(extra, res)  # deserialising and running the engines, as engine mode records them
    status = res.get("status")
    common = dict(realized=realized, fallback=fallback, dla_loadables=loadables, build_seconds=build_s, extra=extra,
                  **base)
    mark_segments(common, unknown, unchecked, segs, realized)  # an unread segment leaves the others known
    if status == "build_failed":
        k = int(res.get("failed_engine", len(infos) - 1))
        if k < len(cuts):
            c = cuts[k]
            span = c.layers[0] + (f" .. {c.layers[-1]}" if len(c.layers) > 1 else "")
            what = f"segment {c.index} ({c.device}: {span})"
        else:
            what = f"the reference engine ({reference})"
        info = infos[k] if k < len(infos) else (ref or {})
        detail = info.get("error") or "; ".join(parse_build_log(info.get("log") or []).errors[:3])
        if info.get("parser_errors"):
            extra["parser_errors"] = info["parser_errors"]
        common["realized"] = None
        return Measurement.failure("build_failed", f"TensorRT build of {what} failed{again}: {detail}", **common)
    if status == "infeasible":  # the built engines exceed a DLA core's 16 loadables (never loaded)
        return Measurement.failure("infeasible", str(res.get("error")), **common)
    if status != "ok":
        error = str(res.get("error"))
        why = error if error.startswith("pipeline outputs differ") else f"pipeline execution failed: {error}"
        if not error.startswith("pipeline outputs differ") and dla_failure(runtime + [error]):
            extra["failure_class"] = "dla"
            why = f"the DLA failed ({why})"
        return Measurement.failure("runtime_failed", why, **common)
    # ---- timings
    samples = [float(x) for x in res.get("latency_samples_ms") or []]
    period = float(res.get("period_ms") or 0.0)
    fps = 1000.0 * base["batch"] / period if period > 0 else None
    extra["period_ms"] = period
    extra["slots"] = res.get("slots")
    alone = res.get("alone_ms") or []
    schedule = res.get("schedule") or []
    seg_times = []
    ran_devices = [row["ran_on"] for row in rows]  # each engine's device as it ran (GPU for a DLA one that fell back)
    for i, c in enumerate(cuts):
        start, end = (schedule[i] if i < len(schedule) else (None, None))
        seg_times.append({"index": c.index, "device": ran_devices[i], "asked": c.device, "layers": len(c.layers),
                          "time_ms": (end - start) if start is not None else None, "start_ms": start, "end_ms": end,
                          "predecessors": list(c.predecessors),
                          "alone_ms": alone[i] if i < len(alone) else None})
    events = []
    frames: dict[int, list[float]] = {}
    busy: dict[str, float] = {}
    for i, f, start, end in res.get("timeline") or []:
        c, dev = cuts[int(i)], ran_devices[int(i)]
        events.append({"device": dev, "name": f"seg{c.index}", "start_ms": float(start), "end_ms": float(end),
                       "frame": int(f)})
        window = frames.setdefault(int(f), [float(start), float(end)])
        window[0], window[1] = min(window[0], float(start)), max(window[1], float(end))
        busy[dev] = busy.get(dev, 0.0) + float(end) - float(start)
    events.sort(key=lambda e: (e["start_ms"], e["device"]))
    if frames:
        extra["busy_ms"] = {d: v / len(frames) for d, v in busy.items()}
        k = settings.frames_in_flight
        steady = [e - s for f, (s, e) in sorted(frames.items()) if f >= k] if k > 1 else []
        if steady:
            extra["latency_in_flight_ms"] = sum(steady) / len(steady)
    # ---- per layer times from each engine's profile
    layer_times: dict[str, float] = {}
    dla_ms = gpu_ms = 0.0
    for c, row, info, prof in zip(cuts, rows, infos, res.get("layer_profiles") or []):
        # GPU reformats in an engine (a DLA engine's I/O outside a DLA format): what cut formats avoid
        row["reformats_ms"] = {str(n): float(ms) for n, ms in prof if str(n).startswith("Reformatting")}
        _, blog, network = engine_log(info)
        summary = attribute_profile(prof, blog, list(c.layers), network or None,
                                    dla_device=c.device if c.device != "GPU" else "DLA0")
        layer_times.update(summary.layer_times_ms)
        dla_ms += summary.dla_ms
        gpu_ms += summary.gpu_ms
    if res.get("layer_profiles"):
        extra.update(dla_ms=dla_ms, gpu_ms=gpu_ms)
    extra["warmup_frames"] = res.get("warmup_frames")
    if res.get("nvtx_verbosity"):  # the NVTX markers every segment's context was timed with (trtexec's)
        extra["nvtx_verbosity"] = str(res["nvtx_verbosity"])
    if res.get("io_memory"):  # device memory for every tensor the engines read and write
        extra["io_memory"] = str(res["io_memory"])
    extra["timed"] = TIMED
    return Measurement(status="ok", latency_samples_ms=samples, throughput_fps=fps, segment_times_ms=seg_times,
                       layer_times_ms=layer_times, timeline=events[:_MAX_EVENTS], **common)


# =========================================================================================
# replicas
# =========================================================================================
def _prepare_batch(ctx: JobContext, model: "Model", batch: int, fp16: bool) -> Path:
    """The whole model as an ONNX file at ``batch`` (the model's own file when the batch is its own)."""
    if batch == model.batch:
        return prepare_onnx(model, ctx.cache_dir, fp16=fp16)
    key = f"{model.hash[:16]}-b{batch}{'-fp16' if fp16 else ''}"
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", model.name)[:60]
    target = ctx.cache_dir / "onnx" / f"{safe}-{key}.onnx"

    def make() -> bytes:
        proto = with_batch(model, batch, None if model.zoo else ctx.source_onnx(model))
        return (convert_to_fp16(proto) if fp16 else proto).SerializeToString()
    return cached_file(target, make)


def measure_replicas(ctx: JobContext, r: "Realisation", platform: "Platform", settings: "Settings",
                     base: dict[str, Any], version: str, cores: int | None) -> Measurement:
    """Build (or reuse) one whole-network engine per device and run them all at once."""
    model = r.realized.model
    predicted = r.realized.as_dict()
    reps, why = resolve_replicas(settings, model.batch, platform.devices, platform.name)
    if why:
        return Measurement.failure("infeasible", why, **base)
    short = [d for d in reps if (k := dla_core(d)) is not None and cores is not None and k >= int(cores)]
    if short:
        return Measurement.failure(
            "infeasible", f"replicas ask for {', '.join(short)} but TensorRT {version} reports {cores} DLA core(s) "
            "here", **base)
    dla_layers = [n for n, d in predicted.items() if d != "GPU"]
    notes: list[str] = []
    if not dla_layers and any(d != "GPU" for d in reps):
        notes.append("the realised placement has no DLA layer: the DLA replicas run on the GPU")
    common = ctx.common(platform, settings, version)
    fp16 = common["strongly_typed"] and settings.precision == "fp16"
    cache = EngineCache(ctx.cache_dir)
    specs, cached_before = [], []
    try:
        for dev, batch in reps.items():
            path = _prepare_batch(ctx, model, int(batch), fp16)
            shapes = {n: [int(batch), *list(v)[1:]] for n, v in model.input_shapes.items()}
            spec, hit = ctx.spec(cache, f"{dev}-replica", dev, path, file_digest(path), settings, platform, version,
                              common, dla_layers if dev != "GPU" else [], shapes)
            spec["batch"] = int(batch)
            specs.append(spec)
            cached_before.append(hit)
    except Exception as exc:  # noqa: BLE001
        return Measurement.failure("build_failed", f"cannot prepare the ONNX files of the replicas: "
                                   f"{type(exc).__name__}: {exc}", **base)
    job = {"op": "replicas", "instances": specs, "common": common,
           "iterations": ctx.iterations or settings.iterations, "warmup_ms": ctx.warmup_ms,
           "duration_s": ctx.replicas_duration_s, "timeline_iterations": max(2, ctx.timeline_frames),
           "seed": settings.seed, "input_data": ctx.input_data}
    builds = sum(1 for h in cached_before if not h)
    timeout = ctx.timeout_s * max(1, builds) + ctx.replicas_duration_s
    reply = ctx.run(job, timeout_s=timeout)
    extra: dict[str, Any] = {"trt_version": version, "worker_seconds": round(reply.seconds, 3)}
    if notes:
        extra["notes"] = notes
    failed = reply_failure(reply, base, extra, timeout)
    if failed is not None:
        return failed
    res = reply.result
    infos = list(res.get("engines") or [])
    extra["engine_cache"] = cache_counts(infos)
    realized = dict(predicted)
    fallback = dict(r.fallback)
    loadables: dict[str, int] = {}
    unknown: list[str] = []
    unchecked: list[str] = []
    reported = False
    build_s = 0.0
    rows: list[dict[str, Any]] = []  # each DLA replica's placement as read, its layer information kept
    for spec, info in zip(specs, infos):
        logs_into(extra, spec["name"], info)
        cache_set_aside(info, notes)  # an unreadable timing cache set aside for this replica's build
        if not info.get("cached"):
            build_s += float(info.get("build_seconds") or 0.0)
        if spec["dla_core"] >= 0:
            # every DLA instance runs the same layers on its own core; the first one is reported
            # (with realise()'s DLA device name, as the simulator does)
            into_r, into_f = (realized, fallback) if not reported else (dict(predicted), {})
            rows.append({"name": spec["name"], "device": spec["device"]})
            n_load, _ = read_realised(model.names, spec["device"], predicted, info, into_r, into_f, notes, spec["name"],
                                  report_as=next((d for d in predicted.values() if d != "GPU"), spec["device"]),
                                  unknown=unknown, unchecked=unchecked, record=rows[-1])
            loadables[spec["device"]] = n_load
            reported = True
    if not reported and dla_layers:
        # no DLA replica ran: the placement's DLA layers ran nowhere but on the GPU replica
        realized = {n: "GPU" for n in predicted}
        fallback = {}
        notes.append("no DLA replica: every layer ran on the GPU replica")
    if rows:
        extra["replica_placements"] = rows
    if notes:  # with what _realised said of each DLA replica's build log
        extra["notes"] = notes
    extra["realized_vs_predicted"] = realized_vs_predicted(predicted, realized)
    extra["timed"] = TIMED
    runtime = runtime_messages(extra, res)  # deserialising and running the engines, as engine mode records them
    common_kw = dict(realized=realized, fallback=fallback, dla_loadables=loadables, build_seconds=build_s,
                     extra=extra, **base)
    mark_unknown(common_kw, unknown, unchecked)
    status = res.get("status")
    if status == "build_failed":
        k = int(res.get("failed_engine", len(infos) - 1))
        info = infos[k] if k < len(infos) else {}
        common_kw["realized"] = None
        return Measurement.failure("build_failed", f"TensorRT build of the {specs[k]['name']} (batch "
                                   f"{specs[k]['batch']}) failed: {info.get('error')}", **common_kw)
    if status != "ok":
        if res.get("traceback"):
            extra["traceback"] = res["traceback"]
        why = f"replicas execution failed: {res.get('error')}"
        if dla_failure(runtime + [str(res.get("error") or "")]):
            extra["failure_class"] = "dla"
            why = f"the DLA failed ({why})"
        return Measurement.failure("runtime_failed", why, **common_kw)
    parts = len(r.realized.segments(pipeline=False))
    per_instance, total = [], 0.0
    alone = res.get("alone_samples_ms") or []
    slowest, slowest_period = None, -1.0
    for k, (spec, row) in enumerate(zip(specs, res.get("instances") or [])):
        n, span = int(row.get("inferences") or 0), float(row.get("span_ms") or 0.0)
        period = span / n if n and span > 0 else float("nan")
        fps = 1000.0 * spec["batch"] * n / span if n and span > 0 else 0.0
        total += fps
        a = sorted(alone[k]) if k < len(alone) else []
        per_instance.append({"device": spec["device"], "batch": spec["batch"], "latency_ms": period,
                             "throughput_fps": fps, "alone_ms": a[len(a) // 2] if a else None,
                             "segments": parts if spec["dla_core"] >= 0 else 1, "inferences": n, "span_ms": span,
                             "dla_core": None if spec["dla_core"] < 0 else spec["dla_core"],
                             "cached": bool(infos[k].get("cached")) if k < len(infos) else False})
        if period == period and period > slowest_period:
            slowest, slowest_period = row, period
    extra.update(replicas=per_instance, window_ms=res.get("window_ms"), period_ms=slowest_period)
    if res.get("nvtx_verbosity"):  # the NVTX markers every instance's context was timed with (trtexec's)
        extra["nvtx_verbosity"] = str(res["nvtx_verbosity"])
    if res.get("io_memory"):  # managed on an integrated GPU, as trtexec's bindings without copies
        extra["io_memory"] = str(res["io_memory"])
    events = []
    for i, it, start, end in res.get("timeline") or []:
        dev = specs[int(i)]["device"]
        events.append({"device": dev, "name": f"{dev}-replica", "start_ms": float(start), "end_ms": float(end),
                       "frame": int(it)})
    events.sort(key=lambda e: (e["start_ms"], e["device"]))
    samples = [float(x) for x in (slowest or {}).get("samples_ms") or []]
    m = Measurement(status="ok", latency_samples_ms=samples, throughput_fps=total, timeline=events[:_MAX_EVENTS],
                    **common_kw)
    if m.ok:  # two queries in flight per instance, as trtexec's replicas (timing_method)
        m.extra["timed"] = REPLICAS_TIMED
    return m
