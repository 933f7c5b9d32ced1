"""ONNX forms an older TensorRT ONNX parser imports without a word as another network than the model.

An attribute or input added in ONNX opsets 13-18 that an importer of onnx-tensorrt does not read is
not refused: the parser builds the op as if it were absent, the engine builds and runs, and its
timing and placement are of another network. :data:`MISREADS` lists each such form with the first
TensorRT whose parser reads it (None: no published parser does) and the source read. Sources:
onnx-tensorrt 8.5-GA and 8.6-GA ``builtin_op_importers.cpp`` (lines ``8.5:N``, ``8.6:N``),
10.0-GA ``onnxOpImporters.cpp`` (``10.0:N``), its ``docs/operators.md``; 10.1-GA and main (May 2024)
read none of the forms marked None either.

What the old parsers refuse loudly (a parser error, so no silent network) is not listed here:
Pad's ``axes`` input (8.5:3270-3274 and 8.6 ``ASSERT(false && "TensorRT does not support dynamic axes
for pad!")``), LayerNormalization and GroupNormalization on 8.5 (no importer; 8.6:1719, 8.6:2270
read ``epsilon``, ``num_groups``, ``axis`` and ``stash_type`` as 10.0 does), Mish on 8.5/8.6 and
Col2Im, CenterCropPad and BitwiseNot on every one of them (no importer: "No importer registered").

``onnx.version_converter`` takes only the Reduce forms down to opset 17: it has no Split 18->17 or
Shape 15->14 adapter and refuses Resize's ``antialias``, non-trivial ``axes`` and
``keep_aspect_ratio_policy`` and the Scatter ops' ``reduction`` (checked with onnx 1.x here), so each
form names its own fix; the Reduce forms' opset-17 conversion is not offered for a model with an
opset-18 Split, which the converter cannot take down whatever its sizes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import onnx

__all__ = ["MISREADS", "Misread", "later_rules_hint", "old_parser_misread"]

_REDUCE = ("ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin",
           "ReduceProd", "ReduceSum", "ReduceSumSquare")
_TO_17 = "convert the model to opset 17 (onnx.version_converter.convert_version(model, 17)) or export it with opset 17"


class _Graph:
    """The node lookups a rule needs: attributes, and (inferred once, on demand) the input shapes."""

    def __init__(self, proto: onnx.ModelProto) -> None:
        self.proto = proto
        self._shapes: dict[str, list[int | None]] | None = None

    def shape(self, name: str) -> list[int | None] | None:
        if self._shapes is None:
            try:
                inferred = onnx.shape_inference.infer_shapes(self.proto).graph
            except Exception:  # noqa: BLE001 - an uninferable model: every shape unknown
                inferred = self.proto.graph
            self._shapes = {}
            for vi in [*inferred.input, *inferred.value_info, *inferred.output]:
                if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
                    self._shapes[vi.name] = [d.dim_value if d.HasField("dim_value") else None
                                             for d in vi.type.tensor_type.shape.dim]
            for t in self.proto.graph.initializer:
                self._shapes[t.name] = list(t.dims)
        return self._shapes.get(name)


def _attr(node: onnx.NodeProto, name: str):
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return None


def _given(node: onnx.NodeProto, i: int) -> bool:
    return len(node.input) > i and node.input[i] != ""


def _uneven_split(node: onnx.NodeProto, g: _Graph) -> str | None:
    n = _attr(node, "num_outputs")
    if n is None or _given(node, 1):
        return None
    shape = g.shape(node.input[0])
    axis = _attr(node, "axis") or 0
    size = shape[axis] if shape and -len(shape) <= axis < len(shape) else None
    if size is not None and size % n == 0:
        return None  # even chunks: floor and ceiling agree
    if size is None:
        return f"num_outputs={n} on an axis of unknown size"
    chunk = -(-size // n)
    return (f"num_outputs={n} on a size of {size} (the model's chunks: {[chunk] * (n - 1) + [size - chunk * (n - 1)]}; "
            f"the parser's: {[size // n] * n})")


def _antialias(node: onnx.NodeProto, g: _Graph) -> str | None:
    return "antialias=1" if _attr(node, "antialias") else None


def _aspect(node: onnx.NodeProto, g: _Graph) -> str | None:
    policy = _attr(node, "keep_aspect_ratio_policy")
    policy = policy.decode() if isinstance(policy, bytes) else policy
    return f"keep_aspect_ratio_policy={policy!r}" if policy not in (None, "stretch") and _given(node, 3) else None


def _resize_axes(node: onnx.NodeProto, g: _Graph) -> str | None:
    axes = _attr(node, "axes")
    if axes is None:
        return None
    shape = g.shape(node.input[0])
    rank = len(shape) if shape is not None else None
    if rank is not None and [a % rank for a in axes] == list(range(rank)):
        return None  # every axis in order: what the parser does
    return f"axes={list(axes)}"


def _reduction(node: onnx.NodeProto, g: _Graph) -> str | None:
    r = _attr(node, "reduction")
    r = r.decode() if isinstance(r, bytes) else r
    return f"reduction={r!r}" if r not in (None, "none") else None


def _shape_slice(node: onnx.NodeProto, g: _Graph) -> str | None:
    given = [f"{k}={_attr(node, k)}" for k in ("start", "end") if _attr(node, k) is not None]
    return ", ".join(given) or None


def _axes_input(node: onnx.NodeProto, g: _Graph) -> str | None:
    return "its axes as an input" if _given(node, 1) else None


def _noop(node: onnx.NodeProto, g: _Graph) -> str | None:
    noop = _attr(node, "noop_with_empty_axes") == 1
    return "noop_with_empty_axes=1 and no axes" if noop and not _given(node, 1) and _attr(node, "axes") is None \
        else None


@dataclass(frozen=True)
class Misread:
    """One ONNX form an older parser ignores: ``ops`` given ``form`` (``found(node, graph)`` says how, or None)
    are imported as ``effect`` by every TensorRT before ``read_from`` (None: by every published parser)."""

    ops: tuple[str, ...]
    form: str
    found: Callable[[onnx.NodeProto, _Graph], str | None]
    read_from: int | None
    effect: str
    fix: str
    source: str


#: each silent misread of TensorRT's ONNX parser (opsets 13-18), with where it was read
MISREADS: tuple[Misread, ...] = (
    Misread(("ReduceL1", "ReduceL2", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSumSquare"),
            "axes input (opset 18)", _axes_input, 10, "it reduces over every axis", _TO_17,
            "8.5:3604-3680 and 8.6:3638-3714 call reduceTensor(ctx, node, input, op) without the axes; "
            "8.5 onnx2trt_utils.cpp:1698-1719 takes the axes attribute or every axis; 10.0:4308-4311 passes "
            "inputs.at(1). ReduceSum (and ReduceLogSum/LogSumExp through it) passes it on (8.5:3665-3668)"),
    Misread(_REDUCE, "noop_with_empty_axes (opset 13/18)", _noop, 10, "it reduces over every axis (the model: the "
            "identity)", _TO_17, "8.5/8.6 reduceTensor never reads it; 10.0 importerUtils.cpp:1294, 1322 does"),
    Misread(("Split",), "num_outputs (opset 18)", _uneven_split, 10, "it cuts equal floor-sized chunks",
            "give the Split its sizes as its second input (split) or target TensorRT 10 (trt_version); "
            "onnx.version_converter has no Split 18->17 adapter",
            "8.5:4704 and 8.6:4660 take no split input as equal parts: floorDiv(size, outputs) for every chunk "
            "(8.5:4737, 8.6:4693), num_outputs never read; 10.0:5502-5524 ceiling chunks and a smaller last one"),
    Misread(("Resize",), "antialias (opset 18)", _antialias, None, "it resizes without the antialiasing filter",
            "export it with antialias off (torch: F.interpolate(..., antialias=False)); onnx.version_converter "
            "refuses it", "no importer reads it (8.5:3698-3874, 8.6:3732-3908, 10.0:4357-4614; 10.0 "
            "docs/operators.md: 'Antialiasing is not supported')"),
    Misread(("Resize",), "keep_aspect_ratio_policy (opset 18)", _aspect, None, "it stretches to the sizes input",
            "export it with the sizes the policy gives (policy stretch); onnx.version_converter refuses it",
            "no importer reads it (10.0 docs/operators.md: 'Supported aspect ratio policy: stretch')"),
    Misread(("Resize",), "axes (opset 18)", _resize_axes, 10, "it reads the scales or sizes as if given for every "
            "axis in order", "export it with scales or sizes for every axis (no axes attribute) or target TensorRT "
            "10 (trt_version); onnx.version_converter refuses it", "8.5/8.6 Resize never reads axes; 10.0:4382-4400"),
    Misread(("ScatterElements",), "reduction (opset 16/18)", _reduction, 10, "it overwrites (reduction 'none')",
            "target TensorRT 10 (trt_version), whose parser imports it as a plugin; onnx.version_converter "
            "refuses it", "8.5:4450-4457, 8.6:4406-4413 addScatterLayer without it; 10.0:5159-5163 reads it"),
    Misread(("ScatterND",), "reduction (opset 16/18)", _reduction, None, "it overwrites (reduction 'none')",
            "rewrite it without reduction: TensorRT 10's parser refuses it ('Attribute reduction is not "
            "supported'); onnx.version_converter refuses it",
            "8.5:4445-4448, 8.6:4401-4404 never read it; 10.0:5115 refuses it (a parser error)"),
    Misread(("Shape",), "start/end (opset 15)", _shape_slice, 10, "it gives the whole shape",
            "replace it with Shape followed by Slice (opset 14 form) or target TensorRT 10 (trt_version); "
            "onnx.version_converter has no Shape 15->14 adapter",
            "8.5:4478-4484, 8.6:4434-4440 addShape(input) only; 10.0:5199-5200 reads start and end"),
)
_BY_OP: dict[str, list[Misread]] = {}
for _m in MISREADS:
    for _op in _m.ops:
        _BY_OP.setdefault(_op, []).append(_m)


def _major(trt_version: str) -> int | None:
    try:
        return int(str(trt_version).split(".")[0])
    except ValueError:
        return None


def _fix(rule: Misread, proto: onnx.ModelProto) -> str:
    """The rule's fix; the opset-17 conversion is not offered for a model onnx's converter cannot take
    down (an opset-18 Split: it has no Split 18->17 adapter, whatever the sizes: ``num_outputs`` or the
    sizes as an input, as Ultralytics' exports give them)."""
    if rule.fix != _TO_17:
        return rule.fix
    opset = max((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), default=0)
    split = next((n for n in proto.graph.node if n.op_type == "Split" and n.domain in ("", "ai.onnx")), None)
    if split is None or opset < 18:
        return rule.fix
    return (f"export it with opset 17 (Ultralytics: export(format='onnx', opset=17) with your other options; "
            f"onnx.version_converter cannot convert this model: it has no Split 18->17 adapter, and node "
            f"{split.name[:80]!r} is an opset-18 Split)")


def later_rules_hint(proto: onnx.ModelProto | None, trt_version: str) -> str:
    """For a study simulated under the DLA rules of a TensorRT whose parser misreads the model: the
    rules of JetPack 6.1's TensorRT 10.3, whose parser reads it, if the board has it ("" otherwise)."""
    major = _major(trt_version)
    if major is None or major >= 10 or old_parser_misread(proto, "10.3") is not None:
        return ""
    return ("; or, for a Jetson Orin with JetPack 6.1 or later (TensorRT 10.3, whose parser reads it), "
            "give --trt-version 10.3")


def old_parser_misread(proto: onnx.ModelProto | None, trt_version: str) -> str | None:
    """Why the ONNX parser of TensorRT ``trt_version`` would build another network than the model, in one
    line naming the first node of :data:`MISREADS` it misreads and the fix; None when the parser imports
    every node as written (as far as the table tells) or there is no graph to check."""
    major = _major(trt_version)
    if major is None or proto is None:
        return None
    g = _Graph(proto)
    for node in proto.graph.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        for rule in _BY_OP.get(node.op_type, ()):
            if rule.read_from is not None and major >= rule.read_from:
                continue
            what = rule.found(node, g)
            if what:
                later = (f"TensorRT {rule.read_from} reads it" if rule.read_from is not None else
                         "no published TensorRT ONNX parser reads it")
                return (f"node {node.name[:80]!r} ({node.op_type}) has {what}, which the ONNX parser of TensorRT "
                        f"{trt_version} ignores: {rule.effect}, a network other than the model ({later}); "
                        f"{_fix(rule, proto)}")
    return None
