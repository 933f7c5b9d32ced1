"""Cut an ONNX model into one sub-model per pipeline segment (weights included).

TensorRT runs one DLA core per engine, so a placement on GPU + DLA0 + DLA1 runs as a DAG
of engines, one per segment of :meth:`Placement.segments(pipeline=True)
<placetune.placement.Placement.segments>`. Each engine is built from a sub-model whose
inputs and outputs are the tensors at the cuts; tensor and node names are those of the
original file, so TensorRT's layer names, build-log lines and profiles still name the
model's layers.

The cut works on the **original** graph, not on the folded graph placetune's
:class:`~placetune.model.model.Model` keeps: every original node that is a model layer goes to
its layer's segment; the nodes placetune folded away (``Constant``, ``Identity``, weight
transposes, ``Shape`` chains) are copied into every segment that needs them, and a
``Shape`` node becomes a ``Constant`` holding the static shape, so that no segment reads a
tensor only for its shape. Each sub-model has static shapes on its inputs, outputs and
intermediate tensors (``value_info``), only the initializers it uses, and passes
``onnx.checker.check_model(..., full_check=True)``.

Example:
    >>> from placetune import Model, Placement, zoo
    >>> m = Model.load("seed-block")
    >>> p = Placement(m, {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1"})
    >>> segs = cut(m, p, source=zoo.build("seed-block", weights=True))
    >>> [(s.device, s.inputs, s.outputs) for s in segs][1]
    ('DLA0', ('input',), ('/conv3/Conv_output_0',))
    >>> segs[3].predecessors
    (0, 1, 2)
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from placetune.errors import ModelError
from placetune.model.layer import TensorInfo
from placetune.model.folding import FOLDABLE_OPS, constant_value, fold_value
from placetune.model.graphfold import SMALL_CONST_ELEMENTS, attr_value
from placetune.model.model import Model, topological_order
from placetune.model.shapes import declared_dims, keep_declared_plugin_shapes
from onnx.reference import ReferenceEvaluator
from placetune.files.write import write_file
from placetune.model.onnx_io import load_with_weights
from placetune.model.source import load_source

from placetune.placement.placement import Placement, Segment

__all__ = ["SegmentModel", "cut", "run_segments", "swap_inputs", "tensor_infos"]


@dataclass(frozen=True)
class SegmentModel:
    """One segment of a pipeline placement as its own ONNX model.

    Attributes:
        index: the segment's index (as in ``Placement.segments(pipeline=True)``).
        device: ``GPU``, ``DLA0`` or ``DLA1``.
        layers: the model layers it runs, in topological order.
        proto: the sub-model (weights included).
        inputs: its input tensors: network inputs and cut tensors of other segments.
        outputs: its output tensors: cut tensors other segments read, and network outputs.
        predecessors: indexes of the segments that produce its inputs.
        hash: SHA-256 of the sub-model's deterministic serialization (the engine cache key).
    """

    index: int
    device: str
    layers: tuple[str, ...]
    proto: onnx.ModelProto
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    predecessors: tuple[int, ...]
    hash: str

    def boundary(self) -> dict[str, list[dict[str, Any]]]:
        """The tensors at the segment's cuts: ``{"inputs": [...], "outputs": [...]}``, each a
        ``{"name", "shape", "dtype"}`` (see :func:`tensor_infos`), in the sub-model's order."""
        g = self.proto.graph
        return {"inputs": tensor_infos(list(g.input)), "outputs": tensor_infos(list(g.output))}

    def save(self, path: str | Path) -> Path:
        """Write the sub-model to ``path`` (folders are created; a regular file is replaced atomically,
        see :func:`placetune.files.write.write_file`)."""
        return write_file(path, self.proto.SerializeToString(deterministic=True), "ONNX segment", parents=True)


