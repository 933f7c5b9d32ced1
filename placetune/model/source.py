"""The model's original ONNX graph with its weights: what is cut into segments and built.

placetune's :class:`~placetune.model.model.Model` keeps a folded, weight-stripped graph; cutting
a placement into sub-models (:mod:`placetune.placement.cut`) and building engines need the
original graph with its weights. :func:`load_source` reads it from the model's file (a merged
model's networks from their own sources again), builds its zoo network, or fills the stripped
weights with zeros; :func:`with_batch` gives it at another batch size (a replica with its own
batch); :func:`randomize_weights` gives weights whose outputs are informative (exports with
zeroed weights).
"""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import helper, numpy_helper

from placetune.errors import ModelError
from placetune.model import zoo
from placetune.model.merge import META_KEY, merge_models, source_networks
from placetune.model.model import Model
from placetune.model.onnx_io import load_with_weights
from placetune.model.zoo.registry import parse_options as zoo_options

__all__ = ["load_source", "randomize_weights", "with_batch"]


def load_source(model: "Model") -> onnx.ModelProto:
    """The model's original ONNX graph **with** its weights, for cutting and building.

    From the model's file (``.onnx`` or ``.onnx.gz``, external data loaded), its zoo
    network (deterministic weights), or, failing both, its weight-stripped proto with
    zero-filled weights (timing only: outputs are then meaningless).

    Raises:
        ModelError: the file cannot be read.
    """
    if model.path is not None:
        proto = load_with_weights(model.path)
        nets = source_networks(proto)
        return proto if nets is None else _merged_source(nets)
    if model.zoo:
        base, _, opts = model.zoo.partition(":")
        return zoo.build(base, batch=model.batch, weights=True, **zoo_options(opts))
    if model.proto is None:
        raise ModelError(f"model {model.name!r} has neither a file, a zoo name nor a graph to cut")
    proto = onnx.ModelProto()
    proto.CopyFrom(model.proto)
    for t in proto.graph.initializer:
        if not (t.raw_data or t.float_data or t.int32_data or t.int64_data or t.double_data) and any(t.dims):
            dtype = helper.tensor_dtype_to_np_dtype(t.data_type)
            t.CopyFrom(numpy_helper.from_array(np.zeros(tuple(t.dims), dtype=dtype), t.name))
    return proto


def with_batch(model: "Model", batch: int, source: onnx.ModelProto | None = None) -> onnx.ModelProto:
    """The whole model with its weights at another batch size (a replica with its own batch):
    a zoo network is built again at ``batch``; a file's inputs get ``batch`` as their first
    dimension (inferred shapes dropped, as TensorRT re-infers them).

    Args:
        model: the model.
        batch: the batch size.
        source: the model's ONNX with weights (default :func:`load_source`).
    """
    if model.zoo:
        name, _, opts = model.zoo.partition(":")
        return zoo.build(name, batch=int(batch), weights=True, **zoo_options(opts))
    proto = onnx.ModelProto()
    proto.CopyFrom(source if source is not None else load_source(model))
    init = {t.name for t in proto.graph.initializer}
    for vi in proto.graph.input:
        if vi.name not in init and vi.type.tensor_type.shape.dim:
            d = vi.type.tensor_type.shape.dim[0]
            d.Clear()
            d.dim_value = int(batch)
    del proto.graph.value_info[:]
    for vi in proto.graph.output:
        if vi.type.HasField("tensor_type"):
            vi.type.tensor_type.ClearField("shape")
    return proto


def _merged_source(nets: list[dict]) -> onnx.ModelProto:
    """A concurrent study's merged model with weights: each network loaded from its source again."""
    try:
        models = [Model.load(str(n["source"]), batch=int(n["batch"])) for n in nets]
        names = [str(n["name"]) for n in nets]
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelError(f"the merged model's list of networks is damaged ({exc}): run the study's tune again") \
            from None
    proto = merge_models(models, names, protos=[load_source(m) for m in models])
    helper.set_model_props(proto, {META_KEY: json.dumps(nets)})
    return proto


def randomize_weights(proto: onnx.ModelProto, seed: int = 0) -> onnx.ModelProto:
    """A copy whose floating-point initializers (and large float ``Constant`` values) hold
    random values scaled by fan-in, so that outputs are informative (torch exports in
    ``tests/data`` have zeroed weights). Integer tensors (shapes, axes) are kept."""
    rng = np.random.default_rng(seed)
    m = onnx.ModelProto()
    m.CopyFrom(proto)

    def fill(t: onnx.TensorProto) -> None:
        a = numpy_helper.to_array(t)
        if a.dtype.kind != "f" or a.size < 2:
            return
        fan_in = int(np.prod(a.shape[1:])) if a.ndim >= 2 else 1
        v = rng.standard_normal(a.shape) / np.sqrt(max(fan_in, 1))
        if a.ndim == 1:  # biases, norm scales: around 1 for scales is safer than around 0
            v = 1.0 + 0.1 * rng.standard_normal(a.shape)
        t.CopyFrom(numpy_helper.from_array(v.astype(a.dtype), t.name))

    for t in m.graph.initializer:
        fill(t)
    return m
