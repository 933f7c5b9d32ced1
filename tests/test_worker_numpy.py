"""The worker against the numpy a JetPack's TensorRT bindings meet: TensorRT 8.5.2's ``trt.nptype``
(JetPack 5.1) names ``np.bool``, which numpy 1.24-1.26 does not have, so every call raises; the worker
maps TensorRT's data types to numpy's itself and measures all the same (against the doubles, which
follow that source: tests/fakes/tensorrt ``nptype``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from placetune import Evaluator, Model, Placement
from placetune.backends.tensorrt.backend import TensorRTBackend
from placetune.backends.tensorrt.pool import WORKER_FILE
from tests.fakes import FAKES_DIR, fake_env

GN = Path(__file__).parent / "data" / "seed_model_gn.onnx.gz"


def test_the_doubles_nptype_fails_as_tensorrt_8_5_2_does_without_np_bool():
    script = ("import tensorrt as trt\ntry:\n    trt.nptype(trt.DataType.FLOAT)\nexcept AttributeError as e:\n"
              "    print('AttributeError', e)\n")
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                       env={**fake_env("8.5.2", NUMPY_WITHOUT_BOOL="1"), "PATH": ""})
    assert "AttributeError" in p.stdout and "bool" in p.stdout, p.stderr[-1500:]


@pytest.mark.parametrize("mode", ["engine", "pipeline"])
def test_a_measurement_does_not_rest_on_tensorrts_nptype(mode, tmp_path):
    be = TensorRTBackend(worker_env=fake_env("8.5.2", NUMPY_WITHOUT_BOOL="1"), cache_dir=tmp_path / "cache",
                         warmup_ms=1, profile_iterations=1)
    ev = Evaluator(Model.load(GN), "orin-agx", backend=be, store=tmp_path / "pt.db", precision="fp16",
                   trt_version="8.5", iterations=3, mode=mode)
    try:
        layers = [l.name for l in ev.model.layers]
        p = Placement(ev.model, {n: ("DLA0" if i < len(layers) // 2 else "GPU") for i, n in enumerate(layers)})
        m = ev.evaluate(p)
        assert m.status == "ok", m.reason
        assert m.latency_ms["median"] > 0
    finally:
        ev.close()


def test_worker_modules_pass_no_numpy_array_to_tensorrt():
    """TensorRT's pybind11 numpy interop (``trt.Weights`` from an array, a layer's weights as an array:
    release/10.3 python/src/infer/pyFoundationalTypes.cpp:40-46, 217-227; pyGraph.cpp:169-175) is the one
    part of the bindings that a numpy newer than the one they were built with can break; the worker
    never uses it, nor ``trt.nptype``."""
    for f in sorted(WORKER_FILE.parent.glob("worker*.py")):
        text = f.read_text()
        for call in ("trt.Weights", "nptype(", "add_constant(", ".kernel", ".numpy()"):
            assert call not in text, f"{f.name} uses {call}"
    assert FAKES_DIR.is_dir()
