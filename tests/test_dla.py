"""DLA support rules: every rule on both sides of its limit, on Xavier and Orin where they differ."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from placetune.hardware.dla import (
    SUPPORTED_PRECISIONS,
    Support,
    cbuf_banks,
    check_layer,
    check_model,
    parse_trt_version,
    trt_layer_type,
)
from placetune.errors import ConfigError, UnknownNameError
from placetune.model.layer import Layer, TensorInfo

BOTH = ["xavier-agx", "orin-agx"]
DATA = Path(__file__).parent / "data"


# ----------------------------------------------------------------------------- builders


def T(shape, const=False, value=None, dtype="float32", name="t"):
    """A tensor; ``value`` gives a small constant its data."""
    return TensorInfo(name, tuple(shape), dtype, const, None if value is None else np.asarray(value))


def C(value, dtype="float32"):
    """A small constant tensor with data."""
    arr = np.asarray(value, dtype=dtype)
    return TensorInfo("c", tuple(arr.shape), dtype, True, arr)


def L(op, inputs, outputs, attrs=None, name="layer", producers=(), consumers=(), domain=""):
    """A layer built the way the importer builds them."""
    return Layer(name=name, op_type=op, index=0, attrs=dict(attrs or {}), inputs=tuple(inputs),
                 outputs=tuple(outputs), producers=tuple(producers), consumers=tuple(consumers),
                 domain=domain)


def conv(c_in=16, c_out=16, k=3, hw=64, stride=1, pad=None, dil=1, group=1, n=1, w=None, rank=2):
    kk = [k] * rank if isinstance(k, int) else list(k)
    pads = [0] * (2 * rank) if pad is None else [pad] * (2 * rank)
    x = T((n, c_in) + (hw,) * rank)
    y = T((n, c_out) + (hw,) * rank)
    weight = T((c_out, c_in // group, *kk), const=True)
    attrs = {"kernel_shape": kk, "strides": [stride] * rank, "pads": pads,
             "dilations": [dil] * rank, "group": group}
    return L("Conv", [x, weight], [y], attrs)


def unary(op, shape=(1, 16, 8, 8), attrs=None, extra=()):
    return L(op, [T(shape), *extra], [T(shape)], attrs)


def check(layer, platform="orin-agx", precision="fp16", trt="8.6", model=None):
    return check_layer(layer, platform, precision, trt, model=model)


def ok(layer, **kw):
    s = check(layer, **kw)
    assert s.supported, s.reason
    assert s.reason is None


def bad(layer, fragment, **kw):
    s = check(layer, **kw)
    assert not s.supported
    assert s.reason and fragment in s.reason, s.reason


class FakeModel:
    """Anything with ``layers`` and ``layer(name)``."""

    def __init__(self, layers):
        self.layers = list(layers)
        self._by = {x.name: x for x in layers}

    def layer(self, name):
        if name not in self._by:
            raise UnknownNameError(name)
        return self._by[name]


# ----------------------------------------------------------------------------- Support, versions


def test_support_is_frozen_and_truthy():
    s = Support(True, None)
    assert bool(s) and not Support(False, "x")
    with pytest.raises(AttributeError):
        s.supported = False  # type: ignore[misc]
    assert SUPPORTED_PRECISIONS == ("fp16", "int8")


@pytest.mark.parametrize("text,expected", [
    ("8.5", (8, 5, 0)), ("8.6.2", (8, 6, 2)), ("8.6.12", (8, 6, 12)), ("10.3.0.26", (10, 3, 0)), ("10", (10, 0, 0)),
])
def test_parse_trt_version(text, expected):
    assert parse_trt_version(text) == expected


def test_parse_trt_version_rejects_garbage():
    with pytest.raises(ConfigError):
        parse_trt_version("latest")


# ----------------------------------------------------------------------------- platform / version / precision


def test_orin_nano_has_no_dla():
    bad(conv(), "orin-nano has no DLA", platform="orin-nano")


def test_unknown_platform_raises():
    with pytest.raises(UnknownNameError):
        check(conv(), platform="tx2")


@pytest.mark.parametrize("trt,supported", [
    ("8.5", True), ("8.6.2", True), ("10.3", True), ("10.7", True), ("10.8", False), ("11.1", False),
    ("11.4.0", False), ("11.4.1", True),
])
def test_trt_versions_with_dla(trt, supported):
    assert check(conv(), trt=trt).supported is supported


def test_tensorrt_11_4_1_restores_the_dla_on_orin_not_on_xavier():
    """11.4.1's DLA is Jetson AGX Orin's (JetPack 7.2); Xavier's DLA v1 last ships with JetPack 5.1, so a
    Xavier target with 11.4.1 rules had every DLA layer judged supported."""
    assert check(conv(), platform="orin-agx", trt="11.4.1").supported
    v = check(conv(), platform="xavier-agx", trt="11.4.1")
    assert not v.supported and "AGX Orin only" in v.reason and "JetPack 5.1" in v.reason
    assert check(conv(), platform="xavier-agx", trt="8.6").supported


@pytest.mark.parametrize("platform", BOTH)
@pytest.mark.parametrize("prec", ["fp32", "tf32", "bf16", "FP32"])
def test_precision_g7(platform, prec):
    bad(conv(), "DLA runs FP16 or INT8 only (got", platform=platform, precision=prec)
    assert check(conv(), platform=platform, precision="fp32").reason == "DLA runs FP16 or INT8 only (got fp32)"


@pytest.mark.parametrize("prec", ["fp16", "int8", "FP16", "half", "float16"])
def test_precision_names_accepted(prec):
    ok(conv(), precision=prec)


def test_unknown_precision_is_config_error():
    with pytest.raises(ConfigError):
        check(conv(), precision="fp99")


# ----------------------------------------------------------------------------- general rules G1-G3


@pytest.mark.parametrize("platform", BOTH)
def test_batch_limit_g1(platform):
    ok(unary("Relu", (4096, 4, 2, 2)), platform=platform)
    bad(unary("Relu", (4097, 4, 2, 2)), "batch 4097 > 4096", platform=platform)
    bad(unary("Relu", (5000, 4, 2, 2)), "batch 5000 > 4096", platform=platform)


def test_batch_is_product_of_leading_dims():
    # NPQRS -> N*P (guide note); 64 * 65 = 4160 > 4096
    bad(L("Relu", [T((64, 65, 4, 2, 2))], [T((64, 65, 4, 2, 2))]), "batch 4160 > 4096")


@pytest.mark.parametrize("platform", BOTH)
def test_dimension_limit_g2(platform):
    ok(unary("Relu", (1, 1, 1, 8192)), platform=platform)
    bad(unary("Relu", (1, 1, 1, 8193)), "dimension 8193 > 8192", platform=platform)
    bad(unary("Relu", (1, 9000, 1, 1)), "dimension 9000 > 8192", platform=platform)


@pytest.mark.parametrize("dim", [-1, 0])
def test_dynamic_shape_g3(dim):
    bad(unary("Relu", (dim, 16, 8, 8)), "dynamic shape")
    bad(unary("Relu", (1, 16, dim, 8)), "dynamic shape")


# ----------------------------------------------------------------------------- Convolution


@pytest.mark.parametrize("platform", BOTH)
def test_conv_kernel(platform):
    ok(conv(k=32, pad=0), platform=platform)
    bad(conv(k=33), "Conv kernel 33x33 > 32", platform=platform)
    bad(conv(k=63), "Conv kernel 63x63 > 32", platform=platform)
    bad(conv(k=(3, 33)), "kernel 3x33 > 32", platform=platform)


@pytest.mark.parametrize("platform", BOTH)
def test_conv_stride(platform):
    ok(conv(stride=8), platform=platform)
    bad(conv(stride=9), "Conv stride 9x9 outside [1, 8]", platform=platform)


@pytest.mark.parametrize("platform", BOTH)
def test_conv_padding(platform):
    ok(conv(k=32, pad=31), platform=platform)
    bad(conv(k=32, pad=32), "Conv padding 32 outside [0, 31]", platform=platform)
    ok(conv(k=3, pad=2), platform=platform)
    bad(conv(k=3, pad=3), "Conv padding 3 >= kernel 3", platform=platform)
    bad(conv(k=1, pad=1), "Conv padding 1 >= kernel 1", platform=platform)


def test_conv_auto_pad_same_is_resolved():
    layer = conv(k=3)
    layer.attrs.pop("pads")
    layer.attrs["auto_pad"] = "SAME_UPPER"
    ok(layer)  # pads 1 < kernel 3
    layer = conv(k=1)
    layer.attrs.pop("pads")
    layer.attrs["auto_pad"] = "SAME_LOWER"
    ok(layer)  # pads 0


@pytest.mark.parametrize("platform", BOTH)
def test_conv_dilation(platform):
    ok(conv(dil=32), platform=platform)
    bad(conv(dil=33), "Conv dilation 33x33 outside [1, 32]", platform=platform)


@pytest.mark.parametrize("platform", BOTH)
def test_conv_output_maps(platform):
    ok(conv(c_in=8, c_out=8192, k=1, hw=4), platform=platform)
    bad(conv(c_in=8, c_out=8193, k=1, hw=4), "Conv output maps 8193 > 8192", platform=platform)


@pytest.mark.parametrize("platform", BOTH)
def test_conv_groups(platform):
    ok(conv(c_in=64, c_out=64, group=64), platform=platform)  # depthwise
    ok(conv(c_in=8192, c_out=8192, k=1, hw=1, group=8192), platform=platform)
    bad(conv(c_in=8193, c_out=8193, k=1, hw=1, group=8193), "Conv groups 8193 > 8192", platform=platform)


def test_conv_3d_and_runtime_weights():
    bad(conv(rank=3, hw=8), "2D only (got 3D)")
    bad(conv(rank=1), "2D only (got 1D)")
    layer = conv()
    layer.inputs = (layer.inputs[0], T(layer.inputs[1].shape))
    bad(layer, "runtime tensor")


def test_cbuf_formula():
    # C_in 256, 3x3, W 384: fp16 wt = ceil(4608/32768) = 1, data = ceil(16*96*3/256) = 18 -> 19
    assert cbuf_banks(256, 3, 3, 384, 1, int8=False) == 19
    # int8: wt 1, data = ceil(8*96*3/256) = 9 -> 10
    assert cbuf_banks(256, 3, 3, 384, 1, int8=True) == 10
    # 64 ch, 3x3, W 64 fp16: wt 1, data ceil(4*16*3/256) = 1 -> 2
    assert cbuf_banks(64, 3, 3, 64) == 2
    # dilation grows the data banks: dilated kernel height (3-1)*4+1 = 9
    assert cbuf_banks(64, 3, 3, 64, 4) == 1 + math.ceil(64 * 9 / 256)


@pytest.mark.parametrize("platform", BOTH)
def test_conv_cbuf(platform):
    ok(conv(c_in=64, c_out=64, k=3, hw=64), platform=platform)
    # large C_in * K and a wide input: fails in FP16 ...
    bad(conv(c_in=2048, c_out=64, k=3, hw=512), "convolution-buffer banks", platform=platform)
    bad(conv(c_in=256, c_out=64, k=3, hw=384), "19 convolution-buffer banks > 16", platform=platform)
    # ... and the same layer fits in INT8 (1 byte per element)
    ok(conv(c_in=256, c_out=64, k=3, hw=384), platform=platform, precision="int8")


# ----------------------------------------------------------------------------- FullyConnected / MatMul


def gemm(k=512, n=10, b_const=True, trans_b=1):
    b = T((n, k) if trans_b else (k, n), const=b_const)
    return L("Gemm", [T((1, k)), b, T((n,), const=True)], [T((1, n))], {"transB": trans_b})


@pytest.mark.parametrize("platform", BOTH)
def test_fully_connected(platform):
    ok(gemm(), platform=platform)
    ok(gemm(n=8192, trans_b=0), platform=platform)
    bad(gemm(n=8193), "FullyConnected output maps 8193 > 8192", platform=platform)
    bad(gemm(k=8193), "dimension 8193 > 8192", platform=platform)
    assert trt_layer_type(gemm()) == "FullyConnected"


def test_matmul_two_runtime_inputs():
    mm = L("MatMul", [T((1, 64, 32)), T((1, 32, 64))], [T((1, 64, 64))])
    bad(mm, "two runtime inputs")
    assert trt_layer_type(mm) == "MatrixMultiply"
    mm_const = L("MatMul", [T((1, 32)), T((32, 64), const=True)], [T((1, 64))])
    ok(mm_const)
    assert trt_layer_type(mm_const) == "FullyConnected"


def linear(x_shape, n=384, op="MatMul"):
    """A Linear with constant weights as torch exports it on a tensor of any rank (weight [K, N])."""
    k = x_shape[-1]
    return L(op, [T(tuple(x_shape)), T((k, n), const=True)], [T(tuple(x_shape[:-1]) + (n,))])


@pytest.mark.parametrize("trt", ["8.5", "8.6", "10.3"])
@pytest.mark.parametrize("x_shape", [(1, 197, 768), (300, 1, 256), (1, 56, 56, 96)])
def test_matmul_with_constant_weights_beyond_2d_is_unverified_not_dla(x_shape, trt):
    # A Relu or Add on these same tensors is refused ("needs 4D"); the MatMul whose weights are constant
    # must not pass where no source shows TensorRT running it on the DLA (ViT [1,197,768], a 3-D
    # decoder tensor, ConvNeXt's channels-last MLP [1,56,56,96]).
    s = check(linear(x_shape), trt=trt)
    assert not s.supported
    assert f"{len(x_shape)}D input" in s.reason and "unverified" in s.reason, s.reason
    if len(x_shape) == 3:
        bad(L("Relu", [T(x_shape)], [T(x_shape)]), "needs 4D")
    assert trt_layer_type(linear(x_shape)) == "MatrixMultiply"


@pytest.mark.parametrize("trt", ["8.5", "8.6", "10.3"])
def test_matmul_with_constant_weights_on_a_2d_input_stays_dla(trt):
    # the classifier head: [N, K] x constant [K, N_out] ran on the DLA in the published 8.5.2 and 10.3 logs
    ok(linear((1, 2048), n=1000), trt=trt)
    ok(linear((300, 256), n=256, op="Gemm"), trt=trt)
    assert trt_layer_type(linear((1, 2048), n=1000)) == "FullyConnected"


def test_gemm_with_a_transposed_input_is_unverified_not_dla():
    # transA=1: the parser gives the MatrixMultiply kTRANSPOSE on the activation (onnx-tensorrt 8.6-GA Gemm
    # importer); the published DLA builds show only an untransposed [N, K] input
    g = L("Gemm", [T((512, 1)), T((10, 512), const=True)], [T((1, 10))], {"transA": 1, "transB": 1})
    bad(g, "transA=1")


# ----------------------------------------------------------------------------- Deconvolution


def deconv(k=4, stride=2, pad=0, group=1, dil=1, c_in=16, c_out=16, out_pad=None):
    kk = [k, k] if isinstance(k, int) else list(k)
    ss = [stride, stride] if isinstance(stride, int) else list(stride)
    attrs = {"kernel_shape": kk, "strides": ss, "pads": [pad] * 4, "group": group, "dilations": [dil, dil]}
    if out_pad is not None:
        attrs["output_padding"] = [out_pad, out_pad]
    return L("ConvTranspose", [T((1, c_in, 8, 8)), T((c_in, c_out // group, *kk), const=True)],
             [T((1, c_out, 16, 16))], attrs)


@pytest.mark.parametrize("platform", BOTH)
def test_deconv_kernel(platform):
    ok(deconv(k=4), platform=platform)
    ok(deconv(k=(22, 21)), platform=platform)
    ok(deconv(k=(1, 64), stride=1), platform=platform)
    ok(deconv(k=(128, 1), stride=1), platform=platform)
    bad(deconv(k=33), "Deconvolution kernel 33x33", platform=platform)
    bad(deconv(k=(1, 65)), "Deconvolution kernel 1x65", platform=platform)
    bad(deconv(k=24), "square kernel 24x24 in [23, 32]", platform=platform)
    bad(deconv(k=32), "square kernel", platform=platform)
    ok(deconv(k=22), platform=platform)


@pytest.mark.parametrize("platform", BOTH)
def test_deconv_stride(platform):
    ok(deconv(k=4, stride=16), platform=platform)
    bad(deconv(k=4, stride=33), "Deconvolution stride 33x33", platform=platform)
    bad(deconv(k=4, stride=23), "square stride 23x23", platform=platform)
    ok(deconv(k=4, stride=(23, 2)), platform=platform)


@pytest.mark.parametrize("platform", BOTH)
def test_deconv_padding_groups_dilation_channels(platform):
    bad(deconv(pad=1), "Deconvolution padding 1 != 0", platform=platform)
    bad(deconv(out_pad=1), "output_padding", platform=platform)
    ok(deconv(out_pad=0), platform=platform)
    bad(deconv(group=2), "Deconvolution groups 2 != 1", platform=platform)
    bad(deconv(dil=2), "Deconvolution dilation 2x2 != 1", platform=platform)
    ok(deconv(c_in=8192, c_out=16), platform=platform)
    bad(deconv(c_in=8193, c_out=16), "Deconvolution input channels 8193 > 8192", platform=platform)


# ----------------------------------------------------------------------------- Pooling


def pool(k=2, stride=2, pad=0, op="MaxPool", dil=None, rank=2):
    attrs = {"kernel_shape": [k] * rank, "strides": [stride] * rank, "pads": [pad] * (2 * rank)}
    if dil:
        attrs["dilations"] = [dil] * rank
    return L(op, [T((1, 16) + (32,) * rank)], [T((1, 16) + (16,) * rank)], attrs)


@pytest.mark.parametrize("platform", BOTH)
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pooling_limits(platform, op):
    ok(pool(k=8, op=op), platform=platform)
    bad(pool(k=9, op=op), "pooling window 9x9 > 8", platform=platform)
    ok(pool(stride=16, op=op), platform=platform)
    bad(pool(stride=17, op=op), "pooling stride 17x17 outside [1, 16]", platform=platform)
    ok(pool(k=8, pad=7, op=op), platform=platform)
    bad(pool(k=8, pad=8, op=op), "pooling padding 8 outside [0, 7]", platform=platform)
    bad(pool(rank=3, op=op), "2D only (got 3D)", platform=platform)


def test_dilated_pooling_and_indices():
    bad(pool(dil=2), "dilated pooling")
    layer = pool()
    layer.outputs = layer.outputs + (T((1, 16, 16, 16), dtype="int64"),)
    bad(layer, "indices")


def test_global_pools_are_reduce():
    gap = L("GlobalAveragePool", [T((1, 512, 7, 7))], [T((1, 512, 1, 1))])
    gmp = L("GlobalMaxPool", [T((1, 512, 7, 7))], [T((1, 512, 1, 1))])
    assert trt_layer_type(gap) == trt_layer_type(gmp) == "Reduce"
    for trt in ("8.5", "8.6", "8.6.12", "10.3"):
        bad(gap, "Reduce layer", trt=trt)
    bad(gmp, "8.6.12", trt="8.6")
    bad(gmp, "8.6.12", trt="10.3")
    ok(gmp, trt="8.6.12")
    red = L("ReduceMean", [T((1, 512, 7, 7)), C([2, 3], "int64")], [T((1, 512, 1, 1))], {"keepdims": 1})
    bad(red, "ReduceMean (Reduce) has no DLA support")


# ----------------------------------------------------------------------------- Activation / Clip


@pytest.mark.parametrize("platform", BOTH)
@pytest.mark.parametrize("op", ["Relu", "Sigmoid", "Tanh", "LeakyRelu"])
def test_dla_activations(platform, op):
    ok(unary(op), platform=platform)
    ok(unary(op), platform=platform, precision="int8")
    assert trt_layer_type(unary(op)) == "Activation"


@pytest.mark.parametrize("op", ["Elu", "Selu", "Softplus", "Softsign", "HardSigmoid", "HardSwish", "ThresholdedRelu"])
def test_other_activations_not_supported(op):
    bad(unary(op), f"{op} activation not supported on DLA")


def test_activation_needs_4d():
    bad(unary("Relu", (1, 1000)), "needs 4D")


def clip(lo, hi):
    return unary("Clip", extra=(C(lo), C(hi)))


@pytest.mark.parametrize("platform", BOTH)
def test_clip_is_clipped_relu(platform):
    ok(clip(0.0, 6.0), platform=platform)
    ok(clip(0.0, 1.0), platform=platform)
    ok(clip(0.0, 127.0), platform=platform)
    bad(clip(0.0, 128.0), "Clip max 128 outside [1, 127]", platform=platform)
    bad(clip(0.0, 0.5), "Clip max 0.5 outside [1, 127]", platform=platform)
    bad(clip(-1.0, 6.0), "Clip min -1 != 0", platform=platform)
    bad(unary("Clip", extra=(C(0.0),)), "one bound", platform=platform)
    bad(unary("Clip", extra=(T((), const=False), C(6.0))), "build-time constants", platform=platform)
    ok(unary("Clip", attrs={"min": 0.0, "max": 6.0}), platform=platform)  # opset 6 attributes
    bad(unary("Clip", attrs={"max": 6.0}), "Clip min -inf != 0", platform=platform)


# ----------------------------------------------------------------------------- ElementWise / comparison / unary


def binary(op, shape=(1, 16, 8, 8), const_b=False):
    return L(op, [T(shape), T(shape, const=const_b)], [T(shape)])


@pytest.mark.parametrize("platform", BOTH)
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Max", "Min", "Sum"])
def test_elementwise_supported(platform, op):
    # Sub on Xavier runs as Scale + Sum (older guide): still on the DLA
    ok(binary(op), platform=platform)
    ok(binary(op, const_b=True), platform=platform)
    assert trt_layer_type(binary(op)) == "ElementWise"


@pytest.mark.parametrize("platform", BOTH)
@pytest.mark.parametrize("op", ["Div", "Pow"])
def test_div_pow_need_8_6_12(platform, op):
    for trt in ("8.5", "8.6", "8.6.2", "8.6.11", "10.3"):
        bad(binary(op), f"{op} on DLA needs TensorRT >= 8.6.12", platform=platform, trt=trt)
    ok(binary(op), platform=platform, trt="8.6.12")
    ok(binary(op), platform=platform, trt="8.6.13")


@pytest.mark.parametrize("op", ["And", "Or", "Xor", "Mod"])
def test_other_elementwise_not_supported(op):
    bad(binary(op), f"ElementWise {op} not supported")


def test_elementwise_needs_4d():
    bad(binary("Add", (1, 64)), "needs 4D")


def test_comparisons():
    eq = binary("Equal")
    assert trt_layer_type(eq) == "ElementWise (comparison)"
    ok(eq, precision="int8")
    bad(eq, "INT8 only", precision="fp16")
    gt = binary("Greater")
    bad(gt, "8.6.12", precision="int8", trt="8.6")
    ok(gt, precision="int8", trt="8.6.12")
    bad(binary("GreaterOrEqual"), "Or ElementWise", precision="int8")


def test_comparison_must_be_cast_immediately():
    eq = L("Equal", [T((1, 16, 8, 8)), T((1, 16, 8, 8))], [T((1, 16, 8, 8), dtype="bool")],
           name="eq", consumers=("next",))
    cast = L("Cast", [T((1, 16, 8, 8), dtype="bool")], [T((1, 16, 8, 8))], {"to": 10}, name="next",
             producers=("eq",))
    ok(eq, precision="int8", model=FakeModel([eq, cast]))
    relu = L("Relu", [T((1, 16, 8, 8))], [T((1, 16, 8, 8))], name="next", producers=("eq",))
    bad(eq, "must be cast", precision="int8", model=FakeModel([eq, relu]))


def test_unary():
    ok(unary("Abs"))
    assert trt_layer_type(unary("Abs")) == "Unary"
    for op in ("Neg", "Exp", "Sqrt", "Erf", "Reciprocal"):
        bad(unary(op), f"Unary {op} not supported on DLA (Abs only)")
    bad(unary("Sin"), "Abs only", trt="8.6")
    ok(unary("Sin"), trt="8.6.12")


# ----------------------------------------------------------------------------- Scale, LRN, PRelu


@pytest.mark.parametrize("platform", BOTH)
def test_batchnorm_is_scale(platform):
    params = [T((16,), const=True) for _ in range(4)]
    bn = L("BatchNormalization", [T((1, 16, 8, 8)), *params], [T((1, 16, 8, 8))])
    ok(bn, platform=platform)
    assert trt_layer_type(bn) == "Scale"
    bad(L("BatchNormalization", [T((1, 16)), *params], [T((1, 16))]), "needs 4D", platform=platform)


@pytest.mark.parametrize("platform", BOTH)
def test_lrn_window(platform):
    for size in (3, 5, 7, 9):
        ok(unary("LRN", attrs={"size": size}), platform=platform)
    for size in (1, 4, 11):
        bad(unary("LRN", attrs={"size": size}), f"LRN window {size} not in", platform=platform)


@pytest.mark.parametrize("platform", BOTH)
def test_prelu_slopes_constant(platform):
    ok(unary("PRelu", extra=(T((16, 1, 1), const=True),)), platform=platform)
    bad(unary("PRelu", extra=(T((16, 1, 1)),)), "PRelu slopes must be a build-time constant", platform=platform)


# ----------------------------------------------------------------------------- Concat, Slice, Split


def concat(axis=1, n_in=2, shapes=None):
    shapes = shapes or [(1, 8, 16, 16)] * n_in
    out = list(shapes[0])
    a = axis % 4
    out[a] = sum(s[a] for s in shapes)
    return L("Concat", [T(s) for s in shapes], [T(tuple(out))], {"axis": axis})


@pytest.mark.parametrize("platform", BOTH)
def test_concat_axis(platform):
    ok(concat(axis=1), platform=platform)
    ok(concat(axis=-3), platform=platform)
    bad(concat(axis=2), "Concat on axis 2", platform=platform)
    bad(concat(axis=0), "Concat on axis 0", platform=platform)
    bad(concat(n_in=1), "at least 2 inputs", platform=platform)
    bad(concat(axis=1, shapes=[(1, 8, 16, 16), (1, 8, 8, 8)]), "spatial", platform=platform)


@pytest.mark.parametrize("platform", BOTH)
def test_a_3d_concat_is_refused_for_its_rank_not_its_axis(platform):
    """YOLOv8's box tensors [1, 2, 8400] + [1, 2, 8400] -> [1, 4, 8400] read "Concat on axis 1 (DLA concatenates
    on the channel axis only)": axis 1 is the channel axis of the NCHW tensors a user knows. The rank is why."""
    three = L("Concat", [T((1, 2, 8400)), T((1, 2, 8400))], [T((1, 4, 8400))], {"axis": 1})
    bad(three, "DLA Concatenation needs 4D (N,C,H,W) tensors (got 3D)", platform=platform)
    assert "axis" not in check(three, platform=platform).reason
    two = L("Concat", [T((1, 8)), T((1, 8))], [T((1, 16))], {"axis": 1})
    bad(two, "needs 4D (N,C,H,W) tensors (got 2D)", platform=platform)


