"""Test double of the ``tensorrt`` Python package: only the API subset placetune uses.

Select the emulated version with ``PLACETUNE_FAKE_TRT_VERSION`` (default ``8.5.2``):

* ``8.5.x``: ``build_engine``, ``execute_async_v2``, binding-index APIs and
  ``max_workspace_size`` still exist; ``execute_async_v3`` is new; the ONNX parser needs the
  EXPLICIT_BATCH network flag; parser layers have **no** ``metadata`` (added in 8.6) and
  helper layers are called ``(Unnamed Layer* N) [Type]``.
* ``10.x``: no ``build_engine``, no ``execute_async_v2``, no binding-index APIs, no
  ``max_workspace_size``; ``layer.metadata`` = ``"[ONNX Layer: <node>]"``; helpers ``<node>_<k>``.
* ``11.x``: strongly typed: no ``BuilderFlag.FP16``/``INT8``, no ``int8_calibrator``, no
  ``set_dynamic_range``/``dynamic_range``, no EXPLICIT_BATCH flag; DLA layers need FP16/INT8
  tensor types in the network itself.

Calling an API the selected version lacks raises AttributeError, as the real bindings do.

Behaviour (documented TensorRT behaviour, simplified):

* ``can_run_on_DLA`` comes from this module's own small table (:data:`DLA_TABLE`), never
  from placetune's rules.
* With ``GPU_FALLBACK`` unsupported DLA layers silently run on the GPU (with a warning);
  without it ``build_serialized_network`` logs errors and returns ``None``.
* DLA subgraphs are the connected groups of DLA layers (joined by the tensors between them, not
  by network order), numbered by their first layer; beyond 16 per core the rest switch to the
  GPU with TensorRT's warning.
* 10.x logs the placement as published for 10.3 with ``--verbose``: ``Number of DLA node
  candidates offloaded : N out of N``, one ``{ForeignNode[...]} successfully offloaded to DLA.``
  per loadable and the ``[GpuLayer]`` lines, no ``[DlaLayer]`` line; the other versions:
* The log has the real ``Layers Running on DLA/GPU`` sections, ``[DlaLayer]
  {ForeignNode[A...B]}`` and ``[GpuLayer] TYPE: name`` lines (fused names like ``A + B`` and
  ``PWN(PWN(a), b)``), at INFO up to 8.6.9 and at VERBOSE from 8.6.10 and in 10.x/11.x
  (:func:`placement_severity`).
* ``builder.num_DLA_cores``: 2, none in 11.0-11.4.0 (:func:`default_dla_cores`; 11.4.0 has DLA on Windows on ARM only).
* The ONNX parser adds the helper layers of its version: unnamed ``(Unnamed Layer* N) [Type]``
  in 8.x, ``ONNXTRT_*`` without metadata in 10.x (the names of ``tests/trt_api``), e.g. the
  unsqueeze/squeeze around a 1-D Conv, ConvTranspose or pooling; 8.6 appends a node's
  doc-string lines to its metadata after ``" | "``.

docs/doubles.md lists each behaviour with the artefact or source line behind it.
* Timings are deterministic (from layer counts), on the fake GPU clocks of ``_fakegpu``:
  each engine layer runs on its device (the GPU, or the DLA core the runtime chose; a
  0.01 ms enqueue on the GPU first), one piece of work at a time per device; streams overlap
  only on different devices.
* Engines compute real outputs, asynchronously (``_fakegpu.launch``): the plan carries the ONNX
  model the parser read, and ``execute_async_v3`` enqueues the engine on the stream; it reads
  the bytes at the input addresses while it runs (a write to them meanwhile, by work the stream
  did not wait for, tears them: the outputs are 0xFF) and writes its outputs at its end, as
  ``onnx.reference`` evaluates the model on them (in float32; when an output is first read, and
  once per process for the same engine and inputs), then rounds every output to the engine's
  precision (FP16; INT8 fake-quantised per tensor: with the dynamic range set on the tensor,
  else with its own maximum, as calibration would). Rounding happens at engine outputs only, so
  a pipeline of engines differs from one engine by the rounding at its cuts.
* ``runtime.DLA_core`` not set before ``deserialize_cuda_engine``: the engine runs on
  core 0 (the documented pitfall); the inspector JSON shows the core in ``FakeRuntimeDLACore``.

Fault injection (environment variables, value = a layer name that is set to DLA, ``+DLA`` for any build
with a DLA layer, or ``*`` for every build):
``PLACETUNE_FAKE_TRT_SEGFAULT_ON`` (the process kills itself with SIGSEGV while building),
``PLACETUNE_FAKE_TRT_KILL_ON`` (SIGKILL while building, as the kernel's out-of-memory killer; it first adds one
to ``oom_kill`` in the file ``PLACETUNE_FAKE_TRT_VMSTAT`` names, the stand-in of ``/proc/vmstat``),
``PLACETUNE_FAKE_TRT_BUILD_OOM_ON`` (the build runs out of memory: TensorRT 10.3.0's errors, None),
``PLACETUNE_FAKE_TRT_HANG_ON`` (building sleeps for an hour),
``PLACETUNE_FAKE_TRT_BUILD_NONE_ON`` (``build_serialized_network`` logs errors, returns None),
``PLACETUNE_FAKE_TRT_EXEC_FAIL_ON`` (``execute_async_v3`` returns False),
``PLACETUNE_FAKE_TRT_DLA_UNSUPPORTED_ON`` (``can_run_on_DLA`` is False: the layer falls back),
``PLACETUNE_FAKE_TRT_PLAN_MODEL_WARN_ON`` (``deserialize_cuda_engine`` logs TensorRT's WARNING "Using an
engine plan file across different models of devices is not recommended and is likely to affect
performance or even cause errors.", as public TensorRT 10.3 runs on Orin show it when an engine
is deserialised, after "Loaded engine size", also for an engine built on the same board; a
runtime message, not the build's);
``PLACETUNE_FAKE_TRT_NO_PLACEMENT_LOG`` (set: the build log has no ``Layers Running on DLA/GPU``
sections, as a log that keeps only what TensorRT prints at INFO when it prints them at VERBOSE);
``PLACETUNE_FAKE_TRT_INSPECTOR_FAIL`` (set: ``get_engine_information`` raises, so no layer
information is read);
``PLACETUNE_FAKE_TRT_UNREADABLE_ON`` (the engine asked to put the named layer on a DLA has both: no
placement sections in its build log and no layer information, so its placement cannot be read);
``PLACETUNE_FAKE_TRT_NO_COMPUTE`` (set: outputs are zero bytes, no onnx evaluation: for an
interpreter whose onnx reference evaluator is too slow, e.g. onnx 1.14 on Python 3.8).
``PLACETUNE_FAKE_TRT_DLA_CORES`` sets ``builder.num_DLA_cores`` (default: :func:`default_dla_cores`);
``PLACETUNE_FAKE_TRT_STDOUT_NOISE`` makes the import write to stdout (as native libraries may);
``PLACETUNE_FAKE_TRT_ENQUEUE_MS`` / ``_ENQUEUE_LOG``: host time and a log of each ``execute_async_v3``
(with the NVTX verbosity its context ran with).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import threading
import time
import weakref

import _dla_rules
import _fakegpu as _gpu
import _layerinfo

from . import _api, _formats

__version__ = os.environ.get("PLACETUNE_FAKE_TRT_VERSION", "8.5.2")
if os.environ.get("PLACETUNE_FAKE_TRT_STDOUT_NOISE"):  # native libraries print to fd 1 at will
    print("fake TensorRT: noise on sys.stdout")
    os.write(1, b"fake TensorRT: noise on fd 1 without a newline")
_V = tuple(int(x) for x in __version__.split(".")[:2])
_MAJOR = _V[0]
_V3 = tuple(int(x) for x in (__version__.split(".") + ["0", "0"])[:3])


def default_dla_cores(version: tuple = _V3) -> int:
    """DLA cores an AGX Orin reports: none in 11.0-11.3 (the 11.1.0 docs: "DLA is not supported in
    TensorRT 11.0 or 11.1"; 11.3.0: "... 11.0, 11.1, or 11.2"; 11.4.0 only Windows-on-ARM), two
    otherwise (11.4.1 restores DLA on AGX Orin)."""
    return 0 if (11, 0, 0) <= tuple(version) < (11, 4, 1) else 2


def placement_severity(version: tuple = _V3) -> str:
    """The severity the ``Layers Running on DLA/GPU`` report is logged at: INFO up to 8.6.9
    (jetson_dla_tutorial's 8.4 log; the 8.5 logs of tests/data/trt_corpus), VERBOSE from 8.6.10
    and in 10.x/11.x (an assumption from public 10.x reports: docs/doubles.md)."""
    return "VERBOSE" if tuple(version) >= (8, 6, 10) else "INFO"
_PLAN_MAGIC = b"FAKETRT1"
#: engine outputs already computed, by (engine, input digests): a process evaluates each once
_MEMO: dict = {}
#: onnx.reference evaluators of the engines' models (deserialising an engine again reuses its own)
_EVALUATORS: dict = {}


_TABLE = _api.load_table(__version__)


def _enum(name: str) -> type:
    """The enum ``name`` with exactly the members the version's API table lists."""
    return _api.make_enum(_TABLE, name)


def _has(enum: type, member: str) -> bool:
    return member in enum.__members__


# ------------------------------------------------------------------------------ enums
# every enum of the version's table (members in the order the bindings declare them)
for _name in _TABLE["enums"]:
    if "." not in _name:
        globals()[_name] = _enum(_name)
del _name


if os.environ.get("PLACETUNE_FAKE_TRT_NUMPY_WITHOUT_BOOL"):
    # a numpy of 1.24-1.26: the alias ``np.bool`` was removed in 1.24.0 (its release notes, "Expired
    # deprecations") and defined again in 2.0 (as ``np.bool_``); numpy 2 stands in for such a numpy here
    import numpy as _np

    _np.__dict__.pop("bool", None)


def nptype(trt_type):
    """numpy type of a DataType (imports numpy lazily, like the real helper). As the bindings: up to
    8.5.2 the helper's table names ``np.bool`` (TensorRT tag 8.5.2, python/packaging/tensorrt/__init__.py:166,
    JetPack 5.1's 8.5.2.2 as NVIDIA/TensorRT#2557 and ultralytics#22930 quote it; ``np.bool_`` from 8.5.3.1,
    commit b0c259a7), so with a numpy of 1.24-1.26 every call raises AttributeError, whatever the type."""
    import numpy as np

    names = {"FLOAT": np.float32, "HALF": np.float16, "INT8": np.int8, "INT32": np.int32, "INT64": np.int64,
             "BOOL": np.bool if _V3 < (8, 5, 3) else np.bool_, "UINT8": np.uint8}
    mapping = {getattr(DataType, k): v for k, v in names.items() if _has(DataType, k)}
    if trt_type in mapping:
        return mapping[trt_type]
    raise TypeError("Could not resolve TensorRT datatype to an equivalent numpy datatype.")


def _nptype(trt_type):
    """The double's own numpy type of a DataType (its engines run in C++ on the board: never the helper's)."""
    import numpy as np

    return {"FLOAT": np.float32, "HALF": np.float16, "INT8": np.int8, "INT32": np.int32, "INT64": np.int64,
            "BOOL": np.bool_, "UINT8": np.uint8}[trt_type.name]


def volume(iterable):
    vol = 1
    for elem in iterable:
        vol *= elem
    return vol


def __getattr__(name: str):
    """Module attributes the bindings alias (``trt.float16`` is ``DataType.HALF``, ``trt.bool``
    ...): served on access only, so that the fake's own ``bool`` stays the builtin."""
    target = _TABLE["module"]["aliases"].get(name)
    if target is None:
        raise AttributeError(f"module 'tensorrt' has no attribute '{name}'")
    obj = globals()[target.split(".")[0]]
    for part in target.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


# ------------------------------------------------------------------------------ logging
class ILogger:
    """Subclass it, call ``ILogger.__init__(self)``, implement ``log(severity, msg)``."""

    Severity = _enum("ILogger.Severity")  # exported into the class scope, as the bindings do
    INTERNAL_ERROR = Severity.INTERNAL_ERROR
    ERROR = Severity.ERROR
    WARNING = Severity.WARNING
    INFO = Severity.INFO
    VERBOSE = Severity.VERBOSE

    def __init__(self) -> None:
        self._fake_init = True

    def log(self, severity, msg):  # pragma: no cover - abstract
        raise NotImplementedError


class Logger(ILogger):
    def __init__(self, min_severity=ILogger.Severity.WARNING) -> None:
        ILogger.__init__(self)
        self.min_severity = min_severity

    def log(self, severity, msg) -> None:
        if severity <= self.min_severity:
            import sys

            print(f"[TRT] {msg}", file=sys.stderr)


def _check_logger(logger) -> None:
    if not getattr(logger, "_fake_init", False):
        raise TypeError("tensorrt.ILogger.__init__() must be called from the subclass __init__")


#: TensorRT keeps one logger pointer per process: while any builder, runtime or refitter is
#: alive, a different logger passed to a new one is ignored and the first is used, with this
#: warning (the text TensorRT 8.x-10.x prints: NVIDIA/TensorRT issue #1475).
_GLOBAL: dict = {"logger": None}
_LIVE: "weakref.WeakSet" = weakref.WeakSet()


def _global_logger(owner, logger, create: str):
    """The logger ``owner`` (a Builder, Runtime or Refitter) really logs to."""
    _check_logger(logger)
    if len(_LIVE) and _GLOBAL["logger"] is not None and logger is not _GLOBAL["logger"]:
        _GLOBAL["logger"].log(ILogger.Severity.WARNING, f"The logger passed into {create} differs from one already "
                              "provided for an existing builder, runtime, or refitter. TensorRT maintains only a "
                              "single logger pointer at any given time, so the existing value, which can be "
                              "retrieved with getLogger(), will be used instead. In order to use a new logger, "
                              "first destroy all existing builder, runner or refitter objects.")
        logger = _GLOBAL["logger"]
    else:
        _GLOBAL["logger"] = logger
    _LIVE.add(owner)
    return logger


class _Log:
    def __init__(self, logger) -> None:
        self.logger = logger

    def __call__(self, sev, msg: str) -> None:
        self.logger.log(sev, msg)

    def info(self, msg: str) -> None:
        self(ILogger.Severity.INFO, msg)

    def verbose(self, msg: str) -> None:
        self(ILogger.Severity.VERBOSE, msg)

    def placement(self, msg: str) -> None:
        """A line of the ``Layers Running on DLA/GPU`` report, at its version's severity."""
        self(getattr(ILogger.Severity, placement_severity()), msg)

    def warn(self, msg: str) -> None:
        self(ILogger.Severity.WARNING, msg)

    def error(self, msg: str) -> None:
        self(ILogger.Severity.ERROR, msg)


class IHostMemory(bytes):
    """IHostMemory: a buffer (here: bytes). Like the real one it has the buffer protocol
    (``bytes(mem)``, ``memoryview(mem)``, ``file.write(mem)``) and ``nbytes``, but no ``len()``,
    indexing or bytes methods."""

    @property
    def nbytes(self) -> int:
        return bytes.__len__(self)

    def __len__(self) -> int:
        if _api._external():
            raise TypeError("object of type 'tensorrt.IHostMemory' has no len()")
        return bytes.__len__(self)

    def __getitem__(self, key):
        if _api._external():
            raise TypeError("'tensorrt.IHostMemory' object is not subscriptable")
        return bytes.__getitem__(self, key)

    def __iter__(self):
        if _api._external():
            raise TypeError("'tensorrt.IHostMemory' object is not iterable")
        return bytes.__iter__(self)

    def __getattribute__(self, name: str):
        if not name.startswith("_") and name not in ("nbytes", "dtype") and _api._external():
            raise AttributeError(f"'tensorrt.IHostMemory' object has no attribute '{name}'")
        return bytes.__getattribute__(self, name)


# ------------------------------------------------------------------------------ network
class ITensor:
    def __init__(self, name: str, shape, dtype, producer=None) -> None:
        self.name = name
        self.shape = tuple(shape)
        self.dtype = dtype
        self._producer = producer
        self._range = None
        self._const = False  # computed from weights only: the builder folds it away
        self._shape = False  # a shape computation (from a Shape layer): folded for static shapes
        self.is_network_input = False
        self.is_network_output = False
        self._allowed = None  # allowed_formats: None = every format (TensorRT's default)

    @property
    def allowed_formats(self) -> int:
        return (1 << len(TensorFormat)) - 1 if self._allowed is None else self._allowed

    @allowed_formats.setter
    def allowed_formats(self, value) -> None:
        self._allowed = int(value)

    if _MAJOR < 11:
        def set_dynamic_range(self, min, max) -> bool:  # noqa: A002 - real argument names
            self._range = (float(min), float(max))
            return True

        @property
        def dynamic_range(self):
            return self._range

        @dynamic_range.setter
        def dynamic_range(self, value) -> None:
            self._range = (float(value[0]), float(value[1]))


class ILayer:
    def __init__(self, name: str, ltype, op: str, onnx_name: str, attrs: dict, inputs: list, out_shape, out_dtype) -> None:
        self.name = name
        self.type = ltype
        self._op = op
        self._onnx = onnx_name
        self._attrs = attrs
        self._inputs = inputs
        self._outputs = []
        self._metadata = ""  # set by the parser for the layers it registers for an ONNX node (8.6+)
        self._plugin = ""  # the plugin creator's name of a layer the parser imported as a plugin
        self._out_spec = (out_shape, out_dtype)
        self._net = None  # the network the parser added it to (the DLA table looks at a Flatten's consumers)

    @property
    def num_inputs(self) -> int:
        return len(self._inputs)

    def get_input(self, i: int):
        return self._inputs[i]

    @property
    def num_outputs(self) -> int:
        return len(self._outputs)

    def get_output(self, i: int):
        return self._outputs[i]

    if _V >= (8, 6):
        @property
        def metadata(self) -> str:
            return self._metadata

        @metadata.setter
        def metadata(self, value: str) -> None:
            self._metadata = value


class INetworkDefinition:
    def __init__(self, flags: int, builder) -> None:
        self._flags = flags
        self._builder = builder
        self._layers: list[ILayer] = []
        self._inputs: list[ITensor] = []
        self._outputs: list[ITensor] = []
        self._onnx: bytes | None = None

    @property
    def num_layers(self) -> int:
        return len(self._layers)

    def get_layer(self, i: int) -> ILayer:
        return self._layers[i]

    @property
    def num_inputs(self) -> int:
        return len(self._inputs)

    def get_input(self, i: int) -> ITensor:
        return self._inputs[i]

    @property
    def num_outputs(self) -> int:
        return len(self._outputs)

    def get_output(self, i: int) -> ITensor:
        return self._outputs[i]

    if _MAJOR < 10:
        @property
        def has_implicit_batch_dimension(self) -> bool:
            return not (self._flags & (1 << int(NetworkDefinitionCreationFlag.EXPLICIT_BATCH)))

    def _explicit(self) -> bool:
        if _MAJOR >= 10:
            return True
        return bool(self._flags & (1 << int(NetworkDefinitionCreationFlag.EXPLICIT_BATCH)))


# ------------------------------------------------------------------------------ ONNX parser
_ONNX_TYPES = {1: DataType.FLOAT, 10: DataType.HALF, 3: DataType.INT8, 2: DataType.UINT8, 6: DataType.INT32,
               7: DataType.INT64 if _MAJOR >= 10 else DataType.INT32, 9: DataType.BOOL}
_OP_TYPES = {
    "Conv": LayerType.CONVOLUTION, "ConvTranspose": LayerType.DECONVOLUTION,
    "Relu": LayerType.ACTIVATION, "Sigmoid": LayerType.ACTIVATION, "Tanh": LayerType.ACTIVATION,
    "Clip": LayerType.ACTIVATION, "LeakyRelu": LayerType.ACTIVATION, "HardSigmoid": LayerType.ACTIVATION,
    "Gelu": LayerType.ACTIVATION, "Erf": LayerType.UNARY, "Sqrt": LayerType.UNARY, "Abs": LayerType.UNARY,
    "MaxPool": LayerType.POOLING, "AveragePool": LayerType.POOLING,
    # onnx-tensorrt: "GlobalAveragePool operators are implemented via Reduce layers rather than Pooling layers"
    "GlobalAveragePool": LayerType.REDUCE, "GlobalMaxPool": LayerType.REDUCE,
    "Add": LayerType.ELEMENTWISE, "Sub": LayerType.ELEMENTWISE, "Mul": LayerType.ELEMENTWISE,
    "Div": LayerType.ELEMENTWISE, "Max": LayerType.ELEMENTWISE, "Min": LayerType.ELEMENTWISE,
    "Pow": LayerType.ELEMENTWISE,
    "BatchNormalization": LayerType.SCALE, "Concat": LayerType.CONCATENATION, "Softmax": LayerType.SOFTMAX,
    "Resize": LayerType.RESIZE, "Upsample": LayerType.RESIZE,
    "Reshape": LayerType.SHUFFLE, "Flatten": LayerType.SHUFFLE, "Transpose": LayerType.SHUFFLE,
    "Squeeze": LayerType.SHUFFLE, "Unsqueeze": LayerType.SHUFFLE,
    "Gemm": LayerType.MATRIX_MULTIPLY, "MatMul": LayerType.MATRIX_MULTIPLY,
    "ReduceMean": LayerType.REDUCE, "ReduceSum": LayerType.REDUCE, "ReduceMax": LayerType.REDUCE,
    "Constant": LayerType.CONSTANT, "Shape": LayerType.SHAPE, "Identity": LayerType.IDENTITY,
    "Gather": LayerType.GATHER, "Slice": LayerType.SLICE, "Split": LayerType.SLICE,
    # 8.5 has no ICastLayer: the parser casts with an identity layer and an output type
    "Cast": LayerType.CAST if _has(LayerType, "CAST") else LayerType.IDENTITY,
    "InstanceNormalization": LayerType.PLUGIN_V2 if _MAJOR < 10 else LayerType.NORMALIZATION,
    "QuantizeLinear": LayerType.QUANTIZE, "DequantizeLinear": LayerType.DEQUANTIZE,
}
# an Ultralytics nms=True tail (ONNX NonMaxSuppression between data-dependent NonZero and Pad), as
# onnx-tensorrt imports it: ArgMax by a TopK layer, Greater an elementwise one, GatherND a gather, a Pad
# that is no 2D spatial padding a Slice in fill mode
for _op, _lt in (("ArgMax", "TOPK"), ("Greater", "ELEMENTWISE"), ("NonZero", "NON_ZERO"), ("GatherND", "GATHER"),
                 ("NonMaxSuppression", "NMS"), ("Pad", "SLICE"), ("ScatterND", "SCATTER")):
    if _has(LayerType, _lt):
        _OP_TYPES[_op] = LayerType[_lt]
if _has(LayerType, "NORMALIZATION"):  # INormalizationLayer (and the parser's LayerNormalization) from 8.6
    _OP_TYPES["LayerNormalization"] = LayerType.NORMALIZATION
# ops of networks users export, each with an importer in onnx-tensorrt 8.5-10.x (its docs/operators.md;
# GridSample from 8.6):
# YOLO11-OBB's angle (Sin, Cos), a dynamic export's anchors (Range: a fill layer), an nms=True score filter
# (Where: a select layer), MobileNetV3 (HardSwish: the parser's HardSigmoid activation times the input, one
# activation layer here, which the DLA table leaves on the GPU as TensorRT's HardSigmoid is)
for _op, _lt in (("Sin", "UNARY"), ("Cos", "UNARY"), ("Exp", "UNARY"), ("Log", "UNARY"), ("Neg", "UNARY"),
                 ("Reciprocal", "UNARY"), ("Floor", "UNARY"), ("Ceil", "UNARY"), ("Where", "SELECT"),
                 ("Range", "FILL"), ("HardSwish", "ACTIVATION"),
                 # the anchors and masks of dynamic, nms=True, RT-DETR and ViT exports
                 ("Expand", "SLICE"), ("Tile", "SLICE"), ("ConstantOfShape", "FILL"), ("Equal", "ELEMENTWISE"),
                 ("Less", "ELEMENTWISE"), ("GreaterOrEqual", "ELEMENTWISE"), ("And", "ELEMENTWISE"),
                 ("Xor", "ELEMENTWISE"), ("Mod", "ELEMENTWISE"), ("Not", "UNARY"), ("TopK", "TOPK"),
                 ("GatherElements", "GATHER"), ("ReduceMin", "REDUCE"), ("ReduceProd", "REDUCE"),
                 ("GridSample", "GRID_SAMPLE"),
                 # an oriented-box nms=True export's rotated NMS: the upper triangle of its box-to-box matrix
                 # (onnx-tensorrt's Trilu ends in a select layer) and the boxes it keeps (LessOrEqual: Less or
                 # Equal, an elementwise OR)
                 ("Trilu", "SELECT"), ("LessOrEqual", "ELEMENTWISE")):
    if _has(LayerType, _lt):
        _OP_TYPES[_op] = LayerType[_lt]


class ParserError:
    def __init__(self, code: int, desc: str, node: int = -1, func: str = "parseGraph") -> None:
        self._code, self._desc, self._node, self._func = code, desc, node, func

    def code(self) -> int:
        return self._code

    def desc(self) -> str:
        return self._desc

    def node(self) -> int:
        return self._node

    def __str__(self) -> str:
        return f"In node {self._node} ({self._func}): {_ERROR_CODES[self._code]}: {self._desc}"


#: nvonnxparser::ErrorCode by value (NvOnnxParser.h)
_ERROR_CODES = ("SUCCESS", "INTERNAL_ERROR", "MEM_ALLOC_FAILED", "MODEL_DESERIALIZE_FAILED", "INVALID_VALUE",
                "INVALID_GRAPH", "INVALID_NODE", "UNSUPPORTED_GRAPH", "UNSUPPORTED_NODE")


# ------------------------------------------------------------------------------ plugins
#: TensorRT's built-in plugin creators (libnvinfer_plugin) the double knows, registered (with their
#: namespace) by :func:`init_libnvinfer_plugins`; a process starts with none of them. Real
#: libnvinfer_plugin registers some 40; these are the detector tails and the ONNX NMS plugin.
BUILTIN_PLUGINS = ("EfficientNMS_TRT", "EfficientNMS_ONNX_TRT", "BatchedNMS_TRT", "BatchedNMSDynamic_TRT",
                   "InstanceNormalization_TRT")
#: (creator name, namespace) registered in this process
_PLUGIN_CREATORS: set = set()


def init_libnvinfer_plugins(logger, namespace) -> bool:
    """Registers the built-in plugin creators under ``namespace`` (the real binding: "Initialize and
    register all the existing TensorRT plugins to the IPluginRegistry with an optional namespace";
    calling it again is harmless: a creator already registered is not registered twice)."""
    for name in BUILTIN_PLUGINS:
        _PLUGIN_CREATORS.add((name, str(namespace)))
    return True


def _plugin_not_found(node: int) -> ParserError:
    """onnx-tensorrt's FallbackPluginImporter without a creator: the ``creator && "Plugin not found,
    are the plugin name, version, and namespace correct?"`` check. 8.x (builtin_op_importers.cpp's
    ASSERT): ``In node N (importFallbackPluginImporter): UNSUPPORTED_NODE: Assertion failed: creator &&
    ...`` (Polygraphy's capability test); 10.x (the STATIC_CHECK of onnxOpCheckers.cpp and the importer's
    own check): ``INVALID_NODE`` ("[6] creator && ..." as ONNX parser errors print in 10.x reports)."""
    text = 'creator && "Plugin not found, are the plugin name, version, and namespace correct?"'
    if _MAJOR < 10:
        return ParserError(8, "Assertion failed: " + text, node, "importFallbackPluginImporter")
    return ParserError(6, text, node, "importFallbackPluginImporter")


_PARSER = _TABLE.get("onnx_parser", {})
#: the names onnx-tensorrt gives the layers it adds (tests/trt_api: its sources). 8.x registers
#: neither: such layers keep TensorRT's default name ``(Unnamed Layer* N) [Type]``.
_SHAPE_SHUFFLE = _PARSER.get("add_shuffle_layer")
_BROADCAST = _PARSER.get("broadcast_layer")
_UNSQUEEZE = "ONNXTRT_unsqueezeTensor" if "ONNXTRT_unsqueezeTensor" in _PARSER.get("helper_layer_names", []) else None
_SQUEEZE = "ONNXTRT_squeezeTensor" if "ONNXTRT_squeezeTensor" in _PARSER.get("helper_layer_names", []) else None
#: 8.6-GA's processMetadata appends the node's doc-string lines (filterDocString), 10.x does not
_DOC_LINES = _V == (8, 6)
#: ops whose importer runs a rank-3 input as 2-D between an unsqueeze and a squeeze of axis 3 it
#: does not register for the node (onnx-tensorrt 10.1-GA onnxOpImporters.cpp:759/853 Conv,
#: importerUtils.cpp:1392/1444 poolingHelper, :1763/1868 ConvTranspose; 8.6-GA
#: builtin_op_importers.cpp:653/740 Conv)
_ONE_D_OPS = {"Conv", "ConvTranspose", "MaxPool", "AveragePool"}
_METADATA = _PARSER.get("layer_metadata", _V >= (8, 6))
_TITLES = {LayerType.CONSTANT: "Constant", LayerType.ELEMENTWISE: "ElementWise", LayerType.SHUFFLE: "Shuffle",
           LayerType.MATRIX_MULTIPLY: "Matrix Multiply", LayerType.SHAPE: "Shape", LayerType.IDENTITY: "Identity"}
#: ONNX ops whose importer turns every (weights) input into a tensor (convertToTensor) and
#: broadcasts lower-rank operands with a reshape (elementwiseHelper / broadcastTensors)
_ELEMENTWISE_OPS = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "Sum"}


class _Importer:
    """What onnx-tensorrt's ImporterContext does with names: ``registerLayer`` makes a name
    unique with one global suffix counter (``<base>_<k>``) and, for a layer registered for an
    ONNX node, sets ``metadata`` (8.6+); a layer it never registers keeps TensorRT's default
    ``(Unnamed Layer* <index>) [<Type>]``. Weights (initializers, Constant nodes) become a
    Constant layer named after them when a layer needs them as a tensor (convertToTensor)."""

    def __init__(self, net: INetworkDefinition, tensors: dict, inits: dict, log=None) -> None:
        self.log = log  # _Log: registerLayer's VERBOSE line
        self.net = net
        self.tensors = tensors
        self.weights = dict(inits)
        self.names: set[str] = set()
        self.counter = 0
        self.constants: dict[str, ITensor] = {}
        self.docs: dict[str, str] = {}  # node name -> doc_string (8.6 metadata)

    def unique(self, base: str) -> str:  # ImporterContext::generateUniqueName
        cand = base
        while cand in self.names:
            cand = f"{base}_{self.counter}"
            self.counter += 1
        self.names.add(cand)
        return cand

    def register(self, layer: ILayer, base: str, node_name: str | None = None) -> None:
        layer.name = self.unique(base)
        if self.log is not None:  # ImporterContext::registerLayer (8.5-GA, 8.6-GA: always "for ONNX node")
            self.log.verbose(f"Registering layer: {layer.name} for ONNX node: {base}" if node_name is not None
                             or _MAJOR < 10 else f"Registering layer: {layer.name} required by ONNX-TRT")
        if node_name is not None and _METADATA:
            props = ""
            if _DOC_LINES:  # filterDocString: no site-/dist-packages lines, '"' -> "'"
                props = "".join(" | " + line.replace('"', "'") for line in self.docs.get(node_name, "").split("\n")
                                if line and "site-packages" not in line and "dist-packages" not in line)
            layer._metadata = f"[ONNX Layer: {node_name}{props}]"

    def layer(self, ltype, op: str, node_name: str, attrs: dict, ins: list, outs: list[tuple]) -> ILayer:
        """network.add*(): a layer with TensorRT's default name; ``outs``: (name, dims, dtype)."""
        title = _TITLES.get(ltype, ltype.name.title())
        layer = ILayer(f"(Unnamed Layer* {len(self.net._layers)}) [{title}]", ltype, op, node_name, attrs, ins,
                       None, None)
        for name, dims, dt in outs:
            t = ITensor(name or f"{layer.name}_output", dims, dt, layer)
            t._const = all(getattr(x, "_const", False) for x in ins) if ins else ltype == LayerType.CONSTANT
            t._shape = ltype == LayerType.SHAPE or (bool(ins) and all(
                getattr(x, "_shape", False) or getattr(x, "_const", False) for x in ins) and not t._const)
            layer._outputs.append(t)
            if name:
                self.tensors[name] = t
        self.net._layers.append(layer)
        layer._net = self.net
        return layer

    def to_tensor(self, x: str, node_name: str) -> ITensor:  # convertToTensor
        if x in self.tensors:
            return self.tensors[x]
        if x in self.constants:  # ImporterContext::getConstantLayer
            return self.constants[x]
        dims, dt = self.weights[x]
        c = self.layer(LayerType.CONSTANT, "Constant", node_name, {}, [], [(None, dims, dt)])
        self.register(c, x)
        self.constants[x] = c.get_output(0)
        return self.constants[x]

    def weight_or_tensor(self, x: str) -> ITensor:
        """An input the importer reads as weights when it can (kernels, Clip bounds, shapes)."""
        if x in self.tensors:
            return self.tensors[x]
        dims, dt = self.weights[x]
        t = ITensor(x, dims, dt)
        t._const = True
        return t

    def add_shuffle(self, t: ITensor, dims, node_name: str) -> ILayer:  # ShapeTensor.cpp addShuffle
        layer = self.layer(LayerType.SHUFFLE, "Reshape", node_name, {}, [t], [(None, tuple(dims), t.dtype)])
        if _SHAPE_SHUFFLE:
            self.register(layer, _SHAPE_SHUFFLE)
        return layer

    def broadcast(self, t: ITensor, rank: int, node_name: str) -> ITensor:  # broadcastTensor
        if len(t.shape) >= rank:
            return t
        layer = self.add_shuffle(t, (1,) * (rank - len(t.shape)) + tuple(t.shape), node_name)
        if _BROADCAST:
            self.register(layer, _BROADCAST)
        return layer.get_output(0)

    def import_node(self, node, node_name: str, ltype, attrs: dict, info: dict) -> None:
        op = node.op_type
        ins_names = [x for x in node.input if x]

        def out_specs(first: ITensor | None) -> list[tuple]:
            return [(o,) + info.get(o, ((), first.dtype if first is not None else DataType.FLOAT)) for o in node.output]

        if op == "Gemm":
            a = self.to_tensor(ins_names[0], node_name)
            b = self.to_tensor(ins_names[1], node_name)
            mm_out = [(None if len(ins_names) > 2 else node.output[0],)
                      + info.get(node.output[0], ((), a.dtype))]
            mm = self.layer(LayerType.MATRIX_MULTIPLY, "MatMul", node_name, attrs, [a, b], mm_out)
            self.register(mm, node_name, node_name)
            if len(ins_names) > 2:  # the bias: a Constant, a broadcast reshape, an unregistered ElementWise
                c = self.to_tensor(ins_names[2], node_name)
                c = self.broadcast(c, len(mm.get_output(0).shape), node_name)
                self.layer(LayerType.ELEMENTWISE, "Add", node_name, {}, [mm.get_output(0), c],
                           out_specs(mm.get_output(0)))
            return
        if op in _ELEMENTWISE_OPS or op in ("MatMul", "Concat"):
            ts = [self.to_tensor(x, node_name) for x in ins_names]
            if op != "Concat":
                rank = max(len(t.shape) for t in ts)
                ts = [self.broadcast(t, rank, node_name) for t in ts]
            if op in _ELEMENTWISE_OPS and len(ts) > 2:
                # elementwiseHelper (8.5-GA onnx2trt_utils.cpp, 10.1-GA importerUtils.cpp): one two-input
                # layer per further input, each registered for the node: the second is <node>_<k>
                acc = ts[0]
                for t in ts[1:-1]:
                    mid = self.layer(ltype, op, node_name, attrs, [acc, t], [(None, acc.shape, acc.dtype)])
                    self.register(mid, node_name, node_name)
                    acc = mid.get_output(0)
                ts = [acc, ts[-1]]
            layer = self.layer(ltype, op, node_name, attrs, ts, out_specs(ts[0]))
            self.register(layer, node_name, node_name)
            return
        if op not in _OP_TYPES:  # a plugin (FallbackPluginImporter): every input a tensor, shapes as declared
            ts = [self.to_tensor(x, node_name) for x in ins_names]
            layer = self.layer(ltype, op, node_name, attrs, ts, out_specs(ts[0] if ts else None))
            layer._plugin = op
            self.register(layer, node_name, node_name)
            return
        if op == "InstanceNormalization" and ltype != LayerType.PLUGIN_V2:  # 10.x: normalizationHelper
            x = self.to_tensor(ins_names[0], node_name)
            params = []
            for w in ins_names[1:3]:
                t = self.to_tensor(w, node_name)
                dims = [1] * len(x.shape)
                if len(x.shape) > 1 and t.shape:
                    dims[1] = t.shape[0]
                sh = self.add_shuffle(t, dims, node_name)
                if _UNSQUEEZE:
                    self.register(sh, _UNSQUEEZE)
                params.append(sh.get_output(0))
            layer = self.layer(ltype, op, node_name, attrs, [x] + params, out_specs(x))
            self.register(layer, node_name, node_name)
            return
        first = self.to_tensor(ins_names[0], node_name) if ins_names else None
        rest = [self.weight_or_tensor(x) for x in ins_names[1:]]
        if op in _ONE_D_OPS and first is not None and len(first.shape) == 3:
            self.one_d(node, node_name, ltype, attrs, first, rest, info)
            return
        if op in ("Reshape", "Flatten"):
            layer = self.add_shuffle(first, info.get(node.output[0], ((),))[0], node_name)
            layer._op, layer._attrs, layer._inputs = op, attrs, [first] + rest
            layer._outputs[0].name = node.output[0]
            self.tensors[node.output[0]] = layer._outputs[0]
            layer._outputs[0].shape, layer._outputs[0].dtype = info.get(node.output[0], ((), first.dtype))
            self.register(layer, node_name, node_name)
            return
        if op == "Shape" and _MAJOR >= 10:  # the shape, then an unregistered cast to INT64
            sh = self.layer(LayerType.SHAPE, op, node_name, attrs, [first],
                            [(None, (len(first.shape),), DataType.INT32)])
            self.register(sh, node_name, node_name)
            self.layer(LayerType.CAST, "Cast", node_name, {}, [sh.get_output(0)], out_specs(sh.get_output(0)))
            return
        layer = self.layer(ltype, op, node_name, attrs, ([first] if first is not None else []) + rest,
                           out_specs(first))
        self.register(layer, node_name, node_name)


    def one_d(self, node, node_name: str, ltype, attrs: dict, x: ITensor, rest: list, info: dict) -> None:
        """A 1-D op: unsqueeze to (N, C, W, 1), the 2-D layer, squeeze back; the two shuffles are
        helpers (``ONNXTRT_unsqueezeTensor``/``ONNXTRT_squeezeTensor`` in 10.x, unnamed in 8.x)."""
        up = self.add_shuffle(x, tuple(x.shape) + (1,), node_name)
        if _UNSQUEEZE:
            self.register(up, _UNSQUEEZE)
        dims, dt = info.get(node.output[0], ((), x.dtype))
        dims4 = tuple(dims) + (1,) if len(dims) == 3 else dims
        core = self.layer(ltype, node.op_type, node_name, attrs, [up.get_output(0)] + rest, [(None, dims4, dt)])
        self.register(core, node_name, node_name)
        down = self.add_shuffle(core.get_output(0), dims, node_name)
        if _SQUEEZE:
            self.register(down, _SQUEEZE)
        out = down._outputs[0]
        out.name = node.output[0]
        self.tensors[node.output[0]] = out


class OnnxParser:
    """Parses a real ONNX file with the ``onnx`` package into fake network layers named
    after the ONNX nodes (``node_of_<first output>`` for unnamed nodes)."""

    def __init__(self, network: INetworkDefinition, logger) -> None:
        _check_logger(logger)
        self._net = network
        self._log = _Log(logger)
        self._errors: list[ParserError] = []
        self._flags: set = set()

    # python/src/parsers/pyOnnx.cpp: set_flag / clear_flag / get_flag (OnnxParserFlag; the
    # version's table decides which exist, e.g. ADJUST_FOR_DLA only in 11.x)
    def set_flag(self, flag) -> None:
        self._flags.add(flag)

    def clear_flag(self, flag) -> None:
        self._flags.discard(flag)

    def get_flag(self, flag) -> bool:
        return flag in self._flags

    @property
    def num_errors(self) -> int:
        return len(self._errors)

    def get_error(self, i: int) -> ParserError:
        return self._errors[i]

    def clear_errors(self) -> None:
        self._errors = []

    def parse_from_file(self, path: str) -> bool:
        import onnx

        try:
            model = onnx.load(path)
        except Exception as exc:  # noqa: BLE001
            self._errors.append(ParserError(1, f"Failed to parse ONNX model from file: {path}: {exc}"))
            return False
        return self._parse(model)

    def parse(self, model: bytes, path: str | None = None) -> bool:
        import onnx

        try:
            proto = onnx.load_from_string(bytes(model))
        except Exception as exc:  # noqa: BLE001
            self._errors.append(ParserError(1, f"Failed to parse ONNX model: {exc}"))
            return False
        return self._parse(proto)

    def _parse(self, model) -> bool:
        import onnx

        net = self._net
        net._onnx = model.SerializeToString()
        if not net._explicit():
            self._errors.append(ParserError(4, "Network must have an explicit batch dimension (EXPLICIT_BATCH)."))
            return False
        try:
            inferred = onnx.shape_inference.infer_shapes(model)
        except Exception:  # noqa: BLE001
            inferred = model
        g = inferred.graph
        info = {}
        for vi in list(g.input) + list(g.value_info) + list(g.output):
            tt = vi.type.tensor_type
            dims = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else -1 for d in tt.shape.dim)
            info[vi.name] = (dims, _ONNX_TYPES.get(tt.elem_type, DataType.FLOAT))
        inits = {t.name: (tuple(t.dims), _ONNX_TYPES.get(t.data_type, DataType.FLOAT)) for t in g.initializer}
        tensors: dict[str, ITensor] = {}
        for vi in g.input:
            if vi.name in inits:
                continue
            dims, dt = info[vi.name]
            t = ITensor(vi.name, dims, dt)
            t.is_network_input = True
            tensors[vi.name] = t
            net._inputs.append(t)
        ctx = _Importer(net, tensors, inits, self._log)
        #: integer constants (a Slice's axes and steps): the DLA rule reads their values
        steps = {t.name: onnx.numpy_helper.to_array(t).ravel().tolist() for t in g.initializer
                 if t.data_type in (6, 7) and len(t.dims) <= 1}
        for k, node in enumerate(g.node):
            node_name = node.name or f"node_of_{node.output[0]}"
            if node.op_type == "Constant":  # no layer: the value is weights until a layer needs a tensor
                value = next((a.t for a in node.attribute if a.name == "value"), None)
                if value is not None and value.data_type in (6, 7):
                    steps[node.output[0]] = onnx.numpy_helper.to_array(value).ravel().tolist()
                dims = tuple(value.dims) if value is not None else ()
                dt = _ONNX_TYPES.get(value.data_type, DataType.FLOAT) if value is not None else DataType.FLOAT
                ctx.weights[node.output[0]] = (dims, dt)
                continue
            ltype = _OP_TYPES.get(node.op_type)
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            if node.op_type == "Slice" and len(node.input) > 4 and node.input[4]:  # the steps, for the DLA rule
                attrs["_steps"] = steps.get(node.input[4], "unknown")
            if node.op_type == "Slice" and len(node.input) > 3 and node.input[3]:  # the axes, for the DLA rule
                attrs["_axes"] = steps.get(node.input[3])
            if ltype is None:
                # ModelImporter::parseGraph: "No importer registered for op: <op>. Attempting to import as
                # plugin." -> FallbackPluginImporter, which looks the creator up in the plugin registry by
                # the op's name, ``plugin_version`` (default "1") and ``plugin_namespace`` (default "")
                self._log.info(f"No importer registered for op: {node.op_type}. Attempting to import as plugin.")
                ns = attrs.get("plugin_namespace", b"")
                ns = ns.decode() if isinstance(ns, bytes) else str(ns)
                if (node.op_type, ns) not in _PLUGIN_CREATORS:
                    self._errors.append(_plugin_not_found(k))
                    return False
                ltype = LayerType.PLUGIN_V2
            missing = [x for x in node.input if x and x not in tensors and x not in ctx.weights]
            if missing:
                self._errors.append(ParserError(3, f"Input {missing[0]} of node {node_name} is not a known tensor", k))
                return False
            ctx.docs[node_name] = node.doc_string
            self._log.verbose(f"Parsing node: {node_name} [{node.op_type}]")  # ModelImporter.cpp
            ctx.import_node(node, node_name, ltype, attrs, info)
        for vi in g.output:
            t = tensors.get(vi.name)
            if t is None:
                self._errors.append(ParserError(3, f"Graph output {vi.name} is not produced by any node"))
                return False
            t.is_network_output = True
            net._outputs.append(t)
        return True


