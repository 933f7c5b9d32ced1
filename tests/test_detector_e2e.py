"""Real Ultralytics exports end to end: ``placetune check``, a short simulated ``placetune tune``,
``placetune export`` to a plan folder, ``placetune build`` against the TensorRT/CUDA doubles and the
standalone runtime (``placetune_runtime``, written by :func:`placetune.runtime.write_standalone`) on
the built folder. The models are real exports (YOLOv8n, YOLO11n, YOLOv8s-seg from Ultralytics 8.4.190,
weights stripped: tests/data/*_ultralytics.onnx.gz) and the YOLOv8n one ending in EfficientNMS_TRT as the
TensorRT export scripts append it; their stripped weights are filled with random values, so that the
doubles compute real outputs (onnx's reference evaluator), compared with the whole model's where a
forward pass is cheap enough. The doubles have no EfficientNMS_TRT kernel: that model's engine runs
with the doubles' outputs left uncomputed (``PLACETUNE_FAKE_TRT_NO_COMPUTE``), so only its outputs'
names, shapes and types are checked."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import placetune.runtime
from placetune.cli.main import main
from placetune.model.onnx_io import read_model_proto

from .conftest import DATA
from .detector import NMS_OUTPUTS, append_efficient_nms
from .test_deploy import _run

pytestmark = pytest.mark.slow

#: name -> (stored real export, layers of the real export, outputs and their shapes (batch 1),
#: compare the runtime's outputs with the reference evaluator's on the whole model)
CASES = {
    "yolov8n": ("yolov8n_ultralytics.onnx.gz", 233, {"output0": [1, 84, 8400]}, True),
    "yolo11n": ("yolo11n_ultralytics.onnx.gz", 320, {"output0": [1, 84, 8400]}, True),
    "yolov8s-seg": ("yolov8s_seg_ultralytics.onnx.gz", 268,
                    {"output0": [1, 116, 8400], "output1": [1, 32, 160, 160]}, False),
    "yolov8n-efficientnms": ("yolov8n_ultralytics.onnx.gz", 236,
                             dict(zip(NMS_OUTPUTS, ([1, 1], [1, 100, 4], [1, 100], [1, 100]))), False),
}


def with_random_weights(proto: onnx.ModelProto, seed: int = 1) -> onnx.ModelProto:
    """The stripped initializers (dims without data) filled with random values scaled by fan-in; the
    export's small tensors that kept their data (anchors, strides, Resize scales) are left alone."""
    rng = np.random.default_rng(seed)
    for t in proto.graph.initializer:
        if t.raw_data or t.float_data or not t.dims:
            continue
        dims = tuple(t.dims)
        fan_in = int(np.prod(dims[1:])) if len(dims) > 1 else 1
        v = rng.standard_normal(dims) / np.sqrt(fan_in) if len(dims) > 1 else 0.1 * rng.standard_normal(dims)
        t.CopyFrom(numpy_helper.from_array(v.astype(np.float32), t.name))
    return proto


RUN = r'''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import placetune_runtime
rt = placetune_runtime.load(sys.argv[2])
shape = rt.inputs["images"][0]
x = np.random.default_rng(0).uniform(0, 1, shape).astype(np.float32)
out = rt({"images": x})
got = {"inputs": {k: list(v[0]) for k, v in rt.inputs.items()}, "mode": rt.mode,
       "outputs": {k: [list(v.shape), str(v.dtype), bool(np.isfinite(v).all())] for k, v in out.items()}}
if sys.argv[3] == "compare":
    import onnx
    from onnx.reference import ReferenceEvaluator
    ref = ReferenceEvaluator(onnx.load(sys.argv[4]))
    want = dict(zip(ref.output_names, ref.run(None, {"images": x})))
    got["error"] = {k: float(np.abs(out[k] - w).max() / np.abs(w).max()) for k, w in want.items()}
rt.close()
print(json.dumps(got))
'''


@pytest.mark.parametrize("name", sorted(CASES))
def test_real_export_check_tune_export_build_run(name, tmp_path, capsys, monkeypatch):
    stored, layers, outputs, compare = CASES[name]
    proto, _ = read_model_proto(DATA / stored)
    proto = with_random_weights(proto)
    if name.endswith("efficientnms"):
        proto = append_efficient_nms(proto)
        # the doubles evaluate an engine's ONNX with onnx's reference evaluator, which has no
        # EfficientNMS_TRT: its outputs are left uncomputed (zero bytes of the right sizes)
        monkeypatch.setenv("PLACETUNE_FAKE_TRT_NO_COMPUTE", "1")
    model = tmp_path / f"{name}.onnx"
    onnx.save(proto, str(model))
    monkeypatch.chdir(tmp_path)  # tune writes its plan file here

    assert main(["check", str(model), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    rows = {r["name"]: r for r in report["layers"]}
    assert len(rows) == layers
    assert rows["/model.0/conv/Conv"]["dla"] is True  # the stem runs on a DLA; the head's decoding does not
    assert not all(r["dla"] for r in rows.values())
    if name.endswith("efficientnms"):
        assert rows["/nms/EfficientNMS_TRT"]["reason"].startswith("plugin: no DLA")

    db = tmp_path / "det.db"
    # the compared models are tuned in FP16 (the doubles round each engine's outputs to its precision;
    # INT8 without a calibration cache quantizes every cut tensor to placeholder ranges); the others
    # take tune's defaults
    precision = ["--precision", "fp16"] if compare else []
    assert main(["tune", "--model", str(model), "--trials", "6", "--storage", str(db), "--study", "det",
                 *precision]) == 0
    capsys.readouterr()
    folder = tmp_path / "deploy"
    assert main(["export", "--storage", str(db), "--study", "det", "--format", "trtexec", "-o", str(folder)]) == 0
    plan = json.loads((folder / "plan.json").read_text())
    assert len(plan["layers"]) == layers
    if name.endswith("efficientnms"):
        assert plan["model"]["plugins"] == {"/nms/EfficientNMS_TRT": "EfficientNMS_TRT"}

    built = _run([sys.executable, "-m", "placetune.cli", "build", str(folder), "--json"], tmp_path, timeout=600)
    build = json.loads(built.stdout)
    # exit 1 exactly when some layer is not known to run where the plan says (a plan of 8.6's rules built by 10.3)
    assert built.returncode == (0 if not build["differences"] and build["placement_known"] else 1), built.stderr[-3000:]
    assert build["engines"] and all((folder / e["engine_file"]).stat().st_size > 0 for e in build["engines"])
    realized = build["realized"]
    assert set(realized) == {x["name"] for x in plan["layers"]}
    if name.endswith("efficientnms"):
        assert realized["/nms/EfficientNMS_TRT"] == "GPU"

    rt_dir = tmp_path / "rt"
    placetune.runtime.write_standalone(rt_dir)
    run = _run([sys.executable, "-c", RUN, str(rt_dir), str(folder), "compare" if compare else "-", str(model)],
               tmp_path, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["inputs"] == {"images": [1, 3, 640, 640]}
    assert {k: v[0] for k, v in got["outputs"].items()} == outputs
    assert all(finite for _, _, finite in got["outputs"].values())
    if name.endswith("efficientnms"):
        assert got["outputs"]["num_dets"][1] == "int32" and got["outputs"]["det_classes"][1] == "int32"
    if compare:
        assert max(got["error"].values()) < 1e-2, got["error"]  # fp16 engines against the float32 model
