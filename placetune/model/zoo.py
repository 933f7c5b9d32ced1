"""Built-in networks written with :mod:`onnx.helper` (no downloads, deterministic, opset 17).

The zoo gives placetune real network structures to analyse, search and export without a
model file: the seed scenarios (``seed-block``, ``model-gn``, ``model-bn``), the classic
Jetson benchmark networks (``alexnet``, ``googlenet``, ``resnet18``, ``resnet50``,
``mobilenetv2``, ``vgg16``), a small segmentation network (``unet-small``) and a
transformer stress model (``vit-tiny``).

Every graph has one NCHW float32 input named ``input`` and one output named ``output``,
static shapes with the requested batch, and node / tensor names in the style of
``torch.onnx.export`` (module-scoped node names such as ``/layer1/layer1.0/conv1/Conv``,
outputs ``<node name>_output_0``, parameters ``layer1.0.conv1.weight``).

Two forms of the same graph:

* ``weights=False`` (the default, used for analysis): every initializer carries its
  ``dims`` and ``data_type`` but **no data**. The model importer only needs shapes, and
  VGG-16 builds in milliseconds instead of allocating half a gigabyte.
  :func:`onnx.checker.check_model` rejects this form (a tensor without a value field);
  :func:`onnx.shape_inference.infer_shapes` with ``strict_mode=True`` accepts it.
* ``weights=True``: initializers hold deterministic float32 values (seeded from the
  parameter name) and the model passes ``onnx.checker.check_model(model, full_check=True)``;
  :func:`export` writes this form for a real TensorRT build.

Small constants that shape logic needs (Reshape targets, Resize scales, Clip bounds,
Squeeze axes, Gather indices, Split sizes, GELU and attention scale factors) are always
``Constant`` nodes with data, in both forms.

Example:
    >>> from placetune import zoo
    >>> m = zoo.build("resnet18", batch=4)
    >>> m.graph.input[0].type.tensor_type.shape.dim[0].dim_value
    4
"""

from __future__ import annotations

import json
import math
import pathlib
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from placetune.errors import ConfigError, UnknownNameError

__all__ = ["names", "describe", "build", "export", "default_batch", "OPSET", "IR_VERSION"]

#: ONNX default-domain opset of every zoo model.
OPSET = 17
#: IR version written into zoo models (the one torch.onnx.export writes at opset 17; readable by
#: the ONNX parsers of TensorRT 8.5 and later).
IR_VERSION = 8

_MAX_VIT_DEPTH = 64


# --------------------------------------------------------------------------------------------
# graph builder


def _scope(parts: Sequence[str]) -> tuple[str, str]:
    """Turn torch scope components into (node scope, dotted parameter prefix).

    ``("layer4", "layer4.0", "downsample", "downsample.0")`` gives
    ``("/layer4/layer4.0/downsample/downsample.0", "layer4.0.downsample.0")``.
    """
    dotted = ""
    prev = ""
    for part in parts:
        if prev and part.startswith(prev + "."):
            dotted = dotted[: len(dotted) - len(prev)] + part
        else:
            dotted = f"{dotted}.{part}" if dotted else part
        prev = part
    return ("/" + "/".join(parts)) if parts else "", dotted


