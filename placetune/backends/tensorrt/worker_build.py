"""The worker's engine builds: TensorRT logger, ONNX parsing, builder config (precision, DLA, pools), build.

:func:`build` parses one ONNX file and builds it with the requested precision, DLA core,
per-layer device placement and memory pools (reusing a timing cache); :func:`obtain_plan`
takes a serialized engine from the engine cache or builds and stores it. TensorRT is passed
in as ``trt``. A sibling module of ``worker.py``: Python 3.8, no placetune imports.
"""

import hashlib
import time
import traceback

try:  # Python 3.8 needs typing's generics
    from typing import Any, Dict, Iterator, List, Optional, Set, Tuple
except ImportError:  # pragma: no cover
    pass

from worker_cache import load_timing_cache, read_cached_plan, save_timing_cache, write_cached_plan
from worker_devices import constant_type, follow_helpers, is_helper
from worker_names import is_parser_line, is_placement_line, onnx_node, parser_owners

_SEVERITIES = ("INTERNAL_ERROR", "ERROR", "WARNING", "INFO", "VERBOSE")
#: what an engine cache entry keeps of its build (obtain_plan)
_BUILD_RECORD = ("log", "network_layers", "build_seconds", "engine_bytes", "parser_errors", "adjust_for_dla",
                 "io_formats", "int8_ranges", "int8_io_ranges", "profiling_verbosity", "precision_constraints")


def _severity_name(severity):
    # type: (Any) -> str
    name = getattr(severity, "name", None)
    if name:
        return str(name)
    try:
        return _SEVERITIES[int(severity)]
    except (ValueError, IndexError, TypeError):
        return str(severity)


_LOGGER = {}  # type: Dict[str, Any]


def make_logger(trt, verbose):
    # type: (Any, bool) -> Any
    """The process's one ``trt.ILogger``, its messages now collected in a new ``lines`` list.

    VERBOSE messages are kept when asked, and the ``Layers Running on DLA/GPU`` report always:
    some TensorRT versions log the realised placement at VERBOSE, and without it GPU fallback
    would go unseen. The parser's ``Parsing node``/``Registering layer`` messages (VERBOSE) go to
    ``parsed`` whatever the level: they say which node each layer was made for. TensorRT keeps a single logger pointer while any builder, runtime or
    refitter lives and ignores a different one, so a logger per job would
    lose the log of every build made while an earlier runtime is alive."""
    logger = _LOGGER.get("logger")
    if logger is None:

        class CapturingLogger(trt.ILogger):
            def __init__(self):
                trt.ILogger.__init__(self)
                self.lines = []  # type: List[List[str]]
                self.parsed = []  # type: List[str]
                self.verbose = False

            def log(self, severity, msg):
                name = _severity_name(severity)
                if name == "VERBOSE" and is_parser_line(str(msg)):
                    self.parsed.append(str(msg))
                if name == "VERBOSE" and not self.verbose and not is_placement_line(str(msg)):
                    return
                self.lines.append([name, str(msg)])

        logger = _LOGGER["logger"] = CapturingLogger()
    logger.lines = []
    logger.parsed = []
    logger.verbose = bool(verbose)
    return logger


_PLUGINS = {}  # type: Dict[str, bool]


def init_plugins(trt, logger):
    # type: (Any, Any) -> bool
    """Register TensorRT's built-in plugins (libnvinfer_plugin: EfficientNMS_TRT, BatchedNMS_TRT, ...)
    once per process, before the first parse and the first deserialize.

    Without it an ONNX op with no importer (a detector's ``EfficientNMS_TRT``) fails to parse:
    onnx-tensorrt's ModelImporter::parseGraph logs "No importer registered for op: <op>. Attempting to
    import as plugin." and its FallbackPluginImporter finds no creator in the plugin registry
    (``creator && "Plugin not found, are the plugin name, version, and namespace correct?"``), and an
    engine holding a plugin fails to deserialize ("getPluginCreator could not find plugin ...
    Cannot deserialize plugin since corresponding IPluginCreator not found in Plugin Registry").
    trtexec registers them itself (initLibNvInferPlugins); the Python API needs
    ``tensorrt.init_libnvinfer_plugins(logger, namespace)`` ("This function should be called once
    before accessing the Plugin Registry"; namespace "" is the one plugin nodes look in by default).
    Returns what the call returned, or the first call's result on later calls."""
    if "done" not in _PLUGINS:
        _PLUGINS["done"] = bool(trt.init_libnvinfer_plugins(logger, ""))
    return _PLUGINS["done"]