def slice_layer(out_shape=(1, 8, 16, 16), in_shape=(1, 16, 16, 16), steps=None, const=True):
    params = [T((1,), const=const, value=[0], dtype="int64"), T((1,), const=const, value=[8], dtype="int64"),
              T((1,), const=const, value=[1], dtype="int64")]
    if steps is not None:
        params.append(T((1,), const=const, value=[steps], dtype="int64"))
    return L("Slice", [T(in_shape), *params], [T(out_shape)])


@pytest.mark.parametrize("platform", BOTH)
def test_slice(platform):
    ok(slice_layer(), platform=platform)
    ok(slice_layer(steps=1), platform=platform)
    bad(slice_layer(steps=2), "Slice step 2 != 1", platform=platform)
    bad(slice_layer(out_shape=(1, 16, 16, 16), in_shape=(2, 16, 16, 16)), "batch axis", platform=platform)
    bad(slice_layer(out_shape=(1, 8, 16), in_shape=(1, 16, 16)), "4D input", platform=platform)
    bad(slice_layer(const=False), "build-time constants", platform=platform)
    # placetune's INT8 builds enable FP16 too: a Slice the DLA runs in FP16 only stays on it in FP16
    ok(slice_layer(), platform=platform, precision="int8")
    assert trt_layer_type(slice_layer()) == "Slice"


