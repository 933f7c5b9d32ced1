"""ONNX op -> TensorRT layer type: the op families the DLA rules know and :func:`trt_layer_type`."""

from __future__ import annotations

from placetune.hardware.dla.context import parse_trt_version
from placetune.model.layer import Layer, TensorInfo

ACTIVATIONS = {"Relu", "Sigmoid", "Tanh", "LeakyRelu", "Clip", "Elu", "Selu", "HardSigmoid",
               "Softplus", "Softsign", "ThresholdedRelu", "HardSwish", "Celu"}
DLA_ACTIVATIONS = {"Relu", "Sigmoid", "Tanh", "LeakyRelu", "Clip"}
ELEMENTWISE = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "Sum", "And", "Or", "Xor", "Mod"}
DLA_ELEMENTWISE = {"Add", "Sub", "Mul", "Max", "Min", "Sum"}  # Sum/Sub/Prod/Max/Min (H, S)
COMPARISONS = {"Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual"}
UNARY = {"Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Not",
         "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Erf"}
DRIVE_UNARY = {"Sin", "Cos", "Atanh"}
SHUFFLES = {"Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze"}
REDUCES = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "GlobalAveragePool",
           "GlobalMaxPool"}

_FIXED_TYPES = {
    "Conv": "Convolution", "ConvTranspose": "Deconvolution", "BatchNormalization": "Scale",
    "MaxPool": "Pooling", "AveragePool": "Pooling", "LRN": "LRN", "Concat": "Concatenation",
    "Slice": "Slice", "Split": "Slice", "Softmax": "SoftMax", "Resize": "Resize", "Upsample": "Resize",
    "PRelu": "ParametricReLU", "Gather": "Gather", "GatherElements": "Gather", "GatherND": "Gather",
    "LayerNormalization": "Normalization", "GroupNormalization": "Normalization", "Pad": "Padding",
    "Cast": "Cast", "TopK": "TopK", "ArgMax": "TopK", "ArgMin": "TopK", "Where": "Select",
    "Einsum": "Einsum", "QuantizeLinear": "Quantize", "DequantizeLinear": "Dequantize",
    "Identity": "Identity", "Constant": "Constant", "Shape": "Shape", "Expand": "Slice", "Tile": "Slice",
    "ScatterND": "Scatter", "ScatterElements": "Scatter", "Loop": "Loop", "If": "Conditional",
    "NonZero": "NonZero", "CumSum": "Loop",
}


def fc_weight(layer: Layer) -> TensorInfo | None:
    """The constant B of a Gemm/MatMul that TensorRT turns into a FullyConnected/1x1 conv."""
    if len(layer.inputs) < 2:
        return None
    a, b = layer.inputs[0], layer.inputs[1]
    if b.const and not a.const and len(b.shape) == 2:
        return b
    return None


def trt_layer_type(layer: Layer, trt_version: str = "8.6") -> str:
    """The TensorRT layer type the ONNX parser makes of ``layer``.

    Notes on choices:
        - Gemm / MatMul with a constant 2D ``B`` on a 2D ``[N, K]`` input -> ``"FullyConnected"``: the ONNX
          parser makes an IMatrixMultiplyLayer of every Gemm/MatMul from 8.4 on (onnx-tensorrt 8.5-GA and
          8.6-GA builtin_op_importers.cpp, 10.0-GA onnxOpImporters.cpp: ``addMatrixMultiply``), which the
          builder runs as a 1x1 convolution between its own ``reshape_before_``/``reshape_after_`` Shuffles,
          the form the DLA takes (published 8.5.2 and 10.3 logs). On a 3D or 4D input -> ``"MatrixMultiply"``:
          no published build shows that conversion on the DLA (see the DLA rule ``rule_fc``).
        - GlobalAveragePool / GlobalMaxPool -> ``"Reduce"``: onnx-tensorrt since 8.x implements them
          with ``addReduce`` ("GlobalAveragePool operators are implemented via Reduce layers rather
          than Pooling layers"), and the jetson_dla_tutorial log shows ``REDUCE: GlobalAveragePool_8``
          on the GPU.
        - InstanceNormalization -> ``"PluginV2 (InstanceNormalization_TRT)"`` before TRT 10 (the
          parser's default; seed 002 log ``PLUGIN_V2: InstanceNormalization_5``), ``"Normalization"``
          from 10.0 (native InstanceNorm is the 10.x default).

    Args:
        layer: an imported layer.
        trt_version: TensorRT version, e.g. ``"8.5"``, ``"10.3"``.
    """
    op = layer.op_type
    if layer.domain not in ("", "ai.onnx"):
        return f"PluginV2 ({layer.domain}.{op})"
    if layer.plugin:
        return f"PluginV2 ({op})"
    if op in _FIXED_TYPES:
        return _FIXED_TYPES[op]
    if op in ("Gemm", "MatMul"):
        acts = layer.activation_inputs
        two_d = bool(acts) and len(acts[0].shape) == 2
        return "FullyConnected" if fc_weight(layer) is not None and two_d else "MatrixMultiply"
    if op == "InstanceNormalization":
        return "Normalization" if parse_trt_version(trt_version) >= (10, 0, 0) else \
            "PluginV2 (InstanceNormalization_TRT)"
    if op in ACTIVATIONS:
        return "Activation"
    if op in ELEMENTWISE:
        return "ElementWise"
    if op in COMPARISONS:
        return "ElementWise (comparison)"
    if op in UNARY:
        return "Unary"
    if op in SHUFFLES:
        return "Shuffle"
    if op in REDUCES:
        return "Reduce"
    return f"{op} (no TensorRT DLA mapping)"
