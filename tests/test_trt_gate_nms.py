"""The pipeline gate on a detector ending in a TensorRT NMS plugin (EfficientNMS_TRT, BatchedNMS_TRT):
its four outputs are compared as a set of detections, so a tiny FP16 / DLA difference that reorders
the sorted detections or keeps a borderline box passes, and a wrong cut still fails.

The plugin's output layout is NVIDIA/TensorRT release/10.3 plugin/efficientNMSPlugin/README.md:82-93
(num_detections [B, 1] int32; boxes [B, K, 4] corners; scores [B, K]; classes [B, K] int32; "Only the
top num_detections[i] entries ... are valid"; sorted in descending score, README.md:128). Checked
against that README and the doubles' EfficientNMS_TRT kernel (tests/fakes/tensorrt/_plugins.py); no
real engine output of the plugin is in the corpus.
"""

from __future__ import annotations

import importlib

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from placetune.backends.tensorrt.pipeline import nms_outputs
from placetune.backends.tensorrt.pool import WORKER_FILE

GROUP = {"node": "nms", "op": "EfficientNMS_TRT", "num_detections": "num_dets", "boxes": "det_boxes",
         "scores": "det_scores", "classes": "det_classes", "score_threshold": 0.25, "iou_threshold": 0.45,
         "class_agnostic": False}
K = 8


def _worker(monkeypatch):
    monkeypatch.syspath_prepend(str(WORKER_FILE.parent))
    return importlib.import_module("worker_pipeline")


def _out(dets):
    """EfficientNMS_TRT's outputs for one image: ``dets`` (box, score, class) in the given order, zero-padded to K."""
    boxes = np.zeros((1, K, 4), np.float32)
    scores = np.zeros((1, K), np.float32)
    classes = np.zeros((1, K), np.int32)
    for i, (box, score, cls) in enumerate(dets):
        boxes[0, i], scores[0, i], classes[0, i] = box, score, cls
    return {"num_dets": np.array([[len(dets)]], np.int32), "det_boxes": boxes, "det_scores": scores,
            "det_classes": classes}


REF = [((10, 10, 50, 60), 0.9, 0), ((100, 100, 140, 180), 0.7, 2), ((200, 20, 260, 90), 0.6994, 1),
       ((30, 200, 90, 260), 0.5, 0)]


def test_reordered_and_slightly_different_detections_pass_the_gate(monkeypatch):
    worker = _worker(monkeypatch)
    want = _out(REF)
    # FP16 on the DLA: 0.7 and 0.6994 swap places in the sorted output, every box moves a little
    got = _out([((10.1, 10, 50, 60.2), 0.9004, 0), ((200, 20.1, 260, 90), 0.7003, 1),
                ((100, 100, 140.2, 180), 0.6998, 2), ((30, 200, 90.1, 260), 0.4996, 0)])
    plain = worker.compare_frames(np, [got], [want], 0.02)
    assert not plain["passed"]  # element by element, the swap is a large error (the gate's verdict before)
    report = worker.compare_frames(np, [got], [want], 0.02, [GROUP])
    row = report["outputs"]["nms:nms"]
    assert report["passed"] and row["passed"] and row["matched"] == 4 and row["metric"] == "nms_detections", row
    assert not report["vacuous"] and set(report["outputs"]) == {"nms:nms"}
    assert row["max_score_diff"] < 0.001 and row["min_matched_iou"] > 0.9


def test_a_borderline_detection_kept_on_one_side_only_passes(monkeypatch):
    worker = _worker(monkeypatch)
    want = _out(REF + [((300, 300, 340, 340), 0.2502, 3)])  # just above score_threshold 0.25 in the reference
    got = _out(REF)  # just below it in the pipeline: num_dets 4, not 5
    assert worker.compare_frames(np, [got], [want], 0.02, [GROUP])["passed"]
    # a box suppressed in one only: its IoU with a kept box of its class, 31.5 / 68.5 = 0.46, is at the
    # IoU threshold (0.45)
    want = _out(REF + [((10, 28.5, 50, 78.5), 0.4, 0)])
    assert worker.compare_frames(np, [got], [want], 0.02, [GROUP])["passed"]
    far = _out(REF + [((10, 50, 50, 100), 0.4, 0)])  # IoU 10 / 90 with it: a detection the pipeline lost
    assert not worker.compare_frames(np, [got], [far], 0.02, [GROUP])["passed"]