class _Graph:
    """Collects nodes and initializers with torch.onnx-style unique names."""

    def __init__(self, weights: bool, graph: onnx.GraphProto) -> None:
        self.weights = weights
        self.nodes: list[onnx.NodeProto] = []
        # initializers are written straight into the model's graph: no copy of big weights
        self.initializers = graph.initializer
        self._counts: dict[str, int] = {}
        self._calls: dict[str, int] = {}
        self._tensors: set[str] = set()

    def _new_tensor(self, name: str) -> str:
        if name in self._tensors:
            raise AssertionError(f"zoo bug: tensor name {name!r} used twice")
        self._tensors.add(name)
        return name

    def op(
        self,
        op_type: str,
        inputs: Sequence[str],
        parts: Sequence[str] = (),
        *,
        outputs: int = 1,
        **attrs: Any,
    ) -> Any:
        """Add one node; returns its output name (or a list when ``outputs > 1``)."""
        scope, _ = _scope(parts)
        base = f"{scope}/{op_type}"
        k = self._counts.get(base, 0)
        self._counts[base] = k + 1
        name = base if k == 0 else f"{base}_{k}"
        outs = [self._new_tensor(f"{name}_output_{i}") for i in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=name, **attrs))
        return outs[0] if outputs == 1 else outs

    def reuse(self, parts: Sequence[str]) -> list[str]:
        """Scope of one more call of a module that runs several times (torch: ``relu_1``)."""
        scope, _ = _scope(parts)
        k = self._calls.get(scope, 0)
        self._calls[scope] = k + 1
        return list(parts) if k == 0 else [*parts[:-1], f"{parts[-1]}_{k}"]

    def const(self, parts: Sequence[str], value: Any, dtype: Any) -> str:
        """A ``Constant`` node holding ``value`` (always with data, whatever ``weights`` is)."""
        tensor = numpy_helper.from_array(np.asarray(value, dtype=dtype), name="")
        return self.op("Constant", [], parts, value=tensor)

    def param(self, name: str, shape: Sequence[int], init: str, fan_in: int = 1) -> str:
        """A float32 initializer: shape only, or deterministic data when ``weights`` is set.

        ``init`` is one of ``"weight"`` (uniform, variance 1/fan_in), ``"bias"`` (uniform in
        +-1/sqrt(fan_in)), ``"ones"``, ``"zeros"`` or ``"embed"`` (normal, std 0.02).
        """
        self._new_tensor(name)
        shape = [int(d) for d in shape]
        tensor = self.initializers.add()
        tensor.name = name
        tensor.data_type = TensorProto.FLOAT
        tensor.dims.extend(shape)
        if not self.weights:
            return name
        rng = np.random.default_rng(zlib.crc32(name.encode("utf-8")))
        f32 = np.float32
        if init in ("weight", "bias"):
            bound = math.sqrt(3.0 / fan_in) if init == "weight" else 1.0 / math.sqrt(fan_in)
            arr = rng.random(shape, dtype=f32)
            arr *= f32(2.0 * bound)
            arr -= f32(bound)
        elif init == "ones":
            arr = np.ones(shape, dtype=f32)
        elif init == "zeros":
            arr = np.zeros(shape, dtype=f32)
        elif init == "embed":
            arr = rng.standard_normal(shape, dtype=f32)
            arr *= f32(0.02)
        else:  # pragma: no cover - programming error
            raise AssertionError(f"zoo bug: unknown init {init!r}")
        tensor.raw_data = arr.astype("<f4", copy=False).tobytes()  # ONNX raw_data: little-endian
        return name

    def rename_output(self, tensor: str, new: str) -> str:
        """Rename the graph's final tensor (it must have no consumer yet)."""
        for node in self.nodes:
            for i, out in enumerate(node.output):
                if out == tensor:
                    node.output[i] = new
            if tensor in node.input:  # pragma: no cover - programming error
                raise AssertionError("zoo bug: renaming a consumed tensor")
        self._tensors.discard(tensor)
        return self._new_tensor(new)


# --------------------------------------------------------------------------------------------
# layer helpers (torch.onnx export shapes of the common modules)


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


# --------------------------------------------------------------------------------------------
# networks; each returns (output tensor, input shape, output shape)

_Net = tuple[str, list[int], list[int]]


def _seed_block(g: _Graph, batch: int) -> _Net:
    x = "input"
    c1 = _conv(g, x, ["conv1"], 384, 384, 1, bias=False)
    c2 = _conv(g, c1, ["conv2"], 384, 384, 1, bias=False)
    c3 = _conv(g, x, ["conv3"], 384, 384, 1, bias=False)
    c4 = _conv(g, x, ["conv4"], 384, 384, 1, bias=False)
    y = g.op("Concat", [c2, c3, c4], (), axis=1)
    return y, [batch, 384, 56, 56], [batch, 1152, 56, 56]


