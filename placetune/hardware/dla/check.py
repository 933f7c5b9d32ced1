"""The DLA checker: the per-op rule table, the general rules G1-G3 and G7, check_layer / check_model."""

from __future__ import annotations

import math
from collections.abc import Callable

from placetune.errors import ConfigError
from placetune.hardware.dla.context import (
    MAX_BATCH,
    MAX_DIM,
    Support,
    RuleContext,
    ModelLike,
    safe_layer,
    const_values,
    parse_trt_version,
)
from placetune.hardware.dla.conv import rule_conv, rule_deconv, rule_fc, rule_pool, rule_reduce
from placetune.hardware.dla.pointwise import (
    rule_activation,
    rule_comparison,
    rule_elementwise,
    rule_lrn,
    rule_prelu,
    rule_scale,
    rule_softmax,
    rule_unary,
)
from placetune.hardware.dla.shuffle import rule_concat, rule_resize, rule_shuffle, rule_slice
from placetune.hardware.dla.trt_types import ACTIVATIONS, COMPARISONS, ELEMENTWISE, REDUCES, SHUFFLES, UNARY
from placetune.hardware.platforms import Platform, get_platform
from placetune.model.layer import Layer
from placetune.model.qdq import QDQ_OPS

#: Precisions the DLA runs (G7). Anything else makes every layer GPU-only.
SUPPORTED_PRECISIONS = ("fp16", "int8")

#: What ``"int8"`` means here: placetune's INT8 build, which enables FP16 as well (the worker sets
#: BuilderFlag.INT8 and FP16; the trtexec backend and build.sh pass ``--int8 --fp16``). BuilderFlag kINT8 is
#: "Enable Int8 layer selection, with FP32 fallback with FP16 fallback if kFP16 also specified"
#: (TRT@release/8.5, 8.6, 10.3 include/NvInfer.h), so a layer the DLA runs in FP16 only (Slice, Softmax: the
#: TensorRT 8.x DLA guide) gets FP16, a precision the DLA takes, and stays on it (NVIDIA's DLA-SW FAQ: "The
#: option of FP16 and INT8 hybrid precision in the same model"; layers without INT8 scales "are run in FP16").
#: An INT8-only build (trtexec ``--int8`` alone, which sets no FP16 with ``--useDLACore``: sampleEngines.cpp
#: ``if (!build.int8) config.setFlag(BuilderFlag::kFP16)``) would fall back to FP32 and move them to the GPU
#: ("DLA only supports FP16 and Int8 precision type"); placetune makes none. Published on TensorRT 10.3 (AGX Orin,
#: IntelligentSystemsLabUTV/yolo11_dla docs/BUILD.md): an ``--int8 --fp16`` DLA build without GPU fallback of a
#: YOLO11n variant with 9 Splits and a Softmax is one DLA loadable, "one softmax to FP16 — all of them on DLA".
#: 8.5/8.6: the header's rule, no published build (docs/jetson.md).
FP16_FALLBACK = ("Slice", "Softmax")

_PRECISION_ALIASES = {
    "fp16": "fp16", "float16": "fp16", "half": "fp16",
    "int8": "int8",
    "fp32": "fp32", "float32": "fp32", "float": "fp32",
    "tf32": "tf32", "bf16": "bf16", "bfloat16": "bf16", "fp8": "fp8", "int4": "int4",
}


_OK = Support(True, None)


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
    "Pad": "Pad (Padding/Slice fill) has no DLA rule through TensorRT",
    "Cast": "Cast has no DLA support",
}


# ----------------------------------------------------------------------------- explicit quantization (Q/DQ)

#: First TensorRT version whose DLA builds take their INT8 from the model's Q/DQ nodes: 11.4.1 (JetPack
#: 7.2.2+, AGX Orin). Its DLA networks are strongly typed ("Precision is determined by network tensor types
#: instead of the former per-precision builder flags", 11.4.1 release notes; kINT8 "removed in TensorRT 11.0",
#: 11.4.1 "Strongly Typed Networks for DLA"; "Tensor types in the network or a pre-quantized ONNX import drive
#: precision", "DLA Standalone Mode"), so TensorRT fuses the Q/DQ nodes into the DLA layers they scale.
QDQ_FUSED_FROM = (11, 4, 1)
_QDQ_FUSED = ("fused into the neighbouring DLA layers (explicit quantization: TensorRT {v} DLA networks are "
              "strongly typed, precision from the tensor types and Q/DQ nodes; TensorRT 11.4.1 release notes, "
              "'Strongly Typed Networks for DLA')")
