"""DLA rules of the data-movement layers: Concat, Slice/Split, Resize and the Shuffle family (Reshape, Transpose, ...).

Each ``rule_*`` takes a layer and the :class:`~placetune.hardware.dla.context.RuleContext` and returns None
when a DLA core can run the layer, else the reason; :mod:`placetune.hardware.dla.check` maps ONNX ops to them.
"""

from __future__ import annotations

import numpy as np

from placetune.hardware.dla.context import RuleContext, const_values, data_input, ints_of, need_4d, neighbours, safe_layer
from placetune.hardware.dla.trt_types import fc_weight
from placetune.model.layer import Layer


def rule_concat(layer: Layer, ctx: RuleContext) -> str | None:
    # (S, H) channel axis only (third-to-last); >= 2 inputs; same spatial dims. INT8: equal
    # dynamic ranges of all inputs and the output (calibration property, not checkable).
    if len(layer.inputs) < 2:
        return "Concat needs at least 2 inputs on DLA"
    rank = len(layer.outputs[0].shape) if layer.outputs else 0
    if rank < 4:  # the rank is the reason: "Concat on axis 1" of a [1, 4, 8400] read as refusing the channel axis
        return need_4d(layer, "Concatenation") or f"DLA Concatenation needs 4D (N,C,H,W) tensors (got {rank}D)"
    axis = int(layer.attrs.get("axis", 1))
    if axis < 0:
        axis += rank
    if rank < 3 or axis != rank - 3:
        return f"Concat on axis {axis} (DLA concatenates on the channel axis only)"
    spatial = {tuple(t.shape[-2:]) for t in layer.inputs}
    if len(spatial) > 1:
        return "Concat inputs differ in spatial dims"
    return need_4d(layer, "Concatenation")


def rule_slice(layer: Layer, ctx: RuleContext) -> str | None:
    # (H) start/size/stride build-time constants; all strides 1; no slicing on the first
    # (batch) dim; 4D input; ONNX Slice/Split map to kDEFAULT (kWRAP/kFILL, DLA after 8.5, are
    # not produced by them). Older TensorRT 8.x guide (seed 002 §3.2.12): FP16 only, which placetune's INT8
    # builds give it (they set FP16 too: FP16 fallback, check.FP16_FALLBACK).
    x = data_input(layer)
    if x is None or len(x.shape) != 4:
        return f"DLA Slice needs a 4D input (got {len(x.shape) if x else 0}D)"
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
        steps = const_values(params[3]) if len(params) >= 4 else None
        if steps and any(s != 1 for s in steps):
            return f"Slice step {int(next(s for s in steps if s != 1))} != 1 (DLA strides must be 1)"
        if layer.outputs and layer.outputs[0].shape[:1] != x.shape[:1]:
            return "Slice on the batch axis has no DLA support"
    return None


def _resize_scales(layer: Layer) -> tuple[list[float] | None, bool]:
    """(scales, given_by_sizes). Empty optional inputs are dropped by the importer, so find
    ``scales`` (float, one per dim) and ``sizes`` (integer) by content, not position."""
    x = data_input(layer)
    rank = len(x.shape) if x is not None else 0
    for t in layer.inputs[1:]:
        if t.const and t.size == rank and rank and np.dtype(t.dtype).kind in "iu":
            return None, True
    for t in layer.inputs[1:]:
        if t.const and t.size == rank and rank and np.dtype(t.dtype).kind == "f":
            return const_values(t), False
    if layer.op_type == "Upsample" and "scales" in layer.attrs:
        return [float(v) for v in layer.attrs["scales"]], False
    return None, False


