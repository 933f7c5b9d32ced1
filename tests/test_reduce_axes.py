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
from placetune.model.misreads import old_parser_misread
from tests.fakes import fake_env

DATA = Path(__file__).parent / "data"


def _dynamo_mobilenet() -> onnx.ModelProto:
    return onnx.load_from_string(gzip.decompress((DATA / "mobilenet_v2_dynamo.onnx.gz").read_bytes()))


def test_a_dynamo_export_s_reduce_mean_axes_input_is_named_for_8_5_and_8_6_only():
    proto = _dynamo_mobilenet()  # opset 18: its global average pool is ReduceMean(x, axes=[2, 3])
    for version in ("8.5.2", "8.6.2"):
        why = old_parser_misread(proto, version)
        assert why and "'node_mean' (ReduceMean) has its axes as an input" in why and "opset 17" in why, why
    assert old_parser_misread(proto, "10.3.0") is None and old_parser_misread(proto, "11.4.1") is None
    assert old_parser_misread(version_converter.convert_version(proto, 17), "8.5.2") is None  # the advised fix


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
    assert bool(old_parser_misread(proto, "8.5.2")) is refused


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


def _se_block(path: Path) -> None:
    """Conv -> a squeeze-excite style ReduceMean over H, W (axes as an input, opset 18) -> Mul."""
    w = nh.from_array(np.random.default_rng(0).standard_normal((8, 3, 3, 3)).astype(np.float32), "W")
    axes = nh.from_array(np.array([2, 3], np.int64), "axes")
    nodes = [h.make_node("Conv", ["x", "W"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             h.make_node("ReduceMean", ["c", "axes"], ["m"], name="mean", keepdims=1),
             h.make_node("Mul", ["c", "m"], ["y"], name="scale")]
    graph = h.make_graph(nodes, "se", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 16, 16])],
                         [h.make_tensor_value_info("y", T.FLOAT, [1, 8, 16, 16])], [w, axes])
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 18)]), str(path))


def test_placetune_build_of_a_plan_refuses_it_on_a_tensorrt_8_5_board(tmp_path, monkeypatch, capsys):
    """A plan tuned elsewhere (here on the simulator) and built on JetPack 5.1: the mean broadcast into
    the Mul still builds there, reduced over every axis. Refused in one line, nothing built."""
    import placetune
    from placetune import Placement
    from placetune.cli.main import main
    from placetune.plan.build import build_plan
    from tests.test_build_board import AGX_ORIN
    from tests.test_board_module import _tree
    from placetune.backends.tensorrt import env as trt_env

    model = tmp_path / "se.onnx"
    _se_block(model)
    url = f"sqlite:///{tmp_path}/pt.db"
    with placetune.Evaluator(str(model), "orin-agx", mode="engine", precision="fp16", store=url, study="s") as ev:
        m = ev.evaluate(Placement(ev.model, {"conv": "DLA0"}), agent="t", trial_number=0)
    out = tmp_path / "plan"
    assert main(["export", "--study", "s", "--storage", url, "--format", "trtexec", "-o", str(out),
                 "--measurement", str(m.extra["_id"])]) == 0, capsys.readouterr()
    monkeypatch.setattr(trt_env, "DEVICE_TREE", _tree(tmp_path / "dt", *AGX_ORIN))
    be = TensorRTBackend(worker_env=fake_env("8.5.2"), cache_dir=tmp_path / "cache")
    try:
        with pytest.raises(ModelError, match="'mean' .ReduceMean. has its axes as an input.*TensorRT 8.5.2"):
            build_plan(out, backend=be)
    finally:
        be.close()
    assert not list(out.glob("*.engine")) and not (out / "build.json").exists()


def test_the_trtexec_backend_refuses_it_on_a_tensorrt_8_5_board(tmp_path):
    from tests.test_trtexec import _backend as trtexec_backend

    path = tmp_path / "se.onnx"
    _se_block(path)
    be = trtexec_backend(tmp_path, "8.5.2")
    with pytest.raises(ModelError, match="'mean' .ReduceMean. has its axes as an input.*TensorRT 8.5.2"):
        Evaluator(str(path), "orin-agx", backend=be, store=None, precision="fp16", trt_version="8.5")