def tensor_infos(values: Sequence[onnx.ValueInfoProto]) -> list[dict[str, Any]]:
    """``{"name", "shape", "dtype"}`` per tensor: the shape as a list (an open dimension is its
    symbol, or None), the dtype as numpy names it (``float32``; None when not a tensor type)."""
    out: list[dict[str, Any]] = []
    for vi in values:
        tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        shape: list[Any] | None = None
        dtype = None
        if tt is not None:
            if tt.HasField("shape"):
                shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim]
            if tt.elem_type:
                try:
                    dtype = str(np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type)))
                except (KeyError, TypeError, ValueError):  # a type numpy has no name for
                    dtype = onnx.TensorProto.DataType.Name(tt.elem_type).lower()
        out.append({"name": vi.name, "shape": shape, "dtype": dtype})
    return out


# =========================================================================================
# cutting
# =========================================================================================
def _toposort(nodes: Sequence[onnx.NodeProto]) -> list[int]:
    return topological_order(nodes, inputs_of=_node_inputs)


def _node_inputs(node: onnx.NodeProto) -> list[str]:
    """The node's inputs plus the outer-scope names its subgraphs (If/Loop/Scan) read."""
    names = [x for x in node.input if x]
    for a in node.attribute:
        graphs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
        for g in graphs:
            names.extend(_outer_names(g))
    return names


def _outer_names(g: onnx.GraphProto) -> list[str]:
    defined = {i.name for i in g.input} | {t.name for t in g.initializer}
    out: list[str] = []
    for n in g.node:
        for x in _node_inputs(n):
            if x not in defined:
                out.append(x)
        defined.update(o for o in n.output if o)
    out.extend(o.name for o in g.output if o.name not in defined)
    return out


def _static_types(proto: onnx.ModelProto, input_shapes: Mapping[str, Sequence[int]]) -> dict[str, onnx.TypeProto]:
    """Tensor name -> TypeProto with static dims, by shape inference with the inputs fixed."""
    m = onnx.ModelProto()
    m.CopyFrom(proto)
    g = m.graph
    # ONNX inference reads the nodes in file order; a file whose nodes are not in topological order (an
    # Ultralytics half=True export appends its input Cast last), which TensorRT's parser sorts, is sorted first
    ordered = [g.node[i] for i in topological_order(list(g.node))]
    if any(n is not o for n, o in zip(ordered, g.node)):
        copies = [onnx.NodeProto() for _ in ordered]
        for c, n in zip(copies, ordered):
            c.CopyFrom(n)
        del g.node[:]
        g.node.extend(copies)
    original = {inp.name: declared_dims(inp.type) for inp in g.input}
    for inp in g.input:
        if inp.name in input_shapes:
            shp = inp.type.tensor_type.shape
            del shp.dim[:]
            for d in input_shapes[inp.name]:
                shp.dim.add().dim_value = int(d)
    # exported value_info and output shapes may be symbolic or stale after an override: dropped,
    # except the shapes the file declares for plugin outputs (which inference cannot redo)
    fixed = [TensorInfo(k, tuple(int(d) for d in v)) for k, v in input_shapes.items()]
    keep_declared_plugin_shapes(m, original, fixed)
    try:
        inferred = onnx.shape_inference.infer_shapes(m, check_type=False, strict_mode=False, data_prop=True)
    except Exception as exc:  # noqa: BLE001
        raise ModelError(f"ONNX shape inference failed on the model to cut: {exc}") from None
    types: dict[str, onnx.TypeProto] = {}
    for vi in list(inferred.graph.input) + list(inferred.graph.value_info) + list(inferred.graph.output):
        if vi.type.HasField("tensor_type"):
            types[vi.name] = vi.type
    _fold_shapes(m, types)
    return types


