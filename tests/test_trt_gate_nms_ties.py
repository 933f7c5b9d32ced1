"""The NMS gate on near ties: two overlapping boxes of near-equal score (FP16 changes which one NMS
keeps) and a near-tied class argmax; and the judging rule its forgiveness is held to.

JUDGING RULE (written before the comparison was changed; the figures are measured against it)

Sets, built on NMS tails run by onnx's reference evaluator (NonMaxSuppression as the ONNX spec says),
never by TensorRT; the "pipeline" is a synthetic perturbation of the head the tail is fed:

- hand-built tail (tests/test_trt_gate_onnx_nms.tail_model: K = 20 rows, IoU threshold 0.45, score
  threshold 0.25, 3 classes), heads ``head_output(seed)``, seeds 0 .. 23 (24 heads);
- real tail: the graph after the head of a real Ultralytics ``yolo11n nms=True`` export (imgsz 320,
  random weights; IoU 0.7, score threshold 0.25, 300 rows, 80 classes), heads ``real_head(seed)``,
  seeds 0 .. 7 (8 heads; only when PLACETUNE_ULTRALYTICS_PYTHON is set).

Healthy (must pass more often after than before):
- ``tie flip``: the head's first cluster (its first 4 / 10 anchors) replaced by one isolated pair of
  boxes of class ``seed % classes``: box A = [400, 400, 440, 440], box B = A moved 40 / 9 px right
  (IoU 0.8, above both tails' IoU threshold, under the gate's 0.9 match), the cluster's other
  anchors under the score threshold. Reference: A scores s + 1e-4, B scores s (s = 0.92 + 0.005 *
  (seed % 10), above the head's other scores: inside the row cap); pipeline: the head through
  ``fp16(head, seed + 100)`` (FP16 rounding, 0.2 % noise) with the pair's two scores exchanged (A s,
  B s + 1e-4: one FP16 step in 0.5 .. 1 is 4.9e-4). NMS keeps A in the reference and B in the
  pipeline.
- ``FP16 rounding`` (the existing set): ``fp16(head, seed + 100)`` of the unplanted head.
Reported apart, not counted either way (no forgiveness is claimed for it): ``class argmax tie``,
a detection whose two best class scores are 1e-4 apart and swap in the pipeline; the outputs hold
one score per detection, so neither side has both class scores and the rule below does not forgive it.

Broken (a failure before must stay a failure after; 0 may change to pass), on every head, from the
pipeline ``fp16(head, seed + 100)``:
- ``half the boxes moved`` (+40 px on every other anchor), ``a class swapped`` (the most confident
  anchor's score moved to the next class): the existing sets (test_trt_gate_onnx_nms.broken);
- ``dropped``: the pipeline's output with its most confident detection's row zeroed;
- ``slot race``: the pipeline's output is another image's (the FP16 run of head ``seed + 1``);
- ``every box nudged``: every detection row of the pipeline's output moved right by 1/9 of its width
  (IoU 0.8 with its reference box, scores the same): the forgiveness's own adversary.
Probe, reported apart and stated here before it is measured: ``one box nudged`` (one row moved so).
On the outputs alone it cannot be told from a tie flip, so it passes within the bound below.

Success: on both tails, healthy ``tie flip`` passes go up, ``FP16 rounding`` passes do not go down,
and no broken set that failed before passes after (per head).

The forgiveness (worker_nms.match_detections, shared by EfficientNMS_TRT's and ONNX
NonMaxSuppression's paths): a detection left unmatched on one side is forgiven only with an unmatched
one of the other side of the same class whose box overlaps it with IoU above NMS's own IoU threshold
(read from the graph or the plugin) and whose score is within the gate's tolerance of its own (two
candidates of near-equal score, each suppressing the other); a class mismatch on one box only when the
side that has the box as both classes scores them within the tolerance. At most
``max(1, 10 %)`` of the image's reference detections are forgiven so; more fails.

Figures: ``python -m tests.test_trt_gate_nms_ties`` (PLACETUNE_ULTRALYTICS_PYTHON=/work/venv-ul/bin/python
for the real tail; ultralytics 8.4.190, onnx 1.23.2), heads passing the gate, before -> after:

==========================  ===================  ======================
set                         hand-built, 24 heads  real yolo11n, 8 heads
==========================  ===================  ======================
healthy: tie flip           0 -> 23              0 -> 8
healthy: FP16 rounding      23 -> 23             6 -> 8
broken: half boxes moved    0 -> 0               0 -> 0
broken: a class swapped     0 -> 0               0 -> 0
broken: dropped             7 -> 7 (same seeds)  0 -> 0
broken: slot race           0 -> 0               0 -> 0
broken: every box nudged    0 -> 0               0 -> 0
probe: class argmax tie     0 -> 0               0 -> 0
probe: one box nudged       6 -> 17              1 -> 4
==========================  ===================  ======================

The one hand-built head that still fails (seed 5, both healthy sets) is a tie between boxes of two
classes in this class-agnostic tail, not forgiven (same class only). ``dropped`` passes 7 heads
before and after alike: the dropped detection overlaps one of the pipeline's within the IoU slack of
the threshold (the borderline rule, unchanged here).
"""

