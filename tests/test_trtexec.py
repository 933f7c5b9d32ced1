"""The ``trtexec`` backend against a fake ``trtexec`` (tests/fakes/trtexec) that prints the
documented formats of TensorRT 8.5, 8.6, 10.3 and 11.4; its parsers on the real log
excerpts of the seeds (tests/data/trtexec_*.log) and the reference's formats."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from placetune import BackendError, Evaluator, Model, Placement, Store
from placetune.measurement import Extra
from placetune.backends.registry import get_backend
from placetune.backends.tensorrt import env as trt_env
from placetune.backends.tensorrt.buildlog import parse_build_log
from placetune.backends.timing_method import ENGINE_TIMED, REPLICAS_TIMED
from placetune.backends.trtexec.backend import PIPELINE_REASON, TrtexecBackend
from placetune.backends.trtexec.find import ENV_VAR, find_trtexec, which_trtexec
from placetune.backends.trtexec.parse import (
    error_lines,
    parse_export_profile,
    parse_export_times,
    parse_layer_info,
    parse_summary,
    version_from_code,
    version_from_text,
)
from placetune.backends.trtexec.timing import summary_stats

HERE = Path(__file__).parent
DATA = HERE / "data"
FAKE = HERE / "fakes" / "trtexec"
SYSFS = HERE / "fakes" / "sysfs"
GN = DATA / "seed_model_gn.onnx.gz"
UNSUPPORTED = ("/cnn/cnn.1/InstanceNormalization", "/pool/GlobalAveragePool")


def _backend(tmp: Path, version: str = "8.6.1", *, fake: dict | None = None, **kw) -> TrtexecBackend:
    env = {"PLACETUNE_FAKE_TRTEXEC_VERSION": version, "PLACETUNE_FAKE_TRTEXEC_RECORD": str(tmp / "record.jsonl"),
           # the fake's "#!/usr/bin/env python3" must find this interpreter (it imports onnx)
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    env.update({f"PLACETUNE_FAKE_TRTEXEC_{k}": str(v) for k, v in (fake or {}).items()})
    kw.setdefault("warmup_ms", 5)
    kw.setdefault("duration_s", 0)
    kw.setdefault("power_root", SYSFS / "orin-agx")
    kw.setdefault("power_interval_s", 0.01)
    be = get_backend("trtexec", trtexec=str(FAKE), cache_dir=tmp / "cache", env=env, **kw)
    assert isinstance(be, TrtexecBackend)
    return be


def _records(tmp: Path) -> list[dict]:
    path = tmp / "record.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _processes(tmp: Path, kind: str) -> list[dict]:
    """Fake trtexec processes by kind: ``build`` (--onnx), ``time`` (--loadEngine), ``help``."""
    starts = [r for r in _records(tmp) if r["event"] == "start"]
    key = {"build": "--onnx=", "time": "--loadEngine=", "help": "--help"}[kind]
    return [r for r in starts if any(a.startswith(key) for a in r["argv"])]


def _device_types(argv: list[str]) -> dict[str, str] | None:
    """trtexec's grammar (sampleOptions.cpp): split on ',', each pair on its LAST ':'."""
    for a in argv:
        if a.startswith("--layerDeviceTypes="):
            return dict(p.rsplit(":", 1) for p in a.partition("=")[2].split(","))
    return None


@pytest.fixture(scope="module")
def gn() -> Model:
    return Model.load(GN)


def _ev(model, backend, tmp_path, **kw) -> Evaluator:
    kw.setdefault("iterations", 5)
    kw.setdefault("precision", "fp16")
    return Evaluator(model, "orin-agx", backend=backend, **kw)


# =========================================================================================
# parsers
# =========================================================================================
def test_versions_from_the_banner_and_help():
    assert [version_from_code(c) for c in ("8502", "8601", "8603", "100300", "100700", "110401")] == \
        ["8.5.2", "8.6.1", "8.6.3", "10.3.0", "10.7.0", "11.4.1"]
    assert version_from_text("&&&& RUNNING TensorRT.trtexec [TensorRT v8502] # trtexec --help") == "8.5.2"
    assert version_from_text("[11/05/2024-10:00:00] [I] TensorRT version: 10.3.0") == "10.3.0"
    assert version_from_text("usage: trtexec") is None


def test_seed_002_real_orin_log_excerpt():
    lines = (DATA / "trtexec_seed002_model_gn.log").read_text().splitlines()
    s = parse_summary(lines)
    assert s.throughput_qps == pytest.approx(305.926) and s.has_summary
    blog = parse_build_log(lines)
    assert blog.loadables == 5 and blog.dla_subgraphs[1] == "{ForeignNode[Relu_10...Conv_11]}"
    assert ("PLUGIN_V2", "InstanceNormalization_5") in blog.gpu_layers and len(blog.gpu_layers) == 6


