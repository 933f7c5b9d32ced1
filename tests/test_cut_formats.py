"""The tensors a pipeline passes between a GPU and a DLA engine travel in the
DLA's own type and format (INT8 kCHW32 / FP16 kCHW16) on both sides, with buffers sized for the
vectorised layout. Run against the TensorRT doubles, whose formats follow the ``TensorFormat``
comments of TensorRT's headers (tests/fakes/tensorrt/_formats.py): they pack and unpack each
layout for real, quantise INT8 I/O with the tensor's range, refuse a write past a buffer's end
and charge a GPU reformat wherever a DLA engine's I/O is not in a DLA format."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from placetune import Evaluator, Model, Placement
from placetune.backends.tensorrt import pipeline as trt_pipeline
from placetune.backends.tensorrt.backend import TensorRTBackend
from placetune.backends.tensorrt.pool import WORKER_FILE
from placetune.placement.cut import cut
from placetune.placement.cut_formats import CutFormat, cut_formats, trtexec_io_formats
from tests.fakes import fake_env

# conv_a (3 -> 20 channels) and relu_a on the GPU; conv_b and relu_b on DLA0: one cut tensor of 20
# channels, which kCHW16 and kCHW32 pad to 32
DLA_TAIL = {"/conv_b/Conv": "DLA0", "/relu_b/Relu": "DLA0"}


@pytest.fixture(scope="module")
def two_conv(tmp_path_factory) -> Path:
    rng = np.random.default_rng(3)
    w1 = numpy_helper.from_array(rng.normal(0, 0.3, (20, 3, 3, 3)).astype(np.float32), "conv_a.weight")
    w2 = numpy_helper.from_array(rng.normal(0, 0.3, (12, 20, 1, 1)).astype(np.float32), "conv_b.weight")
    nodes = [
        helper.make_node("Conv", ["input", "conv_a.weight"], ["/conv_a/Conv_output_0"], name="/conv_a/Conv",
                         pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["/conv_a/Conv_output_0"], ["/relu_a/Relu_output_0"], name="/relu_a/Relu"),
        helper.make_node("Conv", ["/relu_a/Relu_output_0", "conv_b.weight"], ["/conv_b/Conv_output_0"],
                         name="/conv_b/Conv", kernel_shape=[1, 1]),
        helper.make_node("Relu", ["/conv_b/Conv_output_0"], ["output"], name="/relu_b/Relu"),
    ]
    g = helper.make_graph(nodes, "two_conv", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 16, 16])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 12, 16, 16])], [w1, w2])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    path = tmp_path_factory.mktemp("models") / "two_conv.onnx"
    onnx.save(model, str(path))
    return path


def _run(model_path: Path, tmp: Path, version: str, precision: str, *, cut_formats_on: bool = True, jobs=None,
         tamper=None, monkeypatch=None):
    be = TensorRTBackend(worker_env=fake_env(version), cache_dir=tmp / "cache", warmup_ms=1, profile_iterations=2,
                         cut_formats=cut_formats_on)
    rules = version if version.startswith("11") else version[:4].rstrip(".")
    ev = Evaluator(str(model_path), "orin-agx", backend=be, store=tmp / "pt.db", trt_version=rules, iterations=5,
                   mode="pipeline", precision=precision)
    if jobs is not None:
        orig = be.pool.run

        def run(job, **kw):
            if tamper is not None and job.get("op") == "pipeline":
                tamper(job)
            jobs.append(job)
            return orig(job, **kw)

        monkeypatch.setattr(be.pool, "run", run)
    try:
        return ev.evaluate(Placement(ev.model, DLA_TAIL))
    finally:
        ev.close()
        be.close()


def test_cut_formats_choose_the_dla_native_format_per_precision(two_conv):
    m = Model.load(str(two_conv))
    segs = cut(m, Placement(m, DLA_TAIL))
    cut_name = "/relu_a/Relu_output_0"
    int8 = cut_formats(segs, "int8")[cut_name]
    assert (int8.dtype, int8.format, int8.producer, int8.consumers) == ("INT8", "CHW32", 0, (1,))
    assert int8.nbytes == 1 * 32 * 16 * 16  # 20 channels padded to one vector of 32, one byte each
    fp16 = cut_formats(segs, "fp16")[cut_name]
    assert (fp16.dtype, fp16.format, fp16.nbytes) == ("HALF", "CHW16", 2 * 32 * 16 * 16)
    assert cut_formats(segs, "fp32") == {}  # the DLA runs no FP32: nothing to agree on
    assert cut_formats(segs, "int8", network_outputs=[cut_name]) == {}  # the application reads it: FP32 stays
    # TensorRT 11 takes types from the model: FP16 segment models for fp16; INT8 would need Q/DQ
    assert cut_formats(segs, "fp16", strongly_typed=True)[cut_name].format == "CHW16"
    assert cut_formats(segs, "int8", strongly_typed=True) == {}
    all_gpu = cut(m, Placement(m, {}))
    assert cut_formats(all_gpu, "int8") == {}
    assert trtexec_io_formats(["input", cut_name], {cut_name: int8}) == "fp32:chw,int8:chw32"
    assert trtexec_io_formats(["input"], {cut_name: int8}) is None


@pytest.mark.parametrize("version,precision", [("8.5.2", "int8"), ("8.6.2", "fp16"), ("10.3.0", "int8"),
                                               ("10.3.0", "fp16"), ("11.4.1", "fp16")])
def test_cut_tensor_travels_in_the_dla_format_on_both_sides(version, precision, two_conv, tmp_path, monkeypatch):
    """Both engines get the same type and one allowed format for the cut tensor, the buffers
    hold the padded layout (the double refuses a write past a buffer's end), the outputs
    still match the all-GPU engine, and the DLA engine has no reformat at the cut."""
    jobs: list = []
    m = _run(two_conv, tmp_path, version, precision, jobs=jobs, monkeypatch=monkeypatch)
    assert m.status == "ok", m.reason
    cut_name = "/relu_a/Relu_output_0"
    want = ["INT8", "CHW32"] if precision == "int8" else ["HALF", "CHW16"]
    specs = next(j for j in jobs if j.get("op") == "pipeline")["engines"]
    assert [s["io_formats"] for s in specs] == [{cut_name: want}, {cut_name: want}]
    assert [row["io_formats"] for row in m.extra["engines"]] == [{cut_name: want}, {cut_name: want}]
    assert m.extra["cut_formats"][cut_name]["format"] == want[1]
    assert "cut_formats_failed" not in m.extra
    assert m.extra["gate"]["passed"] and not m.extra["gate"]["vacuous"]
    # the DLA engine reformats only the FP32 network output it writes, not the cut it reads
    gpu, dla = m.extra["engines"]
    assert gpu["reformats_ms"] == {}
    assert list(dla["reformats_ms"]) == ["Reformatting CopyNode for Output Tensor 0 to /relu_b/Relu"]


def test_without_cut_formats_the_dla_engine_pays_a_reformat_at_the_cut(two_conv, tmp_path):
    m = _run(two_conv, tmp_path, "10.3.0", "int8", cut_formats_on=False)
    assert m.status == "ok", m.reason
    assert m.extra["cut_formats"] == {}
    assert sorted(m.extra["engines"][1]["reformats_ms"]) == ["Reformatting CopyNode for Input Tensor 0 to /conv_b/Conv",
                                                             "Reformatting CopyNode for Output Tensor 0 to /relu_b/Relu"]


def test_a_producer_and_consumer_that_disagree_are_refused_before_running(two_conv, tmp_path, monkeypatch):
    """The runtime compares the format each engine really got (engine.get_tensor_format), not
    what was asked: a consumer reading HALF kCHW16 bytes as INT8 kCHW32 would compute garbage."""

    def tamper(job):
        job["engines"][1]["io_formats"] = {"/relu_a/Relu_output_0": ["HALF", "CHW16"]}

    m = _run(two_conv, tmp_path, "10.3.0", "int8", jobs=[], tamper=tamper, monkeypatch=monkeypatch)
    assert m.status == "runtime_failed"
    assert "cut tensor '/relu_a/Relu_output_0'" in m.reason and "CHW32" in m.reason and "CHW16" in m.reason


def test_a_format_the_tensorrt_refuses_falls_back_to_default_io(two_conv, tmp_path, monkeypatch):
    """TensorRT 8.x binds kCHW16 to FP16 (NvInferRuntimeCommon.h); asked for INT8 kCHW16 the
    build fails, and the pipeline is built again with the default FP32 linear I/O, saying why."""
    real = trt_pipeline.cut_formats

    def int8_chw16(*a, **kw):
        return {t: CutFormat(f.tensor, "INT8", "CHW16", f.shape, f.producer, f.consumers)
                for t, f in real(*a, **kw).items()}

    monkeypatch.setattr(trt_pipeline, "cut_formats", int8_chw16)
    jobs: list = []
    m = _run(two_conv, tmp_path, "8.5.2", "int8", jobs=jobs, monkeypatch=monkeypatch)
    assert m.status == "ok", m.reason
    pipeline_jobs = [j for j in jobs if j.get("op") == "pipeline"]
    assert len(pipeline_jobs) == 2 and "io_formats" not in pipeline_jobs[1]["engines"][0]
    assert "CHW16 needs HALF, not INT8" in m.extra["cut_formats_failed"]
    assert m.extra["cut_formats"] == {} and any("default FP32 linear" in n for n in m.extra["notes"])


def test_buffer_bytes_follow_the_headers_layouts():
    sys.path.insert(0, str(WORKER_FILE.parent))
    try:
        wt = importlib.import_module("worker_time")
    finally:
        sys.path.remove(str(WORKER_FILE.parent))
    assert wt.buffer_bytes((1, 20, 16, 16), 1, "CHW32", 1, 32) == 32 * 16 * 16
    assert wt.buffer_bytes((2, 20, 16, 16), 2, "CHW16", 1, 16) == 2 * 32 * 16 * 16 * 2
    assert wt.buffer_bytes((1, 20, 16, 16), 4, "LINEAR", -1, 1) == 20 * 16 * 16 * 4
    assert wt.buffer_bytes((1, 4, 5, 7), 2, "DLA_LINEAR", -1, 1) == 4 * 5 * 32 * 2  # W stride rounded to 64 B


# --------------------------------------------------------------------------- exported trtexec scripts
def _fake_trtexec(args: list[str], version: str, cwd: Path):
    import os
    import subprocess

    env = {**os.environ, "PLACETUNE_FAKE_TRTEXEC_VERSION": version}
    return subprocess.run([sys.executable, str(Path(__file__).parent / "fakes" / "trtexec"), *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("precision,fmt", [("int8", "int8:chw32"), ("fp16", "fp16:chw16")])
def test_exported_pipeline_commands_give_both_sides_of_a_cut_its_dla_format(precision, fmt, two_conv, tmp_path,
                                                                              capsys):
    """The folder's build.sh passes --outputIOFormats to the producer and --inputIOFormats to the
    consumer of each DLA cut (trtexec applies the list in input order); the network input and
    output stay fp32:chw; the strict fake trtexec builds both."""
    from placetune.cli.main import main

    url = f"sqlite:///{tmp_path}/pt.db"
    with Evaluator(str(two_conv), "orin-agx", mode="pipeline", precision=precision, store=url, study="s") as ev:
        ev.baselines()
        m = ev.evaluate(Placement(ev.model, DLA_TAIL), agent="t", trial_number=0)
    out = tmp_path / "deploy"
    assert main(["export", "--study", "s", "--storage", url, "--format", "trtexec", "-o", str(out),
                 "--measurement", str(m.extra["_id"])]) == 0, capsys.readouterr().out
    lines = [line for line in (out / "build.sh").read_text().splitlines() if "--saveEngine" in line]
    assert len(lines) == 2
    assert f"--outputIOFormats={fmt}" in lines[0] and "--inputIOFormats" not in lines[0]
    assert f"--inputIOFormats={fmt}" in lines[1] and "--outputIOFormats" not in lines[1]
    for line in lines:
        args = [a.strip("'") for a in line.split()[1:]]
        args = [a for a in args if a not in ("--skipInference", "--buildOnly")] + ["--skipInference"]
        proc = _fake_trtexec(args, "10.3.0", out)
        assert proc.returncode == 0, proc.stdout[-1500:]


def test_the_fake_trtexec_reads_io_formats_as_trtexec_does(two_conv, tmp_path):
    """sampleOptions.cpp: ``type:fmt`` entries, one per input or one to broadcast; unknown types
    and formats refused; 8.x binds kCHW16 to FP16 (NvInferRuntimeCommon.h), 10.x also INT8."""
    onnx_arg = f"--onnx={two_conv}"
    ok = _fake_trtexec([onnx_arg, "--fp16", "--inputIOFormats=fp16:chw16", "--skipInference"], "10.3.0", tmp_path)
    assert ok.returncode == 0, ok.stdout[-1500:]
    for args, version, message in [
        (["--inputIOFormats=fp16"], "10.3.0", "Invalid IOFormat fp16"),
        (["--inputIOFormats=fp17:chw"], "10.3.0", "Invalid DataType fp17"),
        (["--inputIOFormats=fp16:chw64"], "10.3.0", "Invalid TensorFormat chw64"),
        (["--inputIOFormats=fp16:chw,fp16:chw"], "10.3.0", "The number of inputIOFormats must match"),
        (["--inputIOFormats=int8:chw16"], "8.6.1", "CHW16 needs HALF, not INT8"),
    ]:
        proc = _fake_trtexec([onnx_arg, "--int8", *args, "--skipInference"], version, tmp_path)
        assert proc.returncode != 0 and message in proc.stdout, (args, proc.stdout[-800:])
    assert _fake_trtexec([onnx_arg, "--int8", "--inputIOFormats=int8:chw16", "--skipInference"], "10.3.0",
                         tmp_path).returncode == 0


def test_the_plan_lists_each_boundary_tensors_trt_type_and_format(two_conv, tmp_path):
    from placetune.plan.export import export_plan
    from placetune.store import Store

    url = f"sqlite:///{tmp_path}/pt.db"
    with Evaluator(str(two_conv), "orin-agx", mode="pipeline", precision="int8", store=url, study="s") as ev:
        ev.baselines()
        m = ev.evaluate(Placement(ev.model, DLA_TAIL), agent="t", trial_number=0)
    with Store(url) as store:
        plan = export_plan(store, "s", measurement_id=m.extra["_id"])
    gpu, dla = plan.engines
    cut_name = "/relu_a/Relu_output_0"
    assert [(t["name"], t["trt_dtype"], t["format"]) for t in gpu["inputs"] + gpu["outputs"]] == [
        ("input", "FLOAT", "LINEAR"), (cut_name, "INT8", "CHW32")]
    assert [(t["name"], t["trt_dtype"], t["format"]) for t in dla["inputs"] + dla["outputs"]] == [
        (cut_name, "INT8", "CHW32"), ("output", "FLOAT", "LINEAR")]


# ---- explicitly quantized (Q/DQ) models and non-float cut tensors
QDQ_DLA = {"conv1": "DLA0", "relu1": "DLA0"}  # GPU (input Q/DQ) | DLA0 (conv1, relu1) | GPU (the rest)


@pytest.fixture(scope="module")
def qdq_net(tmp_path_factory) -> Path:
    from tests.test_qdq import _qdq_net

    path = tmp_path_factory.mktemp("qdq") / "qdq_net.onnx"
    onnx.save(_qdq_net(), str(path))
    return path


def test_a_q_dq_models_float_cuts_travel_in_fp16_chw16_not_in_scaleless_int8(qdq_net):
    """TensorRT takes no dynamic range in a network with Q/DQ layers ("Setting dynamic range is only
    allowed when there are no Q/DQ layers in the Network") and trtexec sets none there
    (sampleEngines.cpp hasQDQLayers), so a float cut tensor asked for as INT8 kCHW32 has no scale
    and cannot build; FP16 kCHW16 (the DLA's native FP16 format) needs none. A cut tensor that is
    INT8 in the model (a QuantizeLinear's output) keeps its own type: HALF would convert it."""
    m = Model.load(str(qdq_net))
    segs = cut(m, Placement(m, QDQ_DLA))
    got = {t: (f.dtype, f.format) for t, f in cut_formats(segs, "int8", qdq=True).items()}
    assert got == {"in_dq": ("HALF", "CHW16"), "conv1_r": ("HALF", "CHW16")}
    # a model without Q/DQ nodes keeps INT8 kCHW32 (its ranges are set on the I/O tensors)
    assert {f.dtype for f in cut_formats(segs, "int8").values()} == {"INT8"}
    # the cut between a QuantizeLinear (GPU) and its DequantizeLinear (DLA0): an INT8 tensor of the model
    segs = cut(m, Placement(m, {"in_DQ": "DLA0", **QDQ_DLA}))
    assert [s.inputs for s in segs][1] == ("in_q",)
    for qdq in (True, False):
        assert "in_q" not in cut_formats(segs, "int8", qdq=qdq)
        assert "in_q" not in cut_formats(segs, "fp16", qdq=qdq)


def test_an_integer_cut_tensor_keeps_its_type_in_an_fp16_pipeline():
    """A 4-D integer tensor a DLA segment writes (an ArgMax that falls back to the GPU inside it) is
    not given a HALF I/O type: its producer would convert the indices to FP16 and its reader read
    them as such."""
    from placetune.placement.cut_formats import plan_cut_formats

    engines = [{"index": 0, "device": "DLA0", "inputs": [{"name": "x"}],
                "outputs": [{"name": "idx", "shape": [1, 1, 8, 8], "dtype": "int64"},
                            {"name": "feat", "shape": [1, 16, 8, 8], "dtype": "float32"}]},
               {"index": 1, "device": "GPU", "inputs": [{"name": "idx"}, {"name": "feat"}], "outputs": [{"name": "y"}]}]
    got = plan_cut_formats(engines, "fp16", network_outputs=["y"])
    assert sorted(got) == ["feat"] and got["feat"].dtype == "HALF"


@pytest.mark.parametrize("version", ["8.5.2", "10.3.0"])
def test_a_q_dq_pipeline_builds_its_cut_formats_at_the_first_attempt(version, qdq_net, tmp_path, monkeypatch):
    """An INT8 pipeline of a Q/DQ model: its cut tensors in FP16 kCHW16 build on the first attempt; it
    is not built once with scale-less INT8 cuts that fail, and again with FP32 linear I/O (a GPU
    reformat at every cut, which the deployment's DLA-native cuts would not pay)."""
    # the gate is off: this network's int8 weights overflow FP16 on random input in both engines
    be = TensorRTBackend(worker_env=fake_env(version), cache_dir=tmp_path / "cache", warmup_ms=1,
                         profile_iterations=2, gate=False)
    ev = Evaluator(str(qdq_net), "orin-agx", backend=be, store=tmp_path / "pt.db", trt_version=version[:4].rstrip("."),
                   iterations=5, mode="pipeline", precision="int8")
    jobs: list = []
    orig = be.pool.run

    def run(job, **kw):
        jobs.append(job)
        return orig(job, **kw)

    monkeypatch.setattr(be.pool, "run", run)
    try:
        m = ev.evaluate(Placement(ev.model, QDQ_DLA))
    finally:
        ev.close()
        be.close()
    assert m.status == "ok", m.reason
    assert "cut_formats_failed" not in m.extra, m.extra.get("cut_formats_failed")
    assert len([j for j in jobs if j.get("op") == "pipeline"]) == 1
    assert {t: f["format"] for t, f in m.extra["cut_formats"].items()} == {"in_dq": "CHW16", "conv1_r": "CHW16"}
    assert m.extra["engines"][1]["io_formats"] == {"in_dq": ["HALF", "CHW16"], "conv1_r": ["HALF", "CHW16"]}


def test_a_reference_that_fails_to_build_is_not_blamed_on_the_cut_formats(two_conv, tmp_path, monkeypatch):
    """Only a segment engine that was given cut formats is built again without them: a failure of the
    all-GPU reference (no cut formats) is recorded at once as the reference's, not after rebuilding
    every segment with FP32 linear cuts and a note that the formats did not build."""

    def broken_reference(job):
        if job.get("reference"):
            job["reference"]["onnx"] = str(tmp_path / "missing.onnx")
            job["reference"]["plan_cache"] = str(tmp_path / "missing.engine")

    jobs: list = []
    m = _run(two_conv, tmp_path, "10.3.0", "int8", jobs=jobs, tamper=broken_reference, monkeypatch=monkeypatch)
    assert m.status == "build_failed"
    assert "the reference engine" in m.reason, m.reason
    assert len([j for j in jobs if j.get("op") == "pipeline"]) == 1
    assert "cut_formats_failed" not in m.extra


@pytest.mark.parametrize("why", ["refused", "off"])
def test_a_plan_measured_without_cut_formats_exports_without_them(why, two_conv, tmp_path, monkeypatch, capsys):
    """A pipeline measured with TensorRT's default FP32 linear I/O at its cuts (the native formats
    refused by the build and rebuilt without them, or the backend's cut_formats=False) is exported
    as measured: its boundary tensors FLOAT LINEAR in the plan and no --input/--outputIOFormats in
    the trtexec commands, not the DLA formats its engines were never timed with."""
    from placetune.cli.main import main
    from placetune.plan.export import export_plan
    from placetune.store import Store

    if why == "refused":
        real = trt_pipeline.cut_formats
        monkeypatch.setattr(trt_pipeline, "cut_formats", lambda *a, **kw: {
            t: CutFormat(f.tensor, "INT8", "CHW16", f.shape, f.producer, f.consumers)
            for t, f in real(*a, **kw).items()})
    url = f"sqlite:///{tmp_path}/pt.db"
    be = TensorRTBackend(worker_env=fake_env("8.5.2"), cache_dir=tmp_path / "cache", warmup_ms=1,
                         profile_iterations=2, cut_formats=why != "off")
    try:
        with Evaluator(str(two_conv), "orin-agx", backend=be, store=url, study="s", trt_version="8.5", iterations=5,
                       mode="pipeline", precision="int8") as ev:
            m = ev.evaluate(Placement(ev.model, DLA_TAIL), agent="t", trial_number=0)
    finally:
        be.close()
    assert m.status == "ok", m.reason
    assert m.extra["cut_formats"] == {}
    with Store(url) as store:
        plan = export_plan(store, "s", measurement_id=m.extra["_id"])
    cut_name = "/relu_a/Relu_output_0"
    gpu, dla = plan.engines
    assert [(t["trt_dtype"], t["format"]) for t in gpu["outputs"] + dla["inputs"] if t["name"] == cut_name] == [
        ("FLOAT", "LINEAR"), ("FLOAT", "LINEAR")]
    out = tmp_path / "deploy"
    assert main(["export", "--study", "s", "--storage", url, "--format", "trtexec", "-o", str(out),
                 "--measurement", str(m.extra["_id"])]) == 0, capsys.readouterr().out
    assert "IOFormats" not in (out / "build.sh").read_text()


def test_reformats_at_cuts_reads_the_real_layer_information_of_a_reformat():
    """A Reformat layer names the engine's I/O tensor among its Inputs (an input) or Outputs (an
    output): the real export tests/data/trt_corpus/trex-a100-resnet18-fp16-layerinfo (TensorRT's
    own Reformat layers of network input 'input.1' and output '191'). Only the tensors given a cut
    format count, with their profiled time where the profile has the layer."""
    import json
    from pathlib import Path

    from placetune.placement.cut_formats import CutFormat, reformats_at_cuts

    doc = json.loads((Path(__file__).parent / "data" / "trt_corpus" / "trex-a100-resnet18-fp16-layerinfo" /
                      "layer_info.json").read_text())
    fmt = {t: CutFormat(t, "HALF", "CHW16", (1, 3, 224, 224), 0, (1,)) for t in ("input.1", "191")}
    found = reformats_at_cuts(doc["Layers"], fmt, [["Reformatting CopyNode for Input Tensor 0 to Conv_0 + Relu_1",
                                                    0.01]])
    assert found == [{"tensor": "input.1", "layer": "Reformatting CopyNode for Input Tensor 0 to Conv_0 + Relu_1",
                      "ms": 0.01},
                     {"tensor": "191", "layer": "Reformatting CopyNode for Output Tensor 0 to reshape_after_Gemm_48",
                      "ms": None}]
    assert reformats_at_cuts(doc["Layers"], {"other": fmt["191"]}) == []
    assert reformats_at_cuts(None, fmt) == []
