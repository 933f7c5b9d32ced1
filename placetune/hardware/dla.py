"""DLA support rules: can TensorRT run this layer on a DLA core, and if not, why.

The rules encode NVIDIA's published DLA restrictions (reference ``tensorrt-dla.md`` §3:
general rules G1-G8, the per-layer table of §3.2, the Orin/Xavier differences of §3.4 and
the DLA-SW operator matrix of §3.5) for one ONNX layer as placetune's importer describes it
(:class:`~placetune.model.layer.Layer`). A layer is judged on its own; rules that depend on the
neighbours (a reshape next to Slice/Concat, a comparison's consumer) apply only when the
``model`` is passed. What is not known to run on the DLA is reported as unsupported with a
reason: no op is ever silently supported.

These rules predict ``IBuilderConfig.can_run_on_DLA``; they do not replace it. On a device,
the realised placement (build log ``[DlaLayer]`` lines) is the truth.

Example:
    >>> from placetune.dla import check_layer
    >>> s = check_layer(layer, "xavier-agx", "fp16")          # doctest: +SKIP
    >>> s.supported, s.reason                                   # doctest: +SKIP
    (False, 'Softmax not supported on Xavier DLA')
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from placetune.errors import ConfigError
from placetune.model.layer import Layer, TensorInfo
from placetune.hardware.platforms import Platform, get_platform

__all__ = [
    "SUPPORTED_PRECISIONS",
    "Support",
    "check_layer",
    "check_model",
    "trt_layer_type",
    "parse_trt_version",
    "cbuf_banks",
]

#: Precisions the DLA runs (G7). Anything else makes every layer GPU-only.
SUPPORTED_PRECISIONS = ("fp16", "int8")

_PRECISION_ALIASES = {
    "fp16": "fp16", "float16": "fp16", "half": "fp16",
    "int8": "int8",
    "fp32": "fp32", "float32": "fp32", "float": "fp32",
    "tf32": "tf32", "bf16": "bf16", "bfloat16": "bf16", "fp8": "fp8", "int4": "int4",
}

MAX_BATCH = 4096  # G1
MAX_DIM = 8192  # G2
# Versions with the DRIVE-OS-only DLA ops (Div, Pow, Greater, Less, GlobalMaxPool, Sin, Cos, Atanh):
# DLA-SW lists them "as of TensorRT 8.6.12", a DRIVE OS build number. JetPack ships 8.5.2, 8.6.2
# and 10.3; TRT 10.x headers still list only kSUM/kPROD/kMAX/kMIN/kSUB for DLA ElementWise, so 10.x
# (and 11.x) are treated as not having them. Conservative; confirm with can_run_on_DLA on a device.
_DRIVE_OPS_FROM = (8, 6, 12)


# ----------------------------------------------------------------------------- public types


@dataclass(frozen=True)
class Support:
    """Whether a layer can run on a DLA core.

    Attributes:
        supported: True when every known rule passes.
        reason: None when supported; otherwise a short human reason
            (``"Conv kernel 63x63 > 32"``, ``"dynamic shape"``, ...).
    """

    supported: bool
    reason: str | None = None

    def __bool__(self) -> bool:
        return self.supported


_OK = Support(True, None)


class _ModelLike(Protocol):
    layers: list[Layer]

    def layer(self, name: str) -> Layer: ...


def parse_trt_version(version: str) -> tuple[int, int, int]:
    """``"8.6"`` -> ``(8, 6, 0)``, ``"8.6.12"`` -> ``(8, 6, 12)``, ``"10.3.0.26"`` -> ``(10, 3, 0)``.

    Raises:
        ConfigError: not a dotted version number.
    """
    parts = str(version).strip().split(".")
    try:
        nums = [int(p) for p in parts[:3] if p != ""]
    except ValueError:
        nums = []
    if not nums:
        raise ConfigError(f"TensorRT version {version!r} is not a version number; use e.g. '8.6' or '10.3.0'")
    while len(nums) < 3:
        nums.append(0)
    return nums[0], nums[1], nums[2]


def cbuf_banks(c_in: int, k_h: int, k_w: int, w_in: int, dil_h: int = 1, int8: bool = False) -> int:
    """Convolution-buffer banks a DLA convolution needs (reference §3.2, CBUF check).

    ``wt = ceil(roundUp(C_in*K_h*K_w*bpe, 128) / 32768)``,
    ``data = ceil(ceil(ceil(C_in*bpe/32) * W_in/4) * ((K_h-1)*dil_h+1) / 256)``; the layer fails
    when ``wt + data > 16``. ``C_in`` is the layer's full input channel count, as the formula
    in the (older) TensorRT guide states, also for grouped convolutions (conservative).
    """
    bpe = 1 if int8 else 2
    wt_bytes = c_in * k_h * k_w * bpe
    wt = math.ceil((math.ceil(wt_bytes / 128) * 128) / 32768.0)
    entries = math.ceil(math.ceil(c_in * bpe / 32.0) * w_in / 4.0)
    dilated_kh = (k_h - 1) * dil_h + 1
    data = math.ceil(entries * dilated_kh / 256.0)
    return wt + data


# ----------------------------------------------------------------------------- ONNX -> TensorRT

_ACTIVATIONS = {"Relu", "Sigmoid", "Tanh", "LeakyRelu", "Clip", "Elu", "Selu", "HardSigmoid",
                "Softplus", "Softsign", "ThresholdedRelu", "HardSwish", "Celu"}
_DLA_ACTIVATIONS = {"Relu", "Sigmoid", "Tanh", "LeakyRelu", "Clip"}
_ELEMENTWISE = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "Sum", "And", "Or", "Xor", "Mod"}
_DLA_ELEMENTWISE = {"Add", "Sub", "Mul", "Max", "Min", "Sum"}  # Sum/Sub/Prod/Max/Min (H, S)
_COMPARISONS = {"Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual"}
_UNARY = {"Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Not",
          "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Erf"}
_DRIVE_UNARY = {"Sin", "Cos", "Atanh"}
_SHUFFLES = {"Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze"}
_RESHAPES = _SHUFFLES - {"Transpose"}
_REDUCES = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "GlobalAveragePool",
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


def _fc_weight(layer: Layer) -> TensorInfo | None:
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
        - Gemm / MatMul with a constant 2D ``B`` -> ``"FullyConnected"`` (TRT 8.x naming; TRT 10
          builds a MatrixMultiply with a constant that the optimiser turns into a 1x1 convolution).
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
    if op in _FIXED_TYPES:
        return _FIXED_TYPES[op]
    if op in ("Gemm", "MatMul"):
        return "FullyConnected" if _fc_weight(layer) is not None else "MatrixMultiply"
    if op == "InstanceNormalization":
        return "Normalization" if parse_trt_version(trt_version) >= (10, 0, 0) else \
            "PluginV2 (InstanceNormalization_TRT)"
    if op in _ACTIVATIONS:
        return "Activation"
    if op in _ELEMENTWISE:
        return "ElementWise"
    if op in _COMPARISONS:
        return "ElementWise (comparison)"
    if op in _UNARY:
        return "Unary"
    if op in _SHUFFLES:
        return "Shuffle"
    if op in _REDUCES:
        return "Reduce"
    return f"{op} (no TensorRT DLA mapping)"


# ----------------------------------------------------------------------------- rule helpers


@dataclass(frozen=True)
class _Ctx:
    platform: Platform
    precision: str
    trt: tuple[int, int, int]
    model: _ModelLike | None

    @property
    def int8(self) -> bool:
        return self.precision == "int8"

    @property
    def drive_ops(self) -> bool:
        return _DRIVE_OPS_FROM <= self.trt < (9, 0, 0)

    @property
    def trt_text(self) -> str:
        return ".".join(str(x) for x in self.trt)


def _ints(value: Any, n: int, default: int) -> list[int]:
    if value is None:
        return [default] * n
    if isinstance(value, (int, np.integer)):
        return [int(value)] * n
    return [int(v) for v in value]


def _values(t: TensorInfo | None) -> list[float] | None:
    if t is None or t.value is None:
        return None
    return [float(v) for v in np.asarray(t.value).reshape(-1)]


def _x(layer: Layer) -> TensorInfo | None:
    acts = layer.activation_inputs
    return acts[0] if acts else None


def _fmt(vals: list[int]) -> str:
    return "x".join(str(v) for v in vals)


def _need_4d(layer: Layer, what: str) -> str | None:
    """Activation/Scale/ElementWise/... are "2D only" (two spatial dims): N,C,H,W tensors.
    Higher ranks pass: the guide counts every dim before CHW as batch (NPQRS -> N*P, G1)."""
    for t in list(layer.activation_inputs) + list(layer.outputs):
        if len(t.shape) < 4:
            return f"DLA {what} needs 4D (N,C,H,W) tensors (got {len(t.shape)}D)"
    return None


def _pads(layer: Layer, spatial: tuple[int, ...], kernel: list[int], strides: list[int],
          dilations: list[int]) -> list[int]:
    """ONNX pads as [begin_0, begin_1, end_0, end_1], with auto_pad resolved."""
    n = len(kernel)
    auto = str(layer.attrs.get("auto_pad", "NOTSET"))
    if auto in ("SAME_UPPER", "SAME_LOWER") and len(spatial) == n:
        begin, end = [], []
        for i in range(n):
            out = math.ceil(spatial[i] / strides[i])
            total = max(0, (out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - spatial[i])
            small = total // 2
            begin.append(small if auto == "SAME_UPPER" else total - small)
            end.append(total - begin[-1])
        return begin + end
    if auto == "VALID":
        return [0] * (2 * n)
    return _ints(layer.attrs.get("pads"), 2 * n, 0)


def _neighbours(layer: Layer, ctx: _Ctx) -> list[Layer]:
    if ctx.model is None:
        return []
    out = []
    for name in tuple(layer.producers) + tuple(layer.consumers):
        try:
            out.append(ctx.model.layer(name))
        except Exception:  # noqa: BLE001 - a model that cannot resolve a name has no neighbour rule
            continue
    return out


# ----------------------------------------------------------------------------- per-layer rules
# Each rule returns None (supported) or the reason it is not.


def _rule_conv(layer: Layer, ctx: _Ctx) -> str | None:
    # (H) kernel [1,32], stride [1,8], padding [0,31] and < kernel, dilation [1,32],
    # output maps [1,8192], groups <= 8192; (O) CBUF check. Groups in [1,4] only with the
    # kDLA_HWC4 input format, which placetune never selects, so it is not checked.
    x, w = _x(layer), (layer.inputs[1] if len(layer.inputs) > 1 else None)
    if w is None or not w.const:
        return "Conv weights are a runtime tensor (DLA needs build-time weights)"
    kernel = _ints(layer.attrs.get("kernel_shape"), 0, 1) or [int(d) for d in w.shape[2:]]
    if len(kernel) != 2:
        return f"DLA convolution is 2D only (got {len(kernel)}D)"
    strides = _ints(layer.attrs.get("strides"), 2, 1)
    dil = _ints(layer.attrs.get("dilations"), 2, 1)
    groups = int(layer.attrs.get("group", 1))
    spatial = tuple(x.shape[2:]) if x is not None else ()
    pads = _pads(layer, spatial, kernel, strides, dil)
    if any(k < 1 or k > 32 for k in kernel):
        return f"Conv kernel {_fmt(kernel)} > 32"
    if any(s < 1 or s > 8 for s in strides):
        return f"Conv stride {_fmt(strides)} outside [1, 8]"
    for i, p in enumerate(pads):
        if p < 0 or p > 31:
            return f"Conv padding {p} outside [0, 31]"
        if p >= kernel[i % 2]:
            return f"Conv padding {p} >= kernel {kernel[i % 2]}"
    if any(d < 1 or d > 32 for d in dil):
        return f"Conv dilation {_fmt(dil)} outside [1, 32]"
    if groups < 1 or groups > MAX_DIM:
        return f"Conv groups {groups} > {MAX_DIM}"
    c_out = int(w.shape[0])
    if c_out < 1 or c_out > MAX_DIM:
        return f"Conv output maps {c_out} > {MAX_DIM}"
    if x is not None and len(x.shape) == 4:
        banks = cbuf_banks(int(x.shape[1]), kernel[0], kernel[1], int(x.shape[3]), dil[0], ctx.int8)
        if banks > 16:
            # TensorRT validates this heuristically since 8.6.0 (DLA-SW FAQ); on 8.5 the build
            # fails instead, so "not on DLA" is the right prediction either way.
            return (f"Conv needs {banks} convolution-buffer banks > 16 (C_in {x.shape[1]}, kernel "
                    f"{_fmt(kernel)}, input width {x.shape[3]}, {ctx.precision})")
    return None


def _rule_fc(layer: Layer, ctx: _Ctx) -> str | None:
    # DLA-SW: Gemm/MatMul native only with a constant second input ("TensorRT can translate this
    # to a 1x1 Conv"), then the Convolution limits apply: output maps <= 8192 (input features
    # are a non-batch dim, <= 8192 by G2).
    b = _fc_weight(layer)
    if b is None:
        return f"{layer.op_type} with two runtime inputs (MatrixMultiply) has no DLA support"
    trans_b = layer.op_type == "Gemm" and int(layer.attrs.get("transB", 0)) == 1
    n_out = int(b.shape[0] if trans_b else b.shape[1])
    if n_out < 1 or n_out > MAX_DIM:
        return f"FullyConnected output maps {n_out} > {MAX_DIM}"
    return None


def _rule_deconv(layer: Layer, ctx: _Ctx) -> str | None:
    # (H, S) 2D; kernel and stride each in [1,32] or 1x{64,96,128} / {64,96,128}x1; padding 0;
    # groups 1; no dilation; (O) in/out channels in [1,8192]; square kernels and strides in
    # [23,32] disabled ("they significantly slow down compilation").
    w = layer.inputs[1] if len(layer.inputs) > 1 else None
    if w is None or not w.const:
        return "ConvTranspose weights are a runtime tensor (DLA needs build-time weights)"
    kernel = _ints(layer.attrs.get("kernel_shape"), 0, 1) or [int(d) for d in w.shape[2:]]
    if len(kernel) != 2:
        return f"DLA deconvolution is 2D only (got {len(kernel)}D)"
    strides = _ints(layer.attrs.get("strides"), 2, 1)
    dil = _ints(layer.attrs.get("dilations"), 2, 1)
    groups = int(layer.attrs.get("group", 1))

    def ok_pair(v: list[int]) -> bool:
        if all(1 <= d <= 32 for d in v):
            return True
        return (v[0] == 1 and v[1] in (64, 96, 128)) or (v[1] == 1 and v[0] in (64, 96, 128))

    if not ok_pair(kernel):
        return f"Deconvolution kernel {_fmt(kernel)} not in [1, 32] (or 1x64/96/128)"
    if not ok_pair(strides):
        return f"Deconvolution stride {_fmt(strides)} not in [1, 32] (or 1x64/96/128)"
    if kernel[0] == kernel[1] and 23 <= kernel[0] <= 32:
        return f"Deconvolution square kernel {_fmt(kernel)} in [23, 32] is disabled on DLA"
    if strides[0] == strides[1] and 23 <= strides[0] <= 32:
        return f"Deconvolution square stride {_fmt(strides)} in [23, 32] is disabled on DLA"
    x = _x(layer)
    pads = _pads(layer, tuple(x.shape[2:]) if x is not None else (), kernel, strides, dil)
    if any(p != 0 for p in pads):
        return f"Deconvolution padding {max(pads)} != 0"
    if any(p != 0 for p in _ints(layer.attrs.get("output_padding"), 2, 0)):
        return "Deconvolution output_padding != 0 (DLA deconvolution padding must be 0)"
    if groups != 1:
        return f"Deconvolution groups {groups} != 1"
    if any(d != 1 for d in dil):
        return f"Deconvolution dilation {_fmt(dil)} != 1"
    c_in, c_out = int(w.shape[0]), int(w.shape[1]) * groups
    for what, c in (("input", c_in), ("output", c_out)):
        if c < 1 or c > MAX_DIM:
            return f"Deconvolution {what} channels {c} > {MAX_DIM}"
    return None


def _rule_pool(layer: Layer, ctx: _Ctx) -> str | None:
    # (H) kMAX / kAVERAGE, 2D, window [1,8], stride [1,16], padding [0,7]. INT8 needs equal
    # input/output dynamic ranges: a calibration property placetune cannot see.
    kernel = _ints(layer.attrs.get("kernel_shape"), 0, 1)
    if len(kernel) != 2:
        return f"DLA pooling is 2D only (got {len(kernel)}D)"
    strides = _ints(layer.attrs.get("strides"), 2, 1)
    dil = _ints(layer.attrs.get("dilations"), 2, 1)
    x = _x(layer)
    pads = _pads(layer, tuple(x.shape[2:]) if x is not None else (), kernel, strides, dil)
    if any(k < 1 or k > 8 for k in kernel):
        return f"pooling window {_fmt(kernel)} > 8"
    if any(s < 1 or s > 16 for s in strides):
        return f"pooling stride {_fmt(strides)} outside [1, 16]"
    if any(p < 0 or p > 7 for p in pads):
        return f"pooling padding {max(pads)} outside [0, 7]"
    if any(d != 1 for d in dil):
        return f"dilated pooling ({_fmt(dil)}) has no DLA support"
    if len(layer.outputs) > 1:
        return "MaxPool with an indices output has no DLA support"
    return _need_4d(layer, "Pooling")


def _rule_reduce(layer: Layer, ctx: _Ctx) -> str | None:
    op = layer.op_type
    if op == "GlobalMaxPool":
        if ctx.drive_ops:
            return _need_4d(layer, "Reduce")
        return (f"GlobalMaxPool (a Reduce layer) runs on DLA only from TensorRT 8.6.12 (DRIVE OS); "
                f"not in TensorRT {ctx.trt_text}")
    if op == "GlobalAveragePool":
        return ("GlobalAveragePool becomes a TensorRT Reduce layer, which has no DLA support "
                "(ran on GPU in the jetson_dla_tutorial log); an AveragePool with window <= 8 is DLA-eligible")
    return f"{op} (Reduce) has no DLA support through TensorRT (DLA-SW: rebuild as pooling/conv)"


def _rule_activation(layer: Layer, ctx: _Ctx) -> str | None:
    # (S) ReLU, Sigmoid, TanH, Clipped ReLU, Leaky ReLU; 2D only. (O) Clipped ReLU only for
    # values in [1, 127]. TanH/Sigmoid INT8 are promoted to FP16 by TensorRT (still on DLA).
    op = layer.op_type
    if op not in _DLA_ACTIVATIONS:
        extra = " (becomes HardSigmoid activation x input)" if op == "HardSwish" else ""
        return f"{op} activation not supported on DLA{extra} (ReLU, Sigmoid, TanH, Clipped ReLU, LeakyReLU only)"
    if op == "Clip":
        reason = _clip_bounds(layer)
        if reason:
            return reason
    return _need_4d(layer, "Activation")


def _clip_bounds(layer: Layer) -> str | None:
    # DLA runs Clip as "Clipped ReLU": lower bound 0 (inferred from the name), upper in [1, 127] (O).
    lo: float | None
    hi: float | None
    consts = layer.inputs[1:]
    if consts:
        if len(consts) != 2:
            # The importer drops empty optional inputs, so one bound is ambiguous; either way
            # the other bound is +-inf, which is not a clipped ReLU.
            return "Clip with one bound is not a clipped ReLU (needs min 0 and max in [1, 127])"
        if not all(t.const for t in consts):
            return "Clip bounds must be build-time constants"
        lv, hv = _values(consts[0]), _values(consts[1])
        if not lv or not hv:
            return "Clip bounds are not known at import (need min 0 and max in [1, 127])"
        lo, hi = lv[0], hv[0]
    else:
        lo = float(layer.attrs.get("min", -math.inf))
        hi = float(layer.attrs.get("max", math.inf))
    if lo != 0.0:
        return f"Clip min {lo:g} != 0 (DLA runs Clip as clipped ReLU)"
    if not 1.0 <= hi <= 127.0:
        return f"Clip max {hi:g} outside [1, 127]"
    return None


def _rule_elementwise(layer: Layer, ctx: _Ctx) -> str | None:
    # (S) Sum, Sub, Product, Max, Min, Div, Pow; header: only kSUM, kPROD, kMAX, kMIN, kSUB, so
    # Div/Pow are the DRIVE-only additions "as of TensorRT 8.6.12". Sub on Xavier runs as
    # Scale + Sum (O): still DLA. Min: DLA-SW's matrix lists it as RFE, the TRT header allows
    # it; the header wins here. INT8 needs equal input dynamic ranges (not checkable);
    # broadcasting between two runtime inputs is not checked (no published rule).
    op = layer.op_type
    if op in ("Div", "Pow"):
        if not ctx.drive_ops:
            return f"{op} on DLA needs TensorRT >= 8.6.12 (DRIVE OS); not in TensorRT {ctx.trt_text}"
    elif op not in _DLA_ELEMENTWISE:
        return f"ElementWise {op} not supported on DLA (Sum, Sub, Prod, Max, Min only)"
    return _need_4d(layer, "ElementWise")


def _rule_comparison(layer: Layer, ctx: _Ctx) -> str | None:
    # (S) Equal/Greater/Less: INT8 only, output must be cast to FP16/INT8 immediately;
    # Greater/Less only "as of TensorRT 8.6.12" (DLA-SW).
    op = layer.op_type
    if op in ("GreaterOrEqual", "LessOrEqual"):
        return f"{op} needs an Or ElementWise, which has no DLA support"
    if op in ("Greater", "Less") and not ctx.drive_ops:
        return f"{op} on DLA needs TensorRT >= 8.6.12 (DRIVE OS); not in TensorRT {ctx.trt_text}"
    if not ctx.int8:
        return f"comparison {op} runs INT8 only on DLA (got {ctx.precision})"
    if ctx.model is not None:
        for name in layer.consumers:
            nxt = _safe_layer(ctx, name)
            if nxt is not None and nxt.op_type != "Cast":
                return f"{op} output must be cast to FP16/INT8 immediately (next layer {name} is {nxt.op_type})"
    return _need_4d(layer, "comparison")


def _safe_layer(ctx: _Ctx, name: str) -> Layer | None:
    try:
        return ctx.model.layer(name) if ctx.model is not None else None
    except Exception:  # noqa: BLE001
        return None


def _rule_unary(layer: Layer, ctx: _Ctx) -> str | None:
    # (H) only kABS; DLA-SW: Sin, Cos, Atanh "as of TensorRT 8.6.12" (DRIVE OS).
    op = layer.op_type
    if op in _DRIVE_UNARY and ctx.drive_ops:
        return _need_4d(layer, "Unary")
    if op != "Abs":
        return f"Unary {op} not supported on DLA (Abs only)"
    return _need_4d(layer, "Unary")


def _rule_scale(layer: Layer, ctx: _Ctx) -> str | None:
    # BatchNormalization -> Scale (per-channel scale and shift): 2D only (O).
    if not all(t.const for t in layer.inputs[1:]):
        return "BatchNormalization parameters must be build-time constants"
    return _need_4d(layer, "Scale")


def _rule_lrn(layer: Layer, ctx: _Ctx) -> str | None:
    # (S, H) window in {3,5,7,9}, ACROSS_CHANNELS (ONNX LRN always is); INT8 promoted to FP16.
    size = int(layer.attrs.get("size", 0))
    if size not in (3, 5, 7, 9):
        return f"LRN window {size} not in {{3, 5, 7, 9}}"
    return _need_4d(layer, "LRN")


def _rule_prelu(layer: Layer, ctx: _Ctx) -> str | None:
    # (H, S) slopes must be a build-time constant.
    if len(layer.inputs) < 2 or not layer.inputs[1].const:
        return "PRelu slopes must be a build-time constant"
    return _need_4d(layer, "ParametricReLU")


def _rule_concat(layer: Layer, ctx: _Ctx) -> str | None:
    # (S, H) channel axis only (third-to-last); >= 2 inputs; same spatial dims. INT8: equal
    # dynamic ranges of all inputs and the output (calibration property, not checkable).
    if len(layer.inputs) < 2:
        return "Concat needs at least 2 inputs on DLA"
    rank = len(layer.outputs[0].shape) if layer.outputs else 0
    axis = int(layer.attrs.get("axis", 1))
    if axis < 0:
        axis += rank
    if rank < 3 or axis != rank - 3:
        return f"Concat on axis {axis} (DLA concatenates on the channel axis only)"
    spatial = {tuple(t.shape[-2:]) for t in layer.inputs}
    if len(spatial) > 1:
        return "Concat inputs differ in spatial dims"
    return _need_4d(layer, "Concatenation")


def _rule_slice(layer: Layer, ctx: _Ctx) -> str | None:
    # (H) start/size/stride build-time constants; all strides 1; no slicing on the first
    # (batch) dim; 4D input; ONNX Slice/Split map to kDEFAULT (kWRAP/kFILL, DLA after 8.5, are
    # not produced by them). Older TensorRT 8.x guide (seed 002 §3.2.12): FP16 only.
    x = _x(layer)
    if x is None or len(x.shape) != 4:
        return f"DLA Slice needs a 4D input (got {len(x.shape) if x else 0}D)"
    if ctx.int8:
        return "Slice runs FP16 only on DLA (TensorRT 8.x DLA guide; got int8)"
    if layer.op_type == "Split":
        if any(not t.const for t in layer.inputs[1:]):
            return "Split sizes must be build-time constants"
        axis = int(layer.attrs.get("axis", 0)) % 4
        if axis == 0:
            return "Split on the batch axis has no DLA support"
    else:
        params = layer.inputs[1:]
        if any(not t.const for t in params):
            return "Slice parameters must be build-time constants"
        steps = _values(params[3]) if len(params) >= 4 else None
        if steps and any(s != 1 for s in steps):
            return f"Slice step {int(next(s for s in steps if s != 1))} != 1 (DLA strides must be 1)"
        if layer.outputs and layer.outputs[0].shape[:1] != x.shape[:1]:
            return "Slice on the batch axis has no DLA support"
    return None


def _rule_softmax(layer: Layer, ctx: _Ctx) -> str | None:
    # Orin only ("On Xavier, this layer is not supported on DLA", 8.5 header); axis C or
    # spatial; all non-axis non-batch dims 1 and axis <= 8192, or axis <= 1024 (H); FP16 only
    # (TensorRT 8.x DLA guide, seed 002 §3.2.13). Default axis -1 (opset >= 13; torch writes it).
    if ctx.platform.dla_version == 1:
        return "Softmax not supported on Xavier DLA"
    if ctx.int8:
        return "Softmax runs FP16 only on DLA (got int8)"
    x = _x(layer)
    if x is None or not x.shape:
        return "Softmax input shape unknown"
    rank = len(x.shape)
    if rank > 4:
        return f"DLA Softmax needs at most 4D tensors (got {rank}D)"
    axis = int(layer.attrs.get("axis", -1))
    if axis < 0:
        axis += rank
    if axis == 0:
        return "Softmax over the batch axis has no DLA support"
    n = int(x.shape[axis])
    others = [int(d) for i, d in enumerate(x.shape) if i not in (0, axis)]
    if all(d == 1 for d in others):
        if n > MAX_DIM:
            return f"Softmax axis size {n} > {MAX_DIM}"
    elif n > 1024:
        return f"Softmax axis size {n} > 1024 (other non-batch dims > 1)"
    return None


def _resize_scales(layer: Layer) -> tuple[list[float] | None, bool]:
    """(scales, given_by_sizes). Empty optional inputs are dropped by the importer, so find
    ``scales`` (float, one per dim) and ``sizes`` (integer) by content, not position."""
    x = _x(layer)
    rank = len(x.shape) if x is not None else 0
    for t in layer.inputs[1:]:
        if t.const and t.size == rank and rank and np.dtype(t.dtype).kind in "iu":
            return None, True
    for t in layer.inputs[1:]:
        if t.const and t.size == rank and rank and np.dtype(t.dtype).kind == "f":
            return _values(t), False
    if layer.op_type == "Upsample" and "scales" in layer.attrs:
        return [float(v) for v in layer.attrs["scales"]], False
    return None, False


def _rule_resize(layer: Layer, ctx: _Ctx) -> str | None:
    # (H) exactly 4 scales, scales[0:2] == 1, H/W integer in [1,32] nearest / [1,4] linear;
    # setOutputDimensions (ONNX `sizes`) not supported; NEAREST combos (ASYMMETRIC, FORMULA,
    # FLOOR), (HALF_PIXEL, FORMULA, HALF_DOWN), (HALF_PIXEL, FORMULA, HALF_UP); LINEAR
    # (HALF_PIXEL, FORMULA) or (HALF_PIXEL, UPPER). onnx-tensorrt maps ONNX half_pixel ->
    # HALF_PIXEL + FORMULA, pytorch_half_pixel -> HALF_PIXEL + UPPER, round_prefer_floor ->
    # HALF_DOWN, round_prefer_ceil -> HALF_UP. ONNX Upsample has asymmetric/floor semantics.
    x, y = _x(layer), (layer.outputs[0] if layer.outputs else None)
    if x is None or y is None or len(x.shape) != 4 or len(y.shape) != 4:
        return f"DLA Resize needs exactly 4 scales (4D tensors, got {len(x.shape) if x else 0}D)"
    mode = str(layer.attrs.get("mode", "nearest")).lower()
    if mode not in ("nearest", "linear", "bilinear"):
        return f"Resize mode {mode} not supported on DLA (nearest or linear only)"
    linear = mode != "nearest"
    if int(layer.attrs.get("antialias", 0)):
        return "antialiased Resize has no DLA support"
    scales, by_sizes = _resize_scales(layer)
    if by_sizes:
        return "Resize given by output sizes (setOutputDimensions) is not supported on DLA"
    if scales is None:
        scales = [b / a for a, b in zip(x.shape, y.shape)]
    if scales[0] != 1 or scales[1] != 1:
        return f"Resize scales {scales[0]:g}, {scales[1]:g} on N, C must be 1"
    top = 4 if linear else 32
    for s in scales[2:]:
        if s != int(s) or not 1 <= s <= top:
            return f"Resize scale {s:g} not an integer in [1, {top}] ({'linear' if linear else 'nearest'})"
    if layer.op_type == "Upsample":
        ctm, nearest = "asymmetric", "floor"
    else:
        ctm = str(layer.attrs.get("coordinate_transformation_mode", "half_pixel"))
        nearest = str(layer.attrs.get("nearest_mode", "round_prefer_floor"))
    if linear:
        if ctm not in ("half_pixel", "pytorch_half_pixel"):
            return f"linear Resize with coordinate_transformation_mode {ctm} not supported on DLA (half_pixel only)"
    elif (ctm, nearest) not in (("asymmetric", "floor"), ("half_pixel", "round_prefer_floor"),
                                ("half_pixel", "round_prefer_ceil")):
        return f"nearest Resize with ({ctm}, {nearest}) not supported on DLA"
    return None


def _reshape_neighbour(layer: Layer, ctx: _Ctx) -> str | None:
    """TRT 10.x log: "This version of DLA does not support reshape layers directly connected
    to Slice or Concat" (ultralytics #18012): the reshape goes to the GPU. Needs the model."""
    if ctx.trt < (10, 0, 0):
        return None
    for nb in _neighbours(layer, ctx):
        if nb.op_type in ("Slice", "Split", "Concat"):
            return (f"TensorRT 10 DLA does not support reshape layers directly connected to "
                    f"Slice or Concat ({nb.op_type} {nb.name})")
    return None


