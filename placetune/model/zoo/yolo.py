"""Ultralytics YOLOv8 and YOLO11 detectors (detect head, DFL box decoding) as Ultralytics exports them to ONNX.

Node names, the module order and the head's decoding follow ``YOLO("yolov8n.yaml").export(format="onnx")``
(Ultralytics 8.4, onnxslim on): every Conv module is Conv (BatchNorm fused, with bias) + SiLU as
``Sigmoid`` and ``Mul``; C2f splits with a ``Split``; SPPF chains three 5x5 MaxPools; the Detect head
reshapes each scale's box (4x16 DFL bins) and class maps to ``[B, C, H*W]``, concatenates the three
scales, decodes the boxes (DFL Softmax and 1x1 Conv, anchor points, strides) and outputs
``[B, 84, 8400]`` (xywh + 80 class scores) at 640x640. The anchor points and strides are constants
with their real values. YOLO11 replaces C2f by C3k2 (C3k blocks in the deeper stages), adds C2PSA
attention after SPPF and a depthwise class branch in the head. The ``-seg`` models end in ``Segment``:
the Detect head plus 32 mask coefficients per anchor (``output0`` ``[B, 116, 8400]``) and ``Proto``'s
prototype masks (``output1`` ``[B, 32, 160, 160]``, a ConvTranspose upsampling).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from placetune.model.zoo.graph import Graph, Net, scope_names
from placetune.model.zoo.layers import add_conv

#: (depth multiple, width multiple, max channels) of the Ultralytics YOLOv8 scales
_SCALES = {"n": (0.33, 0.25, 1024), "s": (0.33, 0.50, 1024), "m": (0.67, 0.75, 768)}
#: (depth, width, max channels) of the Ultralytics YOLO11 scales
_SCALES_11 = {"n": (0.50, 0.25, 1024), "s": (0.50, 0.50, 1024)}
_CLASSES = 80
_REG_MAX = 16
#: mask coefficients (and prototype masks) of the Ultralytics ``Segment`` head
_MASKS = 32


def _conv(g: Graph, x: str, parts: list[str], cin: int, cout: int, k: int, s: int = 1, groups: int = 1,
          act: bool = True) -> str:
    """Ultralytics ``Conv``: Conv2d (BatchNorm fused into its bias) + SiLU (Sigmoid, Mul) unless ``act`` is off."""
    y = add_conv(g, x, [*parts, "conv"], cin, cout, k, s, k // 2, groups)
    return _silu(g, y, parts) if act else y


def _silu(g: Graph, x: str, parts: list[str]) -> str:
    sig = g.op("Sigmoid", [x], [*parts, "act"])
    return g.op("Mul", [x, sig], [*parts, "act"])


def _bottleneck(g: Graph, x: str, b: list[str], c: int, hidden: int, shortcut: bool) -> str:
    """Ultralytics ``Bottleneck``: two 3x3 Convs, the input added when ``shortcut``."""
    z = _conv(g, _conv(g, x, [*b, "cv1"], c, hidden, 3), [*b, "cv2"], hidden, c, 3)
    return g.op("Add", [x, z], b) if shortcut else z


def _c3k(g: Graph, x: str, b: list[str], c: int, shortcut: bool) -> str:
    """Ultralytics ``C3k`` (YOLO11): cv1 -> two bottlenecks, cv2 beside them, Concat, cv3."""
    h = c // 2
    y, side = _conv(g, x, [*b, "cv1"], c, h, 1), _conv(g, x, [*b, "cv2"], c, h, 1)
    for i in range(2):
        y = _bottleneck(g, y, [*b, "m", f"m.{i}"], h, h, shortcut)
    return _conv(g, g.op("Concat", [y, side], b, axis=1), [*b, "cv3"], 2 * h, c, 1)


def _c2f(g: Graph, x: str, m: str, cin: int, cout: int, n: int, shortcut: bool, e: float = 0.5,
         kind: str = "c2f") -> str:
    """Ultralytics ``C2f`` (YOLOv8) and ``C3k2`` (YOLO11, ``kind`` "c3k2" or "c3k"): cv1, Split in two,
    n blocks on the second half, Concat all, cv2."""
    c = int(cout * e)
    y = _conv(g, x, [m, "cv1"], cin, 2 * c, 1)
    halves = g.op("Split", [y, g.const([m], [c, c], np.int64)], [m], outputs=2, axis=1)
    outs = list(halves)
    h = halves[1]
    for i in range(n):
        b = [m, f"m.{i}"]
        if kind == "c3k":
            h = _c3k(g, h, b, c, shortcut)
        else:  # C2f's bottleneck keeps the width; C3k2's halves it
            h = _bottleneck(g, h, b, c, c if kind == "c2f" else c // 2, shortcut)
        outs.append(h)
    return _conv(g, g.op("Concat", outs, [m], axis=1), [m, "cv2"], (2 + n) * c, cout, 1)


def _c2psa(g: Graph, x: str, m: str, c1: int, batch: int, side: int) -> str:
    """Ultralytics ``C2PSA`` (YOLO11) with one ``PSABlock``: multi-head attention over the stride-32 map
    (``side`` x ``side``; heads of 64 channels, keys of 32) as Conv, Reshape, Split, MatMul and Softmax,
    then a Conv FFN."""
    c = c1 // 2
    y = _conv(g, x, [m, "cv1"], c1, 2 * c, 1)
    a, b = g.op("Split", [y, g.const([m], [c, c], np.int64)], [m], outputs=2, axis=1)
    blk = [m, "m", "m.0"]
    at = [*blk, "attn"]
    heads, head_dim = c // 64, 64
    key = head_dim // 2
    hw = side * side
    qkv = _conv(g, b, [*at, "qkv"], c, c + 2 * key * heads, 1, act=False)
    qkv = g.op("Reshape", [qkv, g.const(at, [batch, heads, 2 * key + head_dim, hw], np.int64)], at, allowzero=0)
    q, k, v = g.op("Split", [qkv, g.const(at, [key, key, head_dim], np.int64)], at, outputs=3, axis=2)
    q = g.op("Mul", [q, g.const(at, key ** -0.5, np.float32)], at)
    attn = g.op("MatMul", [g.op("Transpose", [q], at, perm=[0, 1, 3, 2]), k], at)
    attn = g.op("Transpose", [g.op("Softmax", [attn], at, axis=-1)], at, perm=[0, 1, 3, 2])
    nchw = [batch, c, side, side]
    out = g.op("Reshape", [g.op("MatMul", [v, attn], at), g.const(at, nchw, np.int64)], at, allowzero=0)
    pe = _conv(g, g.op("Reshape", [v, g.const(at, nchw, np.int64)], at, allowzero=0), [*at, "pe"], c, c, 3,
               groups=c, act=False)
    z = _conv(g, g.op("Add", [out, pe], at), [*at, "proj"], c, c, 1, act=False)
    b = g.op("Add", [b, z], blk)
    f = [*blk, "ffn"]
    z = _conv(g, _conv(g, b, [*f, "ffn.0"], c, 2 * c, 1), [*f, "ffn.1"], 2 * c, c, 1, act=False)
    b = g.op("Add", [b, z], blk)
    return _conv(g, g.op("Concat", [a, b], [m], axis=1), [m, "cv2"], 2 * c, c1, 1)


def _sppf(g: Graph, x: str, m: str, cin: int, cout: int) -> str:
    c = cin // 2
    y = _conv(g, x, [m, "cv1"], cin, c, 1)
    pools = [y]
    for _ in range(3):
        pools.append(g.op("MaxPool", [pools[-1]], g.reuse([m, "m"]), ceil_mode=0, dilations=[1, 1],
                          kernel_shape=[5, 5], pads=[2, 2, 2, 2], strides=[1, 1]))
    return _conv(g, g.op("Concat", pools, [m], axis=1), [m, "cv2"], 4 * c, cout, 1)


def _upsample(g: Graph, x: str, m: str) -> str:
    scales = g.const([m], [1.0, 1.0, 2.0, 2.0], np.float32)
    return g.op("Resize", [x, "", scales], [m], coordinate_transformation_mode="asymmetric",
                cubic_coeff_a=-0.75, mode="nearest", nearest_mode="floor")


def _anchors(sizes: list[int], strides: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Ultralytics ``make_anchors`` (offset 0.5): points [1, 2, N] and strides [1, N]."""
    points, st = [], []
    for hw, s in zip(sizes, strides):
        sy, sx = np.meshgrid(np.arange(hw, dtype=np.float32) + 0.5, np.arange(hw, dtype=np.float32) + 0.5,
                             indexing="ij")
        points.append(np.stack([sx.ravel(), sy.ravel()]))
        st.append(np.full(hw * hw, s, np.float32))
    return np.concatenate(points, 1)[None], np.concatenate(st)[None]


