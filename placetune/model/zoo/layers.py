"""Layer helpers of the zoo: the node shapes torch.onnx exports for Conv2d, BatchNorm2d, Linear, pools, ...

Each ``add_*`` adds its nodes (and parameters) to a :class:`~placetune.model.zoo.graph.Graph` in the torch module
scope ``parts`` and returns the output tensor's name; the network modules build on them.
"""

from __future__ import annotations

from typing import Sequence

from placetune.model.zoo.graph import Graph, scope_names


def add_conv(
    g: Graph,
    x: str,
    parts: Sequence[str],
    cin: int,
    cout: int,
    k: int,
    stride: int = 1,
    pad: int = 0,
    groups: int = 1,
    bias: bool = True,
) -> str:
    """A Conv2d (square kernel ``k``) on ``x`` in the torch scope ``parts``, with its weight (and bias); returns its output."""
    _, dotted = scope_names(parts)
    fan_in = cin // groups * k * k
    ins = [x, g.param(f"{dotted}.weight", [cout, cin // groups, k, k], "weight", fan_in)]
    if bias:
        ins.append(g.param(f"{dotted}.bias", [cout], "bias", fan_in))
    return g.op(
        "Conv",
        ins,
        parts,
        dilations=[1, 1],
        group=groups,
        kernel_shape=[k, k],
        pads=[pad] * 4,
        strides=[stride, stride],
    )


def add_bn(g: Graph, x: str, parts: Sequence[str], c: int) -> str:
    """A BatchNorm2d of ``c`` channels on ``x`` (scale, shift, running mean and variance); returns its output."""
    _, dotted = scope_names(parts)
    ins = [
        x,
        g.param(f"{dotted}.weight", [c], "ones"),
        g.param(f"{dotted}.bias", [c], "zeros"),
        g.param(f"{dotted}.running_mean", [c], "zeros"),
        g.param(f"{dotted}.running_var", [c], "ones"),
    ]
    return g.op("BatchNormalization", ins, parts, epsilon=1e-5, momentum=0.9)


def add_relu(g: Graph, x: str, parts: Sequence[str]) -> str:
    """A ReLU on ``x``; returns its output."""
    return g.op("Relu", [x], parts)


def add_maxpool(
    g: Graph, x: str, parts: Sequence[str], k: int, stride: int, pad: int = 0, ceil: bool = False
) -> str:
    """A MaxPool2d (square window ``k``) on ``x``; returns its output."""
    return g.op(
        "MaxPool",
        [x],
        parts,
        ceil_mode=int(ceil),
        dilations=[1, 1],
        kernel_shape=[k, k],
        pads=[pad] * 4,
        strides=[stride, stride],
    )


def add_lrn(g: Graph, x: str, parts: Sequence[str]) -> str:
    """A LocalResponseNorm of size 5 (AlexNet's and GoogLeNet's) on ``x``; returns its output."""
    return g.op("LRN", [x], parts, alpha=1e-4, beta=0.75, bias=1.0, size=5)


def add_gemm(g: Graph, x: str, parts: Sequence[str], cin: int, cout: int) -> str:
    """A Linear layer on a 2-D ``x``, exported as Gemm (weight [out, in], transB); returns its output."""
    _, dotted = scope_names(parts)
    ins = [
        x,
        g.param(f"{dotted}.weight", [cout, cin], "weight", cin),
        g.param(f"{dotted}.bias", [cout], "bias", cin),
    ]
    return g.op("Gemm", ins, parts, alpha=1.0, beta=1.0, transB=1)


def add_linear3d(g: Graph, x: str, parts: Sequence[str], cin: int, cout: int) -> str:
    """torch exports a Linear on a 3-D tensor as MatMul (weight stored [in, out]) + Add."""
    _, dotted = scope_names(parts)
    w = g.param(f"{dotted}.weight", [cin, cout], "weight", cin)
    mm = g.op("MatMul", [x, w], parts)
    b = g.param(f"{dotted}.bias", [cout], "bias", cin)
    return g.op("Add", [b, mm], parts)


def add_flatten(g: Graph, x: str) -> str:
    """A Flatten from axis 1 (``torch.flatten(x, 1)``); returns its output."""
    return g.op("Flatten", [x], (), axis=1)


def add_softmax(g: Graph, x: str, parts: Sequence[str]) -> str:
    """A Softmax over axis 1 (the classes); returns its output."""
    return g.op("Softmax", [x], parts, axis=1)
