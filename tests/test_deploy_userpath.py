"""A user's whole path on the networks they deploy: ``placetune check``, ``measure``, a short ``tune``,
``export`` of the plan as a folder, ``build`` of its engines and the application's runtime loader.

Off a Jetson the build and the runtime run on the TensorRT doubles (tests/fakes), whose ONNX parser
knows the ops of these networks; the engines compute their outputs with ``onnx.reference``. The small
graph below always runs; the real exports (Ultralytics and torchvision, random weights) run when a
Python with ultralytics and torchvision is given in PLACETUNE_ULTRALYTICS_PYTHON, else they skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from placetune.cli.main import main
from tests.fakes import fake_env
from tests.test_deploy import _study
from tests.test_detector import _ultralytics_python

ROOT = Path(__file__).resolve().parents[1]

#: the application: load the built plan, run one frame, compare with onnx.reference on the model
RUN = r'''
import json, sys
import numpy as np, onnx
from onnx.reference import ReferenceEvaluator
import placetune.runtime
folder, model = sys.argv[1], sys.argv[2]
with placetune.runtime.load(folder) as rt:
    x = {k: np.random.default_rng(0).uniform(0, 1, v[0]).astype(np.float32) for k, v in rt.inputs.items()}
    got = rt(x)
proto = onnx.load(model)
want = dict(zip([o.name for o in proto.graph.output], ReferenceEvaluator(proto).run(None, x))) if len(sys.argv) > 3 else {}
print(json.dumps({"outputs": {k: list(v.shape) for k, v in got.items()},
                  "err": {k: float(np.abs(got[k] - w).max() / max(np.abs(w).max(), 1e-6)) for k, w in want.items()}}))
'''


def _with_doubles(args: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, **fake_env("10.3.0")}
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(ROOT)])
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _obb_head(path: Path) -> Path:
    """A backbone on the DLA, then the tail of an oriented-box head (YOLO11-OBB: the angle through
    Sigmoid, Sin and Cos), a MobileNetV3 HardSwish and a score filter through Where."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * .3, "w"),
             numpy_helper.from_array(rng.standard_normal((2, 8, 1, 1)).astype(np.float32) * .3, "wa"),
             numpy_helper.from_array(np.array(0.25, np.float32), "quarter"),
             numpy_helper.from_array(np.array(np.pi, np.float32), "pi"),
             numpy_helper.from_array(np.array(0.0, np.float32), "zero")]
    n = helper.make_node
    nodes = [n("Conv", ["input", "w"], ["c"], name="/conv", pads=[1, 1, 1, 1]),
             n("Relu", ["c"], ["r"], name="/relu"),
             n("Conv", ["r", "wa"], ["a"], name="/angle/conv"),
             n("Sigmoid", ["a"], ["s"], name="/angle/sigmoid"),
             n("Sub", ["s", "quarter"], ["s2"], name="/angle/sub"),
             n("Mul", ["s2", "pi"], ["theta"], name="/angle/mul"),
             n("Cos", ["theta"], ["cos"], name="/angle/cos"),
             n("Sin", ["theta"], ["sin"], name="/angle/sin"),
             n("HardSwish", ["cos"], ["hs"], name="/hardswish"),
             n("Greater", ["sin", "zero"], ["keep"], name="/greater"),
             n("Where", ["keep", "sin", "zero"], ["kept"], name="/where"),
             n("Concat", ["hs", "kept"], ["output"], name="/concat", axis=1)]
    graph = helper.make_graph(nodes, "obb", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 4, 16, 16])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_an_oriented_box_head_s_plan_builds_and_runs(tmp_path):
    """The plan of a YOLO11-OBB export did not build: the TensorRT doubles' parser had no Sin, Cos,
    Where, Range nor HardSwish (onnx-tensorrt imports each), so the build stopped at "Plugin not found"
    and the plan's engines, placement report and runtime were never checked for these networks."""
    model = _obb_head(tmp_path / "obb.onnx")
    folder = _study(tmp_path, model, "pipeline", {"/conv": "DLA0", "/relu": "DLA0"})
    built = _with_doubles([sys.executable, "-m", "placetune.cli", "build", folder], tmp_path)
    assert built.returncode == 0, built.stderr[-2000:]
    assert "every layer runs where the plan says" in built.stdout
    report = json.loads((Path(folder) / "build.json").read_text())
    assert [e["device"] for e in report["engines"]] == ["DLA0", "GPU"]
    run = _with_doubles([sys.executable, "-c", RUN, folder, str(model), "compare"], tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout)
    assert got["outputs"] == {"output": [1, 4, 16, 16]} and got["err"]["output"] < 5e-3, got