def _fold_shapes(proto: onnx.ModelProto, types: dict[str, onnx.TypeProto]) -> None:
    """The static types of the shape arithmetic ONNX inference cannot follow (a dynamic export's
    ``Shape -> Cast -> Div -> Ceil`` chains), folded as :class:`~placetune.model.model.Model` folds
    them (the same folder), so that every ``Shape`` the model folded has a static input here too."""
    values: dict[str, np.ndarray] = {}
    for t in proto.graph.initializer:
        if t.data_location != onnx.TensorProto.EXTERNAL and int(np.prod(t.dims)) <= SMALL_CONST_ELEMENTS \
                and (t.raw_data or t.float_data or t.int32_data or t.int64_data or t.double_data or not t.dims):
            try:
                values[t.name] = numpy_helper.to_array(t)
            except Exception:  # noqa: BLE001 - a corrupt tensor is simply not folded
                continue
    nodes = list(proto.graph.node)
    ordered = [nodes[i] for i in topological_order(nodes, None)]
    for _ in range(16):  # rounds, as the model's loader folds (placetune/model/graphfold.py): a size
        # folded in one round makes the next Shape static (RT-DETR's decoder, exported with dynamic=True)
        if not _fold_round(proto, ordered, types, values):
            break


def _fold_round(proto: onnx.ModelProto, ordered: list[onnx.NodeProto], types: dict[str, onnx.TypeProto],
                values: dict[str, np.ndarray]) -> bool:
    """One round of :func:`_fold_shapes`: fold, infer again; whether a tensor's type became static."""
    for node in ordered:
        if node.op_type == "Constant":
            v = constant_value(node)
        elif node.domain in ("", "ai.onnx") and node.op_type in FOLDABLE_OPS and node.input:
            first = types.get(node.input[0])
            shape = tuple(d.dim_value for d in first.tensor_type.shape.dim) if _is_static(first) else None
            attrs = {a.name: attr_value(a) for a in node.attribute}  # as the model's folding reads them
            v = fold_value(node.op_type, attrs, [values.get(x) if x else None for x in node.input], shape)
        else:
            continue
        if v is None or not node.output:
            continue
        if np.asarray(v).dtype != object:
            values[node.output[0]] = np.asarray(v)
    # inference again with the folded values as constants: the tensors they size get static types too
    m = onnx.ModelProto()
    m.CopyFrom(proto)
    folded = [helper.make_node("Constant", [], [n.output[0]], name=n.name, value=numpy_helper.from_array(
        values[n.output[0]], n.output[0] + "_value")) if len(n.output) == 1 and n.output[0] in values else n
        for n in m.graph.node]
    del m.graph.node[:]
    m.graph.node.extend(folded)
    try:
        inferred = onnx.shape_inference.infer_shapes(m, check_type=False, strict_mode=False, data_prop=True)
    except Exception:  # noqa: BLE001 - the first inference's types stand
        return False
    grew = False
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
        if vi.type.HasField("tensor_type") and _is_static(vi.type) and not _is_static(types.get(vi.name)):
            types[vi.name] = vi.type
            grew = True
    for name, v in values.items():
        if not _is_static(types.get(name)) and all(int(d) > 0 for d in v.shape):
            types[name] = helper.make_tensor_type_proto(helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
            grew = True
    return grew


def _is_static(tp: onnx.TypeProto | None) -> bool:
    if tp is None or not tp.HasField("tensor_type") or not tp.tensor_type.HasField("shape"):
        return False
    return all(d.HasField("dim_value") and d.dim_value > 0 for d in tp.tensor_type.shape.dim)


def _value_info(name: str, types: Mapping[str, onnx.TypeProto], what: str,
                open_sized: Mapping[str, tuple[int, ...]] | None = None) -> onnx.ValueInfoProto:
    tp = types.get(name)
    if not _is_static(tp) and open_sized and name in open_sized and tp is not None and tp.HasField("tensor_type"):
        # a network output whose size the data decides (the rows an ONNX NonMaxSuppression kept): declared with
        # its open dims, as the file declares it; TensorRT sizes such an output at run time (data-dependent
        # shapes, TensorRT 8.5 and later), and nothing after it in the pipeline reads it
        vi = onnx.ValueInfoProto(name=name)
        vi.type.CopyFrom(tp)
        dims = vi.type.tensor_type.shape.dim
        if len(dims) != len(open_sized[name]):
            del dims[:]
            for i in range(len(open_sized[name])):
                dims.add().dim_param = f"{name}_dim_{i}"
        return vi
    if not _is_static(tp):
        raise ModelError(f"the {what} tensor {name!r} has no static shape after shape inference; "
                         "pass --shape for the model's inputs")
    vi = onnx.ValueInfoProto(name=name)
    vi.type.CopyFrom(tp)
    return vi


def _shape_constant(node: onnx.NodeProto, types: Mapping[str, onnx.TypeProto]) -> onnx.NodeProto:
    """A ``Constant`` node that outputs what ``Shape`` computes (static dims), same names."""
    tp = types.get(node.input[0])
    if not _is_static(tp):
        raise ModelError(f"Shape node {node.name or node.output[0]!r} reads {node.input[0]!r}, "
                         "whose shape is not static")
    dims = np.array([d.dim_value for d in tp.tensor_type.shape.dim], dtype=np.int64)
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    start = int(attrs.get("start", 0))
    end = attrs.get("end")
    dims = dims[start:] if end is None else dims[start:int(end)]
    const = helper.make_node("Constant", [], [node.output[0]], name=node.name,
                             value=numpy_helper.from_array(dims, node.output[0] + "_value"))
    return const


def cut(
    model: "Model",
    placement: "Placement | Sequence[Segment]",
    source: onnx.ModelProto | str | Path | None = None,
) -> list[SegmentModel]:
    """Cut the model into one ONNX sub-model per pipeline segment.

    Args:
        model: the placetune model (its layers name the original nodes; its input shapes
            are the static shapes used).
        placement: a placement (its ``segments(pipeline=True)`` are cut) or the segments.
        source: the original ONNX model with weights (a proto or a file); default
            :func:`~placetune.model.source.load_source` of ``model``.

    Returns:
        One :class:`SegmentModel` per segment, in segment order. Running them in order,
        each on the tensors the previous ones produced, computes the whole model.

    Raises:
        ModelError: the source graph does not match the model (a layer without its node),
            has a tensor without a static shape, or a network output that is a network input.
    """
    if source is None:
        proto = load_source(model)
    elif isinstance(source, onnx.ModelProto):
        proto = source
    else:
        proto = load_with_weights(source)
    segments = placement.segments(pipeline=True) if isinstance(placement, Placement) else list(placement)
    g = proto.graph
    init_names = {t.name for t in g.initializer}
    net_inputs = [i.name for i in g.input if i.name not in init_names]
    net_outputs = [o.name for o in g.output]
    nodes = list(g.node)
    order = _toposort(nodes)
    types = _static_types(proto, model.input_shapes)
    # a size ONNX inference leaves open here that the model's own folding fixed (an Ultralytics nms=True,
    # dynamic=True segmenter's output: a Slice to the batch, sized through Shape of another branch)
    for layer in model.layers:
        for t in layer.outputs:
            if t.shape and not t.data_dependent and not _is_static(types.get(t.name)):
                types[t.name] = helper.make_tensor_type_proto(helper.np_dtype_to_tensor_dtype(np.dtype(t.dtype)),
                                                              list(t.shape))

    open_outputs = {t.name: t.shape for layer in model.layers for t in layer.outputs
                    if t.data_dependent and t.name in set(net_outputs)}

    # ---- original node -> model layer (by its first output, which placetune keeps)
    layer_of_output = {layer.outputs[0].name: layer.name for layer in model.layers if layer.outputs}
    seg_of_layer = {n: s.index for s in segments for n in s.layers}
    node_seg: dict[int, int] = {}
    for i, n in enumerate(nodes):
        first = next((o for o in n.output if o), None)
        lname = layer_of_output.get(first) if first is not None else None
        if lname is not None:
            if lname not in seg_of_layer:
                raise ModelError(f"layer {lname!r} is in no segment of the placement")
            node_seg[i] = seg_of_layer[lname]
    found = {layer_of_output[next(o for o in nodes[i].output if o)] for i in node_seg}
    missing = set(seg_of_layer) - found
    if missing:
        raise ModelError(f"the ONNX source does not match model {model.name!r}: no node for layer(s) "
                         f"{', '.join(sorted(missing)[:5])}")

    # ---- which segments need each folded (non-layer) node
    producer: dict[str, int] = {}
    for i, n in enumerate(nodes):
        for o in n.output:
            if o:
                producer[o] = i
    consumers: dict[int, list[int]] = {i: [] for i in range(len(nodes))}
    for i, n in enumerate(nodes):
        for x in set(_node_inputs(n)):
            if x in producer and producer[x] != i:
                consumers[producer[x]].append(i)

    def runtime_seg(i: int, seen: set[int] | None = None) -> int | None:
        """The segment whose layer produces the runtime data a folded node forwards (Identity)."""
        seen = seen or set()
        for x in _node_inputs(nodes[i]):
            j = producer.get(x)
            if j is None or j in seen:
                continue
            if j in node_seg:
                return node_seg[j]
            seen.add(j)
            s = runtime_seg(j, seen)
            if s is not None:
                return s
        return None

    needers: dict[int, set[int]] = {}
    out_set = set(net_outputs)
    for i in reversed(order):
        if i in node_seg:
            continue
        need: set[int] = set()
        for c in consumers[i]:
            need |= {node_seg[c]} if c in node_seg else needers.get(c, set())
        if any(o in out_set for o in nodes[i].output):
            s = runtime_seg(i)
            need.add(s if s is not None else (segments[-1].index if segments else 0))
        needers[i] = need

    # ---- per segment: nodes, inputs
    members: dict[int, list[int]] = {s.index: [] for s in segments}
    for i in order:
        if i in node_seg:
            members[node_seg[i]].append(i)
        else:
            for s in needers.get(i, ()):
                members[s].append(i)
    seg_nodes: dict[int, list[onnx.NodeProto]] = {}
    seg_inputs: dict[int, list[str]] = {}
    seg_produced: dict[int, list[str]] = {}
    for s in segments:
        built: list[onnx.NodeProto] = []
        produced: list[str] = []
        consumed: list[str] = []
        for i in members[s.index]:
            n = nodes[i]
            if i not in node_seg and n.op_type == "Shape" and n.domain in ("", "ai.onnx"):
                n = _shape_constant(n, types)
            built.append(n)
            consumed.extend(x for x in _node_inputs(n) if x not in produced)
            produced.extend(o for o in n.output if o)
        made = set(produced)
        ins = list(dict.fromkeys(x for x in consumed if x not in made and x not in init_names))
        seg_nodes[s.index], seg_inputs[s.index], seg_produced[s.index] = built, ins, produced
    wanted: dict[str, set[int]] = {}
    for s in segments:
        for x in seg_inputs[s.index]:
            wanted.setdefault(x, set()).add(s.index)
    # network outputs: exported by the segment whose layer makes them (else the first maker)
    out_owner: dict[str, int] = {}
    for name in net_outputs:
        if name in set(net_inputs):
            raise ModelError(f"network output {name!r} is a network input; a pipeline cannot forward it")
        j = producer.get(name)
        if j is not None and j in node_seg:
            out_owner[name] = node_seg[j]
        else:
            makers = [s.index for s in segments if name in seg_produced[s.index]]
            if makers:
                out_owner[name] = makers[0]
    made_by: dict[str, int] = {}
    for s in segments:
        for o in seg_produced[s.index]:
            j = producer.get(o)
            if j is not None and j in node_seg:
                made_by[o] = s.index
    result = []
    inits = {t.name: t for t in g.initializer}
    fn_keys = {(f.domain, f.name): f for f in proto.functions}
    for s in segments:
        built = seg_nodes[s.index]
        ins = seg_inputs[s.index]
        bad = [x for x in ins if x not in made_by and x not in net_inputs]
        if bad:
            raise ModelError(f"segment {s.index} reads {bad[0]!r}, which no segment and no network input provides")
        outs = [o for o in dict.fromkeys(seg_produced[s.index])
                if (o in wanted and s.index not in wanted[o] and made_by.get(o) == s.index)
                or out_owner.get(o) == s.index]
        graph = helper.make_graph(
            built,
            f"{g.name or model.name}:{s.layers[0]}..{s.layers[-1]}" if s.layers else g.name,
            [_value_info(x, types, "cut input" if x not in net_inputs else "network input") for x in ins],
            [_value_info(o, types, "cut output" if o not in out_set else "network output",
                         open_outputs if o in out_set else None) for o in outs],
            [inits[x] for x in dict.fromkeys(x for n in built for x in _node_inputs(n)) if x in inits],
        )
        boundary = set(ins) | set(outs)
        for x in dict.fromkeys(seg_produced[s.index]):
            if x not in boundary and _is_static(types.get(x)):
                graph.value_info.append(_value_info(x, types, "intermediate"))
        sub = helper.make_model(graph, opset_imports=list(proto.opset_import))
        sub.ir_version = proto.ir_version
        sub.producer_name = "placetune.cut"
        for key in dict.fromkeys((n.domain, n.op_type) for n in built):
            if key in fn_keys:
                sub.functions.add().CopyFrom(fn_keys[key])
        preds = tuple(sorted({made_by[x] for x in ins if x in made_by}))
        digest = hashlib.sha256(sub.SerializeToString(deterministic=True)).hexdigest()
        result.append(SegmentModel(s.index, s.device, tuple(s.layers), sub, tuple(ins), tuple(outs), preds, digest))
    return result


# =========================================================================================
# helpers for checking a cut
# =========================================================================================
def run_segments(segments: Sequence[SegmentModel], feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run the sub-models in order with onnx's reference evaluator; every tensor they exchange
    and output is returned (network outputs included).

    Example:
        >>> # outs = run_segments(cut(m, p), {"input": x}); outs["output"]
    """
    env: dict[str, Any] = dict(feeds)
    for seg in segments:
        ev = ReferenceEvaluator(seg.proto)
        got = ev.run(None, {x: env[x] for x in seg.inputs})
        env.update(zip(seg.outputs, got))
    return env


def swap_inputs(seg: SegmentModel) -> SegmentModel:
    """A deliberately **wrong** copy of a segment: two of its same-typed inputs swapped
    (the sub-model reads one cut tensor where it should read the other). A test hook for
    the pipeline's correctness gate.

    Raises:
        ValueError: the segment has no two inputs of the same type and shape.
    """
    m = onnx.ModelProto()
    m.CopyFrom(seg.proto)
    by_type: dict[bytes, list[str]] = {}
    for vi in m.graph.input:
        by_type.setdefault(vi.type.SerializeToString(deterministic=True), []).append(vi.name)
    pair = next((v[:2] for v in by_type.values() if len(v) >= 2), None)
    if pair is None:
        raise ValueError(f"segment {seg.index} has no two inputs of the same type to swap")
    a, b = pair
    tmp = f"__placetune_swap_{a}"
    for n in m.graph.node:
        for k, x in enumerate(n.input):
            n.input[k] = {a: tmp, b: a}.get(x, x)
        for k, x in enumerate(n.input):
            if x == tmp:
                n.input[k] = b
    digest = hashlib.sha256(m.SerializeToString(deterministic=True)).hexdigest()
    return SegmentModel(seg.index, seg.device, seg.layers, m, seg.inputs, seg.outputs, seg.predecessors, digest)
