"""Which network outputs are rows of detections selected by an ONNX NonMaxSuppression, for the gate to compare as a set.

ONNX ``NonMaxSuppression`` writes ``selected_indices`` [N, 3], rows (batch, class, box) (onnx
Operators.md); a detector's graph then gathers the candidates' boxes, scores and classes with the
box column of those rows. An Ultralytics ``nms=True`` export (yolo11n, opset 18, read from a real
export) does: NonMaxSuppression -> Gather(axis 1, [2]) -> Squeeze -> Slice(0:300) -> Gather(axis 0)
of the candidates' boxes [M, 4], scores [M] and classes [M] (int64) -> Reshape [-1, 1] / Cast ->
Concat(axis -1) [n, 6] -> Reshape [-1] -> Pad (computed pads) -> Reshape [1, 300, 6] -> ScatterND
into zeros. The rows of such an output are the detections, in NMS order; an FP16 / DLA difference
in what NMS is fed reorders them or keeps a borderline one, so the gate compares them as a set.

Every op on the way must keep whole rows (:func:`_step`): a Gather along the detection axis, a
Slice of its first rows, Squeeze / Unsqueeze / Reshape / Flatten (memory order kept: the gate
reads an output as rows of its width), Cast / Identity, a Concat along the last
axis, a TopK and a Gather by its indices, a zero Pad at the end of the rows (its pads evaluated for
several detection counts when computed in the graph), a ScatterND of the rows into zeros. A column
is a box coordinate (4 wide, the candidate tensor reaches NMS's boxes), a score (1 wide, reaches
NMS's scores) or a class (1 wide, integer); otherwise the rows are compared as plain vectors.
Anything else leaves the output element by element, and :func:`onnx_nms_scan` says why.

At ``batch=B`` the export unrolls its loop over the images: B NonMaxSuppression, image i's rows
[1, 300, 6] ScatterND'ed into slot [[i]] of zeros [B, 300, 6], each into the previous one's output
(read from real batch 2 exports, static and dynamic). NMS nodes that each write their own slot of
the same outputs are one group (:func:`_per_image`), compared image by image by the gate.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

#: ops that keep a tensor's rows as they are (Reshape, Squeeze, Unsqueeze: checked in :func:`_step`)
_SAME = {"Cast", "Identity"}
_INTEGER = {onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32, onnx.TensorProto.INT64,
            onnx.TensorProto.UINT8, onnx.TensorProto.UINT16, onnx.TensorProto.UINT32, onnx.TensorProto.UINT64}
#: detection counts the computed pads of a Pad are evaluated for
_TRIAL_COUNTS = (0, 1, 7)


class _Graph:
    """The graph's constants, producers, readers and known shapes / element types."""

    def __init__(self, graph: onnx.GraphProto, opset: int = 17):
        self.graph = graph
        self.opset = opset
        self.const: dict[str, np.ndarray] = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
        for node in graph.node:
            if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
                self.const[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
        self.producer = {o: n for n in graph.node for o in n.output}
        self.readers: dict[str, list[onnx.NodeProto]] = {}
        for node in graph.node:
            for name in node.input:
                self.readers.setdefault(name, []).append(node)
        self.outputs = [o.name for o in graph.output]
        infos = list(graph.value_info) + list(graph.output) + list(graph.input)
        try:  # ONNX's inference where the exporter wrote no shape (best effort; the exporter's win)
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
            infos = list(onnx.shape_inference.infer_shapes(model).graph.value_info) + infos
        except Exception:  # noqa: BLE001 - unknown shapes only leave outputs element by element
            pass
        self.dims: dict[str, list[int | None]] = {}
        self.rank: dict[str, int] = {}
        self.last: dict[str, int | None] = {}
        self.elem: dict[str, int] = {}
        for v in infos:
            t = v.type.tensor_type
            self.elem[v.name] = t.elem_type
            if t.HasField("shape"):
                dims = t.shape.dim
                self.dims[v.name] = [d.dim_value if d.HasField("dim_value") else None for d in dims]
                self.rank[v.name] = len(dims)
                self.last[v.name] = dims[-1].dim_value if dims and dims[-1].HasField("dim_value") else None

    def scalar(self, name: str) -> float | None:
        v = self.const.get(name)
        return float(v.reshape(-1)[0]) if v is not None and v.size == 1 else None

    def ancestors(self, name: str) -> set[str]:
        seen, todo = set(), [name]
        while todo:
            t = todo.pop()
            if t in seen:
                continue
            seen.add(t)
            node = self.producer.get(t)
            if node is not None:
                todo += [i for i in node.input if i]
        return seen


def _axis(node: onnx.NodeProto, default: int = 0) -> int:
    return int(next((helper.get_attribute_value(a) for a in node.attribute if a.name == "axis"), default))


def _label(g: _Graph, data: str, nms: onnx.NodeProto, boxes_anc: set[str], scores_anc: set[str]) -> list[str] | None:
    """The columns of candidate tensor ``data`` [M] or [M, W] gathered by NMS's box indices."""
    rank, width = g.rank.get(data), g.last.get(data)
    if rank == 1:
        width = 1
    if rank not in (1, 2) or not width:
        return None
    if width == 4 and data in boxes_anc:
        return ["box"] * 4
    if width == 1 and data in scores_anc:
        return ["score"]
    if width == 1 and g.elem.get(data) in _INTEGER:
        return ["class"]
    return ["value"] * width


def _pads_ok(g: _Graph, node: onnx.NodeProto, state: dict[str, Any], states: dict[str, Any]) -> bool:
    """A Pad of rows: constant mode, pad value 0, only after the rows (flat: by whole rows). Computed
    pads are evaluated for a few detection counts, every tracked tensor they read fed as zeros."""
    mode = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "mode"), b"constant")
    if mode not in (b"constant", "constant") or (len(node.input) > 3 and node.input[3]):
        return False
    if len(node.input) > 2 and node.input[2] and (g.scalar(node.input[2]) or 0.0) != 0.0:
        return False
    pads_name = node.input[1]
    width = len(state["cols"])
    trials = []
    if pads_name in g.const:
        trials = [g.const[pads_name]]
    else:
        try:
            trials = [_evaluate(g, pads_name, states, n) for n in _TRIAL_COUNTS]
        except Exception:  # noqa: BLE001 - pads the graph computes from more than the rows' count
            return False
    for pads in trials:
        pads = np.asarray(pads).reshape(-1)
        rank = len(pads) // 2
        begin, end = pads[:rank], pads[rank:]
        if state["flat"] or state["rank"] == 1:  # n * W values, or [n]
            if rank != 1 or begin[0] != 0 or end[0] % width:
                return False
        elif rank < 1 or begin.any() or end[:-2].any() or end[-1] or (rank >= 2 and end[-2] < 0):
            return False
    return True


