"""ONNX -> :class:`Model`: the compute layers of a network with static shapes and costs.

Weights are never loaded (see :mod:`placetune.model.onnx_io`); shape-only computation is
folded (see :mod:`placetune.model.folding`) so that what remains are the layers TensorRT
would place on a device.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
import heapq

import numpy as np
import onnx
from onnx import helper, numpy_helper

from placetune.model.bounds import (CONTROL_FLOW_OPS, DATA_DEPENDENT_OPS, DATA_MOVING_OPS, bound_data_dependent, clashing_shapes,
                                    decided_by_data, no_shape,
                                    shapes_clash, unbounded)
from placetune.model.costs import layer_costs
from placetune.errors import ModelError, PlacementError, PlacetuneError, ShapeError, UnknownNameError
from placetune.model.graphfold import SMALL_CONST_ELEMENTS, GraphFolder, attr_value as _attr_value
from placetune.model.layer import Layer, TensorInfo
from placetune.model.onnx_io import check_initializers, read_model_proto
from placetune.model.shapes import ShapeSpec, batch_overrides, declared_dims, dtype_name, empty_tensors, exporter_image_size, fix_inputs, has_schema, keep_declared_plugin_shapes, local_functions, nms_plugin_shapes, normalise_shapes
from placetune.model.parsable import refuse_unparsable
from placetune.model.runnable import refuse_unrunnable
from placetune.model.zoo.registry import names as zoo_names, parse_options as _zoo_options
from placetune.safetext import line_safe
from placetune.validate import batch as check_batch
from placetune.model import zoo

__all__ = ["Model"]

#: Op -> input positions that hold trained weights: their values decide no DLA rule, shape or
#: cost, so the model hash leaves them out (a retrained network keeps its hash). Every other
#: constant value a layer reads (Clip bounds, Slice steps, Resize scales...) is hashed.
_WEIGHT_INPUTS: dict[str, frozenset[int]] = {
    "Conv": frozenset({1, 2}), "ConvTranspose": frozenset({1, 2}), "Gemm": frozenset({1, 2}),
    "MatMul": frozenset({0, 1}), "BatchNormalization": frozenset({1, 2, 3, 4}),
    "InstanceNormalization": frozenset({1, 2}), "LayerNormalization": frozenset({1, 2}),
    "GroupNormalization": frozenset({1, 2}), "PRelu": frozenset({1}),
}


def _const_digest(t: TensorInfo) -> str | None:
    """Digest of a small constant's value (dtype, shape, bytes); None when the value is unknown."""
    if not t.const or t.value is None:
        return None
    arr = np.ascontiguousarray(np.asarray(t.value))
    h = hashlib.sha256(f"{arr.dtype.str}:{arr.shape}:".encode())
    h.update(arr.tobytes())
    return h.hexdigest()[:24]


def _scope(node: onnx.NodeProto, name: str) -> str:
    if name.startswith("/"):
        parts = [p for p in name.split("/") if p]
        return "/".join(parts[:-1])
    for prop in node.metadata_props:
        if prop.key == "pkg.torch.onnx.name_scopes":
            try:
                scopes = json.loads(prop.value.replace("'", '"'))
            except (ValueError, RecursionError):  # (RecursionError: nested too deeply)
                return ""
            return "/".join(s for s in scopes[:-1] if s)
    return ""


