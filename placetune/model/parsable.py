"""What TensorRT's ONNX parser refuses, refused when a model is loaded (never tuned as if valid).

Each rule has a published source (onnx/onnx-tensorrt, release 10.1 GA unless said, and the 8.5/8.6
branches where they differ):

* the default-domain opset: ``ModelImporter::importModel`` supports ONNX graphs of opset 7 or
  later (older ones are "not guaranteed to work"; pre-opset-7 broadcasting is refused in
  ``importerUtils.cpp``); an opset newer than the installed ``onnx`` knows is refused too (its
  ops cannot be checked or their shapes inferred). The parser itself does not refuse a newer
  opset than it documents (8.5/8.6: up to 17; 10.0: 9 to 20; 11.x: up to 25, NVIDIA's ONNX opset
  guide), it fails on the ops it cannot import: that is left to the build;
* the types of graph inputs and outputs: ``convertDtype`` (importerUtils.cpp) converts DOUBLE,
  FLOAT, FLOAT16, BFLOAT16, INT8, UINT8, INT32, INT64, BOOL, FLOAT8E4M3FN and INT4 (8.5/8.6: no
  BFLOAT16, FP8 or INT4); any other type (STRING, COMPLEX64/128, INT16, UINT16/32/64, the other
  FLOAT8s, UINT4, an undefined type) fails ``importInput`` or the output marking;
* the rank of a graph input: ``convertOnnxDims`` refuses more than ``nvinfer1::Dims::MAX_DIMS``
  (8) dimensions;
* tensor names: ``ImporterContext::registerTensor`` throws "ONNX graph has duplicate tensor
  name" for a tensor produced twice (also ONNX's own single-assignment rule);
* graph outputs: an output no node, input or initializer produces cannot be marked (ONNX's
  checker: "Graph output ... is not an output of any node"); an output or an input listed twice
  (ONNX's checker: "'x' has been used as graph input names multiple times"; an engine's I/O
  tensors are looked up by name, so two outputs of one name are one binding, not two); a graph with no
  output at all builds no engine ("Network must have at least one output", TensorRT's builder, as
  NVIDIA/TensorRT#183 quotes it);
* operands the parser needs as build-time constants (docs/operators.md): CumSum's ``axis``,
  Dropout's ``training_mode``, Pad's ``axes``, the Reduce ops' ``axes``, Slice's ``axes``,
  Squeeze's and Unsqueeze's ``axes`` and OneHot's ``depth``; one computed from a network input
  (not only from its shape) is refused;
* node attributes: each at most once and of the type its op's schema declares (ONNX's checker);
* a QuantizeLinear or DequantizeLinear whose zero point (an initializer or a Constant) holds a value other
  than 0: "TensorRT only supports symmetric quantization. The zero point for the
  QuantizeLinear/DequantizeLinear operator must be all zeros." (``QuantDequantLinearHelper``, 8.6-GA
  builtin_op_importers.cpp:1220, 10.1-GA onnxOpImporters.cpp:1492); 10.16 and 11.x import one only with the
  parser flag kENABLE_UINT8_AND_ASYMMETRIC_QUANTIZATION_DLA (``NvOnnxParser.h``: off by default), which
  placetune's builds do not set.

Only the main graph is checked (a subgraph's names are scoped); what the parser accepts with a
warning (e.g. DOUBLE inputs, cast to FLOAT) is accepted.
"""

from __future__ import annotations

from typing import Any

import onnx

from placetune.errors import ModelError

__all__ = ["MAX_DIMS", "MAX_OPSET", "MIN_OPSET", "NEWER_IO_TYPES", "refuse_for_version", "refuse_unparsable"]

#: the oldest default-domain opset TensorRT's ONNX parser supports
MIN_OPSET = 7
#: the newest default-domain opset the installed onnx knows (shape inference, op schemas)
MAX_OPSET = onnx.defs.onnx_opset_version()
#: ``nvinfer1::Dims::MAX_DIMS``: the most dimensions a TensorRT tensor has
MAX_DIMS = 8

_T = onnx.TensorProto
#: the ONNX types ``convertDtype`` converts, as of TensorRT 10.1 (every other type is refused)
PARSER_TYPES = frozenset({_T.DOUBLE, _T.FLOAT, _T.FLOAT16, _T.BFLOAT16, _T.INT8, _T.UINT8, _T.INT32, _T.INT64,
                          _T.BOOL, _T.FLOAT8E4M3FN, _T.INT4})