def _version_tuple(text):
    # type: (str) -> Tuple[int, int]
    parts = (text.split(".") + ["0", "0"])[:2]
    try:
        return int(parts[0]), int(parts[1])
    except ValueError:
        return 0, 0


def _onnx_name(layer):
    # type: (Any) -> Optional[str]
    return onnx_node(getattr(layer, "metadata", None))  # ILayer.metadata exists from TensorRT 8.6


def _set_dynamic_ranges(network, trt, given=None):
    # type: (Any, Any, Optional[Dict[str, float]]) -> None
    """Per-tensor dynamic ranges for INT8 timing without calibration, as trtexec does
    (samples/common/sampleEngines.cpp setTensorDynamicRange, release/8.5:384-428, the same in 10.3):
    layer by layer, each unset input +-2 (+-4 into a concatenation), each unset output +-4 (+-2 out
    of pooling). A network input therefore gets the range of the first layer that reads it: +-4 when
    that is a concatenation (trtexec sets no network input apart). ``given`` (tensor name -> range,
    the job's ``int8_ranges``) wins: a pipeline segment's cut inputs get the range the full network
    gives them as intermediates, not the +-2 of a network input."""

    def set_range(tensor, r):
        if tensor is None:
            return
        if given and tensor.name in given:
            r = float(given[tensor.name])
        if hasattr(tensor, "dynamic_range") and tensor.dynamic_range:
            return
        if hasattr(tensor, "set_dynamic_range"):
            tensor.set_dynamic_range(-r, r)
        else:
            tensor.dynamic_range = (-r, r)

    for layer, tensor, r, _made in _walk(network, trt):
        set_range(tensor, r)
    for i in range(network.num_inputs):  # one no layer reads (trtexec leaves it unset): the +-2 of an input
        set_range(network.get_input(i), 2.0)


def _walk(network, trt):
    # type: (Any, Any) -> Iterator[Tuple[Any, Any, float, bool]]
    """setTensorDynamicRange's walk (sampleEngines.cpp release/10.3:392-436): TensorRT's layers in
    order, each layer's inputs (+-4 into a concatenation, else +-2), then its outputs (+-2 out of a
    pooling, else +-4); yields (layer, tensor, range, made by this layer) for every tensor slot."""
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        concat = layer.type == trt.LayerType.CONCATENATION
        for j in range(layer.num_inputs):
            t = layer.get_input(j)
            if t is not None:
                yield layer, t, 4.0 if concat else 2.0, False
        pooling = layer.type == trt.LayerType.POOLING
        for j in range(layer.num_outputs):
            t = layer.get_output(j)
            if t is not None:
                yield layer, t, 2.0 if pooling else 4.0, True


def made_ranges(network, trt):
    # type: (Any, Any) -> Dict[str, float]
    """The placeholder range trtexec's walk gives each tensor a layer of ``network`` makes: what
    the layer TensorRT's ONNX parser made for the tensor's node is (a GlobalAveragePool is a reduce
    layer in onnx-tensorrt, so +-4, not a pooling's +-2; a 1-D MaxPool ends in a squeeze, +-4)."""
    made = {}  # type: Dict[str, float]
    seen = set()  # type: Set[str]
    for _layer, t, r, is_output in _walk(network, trt):
        if t.name in seen:
            continue
        seen.add(t.name)
        if is_output:
            made[t.name] = r
    return made