def test_split():
    split = L("Split", [T((1, 16, 8, 8)), C([8, 8], "int64")], [T((1, 8, 8, 8)), T((1, 8, 8, 8))], {"axis": 1})
    ok(split)
    assert trt_layer_type(split) == "Slice"
    split0 = L("Split", [T((2, 16, 8, 8))], [T((1, 16, 8, 8)), T((1, 16, 8, 8))], {"axis": 0})
    bad(split0, "batch axis")


# ----------------------------------------------------------------------------- Softmax


def softmax(shape=(1, 1000, 1, 1), axis=1):
    return L("Softmax", [T(shape)], [T(shape)], {"axis": axis})


def test_softmax_orin_only():
    bad(softmax(), "Softmax not supported on Xavier DLA", platform="xavier-agx")
    bad(softmax(), "Softmax not supported on Xavier DLA", platform="xavier-nx")
    ok(softmax(), platform="orin-agx")
    ok(softmax(), platform="orin-nx-8gb")
    assert trt_layer_type(softmax()) == "SoftMax"


def test_softmax_axis_rules_on_orin():
    ok(softmax((1, 1000), axis=1))
    ok(softmax((1, 8192, 1, 1), axis=1))  # accurate mode: other non-batch dims are 1
    ok(softmax((1, 1024, 4, 4), axis=1))  # optimised mode: axis <= 1024
    bad(softmax((1, 1025, 4, 4), axis=1), "Softmax axis size 1025 > 1024")
    bad(softmax((4, 10, 1, 1), axis=0), "batch axis")
    ok(softmax((1, 4, 8, 8), axis=-1))