# ------------------------------------------------------------------------------ DLA rules
#: The double's own DLA support table: layer type -> predicate(layer) (unsupported otherwise).
DLA_TABLE = {
    LayerType.CONVOLUTION: lambda l: True,
    LayerType.DECONVOLUTION: lambda l: True,
    LayerType.ACTIVATION: lambda l: l._op in ("Relu", "Sigmoid", "Tanh", "Clip", "LeakyRelu"),
    LayerType.POOLING: lambda l: not l._op.startswith("Global"),
    LayerType.ELEMENTWISE: lambda l: l._op in ("Add", "Sub", "Mul", "Max", "Min") or (l._op == "Div" and _MAJOR >= 10),
    LayerType.SCALE: lambda l: True,
    LayerType.CONCATENATION: lambda l: l._attrs.get("axis", 1) == 1,
    LayerType.SOFTMAX: lambda l: True,
    LayerType.RESIZE: lambda l: True,
    LayerType.SHUFFLE: lambda l: (len(l._inputs[0].shape) == 4 and len(l._outputs[0].shape) == 4)
    or _unit_reshape(l._inputs[0].shape, l._outputs[0].shape) or _fc_flatten(l),
    LayerType.MATRIX_MULTIPLY: lambda l: _fully_connected(l),
    LayerType.SLICE: lambda l: _slice(l),
}


