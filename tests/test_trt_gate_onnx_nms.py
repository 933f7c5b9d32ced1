"""The pipeline gate on a detector whose NMS is the standard ONNX NonMaxSuppression (an Ultralytics
``nms=True`` export; torchvision-style detectors): the network outputs its selected rows reach are
compared as a set of detections, so an FP16 / DLA difference that reorders them or moves a borderline
box across the score threshold passes, and a broken pipeline still fails.

The tail built here is the one a real Ultralytics export writes (yolo11n, ``nms=True``, opset 18, read
with the onnx API; the real export's graph is checked below when PLACETUNE_ULTRALYTICS_PYTHON is set):
Greater(conf, 0.25) -> NonZero -> GatherND of boxes, scores, classes -> NonMaxSuppression ->
Gather(axis 1, [2]) -> Squeeze -> Slice(0:K) -> Gather(axis 0) -> Reshape / Cast -> Concat(axis -1)
-> Reshape [-1] -> Pad (pads computed from the count) -> Reshape [1, K, 6]. The doubles are that
graph run by onnx's reference evaluator (NonMaxSuppression as the ONNX spec says); no TensorRT
engine output of such a graph is in the corpus.

Figures (old gate vs new gate): ``python -m tests.test_trt_gate_onnx_nms``.
"""

from __future__ import annotations

import importlib
import json
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from placetune.backends.tensorrt.nms_graph import nms_elementwise, nms_outputs
from placetune.backends.tensorrt.pool import WORKER_FILE

K = 20  # rows of the padded output
A = 64  # anchors
C = 3  # classes


@pytest.fixture(autouse=True)
def _worker_path(monkeypatch):
    """The worker's sibling modules importable as the worker imports them (for this module's tests)."""
    monkeypatch.syspath_prepend(str(WORKER_FILE.parent))


def _worker():
    return importlib.import_module("worker_pipeline")


def tail_nodes(head: str, *, center: int = 0, k: int = K, classes: int = C) -> tuple[list, list]:
    """Ultralytics' NMS tail from ``head`` [1, 4 + classes, A] (boxes corners, or center-size with
    ``center``) to ``dets`` [1, k, 6]: nodes and initializers."""
    c = lambda name, v: numpy_helper.from_array(np.asarray(v), name)  # noqa: E731
    inits = [c("split", np.array([4, classes], np.int64)), c("thr", np.array(0.25, np.float32)),
             c("ax0", np.array([0], np.int64)), c("ax1", np.array([1], np.int64)), c("maxout", np.array([100], np.int64)),
             c("iou", np.array([0.45], np.float32)), c("col", np.array([2], np.int64)),
             c("kk", np.array([k], np.int64)), c("col1", np.array([-1, 1], np.int64)),
             c("flat", np.array([-1], np.int64)), c("k6", np.array(k * 6, np.int64)), c("six", np.array(6, np.int64)),
             c("zero", np.array(0, np.int64)), c("outshape", np.array([1, k, 6], np.int64))]
    n = helper.make_node
    nodes = [
        n("Transpose", [head], ["t"], name="/Transpose", perm=[0, 2, 1]),
        n("Split", ["t", "split"], ["boxes3", "cls3"], name="/Split", axis=2),
        n("Squeeze", ["boxes3", "ax0"], ["boxes"], name="/Squeeze_b"),
        n("Squeeze", ["cls3", "ax0"], ["cls"], name="/Squeeze_c"),
        n("ReduceMax", ["cls"], ["conf"], name="/ReduceMax", axes=[1], keepdims=0),
        n("ArgMax", ["cls"], ["label"], name="/ArgMax", axis=1, keepdims=0),
        n("Greater", ["conf", "thr"], ["mask"], name="/Greater"),
        n("NonZero", ["mask"], ["nz"], name="/NonZero"),
        n("Transpose", ["nz"], ["idx"], name="/Transpose_1", perm=[1, 0]),
        n("GatherND", ["boxes", "idx"], ["cand"], name="/GatherND"),
        n("GatherND", ["conf", "idx"], ["cand_conf"], name="/GatherND_1"),
        n("GatherND", ["label", "idx"], ["cand_label"], name="/GatherND_2"),
        n("Unsqueeze", ["cand", "ax0"], ["nms_boxes"], name="/Unsqueeze"),
        n("Unsqueeze", ["cand_conf", "ax0"], ["cc1"], name="/Unsqueeze_1"),
        n("Unsqueeze", ["cc1", "ax0"], ["nms_scores"], name="/Unsqueeze_2"),
        n("NonMaxSuppression", ["nms_boxes", "nms_scores", "maxout", "iou"], ["sel"], name="/NonMaxSuppression",
          center_point_box=center),
        n("Gather", ["sel", "col"], ["keep2"], name="/Gather", axis=1),
        n("Squeeze", ["keep2", "ax1"], ["keep_all"], name="/Squeeze"),
        n("Slice", ["keep_all", "ax0", "kk", "ax0", "ax1"], ["keep"], name="/Slice"),
        n("Gather", ["cand", "keep"], ["kb"], name="/Gather_b", axis=0),
        n("Gather", ["cand_conf", "keep"], ["ks"], name="/Gather_s", axis=0),
        n("Gather", ["cand_label", "keep"], ["kl"], name="/Gather_l", axis=0),
        n("Reshape", ["ks", "col1"], ["ks2"], name="/Reshape_s"),
        n("Reshape", ["kl", "col1"], ["kl2"], name="/Reshape_l"),
        n("Cast", ["kl2"], ["klf"], name="/Cast", to=TensorProto.FLOAT),
        n("Concat", ["kb", "ks2", "klf"], ["rows"], name="/Concat", axis=-1),
        n("Shape", ["rows"], ["rshape"], name="/Shape"),
        n("Reshape", ["rows", "flat"], ["rows_flat"], name="/Reshape_flat"),
        n("Gather", ["rshape", "zero"], ["count"], name="/Gather_count", axis=0),
        n("Sub", ["kk", "count"], ["rest"], name="/Sub"),
        n("Mul", ["rest", "six"], ["rest6"], name="/Mul"),
        n("Concat", ["ax0", "rest6"], ["pads"], name="/Concat_pads", axis=0),
        n("Pad", ["rows_flat", "pads"], ["padded"], name="/Pad"),
        n("Reshape", ["padded", "outshape"], ["dets"], name="/Reshape_out"),
    ]
    return nodes, inits