def test_reference_performance_summary_formats():
    # reference §2.6: the real Orin example (DLA + GPU fallback)
    s = parse_summary(["Throughput: 1663.19 qps",
                       "Latency: min = 0.617432 ms, max = 0.829102 ms, mean = 0.634685 ms, median = 0.629639 ms, "
                       "percentile(90%) = 0.657227 ms"])
    assert s.throughput_qps == pytest.approx(1663.19)
    assert s.latency_ms == {"min": 0.617432, "max": 0.829102, "mean": 0.634685, "median": 0.629639, "p90": 0.657227}
    # the whole printEpilog form with the logger prefix, per-window trace lines first
    p = "[10/12/2024-09:30:01] [I] "
    text = [
        "&&&& RUNNING TensorRT.trtexec [TensorRT v100300] # trtexec --loadEngine=a.engine",
        p + "Average on 10 runs - GPU latency: 0.7 ms - Host latency: 0.9 ms (enqueue 0.2 ms)",
        p + "=== Performance summary ===",
        p + "Throughput: 812.5 qps",
        p + "Latency: min = 1.1 ms, max = 2.5 ms, mean = 1.23 ms, median = 1.2 ms, percentile(90%) = 1.3 ms, "
            "percentile(95%) = 1.4 ms, percentile(99%) = 2.1 ms",
        p + "Enqueue Time: min = 0.1 ms, max = 0.3 ms, mean = 0.15 ms, median = 0.14 ms, percentile(90%) = 0.2 ms, "
            "percentile(95%) = 0.21 ms, percentile(99%) = 0.25 ms",
        p + "H2D Latency: min = 0.05 ms, max = 0.06 ms, mean = 0.055 ms, median = 0.055 ms, "
            "percentile(99.9%) = 0.06 ms",
        p + "GPU Compute Time: min = 1 ms, max = 2.3 ms, mean = 1.12 ms, median = 1.1 ms, percentile(99%) = 2 ms",
        p + "D2H Latency: min = 0.01 ms, max = 0.02 ms, mean = 0.011 ms, median = 0.01 ms, percentile(99%) = 0.02 ms",
        p + "Total Host Walltime: 3.00181 s",
        p + "Total GPU Compute Time: 2.72 s",
        p + "Explanations of the performance metrics are printed in the verbose logs.",
        "&&&& PASSED TensorRT.trtexec [TensorRT v100300] # trtexec --loadEngine=a.engine",
    ]
    s = parse_summary(text)
    assert s.status == "PASSED" and s.version == "10.3.0" and s.command == "trtexec --loadEngine=a.engine"
    assert s.latency_ms["p95"] == 1.4 and s.latency_ms["median"] == 1.2 and s.h2d_ms["p99.9"] == 0.06
    assert s.gpu_compute_ms["median"] == 1.1 and s.enqueue_ms["p99"] == 0.25 and s.d2h_ms["max"] == 0.02
    assert s.host_walltime_s == pytest.approx(3.00181) and s.gpu_compute_s == pytest.approx(2.72)
    assert parse_summary(text[:1] + ["&&&& FAILED TensorRT.trtexec [TensorRT v8502] # x"]).status == "FAILED"


def test_seed_003_pre_8_trtexec_average_lines():
    lines = (DATA / "trtexec_seed003_legacy_dla0.log").read_text().splitlines()
    s = parse_summary(lines)
    assert not s.has_summary and len(s.legacy_ms) == 10 and s.legacy_ms[0] == pytest.approx(49.0278)
    assert summary_stats(s)["median"] == pytest.approx(48.98, abs=0.02)


def test_export_profile_names_are_read_raw_not_unescaped():
    # trtexec writes names between quotes without escaping (reference §2.3)
    names = ['conv "a", b', "relu\\b", "{ForeignNode[x...y]}", "in to nvm", "dup", "dup"]
    text = "[\n  { \"count\" : 10 }\n" + "".join(
        f", {{ \"name\" : \"{n}\", \"timeMs\" : {i + 1}.5, \"averageMs\" : 0.{i + 1}5, \"medianMs\" : 0.{i + 1}, "
        f"\"percentage\" : {10 + i} }}\n" for i, n in enumerate(names)) + "]\n"
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    count, entries = parse_export_profile(text)
    assert count == 10 and [e.name for e in entries] == names
    assert entries[1].average_ms == pytest.approx(0.25) and entries[1].median_ms == pytest.approx(0.2)
    assert entries[0].time_ms == pytest.approx(1.5) and entries[5].percentage == 15
    # a name with a backslash escape would be valid JSON with the wrong name: the raw text wins
    count, entries = parse_export_profile('[{ "count" : 2 }, { "name" : "a\\tb", "timeMs" : 1, "averageMs" : 0.5, '
                                          '"percentage" : 100 }]')
    assert entries[0].name == "a\\tb" and entries[0].median_ms is None  # 8.x-era files without medianMs
    # another writer's valid JSON still reads
    doc = [{"count": 3}, {"name": "n", "timeMs": 3.0, "averageMs": 1.0, "medianMs": 1.0, "percentage": 100.0}]
    assert parse_export_profile(json.dumps(doc)) == (3, [entries[0].__class__("n", 3.0, 1.0, 1.0, 100.0)])
    assert parse_export_profile("garbage") == (None, [])


def test_export_times_valid_and_truncated():
    recs = [{"startEnqMs": 1.0 + i, "endD2hMs": 1.5 + i, "latencyMs": 0.5, "computeMs": 0.4} for i in range(3)]
    assert parse_export_times(json.dumps(recs)) == recs
    text = json.dumps(recs, indent=1)
    cut = text[: text.rindex("latencyMs")]  # trtexec killed while writing
    assert parse_export_times(cut)[:2] == recs[:2]


def test_layer_info_names_only_detailed_and_invalid():
    info = parse_layer_info('{"Layers": ["a", "b"], "Bindings": ["input", "output"]}')
    assert info.valid_json and info.names == ["a", "b"] and info.bindings == ["input", "output"]
    info = parse_layer_info(json.dumps({"Layers": [{"Name": "conv", "LayerType": "CaskConvolution"}], "Bindings": []}))
    assert info.layers[0]["LayerType"] == "CaskConvolution"
    bad = '{"Layers": [{ "Name" : "conv "q"", "LayerType" : "DLA" },\n{ "Name" : "x", "LayerType" : "Reformat" }],\n' \
          '"Bindings": ["input", "out"]}'
    info = parse_layer_info(bad)
    assert not info.valid_json and info.names == ['conv "q"', "x"] and info.bindings == ["input", "out"]
    info = parse_layer_info('{"Layers": ["a "b"",\n"c"],\n"Bindings": ["i"]}')
    assert info.names == ['a "b"', "c"]


def test_layer_info_of_the_wrong_shape_is_unreadable_not_a_crash():
    for text in ('{"Layers": 5, "Bindings": []}', '{"Layers": "ab", "Bindings": []}', '{"Layers": [], "Bindings": 3}',
                 "[1, 2]", "7"):
        info = parse_layer_info(text)
        assert info.layers == [] and info.unreadable, text
    assert not parse_layer_info('{"Layers": ["a"], "Bindings": []}').unreadable


def test_error_lines():
    lines = ["[I] fine", "[10/01/2024-10:00:00] [E] Error[10]: [optimizer.cpp::computeCosts] Could not find",
             "[10/01/2024-10:00:00] [E] Engine set up failed", "&&&& FAILED TensorRT.trtexec [TensorRT v8601] # x",
             "[W] just a warning"]
    assert error_lines(lines) == ["Error[10]: [optimizer.cpp::computeCosts] Could not find", "Engine set up failed",
                                  "&&&& FAILED TensorRT.trtexec [TensorRT v8601] # x"]