def _model_norm(g: _Graph, batch: int, norm: str) -> _Net:
    """seed 002's ModelGN / its BatchNorm twin (NVIDIA jetson_dla_tutorial)."""
    x = "input"
    widths = [3, 64, 128, 256, 512]
    size = 32
    groups = 8
    for i in range(4):
        cin, cout = widths[i], widths[i + 1]
        conv_p, norm_p, relu_p = (["cnn", f"cnn.{3 * i + j}"] for j in range(3))
        x = _conv(g, x, conv_p, cin, cout, 3, stride=2, pad=1)
        size = (size + 2 - 3) // 2 + 1
        if norm == "bn":
            x = _bn(g, x, norm_p, cout)
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
        x = _relu(g, x, relu_p)
    x = g.op("GlobalAveragePool", [x], ["pool"])
    # x.view(x.shape[0], -1) exports as Reshape with a constant shape
    x = g.op("Reshape", [x, g.const((), [batch, -1], np.int64)], (), allowzero=0)
    y = _gemm(g, x, ["linear"], 512, 10)
    return y, [batch, 3, 32, 32], [batch, 10]


def _model_gn(g: _Graph, batch: int) -> _Net:
    return _model_norm(g, batch, "gn")


def _model_bn(g: _Graph, batch: int) -> _Net:
    return _model_norm(g, batch, "bn")


def _alexnet(g: _Graph, batch: int, softmax: bool) -> _Net:
    """BVLC Caffe AlexNet (bvlc_alexnet deploy.prototxt, grouped conv2/4/5)."""
    x = _conv(g, "input", ["conv1"], 3, 96, 11, stride=4)
    x = _relu(g, x, ["relu1"])
    x = _lrn(g, x, ["norm1"])
    x = _maxpool(g, x, ["pool1"], 3, 2)
    x = _conv(g, x, ["conv2"], 96, 256, 5, pad=2, groups=2)
    x = _relu(g, x, ["relu2"])
    x = _lrn(g, x, ["norm2"])
    x = _maxpool(g, x, ["pool2"], 3, 2)
    x = _conv(g, x, ["conv3"], 256, 384, 3, pad=1)
    x = _relu(g, x, ["relu3"])
    x = _conv(g, x, ["conv4"], 384, 384, 3, pad=1, groups=2)
    x = _relu(g, x, ["relu4"])
    x = _conv(g, x, ["conv5"], 384, 256, 3, pad=1, groups=2)
    x = _relu(g, x, ["relu5"])
    x = _maxpool(g, x, ["pool5"], 3, 2)
    x = _flatten(g, x)
    x = _relu(g, _gemm(g, x, ["fc6"], 9216, 4096), ["relu6"])
    x = _relu(g, _gemm(g, x, ["fc7"], 4096, 4096), ["relu7"])
    x = _gemm(g, x, ["fc8"], 4096, 1000)
    if softmax:
        x = _softmax(g, x, ["prob"])
    return x, [batch, 3, 227, 227], [batch, 1000]


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


def _resnet50(g: _Graph, batch: int, softmax: bool) -> _Net:
    return _resnet(g, batch, [3, 4, 6, 3], True, softmax)