def resolve_given_ranges(trt, specs, common):
    # type: (Any, List[Dict[str, Any]], Dict[str, Any]) -> Dict[str, Any]
    """The ranges a job's engines were given (each spec's ``int8_ranges``: the parent's reading of the
    ONNX graph), with every tensor that a layer of one of the job's networks makes set to what
    trtexec's walk gives it there: the layer type TensorRT's parser made, not the ONNX op, decides
    (worker-side because only the parser knows it). The same tensor is made by the same layers in
    every network of the job (a pipeline's segments and its unsplit reference), so its producer and
    its readers keep one range. Returns ``{"moved": {tensor: [given, trtexec's]}}`` and rewrites the
    specs' ``int8_ranges`` in place. A network that does not parse gives no ranges and is left to its
    own build, which fails with the parser's errors and is recorded as that engine's failure (the
    unsplit reference's, not the first segment's); every tensor a segment makes is made by a layer of
    that segment, so the networks that parse still get their ranges right."""
    wanted = [s for s in specs if s.get("int8_ranges")]
    if not wanted:
        return {"moved": {}}
    made = {}  # type: Dict[str, float]
    for spec in specs:
        if not spec.get("onnx"):
            continue
        full = dict(common)
        full.update(spec)
        logger = make_logger(trt, False)
        network, _parser, parsed, _errors = _parse(trt, full, logger)
        if not parsed:
            continue
        for name, r in made_ranges(network, trt).items():
            made.setdefault(name, r)
    moved = {}  # type: Dict[str, List[float]]
    for spec in wanted:
        given = dict(spec["int8_ranges"])
        for name, r in given.items():
            if name in made and float(made[name]) != float(r):
                moved[name] = [float(r), float(made[name])]
                given[name] = made[name]
        spec["int8_ranges"] = given
    return {"moved": moved}


def calibration_scales(path):
    # type: (str) -> Dict[str, float]
    """Per-tensor scales of a TensorRT calibration cache file, read as trtexec reads them
    (samples/common/sampleEngines.cpp readScalesFromCalibrationCache, release/10.3:50-73): each
    ``<tensor>: <hex>`` line, split at its last ``:``, is the scale's float32 bits; other lines
    (the ``TRT-<version>-EntropyCalibration2`` header) are skipped."""
    import numpy as np

    scales = {}  # type: Dict[str, float]
    with open(path, "rb") as fh:
        text = fh.read().decode("utf-8", "replace")
    for line in text.splitlines():
        pos = line.rfind(":")
        if pos < 0:
            continue
        try:
            bits = int(line[pos + 2:pos + 10], 16)
        except ValueError:
            continue
        scales[line[:pos]] = float(np.array([bits & 0xFFFFFFFF], dtype=np.uint32).view(np.float32)[0])
    return scales


def set_int8_io_ranges(network, path, io):
    # type: (Any, str, Dict[str, List[str]]) -> Dict[str, float]
    """The dynamic range of every INT8 network input and output (``io``: what :func:`set_io_formats`
    set) from the calibration cache, as trtexec does when a calibrator is given and I/O is INT8
    ("Set dynamic ranges of int8 inputs / outputs to match scales loaded from calibration cache",
    sampleEngines.cpp release/10.3:1001-1009, also 8.5-10.16): the network's validation wants them
    even with a calibrator. Returns tensor -> range. Raises ValueError naming a tensor the cache
    has no scale for (trtexec: "Int8IO was specified but impossible to read tensor scales from
    provided calibration cache file")."""
    wanted = [name for name, (dtype, _fmt) in io.items() if dtype == "INT8"]
    if not wanted:
        return {}
    scales = calibration_scales(path)
    tensors = [network.get_input(i) for i in range(network.num_inputs)]
    tensors += [network.get_output(i) for i in range(network.num_outputs)]
    done = {}  # type: Dict[str, float]
    for t in tensors:
        if t.name not in wanted:
            continue
        if t.name not in scales:
            raise ValueError("INT8 I/O tensor %r has no scale in the calibration cache %s: a pipeline's INT8 cut "
                             "tensors need one (calibrate the whole network)" % (t.name, path))
        r = 127.0 * scales[t.name]
        t.set_dynamic_range(-r, r)
        done[t.name] = r
    return done