@pytest.mark.parametrize("trt", ["8.5", "8.6", "10.3", "10.7"])
def test_fp16_only_dla_layers_stay_on_the_dla_in_an_int8_build(trt):
    """placetune's INT8 builds set FP16 as well (BuilderFlag.INT8 + FP16, trtexec --int8 --fp16): a layer the
    DLA runs in FP16 only falls back to FP16, not FP32 ("Enable Int8 layer selection, with FP32 fallback with
    FP16 fallback if kFP16 also specified", NvInfer.h 8.5-10.x), a precision the DLA runs."""
    ok(softmax(), precision="int8", trt=trt)
    ok(softmax((1, 16, 4, 64), axis=1), precision="int8", trt=trt)  # a detector's DFL softmax
    ok(slice_layer(), precision="int8", trt=trt)
    bad(softmax((1, 16, 4, 8400), axis=1), "8400", precision="int8", trt=trt)  # 640x640's 8400 anchors


# ----------------------------------------------------------------------------- Resize


def resize(factor=2, mode="nearest", ctm="asymmetric", nearest="floor", n_c=(1, 1), hw=8, by="scales", op="Resize"):
    x = T((1, 16, hw, hw))
    y = T((1 * n_c[0], 16 * n_c[1], int(hw * factor), int(hw * factor)))
    attrs = {"mode": mode, "coordinate_transformation_mode": ctm, "nearest_mode": nearest}
    if op == "Upsample":
        attrs = {"mode": mode}
    if by == "scales":
        extra = [C([], "float32"), C([float(n_c[0]), float(n_c[1]), factor, factor])]
    elif by == "sizes":
        extra = [C(list(y.shape), "int64")]
    else:
        extra = []
    return L(op, [x, *extra], [y], attrs)