def _end2end(path: Path, nms: str) -> Path:
    """A detector exported for deployment with its NMS as a TensorRT plugin: a small head writing boxes and
    class scores, then

    * ``EfficientNMS_TRT`` as yolov7's and yolov9's ``export.py --end2end`` write it (``TRT::`` domain, opset
      12, every output dimension rewritten as ``dim_param = str(size)``: ``"1"``, ``"100"``, ``"4"``);
    * ``BatchedNMSDynamic_TRT`` as an onnx-graphsurgeon script inserts it (default domain, opset 11, boxes
      ``[B, N, 1, 4]``, the outputs' static shapes on the graph outputs);
    * ``EfficientIdxNMS_TRT``, a plugin of TensorRT-YOLO's own library (not one TensorRT ships)."""
    rng = np.random.default_rng(0)
    opset = {"EfficientNMS_TRT": 12, "BatchedNMSDynamic_TRT": 11, "EfficientIdxNMS_TRT": 17}[nms]
    n = helper.make_node
    inits = [numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * .3, "w1"),
             numpy_helper.from_array(rng.standard_normal((7, 8, 1, 1)).astype(np.float32) * .3, "w2"),
             numpy_helper.from_array(np.array([1, 7, -1], np.int64), "shp")]
    nodes = [n("Conv", ["images", "w1"], ["c1"], name="/model.0/conv/Conv", pads=[1, 1, 1, 1], strides=[2, 2]),
             n("Relu", ["c1"], ["r1"], name="/model.0/act/Relu"),
             n("Conv", ["r1", "w2"], ["c2"], name="/model.1/Conv"),
             n("Reshape", ["c2", "shp"], ["flat"], name="/model.1/Reshape"),
             n("Transpose", ["flat"], ["t"], name="/model.1/Transpose", perm=[0, 2, 1])]
    if opset >= 13:
        inits.append(numpy_helper.from_array(np.array([4, 3], np.int64), "split"))
        nodes.append(n("Split", ["t", "split"], ["boxes", "logits"], name="/model.1/Split", axis=2))
    else:
        nodes.append(n("Split", ["t"], ["boxes", "logits"], name="/model.1/Split", axis=2, split=[4, 3]))
    nodes.append(n("Sigmoid", ["logits"], ["scores"], name="/model.1/Sigmoid"))
    names, types = ["num_dets", "det_boxes", "det_scores", "det_classes"], [TensorProto.INT32, TensorProto.FLOAT,
                                                                            TensorProto.FLOAT, TensorProto.INT32]
    dims: list[list] = [[1, 1], [1, 100, 4], [1, 100], [1, 100]]
    domains = [helper.make_opsetid("", opset)]
    if nms == "EfficientNMS_TRT":
        nodes.append(n(nms, ["boxes", "scores"], names, name="/end2end/EfficientNMS_TRT", domain="TRT",
                       background_class=-1, box_coding=1, iou_threshold=0.45, max_output_boxes=100, plugin_version="1",
                       score_activation=0, score_threshold=0.25))
        dims = [[str(d) for d in shape] for shape in dims]  # yolov7: j.dim_param = str(shapes.pop(0))
        domains.append(helper.make_opsetid("TRT", 1))
    elif nms == "BatchedNMSDynamic_TRT":
        names = ["num_detections", "nmsed_boxes", "nmsed_scores", "nmsed_classes"]
        types[3] = TensorProto.FLOAT
        nodes += [n("Unsqueeze", ["boxes"], ["boxes4"], name="/post/Unsqueeze", axes=[2]),
                  n(nms, ["boxes4", "scores"], names, name="batched_nms", shareLocation=1, backgroundLabelId=-1,
                    numClasses=3, topK=200, keepTopK=100, scoreThreshold=0.25, iouThreshold=0.45, isNormalized=0,
                    clipBoxes=0, scoreBits=16)]
    else:
        nodes.append(n(nms, ["boxes", "scores"], names + ["det_indices"], name="/EfficientIdxNMS_TRT", domain="TRT",
                       background_class=-1, box_coding=0, iou_threshold=0.45, max_output_boxes=100, plugin_version="1",
                       score_activation=0, score_threshold=0.25))
        names, types, dims = names + ["det_indices"], types + [TensorProto.INT32], dims + [[1, 100]]
        domains.append(helper.make_opsetid("TRT", 1))
    outputs = [helper.make_tensor_value_info(a, t, d) for a, t, d in zip(names, types, dims)]
    graph = helper.make_graph(nodes, "end2end", [helper.make_tensor_value_info("images", TensorProto.FLOAT,
                                                                               [1, 3, 32, 32])], outputs, inits)
    model = helper.make_model(graph, opset_imports=domains)
    model.ir_version = 8
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("nms", ["EfficientNMS_TRT", "BatchedNMSDynamic_TRT"])
def test_a_detector_ending_in_a_tensorrt_nms_plugin_goes_the_whole_path(nms, tmp_path, monkeypatch, capsys):
    """yolov7's and yolov9's end2end exports write the EfficientNMS_TRT outputs' sizes as names of digits
    ("1", "100", "4"); placetune took those for open dimensions and refused the plugin ('declare the plugin's
    output shapes in the file'), which the file does. Both plugins now load, tune, export, build on the
    doubles (the plugin on the GPU) and run."""
    model = _end2end(tmp_path / "net.onnx", nms)
    monkeypatch.chdir(tmp_path)
    assert main(["check", "net.onnx"]) == 0, capsys.readouterr().err
    assert main(["measure", "net.onnx"]) == 0, capsys.readouterr().err
    assert main(["tune", "--model", "net.onnx", "--trials", "3"]) == 0, capsys.readouterr().err
    assert main(["export", "--format", "trtexec", "-o", "deploy"]) == 0, capsys.readouterr().err
    plan = json.loads((tmp_path / "deploy" / "plan.json").read_text())
    assert list(plan["model"]["plugins"].values()) == [nms]
    built = _with_doubles([sys.executable, "-m", "placetune.cli", "build", "deploy"], tmp_path)
    assert built.returncode == 0, built.stderr[-2000:]
    report = json.loads((tmp_path / "deploy" / "build.json").read_text())
    assert report["engines"][-1]["device"] == "GPU"
    run = _with_doubles([sys.executable, "-c", RUN, "deploy", str(model)], tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    shapes = json.loads(run.stdout)["outputs"]
    assert sorted(shapes.values()) == sorted([[1, 1], [1, 100, 4], [1, 100], [1, 100]])


def test_a_plugin_tensorrt_does_not_ship_fails_the_build_saying_what_to_do(tmp_path, monkeypatch, capsys):
    """A TensorRT-YOLO export ends in EfficientIdxNMS_TRT, a plugin of its own library: placetune build
    registers TensorRT's built-in plugins only, and stopped with TensorRT's parser error ('Plugin not
    found, are the plugin name, version, and namespace correct?') and nothing on what to do; build.sh
    already said to add the library. The line now names the plugin and says how to build it."""
    _end2end(tmp_path / "net.onnx", "EfficientIdxNMS_TRT")
    monkeypatch.chdir(tmp_path)
    assert main(["tune", "--model", "net.onnx", "--trials", "2"]) == 0, capsys.readouterr().err
    assert main(["export", "--format", "trtexec", "-o", "deploy"]) == 0, capsys.readouterr().err
    assert "--plugins=<your plugin library .so>" in (tmp_path / "deploy" / "build.sh").read_text()
    built = _with_doubles([sys.executable, "-m", "placetune.cli", "build", "deploy"], tmp_path)
    err = built.stderr.strip().splitlines()
    assert built.returncode == 8 and len(err) == 1 and "Traceback" not in built.stderr, built.stderr[-2000:]
    assert "Plugin not found" in err[0] and "(EfficientIdxNMS_TRT)" in err[0] and "--staticPlugins=lib.so" in err[0], err


def _yolov5_head(path: Path) -> Path:
    """ultralytics/yolov5's anchor-based Detect as its export.py writes it, in small: per scale a Conv, a 5-D
    Reshape to [1, 3, no, H, W] and Transpose, Sigmoid, Split into xy, wh and confidences, the grid and anchor
    decode (xy * 2 + grid) * stride, (wh * 2) ** 2 * anchors, Concat and Reshape to [1, 3HW, no]; the
    scales concatenated (opset 12: Split's sizes an attribute)."""
    rng = np.random.default_rng(0)
    n = helper.make_node
    inits = [numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * .3, "w0"),
             numpy_helper.from_array(np.array(2.0, np.float32), "two")]
    nodes = [n("Conv", ["images", "w0"], ["f0"], name="/model.0/conv/Conv", pads=[1, 1, 1, 1], strides=[2, 2]),
             n("Relu", ["f0"], ["a0"], name="/model.0/act/Relu")]
    x, outs = "a0", []
    for k, hw in enumerate((8, 4)):
        inits += [numpy_helper.from_array(rng.standard_normal((8, 8, 3, 3)).astype(np.float32) * .3, f"wd{k}"),
                  numpy_helper.from_array(rng.standard_normal((21, 8, 1, 1)).astype(np.float32) * .3, f"wh{k}"),
                  numpy_helper.from_array(np.array([1, 3, 7, hw, hw], np.int64), f"s5_{k}"),
                  numpy_helper.from_array(np.array([1, 3 * hw * hw, 7], np.int64), f"so{k}"),
                  numpy_helper.from_array(rng.uniform(0, hw, (1, 3, hw, hw, 2)).astype(np.float32), f"grid{k}"),
                  numpy_helper.from_array(rng.uniform(1, 4, (1, 3, hw, hw, 2)).astype(np.float32), f"anchors{k}"),
                  numpy_helper.from_array(np.array(32.0 / hw, np.float32), f"stride{k}")]
        m = "/model.24"
        nodes += [n("Conv", [x, f"wd{k}"], [f"d{k}"], name=f"/model.{k + 1}/conv/Conv", pads=[1, 1, 1, 1], strides=[2, 2]),
                  n("Relu", [f"d{k}"], [f"r{k}"], name=f"/model.{k + 1}/act/Relu"),
                  n("Conv", [f"r{k}", f"wh{k}"], [f"h{k}"], name=f"{m}/m.{k}/Conv"),
                  n("Reshape", [f"h{k}", f"s5_{k}"], [f"p{k}"], name=f"{m}/Reshape_{2 * k}"),
                  n("Transpose", [f"p{k}"], [f"t{k}"], name=f"{m}/Transpose_{k}", perm=[0, 1, 3, 4, 2]),
                  n("Sigmoid", [f"t{k}"], [f"sg{k}"], name=f"{m}/Sigmoid_{k}"),
                  n("Split", [f"sg{k}"], [f"xy{k}", f"wh_{k}", f"cf{k}"], name=f"{m}/Split_{k}", axis=4, split=[2, 2, 3]),
                  n("Mul", [f"xy{k}", "two"], [f"xy2{k}"], name=f"{m}/Mul_{3 * k}"),
                  n("Add", [f"xy2{k}", f"grid{k}"], [f"xy3{k}"], name=f"{m}/Add_{k}"),
                  n("Mul", [f"xy3{k}", f"stride{k}"], [f"xy4{k}"], name=f"{m}/Mul_{3 * k + 1}"),
                  n("Mul", [f"wh_{k}", "two"], [f"wh2{k}"], name=f"{m}/Mul_{3 * k + 2}"),
                  n("Pow", [f"wh2{k}", "two"], [f"wh3{k}"], name=f"{m}/Pow_{k}"),
                  n("Mul", [f"wh3{k}", f"anchors{k}"], [f"wh4{k}"], name=f"{m}/Mul_{3 * k + 3}_anchors"),
                  n("Concat", [f"xy4{k}", f"wh4{k}", f"cf{k}"], [f"cat{k}"], name=f"{m}/Concat_{k}", axis=4),
                  n("Reshape", [f"cat{k}", f"so{k}"], [f"o{k}"], name=f"{m}/Reshape_{2 * k + 1}")]
        x = f"r{k}"
        outs.append(f"o{k}")
    nodes.append(n("Concat", outs, ["output0"], name="/model.24/Concat_2", axis=1))
    graph = helper.make_graph(nodes, "yolov5", [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 32, 32])],
                              [helper.make_tensor_value_info("output0", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)])
    model.ir_version = 7
    onnx.save(model, path)
    return path


