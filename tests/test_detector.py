"""A deployed detector: a real Ultralytics YOLOv8n export (weights stripped) ending in TensorRT's
EfficientNMS_TRT plugin, as the YOLOv8 TensorRT export scripts append it, through check, tune and
export; and the zoo's detectors against the real exports' facts."""

from __future__ import annotations

import json

import pytest

from placetune.cli import main
from placetune.model.model import Model

from .conftest import DATA
from .detector import NMS_OUTPUTS, write_yolov8n_nms



@pytest.fixture(scope="module")
def yolov8n_nms(tmp_path_factory):
    return write_yolov8n_nms(tmp_path_factory.mktemp("det"))


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


# ---------------------------------------------------------------- the zoo's detectors vs real exports

#: facts of real ONNX exports (Ultralytics, torchvision; see the file's "made_with"): layer count, MACs, op counts
#: and the DLA checker's per-layer verdicts, so the zoo is checked against them without ultralytics
FACTS = DATA / "detector_exports.json"
VERDICTS = (("orin-agx", "fp16"), ("xavier-agx", "int8"))
#: the zoo networks checked against a real export: Ultralytics' detect and seg models (n and s), torchvision's SSDLite
CHECKED = ["yolov8n", "yolov8s", "yolo11n", "yolo11s", "yolov8n-seg", "yolov8s-seg", "yolo11n-seg", "yolo11s-seg",
           "ssdlite-mobilenetv3"]


def detector_facts(model: Model) -> dict:
    """What the zoo must reproduce of a real export: layers, MACs, ops and DLA verdicts by layer."""
    from collections import Counter

    from placetune.hardware.dla import check_model

    facts = {"layers": len(model.layers), "macs": model.total_macs,
             "inputs": {t.name: list(t.shape) for t in model.inputs},
             "outputs": {t.name: list(t.shape) for t in model.outputs},
             "ops": dict(sorted(Counter(x.op_type for x in model.layers).items()))}
    for platform, precision in VERDICTS:
        verdicts = check_model(model, platform, precision, "8.6")
        facts[f"dla {platform} {precision}"] = {name: "DLA" if s.supported else s.reason for name, s in verdicts.items()}
    return facts


@pytest.mark.parametrize("name", CHECKED)
def test_zoo_detector_matches_the_real_export_facts(name):
    facts = json.loads(FACTS.read_text())["models"][name]
    assert detector_facts(Model.load(name)) == facts


@pytest.mark.parametrize("name", ["yolov8n", "yolo11n", "yolov8s-seg"])
def test_zoo_detector_is_the_real_export_graph(name):
    """Layer by layer against the stored real export (weights stripped): names, ops, edges, shapes, MACs."""
    zoo, real = Model.load(name), Model.load(DATA / f"{name.replace('-', '_')}_ultralytics.onnx.gz")
    assert sorted(zoo.names) == sorted(real.names)  # the same layers (the order of independent branches differs)
    for layer in real.layers:
        mine = zoo.layer(layer.name)
        assert (mine.op_type, mine.producers, [t.shape for t in mine.outputs], mine.macs) == \
            (layer.op_type, layer.producers, [t.shape for t in layer.outputs], layer.macs), layer.name


def _ultralytics_python() -> str | None:
    """A Python with ultralytics: this one, or PLACETUNE_ULTRALYTICS_PYTHON (a separate venv)."""
    import importlib.util
    import os
    import sys
    if importlib.util.find_spec("ultralytics") is not None:
        return sys.executable
    return os.environ.get("PLACETUNE_ULTRALYTICS_PYTHON") or None


_EXPORT = """
import os, sys
os.environ["YOLO_OFFLINE"] = "1"
from ultralytics import YOLO
print(YOLO(sys.argv[1] + ".yaml").export(format="onnx", imgsz=640))
"""


_EXPORT_SSDLITE = """
import torch
from torchvision.models.detection import ssdlite320_mobilenet_v3_large
m = ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None).eval()
class Core(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.backbone, self.head = m.backbone, m.head
    def forward(self, x):
        out = self.head(list(self.backbone(x).values()))
        return out["bbox_regression"], out["cls_logits"]
torch.onnx.export(Core(m), torch.zeros(1, 3, 320, 320), "ssdlite-mobilenetv3.onnx", opset_version=17, dynamo=False,
                  input_names=["images"], output_names=["boxes", "scores"])
"""


@pytest.mark.parametrize("name", CHECKED)
def test_zoo_detector_matches_a_fresh_ultralytics_export(name, tmp_path):
    """Export the network with ultralytics (no weights downloaded: built from its yaml) or torchvision
    (weights=None) and compare."""
    import subprocess
    python = _ultralytics_python()
    if python is None:
        pytest.skip("ultralytics is not installed (or set PLACETUNE_ULTRALYTICS_PYTHON to a Python that has it)")
    script = (_EXPORT_SSDLITE,) if name.startswith("ssdlite") else (_EXPORT, name)
    done = subprocess.run([python, "-c", *script], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={"YOLO_OFFLINE": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-2000:]
    real = detector_facts(Model.load(tmp_path / f"{name}.onnx"))
    assert detector_facts(Model.load(name)) == real
