"""The worker's DLA builds carry trtexec's builder flags, so the engine a tune times is the one
trtexec (an exported plan's build.sh, the trtexec backend, the self-test's comparison) builds."""

from __future__ import annotations

import importlib
import sys

import onnx
import pytest
from onnx import TensorProto, helper

from placetune.backends.tensorrt.pool import WORKER_FILE
from tests.fakes import FAKES_DIR


@pytest.fixture
def own_modules():
    """The TensorRT double and the worker's files, imported here, leave no module behind."""
    before = dict(sys.modules)
    yield
    for name in [m for m in sys.modules if m not in before]:
        del sys.modules[name]
    sys.modules.update(before)


def _worker_build(monkeypatch, version: str):
    monkeypatch.setenv("PLACETUNE_FAKE_TRT_VERSION", version)
    monkeypatch.syspath_prepend(str(FAKES_DIR))
    monkeypatch.syspath_prepend(str(WORKER_FILE.parent))
    for name in [m for m in sys.modules if m == "tensorrt" or m.startswith("tensorrt.") or m.startswith("worker_")
                 or m in ("_dla_rules", "_fakegpu", "_layerinfo")]:
        del sys.modules[name]
    return importlib.import_module("tensorrt"), importlib.import_module("worker_build")


def _conv(path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 4, 1, 1], [0.1] * 16)
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
                               helper.make_node("Relu", ["c"], ["y"], name="relu")], "g", [x], [y], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


@pytest.mark.parametrize("version, core, expected", [
    ("10.3.0", 0, True),   # trtexec --useDLACore: sampleEngines.cpp release/10.3:1129
    ("8.5.2", 1, True),    # release/8.5:987
    ("10.3.0", -1, False),  # a GPU engine: trtexec sets it only with --useDLACore
    ("11.4.1", 0, False),  # strongly typed: release/11.1 trtexec sets no such flag, and its bindings lack it
])
def test_a_dla_build_prefers_the_precision_constraints_as_trtexec(tmp_path, monkeypatch, own_modules, version, core,
                                                                  expected):
    """trtexec with --useDLACore sets BuilderFlag::kPREFER_PRECISION_CONSTRAINTS (8.5-10.16); without it
    TensorRT may ignore a precision or output type the ONNX parser set on a layer (the Q/DQ importer's
    setPrecision/setOutputType, onnx-tensorrt 10.1-GA onnxOpImporters.cpp; 8.5's Cast as an identity with
    an output type), NvInfer.h release/10.3 ILayer::setPrecision: "TensorRT could still choose a
    non-conforming fastest implementation". The worker did not set it: its DLA engines of such a model
    could differ from trtexec's, unseen (the self-test's network has no such layer)."""
    trt, wb = _worker_build(monkeypatch, version)
    strongly = version.startswith("11")
    job = {"onnx": _conv(tmp_path / "m.onnx"), "precision": "fp16", "strongly_typed": strongly,
           "dla_core": core, "dla_layers": ["conv", "relu"] if core >= 0 else []}
    configs = []
    make = trt.Builder.create_builder_config
    monkeypatch.setattr(trt.Builder, "create_builder_config",
                        lambda self: configs.append(make(self)) or configs[-1], raising=True)
    plan, out = wb.build(trt, job, wb.make_logger(trt, False))
    assert plan is not None, out
    assert (out.get("precision_constraints") == "prefer") is expected
    if not strongly:
        assert configs[0].get_flag(trt.BuilderFlag.PREFER_PRECISION_CONSTRAINTS) is expected