def test_a_wrong_cut_still_fails_the_nms_gate(monkeypatch):
    worker = _worker(monkeypatch)
    want = _out(REF)
    missing = _out(REF[:1] + REF[2:])  # a confident detection (0.7, far from every threshold) is lost
    report = worker.compare_frames(np, [missing], [want], 0.02, [GROUP])
    assert not report["passed"] and "has no counterpart" in report["outputs"]["nms:nms"]["error"]
    assert "detections differ (3 of 4 matched" in worker._gate_error(report)
    moved = _out([(REF[0][0], 0.9, 0), ((400, 400, 440, 480), 0.7, 2)] + REF[2:])  # a box elsewhere
    assert not worker.compare_frames(np, [moved], [want], 0.02, [GROUP])["passed"]
    relabelled = _out([(REF[0][0], 0.9, 5)] + REF[1:])  # another class
    assert not worker.compare_frames(np, [relabelled], [want], 0.02, [GROUP])["passed"]
    rescored = _out([(REF[0][0], 0.8, 0)] + REF[1:])  # a score off by 0.1
    assert not worker.compare_frames(np, [rescored], [want], 0.02, [GROUP])["passed"]
    nan = _out(REF)
    nan["det_boxes"][0, 0, 0] = np.nan
    assert "non-finite" in worker.compare_frames(np, [nan], [want], 0.02, [GROUP])["outputs"]["nms:nms"]["error"]


def test_no_detection_on_random_input_is_still_a_gate_that_checked_nothing(monkeypatch):
    worker = _worker(monkeypatch)
    empty = _out([])
    report = worker.compare_frames(np, [empty, empty], [_out([]), _out([])], 0.02, [GROUP])
    assert report["passed"] and report["vacuous"] and report["same_for_every_input"]


def _detector(op="EfficientNMS_TRT"):
    """A detector head ending in a TensorRT NMS plugin node, as YOLO exports write it."""
    x = helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 8, 8])
    outs = [helper.make_tensor_value_info("num_dets", TensorProto.INT32, [1, 1]),
            helper.make_tensor_value_info("det_boxes", TensorProto.FLOAT, [1, K, 4]),
            helper.make_tensor_value_info("det_scores", TensorProto.FLOAT, [1, K]),
            helper.make_tensor_value_info("det_classes", TensorProto.INT32, [1, K])]
    nodes = [helper.make_node("Reshape", ["images", "s1"], ["boxes"]),
             helper.make_node("Reshape", ["images", "s2"], ["scores"]),
             helper.make_node(op, ["boxes", "scores"], [o.name for o in outs], name="/end2end/NMS",
                              domain="TRT", score_threshold=0.25, iou_threshold=0.45, max_output_boxes=K,
                              background_class=-1, score_activation=0, class_agnostic=1, box_coding=0)]
    init = [helper.make_tensor("s1", TensorProto.INT64, [3], [1, 48, 4]),
            helper.make_tensor("s2", TensorProto.INT64, [3], [1, 48, 4])]
    return helper.make_graph(nodes, "det", [x], outs, init)


def test_the_nms_plugin_outputs_are_found_in_the_graph_by_op_type():
    groups = nms_outputs(_detector())
    assert groups == [{"node": "/end2end/NMS", "op": "EfficientNMS_TRT", "num_detections": "num_dets",
                       "boxes": "det_boxes", "scores": "det_scores", "classes": "det_classes",
                       "score_threshold": 0.25, "iou_threshold": pytest.approx(0.45), "class_agnostic": True}]
    assert nms_outputs(_detector("Identity4")) == []  # another op: compared element by element
    graph = _detector()
    del graph.output[0]  # num_dets not a network output: the set comparison needs all four
    assert nms_outputs(graph) == []
    assert isinstance(onnx.helper.make_model(_detector()), onnx.ModelProto)


def _small_detector(path):
    """images [1, 3, 8, 8] -> a 1x1 Conv head [1, 4 + 3, 64] (64 anchors: center-size boxes in a 64 x 64
    image, three class scores mostly in 0.25 .. 1, close to each other) -> EfficientNMS_TRT."""
    from tests.detector import append_efficient_nms

    rng = np.random.default_rng(3)
    w = np.zeros((7, 3, 1, 1), np.float32)
    w[0, 0], w[1, 1], w[2, 2], w[3, 2] = 16.0, 16.0, 1.0, 1.0  # x, y from the input; width, height 7 .. 9
    w[4:, :, 0, 0] = rng.uniform(-0.3, 0.3, (3, 3))
    bias = np.array([32, 32, 8, 8, 0.6, 0.6, 0.6], np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["images", "w", "b"], ["head4d"], name="/head/Conv"),
         helper.make_node("Reshape", ["head4d", "shape"], ["head"], name="/head/Reshape")],
        "small_detector", [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("head", TensorProto.FLOAT, [1, 7, 64])],
        [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(bias, "b"),
         onnx.numpy_helper.from_array(np.array([1, 7, 64], np.int64), "shape")])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(append_efficient_nms(proto, max_output_boxes=100), str(path))
    return path