def tail_model(*, center: int = 0, post: tuple = (), outputs: tuple = ("dets",)) -> onnx.ModelProto:
    """The tail alone: input ``head`` [1, 4 + C, A] -> ``dets`` [1, K, 6] (then ``post`` nodes)."""
    nodes, inits = tail_nodes("head", center=center)
    graph = helper.make_graph(nodes + list(post), "onnx_nms_tail",
                              [helper.make_tensor_value_info("head", TensorProto.FLOAT, [1, 4 + C, A])],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs], inits)
    graph.value_info.append(helper.make_tensor_value_info("padded", TensorProto.FLOAT, [K * 6]))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def run(model: onnx.ModelProto, head: np.ndarray) -> dict[str, np.ndarray]:
    """The tail's outputs as ONNX says (onnx.reference: NonMaxSuppression per the ONNX spec)."""
    from onnx.reference import ReferenceEvaluator
    ref = ReferenceEvaluator(model)
    return dict(zip([o.name for o in model.graph.output], ref.run(None, {model.graph.input[0].name: head})))


def head_output(seed: int = 0) -> np.ndarray:
    """A detector head's output: A corner boxes in a 320 x 320 image in clusters (overlapping ones
    NMS suppresses), class scores near 0.25 .. 0.9 with many near-equal ones (what FP16 reorders)."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(20, 300, (A // 4, 2)).repeat(4, axis=0) + rng.normal(0, 6, (A, 2))
    size = rng.uniform(20, 60, (A, 2))
    boxes = np.concatenate([centres - size / 2, centres + size / 2], axis=1)
    scores = np.full((A, C), 0.05)  # one class per box: an argmax between near-equal classes would flip
    scores[np.arange(A), rng.integers(0, C, A)] = _cluster_scores(rng, A // 4, 4)
    return np.concatenate([boxes.T, scores.T], axis=0)[None].astype(np.float32)


def _cluster_scores(rng, clusters: int, size: int, step: float = 0.05) -> np.ndarray:
    """Scores of boxes in clusters (overlapping boxes of one object): ties between clusters (rounded
    base scores, what FP16 reorders), a clear order inside each (``step`` apart, so the box NMS keeps
    of a cluster is the same on both sides: see docs/trust.md on two overlapping boxes whose scores
    tie, which the gate does not forgive)."""
    base = np.round(rng.uniform(0.15, 0.9 - step * (size - 1), clusters), 2)
    return (base[:, None] + step * rng.permuted(np.tile(np.arange(size), (clusters, 1)), axis=1)).reshape(-1)


def fp16(head: np.ndarray, seed: int = 1, noise: float = 2e-3) -> np.ndarray:
    """The head as a DLA segment in FP16 writes it: rounded to half precision, a little off."""
    rng = np.random.default_rng(seed)
    return (head.astype(np.float16).astype(np.float32) * (1 + rng.normal(0, noise, head.shape))).astype(np.float32)


GROUP_KEYS = {"node", "op", "rows", "score_threshold", "iou_threshold", "max_rows", "center_point_box", "single_class"}


def test_the_selected_rows_output_is_found_with_its_columns():
    groups = nms_outputs(tail_model().graph)
    assert len(groups) == 1 and set(groups[0]) == GROUP_KEYS
    g = groups[0]
    assert g["rows"] == [{"output": "dets", "columns": ["box"] * 4 + ["score", "class"]}]
    assert g["op"] == "NonMaxSuppression" and g["node"] == "/NonMaxSuppression"
    assert g["score_threshold"] == pytest.approx(0.25)  # the Greater before NonZero: NMS has no threshold input
    assert g["iou_threshold"] == pytest.approx(0.45) and g["max_rows"] == K and g["single_class"]
    assert nms_elementwise(tail_model().graph) == []


def test_an_output_through_an_op_that_does_not_keep_rows_stays_element_by_element_and_says_why():
    post = (helper.make_node("Transpose", ["dets"], ["dets_t"], name="/post/Transpose", perm=[0, 2, 1]),)
    model = tail_model(post=post, outputs=("dets_t",))
    assert nms_outputs(model.graph) == []
    assert nms_elementwise(model.graph) == ["NonMaxSuppression '/NonMaxSuppression' selected rows through "
                                            "Transpose '/post/Transpose'"]
    # a box coordinate changed by arithmetic: no longer rows NMS selected
    post = (helper.make_node("Mul", ["dets", "two"], ["scaled"], name="/post/Mul"),)
    model = tail_model(post=post, outputs=("scaled",))
    model.graph.initializer.append(numpy_helper.from_array(np.array(2.0, np.float32), "two"))
    assert nms_outputs(model.graph) == [] and "Mul '/post/Mul'" in nms_elementwise(model.graph)[0]


def test_reshapes_of_the_rows_keep_them():
    """Squeeze / Unsqueeze / Reshape keep memory order: [1, K, 6] squeezed to [K, 6], given a batch
    axis again, flattened to K * 6 values are still the rows."""
    post = (helper.make_node("Squeeze", ["dets", "ax0"], ["dets2"], name="/post/Squeeze"),
            helper.make_node("Unsqueeze", ["dets2", "ax0"], ["dets3"], name="/post/Unsqueeze"),
            helper.make_node("Reshape", ["dets3", "flat"], ["dets_flat"], name="/post/Reshape"))
    for out in ("dets2", "dets3", "dets_flat"):
        model = tail_model(post=post, outputs=(out,))
        assert nms_outputs(model.graph)[0]["rows"] == [{"output": out, "columns": ["box"] * 4 + ["score", "class"]}]
    want, got = run(model, head_output()), run(model, fp16(head_output()))
    assert gates(model, got, want)[1]["passed"] and not gates(model, got, want)[0]["passed"]


def test_separate_box_score_label_outputs_torchvision_style_are_one_group():
    """torchvision's detectors output boxes [n, 4], scores [n], labels [n] gathered by NMS's indices."""
    model = tail_model(outputs=("kb", "ks", "kl"))
    groups = nms_outputs(model.graph)
    assert [r["columns"] for r in groups[0]["rows"]] == [["box"] * 4, ["score"], ["class"]]
    worker = _worker()
    want, got = run(model, head_output()), run(model, fp16(head_output()))
    report = worker.compare_frames(np, [got], [want], 0.02, groups)
    assert report["passed"] and report["outputs"]["nms:/NonMaxSuppression"]["compared_as"] == "detections", report


def test_the_top_rows_by_score_through_topk_are_one_group():
    """A TopK of the scores and a Gather of the boxes and labels by its indices (the top 5): rows kept,
    the cap is TopK's count."""
    post = (helper.make_node("TopK", ["ks", "five"], ["top_s", "top_i"], name="/post/TopK", axis=0),
            helper.make_node("Gather", ["kb", "top_i"], ["top_b"], name="/post/Gather_b", axis=0),
            helper.make_node("Gather", ["kl", "top_i"], ["top_l"], name="/post/Gather_l", axis=0))
    model = tail_model(post=post, outputs=("top_b", "top_s", "top_l"))
    model.graph.initializer.append(numpy_helper.from_array(np.array([5], np.int64), "five"))
    groups = nms_outputs(model.graph)
    assert [r["columns"] for r in groups[0]["rows"]] == [["box"] * 4, ["score"], ["class"]]
    assert groups[0]["max_rows"] == 5 and nms_elementwise(model.graph) == []
    head = head_output()
    want = run(model, head)
    got = run(model, fp16(head))
    assert gates(model, got, want)[1]["passed"]
    moved = run(model, head)
    moved["top_b"][0] += 30.0
    assert not gates(model, moved, want)[1]["passed"]