def _slice(layer: ILayer) -> bool:
    """An ONNX Slice or Split the DLA runs (tests/fakes/_dla_rules.py, shared with the trtexec double). A
    parameter computed from a Shape layer (torch's ``chunk`` sizes its halves so) is a build-time constant
    of a network of static shapes, as TensorRT's ``IDimensionExpr::isConstant`` calls such a size; the
    trtexec double folds it the same way."""
    steps = layer._attrs.get("_steps")
    if steps == "unknown":
        return False
    axis = int(layer._attrs.get("axis", 0)) if layer._op == "Split" else None
    return _dla_rules.slice_(layer._op, layer._inputs[0].shape, [t.shape for t in layer._outputs],
                             all(t._const or t._shape for t in layer._inputs[1:]), steps, axis,
                             layer._attrs.get("_axes"))


def _fully_connected(layer: ILayer) -> bool:
    """A classifier's Gemm/MatMul the DLA runs (tests/fakes/_dla_rules.py, shared with the trtexec double)."""
    if len(layer._inputs) != 2:
        return False
    a, b = layer._inputs
    return _dla_rules.fully_connected(a.shape, a._const, b.shape, b._const, int(layer._attrs.get("transA", 0)) == 1,
                                      layer._outputs[0].shape)


def _fc_flatten(layer: ILayer) -> bool:
    """The flatten before a classifier's Gemm, on the DLA before TensorRT 10 (tests/fakes/_dla_rules.py)."""
    if layer._net is None:
        return False
    out = layer._outputs[0]
    users = [l for l in layer._net._layers if any(t is out for t in l._inputs)]
    return _dla_rules.fc_flatten(_MAJOR, layer._inputs[0].shape, out.shape,
                                 [l.type == LayerType.MATRIX_MULTIPLY and _fully_connected(l) for l in users])


