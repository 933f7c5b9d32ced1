"""trtexec's placeholder INT8 ranges: one rule for the tensorrt backend's segments and ``placetune build``."""

from __future__ import annotations

from pathlib import Path

from placetune.model.int8_placeholder import placeholder_ranges
from placetune.model.model import Model
from placetune.model.source import load_source
from placetune.placement.cut import cut
from placetune.placement.placement import Placement

DATA = Path(__file__).parent / "data"


def _old_rule(source):  # the rule as the pipeline wrote it before it had one home (sampleEngines.cpp)
    pooling = {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LpPool", "GlobalLpPool"}
    out = {i.name: 2.0 for i in source.graph.input}
    for node in source.graph.node:
        for o in node.output:
            if o:
                out.setdefault(o, 2.0 if node.op_type in pooling else 4.0)
    return out


def test_the_whole_network_and_its_segments_give_every_tensor_one_range():
    model = Model.load(DATA / "seed_block.onnx.gz")
    source = load_source(model)
    whole = placeholder_ranges([source.graph])
    assert whole == _old_rule(source)
    assert set(whole.values()) <= {2.0, 4.0} and whole[source.graph.input[0].name] == 2.0
    placement = Placement(model, {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1"})
    segments = [c.proto.graph for c in cut(model, placement, source)]
    assert len(segments) >= 2
    together = placeholder_ranges(segments)
    # a cut tensor is a segment's input and another's output: it keeps its producer's range
    assert {k: together[k] for k in whole if k in together} == {k: whole[k] for k in whole if k in together}


def _input_into_concat():
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8, 8])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 6, 8, 8])
    nodes = [helper.make_node("Concat", ["x", "y"], ["cat"], axis=1, name="cat"),
             helper.make_node("Relu", ["y"], ["ry"], name="relu"),
             helper.make_node("Add", ["cat", "cat"], ["out"], name="add")]
    return helper.make_graph(nodes, "g", [x, y], [out])


def test_a_network_input_read_first_by_a_concat_gets_the_concat_range():
    """trtexec's setTensorDynamicRange has no loop over network inputs: it sets, layer by layer, each
    unset input +-2, or +-4 into a concatenation, so an input whose first reader is a Concat is +-4."""
    ranges = placeholder_ranges([_input_into_concat()])
    assert ranges["x"] == 4.0 and ranges["y"] == 4.0  # y: the Concat reads it before the Relu
    assert ranges["cat"] == 4.0 and ranges["ry"] == 4.0


class _T:
    def __init__(self, name):
        self.name, self.dynamic_range = name, None

    def set_dynamic_range(self, lo, hi):
        self.dynamic_range = (lo, hi)


class _L:
    def __init__(self, kind, ins, outs):
        self.type, self.ins, self.outs = kind, ins, outs
        self.num_inputs, self.num_outputs = len(ins), len(outs)

    def get_input(self, i):
        return self.ins[i]

    def get_output(self, i):
        return self.outs[i]


class _Net:
    def __init__(self, inputs, layers):
        self.inputs, self.layers = inputs, layers
        self.num_inputs, self.num_layers = len(inputs), len(layers)

    def get_input(self, i):
        return self.inputs[i]

    def get_layer(self, i):
        return self.layers[i]


class _Trt:
    class LayerType:
        CONCATENATION, POOLING, CONVOLUTION = "CONCAT", "POOL", "CONV"


def test_the_worker_gives_a_network_input_read_first_by_a_concat_the_concat_range():
    """As trtexec (TensorRT release/8.5 samples/common/sampleEngines.cpp:384-399): before, the worker
    set every network input +-2 ahead of the layers, so its INT8 engine quantised such an input with
    half trtexec's scale."""
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "placetune" / "backends" / "tensorrt"))
    try:
        import worker_build as wb
    finally:
        sys.path.pop(0)
    x, y, cat, conv, unread = _T("x"), _T("y"), _T("cat"), _T("conv"), _T("unread")
    net = _Net([x, y, unread], [_L("CONCAT", [x, y], [cat]), _L("CONV", [y], [conv])])
    wb._set_dynamic_ranges(net, _Trt)
    assert x.dynamic_range == (-4.0, 4.0) and y.dynamic_range == (-4.0, 4.0)
    assert cat.dynamic_range == (-4.0, 4.0) and conv.dynamic_range == (-4.0, 4.0)
    assert unread.dynamic_range == (-2.0, 2.0)  # no layer reads it: the +-2 of an input


def test_an_unsorted_graph_is_read_in_the_order_tensorrt_makes_its_layers():
    """onnx-tensorrt imports nodes in its toposort's order (toposort.hpp: a post-order from each node
    in turn), so trtexec's walk meets the layers in that order. Here the Concat comes first in the
    file but reads the Relu's output: TensorRT makes the Relu first, which reads ``y`` first (+-2);
    read in file order the Concat was its first reader (+-4). A sorted graph keeps its order."""
    from onnx import TensorProto, helper

    from placetune.model.int8_placeholder import parser_order

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8, 8])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 9, 8, 8])
    nodes = [helper.make_node("Concat", ["y", "ry", "x"], ["out"], axis=1, name="cat"),
             helper.make_node("Relu", ["y"], ["ry"], name="relu")]
    graph = helper.make_graph(nodes, "g", [x, y], [out])
    assert [n.name for n in parser_order(graph.node)] == ["relu", "cat"]
    ranges = placeholder_ranges([graph])
    assert ranges["y"] == 2.0 and ranges["x"] == 4.0
    sorted_graph = _input_into_concat()
    assert list(parser_order(sorted_graph.node)) == list(sorted_graph.node)