def _conv_bn_relu6(
    g: _Graph,
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
    x = _conv(g, x, parts + [f"{last}.0"], cin, cout, k, stride, (k - 1) // 2, groups, bias=False)
    x = _bn(g, x, parts + [f"{last}.1"], cout)
    act = parts + [f"{last}.2"]
    lo = g.const(act, 0.0, np.float32)
    hi = g.const(act, 6.0, np.float32)
    return g.op("Clip", [x, lo, hi], act)


_MOBILENETV2_SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                         (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]


def _mobilenetv2(g: _Graph, batch: int, softmax: bool) -> _Net:
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
            y = _conv(g, y, conv + [f"conv.{j + 1}"], hidden, c, 1, bias=False)
            y = _bn(g, y, conv + [f"conv.{j + 2}"], c)
            if stride == 1 and cin == c:
                y = g.op("Add", [x, y], p)
            x = y
            cin = c
            idx += 1
    x = _conv_bn_relu6(g, x, ["features", f"features.{idx}"], cin, 1280, 1)
    x = g.op("GlobalAveragePool", [x], ())
    x = _flatten(g, x)
    x = _gemm(g, x, ["classifier", "classifier.1"], 1280, 1000)
    if softmax:
        x = _softmax(g, x, ["softmax"])
    return x, [batch, 3, 224, 224], [batch, 1000]


def _vgg16(g: _Graph, batch: int, softmax: bool) -> _Net:
    """torchvision VGG-16 (no batch norm)."""
    cfg: list[Any] = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M",
                      512, 512, 512, "M", 512, 512, 512, "M"]
    x = "input"
    cin = 3
    idx = 0
    for v in cfg:
        p = ["features", f"features.{idx}"]
        if v == "M":
            x = _maxpool(g, x, p, 2, 2)
            idx += 1
        else:
            x = _conv(g, x, p, cin, v, 3, pad=1)
            x = _relu(g, x, ["features", f"features.{idx + 1}"])
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
    x = _flatten(g, x)
    x = _relu(g, _gemm(g, x, ["classifier", "classifier.0"], 512 * 7 * 7, 4096),
              ["classifier", "classifier.1"])
    x = _relu(g, _gemm(g, x, ["classifier", "classifier.3"], 4096, 4096),
              ["classifier", "classifier.4"])
    x = _gemm(g, x, ["classifier", "classifier.6"], 4096, 1000)
    if softmax:
        x = _softmax(g, x, ["softmax"])
    return x, [batch, 3, 224, 224], [batch, 1000]


def _unet_small(g: _Graph, batch: int) -> _Net:
    """A small 3-level U-Net: ConvTranspose and nearest Resize upsampling, Concat skips."""

    def double_conv(x: str, name: str, cin: int, cout: int) -> str:
        x = _conv(g, x, [name, f"{name}.0"], cin, cout, 3, pad=1)
        x = _relu(g, x, [name, f"{name}.1"])
        x = _conv(g, x, [name, f"{name}.2"], cout, cout, 3, pad=1)
        return _relu(g, x, [name, f"{name}.3"])

    def up_transposed(x: str, name: str, cin: int, cout: int) -> str:
        w = g.param(f"{name}.weight", [cin, cout, 2, 2], "weight", cin)
        b = g.param(f"{name}.bias", [cout], "bias", cin)
        return g.op(
            "ConvTranspose",
            [x, w, b],
            [name],
            dilations=[1, 1],
            group=1,
            kernel_shape=[2, 2],
            pads=[0, 0, 0, 0],
            strides=[2, 2],
        )

    c = 16  # base width
    e1 = double_conv("input", "enc1", 3, c)  # 256x256
    e2 = double_conv(_maxpool(g, e1, ["pool1"], 2, 2), "enc2", c, 2 * c)  # 128
    e3 = double_conv(_maxpool(g, e2, ["pool2"], 2, 2), "enc3", 2 * c, 4 * c)  # 64
    b = double_conv(_maxpool(g, e3, ["pool3"], 2, 2), "bottleneck", 4 * c, 8 * c)  # 32
    u3 = up_transposed(b, "up3", 8 * c, 4 * c)  # 64
    d3 = double_conv(g.op("Concat", [u3, e3], (), axis=1), "dec3", 8 * c, 4 * c)
    scales = g.const(["up2"], [1.0, 1.0, 2.0, 2.0], np.float32)
    u2 = g.op(
        "Resize",
        [d3, "", scales],
        ["up2"],
        coordinate_transformation_mode="asymmetric",
        cubic_coeff_a=-0.75,
        mode="nearest",
        nearest_mode="floor",
    )  # 128
    d2 = double_conv(g.op("Concat", [u2, e2], (), axis=1), "dec2", 6 * c, 2 * c)
    u1 = up_transposed(d2, "up1", 2 * c, c)  # 256
    d1 = double_conv(g.op("Concat", [u1, e1], (), axis=1), "dec1", 2 * c, c)
    y = _conv(g, d1, ["head"], c, 2, 1)
    return y, [batch, 3, 256, 256], [batch, 2, 256, 256]


def _vit_tiny(g: _Graph, batch: int, depth: int, attention: str) -> _Net:
    """timm vit_tiny_patch16_224 (dim 192, 3 heads, MLP 768) as torch.onnx exports it."""
    dim, heads, hidden, tokens = 192, 3, 768, 197
    head_dim = dim // heads
    x = _conv(g, "input", ["patch_embed", "proj"], 3, dim, 16, stride=16)
    pe = ["patch_embed"]
    x = g.op("Reshape", [x, g.const(pe, [batch, dim, 196], np.int64)], pe, allowzero=0)
    x = g.op("Transpose", [x], pe, perm=[0, 2, 1])
    cls = g.param("cls_token", [1, 1, dim], "embed")
    cls = g.op("Expand", [cls, g.const((), [batch, 1, dim], np.int64)], ())
    x = g.op("Concat", [cls, x], (), axis=1)
    x = g.op("Add", [x, g.param("pos_embed", [1, tokens, dim], "embed")], ())

    def layer_norm(x: str, parts: list[str]) -> str:
        _, dotted = _scope(parts)
        w = g.param(f"{dotted}.weight", [dim], "ones")
        b = g.param(f"{dotted}.bias", [dim], "zeros")
        return g.op("LayerNormalization", [x, w, b], parts, axis=-1, epsilon=1e-6)

    for i in range(depth):
        p = ["blocks", f"blocks.{i}"]
        a = p + ["attn"]
        h = layer_norm(x, p + ["norm1"])
        qkv = _linear3d(g, h, a + ["qkv"], dim, 3 * dim)
        shape = g.const(a, [batch, tokens, 3, heads, head_dim], np.int64)
        qkv = g.op("Reshape", [qkv, shape], a, allowzero=0)
        qkv = g.op("Transpose", [qkv], a, perm=[2, 0, 3, 1, 4])
        # q, k, v = qkv.unbind(0): Split + one Squeeze per output
        parts3 = g.op("Split", [qkv, g.const(a, [1, 1, 1], np.int64)], a, outputs=3, axis=0)
        q, k, v = (g.op("Squeeze", [t, g.const(a, [0], np.int64)], a) for t in parts3)
        kt = g.op("Transpose", [k], a, perm=[0, 1, 3, 2])
        if attention == "sdpa":
            # torch's scaled_dot_product_attention symbolic: q*sqrt(s) @ k^T*sqrt(s)
            root = math.sqrt(1.0 / math.sqrt(head_dim))
            q = g.op("Mul", [q, g.const(a, root, np.float32)], a)
            kt = g.op("Mul", [kt, g.const(a, root, np.float32)], a)
            att = g.op("MatMul", [q, kt], a)
        else:
            att = g.op("MatMul", [q, kt], a)
            att = g.op("Mul", [att, g.const(a, 1.0 / math.sqrt(head_dim), np.float32)], a)
        att = g.op("Softmax", [att], a, axis=-1)
        o = g.op("MatMul", [att, v], a)
        o = g.op("Transpose", [o], a, perm=[0, 2, 1, 3])
        o = g.op("Reshape", [o, g.const(a, [batch, tokens, dim], np.int64)], a, allowzero=0)
        o = _linear3d(g, o, a + ["proj"], dim, dim)
        x = g.op("Add", [x, o], p)
        h = layer_norm(x, p + ["norm2"])
        m = p + ["mlp"]
        h = _linear3d(g, h, m + ["fc1"], dim, hidden)
        act = m + ["act"]  # exact GELU, torch.onnx opset < 20
        e = g.op("Div", [h, g.const(act, math.sqrt(2.0), np.float32)], act)
        e = g.op("Erf", [e], act)
        e = g.op("Add", [e, g.const(act, 1.0, np.float32)], act)
        e = g.op("Mul", [h, e], act)
        h = g.op("Mul", [e, g.const(act, 0.5, np.float32)], act)
        h = _linear3d(g, h, m + ["fc2"], hidden, dim)
        x = g.op("Add", [x, h], p)
    x = layer_norm(x, ["norm"])
    x = g.op("Gather", [x, g.const((), 0, np.int64)], (), axis=1)
    y = _gemm(g, x, ["head"], dim, 1000)
    return y, [batch, 3, 224, 224], [batch, 1000]


# --------------------------------------------------------------------------------------------
# registry and public API


@dataclass(frozen=True)
class _Entry:
    fn: Callable[..., _Net]
    description: str
    options: dict[str, Any]


_ZOO: dict[str, _Entry] = {
    "seed-block": _Entry(
        _seed_block,
        "seed 000: four 1x1 convs 384->384 on 384x56x56, conv1->conv2 | conv3 | conv4, "
        "Concat to 1152 channels",
        {},
    ),
    "model-gn": _Entry(
        _model_gn,
        "seed 002 ModelGN (jetson_dla_tutorial): 4x [3x3/2 conv + GroupNorm(8) + ReLU] on "
        "3x32x32, GlobalAveragePool, Linear 512->10; GroupNorm as torch exports it "
        "(Reshape, InstanceNormalization, Reshape, Mul, Add)",
        {},
    ),
    "model-bn": _Entry(
        _model_bn,
        "seed 002 ModelGN with BatchNorm in place of GroupNorm (the DLA-friendly variant)",
        {},
    ),
    "alexnet": _Entry(
        _alexnet,
        "BVLC Caffe AlexNet on 3x227x227 (LRN, grouped conv2/4/5), ~0.72 GMACs; "
        "softmax=False gives seed 003's alexnet_noprob",
        {"softmax": True},
    ),
    "googlenet": _Entry(
        _googlenet,
        "BVLC Caffe GoogLeNet / Inception v1 on 3x224x224 (LRN, 9 inception modules), "
        "~1.6 GMACs",
        {"softmax": True},
    ),
    "resnet18": _Entry(
        _resnet18,
        "torchvision ResNet-18 on 3x224x224, BatchNormalization kept, ~1.81 GMACs",
        {"softmax": False},
    ),
    "resnet50": _Entry(
        _resnet50,
        "torchvision ResNet-50 (v1.5) on 3x224x224, BatchNormalization kept, ends in Softmax "
        "like seed 003's Caffe model, ~4.09 GMACs",
        {"softmax": True},
    ),
    "mobilenetv2": _Entry(
        _mobilenetv2,
        "torchvision MobileNetV2 on 3x224x224, BatchNormalization kept, ReLU6 as Clip, "
        "~0.30 GMACs",
        {"softmax": False},
    ),
    "vgg16": _Entry(
        _vgg16,
        "torchvision VGG-16 on 3x224x224, ~15.5 GMACs",
        {"softmax": False},
    ),
    "unet-small": _Entry(
        _unet_small,
        "small 3-level U-Net (widths 16-128) on 3x256x256 -> 2 classes, ConvTranspose and "
        "nearest Resize upsampling, Concat skips, ~2.4 GMACs",
        {},
    ),
    "vit-tiny": _Entry(
        _vit_tiny,
        "timm ViT-Tiny/16 on 3x224x224 (dim 192, 3 heads), LayerNormalization, exact GELU; "
        "depth=N blocks (default 12, 42 nodes each), a many-layer stress model, ~1.25 GMACs",
        {"depth": 12, "attention": "sdpa"},
    ),
}


def _entry(name: str) -> _Entry:
    try:
        return _ZOO[name]
    except (KeyError, TypeError):
        raise UnknownNameError(
            f"unknown zoo model {name!r}; choose one of: {', '.join(names())}"
        ) from None


def names() -> list[str]:
    """The names of the built-in networks, sorted.

    Returns:
        The zoo names, e.g. ``["alexnet", "googlenet", ...]``.

    Example:
        >>> "resnet50" in names()
        True
    """
    return sorted(_ZOO)


#: Batch sizes of the seed scenarios; everything else defaults to 1.
_DEFAULT_BATCH = {"model-gn": 32, "model-bn": 32}


def default_batch(name: str) -> int:
    """The batch a zoo model is loaded with when none is given (seed 002's ModelGN ran at 32)."""
    _entry(name)
    return _DEFAULT_BATCH.get(name, 1)


def describe(name: str) -> str:
    """A one-line description of a zoo network.

    Args:
        name: a name from :func:`names`.

    Returns:
        The description (structure, input size, approximate MACs where known).

    Raises:
        UnknownNameError: ``name`` is not in the zoo.

    Example:
        >>> describe("seed-block").startswith("seed 000")
        True
    """
    return _entry(name).description


def _options(name: str, entry: _Entry, kw: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(kw) - set(entry.options))
    if unknown:
        allowed = ", ".join(sorted(entry.options)) or "none"
        raise ConfigError(
            f"zoo model {name!r} has no option {', '.join(map(repr, unknown))}; "
            f"its options are: {allowed}"
        )
    opts = {**entry.options, **kw}
    if "softmax" in opts and not isinstance(opts["softmax"], bool):
        raise ConfigError(f"softmax must be True or False, not {opts['softmax']!r}")
    if "depth" in opts:
        depth = opts["depth"]
        valid = isinstance(depth, int) and not isinstance(depth, bool)
        if not valid or not 1 <= depth <= _MAX_VIT_DEPTH:
            raise ConfigError(
                f"depth must be an integer from 1 to {_MAX_VIT_DEPTH}, not {depth!r}"
            )
    if "attention" in opts and opts["attention"] not in ("sdpa", "eager"):
        raise ConfigError(
            f"attention must be 'sdpa' (torch scaled_dot_product_attention export) or "
            f"'eager' ((q @ k^T) * scale), not {opts['attention']!r}"
        )
    return opts


def build(name: str, batch: int = 1, *, weights: bool = False, **kw: Any) -> onnx.ModelProto:
    """Build a zoo network as an ONNX model (opset 17, static shapes).

    Args:
        name: a name from :func:`names`.
        batch: the batch dimension of the input ``input`` and the output ``output`` (>= 1).
        weights: ``False`` (default) gives initializers with dims and data type but no data:
            enough for placetune's importer and for strict shape inference, but rejected by
            :func:`onnx.checker.check_model`. ``True`` fills them with deterministic float32
            values; the model then passes ``check_model(model, full_check=True)``.
        **kw: network options: ``softmax`` (bool) for the classifiers (default True for
            alexnet, googlenet and resnet50, False otherwise); ``depth`` (int, 1-64, default
            12) and ``attention`` (``"sdpa"`` default, or ``"eager"``) for vit-tiny.

    Returns:
        The model; two calls with the same arguments serialize to the same bytes.

    Raises:
        UnknownNameError: ``name`` is not in the zoo.
        ConfigError: ``batch`` is not a positive integer, or an option is unknown or invalid.

    Example:
        >>> m = build("vit-tiny", depth=2)
        >>> [o.name for o in m.graph.output]
        ['output']
    """
    entry = _entry(name)
    if isinstance(batch, bool) or not isinstance(batch, (int, np.integer)) or batch < 1:
        raise ConfigError(f"batch must be an integer >= 1, not {batch!r}")
    batch = int(batch)
    opts = _options(name, entry, kw)
    model = onnx.ModelProto()
    g = _Graph(bool(weights), model.graph)
    g._new_tensor("input")
    out, in_shape, out_shape = entry.fn(g, batch, **opts)
    g.rename_output(out, "output")
    graph = model.graph
    graph.node.extend(g.nodes)
    graph.name = name.replace("-", "_")
    graph.input.append(helper.make_tensor_value_info("input", TensorProto.FLOAT, in_shape))
    graph.output.append(helper.make_tensor_value_info("output", TensorProto.FLOAT, out_shape))
    model.opset_import.append(helper.make_opsetid("", OPSET))
    model.producer_name = "placetune.zoo"
    model.producer_version = "1"
    model.doc_string = entry.description
    model.ir_version = IR_VERSION
    helper.set_model_props(
        model,
        {
            "placetune.zoo.name": name,
            "placetune.zoo.batch": str(batch),
            "placetune.zoo.options": json.dumps(opts, sort_keys=True),
            "placetune.zoo.weights": "random" if weights else "none",
        },
    )
    return model


def export(name: str, path: str | pathlib.Path, batch: int = 1, **kw: Any) -> pathlib.Path:
    """Write a zoo network with deterministic weights to an ONNX file for a real build.

    Args:
        name: a name from :func:`names`.
        path: the file to write (parent folders are created).
        batch: the static batch dimension.
        **kw: network options, as for :func:`build`.

    Returns:
        The path written.

    Raises:
        UnknownNameError: ``name`` is not in the zoo.
        ConfigError: invalid ``batch`` or options, or the file cannot be written.

    Example:
        >>> p = export("seed-block", "/tmp/seed_block.onnx")  # doctest: +SKIP
    """
    model = build(name, batch, weights=True, **kw)
    out = pathlib.Path(path)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        onnx.save(model, str(out))
    except OSError as exc:
        raise ConfigError(f"cannot write {out}: {exc}; choose a writable path") from exc
    return out