# =========================================================================================
# finding trtexec (and the doctor agrees)
# =========================================================================================
def test_lookup_order_and_a_clear_error(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    on_path = bindir / "trtexec"
    shutil.copy(FAKE, on_path)
    usr_src = tmp_path / "usr-src"
    usr_src.mkdir()
    shutil.copy(FAKE, usr_src / "trtexec")
    monkeypatch.setattr(trt_env, "TRTEXEC_DIRS", (str(usr_src),))
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv("PATH", str(bindir))
    assert find_trtexec() == str(on_path)  # PATH before /usr/src/tensorrt/bin
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    assert find_trtexec() == str(usr_src / "trtexec")
    monkeypatch.setenv(ENV_VAR, str(on_path))
    assert find_trtexec() == str(on_path)  # the environment variable before PATH
    assert find_trtexec(str(FAKE)) == str(FAKE)  # --trtexec before everything
    with pytest.raises(BackendError, match="--trtexec /no/such/trtexec"):
        find_trtexec("/no/such/trtexec")
    monkeypatch.setenv(ENV_VAR, "/no/such/either")
    with pytest.raises(BackendError, match=ENV_VAR):
        find_trtexec()
    monkeypatch.delenv(ENV_VAR)
    monkeypatch.setattr(trt_env, "TRTEXEC_DIRS", (str(tmp_path / "empty"),))
    with pytest.raises(BackendError) as err:
        get_backend("trtexec")
    assert "PATH" in str(err.value) and str(tmp_path / "empty" / "trtexec") in str(err.value)
    assert "--trtexec" in str(err.value) and ENV_VAR in str(err.value)
    assert which_trtexec() is None


def test_doctor_reports_the_trtexec_the_backend_uses(monkeypatch):
    from placetune.backends import doctor

    monkeypatch.setenv(ENV_VAR, str(FAKE))
    checks = {c.name: c for c in doctor.run(timeout_s=60)}
    assert checks["trtexec"].ok and checks["trtexec"].detail == str(FAKE) == which_trtexec()
    assert checks["backend trtexec"].ok


def test_version_from_help_and_pipeline_is_infeasible(tmp_path, gn):
    be = _backend(tmp_path, "10.3.0")
    assert be.version() == "10.3.0" and len(_processes(tmp_path, "help")) == 1
    ev = _ev(gn, be, tmp_path, mode="pipeline", trt_version="10.3")
    assert ev.fingerprint["backend"] == "trtexec" and ev.fingerprint["trt_version"] == "10.3.0"
    m = ev.evaluate(Placement(ev.model, {"/cnn/cnn.0/Conv": "DLA0", "/cnn/cnn.3/Conv": "DLA1"}))
    assert m.status == "infeasible" and m.reason == PIPELINE_REASON and "tensorrt backend" in m.reason
    assert not _processes(tmp_path, "build")


# =========================================================================================
# engine mode
# =========================================================================================
def test_all_gpu_engine_with_power_and_energy(tmp_path, gn):
    be = _backend(tmp_path, "8.6.1")
    ev = _ev(gn, be, tmp_path, trt_version="8.6")
    m = ev.evaluate(Placement.all_gpu(ev.model))
    assert m.status == "ok", m.reason
    assert not m.simulated and m.backend == "trtexec-8.6.1"
    assert set(m.realized.values()) == {"GPU"} and m.dla_loadables == {} and m.fallback == {}
    build, run = m.extra["commands"]["build"], m.extra["commands"]["time"]
    assert build[0] == str(FAKE) and "--fp16" in build and "--skipInference" in build and "--verbose" in build
    assert not any(a.startswith(("--useDLACore", "--layerDeviceTypes", "--allowGPUFallback")) for a in build + run)
    # a static model: no --shapes (real trtexec fails the build with it)
    assert not any(a.startswith("--shapes") for a in build) and any(a.startswith("--timingCacheFile=") for a in build)
    assert "--iterations=5" in run and "--separateProfileRun" in run and "--useSpinWait" in run
    # compute only, one query in flight, as the tensorrt worker times, and said so
    assert "--noDataTransfers" in run and "--exposeDMA" in run and m.extra["timed"] == ENGINE_TIMED
    assert len(m.latency_samples_ms) >= 5 and m.latency_ms["median"] > 0
    qps = m.extra["summary"]["throughput_qps"]
    assert m.throughput_fps == pytest.approx(qps * 32)
    # Orin AGX fake rails: GPU_SOC + CPU_CV + SYS_5V0; VDDQ_VDD2_1V8AO is inside SYS_5V0, not added
    assert m.power_w == pytest.approx(19.120 * 0.312 + 19.120 * 0.098 + 4.984 * 0.560)
    assert m.energy_mj == pytest.approx(m.power_w * 1000.0 / qps)
    assert m.objective("energy") == pytest.approx(m.energy_mj)
    assert m.extra["power"]["samples"] >= 1 and m.extra["engine_layers"] > 0
    assert m.layer_times_ms and m.extra["gpu_ms"] > 0 and m.extra["dla_ms"] == 0
    # the timing cache survives, run directories are removed
    assert list((tmp_path / "cache" / "timing").glob("*.cache")) and not list((tmp_path / "cache" / "runs").iterdir())


@pytest.mark.parametrize("version, wording", [("8.5.2", "Unsupported on DLA. Switching"),
                                              ("10.3.0", "Unsupported on DLA. Switching")])
def test_all_dla_fallback_is_read_back_from_the_log(version, wording, tmp_path, gn):
    be = _backend(tmp_path, version)
    ev = _ev(gn, be, tmp_path, trt_version=version[:4].rstrip("."), store=tmp_path / "pt.db")
    m = ev.evaluate(Placement.all_dla(ev.model))
    assert m.status == "ok", m.reason
    build = m.extra["commands"]["build"]
    assert "--useDLACore=0" in build and "--allowGPUFallback" in build and _device_types(build) is None
    assert ("--buildOnly" if version.startswith("8.5") else "--skipInference") in build
    assert "--useDLACore=0" in m.extra["commands"]["time"]  # the runtime core is set at load time too
    assert all(d == "DLA0" for d in m.requested.values())
    # TensorRT (the fake) ran these on the GPU, and said why: the flatten before the classifier's Gemm from
    # TensorRT 10 on (the published 10.3.0 ResNet-50 build: "Layer '/Flatten' (SHUFFLE): Unsupported on DLA")
    trt10 = not version.startswith("8.")
    for name in UNSUPPORTED + (("/Reshape",) if trt10 else ()):
        assert m.realized[name] == "GPU" and wording in m.fallback[name]
    # the Gemm itself on the DLA, in its own loadable after the GPU's pooling, as the published 8.5.2 build of
    # this very model ran it ({ForeignNode[/linear/Gemm]}, corpus dlatutorial-repro-orin64-8.5.2-model-bn)
    dla = ("/cnn/cnn.0/Conv", "/cnn/cnn.2/Relu", "/cnn/cnn.11/Relu", "/linear/Gemm") + (() if trt10 else ("/Reshape",))
    for name in dla:
        assert m.realized[name] == "DLA0" and name not in m.fallback
    # placetune's rules of the same version predicted both, as the tensorrt double builds them
    assert not {"/Reshape", "/linear/Gemm"} & set(m.extra.get("realized_vs_predicted", {}))
    assert m.dla_loadables == {"DLA0": 6} == {"DLA0": len(m.extra["dla_subgraphs"])}
    assert m.extra["dla_ms"] > 0 and any(s["device"] == "DLA0" for s in m.segment_times_ms)
    assert m.layer_times_ms["/cnn/cnn.3/Conv"] > 0
    ev.close()
    with Store(str(tmp_path / "pt.db")) as store:
        rec = store.measurements()[0]
    assert rec.realized == m.realized and rec.measurement.fallback == m.fallback and rec.measurement.energy_mj


def test_mixed_placement_on_8_6_plus_lists_every_layer(tmp_path, gn):
    be = _backend(tmp_path, "10.3.0")
    ev = _ev(gn, be, tmp_path, trt_version="10.3", dla_core=1)
    dla = ["/cnn/cnn.0/Conv", "/cnn/cnn.2/Relu", "/cnn/cnn.3/Conv", "/cnn/cnn.9/Conv"]
    m = ev.evaluate(Placement(ev.model, dict.fromkeys(dla, "DLA1")))
    assert m.status == "ok", m.reason
    build, run = m.extra["commands"]["build"], m.extra["commands"]["time"]
    assert "--useDLACore=1" in build and "--useDLACore=1" in run
    spec = _device_types(build)
    assert spec == {n: ("DLA" if n in dla else "GPU") for n in ev.model.names}
    assert {n for n, d in m.realized.items() if d == "DLA1"} == set(dla)
    assert m.dla_loadables == {"DLA1": 3}  # conv0 | relu2+conv3 | conv9
    assert m.extra["realized_vs_predicted"] == {} and m.fallback == {}


def test_mixed_placement_on_8_5_is_refused_without_building(tmp_path, gn):
    be = _backend(tmp_path, "8.5.2")
    ev = _ev(gn, be, tmp_path, trt_version="8.5")
    m = ev.evaluate(Placement(ev.model, {"/cnn/cnn.0/Conv": "DLA0", "/cnn/cnn.3/Conv": "DLA0"}))
    assert m.status == "infeasible"
    assert "--layerDeviceTypes" in m.reason and "8.6" in m.reason and "tensorrt backend" in m.reason
    assert not _processes(tmp_path, "build")
    # ... but layers kept on the GPU that the DLA cannot run anyway need no --layerDeviceTypes
    asked = {n: "DLA0" for n in ev.model.names if "InstanceNormalization" not in n and n != "/pool/GlobalAveragePool"}
    m = ev.evaluate(Placement(ev.model, asked))
    assert m.status == "ok", m.reason
    assert _device_types(m.extra["commands"]["build"]) is None
    assert any("not supported on the DLA" in n for n in m.extra["notes"])


def test_layer_names_with_quotes_commas_and_backslashes(tmp_path):
    w = numpy_helper.from_array(__import__("numpy").zeros((8, 3, 3, 3), dtype="float32"), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name='conv "1"', pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu\\2"),
             helper.make_node("Conv", ["r", "w2"], ["c2"], name="conv:3", pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["c2"], ["y"], name="pool")]
    w2 = numpy_helper.from_array(__import__("numpy").zeros((8, 8, 3, 3), dtype="float32"), "w2")
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 1, 1])], [w, w2])
    path = tmp_path / "quoted.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    model = Model.load(path)
    be = _backend(tmp_path, "10.3.0")
    ev = _ev(model, be, tmp_path, trt_version="10.3")
    m = ev.evaluate(Placement(ev.model, {'conv "1"': "DLA0", "conv:3": "DLA0"}))
    assert m.status == "ok", m.reason
    assert _device_types(m.extra["commands"]["build"]) == {'conv "1"': "DLA", "relu\\2": "GPU", "conv:3": "DLA",
                                                           "pool": "GPU"}
    assert m.realized == {'conv "1"': "DLA0", "relu\\2": "GPU", "conv:3": "DLA0", "pool": "GPU"}
    # the profile file is invalid JSON (unescaped quote) and the names still come out right
    times = m.extra["engine_layer_times_ms"]
    assert "relu\\2" in times and '{ForeignNode[conv "1"]}' in times
    assert m.layer_times_ms["relu\\2"] > 0 and m.layer_times_ms['conv "1"'] > 0
    # a comma cannot be written in --layerDeviceTypes: infeasible, with the way out
    renamed = onnx.load(str(path))
    renamed.graph.node[1].name = "relu,2"
    onnx.save(renamed, str(tmp_path / "comma.onnx"))
    model2 = Model.load(tmp_path / "comma.onnx")
    ev2 = _ev(model2, be, tmp_path, trt_version="10.3")
    m = ev2.evaluate(Placement(ev2.model, {'conv "1"': "DLA0"}))
    assert m.status == "infeasible" and "','" in m.reason and "tensorrt backend" in m.reason


