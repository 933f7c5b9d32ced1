"""Detectors exported the ways people export them for deployment: NMS inside the graph (Ultralytics
``nms=True``: NonZero and NonMaxSuppression, whose sizes depend on the image), dynamic axes, FP16,
older opsets, batch 4. The generated tail below is built like Ultralytics' (score threshold ->
NonZero -> GatherND -> NonMaxSuppression -> Gather -> data-dependent Pad to a fixed size); the real
exports run when a Python with ultralytics is at hand (PLACETUNE_ULTRALYTICS_PYTHON), else they skip."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from placetune.cli.main import main
from placetune.errors import ShapeError
from placetune.hardware.dla import check_layer
from placetune.model.model import Model
from placetune.placement.placement import Placement

from .test_detector import _ultralytics_python

#: boxes the tail keeps (the padded output is KEEP x 4)
KEEP = 30


def nms_tail_model(*, value_info: bool = True) -> onnx.ModelProto:
    """A tiny detector [1,3,16,16] -> [1,KEEP,4] with Ultralytics' NMS tail; ``value_info`` declares the
    padded tensor's size as the exporter's shape inference (onnxslim) writes it."""
    i = lambda name, v: numpy_helper.from_array(np.asarray(v), name)  # noqa: E731
    inits = [numpy_helper.from_array(np.random.default_rng(0).standard_normal((6, 3, 1, 1)).astype(np.float32), "w"),
             i("shape3", np.array([1, 6, 256], np.int64)), i("split", np.array([4, 2], np.int64)),
             i("thr", np.array(0.25, np.float32)), i("maxout", np.array([100], np.int64)),
             i("iou", np.array([0.7], np.float32)), i("col", np.array(2, np.int64)),
             i("k0", np.array([0], np.int64)), i("kkeep", np.array([KEEP], np.int64)),
             i("total", np.array([KEEP * 4], np.int64)), i("zero1", np.array([0], np.int64)),
             i("flat", np.array([-1], np.int64)), i("outshape", np.array([1, KEEP, 4], np.int64)),
             i("ax0", np.array([0], np.int64)), i("ax1", np.array([1], np.int64))]
    n = helper.make_node
    nodes = [
        n("Conv", ["images", "w"], ["y"], name="/head/Conv"),
        n("Reshape", ["y", "shape3"], ["y3"], name="/head/Reshape"),
        n("Transpose", ["y3"], ["t"], name="/head/Transpose", perm=[0, 2, 1]),
        n("Split", ["t", "split"], ["boxes", "cls"], name="/head/Split", axis=2),
        n("ReduceMax", ["cls"], ["conf"], name="/ReduceMax", axes=[2], keepdims=0),
        n("Greater", ["conf", "thr"], ["mask"], name="/Greater"),
        n("NonZero", ["mask"], ["nz"], name="/NonZero"),
        n("Transpose", ["nz"], ["idx"], name="/Transpose_1", perm=[1, 0]),
        n("GatherND", ["boxes", "idx"], ["cand"], name="/GatherND"),
        n("GatherND", ["conf", "idx"], ["cand_conf"], name="/GatherND_1"),
        n("Unsqueeze", ["cand", "ax0"], ["nms_boxes"], name="/Unsqueeze"),
        n("Unsqueeze", ["cand_conf", "ax0"], ["cc1"], name="/Unsqueeze_1"),
        n("Unsqueeze", ["cc1", "ax0"], ["nms_scores"], name="/Unsqueeze_2"),
        n("NonMaxSuppression", ["nms_boxes", "nms_scores", "maxout", "iou"], ["sel"], name="/NonMaxSuppression"),
        n("Gather", ["sel", "col"], ["keep_all"], name="/Gather", axis=1),
        n("Slice", ["keep_all", "k0", "kkeep", "ax0"], ["keep"], name="/Slice"),
        n("Gather", ["cand", "keep"], ["kept"], name="/Gather_1", axis=0),
        n("Reshape", ["kept", "flat"], ["kept_flat"], name="/Reshape_flat"),
        n("Shape", ["kept_flat"], ["kshape"], name="/Shape"),
        n("Sub", ["total", "kshape"], ["rest"], name="/Sub"),
        n("Concat", ["zero1", "rest"], ["pads"], name="/Concat", axis=0),
        n("Pad", ["kept_flat", "pads"], ["padded"], name="/Pad"),
        n("Reshape", ["padded", "outshape"], ["dets"], name="/Reshape_out"),
    ]
    graph = helper.make_graph(nodes, "nms_tail", [helper.make_tensor_value_info("images", TensorProto.FLOAT,
                                                                                [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("dets", TensorProto.FLOAT, [1, KEEP, 4])], inits)
    if value_info:
        graph.value_info.append(helper.make_tensor_value_info("padded", TensorProto.FLOAT, [KEEP * 4]))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_the_generated_tail_runs_as_onnx_says():
    """The test model is a valid ONNX model whose tail really is data-dependent."""
    from onnx.reference import ReferenceEvaluator
    proto = nms_tail_model()
    onnx.checker.check_model(proto, full_check=True)
    ref = ReferenceEvaluator(proto)
    x = np.random.default_rng(1).standard_normal((1, 3, 16, 16)).astype(np.float32)
    (dets,) = ref.run(None, {"images": x})
    assert dets.shape == (1, KEEP, 4)


def test_a_detector_with_nms_in_the_graph_loads_with_its_sizes_bounded(tmp_path):
    path = tmp_path / "det.onnx"
    onnx.save(nms_tail_model(), path)
    model = Model.load(path)
    by_name = {layer.name: layer for layer in model}
    nz, nms = by_name["/NonZero"].outputs[0], by_name["/NonMaxSuppression"].outputs[0]
    assert (nz.shape, nz.data_dependent) == ((2, 256), True)  # rank x every element of [1, 256]
    assert (nms.shape, nms.data_dependent) == ((100, 3), True)  # batch 1 x class 1 x min(256 boxes, 100 per class)
    assert by_name["/Pad"].outputs[0].shape == (KEEP * 4,)
    assert by_name["/Reshape_out"].outputs[0].shape == (1, KEEP, 4)
    # nothing of the data-dependent tail is a scalar: every layer has a real (bounded) size
    assert all(t.shape for layer in model for t in layer.outputs)
    for name in ("/NonZero", "/GatherND", "/Unsqueeze", "/Reshape_flat"):
        support = check_layer(by_name[name], "orin-agx", precision="fp16")
        assert not support.supported and "data-dependent" in support.reason, (name, support)
    assert check_layer(by_name["/head/Conv"], "orin-agx", precision="fp16").supported


def test_check_and_tune_accept_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    onnx.save(nms_tail_model(), tmp_path / "det.onnx")
    assert main(["check", "det.onnx"]) == 0
    out = capsys.readouterr().out
    assert "data-dependent size" in out
    assert main(["tune", "--model", "det.onnx", "--trials", "6", "--mode", "engine"]) == 0


def test_without_the_exporters_value_info_the_pad_is_bounded(tmp_path):
    """Without the exporter's value_info (a tool that rewrites it, as polygraphy's sanitize does) the Pad's size
    follows from its pads, computed from the kept rows' Shape: a bound, the rows plus at most as many pads
    (it was refused, 'depends on values computed in the graph ... cannot bound it')."""
    path = tmp_path / "det.onnx"
    onnx.save(nms_tail_model(value_info=False), path)
    by_name = {layer.name: layer for layer in Model.load(path)}
    padded = by_name["/Pad"].outputs[0]
    assert padded.data_dependent and padded.shape == (2 * KEEP * 4,)  # at least the real KEEP * 4
    assert by_name["/Reshape_out"].outputs[0].shape == (1, KEEP, 4)


def test_a_size_placetune_cannot_bound_is_refused_in_one_line(tmp_path, capsys):
    """A Pad whose pads follow the data's values (an ArgMax of the scores), not a shape, has no bound:
    refused, naming the layer (it was a scalar before, and then a Reshape 'that changes the element count')."""
    model = nms_tail_model(value_info=False)
    graph = model.graph
    graph.node.insert(len(graph.node) - 3, helper.make_node("ArgMax", ["conf"], ["best"], name="/ArgMax", axis=1,
                                                                    keepdims=0))
    next(node for node in graph.node if node.name == "/Sub").input[1] = "best"
    path = tmp_path / "det.onnx"
    onnx.save(model, path)
    with pytest.raises(ShapeError, match="'/Pad' .*depends on values computed in the graph"):
        Model.load(path)
    assert main(["check", str(path)]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot bound it" in err[0]


_EXPORT = """
import os, shutil, sys, json
os.environ["YOLO_OFFLINE"] = "1"
from ultralytics import YOLO
kwargs = json.loads(sys.argv[1])
shutil.move(YOLO("yolo11n.yaml").export(format="onnx", imgsz=320, **kwargs), "det.onnx")
"""

#: Ultralytics export options as people use them for deployment
EXPORTS = {"nms": {"nms": True}, "dynamic": {"dynamic": True}, "half": {"half": True},
           "opset11": {"opset": 11}, "batch4": {"batch": 4}, "dynamic-nms": {"dynamic": True, "nms": True},
           "opset20": {"opset": 20}, "dynamic-nms-batch2": {"dynamic": True, "nms": True, "batch": 2},
           "nms-opset17": {"nms": True, "opset": 17},
           # the FP16 converter writes each tensor's symbolic shape (up to ten times over) into value_info, which
           # the file's inference kept at the given shape: its Expand after NonZero was refused as unbounded
           "dynamic-nms-half": {"dynamic": True, "nms": True, "half": True}}


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(EXPORTS))
def test_real_ultralytics_deployment_exports(kind, tmp_path, monkeypatch, capsys):
    python = _ultralytics_python()
    if python is None:
        pytest.skip("ultralytics is not installed (or set PLACETUNE_ULTRALYTICS_PYTHON to a Python that has it)")
    done = subprocess.run([python, "-c", _EXPORT, json.dumps(EXPORTS[kind])], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600, env={"YOLO_OFFLINE": "1", "PATH": "/usr/bin:/bin",
                                                       "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-2000:]
    monkeypatch.chdir(tmp_path)
    shape = ["--shape", "images=1x3x320x320"] if "dynamic" in kind else []
    assert main(["check", "det.onnx", *shape]) == 0, capsys.readouterr().err
    checked = " ".join(capsys.readouterr().out.split())
    if kind == "nms":  # opset 18: TensorRT 8.6's parser (the default Orin rules) misreads its NMS tail, and says how
        assert "would build another network" in checked and "opset=17" in checked, checked
        assert "give --trt-version 10.3" in checked, checked
    if kind == "nms-opset17":  # what that fix exports: read as written
        assert "would build another network" not in checked, checked
    if kind == "half":  # Ultralytics 8.4 writes FP16 weights on a CPU too
        weights = onnx.load(str(tmp_path / "det.onnx")).graph.initializer
        assert any(t.data_type == TensorProto.FLOAT16 for t in weights)
    model = Model.load(tmp_path / "det.onnx", shapes=shape[1:] or None)
    assert model.input_shapes["images"] == ((4 if kind == "batch4" else 1), 3, 320, 320)
    if "nms" in kind:
        assert [o.shape for o in model.outputs] == [(1, 300, 6)]
        bounded = {layer.op_type: t.shape for layer in model for t in layer.outputs if t.data_dependent}
        boxes = (320 // 8) ** 2 + (320 // 16) ** 2 + (320 // 32) ** 2  # 2,100 anchors at 320x320
        assert bounded["NonZero"] == (1, boxes) and bounded["NonMaxSuppression"] == (boxes, 3)
        assert bounded["Pad"] == (300 * 6,)  # the top 300 (Min(300, kept)) padded to 300 x 6
        assert not any(t.data_dependent for layer in model for t in layer.outputs if layer.op_type == "Conv")
    if kind in ("nms", "dynamic"):  # tuned and exported for the Jetson (the dynamic one's export used to fail)
        assert main(["tune", "--model", "det.onnx", *shape, "--trials", "4"]) == 0
        assert main(["export", "--format", "trtexec", "-o", "deploy"]) == 0, capsys.readouterr().err
        assert list((tmp_path / "deploy").glob("model.seg*.onnx"))


def _dynamic_cnn(tmp_path, imgsz: str | None):
    """A one-Conv model with Ultralytics' dynamic axes (``batch``, ``height``, ``width``) and, like an
    Ultralytics export, the image size in the file's metadata."""
    w = numpy_helper.from_array(np.zeros((4, 3, 3, 3), np.float32), "w")
    graph = helper.make_graph([helper.make_node("Conv", ["images", "w"], ["out"], name="/Conv", pads=[1, 1, 1, 1])],
                              "dyn", [helper.make_tensor_value_info("images", TensorProto.FLOAT,
                                                                    ["batch", 3, "height", "width"])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", 4, "height", "width"])],
                              [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    if imgsz:
        helper.set_model_props(model, {"imgsz": imgsz, "author": "Ultralytics"})
    path = tmp_path / "dyn.onnx"
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("imgsz, want", [("[640, 640]", "images=1x3x640x640"), ("[384, 640]", "images=1x3x384x640"),
                                         (None, "images=1x3x<height>x<width>")])
def test_a_dynamic_export_is_told_a_shape_that_fits_it(tmp_path, capsys, imgsz, want):
    """The suggested --shape used to set every open dimension to 1 (a 1x1 image); it now takes the image
    size the exporter recorded, or names the dimensions to fill in."""
    path = _dynamic_cnn(tmp_path, imgsz)
    assert main(["check", str(path)]) == 3
    err = capsys.readouterr().err.strip()
    assert f"pass --shape {want} " in err and "x1x1" not in err
    assert main(["check", str(path), "--batch", "4"]) == 3
    assert f"pass --shape {want.replace('=1x', '=4x')}" in capsys.readouterr().err
    if imgsz:
        assert main(["check", str(path), "--shape", want]) == 0


def test_a_torchvision_style_resize_sized_from_reduce_max_folds(tmp_path):
    """torchvision's detectors size their resize from ReduceMax over the image's (constant) size; the
    folder evaluates ReduceMax/ReduceMin, so such a Resize gets its static size."""
    n = helper.make_node
    inits = [numpy_helper.from_array(np.array([16.0, 24.0], np.float32), "hw"),
             numpy_helper.from_array(np.array(32.0, np.float32), "target")]
    nodes = [n("ReduceMax", ["hw"], ["longest"], name="/transform/ReduceMax", keepdims=0),
             n("Div", ["target", "longest"], ["scale"], name="/transform/Div"),
             n("Constant", [], ["ones"], name="/transform/Const", value=numpy_helper.from_array(
                 np.array([1.0, 1.0], np.float32))),
             n("Unsqueeze", ["scale", "ax"], ["scale1"], name="/transform/Unsqueeze"),
             n("Concat", ["ones", "scale1", "scale1"], ["scales"], name="/transform/Concat", axis=0),
             n("Resize", ["images", "", "scales"], ["resized"], name="/transform/Resize", mode="nearest"),
             n("Relu", ["resized"], ["out"], name="/Relu")]
    inits.append(numpy_helper.from_array(np.array([0], np.int64), "ax"))
    graph = helper.make_graph(nodes, "tv", [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 16, 24])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(proto, tmp_path / "tv.onnx")
    model = Model.load(tmp_path / "tv.onnx")
    assert model.layer("/transform/Resize").outputs[0].shape == (1, 3, 21, 32)  # 16 and 24 scaled by 32/24


def test_a_standard_op_inference_cannot_size_is_told_to_fold_not_to_declare_a_plugin(tmp_path, capsys):
    n = helper.make_node
    nodes = [n("ReduceMean", ["images"], ["m"], name="/transform/Mean", keepdims=0),  # not folded: data
             n("Mul", ["m", "k"], ["s"], name="/transform/Mul"),
             n("Concat", ["ones", "s", "s"], ["scales"], name="/transform/Concat", axis=0),
             n("Resize", ["images", "", "scales"], ["out"], name="/transform/Resize", mode="nearest")]
    inits = [numpy_helper.from_array(np.array([1.0], np.float32), "k"),
             numpy_helper.from_array(np.array([1.0, 1.0], np.float32), "ones")]
    graph = helper.make_graph(nodes, "tv", [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "tv.onnx")
    assert main(["check", str(tmp_path / "tv.onnx")]) == 3
    err = capsys.readouterr().err
    assert "'/transform/Resize'" in err and "onnxslim" in err and "declare the plugin" not in err


def _dynamic_with_shape_arithmetic(path):
    """A dynamic-axes export whose reshapes are sized by float arithmetic on ``Shape`` (Cast, Div, Ceil), as
    dynamic exports of detectors compute them: ONNX shape inference cannot follow it, placetune's folder can."""
    n = helper.make_node
    inits = [numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 3, 3, 3)).astype(np.float32), "w1"),
             numpy_helper.from_array(np.random.default_rng(1).standard_normal((8, 8, 3, 3)).astype(np.float32), "w2"),
             numpy_helper.from_array(np.array(2, np.int64), "two"), numpy_helper.from_array(np.array(1.0, np.float32),
                                                                                            "one"),
             numpy_helper.from_array(np.array([1, 8], np.int64), "head"), numpy_helper.from_array(np.array([0], np.int64),
                                                                                                   "ax")]
    nodes = [n("Conv", ["x", "w1"], ["y"], name="/c1/Conv", pads=[1, 1, 1, 1]),
             n("Relu", ["y"], ["y1"], name="/c1/Relu"),
             n("Shape", ["y1"], ["s"], name="/Shape"),
             n("Gather", ["s", "two"], ["h"], name="/Gather"),
             n("Cast", ["h"], ["hf"], name="/Cast", to=TensorProto.FLOAT),
             n("Div", ["hf", "one"], ["hd"], name="/Div"),
             n("Ceil", ["hd"], ["hc"], name="/Ceil"),
             n("Cast", ["hc"], ["hi"], name="/Cast_1", to=TensorProto.INT64),
             n("Unsqueeze", ["hi", "ax"], ["hu"], name="/Unsqueeze"),
             n("Concat", ["head", "hu", "hu"], ["target"], name="/Concat", axis=0),
             n("Reshape", ["y1", "target"], ["r"], name="/Reshape"),
             n("Conv", ["r", "w2"], ["z"], name="/c2/Conv", pads=[1, 1, 1, 1]),
             n("Shape", ["r"], ["rs"], name="/Shape_1"),
             n("Reshape", ["z", "rs"], ["out"], name="/Reshape_1")]
    graph = helper.make_graph(nodes, "dyn", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                           ["batch", 3, "h", "w"])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_a_dynamic_export_s_plan_exports_its_segments(tmp_path, monkeypatch, capsys):
    """Exporting the plan of a dynamic-axes model stopped at 'Shape node ... whose shape is not static': the
    cut inferred shapes without the folding the model was loaded with."""
    monkeypatch.chdir(tmp_path)
    _dynamic_with_shape_arithmetic(tmp_path / "dyn.onnx")
    assert main(["tune", "--model", "dyn.onnx", "--shape", "x=1x3x16x16", "--trials", "6", "--granularity", "layer",
                 "--agent", "random"]) == 0
    capsys.readouterr()
    assert main(["export", "--format", "trtexec", "-o", "deploy"]) == 0, capsys.readouterr().err
    segments = sorted((tmp_path / "deploy").glob("model.seg*.onnx"))
    assert segments
    for seg in segments:
        onnx.checker.check_model(onnx.load(seg), full_check=True)
    # the segments, chained, compute what the model computes (a DLA stretch forces a cut)
    from onnx.reference import ReferenceEvaluator

    from placetune.placement.cut import cut, run_segments
    model = Model.load(tmp_path / "dyn.onnx", shapes=["x=1x3x16x16"])
    placement = Placement(model, {"/c2/Conv": "DLA0"})
    parts = cut(model, placement, source=onnx.load(tmp_path / "dyn.onnx"))
    assert len(parts) >= 2
    x = np.random.default_rng(2).standard_normal((1, 3, 16, 16)).astype(np.float32)
    want = ReferenceEvaluator(onnx.load(tmp_path / "dyn.onnx")).run(None, {"x": x})[0]
    assert np.allclose(run_segments(parts, {"x": x})["out"], want, rtol=1e-4, atol=1e-5)
