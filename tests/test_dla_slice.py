"""A channel split on the DLA: TensorRT's headers (``ISliceLayer`` in include/NvInfer.h, release/8.4 to
11.1) let a DLA core run a Slice whose start, size and stride are build-time constants, strides all 1, that
does not slice the first dimension of a 4-D input (sliceMode kDEFAULT through 8.6, kSTRICT_BOUNDS in
10.0-10.3, kDEFAULT/kWRAP/kFILL from 10.4; ONNX Slice and Split import as the default mode). shufflenet_v2's
``x.chunk(2, dim=1)`` is such a pair of Slices; placetune's rules put it on the DLA, and an all-DLA plan of it
did not build on the TensorRT doubles, which ran no Slice on the DLA."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.test_cut_formats import _fake_trtexec
from tests.test_deploy import _study
from tests.test_deploy_userpath import RUN, _with_doubles


def _channel_split(path: Path, form: str) -> Path:
    """Conv, then the channels cut in two (two Slices as torch exports ``chunk``, or one Split), a Conv on
    the second half and the halves concatenated again: a shufflenet_v2 unit without its channel shuffle.
    ``form="strided"``: the second half is also cut to every other row (step 2), which no DLA runs."""
    rng = np.random.default_rng(0)
    i64 = lambda *v: np.array(v, np.int64)  # noqa: E731
    inits = [numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * .3, "w"),
             numpy_helper.from_array(rng.standard_normal((4, 4, 1, 1)).astype(np.float32) * .3, "w2"),
             numpy_helper.from_array(i64(0), "s0"), numpy_helper.from_array(i64(4), "s4"),
             numpy_helper.from_array(i64(8), "s8"), numpy_helper.from_array(i64(1), "ax1"),
             numpy_helper.from_array(i64(1), "st1"), numpy_helper.from_array(i64(4, 4), "halves"),
             numpy_helper.from_array(i64(4, 0), "s4_0"), numpy_helper.from_array(i64(8, 16), "e8_16"),
             numpy_helper.from_array(i64(1, 2), "ax12"), numpy_helper.from_array(i64(1, 2), "st12")]
    n = helper.make_node
    nodes = [n("Conv", ["input", "w"], ["c"], name="/conv", pads=[1, 1, 1, 1]), n("Relu", ["c"], ["r"], name="/relu")]
    if form == "split":
        nodes.append(n("Split", ["r", "halves"], ["a", "b"], name="/Split", axis=1))
    elif form == "chunk":  # torch's chunk as shufflenet_v2's export writes it: the half sized from the Shape
        inits += [numpy_helper.from_array(np.array(1, np.int64), "one"),
                  numpy_helper.from_array(np.array(2, np.int64), "two"), numpy_helper.from_array(i64(0), "ax0")]
        nodes += [n("Shape", ["r"], ["shape"], name="/Shape"), n("Gather", ["shape", "one"], ["ch"], name="/Gather"),
                  n("Div", ["ch", "two"], ["half"], name="/Div"),
                  n("Unsqueeze", ["half", "ax0"], ["half1"], name="/Unsqueeze"),
                  n("Slice", ["r", "s0", "half1", "ax1"], ["a"], name="/Slice"),
                  n("Slice", ["r", "half1", "s8", "ax1"], ["b"], name="/Slice_1")]
    else:
        nodes.append(n("Slice", ["r", "s0", "s4", "ax1", "st1"], ["a"], name="/Slice"))
        if form == "strided":
            nodes.append(n("Slice", ["r", "s4_0", "e8_16", "ax12", "st12"], ["b"], name="/Slice_1"))
        else:
            nodes.append(n("Slice", ["r", "s4", "s8", "ax1", "st1"], ["b"], name="/Slice_1"))
    rows = 8 if form == "strided" else 16
    if form == "strided":
        nodes.append(n("MaxPool", ["a"], ["a2"], name="/pool", kernel_shape=[2, 1], strides=[2, 1]))
    nodes += [n("Conv", ["b", "w2"], ["bc"], name="/branch/Conv"),
              n("Concat", ["a2" if form == "strided" else "a", "bc"], ["output"], name="/Concat", axis=1)]
    graph = helper.make_graph(nodes, "split", [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                                             [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 8, rows, 16])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize("form", ["slices", "split", "chunk"])
def test_an_all_dla_channel_split_builds_on_the_dla(tmp_path, form):
    """The all-DLA plan of a channel split builds with every layer where the plan says, one DLA engine, and
    its runtime gives the model's output."""
    model = _channel_split(tmp_path / "split.onnx", form)
    folder = _study(tmp_path, model, "pipeline", "all-dla", trt_version="10.3")
    plan = json.dumps(json.loads((Path(folder) / "plan.json").read_text()))
    assert ("/Split" if form == "split" else "/Slice_1") in plan
    built = _with_doubles([sys.executable, "-m", "placetune.cli", "build", folder], tmp_path)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    assert "every layer runs where the plan says" in built.stdout
    report = json.loads((Path(folder) / "build.json").read_text())
    assert [e["device"] for e in report["engines"]] == ["DLA0"]
    run = _with_doubles([sys.executable, "-c", RUN, folder, str(model), "compare"], tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout)
    assert got["outputs"] == {"output": [1, 8, 16, 16]} and got["err"]["output"] < 1e-2, got  # the DLA's fp16