def test_strongly_typed_11x(tmp_path, gn):
    be = _backend(tmp_path, "11.4.1")
    ev = _ev(gn, be, tmp_path, trt_version="11.4.1")
    m = ev.evaluate(Placement.all_dla(ev.model))
    assert m.status == "ok", m.reason
    build = m.extra["commands"]["build"]
    assert "--fp16" not in build and "--separateProfileRun" not in m.extra["commands"]["time"]
    assert "--noDataTransfers" not in m.extra["commands"]["time"]  # 11.x: deprecated no-op, copies off by default
    assert "--adjustForDLA" in build  # 10.16 on: the parser's DLA rewrites, as the tensorrt worker sets them
    assert "--noCudaGraph" in m.extra["commands"]["time"]  # 11.x captures a CUDA graph by default; the worker not
    assert any(a.startswith("--onnx=") and a.endswith("-fp16.onnx") for a in build)  # converted to float16
    # the classifier's Gemm on the DLA, its flatten on the GPU: TensorRT 10.3's published build (no 11.x DLA build
    # is published; the doubles keep 10.x's rule there)
    assert m.realized["/cnn/cnn.0/Conv"] == "DLA0" and m.realized["/linear/Gemm"] == "DLA0"
    assert m.realized["/Reshape"] == "GPU"
    from placetune import ConfigError

    with pytest.raises(ConfigError) as e:  # INT8 without Q/DQ: refused before a study is stored, nothing measured
        _ev(gn, be, tmp_path, trt_version="11.4.1", precision="int8")
    assert "Q/DQ" in str(e.value) and "strongly typed" in str(e.value)