def _unit_reshape(a: tuple, b: tuple) -> bool:
    """A reshape between rank 3 and 4 that only inserts or drops a dimension of 1 (the
    unsqueeze/squeeze around a 1-D op): the double lets the DLA run it (an assumption:
    docs/doubles.md)."""
    if sorted((len(a), len(b))) != [3, 4]:
        return False
    return [d for d in a if d != 1] == [d for d in b if d != 1]


#: Layer types the DLA runs in FP16 only (TensorRT 8.x DLA guide: Slice, Softmax). BuilderFlag.INT8 alone leaves
#: them FP32 ("Enable Int8 layer selection, with FP32 fallback with FP16 fallback if kFP16 also specified",
#: NvInfer.h 8.5-10.x), which the DLA does not run; with FP16 set too they run on it in FP16.
DLA_FP16_ONLY = (LayerType.SLICE, LayerType.SOFTMAX)


def _dla_check(layer: ILayer, config: "IBuilderConfig") -> tuple[bool, str]:
    if layer._plugin:  # a plugin layer runs on the GPU only (DLA_TABLE has no PLUGIN_V2 either)
        return False, "unsupported"
    rule = DLA_TABLE.get(layer.type)
    if rule is None or not rule(layer) or _fault("DLA_UNSUPPORTED", {layer.name}):
        return False, "unsupported"
    if _MAJOR >= 11:
        if any(t.dtype not in (DataType.HALF, DataType.INT8) for t in layer._outputs):
            return False, "precision"
    elif not (config.get_flag(BuilderFlag.FP16) or config.get_flag(BuilderFlag.INT8)):
        return False, "precision"
    elif layer.type in DLA_FP16_ONLY and not config.get_flag(BuilderFlag.FP16):
        return False, "precision"
    return True, ""


