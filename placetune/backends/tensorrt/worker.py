"""placetune's TensorRT build-and-time worker: one JSON job per stdin line, one JSON result per stdout line.

Runs in its own process so that a TensorRT segfault, hang or CUDA error cannot take the
study down (the parent, :mod:`placetune.backends.tensorrt.backend`, enforces timeouts and
restarts it). It depends only on ``tensorrt``, ``pycuda``, ``numpy`` and the standard
library, imports none of placetune and runs under Python 3.8, so it can be started as a
file with JetPack's system Python::

    /usr/bin/python3 placetune/backends/tensorrt/worker.py      # or: python -m placetune.backends.tensorrt.worker

Protocol: the worker first writes ``{"hello": 1, "python": "3.8.10", "pid": N}``. Then for
each job line it writes exactly one result line. Jobs:

* ``{"op": "probe"}`` -> TensorRT version, DLA cores, pycuda availability (never raises).
* ``{"op": "measure", "onnx": path, "input_shapes": {name: dims}, "precision": "fp16"|"int8"|"fp32",
  "strongly_typed": bool, "dla_core": k or -1, "gpu_fallback": bool, "dla_layers": [names],
  "timing_cache": path or null, "calibration_cache": path or null, "memory_pools": {POOL: bytes},
  "iterations": N, "warmup_ms": ms, "profile_iterations": N, "inspector": bool}``
  -> ``{"status": "ok"|"build_failed"|"runtime_failed", "log": [[severity, text], ...],
  "network_layers": [[name, onnx name or null, type, dla requested, can run on DLA], ...],
  "latency_samples_ms": [...], "throughput_fps": x, "layer_profile": [[engine layer, ms], ...],
  "inspector": json text or null, "build_seconds": s, "engine_bytes": n, "error": text or null}``
* ``{"op": "pipeline", "engines": [spec, ...], "reference": spec or null, "common": {build fields},
  "network_inputs": {name: dims}, "network_outputs": [names], "frames_in_flight": K,
  "iterations": N, "warmup_ms": ms, "profile_iterations": N, "timeline_frames": N,
  "gate": {"tolerance": x, "enforce": bool}, "seed": n}`` where a spec is a measure job's build
  fields plus ``name``, ``device`` and ``plan_cache`` (path of the engine cache entry or null)
  -> ``{"status", "engines": [build record + "cached"], "reference": record, "gate": report,
  "latency_samples_ms", "period_ms", "schedule": [[start, end] per engine], "timeline":
  [[engine, frame, start, end], ...], "alone_ms": [...], "layer_profiles": [...], "error"}``.
  Engines are given in topological order; one stream each, events between them.
* ``{"op": "replicas", "instances": [spec + "batch"], "common": {...}, "iterations": N,
  "warmup_ms": ms, "duration_s": s, "timeline_iterations": N}`` -> ``{"status", "engines",
  "alone_samples_ms": [[...] per instance], "instances": [{"inferences", "span_ms",
  "samples_ms", ...}], "timeline": [[instance, iteration, start, end], ...], "window_ms"}``.

Native libraries write to file descriptor 1 as they like; the worker moves its protocol to a
private copy of stdout and points fd 1 at stderr, so stray prints cannot corrupt a result.
"""

import fcntl
import json
import os
import re
import sys
import time
import traceback

try:  # Python 3.8 needs typing's generics
    from typing import Any, Dict, List, Optional, Tuple
except ImportError:  # pragma: no cover
    pass

PROTOCOL = 1
_SEVERITIES = ("INTERNAL_ERROR", "ERROR", "WARNING", "INFO", "VERBOSE")
_METADATA = re.compile(r"\[ONNX Layer: (.*?)\](?:\s*\||$)")
_CUDA = {}  # type: Dict[str, Any]


def _severity_name(severity):
    # type: (Any) -> str
    name = getattr(severity, "name", None)
    if name:
        return str(name)
    try:
        return _SEVERITIES[int(severity)]
    except (ValueError, IndexError, TypeError):
        return str(severity)


def _make_logger(trt, verbose):
    # type: (Any, bool) -> Any
    """A ``trt.ILogger`` that keeps every message (VERBOSE only when asked)."""

    class CapturingLogger(trt.ILogger):
        def __init__(self):
            trt.ILogger.__init__(self)
            self.lines = []  # type: List[List[str]]

        def log(self, severity, msg):
            name = _severity_name(severity)
            if name == "VERBOSE" and not verbose:
                return
            self.lines.append([name, str(msg)])

    return CapturingLogger()


def _version_tuple(text):
    # type: (str) -> Tuple[int, int]
    parts = (text.split(".") + ["0", "0"])[:2]
    try:
        return int(parts[0]), int(parts[1])
    except ValueError:
        return 0, 0


# ------------------------------------------------------------------------------ probe
def probe(job):
    # type: (Dict[str, Any]) -> Dict[str, Any]
    """What this Python can use: TensorRT version and DLA cores, pycuda."""
    out = {"status": "ok", "python": "%d.%d.%d" % sys.version_info[:3], "executable": sys.executable,
           "trt_version": None, "trt_error": None, "num_dla_cores": None, "pycuda_version": None,
           "pycuda_error": None}  # type: Dict[str, Any]
    try:
        import tensorrt as trt

        out["trt_version"] = str(trt.__version__)
        out["trt_path"] = getattr(trt, "__file__", None)
        try:
            logger = _make_logger(trt, False)
            builder = trt.Builder(logger)
            out["num_dla_cores"] = int(builder.num_DLA_cores)
        except Exception as exc:  # a Builder needs a GPU
            out["builder_error"] = "%s: %s" % (type(exc).__name__, exc)
    except Exception as exc:
        out["trt_error"] = "%s: %s" % (type(exc).__name__, exc)
    try:
        import pycuda

        out["pycuda_version"] = str(getattr(pycuda, "VERSION_TEXT", "unknown"))
    except Exception as exc:
        out["pycuda_error"] = "%s: %s" % (type(exc).__name__, exc)
    return out


# ------------------------------------------------------------------------------ build
def _onnx_name(layer):
    # type: (Any) -> Optional[str]
    meta = getattr(layer, "metadata", None)  # ILayer.metadata exists from TensorRT 8.6
    if not meta:
        return None
    m = _METADATA.search(str(meta))
    return m.group(1) if m else None