# =========================================================================================
# failures
# =========================================================================================
def test_build_failure_gives_the_error_lines(tmp_path, gn):
    be = _backend(tmp_path, "8.6.1", fake={"FAIL": "build"})
    m = _ev(gn, be, tmp_path, trt_version="8.6").evaluate(Placement.all_dla(gn))
    assert m.status == "build_failed"
    assert "Could not find any implementation" in m.reason and "Engine could not be created" in m.reason
    assert m.extra["trtexec_errors"] and m.extra["commands"]["build"]
    assert not _processes(tmp_path, "time")


def test_no_gpu_fallback_fails_like_trtexec(tmp_path, gn):
    be = _backend(tmp_path, "10.3.0")
    # planned under TensorRT 8.6's rules, which put the flatten before the classifier's Gemm on the DLA (as 8.4's
    # tutorial build ran it); TensorRT 10.3 refuses it (the published 10.3.0 build: "Unsupported on DLA")
    ev = _ev(gn, be, tmp_path, trt_version="8.6", gpu_fallback=False)
    m = ev.evaluate(Placement(ev.model, {"/Reshape": "DLA0", "/linear/Gemm": "DLA0"}))
    assert m.status == "build_failed", m.reason
    assert "--allowGPUFallback" not in m.extra["commands"]["build"]
    assert "GPU fallback is disabled" in m.reason


def test_extra_flags_reach_trtexec_and_unknown_ones_fail_like_it(tmp_path, gn):
    from placetune import ConfigError

    with pytest.raises(ConfigError, match="--memPoolSize"):
        _backend(tmp_path, build_args=["memPoolSize=dlaSRAM:1"])
    be = _backend(tmp_path, "8.5.2", build_args=["--memPoolSize=dlaSRAM:1", "--skipInference"])
    m = _ev(gn, be, tmp_path, trt_version="8.5").evaluate(Placement.all_gpu(gn))
    assert m.status == "build_failed" and "Unknown option: --skipInference" in m.reason  # 8.5 has --buildOnly
    assert "--memPoolSize=dlaSRAM:1" in m.extra["commands"]["build"]


def test_missing_dla_core_is_infeasible(tmp_path, gn):
    be = _backend(tmp_path, "10.3.0", fake={"DLA_CORES": 1})
    m = _ev(gn, be, tmp_path, trt_version="10.3", dla_core=1).evaluate(Placement.all_dla(gn, core=1))
    assert m.status == "infeasible" and "no DLA core 1" in m.reason


@pytest.mark.parametrize("where", ["build", "infer"])
def test_a_hang_is_a_timeout_and_the_process_is_killed(where, tmp_path, gn):
    be = _backend(tmp_path, "10.3.0", fake={"HANG": where}, timeout_s=2.0)
    t0 = time.monotonic()
    m = _ev(gn, be, tmp_path, trt_version="10.3").evaluate(Placement.all_gpu(gn))
    assert m.status == "timeout" and "killed" in m.reason
    assert time.monotonic() - t0 < 15
    kind = "build" if where == "build" else "time"
    pid = _processes(tmp_path, kind)[-1]["pid"]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_signal_is_a_crash(tmp_path, gn):
    be = _backend(tmp_path, "10.3.0", fake={"CRASH": "infer"})
    m = _ev(gn, be, tmp_path, trt_version="10.3").evaluate(Placement.all_gpu(gn))
    assert m.status == "crashed" and "SIGSEGV" in m.reason
    assert m.extra["trtexec_output_tail"]


def test_runtime_failure(tmp_path, gn):
    be = _backend(tmp_path, "10.3.0", fake={"FAIL": "infer"})
    m = _ev(gn, be, tmp_path, trt_version="10.3").evaluate(Placement.all_gpu(gn))
    assert m.status == "runtime_failed" and "illegal memory access" in m.reason


# =========================================================================================
# power during the timed iterations only
# =========================================================================================
def test_power_is_averaged_over_the_timed_iterations_only(tmp_path, gn):
    root = tmp_path / "sysfs"
    shutil.copytree(SYSFS / "orin-nx", root)
    vdd_in = root / "sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon1/curr1_input"
    fake = {"POWER_FILE": vdd_in, "POWER_BUSY": 2000, "POWER_IDLE": 500, "PROFILE_RUN_S": 0.4}
    be = _backend(tmp_path, "10.3.0", fake=fake, power_root=root, warmup_ms=400, duration_s=0.5,
                  power_interval_s=0.005)
    m = _ev(gn, be, tmp_path, trt_version="10.3").evaluate(Placement.all_gpu(gn))
    assert m.status == "ok", m.reason
    busy_w = 5.016 * 2.0  # VDD_IN during the timed iterations; idle (2.5 W) in warm-up and profiling
    assert m.power_w == pytest.approx(busy_w, rel=0.1)
    assert m.extra["power"]["total_rails"] == ["VDD_IN"] and m.extra["power"]["window_s"] == pytest.approx(0.5, abs=0.2)
    assert m.energy_mj == pytest.approx(m.power_w * 1000.0 / m.extra["summary"]["throughput_qps"])