def test_the_score_threshold_is_nms_s_own_input_when_it_has_one_and_unknown_when_two_filters_pick():
    model = tail_model()
    nms = next(n for n in model.graph.node if n.op_type == "NonMaxSuppression")
    nms.input.append("nms_thr")
    model.graph.initializer.append(numpy_helper.from_array(np.array([0.3], np.float32), "nms_thr"))
    assert nms_outputs(model.graph)[0]["score_threshold"] == pytest.approx(0.3)
    model = tail_model()  # the candidates picked by two tests (a score and something else): not read
    nms = next(n for n in model.graph.node if n.op_type == "NonMaxSuppression")
    model.graph.initializer.append(numpy_helper.from_array(np.array(0.1, np.float32), "thr01"))
    model.graph.node.extend([helper.make_node("Greater", ["cand_conf", "thr01"], ["m2"], name="/m2"),
                             helper.make_node("NonZero", ["m2"], ["nz2"], name="/nz2"),
                             helper.make_node("Squeeze", ["nz2", "ax0"], ["i2"], name="/i2"),
                             helper.make_node("Gather", ["cc1", "i2"], ["cc2"], name="/cc2", axis=0),
                             helper.make_node("Unsqueeze", ["cc2", "ax0"], ["scores2"], name="/s2")])
    nms.input[1] = "scores2"
    nodes = list(model.graph.node)  # keep the graph in topological order: NMS after its new inputs
    order = [n for n in nodes if n is not nms and nodes.index(n) < nodes.index(nms)] + nodes[-5:] + [nms] + \
        [n for n in nodes[:-5] if nodes.index(n) > nodes.index(nms)]
    del model.graph.node[:]
    model.graph.node.extend(order)
    assert nms_outputs(model.graph)[0]["score_threshold"] is None


def test_the_iou_threshold_is_the_spec_s_0_when_absent_and_unknown_when_computed():
    """ONNX NonMaxSuppression: no iou_threshold input means 0; one computed in the graph is unknown (None),
    never 0, which would let the near-tie forgiveness pair any two overlapping boxes."""
    model = tail_model()
    nms = next(n for n in model.graph.node if n.op_type == "NonMaxSuppression")
    del nms.input[3:]
    assert nms_outputs(model.graph)[0]["iou_threshold"] == 0.0
    model = tail_model()
    nms = next(n for n in model.graph.node if n.op_type == "NonMaxSuppression")
    at = list(model.graph.node).index(nms)
    model.graph.node.insert(at, helper.make_node("ReduceMax", ["conf"], ["iou_in"], name="/iou_from_data", keepdims=0))
    nms.input[3] = "iou_in"
    assert nms_outputs(model.graph)[0]["iou_threshold"] is None


def test_a_malformed_nms_node_stays_element_by_element_in_one_line():
    model = tail_model()
    nms = next(n for n in model.graph.node if n.op_type == "NonMaxSuppression")
    del nms.input[1:]
    assert nms_outputs(model.graph) == []
    assert nms_elementwise(model.graph) == ["NonMaxSuppression '/NonMaxSuppression' has no scores input"]


def gates(model: onnx.ModelProto, got: dict, want: dict) -> tuple[dict, dict]:
    """The old gate (element by element) and the new one on the same outputs."""
    worker = _worker()
    return (worker.compare_frames(np, [got], [want], 0.02),
            worker.compare_frames(np, [got], [want], 0.02, nms_outputs(model.graph, model.opset_import[0].version)))


