"""placetune's TensorRT build-and-time worker: one JSON job per stdin line, one JSON result per stdout line.

Runs in its own process so that a TensorRT segfault, hang or CUDA error cannot take the
study down (the parent, :mod:`placetune.backends.tensorrt`, enforces timeouts and
restarts it). It depends only on ``tensorrt``, ``pycuda``, ``numpy`` and the standard
library, imports none of placetune and runs under Python 3.8, so it can be started as a
file with JetPack's system Python::

    /usr/bin/python3 placetune/backends/worker.py      # or: python -m placetune.backends.worker

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
            out["layer_profile"] = [[k, prof.total[k] / reps] for k in prof.order]
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


def handle(job):
    # type: (Dict[str, Any]) -> Dict[str, Any]
    op = job.get("op")
    if op == "probe":
        return probe(job)
    if op == "measure":
        try:
            import tensorrt  # noqa: F401
        except Exception as exc:
            return {"status": "unavailable", "error": "cannot import tensorrt: %s: %s" % (type(exc).__name__, exc)}
        return measure(job)
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
