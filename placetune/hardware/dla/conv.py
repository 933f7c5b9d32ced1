"""DLA rules of the convolution and pooling family: Conv, ConvTranspose, FullyConnected, pooling, Reduce.

Each ``rule_*`` takes a layer and the :class:`~placetune.hardware.dla.context.RuleContext` and returns None
when a DLA core can run the layer, else the reason; :mod:`placetune.hardware.dla.check` maps ONNX ops to them.
"""

from __future__ import annotations

import math

from placetune.hardware.dla.context import MAX_DIM, RuleContext, data_input, dims_text, ints_of, need_4d
from placetune.hardware.dla.trt_types import fc_weight
from placetune.model.layer import Layer


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
    return ints_of(layer.attrs.get("pads"), 2 * n, 0)


def rule_conv(layer: Layer, ctx: RuleContext) -> str | None:
    # (H) kernel [1,32], stride [1,8], padding [0,31] and < kernel, dilation [1,32],
    # output maps [1,8192], groups <= 8192; (O) CBUF check. Groups in [1,4] only with the
    # kDLA_HWC4 input format, which placetune never selects, so it is not checked.
    x, w = data_input(layer), (layer.inputs[1] if len(layer.inputs) > 1 else None)
    if w is None or not w.const:
        return "Conv weights are a runtime tensor (DLA needs build-time weights)"
    kernel = ints_of(layer.attrs.get("kernel_shape"), 0, 1) or [int(d) for d in w.shape[2:]]
    if len(kernel) != 2:
        return f"DLA convolution is 2D only (got {len(kernel)}D)"
    strides = ints_of(layer.attrs.get("strides"), 2, 1)
    dil = ints_of(layer.attrs.get("dilations"), 2, 1)
    groups = int(layer.attrs.get("group", 1))
    spatial = tuple(x.shape[2:]) if x is not None else ()
    pads = _pads(layer, spatial, kernel, strides, dil)
    if any(k < 1 or k > 32 for k in kernel):
        return f"Conv kernel {dims_text(kernel)} > 32"
    if any(s < 1 or s > 8 for s in strides):
        return f"Conv stride {dims_text(strides)} outside [1, 8]"
    for i, p in enumerate(pads):
        if p < 0 or p > 31:
            return f"Conv padding {p} outside [0, 31]"
        if p >= kernel[i % 2]:
            return f"Conv padding {p} >= kernel {kernel[i % 2]}"
    if any(d < 1 or d > 32 for d in dil):
        return f"Conv dilation {dims_text(dil)} outside [1, 32]"
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
                    f"{dims_text(kernel)}, input width {x.shape[3]}, {ctx.precision})")
    return None


def rule_fc(layer: Layer, ctx: RuleContext) -> str | None:
    # DLA-SW operators/README.md (Gemm, MatMul rows): native only with a constant second input
    # ("TensorRT can translate this to a 1x1 Conv internally"), then the Convolution limits apply:
    # output maps <= 8192 (input features are a non-batch dim, <= 8192 by G2).
    #
    # By the rank of the activation input:
    # * The ONNX parser makes an IMatrixMultiplyLayer of every Gemm and MatMul from 8.4 on, never a
    #   FullyConnected (onnx-tensorrt 8.5-GA/8.6-GA builtin_op_importers.cpp, 10.0-GA onnxOpImporters.cpp:
    #   addMatrixMultiply; Gemm asserts "GEMM must have 2D inputs!"; a MatMul's 2-D constant is broadcast
    #   to A's rank). The builder turns one with constant weights into a 1x1 convolution between its own
    #   Shuffles "reshape_before_<name>" / "reshape_after_<name>" (names in published engine layer lists).
    # * 2D [N, K] (classifier heads): VERIFIED. The Gemm ran on the DLA in published trtexec logs of
    #   TensorRT 8.5.2 ({ForeignNode[/linear/Gemm]}) and 10.3.0 ({ForeignNode[/fc/Gemm + ...]} successfully
    #   offloaded), with "reshape_after_/fc/Gemm", TensorRT's 4D -> 2D Shuffle, on the GPU (the same rank
    #   rule placetune's Shuffle rule applies); tests/data/trt_corpus/orin-agx-trt10.3-dla-offloaded,
    #   dlatutorial-repro-orin64-8.5.2-model-bn. 8.6 has the same parser path.
    # * 3D [B, T, K] and 4D with the product on the last axis (ConvNeXt's channels-last MLP): UNVERIFIED.
    #   No published DLA build runs one; the DLA form (IFullyConnectedLayer, NvInfer.h release/8.6: input
    #   "reshaped into an MxV tensor, where V is a product of the last three dimensions", output {.., K, 1, 1})
    #   contracts C*H*W, not the last axis, so TensorRT must first reshape the input to 4D with a 3D -> 4D
    #   (or 4D channel-moving) Shuffle of its own, and a Relu or Add on the same 3-D tensor is refused here
    #   ("needs 4D"). NVIDIA's own DLA recipe for a sequence's products with constant weights is a 1x1 Conv
    #   on N,C,H,W tensors, not a MatMul (DLA-SW operators/op_reconstruction/GRU.py: from2dto4d, add_gru_conv).
    #   Treated as GPU-only, and the reason says it is unverified.
    b = fc_weight(layer)
    if b is None:
        return f"{layer.op_type} with two runtime inputs (MatrixMultiply) has no DLA support"
    trans_b = layer.op_type == "Gemm" and int(layer.attrs.get("transB", 0)) == 1
    n_out = int(b.shape[0] if trans_b else b.shape[1])
    if n_out < 1 or n_out > MAX_DIM:
        return f"FullyConnected output maps {n_out} > {MAX_DIM}"
    if layer.op_type == "Gemm" and int(layer.attrs.get("transA", 0)) == 1:
        return ("Gemm with transA=1 (a transposed activation): DLA support unverified, treated as GPU-only "
                "(published DLA builds run an untransposed [N, K] input only)")
    x = data_input(layer)
    rank = len(x.shape) if x is not None else 0
    if rank != 2:
        shape = "x".join(str(int(d)) for d in x.shape) if x is not None else "?"
        return (f"{layer.op_type} with constant weights on a {rank}D input ({shape}): DLA support unverified, "
                f"treated as GPU-only (published DLA builds run it on 2D [N, K] inputs only; for the DLA, export "
                f"it as a 1x1 Conv on an N,C,H,W tensor)")
    return None


