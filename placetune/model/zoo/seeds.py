"""The seed scenarios: seed 000's four-conv block and seed 002's ModelGN with its BatchNorm twin."""

from __future__ import annotations

import numpy as np

from placetune.model.zoo.graph import Graph, Net
from placetune.model.zoo.layers import add_bn, add_conv, add_gemm, add_relu


def seed_block(g: Graph, batch: int) -> Net:
    x = "input"
    c1 = add_conv(g, x, ["conv1"], 384, 384, 1, bias=False)
    c2 = add_conv(g, c1, ["conv2"], 384, 384, 1, bias=False)
    c3 = add_conv(g, x, ["conv3"], 384, 384, 1, bias=False)
    c4 = add_conv(g, x, ["conv4"], 384, 384, 1, bias=False)
    y = g.op("Concat", [c2, c3, c4], (), axis=1)
    return y, [batch, 384, 56, 56], [batch, 1152, 56, 56]


def _model_norm(g: Graph, batch: int, norm: str) -> Net:
    """seed 002's ModelGN / its BatchNorm twin (NVIDIA jetson_dla_tutorial)."""
    x = "input"
    widths = [3, 64, 128, 256, 512]
    size = 32
    groups = 8
    for i in range(4):
        cin, cout = widths[i], widths[i + 1]
        conv_p, norm_p, relu_p = (["cnn", f"cnn.{3 * i + j}"] for j in range(3))
        x = add_conv(g, x, conv_p, cin, cout, 3, stride=2, pad=1)
        size = (size + 2 - 3) // 2 + 1
        if norm == "bn":
            x = add_bn(g, x, norm_p, cout)
        else:
            # torch.onnx (opset < 18) GroupNorm: Reshape -> InstanceNormalization -> Reshape
            # -> Mul(gamma [C,1,1]) -> Add(beta [C,1,1]); the shape back is a constant here
            # (torch writes Shape of the conv output, which is static anyway).
            shape_in = g.const(norm_p, [0, groups, -1], np.int64)
            r = g.op("Reshape", [x, shape_in], norm_p, allowzero=0)
            scale = g.const(norm_p, np.ones(groups), np.float32)
            bias = g.const(norm_p, np.zeros(groups), np.float32)
            inorm = g.op("InstanceNormalization", [r, scale, bias], norm_p, epsilon=1e-5)
            shape_back = g.const(norm_p, [batch, cout, size, size], np.int64)
            r = g.op("Reshape", [inorm, shape_back], norm_p, allowzero=0)
            gamma = g.param(f"onnx::Mul_{89 + 2 * i}", [cout, 1, 1], "ones")
            m = g.op("Mul", [r, gamma], norm_p)
            beta = g.param(f"onnx::Add_{90 + 2 * i}", [cout, 1, 1], "zeros")
            x = g.op("Add", [m, beta], norm_p)
        x = add_relu(g, x, relu_p)
    x = g.op("GlobalAveragePool", [x], ["pool"])
    # x.view(x.shape[0], -1) exports as Reshape with a constant shape
    x = g.op("Reshape", [x, g.const((), [batch, -1], np.int64)], (), allowzero=0)
    y = add_gemm(g, x, ["linear"], 512, 10)
    return y, [batch, 3, 32, 32], [batch, 10]


def model_gn(g: Graph, batch: int) -> Net:
    return _model_norm(g, batch, "gn")


def model_bn(g: Graph, batch: int) -> Net:
    return _model_norm(g, batch, "bn")