@pytest.mark.parametrize("platform", BOTH)
def test_resize_nearest_scale(platform):
    ok(resize(32), platform=platform)
    bad(resize(33), "Resize scale 33 not an integer in [1, 32] (nearest)", platform=platform)
    bad(resize(1.5), "Resize scale 1.5 not an integer", platform=platform)
    bad(resize(0.5, hw=16), "Resize scale 0.5", platform=platform)


@pytest.mark.parametrize("platform", BOTH)
def test_resize_linear_scale(platform):
    ok(resize(4, mode="linear", ctm="half_pixel"), platform=platform)
    ok(resize(2, mode="linear", ctm="pytorch_half_pixel"), platform=platform)
    bad(resize(5, mode="linear", ctm="half_pixel"), "Resize scale 5 not an integer in [1, 4] (linear)",
        platform=platform)


def test_resize_other_rules():
    bad(resize(2, n_c=(1, 2)), "on N, C must be 1")
    bad(resize(2, by="sizes"), "output sizes")
    ok(resize(2, by=None))  # scales from the shapes
    bad(resize(2, mode="cubic"), "Resize mode cubic")
    bad(resize(2, mode="linear", ctm="align_corners"), "coordinate_transformation_mode align_corners")
    bad(resize(2, mode="linear", ctm="asymmetric"), "coordinate_transformation_mode asymmetric")
    ok(resize(2, ctm="half_pixel", nearest="round_prefer_floor"))
    ok(resize(2, ctm="half_pixel", nearest="round_prefer_ceil"))
    bad(resize(2, ctm="half_pixel", nearest="floor"), "(half_pixel, floor)")
    bad(resize(2, ctm="align_corners", nearest="round_prefer_floor"), "align_corners")
    ok(resize(2, op="Upsample", by=None))
    bad(resize(2, op="Upsample", mode="linear", by=None), "coordinate_transformation_mode asymmetric")
    three_d = L("Resize", [T((1, 16, 8)), C([1.0, 1.0, 2.0])], [T((1, 16, 16))], {"mode": "nearest"})
    bad(three_d, "exactly 4 scales")