def _is_fc_flatten(layer: Layer, ctx: _Ctx) -> bool:
    """(N,C,1,1) -> (N,C) feeding only FullyConnected layers: TensorRT drops it. In the
    jetson_dla_tutorial BatchNorm log the view before Gemm_15 appears neither on DLA nor GPU."""
    x, y = _x(layer), (layer.outputs[0] if layer.outputs else None)
    if ctx.model is None or x is None or y is None or not layer.consumers:
        return False
    if len(x.shape) != 4 or tuple(x.shape[2:]) != (1, 1) or tuple(y.shape) != tuple(x.shape[:2]):
        return False
    for name in layer.consumers:
        nxt = _safe_layer(ctx, name)
        if nxt is None or nxt.op_type not in ("Gemm", "MatMul") or _fc_weight(nxt) is None:
            return False
    return True


def _rule_shuffle(layer: Layer, ctx: _Ctx) -> str | None:
    # DLA-SW: Reshape/Transpose "Native, see Shuffle layer" (details UNVERIFIED); Flatten,
    # Squeeze, Unsqueeze are "See RFE" (not through TensorRT). placetune rule, INFERRED from the
    # seed 002 log (GroupNorm's Reshape to (N, G, -1) and back ran on GPU next to the
    # InstanceNormalization plugin): a Shuffle runs on DLA only with 4D input and 4D output.
    op = layer.op_type
    if op == "Reshape" and len(layer.inputs) > 1 and not layer.inputs[1].const:
        return "Reshape target shape is a runtime tensor"
    x, y = _x(layer), (layer.outputs[0] if layer.outputs else None)
    rin, rout = (len(x.shape) if x else 0), (len(y.shape) if y else 0)
    if (rin, rout) != (4, 4):
        if _is_fc_flatten(layer, ctx):
            return None
        return f"DLA Shuffle needs 4D tensors (got {rin}D -> {rout}D)"
    if op == "Transpose":
        perm = _ints(layer.attrs.get("perm"), 0, 0) or [3, 2, 1, 0]
        if perm[0] != 0:
            return "Transpose moves the batch axis (no DLA support assumed)"
        return None
    return _reshape_neighbour(layer, ctx)