# ------------------------------------------------------------------------------ builder
class IOptimizationProfile:
    def __init__(self) -> None:
        self._shapes: dict[str, tuple] = {}

    def set_shape(self, input: str, min, opt, max) -> None:  # noqa: A002 - real argument names
        self._shapes[input] = (tuple(min), tuple(opt), tuple(max))

    def get_shape(self, input: str):  # noqa: A002
        return [list(s) for s in self._shapes.get(input, ((), (), ()))]


class ITimingCache:
    def __init__(self, entries: dict | None = None) -> None:
        self._entries = dict(entries or {})

    def serialize(self) -> IHostMemory:
        return IHostMemory(json.dumps({"fake_timing_cache": __version__, "entries": self._entries}).encode())

    def combine(self, input_cache: "ITimingCache", ignore_mismatch: bool) -> bool:
        self._entries.update(input_cache._entries)
        return True

    def reset(self) -> bool:
        self._entries = {}
        return True


if _MAJOR < 11:
    class IInt8Calibrator:
        def __init__(self) -> None:
            self._fake_init = True

    class IInt8EntropyCalibrator2(IInt8Calibrator):
        pass


class IBuilderConfig:
    def __init__(self, builder: "Builder") -> None:
        self._builder = builder
        self._flags: set = set()
        self._device: dict[int, object] = {}
        self.default_device_type = DeviceType.GPU
        self.DLA_core = -1
        self.profiling_verbosity = ProfilingVerbosity.LAYER_NAMES_ONLY
        self.engine_capability = EngineCapability.STANDARD
        self._pools: dict = {}
        self._profiles: list[IOptimizationProfile] = []
        self._cache: ITimingCache | None = None
        self._calibrator = None

    def set_flag(self, flag) -> None:
        self._flags.add(BuilderFlag(flag))

    def clear_flag(self, flag) -> None:
        self._flags.discard(BuilderFlag(flag))

    def get_flag(self, flag) -> bool:
        return BuilderFlag(flag) in self._flags

    def set_device_type(self, layer: ILayer, device_type) -> None:
        self._device[id(layer)] = DeviceType(device_type)

    def get_device_type(self, layer: ILayer):
        return self._device.get(id(layer), self.default_device_type)

    def is_device_type_set(self, layer: ILayer) -> bool:
        return id(layer) in self._device

    def reset_device_type(self, layer: ILayer) -> None:
        self._device.pop(id(layer), None)

    def can_run_on_DLA(self, layer: ILayer) -> bool:  # noqa: N802 - real name
        return _dla_check(layer, self)[0]

    def set_memory_pool_limit(self, pool, pool_size: int) -> None:
        pool = MemoryPoolType(pool)
        if pool != MemoryPoolType.WORKSPACE and pool.name.startswith("DLA"):
            if pool_size < 4096 or pool_size & (pool_size - 1):
                raise ValueError(f"{pool.name} pool size must be a power of 2 and at least 4 KiB (got {pool_size})")
        self._pools[pool] = int(pool_size)

    def get_memory_pool_limit(self, pool) -> int:
        return self._pools.get(MemoryPoolType(pool), 1 << 30)

    def add_optimization_profile(self, profile: IOptimizationProfile) -> int:
        self._profiles.append(profile)
        return len(self._profiles) - 1

    def create_timing_cache(self, serialized_timing_cache: bytes) -> ITimingCache | None:
        """A cache it cannot deserialise is None, not an exception: the binding returns what
        ``IBuilderConfig::createTimingCache`` does, a null pointer (python/src/infer/pyCore.cpp release/8.6:270
        ``netconfig_create_timing_cache``), after TensorRT logged its errors (8.6.1.6's, NVIDIA/TensorRT#3566)."""
        data = bytes(serialized_timing_cache)
        if not data:
            return ITimingCache()
        try:
            doc = json.loads(data.decode())
            entries = doc["entries"]
            if not isinstance(entries, dict):
                raise TypeError(type(entries).__name__)
        except (ValueError, KeyError, TypeError):
            self._builder._log(ILogger.Severity.ERROR, "1: [stdArchiveReader.cpp::nvinfer1::rt::StdArchiveReader::"
                               "StdArchiveReaderInitCommon::36] Error Code 1: Serialization (Serialization assertion "
                               "magicTagRead == kMAGIC_TAG failed.Magic tag does not match)")
            self._builder._log(ILogger.Severity.ERROR, "4: The timing cache will not be used!")
            return None
        return ITimingCache(entries)

    def set_timing_cache(self, cache: ITimingCache, ignore_mismatch: bool) -> bool:
        if not isinstance(cache, ITimingCache):  # pybind11: None is no ITimingCache const&
            raise TypeError("set_timing_cache(): incompatible function arguments")
        self._cache = cache
        return True

    def get_timing_cache(self) -> ITimingCache | None:
        return self._cache

    if _MAJOR < 11:
        @property
        def int8_calibrator(self):
            return self._calibrator

        @int8_calibrator.setter
        def int8_calibrator(self, calibrator) -> None:
            if calibrator is not None and not getattr(calibrator, "_fake_init", False):
                raise TypeError("IInt8Calibrator.__init__() must be called from the subclass __init__")
            self._calibrator = calibrator

    if _MAJOR < 10:
        max_workspace_size = 1 << 30


def _count_oom_kill(path: str | None) -> None:
    """What the kernel does when its out-of-memory killer kills a process: ``oom_kill`` of ``/proc/vmstat``
    goes up by one (mm/oom_kill.c ``count_vm_event(OOM_KILL)``, Linux 4.13 on); ``path`` is the test's stand-in."""
    if not path:
        return
    try:
        with open(path) as fh:
            rows = dict(line.split() for line in fh if line.strip())
    except OSError:
        rows = {}
    rows["oom_kill"] = str(int(rows.get("oom_kill", "0")) + 1)
    with open(path, "w") as fh:
        fh.write("".join(f"{k} {v}\n" for k, v in rows.items()))


def _fault(kind: str, names: set[str]) -> bool:
    """``*``: every build; ``+DLA``: every build with a layer on a DLA; else a layer's name."""
    target = os.environ.get(f"PLACETUNE_FAKE_TRT_{kind}_ON")
    return bool(target) and (target == "*" or (target == "+DLA" and bool(names)) or target in names)


_POINTWISE = (LayerType.ACTIVATION, LayerType.ELEMENTWISE, LayerType.UNARY)


def _fuse_gpu(layers: list[ILayer]) -> list[tuple[str, list[ILayer]]]:
    """Group consecutive GPU layers the way the double fuses them: conv + activation,
    chains of point-wise layers (PWN), and shuffle + shuffle."""
    groups: list[tuple[str, list[ILayer]]] = []
    for l in layers:
        if groups:
            kind, members = groups[-1]
            last = members[-1]
            feeds = any(t._producer is last for t in l._inputs)
            if feeds and kind == "CONVOLUTION" and len(members) == 1 and l.type == LayerType.ACTIVATION:
                members.append(l)
                continue
            if feeds and kind == "POINTWISE" and l.type in _POINTWISE:
                members.append(l)
                continue
            if feeds and kind == "SHUFFLE" and l.type == LayerType.SHUFFLE:
                members.append(l)
                continue
        kind = "POINTWISE" if l.type in _POINTWISE else l.type.name
        groups.append((kind, [l]))
    return groups


def _dla_islands(layers: list[ILayer], dev: dict) -> list[list[ILayer]]:
    """The DLA subgraphs: DLA layers joined by a tensor one produces and the other reads, each
    group in network order, the groups ordered by their first layer."""
    on = [l for l in layers if dev[id(l)] == DeviceType.DLA]
    group = {id(l): i for i, l in enumerate(on)}

    def find(i: int) -> int:
        while group[id(on[i])] != i:
            i = group[id(on[i])]
        return i

    for l in on:
        for t in l._inputs:
            p = t._producer
            if p is not None and id(p) in group:
                a, b = find(group[id(p)]), find(group[id(l)])
                if a != b:
                    group[id(on[max(a, b)])] = min(a, b)
    islands: dict[int, list[ILayer]] = {}
    for i, l in enumerate(on):
        islands.setdefault(find(i), []).append(l)
    return [islands[k] for k in sorted(islands)]


