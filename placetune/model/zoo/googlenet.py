"""BVLC Caffe GoogLeNet (Inception v1)."""

from __future__ import annotations

from placetune.model.zoo.graph import Graph, Net
from placetune.model.zoo.layers import add_conv, add_flatten, add_gemm, add_lrn, add_maxpool, add_relu, add_softmax


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


def googlenet(g: Graph, batch: int, softmax: bool) -> Net:
    """BVLC Caffe GoogLeNet (Inception v1, LRN after the stem, ceil-mode pooling)."""
    x = add_conv(g, "input", ["conv1", "7x7_s2"], 3, 64, 7, stride=2, pad=3)
    x = add_relu(g, x, ["conv1", "relu_7x7"])
    x = add_maxpool(g, x, ["pool1", "3x3_s2"], 3, 2, ceil=True)
    x = add_lrn(g, x, ["pool1", "norm1"])
    x = add_conv(g, x, ["conv2", "3x3_reduce"], 64, 64, 1)
    x = add_relu(g, x, ["conv2", "relu_3x3_reduce"])
    x = add_conv(g, x, ["conv2", "3x3"], 64, 192, 3, pad=1)
    x = add_relu(g, x, ["conv2", "relu_3x3"])
    x = add_lrn(g, x, ["conv2", "norm2"])
    x = add_maxpool(g, x, ["pool2", "3x3_s2"], 3, 2, ceil=True)
    cin = 192
    for name, c1, c3r, c3, c5r, c5, cp in _GOOGLENET_INCEPTION:
        if name == "4a":
            x = add_maxpool(g, x, ["pool3", "3x3_s2"], 3, 2, ceil=True)
        if name == "5a":
            x = add_maxpool(g, x, ["pool4", "3x3_s2"], 3, 2, ceil=True)
        m = f"inception_{name}"
        b1 = add_relu(g, add_conv(g, x, [m, "1x1"], cin, c1, 1), [m, "relu_1x1"])
        b2 = add_relu(g, add_conv(g, x, [m, "3x3_reduce"], cin, c3r, 1), [m, "relu_3x3_reduce"])
        b2 = add_relu(g, add_conv(g, b2, [m, "3x3"], c3r, c3, 3, pad=1), [m, "relu_3x3"])
        b3 = add_relu(g, add_conv(g, x, [m, "5x5_reduce"], cin, c5r, 1), [m, "relu_5x5_reduce"])
        b3 = add_relu(g, add_conv(g, b3, [m, "5x5"], c5r, c5, 5, pad=2), [m, "relu_5x5"])
        b4 = add_maxpool(g, x, [m, "pool"], 3, 1, pad=1, ceil=True)
        b4 = add_relu(g, add_conv(g, b4, [m, "pool_proj"], cin, cp, 1), [m, "relu_pool_proj"])
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
    x = add_flatten(g, x)
    x = add_gemm(g, x, ["loss3", "classifier"], 1024, 1000)
    if softmax:
        x = add_softmax(g, x, ["prob"])
    return x, [batch, 3, 224, 224], [batch, 1000]