# ----------------------------------------------------------------------------- Shuffle


def reshape(in_shape, out_shape, name="r", producers=(), consumers=()):
    return L("Reshape", [T(in_shape), C(list(out_shape), "int64")], [T(out_shape)], name=name,
             producers=producers, consumers=consumers)


@pytest.mark.parametrize("platform", BOTH)
def test_shuffle_needs_4d(platform):
    ok(reshape((1, 64, 8, 8), (1, 16, 32, 8)), platform=platform)
    # GroupNorm export (seed 002): (N, C, H, W) -> (N, G, -1) and back ran on GPU
    bad(reshape((32, 64, 16, 16), (32, 8, 2048)), "DLA Shuffle needs 4D tensors (got 4D -> 3D)", platform=platform)
    bad(reshape((32, 8, 2048), (32, 64, 16, 16)), "(got 3D -> 4D)", platform=platform)
    tr = L("Transpose", [T((1, 8, 4, 4))], [T((1, 4, 4, 8))], {"perm": [0, 2, 3, 1]})
    ok(tr, platform=platform)
    assert trt_layer_type(tr) == "Shuffle"
    bad(L("Transpose", [T((2, 8, 4, 4))], [T((8, 2, 4, 4))], {"perm": [1, 0, 2, 3]}), "batch axis", platform=platform)
    bad(L("Flatten", [T((1, 8, 4, 4))], [T((1, 128))], {"axis": 1}), "(got 4D -> 2D)", platform=platform)