def test_a_healthy_reordered_pipeline_passes_and_failed_element_by_element():
    model = tail_model()
    head = head_output()
    want, got = run(model, head), run(model, fp16(head))
    valid = lambda d: d["dets"][0][np.abs(d["dets"][0]).sum(axis=1) > 0]  # noqa: E731
    assert len(valid(want)) >= 8  # the gate has something to check
    assert not np.array_equal(valid(want)[:, 5], valid(got)[:, 5])  # FP16 reordered the rows
    old, new = gates(model, got, want)
    assert not old["passed"]
    row = new["outputs"]["nms:/NonMaxSuppression"]
    assert new["passed"] and row["passed"] and row["metric"] == "nms_rows", row
    assert row["matched"] >= len(valid(want)) - 1 and row["compared_as"] == "detections" and not new["vacuous"]


def test_a_box_crossing_the_score_threshold_or_beyond_the_row_cap_is_forgiven():
    model = tail_model()
    head = head_output()
    head[0, 4:, :] = np.minimum(head[0, 4:, :], 0.24)
    head[0, 4, 5] = 0.2503  # one box just above 0.25 in the reference
    pipe = head.copy()
    pipe[0, 4, 5] = 0.2497  # just below it in the pipeline
    want, got = run(model, head), run(model, pipe)
    assert int((np.abs(want["dets"]).sum(axis=2) > 0).sum()) == 1 and not got["dets"].any()
    old, new = gates(model, got, want)
    assert not old["passed"] and new["passed"], new
    # more than K boxes kept: which come last depends on 1e-3 score differences
    head = head_output(5)
    head[0, 4:, :] = np.round(head[0, 4:, :] * 4) / 4 + 0.3  # many ties at 0.55 .. 1.3
    want, got = run(model, head), run(model, fp16(head, noise=1e-3))
    assert (np.abs(want["dets"][0]).sum(axis=1) > 0).all()  # full: K rows
    assert gates(model, got, want)[1]["passed"]


def broken(head: np.ndarray) -> dict[str, np.ndarray]:
    """Pipelines with a wrong cut: half the boxes moved, or a confident detection's class swapped."""
    moved = fp16(head)
    moved[0, 0:4, ::2] += 40.0
    relabel = fp16(head)
    best = int(np.argmax(head[0, 4:, :].max(axis=0)))
    cls = int(np.argmax(head[0, 4:, best]))
    relabel[0, 4 + cls, best], relabel[0, 4 + (cls + 1) % C, best] = 0.0, head[0, 4 + cls, best]
    return {"half the boxes moved": moved, "a class swapped": relabel}


def test_a_broken_pipeline_still_fails():
    model = tail_model()
    head = head_output()
    want = run(model, head)
    for what, bad in broken(head).items():
        old, new = gates(model, run(model, bad), want)
        row = new["outputs"]["nms:/NonMaxSuppression"]
        assert not old["passed"] and not new["passed"], what
        assert "detection rows differ" in row["error"] and "has no counterpart" in row["error"], (what, row)
    lost = run(model, head)
    rows = want["dets"][0]
    _worker()
    iou = importlib.import_module("worker_nms")._iou(np, rows[:, :4].astype(np.float64), rows[:, :4].astype(np.float64))
    np.fill_diagonal(iou, 0.0)
    clear = [i for i in range(K) if rows[i, 4] > 0.3 and iou[i].max() < 0.35]  # not near the IoU threshold
    lost["dets"][0, clear[0]] = 0.0  # a confident row lost
    assert not gates(model, lost, want)[1]["passed"]
    nan = run(model, head)
    nan["dets"][0, 0, 0] = np.nan
    assert "non-finite" in gates(model, nan, want)[1]["outputs"]["nms:/NonMaxSuppression"]["error"]


def test_over_many_heads_healthy_pipelines_pass_and_broken_ones_fail():
    """20 heads (the figures of ``python -m tests.test_trt_gate_onnx_nms``): the old gate failed all
    but one healthy pipeline; the new one passes all but one (seed 5: two overlapping boxes of two
    clusters and two classes whose scores tie, where FP16 changes which one this class-agnostic NMS
    keeps: a near tie is forgiven within one class only, docs/trust.md),
    and fails every broken one (a swapped class passed 5 of 20 before an unmatched box the other side
    has as another class stopped counting as borderline)."""
    model = tail_model()
    passed = {"healthy": [], "moved": [], "class": []}
    for seed in range(20):
        head = head_output(seed)
        want = run(model, head)
        bad = broken(head)
        for key, got in (("healthy", fp16(head, seed + 100)), ("moved", bad["half the boxes moved"]),
                         ("class", bad["a class swapped"])):
            passed[key].append(gates(model, run(model, got), want)[1]["passed"])
    assert sum(passed["healthy"]) == 19 and not passed["healthy"][5], passed["healthy"]
    assert not any(passed["moved"]) and not any(passed["class"])


def test_rows_without_a_score_column_are_compared_as_vectors():
    """The tail of tests/test_deploy_exports (boxes only, no score column): rows matched as plain
    vectors, every value within the tolerance; nothing forgiven."""
    from tests.test_deploy_exports import nms_tail_model
    model = nms_tail_model()
    groups = nms_outputs(model.graph)
    assert groups[0]["rows"] == [{"output": "dets", "columns": ["box"] * 4}]
    worker = _worker()
    want = {"dets": np.zeros((1, 30, 4), np.float32)}
    want["dets"][0, :3] = [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]
    got = {"dets": want["dets"].copy()}
    got["dets"][0, :3] = want["dets"][0, [2, 0, 1]] * 1.001
    report = worker.compare_frames(np, [got], [want], 0.02, groups)
    assert report["passed"] and report["outputs"]["nms:/NonMaxSuppression"]["compared_as"] == "vectors"
    got["dets"][0, 1] += 3.0
    report = worker.compare_frames(np, [got], [want], 0.02, groups)
    assert not report["passed"] and "row 0 [1.0, 2.0, 3.0, 4.0] has no counterpart" in worker._gate_error(report)