def test_absent_rails_leave_energy_unknown(tmp_path, gn):
    be = _backend(tmp_path, "10.3.0", power_root=tmp_path / "not-a-jetson")
    m = _ev(gn, be, tmp_path, trt_version="10.3").evaluate(Placement.all_gpu(gn))
    assert m.status == "ok" and m.power_w is None and m.energy_mj is None
    assert m.objective("energy") is None and "no INA3221 power rails" in m.extra["power"]["reason"]


# =========================================================================================
# replicas mode
# =========================================================================================
def test_replicas_run_as_concurrent_trtexec_processes(tmp_path, gn):
    be = _backend(tmp_path, "8.6.1", replica_duration_s=0.8)
    ev = _ev(gn, be, tmp_path, trt_version="8.6", mode="replicas", replicas={"GPU": 32, "DLA0": 32, "DLA1": 32})
    m = ev.evaluate(Placement.all_dla(ev.model))
    assert m.status == "ok", m.reason
    runs = _processes(tmp_path, "time")
    assert len(runs) == 3 and len(_processes(tmp_path, "build")) == 3
    ends = {r["pid"]: r for r in _records(tmp_path) if r["event"] == "end"}
    spans = [(r["time"], ends[r["pid"]]["time"]) for r in runs]
    assert max(s for s, _ in spans) < min(e for _, e in spans)  # all three ran at the same time
    cmds = m.extra["commands"]["time"]
    assert "--useDLACore=1" in cmds["DLA1"] and "--useDLACore=0" in cmds["DLA0"]
    assert not any(a.startswith("--useDLACore") for a in cmds["GPU"]) and "--duration=0.8" in cmds["GPU"]
    assert {ends[r["pid"]]["runtime_dla_core"] for r in runs} == {None, 0, 1}
    # replicas: two queries in flight per instance, as the worker's replicas (queue depth 2)
    assert not any("--exposeDMA" in c for c in cmds.values()) and m.extra["timed"] == REPLICAS_TIMED
    per = {p["device"]: p for p in m.extra["replicas"]}
    assert set(per) == {"GPU", "DLA0", "DLA1"} and all(p["throughput_fps"] > 0 for p in per.values())
    assert m.throughput_fps == pytest.approx(sum(p["throughput_fps"] for p in per.values()))
    assert m.extra["overlap_s"] > 0.3
    assert m.dla_loadables == {"DLA0": 6, "DLA1": 6} and m.realized["/linear/Gemm"] == "DLA0"  # as 8.5.2 built it
    assert m.energy_mj == pytest.approx(m.power_w / (m.throughput_fps / 1000.0) * 32)
    # the build log's loadable count is Measurement.dla_loadables, never a stray key of the extras
    assert "_dla_loadables" not in m.extra and set(m.extra) <= set(Extra.__annotations__), set(m.extra)


def test_replicas_with_their_own_batch_need_a_dynamic_onnx(tmp_path, gn):
    be = _backend(tmp_path, "8.6.1", replica_duration_s=0.2)
    ev = _ev(gn, be, tmp_path, trt_version="8.6", mode="replicas", replicas={"GPU": 64, "DLA0": 8})
    m = ev.evaluate(Placement.all_dla(ev.model))
    assert m.status == "infeasible" and "static batch" in m.reason and "dynamic batch" in m.reason
    assert not _processes(tmp_path, "time")



def test_guided_agent_fits_trtexec_measurements(tmp_path):
    """The guided agent runs against the trtexec fake and its fit uses what trtexec measured."""
    from placetune.tuning.evaluator import Evaluator
    from search import Budget, get_agent

    ev = Evaluator(GN, "orin-agx", _backend(tmp_path), mode="engine", precision="fp16")
    notes: list[dict] = []
    ev.add_callback(lambda p, m: notes.append(m.extra.get("annotation") or {}))
    r = get_agent("guided", seed=0, inner_evals=100).run(ev, Budget(14))
    assert r.evaluations == 14 and r.best_value is not None
    assert all("predicted" in n for n in notes)
    fits = [f for f in r.extra["fits"] if f[1] is not None]
    assert fits and fits[-1][0] >= 8  # fitted to >= 8 trtexec measurements
    assert any("cv_error" in n for n in notes)


def _dynamic_batch_copy(src: Path, dst: Path) -> Path:
    """``src`` with its input's batch dimension left open (``dim_param``), as a dynamic export has it."""
    import gzip

    import onnx

    with gzip.open(src, "rb") as fh:
        proto = onnx.load_from_string(fh.read())
    dim = proto.graph.input[0].type.tensor_type.shape.dim[0]
    dim.ClearField("dim_value")
    dim.dim_param = "batch"
    onnx.save(proto, str(dst))
    return dst


def test_shapes_only_for_inputs_the_onnx_leaves_dynamic(tmp_path, gn):
    """Real trtexec (sampleEngines.cpp) fails the build when --shapes names a static model."""
    be = _backend(tmp_path, "8.6.1")
    m = _ev(gn, be, tmp_path, trt_version="8.6").evaluate(Placement.all_dla(gn))
    assert m.ok, m.reason
    assert all(not a.startswith("--shapes") for p in _processes(tmp_path, "build") + _processes(tmp_path, "time")
               for a in p["argv"])
    dyn_dir = tmp_path / "dyn"
    dyn_dir.mkdir()
    dyn = Model.load(_dynamic_batch_copy(GN, dyn_dir / "gn_dyn.onnx"), shapes=["input=32x3x32x32"])
    assert dyn.dynamic_input_shapes == {"input": (32, 3, 32, 32)}
    be2 = _backend(dyn_dir, "8.6.1")
    m2 = _ev(dyn, be2, dyn_dir, trt_version="8.6").evaluate(Placement.all_dla(dyn))
    assert m2.ok, m2.reason
    builds = _processes(dyn_dir, "build")
    assert builds and all("--shapes=input:32x3x32x32" in p["argv"] for p in builds)


