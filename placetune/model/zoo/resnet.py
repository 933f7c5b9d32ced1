"""torchvision ResNet-18/34 and ResNet-50/101/152 (v1.5), BatchNormalization kept."""

from __future__ import annotations

from placetune.model.zoo.graph import Graph, Net
from placetune.model.zoo.layers import add_bn, add_conv, add_flatten, add_gemm, add_maxpool, add_relu, add_softmax


def _resnet(g: Graph, batch: int, blocks: list[int], bottleneck: bool, softmax: bool) -> Net:
    """torchvision ResNet (v1.5: stride on the 3x3 conv), BatchNormalization kept."""
    x = add_conv(g, "input", ["conv1"], 3, 64, 7, stride=2, pad=3, bias=False)
    x = add_relu(g, add_bn(g, x, ["bn1"], 64), ["relu"])
    x = add_maxpool(g, x, ["maxpool"], 3, 2, pad=1)
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
                y = add_conv(g, x, p + ["conv1"], cin, width, 1, bias=False)
                y = add_relu(g, add_bn(g, y, p + ["bn1"], width), g.reuse(p + ["relu"]))
                y = add_conv(g, y, p + ["conv2"], width, width, 3, stride, 1, bias=False)
                y = add_relu(g, add_bn(g, y, p + ["bn2"], width), g.reuse(p + ["relu"]))
                y = add_conv(g, y, p + ["conv3"], width, cout, 1, bias=False)
                y = add_bn(g, y, p + ["bn3"], cout)
            else:
                y = add_conv(g, x, p + ["conv1"], cin, width, 3, stride, 1, bias=False)
                y = add_relu(g, add_bn(g, y, p + ["bn1"], width), g.reuse(p + ["relu"]))
                y = add_conv(g, y, p + ["conv2"], width, width, 3, 1, 1, bias=False)
                y = add_bn(g, y, p + ["bn2"], cout)
            if stride != 1 or cin != cout:
                d = p + ["downsample"]
                identity = add_conv(g, x, d + ["downsample.0"], cin, cout, 1, stride, bias=False)
                identity = add_bn(g, identity, d + ["downsample.1"], cout)
            x = add_relu(g, g.op("Add", [y, identity], p), g.reuse(p + ["relu"]))
            cin = cout
    x = g.op("GlobalAveragePool", [x], ["avgpool"])
    x = add_flatten(g, x)
    x = add_gemm(g, x, ["fc"], cin, 1000)
    if softmax:
        x = add_softmax(g, x, ["softmax"])
    return x, [batch, 3, 224, 224], [batch, 1000]


def resnet18(g: Graph, batch: int, softmax: bool) -> Net:
    return _resnet(g, batch, [2, 2, 2, 2], False, softmax)


def resnet34(g: Graph, batch: int, softmax: bool) -> Net:
    return _resnet(g, batch, [3, 4, 6, 3], False, softmax)


def resnet50(g: Graph, batch: int, softmax: bool) -> Net:
    return _resnet(g, batch, [3, 4, 6, 3], True, softmax)


def resnet101(g: Graph, batch: int, softmax: bool) -> Net:
    return _resnet(g, batch, [3, 4, 23, 3], True, softmax)


def resnet152(g: Graph, batch: int, softmax: bool) -> Net:
    return _resnet(g, batch, [3, 8, 36, 3], True, softmax)