def _set_dynamic_ranges(network, trt):
    # type: (Any, Any) -> None
    """Per-tensor dynamic ranges for INT8 timing without calibration, as trtexec does
    (samples/common/sampleEngines.cpp setTensorDynamicRange: inputs +-2, outputs +-4,
    concatenation inputs +-4, pooling outputs +-2)."""

    def set_range(tensor, r):
        if tensor is None:
            return
        if hasattr(tensor, "dynamic_range") and tensor.dynamic_range:
            return
        if hasattr(tensor, "set_dynamic_range"):
            tensor.set_dynamic_range(-r, r)
        else:
            tensor.dynamic_range = (-r, r)

    for i in range(network.num_inputs):
        set_range(network.get_input(i), 2.0)
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        concat = layer.type == trt.LayerType.CONCATENATION
        for j in range(layer.num_inputs):
            set_range(layer.get_input(j), 4.0 if concat else 2.0)
        pooling = layer.type == trt.LayerType.POOLING
        for j in range(layer.num_outputs):
            set_range(layer.get_output(j), 2.0 if pooling else 4.0)


def _calibrator(trt, path):
    # type: (Any, str) -> Any
    """An entropy calibrator that only replays a calibration cache file."""

    class CacheCalibrator(trt.IInt8EntropyCalibrator2):
        def __init__(self):
            trt.IInt8EntropyCalibrator2.__init__(self)

        def get_batch_size(self):
            return 1

        def get_batch(self, names):
            return None

        def read_calibration_cache(self):
            with open(path, "rb") as fh:
                return fh.read()

        def write_calibration_cache(self, cache):
            return None

    return CacheCalibrator()


class _Locked(object):
    """``fcntl.flock`` on ``<path>.lock`` (shared for reading, exclusive for writing)."""

    def __init__(self, path, exclusive):
        # type: (str, bool) -> None
        self.path = path + ".lock"
        self.mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        self.fh = None  # type: Any

    def __enter__(self):
        d = os.path.dirname(self.path)
        if d:
            os.makedirs(d, exist_ok=True)
        self.fh = open(self.path, "a")
        fcntl.flock(self.fh.fileno(), self.mode)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.fh.fileno(), fcntl.LOCK_UN)
        self.fh.close()


def _load_timing_cache(config, path):
    # type: (Any, Optional[str]) -> Any
    if not path:
        return None
    data = b""
    with _Locked(path, exclusive=False):
        if os.path.exists(path):
            with open(path, "rb") as fh:
                data = fh.read()
    try:
        cache = config.create_timing_cache(data)
    except Exception:  # a corrupt or foreign cache: start empty
        cache = config.create_timing_cache(b"")
    config.set_timing_cache(cache, False)
    return cache


def _save_timing_cache(config, path):
    # type: (Any, Optional[str]) -> None
    """Merge this build's timing cache into the file (read-combine-write under an exclusive lock)."""
    if not path:
        return
    ours = config.get_timing_cache()
    if ours is None:
        return
    with _Locked(path, exclusive=True):
        merged = ours
        if os.path.exists(path):
            with open(path, "rb") as fh:
                disk_data = fh.read()
            try:
                merged = config.create_timing_cache(disk_data)
                merged.combine(ours, False)
            except Exception:
                merged = ours
        tmp = "%s.%d.tmp" % (path, os.getpid())
        with open(tmp, "wb") as fh:
            fh.write(bytes(merged.serialize()))
        os.replace(tmp, path)


def build(trt, job, logger):
    # type: (Any, Dict[str, Any], Any) -> Tuple[Any, Dict[str, Any]]
    """Parse, configure and build; returns (serialized plan or None, result fields)."""
    major, _minor = _version_tuple(trt.__version__)
    out = {"network_layers": []}  # type: Dict[str, Any]
    builder = trt.Builder(logger)
    flags = 0
    if major < 10:
        flags |= 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)
    if job.get("strongly_typed") and hasattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED"):
        flags |= 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    path = job["onnx"]
    if hasattr(parser, "parse_from_file"):
        parsed = parser.parse_from_file(path)
    else:
        with open(path, "rb") as fh:
            parsed = parser.parse(fh.read(), path)
    if not parsed:
        out["parser_errors"] = [str(parser.get_error(i)) for i in range(parser.num_errors)]
        return None, out
    config = builder.create_builder_config()
    precision = job.get("precision", "fp16")
    if not job.get("strongly_typed"):
        if precision in ("fp16", "int8"):
            config.set_flag(trt.BuilderFlag.FP16)
        if precision == "int8":
            config.set_flag(trt.BuilderFlag.INT8)
            if job.get("calibration_cache"):
                config.int8_calibrator = _calibrator(trt, job["calibration_cache"])
            else:
                _set_dynamic_ranges(network, trt)
    config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    config.default_device_type = trt.DeviceType.GPU
    core = int(job.get("dla_core", -1))
    if core >= 0:
        config.DLA_core = core
    if job.get("gpu_fallback", True):
        config.set_flag(trt.BuilderFlag.GPU_FALLBACK)
    for pool, size in (job.get("memory_pools") or {}).items():
        config.set_memory_pool_limit(getattr(trt.MemoryPoolType, pool), int(size))
    # optimisation profile min = opt = max for inputs with dynamic dimensions
    shapes = job.get("input_shapes") or {}
    profile = None
    for i in range(network.num_inputs):
        t = network.get_input(i)
        dims = tuple(t.shape)
        if any(d < 0 for d in dims):
            want = shapes.get(t.name)
            if want is None:
                raise ValueError("input %r has dynamic dimensions %r and the job gives no shape" % (t.name, dims))
            if profile is None:
                profile = builder.create_optimization_profile()
            profile.set_shape(t.name, want, want, want)
    if profile is not None:
        config.add_optimization_profile(profile)
    # placement
    wanted = set(job.get("dla_layers") or [])
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        onnx_name = _onnx_name(layer)
        on_dla = core >= 0 and (layer.name in wanted or (onnx_name is not None and onnx_name in wanted))
        if on_dla:
            config.set_device_type(layer, trt.DeviceType.DLA)
        can = bool(config.can_run_on_DLA(layer)) if on_dla else None
        out["network_layers"].append([layer.name, onnx_name, getattr(layer.type, "name", str(layer.type)), on_dla, can])
    _load_timing_cache(config, job.get("timing_cache"))
    t0 = time.perf_counter()
    plan = builder.build_serialized_network(network, config)
    out["build_seconds"] = time.perf_counter() - t0
    if plan is not None:
        _save_timing_cache(config, job.get("timing_cache"))
    return plan, out


