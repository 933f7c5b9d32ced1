"""TensorRT plugin layers through the ``tensorrt`` backend: a real YOLOv8n export ending in
EfficientNMS_TRT builds and is timed against the doubles, its NMS on the GPU, because the worker
registers TensorRT's built-in plugins (``trt.init_libnvinfer_plugins``) before parsing and before
deserializing; the doubles fail as TensorRT does where nobody registered them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import onnx
import pytest

from placetune import Evaluator, Model, Placement
from placetune.backends.tensorrt.backend import TensorRTBackend
from placetune.model.onnx_io import read_model_proto
from tests.fakes import VERSIONS, fake_env

from .conftest import DATA
from .detector import append_efficient_nms

NMS = "/nms/EfficientNMS_TRT"
CONV = "/model.0/conv/Conv"
PLUGIN_NOT_FOUND = 'creator && "Plugin not found, are the plugin name, version, and namespace correct?"'


@pytest.fixture(scope="module")
def yolov8n_nms(tmp_path_factory):
    proto, _ = read_model_proto(DATA / "yolov8n_ultralytics.onnx.gz")
    path = tmp_path_factory.mktemp("plugins") / "yolov8n_nms.onnx"
    onnx.save(append_efficient_nms(proto), str(path))
    return path


#: 11.x is strongly typed: the backend converts the file to FP16 first, which needs the weights this
#: export has stripped, so the detector is built on the versions that take FP32 files
@pytest.mark.parametrize("version", [v for v in VERSIONS if not v.startswith("11")])
def test_detector_with_efficient_nms_builds_on_tensorrt(version, yolov8n_nms, tmp_path):
    be = TensorRTBackend(worker_env=fake_env(version), cache_dir=tmp_path / "cache", warmup_ms=1,
                         profile_iterations=2)
    ev = Evaluator(Model.load(yolov8n_nms), "orin-agx", backend=be, store=tmp_path / "pt.db", iterations=3,
                   precision="fp16", trt_version=version[:4].rstrip("."))
    try:
        gpu = ev.evaluate(Placement.all_gpu(ev.model))
        assert gpu.status == "ok", gpu.reason
        assert gpu.realized[NMS] == "GPU" and set(gpu.realized.values()) == {"GPU"}
        m = ev.evaluate(Placement(ev.model, {CONV: "DLA0"}))
        assert m.status == "ok", m.reason
        assert m.realized[CONV] == "DLA0" and m.realized[NMS] == "GPU" and m.dla_loadables == {"DLA0": 1}
        # the engine runs the plugin as a layer of its own, timed on the GPU
        assert NMS in m.extra["engine_layer_times_ms"] and m.extra["realized_vs_predicted"].get(NMS) is None
    finally:
        ev.close()


PARSE_SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import tensorrt as trt
import worker_build
logger = worker_build.make_logger(trt, False)
flags = 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH) if int(trt.__version__.split(".")[0]) < 10 else 0
builder = trt.Builder(logger)
network = builder.create_network(flags)
parser = trt.OnnxParser(network, logger)
ok = parser.parse_from_file(sys.argv[2])
out = {"parsed": ok, "errors": [str(parser.get_error(i)) for i in range(parser.num_errors)]}
# the worker registers the plugins itself, once, before parsing
plan, info = worker_build.build(trt, {"onnx": sys.argv[2], "precision": "fp16", "dla_core": 0, "dla_layers": ["*"]},
                                logger)
out["built"] = plan is not None
out["nms"] = [l for l in info["network_layers"] if l[0] == "/nms/EfficientNMS_TRT"]
open(sys.argv[3], "wb").write(bytes(plan))
print(json.dumps(out))
"""

LOAD_SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import tensorrt as trt
import worker_build, worker_cuda, worker_time
logger = worker_build.make_logger(trt, False)
cuda = worker_cuda.driver()
plan = open(sys.argv[2], "rb").read()
out = {"plain": trt.Runtime(logger).deserialize_cuda_engine(plan) is not None,
       "log": [m for s, m in logger.lines if s == "ERROR"]}
engine = worker_time.Engine(trt, cuda, "e", plan, 0, logger)  # registers the plugins first
out["engine"] = engine.engine is not None
print(json.dumps(out))
"""


def _run(script: str, version: str, *args: str) -> dict:
    from placetune.backends.tensorrt.pool import WORKER_FILE

    p = subprocess.run([sys.executable, "-c", script, str(WORKER_FILE.parent), *args], capture_output=True,
                       text=True, timeout=120, env={**os.environ, **fake_env(version)})
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("version, prefix", [("8.5.2", "UNSUPPORTED_NODE: Assertion failed: "),
                                             ("10.3.0", "INVALID_NODE: ")])
def test_plugins_not_registered_fail_as_tensorrt_does(version, prefix, yolov8n_nms, tmp_path):
    plan = tmp_path / "e.plan"
    out = _run(PARSE_SCRIPT, version, str(yolov8n_nms), str(plan))
    # a process that never called init_libnvinfer_plugins: onnx-tensorrt's fallback finds no creator
    assert out["parsed"] is False
    assert out["errors"] == [f"In node 235 (importFallbackPluginImporter): {prefix}{PLUGIN_NOT_FOUND}"]
    # the worker's build registers them: the NMS is a plugin layer, which the DLA never takes
    assert out["built"] and out["nms"] and out["nms"][0][2] == "PLUGIN_V2"
    # a fresh process deserialising the engine: without the plugins TensorRT cannot, the worker's Engine can
    out = _run(LOAD_SCRIPT, version, str(plan))
    assert out["plain"] is False
    assert "3: getPluginCreator could not find plugin: EfficientNMS_TRT version: 1" in out["log"]
    assert any("Cannot deserialize plugin since corresponding IPluginCreator not found in Plugin Registry" in m
               for m in out["log"])
    assert out["engine"] is True


def test_double_registers_plugins_idempotently_and_keeps_them_off_the_dla(yolov8n_nms, tmp_path):
    script = r"""
import json, sys
import tensorrt as trt
logger = trt.Logger()
assert trt.init_libnvinfer_plugins(logger, "") and trt.init_libnvinfer_plugins(logger, "")
builder = trt.Builder(logger)
network = builder.create_network(0)
parser = trt.OnnxParser(network, logger)
assert parser.parse_from_file(sys.argv[1])
config = builder.create_builder_config()
config.set_flag(trt.BuilderFlag.FP16)
nms = [network.get_layer(i) for i in range(network.num_layers) if network.get_layer(i).name == "/nms/EfficientNMS_TRT"]
print(json.dumps({"type": nms[0].type.name, "dla": config.can_run_on_DLA(nms[0]),
                  "shapes": [list(nms[0].get_output(i).shape) for i in range(nms[0].num_outputs)]}))
"""
    p = subprocess.run([sys.executable, "-c", script, str(yolov8n_nms)], capture_output=True, text=True,
                       timeout=120, env={**os.environ, **fake_env("10.3.0")})
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out == {"type": "PLUGIN_V2", "dla": False, "shapes": [[1, 1], [1, 100, 4], [1, 100], [1, 100]]}