from __future__ import annotations

import importlib
import json
import os

import numpy as np
import pytest

from tests.test_trt_gate_onnx_nms import (WORKER_FILE, broken, fp16, gates, head_output, real_head, real_tail,
                                          run, tail_model, ultralytics_export)

TIE = 1e-4  # the pair's score difference: under one FP16 step at 0.5 (4.9e-4)


@pytest.fixture(autouse=True)
def _worker_path(monkeypatch):
    monkeypatch.syspath_prepend(str(WORKER_FILE.parent))


def plant_tie(head: np.ndarray, seed: int, cluster: int) -> tuple[np.ndarray, tuple[int, int, float]]:
    """The head with its first cluster (``cluster`` anchors) replaced by an isolated pair A, B (IoU 0.8)
    of class ``seed % classes``, A ahead by :data:`TIE`: (head, (class, first anchor, s))."""
    head = head.copy()
    classes = head.shape[1] - 4
    cls, s = seed % classes, 0.92 + 0.005 * (seed % 10)
    head[0, 4:, :cluster] = np.minimum(head[0, 4:, :cluster], 0.01)
    head[0, 0:4, 0] = [400, 400, 440, 440]
    head[0, 0:4, 1] = [400 + 40 / 9, 400, 440 + 40 / 9, 440]
    head[0, 4 + cls, 0], head[0, 4 + cls, 1] = s + TIE, s
    return head, (cls, 0, s)


def flipped(head: np.ndarray, seed: int, tie: tuple[int, int, float]) -> np.ndarray:
    """The pipeline's head: FP16 rounding and noise, the planted pair's scores exchanged."""
    cls, a, s = tie
    got = fp16(head, seed + 100)
    got[0, 4 + cls, a], got[0, 4 + cls, a + 1] = s, s + TIE
    return got


def class_tie(head: np.ndarray, seed: int, cluster: int) -> tuple[np.ndarray, np.ndarray]:
    """Reference and pipeline heads: anchor 0 alone (its cluster cleared) with its two best classes
    1e-4 apart, swapped in the pipeline."""
    head = head.copy()
    classes = head.shape[1] - 4
    head[0, 4:, :cluster] = np.minimum(head[0, 4:, :cluster], 0.01)
    head[0, 0:4, 0] = [400, 400, 440, 440]
    c1, c2, s = seed % classes, (seed + 1) % classes, 0.92 + 0.005 * (seed % 10)
    head[0, 4 + c1, 0], head[0, 4 + c2, 0] = s + TIE, s
    got = fp16(head, seed + 100)
    got[0, 4 + c1, 0], got[0, 4 + c2, 0] = s, s + TIE
    return head, got


def _rows(out: np.ndarray) -> np.ndarray:
    return np.abs(out[0]).sum(axis=1) > 0


def dropped(out: dict, name: str) -> dict:
    out = {k: v.copy() for k, v in out.items()}
    rows = out[name][0]
    if _rows(out[name]).any():
        rows[int(np.argmax(np.where(_rows(out[name]), rows[:, 4], -1)))] = 0.0
    return out


def nudged(out: dict, name: str, every: bool) -> dict:
    out = {k: v.copy() for k, v in out.items()}
    rows = out[name][0]
    for i in np.flatnonzero(_rows(out[name]))[: None if every else 1]:
        d = (rows[i, 2] - rows[i, 0]) / 9
        rows[i, 0] += d
        rows[i, 2] += d
    return out


def cases(model, name: str, head_of, seed: int, cluster: int) -> tuple[dict, dict]:
    """One head's sets: {case: (reference outputs, pipeline outputs)}, and the probes apart."""
    head = head_of(seed)
    want = run(model, head)
    plain = run(model, fp16(head, seed + 100))
    tied, tie = plant_tie(head, seed, cluster)
    ref_c, got_c = class_tie(head, seed, cluster)
    found = {"healthy: tie flip": (run(model, tied), run(model, flipped(tied, seed, tie))),
             "healthy: FP16 rounding": (want, plain)}
    found.update({f"broken: {k}": (want, run(model, v)) for k, v in broken(head).items()})
    found.update({"broken: dropped": (want, dropped(plain, name)),
                  "broken: slot race": (want, run(model, fp16(head_of(seed + 1), seed + 101))),
                  "broken: every box nudged": (want, nudged(plain, name, True))})
    probes = {"probe: class argmax tie": (run(model, ref_c), run(model, got_c)),
              "probe: one box nudged": (want, nudged(plain, name, False))}
    return found, probes


def passes(model, want, got) -> bool:
    return bool(gates(model, got, want)[1]["passed"])


