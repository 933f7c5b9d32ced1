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
