"""Layer helpers of the zoo: the node shapes torch.onnx exports for Conv2d, BatchNorm2d, Linear, pools, ..."""

from __future__ import annotations

from typing import Sequence

from placetune.model.zoo.graph import _Graph, _scope


def _conv(
    g: _Graph,
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
    _, dotted = _scope(parts)
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


def _bn(g: _Graph, x: str, parts: Sequence[str], c: int) -> str:
    _, dotted = _scope(parts)
    ins = [
        x,
        g.param(f"{dotted}.weight", [c], "ones"),
        g.param(f"{dotted}.bias", [c], "zeros"),
        g.param(f"{dotted}.running_mean", [c], "zeros"),
        g.param(f"{dotted}.running_var", [c], "ones"),
    ]
    return g.op("BatchNormalization", ins, parts, epsilon=1e-5, momentum=0.9)


def _relu(g: _Graph, x: str, parts: Sequence[str]) -> str:
    return g.op("Relu", [x], parts)


def _maxpool(
    g: _Graph, x: str, parts: Sequence[str], k: int, stride: int, pad: int = 0, ceil: bool = False
) -> str:
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


def _lrn(g: _Graph, x: str, parts: Sequence[str]) -> str:
    return g.op("LRN", [x], parts, alpha=1e-4, beta=0.75, bias=1.0, size=5)


def _gemm(g: _Graph, x: str, parts: Sequence[str], cin: int, cout: int) -> str:
    _, dotted = _scope(parts)
    ins = [
        x,
        g.param(f"{dotted}.weight", [cout, cin], "weight", cin),
        g.param(f"{dotted}.bias", [cout], "bias", cin),
    ]
    return g.op("Gemm", ins, parts, alpha=1.0, beta=1.0, transB=1)


def _linear3d(g: _Graph, x: str, parts: Sequence[str], cin: int, cout: int) -> str:
    """torch exports a Linear on a 3-D tensor as MatMul (weight stored [in, out]) + Add."""
    _, dotted = _scope(parts)
    w = g.param(f"{dotted}.weight", [cin, cout], "weight", cin)
    mm = g.op("MatMul", [x, w], parts)
    b = g.param(f"{dotted}.bias", [cout], "bias", cin)
    return g.op("Add", [b, mm], parts)


def _flatten(g: _Graph, x: str) -> str:
    return g.op("Flatten", [x], (), axis=1)


def _softmax(g: _Graph, x: str, parts: Sequence[str]) -> str:
    return g.op("Softmax", [x], parts, axis=1)
