"""The plain (unbranched) CNN classifiers: BVLC Caffe AlexNet and torchvision VGG-11/13/16/19."""

from __future__ import annotations

from typing import Any

from placetune.model.zoo.graph import Graph, Net
from placetune.model.zoo.layers import add_conv, add_flatten, add_gemm, add_lrn, add_maxpool, add_relu, add_softmax


def alexnet(g: Graph, batch: int, softmax: bool) -> Net:
    """BVLC Caffe AlexNet (bvlc_alexnet deploy.prototxt, grouped conv2/4/5)."""
    x = add_conv(g, "input", ["conv1"], 3, 96, 11, stride=4)
    x = add_relu(g, x, ["relu1"])
    x = add_lrn(g, x, ["norm1"])
    x = add_maxpool(g, x, ["pool1"], 3, 2)
    x = add_conv(g, x, ["conv2"], 96, 256, 5, pad=2, groups=2)
    x = add_relu(g, x, ["relu2"])
    x = add_lrn(g, x, ["norm2"])
    x = add_maxpool(g, x, ["pool2"], 3, 2)
    x = add_conv(g, x, ["conv3"], 256, 384, 3, pad=1)
    x = add_relu(g, x, ["relu3"])
    x = add_conv(g, x, ["conv4"], 384, 384, 3, pad=1, groups=2)
    x = add_relu(g, x, ["relu4"])
    x = add_conv(g, x, ["conv5"], 384, 256, 3, pad=1, groups=2)
    x = add_relu(g, x, ["relu5"])
    x = add_maxpool(g, x, ["pool5"], 3, 2)
    x = add_flatten(g, x)
    x = add_relu(g, add_gemm(g, x, ["fc6"], 9216, 4096), ["relu6"])
    x = add_relu(g, add_gemm(g, x, ["fc7"], 4096, 4096), ["relu7"])
    x = add_gemm(g, x, ["fc8"], 4096, 1000)
    if softmax:
        x = add_softmax(g, x, ["prob"])
    return x, [batch, 3, 227, 227], [batch, 1000]


#: torchvision VGG configurations ("A", "B", "D", "E"): conv widths, "M" = 2x2 max pool.
_VGG_CFG: dict[int, list[Any]] = {
    11: [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    13: [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    16: [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
    19: [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M",
         512, 512, 512, 512, "M"],
}


def _vgg(g: Graph, batch: int, softmax: bool, depth: int) -> Net:
    """torchvision VGG-``depth`` (no batch norm)."""
    x = "input"
    cin = 3
    idx = 0
    for v in _VGG_CFG[depth]:
        p = ["features", f"features.{idx}"]
        if v == "M":
            x = add_maxpool(g, x, p, 2, 2)
            idx += 1
        else:
            x = add_conv(g, x, p, cin, v, 3, pad=1)
            x = add_relu(g, x, ["features", f"features.{idx + 1}"])
            cin = v
            idx += 2
    # AdaptiveAvgPool2d((7, 7)) on a 7x7 map exports as a 1x1 AveragePool
    x = g.op(
        "AveragePool",
        [x],
        ["avgpool"],
        ceil_mode=0,
        kernel_shape=[1, 1],
        pads=[0, 0, 0, 0],
        strides=[1, 1],
    )
    x = add_flatten(g, x)
    x = add_relu(g, add_gemm(g, x, ["classifier", "classifier.0"], 512 * 7 * 7, 4096),
              ["classifier", "classifier.1"])
    x = add_relu(g, add_gemm(g, x, ["classifier", "classifier.3"], 4096, 4096),
              ["classifier", "classifier.4"])
    x = add_gemm(g, x, ["classifier", "classifier.6"], 4096, 1000)
    if softmax:
        x = add_softmax(g, x, ["softmax"])
    return x, [batch, 3, 224, 224], [batch, 1000]


def vgg11(g: Graph, batch: int, softmax: bool) -> Net:
    return _vgg(g, batch, softmax, 11)


def vgg13(g: Graph, batch: int, softmax: bool) -> Net:
    return _vgg(g, batch, softmax, 13)


def vgg16(g: Graph, batch: int, softmax: bool) -> Net:
    return _vgg(g, batch, softmax, 16)


def vgg19(g: Graph, batch: int, softmax: bool) -> Net:
    return _vgg(g, batch, softmax, 19)
