"""Layers that cannot run, refused when a model is loaded (never simulated or measured as if valid).

ONNX shape inference (run with ``strict_mode=False``) writes a shape for nodes the operator spec
forbids, and a node can ask for a tensor no Jetson can hold; such a model used to be tuned and
"measured" (a median of 1e16 ms reported ``ok``). Each rule, checked once every layer has its
static shapes:

* Reshape: "The input tensor's shape and the output tensor's shape are required to have the same
  number of elements" (ONNX operator spec, Reshape, every version);
* Conv: W "has size (M x C/group x kH x kW)" and ``group`` is the "number of groups input
  channels and output channels are divided into" (ONNX spec, Conv): ``group`` is at least 1 and
  divides the input's C channels and the M output maps, and W's second dimension is C/group.
  ConvTranspose (W: C x M/group x k...): ``group`` at least 1 dividing C, W's first dimension C;
  QLinearConv and ConvInteger (ONNX spec: the same ``group`` and weight layout as Conv, the weight
  their fourth and second input) take Conv's rule. A Conv's ``kernel_shape``, when given, is its weight's
  kernel ("If not present, should be inferred from input W", ONNX spec; TensorRT's ONNX parser refuses
  another: "The size of spatial dimension and the size of kernel shape are not equal for the Conv
  operator", onnx-tensorrt ``importConv``, 8.x and 10.x), where ONNX shape inference takes the attribute;
* Resize: ``scales`` "takes value greater than 0" (ONNX spec, Resize 10 to 19): every scale
  positive and finite (a NaN scale gives no output shape at all); ``sizes`` positive;
* Upsample (opset 7 to 9, deprecated in 10): ``scales`` "takes value greater than or equal to 1"
  (ONNX spec, Upsample 7 and 9), an attribute in opset 7 and 8, the second input in opset 9:
  every scale finite and greater than 0, as Resize's (a scale below 1 is what runtimes execute as
  a downsample, so only what no runtime can execute is refused);
* Gather: indices "within bounds [-s, s-1] along axis of size s. It is an error if any of the index
  values are out of bounds" (ONNX spec, Gather 13): constant indices out of that range are refused;
* LRN: ``size`` is "The number of channels to sum over" and the output divides by it ("alpha / size *
  square_sum", ONNX spec, LRN 1 and 13): ``size`` at least 1 (the spec's window, ``floor((size - 1) / 2)``
  before and ``ceil((size - 1) / 2)`` after the channel, takes an even size too);
* ConvTranspose: "Each padding value in "output_padding" must be less than the corresponding
  stride/dilation dimension" (ONNX spec, ConvTranspose 1, 11 and 22): an ``output_padding`` at least
  as large as both its stride and its dilation is refused (PyTorch, which writes most such models,
  takes "smaller than either stride or dilation");
* Range and ConstantOfShape, checked on their constant operands before folding (such a node whose
  output is a graph output would otherwise vanish from the model unseen): Range's "number_of_elements
  = max( ceil( (limit - start) / delta ) , 0 )" divides by ``delta``, so a ``delta`` of 0 is refused;
  ConstantOfShape's input "All values must be >= 0" (ONNX spec, ConstantOfShape 9 to 25);
* static shapes: an output whose inferred shape keeps a dimension open, empty or negative (a size
  computed at run time; a pooling window larger than its input) has no shape to simulate or build;
* tensor size: no tensor a layer reads or writes may be larger than the memory of the largest
  Jetson module placetune has a profile for (Jetson AGX Orin 64GB and AGX Xavier 64GB: 64 GB
  shared by CPU, GPU and DLA; :mod:`placetune.hardware.modules`). TensorRT documents no fixed
  volume limit: TensorRT 8.6 fails on tensors of more than 2^31-1 elements (NVIDIA/TensorRT issue
  3815, answered "should be fixed in TRT 10.0.1", then "didn't fix it completely"), and the
  TensorRT 10.10 release notes say only that "most layers" now handle large volumes. The memory
  bound is the one no TensorRT version can pass: such a tensor cannot be allocated.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx

from placetune.errors import ModelError
from placetune.model.layer import Layer, TensorInfo

__all__ = ["MAX_TENSOR_BYTES", "refuse_forbidden_operands", "refuse_unrunnable"]

#: the memory of the largest Jetson module placetune has a profile for (AGX Orin 64GB, AGX Xavier 64GB)
MAX_TENSOR_BYTES = 64 * 10**9

#: op -> (input position, operand name) that sets the size of the op's output, for the message
_SIZE_OPERANDS = {"Pad": (1, "pads"), "Expand": (1, "shape"), "Tile": (1, "repeats"), "Reshape": (1, "shape"),
                  "ConstantOfShape": (0, "input"), "Upsample": (1, "scales")}


def _dims(shape: Sequence[int]) -> str:
    return "x".join(map(str, shape)) if shape else "a scalar"


def _where(node: onnx.NodeProto, layer: Layer) -> str:
    return f"node {layer.name[:80]!r} ({node.op_type})"


def _shown(t: TensorInfo | None) -> str:
    if t is None or t.value is None:
        return ""
    values = np.asarray(t.value).ravel().tolist()
    return f" = {values[:8]}{'...' if len(values) > 8 else ''}"


def _reshape(node: onnx.NodeProto, layer: Layer, tensors: dict[str, TensorInfo]) -> None:
    data, out = tensors.get(node.input[0]), tensors.get(node.output[0])
    if data is None or out is None or data.size == out.size or data.data_dependent:
        return  # the size of rows an NMS kept is a bound, not a count the Reshape must keep
    shape = tensors.get(node.input[1]) if len(node.input) > 1 else None
    raise ModelError(f"{_where(node, layer)}: input 'shape' {node.input[1][:80]!r}{_shown(shape)} makes "
                     f"{_dims(out.shape)} ({out.size:,} elements) of input {node.input[0][:80]!r} {_dims(data.shape)} "
                     f"({data.size:,} elements); ONNX's Reshape keeps the element count (0 copies the input's "
                     "dimension, one -1 is inferred): export the model again")


#: convolution op -> the position of its weight input (the data is input 0)
_CONV_WEIGHT = {"Conv": 1, "ConvTranspose": 1, "ConvInteger": 1, "QLinearConv": 3}


def _conv(node: onnx.NodeProto, layer: Layer, tensors: dict[str, TensorInfo]) -> None:
    pos = _CONV_WEIGHT[node.op_type]
    data = tensors.get(node.input[0])
    weight = tensors.get(node.input[pos]) if len(node.input) > pos else None
    if data is None or weight is None or len(data.shape) < 2 or len(weight.shape) < 2:
        return
    group = layer.attrs.get("group", 1)
    c = data.shape[1]
    if node.op_type != "ConvTranspose":
        m = weight.shape[0]
        ok = isinstance(group, int) and group >= 1 and c % group == 0 and m % group == 0 \
            and weight.shape[1] * group == c
        allowed = (f"ONNX's {node.op_type} takes group >= 1 dividing the input's {c} channels and the weight's "
                   f"{m} output maps, with weight {node.input[pos][:80]!r} of shape M x C/group x kH x kW "
                   f"(here {_dims(weight.shape)})")
    else:
        ok = isinstance(group, int) and group >= 1 and c % group == 0 and weight.shape[0] == c
        allowed = (f"ONNX's ConvTranspose takes group >= 1 dividing the input's {c} channels, with weight "
                   f"{node.input[1][:80]!r} of shape C x M/group x kH x kW (here {_dims(weight.shape)})")
    if not ok:
        raise ModelError(f"{_where(node, layer)}: attribute group={group} on input {node.input[0][:80]!r} "
                         f"{_dims(data.shape)}; {allowed}")
    kernel = layer.attrs.get("kernel_shape")
    if node.op_type == "Conv" and kernel is not None and list(kernel) != list(weight.shape[2:]):
        raise ModelError(f"{_where(node, layer)}: attribute kernel_shape={list(kernel)[:8]} and weight "
                         f"{node.input[pos][:80]!r} {_dims(weight.shape)}, whose kernel is {_dims(weight.shape[2:])}; "
                         "ONNX's Conv takes a kernel_shape equal to its weight's kernel (TensorRT's ONNX parser "
                         "refuses another): export the model again, or drop kernel_shape")


def _resize(node: onnx.NodeProto, layer: Layer, tensors: dict[str, TensorInfo], opset: int) -> None:
    positions = {"scales": 1} if opset < 11 else {"scales": 2, "sizes": 3}
    for operand, pos in positions.items():
        if len(node.input) <= pos or not node.input[pos]:
            continue
        t = tensors.get(node.input[pos])
        if t is None or t.value is None or t.size == 0:
            continue
        values = np.asarray(t.value, dtype=np.float64).ravel()
        if not (np.isfinite(values).all() and (values > 0).all()):
            raise ModelError(f"{_where(node, layer)}: input {operand!r} {node.input[pos][:80]!r}{_shown(t)}; "
                             f"ONNX's Resize takes {operand} that are finite and greater than 0")


def _upsample(node: onnx.NodeProto, layer: Layer, tensors: dict[str, TensorInfo]) -> None:
    if "scales" in layer.attrs:  # opset 7 and 8: an attribute
        values, what = np.asarray(layer.attrs["scales"], dtype=np.float64).ravel(), "attribute 'scales'"
        shown = f" = {values[:8].tolist()}{'...' if values.size > 8 else ''}"
    elif len(node.input) > 1 and node.input[1]:
        t = tensors.get(node.input[1])
        if t is None or t.value is None:
            return
        values, shown = np.asarray(t.value, dtype=np.float64).ravel(), _shown(t)
        what = f"input 'scales' {node.input[1][:80]!r}"
    else:
        return
    if not (np.isfinite(values).all() and (values > 0).all()):
        raise ModelError(f"{_where(node, layer)}: {what}{shown}; ONNX's Upsample takes scales that are finite "
                         "and greater than 0 (the spec says at least 1)")


def _gather(node: onnx.NodeProto, layer: Layer, tensors: dict[str, TensorInfo]) -> None:
    data, idx = tensors.get(node.input[0]), tensors.get(node.input[1])
    if data is None or idx is None or idx.value is None or not data.shape:
        return
    axis = layer.attrs.get("axis", 0)
    if not isinstance(axis, int) or not -len(data.shape) <= axis < len(data.shape):
        return  # (shape inference refuses it)
    s = data.shape[axis]
    values = np.asarray(idx.value).ravel()
    if values.size and np.issubdtype(values.dtype, np.integer) and not ((values >= -s) & (values < s)).all():
        raise ModelError(f"{_where(node, layer)}: input 'indices' {node.input[1][:80]!r}{_shown(idx)} on axis {axis} "
                         f"of {node.input[0][:80]!r} {_dims(data.shape)}; ONNX's Gather takes indices from {-s} "
                         f"to {s - 1} there (an index out of bounds is an error)")


def _lrn(node: onnx.NodeProto, layer: Layer) -> None:
    size = layer.attrs.get("size")
    if not isinstance(size, int) or size < 1:
        raise ModelError(f"{_where(node, layer)}: attribute size={str(size)[:40]}; ONNX's LRN takes size, \"The "
                         "number of channels to sum over\", of at least 1 (its formula divides alpha by size)")


def _conv_transpose_padding(node: onnx.NodeProto, layer: Layer) -> None:
    padding = layer.attrs.get("output_padding")
    if not isinstance(padding, list) or not padding:
        return
    strides = layer.attrs.get("strides") or [1] * len(padding)
    dilations = layer.attrs.get("dilations") or [1] * len(padding)
    for axis, (p, s, d) in enumerate(zip(padding, strides, dilations)):
        if isinstance(p, int) and isinstance(s, int) and isinstance(d, int) and p >= max(s, d):
            raise ModelError(f"{_where(node, layer)}: attribute output_padding={padding[:8]} with strides="
                             f"{strides[:8]} and dilations={dilations[:8]} ({p} on spatial axis {axis}); ONNX's "
                             "ConvTranspose says \"Each padding value in \"output_padding\" must be less than the "
                             "corresponding stride/dilation dimension\"")


def refuse_forbidden_operands(node: onnx.NodeProto, inputs: Sequence[str], values: dict[str, np.ndarray]) -> None:
    """Refuse a Range or ConstantOfShape node whose constant operands the ONNX spec forbids (see the module),
    before folding evaluates it.

    Args:
        node: the ONNX node.
        inputs: its input names (after aliasing).
        values: the known values of constant tensors.

    Raises:
        ModelError: one line naming the node, the input and what is allowed.
    """
    if node.domain not in ("", "ai.onnx"):
        return
    where = f"node {(node.name or node.output[0] if node.output else node.name)[:80]!r} ({node.op_type})"
    if node.op_type == "Range" and len(inputs) > 2 and inputs[2] in values:
        delta = np.asarray(values[inputs[2]]).ravel()
        if delta.size == 1 and delta[0] == 0:
            raise ModelError(f"{where}: input 'delta' {inputs[2][:80]!r} = {delta[0]}; ONNX's Range makes "
                             "\"number_of_elements = max( ceil( (limit - start) / delta ) , 0 )\", so delta must "
                             "not be 0")
    elif node.op_type == "ConstantOfShape" and inputs and inputs[0] in values:
        shape = np.asarray(values[inputs[0]]).ravel()
        if np.issubdtype(shape.dtype, np.integer) and (shape < 0).any():
            raise ModelError(f"{where}: input 'input' {inputs[0][:80]!r} = {shape[:8].tolist()}; ONNX's "
                             "ConstantOfShape takes a shape whose \"values must be >= 0\"")


def _volume(node: onnx.NodeProto, layer: Layer) -> None:
    for kind, t in [("output", t) for t in layer.outputs] + [("input", t) for t in layer.inputs]:
        if t.nbytes <= MAX_TENSOR_BYTES:
            continue
        hint = ""
        rule = _SIZE_OPERANDS.get(node.op_type)
        if kind == "output" and rule and len(node.input) > rule[0] and node.input[rule[0]]:
            hint = f" (set by its input {rule[1]!r} {node.input[rule[0]][:80]!r})"
        raise ModelError(f"{_where(node, layer)}: {kind} {t.name[:80]!r}{hint} is {_dims(t.shape)}, "
                         f"{t.size:.3g} elements ({t.nbytes / 1e9:.3g} GB as {t.dtype}); a tensor must fit in "
                         f"the memory of a Jetson (at most {MAX_TENSOR_BYTES // 10**9} GB, AGX Orin 64GB), "
                         "or TensorRT cannot build it")


def refuse_unrunnable(nodes: Sequence[onnx.NodeProto], layers: Sequence[Layer],
                      opset_import: Sequence[onnx.OperatorSetIdProto]) -> None:
    """Refuse the first layer the ONNX operator spec forbids or no Jetson could hold (see the module).

    Args:
        nodes: the ONNX nodes of the layers, one per layer, in the same order.
        layers: the layers, with static shapes and the values of small constants.
        opset_import: the model's opsets (Resize's inputs moved in opset 11).

    Raises:
        ModelError: one line naming the node, the input and what is allowed.
    """
    opset = next((op.version for op in opset_import if op.domain in ("", "ai.onnx")), 11)
    tensors = {t.name: t for layer in layers for t in (*layer.inputs, *layer.outputs)}
    for node, layer in zip(nodes, layers):
        if node.domain in ("", "ai.onnx"):
            if node.op_type == "Reshape" and len(node.input) > 1:
                _reshape(node, layer, tensors)
            elif node.op_type in _CONV_WEIGHT and node.input:
                _conv(node, layer, tensors)
            elif node.op_type == "Resize" and node.input:
                _resize(node, layer, tensors, opset)
            elif node.op_type == "Upsample":
                _upsample(node, layer, tensors)
            elif node.op_type == "Gather" and len(node.input) > 1:
                _gather(node, layer, tensors)
            elif node.op_type == "LRN":
                _lrn(node, layer)
            if node.op_type == "ConvTranspose":
                _conv_transpose_padding(node, layer)
        _volume(node, layer)
