"""MobileNetV1 (MLPerf's TensorFlow model) and torchvision MobileNetV2, BatchNormalization kept, ReLU6 as Clip."""

from __future__ import annotations

import numpy as np

from placetune.model.zoo.graph import Graph, Net
from placetune.model.zoo.layers import add_bn, add_conv, add_flatten, add_gemm, add_softmax


def _conv_bn_relu6(
    g: Graph,
    x: str,
    parts: list[str],
    cin: int,
    cout: int,
    k: int,
    stride: int = 1,
    groups: int = 1,
) -> str:
    """torchvision Conv2dNormActivation(ReLU6): Conv, BatchNormalization, Clip(0, 6)."""
    last = parts[-1]
    x = add_conv(g, x, parts + [f"{last}.0"], cin, cout, k, stride, (k - 1) // 2, groups, bias=False)
    x = add_bn(g, x, parts + [f"{last}.1"], cout)
    act = parts + [f"{last}.2"]
    lo = g.const(act, 0.0, np.float32)
    hi = g.const(act, 6.0, np.float32)
    return g.op("Clip", [x, lo, hi], act)


_MOBILENETV2_SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                         (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]


def mobilenetv2(g: Graph, batch: int, softmax: bool) -> Net:
    """torchvision MobileNetV2 (width 1.0), BatchNormalization kept, ReLU6 as Clip."""
    x = _conv_bn_relu6(g, "input", ["features", "features.0"], 3, 32, 3, stride=2)
    cin = 32
    idx = 1
    for t, c, n, s in _MOBILENETV2_SETTINGS:
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = cin * t
            p = ["features", f"features.{idx}"]
            conv = p + ["conv"]
            y = x
            j = 0
            if t != 1:
                y = _conv_bn_relu6(g, y, conv + [f"conv.{j}"], cin, hidden, 1)
                j += 1
            y = _conv_bn_relu6(g, y, conv + [f"conv.{j}"], hidden, hidden, 3, stride, hidden)
            y = add_conv(g, y, conv + [f"conv.{j + 1}"], hidden, c, 1, bias=False)
            y = add_bn(g, y, conv + [f"conv.{j + 2}"], c)
            if stride == 1 and cin == c:
                y = g.op("Add", [x, y], p)
            x = y
            cin = c
            idx += 1
    x = _conv_bn_relu6(g, x, ["features", f"features.{idx}"], cin, 1280, 1)
    x = g.op("GlobalAveragePool", [x], ())
    x = add_flatten(g, x)
    x = add_gemm(g, x, ["classifier", "classifier.1"], 1280, 1000)
    if softmax:
        x = add_softmax(g, x, ["softmax"])
    return x, [batch, 3, 224, 224], [batch, 1000]


#: MobileNetV1 (width 1.0): output channels and stride of each depthwise-separable block.
_MOBILENETV1_BLOCKS = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1), (512, 1),
                       (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1)]


def mobilenetv1(g: Graph, batch: int, softmax: bool) -> Net:
    """MobileNetV1 1.0/224 as MLPerf's TensorFlow model: 3x3 stem, 13 depthwise-separable blocks
    (3x3 depthwise + 1x1 pointwise, each with BatchNormalization and ReLU6), average pool, 1x1
    conv classifier (1001 classes, background first)."""
    x = _conv_bn_relu6(g, "input", ["features", "features.0"], 3, 32, 3, stride=2)
    cin = 32
    for i, (c, s) in enumerate(_MOBILENETV1_BLOCKS, start=1):
        p = ["features", f"features.{i}"]
        x = _conv_bn_relu6(g, x, p + ["dw"], cin, cin, 3, s, cin)
        x = _conv_bn_relu6(g, x, p + ["pw"], cin, c, 1)
        cin = c
    x = g.op("GlobalAveragePool", [x], ["avgpool"])
    x = add_conv(g, x, ["classifier"], cin, 1001, 1)
    x = add_flatten(g, x)
    if softmax:
        x = add_softmax(g, x, ["softmax"])
    return x, [batch, 3, 224, 224], [batch, 1001]