def _has_qdq_layers(network, trt):
    # type: (Any, Any) -> bool
    """Whether the network has Quantize/Dequantize layers (trtexec's hasQDQLayers)."""
    qdq = (trt.LayerType.QUANTIZE, trt.LayerType.DEQUANTIZE)
    return any(network.get_layer(i).type in qdq for i in range(network.num_layers))


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


def place_layers(network, trt, wanted, can_run=None, owners=None):
    # type: (Any, Any, Set[str], Any, Optional[Dict[str, str]]) -> List[Tuple[Optional[str], bool]]
    """``(onnx node, on DLA)`` per network layer. A layer of a node in ``wanted`` goes to the DLA;
    a parser helper goes with the node it serves (worker_devices.follow_helpers),
    to the GPU when that node's layer cannot run on the DLA (``can_run(layer)`` False: it
    falls back, and a helper alone on the DLA would be a loadable of its own). A layer's node is
    its metadata's (8.6 on), else the parser's log (``owners``, worker_names.parser_owners: on
    8.5 a node's second layer ``<node>_<k>`` has no metadata and is no helper)."""
    layers = [network.get_layer(i) for i in range(network.num_layers)]
    names = [_onnx_name(layer) or (owners or {}).get(layer.name) for layer in layers]
    helper = [is_helper(layer, trt, names[i]) for i, layer in enumerate(layers)]
    asked = [not helper[i] and (layer.name in wanted or (names[i] is not None and names[i] in wanted))
             for i, layer in enumerate(layers)]
    runs = [None if helper[i] else bool(asked[i] and (can_run is None or can_run(layer)))
            for i, layer in enumerate(layers)]
    followed = follow_helpers(layers, runs, constant_type(trt), False)
    return [(names[i], bool(followed[i]) if helper[i] else asked[i]) for i in range(len(layers))]


def set_io_formats(network, trt, wanted, strongly_typed):
    # type: (Any, Any, Dict[str, Any], bool) -> Dict[str, List[str]]
    """Give the network I/O tensors named in ``wanted`` (name -> ``[DataType, TensorFormat]``
    member names) that type and that one allowed format (a pipeline's cut
    tensors in the DLA's native format on both sides, so no GPU reformat runs at the cut).
    Strongly typed networks (TensorRT 11) take the type from the model: only the format is set.
    Returns what was set, by tensor."""
    done = {}  # type: Dict[str, List[str]]
    if not wanted:
        return done
    tensors = [network.get_input(i) for i in range(network.num_inputs)]
    tensors += [network.get_output(i) for i in range(network.num_outputs)]
    for t in tensors:
        spec = wanted.get(t.name)
        if not spec:
            continue
        dtype, fmt = str(spec[0]), str(spec[1])
        if not strongly_typed:
            t.dtype = getattr(trt.DataType, dtype)
        t.allowed_formats = 1 << int(getattr(trt.TensorFormat, fmt))
        done[t.name] = [dtype if not strongly_typed else getattr(t.dtype, "name", str(t.dtype)), fmt]
    return done


def _parse(trt, job, logger, builder=None, out=None):
    # type: (Any, Dict[str, Any], Any, Any, Optional[Dict[str, Any]]) -> Tuple[Any, Any, bool, List[str]]
    """The network of ``job["onnx"]`` as the build parses it: (network, parser, parsed, parser
    errors); the parser owns weights it converted, so the caller keeps it while the network is used."""
    major, _minor = _version_tuple(trt.__version__)
    if builder is None:
        builder = trt.Builder(logger)
    flags = 0
    if major < 10:
        flags |= 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)
    if job.get("strongly_typed") and hasattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED"):
        flags |= 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    network = builder.create_network(flags)
    init_plugins(trt, logger)  # before parsing: plugin ops are imported from the plugin registry
    parser = trt.OnnxParser(network, logger)
    adjust = getattr(getattr(trt, "OnnxParserFlag", None), "ADJUST_FOR_DLA", None)
    if adjust is not None and int(job.get("dla_core", -1)) >= 0 and job.get("dla_layers"):
        # TensorRT 10.16 on (the flag is new in release/10.16 python/src/parsers/pyOnnx.cpp:237): let
        # the parser rewrite layers to suit the DLA, as the trtexec backend passes --adjustForDLA
        parser.set_flag(adjust)
        if out is not None:
            out["adjust_for_dla"] = True
    path = job["onnx"]
    if hasattr(parser, "parse_from_file"):
        parsed = parser.parse_from_file(path)
    else:
        with open(path, "rb") as fh:
            parsed = parser.parse(fh.read(), path)
    errors = [] if parsed else [str(parser.get_error(i)) for i in range(parser.num_errors)]
    return network, parser, bool(parsed), errors