_NO_DLA = {
    "InstanceNormalization": "InstanceNormalization has no DLA implementation (TensorRT runs it as a GPU "
                             "plugin / normalization layer)",
    "LayerNormalization": "LayerNormalization has no DLA implementation through TensorRT",
    "GroupNormalization": "GroupNormalization has no DLA implementation through TensorRT",
    "Gather": "Gather has no DLA support (TensorRT header; DLA-SW gives a reconstruction)",
    "GatherElements": "GatherElements has no DLA support",
    "GatherND": "GatherND has no DLA support",
    "TopK": "TopK has no DLA support",
    "NonMaxSuppression": "NonMaxSuppression has no DLA support",
    "Where": "Where (Select) has no DLA support (DLA-SW gives a reconstruction)",
    "Loop": "Loop has no DLA support", "If": "If has no DLA support", "Scan": "Scan has no DLA support",
    "LSTM": "LSTM has no DLA support", "GRU": "GRU has no DLA support", "RNN": "RNN has no DLA support",
    "Einsum": "Einsum has no DLA support",
    "Pad": "Pad (Padding/Slice fill) has no DLA rule through TensorRT; fold it into the next Conv's pads",
    "Cast": "Cast has no DLA support",
    "QuantizeLinear": "Q/DQ nodes have no DLA support; collapse them into INT8 scales (DLA-SW qdq-translator)",
    "DequantizeLinear": "Q/DQ nodes have no DLA support; collapse them into INT8 scales (DLA-SW qdq-translator)",
}


