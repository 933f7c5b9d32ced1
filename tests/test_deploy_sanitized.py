"""Exports for deployment after the graph tools NVIDIA's TensorRT workflow runs on them, and the graph forms of
TensorRT's own samples, rebuilt as small graphs with ``onnx.helper`` so they always run.

* ``polygraphy surgeon sanitize --fold-constants --override-input-shapes images:[1,3,320,320]`` (the step
  TensorRT's docs give for a dynamic export) writes every tensor's shape from ONNX's own inference: the sizes
  after an NMS get fresh symbols (``unk__100``) that no longer name the ``NonZero`` they come from.
* TensorRT's ``samples/python/efficientdet/create_onnx.py`` and ``samples/python/detectron2/create_onnx.py``
  (NVIDIA/TensorRT, release/10.3): ``EfficientNMS_TRT`` with a third (anchors) input, the outputs declared
  with a symbolic batch ``N``, and plugins in the middle of the network (``PyramidROIAlign_TRT``).
"""

from __future__ import annotations

import json
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from placetune.cli.main import main
from placetune.model.model import Model
from tests.test_deploy_userpath import _EXPORT
from tests.test_detector import _ultralytics_python

n = helper.make_node


def _init(name, value, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def _nms_rows_expanded(path):
    """The rows an Ultralytics ``nms=True`` export picks after its score threshold, as polygraphy's sanitize
    leaves them: ``NonZero`` of the scores over the threshold, the classes picked by ``GatherND``, reshaped to
    ``[-1, 1]`` and expanded to ``[n, 4]`` (torch's ``expand(-1, 4)``: the target shape is
    ``Where(Equal(shape, -1), 1, shape)`` with ``shape = Concat(Shape(picked)[0], 4)``, the ``Equal`` folded
    to a constant); then the first ``max_det`` rows, flattened and padded back to ``max_det`` rows by a ``Pad``
    computed from their ``Shape``. No value_info links the sizes to the ``NonZero`` (ONNX's fresh symbols)."""
    rng = np.random.default_rng(0)
    inits = [_init("w", rng.standard_normal((5, 3, 1, 1))), _init("to3d", [1, 5, 16], np.int64),
             _init("s4", [4], np.int64), _init("s5", [5], np.int64), _init("ax2", [2], np.int64),
             _init("zero", 0, np.int64), _init("thr", 0.25), _init("col", [-1, 1], np.int64),
             _init("ax0", [0], np.int64), _init("four", [4], np.int64), _init("eq", [False, False], np.bool_),
             _init("ones", [1, 1], np.int64)]
    nodes = [n("Conv", ["images", "w"], ["f"], name="/model/Conv"),
             n("Reshape", ["f", "to3d"], ["f3"], name="/model/Reshape"),
             n("Transpose", ["f3"], ["rows"], name="/Transpose", perm=[0, 2, 1]),
             n("Slice", ["rows", "s4", "s5", "ax2"], ["score"], name="/Slice_1"),
             n("ReduceMax", ["score"], ["smax"], name="/ReduceMax", axes=[-1], keepdims=0),
             n("ArgMax", ["rows"], ["cls"], name="/ArgMax", axis=-1, keepdims=0),
             n("Gather", ["smax", "zero"], ["s0"], name="/Gather_6", axis=0),
             n("Gather", ["cls", "zero"], ["c0"], name="/Gather_5", axis=0),
             n("Greater", ["s0", "thr"], ["keep"], name="/Greater"),
             n("NonZero", ["keep"], ["nz"], name="/NonZero"),
             n("Transpose", ["nz"], ["idx"], name="/Transpose_1", perm=[1, 0]),
             n("GatherND", ["c0", "idx"], ["picked"], name="/GatherND_2"),
             n("Reshape", ["picked", "col"], ["picked2"], name="/Reshape"),
             n("Shape", ["picked"], ["pshape"], name="/Shape_5"),
             n("Gather", ["pshape", "zero"], ["count"], name="/Gather_8", axis=0),
             n("Unsqueeze", ["count", "ax0"], ["count1"], name="/Unsqueeze_3"),
             n("Concat", ["count1", "four"], ["target"], name="/Concat_2", axis=0),
             n("Where", ["eq", "ones", "target"], ["target2"], name="/Where"),
             n("Expand", ["picked2", "target2"], ["wide"], name="/Expand"),
             n("Cast", ["wide"], ["widef"], name="/Cast", to=TensorProto.FLOAT),
             # the first max_det (10) rows, flattened and padded to max_det rows: Pad by (10 - rows) * 4
             n("Slice", ["widef", "ax0", "ten", "ax0"], ["top"], name="/Slice_6"),
             n("Reshape", ["top", "flat"], ["top1"], name="/Reshape_4"),
             n("Shape", ["top"], ["tshape"], name="/Shape_7"),
             n("Gather", ["tshape", "zero"], ["ntop"], name="/Gather_15", axis=0),
             n("Sub", ["ten0", "ntop"], ["missing"], name="/Sub_1"),
             n("Mul", ["missing", "four0"], ["padn"], name="/Mul_3"),
             n("Unsqueeze", ["padn", "ax0"], ["padn1"], name="/Unsqueeze_8"),
             n("Concat", ["ax0", "padn1"], ["pads"], name="/Concat_6", axis=0),
             n("Pad", ["top1", "pads"], ["padded"], name="/Pad"),
             n("Reshape", ["padded", "tenby4"], ["out"], name="/Reshape_8")]
    inits += [_init("ten", [10], np.int64), _init("flat", [-1], np.int64), _init("ten0", 10, np.int64),
              _init("four0", 4, np.int64), _init("tenby4", [10, 4], np.int64)]
    graph = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 4, 4])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [10, 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_rows_expanded_after_an_nms_threshold_are_bounded(tmp_path, monkeypatch):
    """An Ultralytics ``nms=True, dynamic=True`` export run through ``polygraphy surgeon sanitize --fold-constants
    --override-input-shapes images:[1,3,320,320]`` was refused at check (exit 3: "layer '/Expand' (Expand) output
    ... has a size that depends on values computed in the graph [unk__100xunk__101] and placetune cannot bound
    it"), and its advice was to run that very polygraphy command. The same export without polygraphy loads: the
    exporter's value_info names the Expand's size after the NonZero. Expand's output is its input broadcast with
    the target shape (ONNX spec), and that target is computed from the ``Shape`` of the bounded rows."""
    model = Model.load(_nms_rows_expanded(tmp_path / "net.onnx"))
    wide = model.layer("/Expand").outputs[0]
    assert (wide.shape, wide.data_dependent) == ((16, 4), True)  # at most every one of the 16 rows, 4 wide
    assert model.layer("/Cast").outputs[0].shape == (16, 4)
    top = model.layer("/Slice_6").outputs[0]
    assert (top.shape, top.data_dependent) == ((10, 4), True)  # the first max_det rows: [0:10] of at most 16
    padded = model.layer("/Pad").outputs[0]
    # a bound: the 4 x rows taken, plus at most 4 x 10 pads (the exact 40 needs the two to cancel)
    assert padded.data_dependent and padded.shape == (80,)
    assert model.layer("/Reshape_8").outputs[0].shape == (10, 4)
    monkeypatch.chdir(tmp_path)
    assert main(["check", "net.onnx"]) == 0
    assert main(["tune", "--model", "net.onnx", "--trials", "3"]) == 0
    assert main(["export", "--format", "trtexec", "-o", "deploy"]) == 0


def test_boxes_flattened_after_an_nms_threshold_are_bounded(tmp_path):
    """torchvision's detectors flatten their decoded boxes (``Flatten`` of ``[n, 4, 1]`` at axis 2, the corners
    stacked per box); ONNX's inference names a flattened size of a symbolic one with a fresh symbol. It was
    refused ('has no static shape'), so a whole RetinaNet export (opset 17) stopped there instead of at the
    ``If`` of its NMS, the line that says what to export instead. ONNX spec: Flatten gives
    ``[prod(dims[:axis]), prod(dims[axis:])]``."""
    rng = np.random.default_rng(0)
    inits = [_init("w", rng.standard_normal((5, 3, 1, 1))), _init("to2d", [16, 5], np.int64),
             _init("s4", [4], np.int64), _init("s5", [5], np.int64), _init("s0", [0], np.int64),
             _init("ax1", [1], np.int64), _init("ax2", [2], np.int64), _init("thr", 0.25)]
    nodes = [n("Conv", ["images", "w"], ["f"], name="/Conv"),
             n("Reshape", ["f", "to2d"], ["rows"], name="/Reshape"),
             n("Slice", ["rows", "s4", "s5", "ax1"], ["score"], name="/Slice"),
             n("Slice", ["rows", "s0", "s4", "ax1"], ["boxes"], name="/Slice_1"),
             n("Squeeze", ["score", "ax1"], ["score1"], name="/Squeeze"),
             n("Greater", ["score1", "thr"], ["keep"], name="/Greater"),
             n("NonZero", ["keep"], ["nz"], name="/NonZero"),
             n("Transpose", ["nz"], ["idx"], name="/Transpose", perm=[1, 0]),
             n("GatherND", ["boxes", "idx"], ["kept"], name="/GatherND"),
             n("Unsqueeze", ["kept", "ax2"], ["kept3"], name="/Unsqueeze"),
             n("Flatten", ["kept3"], ["out"], name="/Flatten", axis=-1)]
    graph = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 4, 4])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["unk__9", 1])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "net.onnx")
    flat = Model.load(tmp_path / "net.onnx").layer("/Flatten").outputs[0]
    assert (flat.shape, flat.data_dependent) == ((64, 1), True)  # at most 16 rows x 4 corners, 1 wide


