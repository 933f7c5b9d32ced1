"""The pipeline gate on the other forms a detector's TensorRT NMS takes: outputs that reach the network
outputs through ops that keep their rows (a Cast of the classes, a Reshape of num_detections),
EfficientNMS_ONNX_TRT's selected indices, ``score_activation``; and the one-line note when an NMS
output is still compared element by element (through a Gather, a Concat).

EfficientNMS_ONNX_TRT's output as NVIDIA/TensorRT release/10.3 plugin/efficientNMSPlugin writes it:
rows (batch, class, box) in the order its threads finish (efficientNMSInference.cu:148-156), the rows
after the last one written a copy of it (PadONNXResult, :158-175), all -1 when none was kept (:637-640);
score_activation: raw scores thresholded at logit(score_threshold) (:535-545), sigmoid(score) written
(:124-126). Checked against those sources and the doubles; no real engine output is in the corpus.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper

from placetune.backends.tensorrt.nms_graph import nms_elementwise, nms_outputs
from placetune.backends.tensorrt.pool import WORKER_FILE

_spec = importlib.util.spec_from_file_location(  # the doubles' kernel alone (its package needs the fake GPU)
    "_trt_plugins", Path(__file__).parent / "fakes" / "tensorrt" / "_plugins.py")
_plugins = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_plugins)
efficient_nms = _plugins.efficient_nms

K = 8
REF = [((10, 10, 50, 60), 0.9, 0), ((100, 100, 140, 180), 0.7, 2), ((200, 20, 260, 90), 0.6994, 1),
       ((30, 200, 90, 260), 0.5, 0)]
SWAPPED = [((10.1, 10, 50, 60.2), 0.9004, 0), ((200, 20.1, 260, 90), 0.7003, 1),
           ((100, 100, 140.2, 180), 0.6998, 2), ((30, 200, 90.1, 260), 0.4996, 0)]


def _worker(monkeypatch):
    monkeypatch.syspath_prepend(str(WORKER_FILE.parent))
    return importlib.import_module("worker_pipeline")


def _graph(post=()):
    """A detector head ending in EfficientNMS_TRT (outputs n, b, s, c), then the ``post`` nodes, whose
    last outputs are the network outputs named in ``outs``."""
    x = helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 8, 8])
    nodes = [helper.make_node("Reshape", ["images", "s1"], ["boxes"]),
             helper.make_node("Reshape", ["images", "s2"], ["scores"]),
             helper.make_node("EfficientNMS_TRT", ["boxes", "scores"], ["n", "b", "s", "c"], name="/nms",
                              domain="TRT", score_threshold=0.25, iou_threshold=0.45, max_output_boxes=K)]
    nodes += list(post)
    produced = {o for node in nodes for o in node.output}
    read = {i for node in nodes for i in node.input}
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ["n", "b", "s", "c"] + sorted(produced)
            if o in produced and o not in read and o not in ("boxes", "scores")]
    init = [helper.make_tensor("s1", TensorProto.INT64, [3], [1, 48, 4]),
            helper.make_tensor("s2", TensorProto.INT64, [3], [1, 48, 4]),
            helper.make_tensor("flat", TensorProto.INT64, [1], [-1]),
            helper.make_tensor("rows", TensorProto.INT64, [2], [1, -1]),
            helper.make_tensor("idx", TensorProto.INT64, [1], [0])]
    return helper.make_graph(nodes, "det", [x], outs, init)


def test_nms_outputs_are_followed_through_ops_that_keep_their_rows():
    post = [helper.make_node("Reshape", ["n", "flat"], ["num"], name="/post/num"),  # [1, 1] -> [1]
            helper.make_node("Reshape", ["b", "rows"], ["boxes_flat"], name="/post/boxes"),  # [1, K * 4]
            helper.make_node("Identity", ["s"], ["s1d"], name="/post/id"),
            helper.make_node("Cast", ["s1d"], ["scores16"], name="/post/half", to=TensorProto.FLOAT16),
            helper.make_node("Cast", ["c"], ["labels"], name="/post/cast", to=TensorProto.FLOAT)]
    groups = nms_outputs(_graph(post))  # before: [] (the plugin's outputs themselves are not network outputs)
    assert [(g["num_detections"], g["boxes"], g["scores"], g["classes"]) for g in groups] == \
        [("num", "boxes_flat", "scores16", "labels")]
    assert nms_elementwise(_graph(post)) == []


def test_nms_outputs_through_other_ops_stay_element_by_element_and_say_so():
    post = [helper.make_node("Gather", ["b", "idx"], ["first_box"], name="/post/Gather", axis=1)]
    graph = _graph(post)
    assert nms_outputs(graph) == []
    assert nms_elementwise(graph) == ["EfficientNMS_TRT '/nms' outputs through Gather '/post/Gather'"]
    concat = [helper.make_node("Concat", ["b", "s"], ["dets"], name="/post/Concat", axis=2)]
    assert nms_elementwise(_graph(concat)) == ["EfficientNMS_TRT '/nms' outputs through Concat '/post/Concat'"]


def _reshaped(dets):
    """The plugin's outputs for one image after the row-keeping ops of the first test: num [1], boxes
    [1, K * 4], scores float16, classes float."""
    boxes = np.zeros((1, K, 4), np.float32)
    scores = np.zeros((1, K), np.float16)
    classes = np.zeros((1, K), np.float32)
    for i, (box, score, cls) in enumerate(dets):
        boxes[0, i], scores[0, i], classes[0, i] = box, score, cls
    return {"num": np.array([len(dets)], np.int32), "boxes_flat": boxes.reshape(1, K * 4), "scores16": scores,
            "labels": classes}


def test_reshaped_and_cast_nms_outputs_are_compared_as_a_set(monkeypatch):
    worker = _worker(monkeypatch)
    group = {"node": "/nms", "op": "EfficientNMS_TRT", "num_detections": "num", "boxes": "boxes_flat",
             "scores": "scores16", "classes": "labels", "score_threshold": 0.25, "iou_threshold": 0.45,
             "class_agnostic": False}
    want, got = _reshaped(REF), _reshaped(SWAPPED)
    assert not worker.compare_frames(np, [got], [want], 0.02)["passed"]  # element by element
    report = worker.compare_frames(np, [got], [want], 0.02, [group])
    assert report["passed"] and report["outputs"]["nms:/nms"]["matched"] == 4, report
    lost = _reshaped(REF[:1] + REF[2:])
    assert not worker.compare_frames(np, [lost], [want], 0.02, [group])["passed"]


def _indices(rows, n=8):
    """EfficientNMS_ONNX_TRT's output [n, 3]: ``rows`` in the given order, then copies of the last one
    (PadONNXResult), or all -1 when there is none."""
    out = np.full((n, 3), -1, np.int32)
    for i, r in enumerate(rows):
        out[i] = r
    if rows:
        out[len(rows):] = rows[-1]
    return {"selected": out}


def test_efficient_nms_onnx_selected_indices_are_compared_as_a_set(monkeypatch):
    worker = _worker(monkeypatch)
    graph = _graph()
    graph.node[2].CopyFrom(helper.make_node("EfficientNMS_ONNX_TRT", ["boxes", "scores"], ["selected"], name="/nms",
                                            domain="TRT", score_threshold=0.25, iou_threshold=0.45,
                                            max_output_boxes_per_class=8, center_point_box=0))
    del graph.output[:]
    graph.output.append(helper.make_tensor_value_info("selected", TensorProto.INT32, [8, 3]))
    groups = nms_outputs(graph)
    assert groups == [{"node": "/nms", "op": "EfficientNMS_ONNX_TRT", "indices": "selected",
                       "score_threshold": 0.25, "iou_threshold": groups[0]["iou_threshold"]}]
    want = _indices([(0, 0, 3), (0, 2, 17), (0, 1, 40)])
    got = _indices([(0, 2, 17), (0, 1, 40), (0, 0, 3)])  # the threads finished in another order
    assert not worker.compare_frames(np, [got], [want], 0.02)["passed"]  # element by element (before)
    report = worker.compare_frames(np, [got], [want], 0.02, groups)
    row = report["outputs"]["nms:/nms"]
    assert report["passed"] and row["metric"] == "nms_indices" and row["matched"] == 3 and not report["vacuous"]
    other = _indices([(0, 2, 17), (0, 1, 41), (0, 0, 3)])  # another box kept: no score to call it borderline
    report = worker.compare_frames(np, [other], [want], 0.02, groups)
    assert not report["passed"] and "selected indices differ (2 of 3 matched" in worker._gate_error(report)
    none = worker.compare_frames(np, [_indices([])], [_indices([])], 0.02, groups)
    assert none["passed"] and none["vacuous"]


def test_the_gate_error_says_which_nms_outputs_were_compared_element_by_element(monkeypatch):
    worker = _worker(monkeypatch)
    want = {"first_box": np.array([[10, 10, 50, 60]], np.float32)}
    got = {"first_box": np.array([[200, 20, 260, 90]], np.float32)}  # two near-equal scores swapped
    report = worker.compare_frames(np, [got], [want], 0.02)
    report["nms_elementwise"] = ["EfficientNMS_TRT '/nms' outputs through Gather '/post/Gather'"]
    assert worker._gate_error(report).endswith(
        "; compared element by element: EfficientNMS_TRT '/nms' outputs through Gather '/post/Gather'")


def test_score_activation_scores_and_threshold_are_on_one_scale(monkeypatch):
    """With score_activation the plugin writes sigmoid scores and keeps those above score_threshold on
    that scale (logit of the threshold on the raw scores), so a raw score at logit(0.25) is a borderline
    detection for the gate (this held before: pinned, not a fix)."""
    worker = _worker(monkeypatch)
    boxes = np.array([[[10, 10, 50, 60], [100, 100, 140, 180], [200, 20, 260, 90]]], np.float32)
    logit = np.log(0.25 / 0.75)
    raw = np.array([[[3.0], [1.0], [logit + 0.002]]], np.float32)  # sigmoid: 0.95, 0.73, 0.2504
    group = {"node": "nms", "op": "EfficientNMS_TRT", "num_detections": "n", "boxes": "b", "scores": "s",
             "classes": "c", "score_threshold": 0.25, "iou_threshold": 0.45, "class_agnostic": False}
    kw = dict(score_threshold=0.25, iou_threshold=0.45, max_output_boxes=K, score_activation=1)
    want = dict(zip("nbsc", efficient_nms(boxes, raw, **kw)))
    got = dict(zip("nbsc", efficient_nms(boxes, raw - np.float32(0.004), **kw)))  # FP16: the third drops out
    assert int(want["n"][0, 0]) == 3 and int(got["n"][0, 0]) == 2
    assert 0.25 < float(want["s"][0, 2]) < 0.2505  # written as a sigmoid score
    assert worker.compare_frames(np, [got], [want], 0.02, [group])["passed"]
    far = dict(zip("nbsc", efficient_nms(boxes, raw - np.float32([[[0], [0.004], [0.004]]]) - np.float32(
        [[[0], [2.5], [0]]]), **kw)))  # the 0.73 detection lost: not borderline
    assert not worker.compare_frames(np, [far], [want], 0.02, [group])["passed"]


def _measure(path, tmp_path, sub):
    from placetune import Evaluator, Placement
    from placetune.backends.tensorrt.backend import TensorRTBackend
    from tests.fakes import fake_env

    be = TensorRTBackend(worker_env=fake_env("10.3.0"), cache_dir=tmp_path / sub, warmup_ms=1, profile_iterations=0)
    ev = Evaluator(str(path), "orin-agx", backend=be, store=tmp_path / f"{sub}.db", iterations=3, mode="pipeline",
                   precision="fp16", trt_version="10.3", frames_in_flight=2)
    try:
        return ev.evaluate(Placement(ev.model, {"/head/Conv": "DLA0"}))
    finally:
        ev.close()
        be.close()


def _after_nms(path, op):
    """The small detector of test_trt_gate_nms with ``op`` after its NMS: a Cast of the classes to float
    (rows kept), or a Gather of every box coordinate (the same values, but through a Gather)."""
    import onnx

    proto = onnx.load(str(path))
    nms = next(n for n in proto.graph.node if n.op_type == "EfficientNMS_TRT")
    which = 3 if op == "Cast" else 1
    final = nms.output[which]
    nms.output[which] = final + "_raw"
    raw = onnx.ValueInfoProto()
    raw.CopyFrom(proto.graph.output[which])
    raw.name = final + "_raw"
    proto.graph.value_info.append(raw)  # the plugin's output shape, as its exports declare it
    if op == "Cast":
        proto.graph.node.append(helper.make_node("Cast", [final + "_raw"], [final], name="/post/Cast",
                                                 to=TensorProto.FLOAT))
        proto.graph.output[3].type.tensor_type.elem_type = TensorProto.FLOAT
    else:
        proto.graph.initializer.append(helper.make_tensor("/post/all", TensorProto.INT64, [4], [0, 1, 2, 3]))
        proto.graph.node.append(helper.make_node("Gather", [final + "_raw", "/post/all"], [final], name="/post/Gather",
                                                 axis=2))
    onnx.save(proto, str(path))
    return path


def test_a_detector_whose_nms_classes_are_cast_passes_and_one_through_a_gather_says_why_it_failed(tmp_path):
    """End to end against the doubles: the head on DLA0 (FP16 cut tensor) reorders the NMS's sorted
    detections; with the classes cast to float on the way out the gate still compares them as a set
    and passes (before: element by element, rejected); through a Gather they are compared element by
    element, rejected, and the reason says so."""
    from tests.test_trt_gate_nms import _small_detector

    cast = _measure(_after_nms(_small_detector(tmp_path / "cast.onnx"), "Cast"), tmp_path, "cast")
    assert cast.status == "ok", cast.reason
    row = cast.extra["gate"]["outputs"]["nms:/nms/EfficientNMS_TRT"]
    assert row["passed"] and row["matched"] == row["reference_detections"] > 10, row
    gather = _measure(_after_nms(_small_detector(tmp_path / "gather.onnx"), "Gather"), tmp_path, "gather")
    assert gather.status == "runtime_failed", gather.reason
    assert gather.reason.endswith("; compared element by element: EfficientNMS_TRT '/nms/EfficientNMS_TRT' outputs "
                                  "through Gather '/post/Gather'"), gather.reason
    assert any(n.startswith("the correctness gate compared element by element") for n in gather.extra["notes"])


def test_a_detector_ending_in_efficient_nms_onnx_passes_the_gate_as_a_set_of_indices(tmp_path, monkeypatch):
    """End to end against the doubles (their EfficientNMS_ONNX_TRT kernel writes the selected rows
    highest score first): the head on DLA0 reorders them; as a set they agree (before: element by
    element, rejected)."""
    import onnx

    import placetune.backends.tensorrt.pipeline as pipeline
    from tests.test_trt_gate_nms import _small_detector

    path = _small_detector(tmp_path / "onnx_nms.onnx")
    proto = onnx.load(str(path))
    nms = next(n for n in proto.graph.node if n.op_type == "EfficientNMS_TRT")
    nms.CopyFrom(helper.make_node("EfficientNMS_ONNX_TRT", list(nms.input), ["selected"], name="/nms/ONNX",
                                  score_threshold=0.25, iou_threshold=0.45, max_output_boxes_per_class=100,
                                  center_point_box=1))
    del proto.graph.output[:]
    proto.graph.output.append(helper.make_tensor_value_info("selected", TensorProto.INT32, [100, 3]))
    onnx.save(proto, str(path))
    m = _measure(path, tmp_path, "sets")
    assert m.status == "ok", m.reason
    row = m.extra["gate"]["outputs"]["nms:/nms/ONNX"]
    assert row["metric"] == "nms_indices" and row["passed"] and row["matched"] == row["reference_detections"] > 10
    assert any("selected indices of EfficientNMS_ONNX_TRT '/nms/ONNX' as a set" in n for n in m.extra["notes"])
    monkeypatch.setattr(pipeline, "nms_outputs", lambda graph, opset=None: [])  # the gate as it was: element by element
    before = _measure(path, tmp_path, "elements")
    assert before.status == "runtime_failed" and "pipeline outputs differ" in before.reason, before.reason