#: op -> (input position, operand name) the parser needs as a build-time constant (docs/operators.md)
CONSTANT_OPERANDS: dict[str, tuple[int, str]] = {
    "CumSum": (1, "axis"), "Dropout": (2, "training_mode"), "Pad": (3, "axes"), "Slice": (3, "axes"),
    "Squeeze": (1, "axes"), "Unsqueeze": (1, "axes"), "OneHot": (1, "depth"),
    **{f"Reduce{op}": (1, "axes") for op in ("L1", "L2", "LogSum", "LogSumExp", "Max", "Mean", "Min", "Prod",
                                             "Sum", "SumSquare")},
}
#: ops whose output depends on a tensor's shape only: static after placetune fixes the input shapes
_SHAPE_ONLY = frozenset({"Shape", "Size"})


def _type_name(elem_type: int) -> str:
    try:
        return _T.DataType.Name(elem_type)
    except ValueError:
        return f"type {elem_type}"


def _opset(proto: onnx.ModelProto) -> None:
    for op in proto.opset_import:
        if op.domain in ("", "ai.onnx") and not MIN_OPSET <= op.version <= MAX_OPSET:
            why = (f"TensorRT's ONNX parser supports opset {MIN_OPSET} and later" if op.version < MIN_OPSET else
                   f"the installed onnx knows opsets up to {MAX_OPSET}")
            raise ModelError(f"the model's ONNX opset is {op.version}; {why}: convert the model "
                             "(onnx.version_converter) or export it again with a supported opset")


def _io(graph: onnx.GraphProto, initializers: set[str]) -> None:
    for kind, values in (("input", [i for i in graph.input if i.name not in initializers]), ("output", graph.output)):
        for vi in values:
            elem = vi.type.tensor_type.elem_type if vi.type.HasField("tensor_type") else 0
            if elem not in PARSER_TYPES:
                what = _type_name(elem) if elem else "no tensor type"
                raise ModelError(f"graph {kind} {vi.name[:80]!r} has {what}, which TensorRT's ONNX parser cannot "
                                 "import (it takes FLOAT, FLOAT16, BFLOAT16, DOUBLE, INT8, UINT8, INT32, INT64, BOOL, "
                                 "FP8 and INT4 tensors)")
            rank = len(vi.type.tensor_type.shape.dim)
            if kind == "input" and rank > MAX_DIMS:
                raise ModelError(f"graph input {vi.name[:80]!r} has {rank} dimensions; TensorRT tensors have at "
                                 f"most {MAX_DIMS}")


def _names(graph: onnx.GraphProto, initializers: set[str]) -> set[str]:
    """Every tensor the main graph defines; refuses one defined twice."""
    for kind, values in (("input", graph.input), ("output", graph.output)):
        seen: set[str] = set()
        for vi in values:
            if vi.name in seen:
                raise ModelError(f"graph {kind} {vi.name[:80]!r} is listed twice in graph.{kind}: an engine's "
                                 f"{kind}s are looked up by name, one tensor each; drop the second entry")
            seen.add(vi.name)
    defined = {i.name for i in graph.input} | initializers
    for node in graph.node:
        for out in node.output:
            if not out:
                continue
            if out in defined:
                raise ModelError(f"tensor {out[:80]!r} is produced twice (node {node.name[:80]!r} writes a name "
                                 "another node, input or initializer has): TensorRT's ONNX parser refuses duplicate "
                                 "tensor names; give every tensor a unique name")
            defined.add(out)
    if not graph.output:
        raise ModelError("the ONNX graph has no output (graph.output is empty): TensorRT builds no engine of a "
                         "network without one (\"Network must have at least one output\"); list the network's "
                         "results in graph.output")
    for out in graph.output:
        if out.name not in defined:
            raise ModelError(f"graph output {out.name[:80]!r} is produced by no node, input or initializer: "
                             "TensorRT cannot mark it as an output; drop it from graph.output or produce it")
    return defined


def _constant_operands(graph: onnx.GraphProto, initializers: set[str]) -> None:
    """Refuse an operand the parser needs as a build-time constant that is computed from a network input."""
    dynamic = {i.name for i in graph.input if i.name not in initializers}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        if node.op_type not in _SHAPE_ONLY:
            for x in set(node.input):
                consumers.setdefault(x, []).append(node)
    todo = list(dynamic)
    while todo:  # the nodes may come in any order: walk from the inputs through their consumers
        for node in consumers.pop(todo.pop(), ()):
            new = [o for o in node.output if o and o not in dynamic]
            dynamic.update(new)
            todo.extend(new)
    for node in graph.node:
        rule = CONSTANT_OPERANDS.get(node.op_type) if node.domain in ("", "ai.onnx") else None
        if rule and len(node.input) > rule[0] and node.input[rule[0]] in dynamic:
            raise ModelError(f"node {node.name[:80]!r} ({node.op_type}) takes its {rule[1]} from "
                             f"{node.input[rule[0]][:80]!r}, computed from a network input; TensorRT's ONNX parser "
                             f"needs {node.op_type}'s {rule[1]} as a build-time constant (an initializer)")


