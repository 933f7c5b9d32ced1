"""Explicit quantization: which layers of a Q/DQ model TensorRT runs in INT8.

A model with QuantizeLinear / DequantizeLinear nodes is built by TensorRT with explicit
quantization: the Q/DQ nodes say where INT8 is allowed, whatever the builder's precision flags.
TensorRT fuses a DequantizeLinear that feeds a convolution or GEMM into it (an INT8 input), a
DequantizeLinear of constant weights into its weights (INT8 weights), and the Q/DQ pair around a
pooling or element-wise layer into that layer; every layer outside such a region runs in the
higher precision (TensorRT developer guide, "Explicit Quantization": "Q/DQ layers control the
compute and data precision of a network"). On the DLA the same holds: its INT8 layers take their
scales from the Q/DQ nodes (DLA-SW's qdq-translator turns them into a calibration cache), so a
layer without them runs in FP16 there.

:func:`int8_layers` reads the graph as the ONNX file has it (weight DequantizeLinear nodes are folded
away by :class:`~placetune.model.model.Model`) and names the INT8 layers by their first output
tensor, which the model's layers keep.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnx

    from placetune.model.model import Model

__all__ = ["QDQ_OPS", "is_qdq_model", "has_fp16_tensor", "int8_outputs", "int8_layers"]

#: The ONNX ops of explicit quantization.
QDQ_OPS = ("QuantizeLinear", "DequantizeLinear")
#: Layers whose data input and weights TensorRT quantizes when both come through DequantizeLinear.
_WEIGHTED = {"Conv", "ConvTranspose", "Gemm", "MatMul"}
#: Layers TensorRT runs in INT8 when every activation input comes through DequantizeLinear (or from
#: an INT8 layer whose output it fuses, the epilogue ops), in the Q/DQ region of the graph.
_QUANTIZABLE = {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Add", "Sub", "Mul", "Concat",
                "Relu", "Clip", "LeakyRelu", "Sigmoid", "Tanh", "PRelu", "BatchNormalization", "HardSwish",
                "HardSigmoid", "Resize", "Upsample", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze"}
_EPILOGUE = {"Relu", "Clip", "LeakyRelu", "Sigmoid", "Tanh", "PRelu", "BatchNormalization", "Add", "Sub", "Mul",
             "HardSwish", "HardSigmoid"}


def is_qdq_model(proto: "onnx.ModelProto") -> bool:
    """True when the graph has QuantizeLinear / DequantizeLinear nodes."""
    return any(n.op_type in QDQ_OPS for n in proto.graph.node)


def has_fp16_tensor(proto: "onnx.ModelProto") -> bool:
    """True when some tensor of the graph is FLOAT16: a graph input, output or value_info, an initializer, a
    Constant's value, a Cast to it or a Q/DQ scale of it. On a strongly typed TensorRT (11 on) a Q/DQ model
    with none builds every layer outside its Q/DQ regions in FP32."""
    fp16 = 10  # onnx.TensorProto.FLOAT16
    g = proto.graph
    if any(v.type.tensor_type.elem_type == fp16 for v in (*g.input, *g.output, *g.value_info)):
        return True
    if any(t.data_type == fp16 for t in g.initializer):
        return True
    for n in g.node:
        for a in n.attribute:
            if (n.op_type == "Cast" and a.name == "to" and a.i == fp16) or (a.name == "value" and a.t.data_type == fp16):
                return True
    return False


def int8_outputs(proto: "onnx.ModelProto") -> frozenset[str]:
    """First output tensor of every node TensorRT runs in INT8 under the graph's Q/DQ nodes.

    Rules: a Conv / ConvTranspose / Gemm / MatMul is INT8 when its data input comes from a
    DequantizeLinear of an activation and its second input from a DequantizeLinear of constant
    weights (or, for a MatMul of two activations, of an activation); another quantizable layer
    (pooling, element-wise, activation, concat, shape ops) is INT8 when each of its activation inputs
    comes from a DequantizeLinear of an activation or from an INT8 layer it fuses into (an epilogue
    op after an INT8 convolution). Everything else runs in the higher precision.
    """
    g = proto.graph
    const = {t.name for t in g.initializer}
    for n in g.node:
        if n.op_type == "Constant":
            const.update(o for o in n.output if o)
    producer: dict[str, "onnx.NodeProto"] = {o: n for n in g.node for o in n.output if o}

    def rooted_in_const(name: str, depth: int = 0) -> bool:
        """The tensor is (a Q/DQ / Identity chain of) a constant: quantized weights."""
        if name in const:
            return True
        p = producer.get(name)
        if p is None or depth > 4 or p.op_type not in (*QDQ_OPS, "Identity", "Transpose", "Reshape"):
            return False
        return bool(p.input) and rooted_in_const(p.input[0], depth + 1)

    def dq_of_activation(name: str) -> bool:
        p = producer.get(name)
        return p is not None and p.op_type == "DequantizeLinear" and not rooted_in_const(p.input[0])

    def dq_of_weights(name: str) -> bool:
        p = producer.get(name)
        return p is not None and p.op_type == "DequantizeLinear" and rooted_in_const(p.input[0])

    out: set[str] = set()
    for n in g.node:  # ONNX nodes are in topological order
        if not n.output or not n.output[0] or n.op_type in QDQ_OPS:
            continue
        ins = [x for x in n.input if x]
        if n.op_type in _WEIGHTED:
            if len(ins) < 2 or not dq_of_activation(ins[0]):
                continue
            if dq_of_weights(ins[1]) or (n.op_type == "MatMul" and dq_of_activation(ins[1])):
                out.add(n.output[0])
            continue
        if n.op_type not in _QUANTIZABLE:
            continue
        acts = [x for x in ins if not rooted_in_const(x)]
        if not acts:
            continue
        if all(dq_of_activation(x) or (x in out and n.op_type in _EPILOGUE) for x in acts):
            out.add(n.output[0])
    return frozenset(out)


def int8_layers(model: "Model") -> frozenset[str] | None:
    """Names of the model's layers that run INT8 under its Q/DQ nodes; None when it has none.

    The graph is read from the model's file where it has one (its weight DequantizeLinear nodes are
    still there); a model loaded from a proto gives only its folded graph, where a constant weight
    of a layer whose data input is dequantized counts as quantized.
    """
    proto, folded = model.proto, True
    if model.proto is not None and not is_qdq_model(model.proto):
        return None  # activation Q/DQ nodes are never folded: no Q/DQ left means none at all
    if model.path is not None:
        from placetune.errors import ModelError
        from placetune.model.onnx_io import read_model_proto

        try:
            proto, folded = read_model_proto(model.path)[0], False
        except ModelError:  # the file went away since it was loaded: its folded graph is what is left
            pass
    if proto is None or not is_qdq_model(proto):
        return None
    if folded:  # weights are plain constants there; treat them as quantized
        proto = _weights_dequantized(proto)
    outs = int8_outputs(proto)
    return frozenset(layer.name for layer in model.layers if layer.outputs and layer.outputs[0].name in outs)


def _weights_dequantized(proto: "onnx.ModelProto") -> "onnx.ModelProto":
    """A copy of a folded Q/DQ graph whose weighted layers read their constant weights through a
    DequantizeLinear (what the folding removed), so :func:`int8_outputs` sees them as quantized."""
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(proto)
    const = {t.name for t in m.graph.initializer}
    nodes = []
    for n in m.graph.node:
        if n.op_type in _WEIGHTED and len(n.input) > 1 and n.input[1] in const:
            w = n.input[1]
            nodes.append(onnx.helper.make_node("DequantizeLinear", [w, w], [f"{w}__dq"], name=f"{w}__dq"))
            n.input[1] = f"{w}__dq"
        nodes.append(n)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    return m