_RULES: dict[str, Callable[[Layer, _Ctx], str | None]] = {
    "Conv": _rule_conv, "ConvTranspose": _rule_deconv, "Gemm": _rule_fc, "MatMul": _rule_fc,
    "MaxPool": _rule_pool, "AveragePool": _rule_pool, "BatchNormalization": _rule_scale,
    "LRN": _rule_lrn, "PRelu": _rule_prelu, "Concat": _rule_concat, "Slice": _rule_slice,
    "Split": _rule_slice, "Softmax": _rule_softmax, "Resize": _rule_resize, "Upsample": _rule_resize,
    **{op: _rule_activation for op in _ACTIVATIONS},
    **{op: _rule_elementwise for op in _ELEMENTWISE},
    **{op: _rule_comparison for op in _COMPARISONS},
    **{op: _rule_unary for op in _UNARY},
    **{op: _rule_shuffle for op in _SHUFFLES},
    **{op: _rule_reduce for op in _REDUCES},
}


# ----------------------------------------------------------------------------- general rules


def _dynamic(layer: Layer) -> str | None:
    """G3: no dynamic dimensions (a dim <= 0 on any activation tensor)."""
    for t in list(layer.activation_inputs) + list(layer.outputs):
        if any(int(d) <= 0 for d in t.shape):
            return f"dynamic shape ({t.name} {tuple(int(d) for d in t.shape)})"
    return None


