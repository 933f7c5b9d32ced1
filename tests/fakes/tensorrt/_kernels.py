"""A faster ``Conv`` for the doubles' ``onnx.reference`` evaluation of an engine.

The reference evaluator's own Conv gathers its im2col matrix with fancy indexing, which took most of
the doubles' time (the suite's pipeline, deploy and selftest tests evaluate real exports at 56x56 and
more, frame after frame). This one computes the same product of the same float32 values: the windows
are a strided view of the padded input copied once into the same im2col layout, one matrix product per
group; a 1x1 convolution with unit strides and no padding is that product on the input as it is.
Inputs of other ranks than 4 (1-D, 3-D convolutions) go to the reference implementation.
"""

from __future__ import annotations

import numpy as np
from onnx.reference.op_run import OpRun
from onnx.reference.ops.op_conv import _conv_implementation


def _same_pads(spatial, kernel, strides, lower: bool) -> list[int]:
    """``auto_pad`` SAME_UPPER/SAME_LOWER as the reference computes it (the extra pad at the end or start)."""
    head, tail = [], []
    for d, k, s in zip(spatial, kernel, strides):
        need = max(0, ((d + s - 1) // s - 1) * s + k - d)
        h = (need + 1) // 2 if lower else need // 2
        head.append(h)
        tail.append(need - h)
    return head + tail


def conv2d(X, W, B, auto_pad, dilations, group, kernel_shape, pads, strides):
    """ONNX Conv of a 4-D input (N, C, H, W) with weights (M, C/group, kH, kW)."""
    if X.ndim != 4 or W.ndim != 4 or (kernel_shape is not None and tuple(kernel_shape) != W.shape[2:]):
        return _conv_implementation(X, W, B, auto_pad, dilations, group, kernel_shape, pads, strides)
    n, c, h, w = X.shape
    m, cg, kh, kw = W.shape
    if c != cg * group or m % group:
        raise ValueError(f"Shape inconsistencies, X.shape={X.shape}, W.shape={W.shape}, group={group}")
    dh, dw = dilations or (1, 1)
    sh, sw = strides or (1, 1)
    ekh, ekw = (kh - 1) * dh + 1, (kw - 1) * dw + 1  # the dilated kernel
    if auto_pad == "VALID":
        pads = [0, 0, 0, 0]
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = _same_pads((h, w), (ekh, ekw), (sh, sw), auto_pad == "SAME_LOWER")
    elif pads is None:
        pads = [0, 0, 0, 0]
    top, left, bottom, right = pads
    ho, wo = (h + top + bottom - ekh) // sh + 1, (w + left + right - ekw) // sw + 1
    wg = W.reshape(group, m // group, cg * kh * kw)
    if (kh, kw, sh, sw, top, left, bottom, right) == (1, 1, 1, 1, 0, 0, 0, 0):
        cols = X.reshape(n, group, cg, h * w)
    else:
        xp = X
        if top or left or bottom or right:
            xp = np.zeros((n, c, h + top + bottom, w + left + right), X.dtype)
            xp[:, :, top:top + h, left:left + w] = X
        win = np.lib.stride_tricks.sliding_window_view(xp, (ekh, ekw), axis=(2, 3))
        win = win[:, :, :(ho - 1) * sh + 1:sh, :(wo - 1) * sw + 1:sw, ::dh, ::dw]  # (n, c, ho, wo, kh, kw)
        win = win.reshape(n, group, cg, ho, wo, kh, kw).transpose(0, 1, 2, 5, 6, 3, 4)
        cols = win.reshape(n, group, cg * kh * kw, ho * wo)  # one copy, in the reference's im2col order
    out = (wg @ cols).reshape(n, m, ho, wo)
    if B is not None:
        out += B.reshape(1, -1, 1, 1) if B.size != 1 else B
    return out


class Conv(OpRun):
    op_domain = ""

    def _run(self, X, W, B=None, auto_pad=None, dilations=None, group=None, kernel_shape=None, pads=None,
             strides=None):
        if len(X.shape) < 3:
            raise ValueError(f"X must have at least 3 dimensions but its shape is {X.shape}.")
        return (conv2d(X, W, B, auto_pad, dilations, group, kernel_shape, pads, strides).astype(X.dtype),)


#: for ``ReferenceEvaluator(new_ops=...)``: the standard Conv, computed faster
KERNELS = [Conv]