def _group_name(kind: str, members: list[ILayer]) -> str:
    if kind == "POINTWISE" and len(members) > 1:
        text = f"PWN({members[0].name})"
        for m in members[1:]:
            text = f"PWN({text}, {m.name})"
        return text
    return " + ".join(m.name for m in members)


class Builder:
    def __init__(self, logger) -> None:
        logger = _global_logger(self, logger, "createInferBuilder")
        self.logger = logger
        self._log = _Log(logger)

    @property
    def num_DLA_cores(self) -> int:  # noqa: N802 - real name
        return int(os.environ.get("PLACETUNE_FAKE_TRT_DLA_CORES", str(default_dla_cores())))

    @property
    def max_DLA_batch_size(self) -> int:  # noqa: N802
        return 4096

    platform_has_fast_fp16 = True
    platform_has_fast_int8 = True

    def create_network(self, flags: int = 0) -> INetworkDefinition:
        return INetworkDefinition(int(flags), self)

    def create_builder_config(self) -> IBuilderConfig:
        return IBuilderConfig(self)

    def create_optimization_profile(self) -> IOptimizationProfile:
        return IOptimizationProfile()

    def is_network_supported(self, network: INetworkDefinition, config: IBuilderConfig) -> bool:
        return True

    if _MAJOR < 10:
        def build_engine(self, network, config):
            plan = self.build_serialized_network(network, config)
            return None if plan is None else Runtime(self.logger).deserialize_cuda_engine(plan)

    def build_serialized_network(self, network: INetworkDefinition, config: IBuilderConfig):
        log = self._log
        dla_named: set[str] = set()
        for l in network._layers:
            if config.get_device_type(l) == DeviceType.DLA:
                dla_named.update((l.name, l._onnx))
        if _fault("SEGFAULT", dla_named):
            os.kill(os.getpid(), signal.SIGSEGV)
        if _fault("KILL", dla_named):  # the kernel's out-of-memory killer: counted, then SIGKILL
            _count_oom_kill(os.environ.get("PLACETUNE_FAKE_TRT_VMSTAT"))
            os.kill(os.getpid(), signal.SIGKILL)
        if _fault("BUILD_OOM", dla_named):  # TensorRT 10.3.0's lines of a build out of memory (NVIDIA/TensorRT#4258)
            log.error("1: [defaultAllocator.cpp::allocate::31] Error Code 1: Cuda Runtime (out of memory)")
            log.warn("Requested amount of GPU memory (15485030400 bytes) could not be allocated. There may not be "
                     "enough free memory for allocation to succeed.")
            log.error("10: Could not find any implementation for node {ForeignNode[fake]}.")
            return None
        if _fault("HANG", dla_named):
            time.sleep(3600)
        if _fault("BUILD_NONE", dla_named):
            log.error("1: [nvdlaUtils.cpp::submit::198] Error Code 1: DLA (Failure to submit program to DLA engine.)")
            log.error("2: [builder.cpp::buildSerializedNetwork::751] Error Code 2: Internal Error "
                      "(Assertion engine != nullptr failed. )")
            return None
        # ---- shapes
        shapes: dict[str, tuple] = {}
        profiles: dict[str, list] = {}  # a dynamic input's optimisation profile: [min, opt, max]
        for t in network._inputs:
            if -1 in t.shape:
                prof = next((p for p in config._profiles if t.name in p._shapes), None)
                if prof is None:
                    log.error("4: [network.cpp::validate::3062] Error Code 4: Internal Error (Network has dynamic or "
                              "shape inputs, but no optimization profile has been defined.)")
                    log.error("2: [builder.cpp::buildSerializedNetwork::751] Error Code 2: Internal Error "
                              "(Assertion engine != nullptr failed. )")
                    return None
                mn, opt, mx = prof._shapes[t.name]
                shapes[t.name] = (tuple(opt), mn == opt == mx)
                profiles[t.name] = [list(mn), list(opt), list(mx)]
            else:
                shapes[t.name] = (t.shape, True)
        static = all(s for _, s in shapes.values())
        # ---- INT8 I/O: a network input or output of type INT8 needs its own dynamic range, also when a
        # calibrator gives the others (trtexec sets them from the calibration cache "to match scales
        # loaded from calibration cache ... Change the network validation so that this workaround can
        # be removed": samples/common/sampleEngines.cpp release/10.3:1001-1009, the same in 8.5-10.16).
        # The message is the double's own wording (no published log of the real one was found).
        if _MAJOR < 11 and not any(l.type in (LayerType.QUANTIZE, LayerType.DEQUANTIZE) for l in network._layers):
            for t in [*network._inputs, *network._outputs]:
                if t.dtype == DataType.INT8 and t._range is None:
                    log.error(f"4: [network.cpp::validate] Error Code 4: Internal Error (Int8 I/O tensor {t.name} "
                              "has no dynamic range)")
                    return None
        # ---- devices
        skip = (LayerType.CONSTANT, LayerType.SHAPE, LayerType.IDENTITY)
        layers = [l for l in network._layers if l.type not in skip
                  and not all(t._const or t._shape for t in l._outputs)]
        fallback = config.get_flag(BuilderFlag.GPU_FALLBACK)
        ncores = self.num_DLA_cores
        dla_on = 0 <= config.DLA_core < ncores
        dev: dict[int, object] = {}
        for l in layers:
            want = config.get_device_type(l)
            if want == DeviceType.DLA:
                ok, why = _dla_check(l, config)
                if ok and not static:
                    ok, why = False, "dynamic"
                if ok and not dla_on:
                    ok, why = False, "core"
                if not ok:
                    if why == "dynamic":
                        log.warn(f"DLA Layer {l.name} does not support dynamic shapes in any dimension.")
                    if not fallback:
                        log.error(f"Layer '{l.name}' ({l.type.name}): Unsupported on DLA and GPU fallback is disabled.")
                        log.error("2: [builder.cpp::buildSerializedNetwork::751] Error Code 2: Internal Error "
                                  "(Assertion engine != nullptr failed. )")
                        return None
                    if why == "precision":
                        log.warn(f"DLA only supports FP16 and Int8 precision type. Switching {l.name} device type to GPU.")
                    elif _V < (8, 5):  # 8.4 wording (tests/data/trt_corpus/trt-2318-samplenmt-dla)
                        log.warn(f"Default DLA is enabled but layer {l.name} is not supported on DLA, falling back to GPU.")
                    else:
                        log.warn(f"Layer '{l.name}' ({l.type.name}): Unsupported on DLA. Switching this layer's device type to GPU.")
                    want = DeviceType.GPU
            dev[id(l)] = want
        runs = _dla_islands(layers, dev)
        if len(runs) > 16:
            for run in runs[16:]:
                for l in run:
                    if not fallback:
                        log.error(f"DLA supports only 16 subgraphs per DLA core and GPU fallback is disabled (layer {l.name}).")
                        return None
                    log.warn(f"DLA supports only 16 subgraphs per DLA core. Switching to GPU for layer {l.name}")
                    dev[id(l)] = DeviceType.GPU
            runs = runs[:16]
        int8 = _MAJOR < 11 and config.get_flag(BuilderFlag.INT8)
        calibrated = int8 and config._calibrator is not None and bool(config._calibrator.read_calibration_cache())
        if int8 and not calibrated:
            for l in layers:
                for t in l._outputs:
                    if t._range is None:
                        log.warn(f"Missing scale and zero-point for tensor {t.name}, expect fall back to non-int8 "
                                 "implementation for any layer consuming or producing given tensor")
                        int8 = False
        # ---- log sections and engine layers
        entries: list[dict] = []
        gpu_groups = _fuse_gpu([l for l in layers if dev[id(l)] == DeviceType.GPU])
        first_of_group = {id(m[0]): (k, m) for k, m in gpu_groups}
        run_of = {id(r[0]): r for r in runs}
        scale = 0.7 if int8 else (1.0 if (config.get_flag(BuilderFlag.FP16) if _MAJOR < 11 else True) else 2.0)
        for l in layers:
            if id(l) in run_of:
                r = run_of[id(l)]
                fn = f"{{ForeignNode[{r[0].name}...{r[-1].name}]}}" if len(r) > 1 else f"{{ForeignNode[{r[0].name}]}}"
                src = next((t.name for t in r[0]._inputs if t._producer is not None or t.is_network_input), r[0].name)
                out = r[-1]._outputs[0].name
                entries += [
                    {"name": f"{src} to nvm", "device": "DLA", "ms": 0.005, "in": [src], "out": [src]},
                    {"name": fn, "device": "DLA", "ms": round((0.03 + 0.01 * len(r)) * scale, 6), "dla": True,
                     "layers": [m.name for m in r], "in": [src], "out": [out]},
                    {"name": f"{out} from nvm", "device": "DLA", "ms": 0.005, "in": [out], "out": [out]},
                    {"name": f"{src} copy finish", "device": "DLA", "ms": 0.001, "in": [], "out": []},
                ]
            elif id(l) in first_of_group:
                kind, members = first_of_group[id(l)]
                inside = {t.name for m in members for t in m._outputs}
                entries.append({"name": _group_name(kind, members), "device": "GPU", "type": kind,
                                "ms": round(0.02 * len(members) * scale, 6), "layers": [m.name for m in members],
                                "in": [t.name for m in members for t in m._inputs if t.name not in inside],
                                "out": [t.name for t in members[-1]._outputs],
                                # a fused layer's Metadata joins its layers' with \x1e (corpus: 10.4 export)
                                "meta": "\x1e".join(m._metadata for m in members if m._metadata)})
        no_report = bool(os.environ.get("PLACETUNE_FAKE_TRT_NO_PLACEMENT_LOG")) or _fault("UNREADABLE", dla_named)
        if dla_on and not no_report and _MAJOR == 10:
            # 10.x's form as published for 10.3 with --verbose (tests/data/trt_corpus/orin-agx-trt10.3-
            # dla-offloaded): no [DlaLayer] line, one "successfully offloaded" line per loadable
            dla_entries = [e for e in entries if e.get("dla")]
            n = len(dla_entries)
            log.placement(f"Number of DLA node candidates offloaded : {n} out of {n}")
            for e in dla_entries:
                log.placement(f"{e['name']} successfully offloaded to DLA.")
            for e in entries:
                if e["device"] == "GPU":
                    log.placement(f"[GpuLayer] {e['type']}: {e['name']}")
        elif dla_on and not no_report:
            log.placement("---------- Layers Running on DLA ----------")
            for e in entries:
                if e.get("dla"):
                    log.placement(f"[DlaLayer] {e['name']}")
            log.placement("---------- Layers Running on GPU ----------")
            for e in entries:
                if e["device"] == "GPU":
                    log.placement(f"[GpuLayer] {e['type']}: {e['name']}")
        # ---- timing cache
        if config._cache is not None and not config.get_flag(BuilderFlag.DISABLE_TIMING_CACHE):
            for e in entries:
                config._cache._entries.setdefault(e["name"], e["ms"])
        io = [{"name": t.name, "mode": "INPUT", "shape": list(shapes[t.name][0]), "dtype": t.dtype.name,
               "dynamic": -1 in t.shape, "profile": profiles.get(t.name)} for t in network._inputs]
        batch = io[0]["shape"][0] if io and io[0]["shape"] else 1
        for t in network._outputs:
            io.append({"name": t.name, "mode": "OUTPUT", "shape": [d if d > 0 else batch for d in t.shape],
                       "dtype": t.dtype.name, "dynamic": False})
        if not _io_formats(io, network, log, calibrated, entries, dla_on and bool(runs), dev):
            return None
        if _MAJOR >= 11:
            precision = "fp16" if any(t.dtype == DataType.HALF for t in network._outputs) else "fp32"
        else:
            precision = "int8" if int8 else ("fp16" if config.get_flag(BuilderFlag.FP16) else "fp32")
        ranges = {t.name: (t._range[1] if t._range else None) for t in network._outputs}
        import base64

        plan = {"version": __version__, "dla_core": config.DLA_core if dla_on and runs else -1, "entries": entries,
                "precision": precision, "calibrated": bool(calibrated), "out_ranges": ranges,
                "onnx": base64.b64encode(network._onnx).decode() if network._onnx else None,
                "io": io, "dla_requested": sorted(dla_named),
                "plugins": sorted({l._plugin for l in network._layers if l._plugin}),
                "verbosity": ProfilingVerbosity(config.profiling_verbosity).name}
        log.info(f"Engine generation completed in {0.01 * len(layers):.4f} seconds.")
        return IHostMemory(_PLAN_MAGIC + json.dumps(plan).encode())


