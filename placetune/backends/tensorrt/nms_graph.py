"""Where a network's TensorRT NMS plugin outputs are, for the pipeline gate to compare them as a set.

EfficientNMS_TRT and BatchedNMS_TRT / BatchedNMSDynamic_TRT write num_detections, boxes, scores and
classes (NVIDIA/TensorRT release/10.3 plugin/efficientNMSPlugin/README.md:82-93,
plugin/batchedNMSPlugin/README.md:39-49); EfficientNMS_ONNX_TRT writes one tensor of selected
indices, rows (batch, class, box) in the order its threads finish (an ``atomicAdd`` slot:
efficientNMSInference.cu:148-156), the rest of the rows a copy of the last one written
(``PadONNXResult``, :158-175), all -1 when nothing was kept (the ``0xFF`` memset, :637-640). A
plugin output reaches a network output directly or through ops that keep its values and their
memory order (:data:`ROW_KEEPING`: a Cast of the classes to float, a Reshape of num_detections to
``[B]``, as some exports write); through any other op (a Gather, a Concat of boxes and scores) the
output stays compared element by element, and :func:`nms_elementwise` says so. An ONNX
NonMaxSuppression's selected rows: :mod:`~placetune.backends.tensorrt.nms_onnx`.
"""

from __future__ import annotations

from typing import Any

import onnx

from placetune.backends.tensorrt.nms_onnx import onnx_nms_scan

#: TensorRT NMS plugins that write num_detections, boxes, scores, classes, with their attribute
#: names for the score and IoU thresholds
NMS_PLUGINS = {"EfficientNMS_TRT": ("score_threshold", "iou_threshold"),
               "BatchedNMS_TRT": ("scoreThreshold", "iouThreshold"),
               "BatchedNMSDynamic_TRT": ("scoreThreshold", "iouThreshold")}
#: the plugin whose one output is selected indices [N, 3] (efficientNMSPlugin.cpp:532-541)
NMS_INDICES = "EfficientNMS_ONNX_TRT"
#: ops that keep a tensor's values and their memory order, so an NMS output's rows survive them
ROW_KEEPING = {"Cast", "Reshape", "Identity", "Unsqueeze", "Squeeze", "Flatten"}


def _follow(graph: "onnx.GraphProto") -> Any:
    """A function from a tensor to (the network output it reaches through :data:`ROW_KEEPING` ops
    or None, the other ops that read it on the way)."""
    outputs = {o.name for o in graph.output}
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)

    def follow(name: str) -> tuple[str | None, list[str]]:
        if name in outputs:
            return name, []
        blockers: list[str] = []
        for node in readers.get(name, []):
            if node.op_type in ROW_KEEPING and node.input[0] == name:
                found, more = follow(node.output[0])
                if found:
                    return found, []
                blockers += more
            else:
                blockers.append(f"{node.op_type} {node.name or node.output[0]!r}")
        return None, blockers
    return follow


def _scan(graph: "onnx.GraphProto") -> tuple[list[dict[str, Any]], list[str]]:
    follow = _follow(graph)
    groups, elementwise = [], []
    for node in graph.node:
        if node.op_type not in NMS_PLUGINS and node.op_type != NMS_INDICES:
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        reached = [follow(o) for o in node.output]
        names = [r[0] for r in reached]
        label = f"{node.op_type} {node.name or node.output[0]!r}"
        if not node.output or not all(names):
            if any(names) or any(r[1] for r in reached):
                through = sorted({b for r in reached for b in r[1]})
                elementwise.append(f"{label} outputs through " + ", ".join(through) if through
                                   else f"{label} outputs not all network outputs")
            continue
        score, iou = NMS_PLUGINS.get(node.op_type, ("score_threshold", "iou_threshold"))
        group = {"node": node.name or node.output[0], "op": node.op_type,
                 "score_threshold": float(attrs[score]) if score in attrs else None,
                 "iou_threshold": float(attrs[iou]) if iou in attrs else None}
        if node.op_type == NMS_INDICES:
            groups.append({**group, "indices": names[0]})
        elif len(names) == 4:
            groups.append({**group, **dict(zip(("num_detections", "boxes", "scores", "classes"), names)),
                           "class_agnostic": bool(attrs.get("class_agnostic", 0))})
    return groups, elementwise


def nms_outputs(graph: "onnx.GraphProto", opset: int | None = None) -> list[dict[str, Any]]:
    """The NMS plugin nodes whose outputs all reach network outputs (directly or through
    :data:`ROW_KEEPING` ops): those network outputs' names, the thresholds and ``class_agnostic``
    (EfficientNMS_ONNX_TRT: ``indices``, its one output), for the gate to compare them as a set (an
    FP16 / DLA difference in what NMS is fed reorders its sorted output or keeps a borderline box);
    then the ONNX NonMaxSuppression nodes whose selected rows reach network outputs
    (:func:`~placetune.backends.tensorrt.nms_onnx.onnx_nms_scan`: ``rows``, per output its columns;
    ``opset``: the model's, which that scan reads the nodes by)."""
    return _scan(graph)[0] + onnx_nms_scan(graph, opset)[0]


def nms_elementwise(graph: "onnx.GraphProto", opset: int | None = None) -> list[str]:
    """The NMS plugin nodes whose outputs the gate still compares element by element, each with
    why in a few words (``EfficientNMS_TRT '/nms' outputs through Gather '/post/Gather'``); the same
    for ONNX NonMaxSuppression nodes whose selected rows go through an op that does not keep rows."""
    return _scan(graph)[1] + onnx_nms_scan(graph, opset)[1]