def _efficientdet_sample(path, head_levels=2):
    """EfficientDet as TensorRT's ``samples/python/efficientdet/create_onnx.py`` leaves it: an NHWC input with a
    symbolic batch ``["N", H, W, 3]``, its preprocessor (``Mul``, ``Add``, ``Transpose`` to NCHW), the heads'
    ``Transpose`` + ``Reshape`` to ``[-1, V, C]`` concatenated over the levels, and ``EfficientNMS_TRT`` with
    the boxes, the scores and a constant anchors input ``[1, V, 4]`` (``box_coding=1``), its outputs declared
    ``["N", 1]``, ``["N", K, 4]``, ``["N", K]``."""
    rng = np.random.default_rng(0)
    inits = [_init("scale", np.full((1, 1, 1, 3), 1 / 255)), _init("mean", np.zeros((1, 1, 1, 3)))]
    nodes = [n("Mul", ["input", "scale"], ["s"], name="preprocessor/scale"),
             n("Add", ["s", "mean"], ["m"], name="preprocessor/mean"),
             n("Transpose", ["m"], ["x"], name="preprocessor/transpose", perm=[0, 3, 1, 2])]
    prev, c, heads, v = "x", 3, {"box_net": [], "class_net": []}, 0
    for lvl in range(head_levels):
        inits.append(_init(f"w{lvl}", rng.standard_normal((8, c, 3, 3)) * .2))
        nodes += [n("Conv", [prev, f"w{lvl}"], [f"f{lvl}"], name=f"stem/conv{lvl}", pads=[1, 1, 1, 1], strides=[2, 2])]
        prev, c, side = f"f{lvl}", 8, 16 // 2 ** (lvl + 1)
        for head, k in (("box_net", 4), ("class_net", 3)):
            inits += [_init(f"{head}w{lvl}", rng.standard_normal((2 * k, 8, 3, 3)) * .2),
                      _init(f"{head}s{lvl}", [-1, side * side * 2, k], np.int64)]
            nodes += [n("Conv", [prev, f"{head}w{lvl}"], [f"{head}c{lvl}"], name=f"{head}/conv{lvl}", pads=[1, 1, 1, 1]),
                      n("Transpose", [f"{head}c{lvl}"], [f"{head}t{lvl}"], name=f"{head}/transpose{lvl}", perm=[0, 2, 3, 1]),
                      n("Reshape", [f"{head}t{lvl}", f"{head}s{lvl}"], [f"{head}r{lvl}"], name=f"{head}/reshape{lvl}")]
            heads[head].append(f"{head}r{lvl}")
        v += side * side * 2
    nodes += [n("Concat", heads["box_net"], ["box"], name="box_net/concat", axis=1),
              n("Concat", heads["class_net"], ["cls"], name="class_net/concat", axis=1),
              n("EfficientNMS_TRT", ["box", "cls", "nms/anchors:0"],
                ["num_detections", "detection_boxes", "detection_scores", "detection_classes"],
                name="nms/non_maximum_suppression", plugin_version="1", background_class=-1, max_output_boxes=10,
                score_threshold=0.01, iou_threshold=0.5, score_activation=1, class_agnostic=0, box_coding=1)]
    inits.append(_init("nms/anchors:0", rng.random((1, v, 4))))
    outs = [helper.make_tensor_value_info("num_detections", TensorProto.INT32, ["N", 1]),
            helper.make_tensor_value_info("detection_boxes", TensorProto.FLOAT, ["N", 10, 4]),
            helper.make_tensor_value_info("detection_scores", TensorProto.FLOAT, ["N", 10]),
            helper.make_tensor_value_info("detection_classes", TensorProto.INT32, ["N", 10])]
    graph = helper.make_graph(nodes, "effdet", [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                                              ["N", 16, 16, 3])], outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 7
    onnx.save(model, path)
    return path