def test_runtime_reshape_target():
    bad(L("Reshape", [T((1, 8, 4, 4)), T((4,), dtype="int64")], [T((1, 8, 16, 1))]), "runtime tensor")


def test_flatten_before_fully_connected_is_dropped():
    flat = L("Flatten", [T((1, 512, 1, 1))], [T((1, 512))], {"axis": 1}, name="flat", consumers=("fc",))
    fc = L("Gemm", [T((1, 512)), T((10, 512), const=True)], [T((1, 10))], {"transB": 1}, name="fc",
           producers=("flat",))
    ok(flat, model=FakeModel([flat, fc]))
    bad(flat, "needs 4D")  # without the model, the 4D rule applies


def test_flatten_before_fully_connected_stays_on_the_gpu_on_trt10():
    """A published TensorRT 10.3 build of torchvision's ResNet-50 on an AGX Orin put '/fc/Gemm' on the DLA and
    warned "Layer '/Flatten' (SHUFFLE): Unsupported on DLA. Switching ... to GPU.": the rule that lets the
    DLA take the flatten before a fully connected layer holds before TensorRT 10 only."""
    flat = L("Flatten", [T((1, 512, 1, 1))], [T((1, 512))], {"axis": 1}, name="flat", consumers=("fc",))
    fc = L("Gemm", [T((1, 512)), T((10, 512), const=True)], [T((1, 10))], {"transB": 1}, name="fc",
           producers=("flat",))
    model = FakeModel([flat, fc])
    bad(flat, "TensorRT 10", trt="10.3", model=model)
    ok(fc, trt="10.3", model=model)
    ok(flat, trt="8.6", model=model)


def test_reshape_next_to_concat_on_trt10():
    r = reshape((1, 64, 8, 8), (1, 16, 32, 8), name="r", consumers=("cat",))
    cat = L("Concat", [T((1, 16, 32, 8)), T((1, 16, 32, 8))], [T((1, 32, 32, 8))], {"axis": 1}, name="cat",
            producers=("r",))
    model = FakeModel([r, cat])
    bad(r, "directly connected to Slice or Concat", trt="10.3", model=model)
    ok(r, trt="8.6", model=model)
    ok(r, trt="10.3")  # no model, no neighbour rule
    ok(cat, trt="10.3", model=model)  # the reshape is the layer TensorRT moves


# ----------------------------------------------------------------------------- GPU-only ops


def test_instance_norm_and_group_norm_piece():
    x = T((32, 8, 2048))
    inorm = L("InstanceNormalization", [x, T((8,), const=True), T((8,), const=True)], [x], name="in",
              producers=("r",), consumers=("r2",))
    r = reshape((32, 64, 16, 16), (32, 8, 2048), name="r", consumers=("in",))
    bad(inorm, "InstanceNormalization has no DLA implementation")
    bad(inorm, "GroupNorm piece InstanceNormalization has no DLA implementation", model=FakeModel([r, inorm]))
    assert trt_layer_type(inorm, "8.5") == "PluginV2 (InstanceNormalization_TRT)"
    assert trt_layer_type(inorm, "8.6") == "PluginV2 (InstanceNormalization_TRT)"
    assert trt_layer_type(inorm, "10.3") == "Normalization"