def test_a_yolov5_anchor_head_with_five_d_tensors_builds_and_runs(tmp_path):
    """ultralytics/yolov5's Detect (5-D reshapes, the grid and anchor decode, a Concat of the scales) with its
    backbone on the DLA: the plan's engines build on the devices it says and chain into the model's output."""
    model = _yolov5_head(tmp_path / "v5.onnx")
    backbone = {name: "DLA0" for name in ("/model.0/conv/Conv", "/model.0/act/Relu", "/model.1/conv/Conv",
                                           "/model.1/act/Relu")}
    folder = _study(tmp_path, model, "pipeline", backbone)
    built = _with_doubles([sys.executable, "-m", "placetune.cli", "build", folder], tmp_path)
    assert built.returncode == 0, built.stderr[-2000:]
    report = json.loads((Path(folder) / "build.json").read_text())
    assert [e["device"] for e in report["engines"]][0] == "DLA0"
    run = _with_doubles([sys.executable, "-c", RUN, folder, str(model), "compare"], tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout)
    assert got["outputs"] == {"output0": [1, 3 * 64 + 3 * 16, 7]} and got["err"]["output0"] < 5e-3, got


# ---------------------------------------------------------------- real exports (slow, need ultralytics)
_EXPORT = """
import json, os, shutil, sys
os.environ["YOLO_OFFLINE"] = "1"
import torch
torch.manual_seed(0)
name, kwargs = sys.argv[1], json.loads(sys.argv[2])
if name.startswith("tv:"):
    import torchvision
    net = getattr(torchvision.models, name[3:])(weights=None, **kwargs).eval()
    torch.onnx.export(net, (torch.rand(1, 3, 224, 224),), "net.onnx", opset_version=17, dynamo=False,
                      input_names=["images"])
else:
    from ultralytics import YOLO
    imgsz = kwargs.pop("imgsz", 320)
    shutil.move(YOLO(name + ".yaml").export(format="onnx", imgsz=imgsz, **kwargs), "net.onnx")
"""

