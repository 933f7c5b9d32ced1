"""Explicit quantization (Q/DQ models): which layers the simulator runs INT8 and what they cost.

A real ONNX model built with onnx.helper: Q/DQ pairs around the first two convolutions (with
DequantizeLinear int8 weights) and the max-pool, a third convolution and the classifier outside
any Q/DQ region."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from placetune import Model
from placetune.backends.simulate.costs import cost_table
from placetune.backends.simulate.graph import graph_info
from placetune.backends.simulate.simulator import SimulatedJetson
from placetune.hardware.platforms import get_platform
from placetune.model.qdq import int8_layers
from placetune.placement.placement import Placement
from placetune.placement.realise import realise
from placetune.settings import Settings

ORIN = get_platform("orin-agx")
INT8 = {"conv1", "relu1", "conv2", "relu2", "pool"}


def _qdq_net(float_weights_conv2: bool = False) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    inits, nodes = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    s, z = const("s", np.float32(0.05)), const("z", np.int8(0))

    def q_dq(x, tag):
        nodes.append(helper.make_node("QuantizeLinear", [x, s, z], [f"{tag}_q"], name=f"{tag}_Q"))
        nodes.append(helper.make_node("DequantizeLinear", [f"{tag}_q", s, z], [f"{tag}_dq"], name=f"{tag}_DQ"))
        return f"{tag}_dq"

    def weights(name, shape, quantized=True):
        if not quantized:
            return const(f"{name}_w", rng.standard_normal(shape).astype(np.float32))
        wq = const(f"{name}_int8", rng.integers(-127, 127, size=shape).astype(np.int8))
        nodes.append(helper.make_node("DequantizeLinear", [wq, const(f"{name}_scale", np.float32(0.01))],
                                      [f"{name}_w"], name=f"{name}_wDQ"))
        return f"{name}_w"

    def conv(x, name, shape, quantized=True):
        nodes.append(helper.make_node("Conv", [x, weights(name, shape, quantized)], [f"{name}_y"], name=name,
                                      pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", [f"{name}_y"], [f"{name}_r"], name=name.replace("conv", "relu")))
        return f"{name}_r"

    x = conv(q_dq("input", "in"), "conv1", (32, 3, 3, 3))
    x = conv(q_dq(x, "a1"), "conv2", (64, 32, 3, 3), quantized=not float_weights_conv2)
    x = conv(x, "conv3", (64, 64, 3, 3), quantized=False)  # outside any Q/DQ region
    nodes.append(helper.make_node("MaxPool", [q_dq(x, "a3")], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]))
    nodes.append(helper.make_node("GlobalAveragePool", ["p"], ["gap"], name="gap"))
    nodes.append(helper.make_node("Flatten", ["gap"], ["f"], name="flatten"))
    nodes.append(helper.make_node("MatMul", ["f", const("fc_w", rng.standard_normal((64, 10)).astype(np.float32))],
                                  ["out"], name="fc"))
    graph = helper.make_graph(nodes, "qdq_net", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 64, 64])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return model


@pytest.fixture(scope="module")
def qdq(tmp_path_factory):
    path = tmp_path_factory.mktemp("qdq") / "qdq_net.onnx"
    onnx.save(_qdq_net(), path)
    return Model.load(path)


def test_the_q_dq_placement_says_which_layers_run_int8(qdq, tmp_path):
    """Convolutions with a dequantized input and dequantized weights, their fused activations and the
    pooling between a Q/DQ pair: INT8; the convolution and classifier outside Q/DQ: not. From a file
    and from a proto alike; a model without Q/DQ nodes has no such marking."""
    assert int8_layers(qdq) == INT8
    assert int8_layers(Model.load(_qdq_net())) == INT8
    g = graph_info(qdq)
    assert {n for n, q in zip(g.names, g.qdq_int8) if q} == INT8
    path = tmp_path / "float_weights.onnx"
    onnx.save(_qdq_net(float_weights_conv2=True), path)  # a dequantized input, float weights: not INT8
    assert int8_layers(Model.load(path)) == INT8 - {"conv2", "relu2"}
    assert graph_info(Model.load("resnet18")).qdq_int8 is None


def test_an_int8_engine_of_a_q_dq_model_costs_other_layers_at_fp16(qdq):
    """On the GPU and on the DLA: the marked layers keep their INT8 costs, every other layer has its
    fp16 costs (whatever the precision flag says); Q/DQ nodes cost nothing (fused)."""
    t8, t16 = cost_table(qdq, ORIN, "int8", 1, 1.0), cost_table(qdq, ORIN, "fp16", 1, 1.0)
    g = t8.g
    for i, name in enumerate(g.names):
        if g.ops[i] in ("QuantizeLinear", "DequantizeLinear"):
            assert g.cls[i] == "free" and (t8.t_alone[:, i] == 0).all()
        elif name in INT8:
            assert t8.t_alone[1, i] < t16.t_alone[1, i], name
            if g.cls[i] == "conv":
                assert t8.t_alone[1, i] < 0.5 * t16.t_alone[1, i], name  # Orin DLA: INT8 far faster
        else:
            assert np.array_equal(t8.t_alone[:, i], t16.t_alone[:, i]), name
            assert np.array_equal(t8.b_alone[:, i], t16.b_alone[:, i]), name
    # a non-Q/DQ model's INT8 engine runs the same convolution at INT8
    plain = cost_table(Model.load("resnet18"), ORIN, "int8", 1, 1.0)
    conv = plain.g.index[next(n for n, c in zip(plain.g.names, plain.g.cls) if c == "conv")]
    assert plain.t_alone[1, conv] < cost_table(Model.load("resnet18"), ORIN, "fp16", 1, 1.0).t_alone[1, conv]


def test_a_q_dq_model_is_simulated_on_gpu_and_dla(qdq):
    for p in (Placement.all_gpu(qdq), Placement.all_dla(qdq)):
        r = realise(p, ORIN, precision="int8")
        m = SimulatedJetson().measure(r, ORIN, Settings(precision="int8"))
        assert m.ok and m.simulated and m.latency_ms["median"] > 0


# ----------------------------------------------------------------------------- the DLA checker and Q/DQ nodes

_QDQ_NODES = {"in_Q", "in_DQ", "a1_Q", "a1_DQ", "a3_Q", "a3_DQ"}
_CONVS = {"conv1", "conv2", "conv3"}
_TO_POOL = ["in_Q", "in_DQ", "conv1", "relu1", "a1_Q", "a1_DQ", "conv2", "relu2", "conv3", "relu3", "a3_Q", "a3_DQ",
            "pool"]


def test_q_dq_nodes_are_fused_on_the_dla_of_tensorrt_11_4_1(qdq):
    """TensorRT 11.4.1 (JetPack 7.2.2, AGX Orin): strongly typed DLA networks take their INT8 from the Q/DQ
    nodes, which TensorRT fuses into the layers they scale. The checker says so (with its source) and the
    convolutions are judged by their own rule; a DLA placement from the input through the pooling is one
    DLA loadable. Before 11.4.1 the Q/DQ nodes stay GPU-only with the reason that cites why, and the same
    placement splits into one loadable per stretch between them."""
    from placetune.hardware.dla import check_model

    fused = check_model(qdq, ORIN, "int8", "11.4.1")
    for name in _QDQ_NODES:
        assert fused[name].supported, name
        assert "fused" in fused[name].reason and "11.4.1" in fused[name].reason
    assert all(fused[c].supported and fused[c].reason is None for c in _CONVS)
    placement = Placement(qdq, {n: "DLA0" for n in _TO_POOL})
    r = realise(placement, ORIN, precision="int8", trt_version="11.4.1")
    assert r.fallback == {} and r.loadables["DLA0"] == 1

    for version, source in (("8.6", "does not support Explicit Quantization"), ("10.3", "no source says")):
        refused = check_model(qdq, ORIN, "int8", version)
        for name in _QDQ_NODES:
            assert not refused[name].supported and source in refused[name].reason, (version, name)
        assert all(refused[c].supported for c in _CONVS)
        r = realise(placement, ORIN, precision="int8", trt_version=version)
        assert set(r.fallback) == _QDQ_NODES
        assert r.loadables["DLA0"] == 3  # conv1+relu1 | conv2..relu3 | pool


def test_an_asymmetric_q_dq_node_is_not_fused_without_the_parser_flag(tmp_path):
    """A UINT8 zero point needs kENABLE_UINT8_AND_ASYMMETRIC_QUANTIZATION_DLA, which placetune's builds do not
    set: that node stays GPU-only on 11.4.1, the symmetric ones are fused. (A non-zero zero point is refused
    at load: the parser imports none without that flag, tests/test_qdq_symmetric.py.)"""
    from placetune.hardware.dla import check_model

    proto = _qdq_net()
    for init in proto.graph.initializer:
        if init.name == "z":
            init.CopyFrom(numpy_helper.from_array(np.uint8(0), "z"))
    path = tmp_path / "asymmetric.onnx"
    onnx.save(proto, path)
    verdict = check_model(Model.load(path), ORIN, "int8", "11.4.1")
    for name in _QDQ_NODES:
        assert not verdict[name].supported
        assert "kENABLE_UINT8_AND_ASYMMETRIC_QUANTIZATION_DLA" in verdict[name].reason


def test_int8_of_an_fp32_qdq_model_on_tensorrt_11_is_said_at_start(tmp_path, caplog):
    """TensorRT 11 builds strongly typed: a Q/DQ model with no FP16 tensor runs every layer outside its Q/DQ
    regions in FP32, which the DLA does not run (11.4.1 'Strongly Typed Networks for DLA'), so those layers
    fall back to the GPU in every build of the night. Said at start, not refused (the Q/DQ regions still build
    INT8); not said for TensorRT 10.x (--int8 --fp16 runs them in FP16) nor for a model with FP16 tensors."""
    from types import SimpleNamespace

    from placetune.backends.jetson import refuse_untyped_int8
    from placetune.model.qdq import has_fp16_tensor

    path = tmp_path / "qdq.onnx"
    onnx.save(_qdq_net(), str(path))
    model = Model.load(str(path))
    board = SimpleNamespace(simulated=False)
    said = "the model has Q/DQ nodes but no FP16 tensor"
    with caplog.at_level("WARNING"):
        refuse_untyped_int8(board, model, "int8", {"trt_version": "10.3.0"})
        refuse_untyped_int8(board, model, "fp16", {"trt_version": "11.4.1"})
    assert said not in caplog.text
    with caplog.at_level("WARNING"):
        refuse_untyped_int8(board, model, "int8", {"trt_version": "11.4.1"})
    assert said in caplog.text and "INT8 on TensorRT 11.4.1" in caplog.text
    half = _qdq_net()
    half.graph.input[0].type.tensor_type.elem_type = TensorProto.FLOAT16
    assert has_fp16_tensor(half) and not has_fp16_tensor(_qdq_net())