def build(trt, job, logger):
    # type: (Any, Dict[str, Any], Any) -> Tuple[Any, Dict[str, Any]]
    """Parse, configure and build; returns (serialized plan or None, result fields)."""
    out = {"network_layers": []}  # type: Dict[str, Any]
    builder = trt.Builder(logger)
    network, parser, parsed, errors = _parse(trt, job, logger, builder, out)  # parser: alive until the build
    if not parsed:
        out["parser_errors"] = errors
        return None, out
    out["io_formats"] = set_io_formats(network, trt, job.get("io_formats") or {}, bool(job.get("strongly_typed")))
    config = builder.create_builder_config()
    precision = job.get("precision", "fp16")
    if not job.get("strongly_typed"):
        if precision in ("fp16", "int8"):
            config.set_flag(trt.BuilderFlag.FP16)
        if precision == "int8":
            config.set_flag(trt.BuilderFlag.INT8)
            if job.get("calibration_cache"):
                config.int8_calibrator = _calibrator(trt, job["calibration_cache"])
                out["int8_ranges"] = "calibration-cache"
                if not _has_qdq_layers(network, trt):
                    out["int8_io_ranges"] = set_int8_io_ranges(network, job["calibration_cache"], out["io_formats"])
            elif _has_qdq_layers(network, trt):
                # explicit quantisation: the Q/DQ layers' scales are the ranges; trtexec sets no
                # placeholder range on such a network (sampleEngines.cpp hasQDQLayers, release/8.5-10.16)
                out["int8_ranges"] = "qdq"
            else:
                _set_dynamic_ranges(network, trt, job.get("int8_ranges"))
                out["int8_ranges"] = "placeholder"
    # DETAILED: the engine inspector's layer information (the placement's second source) needs it; a
    # context's NVTX markers default to it, so every context placetune makes lowers them (worker_time.timing_nvtx)
    config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    out["profiling_verbosity"] = str(getattr(config.profiling_verbosity, "name", config.profiling_verbosity))
    config.default_device_type = trt.DeviceType.GPU
    core = int(job.get("dla_core", -1))
    if core >= 0:
        config.DLA_core = core
        if not job.get("strongly_typed"):
            # as trtexec --useDLACore (sampleEngines.cpp release/8.5:987, 10.3:1129, 10.16:1247; not in 11.1, whose
            # bindings lack the flag): the precision and output type the ONNX parser sets on a layer (Q/DQ layers,
            # 8.5's Cast) are kept where an implementation has them, not left to TensorRT's fastest choice
            config.set_flag(trt.BuilderFlag.PREFER_PRECISION_CONSTRAINTS)
            out["precision_constraints"] = "prefer"
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
    devices = place_layers(network, trt, wanted if core >= 0 else set(), config.can_run_on_DLA,
                           parser_owners(logger.parsed))
    if core >= 0 and wanted:
        # trtexec --useDLACore: DLA is the default device (sampleEngines.cpp setLayerDeviceTypes),
        # so layers TensorRT adds itself go with the DLA, and every layer is set explicitly
        config.default_device_type = trt.DeviceType.DLA
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        onnx_name, on_dla = devices[i]
        config.set_device_type(layer, trt.DeviceType.DLA if on_dla else trt.DeviceType.GPU)
        can = bool(config.can_run_on_DLA(layer)) if on_dla else None
        out["network_layers"].append([layer.name, onnx_name, getattr(layer.type, "name", str(layer.type)), on_dla, can])
    cache_note = load_timing_cache(config, job.get("timing_cache"))
    if cache_note:
        out["timing_cache_set_aside"] = cache_note
    t0 = time.perf_counter()
    plan = builder.build_serialized_network(network, config)
    out["build_seconds"] = time.perf_counter() - t0
    if plan is not None:
        save_timing_cache(config, job.get("timing_cache"))
    return plan, out


