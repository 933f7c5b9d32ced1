"""The ``tensorrt`` backend end to end: Evaluator -> TensorRTBackend -> worker subprocess ->
TensorRT/PyCUDA doubles of 8.5, 10.3 and 11.4 (tests/fakes) -> Measurement -> SQLite store."""

from __future__ import annotations

import gzip
import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from placetune import BackendError, ConfigError, Evaluator, Model, Placement, Store
from placetune.backends.registry import get_backend
from placetune.backends.onnx_prep import convert_to_fp16, has_qdq
from placetune.backends.timing_method import ENGINE_TIMED
from placetune.backends.tensorrt.backend import TensorRTBackend
from tests.fakes import FAKES_DIR, VERSIONS, fake_env

DATA = Path(__file__).parent / "data"
GN = DATA / "seed_model_gn.onnx.gz"


def _backend(tmp: Path, version: str, **kw) -> TensorRTBackend:
    env = fake_env(version, **kw.pop("faults", {}))
    kw.setdefault("warmup_ms", 1)
    kw.setdefault("profile_iterations", 2)
    return TensorRTBackend(worker_env=env, cache_dir=tmp / "cache", **kw)


@pytest.fixture(scope="module")
def backends(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("trt")
    made = {v: _backend(tmp, v) for v in VERSIONS}
    yield made
    for b in made.values():
        b.close()


@pytest.fixture(scope="module")
def gn() -> Model:
    return Model.load(GN)


def _ev(model, backend, tmp_path, **kw) -> Evaluator:
    kw.setdefault("iterations", 5)
    return Evaluator(model, "orin-agx", backend=backend, store=tmp_path / "pt.db", **kw)


@pytest.mark.parametrize("version", VERSIONS)
def test_all_dla_realised_from_the_build_log_and_stored(version, backends, gn, tmp_path):
    rules = version if version.startswith("11") else version[:4].rstrip(".")
    ev = _ev(gn, backends[version], tmp_path, precision="fp16", trt_version=rules)
    p = Placement.all_dla(ev.model)
    m = ev.evaluate(p)
    assert m.status == "ok", m.reason
    assert not m.simulated and m.backend == f"tensorrt-{version}"
    assert len(m.latency_samples_ms) == 5 and m.latency_ms["median"] > 0 and m.throughput_fps > 0
    # requested everything on DLA0; TensorRT (the double) moved these to the GPU: the flatten before the
    # classifier's Gemm from TensorRT 10 on (a published 10.3 build: "Layer '/Flatten' (SHUFFLE): Unsupported
    # on DLA"); the Gemm itself runs on the DLA (that build, and a published 8.5.2 build of this very model:
    # corpus dlatutorial-repro-orin64-8.5.2-model-bn, {ForeignNode[/linear/Gemm]})
    assert all(d == "DLA0" for d in m.requested.values())
    trt10 = not version.startswith("8.")
    gpu = ("/cnn/cnn.1/InstanceNormalization", "/pool/GlobalAveragePool") + (("/Reshape",) if trt10 else ())
    for name in gpu:
        assert m.realized[name] == "GPU" and name in m.fallback
    for name in ("/cnn/cnn.0/Conv", "/cnn/cnn.2/Relu", "/cnn/cnn.11/Relu", "/linear/Gemm") + (() if trt10 else ("/Reshape",)):
        assert m.realized[name] == "DLA0"
    # placetune's rules of the same version predicted both
    assert not {"/Reshape", "/linear/Gemm"} & set(m.extra.get("realized_vs_predicted", {}))
    if trt10:
        assert "Unsupported on DLA" in m.fallback["/Reshape"] and "GPU" in m.fallback["/Reshape"]
    assert m.dla_loadables["DLA0"] == len(m.extra["dla_subgraphs"]) >= 5
    # the FP32 network input reaches the DLA through a GPU reformat (not in a DLA format), then the DLA runs
    assert m.extra["dla_ms"] > 0 and [s["device"] for s in m.segment_times_ms[:2]] == ["GPU", "DLA0"]
    assert "engine_inspector" in m.extra and m.build_seconds >= 0
    ev.close()
    # the realised placement survives in the database
    with Store(str(tmp_path / "pt.db")) as store:
        recs = store.measurements()
    assert len(recs) == 1
    rec = recs[0]
    assert rec.realized == m.realized and rec.requested == m.requested and rec.measurement.fallback == m.fallback
    assert rec.realized != rec.requested


def test_parser_helpers_go_with_the_node_they_serve_on_10x(backends, gn, tmp_path):
    """onnx-tensorrt 10.x registers only a Gemm's MatMul: the bias add, and the
    bias's broadcast Shuffle and Constant, keep TensorRT's default names with no metadata
    (onnxOpImporters.cpp DEFINE_BUILTIN_OP_IMPORTER(Gemm); ImporterContext::registerLayer). The
    worker lists each helper's device; a helper follows its node, and the node's layer that
    cannot run on the DLA (the MatMul, made to fall back here) takes its helpers to the GPU with it, so no
    DLA loadable is made of helpers alone (the committed first version of the fix made one)."""
    backend = _backend(tmp_path, "10.3.0", faults={"DLA_UNSUPPORTED_ON": "/linear/Gemm"})
    ev = _ev(gn, backend, tmp_path, precision="fp16", trt_version="10.3")
    m = ev.evaluate(Placement(ev.model, {"/linear/Gemm": "DLA0", "/cnn/cnn.0/Conv": "DLA0"}))
    assert m.status == "ok", m.reason
    helpers = m.extra["helper_layers"]
    bias = [n for n in helpers if n.endswith("[ElementWise]")]
    assert len(bias) == 1 and helpers[bias[0]] == "GPU"
    assert not any(re.search(r"\[DlaLayer\] \{ForeignNode\[\(Unnamed Layer\* \d+\) \[\w+\]\]\}", s)
                   for s in m.extra["build_log"])
    assert m.realized["/linear/Gemm"] == "GPU" and m.realized["/cnn/cnn.0/Conv"] == "DLA0"
    assert m.dla_loadables == {"DLA0": 1}
    assert m.extra["timed"] == ENGINE_TIMED  # what was timed is stated: the method trtexec is run with too
    # all on DLA0: one loadable per run of DLA layers between the GPU's InstanceNormalizations
    m2 = ev.evaluate(Placement.all_dla(ev.model))
    assert m2.dla_loadables == {"DLA0": 5}, m2.extra["build_log"]
    assert "dla_path" not in m2.extra  # ADJUST_FOR_DLA is a parser flag of TensorRT 10.16 on
    ev.close()
    backend.close()


def test_tensorrt_11_sets_the_parsers_adjust_for_dla_flag(backends, gn, tmp_path):
    """On TensorRT 11 the worker uses NVIDIA's documented path to a DLA-ready
    network, the ONNX parser flag ADJUST_FOR_DLA (trtexec --adjustForDLA), and says so."""
    v = next(x for x in backends if x.startswith("11"))
    ev = _ev(gn, backends[v], tmp_path, precision="fp16", trt_version=v)
    m = ev.evaluate(Placement.all_dla(ev.model))
    assert m.status == "ok", m.reason
    assert m.extra["dla_path"] == "ONNX parser flag ADJUST_FOR_DLA (TensorRT 10.16 on)"
    m_gpu = ev.evaluate(Placement.all_gpu(ev.model))
    assert "dla_path" not in m_gpu.extra


def test_helper_devices_follow_producer_else_consumer():
    """worker_devices.follow_helpers, shared by the worker and Plan.apply: a helper takes the
    device of the layer producing its first computed input (Constants do not count), else of
    its first consumer; a chain of helpers resolves through itself."""
    from types import SimpleNamespace as NS

    from placetune.backends.tensorrt.worker_devices import follow_helpers

    def layer(name, ins=(), outs=(), type_="op"):
        return NS(name=name, type=type_, num_inputs=len(ins), num_outputs=len(outs),
                  get_input=lambda i, ins=ins: NS(name=ins[i]), get_output=lambda i, outs=outs: NS(name=outs[i]))

    layers = [layer("conv", ["x"], ["c"]),                        # DLA
              layer("(Unnamed Layer* 1) [Constant]", [], ["w"], "const"),
              layer("(Unnamed Layer* 2) [Shuffle]", ["w"], ["wb"]),  # only a Constant in: its consumer
              layer("(Unnamed Layer* 3) [ElementWise]", ["c", "wb"], ["a"]),  # after the DLA conv
              layer("(Unnamed Layer* 4) [Shuffle]", ["a"], ["s"]),  # a chain of helpers
              layer("pool", ["s"], ["p"]),                          # GPU
              layer("(Unnamed Layer* 6) [Cast]", ["p"], ["y"])]     # after a GPU layer
    known = ["DLA", None, None, None, None, "GPU", None]
    got = follow_helpers(layers, known, "const", "GPU")
    assert got == ["DLA", "DLA", "DLA", "DLA", "DLA", "GPU", "GPU"]


def test_gpu_only_and_dla_core_1(backends, gn, tmp_path):
    be = backends["8.5.2"]
    ev = _ev(gn, be, tmp_path, precision="int8", trt_version="8.5", dla_core=1)
    gpu = ev.evaluate(Placement.all_gpu(ev.model))
    assert gpu.status == "ok" and set(gpu.realized.values()) == {"GPU"} and gpu.dla_loadables == {}
    m = ev.evaluate(Placement(ev.model, {"/cnn/cnn.0/Conv": "DLA1", "/cnn/cnn.2/Relu": "DLA1"}))
    assert m.status == "ok", m.reason
    assert m.realized["/cnn/cnn.0/Conv"] == "DLA1" and m.dla_loadables == {"DLA1": 2}
    # runtime.DLA_core was set before deserialising: the engine runs on core 1, not 0
    assert json.loads(m.extra["engine_inspector"])["FakeRuntimeDLACore"] == 1
    # INT8 without calibration: the worker set dynamic ranges, so nothing falls back from int8
    assert not [w for w in m.extra["build_warnings"] if "Missing scale" in w]
    assert m.latency_ms["median"] < gpu.latency_ms["median"] * 10


def test_faults_never_stop_the_study(gn, tmp_path):
    faults = {"SEGFAULT_ON": "/cnn/cnn.3/Conv", "HANG_ON": "/cnn/cnn.6/Conv",
              "BUILD_NONE_ON": "/cnn/cnn.9/Conv", "EXEC_FAIL_ON": "/cnn/cnn.2/Relu",
              "PLAN_MODEL_WARN_ON": "/cnn/cnn.0/Conv"}
    be = _backend(tmp_path, "10.3.0", faults=faults, timeout_s=2.5)
    ev = _ev(gn, be, tmp_path, precision="fp16", trt_version="10.3")
    plan = [("ok", "/cnn/cnn.0/Conv"), ("crashed", "/cnn/cnn.3/Conv"), ("ok", "/cnn/cnn.5/Relu"),
            ("timeout", "/cnn/cnn.6/Conv"), ("build_failed", "/cnn/cnn.9/Conv"),
            ("runtime_failed", "/cnn/cnn.2/Relu"), ("ok", "/cnn/cnn.11/Relu")]
    pids, got = [], []
    try:
        for want, layer in plan:
            m = ev.evaluate(Placement(ev.model, {layer: "DLA0"}))
            got.append(m)
            pids.append(be.pool.pid)
            assert m.status == want, (layer, m.status, m.reason)
    finally:
        be.close()
    crashed, timeout, none, runtime = got[1], got[3], got[4], got[5]
    assert "SIGSEGV" in crashed.reason and crashed.extra["returncode"] == -11
    assert "2.5 s" in timeout.reason and "killed" in timeout.reason
    assert "Failure to submit program to DLA engine" in none.reason
    assert any("Error Code 2" in e for e in none.extra["build_errors"])
    assert "execute_async_v3" in runtime.reason and runtime.realized["/cnn/cnn.2/Relu"] == "DLA0"
    # TensorRT 10.3's warning at deserialisation is the run's: recorded as such, not as a build warning
    first = got[0]
    assert not [w for w in first.extra["build_warnings"] if "across different models" in w]
    assert [w for w in first.extra["runtime_warnings"] if "across different models" in w]
    assert not [w for w in first.extra["build_log"] if "across different models" in w]
    # the run's cuDLA error is the run's: not a build error of the engine, still a DLA failure
    assert not [e for e in runtime.extra["build_errors"] if "cudlaUtils" in e]
    assert [e for e in runtime.extra["runtime_errors"] if "cudlaUtils" in e]
    assert runtime.extra["failure_class"] == "dla" and "Failed to submit program" in runtime.reason
    # a healthy worker is reused; a crashed / timed-out one is replaced
    assert pids[0] is not None and pids[1] is None and pids[2] not in (None, pids[0])
    assert pids[4] == pids[5] == pids[6] and pids[4] != pids[2]
    ev.close()
    with Store(str(tmp_path / "pt.db")) as store:
        statuses = [r.status for r in store.measurements()]
    assert statuses == [w for w, _ in plan]


def test_strongly_typed_11x_fp16_conversion_and_int8_refusal(backends, gn, tmp_path):
    be = backends["11.4.1"]
    ev = _ev(gn, be, tmp_path, precision="fp16", trt_version="11.4.1")
    m = ev.evaluate(Placement.all_dla(ev.model))
    assert m.status == "ok", m.reason
    # the parent converted the model to FP16 (no BuilderFlag.FP16 in 11.x): no precision fallback
    assert not [w for w in m.extra["build_warnings"] if "precision" in w]
    prepared = list((be.cache_dir / "onnx").glob("*-fp16.onnx"))
    assert prepared and onnx.load(str(prepared[0])).graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT16
    (tmp_path / "i8").mkdir()  # INT8 without Q/DQ: refused before a study is stored, nothing measured
    with pytest.raises(ConfigError) as e:
        _ev(gn, be, tmp_path / "i8", precision="int8", trt_version="11.4.1")
    assert e.value.exit_code == 6
    assert "Q/DQ" in str(e.value) and "strongly typed" in str(e.value) and "fp16" in str(e.value)


def test_gpu_fallback_off_and_tensorrt_disagrees(backends, tmp_path):
    # placetune's rules accept Abs on DLA; the double's table does not. Without GPU_FALLBACK the
    # build returns None and the error lines are kept.
    model = Model.load(_abs_chain(tmp_path, 3))
    ev = _ev(model, backends["8.5.2"], tmp_path, precision="fp16", trt_version="8.5", gpu_fallback=False)
    m = ev.evaluate(Placement.all_dla(ev.model))
    assert m.status == "build_failed"
    assert "Unsupported on DLA and GPU fallback is disabled" in m.reason
    assert m.extra["build_errors"]


def test_sixteen_loadables_switch_to_gpu(backends, tmp_path):
    model = Model.load(_abs_chain(tmp_path, 20))
    ev = _ev(model, backends["10.3.0"], tmp_path, precision="fp16", trt_version="10.3")
    m = ev.evaluate(Placement.all_dla(ev.model))
    assert m.status == "ok", m.reason
    assert m.dla_loadables == {"DLA0": 16}
    late = [f"conv{i}" for i in range(16, 20)]
    assert m.extra["subgraph_limit"] == late
    assert all(m.realized[c] == "GPU" and "16 subgraphs" in m.fallback[c] for c in late)
    assert all(m.realized[f"conv{i}"] == "DLA0" for i in range(16))
    assert m.realized["node_of_a0"] == "GPU" and m.requested["node_of_a0"] == "DLA0"
    assert "Unsupported on DLA" in m.fallback["node_of_a0"]


def test_pipeline_mode_runs_on_tensorrt(backends, gn, tmp_path):
    ev = _ev(gn, backends["8.5.2"], tmp_path, mode="pipeline", trt_version="8.5")
    m = ev.evaluate(Placement(ev.model, {"/cnn/cnn.0/Conv": "DLA0", "/cnn/cnn.3/Conv": "DLA1"}))
    assert m.status == "ok" and m.mode == "pipeline", m.reason
    assert m.extra["gate"]["checked"] and m.extra["gate"]["vacuous"]  # the fixture's weights are zeros
    # a gate that compared outputs which ignore the input checked nothing: recorded so, never as a check
    assert "all zeros" in m.extra["gate_unverified"] and m.extra["gate"]["same_for_every_input"]
    assert any("checked nothing" in n for n in m.extra["notes"])


def test_zoo_model_is_exported_for_the_build(backends, tmp_path):
    ev = _ev("model-bn", backends["8.5.2"], tmp_path, precision="fp16", trt_version="8.5")
    m = ev.evaluate(Placement.all_dla(ev.model))
    assert m.status == "ok", m.reason
    assert list((backends["8.5.2"].cache_dir / "onnx").glob("model-bn-*.onnx"))
    assert (backends["8.5.2"].cache_dir / "timing" / "orin-agx-trt8.5.2-MAXN.cache").is_file()


def test_fingerprint_is_robust_here_and_warns(backends, caplog):
    from placetune.hardware.platforms import get_platform
    from placetune.settings import Settings

    be = _backend(Path(backends["8.5.2"].cache_dir).parent, "8.5.2")
    with caplog.at_level(logging.WARNING, logger="placetune.backends.tensorrt"):
        fp = be.fingerprint(get_platform("orin-agx"), Settings(trt_version="8.6"))
    be.close()
    assert fp["backend"] == "tensorrt" and fp["trt_version"] == "8.5.2" and fp["dla_cores"] == 2
    assert {"l4t", "jetpack", "module", "power_mode", "clocks_locked"} <= set(fp)
    text = caplog.text
    assert "jetson_clocks" in text  # clocks not verified locked here
    assert "trt_version='8.5'" in text  # rules for 8.6 but the worker has 8.5.2


def test_missing_tensorrt_is_a_clear_error(tmp_path):
    be = TensorRTBackend(worker_env={"PYTHONPATH": ""}, cache_dir=tmp_path)
    try:
        with pytest.raises(BackendError, match="system-site-packages"):
            Evaluator("seed-block", "orin-agx", backend=be)
    finally:
        be.close()


def test_get_backend_and_options(tmp_path):
    be = get_backend("tensorrt", worker_python=sys.executable, cache_dir=tmp_path,
                     dla_memory_pools={"dla_sram": 1 << 20, "dla_local_dram": 1 << 30, "workspace": 3 << 20})
    assert isinstance(be, TensorRTBackend) and be.name == "tensorrt" and be.simulated is False
    assert be.memory_pools == {"DLA_MANAGED_SRAM": 1 << 20, "DLA_LOCAL_DRAM": 1 << 30, "WORKSPACE": 3 << 20}
    with pytest.raises(ConfigError, match="power of 2"):
        TensorRTBackend(dla_memory_pools={"dla_sram": 1000})
    with pytest.raises(ConfigError, match="unknown memory pool"):
        TensorRTBackend(dla_memory_pools={"sram": 1 << 20})
    with pytest.raises(ConfigError, match="does not exist"):
        TensorRTBackend(worker_python="/nonexistent/python3")
    with pytest.raises(ConfigError, match="calibration cache"):
        TensorRTBackend(calibration_cache=tmp_path / "missing.cache")


def test_memory_pools_and_calibration_cache_reach_the_build(gn, tmp_path):
    calib = tmp_path / "calib.cache"
    calib.write_bytes(b"TRT-8502-EntropyCalibration2\ninput: 3c010a14\n")
    be = _backend(tmp_path, "8.5.2", calibration_cache=calib, dla_memory_pools={"dla_sram": 1 << 19})
    ev = _ev(gn, be, tmp_path, precision="int8", trt_version="8.5")
    try:
        m = ev.evaluate(Placement.all_dla(ev.model))
    finally:
        be.close()
    assert m.status == "ok", m.reason
    assert not [w for w in m.extra["build_warnings"] if "Missing scale" in w]


@pytest.mark.parametrize("version, present, absent", [
    ("8.5.2", ["Builder.build_engine", "IExecutionContext.execute_async_v2", "IExecutionContext.execute_async_v3",
               "BuilderFlag.FP16", "NetworkDefinitionCreationFlag.EXPLICIT_BATCH"], ["ILayer.metadata"]),
    ("10.3.0", ["IExecutionContext.execute_async_v3", "BuilderFlag.INT8", "ILayer.metadata"],
     ["Builder.build_engine", "IExecutionContext.execute_async_v2", "ICudaEngine.get_binding_index"]),
    ("11.4.1", ["IExecutionContext.execute_async_v3", "BuilderFlag.GPU_FALLBACK"],
     ["BuilderFlag.FP16", "BuilderFlag.INT8", "ITensor.set_dynamic_range", "IBuilderConfig.int8_calibrator",
      "NetworkDefinitionCreationFlag.EXPLICIT_BATCH"]),
])
def test_doubles_lack_what_their_version_lacks(version, present, absent):
    code = ("import json, sys, tensorrt as trt\n"
            "def has(p):\n    o = trt\n    for part in p.split('.'):\n"
            "        if not hasattr(o, part): return False\n        o = getattr(o, part)\n    return True\n"
            "print(json.dumps({p: has(p) for p in sys.argv[1:]}))\n")
    p = subprocess.run([sys.executable, "-c", code, *present, *absent], capture_output=True, text=True, timeout=60,
                       env={**fake_env(version), "PATH": "/usr/bin:/bin"}, cwd=str(FAKES_DIR))
    assert p.returncode == 0, p.stderr
    found = json.loads(p.stdout)
    assert all(found[x] for x in present), found
    assert not any(found[x] for x in absent), found


def test_convert_to_fp16_keeps_resize_scales_float32():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 8, 8])
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    w = numpy_helper.from_array(np.ones((2, 2, 1, 1), np.float32), "w")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.array([0.5], np.float32))),
        helper.make_node("Mul", ["c", "k"], ["m"], name="mul"),
        helper.make_node("Cast", ["m"], ["f"], to=TensorProto.FLOAT, name="cast"),
        helper.make_node("Resize", ["f", "", "scales"], ["y"], name="resize", mode="nearest"),
    ]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], [scales, w]),
                              opset_imports=[helper.make_opsetid("", 17)])
    m16 = convert_to_fp16(model)
    inits = {t.name: t.data_type for t in m16.graph.initializer}
    assert inits == {"scales": TensorProto.FLOAT, "w": TensorProto.FLOAT16}
    assert m16.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT16
    assert m16.graph.node[1].attribute[0].t.data_type == TensorProto.FLOAT16
    assert m16.graph.node[3].attribute[0].i == TensorProto.FLOAT16
    onnx.checker.check_model(m16)
    onnx.shape_inference.infer_shapes(m16, strict_mode=True)
    assert not has_qdq(m16)
    q = helper.make_node("QuantizeLinear", ["x", "s"], ["q"])
    m16.graph.node.insert(0, q)
    assert has_qdq(m16)
    assert model.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT  # input untouched


