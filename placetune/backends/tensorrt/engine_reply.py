"""The engine mode's worker reply as a Measurement (the ``tensorrt`` backend, parent side).

A worker's answer to one ``measure`` job becomes a :class:`~placetune.measurement.Measurement`:
a failed worker, build or run is classified (a DLA failure, out of memory); the realised
placement is read from TensorRT's build log, cross-checked with the engine's own layer
information (:mod:`placetune.backends.tensorrt.placement_known`); the latency samples, the
per-layer profile and what the worker said about the build go to the measurement's figures
and ``extra``. :mod:`placetune.backends.tensorrt.backend` runs the job and times the power.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from placetune.backends.jetson import UNEXPLAINED_FALLBACK, realized_vs_predicted
from placetune.backends.oom import out_of_memory
from placetune.backends.tensorrt.buildlog import BuildLog, dla_failure, locate, parse_build_log
from placetune.backends.tensorrt.dla_errors import dla_refused, refused_reason
from placetune.backends.tensorrt.jobs import INSPECTOR_KEEP, cache_set_aside, keep_log, reply_failure, runtime_messages
from placetune.backends.tensorrt.layer_profile import attribute_profile
from placetune.backends.tensorrt.placement_known import decide, inspector_layers, mark_known
from placetune.backends.tensorrt.pool import WorkerReply
from placetune.backends.tensorrt.worker_devices import is_helper_name
from placetune.backends.timing_method import ENGINE_TIMED
from placetune.measurement import Extra, Measurement

if TYPE_CHECKING:
    from placetune.placement.realise import Realisation

__all__ = ["engine_measurement", "build_failure"]

_MAX_SAMPLES = 5000


def engine_measurement(reply: WorkerReply, r: "Realisation", core: int, version: str, base: dict[str, Any],
                       timeout_s: float) -> Measurement:
    """The Measurement of an engine-mode job: the worker's answer classified (``timeout_s``: the
    job's time limit, for a timeout's message) and the realised placement read from the build log.

    Args:
        reply: the worker's reply.
        r: the realisation the engine was built for.
        core: the DLA core it was built on (-1: none).
        version: the worker's TensorRT version.
        base: the Measurement fields every outcome carries (mode, precision, batch, requested...).
        timeout_s: the job's time limit.
    """
    model = r.realized.model
    predicted = r.realized.as_dict()
    extra: dict[str, Any] = {"trt_version": version, "dla_core": core, "worker_seconds": round(reply.seconds, 3)}
    failed = reply_failure(reply, base, extra, timeout_s)
    if failed is not None:
        return failed
    res = reply.result
    status = res.get("status")
    lines = [(s, m) for s, m in res.get("log", [])]
    blog = parse_build_log(lines)
    network = [(row[0], row[1]) for row in res.get("network_layers", [])]
    # parser helpers (no node): the device each was given (worker_devices: they follow their node)
    helpers = {str(row[0]): (f"DLA{core}" if row[3] and row[4] is not False else "GPU")
               for row in res.get("network_layers", []) if row[1] is None and is_helper_name(row[0])}
    if helpers:
        extra["helper_layers"] = helpers
    names = set(model.names)  # every other network layer, as built: an exported trtexec command lists them
    parser_layers = {str(row[0]): ("DLA" if row[3] else "GPU") for row in res.get("network_layers", [])
                     if core >= 0 and str(row[0]) not in names}
    if parser_layers:
        extra["parser_layers"] = parser_layers
    if res.get("int8_ranges"):  # the worker's word: calibration cache, the model's Q/DQ, placeholders
        extra["int8_ranges"] = res["int8_ranges"]
    if res.get("adjust_for_dla"):  # say which path made the network DLA-ready
        extra["dla_path"] = "ONNX parser flag ADJUST_FOR_DLA (TensorRT 10.16 on)"
    if res.get("timing_cache_set_aside"):  # said once, where it happened (worker_cache.load_timing_cache)
        cache_set_aside(res, extra.setdefault("notes", []))
    extra.update(
        build_errors=blog.errors[:50],
        build_warnings=blog.warnings[:100],
        build_log=keep_log([], lines),  # every placement line, however long the log before them
        engine_bytes=res.get("engine_bytes"),
    )
    if res.get("plan_file"):
        extra["plan_file"] = res["plan_file"]
    if res.get("engine_digest"):  # which engine was timed: two timings of one digest timed the same engine
        extra["engine_digest"] = res["engine_digest"]
    if res.get("cached"):  # the engine file a first build kept (save_plans), loaded: nothing was built
        extra["engine_cache"] = {"hits": 1, "misses": 0, "built_in_s": res.get("build_seconds")}
    elif res.get("plan_file"):  # built, and kept for a second timing
        extra["engine_cache"] = {"hits": 0, "misses": 1}
    if res.get("traceback"):
        extra["traceback"] = res["traceback"]
    if res.get("parser_errors"):
        extra["parser_errors"] = res["parser_errors"]
    build_s = 0.0 if res.get("cached") else float(res.get("build_seconds") or 0.0)
    if status == "build_failed":
        return build_failure(res, blog, extra, build_s, base)
    # the realised placement: the build log, cross-checked with the engine's own layer information
    loc = locate(blog, model.names, network or None, [n for n, d in predicted.items() if d == "GPU"])
    target = f"DLA{core}" if core >= 0 else "GPU"
    known = decide(predicted, core, blog, loc, model.names, network or None, inspector_layers(res.get("inspector")))
    realized = known.realized
    fallback = dict(r.fallback)
    for n, d in predicted.items():
        if d != "GPU" and realized is not None and realized[n] == "GPU":
            fallback[n] = loc.fallback.get(n) or UNEXPLAINED_FALLBACK
    for n in known.fallback_warned:  # an unknown placement: TensorRT's warning still says these left the DLA
        fallback[n] = loc.fallback[n]
    extra.update(
        realized_vs_predicted=realized_vs_predicted(predicted, realized),
        subgraph_limit=loc.subgraph_limit,
        dla_subgraphs=loc.subgraphs,
        unmapped_log_names=loc.unmapped[:50],
    )
    mark_known(extra, known, blog)
    if core >= 0 and not blog.reports_placement:
        extra.setdefault("notes", []).append("the build log has no DLA/GPU placement sections: realised "
                                             f"placement {f'from the {known.source} only' if known.known else 'UNKNOWN'}")
    loadables = {target: known.loadables} if core >= 0 and known.loadables is not None else {}
    # deserialising and running the engine log apart from its build (the worker's "runtime_log")
    runtime = runtime_messages(extra, res)
    if status != "ok":
        detail = res.get("error") or "; ".join((runtime or blog.errors)[:3]) or "execution failed"
        if dla_failure(runtime + blog.errors + [str(res.get("error") or "")]):
            extra["failure_class"] = "dla"
            detail = f"the DLA failed ({detail})"
        return Measurement.failure("runtime_failed", f"TensorRT execution failed: {detail}", realized=realized,
                                   fallback=fallback, dla_loadables=loadables, build_seconds=build_s,
                                   extra=extra, **base)
    samples = [float(x) for x in res.get("latency_samples_ms", [])]
    if len(samples) > _MAX_SAMPLES:  # a power run times for seconds: at most 5000, evenly spread
        samples = [samples[int(i * len(samples) / _MAX_SAMPLES)] for i in range(_MAX_SAMPLES)]
    per_inf = res.get("throughput_ms_per_inference")
    fps = 1000.0 * base["batch"] / per_inf if per_inf else None
    prof = attribute_profile(res.get("layer_profile") or [], blog, model.names, network or None,
                             dla_device=target if core >= 0 else "DLA0")
    if res.get("layer_profile"):
        extra.update(engine_layer_times_ms=dict((k, v) for k, v in res["layer_profile"]),
                     dla_ms=prof.dla_ms, gpu_ms=prof.gpu_ms)
    if res.get("inspector"):
        extra["engine_inspector"] = str(res["inspector"])[:INSPECTOR_KEEP]
    if res.get("inspector_error"):  # the engine inspector raised in the worker: why no layer information
        extra["inspector_error"] = str(res["inspector_error"])[:300]
    extra["warmup_iterations"] = res.get("warmup_iterations")
    if res.get("nvtx_verbosity"):  # the NVTX markers the engine was timed with (trtexec's: LAYER_NAMES_ONLY)
        extra["nvtx_verbosity"] = str(res["nvtx_verbosity"])
    if res.get("io_memory"):  # managed on an integrated GPU, as trtexec's bindings without copies
        extra["io_memory"] = str(res["io_memory"])
    extra["timed"] = ENGINE_TIMED
    return Measurement(
        status="ok", latency_samples_ms=samples, throughput_fps=fps, realized=realized, fallback=fallback,
        dla_loadables=loadables, segment_times_ms=prof.segments, layer_times_ms=prof.layer_times_ms,
        build_seconds=build_s, extra=cast(Extra, extra), **base,  # keys checked where strict
    )


def build_failure(res: dict[str, Any], blog: BuildLog, extra: dict[str, Any], build_s: float,
                  base: dict[str, Any]) -> Measurement:
    """The measurement of a failed build, classed: a layer refused on the DLA with GPU fallback off
    (``dla_unsupported``: the placement's, :func:`~placetune.backends.tensorrt.dla_errors.dla_refused`),
    the DLA's own failure (``dla``), out of memory (``memory``), else unclassed."""
    detail = res.get("error") or "; ".join(blog.errors[:3]) or "build_serialized_network returned None"
    refused = dla_refused(blog.errors + [str(res.get("error") or "")])
    if refused:
        extra["failure_class"], detail = "dla_unsupported", refused_reason(refused, detail)
    elif dla_failure(blog.errors + [str(res.get("error") or "")]):
        extra["failure_class"] = "dla"
        detail = f"the DLA failed ({detail})"
    elif out_of_memory(blog.errors):  # as the trtexec backend says it (trtexec/process.classify)
        extra["failure_class"], detail = "memory", f"out of memory ({detail})"
    return Measurement.failure("build_failed", f"TensorRT build failed: {detail}", realized=None,
                               build_seconds=build_s, extra=extra, **base)
