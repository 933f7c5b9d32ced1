"""Reduce axes that the ONNX parser of TensorRT 8.5/8.6 ignores: refused on the board, not timed.

onnx-tensorrt 8.5-GA and 8.6-GA import ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1,
ReduceL2 and ReduceSumSquare with ``reduceTensor(ctx, node, input, op)`` (builtin_op_importers.cpp
8.5-GA:3604-3680), never passing an ``axes`` input (opset 18 on), so such a node is reduced over
every axis: the engine builds and runs, but it is another network than the model. 10.0-GA reads
the input. Checked against the parser's published sources only (no TensorRT here).
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from onnx import version_converter

from placetune import Evaluator
from placetune.backends.tensorrt.backend import TensorRTBackend
from placetune.errors import ModelError
from placetune.model.parsable import ignored_reduce_axes
from tests.fakes import fake_env

DATA = Path(__file__).parent / "data"


def _dynamo_mobilenet() -> onnx.ModelProto:
    return onnx.load_from_string(gzip.decompress((DATA / "mobilenet_v2_dynamo.onnx.gz").read_bytes()))


def test_a_dynamo_export_s_reduce_mean_axes_input_is_named_for_8_5_and_8_6_only():
    proto = _dynamo_mobilenet()  # opset 18: its global average pool is ReduceMean(x, axes=[2, 3])
    for version in ("8.5.2", "8.6.2"):
        why = ignored_reduce_axes(proto, version)
        assert why and "'node_mean' (ReduceMean) has its axes as an input" in why and "opset 17" in why, why
    assert ignored_reduce_axes(proto, "10.3.0") is None and ignored_reduce_axes(proto, "11.4.1") is None
    assert ignored_reduce_axes(version_converter.convert_version(proto, 17), "8.5.2") is None  # the advised fix


@pytest.mark.parametrize("op, attrs, inputs, refused", [
    ("ReduceMax", {}, 2, True),
    ("ReduceSum", {}, 2, False),  # its importer passes the axes input on (8.5-GA:3665-3668)
    ("ReduceMean", {"noop_with_empty_axes": 1}, 1, True),  # the identity, reduced over every axis
    ("ReduceMean", {}, 1, False),  # every axis, as the parser does
])
def test_each_reduce_form(op, attrs, inputs, refused):
    axes = nh.from_array(np.array([1], np.int64), "axes")
    node = h.make_node(op, ["x", "axes"][:inputs], ["y"], name="r", **attrs)
    graph = h.make_graph([node], "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 4, 8])],
                         [h.make_tensor_value_info("y", T.FLOAT, None)], [axes] if inputs == 2 else [])
    proto = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
    assert bool(ignored_reduce_axes(proto, "8.5.2")) is refused


def test_the_tensorrt_backend_refuses_it_on_a_tensorrt_8_5_board(tmp_path):
    """Before: the 8.5 board built and timed the model with a [1, 1, 1, 1] mean feeding its
    classifier, and the night recorded those figures as the model's."""
    path = tmp_path / "mobilenet_v2_dynamo.onnx"
    onnx.save(_dynamo_mobilenet(), str(path))
    be = TensorRTBackend(worker_env=fake_env("8.5.2"), cache_dir=tmp_path / "cache")
    with pytest.raises(ModelError) as e:
        Evaluator(str(path), "orin-agx", be, store=None, precision="fp16", trt_version="8.5")
    assert "TensorRT 8.5.2 ignores" in str(e.value) and "\n" not in str(e.value)
    be10 = TensorRTBackend(worker_env=fake_env("10.3.0"), cache_dir=tmp_path / "cache10")
    Evaluator(str(path), "orin-agx", be10, store=None, precision="fp16", trt_version="10.3")  # TensorRT 10 reads it