def test_exported_trtexec_script_passes_shapes_only_for_dynamic_inputs(tmp_path, gn):
    from placetune.plan.export import export_plan
    from placetune.plan.trtexec import trtexec_script

    ev = Evaluator(gn, "orin-agx", precision="fp16", store=f"sqlite:///{tmp_path / 'p.db'}")
    ev.evaluate(Placement.all_gpu(gn))
    plan = export_plan(ev.store, ev.study_name)
    assert plan.model["dynamic_inputs"] == []
    assert "--shapes" not in trtexec_script(plan, "gn.onnx")
    plan.model["dynamic_inputs"] = ["input"]
    assert "--shapes=input:32x3x32x32" in trtexec_script(plan, "gn.onnx")
    del plan.model["dynamic_inputs"]  # a plan from an older placetune: never --shapes, and it says why
    script = trtexec_script(plan, "gn.onnx")
    commands = [x for x in script.splitlines() if not x.startswith("#")]
    assert not any("--shapes" in x for x in commands) and "does not say which model inputs" in script


@pytest.mark.parametrize("version", ["8.5.2", "8.6.1", "10.3.0", "10.16.0", "11.4.1"])
def test_engine_mode_times_one_query_in_flight_on_every_version(tmp_path, gn, version):
    """trtexec keeps two queries in flight unless --exposeDMA (sampleInference.cpp
    ``mDepth(1 + inference.overlap)``; sampleOptions.cpp ``overlap = !exposeDMA``), which hides the
    host's enqueue time the worker's one-at-a-time loop includes: every version's trtexec gets
    --exposeDMA (and accepts it: the fake's option table is the version's own) and both backends
    say they timed the same way."""
    be = _backend(tmp_path, version)
    ev = _ev(gn, be, tmp_path, trt_version=version if version.startswith("11") else version[:-2])
    m = ev.evaluate(Placement.all_gpu(ev.model))
    assert m.status == "ok", m.reason
    run = m.extra["commands"]["time"]
    assert run.count("--exposeDMA") == 1 and m.extra["timed"] == ENGINE_TIMED
    assert "--useCudaGraph" not in run
    assert ("--noCudaGraph" in run) == version.startswith("11")
    plan = tmp_path / "x.plan"
    plan.write_bytes(b"")
    from placetune.settings import Settings

    t = be.time_plan(plan, Settings(precision="fp16"))  # the selftest's --loadEngine of the worker's engine
    assert "--exposeDMA" in t.extra["commands"]["time"]


def test_int8_builds_with_fp16_too_and_both_backends_say_what_they_timed(tmp_path, gn):
    """trtexec's --int8 alone is INT8 + FP32 (sampleOptions.cpp); the worker
    builds INT8 + FP16, so trtexec gets --fp16 --int8; both time compute only and say so."""
    be = _backend(tmp_path, "10.3.0")
    ev = _ev(gn, be, tmp_path, trt_version="10.3", precision="int8")
    m = ev.evaluate(Placement.all_dla(ev.model))
    assert m.status == "ok", m.reason
    build = m.extra["commands"]["build"]
    assert "--fp16" in build and "--int8" in build
    assert "--noDataTransfers" in m.extra["commands"]["time"] and m.extra["timed"] == ENGINE_TIMED
    assert "no host<->device copies" in ENGINE_TIMED
    assert m.extra["int8_ranges"] == "placeholder"  # as the tensorrt backend says it


def test_a_qdq_model_is_said_to_keep_its_own_ranges(tmp_path):
    """trtexec sets placeholder ranges only on a network without Q/DQ layers (sampleEngines.cpp
    hasQDQLayers, release/8.5-10.x): the measurement says the model's Q/DQ nodes gave the ranges."""
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 8, 8, 8])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 8, 8, 8])
    inits = [numpy_helper.from_array(np.full((8, 8, 1, 1), 0.1, np.float32), "w"),
             numpy_helper.from_array(np.array(0.05, np.float32), "s"), numpy_helper.from_array(np.array(0, np.int8), "z")]
    nodes = [helper.make_node("QuantizeLinear", ["input", "s", "z"], ["q"], name="quant"),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], name="dequant"),
             helper.make_node("Conv", ["d", "w"], ["output"], name="conv")]
    model = helper.make_model(helper.make_graph(nodes, "qdq", [x], [y], inits), opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "qdq.onnx"))
    ev = _ev(Model.load(tmp_path / "qdq.onnx"), _backend(tmp_path, "10.3.0"), tmp_path, trt_version="10.3",
             precision="int8")
    m = ev.evaluate(Placement.all_gpu(ev.model))
    assert m.status == "ok", m.reason
    assert m.extra["int8_ranges"] == "qdq"
    assert not any("placeholder dynamic ranges" in n for n in m.extra.get("notes") or []), m.extra.get("notes")


def _max3(tmp: Path) -> Path:
    """conv0, conv1 -> Max(c0, c1, input) -> conv2: the parser imports the three-input Max as two layers,
    ``max`` and ``max_<k>`` (elementwiseHelper; generateUniqueName's global counter)."""
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
    path = tmp / "max3.onnx"
    onnx.save(model, str(path))
    return path