def _evaluate(g: _Graph, name: str, states: dict[str, Any], n: int) -> np.ndarray:
    """The value of ``name`` when the tracked tensors hold ``n`` detections (fed as zeros)."""
    from onnx.reference import ReferenceEvaluator

    nodes, feeds, todo, seen = [], {}, [name], set()
    while todo:
        t = todo.pop()
        if t in seen or not t or t in g.const:
            continue
        seen.add(t)
        if t in states and not states[t].get("index"):
            st = states[t]
            width = len(st["cols"])
            shape = (n * width,) if st["flat"] else (n,) if st["rank"] == 1 else (n, width)
            feeds[t] = np.zeros(shape, np.float32)
            continue
        node = g.producer.get(t)
        if node is None:
            raise ValueError(f"{t!r} is not computed from constants and rows")
        nodes.append(node)
        todo += list(node.input)
    inits = [numpy_helper.from_array(v, k) for k, v in g.const.items()
             if any(k in nd.input for nd in nodes)]
    order = [nd for nd in g.graph.node if nd in nodes]
    sub = helper.make_graph(order, "pads", [helper.make_tensor_value_info(k, onnx.TensorProto.FLOAT, None)
                                            for k in feeds],
                            [helper.make_tensor_value_info(name, onnx.TensorProto.UNDEFINED, None)], inits)
    model = helper.make_model(sub, opset_imports=[helper.make_opsetid("", g.opset)])
    result: Any = ReferenceEvaluator(model).run(None, feeds)
    return np.asarray(result[0])


