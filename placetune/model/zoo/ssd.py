"""torchvision SSDLite320 MobileNetV3-Large: the SSD-style detector of the zoo, as torch.onnx exports its
backbone and head (BatchNorm folded into the convolutions, ReLU6 as Clip, Hardswish / Hardsigmoid as
ONNX ops), without the box decoding and NMS that run after it (anchors, score filtering)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from placetune.model.zoo.graph import Graph, Net
from placetune.model.zoo.layers import add_conv

_ANCHORS = 6
_CLASSES = 91  # COCO with background, as torchvision trains it

#: MobileNetV3-Large's inverted residual blocks, reduced tail (the SSDLite backbone): input channels,
#: kernel, expanded channels, output channels, squeeze-excitation, hardswish, stride
_BLOCKS = [(16, 3, 16, 16, False, False, 1), (16, 3, 64, 24, False, False, 2), (24, 3, 72, 24, False, False, 1),
           (24, 5, 72, 40, True, False, 2), (40, 5, 120, 40, True, False, 1), (40, 5, 120, 40, True, False, 1),
           (40, 3, 240, 80, False, True, 2), (80, 3, 200, 80, False, True, 1), (80, 3, 184, 80, False, True, 1),
           (80, 3, 184, 80, False, True, 1), (80, 3, 480, 112, True, True, 1), (112, 3, 672, 112, True, True, 1),
           (112, 5, 672, 80, True, True, 2), (80, 5, 480, 80, True, True, 1), (80, 5, 480, 80, True, True, 1)]


def _cna(g: Graph, x: str, parts: list[str], cin: int, cout: int, k: int, stride: int = 1, groups: int = 1,
         act: str | None = "relu") -> str:
    """torchvision ``Conv2dNormActivation`` with its BatchNorm folded: Conv, then the activation."""
    last = parts[-1]
    x = add_conv(g, x, [*parts, f"{last}.0"], cin, cout, k, stride, (k - 1) // 2, groups)
    where = [*parts, f"{last}.2"]
    if act == "relu":
        return g.op("Relu", [x], where)
    if act == "hardswish":
        return g.op("HardSwish", [x], where)
    if act == "relu6":
        return g.op("Clip", [x, g.const(where, 0.0, np.float32), g.const(where, 6.0, np.float32)], where)
    return x


def _make_divisible(v: float, d: int = 8) -> int:
    out = max(d, int(v + d / 2) // d * d)
    return out + d if out < 0.9 * v else out


def _squeeze_excite(g: Graph, x: str, parts: list[str], c: int) -> str:
    s = _make_divisible(c // 4)
    y = g.op("GlobalAveragePool", [x], [*parts, "avgpool"])
    y = g.op("Relu", [add_conv(g, y, [*parts, "fc1"], c, s, 1)], [*parts, "activation"])
    y = g.op("HardSigmoid", [add_conv(g, y, [*parts, "fc2"], s, c, 1)], [*parts, "scale_activation"], alpha=1 / 6,
             beta=0.5)
    return g.op("Mul", [y, x], parts)


def _block(g: Graph, x: str, cfg: tuple, sub: Callable[[int], list[str]], first: int = 0,
           y: str | None = None) -> str:
    """One MobileNetV3 inverted residual: expansion (unless ``first`` > 0: the SSDLite extractor cut the
    block after it and ``y`` is its output), depthwise, squeeze-excitation, projection, residual Add.
    ``sub(i)`` is the scope of its i-th part."""
    cin, k, exp, cout, se, hs, stride = cfg
    act = "hardswish" if hs else "relu"
    i = first
    if y is None:
        y = x
        if exp != cin:
            y = _cna(g, y, sub(i), cin, exp, 1, act=act)
            i += 1
    y = _cna(g, y, sub(i), exp, exp, k, stride, groups=exp, act=act)
    i += 1
    if se:
        y = _squeeze_excite(g, y, sub(i), exp)
        i += 1
    y = _cna(g, y, sub(i), exp, cout, 1, act=None)
    return g.op("Add", [y, x], sub(i)[:-2] if sub(i)[-2] == "block" else sub(i)[:-1]) \
        if stride == 1 and cin == cout else y


def _head(g: Graph, batch: int, feats: list[tuple[str, int, int]], name: str, k: int) -> str:
    """An SSDLite prediction head: per feature map a depthwise 3x3 (ReLU6) and a 1x1 Conv to anchors x k,
    viewed as [N, anchors, k, H, W], permuted to [N, H, W, anchors, k] and flattened to [N, -1, k]."""
    scope = ["head", name]
    outs = []
    for i, (x, c, hw) in enumerate(feats):
        m = [*scope, f"module_list.{i}"]
        y = _cna(g, x, [*m, f"module_list.{i}.0"], c, c, 3, groups=c, act="relu6")
        y = add_conv(g, y, [*m, f"module_list.{i}.1"], c, _ANCHORS * k, 1)
        y = g.op("Reshape", [y, g.const(scope, [batch, -1, k, hw, hw], np.int64)], scope)
        y = g.op("Transpose", [y], scope, perm=[0, 3, 4, 1, 2])
        outs.append(g.op("Reshape", [y, g.const(scope, [batch, -1, k], np.int64)], scope))
    return g.op("Concat", outs, scope, axis=1)


def _in_block(*prefix: str) -> Callable[[int], list[str]]:
    """The scopes of an inverted residual block's layers: ``prefix/block/block.i``."""
    return lambda i: [*prefix, "block", f"block.{i}"]