def test_tensorrt_samples_efficientdet_form_loads_tunes_and_exports(tmp_path, monkeypatch):
    """The graph TensorRT's EfficientDet sample writes goes the user's path with its batch given (its NMS
    plugin's three inputs, the outputs declared with the batch ``N``), and without it is refused in one line
    naming the --shape to pass. Checked against the sample's own code (release/10.3), not a TensorFlow run."""
    _efficientdet_sample(tmp_path / "effdet.onnx")
    monkeypatch.chdir(tmp_path)
    assert main(["check", "effdet.onnx"]) == 3
    model = Model.load(tmp_path / "effdet.onnx", shapes={"input": (1, 16, 16, 3)})
    nms = model.layer("nms/non_maximum_suppression")
    assert [o.shape for o in nms.outputs] == [(1, 1), (1, 10, 4), (1, 10), (1, 10)]
    assert main(["check", "effdet.onnx", "--shape", "input=1x16x16x3"]) == 0
    assert main(["tune", "--model", "effdet.onnx", "--shape", "input=1x16x16x3", "--trials", "3"]) == 0
    assert main(["export", "--format", "trtexec", "-o", "deploy"]) == 0


#: the ``polygraphy`` command, run by the exporter's Python (the package has no ``__main__``)
_POLYGRAPHY = "import sys; from polygraphy.tools import main; sys.argv[0] = 'polygraphy'; sys.exit(main())"