def _step(g: _Graph, node: onnx.NodeProto, name: str, st: dict[str, Any], states: dict[str, Any],
          ctx: dict[str, Any]) -> dict[str, dict[str, Any]] | None:
    """What ``node`` makes of tracked tensor ``name`` (state ``st``): {output: state}, or None when
    its output is no longer whole rows."""
    op, ins = node.op_type, list(node.input)
    out = node.output[0] if node.output else ""
    if op in _SAME:
        return {out: dict(st)}
    if st.get("index"):  # the selected box indices: [N, 3] rows, a column of them, their first rows
        if op == "Gather" and ins[0] == name and st["index"] == "selected" and _axis(node) == 1 \
                and g.scalar(ins[1]) == 2:
            return {out: dict(st, index="box", rank=2 if g.const[ins[1]].ndim else 1)}
        if st["index"] == "box" and op in ("Squeeze", "Reshape", "Flatten", "Unsqueeze") and ins[0] == name:
            return {out: dict(st, rank=None)}  # a vector of box indices, whatever its unit axes
        if st["index"] == "box" and op == "Slice" and ins[0] == name:
            starts, ends = g.const.get(ins[1]), g.const.get(ins[2])
            axes = g.const.get(ins[3]) if len(ins) > 3 and ins[3] else None
            steps = g.const.get(ins[4]) if len(ins) > 4 and ins[4] else None
            if starts is None or ends is None or starts.size != 1 or int(starts.reshape(-1)[0]) != 0 or \
                    (axes is not None and int(axes.reshape(-1)[0]) != 0) or \
                    (steps is not None and int(steps.reshape(-1)[0]) != 1) or int(ends.reshape(-1)[0]) < 0:
                return None
            cap = int(ends.reshape(-1)[0])
            return {out: dict(st, cap=min(cap, st["cap"]) if st.get("cap") is not None else cap)}
        if op == "Gather" and ins[1] == name and st["index"] in ("box", "order") and _axis(node) == 0:
            if st["index"] == "order":  # rows reordered by TopK's indices
                base = states.get(ins[0])
                if base is None or base.get("index"):
                    return None
                return {out: dict(base, cap=_min(base.get("cap"), st.get("cap")))}
            if ins[0] in states:
                return None
            cols = _label(g, ins[0], ctx["nms"], ctx["boxes_anc"], ctx["scores_anc"])
            if cols is None:
                return None
            return {out: {"cols": cols, "rank": g.rank.get(ins[0]), "flat": False, "cap": st.get("cap")}}
        return None
    rank, width = st["rank"], len(st["cols"])
    if op == "Gather" and ins[0] == name and ins[1] in states and states[ins[1]].get("index") == "order":
        return {out: dict(st, cap=_min(st.get("cap"), states[ins[1]].get("cap")))}
    if op in ("Squeeze", "Unsqueeze", "Reshape", "Flatten") and ins[0] == name:
        # memory order kept, so the rows are too (the gate reads an output as rows of its width);
        # the shape is followed where it is plain, for a later Concat or Pad
        return {out: _reshaped(g, node, st)}
    if op == "Concat" and width and not st["flat"]:
        axis = _axis(node)
        parts: list[Any] = [states.get(i) for i in ins]
        if any(p is None or p.get("index") or p["flat"] or p["rank"] != 2 for p in parts) or \
                axis not in (-1, 1) or any(p.get("nms") != st.get("nms") for p in parts):
            return None
        return {out: {"cols": [c for p in parts for c in p["cols"]], "rank": 2, "flat": False,
                      "cap": _min(*[p.get("cap") for p in parts])}}
    if op == "Pad" and ins[0] == name and _pads_ok(g, node, st, states):
        return {out: dict(st, padded=True)}
    if op == "ScatterND" and len(ins) == 3 and ins[1] in g.const and not st["flat"]:
        image = _image_index(g.const[ins[1]])
        if ins[2] == name and (_zeros(g, ins[0]) or (image is not None and _zeros_but(g, ins[0], image))):
            return {out: dict(st, padded=True, image=image)}  # the rows written into zeros (the padding)
        if ins[0] == name and ins[2] not in states and image is not None and st.get("image") not in (None, image):
            return {out: dict(st)}  # another image's rows written into their own slice beside these
        return None
    if op == "Slice" and ins[0] == name and not st["flat"] and st["rank"] and st["rank"] > 2:
        axes = g.const.get(ins[3]) if len(ins) > 3 and ins[3] else None
        starts = g.const.get(ins[1])
        steps = g.const.get(ins[4]) if len(ins) > 4 and ins[4] else None
        if axes is not None and starts is not None and all(0 <= int(a) < st["rank"] - 2 for a in axes.reshape(-1)) \
                and not starts.any() and (steps is None or (steps == 1).all()):
            return {out: dict(st)}  # a leading (batch) axis cut: whole rows kept or dropped alike on both sides
        return None
    if op == "TopK" and ins[0] == name and width == 1 and st["cols"] == ["score"] and not st["flat"] \
            and _axis(node, -1) in (0, -1 if rank == 1 else 0):
        k = g.scalar(ins[1]) if len(ins) > 1 else None
        top = _min(st.get("cap"), int(k) if k is not None else None)
        return {node.output[0]: dict(st, cap=top), node.output[1]: {"index": "order", "cap": top, "rank": rank}}
    return None