def test_center_size_boxes_are_matched_as_boxes():
    """NonMaxSuppression's center_point_box 1: the rows' boxes are [x, y, w, h]; matched by IoU all the same."""
    model = tail_model(center=1)
    head = head_output()
    head[0, 2:4] = np.abs(head[0, 2:4] - head[0, 0:2])  # widths, heights
    groups = nms_outputs(model.graph)
    assert groups[0]["center_point_box"] == 1
    want, got = run(model, head), run(model, fp16(head))
    assert gates(model, got, want)[1]["passed"]
    moved = run(model, head)
    moved["dets"][0, 0, 2] *= 3.0  # a box three times as wide: IoU about 0.33
    assert not gates(model, moved, want)[1]["passed"]


# ---- the real Ultralytics export

_EXPORT = """
import os, shutil, sys, json
os.environ["YOLO_OFFLINE"] = "1"
from ultralytics import YOLO
shutil.move(YOLO("yolo11n.yaml").export(format="onnx", imgsz=320, **json.loads(sys.argv[1])), "det.onnx")
"""


def ultralytics_export(tmp_path, **kwargs) -> onnx.ModelProto:
    from .test_detector import _ultralytics_python
    python = _ultralytics_python()
    if python is None:
        pytest.skip("ultralytics is not installed (or set PLACETUNE_ULTRALYTICS_PYTHON to a Python that has it)")
    done = subprocess.run([python, "-c", _EXPORT, json.dumps(kwargs)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600, env={"YOLO_OFFLINE": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-2000:]
    return onnx.load(str(tmp_path / "det.onnx"))


def real_tail(proto: onnx.ModelProto) -> onnx.ModelProto:
    """The export's graph from the head's concatenated output [1, 84, 2100] (boxes, class scores) on."""
    from onnx.utils import Extractor
    transpose = next(n for n in proto.graph.node if n.op_type == "Transpose" and n.name == "/Transpose")
    return Extractor(proto).extract_model([transpose.input[0]], [o.name for o in proto.graph.output])


def real_head(seed: int = 0, anchors: int = 2100, classes: int = 80) -> np.ndarray:
    """Corner boxes in clusters and class scores, many near-equal across boxes, one class per box
    (the real head's layout)."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(20, 300, (anchors // 10, 2)).repeat(10, axis=0) + rng.normal(0, 4, (anchors, 2))
    size = rng.uniform(20, 80, (anchors, 2))
    scores = np.full((classes, anchors), 0.01)  # one class per box
    scores[rng.integers(0, classes, anchors), np.arange(anchors)] = _cluster_scores(rng, anchors // 10, 10, 0.03)
    boxes = np.concatenate([centres - size / 2, centres + size / 2], axis=1).T
    return np.concatenate([boxes, scores], axis=0)[None].astype(np.float32)


@pytest.mark.slow
@pytest.mark.parametrize("dynamic", [False, True])
def test_the_real_ultralytics_nms_export_is_compared_as_a_set(tmp_path, dynamic):
    """A real Ultralytics ``nms=True`` export (yolo11n, random weights: no download): its one output
    (1, 300, 6) is found as NMS rows, boxes / score / class; its tail (the graph after the head, run
    by onnx's reference evaluator on a head output with many near-equal scores) passes the new gate
    with FP16-like differences that fail the old one, and a broken head still fails."""
    proto = ultralytics_export(tmp_path, nms=True, dynamic=dynamic)
    groups = nms_outputs(proto.graph)
    assert groups == [{"node": "/NonMaxSuppression", "op": "NonMaxSuppression",
                       "rows": [{"output": "output0", "columns": ["box"] * 4 + ["score", "class"]}],
                       "score_threshold": pytest.approx(0.25), "iou_threshold": pytest.approx(0.7), "max_rows": 300,
                       "center_point_box": 0, "single_class": True}]
    assert nms_elementwise(proto.graph) == []
    if dynamic:
        return
    tail = real_tail(proto)
    head = real_head()
    want, got = run(tail, head), run(tail, fp16(head))
    assert int((np.abs(want["output0"][0]).sum(axis=1) > 0).sum()) > 20
    old, new = gates(proto, got, want)
    assert not old["passed"] and new["passed"], new["outputs"]
    for what, bad in broken(head).items():
        assert not gates(proto, run(tail, bad), want)[1]["passed"], what


def _figure(model, want, got, case: str, out: str) -> dict:
    old, new = gates(model, got, want)
    row = new["outputs"]["nms:/NonMaxSuppression"]
    return {"case": case, "old_gate": {"passed": old["passed"], "rel_l2": round(old["outputs"][out]["rel_l2"], 4)},
            "new_gate": {"passed": new["passed"], "matched": row["matched"], "reference_rows": row["reference_detections"],
                         "pipeline_rows": row["pipeline_detections"]}}


def figures(seeds: int = 20) -> None:
    """Old gate vs new gate: on the hand-built tail's doubles over ``seeds`` heads (healthy: FP16
    rounding and 0.2% noise; a borderline box; broken: half the boxes moved, a class swapped), and on
    the real Ultralytics export's tail when PLACETUNE_ULTRALYTICS_PYTHON is set."""
    import os
    import tempfile
    from pathlib import Path

    model = tail_model()
    tally: dict[str, list[int]] = {}
    for seed in range(seeds):
        head = head_output(seed)
        want = run(model, head)
        cases = {"healthy: FP16 rounding, 0.2% noise": run(model, fp16(head, seed + 100))}
        border = head.copy()  # box 0 alone outside every cluster, just above the threshold in the reference
        border[0, 0:4, 0] = [400, 400, 420, 420]
        border[0, 4:, 0] = 0.05
        border[0, 4:, 8:] = 0.05  # and boxes 1 .. 7 the only others: under the row cap
        border[0, 4, 0] = 0.2503
        low = border.copy()
        low[0, 4, 0] = 0.2497
        cases.update({f"broken: {k}": run(model, v) for k, v in broken(head).items()})
        for case, got in cases.items():
            f = _figure(model, want, got, case, "dets")
            tally.setdefault(case, [0, 0])
            tally[case][0] += f["old_gate"]["passed"]
            tally[case][1] += f["new_gate"]["passed"]
        f = _figure(model, run(model, border), run(model, low), "healthy: one box 0.2503 / 0.2497 (threshold 0.25)",
                    "dets")
        tally.setdefault(f["case"], [0, 0])
        tally[f["case"]][0] += f["old_gate"]["passed"]
        tally[f["case"]][1] += f["new_gate"]["passed"]
    for case, (old, new) in tally.items():
        print(json.dumps({"tail": "hand-built (K=20)", "case": case, "heads": seeds, "old_gate_passed": old,
                          "new_gate_passed": new}))
    if os.environ.get("PLACETUNE_ULTRALYTICS_PYTHON"):
        with tempfile.TemporaryDirectory() as tmp:
            proto = ultralytics_export(Path(tmp), nms=True)
        tail = real_tail(proto)
        head = real_head()
        want = run(tail, head)
        cases = {"healthy: FP16 rounding, 0.2% noise": run(tail, fp16(head))}
        cases.update({f"broken: {k}": run(tail, v) for k, v in broken(head).items()})
        for case, got in cases.items():
            print(json.dumps(dict(_figure(proto, want, got, case, "output0"), tail="real yolo11n nms=True export")))


if __name__ == "__main__":
    import sys
    sys.path.insert(0, str(WORKER_FILE.parent))
    figures()


def small_detector(path, k: int = 80) -> str:
    """images [1, 3, 8, 8] -> a 1x1 Conv head [1, 4 + C, 64] (2 x 2 corner boxes placed by the input,
    so that few overlap; class 0's scores all near 0.5, apart by less than FP16's step) -> the
    Ultralytics-style tail -> dets [1, k, 6] (k above the 64 boxes: no cap)."""
    rng = np.random.default_rng(3)
    w = np.zeros((4 + C, 3, 1, 1), np.float32)
    w[0, 0], w[1, 1], w[2, 0], w[3, 1] = 16.0, 16.0, 16.0, 16.0  # x1, y1 from the input; x2, y2 = x1 + 2, y1 + 2
    w[4:, :, 0, 0] = rng.uniform(-0.003, 0.003, (C, 3))
    bias = np.array([32, 32, 34, 34, 0.5, 0.3, 0.2], np.float32)
    nodes, inits = tail_nodes("head", k=k)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["images", "w", "b"], ["head4d"], name="/head/Conv"),
         helper.make_node("Reshape", ["head4d", "shape"], ["head"], name="/head/Reshape")] + nodes,
        "small_onnx_nms_detector", [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("dets", TensorProto.FLOAT, [1, k, 6])],
        inits + [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "b"),
                 numpy_helper.from_array(np.array([1, 4 + C, 64], np.int64), "shape")])
    graph.value_info.append(helper.make_tensor_value_info("padded", TensorProto.FLOAT, [k * 6]))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return str(path)


