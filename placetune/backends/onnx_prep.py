"""The ONNX file a TensorRT build parses, shared by the tensorrt and trtexec backends: Q/DQ check, fp16 conversion, prepared copies."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import onnx

from placetune.errors import ModelError
from placetune.files.cache import cached_file
from placetune.files.read import file_digest, read_gzip
from placetune.model import zoo
from placetune.model.onnx_io import load_with_weights, read_model_proto
from placetune.model.zoo.registry import parse_options
from placetune.model.qdq import has_fp16_tensor, is_qdq_model

if TYPE_CHECKING:
    from placetune.model.model import Model

__all__ = ["has_qdq", "convert_to_fp16", "load_full", "zero_weights", "source_has_qdq", "source_qdq_fp32", "prepare_onnx"]

log = logging.getLogger(__name__)

# ONNX inputs that must stay float32 when a model is converted to fp16 (op, input index).
_FLOAT32_INPUTS = {("Resize", 2), ("Upsample", 1)}


#: True when the graph has QuantizeLinear/DequantizeLinear nodes (explicit quantisation)
has_qdq = is_qdq_model


def convert_to_fp16(proto: "onnx.ModelProto") -> "onnx.ModelProto":
    """A copy of the model whose float32 tensors are float16, for strongly typed TensorRT (11.x).

    Converts initializers, ``Constant``/``ConstantOfShape`` values, graph inputs and outputs
    and ``Cast(to=FLOAT)``; Resize/Upsample scales stay float32 (ONNX requires it). Intermediate
    ``value_info`` is dropped (shapes and types are re-inferred).

    Example:
        >>> from placetune.model import zoo
        >>> m16 = convert_to_fp16(zoo.build("seed-block", weights=True))
        >>> m16.graph.input[0].type.tensor_type.elem_type == 10   # FLOAT16
        True
    """
    m = onnx.ModelProto()
    m.CopyFrom(proto)
    g = m.graph
    keep = {n.input[i] for n in g.node for op, i in _FLOAT32_INPUTS if n.op_type == op and len(n.input) > i}

    def half(t: onnx.TensorProto) -> None:
        if t.data_type == onnx.TensorProto.FLOAT and t.name not in keep:
            t.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(t).astype(np.float16), t.name))

    for t in g.initializer:
        half(t)
    for vi in list(g.input) + list(g.output):
        tt = vi.type.tensor_type
        if tt.elem_type == onnx.TensorProto.FLOAT:
            tt.elem_type = onnx.TensorProto.FLOAT16
    del g.value_info[:]
    for node in g.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR and not (node.op_type == "Constant" and node.output[0] in keep):
                if a.t.data_type == onnx.TensorProto.FLOAT:
                    name = a.t.name
                    a.t.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(a.t).astype(np.float16), name))
            elif node.op_type == "Cast" and a.name == "to" and a.i == onnx.TensorProto.FLOAT:
                a.i = onnx.TensorProto.FLOAT16
    return m


def load_full(path: Path) -> "onnx.ModelProto":
    """The model of an ``.onnx`` or ``.onnx.gz`` file, weights included (the one read path:
    :func:`placetune.model.onnx_io.load_with_weights`)."""
    return load_with_weights(path)


def zero_weights(proto: "onnx.ModelProto") -> "onnx.ModelProto":
    """Fill initializers that have dims but no data (placetune strips weights) with zeros."""
    m = onnx.ModelProto()
    m.CopyFrom(proto)
    for t in m.graph.initializer:
        if not (t.raw_data or t.float_data or t.int32_data or t.int64_data or t.double_data) and any(t.dims):
            dtype = onnx.helper.tensor_dtype_to_np_dtype(t.data_type)
            t.CopyFrom(onnx.numpy_helper.from_array(np.zeros(tuple(t.dims), dtype=dtype), t.name))
    return m


def source_has_qdq(model: "Model") -> bool:
    """True when the model's ONNX graph has Q/DQ nodes (what int8 needs on a strongly typed TensorRT)."""
    if model.path is not None:
        return has_qdq(read_model_proto(model.path)[0])
    return model.proto is not None and has_qdq(model.proto)



def source_qdq_fp32(model: "Model") -> bool:
    """True when the model's ONNX graph has Q/DQ nodes and no FP16 tensor (:func:`~placetune.model.qdq.has_fp16_tensor`)."""
    proto = read_model_proto(model.path)[0] if model.path is not None else model.proto
    return proto is not None and has_qdq(proto) and not has_fp16_tensor(proto)


def prepare_onnx(model: "Model", cache_dir: Path, fp16: bool) -> Path:
    """An ONNX file TensorRT can parse: the model's own file when possible, else a
    decompressed / exported / fp16-converted copy in ``cache_dir/onnx``, named by the content hash
    of the model's file (or by the model's hash when it has none)."""
    src = Path(model.path) if model.path is not None else None
    if src is not None and src.suffix != ".gz" and not fp16:
        return src.resolve()
    if src is not None:  # by content: a changed file (same name, size and time) is never served stale
        key = file_digest(src)[:16]
    else:
        key = model.hash[:16]
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", model.name)[:60]
    out_dir = cache_dir / "onnx"
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{safe}-{key}{'-fp16' if fp16 else ''}.onnx"
    return cached_file(target, lambda: _prepared_bytes(model, src, fp16))


def _prepared_bytes(model: "Model", src: Path | None, fp16: bool) -> bytes:
    if src is not None:
        if fp16:
            return convert_to_fp16(load_full(src)).SerializeToString()
        return bytes(read_gzip(src, "model", error=ModelError))  # decompressed through the one read path (bounded)
    if model.zoo:
        base, _, opts = model.zoo.partition(":")
        proto = zoo.build(base, batch=model.batch, weights=True, **parse_options(opts))
        return (convert_to_fp16(proto) if fp16 else proto).SerializeToString()
    if model.proto is not None:
        proto = zero_weights(model.proto)
        log.warning("model %s has no file: building it with zero weights (timing only)", model.name)
        return (convert_to_fp16(proto) if fp16 else proto).SerializeToString()
    raise ValueError(f"model {model.name!r} has neither a file, a zoo name nor a graph")