def topological_order(
    nodes: Sequence[onnx.NodeProto],
    available: set[str] | None = None,
    inputs_of: Callable[[onnx.NodeProto], Iterable[str]] | None = None,
) -> list[int]:
    """Kahn's algorithm over ONNX nodes, stable on the file order: node indexes in order.

    Args:
        nodes: the graph's nodes.
        available: tensors that exist before any node runs (graph inputs, initializers,
            ``""``); when given, an input that nothing provides is an error.
        inputs_of: the tensors a node reads (default: ``node.input``).

    Raises:
        ModelError: a cycle, or (with ``available``) a dangling input.
    """
    read = inputs_of or (lambda n: n.input)
    producer: dict[str, int] = {}
    for i, n in enumerate(nodes):
        for o in n.output:
            if o:
                producer[o] = i
    waiting = [0] * len(nodes)
    users: list[list[int]] = [[] for _ in nodes]
    for i, n in enumerate(nodes):
        for inp in set(x for x in read(n) if x):
            if inp in producer and producer[inp] != i:
                waiting[i] += 1
                users[producer[inp]].append(i)
            elif available is not None and inp not in producer and inp not in available:
                raise ModelError(
                    f"node {n.name or n.op_type!r} reads tensor {inp!r} that no node, input or "
                    "initializer provides (is the file complete?)"
                )
    ready = [i for i, w in enumerate(waiting) if w == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for j in users[i]:
            waiting[j] -= 1
            if waiting[j] == 0:
                heapq.heappush(ready, j)
    if len(order) != len(nodes):
        raise ModelError("the ONNX graph has a cycle; it cannot be a feed-forward network")
    return order


def _toposort(nodes: Sequence[onnx.NodeProto], available: set[str]) -> list[onnx.NodeProto]:
    return [nodes[i] for i in topological_order(nodes, available)]


class Model:
    """A network's compute layers with fixed shapes, costs and edges.

    Build one with :meth:`Model.load`. Every placement, space and measurement refers to
    layers by :attr:`Layer.name`, which is exactly the name TensorRT's ONNX parser gives.

    Example:
        >>> m = Model.load("seed-block")
        >>> [layer.op_type for layer in m.layers]
        ['Conv', 'Conv', 'Conv', 'Conv', 'Concat']
        >>> m.layer("/conv2/Conv").producers
        ('/conv1/Conv',)

    Attributes:
        name: a short name (zoo name or file stem).
        path: the file it came from (None for zoo / in-memory models).
        layers: compute layers in topological order.
        inputs: graph inputs with their fixed shapes.
        outputs: graph outputs.
        hash: content hash of graph + shapes (not weights); identifies the model everywhere.
        proto: the shape-fixed, weight-stripped ModelProto (weights left out).
    """

    def __init__(
        self,
        layers: list[Layer],
        inputs: tuple[TensorInfo, ...],
        outputs: tuple[TensorInfo, ...],
        *,
        name: str,
        path: Path | None = None,
        proto: onnx.ModelProto | None = None,
        zoo: str | None = None,
    ) -> None:
        self.name = name
        self.path = path
        self.zoo = zoo
        self.layers = layers
        self.inputs = inputs
        self.outputs = outputs
        self.proto = proto
        self._by_name = {layer.name: layer for layer in layers}
        self.hash = self._content_hash()
        #: layer name -> its ONNX node's own name, for the layers whose node shares its name with
        #: another node (see :func:`refuse_renamed`); empty for a model whose node names are unique
        self.renamed: dict[str, str] = {}

    # ---------------------------------------------------------------- loading
    @classmethod
    def load(
        cls,
        source: str | Path | onnx.ModelProto,
        shapes: ShapeSpec | Sequence[str] | None = None,
        *,
        name: str | None = None,
        batch: int | None = None,
    ) -> "Model":
        """Load a model from an ONNX file (``.onnx`` / ``.onnx.gz``), a zoo name or a proto.

        Args:
            source: path, zoo name (see :func:`placetune.model.zoo.names`; options after a colon,
                e.g. ``vit-tiny:depth=32``) or an ``onnx.ModelProto``.
            shapes: input shape overrides, as ``{"input": (1, 3, 224, 224)}`` or a list of
                ``"input=1x3x224x224"`` strings.
            name: display name (defaults to the zoo name or the file stem).
            batch: batch size: of a zoo model, or of a file whose inputs leave the leading dimension open.

        Raises:
            ModelError: unreadable / invalid file, op without shape inference.
            ShapeError: dynamic input dimension without an override, bad override (a static
                dimension other than the batch may not change).
            ConfigError: ``batch`` is not a positive integer.
            UnknownNameError: neither an existing file nor a zoo name.
        """
        if batch is not None:
            check_batch(batch)
        overrides = normalise_shapes(shapes)
        zoo_name = None
        path: Path | None = None
        if isinstance(source, onnx.ModelProto):
            proto = onnx.ModelProto()
            proto.CopyFrom(source)
            check_initializers(proto)
            stripped = _dataless_initializers(proto)
            display = name or line_safe(proto.graph.name) or "model"
        else:
            text = str(source)
            p = Path(text)
            try:
                is_file = p.is_file()
            except (OSError, ValueError):  # a name too long for the file system, a NUL byte
                is_file = False
            if len(text) > 4096 or "\x00" in text:
                raise ModelError(f"{text[:80]!r}... ({len(text):,} characters) is neither an ONNX file nor a zoo model")
            if not is_file and text.partition(":")[0] not in zoo_names():
                try:  # a FIFO, a device, a directory, a dangling link: the read path says what it is
                    is_file = os.path.lexists(p)
                except (OSError, ValueError):
                    is_file = False
            if is_file:
                proto, stripped = read_model_proto(p)
                if batch is not None:  # a static batch is refused with the --shape to give
                    overrides = batch_overrides(proto.graph, {t.name for t in proto.graph.initializer}, overrides,
                                                batch, exporter_image_size(proto))
                path = p
                display = name or line_safe(p.name.split(".onnx")[0])  # (printed: one line, whatever the file's name)
            else:
                base, _, opts = text.partition(":")
                if base in zoo.names():
                    kw = _zoo_options(opts)
                    proto = zoo.build(base, batch=batch or zoo.default_batch(base), **kw)
                    stripped = _dataless_initializers(proto)
                    zoo_name = text
                    display = name or text
                elif p.suffix in (".onnx", ".gz") or "/" in text or "\\" in text:
                    raise ModelError(f"{text}: no such file (placetune zoo list names the built-in models)")
                else:
                    close = difflib.get_close_matches(text, zoo.names(), n=3)
                    hint = f" (did you mean {', '.join(close)}?)" if close else ""
                    raise UnknownNameError(
                        f"{text!r} is neither an ONNX file nor a zoo model{hint}; "
                        f"zoo models: {', '.join(zoo.names())}"
                    )
        try:
            return _build(proto, stripped, overrides, name=display, path=path, zoo=zoo_name)
        except (PlacetuneError, RecursionError, MemoryError):
            raise
        except Exception as exc:  # noqa: BLE001 - onnx internals on malformed graphs
            where = path or display
            raise ModelError(f"{where}: malformed ONNX graph ({type(exc).__name__}: {exc})") from None

    # ---------------------------------------------------------------- queries
    def layer(self, name: str) -> Layer:
        """The layer called ``name``; raises UnknownNameError with close matches."""
        try:
            return self._by_name[name]
        except KeyError:
            close = difflib.get_close_matches(name, list(self._by_name), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise UnknownNameError(f"model {self.name!r} has no layer {name!r}{hint}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __len__(self) -> int:
        return len(self.layers)

    def __iter__(self) -> Iterator[Layer]:
        return iter(self.layers)

    def __repr__(self) -> str:
        return f"Model({self.name!r}, layers={len(self.layers)}, hash={self.hash[:12]})"

    @property
    def names(self) -> list[str]:
        """Layer names in topological order."""
        return [layer.name for layer in self.layers]

    @property
    def batch(self) -> int:
        """Leading dimension of the first input."""
        return self.inputs[0].shape[0] if self.inputs and self.inputs[0].shape else 1

    @property
    def total_macs(self) -> int:
        """Sum of multiply-accumulates over all layers."""
        return sum(layer.macs for layer in self.layers)

    @property
    def total_flops(self) -> int:
        """Sum of FLOPs over all layers."""
        return sum(layer.flops for layer in self.layers)

    @property
    def input_shapes(self) -> dict[str, tuple[int, ...]]:
        """Input name -> fixed shape."""
        return {t.name: t.shape for t in self.inputs}

    @property
    def dynamic_input_shapes(self) -> dict[str, tuple[int, ...]]:
        """Input name -> fixed shape, for the inputs whose file shape has an open dimension only:
        trtexec refuses ``--shapes`` for a model whose inputs are all static."""
        return {t.name: t.shape for t in self.inputs if t.dynamic}

    @property
    def legacy_hash(self) -> str:
        """The hash placetune gave this model before it hashed small constants' values:
        the studies and measurements stored under it are migrated when the model is opened again."""
        cached = self.__dict__.get("_legacy_hash")
        if cached is None:
            cached = self.__dict__["_legacy_hash"] = self._content_hash(legacy=True)
        return cached

    def _content_hash(self, legacy: bool = False) -> str:
        doc = {
            "inputs": [[t.name, list(t.shape), t.dtype] for t in self.inputs],
            "outputs": [[t.name, list(t.shape), t.dtype] for t in self.outputs],
            "layers": [
                [
                    layer.name,
                    layer.domain,
                    layer.op_type,
                    sorted((k, repr(v)) for k, v in layer.attrs.items()),
                    [[t.name, list(t.shape), t.dtype, t.const]
                     + ([] if legacy or i in _WEIGHT_INPUTS.get(layer.op_type, ()) or _const_digest(t) is None
                        else [_const_digest(t)])
                     for i, t in enumerate(layer.inputs)],
                    [[t.name, list(t.shape), t.dtype] for t in layer.outputs],
                ]
                for layer in self.layers
            ],
        }
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def _dataless_initializers(proto: onnx.ModelProto) -> set[str]:
    return {t.name for t in proto.graph.initializer if any(d != 0 for d in t.dims)
            and not (t.raw_data or t.float_data or t.int32_data or t.int64_data or t.double_data)}


def _infer(proto: onnx.ModelProto) -> dict[str, tuple[list | None, int]]:
    try:
        inferred = onnx.shape_inference.infer_shapes(proto, check_type=False, strict_mode=False, data_prop=True)
    except Exception as exc:  # onnx.shape_inference.InferenceError and C++ failures
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"ONNX shape inference failed: {msg}") from None
    info: dict[str, tuple[list | None, int]] = {}
    g = inferred.graph
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        info[vi.name] = (declared_dims(vi.type), vi.type.tensor_type.elem_type)
    for t in g.initializer:
        info[t.name] = (list(t.dims), t.data_type)
    return info


def _given(inputs: Sequence[TensorInfo], original: dict[str, list | None]) -> str:
    """The input shapes set otherwise than the file has them (``--shape``, ``--batch``), as ``name=AxBxC``."""
    return ", ".join(f"{line_safe(t.name)[:80]}={'x'.join(str(d) for d in t.shape)}" for t in inputs
                     if list(t.shape) != original.get(t.name))


def _build(
    proto: onnx.ModelProto,
    stripped: set[str],
    overrides: dict,
    *,
    name: str,
    path: Path | None,
    zoo: str | None,
) -> Model:
    graph = refuse_unparsable(proto).graph  # what TensorRT's parser refuses is never tuned
    init = {t.name: t for t in graph.initializer}
    original = {i.name: declared_dims(i.type) for i in graph.input if i.name not in init}
    inputs = fix_inputs(graph, set(init), overrides, exporter_image_size(proto))
    before = _infer(proto) if DATA_DEPENDENT_OPS & {n.op_type for n in graph.node} else {}  # with the file's value_info
    declared = keep_declared_plugin_shapes(proto, original, inputs)
    nodes = _toposort(list(graph.node), set(init) | {t.name for t in inputs} | {""})
    info = _infer(proto)
    inferred = nms_plugin_shapes(graph, info, declared)  # an NMS plugin's undeclared outputs, from its attributes
    if inferred:
        declared.update(inferred)
        for out in graph.output:
            if out.name in inferred:
                out.CopyFrom(inferred[out.name])
        graph.value_info.extend(v for k, v in inferred.items() if k not in {o.name for o in graph.output})
        info = _infer(proto)  # the layers after it take its shapes

    # ---- fold shape-only computation and constant subgraphs
    values: dict[str, np.ndarray] = {}
    for t in graph.initializer:
        if t.name not in stripped and t.data_location != onnx.TensorProto.EXTERNAL:
            n = int(np.prod(t.dims)) if len(t.dims) else 1
            if n <= SMALL_CONST_ELEMENTS:
                try:
                    values[t.name] = numpy_helper.to_array(t)
                except Exception as exc:  # noqa: BLE001 - onnx raises ValueError/TypeError/... on corrupt tensors
                    raise ModelError(f"initializer {t.name!r} is corrupt ({type(exc).__name__}: {exc})") from None
    folder = GraphFolder(proto, name=name, values=values, stripped=stripped, declared=declared, infer=_infer)
    keep, new_proto, info = folder.run(nodes, info)
    const, unevaluated, out_names = folder.const, folder.unevaluated, folder.out_names
    info.update({k: (declared_dims(v.type), v.type.tensor_type.elem_type) for k, v in declared.items() if info.get(k, (None,))[0] is None})
    dependent = bound_data_dependent(nodes, before, keep, info, values)  # NMS in the graph: sizes at their bound
    # Graph outputs get their types from inference; write them back for later cutting.
    for o in new_proto.graph.output:
        dims, et = info.get(o.name, (None, 0))
        if dims is not None:
            o.CopyFrom(helper.make_tensor_value_info(o.name, et, dims))

    # ---- layers
    # TensorRT's parser rule (base, then base_<global counter>), except that a generated name
    # never takes a name some other node has in the file: [dup, dup, dup_0] ->
    # dup, dup_1, dup_0, so a placement naming dup_0 places the node called dup_0.
    layer_names: set[str] = set()
    reserved = {n.name if n.name else f"node_of_{n.output[0]}" for n in keep}
    counter = [0]

    renamed: dict[str, str] = {}  # generated name -> the node's own name (TensorRT names these its own way)

    def unique(base: str) -> str:
        cand = base
        while cand in layer_names or (cand != base and cand in reserved):
            cand = f"{base}_{counter[0]}"
            counter[0] += 1
        layer_names.add(cand)
        if cand != base:
            renamed[cand] = base
        return cand

    def tensor(tname: str) -> TensorInfo:
        dims, et = info.get(tname, (None, 0))
        is_const = tname in const
        value = values.get(tname) if is_const else None
        if value is not None and value.size > SMALL_CONST_ELEMENTS:
            value = None
        if dims is None or any(not isinstance(d, int) for d in dims):
            return TensorInfo(tname, (), dtype_name(et), is_const, value)
        return TensorInfo(tname, tuple(int(d) for d in dims), dtype_name(et), is_const, value,
                          data_dependent=tname in dependent)

    producer: dict[str, str] = {}
    layers: list[Layer] = []
    open_sizes: list[tuple[int, str]] = []  # refused after the spec's rules on the layers up to the first
    made_by = {o: node for node in keep for o in node.output if o}
    for position, node in enumerate(keep):
        lname = unique(node.name if node.name else f"node_of_{node.output[0]}")
        ins = tuple(tensor(x) for x in node.input if x)
        outs = tuple(tensor(x) for x in node.output if x)
        # an operand computed in the graph, or a constant computation whose value placetune does not evaluate
        computed = any(x and (x not in const or x in unevaluated) for x in node.input[1:])
        if open_sizes and any(not t.shape and info.get(t.name, (None, 0))[0] is None for t in outs):
            break  # it reads an earlier layer's open size (torchvision's NMS If before its ROI heads): that one is refused
        for t in outs:
            if not t.shape and info.get(t.name, (None, 0))[0] is None:
                shapes = [info.get(x, (None, 0))[0] for x in node.input if x]
                if clashing_shapes(node, shapes):
                    raise ModelError(shapes_clash(lname, node.op_type, shapes, _given(inputs, original)))
                data = decided_by_data(node, made_by, dependent) if computed else None
                control = next(((n.name or n.output[0], n.op_type) for n in keep[position + 1:]
                                if n.op_type in CONTROL_FLOW_OPS), None) if data else None
                raise ModelError(no_shape(lname, node, t.name, has_schema(node.op_type, node.domain, local_functions(proto)),
                                          computed, data, control))
            if any(d <= 0 for d in t.shape) or (not t.shape and info[t.name][0]):  # open dims, not a scalar
                empty = empty_tensors(proto).get(t.name) if not open_sizes and node.op_type in DATA_MOVING_OPS else None
                open_sizes.append((len(layers) + 1, unbounded(lname, node.op_type, t.name, info[t.name][0], computed,
                                                              empty, str(path) if path else None)))
        for x in node.input:
            if x and x not in const and x not in producer and x not in {i.name for i in inputs}:
                raise ModelError(f"layer {lname!r} reads {x!r}, which nothing produces")
        attrs = {a.name: _attr_value(a) for a in node.attribute}
        layer = Layer(
            name=lname,
            op_type=node.op_type,
            index=len(layers),
            attrs=attrs,
            inputs=ins,
            outputs=outs,
            scope=_scope(node, lname),
            domain=node.domain,
            producers=tuple(dict.fromkeys(producer[x] for x in node.input if x in producer)),
            plugin=not has_schema(node.op_type, node.domain, local_functions(proto)),
        )
        # a layer after an open size is refused below, and its inputs may have no shape to cost
        macs, flops = layer_costs(layer) if not open_sizes else (0, 0)
        layer.macs, layer.flops = macs, flops
        layer.weight_bytes = sum(t.nbytes for t in ins if t.const)
        layer.bytes_in = sum(t.nbytes for t in ins if not t.const)
        layer.bytes_out = sum(t.nbytes for t in outs)
        layers.append(layer)
        for t in outs:
            producer[t.name] = lname
    upto = open_sizes[0][0] if open_sizes else len(layers)  # later layers read its made-up size
    refuse_unrunnable(keep[:upto], layers[:upto], proto.opset_import)  # what the operator spec forbids is never simulated
    if open_sizes:
        raise ShapeError(open_sizes[0][1])
    consumers: dict[str, list[str]] = {layer.name: [] for layer in layers}
    for layer in layers:
        for p in layer.producers:
            consumers[p].append(layer.name)
    for layer in layers:
        layer.consumers = tuple(consumers[layer.name])
    if not layers:
        raise ModelError("the model has no compute layers after folding constants")
    outputs = tuple(tensor(o) for o in out_names)
    model = Model(layers, tuple(inputs), outputs, name=name, path=path, proto=new_proto, zoo=zoo)
    model.renamed = renamed
    return model


def refuse_renamed(renamed: dict[str, str], names: Iterable[str]) -> None:
    """Refuse to address by name a layer whose ONNX node shares its name with another node.

    TensorRT's ONNX parser names the first layer of node ``N`` exactly ``N``; a second node named
    ``N`` gets ``N_<k>``, ``k`` a counter global to the whole parse (its helper layers advance it
    too), so no name placetune gives the copy is known to match TensorRT's: ``--layerDeviceTypes``
    would place another layer, or none, silently.

    Raises:
        PlacementError: naming the layers and what to do.
    """
    bad = [n for n in names if n in renamed]
    if bad:
        shown = ", ".join(f"{n!r} (a second node named {renamed[n]!r})" for n in bad[:3])
        raise PlacementError(
            f"{len(bad)} layer(s) cannot be addressed by name in TensorRT: {shown}{' ...' if len(bad) > 3 else ''}: "
            "TensorRT names a node that shares its name with another one by a counter of its own, so "
            "--layerDeviceTypes would place another layer or none; give every ONNX node a unique name "
            "(e.g. for i, n in enumerate(model.graph.node): n.name = f'{n.name}__{i}') and study the model again")