#: network, export options -> what a user deploys, each through the whole path
NETWORKS = [("yolo11n-obb", {}), ("yolov8n", {"nms": True, "opset": 17}), ("yolo11n", {"nms": True, "half": True}),
            ("yolo11n", {"simplify": False}),
            ("yolo11n", {"opset": 13}), ("yolo11n", {"opset": 19}), ("yolo11n", {"imgsz": [320, 480]}),
            ("yolo11n", {"batch": 2}), ("yolo11n", {"dynamic": True}), ("yolo11n-seg", {"nms": True, "dynamic": True}),
            ("yolov5nu", {"opset": 12}), ("yolov8n", {"opset": 11}), ("yolo11n", {"opset": 12, "simplify": True}),
            ("yolo11n", {"batch": 4}), ("yolo11n", {"nms": True, "opset": 11}),
            ("tv:mobilenet_v3_large", {}),
            ("tv:convnext_tiny", {})]


@pytest.mark.slow
@pytest.mark.parametrize("name, kwargs", NETWORKS, ids=[f"{a}-{json.dumps(b)}" for a, b in NETWORKS])
def test_real_exports_go_the_whole_user_path(name, kwargs, tmp_path, monkeypatch, capsys):
    python = _ultralytics_python()
    if python is None:
        pytest.skip("ultralytics is not installed (or set PLACETUNE_ULTRALYTICS_PYTHON to a Python that has it)")
    done = subprocess.run([python, "-c", _EXPORT, name, json.dumps(kwargs)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=900, env={"YOLO_OFFLINE": "1", "PATH": "/usr/bin:/bin",
                                                       "HOME": str(tmp_path), "OMP_NUM_THREADS": "1"})
    if "No module named 'torchvision'" in done.stderr:
        pytest.skip("the ultralytics Python has no torchvision")
    assert done.returncode == 0, done.stderr[-2000:]
    monkeypatch.chdir(tmp_path)
    shape = ["--shape", "images=1x3x320x320"] if kwargs.get("dynamic") else []
    assert main(["check", "net.onnx", *shape]) == 0, capsys.readouterr().err
    # an nms=True export at Ultralytics' default opset 18 has a ReduceMax axes input TensorRT 8.6 ignores
    misread = "would build another network" in capsys.readouterr().out
    assert misread == (bool(kwargs.get("nms")) and kwargs.get("opset", 18) >= 18)
    for args in (["measure", "net.onnx"], ["tune", "--model", "net.onnx", "--trials", "5"]):
        assert main([*args, *shape]) == 0, capsys.readouterr().err
    assert main(["export", "--format", "trtexec", "-o", "deploy"]) == 0, capsys.readouterr().err
    built = _with_doubles([sys.executable, "-m", "placetune.cli", "build", "deploy"], tmp_path)
    # exit 1: a layer the doubles' small DLA table leaves on the GPU (a FullyConnected), said in the report
    assert built.returncode in (0, 1) and "Traceback" not in built.stderr, built.stderr[-2000:]
    report = json.loads((tmp_path / "deploy" / "build.json").read_text())
    assert all((tmp_path / "deploy" / e["engine_file"]).stat().st_size for e in report["engines"])
    run = _with_doubles([sys.executable, "-c", RUN, "deploy", "net.onnx"], tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    outputs = json.loads(run.stdout)["outputs"]
    proto = onnx.load("net.onnx", load_external_data=False)
    assert sorted(outputs) == sorted(o.name for o in proto.graph.output)
    batch = kwargs.get("batch", 1)
    assert all(shape[0] == batch for shape in outputs.values()), outputs



def _fpn(path: Path, shape: list) -> Path:
    """A YOLO neck in small: a stride-2 Conv, its map upsampled x2 and concatenated with the input's; a
    static export's Reshape fixes its batch, as Ultralytics' attention blocks do."""
    w = numpy_helper.from_array(np.zeros((4, 3, 3, 3), np.float32), "w")
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    n = helper.make_node
    nodes = [n("Conv", ["images", "w"], ["down"], name="/down", pads=[1, 1, 1, 1], strides=[2, 2]),
             n("Resize", ["down", "", "scales"], ["up"], name="/up", mode="nearest")]
    inits = [w, scales]
    if isinstance(shape[0], int):
        inits.append(numpy_helper.from_array(np.array([shape[0], 4, 32, 32], np.int64), "fixed"))
        nodes.append(n("Reshape", ["up", "fixed"], ["up2"], name="/attn/Reshape"))
    nodes.append(n("Concat", ["images", "up2" if isinstance(shape[0], int) else "up"], ["out"], name="/neck/Concat",
                   axis=1))
    graph = helper.make_graph(nodes, "fpn", [helper.make_tensor_value_info("images", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    helper.set_model_props(model, {"imgsz": "[32, 32]", "author": "Ultralytics"})
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("shape, given, clash", [
    (["batch", 3, "height", "width"], "images=1x3x31x31", "1x3x31x31, 1x4x32x32"),  # a size stride 2 does not divide
    ([2, 3, 32, 32], "images=1x3x32x32", "1x3x32x32, 2x4x32x32")])  # a batch-2 export given batch 1
def test_an_input_shape_the_network_cannot_take_is_named_with_the_clashing_shapes(tmp_path, capsys, shape, given,
                                                                                   clash):
    """A YOLO export checked at an image size its strides do not divide (--shape images=1x3x300x300), or a
    batch-2 export given batch 1, was refused as sized by "values ONNX shape inference cannot follow",
    with onnxslim to fold them: the Concat's inputs had static shapes that do not fit together, and
    the shape given was the cause."""
    path = _fpn(tmp_path / "fpn.onnx", shape)
    assert main(["check", str(path), "--shape", given]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "'/neck/Concat' (Concat)" in err[0] and f"inputs' shapes do not fit together ({clash})" in err[0], err[0]
    assert given in err[0] and "onnxslim" not in err[0], err[0]
    assert main(["check", str(path), "--shape", given.replace("31x31", "32x32").replace("=1x", f"={shape[0]}x")
                 if isinstance(shape[0], int) else "images=1x3x32x32"]) == 0


def test_a_cast_whose_file_names_a_stale_symbol_after_nms_takes_its_input_s_bound(tmp_path):
    """An Ultralytics ``nms=True, half=True`` export: the FP16 converter casts the boxes back to FP32 before
    NonMaxSuppression, and the file's value_info gives that Cast's output a symbol of an earlier inference
    (``NonZero_334_o0__d1``, a NonZero the converted graph no longer has). The load stopped there, "no
    static shape"; a Cast keeps its input's shape, so it takes the input's bound."""
    n = helper.make_node
    nodes = [n("Greater", ["images", "zero"], ["mask"], name="/Greater"),
             n("NonZero", ["mask"], ["idx"], name="/NonZero"),
             n("Transpose", ["idx"], ["boxes"], name="/Transpose", perm=[1, 0]),
             n("Cast", ["boxes"], ["boxes32"], name="/boxes_cast_to_fp32_node", to=TensorProto.FLOAT),
             n("Relu", ["boxes32"], ["out"], name="/Relu")]
    graph = helper.make_graph(nodes, "tail", [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 4, 4])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.array(0.0, np.float32), "zero")],
                              value_info=[helper.make_tensor_value_info("boxes32", TensorProto.FLOAT,
                                                                        ["NonZero_334_o0__d1", 4])])
    path = tmp_path / "tail.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    from placetune.model.model import Model
    model = Model.load(path)
    assert model.layer("/boxes_cast_to_fp32_node").outputs[0].shape == (48, 4)  # every element of 1x3x4x4
    assert model.layer("/Relu").outputs[0].data_dependent
