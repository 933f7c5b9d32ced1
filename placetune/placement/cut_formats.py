"""The type and memory format of each tensor a pipeline passes between a GPU and a DLA engine.

A pipeline segment's cut tensors are engine I/O. Left at TensorRT's default (FP32, linear) a
DLA engine's I/O needs GPU reformat layers at every cut: the DLA reads and writes FP16 or INT8
in its own formats ("kCHW16 (FP16), and kCHW32 (INT8) formats are common on DLA & GPU; however,
the default formats are not the same", DLA-SW FAQ). So a cut tensor that a DLA engine writes
or reads gets the DLA's native feature format on **both** sides (the producer's output and every
consumer's input must agree byte for byte):

* INT8 builds (TensorRT 8.x / 10.x): ``INT8`` + ``kCHW32`` (the DLA's native INT8 feature format);
* FP16 builds, and FP16 models on strongly typed TensorRT 11: ``HALF`` + ``kCHW16``;
* INT8 builds of an explicitly quantized (Q/DQ) model: ``HALF`` + ``kCHW16`` too. An INT8 network
  I/O tensor needs a scale, and TensorRT takes none but the Q/DQ nodes' in such a network ("Setting
  dynamic range is only allowed when there are no Q/DQ layers in the Network"; trtexec sets no
  range on it, sampleEngines.cpp hasQDQLayers): a float cut tensor asked for as INT8 cannot build.

Only floating-point tensors qualify (an integer or boolean cut tensor keeps its own type: a
``HALF`` I/O type would convert it), and only 4-D (NCHW) ones: the vectorised formats put the vector on the third-to-last
dimension, which is C only in NCHW. A tensor that is also a network output stays FP32 linear
(the application reads it), and so does every cut of an FP32 build (the DLA runs no FP32).
References: ``NvInferRuntimeBase.h`` ``TensorFormat`` comments (release/10.3); DESIGN notes in
``../shared/reference/tensorrt-dla.md`` §3.3.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

if TYPE_CHECKING:
    from placetune.placement.cut import SegmentModel

__all__ = ["CutFormat", "cut_formats", "plan_cut_formats", "refused_by_build", "reformats_at_cuts",
           "trtexec_io_formats"]

#: trtexec ``--inputIOFormats`` spellings (sampleOptions.cpp ``stringToValue<TensorFormat>`` / types)
_TRTEXEC_TYPE = {"FLOAT": "fp32", "HALF": "fp16", "INT8": "int8"}
_TRTEXEC_FORMAT = {"LINEAR": "chw", "CHW16": "chw16", "CHW32": "chw32", "DLA_LINEAR": "dla_linear"}


@dataclass(frozen=True)
class CutFormat:
    """The agreed I/O type and format of one cut tensor.

    Attributes:
        tensor: the tensor's name (an output of ``producer``, an input of each of ``consumers``).
        dtype: a ``tensorrt.DataType`` member name: ``HALF``, ``INT8`` or ``FLOAT``.
        format: a ``tensorrt.TensorFormat`` member name: ``CHW16``, ``CHW32`` or ``LINEAR``.
        shape: the tensor's static shape.
        producer: the index of the segment that writes it.
        consumers: the indexes of the segments that read it.
    """

    tensor: str
    dtype: str
    format: str
    shape: tuple[int, ...]
    producer: int
    consumers: tuple[int, ...]

    @property
    def trtexec(self) -> str:
        """trtexec's spelling, e.g. ``int8:chw32`` (for ``--inputIOFormats`` / ``--outputIOFormats``)."""
        return f"{_TRTEXEC_TYPE[self.dtype]}:{_TRTEXEC_FORMAT[self.format]}"

    @property
    def nbytes(self) -> int:
        """Bytes of one buffer of it: the vector dimension (C) padded to 16 or 32 components."""
        vec = {"CHW16": 16, "CHW32": 32}.get(self.format, 1)
        size = {"HALF": 2, "INT8": 1}.get(self.dtype, 4)
        dims = list(self.shape)
        if vec > 1:
            dims[-3] = -(-dims[-3] // vec) * vec
        count = 1
        for d in dims:
            count *= max(int(d), 1)
        return count * size

    def as_job(self) -> list[str]:
        """``[dtype, format]``: what a worker engine spec's ``io_formats`` holds per tensor."""
        return [self.dtype, self.format]


@dataclass(frozen=True)
class _Seg:
    """What the choice reads of a segment: its device, its input names, its output shapes and the
    numpy names of its outputs' types (None where unknown)."""

    index: int
    device: str
    inputs: tuple[str, ...]
    outputs: dict[str, tuple[int, ...] | None]
    dtypes: dict[str, str | None] | None = None


#: the cut tensors' types that keep their own type (numpy names, as the plan's boundary lists them)
_NOT_FLOAT = {"bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"}


def _from_model(seg: "SegmentModel") -> _Seg:
    from placetune.placement.cut import tensor_infos

    shapes: dict[str, tuple[int, ...] | None] = {}
    for vi in seg.proto.graph.output:
        dims = tuple(int(d.dim_value) if d.HasField("dim_value") else -1 for d in vi.type.tensor_type.shape.dim)
        shapes[vi.name] = dims if all(d > 0 for d in dims) else None
    types = {t["name"]: t["dtype"] for t in tensor_infos(list(seg.proto.graph.output))}
    return _Seg(seg.index, seg.device, tuple(seg.inputs), {t: shapes.get(t) for t in seg.outputs},
                {t: types.get(t) for t in seg.outputs})


def _choose(segs: list[_Seg], precision: str, strongly_typed: bool, outs: set[str],
            qdq: bool = False) -> dict[str, CutFormat]:
    producer = {t: s for s in segs for t in s.outputs}
    readers: dict[str, list[_Seg]] = {}
    for s in segs:
        for t in s.inputs:
            if t in producer:
                readers.setdefault(t, []).append(s)
    found: dict[str, CutFormat] = {}
    for t, consumers in readers.items():
        p = producer[t]
        if t in outs or all(x.device == "GPU" for x in [p, *consumers]):
            continue
        shape = p.outputs.get(t)
        if shape is None or len(shape) != 4:
            continue
        dtype_of = (p.dtypes or {}).get(t)
        if dtype_of is not None and dtype_of.lower() in _NOT_FLOAT:  # INT8 of a Q node, INT32/INT64, BOOL: kept
            continue
        if strongly_typed:  # the segment models are made FP16 for an fp16 build; INT8 needs Q/DQ
            if precision != "fp16":
                continue
            dtype, fmt = "HALF", "CHW16"
        elif precision == "int8" and not qdq:
            dtype, fmt = "INT8", "CHW32"
        elif precision == "int8":  # a Q/DQ model: no scale for an INT8 cut tensor, FP16 is scale-free
            dtype, fmt = "HALF", "CHW16"
        elif precision == "fp16":
            dtype, fmt = "HALF", "CHW16"
        else:
            continue
        found[t] = CutFormat(t, dtype, fmt, tuple(shape), p.index, tuple(c.index for c in consumers))
    return found


def cut_formats(cuts: Iterable["SegmentModel"], precision: str, *, strongly_typed: bool = False,
                network_outputs: Iterable[str] = (), qdq: bool = False) -> dict[str, CutFormat]:
    """The cut tensors of a pipeline that get a DLA-native type and format, by name.

    Args:
        cuts: the pipeline's segments (:func:`placetune.placement.cut.cut`), in order.
        precision: the build precision: ``int8``, ``fp16`` or ``fp32``.
        strongly_typed: TensorRT 11, where types come from the model: an ``fp16`` build's
            segment models are made FP16 (``kCHW16`` then), other precisions keep the default.
        network_outputs: the model's outputs (they stay FP32 linear).
        qdq: the model is explicitly quantized (Q/DQ nodes): an ``int8`` build's cuts get
            ``HALF`` + ``kCHW16``, which needs no scale.

    Returns:
        tensor name -> :class:`CutFormat`; cuts that keep TensorRT's default are absent.

    Example:
        >>> from placetune import Model, Placement
        >>> from placetune.placement.cut import cut
        >>> m = Model.load("seed-block")
        >>> p = Placement(m, {n: "GPU" if n == "/conv1/Conv" else "DLA0" for n in m.names})
        >>> f = cut_formats(cut(m, p), "int8")["/conv1/Conv_output_0"]
        >>> f.dtype, f.format, f.trtexec, f.producer, f.consumers
        ('INT8', 'CHW32', 'int8:chw32', 0, (1,))
    """
    return _choose([_from_model(c) for c in cuts], precision, strongly_typed, set(network_outputs), qdq)


def plan_cut_formats(engines: Iterable[Mapping[str, Any]], precision: str, *, strongly_typed: bool = False,
                     network_outputs: Iterable[str] = (), qdq: bool = False,
                     measured: Any = None) -> dict[str, CutFormat]:
    """:func:`cut_formats` of an exported pipeline plan's engines (each with ``index``, ``device``
    and its boundary ``inputs`` / ``outputs`` as ``{"name", "shape"}``); {} when the plan does
    not list its boundary tensors. ``measured``: the cut tensors the measured pipeline was given
    formats for (a mapping or list of their names, the measurement's ``extra["cut_formats"]``, a
    plan's ``measured["cut_formats"]``): only those keep one, so a pipeline timed with TensorRT's
    default I/O (the native formats refused by its build, or turned off) is exported as timed;
    None (not recorded: a simulated or older measurement): every cut at a DLA engine."""
    segs = []
    for i, e in enumerate(engines):
        outs: dict[str, tuple[int, ...] | None] = {}
        types: dict[str, str | None] = {}
        for t in e.get("outputs") or []:
            shape = t.get("shape") if isinstance(t, Mapping) else None
            ok = isinstance(shape, list) and all(isinstance(d, int) and d > 0 for d in shape)
            name = str(t.get("name") if isinstance(t, Mapping) else t)
            outs[name] = tuple(shape) if ok else None
            dtype = t.get("dtype") if isinstance(t, Mapping) else None
            types[name] = str(dtype) if dtype else None
        ins = tuple(str(t.get("name") if isinstance(t, Mapping) else t) for t in e.get("inputs") or [])
        segs.append(_Seg(int(e.get("index", i)), str(e.get("device", "GPU")), ins, outs, types))
    chosen = _choose(segs, precision, strongly_typed, set(network_outputs), qdq)
    if isinstance(measured, (Mapping, list, tuple)):
        names = {str(t) for t in measured}
        chosen = {t: f for t, f in chosen.items() if t in names}
    return chosen


def trtexec_io_formats(names: Iterable[str], formats: Mapping[str, CutFormat], default: str = "fp32:chw") -> str | None:
    """The ``--inputIOFormats`` / ``--outputIOFormats`` value for an engine whose I/O tensors are
    ``names`` in the engine's order (trtexec applies the list in order, one entry per tensor);
    None when none of them has a cut format (trtexec's default then)."""
    names = list(names)
    if not any(n in formats for n in names):
        return None
    return ",".join(formats[n].trtexec if n in formats else default for n in names)


def refused_by_build(result: Mapping[str, Any] | None, specs: list[Mapping[str, Any]]) -> bool:
    """Whether a pipeline worker job's build failed at a segment engine that was given cut formats. Any other
    failure (the reference engine, a segment with TensorRT's default I/O) is not the formats': built
    again without them it fails the same way after rebuilding every segment (new cache keys), and a
    failure that does not repeat would be recorded as the formats' fault, measured with FP32 linear cuts."""
    if not result or result.get("status") != "build_failed":
        return False
    try:
        k = int(result["failed_engine"])
    except (KeyError, TypeError, ValueError):
        return True  # a reply that does not say which engine failed: the formats may be why
    return 0 <= k < len(specs) and bool(specs[k].get("io_formats"))


def reformats_at_cuts(layers: Sequence[Any] | None, formats: Mapping[str, CutFormat],
                      profile: Iterable[Sequence[Any]] = ()) -> list[dict[str, Any]]:
    """The GPU reformats a built engine still runs at its cut tensors given a native format:
    ``{"tensor", "layer", "ms"}`` per Reformat layer of its layer information (``layers``, the
    engine inspector's DETAILED ``Layers``) that reads or writes one of ``formats``' tensors;
    ``ms`` from its per-layer ``profile`` (``[name, ms]``; None when not profiled).

    TensorRT treats a kCHW16 / kCHW32 I/O tensor as the DLA's native format only "When running
    network on DLA and the build option kGPU_FALLBACK is not specified" (``ITensor::setAllowedFormats``,
    include/NvInfer.h release/10.3:413-416); with GPU fallback nothing promises that the DLA engine
    reads it without a GPU reformat. A Reformat layer names the engine's I/O tensor among its
    ``Inputs`` (an input reformatted) or ``Outputs`` (an output), the other side ``Reformatted ...``
    (real layer information: tests/data/trt_corpus/trex-a100-resnet18-fp16-layerinfo)."""
    times = {str(row[0]): float(row[1]) for row in profile if len(row) >= 2}
    found: list[dict[str, Any]] = []
    for layer in layers or []:
        if not isinstance(layer, Mapping):
            continue
        name = str(layer.get("Name") or "")
        if not name.startswith("Reformatting CopyNode"):  # a GPU reformat (not the DLA's own "to/from nvm" copies)
            continue
        ends = [t.get("Name") for key in ("Inputs", "Outputs") for t in layer.get(key) or [] if isinstance(t, Mapping)]
        for tensor in dict.fromkeys(str(t) for t in ends if t in formats):
            found.append({"tensor": tensor, "layer": name, "ms": times.get(name)})
    return found