def _limits(layer: Layer) -> str | None:
    """G1 batch <= 4096 and G2 non-batch dims <= 8192 on every activation tensor. Batch = product
    of the dims before CHW for rank >= 4 (guide: NPQRS -> N*P); the leading dim for rank 2-3
    (placetune's convention)."""
    for t in list(layer.activation_inputs) + list(layer.outputs):
        shape = [int(d) for d in t.shape]
        if not shape:
            continue
        batch_dims, rest = (shape[:-3], shape[-3:]) if len(shape) >= 4 else (shape[:1], shape[1:])
        batch = math.prod(batch_dims) if batch_dims else 1
        if batch > MAX_BATCH:
            return f"batch {batch} > {MAX_BATCH}"
        for d in rest:
            if d > MAX_DIM:
                return f"dimension {d} > {MAX_DIM}"
    return None


def _normalise_precision(precision: str) -> str:
    key = str(precision).strip().lower()
    if key not in _PRECISION_ALIASES:
        raise ConfigError(
            f"unknown precision {precision!r}; use one of {', '.join(SUPPORTED_PRECISIONS)} "
            "(the DLA runs only these)"
        )
    return _PRECISION_ALIASES[key]


def _trt_has_dla(trt: tuple[int, int, int]) -> str | None:
    # 0.3: "TensorRT 10.7 was the last 10.x release that supported DLA"; none in 11.0-11.3;
    # 11.4.0 Windows-on-ARM only; 11.4.1 restores it on Jetson AGX Orin (JetPack 7.2.2+).
    text = ".".join(str(x) for x in trt)
    if (10, 8, 0) <= trt < (11, 0, 0):
        return f"TensorRT {text} has no DLA support (10.7 was the last 10.x with DLA)"
    if (11, 0, 0) <= trt < (11, 4, 1):
        return f"TensorRT {text} has no DLA support on Jetson (restored in 11.4.1)"
    return None