def rule_resize(layer: Layer, ctx: RuleContext) -> str | None:
    # (H) exactly 4 scales, scales[0:2] == 1, H/W integer in [1,32] nearest / [1,4] linear;
    # setOutputDimensions (ONNX `sizes`) not supported; NEAREST combos (ASYMMETRIC, FORMULA,
    # FLOOR), (HALF_PIXEL, FORMULA, HALF_DOWN), (HALF_PIXEL, FORMULA, HALF_UP); LINEAR
    # (HALF_PIXEL, FORMULA) or (HALF_PIXEL, UPPER). onnx-tensorrt maps ONNX half_pixel ->
    # HALF_PIXEL + FORMULA, pytorch_half_pixel -> HALF_PIXEL + UPPER, round_prefer_floor ->
    # HALF_DOWN, round_prefer_ceil -> HALF_UP. ONNX Upsample has asymmetric/floor semantics.
    x, y = data_input(layer), (layer.outputs[0] if layer.outputs else None)
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


def _reshape_neighbour(layer: Layer, ctx: RuleContext) -> str | None:
    """TRT 10.x log: "This version of DLA does not support reshape layers directly connected
    to Slice or Concat" (ultralytics #18012): the reshape goes to the GPU. Needs the model."""
    if ctx.trt < (10, 0, 0):
        return None
    for nb in neighbours(layer, ctx):
        if nb.op_type in ("Slice", "Split", "Concat"):
            return (f"TensorRT 10 DLA does not support reshape layers directly connected to "
                    f"Slice or Concat ({nb.op_type} {nb.name})")
    return None


def _is_fc_flatten(layer: Layer, ctx: RuleContext) -> bool:
    """(N,C,1,1) -> (N,C) feeding only FullyConnected layers: TensorRT drops it. In the
    jetson_dla_tutorial BatchNorm log the view before Gemm_15 appears neither on DLA nor GPU."""
    x, y = data_input(layer), (layer.outputs[0] if layer.outputs else None)
    if ctx.model is None or x is None or y is None or not layer.consumers:
        return False
    if len(x.shape) != 4 or tuple(x.shape[2:]) != (1, 1) or tuple(y.shape) != tuple(x.shape[:2]):
        return False
    for name in layer.consumers:
        nxt = safe_layer(ctx, name)
        if nxt is None or nxt.op_type not in ("Gemm", "MatMul") or fc_weight(nxt) is None:
            return False
    return True


def rule_shuffle(layer: Layer, ctx: RuleContext) -> str | None:
    # DLA-SW: Reshape/Transpose "Native, see Shuffle layer" (details UNVERIFIED); Flatten,
    # Squeeze, Unsqueeze are "See RFE" (not through TensorRT). placetune rule, INFERRED from the
    # seed 002 log (GroupNorm's Reshape to (N, G, -1) and back ran on GPU next to the
    # InstanceNormalization plugin): a Shuffle runs on DLA only with 4D input and 4D output.
    op = layer.op_type
    if op == "Reshape" and len(layer.inputs) > 1 and not layer.inputs[1].const:
        return "Reshape target shape is a runtime tensor"
    x, y = data_input(layer), (layer.outputs[0] if layer.outputs else None)
    rin, rout = (len(x.shape) if x else 0), (len(y.shape) if y else 0)
    if (rin, rout) != (4, 4):
        if _is_fc_flatten(layer, ctx):
            # the TensorRT 8.4 tutorial log runs Flatten_9 in the DLA subgraph of Gemm_15; a published 10.3
            # build of ResNet-50 (AGX Orin) warns "Layer '/Flatten' (SHUFFLE): Unsupported on DLA" and runs
            # only '/fc/Gemm' there
            if ctx.trt >= (10, 0, 0):
                return ("TensorRT 10 leaves the flatten before a fully connected layer on the GPU (published 10.3 "
                        "build: 'Unsupported on DLA'; the Gemm itself runs on the DLA)")
            return None
        return f"DLA Shuffle needs 4D tensors (got {rin}D -> {rout}D)"
    if op == "Transpose":
        perm = ints_of(layer.attrs.get("perm"), 0, 0) or [3, 2, 1, 0]
        if perm[0] != 0:
            return "Transpose moves the batch axis (no DLA support assumed)"
        return None
    return _reshape_neighbour(layer, ctx)