def _io_formats(io: list, network, log, calibrated: bool, entries: list, dla_engine: bool, dev: dict) -> bool:
    """Each I/O tensor's format from its ``allowed_formats`` (tests/fakes/tensorrt/_formats.py:
    the rules of TensorRT's headers), its INT8 scale, and on a DLA engine the GPU reformat that a
    tensor not in a DLA-native format costs at its DLA layer. False (errors logged) when a
    tensor has no acceptable format or is INT8 without a range."""
    tensors = {t.name: t for t in list(network._inputs) + list(network._outputs)}
    members = list(TensorFormat.__members__)
    # PLACETUNE_FAKE_TRT_REFORMAT_NATIVE_IO: a DLA engine reformats on the GPU even the I/O given its native
    # format, which NvInfer.h release/10.3:413-416 leaves open with kGPU_FALLBACK (native "if ... kGPU_FALLBACK
    # is not specified")
    reformat_native = bool(os.environ.get("PLACETUNE_FAKE_TRT_REFORMAT_NATIVE_IO"))
    for row in io:
        t = tensors[row["name"]]
        fmt, why = _formats.choose(_MAJOR, t.allowed_formats, row["dtype"], len(row["shape"]), members)
        if fmt is None:
            log.error(f"4: [fake tensorrt] Error Code 4: Internal Error (I/O tensor {t.name} of type {row['dtype']}: "
                      f"none of its allowed formats can be used: {why})")
            log.error("2: [builder.cpp::buildSerializedNetwork::751] Error Code 2: Internal Error "
                      "(Assertion engine != nullptr failed. )")
            return False
        row["format"] = fmt
        if row["dtype"] == "INT8":
            if t._range is None and not calibrated:
                log.error(f"4: [fake tensorrt] Error Code 4: Internal Error (INT8 I/O tensor {t.name} has no "
                          "dynamic range and no calibrator gives it one)")
                return False
            row["scale"] = (t._range[1] if t._range else 4.0) / 127.0
        if not dla_engine or ((row["dtype"], fmt) in _formats.DLA_NATIVE and not reformat_native):
            continue
        if row["mode"] == "INPUT":
            on_dla = [l for l in network._layers if t in l._inputs and dev.get(id(l)) == DeviceType.DLA]
        else:
            on_dla = [t._producer] if t._producer is not None and dev.get(id(t._producer)) == DeviceType.DLA else []
        if on_dla:  # the GPU converts between the I/O format and the DLA's own (reference §3.3)
            n = 1
            for d in row["shape"]:
                n *= max(int(d), 1)
            where = "Input" if row["mode"] == "INPUT" else "Output"
            name = f"Reformatting CopyNode for {where} Tensor 0 to {on_dla[0].name}"
            # the I/O tensor is the reformat's input (an input) or output (an output), the other side
            # "Reformatted ..." (real layer information: trt_corpus/trex-a100-resnet18-fp16-layerinfo)
            inner = f"Reformatted {where} Tensor 0 to {on_dla[0].name}"
            entry = {"name": name, "device": "GPU", "type": "Reformat", "ms": round(0.005 + 2e-8 * n, 6),
                     "layers": [], "in": [t.name] if where == "Input" else [inner],
                     "out": [inner] if where == "Input" else [t.name]}
            entries.insert(0 if where == "Input" else len(entries), entry)
    return True


# ------------------------------------------------------------------------------ runtime
class IProfiler:
    """Subclass it, call ``IProfiler.__init__(self)``, implement ``report_layer_time``."""

    def __init__(self) -> None:
        self._fake_init = True

    def report_layer_time(self, layer_name: str, ms: float) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


#: the inspector's LayerType of a GPU layer of each [GpuLayer] TYPE (the types real exports show)
_INSPECTOR_TYPES = {"CONVOLUTION": ("CaskConvolution", "Convolution"), "POOLING": ("CaskPooling", "Pooling"),
                    "POINTWISE": ("PointWiseV2", "PointWise"), "MATRIX_MULTIPLY": ("CaskGemmConvolution", "Convolution"),
                    "REDUCE": ("Reduce", "Reduce"), "SHUFFLE": ("Shuffle", "Shuffle"), "SOFTMAX": ("CudaSoftMax", "SoftMax")}


def _inspector_layer(x: dict) -> dict:
    """One engine layer of the inspector's DETAILED JSON, with the keys real exports carry (8.6+:
    ``StreamId``, ``Metadata``). A DLA loadable's type and metadata are no real export's: placeholders."""
    def tensors(names: list) -> list:
        return [{"Name": n, "Location": "Device", "Dimensions": [], "Format/Datatype": "Half"} for n in names]

    if x.get("dla"):
        kind, param = _layerinfo.DLA_LOADABLE_TYPE, None
    elif x["device"] == "DLA" or x["name"].startswith("Reformatting CopyNode"):
        kind, param = "Reformat", "Reformat"
    else:
        kind, param = _INSPECTOR_TYPES.get(x.get("type", ""), ("CaskConvolution", "Convolution"))
    layer = {"Name": x["name"], "LayerType": kind, "Inputs": tensors(x.get("in", [])), "Outputs": tensors(x.get("out", []))}
    if param:
        layer["ParameterType"] = param
    layer["TacticValue"] = "0x0000000000000000"
    if _V >= (8, 6):
        layer["StreamId"] = 0
        layer["Metadata"] = x.get("meta", "")
    return layer


class EngineInspector:
    def __init__(self, engine: "ICudaEngine") -> None:
        self._engine = engine
        self.execution_context = None

    def get_engine_information(self, format) -> str:  # noqa: A002 - real argument name
        """TensorRT's text (tests/fakes/_layerinfo.py: the layout of the real exports), plus one key
        no real export has, ``FakeRuntimeDLACore`` (the runtime's DLA core, for tests)."""
        if os.environ.get("PLACETUNE_FAKE_TRT_INSPECTOR_FAIL") or _fault("UNREADABLE", set(self._engine._plan[
                "dla_requested"])):
            raise RuntimeError("fake: the engine inspector gave no layer information")
        e = self._engine
        detailed = e._plan["verbosity"] == "DETAILED"
        layers = [_inspector_layer(x) if detailed else x["name"] for x in e._plan["entries"]]
        if format == LayerInformationFormat.JSON:
            text = _layerinfo.render(layers, [t["name"] for t in e._plan["io"]])
            return text[:-1] + f',\n"FakeRuntimeDLACore": {json.dumps(e._runtime_core)}}}'
        return "\n".join(x if isinstance(x, str) else x["Name"] for x in layers)

    def get_layer_information(self, layer_index: int, format) -> str:  # noqa: A002
        return json.dumps(self._engine._plan["entries"][layer_index])