def test_a_detector_pipeline_with_its_head_on_the_dla_passes_the_gate_against_the_doubles(tmp_path, monkeypatch):
    """End to end against the doubles (the ONNX tail run by onnx's reference evaluator): the head on
    DLA0 writes its cut tensor in FP16, so NonMaxSuppression in the GPU segment is fed numbers a
    little off the all-GPU reference's; element by element the rows differ (the gate rejected the
    pipeline), as a set they agree; a frame that reads another input's cut tensor still fails."""
    import placetune.backends.tensorrt.pipeline as pipeline
    from tests.test_trt_gate_nms_forms import _measure

    path = small_detector(tmp_path / "det.onnx")
    m = _measure(path, tmp_path, "sets")
    assert m.status == "ok", m.reason
    gate = m.extra["gate"]
    row = gate["outputs"]["nms:/NonMaxSuppression"]
    assert gate["passed"] and row["passed"] and row["metric"] == "nms_rows" and row["reference_detections"] >= 5, row
    assert not gate["same_for_every_input"] and "gate_unverified" not in m.extra
    assert any("selected rows of NonMaxSuppression '/NonMaxSuppression' as a set" in n for n in m.extra["notes"])
    assert row["matched"] == row["reference_detections"] == row["pipeline_detections"], row
    from placetune.backends.tensorrt.pool import WorkerPool
    orig = WorkerPool.run
    monkeypatch.setattr(WorkerPool, "run", lambda self, job, **kw: orig(  # a frame reads another input's cut tensor
        self, dict(job, test_read_other_slot=True) if job.get("op") == "pipeline" else job, **kw))
    wrong = _measure(path, tmp_path, "racy")
    assert wrong.status == "runtime_failed" and "detection rows differ" in wrong.reason, wrong.reason
    monkeypatch.setattr(WorkerPool, "run", orig)
    monkeypatch.setattr(pipeline, "nms_outputs", lambda graph, opset=None: [])  # the gate as it was: element by element
    before = _measure(path, tmp_path, "elements")
    assert before.status == "runtime_failed" and "pipeline outputs differ" in before.reason, before.reason


def _batch_rows(dets: list[list[list[float]]], k: int = 5) -> np.ndarray:
    """[B, k, 6] rows (x1, y1, x2, y2, score, class) of each image, padded with zero rows."""
    out = np.zeros((len(dets), k, 6), np.float32)
    for b, rows in enumerate(dets):
        out[b, :len(rows)] = rows
    return out


