"""A TensorRT deployment tail for a YOLO-style ONNX export: the ``EfficientNMS_TRT`` plugin node
appended the way the YOLOv8 / YOLO11 TensorRT export scripts do (``[B, 4+C, N]`` head transposed,
split into center-size boxes and class scores, NMS with four outputs declared in the graph outputs)."""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import TensorProto, helper, numpy_helper
import numpy as np

from placetune.model.onnx_io import read_model_proto

#: a real Ultralytics YOLOv8n export (no NMS), gzipped
YOLOV8N = Path(__file__).parent / "data" / "yolov8n_ultralytics.onnx.gz"

#: EfficientNMS_TRT's outputs, in the plugin's order
NMS_OUTPUTS = ("num_dets", "det_boxes", "det_scores", "det_classes")


def append_efficient_nms(proto: onnx.ModelProto, *, domain: str = "", max_output_boxes: int = 100,
                         batch: int | str = 1) -> onnx.ModelProto:
    """``proto`` (one output ``[B, 4+C, N]``) ending in EfficientNMS_TRT; ``batch`` is the declared
    leading dimension of the four outputs (an int, or the input's dimension name)."""
    out = onnx.ModelProto()
    out.CopyFrom(proto)
    g = out.graph
    head = g.output[0].name
    dims = [d.dim_value or d.dim_param for d in g.output[0].type.tensor_type.shape.dim]
    classes = int(dims[1]) - 4 if len(dims) == 3 and isinstance(dims[1], int) and dims[1] else 80
    g.initializer.append(numpy_helper.from_array(np.array([4, classes], dtype=np.int64), "nms/split_sizes"))
    g.node.extend([
        helper.make_node("Transpose", [head], ["nms/head_t"], name="/nms/Transpose", perm=[0, 2, 1]),
        helper.make_node("Split", ["nms/head_t", "nms/split_sizes"], ["nms/boxes", "nms/scores"],
                         name="/nms/Split", axis=2),
        helper.make_node("EfficientNMS_TRT", ["nms/boxes", "nms/scores"], list(NMS_OUTPUTS),
                         name="/nms/EfficientNMS_TRT", domain=domain, plugin_version="1", background_class=-1,
                         max_output_boxes=max_output_boxes, score_threshold=0.25, iou_threshold=0.45,
                         score_activation=0, box_coding=1),
    ])
    k = max_output_boxes
    del g.output[:]
    g.output.extend([
        helper.make_tensor_value_info("num_dets", TensorProto.INT32, [batch, 1]),
        helper.make_tensor_value_info("det_boxes", TensorProto.FLOAT, [batch, k, 4]),
        helper.make_tensor_value_info("det_scores", TensorProto.FLOAT, [batch, k]),
        helper.make_tensor_value_info("det_classes", TensorProto.INT32, [batch, k]),
    ])
    if domain and all(o.domain != domain for o in out.opset_import):
        out.opset_import.append(helper.make_opsetid(domain, 1))
    return out


def write_yolov8n_nms(folder: Path) -> Path:
    """The real YOLOv8n export ending in EfficientNMS_TRT, written in ``folder``."""
    proto, _ = read_model_proto(YOLOV8N)
    path = Path(folder) / "yolov8n_nms.onnx"
    onnx.save(append_efficient_nms(proto), str(path))
    return path
