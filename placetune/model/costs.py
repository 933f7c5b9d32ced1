"""Work counts per layer: multiply-accumulates and FLOPs from static shapes.

Conventions (the usual ones of model-zoo tables): a MAC is one multiply-add; FLOPs are
``2 * MACs`` for convolution and matrix products, and a small per-element constant for
everything else (activation 1, normalisation 5, softmax 5, pooling = window size).
"""

from __future__ import annotations

import math

from placetune.model.layer import Layer

__all__ = ["layer_costs", "PER_ELEMENT_FLOPS"]

#: FLOPs per output element for element-wise style ops.
PER_ELEMENT_FLOPS = {
    "BatchNormalization": 2,
    "InstanceNormalization": 5,
    "LayerNormalization": 5,
    "GroupNormalization": 5,
    "Softmax": 5,
    "LogSoftmax": 5,
    "Sigmoid": 4,
    "Tanh": 4,
    "Erf": 4,
    "Gelu": 8,
    "Exp": 4,
    "Log": 4,
    "Sqrt": 2,
    "Pow": 2,
    "HardSwish": 3,
    "HardSigmoid": 2,
    "Elu": 3,
    "Resize": 4,
}

_SHUFFLE_OPS = {"Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Concat", "Split", "Slice",
                "Gather", "Pad", "Cast", "Tile", "Expand", "DepthToSpace", "SpaceToDepth"}


def _prod(xs) -> int:
    return int(math.prod(int(x) for x in xs)) if xs else 1


def layer_costs(layer: Layer) -> tuple[int, int]:
    """Return ``(macs, flops)`` for one layer from its static shapes."""
    op = layer.op_type
    out = layer.outputs[0].shape if layer.outputs else ()
    out_elems = _prod(out)
    acts = layer.activation_inputs
    if op == "Conv" and len(layer.inputs) >= 2:
        w = layer.inputs[1].shape  # Cout, Cin/g, kh, kw
        macs = out_elems * _prod(w[1:])
        return macs, 2 * macs
    if op == "ConvTranspose" and len(layer.inputs) >= 2:
        w = layer.inputs[1].shape  # Cin, Cout/g, kh, kw
        x = layer.inputs[0].shape
        macs = _prod(x) * _prod(w[1:])
        return macs, 2 * macs
    if op == "Gemm" and len(layer.inputs) >= 2:
        a, b = layer.inputs[0].shape, layer.inputs[1].shape
        k = a[0] if layer.attrs.get("transA", 0) else a[-1]
        macs = out_elems * int(k)
        del b
        return macs, 2 * macs
    if op == "MatMul" and len(layer.inputs) >= 2:
        a = layer.inputs[0].shape
        k = a[-1] if a else 1
        macs = out_elems * int(k)
        return macs, 2 * macs
    if op in ("MaxPool", "AveragePool", "LpPool"):
        k = layer.attrs.get("kernel_shape") or [1]
        return 0, out_elems * _prod(k)
    if op in ("GlobalAveragePool", "GlobalMaxPool") or op.startswith("Reduce"):
        return 0, _prod(acts[0].shape) if acts else out_elems
    if op == "LRN":
        return 0, out_elems * (2 * int(layer.attrs.get("size", 5)) + 3)
    if op in _SHUFFLE_OPS:
        return 0, 0
    return 0, out_elems * PER_ELEMENT_FLOPS.get(op, 1)