def test_a_batch_of_images_is_compared_image_by_image():
    """An export at batch B writes [B, 300, 6]: a detection of image 0 that the pipeline gives in image 1
    (another image's frame read) has no counterpart, though the batch's rows as one set agree; a healthy
    batch whose rows are reordered within each image passes."""
    worker_nms = importlib.import_module("worker_nms")
    group = {"node": "/nms", "op": "NonMaxSuppression", "score_threshold": 0.25, "iou_threshold": 0.7,
             "max_rows": 5, "rows": [{"output": "dets", "columns": ["box"] * 4 + ["score", "class"]}]}
    a, b = [10, 10, 50, 50, 0.9, 1], [100, 120, 180, 200, 0.8, 2]
    c = [200, 20, 260, 90, 0.6, 0]
    want = {"dets": _batch_rows([[a, c], [b]])}
    reordered = {"dets": _batch_rows([[c, a], [b]])}
    row = worker_nms.compare_nms_rows(np, reordered, want, group, 1e-2)
    assert row["passed"] and row["images"] == 2 and row["matched"] == 3, row
    swapped = {"dets": _batch_rows([[b, c], [a]])}
    row = worker_nms.compare_nms_rows(np, swapped, want, group, 1e-2)
    assert not row["passed"] and "image 0" in row["error"], row
    single = {"dets": _batch_rows([[a, c]])}  # one image: as before
    assert "images" not in worker_nms.compare_nms_rows(np, single, single, group, 1e-2)


def _opset12_tail() -> onnx.ModelProto:
    """The tail as an opset 12 export writes it: Squeeze / Unsqueeze axes and Split sizes as attributes."""
    nodes, inits = tail_nodes("head")
    consts = {i.name: numpy_helper.to_array(i) for i in inits}
    old = []
    for node in nodes:
        if node.op_type in ("Squeeze", "Unsqueeze", "Split") and len(node.input) > 1:
            attr = "split" if node.op_type == "Split" else "axes"
            kw = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            kw[attr] = [int(v) for v in consts[node.input[1]].reshape(-1)]
            node = helper.make_node(node.op_type, [node.input[0]], list(node.output), name=node.name, **kw)
        old.append(node)
    graph = helper.make_graph(old, "onnx_nms_tail_opset12",
                              [helper.make_tensor_value_info("head", TensorProto.FLOAT, [1, 4 + C, A])],
                              [helper.make_tensor_value_info("dets", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)])
    model.ir_version = 7
    return model


def test_an_opset_12_export_is_read_by_its_own_operator_versions():
    """An export at opset 12 (Squeeze / Unsqueeze axes as attributes): its rows are found when the scan
    reads the nodes at the model's opset; read as opset 17, shape inference lost every shape after the
    first Squeeze and the rows stayed element by element (a healthy reordered pipeline then failed)."""
    model = _opset12_tail()
    groups = nms_outputs(model.graph, 12)
    assert [g["rows"] for g in groups] == [[{"output": "dets", "columns": ["box"] * 4 + ["score", "class"]}]]
    assert nms_elementwise(model.graph, 12) == []
    head = head_output(3)
    want, got = run(model, head), run(model, fp16(head))
    assert gates(model, got, want)[1]["passed"]


def batch_tail_nodes(images: int = 2, slots: tuple = (0, 1, 2)) -> tuple[list, dict]:
    """Ultralytics' ``nms=True`` tail at batch ``images`` as its export unrolls it: one NMS tail per image
    (``head`` [images, 4 + C, A] sliced), image i's rows [1, K, 6] ScatterND'ed into slot ``slots[i]``
    of zeros [images, K, 6] (``len(slots)`` below ``images``: the loop traced at a smaller batch)."""
    nodes, inits = [], {}  # type: list, dict
    c = lambda name, v: numpy_helper.from_array(np.asarray(v), name)  # noqa: E731
    written = min(images, len(slots))
    for i in range(written):
        part, part_inits = tail_nodes(f"head_{i}")
        names = {t.name for t in part_inits} | {""}
        for node in part:
            node.name += f"_{i}"
            node.input[:] = [t if t in names or t == f"head_{i}" else f"{t}_{i}" for t in node.input]
            node.output[:] = [f"{t}_{i}" for t in node.output]
        inits = {t.name: t for t in part_inits + [
            c(f"from_{i}", np.array([i], np.int64)), c(f"to_{i}", np.array([i + 1], np.int64)),
            c(f"slot_{i}", np.array([[slots[i]]], np.int64))]} | inits
        nodes += [helper.make_node("Slice", ["head", f"from_{i}", f"to_{i}", "ax0"], [f"head_{i}"], name=f"/Slice_head_{i}")]
        nodes += part
        nodes += [helper.make_node("ScatterND", ["zeros" if i == 0 else f"scattered_{i - 1}", f"slot_{i}", f"dets_{i}"],
                                   ["dets" if i == written - 1 else f"scattered_{i}"], name=f"/ScatterND_{i}")]
    inits["zeros"] = c("zeros", np.zeros((images, K, 6), np.float32))
    return nodes, inits


def batch_tail_model(images: int = 2, slots: tuple = (0, 1)) -> onnx.ModelProto:
    """:func:`batch_tail_nodes` alone: input ``head`` [images, 4 + C, A] -> ``dets`` [images, K, 6]."""
    nodes, inits = batch_tail_nodes(images, slots)
    graph = helper.make_graph(nodes, "onnx_nms_batch_tail",
                              [helper.make_tensor_value_info("head", TensorProto.FLOAT, [images, 4 + C, A])],
                              [helper.make_tensor_value_info("dets", TensorProto.FLOAT, None)], list(inits.values()))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_a_batch_export_with_one_nms_per_image_is_compared_image_by_image():
    """An export at batch 2 runs one NMS per image and ScatterNDs each image's rows into its slot of
    [2, K, 6]: one group (both NMS), compared image by image; FP16-reordered rows pass, an image's rows
    read from the other image fail. Two NMS writing the same slot stay element by element."""
    model = batch_tail_model()
    groups = nms_outputs(model.graph)
    assert [(g["node"], g["nodes"], g["images_written"], g["rows"]) for g in groups] == [
        ("/NonMaxSuppression_0", ["/NonMaxSuppression_0", "/NonMaxSuppression_1"], 2,
         [{"output": "dets", "columns": ["box"] * 4 + ["score", "class"]}])]
    assert nms_elementwise(model.graph) == []
    head = np.concatenate([head_output(0), head_output(3)], axis=0)
    want, got = run(model, head), run(model, fp16(head))
    assert all((np.abs(want["dets"][b]).sum(axis=1) > 0).sum() >= 8 for b in range(2))  # both images hold rows
    old, new = gates(model, got, want)
    row = new["outputs"]["nms:/NonMaxSuppression_0"]
    assert not old["passed"] and new["passed"] and row["images"] == 2, row
    swapped = {"dets": want["dets"][::-1].copy()}
    assert not gates(model, swapped, want)[1]["passed"]
    same_slot = batch_tail_model(slots=(0, 0))
    assert nms_outputs(same_slot.graph) == []
    assert any("not one image each" in why or "ScatterND" in why for why in nms_elementwise(same_slot.graph))