def test_a_detector_pipeline_with_its_head_on_the_dla_passes_the_gate_against_the_doubles(tmp_path, monkeypatch):
    """End to end against the doubles (their EfficientNMS_TRT kernel: tests/fakes/tensorrt/_plugins.py):
    the head on DLA0 writes its cut tensor in FP16, so NMS in the GPU segment is fed numbers a little
    off the all-GPU reference's; element by element the sorted detections then differ (the gate
    rejected the pipeline as wrong data), as a set they agree; a frame that reads another input's cut
    tensor (a slot race) still fails."""
    import placetune.backends.tensorrt.pipeline as pipeline
    from placetune import Evaluator, Placement
    from placetune.backends.tensorrt.backend import TensorRTBackend
    from tests.fakes import fake_env

    path = _small_detector(tmp_path / "det.onnx")

    def measure(sub, racy=False):
        be = TensorRTBackend(worker_env=fake_env("10.3.0"), cache_dir=tmp_path / sub, warmup_ms=1,
                             profile_iterations=0)
        if racy:  # the test hook: a frame reads its cut tensor from the other slot (another input's)
            orig = be.pool.run
            monkeypatch.setattr(be.pool, "run", lambda job, **kw: orig(
                dict(job, test_read_other_slot=True) if job.get("op") == "pipeline" else job, **kw))
        ev = Evaluator(str(path), "orin-agx", backend=be, store=tmp_path / f"{sub}.db", iterations=3,
                       mode="pipeline", precision="fp16", trt_version="10.3", frames_in_flight=2)
        try:
            return ev.evaluate(Placement(ev.model, {"/head/Conv": "DLA0"}))
        finally:
            ev.close()
            be.close()

    m = measure("sets")
    assert m.status == "ok", m.reason
    gate = m.extra["gate"]
    row = gate["outputs"]["nms:/nms/EfficientNMS_TRT"]
    assert gate["passed"] and row["passed"] and row["reference_detections"] > 10 and not gate["vacuous"], gate
    assert row["matched"] == row["reference_detections"] == row["pipeline_detections"], row
    assert not gate["same_for_every_input"] and "gate_unverified" not in m.extra
    assert any("as a set of detections" in n for n in m.extra["notes"]), m.extra["notes"]
    wrong = measure("racy", racy=True)  # the detections of another input: the set comparison still fails it
    assert wrong.status == "runtime_failed" and "detections differ" in wrong.reason, wrong.reason
    monkeypatch.setattr(pipeline, "nms_outputs", lambda graph, opset=None: [])  # the gate as it was: element by element
    before = measure("elements")
    assert before.status == "runtime_failed" and "pipeline outputs differ" in before.reason, before.reason


def test_a_class_swap_next_to_boxes_at_the_iou_threshold_is_not_borderline(monkeypatch):
    """A detection whose box the other side has too, unmatched (another class), is a wrong detection,
    not one suppressed on one side only: it fails even when neighbours of both classes overlap it at
    about the IoU threshold (IoU 0.46, threshold 0.45; before, each side's copy was forgiven)."""
    worker = _worker(monkeypatch)
    box = (10, 10, 50, 60)
    below, above = ((10, 28.5, 50, 78.5), 0.8, 0), ((10, -8.5, 50, 41.5), 0.7, 1)  # IoU 0.46 with box
    want = _out([(box, 0.9, 0), below, above])
    got = _out([(box, 0.9, 1), below, above])
    report = worker.compare_frames(np, [got], [want], 0.02, [GROUP])
    assert not report["passed"], report
    assert "(the other side has its box as class 1, score 0.9)" in report["outputs"]["nms:nms"]["error"]
    alone = _out([below, above])  # the box only in the reference: suppressed in the pipeline at IoU 0.46
    assert worker.compare_frames(np, [alone], [want], 0.02, [GROUP])["passed"]