def rule_deconv(layer: Layer, ctx: RuleContext) -> str | None:
    # (H, S) 2D; kernel and stride each in [1,32] or 1x{64,96,128} / {64,96,128}x1; padding 0;
    # groups 1; no dilation; (O) in/out channels in [1,8192]; square kernels and strides in
    # [23,32] disabled ("they significantly slow down compilation").
    w = layer.inputs[1] if len(layer.inputs) > 1 else None
    if w is None or not w.const:
        return "ConvTranspose weights are a runtime tensor (DLA needs build-time weights)"
    kernel = ints_of(layer.attrs.get("kernel_shape"), 0, 1) or [int(d) for d in w.shape[2:]]
    if len(kernel) != 2:
        return f"DLA deconvolution is 2D only (got {len(kernel)}D)"
    strides = ints_of(layer.attrs.get("strides"), 2, 1)
    dil = ints_of(layer.attrs.get("dilations"), 2, 1)
    groups = int(layer.attrs.get("group", 1))

    def ok_pair(v: list[int]) -> bool:
        if all(1 <= d <= 32 for d in v):
            return True
        return (v[0] == 1 and v[1] in (64, 96, 128)) or (v[1] == 1 and v[0] in (64, 96, 128))

    if not ok_pair(kernel):
        return f"Deconvolution kernel {dims_text(kernel)} not in [1, 32] (or 1x64/96/128)"
    if not ok_pair(strides):
        return f"Deconvolution stride {dims_text(strides)} not in [1, 32] (or 1x64/96/128)"
    if kernel[0] == kernel[1] and 23 <= kernel[0] <= 32:
        return f"Deconvolution square kernel {dims_text(kernel)} in [23, 32] is disabled on DLA"
    if strides[0] == strides[1] and 23 <= strides[0] <= 32:
        return f"Deconvolution square stride {dims_text(strides)} in [23, 32] is disabled on DLA"
    x = data_input(layer)
    pads = _pads(layer, tuple(x.shape[2:]) if x is not None else (), kernel, strides, dil)
    if any(p != 0 for p in pads):
        return f"Deconvolution padding {max(pads)} != 0"
    if any(p != 0 for p in ints_of(layer.attrs.get("output_padding"), 2, 0)):
        return "Deconvolution output_padding != 0 (DLA deconvolution padding must be 0)"
    if groups != 1:
        return f"Deconvolution groups {groups} != 1"
    if any(d != 1 for d in dil):
        return f"Deconvolution dilation {dims_text(dil)} != 1"
    c_in, c_out = int(w.shape[0]), int(w.shape[1]) * groups
    for what, c in (("input", c_in), ("output", c_out)):
        if c < 1 or c > MAX_DIM:
            return f"Deconvolution {what} channels {c} > {MAX_DIM}"
    return None


def rule_pool(layer: Layer, ctx: RuleContext) -> str | None:
    # (H) kMAX / kAVERAGE, 2D, window [1,8], stride [1,16], padding [0,7]. INT8 needs equal
    # input/output dynamic ranges: a calibration property placetune cannot see.
    kernel = ints_of(layer.attrs.get("kernel_shape"), 0, 1)
    if len(kernel) != 2:
        return f"DLA pooling is 2D only (got {len(kernel)}D)"
    strides = ints_of(layer.attrs.get("strides"), 2, 1)
    dil = ints_of(layer.attrs.get("dilations"), 2, 1)
    x = data_input(layer)
    pads = _pads(layer, tuple(x.shape[2:]) if x is not None else (), kernel, strides, dil)
    if any(k < 1 or k > 8 for k in kernel):
        return f"pooling window {dims_text(kernel)} > 8"
    if any(s < 1 or s > 16 for s in strides):
        return f"pooling stride {dims_text(strides)} outside [1, 16]"
    if any(p < 0 or p > 7 for p in pads):
        return f"pooling padding {max(pads)} outside [0, 7]"
    if any(d != 1 for d in dil):
        return f"dilated pooling ({dims_text(dil)}) has no DLA support"
    if len(layer.outputs) > 1:
        return "MaxPool with an indices output has no DLA support"
    return need_4d(layer, "Pooling")


def rule_reduce(layer: Layer, ctx: RuleContext) -> str | None:
    op = layer.op_type
    if op == "GlobalMaxPool":
        if ctx.drive_ops:
            return need_4d(layer, "Reduce")
        return (f"GlobalMaxPool (a Reduce layer) runs on DLA only from TensorRT 8.6.12 (DRIVE OS); "
                f"not in TensorRT {ctx.trt_text}")
    if op == "GlobalAveragePool":
        return ("GlobalAveragePool becomes a TensorRT Reduce layer, which has no DLA support "
                "(ran on GPU in the jetson_dla_tutorial log); an AveragePool with window <= 8 is DLA-eligible")
    return f"{op} (Reduce) has no DLA support through TensorRT (DLA-SW: rebuild as pooling/conv)"