_QDQ_ASYMMETRIC = ("asymmetric Q/DQ ({why}) needs the ONNX parser flag "
                   "kENABLE_UINT8_AND_ASYMMETRIC_QUANTIZATION_DLA ('ONNX Parser Flags for DLA'), which placetune's "
                   "builds do not set: without it the parser turns UINT8 constants into INT32")
# TensorRT 8.x: the developer guide's "Working with DLA" says the DLA "does not support Explicit Quantization"
# (NVIDIA's translation of it, https://developer.nvidia.com/zh-cn/blog/tensorrt-deep-learning-accelerator-cn);
# NVIDIA's DLA-SW (JetPack 6.0, TensorRT 8.6) lists Q/DQ as "Can be collapsed to INT8 scaling factor,
# switching from explicit to implicit quantization" (operators/README.md) with tools/qdq-translator for it, and
# cuDLA-samples builds its INT8 DLA loadable from the translated model and a calibration cache.
_QDQ_REFUSED_8 = ("Q/DQ nodes have no DLA support in TensorRT {v} (developer guide 'Working with DLA': DLA "
                  "\"does not support Explicit Quantization\"); collapse them into INT8 scales (DLA-SW qdq-translator)")
# TensorRT 10.0-10.7: no source found either way; kept as 8.x until can_run_on_DLA on a device says otherwise.
_QDQ_REFUSED_10 = ("Q/DQ nodes are treated as GPU-only in TensorRT {v}: no source says its DLA builds take "
                   "explicit quantization (TensorRT 8.x: DLA \"does not support Explicit Quantization\"; fused only "
                   "from 11.4.1); collapse them into INT8 scales (DLA-SW qdq-translator)")


def _asymmetric(layer: Layer) -> str | None:
    """Why a Q/DQ node quantizes asymmetrically (a UINT8 or non-zero zero point), or None."""
    if len(layer.inputs) < 3:
        return None
    zero = layer.inputs[2]
    if zero.dtype == "uint8":
        return "UINT8 zero point"
    vals = const_values(zero)
    if vals is not None and any(v != 0 for v in vals):
        return "non-zero zero point"
    return None


def rule_qdq(layer: Layer, ctx: RuleContext) -> Support:
    """A QuantizeLinear / DequantizeLinear node: fused (not a layer of its own) where the DLA takes explicit
    quantization; the layer it feeds is judged by its own rule."""
    if ctx.trt < QDQ_FUSED_FROM:
        template = _QDQ_REFUSED_10 if ctx.trt >= (10, 0, 0) else _QDQ_REFUSED_8
        return Support(False, template.format(v=ctx.trt_text))
    why = _asymmetric(layer)
    if why:
        return Support(False, _QDQ_ASYMMETRIC.format(why=why))
    return Support(True, _QDQ_FUSED.format(v=ctx.trt_text))


# Each rule returns None (supported) or the reason it is not.
_RULES: dict[str, Callable[[Layer, RuleContext], str | None]] = {
    "Conv": rule_conv, "ConvTranspose": rule_deconv, "Gemm": rule_fc, "MatMul": rule_fc,
    "MaxPool": rule_pool, "AveragePool": rule_pool, "BatchNormalization": rule_scale,
    "LRN": rule_lrn, "PRelu": rule_prelu, "Concat": rule_concat, "Slice": rule_slice,
    "Split": rule_slice, "Softmax": rule_softmax, "Resize": rule_resize, "Upsample": rule_resize,
    **{op: rule_activation for op in ACTIVATIONS},
    **{op: rule_elementwise for op in ELEMENTWISE},
    **{op: rule_comparison for op in COMPARISONS},
    **{op: rule_unary for op in UNARY},
    **{op: rule_shuffle for op in SHUFFLES},
    **{op: rule_reduce for op in REDUCES},
}


