"""DLA rules of the per-element and per-channel layers: activations, ElementWise, Unary, Scale, PRelu, LRN, Softmax.

Each ``rule_*`` takes a layer and the :class:`~placetune.hardware.dla.context.RuleContext` and returns None
when a DLA core can run the layer, else the reason; :mod:`placetune.hardware.dla.check` maps ONNX ops to them.
"""

from __future__ import annotations

import math

from placetune.hardware.dla.context import MAX_DIM, RuleContext, const_values, data_input, need_4d, safe_layer
from placetune.hardware.dla.trt_types import DLA_ACTIVATIONS, DLA_ELEMENTWISE, DRIVE_UNARY
from placetune.model.layer import Layer


def rule_activation(layer: Layer, ctx: RuleContext) -> str | None:
    # (S) ReLU, Sigmoid, TanH, Clipped ReLU, Leaky ReLU; 2D only. (O) Clipped ReLU only for
    # values in [1, 127]. TanH/Sigmoid INT8 are promoted to FP16 by TensorRT (still on DLA).
    op = layer.op_type
    if op not in DLA_ACTIVATIONS:
        extra = " (becomes HardSigmoid activation x input)" if op == "HardSwish" else ""
        return f"{op} activation not supported on DLA{extra} (ReLU, Sigmoid, TanH, Clipped ReLU, LeakyReLU only)"
    if op == "Clip":
        reason = _clip_bounds(layer)
        if reason:
            return reason
    return need_4d(layer, "Activation")


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
        lv, hv = const_values(consts[0]), const_values(consts[1])
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


def rule_elementwise(layer: Layer, ctx: RuleContext) -> str | None:
    # (S) Sum, Sub, Product, Max, Min, Div, Pow; header: only kSUM, kPROD, kMAX, kMIN, kSUB, so
    # Div/Pow are the DRIVE-only additions "as of TensorRT 8.6.12". Sub on Xavier runs as
    # Scale + Sum (O): still DLA. Min: DLA-SW's matrix lists it as RFE, the TRT header allows
    # it; the header wins here. INT8 needs equal input dynamic ranges (not checkable);
    # broadcasting between two runtime inputs is not checked (no published rule).
    op = layer.op_type
    if op in ("Div", "Pow"):
        if not ctx.drive_ops:
            return f"{op} on DLA needs TensorRT >= 8.6.12 (DRIVE OS); not in TensorRT {ctx.trt_text}"
    elif op not in DLA_ELEMENTWISE:
        return f"ElementWise {op} not supported on DLA (Sum, Sub, Prod, Max, Min only)"
    return need_4d(layer, "ElementWise")


def rule_comparison(layer: Layer, ctx: RuleContext) -> str | None:
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
            nxt = safe_layer(ctx, name)
            if nxt is not None and nxt.op_type != "Cast":
                return f"{op} output must be cast to FP16/INT8 immediately (next layer {name} is {nxt.op_type})"
    return need_4d(layer, "comparison")


def rule_unary(layer: Layer, ctx: RuleContext) -> str | None:
    # (H) only kABS; DLA-SW: Sin, Cos, Atanh "as of TensorRT 8.6.12" (DRIVE OS).
    op = layer.op_type
    if op in DRIVE_UNARY and ctx.drive_ops:
        return need_4d(layer, "Unary")
    if op != "Abs":
        return f"Unary {op} not supported on DLA (Abs only)"
    return need_4d(layer, "Unary")


def rule_scale(layer: Layer, ctx: RuleContext) -> str | None:
    # BatchNormalization -> Scale (per-channel scale and shift): 2D only (O).
    if not all(t.const for t in layer.inputs[1:]):
        return "BatchNormalization parameters must be build-time constants"
    return need_4d(layer, "Scale")


def rule_lrn(layer: Layer, ctx: RuleContext) -> str | None:
    # (S, H) window in {3,5,7,9}, ACROSS_CHANNELS (ONNX LRN always is); INT8 promoted to FP16.
    size = int(layer.attrs.get("size", 0))
    if size not in (3, 5, 7, 9):
        return f"LRN window {size} not in {{3, 5, 7, 9}}"
    return need_4d(layer, "LRN")


def rule_prelu(layer: Layer, ctx: RuleContext) -> str | None:
    # (H, S) slopes must be a build-time constant.
    if len(layer.inputs) < 2 or not layer.inputs[1].const:
        return "PRelu slopes must be a build-time constant"
    return need_4d(layer, "ParametricReLU")


def rule_softmax(layer: Layer, ctx: RuleContext) -> str | None:
    # Orin only ("On Xavier, this layer is not supported on DLA", 8.5 header); axis C or
    # spatial; all non-axis non-batch dims 1 and axis <= 8192, or axis <= 1024 (H). FP16 only on the DLA
    # (TensorRT 8.x DLA guide), which an INT8 build of placetune's gives it: it sets FP16 too, and kINT8 is
    # "Int8 layer selection, with FP32 fallback with FP16 fallback if kFP16 also specified" (NvInfer.h 8.5-10.x;
    # check.FP16_FALLBACK). Default axis -1 (opset >= 13; torch writes it).
    if ctx.platform.dla_version == 1:
        return "Softmax not supported on Xavier DLA"
    x = data_input(layer)
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