def refuse_unparsable(proto: onnx.ModelProto) -> onnx.ModelProto:
    """``proto`` unchanged when TensorRT's ONNX parser would import it as far as these rules tell.

    Raises:
        ModelError: one line naming the first thing the parser refuses (see the module's sources).
    """
    graph = proto.graph
    initializers = {t.name for t in graph.initializer}
    _opset(proto)
    _io(graph, initializers)
    _names(graph, initializers)
    _constant_operands(graph, initializers)
    _attributes(proto)
    _symmetric_qdq(graph)
    return proto


def _symmetric_qdq(graph: onnx.GraphProto) -> None:
    """Refuse a Q/DQ node whose constant zero point is not all zeros (asymmetric quantization)."""
    values = {t.name: t for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.output:
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            if value is not None:
                values[node.output[0]] = value
    for node in graph.node:
        if node.op_type not in ("QuantizeLinear", "DequantizeLinear") or node.domain not in ("", "ai.onnx"):
            continue
        zero = values.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
        if zero is None or zero.data_location == onnx.TensorProto.EXTERNAL:
            continue
        nonzero = [v for v in onnx.numpy_helper.to_array(zero).ravel().tolist() if v != 0]
        if nonzero:
            raise ModelError(f"node {node.name[:80]!r} ({node.op_type}) has zero point {nonzero[0]} (asymmetric "
                             "quantization); TensorRT's ONNX parser imports symmetric Q/DQ only (\"TensorRT only "
                             "supports symmetric quantization\": zero points of 0): quantize again with symmetric "
                             "INT8 activations (onnxruntime quantize_static: activation_type=QuantType.QInt8, "
                             "extra_options={'ActivationSymmetric': True})")


def _attributes(proto: onnx.ModelProto) -> None:
    """A default-domain node's attributes as its op's schema declares them: each at most once, of
    the schema's type (ONNX's checker: "Attribute '...' appeared multiple times", "Mismatched
    attribute type"; the parser reads them with the schema's type, so an ``axis`` given as a list
    cannot be imported as the model says)."""
    opset = next((op.version for op in proto.opset_import if op.domain in ("", "ai.onnx")), None)
    if opset is None:
        return
    for node in proto.graph.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        try:
            schema = onnx.defs.get_schema(node.op_type, opset, "")
        except onnx.defs.SchemaError:  # an op the opset lacks: the parser refuses it by name at build
            continue
        seen: set[str] = set()
        for a in node.attribute:
            where = f"node {node.name or '(unnamed)'!r} ({node.op_type}): attribute {a.name!r}"
            if a.name in seen:
                raise ModelError(f"{where} appears twice (onnx.checker refuses the model): export it again")
            seen.add(a.name)
            declared = schema.attributes.get(a.name)
            if declared is not None and a.type != declared.type:
                got = onnx.AttributeProto.AttributeType.Name(a.type)
                want = onnx.AttributeProto.AttributeType.Name(declared.type)
                raise ModelError(f"{where} is {got}, and {node.op_type} takes {want} (onnx.checker refuses the "
                                 "model): export it again")


#: input/output types the ONNX parser of TensorRT 8.5 and 8.6 cannot convert (its ``convertDtype``,
#: onnx-tensorrt 8.5-GA and 8.6-GA, has no BFLOAT16, FLOAT8E4M3FN or INT4; Jetson's next TensorRT is 10.x)
NEWER_IO_TYPES = {"bfloat16": "BFLOAT16", "float8_e4m3fn": "FP8", "int4": "INT4"}


def refuse_for_version(model: Any, trt_version: str) -> None:
    """Refuse a model whose inputs or outputs the target TensorRT's parser cannot import.

    Raises:
        ModelError: one line naming the tensor, its type and the versions that take it.
    """
    try:
        major = int(str(trt_version).split(".")[0])
    except ValueError:
        return  # (an unparsable version is refused by the settings)
    if major >= 9:
        return
    for kind, tensors in (("input", model.inputs), ("output", model.outputs)):
        for t in tensors:
            if t.dtype in NEWER_IO_TYPES:
                raise ModelError(f"the model's {kind} {t.name[:80]!r} is {NEWER_IO_TYPES[t.dtype]}, which the ONNX "
                                 f"parser of TensorRT {trt_version} cannot import (TensorRT 10 can): export it "
                                 "as FLOAT or FLOAT16, or target TensorRT 10 (trt_version)")