# ----------------------------------------------------------------------------- general rules


def _dynamic(layer: Layer) -> str | None:
    """G3: no dynamic dimensions (a dim <= 0 on any activation tensor, or a data-dependent size)."""
    for t in list(layer.activation_inputs) + list(layer.outputs):
        if any(int(d) <= 0 for d in t.shape):
            return f"dynamic shape ({t.name} {tuple(int(d) for d in t.shape)})"
        if t.data_dependent:  # after NonZero / NonMaxSuppression: the DLA runs static shapes only
            return f"data-dependent size (at most {'x'.join(map(str, t.shape))}): no DLA, static shapes only"
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
              model: ModelLike | None) -> tuple[RuleContext, str | None]:
    plat = get_platform(platform)
    prec = _normalise_precision(precision)
    trt = parse_trt_version(trt_version)
    ctx = RuleContext(plat, prec, trt, model)
    if plat.dla_count == 0:
        return ctx, f"{plat.name} has no DLA"
    reason = _trt_has_dla(trt)
    if reason:
        return ctx, reason
    if trt >= (11, 0, 0) and plat.dla_version == 1:  # JetPack 7 is for Orin (and Thor); Xavier's last is 5.1
        return ctx, (f"TensorRT {'.'.join(str(x) for x in trt)} restores the DLA on Jetson AGX Orin only; "
                     f"{plat.name}'s DLA v1 last ships with JetPack 5.1 (TensorRT 8.5)")
    if prec not in SUPPORTED_PRECISIONS:
        return ctx, f"DLA runs FP16 or INT8 only (got {prec})"
    return ctx, None


def _pad_reason(layer: Layer, ctx: RuleContext) -> str:
    """Why a Pad stays off the DLA, with the advice that fits the layer that really follows it: a Conv's
    own pads are zeros a zero Pad can become; a pooling's pads are not (ONNX MaxPool ignores padded cells)."""
    follows = [safe_layer(ctx, c) for c in layer.consumers]
    if len(follows) != 1 or follows[0] is None:
        return _NO_DLA["Pad"]
    nxt = follows[0]
    if nxt.op_type == "Conv":
        return f"{_NO_DLA['Pad']}; fold it into the next Conv's pads ('{nxt.name}')"
    return (f"{_NO_DLA['Pad']}; the layer after it is {nxt.op_type} '{nxt.name}', not a Conv whose zero pads "
            "it could become: it stays on the GPU")


def _check(layer: Layer, ctx: RuleContext) -> Support:
    # Order: G3 first (nothing else means much on dynamic shapes), then the layer's own rule
    # (its message is the most specific), then G1/G2.
    reason = _dynamic(layer)
    if reason:
        return Support(False, reason)
    op = layer.op_type
    if layer.plugin or layer.domain not in ("", "ai.onnx"):
        qualified = f"{layer.domain}.{op}" if layer.domain not in ("", "ai.onnx") else op
        return Support(False, f"plugin: no DLA ({qualified} is a custom op: TensorRT runs it as a plugin on the GPU)")
    if op == "InstanceNormalization" and ctx.model is not None:
        producers = [safe_layer(ctx, p) for p in layer.producers]
        if any(p is not None and p.op_type == "Reshape" for p in producers):
            return Support(False, "GroupNorm piece InstanceNormalization has no DLA implementation")
    if op in QDQ_OPS:
        return rule_qdq(layer, ctx)
    if op == "Pad":
        return Support(False, _pad_reason(layer, ctx))
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
    model: ModelLike | None = None,
) -> Support:
    """Whether ``layer`` can run on a DLA core of ``platform``.

    Args:
        layer: an imported layer (static shapes; constants folded).
        platform: a :class:`~placetune.hardware.platforms.Platform` or its name/alias.
        precision: builder precision: ``"fp16"`` or ``"int8"`` (placetune's INT8 build, FP16 enabled
            too, as ``trtexec --int8 --fp16``: the layers the DLA runs in FP16 only stay on it,
            :data:`FP16_FALLBACK`); ``"fp32"``, ``"tf32"``, ``"bf16"``... are valid names that make
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
    model: ModelLike,
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