def _abs_chain(tmp: Path, n: int) -> Path:
    """conv0 -> Abs -> conv1 -> Abs ... : n DLA islands in the double (it has no DLA Abs).
    The Abs nodes are unnamed: the parser and placetune both call them ``node_of_<output>``."""
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 8, 8, 8])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 8, 8, 8])
    nodes, inits, cur = [], [], "input"
    for i in range(n):
        inits.append(numpy_helper.from_array(np.full((8, 8, 1, 1), 0.1, np.float32), f"w{i}"))
        nodes.append(helper.make_node("Conv", [cur, f"w{i}"], [f"c{i}"], name=f"conv{i}"))
        out = "output" if i == n - 1 else f"a{i}"
        nodes.append(helper.make_node("Abs", [f"c{i}"], [out]))  # unnamed: "node_of_<out>" in both
        cur = out
    model = helper.make_model(helper.make_graph(nodes, "abs_chain", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp / f"abs_chain_{n}.onnx.gz"
    path.write_bytes(gzip.compress(model.SerializeToString()))
    return path


LOGGER_SCRIPT = r"""
import gzip, json, sys
sys.path.insert(0, sys.argv[1])
import tensorrt as trt
import worker_build
keep = trt.Runtime(worker_build.make_logger(trt, False))  # e.g. a runtime a reused worker still holds
onnx_path = sys.argv[2] + "/m.onnx"
open(onnx_path, "wb").write(gzip.open(sys.argv[3]).read())
plan, info = worker_build.obtain_plan(trt, {"onnx": onnx_path, "precision": "fp16", "name": "e", "dla_core": 0,
                                            "dla_layers": ["/cnn/cnn.0/Conv"]})
print(json.dumps({"built": plan is not None, "log": info["log"]}))
"""


def test_one_logger_per_process_so_later_builds_are_logged(tmp_path):
    """TensorRT keeps one logger pointer while any builder/runtime is alive and
    ignores a new logger (it warns and keeps the first: NVIDIA/TensorRT #1475). A worker that made
    a logger per job lost the build log, and with it the realised placement, of later builds."""
    from placetune.backends.tensorrt.pool import WORKER_FILE

    p = subprocess.run([sys.executable, "-c", LOGGER_SCRIPT, str(WORKER_FILE.parent), str(tmp_path), str(GN)],
                       capture_output=True, text=True, timeout=120, env={**os.environ, **fake_env("10.3.0")})
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["built"]
    text = "\n".join(m for _, m in out["log"])
    # 10.3's placement report (VERBOSE, as published: no [DlaLayer] line) is kept whatever the level
    assert "Number of DLA node candidates offloaded : 1 out of 1" in text
    assert "{ForeignNode[/cnn/cnn.0/Conv]} successfully offloaded to DLA." in text
    assert "differs from one already provided" not in text


ORPHAN_PARENT = r"""
import json, sys, time
from placetune.backends.tensorrt.pool import WorkerClient
c = WorkerClient(env=json.loads(sys.argv[1]))
assert c.start() is None
job = {"op": "measure", "id": 1, "onnx": sys.argv[2], "precision": "fp16", "dla_core": 0, "dla_layers": ["*"]}
c.proc.stdin.write((json.dumps(job) + "\n").encode())
c.proc.stdin.flush()
print(c.proc.pid, flush=True)
time.sleep(120)
"""


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return any(line.startswith("State:") and "Z" in line.split()[1] for line in fh)  # a zombie
    except FileNotFoundError:
        return True


def test_worker_is_not_orphaned_when_placetune_gets_sigterm(tmp_path):
    """`kill <placetune>` in the middle of a build once left the worker (its own
    session, busy, not reading stdin) building for as long as the build took. It now watches its
    parent and exits within about a second of losing it."""
    import signal
    import time

    onnx_path = tmp_path / "m.onnx"
    onnx_path.write_bytes(gzip.open(GN).read())
    env = {**fake_env("10.3.0"), "PLACETUNE_FAKE_TRT_HANG_ON": "*"}
    parent = subprocess.Popen([sys.executable, "-c", ORPHAN_PARENT, json.dumps(env), str(onnx_path)],
                              stdout=subprocess.PIPE, text=True)
    try:
        pid = int(parent.stdout.readline())
        time.sleep(1.0)  # the job reaches the (hanging) build
        assert not _gone(pid)
        parent.send_signal(signal.SIGTERM)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 8
        while not _gone(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _gone(pid), "the worker outlived placetune"
    finally:
        parent.kill()
        if not _gone(pid):
            os.kill(pid, signal.SIGKILL)


# =========================================================================================
# cuEventElapsedTime_v2 on a driver that lacks it
# =========================================================================================
_ELAPSED_SCRIPT = r"""
import sys
sys.path.insert(0, sys.argv[1])
from cuda.bindings import driver
how = sys.argv[2]
if how == "raises":  # cuda-python 13 on an older driver: 'Function "..." not found' (as reported upstream: NVIDIA/cuda-python#23)
    def v2(start, end):
        raise RuntimeError('Function "cuEventElapsedTime_v2" not found')
elif how == "not_found":
    def v2(start, end):
        return (driver.CUresult.CUDA_ERROR_NOT_FOUND, None)
else:
    v2 = driver.cuEventElapsedTime
driver.cuEventElapsedTime_v2 = v2
import os
os.environ["PLACETUNE_CUDA"] = "cuda-python"
import worker_cuda
cuda = worker_cuda.driver()
stream = cuda.Stream()
a, b = cuda.Event(), cuda.Event()
a.record(stream)
mem = cuda.mem_alloc(1 << 20)
cuda.memcpy_dtod_async(mem, mem, 1 << 20, stream)
b.record(stream)
b.synchronize()
print(b.time_since(a), b.time_since(a), cuda.no_elapsed_v2 if hasattr(cuda, "no_elapsed_v2") else "-")
"""


@pytest.mark.parametrize("how", ["raises", "not_found", "present"])
def test_event_timing_falls_back_when_the_driver_lacks_cuEventElapsedTime_v2(tmp_path, how):
    """cuda-python 13 has cuEventElapsedTime_v2, a JetPack 6 driver (CUDA 12.x) may not: the
    worker's events time with cuEventElapsedTime then, instead of failing every measurement."""
    import subprocess

    from tests.fakes import FAKES_DIR, fake_env

    script = tmp_path / "elapsed.py"
    script.write_text(_ELAPSED_SCRIPT)
    worker_dir = str(Path(__file__).resolve().parents[1] / "placetune" / "backends" / "tensorrt")
    env = {**os.environ, **fake_env("10.3.0"), "PLACETUNE_FAKE_CUDA_PYTHON": "1"}
    p = subprocess.run([sys.executable, str(script), worker_dir, how], capture_output=True, text=True, env=env,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    first, second, fell_back = p.stdout.split()
    assert float(first) == float(second) >= 0.0
    assert fell_back == ("False" if how == "present" else "True")


def test_power_is_sampled_over_the_workers_timed_loop(tmp_path):
    """power=True: the timed loop lasts power_duration_s, the worker reports its window in
    time.monotonic() terms, the parent's samples are cut to it; energy = mean power / inferences per s."""
    sysfs = Path(__file__).parent / "fakes" / "sysfs" / "orin-agx"
    be = get_backend("tensorrt", worker_env=fake_env("10.3.0"), cache_dir=tmp_path / "trt", warmup_ms=1.0,
                     profile_iterations=0, power=True, power_duration_s=0.4, power_root=sysfs, power_interval_s=0.01)
    try:
        ev = Evaluator(Model.load(DATA / "seed_model_gn.onnx.gz"), "orin-agx", be, store=None, iterations=5)
        m = ev.evaluate(Placement.all_gpu(ev.model))
    finally:
        be.close()
    assert m.ok, m.reason
    power = m.extra["power"]
    assert power["window_s"] == pytest.approx(0.4, abs=0.2) and power["samples"] >= 5
    assert m.power_w == power["mean_w"] and m.power_w > 0
    assert m.energy_mj == pytest.approx(m.power_w * 1000.0 / (m.throughput_fps / m.batch))
    assert len(m.latency_samples_ms) > 5  # the loop ran for its duration, not its 5 iterations
    off = get_backend("tensorrt", worker_env=fake_env("10.3.0"), cache_dir=tmp_path / "trt2", warmup_ms=1.0,
                      profile_iterations=0, power_root=sysfs)
    try:
        m2 = Evaluator(Model.load(DATA / "seed_model_gn.onnx.gz"), "orin-agx", off, store=None,
                       iterations=5).evaluate(Placement.all_gpu(ev.model))
    finally:
        off.close()
    assert m2.ok and m2.energy_mj is None and "power" not in m2.extra and len(m2.latency_samples_ms) == 5


def _max3(tmp: Path) -> Path:
    """conv0, conv1 -> Max(c0, c1, input) -> conv2: the parser makes the three-input Max two layers,
    both registered for the node (elementwiseHelper), the second named ``max_<k>``."""
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 8, 8, 8])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 8, 8, 8])
    inits = [numpy_helper.from_array(np.full((8, 8, 1, 1), 0.1, np.float32), f"w{i}") for i in range(3)]
    nodes = [helper.make_node("Conv", ["input", "w0"], ["c0"], name="conv0"),
             helper.make_node("Conv", ["input", "w1"], ["c1"], name="conv1"),
             helper.make_node("Max", ["c0", "c1", "input"], ["m"], name="max"),
             helper.make_node("Conv", ["m", "w2"], ["output"], name="conv2")]
    model = helper.make_model(helper.make_graph(nodes, "max3", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp / "max3.onnx.gz"
    path.write_bytes(gzip.compress(model.SerializeToString()))
    return path


@pytest.mark.parametrize("version", ["8.5.2", "10.3.0"])
def test_a_nodes_second_layer_goes_where_its_node_goes(version, backends, tmp_path):
    """TensorRT 8.5's parser sets no layer metadata and names a node's second layer ``<node>_<k>``
    (onnx-tensorrt 8.5-GA ImporterContext.hpp generateUniqueName; elementwiseHelper registers one
    layer per further input of a Max/Sum). The worker read that layer as no node's and set it to
    the GPU, splitting the DLA island in two; the parser's own ``Registering layer: max_<k> for
    ONNX node: max`` line says whose it is. On 10.x the metadata already says it."""
    model = Model.load(_max3(tmp_path))
    ev = _ev(model, backends[version], tmp_path, precision="fp16", trt_version=version[:4].rstrip("."))
    m = ev.evaluate(Placement.all_dla(ev.model))
    assert m.status == "ok", m.reason
    assert all(d == "DLA0" for d in m.realized.values()), m.realized
    assert m.dla_loadables == {"DLA0": 1}, m.extra["build_log"]
    assert not [s for s in m.extra["build_log"] if "[GpuLayer]" in s and "max" in s], m.extra["build_log"]
    # the max node on the GPU: its second layer with it; the measurement keeps it for an exported command
    m2 = ev.evaluate(Placement(ev.model, {"conv0": "DLA0", "conv1": "DLA0", "conv2": "DLA0"}))
    assert m2.status == "ok", m2.reason
    second = [n for n in m2.extra["parser_layers"] if n.startswith("max_")]
    assert len(second) == 1 and m2.extra["parser_layers"][second[0]] == "GPU"
    ev.close()


def _qdq(tmp: Path) -> Path:
    """input -> QuantizeLinear -> DequantizeLinear -> conv: an explicitly quantised model."""
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 8, 8, 8])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 8, 8, 8])
    inits = [numpy_helper.from_array(np.full((8, 8, 1, 1), 0.1, np.float32), "w"),
             numpy_helper.from_array(np.array(0.05, np.float32), "s"),
             numpy_helper.from_array(np.array(0, np.int8), "z")]
    nodes = [helper.make_node("QuantizeLinear", ["input", "s", "z"], ["q"], name="quant"),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], name="dequant"),
             helper.make_node("Conv", ["d", "w"], ["output"], name="conv")]
    model = helper.make_model(helper.make_graph(nodes, "qdq", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp / "qdq.onnx.gz"
    path.write_bytes(gzip.compress(model.SerializeToString()))
    return path


@pytest.mark.parametrize("version", ["8.5.2", "10.3.0"])
def test_a_qdq_model_gets_no_placeholder_int8_ranges(version, backends, tmp_path):
    """An explicitly quantised (Q/DQ) model carries its own INT8 scales. trtexec sets its placeholder
    ranges only on a network without Q/DQ layers (samples/common/sampleEngines.cpp hasQDQLayers:
    release/8.5 L856-874, release/8.6 L995-1013, release/10.3 L981-999); the worker set them on every
    INT8 network and the measurement said its ranges were placeholders."""
    model = Model.load(_qdq(tmp_path))
    ev = _ev(model, backends[version], tmp_path, precision="int8", trt_version=version[:4].rstrip("."))
    m = ev.evaluate(Placement.all_gpu(ev.model))
    assert m.status == "ok", m.reason
    assert m.extra["int8_ranges"] == "qdq"
    m2 = ev.evaluate(Placement(ev.model, {"conv": "DLA0"}))
    assert m2.status == "ok", m2.reason
    assert m2.extra["int8_ranges"] == "qdq"
    ev.close()


def test_engines_are_timed_with_trtexec_s_nvtx_markers_not_the_detailed_build_s(gn, backends, tmp_path):
    """The worker builds DETAILED engines (their layer information needs it), and a context's NVTX
    verbosity defaults to the build's, which TensorRT says "will generally increase latency in
    enqueueV3()" (NvInferRuntime.h release/10.3:4303-4310); trtexec times every context at its
    --profilingVerbosity, LAYER_NAMES_ONLY when not given (sampleOptions.cpp:1756-1757,
    sampleInference.cpp:389). The worker now times with LAYER_NAMES_ONLY too, and the measurement says so."""
    ev = _ev(gn, backends["10.3.0"], tmp_path, precision="fp16", trt_version="10.3")
    try:
        m = ev.evaluate(Placement(ev.model, {"/cnn/cnn.0/Conv": "DLA0"}))
    finally:
        ev.close()
    assert m.ok, m.reason
    assert m.extra["nvtx_verbosity"] == "LAYER_NAMES_ONLY"
    assert json.loads(m.extra["engine_inspector"])["Layers"][0]["LayerType"]  # still DETAILED layer information