def test_a_gpu_nodes_parser_layers_follow_it_and_islands_ending_in_them_are_read(tmp_path):
    """Under --useDLACore every layer --layerDeviceTypes does not name goes to the DLA
    (sampleEngines.cpp setDefaultDeviceType(kDLA); setLayerDeviceTypes matches layer names). The Max
    node asked on the GPU has a second layer ``max_<k>`` that the command did not name: it ran on
    the DLA, and the island ``{ForeignNode[max_<k>...conv2]}`` could not be mapped to the model. The
    parser's ``Registering layer: max_<k> for ONNX node: max`` line of the verbose build says whose it
    is: the backend builds again with it listed on the GPU (once per model), and reads the islands."""
    from placetune.backends.trtexec import engine as trtexec_engine

    trtexec_engine.PARSER_LAYERS.clear()
    be = _backend(tmp_path, "10.3.0")
    model = Model.load(_max3(tmp_path))
    ev = _ev(model, be, tmp_path, trt_version="10.3")
    m = ev.evaluate(Placement(ev.model, {"conv0": "DLA0", "conv1": "DLA0", "conv2": "DLA0"}))
    assert m.status == "ok", m.reason
    spec = _device_types(m.extra["commands"]["build"])
    extra = [n for n in spec if n.startswith("max_")]
    assert len(extra) == 1 and spec[extra[0]] == "GPU", spec
    assert len(_processes(tmp_path, "build")) == 2  # the first build showed the parser's layers
    assert m.realized == {"conv0": "DLA0", "conv1": "DLA0", "max": "GPU", "conv2": "DLA0"}
    assert m.dla_loadables == {"DLA0": 3} and not m.extra["unmapped_log_names"]
    assert m.extra["placement_known"] is True
    assert m.extra["parser_layers"] == {extra[0]: "GPU"}  # kept for an exported command (plan.trtexec)
    # the next placement of the model is built once, its parser layers listed from the start
    m2 = ev.evaluate(Placement(ev.model, {"conv0": "DLA0", "conv2": "DLA0"}))
    assert m2.status == "ok" and len(_processes(tmp_path, "build")) == 3
    assert _device_types(m2.extra["commands"]["build"])[extra[0]] == "GPU"
    ev.close()
    # replicas of the same file: each DLA replica's command lists it too
    ev = _ev(model, _backend(tmp_path, "10.3.0", replica_duration_s=0.2), tmp_path, trt_version="10.3",
             mode="replicas", replicas={"DLA0": 1, "DLA1": 1})
    m3 = ev.evaluate(Placement(ev.model, {"conv0": "DLA0", "conv1": "DLA0", "conv2": "DLA0"}))
    assert m3.status == "ok", m3.reason
    assert all(_device_types(c)[extra[0]] == "GPU" for c in m3.extra["commands"]["build"].values())
    # TensorRT 10.3 prints 'successfully offloaded' lines and no [DlaLayer] line: each replica's
    # loadables are counted from them, as an engine-mode build's are (they read 0)
    assert m3.dla_loadables == {"DLA0": 3, "DLA1": 3}, m3.dla_loadables
    ev.close()


@pytest.mark.parametrize("name", ["in,put", "in'put"])
def test_dynamic_input_name_shapes_cannot_express_is_refused(tmp_path, name):
    """trtexec splits --shapes at every ',' and strips single quotes: a dynamic input so named would build
    without its shape (the engine's batch silently wrong); the measurement is refused, naming the input."""
    import gzip

    with gzip.open(GN, "rb") as fh:
        proto = onnx.load_from_string(fh.read())
    old = proto.graph.input[0].name
    proto.graph.input[0].name = name
    for node in proto.graph.node:
        node.input[:] = [name if x == old else x for x in node.input]
    dim = proto.graph.input[0].type.tensor_type.shape.dim[0]
    dim.ClearField("dim_value")
    dim.dim_param = "batch"
    onnx.save(proto, str(tmp_path / "m.onnx"))
    model = Model.load(tmp_path / "m.onnx", shapes=[f"{name}=32x3x32x32"])
    m = _ev(model, _backend(tmp_path, "8.6.1"), tmp_path, trt_version="8.6").evaluate(Placement.all_dla(model))
    assert not m.ok and m.status == "infeasible" and repr(name) in m.reason and "--shapes" in m.reason
    assert not _processes(tmp_path, "build")  # nothing built without its shape


@pytest.mark.parametrize("script", ["echo early; sleep 1 &", "echo early; (sleep 1; echo late) &"])
def test_a_line_after_the_log_is_closed_is_dropped_not_an_error_in_the_reader_thread(tmp_path, monkeypatch, script):
    """A child of trtexec that holds the output pipe past the end of the run: wait() closes the log once
    its reader has had READER_JOIN_S, and the reader's next write or final flush hit the closed file
    (``ValueError: I/O operation on closed file`` in the trtexec-output thread, seen in CI). Now the
    log is written and closed under one lock and a late line is dropped."""
    import threading

    from placetune.backends.trtexec import process

    monkeypatch.setattr(process, "READER_JOIN_S", 0.2)
    raised: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: raised.append(args.exc_value))
    proc = process.Proc(["sh", "-c", script], tmp_path / "log.txt", dict(os.environ), tmp_path)
    run = proc.wait(time.monotonic() + 30)
    assert run.returncode == 0
    proc._reader.join(timeout=10)
    assert not proc._reader.is_alive() and raised == []
    assert (tmp_path / "log.txt").read_text() == "early\n"


def test_a_total_cut_before_its_unit_is_unknown():
    """trtexec writes every total with its unit; a published line cut after its figure (corpus
    ptlflow-65-...) may have lost digits too: the total is unknown, never read as seconds."""
    s = parse_summary(["[05/27/2024-16:38:42] [I] Total Host Walltime: 3.08622 s",
                       "[05/27/2024-16:38:42] [I] Total GPU Compute Time: 3.0635"])
    assert s.host_walltime_s == pytest.approx(3.08622) and s.gpu_compute_s is None


def test_a_banner_running_minor_and_patch_together_gives_no_version():
    """tkDNN's 'TensorRT v6.01' (6.0.1) is no dotted TensorRT version: unknown, never 6.01 (corpus tkdnn-83-...)."""
    assert version_from_text("New NetworkRT (TensorRT v6.01)\nDLAs: 0") is None
    assert version_from_text("TensorRT version: 8.6.1") == "8.6.1"


def test_the_summary_reads_trtexecs_dotted_version_line():
    """trtexec 8.6 on prints '[I] TensorRT version: 8.6.1' in its Device Information block: the summary's version,
    as the integer form ('TensorRT version: 8001') already was (corpus yolov8-trt-lsh9832-7-...)."""
    assert parse_summary(["[12/07/2023-11:13:30] [I] TensorRT version: 8.6.1"]).version == "8.6.1"
    assert parse_summary(["[I] TensorRT version: 8001"]).version == "8.0.1"
    assert parse_summary(["TensorRT version: 6.01"]).version is None  # no dotted TensorRT version
