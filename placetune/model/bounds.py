"""Data-dependent shapes bounded from above: the tail of a detector exported with its NMS in the graph.

A detector exported for deployment with non-maximum suppression inside the ONNX graph (Ultralytics
``export(format="onnx", nms=True)``, torchvision's detectors) computes tensors whose size depends on
the image: ``NonZero`` (the boxes above the score threshold), ``NonMaxSuppression`` (the boxes kept),
and what follows them. ONNX shape inference names such a dimension with a symbol
(``NonZero_334_o0__d1``) or an expression of symbols (``Min(300, NonMaxSuppression_369_o0__d0)``).
TensorRT builds such layers (data-dependent shapes, TensorRT 8.5 and later) on the GPU only; the DLA
runs static shapes only.

placetune gives each such dimension its upper bound, the size the layer can reach on any input:

* ``NonZero``: the element count of its input (every element non-zero; ONNX spec: output
  ``[rank, count]``);
* ``NonMaxSuppression``: batch x classes x min(boxes, ``max_output_boxes_per_class``) (ONNX spec:
  ``selected_indices`` is ``[num_selected_indices, 3]``, at most ``max_output_boxes_per_class``
  per batch and class);
* an expression of those (``Min``, ``Max``, ``+``, ``*``) evaluated on the bounds;
* a ``Reshape`` with one open dimension: the element count of its input over the other dimensions
  (ONNX spec: Reshape keeps the element count); a ``Slice`` or ``TopK`` (``K`` computed from the data): its input's size, axis by axis;
  a ``Concat`` (the boxes of every level of a detector): the sum of its inputs' bounds along its axis;
  a ``Gather`` (the boxes gathered by the indices an NMS kept): its data's shape with the gathered axis
  replaced by the indices' bound;
  a ``Cast`` or another op that keeps its input's shape: its input's bound (the file may name its size
  with a symbol of an earlier inference, as an FP16 converter leaves it);
  an ``Expand`` or a ``Pad`` whose shape or pads are computed from the ``Shape`` of bounded rows
  (polygraphy's sanitize names their size with a fresh symbol): its input broadcast with that shape, or
  padded by those pads, at their bounds (:mod:`placetune.model.sizevalues`);
  an op that broadcasts its inputs (``Add``, ``Mul``, ...): the largest of their bounds, axis by axis;
  a ``Flatten`` (torchvision's decoded boxes): the products of its input's bounds before and after its axis.

A tensor bounded this way is marked ``data_dependent`` (:class:`~placetune.model.layer.TensorInfo`):
the DLA checker refuses its layers, and the simulator costs them at the bound (a post-processing tail
that is small next to the network). A symbol placetune cannot bound (an op of unknown output size) is
left open, and the layer is refused when the model is loaded.
"""

from __future__ import annotations

import ast
import math
import shlex
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import onnx

from placetune.model.sizevalues import Interval, initial_intervals, size_interval

__all__ = ["CONTROL_FLOW_OPS", "DATA_DEPENDENT_OPS", "bound_data_dependent", "control_flow", "decided_by_data",
           "no_shape", "unbounded"]

#: the ops whose output size depends on the data and that placetune bounds
DATA_DEPENDENT_OPS = frozenset({"NonZero", "NonMaxSuppression"})

Info = dict[str, tuple[list | None, int]]

#: two tools that fold a graph's shape computations for static inputs
_FOLD = "`onnxslim in.onnx out.onnx`, or `polygraphy surgeon sanitize --fold-constants in.onnx -o out.onnx`"


