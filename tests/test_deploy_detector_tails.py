"""Detector tails found in real exports that the earlier rounds did not take the whole way (check, tune,
export, build on the TensorRT doubles, the runtime with one frame), rebuilt here as small graphs with
``onnx.helper`` so they always run. The real exports they come from run in tests/test_deploy_userpath.py
when a Python with ultralytics and torchvision is given in PLACETUNE_ULTRALYTICS_PYTHON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from placetune.cli.main import main
from tests.test_deploy import _study
from tests.test_deploy_userpath import _EXPORT, RUN, _with_doubles
from tests.test_detector import _ultralytics_python


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


def _classifier_tail(path: Path, flatten: bool) -> Path:
    """A torchvision classifier's tail: features, the global average pool, then the ``Linear`` as a Gemm on
    a 2-D [1, C] input, after a ``Flatten`` (regnet_y_400mf, efficientnet_b0) or straight from a
    ``ReduceMean`` without keepdims (shufflenet_v2's ``x.mean([2, 3])``)."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((16, 3, 3, 3)).astype(np.float32) * .3, "w"),
             numpy_helper.from_array(rng.standard_normal((10, 16)).astype(np.float32) * .3, "fw"),
             numpy_helper.from_array(rng.standard_normal((10,)).astype(np.float32) * .3, "fb")]
    n = helper.make_node
    nodes = [n("Conv", ["input", "w"], ["c"], name="/conv", pads=[1, 1, 1, 1]), n("Relu", ["c"], ["r"], name="/relu")]
    if flatten:
        nodes += [n("GlobalAveragePool", ["r"], ["g"], name="/avgpool/GlobalAveragePool"),
                  n("Flatten", ["g"], ["f"], name="/Flatten", axis=1)]
    else:
        nodes += [n("ReduceMean", ["r"], ["f"], name="/ReduceMean", axes=[2, 3], keepdims=0)]
    nodes.append(n("Gemm", ["f", "fw", "fb"], ["output"], name="/fc/Gemm", transB=1))
    graph = helper.make_graph(nodes, "classifier", [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                                                  [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 10])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize("flatten", [True, False], ids=["flatten", "reducemean"])
def test_a_classifier_gemm_is_built_on_the_dla(tmp_path, flatten):
    """torchvision's regnet_y_400mf, shufflenet_v2 and efficientnet_b0 did not build (exit 1): the TensorRT
    doubles left every Gemm on the GPU, where TensorRT runs a 2-D Gemm with constant weights on the DLA as a
    1x1 convolution (published 8.5.2 and 10.3 builds: tests/data/trt_corpus/dlatutorial-repro-orin64-8.5.2-
    model-bn, orin-agx-trt10.3-dla-offloaded). Planned under TensorRT 10.3's rules, the Flatten before it is
    on the GPU, as that 10.3 build put it."""
    model = _classifier_tail(tmp_path / "cls.onnx", flatten)
    folder = _study(tmp_path, model, "pipeline", "all-dla", trt_version="10.3")
    plan = json.loads((Path(folder) / "plan.json").read_text())
    assert "/fc/Gemm" in json.dumps(plan)
    built = _with_doubles([sys.executable, "-m", "placetune.cli", "build", folder], tmp_path)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    assert "every layer runs where the plan says" in built.stdout
    report = json.loads((Path(folder) / "build.json").read_text())
    assert report["engines"][-1]["device"] == "DLA0"  # the Gemm's engine
    run = _with_doubles([sys.executable, "-c", RUN, folder, str(model), "compare"], tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout)
    assert got["outputs"] == {"output": [1, 10]} and got["err"]["output"] < 1e-2, got  # the DLA's fp16


def test_a_flatten_planned_on_the_dla_under_trt8_rules_falls_back_on_trt10(tmp_path):
    """Under TensorRT 8.6's rules the Flatten before a classifier's Gemm is DLA-eligible (the 8.4 tutorial
    log); TensorRT 10.3 refuses it. Built with 10.3, the plan's Flatten is the one layer that moves, and build
    says so and why the plan differs (exit 1)."""
    model = _classifier_tail(tmp_path / "cls.onnx", True)
    folder = _study(tmp_path, model, "pipeline", "all-dla")
    built = _with_doubles([sys.executable, "-m", "placetune.cli", "build", folder], tmp_path)
    assert built.returncode == 1, built.stdout[-2000:] + built.stderr[-2000:]
    assert "1 layer run elsewhere than the plan says" in built.stdout
    assert "/Flatten: plan DLA0, built GPU" in built.stdout and "/fc/Gemm: plan" not in built.stdout
    assert "searched under TensorRT 8.6's DLA rules" in built.stdout


# ---------------------------------------------------------------- real exports (slow, need ultralytics)
#: DeepStream-Yolo's utils/export_yoloV8.py in short: the model with its Detect head in export mode, then its
#: DeepStreamOutput layer (boxes to corners through a constant 4x4 MatMul, the best class's score and index)
_DEEPSTREAM_YOLO = """
import os, sys
os.environ["YOLO_OFFLINE"] = "1"
from copy import deepcopy
import torch, torch.nn as nn
from ultralytics import YOLO
from ultralytics.nn.modules import C2f, Detect

class DeepStreamOutput(nn.Module):
    def forward(self, x):
        x = x.transpose(1, 2)
        boxes = x[:, :, :4]
        convert = torch.tensor([[1, 0, 1, 0], [0, 1, 0, 1], [-0.5, 0, 0.5, 0], [0, -0.5, 0, 0.5]], dtype=boxes.dtype)
        boxes @= convert
        scores, labels = torch.max(x[:, :, 4:], dim=-1, keepdim=True)
        return torch.cat([boxes, scores, labels.to(boxes.dtype)], dim=-1)

dynamic = sys.argv[2] == "dynamic"
model = deepcopy(YOLO(sys.argv[1] + ".yaml").model).eval().float().fuse()
for m in model.modules():
    if isinstance(m, Detect):
        m.dynamic, m.export, m.format = dynamic, True, "onnx"
    elif isinstance(m, C2f):
        m.forward = m.forward_split
torch.onnx.export(nn.Sequential(model, DeepStreamOutput()), torch.zeros(1, 3, 320, 320), "net.onnx", opset_version=17,
                  do_constant_folding=True, input_names=["input"], output_names=["output"], dynamo=False,
                  dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}} if dynamic else None)
if dynamic:  # export_yoloV8.py --dynamic --simplify
    import onnx, onnxslim
    onnx.save(onnxslim.slim(onnx.load("net.onnx")), "net.onnx")
"""


def _graft_nms(path: Path, plugin: str, declare: bool) -> None:
    """Replace a YOLO export's raw output ``[B, 4 + classes, anchors]`` by a TensorRT NMS plugin as
    deployment exports write it (the boxes and scores sliced out after a Transpose, then
    ``TRT::EfficientNMS_TRT`` or ``BatchedNMSDynamic_TRT``), with or without the outputs' shapes."""
    model = onnx.load(str(path))
    g = model.graph
    raw = g.output[0]
    batch, channels, _ = [d.dim_value for d in raw.type.tensor_type.shape.dim]
    for name, value in (("nms/zero", 0), ("nms/four", 4), ("nms/end", channels), ("nms/axis", 2)):
        g.initializer.append(numpy_helper.from_array(np.array([value], np.int64), name))
    n = helper.make_node
    g.node.extend([n("Transpose", [raw.name], ["nms/t"], name="/end2end/Transpose", perm=[0, 2, 1]),
                   n("Slice", ["nms/t", "nms/zero", "nms/four", "nms/axis"], ["nms/boxes"], name="/end2end/boxes"),
                   n("Slice", ["nms/t", "nms/four", "nms/end", "nms/axis"], ["nms/scores"], name="/end2end/scores")])
    if plugin == "EfficientNMS_TRT":
        names = ["num_dets", "det_boxes", "det_scores", "det_classes"]
        g.node.append(n(plugin, ["nms/boxes", "nms/scores"], names, name="/end2end/EfficientNMS_TRT", domain="TRT",
                        background_class=-1, box_coding=1, iou_threshold=0.45, max_output_boxes=100,
                        plugin_version="1", score_activation=0, score_threshold=0.25))
        model.opset_import.append(helper.make_opsetid("TRT", 1))
        types = [TensorProto.INT32, TensorProto.FLOAT, TensorProto.FLOAT, TensorProto.INT32]
    else:
        names = ["num_detections", "nmsed_boxes", "nmsed_scores", "nmsed_classes"]
        g.node.extend([n("Unsqueeze", ["nms/boxes", "nms/axis"], ["nms/boxes4"], name="/end2end/Unsqueeze"),
                       n(plugin, ["nms/boxes4", "nms/scores"], names, name="/end2end/BatchedNMS", shareLocation=1,
                         backgroundLabelId=-1, numClasses=channels - 4, topK=1000, keepTopK=100,
                         scoreThreshold=0.25, iouThreshold=0.45, isNormalized=0, clipBoxes=0, scoreBits=16)])
        types = [TensorProto.INT32, TensorProto.FLOAT, TensorProto.FLOAT, TensorProto.FLOAT]
    shapes = [[batch, 1], [batch, 100, 4], [batch, 100], [batch, 100]]
    del g.output[:]
    g.output.extend(helper.make_tensor_value_info(a, t, s if declare else None)
                    for a, t, s in zip(names, types, shapes))
    onnx.save(model, str(path))


#: what a user deploys -> (the exporter's options or the plugin grafted on, the --shape it needs, its outputs)
REAL = {"yolo11n-obb nms=True opset=17": ("yolo11n-obb", {"nms": True, "opset": 17}, None, {"output0": [1, 300, 7]}),
        "yolov10n nms=False (end2end) opset=17": ("yolov10n", {"nms": False, "opset": 17}, None,
                                                  {"output0": [1, 300, 6]}),
        "yolo11n imgsz=384x640 nms=True opset=17": ("yolo11n", {"imgsz": [384, 640], "nms": True, "opset": 17}, None,
                                                    {"output0": [1, 300, 6]}),
        "yolo11n + EfficientNMS_TRT": ("yolo11n", {"graft": "EfficientNMS_TRT"}, None,
                                       {"num_dets": [1, 1], "det_boxes": [1, 100, 4], "det_scores": [1, 100],
                                        "det_classes": [1, 100]}),
        "yolo11n + EfficientNMS_TRT, no output shapes": ("yolo11n", {"graft": "EfficientNMS_TRT", "bare": True}, None,
                                                         {"num_dets": [1, 1], "det_boxes": [1, 100, 4],
                                                          "det_scores": [1, 100], "det_classes": [1, 100]}),
        "yolo11n + BatchedNMSDynamic_TRT": ("yolo11n", {"graft": "BatchedNMSDynamic_TRT"}, None,
                                            {"num_detections": [1, 1], "nmsed_boxes": [1, 100, 4],
                                             "nmsed_scores": [1, 100], "nmsed_classes": [1, 100]}),
        "DeepStream-Yolo yolo11n": ("yolo11n", {"deepstream": "static"}, None, {"output": [1, 2100, 6]}),
        "DeepStream-Yolo yolo11n --dynamic --simplify": ("yolo11n", {"deepstream": "dynamic"}, "input=1x3x320x320",
                                                         {"output": [1, 2100, 6]})}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(REAL))