def ssdlite_mobilenetv3(g: Graph, batch: int) -> Net:
    """torchvision ssdlite320_mobilenet_v3_large's backbone and head on 3x320x320: box regressions
    [N, 3234, 4] and class logits [N, 3234, 91] (6 anchors on 20, 10, 5, 3, 2 and 1 square maps)."""
    f0, f1 = ["backbone", "features.0"], ["backbone", "features.1"]
    x = _cna(g, "images", [*f0, "features.0.0"], 3, 16, 3, 2, act="hardswish")
    for n, cfg in enumerate(_BLOCKS[:12], start=1):
        x = _block(g, x, cfg, _in_block(*f0, f"features.0.{n}"))
    c4 = _BLOCKS[12]  # the C4 block: its expansion ends features.0, the 20x20 map the head reads
    p20 = _cna(g, x, [*f0, "features.0.13"], c4[0], c4[2], 1, act="hardswish")
    x = _block(g, x, c4, lambda i: [*f1, "features.1.0", f"features.1.0.{i}"], first=1, y=p20)
    for n, cfg in enumerate(_BLOCKS[13:], start=1):
        x = _block(g, x, cfg, _in_block(*f1, f"features.1.{n}"))
    x = _cna(g, x, [*f1, "features.1.3"], 80, 480, 1, act="hardswish")
    feats = [(p20, 672, 20), (x, 480, 10)]
    cin, side = 480, 10
    for i, cout in enumerate((512, 256, 256, 128)):  # SSDLite's extra blocks, ReLU6
        e, mid = ["backbone", f"extra.{i}"], cout // 2
        x = _cna(g, x, [*e, f"extra.{i}.0"], cin, mid, 1, act="relu6")
        x = _cna(g, x, [*e, f"extra.{i}.1"], mid, mid, 3, 2, groups=mid, act="relu6")
        x = _cna(g, x, [*e, f"extra.{i}.2"], mid, cout, 1, act="relu6")
        side = (side + 1) // 2
        feats.append((x, cout, side))
        cin = cout
    boxes = _head(g, batch, feats, "regression_head", 4)
    scores = _head(g, batch, feats, "classification_head", _CLASSES)
    n = _ANCHORS * sum(hw * hw for _, _, hw in feats)
    return (boxes, scores), [batch, 3, 320, 320], ([batch, n, 4], [batch, n, _CLASSES])