# ------------------------------------------------------------------------------ timing
def _cuda():
    # type: () -> Any
    """pycuda.driver with the primary context of device 0 current (once per process)."""
    if "driver" not in _CUDA:
        import pycuda.driver as cuda

        cuda.init()
        ctx = cuda.Device(0).retain_primary_context()
        ctx.push()
        _CUDA["driver"], _CUDA["context"] = cuda, ctx
    return _CUDA["driver"]


def _profiler(trt):
    # type: (Any) -> Any
    class LayerTimes(trt.IProfiler):
        def __init__(self):
            trt.IProfiler.__init__(self)
            self.total = {}  # type: Dict[str, float]
            self.order = []  # type: List[str]

        def report_layer_time(self, layer_name, ms):
            if layer_name not in self.total:
                self.total[layer_name] = 0.0
                self.order.append(layer_name)
            self.total[layer_name] += float(ms)

    return LayerTimes()


def _profile(trt, context, run, stream, reps):
    # type: (Any, Any, Any, Any, int) -> List[List[Any]]
    """Per engine layer mean time (ms) over ``reps`` profiled inferences (IProfiler). The
    profiler stays attached: profile after the timed runs."""
    prof = _profiler(trt)
    context.profiler = prof
    deferred = hasattr(context, "report_to_profiler")
    if deferred:
        context.enqueue_emits_profile = False
    for _ in range(reps):
        run()
        stream.synchronize()
        if deferred:
            context.report_to_profiler()
    return [[k, prof.total[k] / reps] for k in prof.order]


