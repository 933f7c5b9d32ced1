"""torchvision ResNet-18/34 and ResNet-50/101/152 (v1.5), BatchNormalization kept."""

from __future__ import annotations

from placetune.model.zoo.graph import _Graph, _Net
from placetune.model.zoo.layers import _bn, _conv, _flatten, _gemm, _maxpool, _relu, _softmax


def _resnet(g: _Graph, batch: int, blocks: list[int], bottleneck: bool, softmax: bool) -> _Net:
    """torchvision ResNet (v1.5: stride on the 3x3 conv), BatchNormalization kept."""
    x = _conv(g, "input", ["conv1"], 3, 64, 7, stride=2, pad=3, bias=False)
    x = _relu(g, _bn(g, x, ["bn1"], 64), ["relu"])
    x = _maxpool(g, x, ["maxpool"], 3, 2, pad=1)
    expansion = 4 if bottleneck else 1
    cin = 64
    for li, n in enumerate(blocks):
        width = 64 * 2**li
        cout = width * expansion
        layer = f"layer{li + 1}"
        for bi in range(n):
            stride = 2 if (bi == 0 and li > 0) else 1
            p = [layer, f"{layer}.{bi}"]
            identity = x
            if bottleneck:
                y = _conv(g, x, p + ["conv1"], cin, width, 1, bias=False)
                y = _relu(g, _bn(g, y, p + ["bn1"], width), g.reuse(p + ["relu"]))
                y = _conv(g, y, p + ["conv2"], width, width, 3, stride, 1, bias=False)
                y = _relu(g, _bn(g, y, p + ["bn2"], width), g.reuse(p + ["relu"]))
                y = _conv(g, y, p + ["conv3"], width, cout, 1, bias=False)
                y = _bn(g, y, p + ["bn3"], cout)
            else:
                y = _conv(g, x, p + ["conv1"], cin, width, 3, stride, 1, bias=False)
                y = _relu(g, _bn(g, y, p + ["bn1"], width), g.reuse(p + ["relu"]))
                y = _conv(g, y, p + ["conv2"], width, width, 3, 1, 1, bias=False)
                y = _bn(g, y, p + ["bn2"], cout)
            if stride != 1 or cin != cout:
                d = p + ["downsample"]
                identity = _conv(g, x, d + ["downsample.0"], cin, cout, 1, stride, bias=False)
                identity = _bn(g, identity, d + ["downsample.1"], cout)
            x = _relu(g, g.op("Add", [y, identity], p), g.reuse(p + ["relu"]))
            cin = cout
    x = g.op("GlobalAveragePool", [x], ["avgpool"])
    x = _flatten(g, x)
    x = _gemm(g, x, ["fc"], cin, 1000)
    if softmax:
        x = _softmax(g, x, ["softmax"])
    return x, [batch, 3, 224, 224], [batch, 1000]


def _resnet18(g: _Graph, batch: int, softmax: bool) -> _Net:
    return _resnet(g, batch, [2, 2, 2, 2], False, softmax)


def _resnet34(g: _Graph, batch: int, softmax: bool) -> _Net:
    return _resnet(g, batch, [3, 4, 6, 3], False, softmax)


def _resnet50(g: _Graph, batch: int, softmax: bool) -> _Net:
    return _resnet(g, batch, [3, 4, 6, 3], True, softmax)


def _resnet101(g: _Graph, batch: int, softmax: bool) -> _Net:
    return _resnet(g, batch, [3, 4, 23, 3], True, softmax)


def _resnet152(g: _Graph, batch: int, softmax: bool) -> _Net:
    return _resnet(g, batch, [3, 8, 36, 3], True, softmax)
