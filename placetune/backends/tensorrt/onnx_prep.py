"""ONNX preparation for TensorRT (parent side): fp16 conversion, Q/DQ detection, weight loading.

Shared by the ``engine`` mode (:mod:`placetune.backends.tensorrt.backend`) and the
``pipeline`` / ``replicas`` modes (:mod:`placetune.backends.tensorrt.pipeline`).
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnx

__all__ = ["has_qdq", "convert_to_fp16", "load_full", "zero_weights"]

# ONNX inputs that must stay float32 when a model is converted to fp16 (op, input index).
_FLOAT32_INPUTS = {("Resize", 2), ("Upsample", 1)}


def has_qdq(proto: "onnx.ModelProto") -> bool:
    """True when the graph has QuantizeLinear/DequantizeLinear nodes (explicit quantisation)."""
    return any(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in proto.graph.node)


def convert_to_fp16(proto: "onnx.ModelProto") -> "onnx.ModelProto":
    """A copy of the model whose float32 tensors are float16, for strongly typed TensorRT (11.x).

    Converts initializers, ``Constant``/``ConstantOfShape`` values, graph inputs and outputs
    and ``Cast(to=FLOAT)``; Resize/Upsample scales stay float32 (ONNX requires it). Intermediate
    ``value_info`` is dropped (shapes and types are re-inferred).

    Example:
        >>> from placetune import zoo
        >>> m16 = convert_to_fp16(zoo.build("seed-block", weights=True))
        >>> m16.graph.input[0].type.tensor_type.elem_type == 10   # FLOAT16
        True
    """
    import numpy as np
    import onnx
    from onnx import TensorProto, numpy_helper

    m = onnx.ModelProto()
    m.CopyFrom(proto)
    g = m.graph
    keep = {n.input[i] for n in g.node for op, i in _FLOAT32_INPUTS if n.op_type == op and len(n.input) > i}

    def half(t: onnx.TensorProto) -> None:
        if t.data_type == TensorProto.FLOAT and t.name not in keep:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name))

    for t in g.initializer:
        half(t)
    for vi in list(g.input) + list(g.output):
        tt = vi.type.tensor_type
        if tt.elem_type == TensorProto.FLOAT:
            tt.elem_type = TensorProto.FLOAT16
    del g.value_info[:]
    for node in g.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR and not (node.op_type == "Constant" and node.output[0] in keep):
                if a.t.data_type == TensorProto.FLOAT:
                    name = a.t.name
                    a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float16), name))
            elif node.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.FLOAT16
    return m


def load_full(path: Path) -> "onnx.ModelProto":
    """The model of an ``.onnx`` or ``.onnx.gz`` file, weights included."""
    import onnx

    if path.suffix == ".gz":
        with gzip.open(path, "rb") as fh:
            return onnx.load_from_string(fh.read())
    return onnx.load(str(path))


def zero_weights(proto: "onnx.ModelProto") -> "onnx.ModelProto":
    """Fill initializers that have dims but no data (placetune strips weights) with zeros."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    m = onnx.ModelProto()
    m.CopyFrom(proto)
    for t in m.graph.initializer:
        if not (t.raw_data or t.float_data or t.int32_data or t.int64_data or t.double_data) and any(t.dims):
            dtype = helper.tensor_dtype_to_np_dtype(t.data_type)
            t.CopyFrom(numpy_helper.from_array(np.zeros(tuple(t.dims), dtype=dtype), t.name))
    return m