def figures() -> None:
    """Per tail and case: how many heads pass the gate (this checkout's), one JSON line each."""
    tails = [("hand-built (K=20)", tail_model(), tail_model(), "dets", head_output, 24, 4)]
    if os.environ.get("PLACETUNE_ULTRALYTICS_PYTHON"):
        import tempfile
        from pathlib import Path
        with tempfile.TemporaryDirectory() as tmp:
            proto = ultralytics_export(Path(tmp), nms=True)
        tails.append(("real yolo11n nms=True", proto, real_tail(proto), "output0", real_head, 8, 10))
    for label, model, tail, name, head_of, seeds, cluster in tails:
        tally: dict[str, list[int]] = {}
        for seed in range(seeds):
            found, probes = cases(tail, name, head_of, seed, cluster)
            for case, (want, got) in {**found, **probes}.items():
                tally.setdefault(case, []).append(seed) if passes(model, want, got) else tally.setdefault(case, [])
        for case, seeds_passed in tally.items():
            print(json.dumps({"tail": label, "case": case, "heads": seeds, "passed": len(seeds_passed),
                              "seeds_passed": seeds_passed}))


if __name__ == "__main__":
    import sys
    sys.path.insert(0, str(WORKER_FILE.parent))
    figures()


# ---- tests (hand-built tail, onnx's reference evaluator; the plugin path on hand-written outputs)

def test_a_tie_flip_of_two_overlapping_boxes_passes_and_is_counted():
    """NMS keeps A in the reference and B in the pipeline (IoU 0.8 > 0.45, scores 1e-4 apart): one
    near tie, forgiven (the gate failed it before: unmatched on both sides)."""
    model = tail_model()
    for seed in range(3):
        tied, tie = plant_tie(head_output(seed), seed, 4)
        want, got = run(model, tied), run(model, flipped(tied, seed, tie))
        new = gates(model, got, want)[1]
        row = new["outputs"]["nms:/NonMaxSuppression"]
        assert new["passed"] and row["near_ties"] == 1, row


@pytest.mark.parametrize("case", ["broken: half the boxes moved", "broken: a class swapped", "broken: dropped",
                                  "broken: slot race", "broken: every box nudged"])
def test_each_broken_class_still_fails(case):
    model = tail_model()
    for seed in (0, 1, 2):
        want, got = cases(model, "dets", head_output, seed, 4)[0][case]
        assert not passes(model, want, got), (case, seed)


def _plugin(monkeypatch):
    from tests.test_trt_gate_nms import GROUP, REF, _out, _worker
    return _worker(monkeypatch), GROUP, REF, _out


A = (400, 400, 440, 440)
B = (400 + 40 / 9, 400, 440 + 40 / 9, 440)  # IoU 0.8 with A


def test_the_plugin_path_forgives_the_same_tie_on_the_same_terms(monkeypatch):
    """EfficientNMS_TRT's outputs: the same shared comparison. A tie flip passes; not when the two
    boxes overlap under NMS's IoU threshold (both would be kept: one is lost), nor when their scores
    are further apart than the tolerance, nor for two classes, nor for more ties than the bound."""
    worker, group, ref, out = _plugin(monkeypatch)
    gate = lambda got, want: worker.compare_frames(np, [out(got)], [out(want)], 0.02, [group])  # noqa: E731
    report = gate(ref + [(B, 0.8, 0)], ref + [(A, 0.8001, 0)])
    assert report["passed"] and report["outputs"]["nms:nms"]["near_ties"] == 1, report
    apart = (400 + 20, 400, 440 + 20, 440)  # IoU 1/3 with A: under the threshold 0.45
    assert not gate(ref + [(apart, 0.8, 0)], ref + [(A, 0.8001, 0)])["passed"]
    assert not gate(ref + [(B, 0.75, 0)], ref + [(A, 0.8001, 0)])["passed"]
    assert not gate(ref + [(B, 0.8, 1)], ref + [(A, 0.8001, 0)])["passed"]
    C2 = (100, 400, 140, 440)
    D2 = (100 + 40 / 9, 400, 140 + 40 / 9, 440)
    report = gate(ref[:3] + [(B, 0.8, 0), (D2, 0.7, 2)], ref[:3] + [(A, 0.8001, 0), (C2, 0.7001, 2)])
    assert not report["passed"], report  # 5 reference detections: one near tie at most


def test_a_class_flip_is_paired_only_when_one_side_has_the_box_as_both_classes(monkeypatch):
    """The outputs hold one score per detection: the reference's box as class 0 and the pipeline's as
    class 1 is a near tie only where one side also has that box as the other class, scored within the
    tolerance (a multi-label NMS); without it, both stay unmatched."""
    _worker = _plugin(monkeypatch)[0]
    nms = importlib.import_module("worker_nms")
    box = np.array([A], np.float64)
    ref = (np.array([A, A], np.float64), np.array([0.60, 0.59]), np.array([0.0, 1.0]))
    mine = (box, np.array([0.615]), np.array([1.0]))
    m, _, _, bad, ties = nms.match_detections(np, ref, mine, 8, 0.25, 0.45, False, 0.02)
    assert m == 0 and ties == 1 and len(bad) == 1 and "detection 1 (class 1" in bad[0], bad
    alone = (box, np.array([0.60]), np.array([0.0]))
    m, _, _, bad, ties = nms.match_detections(np, alone, mine, 8, 0.25, 0.45, False, 0.02)
    assert ties == 0 and len(bad) == 2, bad
