"""Detector tails found in real exports that the earlier rounds did not take the whole way (check, tune,
export, build on the TensorRT doubles, the runtime with one frame), rebuilt here as small graphs with
``onnx.helper`` so they always run. The real exports they come from run in tests/test_deploy_userpath.py
when a Python with ultralytics and torchvision is given in PLACETUNE_ULTRALYTICS_PYTHON."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.test_deploy import _study
from tests.test_deploy_userpath import RUN, _with_doubles


def _rotated_nms_tail(path: Path) -> Path:
    """A backbone on the DLA, then the pairwise part of the rotated NMS an Ultralytics ``nms=True`` export
    of an oriented-box (OBB) model writes: the box-to-box matrix (a MatMul of the boxes with their
    transpose), its upper triangle through ``Trilu`` and the boxes it keeps through ``LessOrEqual``."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * .3, "w"),
             numpy_helper.from_array(np.array([1, 8, 256], np.int64), "shp"),
             numpy_helper.from_array(np.array(1, np.int64), "one"),
             numpy_helper.from_array(np.array(0.5, np.float32), "iou")]
    n = helper.make_node
    nodes = [n("Conv", ["input", "w"], ["c"], name="/conv", pads=[1, 1, 1, 1]),
             n("Relu", ["c"], ["r"], name="/relu"),
             n("Reshape", ["r", "shp"], ["flat"], name="/nms/Reshape"),
             n("Transpose", ["flat"], ["flatT"], name="/nms/Transpose", perm=[0, 2, 1]),
             n("MatMul", ["flat", "flatT"], ["pairs"], name="/nms/MatMul"),
             n("Sigmoid", ["pairs"], ["iou_all"], name="/nms/Sigmoid"),
             n("Trilu", ["iou_all", "one"], ["upper"], name="/nms/Trilu", upper=1),
             n("LessOrEqual", ["upper", "iou"], ["keep"], name="/nms/LessOrEqual"),
             n("Cast", ["keep"], ["output"], name="/nms/Cast", to=TensorProto.FLOAT)]
    graph = helper.make_graph(nodes, "obb_nms", [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                                               [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 8, 8])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_an_oriented_box_nms_tail_builds_and_runs(tmp_path):
    """The plan of a YOLO11-OBB ``nms=True`` export did not build: the TensorRT doubles' parser had no
    Trilu nor LessOrEqual (onnx-tensorrt imports both from TensorRT 8.5: its docs/operators.md), so the
    build stopped at "Plugin not found" and the plan's engines and runtime were never checked."""
    model = _rotated_nms_tail(tmp_path / "obb_nms.onnx")
    folder = _study(tmp_path, model, "pipeline", {"/conv": "DLA0", "/relu": "DLA0"})
    built = _with_doubles([sys.executable, "-m", "placetune.cli", "build", folder], tmp_path)
    assert built.returncode == 0, built.stderr[-2000:]
    report = json.loads((Path(folder) / "build.json").read_text())
    assert [e["device"] for e in report["engines"]] == ["DLA0", "GPU"]
    run = _with_doubles([sys.executable, "-c", RUN, folder, str(model), "compare"], tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout)
    assert got["outputs"] == {"output": [1, 8, 8]} and got["err"]["output"] < 1e-6, got