class IExecutionContext:
    def __init__(self, engine: "ICudaEngine") -> None:
        self._engine = engine
        self._addr: dict[str, int] = {}
        self._shapes = {t["name"]: tuple(t["shape"]) for t in engine._plan["io"]}
        self._shape_set = {t["name"]: not t["dynamic"] for t in engine._plan["io"]}
        self.profiler = None
        self.enqueue_emits_profile = True
        self._nvtx = ProfilingVerbosity[engine._plan.get("verbosity", "LAYER_NAMES_ONLY")]
        self._pending: list[tuple[str, float]] = []
        self._log = engine._log
        _gpu.contexts.add(self)

    @property
    def nvtx_verbosity(self):
        """The NVTX verbosity: the build's by default; a level above it is not taken (the real
        ``setNvtxVerbosity`` returns False, NvInferRuntime.h release/10.3:4315-4316)."""
        return self._nvtx

    @nvtx_verbosity.setter
    def nvtx_verbosity(self, level) -> None:
        order = ["NONE", "LAYER_NAMES_ONLY", "DETAILED"]
        built = self._engine._plan.get("verbosity", "LAYER_NAMES_ONLY")
        if order.index(ProfilingVerbosity(level).name) <= order.index(built):
            self._nvtx = ProfilingVerbosity(level)

    def set_tensor_address(self, name: str, memory: int) -> bool:
        if name not in self._shapes:
            self._log.error(f"3: [executionContext.cpp::setTensorAddress] Error Code 3: API Usage Error (tensor {name} not found)")
            return False
        self._addr[name] = int(memory)
        return True

    def get_tensor_address(self, name: str) -> int:
        return self._addr.get(name, 0)

    def set_input_shape(self, name: str, shape) -> bool:
        t = next((t for t in self._engine._plan["io"] if t["name"] == name), None)
        prof = t.get("profile") if t is not None else None
        if prof is not None and (len(shape) != len(prof[0]) or any(
                not lo <= int(d) <= hi for d, lo, hi in zip(shape, prof[0], prof[2]))):
            # TensorRT's words (IExecutionContext::setInputShape): the shape is outside the profile
            self._log.error(f"3: [executionContext.cpp::setInputShape::2068] Error Code 3: API Usage Error "
                            f"(Parameter check failed, condition: satisfyProfile. Set dimension "
                            f"[{','.join(str(int(d)) for d in shape)}] for tensor {name} does not satisfy any "
                            f"optimization profiles.)")
            return False
        self._shapes[name] = tuple(shape)
        self._shape_set[name] = True
        return True

    def get_tensor_shape(self, name: str):
        return self._shapes[name]

    @property
    def all_binding_shapes_specified(self) -> bool:
        return all(self._shape_set.values())

    def _run(self, stream_handle: int) -> bool:
        e = self._engine
        if _fault("EXEC_FAIL", set(e._plan["dla_requested"])):
            self._log.error("1: [cudlaUtils.cpp::submit::112] Error Code 1: DLA (Failed to submit program to DLA engine.)")
            return False
        for t in e._plan["io"]:
            ptr = self._addr.get(t["name"])
            if not ptr:
                self._log.error(f"3: [executionContext.cpp::enqueueV3] Error Code 3: API Usage Error (Parameter check "
                                f"failed, condition: address of tensor {t['name']} was not set)")
                return False
            if ptr not in _gpu.allocations:
                self._log.error(f"1: [runner.cpp] Error Code 1: Cuda Runtime (an illegal memory access was encountered at {ptr:#x})")
                return False
            if not self._shape_set[t["name"]]:
                self._log.error(f"3: Error Code 3: API Usage Error (input shape of {t['name']} not set)")
                return False
        if stream_handle == 0:
            self._log.warn("Using default stream in enqueueV3() may lead to performance issues due to additional "
                           "calls to cudaStreamSynchronize() by TensorRT to ensure correct synchronization. "
                           "Please use non-default stream instead.")
        if e._plan.get("onnx"):
            self._launch(stream_handle)
        else:
            _gpu.run(stream_handle, e._parts)
        if self.profiler is not None:
            rep = [(x["name"], x["ms"]) for x in e._plan["entries"]]
            if self.enqueue_emits_profile:
                for n, ms in rep:
                    self.profiler.report_layer_time(n, ms)
            else:
                self._pending.extend(rep)
        return True

    def execute_async_v3(self, stream_handle: int) -> bool:
        """``PLACETUNE_FAKE_TRT_ENQUEUE_MS``: host time each call takes, slept with the GIL released
        (the real call releases it: pyCore.cpp's ``gil_scoped_release``); ``PLACETUNE_FAKE_TRT_ENQUEUE_LOG``:
        a file each call appends ``<thread id> <start> <end> <NVTX verbosity>`` (perf_counter seconds; the
        context's NVTX level at the call) to."""
        t0 = time.perf_counter()
        host_ms = float(os.environ.get("PLACETUNE_FAKE_TRT_ENQUEUE_MS") or 0)
        if host_ms > 0:
            time.sleep(host_ms / 1000.0)
        ok = self._run(int(stream_handle))
        path = os.environ.get("PLACETUNE_FAKE_TRT_ENQUEUE_LOG")
        if path:
            with _gpu.lock, open(path, "a") as fh:
                fh.write(f"{threading.get_ident()} {t0:.6f} {time.perf_counter():.6f} {self._nvtx.name}\n")
        return ok

    def _launch(self, stream_handle: int) -> None:
        """The engine's work on the stream (``_fakegpu.launch``): the inputs read while it runs,
        the outputs its ONNX model evaluated on them (when first needed), written at its end."""
        import numpy as np

        e = self._engine
        ins = []
        for t in e._plan["io"]:
            if t["mode"] == "INPUT":
                dtype = np.dtype(_nptype(DataType[t["dtype"]]))
                ins.append((t, self._addr[t["name"]], dtype, self._shapes[t["name"]]))
        outs = [(t, self._addr[t["name"]], _nptype(DataType[t["dtype"]]))
                for t in e._plan["io"] if t["mode"] == "OUTPUT"]
        log = self._log

        def compute(inputs: dict) -> dict:
            import hashlib

            feeds, key = {}, [e._key]
            for t, ptr, dtype, shape in ins:
                fmt = t.get("format", "LINEAR")
                data = inputs[ptr][:_formats.nbytes(_MAJOR, fmt, tuple(shape), dtype.itemsize)]
                feeds[t["name"]] = _formats.unpack(_MAJOR, data, tuple(shape), t["dtype"], fmt, t.get("scale"))
                key.append((t["name"], hashlib.sha1(data).digest()))
            values = _MEMO.get(tuple(key))
            if values is None and os.environ.get("PLACETUNE_FAKE_TRT_NO_COMPUTE"):
                return {ptr: bytes(_gpu.allocations.get(ptr, 0)) for _, ptr, _ in outs}
            if values is None:
                try:
                    ev = e._evaluator()
                    got = ev.run(None, {k: v.astype(np.float32) if v.dtype == np.float16 else v
                                        for k, v in feeds.items()})
                except Exception as exc:  # noqa: BLE001 - reported like a CUDA error, the outputs garbage
                    log.error(f"1: [fake compute] Error Code 1: Cuda Runtime ({type(exc).__name__}: {exc})")
                    return {ptr: b"\xff" * _gpu.allocations.get(ptr, 0) for _, ptr, _ in outs}
                values = {n: e._round(n, np.asarray(v)) for n, v in zip(ev.output_names, got)}
                if len(_MEMO) > 64:
                    _MEMO.pop(next(iter(_MEMO)))
                _MEMO[tuple(key)] = values
            return {ptr: _formats.pack(_MAJOR, values[t["name"]], t["dtype"], t.get("format", "LINEAR"),
                                       t.get("scale")) for t, ptr, _ in outs}

        _gpu.launch(stream_handle, e._parts, [ptr for _, ptr, _, _ in ins], [ptr for _, ptr, _ in outs], compute)

    def report_to_profiler(self) -> bool:
        if self.profiler is None:
            return False
        for n, ms in self._pending:
            self.profiler.report_layer_time(n, ms)
        self._pending = []
        return True

    if _MAJOR < 10:
        def execute_async_v2(self, bindings, stream_handle: int) -> bool:
            for t, ptr in zip(self._engine._plan["io"], bindings):
                self._addr[t["name"]] = int(ptr)
            return self._run(int(stream_handle))


class ICudaEngine:
    def __init__(self, plan: dict, runtime_core: int, log: _Log) -> None:
        self._plan = plan
        self._runtime_core = runtime_core
        self._log = log
        self._io = {t["name"]: t for t in plan["io"]}
        self._latency_ms = sum(x["ms"] for x in plan["entries"]) + 0.01
        dla = f"DLA{runtime_core}" if runtime_core >= 0 else "GPU"
        self._parts = [("GPU", 0.01)] + [(dla if x["device"] == "DLA" else "GPU", x["ms"]) for x in plan["entries"]]
        self._key = hashlib.blake2b(json.dumps(plan, sort_keys=True).encode(), digest_size=16).hexdigest()
        self._ev = None

    def _evaluator(self):
        if self._ev is None and self._key in _EVALUATORS:
            self._ev = _EVALUATORS[self._key]
        if self._ev is None:
            import base64

            import onnx
            from onnx.reference import ReferenceEvaluator

            from . import _kernels, _plugins

            model = _float32(onnx.load_from_string(base64.b64decode(self._plan["onnx"])))
            plugins = [k for k in _plugins.KERNELS if any(n.op_type == k.__name__ and n.domain == k.op_domain
                                                          for n in model.graph.node)]
            self._ev = ReferenceEvaluator(model, new_ops=_kernels.KERNELS + plugins)
            _EVALUATORS[self._key] = self._ev
        return self._ev

    def _round(self, name: str, v):
        """The engine's precision applied to an output (the model is evaluated in float32)."""
        import numpy as np

        p = self._plan.get("precision")
        if v.dtype.kind != "f":
            return v
        if p == "fp16":
            return v.astype(np.float16).astype(np.float32)
        if p == "int8":
            r = self._plan.get("out_ranges", {}).get(name) if not self._plan.get("calibrated") else None
            r = float(r) if r else float(np.abs(v).max()) or 1.0
            scale = r / 127.0
            return (np.clip(np.round(v / scale), -127, 127) * scale).astype(v.dtype)
        return v

    @property
    def num_io_tensors(self) -> int:
        return len(self._plan["io"])

    def get_tensor_name(self, index: int) -> str:
        return self._plan["io"][index]["name"]

    def get_tensor_mode(self, name: str):
        return TensorIOMode[self._io[name]["mode"]]

    def get_tensor_shape(self, name: str):
        t = self._io[name]
        return tuple(-1 if t["dynamic"] else d for d in t["shape"])

    def get_tensor_profile_shape(self, name: str, profile_index: int):
        """[min, opt, max] of a dynamic input in the profile (TensorRT 8.5 on)."""
        prof = self._io[name].get("profile")
        if prof is None or profile_index != 0:
            self._log.error(f"3: [engine.cpp::getProfileShape] Error Code 3: API Usage Error (tensor {name} has no "
                            "profile shape)")
            return []
        return [tuple(d) for d in prof]

    def get_tensor_dtype(self, name: str):
        return DataType[self._io[name]["dtype"]]

    def get_tensor_format(self, name: str, profile_index: int = 0):
        return TensorFormat[self._io[name].get("format", "LINEAR")]

    def get_tensor_vectorized_dim(self, name: str, profile_index: int = 0) -> int:
        t = self._io[name]
        return _formats.layout(_MAJOR, t.get("format", "LINEAR"), tuple(t["shape"]))[0]

    def get_tensor_components_per_element(self, name: str, profile_index: int = 0) -> int:
        t = self._io[name]
        return _formats.layout(_MAJOR, t.get("format", "LINEAR"), tuple(t["shape"]))[1]

    def get_tensor_bytes_per_component(self, name: str, profile_index: int = 0) -> int:
        t = self._io[name]
        if _formats.layout(_MAJOR, t.get("format", "LINEAR"), tuple(t["shape"]))[0] < 0:
            return -1  # "-1 if the tensor is not vectorized"
        import numpy as np

        return int(np.dtype(_nptype(DataType[t["dtype"]])).itemsize)

    @property
    def num_layers(self) -> int:
        return len(self._plan["entries"])

    def create_execution_context(self) -> IExecutionContext:
        return IExecutionContext(self)

    def create_engine_inspector(self) -> EngineInspector:
        return EngineInspector(self)

    if _MAJOR < 10:
        @property
        def num_bindings(self) -> int:
            return len(self._plan["io"])

        def get_binding_index(self, name: str) -> int:
            return [t["name"] for t in self._plan["io"]].index(name)

        def binding_is_input(self, index: int) -> bool:
            return self._plan["io"][index]["mode"] == "INPUT"


def _float32(model):
    """The model with float16 tensors made float32 (the doubles compute in float32 and round the
    outputs to the engine's precision; numpy's float16 convolutions are very slow)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, numpy_helper

    g = model.graph
    for t in g.initializer:
        if t.data_type == TensorProto.FLOAT16:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32), t.name))
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT16:
            vi.type.tensor_type.elem_type = TensorProto.FLOAT
    for node in g.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT16:
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float32), a.t.name))
            elif node.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT16:
                a.i = TensorProto.FLOAT
    return model


class Runtime:
    def __init__(self, logger) -> None:
        logger = _global_logger(self, logger, "createInferRuntime")
        self._log = _Log(logger)
        self.DLA_core = -1

    @property
    def num_DLA_cores(self) -> int:  # noqa: N802
        return int(os.environ.get("PLACETUNE_FAKE_TRT_DLA_CORES", str(default_dla_cores())))

    def deserialize_cuda_engine(self, serialized_engine) -> ICudaEngine | None:
        data = bytes(serialized_engine)
        if not data.startswith(_PLAN_MAGIC):
            self._log.error("1: [stdArchiveReader.cpp] Error Code 1: Serialization (Serialization assertion "
                            "magicTagRead == kMAGIC_TAG failed.Magic tag does not match)")
            return None
        plan = json.loads(data[len(_PLAN_MAGIC):].decode())
        if plan["version"] != __version__:
            self._log.error(f"6: The engine plan file is not compatible with this version of TensorRT, expecting "
                            f"library version {__version__} got {plan['version']}, please rebuild.")
            return None
        if not _gpu.context_stack:
            self._log.error("1: [cudaDriverHelpers.cpp] Error Code 1: Cuda Driver (invalid device context)")
            return None
        for name in plan.get("plugins", []):
            if not any(n == name for n, _ in _PLUGIN_CREATORS):  # as published for 8.x (InstanceNormalization_TRT, ScatterND)
                self._log.error(f"3: getPluginCreator could not find plugin: {name} version: 1")
                self._log.error("1: [pluginV2Runner.cpp::load::308] Error Code 1: Serialization (Serialization "
                                "assertion creator failed.Cannot deserialize plugin since corresponding "
                                "IPluginCreator not found in Plugin Registry)")
                self._log.error("4: [runtime.cpp::deserializeCudaEngine::76] Error Code 4: Internal Error "
                                "(Engine deserialization failed.)")
                return None
        if _fault("PLAN_MODEL_WARN", set(plan.get("dla_requested") or [])):
            self._log.warn("Using an engine plan file across different models of devices is not recommended and "
                           "is likely to affect performance or even cause errors.")
        core = -1
        if plan["dla_core"] >= 0:
            core = self.DLA_core if 0 <= self.DLA_core < self.num_DLA_cores else 0
        return ICudaEngine(plan, core, self._log)


# ------------------------------------------------------------------------------ the real API, no more
_api.enforce(__name__, _TABLE)