def _reshaped(g: _Graph, node: onnx.NodeProto, st: dict[str, Any]) -> dict[str, Any]:
    """The rows' state after a Squeeze, Unsqueeze, Reshape or Flatten: rows [.., n, W] when the new
    shape is plain, else flat (n * W values in memory order, shape not followed)."""
    op, ins, rank, width = node.op_type, list(node.input), st["rank"], len(st["cols"])
    flat = dict(st, flat=True, rank=1)
    if st["flat"] and op != "Reshape":
        return flat
    found = g.const.get(ins[1]) if len(ins) > 1 and ins[1] else next(
        (np.asarray(helper.get_attribute_value(a)) for a in node.attribute if a.name == "axes"), None)
    axes = [int(v) for v in found.reshape(-1)] if found is not None else None
    if op == "Unsqueeze" and axes is not None and rank:
        if rank == 1 and axes in ([1], [-1]):  # [n] -> [n, 1]
            return dict(st, rank=2)
        if rank >= 2 and all(0 <= a < len(axes) for a in axes):  # leading unit axes
            return dict(st, rank=rank + len(axes))
    if op == "Squeeze" and rank:
        if rank == 2 and width == 1 and axes in ([1], [-1]):  # [n, 1] -> [n]
            return dict(st, rank=1)
        if axes and rank > 2 and all(0 <= a < rank - 2 for a in axes):  # leading unit axes
            return dict(st, rank=rank - len(axes))
    if op == "Reshape" and ins[1] in g.const:
        target = [int(v) for v in g.const[ins[1]].reshape(-1)]
        if len(target) >= 2 and target[-1] == width and all(v == 1 for v in target[:-2]):
            return dict(st, flat=False, rank=len(target))  # [1, .., rows, W]
        if width == 1 and len(target) == 1 and not st["flat"]:
            return dict(st, rank=1)
    return flat


def _zeros(g: _Graph, name: str) -> bool:
    """A tensor of zeros: a constant, or a ConstantOfShape of value 0."""
    if name in g.const:
        return not g.const[name].any()
    node = g.producer.get(name)
    if node is None or node.op_type != "ConstantOfShape":
        return False
    value = next((numpy_helper.to_array(a.t) for a in node.attribute if a.name == "value"), None)
    return value is None or not value.any()


def _image_index(indices: np.ndarray) -> int | None:
    """The batch slot a ScatterND's indices [[i]] write whole (an Ultralytics export at batch B writes
    image i's [1, K, W] rows so, one ScatterND per image)."""
    return int(indices.reshape(-1)[0]) if indices.shape == (1, 1) and int(indices.reshape(-1)[0]) >= 0 else None


def _zeros_but(g: _Graph, name: str, image: int) -> bool:
    """Zeros in batch slot ``image``: zeros, or other slots' rows written into zeros by ScatterND [[j]]."""
    if _zeros(g, name):
        return True
    node = g.producer.get(name)
    return node is not None and node.op_type == "ScatterND" and len(node.input) == 3 and \
        node.input[1] in g.const and _image_index(g.const[node.input[1]]) not in (None, image) and \
        _zeros_but(g, node.input[0], image)


def _min(*values: int | None) -> int | None:
    known = [v for v in values if v is not None]
    return min(known) if known else None