def test_real_detector_tails_go_the_whole_user_path(case, tmp_path, monkeypatch, capsys):
    python = _ultralytics_python()
    if python is None:
        pytest.skip("ultralytics is not installed (or set PLACETUNE_ULTRALYTICS_PYTHON to a Python that has it)")
    name, kwargs, shape, outputs = REAL[case]
    graft, bare, deepstream = kwargs.pop("graft", None), kwargs.pop("bare", False), kwargs.pop("deepstream", None)
    script, args = (_DEEPSTREAM_YOLO, [name, deepstream]) if deepstream else (_EXPORT, [name, json.dumps(kwargs)])
    done = subprocess.run([python, "-c", script, *args], cwd=tmp_path, capture_output=True, text=True, timeout=900,
                          env={"YOLO_OFFLINE": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                               "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    if graft:
        _graft_nms(tmp_path / "net.onnx", graft, declare=not bare)
    monkeypatch.chdir(tmp_path)
    given = ["--shape", shape] if shape else []
    assert main(["check", "net.onnx", "--json", *given]) == 0, capsys.readouterr().err
    layers = {layer["name"]: layer for layer in json.loads(capsys.readouterr().out)["layers"]}
    first = next(layer for layer in layers.values() if layer["op_type"] == "Conv")
    assert first["dla"], first  # the backbone can go to the DLA
    if graft:  # the plugin cannot
        plugin = next(layer for layer in layers.values() if layer["op_type"] == graft)
        assert not plugin["dla"] and "plugin" in plugin["reason"], plugin
    assert main(["tune", "--model", "net.onnx", "--trials", "5", *given]) == 0, capsys.readouterr().err
    assert main(["export", "--format", "trtexec", "-o", "deploy"]) == 0, capsys.readouterr().err
    built = _with_doubles([sys.executable, "-m", "placetune.cli", "build", "deploy"], tmp_path)
    assert built.returncode in (0, 1) and "Traceback" not in built.stderr, built.stderr[-2000:]
    run = _with_doubles([sys.executable, "-c", RUN, "deploy", "net.onnx"], tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout)["outputs"] == outputs


def _empty_mask_branch(path: Path) -> Path:
    """The tail of an Ultralytics ``nms=True`` export of a detect model left unsimplified (``simplify=False``,
    or simplified by onnx-simplifier): the mask coefficients ``x[..., 4 + classes:]``, none for a detector,
    sliced to an empty tensor ``[1, N, 0]``, gathered and concatenated with the boxes."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * .3, "w"),
             numpy_helper.from_array(np.array([1, 8, 64], np.int64), "shp"),
             numpy_helper.from_array(np.array([0], np.int64), "zero"),
             numpy_helper.from_array(np.array([4], np.int64), "four"),
             numpy_helper.from_array(np.array([8], np.int64), "eight"),
             numpy_helper.from_array(np.array([2], np.int64), "axis"),
             numpy_helper.from_array(np.array(0, np.int64), "first")]
    n = helper.make_node
    nodes = [n("Conv", ["images", "w"], ["c"], name="/model.0/conv/Conv", pads=[1, 1, 1, 1]),
             n("Reshape", ["c", "shp"], ["flat"], name="/model.1/Reshape"),
             n("Transpose", ["flat"], ["t"], name="/Transpose", perm=[0, 2, 1]),
             n("Slice", ["t", "zero", "four", "axis"], ["boxes"], name="/Slice"),
             n("Slice", ["t", "eight", "eight", "axis"], ["masks"], name="/Slice_2"),
             n("Gather", ["boxes", "first"], ["boxes0"], name="/Gather", axis=0),
             n("Gather", ["masks", "first"], ["masks0"], name="/Gather_3", axis=0),
             n("Concat", ["boxes0", "masks0"], ["output0"], name="/Concat", axis=1)]
    graph = helper.make_graph(nodes, "empty_branch", [helper.make_tensor_value_info("images", TensorProto.FLOAT,
                                                                                    [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [64, 4])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_an_empty_branch_says_it_is_empty_and_how_to_fold_it(tmp_path, capsys):
    """Ultralytics' ``nms=True`` export with ``simplify=False`` (and the same after onnxsim) keeps an empty
    tensor, the mask coefficients a detector does not have; placetune refused it as a size "computed at run
    time, or e.g. a pooling window larger than its input", neither of which it is. It now says the tensor is
    empty and that onnxslim (Ultralytics' own simplify) removes the branch, which loads (checked on the real
    export)."""
    model = _empty_mask_branch(tmp_path / "net.onnx")
    assert main(["check", str(model)]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'/Gather_3' (Gather)" in err[0], err
    assert "empty" in err[0] and "[64x0]" in err[0] and "onnxslim" in err[0] and "simplify=True" in err[0], err[0]
    assert "pooling window" not in err[0], err[0]
    # the command to run, on this very file (onnxslim's output of the real export loads)
    assert f"`onnxslim {model} {tmp_path / 'net.slim.onnx'}`" in err[0], err[0]