#: Ultralytics export options -> the shape polygraphy fixes (``--override-input-shapes``)
SANITIZED = {"yolo11n nms=True dynamic=True": ("yolo11n", {"nms": True, "dynamic": True}, "[1,3,320,320]"),
             "yolo11n nms=True dynamic=True batch=4": ("yolo11n", {"nms": True, "dynamic": True, "batch": 4},
                                                      "[4,3,320,320]"),
             "yolo11n-obb nms=True dynamic=True half=True": ("yolo11n-obb", {"nms": True, "dynamic": True, "half": True},
                                                            "[1,3,320,320]")}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(SANITIZED))
def test_real_exports_sanitized_by_polygraphy_load_tune_and_export(case, tmp_path, monkeypatch):
    """The real exports the small graph above stands for, through polygraphy as TensorRT's docs run it (exit 3
    at check before: the Expand, or the OBB export's Pad, 'cannot bound it')."""
    python = _ultralytics_python()
    if python is None:
        pytest.skip("ultralytics is not installed (or set PLACETUNE_ULTRALYTICS_PYTHON to a Python that has it)")
    env = {"YOLO_OFFLINE": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OMP_NUM_THREADS": "1"}
    if subprocess.run([python, "-c", "import polygraphy"], capture_output=True, env=env).returncode != 0:
        pytest.skip("polygraphy is not installed in the exporter's Python")
    name, kwargs, shape = SANITIZED[case]
    done = subprocess.run([python, "-c", _EXPORT, name, json.dumps(kwargs)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    done = subprocess.run([python, "-c", _POLYGRAPHY, "surgeon", "sanitize", "net.onnx", "--fold-constants",
                           "--override-input-shapes", f"images:{shape}", "-o", "sane.onnx"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    monkeypatch.chdir(tmp_path)
    assert main(["check", "sane.onnx"]) == 0
    assert main(["tune", "--model", "sane.onnx", "--trials", "3"]) == 0
    assert main(["export", "--format", "trtexec", "-o", "deploy"]) == 0