def _make_ctx(platform: Platform | str, precision: str, trt_version: str,
              model: _ModelLike | None) -> tuple[_Ctx, str | None]:
    plat = get_platform(platform)
    prec = _normalise_precision(precision)
    trt = parse_trt_version(trt_version)
    ctx = _Ctx(plat, prec, trt, model)
    if plat.dla_count == 0:
        return ctx, f"{plat.name} has no DLA"
    reason = _trt_has_dla(trt)
    if reason:
        return ctx, reason
    if prec not in SUPPORTED_PRECISIONS:
        return ctx, f"DLA runs FP16 or INT8 only (got {prec})"
    return ctx, None


def _check(layer: Layer, ctx: _Ctx) -> Support:
    # Order: G3 first (nothing else means much on dynamic shapes), then the layer's own rule
    # (its message is the most specific), then G1/G2.
    reason = _dynamic(layer)
    if reason:
        return Support(False, reason)
    op = layer.op_type
    if layer.domain not in ("", "ai.onnx"):
        return Support(False, f"{layer.domain}.{op} is a custom op (TensorRT plugin, GPU only)")
    if op == "InstanceNormalization" and ctx.model is not None:
        producers = [_safe_layer(ctx, p) for p in layer.producers]
        if any(p is not None and p.op_type == "Reshape" for p in producers):
            return Support(False, "GroupNorm piece InstanceNormalization has no DLA implementation")
    if op in _NO_DLA:
        return Support(False, _NO_DLA[op])
    rule = _RULES.get(op)
    if rule is None:
        return Support(False, f"{op} has no DLA rule in placetune (treated as GPU-only)")
    reason = rule(layer, ctx) or _limits(layer)
    return _OK if reason is None else Support(False, reason)


