"""A deployed detector: a real Ultralytics YOLOv8n export (weights stripped) ending in TensorRT's
EfficientNMS_TRT plugin, as the YOLOv8 TensorRT export scripts append it, through check, tune and
export; and the zoo's detectors against the real exports' facts."""

from __future__ import annotations

import json

import onnx
import pytest

from placetune.cli import main
from placetune.model.model import Model
from placetune.model.onnx_io import read_model_proto

from .conftest import DATA
from .detector import NMS_OUTPUTS, append_efficient_nms

YOLOV8N = DATA / "yolov8n_ultralytics.onnx.gz"


@pytest.fixture(scope="module")
def yolov8n_nms(tmp_path_factory):
    proto, _ = read_model_proto(YOLOV8N)
    path = tmp_path_factory.mktemp("det") / "yolov8n_nms.onnx"
    onnx.save(append_efficient_nms(proto), str(path))
    return path


def test_real_export_with_efficient_nms_loads(yolov8n_nms):
    m = Model.load(yolov8n_nms)
    assert tuple(t.name for t in m.outputs) == NMS_OUTPUTS
    nms = m.layer("/nms/EfficientNMS_TRT")
    assert nms.plugin and [t.shape for t in nms.outputs] == [(1, 1), (1, 100, 4), (1, 100), (1, 100)]
    assert nms.inputs[0].shape == (1, 8400, 4) and nms.inputs[1].shape == (1, 8400, 80)


def test_check_tune_export_a_detector_with_efficient_nms(yolov8n_nms, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # tune writes its plan file here
    assert main(["check", str(yolov8n_nms), "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["layers"]}
    assert rows["/nms/EfficientNMS_TRT"]["reason"].startswith("plugin: no DLA")
    db = tmp_path / "det.db"
    assert main(["tune", "--model", str(yolov8n_nms), "--trials", "5", "--storage", str(db)]) == 0
    capsys.readouterr()
    folder = tmp_path / "deploy"
    assert main(["export", "--storage", str(db), "--format", "trtexec", "-o", str(folder)]) == 0
    plan = json.loads((folder / "plan.json").read_text())
    assert plan["model"]["plugins"] == {"/nms/EfficientNMS_TRT": "EfficientNMS_TRT"}
    nms = next(x for x in plan["layers"] if x["name"] == "/nms/EfficientNMS_TRT")
    assert nms["realized"] == "GPU"
    script = (folder / "build.sh").read_text()
    assert "# plugin layers (GPU only, never on the DLA): EfficientNMS_TRT" in script
    assert "no plugin library is needed" in script and "--plugins" not in script