def test_images_past_those_a_dynamic_export_writes_are_counted_as_unchecked():
    """A dynamic export traced at batch 2 writes rows for images 0 and 1 only: at batch 3 the row says the
    last image went unchecked (empty on both sides)."""
    worker_nms = importlib.import_module("worker_nms")
    group = {"node": "/nms", "op": "NonMaxSuppression", "score_threshold": 0.25, "iou_threshold": 0.7,
             "max_rows": 5, "images_written": 2, "rows": [{"output": "dets", "columns": ["box"] * 4 + ["score", "class"]}]}
    a, b = [10, 10, 50, 50, 0.9, 1], [100, 120, 180, 200, 0.8, 2]
    want = {"dets": np.concatenate([_batch_rows([[a], [b]]), np.zeros((1, 5, 6), np.float32)])}
    row = worker_nms.compare_nms_rows(np, want, want, group, 1e-2)
    assert row["passed"] and row["images"] == 3 and row["images_without_rows"] == 1 and row["matched"] == 2, row
    row = worker_nms.compare_nms_rows(np, {"dets": want["dets"][:2]}, {"dets": want["dets"][:2]}, group, 1e-2)
    assert "images_without_rows" not in row


@pytest.mark.slow
@pytest.mark.parametrize("dynamic", [False, True])
def test_the_real_ultralytics_batch_2_nms_export_is_compared_image_by_image(tmp_path, dynamic):
    """A real Ultralytics ``nms=True`` export at batch 2 (yolo11n, random weights): its loop over the
    images is unrolled (two NonMaxSuppression, each image's rows ScatterND'ed into its slot of
    [2, 300, 6]); the scan makes one group of both; its tail on two heads passes the gate with
    FP16-like differences and fails with the images' rows swapped."""
    proto = ultralytics_export(tmp_path, nms=True, batch=2, dynamic=dynamic)
    groups = nms_outputs(proto.graph, proto.opset_import[0].version)
    assert [(g["nodes"], g["images_written"], g["max_rows"], g["rows"]) for g in groups] == [
        (["/NonMaxSuppression", "/NonMaxSuppression_1"], 2, 300,
         [{"output": "output0", "columns": ["box"] * 4 + ["score", "class"]}])]
    assert nms_elementwise(proto.graph, proto.opset_import[0].version) == []
    if dynamic:
        return
    tail = real_tail(proto)
    head = np.concatenate([real_head(0), real_head(1)], axis=0)
    want, got = run(tail, head), run(tail, fp16(head))
    assert all(int((np.abs(want["output0"][b]).sum(axis=1) > 0).sum()) > 20 for b in range(2))
    old, new = gates(proto, got, want)
    assert not old["passed"] and new["passed"] and new["outputs"]["nms:/NonMaxSuppression"]["images"] == 2, new["outputs"]
    assert not gates(proto, {"output0": want["output0"][::-1].copy()}, want)[1]["passed"]


def test_a_batch_3_pipeline_of_an_export_traced_at_batch_2_says_its_last_image_went_unchecked(tmp_path):
    """End to end against the doubles: a detector whose tail was unrolled for 2 images (a dynamic
    export traced at batch 2) run at batch 3 passes the gate image by image, and the note says that
    its last image holds no rows in the export (reference included), so it went unchecked."""
    from tests.test_trt_gate_nms_forms import _measure

    w = np.zeros((4 + C, 3, 1, 1), np.float32)
    w[0, 0], w[1, 1], w[2, 0], w[3, 1] = 16.0, 16.0, 16.0, 16.0
    w[4:, :, 0, 0] = np.random.default_rng(3).uniform(-0.003, 0.003, (C, 3))
    bias = np.array([32, 32, 34, 34, 0.5, 0.3, 0.2], np.float32)
    nodes, inits = batch_tail_nodes(3, slots=(0, 1))
    graph = helper.make_graph(
        [helper.make_node("Conv", ["images", "w", "b"], ["head4d"], name="/head/Conv"),
         helper.make_node("Reshape", ["head4d", "shape"], ["head"], name="/head/Reshape")] + nodes,
        "batch_onnx_nms_detector", [helper.make_tensor_value_info("images", TensorProto.FLOAT, [3, 3, 8, 8])],
        [helper.make_tensor_value_info("dets", TensorProto.FLOAT, [3, K, 6])],
        list(inits.values()) + [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "b"),
                                numpy_helper.from_array(np.array([3, 4 + C, 64], np.int64), "shape")])
    graph.value_info.extend(helper.make_tensor_value_info(f"padded_{i}", TensorProto.FLOAT, [K * 6]) for i in (0, 1))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "det.onnx"))
    m = _measure(str(tmp_path / "det.onnx"), tmp_path, "batch3")
    assert m.status == "ok", m.reason
    row = m.extra["gate"]["outputs"]["nms:/NonMaxSuppression_0"]
    assert row["passed"] and row["images"] == 3 and row["images_without_rows"] == 1 and row["reference_detections"] >= 5, row
    assert any("first 2 images only" in n and "last 1 of this batch of 3" in n for n in m.extra["notes"]), m.extra["notes"]