def test_a_strided_slice_stays_on_the_gpu_in_the_plan_and_the_build(tmp_path):
    """A Slice with a step of 2 is no DLA slice (the header: "Strides are 1 for all dimensions"): the plan
    keeps it on the GPU and the build agrees, the unit-step Slice beside it on the DLA."""
    model = _channel_split(tmp_path / "strided.onnx", "strided")
    folder = _study(tmp_path, model, "pipeline", "all-dla", trt_version="10.3")
    built = _with_doubles([sys.executable, "-m", "placetune.cli", "build", folder], tmp_path)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    assert "every layer runs where the plan says" in built.stdout
    report = json.dumps(json.loads((Path(folder) / "build.json").read_text()))
    assert "/Slice_1" in report


@pytest.mark.parametrize("version", ["8.5.2", "8.6.2", "10.3.0", "10.7.0"])
@pytest.mark.parametrize("form", ["slices", "split", "chunk", "strided"])
def test_the_fake_trtexec_runs_a_unit_step_slice_on_the_dla(tmp_path, version, form):
    """The trtexec double decides as the tensorrt double: the channel Slices and the Split on the DLA in every
    version, the step-2 Slice on the GPU ("Unsupported on DLA")."""
    model = _channel_split(tmp_path / "m.onnx", form)
    args = [f"--onnx={model}", "--useDLACore=0", "--allowGPUFallback", "--verbose", "--fp16"]
    proc = _fake_trtexec(args, version, tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    moved = [line for line in proc.stdout.splitlines() if "Slice" in line or "Split" in line]
    moved = [line for line in moved if "Unsupported on DLA" in line or "not supported on DLA" in line]
    if form == "strided":
        assert len(moved) == 1 and "/Slice_1" in moved[0], moved
    else:
        assert moved == [], moved


@pytest.mark.parametrize("version", ["8.6.2", "10.3.0"])
@pytest.mark.parametrize("flags,on_dla", [(["--int8", "--fp16"], True), (["--int8"], False)])
def test_the_fake_trtexec_runs_the_fp16_only_slice_on_the_dla_only_when_fp16_is_on(tmp_path, version, flags, on_dla):
    """The DLA runs a Slice in FP16 only (TensorRT 8.x DLA guide). ``--int8 --fp16`` (placetune's INT8 build)
    leaves it FP16, and on the DLA; ``--int8`` alone sets no FP16 with ``--useDLACore`` (sampleEngines.cpp
    ``if (!build.int8) config.setFlag(BuilderFlag::kFP16)``), so the Slice falls back to FP32 (kINT8: "with FP32
    fallback with FP16 fallback if kFP16 also specified", NvInfer.h) and TensorRT moves it to the GPU."""
    model = _channel_split(tmp_path / "m.onnx", "slices")
    proc = _fake_trtexec([f"--onnx={model}", "--useDLACore=0", "--allowGPUFallback", "--verbose", *flags],
                         version, tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    moved = [line for line in proc.stdout.splitlines() if "/Slice" in line and "Switching" in line]
    if on_dla:
        assert moved == [], moved
    else:
        assert len(moved) == 2 and all("DLA only supports FP16 and Int8 precision type" in m for m in moved), moved
        assert not any("/conv" in line and "Switching" in line for line in proc.stdout.splitlines())


TRT_INT8_ONLY = r"""
import json, sys
import tensorrt as trt
class Log(trt.ILogger):
    def __init__(self):
        trt.ILogger.__init__(self)
        self.lines = []
    def log(self, severity, msg):
        self.lines.append(msg)
log = Log()
builder = trt.Builder(log)
flags = 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH) if hasattr(trt.NetworkDefinitionCreationFlag,
                                                                              "EXPLICIT_BATCH") else 0
network = builder.create_network(flags)
parser = trt.OnnxParser(network, log)
assert parser.parse(open(sys.argv[1], "rb").read())
config = builder.create_builder_config()
for flag in sys.argv[2].split(","):
    config.set_flag(getattr(trt.BuilderFlag, flag))
config.default_device_type = trt.DeviceType.DLA
config.DLA_core = 0
config.set_flag(trt.BuilderFlag.GPU_FALLBACK)
layers = [network.get_layer(i) for i in range(network.num_layers)]
print(json.dumps({"can_run": {l.name: config.can_run_on_DLA(l) for l in layers if l.type == trt.LayerType.SLICE},
                  "built": builder.build_serialized_network(network, config) is not None, "log": log.lines}))
"""


@pytest.mark.parametrize("version", ["8.5.2", "10.3.0"])
@pytest.mark.parametrize("flags,on_dla", [("INT8,FP16", True), ("FP16", True), ("INT8", False)])
def test_the_tensorrt_double_runs_the_fp16_only_slice_on_the_dla_only_when_fp16_is_on(tmp_path, version, flags,
                                                                                       on_dla):
    """As the trtexec double: BuilderFlag.INT8 without FP16 leaves a Slice FP32, which the DLA does not run."""
    import os
    import subprocess

    from tests.fakes import fake_env

    model = _channel_split(tmp_path / "m.onnx", "slices")
    proc = subprocess.run([sys.executable, "-c", TRT_INT8_ONLY, str(model), flags], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **fake_env(version)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["built"] and len(got["can_run"]) == 2 and set(got["can_run"].values()) == {on_dla}, got["can_run"]
    switched = [m for m in got["log"] if "DLA only supports FP16 and Int8 precision type" in m]
    assert len(switched) == (0 if on_dla else 2), switched


def test_an_int8_plan_puts_the_channel_split_on_the_dla_and_the_build_agrees(tmp_path):
    """Predicted and realised agree under INT8: the checker counts the Slices DLA-eligible (the build sets FP16
    too), the all-DLA plan puts them on DLA0, and the INT8 + FP16 build on the doubles runs them there."""
    import placetune
    from placetune import Placement
    from placetune.cli.main import main

    model = _channel_split(tmp_path / "split.onnx", "slices")
    url = f"sqlite:///{tmp_path}/pt.db"
    with placetune.Evaluator(str(model), "orin-agx", mode="engine", precision="int8", store=url, study="s",
                             trt_version="10.3") as ev:
        ev.baselines()
        m = ev.evaluate(Placement.all_dla(ev.model), agent="t", trial_number=0)
    folder = tmp_path / "plan"
    assert main(["export", "--study", "s", "--storage", url, "--format", "trtexec", "-o", str(folder),
                 "--measurement", str(m.extra["_id"])]) == 0
    plan = json.loads((folder / "plan.json").read_text())
    devices = {x["name"]: (x["requested"], x["realized"]) for x in plan["layers"]}
    assert devices["/Slice"] == devices["/Slice_1"] == devices["/conv"] == ("DLA0", "DLA0"), devices
    assert "--int8" in (folder / "build.sh").read_text() and "--fp16" in (folder / "build.sh").read_text()
    built = _with_doubles([sys.executable, "-m", "placetune.cli", "build", str(folder)], tmp_path)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    assert "every layer runs where the plan says" in built.stdout
