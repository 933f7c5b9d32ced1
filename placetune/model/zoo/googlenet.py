"""BVLC Caffe GoogLeNet (Inception v1)."""

from __future__ import annotations

from placetune.model.zoo.graph import _Graph, _Net
from placetune.model.zoo.layers import _conv, _flatten, _gemm, _lrn, _maxpool, _relu, _softmax


_GOOGLENET_INCEPTION = [
    # name, 1x1, 3x3 reduce, 3x3, 5x5 reduce, 5x5, pool proj
    ("3a", 64, 96, 128, 16, 32, 32),
    ("3b", 128, 128, 192, 32, 96, 64),
    ("4a", 192, 96, 208, 16, 48, 64),
    ("4b", 160, 112, 224, 24, 64, 64),
    ("4c", 128, 128, 256, 24, 64, 64),
    ("4d", 112, 144, 288, 32, 64, 64),
    ("4e", 256, 160, 320, 32, 128, 128),
    ("5a", 256, 160, 320, 32, 128, 128),
    ("5b", 384, 192, 384, 48, 128, 128),
]


def _googlenet(g: _Graph, batch: int, softmax: bool) -> _Net:
    """BVLC Caffe GoogLeNet (Inception v1, LRN after the stem, ceil-mode pooling)."""
    x = _conv(g, "input", ["conv1", "7x7_s2"], 3, 64, 7, stride=2, pad=3)
    x = _relu(g, x, ["conv1", "relu_7x7"])
    x = _maxpool(g, x, ["pool1", "3x3_s2"], 3, 2, ceil=True)
    x = _lrn(g, x, ["pool1", "norm1"])
    x = _conv(g, x, ["conv2", "3x3_reduce"], 64, 64, 1)
    x = _relu(g, x, ["conv2", "relu_3x3_reduce"])
    x = _conv(g, x, ["conv2", "3x3"], 64, 192, 3, pad=1)
    x = _relu(g, x, ["conv2", "relu_3x3"])
    x = _lrn(g, x, ["conv2", "norm2"])
    x = _maxpool(g, x, ["pool2", "3x3_s2"], 3, 2, ceil=True)
    cin = 192
    for name, c1, c3r, c3, c5r, c5, cp in _GOOGLENET_INCEPTION:
        if name == "4a":
            x = _maxpool(g, x, ["pool3", "3x3_s2"], 3, 2, ceil=True)
        if name == "5a":
            x = _maxpool(g, x, ["pool4", "3x3_s2"], 3, 2, ceil=True)
        m = f"inception_{name}"
        b1 = _relu(g, _conv(g, x, [m, "1x1"], cin, c1, 1), [m, "relu_1x1"])
        b2 = _relu(g, _conv(g, x, [m, "3x3_reduce"], cin, c3r, 1), [m, "relu_3x3_reduce"])
        b2 = _relu(g, _conv(g, b2, [m, "3x3"], c3r, c3, 3, pad=1), [m, "relu_3x3"])
        b3 = _relu(g, _conv(g, x, [m, "5x5_reduce"], cin, c5r, 1), [m, "relu_5x5_reduce"])
        b3 = _relu(g, _conv(g, b3, [m, "5x5"], c5r, c5, 5, pad=2), [m, "relu_5x5"])
        b4 = _maxpool(g, x, [m, "pool"], 3, 1, pad=1, ceil=True)
        b4 = _relu(g, _conv(g, b4, [m, "pool_proj"], cin, cp, 1), [m, "relu_pool_proj"])
        x = g.op("Concat", [b1, b2, b3, b4], [m, "output"], axis=1)
        cin = c1 + c3 + c5 + cp
    x = g.op(
        "AveragePool",
        [x],
        ["pool5", "7x7_s1"],
        ceil_mode=0,
        count_include_pad=1,
        kernel_shape=[7, 7],
        pads=[0, 0, 0, 0],
        strides=[1, 1],
    )
    x = _flatten(g, x)
    x = _gemm(g, x, ["loss3", "classifier"], 1024, 1000)
    if softmax:
        x = _softmax(g, x, ["prob"])
    return x, [batch, 3, 224, 224], [batch, 1000]