# ----------------------------------------------------------------------------- public API


def check_layer(
    layer: Layer,
    platform: Platform | str,
    precision: str = "fp16",
    trt_version: str = "8.6",
    model: _ModelLike | None = None,
) -> Support:
    """Whether ``layer`` can run on a DLA core of ``platform``.

    Args:
        layer: an imported layer (static shapes; constants folded).
        platform: a :class:`~placetune.hardware.platforms.Platform` or its name/alias.
        precision: builder precision: ``"fp16"`` or ``"int8"`` (an INT8-only build, as
            ``trtexec --int8``); ``"fp32"``, ``"tf32"``, ``"bf16"``... are valid names that make
            every layer GPU-only.
        trt_version: TensorRT version, e.g. ``"8.5"``, ``"8.6.2"``, ``"10.3"``.
        model: optional; anything with ``layer(name)``. Enables rules that look at neighbours
            (TRT 10 reshape next to Slice/Concat, comparison -> Cast, GroupNorm reshapes,
            flatten before a FullyConnected).

    Returns:
        :class:`Support`; ``reason`` says which rule failed.

    Raises:
        UnknownNameError: unknown platform.
        ConfigError: unknown precision name or unparsable TensorRT version.

    Example:
        >>> check_layer(model.layer("/cnn/cnn.0/Conv"), "orin-agx", "int8")   # doctest: +SKIP
        Support(supported=True, reason=None)
    """
    ctx, reason = _make_ctx(platform, precision, trt_version, model)
    if reason:
        return Support(False, reason)
    return _check(layer, ctx)


def check_model(
    model: _ModelLike,
    platform: Platform | str,
    precision: str = "fp16",
    trt_version: str = "8.6",
) -> dict[str, Support]:
    """:func:`check_layer` for every layer of ``model`` (with neighbour rules on).

    Returns:
        layer name -> :class:`Support`, in the model's layer order.
    """
    ctx, reason = _make_ctx(platform, precision, trt_version, model)
    if reason:
        no = Support(False, reason)
        return {layer.name: no for layer in model.layers}
    return {layer.name: _check(layer, ctx) for layer in model.layers}
