"""Kernels of TensorRT's built-in plugins for the doubles' ``onnx.reference`` evaluation of an engine.

``EfficientNMS_TRT`` as NVIDIA/TensorRT release/10.3 plugin/efficientNMSPlugin/README.md describes
it: inputs boxes ``[B, N, 4]`` (``box_coding`` 0: corners x1, y1, x2, y2; 1: center x, y, width,
height) and scores ``[B, N, C]``; scores below ``score_threshold`` rejected (README.md:118,124),
the rest sorted in descending order (:128), a box removed when its IoU with a higher-scoring kept
box of its class (any class with ``class_agnostic``) is above ``iou_threshold`` (:118,148), at most
``max_output_boxes`` kept; outputs num_detections ``[B, 1]`` int32, boxes in corners ``[B, K, 4]``,
scores ``[B, K]``, classes ``[B, K]`` int32, only the first num_detections rows valid (:82-93),
the rest zero (efficientNMSInference.cu:643-646 zero-fills them). ``score_activation`` applies a
sigmoid to the scores first. Not modelled: the 4096-candidate limit (README.md:130), anchors, the
kernel's tie order (ties here keep the input order). ``EfficientNMS_ONNX_TRT`` (:func:`efficient_nms_onnx`):
the same selection written as selected indices.
"""

from __future__ import annotations

import numpy as np
from onnx.reference.op_run import OpRun


def _corners(boxes: np.ndarray, coding: int) -> np.ndarray:
    if coding != 1:
        return boxes
    xc, yc, w, h = boxes[..., 0], boxes[..., 1], boxes[..., 2], boxes[..., 3]
    return np.stack([xc - w / 2, yc - h / 2, xc + w / 2, yc + h / 2], axis=-1)


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    x1, y1 = np.maximum(a[0], b[:, 0]), np.maximum(a[1], b[:, 1])
    x2, y2 = np.minimum(a[2], b[:, 2]), np.minimum(a[3], b[:, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]) - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def _select(boxes, scores, score_threshold, iou_threshold, max_output_boxes, background_class, score_activation,
            class_agnostic, box_coding):
    """Per image: the kept (flat index anchor * C + class) in descending score, the boxes in corners,
    the (activated) scores flattened."""
    boxes = _corners(np.asarray(boxes, np.float32), int(box_coding))
    scores = np.asarray(scores, np.float32)
    if score_activation:
        scores = 1 / (1 + np.exp(-scores))
    b_n, n, c = scores.shape
    k = int(max_output_boxes)
    per_image = []
    for b in range(b_n):
        s = scores[b].copy()
        if 0 <= int(background_class) < c:
            s[:, int(background_class)] = -np.inf
        flat = s.reshape(-1)
        cand = np.nonzero(flat >= float(score_threshold))[0]
        cand = cand[np.argsort(-flat[cand], kind="stable")]
        kept: list[int] = []
        for idx in cand:
            if len(kept) >= k:
                break
            box, cls = boxes[b, idx // c], idx % c
            rivals = [j for j in kept if class_agnostic or j % c == cls]
            if rivals and (_iou(box, boxes[b, [j // c for j in rivals]]) > float(iou_threshold)).any():
                continue
            kept.append(int(idx))
        per_image.append((kept, flat))
    return per_image, boxes, c


def efficient_nms(boxes, scores, score_threshold=0.0, iou_threshold=0.5, max_output_boxes=100,
                  background_class=-1, score_activation=0, class_agnostic=0, box_coding=0):
    per_image, boxes, c = _select(boxes, scores, score_threshold, iou_threshold, max_output_boxes, background_class,
                                  score_activation, class_agnostic, box_coding)
    b_n, k = len(per_image), int(max_output_boxes)
    num = np.zeros((b_n, 1), np.int32)
    out_boxes = np.zeros((b_n, k, 4), np.float32)
    out_scores = np.zeros((b_n, k), np.float32)
    out_classes = np.zeros((b_n, k), np.int32)
    for b, (kept, flat) in enumerate(per_image):
        num[b, 0] = len(kept)
        for i, idx in enumerate(kept):
            out_boxes[b, i], out_scores[b, i], out_classes[b, i] = boxes[b, idx // c], flat[idx], idx % c
    return num, out_boxes, out_scores, out_classes


def efficient_nms_onnx(boxes, scores, score_threshold=0.0, iou_threshold=0.5, max_output_boxes_per_class=100,
                       center_point_box=0):
    """``EfficientNMS_ONNX_TRT``: the same selection with ``max_output_boxes`` = ``max_output_boxes_per_class``
    per image (efficientNMSPlugin.cpp:583-597), written as rows (image, class, anchor) into
    ``[B * max_output_boxes_per_class, 3]`` int32 (:187-195; efficientNMSInference.cu:148-156), the rows
    after the last one written a copy of it (PadONNXResult, :158-175), all -1 when none was kept
    (:637-640). The real kernel writes the rows in the order its threads finish; here image by image,
    highest score first."""
    per_image, _, c = _select(boxes, scores, score_threshold, iou_threshold, max_output_boxes_per_class, -1, 0, 0,
                              center_point_box)
    out = np.full((len(per_image) * int(max_output_boxes_per_class), 3), -1, np.int32)
    rows = [(b, idx % c, idx // c) for b, (kept, _) in enumerate(per_image) for idx in kept]
    for i, r in enumerate(rows):
        out[i] = r
    if rows:
        out[len(rows):] = rows[-1]
    return (out,)


class _EfficientNMS(OpRun):
    def _run(self, boxes, scores, anchors=None, **attrs):  # noqa: ARG002 - anchors: not modelled
        attrs = {k: v for k, v in attrs.items() if k in efficient_nms.__code__.co_varnames}
        return efficient_nms(boxes, scores, **attrs)


class EfficientNMSDefault(_EfficientNMS):
    op_domain = ""


class EfficientNMSTRT(_EfficientNMS):
    op_domain = "TRT"


class _EfficientNMSONNX(OpRun):
    def _run(self, boxes, scores, **attrs):
        attrs = {k: v for k, v in attrs.items() if k in efficient_nms_onnx.__code__.co_varnames}
        return efficient_nms_onnx(boxes, scores, **attrs)


class EfficientNMSONNXDefault(_EfficientNMSONNX):
    op_domain = ""


class EfficientNMSONNXTRT(_EfficientNMSONNX):
    op_domain = "TRT"


EfficientNMSDefault.__name__ = EfficientNMSTRT.__name__ = "EfficientNMS_TRT"
EfficientNMSONNXDefault.__name__ = EfficientNMSONNXTRT.__name__ = "EfficientNMS_ONNX_TRT"

#: the kernels, for ``ReferenceEvaluator(new_ops=...)`` (the node's domain "" as tests/detector.py
#: writes it, or "TRT" as the YOLO TensorRT exports do)
KERNELS = [EfficientNMSDefault, EfficientNMSTRT, EfficientNMSONNXDefault, EfficientNMSONNXTRT]