@pytest.mark.parametrize("op,fragment", [
    ("LayerNormalization", "LayerNormalization has no DLA"),
    ("Gather", "Gather has no DLA support"),
    ("TopK", "TopK has no DLA support"),
    ("NonMaxSuppression", "NonMaxSuppression has no DLA support"),
    ("Where", "Where (Select) has no DLA support"),
    ("Loop", "Loop has no DLA support"),
    ("Pad", "Pad"),
    ("Cast", "Cast has no DLA support"),
    ("QuantizeLinear", "Q/DQ"),
    ("FooBar", "FooBar has no DLA rule in placetune (treated as GPU-only)"),
    ("Identity", "Identity has no DLA rule in placetune"),
])
@pytest.mark.parametrize("platform", BOTH)
def test_gpu_only_ops(op, fragment, platform):
    bad(unary(op), fragment, platform=platform)


def test_custom_domain_op():
    custom = L("MyOp", [T((1, 4, 4, 4))], [T((1, 4, 4, 4))], domain="com.me")
    bad(custom, "custom op")
    assert trt_layer_type(custom) == "PluginV2 (com.me.MyOp)"


@pytest.mark.parametrize("op,expected", [
    ("Conv", "Convolution"), ("ConvTranspose", "Deconvolution"), ("BatchNormalization", "Scale"),
    ("Relu", "Activation"), ("Elu", "Activation"), ("HardSigmoid", "Activation"), ("Add", "ElementWise"),
    ("Pow", "ElementWise"), ("MaxPool", "Pooling"), ("AveragePool", "Pooling"), ("LRN", "LRN"),
    ("Concat", "Concatenation"), ("Reshape", "Shuffle"), ("Flatten", "Shuffle"), ("Squeeze", "Shuffle"),
    ("Unsqueeze", "Shuffle"), ("Softmax", "SoftMax"), ("Resize", "Resize"), ("Upsample", "Resize"),
    ("PRelu", "ParametricReLU"), ("ReduceMean", "Reduce"), ("ReduceSum", "Reduce"), ("Gather", "Gather"),
    ("LayerNormalization", "Normalization"), ("Equal", "ElementWise (comparison)"),
    ("Less", "ElementWise (comparison)"), ("Pad", "Padding"), ("Cast", "Cast"), ("Erf", "Unary"),
    ("FooBar", "FooBar (no TensorRT DLA mapping)"),
])
def test_trt_layer_type_table(op, expected):
    assert trt_layer_type(unary(op)) == expected


# ----------------------------------------------------------------------------- whole models


def test_check_model_seed_002_groupnorm():
    model_mod = pytest.importorskip("placetune.model")
    m = model_mod.Model.load(DATA / "seed_model_gn.onnx.gz")
    res = check_model(m, "orin-agx", "int8", "8.5")
    assert list(res) == [layer.name for layer in m.layers]
    by_op: dict[str, set[bool]] = {}
    for layer in m.layers:
        by_op.setdefault(layer.op_type, set()).add(res[layer.name].supported)
    # seed 002 log: Conv/Relu on DLA; GroupNorm's reshapes and the InstanceNormalization plugin on GPU
    assert by_op["Conv"] == {True} and by_op["Relu"] == {True}
    assert by_op["InstanceNormalization"] == {False}
    assert res["/cnn/cnn.1/Reshape"].reason == "DLA Shuffle needs 4D tensors (got 4D -> 3D)"
    assert res["/cnn/cnn.1/Reshape_1"].reason == "DLA Shuffle needs 4D tensors (got 3D -> 4D)"
    assert not res["/pool/GlobalAveragePool"].supported
    # on a platform without DLA, or in FP32, nothing is eligible
    assert not any(s.supported for s in check_model(m, "orin-nano").values())
    assert {s.reason for s in check_model(m, "orin-agx", "fp32").values()} == {"DLA runs FP16 or INT8 only (got fp32)"}


def test_check_model_resnet18_only_the_global_pool_is_gpu():
    model_mod = pytest.importorskip("placetune.model")
    m = model_mod.Model.load(DATA / "resnet18.onnx.gz")
    res = check_model(m, "orin-agx", "fp16", "8.6")
    gpu = [name for name, s in res.items() if not s.supported]
    assert gpu == ["/avgpool/GlobalAveragePool"]


@pytest.mark.parametrize("trt", ["8.5", "10.3"])
def test_check_model_vit_linears_are_unverified_and_the_head_is_dla(trt):
    """A ViT as torch exports it: the blocks' Linears are MatMuls on [1, 197, 192] (weights constant), refused
    as unverified like the 3-D Adds around them; the head Gemm on [1, 192] keeps its (published) DLA verdict."""
    model_mod = pytest.importorskip("placetune.model")
    m = model_mod.Model.load("vit-tiny:depth=1")
    res = check_model(m, "orin-agx", "fp16", trt)
    linears = [x.name for x in m.layers if x.op_type == "MatMul" and x.inputs[1].const]
    assert len(linears) == 4
    for name in linears:
        assert not res[name].supported and "3D input (1x197x" in res[name].reason and "unverified" in res[name].reason
    assert res["/head/Gemm"].supported