def _threshold(g: _Graph, nms: onnx.NodeProto) -> float | None:
    """NMS's score_threshold input when a constant; else the constant of the one Greater (OrEqual)
    whose NonZero picked the candidates NMS scores (Ultralytics: Greater(conf, 0.25) -> NonZero ->
    Transpose -> GatherND(conf) -> NonMaxSuppression); None when there are several (a size filter
    too: which one is the score's is not read) or none."""
    if len(nms.input) > 4 and nms.input[4]:
        return g.scalar(nms.input[4])
    found = set()
    for t in g.ancestors(nms.input[1]):
        node = g.producer.get(t)
        if node is not None and node.op_type == "NonZero":
            cmp = g.producer.get(node.input[0])
            if cmp is None or cmp.op_type not in ("Greater", "GreaterOrEqual") or cmp.input[1] not in g.const:
                return None  # candidates picked by another test
            found.add(g.scalar(cmp.input[1]))
    return found.pop() if len(found) == 1 else None


#: the last graphs scanned (each pipeline job asks twice of one model's graph), kept alive so that
#: their ids stay theirs
_SCANNED: list[tuple[onnx.GraphProto, int, int, tuple[list[dict[str, Any]], list[str]]]] = []


def onnx_nms_scan(graph: onnx.GraphProto, opset: int | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """The NonMaxSuppression nodes whose selected rows reach network outputs through ops that keep
    whole rows: one group each (``rows``: per output its column labels; the thresholds; ``max_rows``,
    the cap a Slice / TopK puts on the count), and for the others why they stay element by element.
    ``opset``: the model's (default domain; 17 when not given): ONNX's shape inference and the
    evaluation of computed pads read the nodes by its operator versions (an opset 11 / 12 export's
    Squeeze and Unsqueeze carry their axes as attributes; read as opset 17 they lost every shape
    after them, and the rows stayed element by element)."""
    if not any(n.op_type == "NonMaxSuppression" for n in graph.node):
        return [], []
    opset = int(opset or 17)
    for seen, nodes, version, found in _SCANNED:
        if seen is graph and nodes == len(graph.node) and version == opset:
            return [dict(x) for x in found[0]], list(found[1])
    found = _scan(graph, opset)
    _SCANNED[:] = _SCANNED[-3:] + [(graph, len(graph.node), opset, found)]
    return [dict(x) for x in found[0]], list(found[1])


def _scan(graph: onnx.GraphProto, opset: int) -> tuple[list[dict[str, Any]], list[str]]:
    groups: list[dict[str, Any]] = []
    elementwise: list[str] = []
    g = _Graph(graph, opset)
    for nms in graph.node:
        if nms.op_type != "NonMaxSuppression" or not nms.output:
            continue
        label = f"NonMaxSuppression {nms.name or nms.output[0]!r}"
        if len(nms.input) < 2:
            elementwise.append(f"{label} has no scores input")
            continue
        try:
            found = _scan_one(g, graph, nms, label, elementwise)
        except (IndexError, KeyError, ValueError, TypeError) as exc:  # an op form the rules do not read (opset < 10)
            elementwise.append(f"{label} selected rows through a graph not read ({type(exc).__name__})")
            continue
        if found is not None:
            groups.append(found)
    return _per_image(groups, elementwise), elementwise


def _per_image(groups: list[dict[str, Any]], elementwise: list[str]) -> list[dict[str, Any]]:
    """One group per output: NonMaxSuppression nodes that each write one image's rows into their own
    batch slot of the same outputs (an Ultralytics ``nms=True`` export at batch B unrolls its loop over
    the images: B NonMaxSuppression, each image's rows ScatterND'ed into slot [i] of [B, K, W]) are
    one group, compared image by image (``images_written``: how many slots any NMS writes). Nodes
    whose outputs overlap otherwise stay element by element."""
    by_outputs: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for group in groups:
        by_outputs.setdefault(tuple(r["output"] for r in group["rows"]), []).append(group)
    merged: list[dict[str, Any]] = []
    taken: set[str] = set()
    for outs, members in by_outputs.items():
        images = [m.pop("_images") for m in members]
        if taken & set(outs) or len(members) > 1 and (
                any(None in i or len(set(i)) != 1 for i in images) or len({i[0] for i in images}) != len(images)
                or len({(m["center_point_box"], m["iou_threshold"], m["score_threshold"], tuple(
                    tuple(r["columns"]) for r in m["rows"])) for m in members}) != 1):
            elementwise.append(", ".join(f"NonMaxSuppression {m['node']!r}" for m in members) +
                               " selected rows of several NMS in one output, not one image each")
            continue
        taken |= set(outs)
        if len(members) == 1:
            merged.append(members[0])
            continue
        order = sorted(range(len(members)), key=lambda k: images[k][0])
        first = dict(members[order[0]])
        first.update(nodes=[members[k]["node"] for k in order], images_written=max(i[0] for i in images) + 1,
                     max_rows=_min(*[m["max_rows"] for m in members]),
                     single_class=all(m["single_class"] for m in members))
        merged.append(first)
    return merged


def _scan_one(g: _Graph, graph: onnx.GraphProto, nms: onnx.NodeProto, label: str,
              elementwise: list[str]) -> dict[str, Any] | None:
    """One NonMaxSuppression's group, or None (``elementwise`` says why when an output was reached)."""
    ctx = {"nms": nms, "boxes_anc": g.ancestors(nms.input[0]), "scores_anc": g.ancestors(nms.input[1])}
    states: dict[str, dict[str, Any]] = {nms.output[0]: {"index": "selected", "cap": None}}
    blockers: list[onnx.NodeProto] = []
    for node in graph.node:  # topological: every tracked input is known when its readers come
        tracked = [i for i in node.input if i in states]
        if not tracked or node is nms:
            continue
        made = None
        for name in tracked:
            made = _step(g, node, name, states[name], states, ctx)
            if made is not None:
                break
        if made is None:
            blockers.append(node)
            continue
        for k, v in made.items():
            states[k] = dict(v, nms=nms.name or nms.output[0])
    outs = [o for o in g.outputs if o in states and not states[o].get("index")]
    reach = set().union(*[g.ancestors(o) for o in g.outputs]) - _pad_inputs(g)
    cut_short = sorted({f"{b.op_type} {b.name or b.output[0]!r}" for b in blockers
                        if any(o in reach for o in b.output)})  # not a Shape that only sizes a Pad
    if cut_short:
        elementwise.append(f"{label} selected rows through " + ", ".join(cut_short))
    if not outs:
        return None
    batch = _batch(g, nms.input[0])
    if batch != 1:
        elementwise.append(f"{label} boxes of a batch of {batch or 'unknown size'} (one image is compared as a set)")
        return None
    cap = _min(*[states[o].get("cap") for o in outs])
    per_class = g.scalar(nms.input[2]) if len(nms.input) > 2 and nms.input[2] else None
    if per_class is not None and per_class > 0 and _classes(g, nms.input[1]) == 1:
        cap = _min(cap, int(per_class))  # one NMS class: the per-class count is the total
    center = int(next((helper.get_attribute_value(a) for a in nms.attribute if a.name == "center_point_box"), 0))
    # no iou_threshold input: the ONNX spec's 0; one computed in the graph: unknown (None), never 0
    iou = g.scalar(nms.input[3]) if len(nms.input) > 3 and nms.input[3] else 0.0
    return {"node": nms.name or nms.output[0], "op": "NonMaxSuppression",
            "rows": [{"output": o, "columns": list(states[o]["cols"])} for o in outs],
            "score_threshold": _threshold(g, nms), "iou_threshold": iou,
            "max_rows": cap, "center_point_box": center, "single_class": _classes(g, nms.input[1]) == 1,
            "_images": tuple(states[o].get("image") for o in outs)}


def _pad_inputs(g: _Graph) -> set[str]:
    """Everything that only computes a Pad's pads (an input other than the data)."""
    found: set[str] = set()
    for node in g.graph.node:
        if node.op_type == "Pad" and len(node.input) > 1:
            found |= g.ancestors(node.input[1])
    return found


def _batch(g: _Graph, boxes: str) -> int | None:
    dims = g.dims.get(boxes)
    if dims:
        return dims[0]
    node = g.producer.get(boxes)
    if node is not None and node.op_type == "Unsqueeze" and len(node.input) > 1 and \
            g.const.get(node.input[1]) is not None and int(g.const[node.input[1]].reshape(-1)[0]) == 0:
        return 1  # a batch axis added to the candidates of one image
    return None


def _classes(g: _Graph, scores: str) -> int | None:
    dims = g.dims.get(scores)
    return dims[1] if dims and len(dims) == 3 else None
