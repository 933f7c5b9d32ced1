"""The worker's timing of engines: latency, throughput and layer profile of one engine (the ``measure`` op).

Also :class:`Engine`, a deserialized engine with its own context and stream, which the
``pipeline`` and ``replicas`` ops run. A sibling module of ``worker.py``: Python 3.8, no
placetune imports.
"""

import os
import time
import traceback

try:  # Python 3.8 needs typing's generics
    from typing import Any, Dict, List, Optional, Tuple
except ImportError:  # pragma: no cover
    pass

from worker_build import init_plugins, make_logger, obtain_plan
from worker_cuda import driver
from worker_resources import Resources, input_values, load_inputs, release


def _percentile(sorted_values, q):
    # type: (List[float], float) -> float
    if not sorted_values:
        return float("nan")
    k = (len(sorted_values) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


def median(values):
    # type: (List[float]) -> float
    return _percentile(sorted(values), 50) if values else float("nan")


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


def profile_layers(trt, context, run, stream, reps):
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


def timed_window(t0):
    # type: (float) -> List[float]
    """``[t0, now]`` in time.monotonic() seconds: the span of a job's timed part, reported as its
    ``timed_window``. The monotonic clock is the system's (CLOCK_MONOTONIC), one for every process
    of the machine, so the parent cuts the clocks (and power rails) it sampled meanwhile to it:
    a clock that moved during the build only says nothing about the figures."""
    return [t0, time.monotonic()]


def time_serial(cuda, run, stream, iterations, min_seconds=0.0):
    # type: (Any, Any, Any, int, float) -> Tuple[List[float], float, List[float]]
    """Time at least ``iterations`` queries, and for at least ``min_seconds`` (trtexec's
    ``--duration``; the power rails need seconds), one at a time: ``(latency of each in ms, wall
    time of the loop in ms, [start, end] of the loop in time.monotonic() seconds, :func:`timed_window`)``.

    The engine-mode method of both real backends (placetune/backends/timing_method.py): an event
    on ``stream`` just before the enqueue, one just after, and the host waits for the second before
    the next enqueue, which is trtexec's inference loop with ``--exposeDMA``: one query slot
    (``mDepth(1 + inference.overlap)``, samples/common/sampleInference.cpp release/10.3:790;
    ``overlap = !exposeDMA``, sampleOptions.cpp release/10.3:1610-1612), ``query`` then ``sync``
    of that slot (``inferenceLoop``, sampleInference.cpp release/10.3:1028-1087). Throughput is
    queries / wall time from the first enqueue to the last completion (the host's gaps between queries
    included), trtexec's "Throughput" (sampleReporting.cpp release/10.3:179, 187, 227).
    Without ``--exposeDMA`` trtexec keeps two queries in flight and hides the host's enqueue
    time: its figure is lower by up to one enqueue."""
    first, start, end = cuda.Event(), cuda.Event(), cuda.Event()
    samples = []  # type: List[float]
    t0 = time.monotonic()
    first.record(stream)  # the loop's span on the stream: the first enqueue to the last completion
    while len(samples) < max(1, int(iterations)) or time.monotonic() - t0 < min_seconds:
        start.record(stream)
        run()
        end.record(stream)
        end.synchronize()
        samples.append(float(end.time_since(start)))
    return samples, float(end.time_since(first)), timed_window(t0)


#: numpy's name of each TensorRT DataType numpy has (the table of ``trt.nptype``, release/10.3
#: python/packaging/bindings_wheel/tensorrt/__init__.py:161-170); BF16, FP8 and INT4 have none
_NUMPY_TYPES = {"FLOAT": "float32", "HALF": "float16", "INT8": "int8", "INT32": "int32", "INT64": "int64",
                "BOOL": "bool", "UINT8": "uint8"}


def numpy_dtype(np, datatype):
    # type: (Any, Any) -> Any
    """The numpy dtype of a ``tensorrt.DataType``, read from its member name, not with ``trt.nptype``:
    TensorRT 8.5.2's (JetPack 5.1) builds a table naming ``np.bool`` on every call (tag 8.5.2,
    python/packaging/tensorrt/__init__.py:166; ``np.bool_`` from 8.5.3.1), which numpy 1.24-1.26 does not
    have, so every measurement failed with "module 'numpy' has no attribute 'bool'" (NVIDIA/TensorRT#2557).
    Raises TypeError for a type numpy has not, as ``trt.nptype`` does."""
    name = str(getattr(datatype, "name", "") or str(datatype).rsplit(".", 1)[-1])
    if name not in _NUMPY_TYPES:
        raise TypeError("TensorRT data type %s has no numpy equivalent (placetune times engines whose inputs and "
                        "outputs are %s)" % (name, ", ".join(sorted(_NUMPY_TYPES))))
    return np.dtype(_NUMPY_TYPES[name])


def output_shape(context, name):
    # type: (Any, str) -> Tuple[int, ...]
    """An output's shape once every input shape is set. A -1 left in it is a data-dependent shape
    ("If getTensorShape(name) reports a -1 for any dimension of an output after all input shapes
    have been set, then to find out the dimensions, use setOutputAllocator()", NvInferRuntime.h
    release/10.3:3995-3998; an ONNX NonZero or NonMaxSuppression output): its size is known only
    after the engine ran, and a buffer sized from the -1 would be overrun (the output's address
    "must point to a device buffer of sufficient size", :3991-3993). Raises RuntimeError then."""
    shape = tuple(int(d) for d in context.get_tensor_shape(name))
    if any(d < 0 for d in shape):
        raise RuntimeError("output %r has a data-dependent shape %s (its size is known only after the engine ran, "
                           "e.g. an ONNX NonZero or NonMaxSuppression output): placetune times engines whose "
                           "outputs have fixed shapes; end the model before that op or use a fixed-size one "
                           "(EfficientNMS_TRT)" % (name, list(shape)))
    return shape


def set_input_shape(engine, context, name, shape):
    # type: (Any, Any, str, Tuple[int, ...]) -> None
    """``context.set_input_shape``, its False (a shape outside the engine's optimisation profile)
    raised as one line naming the input, the shape and the profile's min and max where the engine
    says them: else the run fails later at execution with an obscure error."""
    if context.set_input_shape(name, shape):
        return
    try:
        lo, _opt, hi = engine.get_tensor_profile_shape(name, 0)
        profile = "min %s, max %s" % (list(int(d) for d in lo), list(int(d) for d in hi))
    except Exception:  # noqa: BLE001 - the profile is only said where it can be read
        profile = "unknown"
    raise ValueError("input %r: TensorRT refused the shape %s (set_input_shape returned False): outside the "
                     "engine's optimisation profile (%s)" % (name, list(int(d) for d in shape), profile))


def io_managed(cuda):
    # type: (Any) -> bool
    """Whether the engine's input and output tensors are put in managed memory: on an integrated GPU
    (a Jetson), as trtexec does when it times without copies. trtexec's ``setUpInference``: "Use
    managed memory on integrated devices when transfers are skipped", ``bool useManagedMemory{
    (inference.skipTransfers && isIntegrated) || inference.useManaged};`` (samples/common/
    sampleInference.cpp release/8.5:206, release/10.3:262-264; release/11.1:517 with
    ``!inference.includeTransfers``, 11's default), its bindings then ``cudaMallocManaged``
    (sampleDevice.h release/10.3:313-317, ``UnifiedMirroredBuffer``). The worker's engine-mode timing is
    trtexec's with ``--noDataTransfers``, so the tensors the engine reads and writes are of the same kind;
    device memory (``cuMemAlloc``) on a discrete GPU, as trtexec's there."""
    return bool(cuda.integrated())


def time_engine(trt, plan, job, logger):
    # type: (Any, Any, Dict[str, Any], Any) -> Dict[str, Any]
    """Deserialize (DLA core set first), allocate, warm up, time, profile."""
    import numpy as np

    cuda = Resources(driver())  # the job's CUDA resources, all freed when it ends (the context is current now)
    out = {}  # type: Dict[str, Any]
    runtime = trt.Runtime(logger)
    init_plugins(trt, logger)  # an engine with a plugin layer needs its creator registered
    core = int(job.get("dla_core", -1))
    if core >= 0:
        runtime.DLA_core = core  # must precede deserialize_cuda_engine (reference §0.2)
    engine = runtime.deserialize_cuda_engine(plan)
    if engine is None:
        out["status"] = "runtime_failed"
        errs = [m for s, m in logger.lines if s in ("ERROR", "INTERNAL_ERROR")]
        out["error"] = "deserialize_cuda_engine returned None" + ((": " + "; ".join(errs[-3:])) if errs else "")
        return out
    context = engine.create_execution_context()
    out["nvtx_verbosity"] = timing_nvtx(trt, context)
    shapes = job.get("input_shapes") or {}
    buffers = []
    rng = np.random.default_rng(0)
    try:
        inputs = load_inputs(np, job)
        for i in range(engine.num_io_tensors):
            name = engine.get_tensor_name(i)
            is_input = engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT
            shape = tuple(engine.get_tensor_shape(name))
            if is_input and any(d < 0 for d in shape):
                shape = tuple(shapes[name])
                set_input_shape(engine, context, name, shape)
            dtype = numpy_dtype(np, engine.get_tensor_dtype(name))
            buffers.append((name, is_input, dtype))
        managed = io_managed(cuda)
        out["io_memory"] = "managed" if managed else "device"
        for name, is_input, dtype in buffers:
            shape = tuple(context.get_tensor_shape(name)) if is_input else output_shape(context, name)
            count = 1
            for d in shape:
                count *= max(int(d), 1)
            mem = cuda.mem_alloc(max(count * dtype.itemsize, 1), managed)  # freed by the job's Resources
            if is_input:  # from a pinned buffer, as every other copy (freed by the job's Resources)
                host = cuda.pagelocked_empty((count,), dtype)
                if inputs is None:
                    host[:] = rng.uniform(-1.0, 1.0, size=count).astype(dtype) if dtype.kind == "f" else 0
                else:  # the input data given (--input-data), not noise
                    host[:] = input_values(np, rng, inputs, name, shape, dtype)
                cuda.memcpy_htod(mem, host)
            context.set_tensor_address(name, int(mem))
        stream = cuda.Stream()  # non-default stream (execute_async_v3 docstring)

        def run():
            if not context.execute_async_v3(stream.handle):
                errs = [m for s, m in logger.lines if s in ("ERROR", "INTERNAL_ERROR")]
                raise RuntimeError("execute_async_v3 returned False" + ((": " + "; ".join(errs[-3:])) if errs else ""))

        warm_s = float(job.get("warmup_ms", 200.0)) / 1000.0
        t0 = time.perf_counter()
        warm = 0
        while warm < 1 or time.perf_counter() - t0 < warm_s:
            run()
            stream.synchronize()
            warm += 1
        out["warmup_iterations"] = warm
        samples, wall_ms, window = time_serial(cuda, run, stream, int(job.get("iterations", 50)),
                                               float(job.get("min_timed_s", 0.0)))
        out["latency_samples_ms"] = samples
        out["throughput_ms_per_inference"] = wall_ms / max(1, len(samples))
        out["timed_window"] = window
        s = sorted(samples)
        out["latency_ms"] = {"median": _percentile(s, 50), "p90": _percentile(s, 90), "p99": _percentile(s, 99),
                             "min": s[0], "max": s[-1], "mean": sum(s) / len(s)}
        reps = int(job.get("profile_iterations", 10))
        if reps > 0:  # separate profiling run: the profiler perturbs timing
            out["layer_profile"] = profile_layers(trt, context, run, stream, reps)
        if job.get("inspector", True):
            layer_information(trt, engine, context, out)
        out["status"] = "ok"
    except Exception as exc:
        out["status"] = "runtime_failed"
        out["error"] = "%s: %s" % (type(exc).__name__, exc)
        out["traceback"] = traceback.format_exc(limit=6)
    finally:
        try:  # no context may go while its work runs
            cuda.synchronize()
        except Exception:  # noqa: S110 - release() tries again and reports it
            pass
        # TensorRT frees each with its last reference: the inspector holds the context too
        inspector = context = engine = runtime = None  # noqa: F841
        release(cuda, out)
    return out


def measure(job):
    # type: (Dict[str, Any]) -> Dict[str, Any]
    """Build the engine of one placement and time it. With ``plan_cache`` (the engine file the backend
    keeps, ``save_plans``), an engine of the same key built before is loaded from it rather than built
    again (``reuse_plan``: false builds it anew): ``cached`` says which, ``engine_digest`` names it."""
    import tensorrt as trt

    result = {"trt_version": str(trt.__version__)}  # type: Dict[str, Any]
    plan, info = obtain_plan(trt, job)
    info.pop("name", None)
    result.update(info)
    if plan is None:
        result["status"] = "build_failed"
        return result
    kept = job.get("save_plan")
    if kept and kept == job.get("plan_cache"):  # obtain_plan wrote it, with its build record beside it
        if info.get("cache_error"):
            result["plan_file_error"] = info["cache_error"]
        else:
            result["plan_file"] = kept
    elif kept:  # the engine, kept (e.g. for `trtexec --loadEngine` to time the same engine)
        try:
            tmp = "%s.%d.tmp" % (kept, os.getpid())
            with open(tmp, "wb") as fh:
                fh.write(plan)
            os.replace(tmp, kept)
            result["plan_file"] = kept
        except OSError as exc:  # a full disk must not fail the measurement
            result["plan_file_error"] = "%s: %s" % (type(exc).__name__, exc)
    # the runtime's messages (deserialize, execute, profile) are the run's, not the build's: a new list
    logger = make_logger(trt, bool(job.get("verbose_log")))
    result["runtime_log"] = logger.lines
    try:
        result.update(time_engine(trt, plan, job, logger))
    except Exception as exc:
        result.update(status="runtime_failed", error="%s: %s" % (type(exc).__name__, exc),
                      traceback=traceback.format_exc(limit=6))
    return result


def tensor_format(engine, tname):
    # type: (Any, str) -> Tuple[str, int, int]
    """``(TensorFormat name, vectorised dimension or -1, components per element)`` of an I/O tensor."""
    fmt = engine.get_tensor_format(tname)
    return (str(getattr(fmt, "name", fmt)), int(engine.get_tensor_vectorized_dim(tname)),
            int(engine.get_tensor_components_per_element(tname)))


def buffer_bytes(shape, itemsize, fmt, vec_dim, components):
    # type: (Tuple[int, ...], int, str, int, int) -> int
    """Bytes of a tensor of ``shape`` in TensorRT format ``fmt`` (NvInferRuntimeBase.h): a
    vectorised format rounds dimension ``vec_dim`` up to a multiple of ``components``;
    ``DLA_LINEAR`` rounds the W stride up to 64 bytes; ``DLA_HWC4`` stores C as 1 or 4 and
    rounds W up to 64 bytes of pixels (Orin)."""
    dims = [max(int(d), 1) for d in shape]
    if 0 <= vec_dim < len(dims) and components > 1:
        dims[vec_dim] = -(-dims[vec_dim] // components) * components
    elif fmt == "DLA_LINEAR" and dims:
        per = max(1, 64 // itemsize)
        dims[-1] = -(-dims[-1] // per) * per
    elif fmt == "DLA_HWC4" and len(dims) >= 3:
        c = 1 if dims[-3] == 1 else 4
        per = max(1, 64 // (c * itemsize))
        dims[-3] = c
        dims[-1] = -(-dims[-1] // per) * per
    count = 1
    for d in dims:
        count *= d
    return max(count * itemsize, 1)


def timing_nvtx(trt, context):
    # type: (Any, Any) -> str
    """Time with the NVTX markers trtexec times with: ``LAYER_NAMES_ONLY``. The engines are built with
    DETAILED profiling verbosity (the inspector's layer information needs it), and a context's NVTX
    verbosity defaults to the build's, which "will generally increase latency in enqueueV3()"
    (TensorRT release/10.3 include/NvInferRuntime.h:4303-4310); trtexec sets every context's to its
    ``--profilingVerbosity``, LAYER_NAMES_ONLY unless given (samples/common/sampleOptions.h:243,
    sampleOptions.cpp:1756-1757, sampleInference.cpp:389), and its timing command gives none. The
    inspector is not affected (same header). The verbosity the engine was timed with is returned."""
    context.nvtx_verbosity = trt.ProfilingVerbosity.LAYER_NAMES_ONLY
    level = context.nvtx_verbosity
    return str(getattr(level, "name", level))


def engines_nvtx(engines):
    # type: (List[Any]) -> str
    """The NVTX verbosity the contexts of ``engines`` (each an :class:`Engine`) were timed with: the one
    level when they all share it, else ``name=level`` per engine (a pipeline's or replicas' record)."""
    levels = [e.nvtx_verbosity for e in engines]
    if len(set(levels)) == 1:
        return levels[0]
    return ", ".join("%s=%s" % (e.name, level) for e, level in zip(engines, levels))


def layer_information(trt, engine, context, out):
    # type: (Any, Any, Any, Dict[str, Any]) -> None
    """The engine's layer information (the inspector's JSON, DETAILED as built) into ``out["inspector"]``,
    or why not into ``out["inspector_error"]``: the second source of the realised placement, beside the
    build log. Informative only: an inspector that fails fails nothing."""
    if not hasattr(engine, "create_engine_inspector"):
        return
    inspector = None
    try:
        inspector = engine.create_engine_inspector()
        inspector.execution_context = context
        out["inspector"] = inspector.get_engine_information(trt.LayerInformationFormat.JSON)
    except Exception as exc:  # the inspector is informative only
        out["inspector_error"] = "%s: %s" % (type(exc).__name__, exc)
    finally:
        inspector = None  # noqa: F841 - it holds the context: gone before the context is


def inspect_built(trt, specs, plans, result):
    # type: (Any, List[Dict[str, Any]], List[bytes], Dict[str, Any]) -> None
    """The ``build`` op's second source of the realised placement: each DLA engine deserialised on
    its core and its layer information read into its record (``inspector``, or why not in
    ``inspector_error``), as a ``measure`` job reads it; the deserialisation's messages go to
    ``result["runtime_log"]``. Informative only: a failure here fails no build (the parent then
    reads the build log alone, or records the placement unknown)."""
    todo = [(s, p, info) for s, p, info in zip(specs, plans, result["engines"])
            if int(s.get("dla_core", -1)) >= 0 and s.get("inspector", True)]
    if not todo:
        return
    logger = make_logger(trt, False)
    result["runtime_log"] = logger.lines
    cuda = None
    try:
        cuda = Resources(driver())
        for spec, plan, info in todo:
            e = None
            try:
                e = Engine(trt, cuda, str(spec.get("name")), plan, int(spec["dla_core"]), logger,
                           spec.get("input_shapes"))
                layer_information(trt, e.engine, e.context, info)
            except Exception as exc:  # this engine's layer information is not read: the log alone decides
                info["inspector_error"] = "%s: %s" % (type(exc).__name__, exc)
            finally:  # one engine loaded at a time: a plan's engines together may hold more than a core's loadables
                if e is not None:
                    e.close()
    except Exception as exc:  # no CUDA for the inspection: every engine's log alone decides
        for _, _, info in todo:
            info.setdefault("inspector_error", "%s: %s" % (type(exc).__name__, exc))
    finally:
        release(cuda, result)


class Engine(object):
    """A deserialized engine with its own execution context and CUDA stream."""

    def __init__(self, trt, cuda, name, plan, core, logger, shapes=None):
        # type: (Any, Any, str, bytes, int, Any, Optional[Dict[str, Any]]) -> None
        import numpy as np

        self.name = name
        self.logger = logger
        self.context = self.engine = None  # type: Any
        cuda.own(self)  # a job's Resources closes it, also when this constructor fails
        self.runtime = trt.Runtime(logger)  # kept: it must outlive the engine
        init_plugins(trt, logger)  # an engine with a plugin layer needs its creator registered
        if core >= 0:
            self.runtime.DLA_core = core  # before deserializing (reference §0.2)
        self.engine = self.runtime.deserialize_cuda_engine(plan)
        if self.engine is None:
            raise RuntimeError("engine %s: deserialize_cuda_engine returned None%s" % (name, self._errors()))
        self.context = self.engine.create_execution_context()
        self.nvtx_verbosity = timing_nvtx(trt, self.context)  # every context it makes: trtexec's markers
        self.stream = cuda.Stream()
        self.inputs = []  # type: List[str]
        self.outputs = []  # type: List[str]
        self.tensors = {}  # type: Dict[str, Tuple[Tuple[int, ...], Any]]
        self.formats = {}  # type: Dict[str, Tuple[str, int, int]]
        for i in range(self.engine.num_io_tensors):
            tname = self.engine.get_tensor_name(i)
            is_input = self.engine.get_tensor_mode(tname) == trt.TensorIOMode.INPUT
            shape = tuple(int(d) for d in self.engine.get_tensor_shape(tname))
            if is_input and any(d < 0 for d in shape):
                if not shapes or tname not in shapes:
                    raise RuntimeError("engine %s: input %r has dynamic dimensions and no shape is given"
                                       % (name, tname))
                shape = tuple(int(d) for d in shapes[tname])
                try:
                    set_input_shape(self.engine, self.context, tname, shape)
                except ValueError as exc:
                    raise RuntimeError("engine %s: %s" % (name, exc)) from None
            (self.inputs if is_input else self.outputs).append(tname)
            self.tensors[tname] = (shape, numpy_dtype(np, self.engine.get_tensor_dtype(tname)))
            self.formats[tname] = tensor_format(self.engine, tname)
        for tname in self.outputs:
            self.tensors[tname] = (output_shape(self.context, tname), self.tensors[tname][1])

    def close(self):
        # type: () -> None
        """Drop the execution context, then the engine, then the runtime (TensorRT frees each with
        its last reference, and a context must go before its engine)."""
        self.context = None
        self.engine = None
        self.runtime = None

    def _errors(self):
        # type: () -> str
        errs = [m for s, m in self.logger.lines if s in ("ERROR", "INTERNAL_ERROR")]
        return (": " + "; ".join(errs[-3:])) if errs else ""

    def nbytes(self, tname):
        # type: (str) -> int
        """Bytes of a buffer of the tensor in the engine's own format (a vectorised format pads
        its vector dimension to a whole number of vectors)."""
        shape, dtype = self.tensors[tname]
        return buffer_bytes(shape, dtype.itemsize, *self.formats[tname])

    def run(self, addresses):
        # type: (List[Tuple[str, Any]]) -> None
        for tname, mem in addresses:
            self.context.set_tensor_address(tname, int(mem))
        if not self.context.execute_async_v3(self.stream.handle):
            raise RuntimeError("engine %s: execute_async_v3 returned False%s" % (self.name, self._errors()))