def _percentile(sorted_values, q):
    # type: (List[float], float) -> float
    if not sorted_values:
        return float("nan")
    k = (len(sorted_values) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


def time_engine(trt, plan, job, logger):
    # type: (Any, Any, Dict[str, Any], Any) -> Dict[str, Any]
    """Deserialize (DLA core set first), allocate, warm up, time, profile."""
    import numpy as np

    cuda = _cuda()
    out = {}  # type: Dict[str, Any]
    runtime = trt.Runtime(logger)
    core = int(job.get("dla_core", -1))
    if core >= 0:
        runtime.DLA_core = core  # must precede deserialize_cuda_engine (reference §0.2)
    engine = runtime.deserialize_cuda_engine(plan)
    if engine is None:
        out["status"] = "runtime_failed"
        out["error"] = "deserialize_cuda_engine returned None"
        return out
    context = engine.create_execution_context()
    shapes = job.get("input_shapes") or {}
    buffers = []
    allocs = []  # type: List[Any]
    rng = np.random.default_rng(0)
    try:
        for i in range(engine.num_io_tensors):
            name = engine.get_tensor_name(i)
            is_input = engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT
            shape = tuple(engine.get_tensor_shape(name))
            if is_input and any(d < 0 for d in shape):
                shape = tuple(shapes[name])
                context.set_input_shape(name, shape)
            dtype = np.dtype(trt.nptype(engine.get_tensor_dtype(name)))
            buffers.append((name, is_input, dtype))
        for name, is_input, dtype in buffers:
            shape = tuple(context.get_tensor_shape(name))
            count = 1
            for d in shape:
                count *= max(int(d), 1)
            mem = cuda.mem_alloc(max(count * dtype.itemsize, 1))
            allocs.append(mem)
            if is_input:
                data = rng.uniform(-1.0, 1.0, size=count).astype(dtype) if dtype.kind == "f" else np.zeros(count, dtype)
                cuda.memcpy_htod(mem, data)
            context.set_tensor_address(name, int(mem))
        stream = cuda.Stream()  # non-default stream (execute_async_v3 docstring)

        def run():
            if not context.execute_async_v3(stream.handle):
                raise RuntimeError("execute_async_v3 returned False")

        warm_s = float(job.get("warmup_ms", 200.0)) / 1000.0
        t0 = time.perf_counter()
        warm = 0
        while warm < 1 or time.perf_counter() - t0 < warm_s:
            run()
            stream.synchronize()
            warm += 1
        out["warmup_iterations"] = warm
        start, end = cuda.Event(), cuda.Event()
        samples = []  # type: List[float]
        for _ in range(int(job.get("iterations", 50))):
            start.record(stream)
            run()
            end.record(stream)
            end.synchronize()
            samples.append(float(end.time_since(start)))
        out["latency_samples_ms"] = samples
        # throughput: back-to-back enqueues between two events
        n = max(1, len(samples))
        start.record(stream)
        for _ in range(n):
            run()
        end.record(stream)
        end.synchronize()
        total = float(end.time_since(start))
        out["throughput_ms_per_inference"] = total / n
        s = sorted(samples)
        out["latency_ms"] = {"median": _percentile(s, 50), "p90": _percentile(s, 90), "p99": _percentile(s, 99),
                             "min": s[0], "max": s[-1], "mean": sum(s) / len(s)}
        reps = int(job.get("profile_iterations", 10))
        if reps > 0:  # separate profiling run: the profiler perturbs timing
            out["layer_profile"] = _profile(trt, context, run, stream, reps)
        if job.get("inspector", True) and hasattr(engine, "create_engine_inspector"):
            try:
                inspector = engine.create_engine_inspector()
                inspector.execution_context = context
                out["inspector"] = inspector.get_engine_information(trt.LayerInformationFormat.JSON)
            except Exception as exc:  # the inspector is informative only
                out["inspector_error"] = "%s: %s" % (type(exc).__name__, exc)
        out["status"] = "ok"
    except Exception as exc:
        out["status"] = "runtime_failed"
        out["error"] = "%s: %s" % (type(exc).__name__, exc)
        out["traceback"] = traceback.format_exc(limit=6)
    finally:
        for mem in allocs:
            mem.free()
    return out


def measure(job):
    # type: (Dict[str, Any]) -> Dict[str, Any]
    """Build the engine of one placement and time it."""
    import tensorrt as trt

    logger = _make_logger(trt, bool(job.get("verbose_log")))
    result = {"trt_version": str(trt.__version__), "log": logger.lines}  # type: Dict[str, Any]
    try:
        plan, info = build(trt, job, logger)
    except Exception as exc:
        result.update(status="build_failed", error="%s: %s" % (type(exc).__name__, exc),
                      traceback=traceback.format_exc(limit=6))
        return result
    result.update(info)
    if plan is None:
        result["status"] = "build_failed"
        errs = info.get("parser_errors") or [m for s, m in logger.lines if s in ("ERROR", "INTERNAL_ERROR")]
        result["error"] = "; ".join(errs[:5]) or "build_serialized_network returned None"
        return result
    result["engine_bytes"] = int(getattr(plan, "nbytes", 0) or len(bytes(plan)))
    try:
        result.update(time_engine(trt, plan, job, logger))
    except Exception as exc:
        result.update(status="runtime_failed", error="%s: %s" % (type(exc).__name__, exc),
                      traceback=traceback.format_exc(limit=6))
    return result


# ------------------------------------------------------------------------------ engine cache
_BUILD_RECORD = ("log", "network_layers", "build_seconds", "engine_bytes", "parser_errors")


def _read_cached_plan(path, version):
    # type: (Optional[str], str) -> Tuple[Optional[bytes], Dict[str, Any]]
    """A plan and its build record from the engine cache: (None, {}) when absent,
    incomplete or built by another TensorRT version."""
    if not path or not os.path.exists(path + ".json"):
        return None, {}
    try:
        with _Locked(path, exclusive=False):
            with open(path + ".json") as fh:
                meta = json.load(fh)
            with open(path, "rb") as fh:
                data = fh.read()
    except (OSError, ValueError):
        return None, {}
    if meta.get("trt_version") != version or meta.get("engine_bytes") != len(data):
        return None, {}
    return data, meta


def _write_cached_plan(path, data, meta):
    # type: (str, bytes, Dict[str, Any]) -> None
    """Plan first, then its record (a plan without a record is not a cache entry)."""
    with _Locked(path, exclusive=True):
        for target, payload in ((path, data), (path + ".json", json.dumps(meta).encode())):
            tmp = "%s.%d.tmp" % (target, os.getpid())
            with open(tmp, "wb") as fh:
                fh.write(payload)
            os.replace(tmp, target)


def obtain_plan(trt, spec):
    # type: (Any, Dict[str, Any]) -> Tuple[Optional[bytes], Dict[str, Any]]
    """The serialized engine of one spec (a ``measure`` job's build fields plus ``name`` and
    ``plan_cache``): read from the engine cache, else built and written to it."""
    version = str(trt.__version__)
    info = {"name": spec.get("name"), "cached": False}  # type: Dict[str, Any]
    data, meta = _read_cached_plan(spec.get("plan_cache"), version)
    if data is not None:
        for k in _BUILD_RECORD:
            info[k] = meta.get(k)
        info["cached"] = True
        return data, info
    logger = _make_logger(trt, bool(spec.get("verbose_log")))
    info["log"] = logger.lines
    try:
        plan, built = build(trt, spec, logger)
    except Exception as exc:
        info.update(error="%s: %s" % (type(exc).__name__, exc), traceback=traceback.format_exc(limit=6))
        return None, info
    info.update(built)
    if plan is None:
        errs = built.get("parser_errors") or [m for s, m in logger.lines if s in ("ERROR", "INTERNAL_ERROR")]
        info["error"] = "; ".join(errs[:5]) or "build_serialized_network returned None"
        return None, info
    data = bytes(memoryview(plan))
    info["engine_bytes"] = len(data)
    if spec.get("plan_cache"):
        record = dict((k, info.get(k)) for k in _BUILD_RECORD)
        record["trt_version"] = version
        try:
            _write_cached_plan(spec["plan_cache"], data, record)
        except OSError as exc:  # a full disk must not fail the measurement
            info["cache_error"] = "%s: %s" % (type(exc).__name__, exc)
    return data, info


def _obtain_all(trt, specs, common, result):
    # type: (Any, List[Dict[str, Any]], Dict[str, Any], Dict[str, Any]) -> Optional[List[bytes]]
    """Plans of every spec, their records in ``result["engines"]``; None (and a
    ``build_failed`` result) at the first engine that does not build."""
    plans = []
    for spec in specs:
        full = dict(common)
        full.update(spec)
        data, info = obtain_plan(trt, full)
        result["engines"].append(info)
        if data is None:
            result["status"] = "build_failed"
            result["failed_engine"] = len(result["engines"]) - 1
            result["error"] = "engine %s (%s) did not build: %s" % (spec.get("name"), spec.get("device", "GPU"),
                                                                      info.get("error"))
            return None
        plans.append(data)
    return plans


# ------------------------------------------------------------------------------ several engines
class _Engine(object):
    """A deserialized engine with its own execution context and CUDA stream."""

    def __init__(self, trt, cuda, name, plan, core, logger, shapes=None):
        # type: (Any, Any, str, bytes, int, Any, Optional[Dict[str, Any]]) -> None
        import numpy as np

        self.name = name
        self.logger = logger
        self.runtime = trt.Runtime(logger)  # kept: it must outlive the engine
        if core >= 0:
            self.runtime.DLA_core = core  # before deserializing (reference §0.2)
        self.engine = self.runtime.deserialize_cuda_engine(plan)
        if self.engine is None:
            raise RuntimeError("engine %s: deserialize_cuda_engine returned None%s" % (name, self._errors()))
        self.context = self.engine.create_execution_context()
        self.stream = cuda.Stream()
        self.inputs = []  # type: List[str]
        self.outputs = []  # type: List[str]
        self.tensors = {}  # type: Dict[str, Tuple[Tuple[int, ...], Any]]
        for i in range(self.engine.num_io_tensors):
            tname = self.engine.get_tensor_name(i)
            is_input = self.engine.get_tensor_mode(tname) == trt.TensorIOMode.INPUT
            shape = tuple(int(d) for d in self.engine.get_tensor_shape(tname))
            if is_input and any(d < 0 for d in shape):
                if not shapes or tname not in shapes:
                    raise RuntimeError("engine %s: input %r has dynamic dimensions and no shape is given"
                                       % (name, tname))
                shape = tuple(int(d) for d in shapes[tname])
                self.context.set_input_shape(tname, shape)
            (self.inputs if is_input else self.outputs).append(tname)
            self.tensors[tname] = (shape, np.dtype(trt.nptype(self.engine.get_tensor_dtype(tname))))
        for tname in self.outputs:
            self.tensors[tname] = (tuple(int(d) for d in self.context.get_tensor_shape(tname)), self.tensors[tname][1])

    def _errors(self):
        # type: () -> str
        errs = [m for s, m in self.logger.lines if s in ("ERROR", "INTERNAL_ERROR")]
        return (": " + "; ".join(errs[-3:])) if errs else ""

    def nbytes(self, tname):
        # type: (str) -> int
        shape, dtype = self.tensors[tname]
        count = 1
        for d in shape:
            count *= max(int(d), 1)
        return max(count * dtype.itemsize, 1)

    def run(self, addresses):
        # type: (List[Tuple[str, Any]]) -> None
        for tname, mem in addresses:
            self.context.set_tensor_address(tname, int(mem))
        if not self.context.execute_async_v3(self.stream.handle):
            raise RuntimeError("engine %s: execute_async_v3 returned False%s" % (self.name, self._errors()))


def _alloc(cuda, allocs, nbytes):
    # type: (Any, List[Any], int) -> Any
    mem = cuda.mem_alloc(max(int(nbytes), 1))
    allocs.append(mem)
    return mem


def _random_fill(cuda, np, rng, mem, shape, dtype):
    # type: (Any, Any, Any, Any, Tuple[int, ...], Any) -> None
    count = 1
    for d in shape:
        count *= max(int(d), 1)
    if dtype.kind == "f":
        data = rng.uniform(-1.0, 1.0, size=count).astype(dtype)
    elif dtype.kind in "iu":
        data = rng.integers(0, 2, size=count).astype(dtype)
    else:
        data = np.zeros(count, dtype)
    cuda.memcpy_htod(mem, data)


def _download(cuda, np, mem, shape, dtype):
    # type: (Any, Any, Any, Tuple[int, ...], Any) -> Any
    host = np.empty(tuple(int(d) for d in shape), dtype=dtype)
    cuda.memcpy_dtoh(host, mem)
    return host


def _median(values):
    # type: (List[float]) -> float
    return _percentile(sorted(values), 50) if values else float("nan")


def compare_outputs(np, got, want, tolerance):
    # type: (Any, Dict[str, Any], Dict[str, Any], float) -> Dict[str, Any]
    """The correctness gate: relative L2 error ||got - want|| / ||want|| of every output
    against ``tolerance``; non-finite values fail; an all-zero reference cannot tell."""
    report = {"metric": "relative_l2", "tolerance": tolerance, "outputs": {}, "passed": True,
              "vacuous": True}  # type: Dict[str, Any]
    for name in want:
        a = np.asarray(got[name], dtype=np.float64)
        b = np.asarray(want[name], dtype=np.float64)
        row = {"shape": list(b.shape)}  # type: Dict[str, Any]
        if a.shape != b.shape:
            row.update(error="shape %s, reference %s" % (list(a.shape), list(b.shape)), passed=False)
        elif not (np.isfinite(a).all() and np.isfinite(b).all()):
            row.update(error="non-finite values (pipeline %d, reference %d)"
                       % (int((~np.isfinite(a)).sum()), int((~np.isfinite(b)).sum())), passed=False)
        else:
            diff = np.abs(a - b)
            norm = float(np.sqrt((b * b).sum()))
            worst = tuple(int(i) for i in np.unravel_index(int(diff.argmax()), diff.shape)) if diff.size else ()
            row.update(max_abs_diff=float(diff.max()) if diff.size else 0.0, at=list(worst),
                       ref_max_abs=float(np.abs(b).max()) if b.size else 0.0,
                       got_max_abs=float(np.abs(a).max()) if a.size else 0.0)
            if norm > 0:
                rel = float(np.sqrt((diff * diff).sum())) / norm
                row.update(rel_l2=rel, passed=rel <= tolerance)
                report["vacuous"] = False
            elif diff.any():
                row.update(rel_l2=None, passed=False, error="the reference output is all zeros but the pipeline's "
                           "is not (max |x| %.4g)" % row["got_max_abs"])
            else:
                row.update(rel_l2=0.0, passed=True)
        report["outputs"][name] = row
        report["passed"] = report["passed"] and row["passed"]
    return report


def _gate_error(report):
    # type: (Dict[str, Any]) -> str
    parts = []
    for name, row in report["outputs"].items():
        if row.get("passed"):
            continue
        if "error" in row:
            parts.append("output %r: %s" % (name, row["error"]))
        else:
            parts.append("output %r: relative L2 error %.4g > tolerance %.4g (max |diff| %.4g at %s; reference "
                         "max |x| %.4g, pipeline max |x| %.4g)" % (name, row["rel_l2"], report["tolerance"],
                                                                   row["max_abs_diff"], tuple(row["at"]),
                                                                   row["ref_max_abs"], row["got_max_abs"]))
    return "pipeline outputs differ from the all-GPU engine on random input: " + "; ".join(parts)


class _Pipeline(object):
    """Engines chained by their tensors: one stream each, an event per (engine, buffer slot),
    ``slots`` device buffers per cut tensor, ``in_flight`` frames at once.

    Frame ``f`` uses slot ``f % slots``. Before an engine runs frame ``f`` its stream waits
    for: the engines that produce its inputs (frame ``f``); the engines that read its outputs
    in the same slot (frame ``f - slots``: write after read); for a source engine, the sinks
    of frame ``f - in_flight``. Independent branches therefore run at once.
    """

    def __init__(self, cuda, np, engines, net_inputs, net_outputs, in_flight, allocs, rng):
        # type: (Any, Any, List[_Engine], Dict[str, Any], List[str], int, List[Any], Any) -> None
        self.cuda = cuda
        self.engines = engines
        self.k = max(1, int(in_flight))
        self.slots = max(2, self.k)
        n = len(engines)
        producer = {}  # type: Dict[str, int]
        for i, e in enumerate(engines):
            for t in e.outputs:
                if t in producer:
                    raise RuntimeError("tensor %r is an output of engines %s and %s"
                                       % (t, engines[producer[t]].name, e.name))
                producer[t] = i
        self.preds = [set() for _ in engines]  # type: List[set]
        self.succs = [set() for _ in engines]  # type: List[set]
        for i, e in enumerate(engines):
            for t in e.inputs:
                if t in producer:
                    j = producer[t]
                    if j >= i:
                        raise RuntimeError("engine %s reads %r from engine %s, which comes later: engines must be "
                                           "in topological order" % (e.name, t, engines[j].name))
                    if engines[j].tensors[t] != e.tensors[t]:
                        (ps, pd), (cs, cd) = engines[j].tensors[t], e.tensors[t]
                        raise RuntimeError("cut tensor %r: engine %s writes %s %s but engine %s reads %s %s"
                                           % (t, engines[j].name, pd.name, list(ps), e.name, cd.name, list(cs)))
                    self.preds[i].add(j)
                    self.succs[j].add(i)
                elif t not in net_inputs:
                    raise RuntimeError("engine %s reads %r, which no engine and no network input provides"
                                       % (e.name, t))
        missing = [o for o in net_outputs if o not in producer]
        if missing:
            raise RuntimeError("no engine outputs the network output(s) %s" % ", ".join(repr(o) for o in missing))
        self.sinks = [i for i in range(n) if not self.succs[i]]
        self.producer = producer
        self.net_outputs = list(net_outputs)
        # network inputs: one read-only buffer each; every engine output: one buffer per slot
        self.inputs = {}  # type: Dict[str, Tuple[Any, Tuple[int, ...], Any]]
        for t in net_inputs:
            readers = [e for e in engines if t in e.inputs]
            if not readers:
                continue
            shape, dtype = readers[0].tensors[t]
            mem = _alloc(cuda, allocs, readers[0].nbytes(t))
            _random_fill(cuda, np, rng, mem, shape, dtype)
            self.inputs[t] = (mem, shape, dtype)
        self.buffers = {}  # type: Dict[str, List[Any]]
        for t, i in producer.items():
            self.buffers[t] = [_alloc(cuda, allocs, engines[i].nbytes(t)) for _ in range(self.slots)]
        self.addresses = []  # type: List[List[List[Tuple[str, Any]]]]
        for e in engines:
            per_slot = []
            for s in range(self.slots):
                addr = [(t, self.buffers[t][s] if t in self.buffers else self.inputs[t][0]) for t in e.inputs]
                addr += [(t, self.buffers[t][s]) for t in e.outputs]
                per_slot.append(addr)
            self.addresses.append(per_slot)
        self.done = [[cuda.Event() for _ in range(self.slots)] for _ in engines]
        self.timer = cuda.Stream()
        self.frame_no = 0

    def frame(self, after=None, marks=None):
        # type: (Any, Optional[List[Tuple[Any, Any]]]) -> int
        """Enqueue the next frame (returns its number); ``after``: an event its source engines
        wait for; ``marks``: (start, end) events per engine to record around each run."""
        f = self.frame_no
        self.frame_no += 1
        s = f % self.slots
        for i, e in enumerate(self.engines):
            st = e.stream
            if not self.preds[i]:
                if after is not None:
                    st.wait_for_event(after)
                if f >= self.k:
                    for j in self.sinks:
                        st.wait_for_event(self.done[j][(f - self.k) % self.slots])
            for j in self.preds[i]:
                st.wait_for_event(self.done[j][s])
            if f >= self.slots:
                for j in self.succs[i]:
                    st.wait_for_event(self.done[j][s])
            if marks is not None:
                marks[i][0].record(st)
            e.run(self.addresses[i][s])
            if marks is not None:
                marks[i][1].record(st)
            self.done[i][s].record(st)
        return f

    def finish(self, f, end):
        # type: (int, Any) -> None
        """Record ``end`` on the timing stream once frame ``f`` (and so every earlier one) is done; wait."""
        for j in self.sinks:
            self.timer.wait_for_event(self.done[j][f % self.slots])
        end.record(self.timer)
        end.synchronize()

    def outputs(self, np, f):
        # type: (Any, int) -> Dict[str, Any]
        s = f % self.slots
        out = {}
        for t in self.net_outputs:
            shape, dtype = self.engines[self.producer[t]].tensors[t]
            out[t] = _download(self.cuda, np, self.buffers[t][s], shape, dtype)
        return out


def _run_pipeline(trt, cuda, np, job, plans, ref_plan, logger, allocs, out):
    # type: (Any, Any, Any, Dict[str, Any], List[bytes], Optional[bytes], Any, List[Any], Dict[str, Any]) -> None
    specs = job["engines"]
    engines = [_Engine(trt, cuda, str(s.get("name")), p, int(s.get("dla_core", -1)), logger, s.get("input_shapes"))
               for s, p in zip(specs, plans)]
    rng = np.random.default_rng(int(job.get("seed", 0)))
    pipe = _Pipeline(cuda, np, engines, job.get("network_inputs") or {}, list(job.get("network_outputs") or []),
                     int(job.get("frames_in_flight", 1)), allocs, rng)
    out["slots"] = pipe.slots
    end = cuda.Event()
    t0 = cuda.Event()
    # ---- correctness gate: the pipeline against one all-GPU engine on the same random input
    gate = job.get("gate") or {}
    want = None  # type: Optional[Dict[str, Any]]
    if ref_plan is not None:
        f = pipe.frame()
        pipe.finish(f, end)
        got = pipe.outputs(np, f)
        ref = _Engine(trt, cuda, "reference", ref_plan, -1, logger, job.get("network_inputs"))
        addr = []
        for t in ref.inputs:
            if t not in pipe.inputs:  # a network input no segment reads
                mem = _alloc(cuda, allocs, ref.nbytes(t))
                _random_fill(cuda, np, rng, mem, ref.tensors[t][0], ref.tensors[t][1])
                pipe.inputs[t] = (mem, ref.tensors[t][0], ref.tensors[t][1])
            addr.append((t, pipe.inputs[t][0]))
        ref_out = {}
        for t in ref.outputs:
            ref_out[t] = _alloc(cuda, allocs, ref.nbytes(t))
            addr.append((t, ref_out[t]))
        ref.run(addr)
        ref.stream.synchronize()
        want = dict((t, _download(cuda, np, ref_out[t], ref.tensors[t][0], ref.tensors[t][1]))
                    for t in pipe.net_outputs if t in ref_out)
        missing = [t for t in pipe.net_outputs if t not in ref_out]
        if missing:
            raise RuntimeError("the reference engine has no output %s" % ", ".join(repr(t) for t in missing))
        report = compare_outputs(np, got, want, float(gate.get("tolerance", 1e-2)))
        report["enforced"] = bool(gate.get("enforce", True))
        report["checked"] = True
        out["gate"] = report
        if report["enforced"] and not report["passed"]:
            out["status"] = "runtime_failed"
            out["error"] = _gate_error(report)
            return
    # ---- warm-up
    warm_s = float(job.get("warmup_ms", 200.0)) / 1000.0
    t_start = time.perf_counter()
    warm = 0
    while warm < pipe.slots + pipe.k or time.perf_counter() - t_start < warm_s:
        f = pipe.frame()
        warm += 1
        if warm % max(1, 4 * pipe.k) == 0:
            pipe.finish(f, end)
    pipe.finish(f, end)
    out["warmup_frames"] = warm
    # ---- single-frame latency; the last one also gives each engine's interval
    n_eng = len(engines)
    marks = [(cuda.Event(), cuda.Event()) for _ in range(n_eng)]
    samples = []  # type: List[float]
    iterations = max(1, int(job.get("iterations", 50)))
    for it in range(iterations):
        t0.record(pipe.timer)
        f = pipe.frame(after=t0, marks=marks if it == iterations - 1 else None)
        pipe.finish(f, end)
        samples.append(float(end.time_since(t0)))
    out["latency_samples_ms"] = samples
    out["schedule"] = [[float(a.time_since(t0)), float(b.time_since(t0))] for a, b in marks]
    # ---- throughput with K frames in flight
    frames = max(iterations, 4 * pipe.slots)
    t0.record(pipe.timer)
    for k in range(frames):
        f = pipe.frame(after=t0 if k < pipe.k else None)
    pipe.finish(f, end)
    out["throughput_frames"] = frames
    out["period_ms"] = float(end.time_since(t0)) / frames
    if want is not None:  # the last frame of K in flight must still be right (buffer reuse)
        report = compare_outputs(np, pipe.outputs(np, f), want, float(gate.get("tolerance", 1e-2)))
        out["gate"]["after_timing"] = {"frame": f, "passed": report["passed"], "outputs": report["outputs"]}
        if out["gate"]["enforced"] and not report["passed"]:
            out["status"] = "runtime_failed"
            out["error"] = _gate_error(report) + " (frame %d, %d frames in flight)" % (f, pipe.k)
            return
    # ---- timeline: a few frames with K in flight, every engine run stamped
    n_frames = max(1, min(int(job.get("timeline_frames", 4)), 2000 // max(1, n_eng)))
    stamps = [[(cuda.Event(), cuda.Event()) for _ in range(n_eng)] for _ in range(n_frames)]
    t0.record(pipe.timer)
    for k in range(n_frames):
        f = pipe.frame(after=t0 if k < pipe.k else None, marks=stamps[k])
    pipe.finish(f, end)
    out["timeline"] = [[i, k, float(a.time_since(t0)), float(b.time_since(t0))]
                       for k in range(n_frames) for i, (a, b) in enumerate(stamps[k])]
    # ---- each engine alone, then its layer profile
    reps = max(1, min(iterations, 20))
    alone = []
    for i, e in enumerate(engines):
        times = []
        for _ in range(reps):
            marks[i][0].record(e.stream)
            e.run(pipe.addresses[i][0])
            marks[i][1].record(e.stream)
            marks[i][1].synchronize()
            times.append(float(marks[i][1].time_since(marks[i][0])))
        alone.append(_median(times))
    out["alone_ms"] = alone
    prof_reps = int(job.get("profile_iterations", 0))
    if prof_reps > 0:
        profiles = []
        for i, e in enumerate(engines):
            addr = pipe.addresses[i][0]
            profiles.append(_profile(trt, e.context, lambda e=e, addr=addr: e.run(addr), e.stream, prof_reps))
        out["layer_profiles"] = profiles
    out["status"] = "ok"


def pipeline(job):
    # type: (Dict[str, Any]) -> Dict[str, Any]
    """Build (or load from the engine cache) one engine per segment and an all-GPU reference,
    check the pipeline against it, then time it: latency, throughput with K frames in flight,
    a timeline of a few frames, each engine alone and its layer profile."""
    import numpy as np
    import tensorrt as trt

    result = {"trt_version": str(trt.__version__), "engines": []}  # type: Dict[str, Any]
    specs = list(job.get("engines") or [])
    ref_spec = job.get("reference")
    plans = _obtain_all(trt, specs + ([ref_spec] if ref_spec else []), job.get("common") or {}, result)
    if plans is None:
        return result
    ref_plan = plans.pop() if ref_spec else None
    if ref_spec:
        result["reference"] = result["engines"].pop()
    logger = _make_logger(trt, False)
    result["runtime_log"] = logger.lines
    allocs = []  # type: List[Any]
    try:
        _run_pipeline(trt, _cuda(), np, job, plans, ref_plan, logger, allocs, result)
    except Exception as exc:
        result.update(status="runtime_failed", error="%s: %s" % (type(exc).__name__, exc),
                      traceback=traceback.format_exc(limit=6))
    finally:
        for mem in allocs:
            mem.free()
    return result


def _run_replicas(trt, cuda, np, job, plans, logger, allocs, out):
    # type: (Any, Any, Any, Dict[str, Any], List[bytes], Any, List[Any], Dict[str, Any]) -> None
    specs = job["instances"]
    rng = np.random.default_rng(int(job.get("seed", 0)))
    engines = []
    addresses = []
    for s, p in zip(specs, plans):
        e = _Engine(trt, cuda, str(s.get("name")), p, int(s.get("dla_core", -1)), logger, s.get("input_shapes"))
        addr = []
        for t in e.inputs + e.outputs:
            mem = _alloc(cuda, allocs, e.nbytes(t))
            if t in e.inputs:
                _random_fill(cuda, np, rng, mem, e.tensors[t][0], e.tensors[t][1])
            addr.append((t, mem))
        engines.append(e)
        addresses.append(addr)
    n = len(engines)
    iterations = max(1, int(job.get("iterations", 50)))
    warm_s = float(job.get("warmup_ms", 200.0)) / 1000.0
    # ---- each instance alone
    start, end = cuda.Event(), cuda.Event()
    alone = []
    for e, addr in zip(engines, addresses):
        t_start = time.perf_counter()
        warm = 0
        while warm < 1 or time.perf_counter() - t_start < warm_s:
            e.run(addr)
            e.stream.synchronize()
            warm += 1
        times = []
        for _ in range(iterations):
            start.record(e.stream)
            e.run(addr)
            end.record(e.stream)
            end.synchronize()
            times.append(float(end.time_since(start)))
        alone.append(times)
    out["alone_samples_ms"] = alone
    # ---- all at once, each in a closed loop with `depth` inferences queued, for a duration
    depth = max(1, int(job.get("queue_depth", 2)))
    keep = max(iterations, int(job.get("timeline_iterations", 4)))
    ring = [[(cuda.Event(), cuda.Event()) for _ in range(depth + 1)] for _ in range(n)]
    kept = [[] for _ in range(n)]  # type: List[List[Tuple[Any, Any]]]
    last = [None] * n  # type: List[Any]
    queues = [[] for _ in range(n)]  # type: List[List[Tuple[Any, Any]]]
    counts = [0] * n
    timer = cuda.Stream()
    base = cuda.Event()
    base.record(timer)
    for e in engines:
        e.stream.wait_for_event(base)
    duration_s = float(job.get("duration_s", 3.0))
    cap = int(job.get("max_inferences", 100000))
    t_end = time.perf_counter() + duration_s
    while min(counts) < 1 or (time.perf_counter() < t_end and sum(counts) < cap):
        progressed = False
        for i, e in enumerate(engines):
            q = queues[i]
            if len(q) >= depth:
                if not q[0][1].query():
                    continue
                q.pop(0)
            c = counts[i]
            if c < keep:
                pair = (cuda.Event(), cuda.Event())
                kept[i].append(pair)
            else:
                pair = ring[i][c % (depth + 1)]
            pair[0].record(e.stream)
            e.run(addresses[i])
            pair[1].record(e.stream)
            q.append(pair)
            last[i] = pair
            counts[i] = c + 1
            progressed = True
        if not progressed:
            time.sleep(0.0002)
    for e in engines:
        e.stream.synchronize()
    rows = []
    for i in range(n):
        first = kept[i][0][0]
        span = float(last[i][1].time_since(first))
        rows.append({"name": engines[i].name, "inferences": counts[i], "span_ms": span,
                     "start_ms": float(first.time_since(base)), "end_ms": float(last[i][1].time_since(base)),
                     "samples_ms": [float(b.time_since(a)) for a, b in kept[i][:iterations]]})
    out["instances"] = rows
    n_tl = int(job.get("timeline_iterations", 4))
    out["timeline"] = [[i, k, float(a.time_since(base)), float(b.time_since(base))]
                       for i in range(n) for k, (a, b) in enumerate(kept[i][:n_tl])]
    out["window_ms"] = max(r["end_ms"] for r in rows) - min(r["start_ms"] for r in rows)
    out["status"] = "ok"


def replicas(job):
    # type: (Dict[str, Any]) -> Dict[str, Any]
    """Build (or load) one whole-network engine per instance (device, batch), time each alone,
    then run them all at once, each in a closed loop on its own stream, for ``duration_s``."""
    import numpy as np
    import tensorrt as trt

    result = {"trt_version": str(trt.__version__), "engines": []}  # type: Dict[str, Any]
    plans = _obtain_all(trt, list(job.get("instances") or []), job.get("common") or {}, result)
    if plans is None:
        return result
    logger = _make_logger(trt, False)
    result["runtime_log"] = logger.lines
    allocs = []  # type: List[Any]
    try:
        _run_replicas(trt, _cuda(), np, job, plans, logger, allocs, result)
    except Exception as exc:
        result.update(status="runtime_failed", error="%s: %s" % (type(exc).__name__, exc),
                      traceback=traceback.format_exc(limit=6))
    finally:
        for mem in allocs:
            mem.free()
    return result


def handle(job):
    # type: (Dict[str, Any]) -> Dict[str, Any]
    op = job.get("op")
    if op == "probe":
        return probe(job)
    if op in ("measure", "pipeline", "replicas"):
        try:
            import tensorrt  # noqa: F401
        except Exception as exc:
            return {"status": "unavailable", "error": "cannot import tensorrt: %s: %s" % (type(exc).__name__, exc)}
        return {"measure": measure, "pipeline": pipeline, "replicas": replicas}[op](job)
    return {"status": "error", "error": "unknown op %r" % (op,)}


def _unshadow():
    # type: () -> None
    """Run as a file, Python puts this directory first on sys.path, where placetune's own
    ``tensorrt.py`` would shadow the real ``tensorrt`` package: take it out."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]


def main():
    # type: () -> int
    _unshadow()
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything else written to stdout goes to stderr
    sys.stdout = sys.stderr

    def send(doc):
        proto.write(json.dumps(doc) + "\n")
        proto.flush()

    send({"hello": PROTOCOL, "python": "%d.%d.%d" % sys.version_info[:3], "pid": os.getpid()})
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        job = None
        try:
            job = json.loads(line)
            result = handle(job)
        except Exception as exc:
            result = {"status": "error", "error": "%s: %s" % (type(exc).__name__, exc),
                      "traceback": traceback.format_exc(limit=6)}
        if isinstance(job, dict) and "id" in job:
            result["id"] = job["id"]
        send(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