def _detect(g: Graph, batch: int, feats: list[tuple[str, int, int]], m: str, dw: bool = False,
            masks: int = 0) -> str:
    """Ultralytics ``Detect`` at export: per-scale box (cv2) and class (cv3) branches, DFL decoding;
    ``dw``: YOLO11's class branch (depthwise 3x3 + pointwise Conv, twice); ``masks``: ``Segment``'s
    mask-coefficient branch (cv4: two 3x3 Convs and a 1x1 Conv to ``masks`` channels per scale), its
    coefficients concatenated after the class scores."""
    ch0 = feats[0][1]
    c2, c3 = max(16, ch0 // 4, 4 * _REG_MAX), max(ch0, min(_CLASSES, 100))
    boxes, classes = [], []
    for i, (x, ch, _) in enumerate(feats):
        b = [m, f"cv2.{i}"]
        y = _conv(g, _conv(g, x, [*b, f"cv2.{i}.0"], ch, c2, 3), [*b, f"cv2.{i}.1"], c2, c2, 3)
        boxes.append(add_conv(g, y, [*b, f"cv2.{i}.2"], c2, 4 * _REG_MAX, 1))
        c = [m, f"cv3.{i}"]
        if dw:
            y = x
            for j, cin in enumerate((ch, c3)):
                s = [*c, f"cv3.{i}.{j}"]
                y = _conv(g, y, [*s, f"cv3.{i}.{j}.0"], cin, cin, 3, groups=cin)
                y = _conv(g, y, [*s, f"cv3.{i}.{j}.1"], cin, c3, 1)
        else:
            y = _conv(g, _conv(g, x, [*c, f"cv3.{i}.0"], ch, c3, 3), [*c, f"cv3.{i}.1"], c3, c3, 3)
        classes.append(add_conv(g, y, [*c, f"cv3.{i}.2"], c3, _CLASSES, 1))
    coefs = []
    if masks:
        c4 = max(ch0 // 4, masks)
        for i, (x, ch, _) in enumerate(feats):
            b = [m, f"cv4.{i}"]
            y = _conv(g, _conv(g, x, [*b, f"cv4.{i}.0"], ch, c4, 3), [*b, f"cv4.{i}.1"], c4, c4, 3)
            coefs.append(add_conv(g, y, [*b, f"cv4.{i}.2"], c4, masks, 1))
    flat = [g.op("Reshape", [t, g.const([m], [batch, 4 * _REG_MAX, -1], np.int64)], [m], allowzero=0)
            for t in boxes]
    flat += [g.op("Reshape", [t, g.const([m], [batch, _CLASSES, -1], np.int64)], [m], allowzero=0)
             for t in classes]
    flat += [g.op("Reshape", [t, g.const([m], [batch, masks, -1], np.int64)], [m], allowzero=0)
             for t in coefs]
    box = g.op("Concat", flat[:3], [m], axis=-1)
    cls = g.op("Concat", flat[3:6], [m], axis=-1)
    mc = [g.op("Concat", flat[6:], [m], axis=2)] if masks else []
    n = sum(hw * hw for _, _, hw in feats)
    dfl = [m, "dfl"]
    d = g.op("Reshape", [box, g.const(dfl, [batch, 4, _REG_MAX, n], np.int64)], dfl, allowzero=0)
    scores = g.op("Sigmoid", [cls], [m])
    d = g.op("Softmax", [g.op("Transpose", [d], dfl, perm=[0, 2, 1, 3])], dfl, axis=1)
    d = add_conv(g, d, [*dfl, "conv"], _REG_MAX, 1, 1, bias=False)
    d = g.op("Reshape", [d, g.const(dfl, [batch, 4, n], np.int64)], dfl, allowzero=0)
    one = g.const([m], [1], np.int64)
    lt = g.op("Slice", [d, g.const([m], [0], np.int64), g.const([m], [2], np.int64), one], [m])
    rb = g.op("Slice", [d, g.const([m], [2], np.int64), g.const([m], [4], np.int64), one], [m])
    points, strides = _anchors([hw for _, _, hw in feats], [8, 16, 32])
    x1y1 = g.op("Sub", [g.const([m], points, np.float32), lt], [m])
    g.skip([m], "Add")  # the export's first Add (on constants) was folded away; the names keep its number
    x2y2 = g.op("Add", [g.const([m], points, np.float32), rb], [m])
    total = g.op("Add", [x1y1, x2y2], [m])
    g.skip([m], "Div")
    centre = g.op("Div", [total, g.const([m], 2.0, np.float32)], [m])
    wh = g.op("Sub", [x2y2, x1y1], [m])
    xywh = g.op("Concat", [centre, wh], [m], axis=1)
    g.skip([m], "Mul", 2)
    xywh = g.op("Mul", [xywh, g.const([m], strides, np.float32)], [m])
    return g.op("Concat", [xywh, scores, *mc], [m], axis=1)


def _proto(g: Graph, x: str, m: str, c1: int, c: int, masks: int) -> str:
    """Ultralytics ``Proto``: 3x3 Conv, 2x2 stride-2 ConvTranspose (with bias), 3x3 Conv, 1x1 Conv to
    ``masks`` prototype channels at stride 4."""
    p = [m, "proto"]
    y = _conv(g, x, [*p, "cv1"], c1, c, 3)
    _, dotted = scope_names([*p, "upsample"])
    w = g.param(f"{dotted}.weight", [c, c, 2, 2], "weight", c * 4)
    b = g.param(f"{dotted}.bias", [c], "bias", c * 4)
    y = g.op("ConvTranspose", [y, w, b], [*p, "upsample"], dilations=[1, 1], group=1, kernel_shape=[2, 2],
             pads=[0, 0, 0, 0], strides=[2, 2])
    y = _conv(g, y, [*p, "cv2"], c, c, 3)
    return _conv(g, y, [*p, "cv3"], c, masks, 1)


def _head(g: Graph, batch: int, feats: list[tuple[str, int, int]], m: str, ch: Callable[[int], int],
          seg: bool, dw: bool) -> tuple[object, object]:
    """``Detect`` -> ``[B, 84, N]``, or ``Segment`` (32 mask coefficients, prototypes from ``Proto`` with
    ``ch(256)`` channels on the stride-8 map) -> ``[B, 116, N]`` and ``[B, 32, H/4, W/4]``; returns the
    output tensor(s) and their shape(s)."""
    n = sum(hw * hw for _, _, hw in feats)
    if not seg:
        return _detect(g, batch, feats, m, dw=dw), [batch, 4 + _CLASSES, n]
    x0, c0, hw0 = feats[0]
    proto = _proto(g, x0, m, c0, ch(256), _MASKS)
    out = _detect(g, batch, feats, m, dw=dw, masks=_MASKS)
    return (out, proto), ([batch, 4 + _CLASSES + _MASKS, n], [batch, _MASKS, 2 * hw0, 2 * hw0])


def _scaling(row: tuple[float, float, int]) -> tuple[Callable[[int], int], Callable[[int], int]]:
    """A scale row (depth, width, max channels) as the exporter's two rules: channel width and block repeats."""
    depth, width, max_ch = row

    def ch(c: int) -> int:
        return int(math.ceil(min(c, max_ch) * width / 8) * 8)

    def reps(k: int) -> int:
        return max(round(k * depth), 1)

    return ch, reps


def _yolov8(g: Graph, batch: int, scale: str, size: int = 640, seg: bool = False) -> Net:
    ch, reps = _scaling(_SCALES[scale])

    x = _conv(g, "images", ["model.0"], 3, ch(64), 3, 2)
    x = _conv(g, x, ["model.1"], ch(64), ch(128), 3, 2)
    x = _c2f(g, x, "model.2", ch(128), ch(128), reps(3), True)
    x = _conv(g, x, ["model.3"], ch(128), ch(256), 3, 2)
    p3 = _c2f(g, x, "model.4", ch(256), ch(256), reps(6), True)
    x = _conv(g, p3, ["model.5"], ch(256), ch(512), 3, 2)
    p4 = _c2f(g, x, "model.6", ch(512), ch(512), reps(6), True)
    x = _conv(g, p4, ["model.7"], ch(512), ch(1024), 3, 2)
    x = _c2f(g, x, "model.8", ch(1024), ch(1024), reps(3), True)
    p5 = _sppf(g, x, "model.9", ch(1024), ch(1024))
    x = g.op("Concat", [_upsample(g, p5, "model.10"), p4], ["model.11"], axis=1)
    h4 = _c2f(g, x, "model.12", ch(1024) + ch(512), ch(512), reps(3), False)
    x = g.op("Concat", [_upsample(g, h4, "model.13"), p3], ["model.14"], axis=1)
    o3 = _c2f(g, x, "model.15", ch(512) + ch(256), ch(256), reps(3), False)
    x = g.op("Concat", [_conv(g, o3, ["model.16"], ch(256), ch(256), 3, 2), h4], ["model.17"], axis=1)
    o4 = _c2f(g, x, "model.18", ch(256) + ch(512), ch(512), reps(3), False)
    x = g.op("Concat", [_conv(g, o4, ["model.19"], ch(512), ch(512), 3, 2), p5], ["model.20"], axis=1)
    o5 = _c2f(g, x, "model.21", ch(512) + ch(1024), ch(1024), reps(3), False)
    feats = [(o3, ch(256), size // 8), (o4, ch(512), size // 16), (o5, ch(1024), size // 32)]
    out, shape = _head(g, batch, feats, "model.22", ch, seg, dw=False)
    return out, [batch, 3, size, size], shape


def _yolo11(g: Graph, batch: int, scale: str, size: int = 640, seg: bool = False) -> Net:
    ch, reps = _scaling(_SCALES_11[scale])

    x = _conv(g, "images", ["model.0"], 3, ch(64), 3, 2)
    x = _conv(g, x, ["model.1"], ch(64), ch(128), 3, 2)
    x = _c2f(g, x, "model.2", ch(128), ch(256), reps(2), True, 0.25, "c3k2")
    x = _conv(g, x, ["model.3"], ch(256), ch(256), 3, 2)
    p3 = _c2f(g, x, "model.4", ch(256), ch(512), reps(2), True, 0.25, "c3k2")
    x = _conv(g, p3, ["model.5"], ch(512), ch(512), 3, 2)
    p4 = _c2f(g, x, "model.6", ch(512), ch(512), reps(2), True, 0.5, "c3k")
    x = _conv(g, p4, ["model.7"], ch(512), ch(1024), 3, 2)
    x = _c2f(g, x, "model.8", ch(1024), ch(1024), reps(2), True, 0.5, "c3k")
    p5 = _c2psa(g, _sppf(g, x, "model.9", ch(1024), ch(1024)), "model.10", ch(1024), batch, size // 32)
    x = g.op("Concat", [_upsample(g, p5, "model.11"), p4], ["model.12"], axis=1)
    h4 = _c2f(g, x, "model.13", ch(1024) + ch(512), ch(512), reps(2), True, 0.5, "c3k2")
    x = g.op("Concat", [_upsample(g, h4, "model.14"), p3], ["model.15"], axis=1)
    o3 = _c2f(g, x, "model.16", ch(512) + ch(512), ch(256), reps(2), True, 0.5, "c3k2")
    x = g.op("Concat", [_conv(g, o3, ["model.17"], ch(256), ch(256), 3, 2), h4], ["model.18"], axis=1)
    o4 = _c2f(g, x, "model.19", ch(256) + ch(512), ch(512), reps(2), True, 0.5, "c3k2")
    x = g.op("Concat", [_conv(g, o4, ["model.20"], ch(512), ch(512), 3, 2), p5], ["model.21"], axis=1)
    o5 = _c2f(g, x, "model.22", ch(512) + ch(1024), ch(1024), reps(2), True, 0.5, "c3k")
    feats = [(o3, ch(256), size // 8), (o4, ch(512), size // 16), (o5, ch(1024), size // 32)]
    out, shape = _head(g, batch, feats, "model.23", ch, seg, dw=True)
    return out, [batch, 3, size, size], shape


def yolo11n(g: Graph, batch: int) -> Net:
    return _yolo11(g, batch, "n")


def yolo11s(g: Graph, batch: int) -> Net:
    return _yolo11(g, batch, "s")


def yolov8n(g: Graph, batch: int) -> Net:
    return _yolov8(g, batch, "n")


def yolov8s(g: Graph, batch: int) -> Net:
    return _yolov8(g, batch, "s")


def yolo11n_seg(g: Graph, batch: int) -> Net:
    return _yolo11(g, batch, "n", seg=True)


def yolo11s_seg(g: Graph, batch: int) -> Net:
    return _yolo11(g, batch, "s", seg=True)


def yolov8n_seg(g: Graph, batch: int) -> Net:
    return _yolov8(g, batch, "n", seg=True)


def yolov8s_seg(g: Graph, batch: int) -> Net:
    return _yolov8(g, batch, "s", seg=True)