def _evaluate(expr: str, bounds: Mapping[str, int]) -> int | None:
    """The upper bound of a dimension expression of ONNX shape inference, or None."""
    try:
        tree = ast.parse(expr, mode="eval")
    except (SyntaxError, ValueError):
        return None

    def ub(node: ast.AST) -> int | None:
        if isinstance(node, ast.Expression):
            return ub(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and node.value >= 0:
            return int(node.value)
        if isinstance(node, ast.Name):
            return bounds.get(node.id)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
            a, b = ub(node.left), ub(node.right)
            if a is None or b is None:
                return None
            return a + b if isinstance(node.op, ast.Add) else a * b
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("Min", "Max") \
                and node.args and not node.keywords:
            args = [ub(a) for a in node.args]
            if node.func.id == "Min":  # the smallest bound holds even if the others are unknown
                known = [a for a in args if a is not None]
                return min(known) if known else None
            return None if None in args else max(a for a in args if a is not None)
        return None

    return ub(tree)


def _static(dims: list | None) -> bool:
    return dims is not None and all(isinstance(d, int) and d > 0 for d in dims)


def _new_symbols(node: onnx.NodeProto, inputs: list[list[int] | None],
                 values: Mapping[str, np.ndarray]) -> int | None:
    """The bound of the one size a data-dependent op creates (see the module), or None."""
    if node.domain not in ("", "ai.onnx"):
        return None
    if node.op_type == "NonZero" and inputs and inputs[0] is not None:
        return math.prod(inputs[0])
    if node.op_type == "NonMaxSuppression" and len(inputs) >= 2 and inputs[0] and inputs[1]:
        boxes, scores = inputs[0], inputs[1]
        if len(boxes) != 3 or len(scores) != 3:
            return None
        per_class = boxes[1]
        if len(node.input) > 2 and node.input[2] in values:
            limit = np.asarray(values[node.input[2]]).ravel()
            if limit.size == 1 and int(limit[0]) >= 0:
                per_class = min(per_class, int(limit[0]))
        return scores[0] * scores[1] * per_class
    return None


#: ops whose output has their (first) input's shape (ONNX spec), whatever their file says
_SAME_SHAPE = frozenset({"Cast", "CastLike", "Identity", "Abs", "Neg", "Relu", "Sigmoid", "Tanh", "Exp", "Log",
                         "Sqrt", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Not", "Clip", "LeakyRelu",
                         "HardSigmoid", "HardSwish", "Sin", "Cos", "Erf", "Softplus"})


def _expanded_or_padded(node: onnx.NodeProto, ins: list[list[int] | None], sizes: Mapping[str, Interval],
                        rank: int) -> list[int] | None:
    """The bound of an ``Expand`` or a constant ``Pad`` whose shape operand is computed from the shape of
    bounded rows (:mod:`placetune.model.sizevalues`; polygraphy's sanitize names their size with a fresh
    symbol), or None. ONNX spec: Expand broadcasts its input with the shape; Pad adds the pads to each axis."""
    if len(node.input) < 2 or not ins or ins[0] is None or node.input[1] not in sizes:
        return None
    data, hi = ins[0], sizes[node.input[1]][1].ravel()
    if node.op_type == "Expand" and bool((hi > 0).all()) and max(len(data), hi.size) == rank:
        pad = [[1] * (rank - len(s)) + list(s) for s in (data, hi.tolist())]
        return [max(int(a), int(b)) for a, b in zip(*pad)]
    mode = next((a.s for a in node.attribute if a.name == "mode"), b"constant")
    if node.op_type == "Pad" and mode == b"constant" and len(node.input) < 4 and len(data) == rank \
            and hi.size == 2 * rank:
        out = [int(d + hi[i] + hi[i + rank]) for i, d in enumerate(data)]
        return out if all(d > 0 for d in out) else None
    return None


def _sliced(node: onnx.NodeProto, data: list[int], values: Mapping[str, np.ndarray]) -> list[int]:
    """The bound of a Slice of bounded rows: its input's, less on an axis it slices from a constant start >= 0 to
    a constant end >= 0 with step 1 (the first ``max_det`` of an NMS's boxes: ``[0:300]``), ``end - start``."""
    out = list(data)
    consts = [np.asarray(values[x]).ravel() if x in values else None for x in list(node.input[1:5])]
    starts, ends = consts[0] if consts else None, consts[1] if len(consts) > 1 else None
    if starts is None or ends is None or starts.size != ends.size:
        return out
    axes = consts[2] if len(consts) > 2 and consts[2] is not None else np.arange(starts.size)
    steps = consts[3] if len(consts) > 3 and consts[3] is not None else np.ones(starts.size, np.int64)
    for s, e, ax, st in zip(starts, ends, axes, steps):
        if st == 1 and 0 <= s < e and -len(out) <= ax < len(out):
            out[int(ax)] = max(1, min(out[int(ax)], int(e)) - int(s))
    return out


def _settle(out: str, dims: list, fixed: list[int], et: int, info: Info, bounds: dict[str, int],
            dependent: set[str]) -> None:
    """``out`` takes the bounded dims ``fixed``; a symbol among ``dims`` keeps its bound for later tensors."""
    info[out] = (fixed, et)
    dependent.add(out)
    for d, n in zip(dims, fixed):
        if isinstance(d, str):
            bounds.setdefault(d, n)


def _bound(nodes: Iterable[onnx.NodeProto], info: Info, before: Mapping[str, tuple[list | None, int]],
           before_dependent: set[str], values: Mapping[str, np.ndarray]) -> set[str]:
    bounds: dict[str, int] = {}
    dependent: set[str] = set()
    sizes = initial_intervals(values)
    for node in nodes:
        size = size_interval(node, info, dependent | before_dependent, sizes, values)
        if size is not None:
            sizes[node.output[0]] = size
        ins = [info.get(x, (None, 0))[0] if x else None for x in node.input]
        ins_static = [d if _static(d) else None for d in ins]
        data_in = any(x in dependent for x in node.input if x)
        for out in node.output:
            dims, et = info.get(out, (None, 0))
            if dims is None or _static(dims):
                continue
            earlier = before.get(out, (None, 0))[0]
            if _static(earlier) and len(earlier or []) == len(dims):
                info[out] = (list(earlier or []), et)
                if data_in or out in before_dependent:
                    dependent.add(out)
                continue
            fixed: list[int] = []
            for d in dims:
                if isinstance(d, int) and d > 0:
                    fixed.append(d)
                    continue
                bound = None
                if isinstance(d, str):
                    bound = bounds.get(d)
                    if bound is None and d.isidentifier():
                        bound = _new_symbols(node, ins_static, values)
                        if bound is not None:
                            bounds[d] = bound
                    if bound is None:
                        bound = _evaluate(d, bounds)
                if bound is None or bound <= 0:
                    break
                fixed.append(bound)
            else:
                info[out] = (fixed, et)
                dependent.add(out)
                continue
            if node.op_type == "Reshape" and ins_static and ins_static[0] is not None \
                    and sum(not (isinstance(d, int) and d > 0) for d in dims) == 1:
                known = math.prod(d for d in dims if isinstance(d, int) and d > 0)
                if known and math.prod(ins_static[0]) % known == 0:  # Reshape keeps the element count
                    _settle(out, dims, [d if isinstance(d, int) and d > 0 else math.prod(ins_static[0]) // known
                                        for d in dims], et, info, bounds, dependent)
                    continue
            parts = [d for d in ins_static if d is not None and len(d) == len(dims)]
            if node.op_type == "Concat" and parts and len(parts) == len(ins_static):
                axis = int(next((a.i for a in node.attribute if a.name == "axis"), 0)) % max(len(dims), 1)
                total = sum(d[axis] for d in parts)  # the boxes of every level, each at its bound
                _settle(out, dims, [total if i == axis else d if isinstance(d, int) and d > 0 else parts[0][i]
                                    for i, d in enumerate(dims)], et, info, bounds, dependent)
                continue
            if node.op_type in _SAME_SHAPE and ins_static and ins_static[0] is not None and len(ins_static[0]) == len(dims):
                # a Cast (an FP16 export's cast back to FP32 before NMS, named in the file with a symbol of an
                # earlier inference) or another op that keeps its input's shape: the input's bound
                _settle(out, dims, list(ins_static[0]), et, info, bounds, dependent)
                continue
            if node.op_type == "Gather" and len(ins_static) == 2 and ins_static[0] and ins_static[1] is not None \
                    and len(node.input) == 2 and node.input[1] in dependent and 0 not in dims \
                    and len(ins_static[0]) + len(ins_static[1]) - 1 == len(dims):
                # the boxes gathered by the kept indices of an NMS (YOLOv7's ``--end2end --max-wh`` tail), not an
                # empty tensor (a 0 the file states stays refused): ONNX spec, output = data.shape[:axis] +
                # indices.shape + data.shape[axis + 1:]
                data, idx = ins_static[0], ins_static[1]
                axis = int(next((a.i for a in node.attribute if a.name == "axis"), 0)) % len(data)
                _settle(out, dims, [*data[:axis], *idx, *data[axis + 1:]], et, info, bounds, dependent)
                continue
            shaped = _expanded_or_padded(node, ins_static, sizes, len(dims))
            if shaped is not None:
                _settle(out, dims, [d if isinstance(d, int) and d > 0 else n for d, n in zip(dims, shaped)],
                        et, info, bounds, dependent)
                continue
            if node.op_type == "Flatten" and ins_static and ins_static[0] is not None and len(dims) == 2:
                axis = int(next((a.i for a in node.attribute if a.name == "axis"), 1))
                axis += len(ins_static[0]) if axis < 0 else 0
                flat = [math.prod(ins_static[0][:axis]), math.prod(ins_static[0][axis:])]  # ONNX spec: 2-D at axis
                _settle(out, dims, [d if isinstance(d, int) and d > 0 else f for d, f in zip(dims, flat)],
                        et, info, bounds, dependent)
                continue
            if node.op_type in _BROADCAST_OPS and ins_static and all(s is not None for s in ins_static) \
                    and max(len(s or []) for s in ins_static) == len(dims):
                # two tensors of the same kept rows, each named with its own symbol: ONNX inference cannot tell
                # the sizes are one and names the sum with a third; the spec's broadcast, at the bounds
                pads = [[1] * (len(dims) - len(s or [])) + list(s or []) for s in ins_static]
                _settle(out, dims, [d if isinstance(d, int) and d > 0 else max(col) for d, *col in zip(dims, *pads)],
                        et, info, bounds, dependent)
                continue
            if node.op_type in ("Slice", "TopK") and ins_static and ins_static[0] is not None and len(ins_static[0]) == len(dims):
                top = _sliced(node, ins_static[0], values) if node.op_type == "Slice" else ins_static[0]
                _settle(out, dims, [d if isinstance(d, int) and d > 0 else n for d, n in zip(dims, top)],
                        et, info, bounds, dependent)  # at most the input, axis by axis
                continue
    return dependent


def bound_data_dependent(original: Iterable[onnx.NodeProto], before: Info, nodes: Iterable[onnx.NodeProto],
                         info: Info, values: Mapping[str, np.ndarray]) -> set[str]:
    """Give every open output dimension its upper bound, in place in ``info`` (see the module).

    The file's own graph is bounded first, inferred with the ``value_info`` the exporter wrote (its
    symbols still say which op made them, and its data propagation reaches through ``Shape``), then
    the folded graph placetune builds, whose open sizes take the file's bound where inference without
    that ``value_info`` left them anonymous (``unk__2``).

    Args:
        original: the file's nodes in topological order.
        before: tensor -> (dims, element type) from shape inference on the file; updated.
        nodes: the folded graph's nodes in topological order.
        info: the same for the folded graph (dims may hold symbols); updated.
        values: the small constants' values (``max_output_boxes_per_class``).

    Returns:
        the names of the tensors whose shape is an upper bound (data-dependent).
    """
    # a size the file's value_info leaves symbolic that inference on the given input shapes fixes (an FP16
    # converter writes its own symbolic shapes of every tensor of a dynamic export) is that size
    before_dependent = _bound(original, before, {k: v for k, v in info.items() if _static(v[0])}, set(), values)
    return _bound(nodes, info, before, before_dependent, values)


def decided_by_data(node: onnx.NodeProto, producers: Mapping[str, onnx.NodeProto], dependent: set[str],
                    limit: int = 5000) -> str | None:
    """The nearest tensor whose size the data decides (see :func:`bound_data_dependent`) among those ``node``
    reads or computes its operands from (``producers``: tensor -> the node that makes it), or None."""
    seen: set[str] = set()
    todo = [x for x in node.input if x]
    while todo and len(seen) < limit:
        x = todo.pop(0)
        if x in seen:
            continue
        seen.add(x)
        if x in dependent:
            return x
        made_by = producers.get(x)
        if made_by is not None:
            todo.extend(i for i in made_by.input if i)
    return None


#: ONNX control flow: a subgraph run on a condition or a loop count
CONTROL_FLOW_OPS = frozenset({"If", "Loop", "Scan"})


def control_flow(layer: str, op: str, tensor: str) -> str:
    """The refusal of an ``If``, ``Loop`` or ``Scan`` whose output size is not static: the subgraph it runs
    is decided by the data (torchvision's detectors: ``If`` no box is left; Mask R-CNN's ``Loop`` over the
    images). TensorRT builds some such layers (its conditional and loop layers); placetune does not place them."""
    return (f"layer {layer[:80]!r} ({op}) is ONNX control flow whose output {tensor[:80]!r} has a size decided at "
            f"run time; placetune places networks of static (or NMS-bounded) shapes and cannot place {op}: export "
            "the network without the part that holds it (a torchvision detector: its backbone and head, without "
            "the transform and postprocess; NMS on the host or in TensorRT's EfficientNMS_TRT plugin)")


#: ops that move or pick data: an output of size 0 is a slice or gather of nothing, not a broken window
DATA_MOVING_OPS = frozenset({"Slice", "Split", "Gather", "GatherND", "GatherElements", "Reshape", "Transpose",
                              "Squeeze", "Unsqueeze", "Flatten", "Expand", "Concat", "Cast", "Identity"})


def empty_branch(layer: str, op: str, tensor: str, dims: Sequence[int | None], source: str | None = None) -> str:
    """The refusal of an empty tensor (a dimension of size 0) a slice or gather makes: Ultralytics'
    ``nms=True`` export of a detect model slices the mask coefficients it has none of (``x[..., 4 + nc:]``)
    and concatenates them to its rows; onnxslim (Ultralytics' ``simplify=True``) removes that branch,
    onnx-simplifier and ``simplify=False`` keep it. ``source``: the file's path, which the command names."""
    shown = "x".join(str(d) if d is not None else "?" for d in dims)
    slim = "in.onnx out.onnx"
    if source:
        stem = source[:-5] if source.endswith(".onnx") else source
        slim = f"{shlex.quote(source)} {shlex.quote(stem + '.slim.onnx')}"
    return (f"layer {layer[:80]!r} ({op}) output {tensor[:80]!r} is an empty tensor [{shown}] (a slice or gather of "
            "nothing, e.g. the mask coefficients of an Ultralytics nms=True detect export, which has none); "
            "placetune places layers whose every dimension is >= 1: remove the empty branch with onnxslim "
            f"(`onnxslim {slim}`; Ultralytics does with its default simplify=True; onnxsim keeps it)")


def unbounded(layer: str, op: str, tensor: str, dims: list | None, computed: bool = True,
              empty: Sequence[int | None] | None = None, source: str | None = None) -> str:
    """The refusal of a layer output whose shape is not static: a size that depends on values in the graph
    and has no bound placetune knows (a dimension left open), or a dimension shape inference writes as 0
    or negative, where the node asks for an empty or impossible tensor (a pooling window larger than its
    padded input; inference leaves such a dimension open too): such an output used to be taken as a scalar,
    its layer simulated and measured ``ok``. ``computed``: an operand after the node's first is computed in
    the graph (else the open size comes from the node's own attributes and shapes). ``empty``: the output's
    dims where ONNX shape inference sizes it 0 (an empty tensor), else None; ``source``: the model file's path."""
    if op in CONTROL_FLOW_OPS:
        return control_flow(layer, op, tensor)
    if empty and op in DATA_MOVING_OPS:
        return empty_branch(layer, op, tensor, empty, source)
    if not computed or (dims and all(isinstance(d, int) for d in dims)):
        return (f"layer {layer[:80]!r} ({op}) output {tensor[:80]!r} has no static shape: shape inference "
                "leaves a dimension open, empty or negative (a size computed at run time, or e.g. a pooling "
                "window larger than its input); placetune needs every dimension fixed and >= 1")
    shown = "x".join(str(d)[:40] if d is not None else "?" for d in dims or [])
    return (f"layer {layer[:80]!r} ({op}) output {tensor[:80]!r} has a size that depends on values computed in the "
            f"graph [{shown}] and placetune cannot bound it (it bounds the sizes after NonZero, NonMaxSuppression and "
            f"TopK); every layer needs a static or bounded shape: fold the shape computations first ({_FOLD}), or "
            "export the network without its post-processing (NMS on the host, or TensorRT's EfficientNMS_TRT plugin)")


#: ops whose every input is data, broadcast together (no operand sizes the output)
_BROADCAST_OPS = frozenset({"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "Equal", "Greater", "Less",
                            "GreaterOrEqual", "LessOrEqual", "And", "Or", "Xor", "Where", "Mod", "PRelu"})


def clashing_shapes(node: onnx.NodeProto, shapes: list[list | None]) -> bool:
    """True when the static input shapes of a Concat or a broadcasting op do not fit together (other
    ranks, or sizes off the concatenation axis that differ; sizes that do not broadcast): why shape
    inference gave its output no shape. False when a shape is open or they fit (the cause is elsewhere)."""
    if node.domain not in ("", "ai.onnx") or not shapes or any(
            s is None or not all(isinstance(d, int) for d in s) for s in shapes):
        return False
    shapes_known = [s for s in shapes if s is not None]  # every one (checked above), as the type checker sees it
    if node.op_type == "Concat":
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        rank = len(shapes_known[0])
        if any(len(s) != rank for s in shapes_known):
            return True
        if not -rank <= axis < rank:
            return False
        axis %= rank
        return any([d for i, d in enumerate(s) if i != axis] != [d for i, d in enumerate(shapes_known[0]) if i != axis]
                   for s in shapes_known)
    if node.op_type in _BROADCAST_OPS:
        try:
            np.broadcast_shapes(*(tuple(s) for s in shapes_known))
        except ValueError:
            return True
    return False


def shapes_clash(layer: str, op: str, shapes: list[list], given: str) -> str:
    """The refusal of a layer whose inputs' static shapes do not fit together: at an input shape given
    other than the file's (``--shape``), the shape is the cause (an image size the network's strides do
    not divide, a batch other than the one its reshapes fix); at the file's own shapes, the file."""
    shown = ", ".join("x".join(str(d) for d in s) if s else "a scalar" for s in shapes)
    head = f"layer {layer[:80]!r} ({op}): its inputs' shapes do not fit together ({shown})"
    if given:
        return (f"{head} at the input shape {given[:200]}; the network does not take that shape: give an image size "
                "its strides divide (a multiple of 32 for YOLO), the batch its export fixed in its reshapes, or "
                "export it again at the shape wanted")
    return (f"{head} at the file's own input shapes, so the node breaks the ONNX spec of {op}: check it with "
            "onnx.checker.check_model(model, full_check=True) and export the model again")


def no_shape(layer: str, node: onnx.NodeProto, tensor: str, standard: bool, computed: bool = True,
             decided_by: str | None = None, control: tuple[str, str] | None = None) -> str:
    """The refusal of a layer output shape inference gives no shape at all: a plugin whose file does
    not declare it; a standard op sized by values inference cannot follow (``computed``: an operand after
    its first is computed in the graph; torchvision's detectors compute their resize and padding from the
    image size in the graph); or a standard op whose attributes or constant operands its spec forbids (an
    axis or a perm out of range, a stride of 0, shapes that do not broadcast).

    ``decided_by``: a tensor the layer reads (or computes its operands from) whose size the data decides
    (a detector's boxes after NonZero or NMS, bounded by placetune). Folding does not give such a layer a
    shape (a Reshape of the boxes to a shape taken from another tensor of boxes, inferred by ONNX only
    from opset 14 on): the post-processing is what to leave out of the export, and ``control`` (a later
    ``If``/``Loop``, layer and op) says what would stop the load at any opset."""
    op = f"{node.domain + '.' if node.domain else ''}{node.op_type}"
    if op in CONTROL_FLOW_OPS:
        return control_flow(layer, op, tensor)
    head = f"layer {layer[:80]!r} ({op[:80]}) has no shape inference for output {tensor[:80]!r}"
    if standard and decided_by is not None:
        later = (f"; the network's post-processing also holds ONNX control flow ({control[0][:80]!r}, {control[1]}) "
                 "that placetune does not place at any opset") if control else ""
        return (head + f": its size follows {decided_by[:80]!r}, whose size the data decides (the boxes left after "
                f"NonZero, NonMaxSuppression or TopK), and ONNX shape inference cannot follow it{later}; export the "
                "network without its post-processing (a torchvision detector: its backbone and head, without the "
                "transform and postprocess; NMS on the host or in TensorRT's EfficientNMS_TRT plugin)")
    if not standard:
        return (head + "; placetune needs static shapes for every layer: declare the plugin's output shapes in the "
                "file (value_info or graph outputs) as TensorRT plugin exports do")
    if not computed:
        return (head + f": ONNX shape inference cannot give its shape, so the node breaks the ONNX spec of "
                f"{node.op_type} (an attribute or an input out of range, shapes that do not match): check it with "
                "onnx.checker.check_model(model, full_check=True) and export the model again")
    return (head + f"; its size is computed in the graph from values ONNX shape inference cannot follow; fold those "
            f"computations first ({_FOLD}), or export the network without its pre- and post-processing")