def obtain_plan(trt, spec):
    # type: (Any, Dict[str, Any]) -> Tuple[Optional[bytes], Dict[str, Any]]
    """The serialized engine of one spec (a ``measure`` job's build fields plus ``name`` and
    ``plan_cache``): read from the engine cache, else built and written to it (``reuse_plan``
    false: always built, and written over the entry). ``engine_digest`` names the engine either
    way (the first 16 hex digits of its SHA-256): two timings of one digest timed the same engine."""
    version = str(trt.__version__)
    info = {"name": spec.get("name"), "cached": False}  # type: Dict[str, Any]
    data, meta = read_cached_plan(spec.get("plan_cache") if spec.get("reuse_plan", True) else None, version)
    if data is not None:
        for k in _BUILD_RECORD:
            info[k] = meta.get(k)
        info.update(cached=True, engine_digest=hashlib.sha256(data).hexdigest()[:16])
        return data, info
    logger = make_logger(trt, bool(spec.get("verbose_log")))
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
    info.update(engine_bytes=len(data), engine_digest=hashlib.sha256(data).hexdigest()[:16])
    if spec.get("plan_cache"):
        record = dict((k, info.get(k)) for k in _BUILD_RECORD)
        record["trt_version"] = version
        try:
            write_cached_plan(spec["plan_cache"], data, record)
        except OSError as exc:  # a full disk must not fail the measurement
            info["cache_error"] = "%s: %s" % (type(exc).__name__, exc)
    return data, info


def _cached(trt, spec, common):
    # type: (Any, Dict[str, Any], Dict[str, Any]) -> bool
    """Whether obtain_plan will read ``spec``'s engine from the engine cache rather than build it."""
    reuse = spec.get("reuse_plan", common.get("reuse_plan", True))
    path = spec.get("plan_cache", common.get("plan_cache"))
    return bool(reuse) and read_cached_plan(path, str(trt.__version__))[0] is not None


def obtain_all(trt, specs, common, result):
    # type: (Any, List[Dict[str, Any]], Dict[str, Any], Dict[str, Any]) -> Optional[List[bytes]]
    """Plans of every spec, their records in ``result["engines"]``; None (and a
    ``build_failed`` result) at the first engine that does not build."""
    plans = []
    moved = None  # type: Optional[Dict[str, Any]]
    for spec in specs:
        if moved is None and spec.get("int8_ranges") and not _cached(trt, spec, common):
            # before the first build: every network of the job gives a made tensor its range
            moved = resolve_given_ranges(trt, specs, common)
            if moved["moved"]:
                result["int8_ranges_moved"] = moved["moved"]
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


def build_engines(job, inspect=None):
    # type: (Dict[str, Any], Any) -> Dict[str, Any]
    """The ``build`` op (``placetune build``): build every engine of a plan and write each to its
    spec's ``plan_cache`` path (the plan folder's engine file, its build record beside it as
    ``<file>.json``); no timing. The records keep the build logs the realised placement is read from,
    and, through ``inspect(trt, specs, plans, result)`` (``worker_time.inspect_built``), each DLA
    engine's layer information: the second source a measurement cross-checks the log with."""
    import tensorrt as trt

    result = {"trt_version": str(trt.__version__), "engines": []}  # type: Dict[str, Any]
    common = job.get("common") or {}
    specs = list(job.get("engines") or [])
    plans = obtain_all(trt, specs, common, result)
    if plans is not None:
        result["status"] = "ok"
        if inspect is not None:
            full = []
            for spec in specs:
                merged = dict(common)
                merged.update(spec)
                full.append(merged)
            inspect(trt, full, plans, result)
    return result
