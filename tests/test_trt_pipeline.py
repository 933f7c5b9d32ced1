"""pipeline and replicas modes of the tensorrt backend, end to end against the TensorRT/PyCUDA
doubles (tests/fakes): segment engines built in the worker and cached on disk, the pipeline runtime
(streams, events, double-buffered cut tensors, K frames in flight), the correctness gate against one
all-GPU engine (the doubles compute real outputs with onnx.reference), the replicas runtime and the
timeline. Everything here runs against doubles: timings are the doubles' deterministic clocks."""

from __future__ import annotations

import importlib
import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from placetune import ConfigError, Evaluator, Model, Placement
from placetune.backends.tensorrt.backend import GATE_TOLERANCE, TensorRTBackend
from placetune.backends.tensorrt.cache import EngineCache, engine_key, file_digest
from placetune.backends.tensorrt.pool import WORKER_FILE
from placetune.measurement import Measurement
from placetune.model.source import load_source, randomize_weights
from placetune.report.trace import chrome_trace
from tests.fakes import FAKES_DIR, VERSIONS, fake_env

DATA = Path(__file__).parent / "data"
THREE = {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1"}  # conv1+conv2 GPU, conv3 DLA0, conv4 DLA1, concat GPU


def _rules(version: str) -> str:
    return version if version.startswith("11") else version[:4].rstrip(".")


def _randomised(tmp: Path, name: str) -> Path:
    """tests/data exports have zeroed weights: a copy with random ones, so outputs mean something."""
    path = tmp / f"{name}_random.onnx"
    onnx.save(randomize_weights(load_source(Model.load(DATA / f"{name}.onnx.gz")), seed=1), str(path))
    return path


def _backend(cache: Path, version: str = "10.3.0", faults: dict | None = None, **kw) -> TensorRTBackend:
    kw.setdefault("warmup_ms", 1)
    kw.setdefault("profile_iterations", 2)
    kw.setdefault("replicas_duration_s", 0.05)
    return TensorRTBackend(worker_env=fake_env(version, **(faults or {})), cache_dir=cache, **kw)


def _ev(model, backend, tmp: Path, version: str = "10.3.0", **kw) -> Evaluator:
    kw.setdefault("iterations", 5)
    kw.setdefault("mode", "pipeline")
    kw.setdefault("precision", "fp16")
    return Evaluator(str(model), "orin-agx", backend=backend, store=tmp / "pt.db", trt_version=_rules(version), **kw)


def _measure(model, tmp: Path, placement: dict, ev_kw: dict | None = None, **backend_kw) -> Measurement:
    """One pipeline measurement of ``placement`` on a fresh backend (its cache under ``tmp``), closed after;
    ``ev_kw``: the evaluator's options (frames in flight, ...)."""
    be = _backend(tmp / "cache", **backend_kw)
    ev = _ev(model, be, tmp, **(ev_kw or {}))
    try:
        return ev.evaluate(Placement(ev.model, placement))
    finally:
        ev.close()
        be.close()


def _overlap(a: dict, b: dict) -> float:
    return min(a["end_ms"], b["end_ms"]) - max(a["start_ms"], b["start_ms"])


@pytest.mark.parametrize("version", VERSIONS)
def test_three_branch_plan_runs_as_concurrent_engines(version, seed_block_random, tmp_path):
    be = _backend(tmp_path / "cache", version)
    ev = _ev(seed_block_random, be, tmp_path, version, frames_in_flight=2)
    try:
        m = ev.evaluate(Placement(ev.model, THREE))
    finally:
        ev.close()
        be.close()
    assert m.status == "ok", m.reason
    assert not m.simulated and m.mode == "pipeline" and m.backend == f"tensorrt-{version}"
    # three engines + the concat, each built from its own cut sub-model
    engines = m.extra["engines"]
    assert [(e["device"], e["first"], e["last"]) for e in engines] == [
        ("GPU", "/conv1/Conv", "/conv2/Conv"), ("DLA0", "/conv3/Conv", "/conv3/Conv"),
        ("DLA1", "/conv4/Conv", "/conv4/Conv"), ("GPU", "/Concat", "/Concat")]
    assert engines[3]["inputs"] == ["/conv2/Conv_output_0", "/conv3/Conv_output_0", "/conv4/Conv_output_0"]
    assert m.realized == {"/conv1/Conv": "GPU", "/conv2/Conv": "GPU", "/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1",
                          "/Concat": "GPU"}
    assert m.dla_loadables == {"DLA0": 1, "DLA1": 1}
    assert any(("[DlaLayer] {ForeignNode[/conv4/Conv]}" in line if not version.startswith("10.") else
                "{ForeignNode[/conv4/Conv]} successfully offloaded to DLA." in line) for line in m.extra["build_log"])
    # the gate ran against the all-GPU engine, on informative outputs, before and after timing
    gate = m.extra["gate"]
    assert gate["checked"] and gate["passed"] and gate["enforced"] and not gate["vacuous"]
    assert gate["tolerance"] == GATE_TOLERANCE["fp16"] and gate["outputs"]["output"]["ref_max_abs"] > 0.1
    assert gate["after_timing"]["passed"]
    # the timeline: DLA0 and DLA1 run at the same time, next to the GPU, in every frame
    assert {e["name"] for e in m.timeline} == {"seg0", "seg1", "seg2", "seg3"}
    frames = sorted({e["frame"] for e in m.timeline})
    assert len(frames) >= 6  # 2 * K + 2
    for f in frames:
        ev_f = {e["name"]: e for e in m.timeline if e["frame"] == f}
        assert _overlap(ev_f["seg1"], ev_f["seg2"]) > 0
        assert ev_f["seg3"]["start_ms"] >= max(ev_f[s]["end_ms"] for s in ("seg0", "seg1", "seg2")) - 1e-9
    frame0 = {e["name"]: e for e in m.timeline if e["frame"] == 0}
    assert _overlap(frame0["seg0"], frame0["seg1"]) > 0
    # frames in flight overlap too: frame 1 starts before frame 0 ends
    f1 = [e for e in m.timeline if e["frame"] == 1]
    assert min(e["start_ms"] for e in f1) < max(e["end_ms"] for e in frame0.values())
    assert m.extra["period_ms"] < m.latency_ms["median"]
    assert m.throughput_fps == pytest.approx(1000.0 / m.extra["period_ms"])
    # per segment: its interval in one frame, drawn like the simulator's
    segs = m.segment_times_ms
    assert [s["predecessors"] for s in segs] == [[], [], [], [0, 1, 2]]
    assert segs[3]["end_ms"] == pytest.approx(m.latency_ms["median"])
    assert set(m.layer_times_ms) == set(m.realized) and m.extra["dla_ms"] > 0
    trace = chrome_trace(m)
    threads = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
    assert {"GPU", "DLA0", "DLA1"} <= threads


def test_gate_catches_a_wrong_cut(seed_block_random, tmp_path):
    m = _measure(seed_block_random, tmp_path, THREE, test_wrong_cut=True)
    assert m.status == "runtime_failed"
    assert "differ from the all-GPU engine" in m.reason and "relative L2 error" in m.reason
    row = m.extra["gate"]["outputs"]["output"]
    assert not m.extra["gate"]["passed"] and row["rel_l2"] > 0.5 > GATE_TOLERANCE["fp16"]
    assert f"{row['rel_l2']:.4g}" in m.reason and "max |diff|" in m.reason
    assert m.realized["/conv4/Conv"] == "DLA1"  # built fine; it is the numbers that are wrong


def test_second_placement_reuses_cached_segment_engines(seed_block_random, tmp_path):
    cache = tmp_path / "cache"
    be = _backend(cache)
    ev = _ev(seed_block_random, be, tmp_path)
    try:
        first = ev.evaluate(Placement(ev.model, THREE))
        swapped = ev.evaluate(Placement(ev.model, {"/conv3/Conv": "DLA1", "/conv4/Conv": "DLA0"}))
    finally:
        ev.close()
        be.close()
    assert first.ok and swapped.ok, (first.reason, swapped.reason)
    assert first.extra["engine_cache"] == {"hits": 0, "misses": 4, "reference": False}
    # conv1+conv2 on the GPU and the concat are the same sub-models on the same device: reused;
    # conv3 and conv4 change cores: built
    assert swapped.extra["engine_cache"] == {"hits": 2, "misses": 2, "reference": True}
    assert [e["cached"] for e in swapped.extra["engines"]] == [True, False, False, True]
    assert swapped.extra["engines"][0]["cache_key"] == first.extra["engines"][0]["cache_key"]
    assert swapped.build_seconds < first.build_seconds
    assert swapped.realized["/conv3/Conv"] == "DLA1" and swapped.dla_loadables == {"DLA0": 1, "DLA1": 1}
    # a new study (fresh store, fresh worker, one frame in flight) finds every engine on disk
    (tmp_path / "again").mkdir()
    be2 = _backend(cache)
    ev2 = _ev(seed_block_random, be2, tmp_path / "again", frames_in_flight=1)
    try:
        again = ev2.evaluate(Placement(ev2.model, THREE))
    finally:
        ev2.close()
        be2.close()
    assert again.ok and again.extra["engine_cache"] == {"hits": 4, "misses": 0, "reference": True}
    assert again.build_seconds == 0.0
    # one frame in flight: a frame starts when the previous one has ended
    spans = {}
    for e in again.timeline:
        lo, hi = spans.get(e["frame"], (e["start_ms"], e["end_ms"]))
        spans[e["frame"]] = (min(lo, e["start_ms"]), max(hi, e["end_ms"]))
    ordered = [spans[f] for f in sorted(spans)]
    assert all(b[0] >= a[1] - 1e-9 for a, b in zip(ordered, ordered[1:]))
    assert again.extra["period_ms"] == pytest.approx(again.latency_ms["median"], rel=0.05)
    # the build log of a cached engine still gives the realised placement
    assert again.realized == first.realized and again.dla_loadables == first.dla_loadables
    stats = EngineCache(cache).stats()
    assert stats["engines"] == 7 and stats["segments"] == 4  # 4 + 2 segment engines + the reference


def test_engine_cache_keys_and_versions(tmp_path):
    a = engine_key("h", "DLA0", "fp16", "10.3.0", "orin-agx", gpu_fallback=True)
    assert a == engine_key("h", "DLA0", "fp16", "10.3.0", "orin-agx", gpu_fallback=True)
    others = [engine_key("h", "DLA1", "fp16", "10.3.0", "orin-agx", gpu_fallback=True),
              engine_key("h", "DLA0", "int8", "10.3.0", "orin-agx", gpu_fallback=True),
              engine_key("h", "DLA0", "fp16", "8.5.2", "orin-agx", gpu_fallback=True),
              engine_key("h", "DLA0", "fp16", "10.3.0", "xavier-nx", gpu_fallback=True),
              engine_key("g", "DLA0", "fp16", "10.3.0", "orin-agx", gpu_fallback=True),
              engine_key("h", "DLA0", "fp16", "10.3.0", "orin-agx", gpu_fallback=False)]
    assert a not in others and len(set(others)) == len(others)
    cache = EngineCache(tmp_path)
    plan = cache.plan_path(a)
    plan.parent.mkdir(parents=True)
    plan.write_bytes(b"x")
    assert not cache.has(a)  # a plan without its record is not an entry
    plan.with_name(plan.name + ".json").write_text(json.dumps({"trt_version": "10.3.0"}))
    assert cache.has(a) and cache.has(a, "10.3.0") and not cache.has(a, "10.3.1")
    f = tmp_path / "f.bin"
    f.write_bytes(b"abc")
    assert file_digest(f) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert cache.clear() == 2 and cache.stats()["engines"] == 0


def _worker_module(monkeypatch, name: str):
    """A worker module imported as the worker does: top-level, from the worker's directory."""
    monkeypatch.syspath_prepend(str(WORKER_FILE.parent))
    return importlib.import_module(name)


def test_worker_reads_only_complete_entries_of_its_own_version(tmp_path, monkeypatch):
    worker_cache = _worker_module(monkeypatch, "worker_cache")

    path = str(tmp_path / "engines" / "k.plan")
    assert worker_cache.read_cached_plan(path, "10.3.0") == (None, {})
    record = {"trt_version": "10.3.0", "engine_bytes": 4, "log": [["INFO", "built"]]}
    worker_cache.write_cached_plan(path, b"PLAN", record)
    data, meta = worker_cache.read_cached_plan(path, "10.3.0")
    assert data == b"PLAN" and meta["log"] == [["INFO", "built"]]
    assert worker_cache.read_cached_plan(path, "10.3.1") == (None, {})  # TensorRT upgraded in place: rebuild
    Path(path).write_bytes(b"PLA")  # truncated plan: rebuild
    assert worker_cache.read_cached_plan(path, "10.3.0") == (None, {})
    assert not list((tmp_path / "engines").glob("*.tmp"))


def test_worker_gate_numbers(monkeypatch):
    worker = _worker_module(monkeypatch, "worker_pipeline")

    want = {"y": np.array([[3.0, 4.0]])}
    ok = worker.compare_outputs(np, {"y": np.array([[3.0, 4.01]])}, want, 0.01)
    assert ok["passed"] and ok["outputs"]["y"]["rel_l2"] == pytest.approx(0.002) and not ok["vacuous"]
    bad = worker.compare_outputs(np, {"y": np.array([[4.0, 3.0]])}, want, 0.01)
    assert not bad["passed"] and bad["outputs"]["y"]["at"] == [0, 0]
    assert "relative L2 error 0.2828 > tolerance 0.01" in worker._gate_error(bad)
    nan = worker.compare_outputs(np, {"y": np.array([[np.nan, 4.0]])}, want, 0.01)
    assert not nan["passed"] and "non-finite" in nan["outputs"]["y"]["error"]
    zeros = worker.compare_outputs(np, {"y": np.zeros((1, 2))}, {"y": np.zeros((1, 2))}, 0.01)
    assert zeros["passed"] and zeros["vacuous"]  # all-zero outputs cannot tell a wrong cut
    shape = worker.compare_outputs(np, {"y": np.zeros((2, 1))}, want, 0.01)
    assert not shape["passed"] and "shape" in shape["outputs"]["y"]["error"]


def test_worker_gate_says_when_the_reference_ignores_its_input(monkeypatch):
    """A detector ending in NMS that keeps no box of random input gives the same outputs for every
    input. EfficientNMS_TRT zero-fills its outputs (TensorRT release/10.3
    plugin/efficientNMSPlugin/efficientNMSInference.cu:643-646: ``vacuous``), but its ONNX variant
    fills the selected indices with 0xFF bytes, -1 (same file, :639): no all-zero output, so
    ``vacuous`` does not say it. The gate then compares nothing that depends on the cut."""
    worker = _worker_module(monkeypatch, "worker_pipeline")
    nms = {"selected_indices": np.full((100, 3), -1, np.int32)}
    same = worker.compare_frames(np, [dict(nms), dict(nms)], [dict(nms), dict(nms)], 0.02)
    assert same["passed"] and not same["vacuous"] and same["same_for_every_input"]
    a, b = {"y": np.array([[3.0, 4.0]])}, {"y": np.array([[1.0, 2.0]])}
    differ = worker.compare_frames(np, [a, b], [a, b], 0.02)
    assert differ["passed"] and not differ["same_for_every_input"]


def test_worker_refuses_an_output_whose_shape_is_known_only_after_the_run(monkeypatch):
    """TensorRT reports -1 in an output's shape when it is data-dependent (NvInferRuntime.h release/10.3
    :3995-3998: an ONNX NonZero or NonMaxSuppression output); a buffer sized from it is overrun, so the
    worker says why instead of timing with one (the doubles invent such shapes: tested on a stand-in)."""
    worker = _worker_module(monkeypatch, "worker_time")

    class Context:
        def get_tensor_shape(self, name):
            return {"boxes": (1, 100, 4), "selected_indices": (-1, 3)}[name]

    assert worker.output_shape(Context(), "boxes") == (1, 100, 4)
    with pytest.raises(RuntimeError, match=r"output 'selected_indices' has a data-dependent shape \[-1, 3\]"):
        worker.output_shape(Context(), "selected_indices")


def test_deeper_network_fp16_gate_error_is_small_but_not_zero(tmp_path):
    """seed_model_gn with random weights on a random three-device placement: the double rounds every
    engine's outputs to fp16, so the cut adds rounding; the gate measures it and accepts it."""
    path = _randomised(tmp_path, "seed_model_gn")
    model = Model.load(path)
    rng = np.random.default_rng(4)
    p = Placement(model, {n: ("GPU", "DLA0", "DLA1")[int(rng.integers(3))] for n in model.names})
    be = _backend(tmp_path / "cache", "8.5.2")
    ev = _ev(path, be, tmp_path, "8.5.2")
    try:
        m = ev.evaluate(p)
        gpu = ev.baseline()
    finally:
        ev.close()
        be.close()
    assert m.ok, m.reason
    # all on the GPU, a chain: one engine of the whole model, no reference to check it against
    assert gpu.ok and len(gpu.extra["engines"]) == 1 and gpu.extra["engine_cache"]["reference"] is None
    assert not gpu.extra["gate"]["checked"] and "nothing to check" in gpu.extra["gate"]["reason"]
    rel = m.extra["gate"]["outputs"]["output"]["rel_l2"]
    assert 0 < rel < GATE_TOLERANCE["fp16"]
    assert len(m.extra["engines"]) == m.extra["segments"] > 5
    # TensorRT (the double) ran the GroupNorm pieces asked on a DLA on the GPU inside their engines
    assert m.fallback and all(m.realized[n] == "GPU" for n in m.fallback)
    assert set(m.dla_loadables) <= {"DLA0", "DLA1"}


def test_int8_without_calibration_is_checked_against_the_unsplit_engine(seed_block_random, tmp_path, monkeypatch):
    """The default INT8 study has no calibration cache: its pipelines are checked against the
    unsplit engine (the same placement in one engine, the same placeholder ranges) and the gate
    is enforced, so a pipeline that reads the wrong slot fails (it passed unchecked before)."""
    be = _backend(tmp_path / "cache", "8.5.2")
    ev = _ev(seed_block_random, be, tmp_path, "8.5.2", precision="int8", frames_in_flight=2)
    jobs = []
    orig = be.pool.run
    monkeypatch.setattr(be.pool, "run", lambda job, **kw: (jobs.append(job), orig(job, **kw))[1])
    try:
        m = ev.evaluate(Placement(ev.model, THREE))
        racy = lambda job, **kw: orig(dict(job, test_read_other_slot=True) if job.get("op") == "pipeline" else job,
                                      **kw)
        monkeypatch.setattr(be.pool, "run", racy)
        (tmp_path / "racy").mkdir()
        ev2 = _ev(seed_block_random, be, tmp_path / "racy", "8.5.2", precision="int8", frames_in_flight=2)
        m2 = ev2.evaluate(Placement(ev2.model, THREE))
        ev2.close()
    finally:
        ev.close()
        be.close()
    assert m.ok, m.reason
    gate = m.extra["gate"]
    assert gate["checked"] and gate["enforced"] and gate["passed"] and gate["tolerance"] == GATE_TOLERANCE["int8"]
    assert gate["reference"].startswith("the unsplit engine") and "DLA0" in gate["reference"]
    job = next(j for j in jobs if j.get("op") == "pipeline")
    ref = job["reference"]  # one engine: every DLA layer of the pipeline on DLA0, the full network's ranges
    assert ref["dla_core"] == 0 and set(ref["dla_layers"]) == set(THREE)
    assert ref["int8_ranges"]["/conv3/Conv_output_0"] == 4.0
    assert m2.status == "runtime_failed" and "differ from the unsplit engine" in m2.reason


def test_a_dla_reference_is_loaded_where_its_loadables_fit(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "placetune" / "backends" / "tensorrt"))
    from worker_pipeline import reference_core

    def info(n):
        return {"log": [["INFO", "[DlaLayer] {ForeignNode[x]}"]] * n}

    specs = [{"dla_core": 0}, {"dla_core": -1}, {"dla_core": 1}]
    assert reference_core(specs, [info(4), info(0), info(3)], {"dla_core": 0}, info(5), 2) == 0
    assert reference_core(specs, [info(14), info(0), info(3)], {"dla_core": 0}, info(5), 2) == 1
    assert reference_core(specs, [info(14), info(0), info(13)], {"dla_core": 0}, info(5), 2) is None
    assert reference_core(specs, [info(14), info(0), info(13)], {"dla_core": -1}, info(0), 2) == -1


def test_segment_build_failure_names_the_segment(seed_block_random, tmp_path):
    be = _backend(tmp_path / "cache", faults={"BUILD_NONE_ON": "/conv4/Conv"})
    ev = _ev(seed_block_random, be, tmp_path)
    try:
        m = ev.evaluate(Placement(ev.model, THREE))
        ok = ev.evaluate(Placement(ev.model, {"/conv3/Conv": "DLA0"}))
    finally:
        ev.close()
        be.close()
    assert m.status == "build_failed"
    assert "segment 2 (DLA1: /conv4/Conv)" in m.reason and "Failure to submit program to DLA engine" in m.reason
    assert any(e.startswith("seg2:") for e in m.extra["build_errors"])
    # the engines built before the failure were cached and are reused by the next placement
    assert ok.ok and ok.extra["engine_cache"]["hits"] >= 1


def test_execution_failure_is_runtime_failed(seed_block_random, tmp_path):
    m = _measure(seed_block_random, tmp_path, THREE, faults={"EXEC_FAIL_ON": "/conv3/Conv"})
    assert m.status == "runtime_failed"
    assert "engine seg1: execute_async_v3 returned False" in m.reason and "DLA" in m.reason


@pytest.mark.parametrize("mode", ["pipeline", "replicas"])
def test_pipeline_and_replicas_record_the_runtime_s_warnings_and_errors(mode, seed_block_random, tmp_path):
    """TensorRT's messages of deserialising and running the engines (the worker's runtime_log) are
    recorded in every mode as engine mode records them: runtime_warnings on a good measurement (10.3's
    'across different models of devices' warning at every deserialisation), runtime_errors and the
    DLA's failure class on a failed run. Pipeline mode kept the errors only when it failed, without
    the class; replicas mode kept neither."""
    kw = {"replicas": {"GPU": 1, "DLA0": 1}} if mode == "replicas" else {}
    faults = {"PLAN_MODEL_WARN_ON": "*", "EXEC_FAIL_ON": "/conv4/Conv"}
    be = _backend(tmp_path / "cache", faults=faults)
    ev = _ev(seed_block_random, be, tmp_path, mode=mode, **kw)
    try:
        good = ev.evaluate(Placement(ev.model, {"/conv3/Conv": "DLA0"}))
        bad = ev.evaluate(Placement(ev.model, {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA0"}))
    finally:
        ev.close()
        be.close()
    assert good.ok, good.reason
    assert [w for w in good.extra["runtime_warnings"] if "across different models" in w], good.extra.keys()
    assert not [w for w in good.extra["build_warnings"] if "across different models" in w]
    assert bad.status == "runtime_failed", bad.reason
    assert [e for e in bad.extra["runtime_errors"] if "cudlaUtils" in e]
    assert bad.extra["failure_class"] == "dla" and "the DLA failed" in bad.reason


@pytest.mark.parametrize("mode", ["pipeline", "replicas"])
def test_pipeline_and_replicas_time_with_trtexec_s_nvtx_markers_and_say_so(mode, seed_block_random, tmp_path):
    """The worker builds DETAILED engines (their layer information needs it), and a context's NVTX
    verbosity defaults to the build's, which "will generally increase latency in enqueueV3()"
    (NvInferRuntime.h release/10.3:4303-4310); trtexec runs every context at LAYER_NAMES_ONLY unless told
    (sampleOptions.cpp:1756-1757, sampleInference.cpp:389). Engine mode recorded the markers it timed
    with; pipeline and replicas measurements did not. Every enqueue of every engine (the double's log)
    runs at LAYER_NAMES_ONLY, and the measurement says so."""
    log = tmp_path / "enqueues.txt"
    kw = {"replicas": {"GPU": 1, "DLA0": 1}} if mode == "replicas" else {}
    be = _backend(tmp_path / "cache", faults={"ENQUEUE_LOG": str(log)})
    ev = _ev(seed_block_random, be, tmp_path, mode=mode, **kw)
    try:
        m = ev.evaluate(Placement(ev.model, {"/conv3/Conv": "DLA0"}))
    finally:
        ev.close()
        be.close()
    assert m.ok, m.reason
    assert m.extra["nvtx_verbosity"] == "LAYER_NAMES_ONLY"
    levels = [line.split()[3] for line in log.read_text().splitlines()]
    assert levels and set(levels) == {"LAYER_NAMES_ONLY"}
    # still built DETAILED: the DLA engine's layer information reads as before
    assert m.extra.get("placement_known", True) is not False


def test_dla_core_the_device_lacks_is_infeasible(seed_block_random, tmp_path):
    m = _measure(seed_block_random, tmp_path, THREE, faults={"DLA_CORES": "1"})
    assert m.status == "infeasible" and "DLA1" in m.reason and "1 DLA core" in m.reason


def test_replicas_run_at_once_with_their_own_batches(seed_block_random, tmp_path):
    be = _backend(tmp_path / "cache")
    ev = _ev(seed_block_random, be, tmp_path, mode="replicas", replicas={"GPU": 2, "DLA0": 1, "DLA1": 1})
    try:
        m = ev.evaluate(Placement(ev.model, {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA0"}))
        again = ev.evaluate(Placement(ev.model, {"/conv3/Conv": "DLA0"}))
    finally:
        ev.close()
        be.close()
    assert m.status == "ok", m.reason
    reps = m.extra["replicas"]
    assert [(r["device"], r["batch"], r["dla_core"]) for r in reps] == [("GPU", 2, None), ("DLA0", 1, 0),
                                                                          ("DLA1", 1, 1)]
    assert all(r["inferences"] > 0 and r["throughput_fps"] > 0 and r["alone_ms"] > 0 for r in reps)
    assert m.throughput_fps == pytest.approx(sum(r["throughput_fps"] for r in reps))
    assert reps[0]["throughput_fps"] == pytest.approx(1000.0 * 2 * reps[0]["inferences"] / reps[0]["span_ms"])
    # the DLA replicas run their DLA layers on their own cores, at the same time; conv3 and conv4
    # only share the network input: two DLA loadables each (islands form by the tensors between
    # DLA layers, as placetune's segments predict; docs/doubles.md)
    assert m.dla_loadables == {"DLA0": 2, "DLA1": 2}
    assert m.realized["/conv3/Conv"] == "DLA0" and m.realized["/conv1/Conv"] == "GPU"
    first = {e["device"]: e for e in m.timeline if e["frame"] == 0}
    assert set(first) == {"GPU", "DLA0", "DLA1"} and _overlap(first["DLA0"], first["DLA1"]) > 0
    assert m.extra["window_ms"] > 0 and m.latency_samples_ms
    # the GPU replica does not depend on the placement: its engine is reused
    assert again.ok and again.extra["engine_cache"] == {"hits": 1, "misses": 2}


def test_replicas_are_enqueued_from_one_thread_each_at_once(seed_block_random, tmp_path):
    """The worker enqueues each instance from a thread of its own: with 20 ms of host time per
    ``execute_async_v3`` (slept with the GIL released, as the real call releases it), the double's
    log shows the alone phase on one thread and the together phase on one thread per instance,
    their enqueues in progress at the same time."""
    import itertools

    log = tmp_path / "enqueues.txt"
    # 20 ms per call: under a loaded CI machine 2 ms calls did not always overlap all three at one moment
    be = _backend(tmp_path / "cache", faults={"ENQUEUE_MS": "20", "ENQUEUE_LOG": str(log)},
                  replicas_duration_s=0.3)
    ev = _ev(seed_block_random, be, tmp_path, mode="replicas", replicas={"GPU": 1, "DLA0": 1, "DLA1": 1})
    try:
        m = ev.evaluate(Placement(ev.model, {"/conv3/Conv": "DLA0"}))
    finally:
        ev.close()
        be.close()
    assert m.status == "ok", m.reason
    calls = [(int(t), float(a), float(b)) for t, a, b, _ in (line.split() for line in log.read_text().splitlines())]
    first = calls[0][0]  # the worker's own thread: the engines timed alone
    together = [c for c in calls if c[0] != first]
    assert len({t for t, _, _ in together}) == 3
    edges = sorted([(a, 1) for _, a, _ in together] + [(b, -1) for _, _, b in together])
    assert max(itertools.accumulate(d for _, d in edges)) == 3  # all three enqueuing at one moment
    assert sum(r["inferences"] for r in m.extra["replicas"]) == len(together)


def test_replicas_on_a_platform_without_dla(seed_block_random, tmp_path):
    be = _backend(tmp_path / "cache")
    kw = dict(backend=be, mode="replicas", trt_version="10.3", iterations=3)
    ev = Evaluator(str(seed_block_random), "orin-nano", store=tmp_path / "a.db", replicas={"GPU": 1}, **kw)
    bad = Evaluator(str(seed_block_random), "orin-nano", store=tmp_path / "b.db", replicas={"GPU": 1, "DLA0": 1}, **kw)
    try:
        ok = ev.evaluate(Placement.all_gpu(ev.model))
        refused = bad.evaluate(Placement.all_gpu(bad.model))
    finally:
        ev.close()
        bad.close()
        be.close()
    assert ok.ok and [r["device"] for r in ok.extra["replicas"]] == ["GPU"]
    assert set(ok.realized.values()) == {"GPU"} and ok.dla_loadables == {}
    assert refused.status == "infeasible" and "DLA0" in refused.reason and "orin-nano" in refused.reason


def test_backend_options_are_checked(tmp_path):
    with pytest.raises(ConfigError, match="unknown precisions"):
        TensorRTBackend(gate_tolerance={"bf16": 0.1}, cache_dir=tmp_path)
    with pytest.raises(ConfigError, match="> 0"):
        TensorRTBackend(gate_tolerance={"fp16": 0}, cache_dir=tmp_path)
    be = TensorRTBackend(gate_tolerance={"fp16": 0.05}, cache_dir=tmp_path)
    assert be.gate_tolerance == {**GATE_TOLERANCE, "fp16": 0.05}


def test_fake_gpu_streams_events_and_memory():
    """The doubles model what the pipeline relies on: devices overlap across streams, a stream
    waits for an event, memory holds bytes, an engine's output is computed when first read."""
    code = r'''
import json, numpy as np
import pycuda.driver as cuda, _fakegpu as g
cuda.init(); ctx = cuda.Device(0).make_context()
a, b, c = cuda.Stream(), cuda.Stream(), cuda.Stream()
e0, e1, e2 = cuda.Event(), cuda.Event(), cuda.Event()
g.run(a.handle, [("DLA0", 1.0)]); e0.record(a)
g.run(b.handle, [("DLA1", 1.0)]); e1.record(b)
g.run(c.handle, [("DLA0", 1.0)]); e2.record(c)            # DLA0 busy until 1: starts at 1
d = cuda.Stream(); d.wait_for_event(e0); d.wait_for_event(e1); end = cuda.Event(); end.record(d)
mem = cuda.mem_alloc(16); cuda.memcpy_htod(mem, np.arange(4, dtype=np.float32))
out = np.empty(4, np.float32); cuda.memcpy_dtoh(out, mem)
calls = []
def seven(ins):
    calls.append(1)
    return {int(mem): np.full(4, 7, np.float32).tobytes()}
g.launch(c.handle, [("GPU", 0.5)], [], [int(mem)], seven)
lazy = np.empty(4, np.float32); cuda.memcpy_dtoh(lazy, mem)
print(json.dumps([e0._t, e1._t, e2._t, end._t, out.tolist(), lazy.tolist(), len(calls)]))
'''
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**fake_env("10.3.0"), "PATH": "/usr/bin:/bin"}, cwd=str(FAKES_DIR))
    assert p.returncode == 0, p.stderr
    t0, t1, t2, t_end, out, lazy, calls = json.loads(p.stdout)
    assert (t0, t1, t2, t_end) == (1.0, 1.0, 2.0, 1.0)
    assert out == [0, 1, 2, 3] and lazy == [7, 7, 7, 7] and calls == 1


def test_throughput_is_the_steady_state_period_not_fill_and_drain(seed_block_random, tmp_path):
    """With K frames in flight the period is the time between frame completions once the
    pipeline is full; the fill (the first frame's whole latency) must not be averaged in (it
    was: end-to-end time over max(iterations, 4*slots) frames)."""
    m = _measure(seed_block_random, tmp_path, THREE, {"frames_in_flight": 4})
    assert m.status == "ok", m.reason
    sink_end = sorted((e["frame"], e["end_ms"]) for e in m.timeline if e["name"] == "seg3")
    steady = [b[1] - a[1] for a, b in zip(sink_end, sink_end[1:]) if a[0] >= 4]  # frames past the fill
    assert len(steady) >= 4 and max(steady) - min(steady) < 1e-9  # the fake's clocks are exact
    assert m.latency_ms["median"] > 1.2 * steady[0]  # so a fill averaged in would show
    assert m.extra["period_ms"] == pytest.approx(steady[0], rel=1e-6)


def test_gate_uses_a_different_input_per_slot_and_catches_a_slot_race(seed_block_random, tmp_path, monkeypatch):
    """slots + 1 different random inputs, each with its own reference output, checked before
    timing (one frame each) and for the last frames after it: a frame that reads its cut
    tensors from the other slot once the slots are reused (a buffer race) fails the gate. With
    one input for every frame the race read identical numbers and passed."""
    be = _backend(tmp_path / "cache")
    ev = _ev(seed_block_random, be, tmp_path, frames_in_flight=2)
    try:
        m = ev.evaluate(Placement(ev.model, THREE))
        orig = be.pool.run

        def racy(job, **kw):
            return orig(dict(job, test_read_other_slot=True) if job.get("op") == "pipeline" else job, **kw)

        monkeypatch.setattr(be.pool, "run", racy)
        (tmp_path / "racy").mkdir()
        ev2 = _ev(seed_block_random, be, tmp_path / "racy", frames_in_flight=2)
        m2 = ev2.evaluate(Placement(ev2.model, THREE))
        ev2.close()
    finally:
        ev.close()
        be.close()
    assert m.status == "ok", m.reason
    assert m2.status == "runtime_failed" and "differ from the all-GPU engine" in m2.reason
    gate = m.extra["gate"]
    assert gate["inputs"] == 3 and gate["frames"] == [True, True, True] and gate["after_timing"]["passed"]
    assert m2.extra["gate"]["frames"] == [True, True, False]  # frame 2 is the first to reuse a slot


def test_int8_pipeline_with_a_calibration_cache_keeps_its_int8_cut_formats(seed_block_random, tmp_path):
    """INT8 cut tensors are engine I/O: TensorRT's network validation wants their dynamic range set
    even when a calibrator gives the rest, and trtexec sets it from the calibration cache's scale
    (samples/common/sampleEngines.cpp release/10.3:1001-1009 setTensorScalesFromCalibration,
    :50-73 readScalesFromCalibrationCache: ``<tensor>: <float32 bits in hex>``, range 127 * scale).
    Without it every INT8 pipeline of a study with a calibration cache fell back to FP32 linear cuts
    (GPU reformats at every cut) after a failed build of each segment."""
    cache = tmp_path / "calib.cache"
    tensors = ["input", "/conv1/Conv_output_0", "/conv2/Conv_output_0", "/conv3/Conv_output_0",
               "/conv4/Conv_output_0", "output"]
    cache.write_text("TRT-100300-EntropyCalibration2\n" + "".join(f"{t}: 3c010a14\n" for t in tensors))
    be = _backend(tmp_path / "cache", calibration_cache=str(cache))
    ev = _ev(seed_block_random, be, tmp_path, precision="int8")
    try:
        m = ev.evaluate(Placement(ev.model, THREE))
    finally:
        ev.close()
        be.close()
    assert m.status == "ok", m.reason
    assert "cut_formats_failed" not in m.extra, m.extra.get("cut_formats_failed")
    dla = [e for e in m.extra["engines"] if e["device"] != "GPU"]
    assert dla and all(v == ["INT8", "CHW32"] for e in dla for v in e["io_formats"].values())
    scale = struct.unpack("<f", bytes.fromhex("3c010a14")[::-1])[0]
    assert m.extra["engines"][1]["int8_io_ranges"] == {t: pytest.approx(127 * scale) for t in
                                                       m.extra["engines"][1]["io_formats"]}


def test_int8_segments_get_the_full_networks_ranges_for_their_cut_inputs(seed_block_random, tmp_path, monkeypatch):
    """A cut tensor is an intermediate (+-4) in the reference engine; as a segment input trtexec's
    rule gave it +-2. The parent computes the ranges once on the full network and passes each
    segment those of its inputs and cut outputs; the worker sets them before its own rule."""
    be = _backend(tmp_path / "cache")
    ev = _ev(seed_block_random, be, tmp_path, precision="int8")
    jobs = []
    orig = be.pool.run
    monkeypatch.setattr(be.pool, "run", lambda job, **kw: (jobs.append(job), orig(job, **kw))[1])
    try:
        m = ev.evaluate(Placement(ev.model, THREE))
    finally:
        ev.close()
        be.close()
    assert m.status == "ok", m.reason
    specs = {s["name"]: s for s in next(j for j in jobs if j.get("op") == "pipeline")["engines"]}
    assert specs["seg3"]["int8_ranges"] == {"/conv2/Conv_output_0": 4.0, "/conv3/Conv_output_0": 4.0,
                                            "/conv4/Conv_output_0": 4.0}
    # the producer of a cut tensor gives it the same range as its readers (its INT8 bytes are theirs)
    assert specs["seg0"]["int8_ranges"] == {"input": 2.0, "/conv2/Conv_output_0": 4.0}
    # the worker side: given ranges win over trtexec's per-network rule
    sys.path.insert(0, str(WORKER_FILE.parent))
    try:
        wb = importlib.import_module("worker_build")
    finally:
        sys.path.remove(str(WORKER_FILE.parent))

    class T:
        def __init__(self, name):
            self.name, self.dynamic_range = name, None

        def set_dynamic_range(self, lo, hi):
            self.dynamic_range = (lo, hi)

    cut_in, out = T("/conv2/Conv_output_0"), T("y")

    class L:
        type, num_inputs, num_outputs = "CONV", 1, 1

        def get_input(self, i):
            return cut_in

        def get_output(self, i):
            return out

    class Net:
        num_inputs, num_layers = 1, 1

        def get_input(self, i):
            return cut_in

        def get_layer(self, i):
            return L()

    class Trt:
        class LayerType:
            CONCATENATION, POOLING = "CONCAT", "POOL"

    wb._set_dynamic_ranges(Net(), Trt, {"/conv2/Conv_output_0": 4.0})
    assert cut_in.dynamic_range == (-4.0, 4.0) and out.dynamic_range == (-4.0, 4.0)


def test_engine_cache_key_includes_the_l4t_release(tmp_path, monkeypatch):
    """The DLA compiler ships with L4T, so a JetPack update that keeps the
    TensorRT version may compile other DLA loadables: the engine cache must not reuse them."""
    from placetune.backends.tensorrt import jobs
    from placetune.hardware.platforms import get_platform
    from placetune.settings import Settings

    be = TensorRTBackend(worker_env=fake_env("10.3.0"), cache_dir=tmp_path / "cache")
    ctx = be.job_context()
    settings, orin = Settings(mode="pipeline", precision="fp16"), get_platform("orin-agx")
    common = ctx.common(orin, settings, "10.3.0")
    keys = []
    for release in ("R36.4.0", "R36.4.3", "R36.4.3"):
        monkeypatch.setattr(jobs, "read_l4t", lambda release=release: release)
        spec, _ = ctx.spec(EngineCache(tmp_path / "cache"), "s0", "DLA0", tmp_path / "s0.onnx", "digest",
                           settings, orin, "10.3.0", common, ["conv"], {})
        keys.append(spec["cache_key"])
    assert keys[0] != keys[1] == keys[2]
    be.close()


def test_pipeline_refuses_more_than_16_loadables_per_core_across_engines(monkeypatch):
    """16 DLA loadables may be *loaded at once* per core, over all engines of
    the pipeline; the worker counts each engine's [DlaLayer] lines after building and refuses to
    deserialise engines that exceed it (realise() keeps predictions within it; a build can still
    make more loadables than predicted)."""
    wp = _worker_module(monkeypatch, "worker_pipeline")

    def info(n):
        return {"log": [["INFO", "---------- Layers Running on DLA ----------"]]
                + [["INFO", f"[DlaLayer] {{ForeignNode[a{i}...b{i}]}}"] for i in range(n)]}

    specs = [{"dla_core": 0}, {"dla_core": 0}, {"dla_core": 1}, {"dla_core": -1}]
    assert wp.too_many_loadables(specs, [info(8), info(8), info(16), info(0)]) is None
    why = wp.too_many_loadables(specs, [info(9), info(8), info(3), info(40)])
    assert why == ("the pipeline's engines hold 17 DLA loadables on DLA0, more than the 16 a core can load at once")


REPLAY = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
import worker, _fakegpu
jobs = json.load(open(sys.argv[2]))
out = []
for job in jobs:
    rows = []
    for _ in range(int(sys.argv[3])):
        r = worker.handle(job)
        rows.append({"status": r.get("status"), "error": r.get("error"), "release_errors": r.get("release_errors"),
                     "gpu": _fakegpu.live(), "layer": worker.memory_usage()})
    out.append({"op": job["op"], "rows": rows})
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def sent_jobs(seed_block_random, tmp_path_factory) -> Path:
    """The pipeline, measure and replicas jobs the backend sends for one placement each (a JSON file;
    the engines they name are in the engine cache beside it)."""
    tmp = tmp_path_factory.mktemp("jobs")
    be = _backend(tmp / "cache")
    jobs = []
    run = be.pool.run

    def capture(job, timeout_s):
        if job.get("op") != "probe":
            jobs.append(job)
        return run(job, timeout_s)

    be.pool.run = capture
    for d in "per":
        (tmp / d).mkdir()
    evs = [_ev(seed_block_random, be, tmp / "p", frames_in_flight=2), _ev(seed_block_random, be, tmp / "e", mode="engine"),
           _ev(seed_block_random, be, tmp / "r", mode="replicas", replicas={"GPU": 1, "DLA0": 1})]
    try:
        placements = [THREE, {"/conv3/Conv": "DLA0"}, {"/conv3/Conv": "DLA0"}]
        assert all(ev.evaluate(Placement(ev.model, p)).ok for ev, p in zip(evs, placements))
    finally:
        for ev in evs:
            ev.close()
        be.close()
    assert [j["op"] for j in jobs] == ["pipeline", "measure", "replicas"]
    (tmp / "jobs.json").write_text(json.dumps(jobs))
    return tmp / "jobs.json"


@pytest.mark.parametrize("binding", ["pycuda", "cuda-python"])
def test_repeated_jobs_leave_no_cuda_resources_behind(binding, sent_jobs):
    """A worker runs hundreds of jobs a night. The pipeline, measure and replicas jobs the backend
    sends, each run 3 times in one worker process on each binding's double: after every job the
    doubles' own counts of live streams, events, pinned and device buffers and TensorRT execution
    contexts are zero, and so are the CUDA layer's. (Before jobs owned their resources, each
    cuda-python pipeline job left 6 streams, 86 events and 14 MB of pinned buffers behind; pycuda
    freed them as their objects went.)"""
    env = {**fake_env("10.3.0"), "PATH": "/usr/bin:/bin", "PLACETUNE_CUDA": binding}
    if binding == "cuda-python":
        env["PLACETUNE_FAKE_CUDA_PYTHON"] = "1"
    p = subprocess.run([sys.executable, "-c", REPLAY, str(WORKER_FILE.parent), str(sent_jobs), "3"],
                       capture_output=True, text=True, timeout=600, env=env, cwd=str(sent_jobs.parent))
    assert p.returncode == 0, p.stderr[-3000:]
    zero = {"streams": 0, "events": 0, "pinned_buffers": 0, "pinned_bytes": 0, "device_buffers": 0, "device_bytes": 0}
    ops = json.loads(p.stdout.splitlines()[-1])
    assert [op["op"] for op in ops] == ["pipeline", "measure", "replicas"]
    for op in ops:
        for i, row in enumerate(op["rows"]):
            assert row["status"] == "ok" and not row["release_errors"], (op["op"], i, row)
            assert row["gpu"] == {**zero, "trt_contexts": 0}, (op["op"], i, row["gpu"])
            assert {k: row["layer"][k] for k in zero} == zero, (op["op"], i, row["layer"])


COPIES = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
import worker
from cuda.bindings import driver
out = []
for job in json.load(open(sys.argv[2])):
    del driver.htod_copies[:]
    r = worker.handle(job)
    out.append({"op": job["op"], "status": r.get("status"), "error": r.get("error"),
                "copies": list(driver.htod_copies)})
print(json.dumps(out))
'''


def test_every_input_copy_on_cuda_python_reads_pinned_memory(sent_jobs):
    """Every host-to-device copy a job makes reads pinned host memory (cuMemHostAlloc), the first
    one too: the inputs' random data, copied before the first warm-up, went from a pageable numpy
    array (a blocking cuMemcpyHtoD that CUDA stages through a pinned buffer of its own) while every
    other copy used the job's pinned buffers. Checked on the cuda-python double, which records
    where each copy's source lies; the real CUDA run of tests/test_cuda_layer.py is owed."""
    env = {**fake_env("10.3.0"), "PATH": "/usr/bin:/bin", "PLACETUNE_CUDA": "cuda-python",
           "PLACETUNE_FAKE_CUDA_PYTHON": "1"}
    p = subprocess.run([sys.executable, "-c", COPIES, str(WORKER_FILE.parent), str(sent_jobs)],
                       capture_output=True, text=True, timeout=600, env=env, cwd=str(sent_jobs.parent))
    assert p.returncode == 0, p.stderr[-3000:]
    ops = json.loads(p.stdout.splitlines()[-1])
    assert [op["op"] for op in ops] == ["pipeline", "measure", "replicas"]
    for op in ops:
        assert op["status"] == "ok", op
        assert op["copies"], op["op"]  # every job copies its inputs
        assert op["copies"][0]["pinned"], (op["op"], "first copy from pageable memory", op["copies"][:3])
        assert all(c["pinned"] for c in op["copies"]), (op["op"], op["copies"])


def test_tensorrt_errors_in_a_run_that_completed_are_noted_and_warned(caplog, monkeypatch):
    """TensorRT may log an ERROR while deserialising or running an engine and still return (the
    enqueue returned True): the measurement is timed all the same. Its errors were kept in
    runtime_errors only; now a note says so and the first such run of the process is warned."""
    import logging

    from placetune.backends.tensorrt import jobs

    monkeypatch.setattr(jobs, "_RUNTIME_ERRORS_SAID", [])
    err = "1: [cudlaUtils.cpp::submit::112] Error Code 1: DLA (Failed to submit program to DLA engine.)"
    extra: dict = {}
    with caplog.at_level(logging.WARNING):
        got = jobs.runtime_messages(extra, {"status": "ok", "runtime_log": [["ERROR", err], ["WARNING", "w"]]})
    assert got == [err] and extra["runtime_errors"] == [err] and extra["runtime_warnings"] == ["w"]
    assert any("yet the run completed" in n and "Error Code 1" in n for n in extra["notes"])
    assert any("TENSORRT ERRORS IN A COMPLETED RUN" in r.getMessage() for r in caplog.records)
    failed: dict = {}
    jobs.runtime_messages(failed, {"status": "runtime_failed", "runtime_log": [["ERROR", err]]})
    assert "notes" not in failed  # a failed run says it in its reason


def test_engine_cache_key_includes_the_input_shapes(tmp_path):
    """The reference engine is built from the model's own (dynamic) ONNX, whose digest does not
    change with --shape: the shapes set its optimisation profile, so another shape is another engine.
    The other things that change the engine stay in the key too: device (DLA core), precision,
    GPU fallback, TensorRT version."""
    from placetune.hardware.platforms import get_platform
    from placetune.settings import Settings

    be = TensorRTBackend(worker_env=fake_env("10.3.0"), cache_dir=tmp_path / "cache")
    ctx = be.job_context()
    orin = get_platform("orin-agx")
    cache = EngineCache(tmp_path / "cache")

    def key(shapes, device="GPU", dla=(), version="10.3.0", **kw):
        settings = Settings(**{"mode": "pipeline", "precision": "fp16", **kw})
        common = ctx.common(orin, settings, version)
        spec, _ = ctx.spec(cache, "reference", device, tmp_path / "m.onnx", "digest", settings, orin, version,
                           common, list(dla), shapes)
        return spec["cache_key"]

    base = key({"x": [1, 3, 224, 224]})
    assert base == key({"x": [1, 3, 224, 224]})
    assert base != key({"x": [1, 3, 320, 320]})
    assert base != key({"x": [4, 3, 224, 224]})  # batch
    assert base != key({"x": [1, 3, 224, 224]}, precision="int8")
    assert base != key({"x": [1, 3, 224, 224]}, version="8.5.2")
    dla0 = key({"x": [1, 3, 224, 224]}, "DLA0", ["conv"])
    assert dla0 != key({"x": [1, 3, 224, 224]}, "DLA1", ["conv"])
    assert dla0 != key({"x": [1, 3, 224, 224]}, "DLA0", ["conv"], gpu_fallback=False)
    be.close()


def test_timing_and_engine_caches_are_kept_apart_by_power_mode_and_clock_lock(tmp_path):
    """TensorRT picks its tactics by timing them under the clocks that run: a 30 W study must not
    reuse the timing cache filled, nor the engines built, under MAXN (nor under another clock lock)."""
    from placetune.hardware.platforms import get_platform
    from placetune.settings import Settings

    be = TensorRTBackend(worker_env=fake_env("10.3.0"), cache_dir=tmp_path / "cache")
    orin = get_platform("orin-agx")
    cache = EngineCache(tmp_path / "cache")

    def caches(mode, locked=None):
        be.locked_clocks = locked
        ctx = be.job_context()
        settings = Settings(mode="pipeline", precision="fp16", power_mode=mode)
        common = ctx.common(orin, settings, "10.3.0")
        spec, _ = ctx.spec(cache, "s0", "DLA0", tmp_path / "s0.onnx", "digest", settings, orin, "10.3.0", common,
                           ["conv"], {})
        return common["timing_cache"], spec["cache_key"]

    maxn, w30 = caches("MAXN"), caches("30W")
    assert maxn == caches("MAXN")
    assert maxn[0] != w30[0] and maxn[1] != w30[1]
    assert Path(maxn[0]).name == "orin-agx-trt10.3.0-MAXN.cache"
    locked, other = caches("MAXN", {"gpu:17000000.gpu": 1300500000}), caches("MAXN", {"gpu:17000000.gpu": 816000000})
    assert len({maxn[0], locked[0], other[0]}) == 3 and len({maxn[1], locked[1], other[1]}) == 3
    be.close()


@pytest.mark.parametrize("integrated", ["1", "0"])
def test_replicas_bind_managed_memory_on_an_integrated_gpu_as_trtexecs_replicas(seed_block_random, tmp_path, integrated):
    """Replicas are timed as trtexec's (timing_method.REPLICAS_TIMED: no host<->device copies), and
    trtexec without copies binds every tensor in managed memory on an integrated GPU
    (samples/common/sampleInference.cpp release/10.3:262-264 ``useManagedMemory{(inference.skipTransfers
    && isIntegrated) || inference.useManaged}``), device memory on a discrete one; the replicas bound
    device memory everywhere while engine mode binds as trtexec does. Each measurement says which."""
    be = _backend(tmp_path / "cache", faults={"INTEGRATED": integrated})
    ev = _ev(seed_block_random, be, tmp_path, mode="replicas", replicas={"GPU": 1, "DLA0": 1})
    try:
        m = ev.evaluate(Placement(ev.model, {"/conv3/Conv": "DLA0"}))
    finally:
        ev.close()
        be.close()
    assert m.status == "ok", m.reason
    assert m.extra["io_memory"] == ("managed" if integrated == "1" else "device")


def test_pipeline_says_its_tensors_are_device_memory(seed_block_random, tmp_path):
    """The pipeline binds its cut tensors and inputs in device memory (cuMemAlloc), as an application
    chaining the engines does (placetune.runtime; cuDLA-samples' hybrid mode registers cudaMalloc
    buffers with the DLA), not trtexec's managed memory: the measurement says so, as engine mode
    records its own."""
    m = _measure(seed_block_random, tmp_path, THREE)
    assert m.status == "ok", m.reason
    assert m.extra["io_memory"] == "device"


def test_a_gpu_reformat_at_a_cut_given_the_dlas_native_format_is_recorded_not_silent(seed_block_random, tmp_path, caplog):
    """The cut formats exist so that no GPU reformat runs in a DLA engine at a cut; TensorRT promises
    the native treatment of a kCHW16/kCHW32 I/O tensor only without kGPU_FALLBACK (NvInfer.h
    release/10.3:413-416), which every pipeline build sets. A DLA engine that still reformats a cut
    tensor on the GPU (its layer information names the tensor among a Reformat layer's inputs or
    outputs, as real exports do: tests/data/trt_corpus/trex-a100-resnet18-fp16-layerinfo) is timed
    with that reformat: the measurement says which cut, in which engine, and how long it took."""
    import logging

    be = _backend(tmp_path / "cache", faults={"REFORMAT_NATIVE_IO": "1"})
    ev = _ev(seed_block_random, be, tmp_path)
    try:
        with caplog.at_level(logging.WARNING):
            m = ev.evaluate(Placement(ev.model, THREE))
    finally:
        ev.close()
        be.close()
    assert m.status == "ok", m.reason
    found = m.extra["cut_reformats"]
    # the DLA engines read the network input (FP32 linear, no cut: its reformat is expected) and write a cut each
    assert {(r["engine"], r["tensor"]) for r in found} == {("seg1", "/conv3/Conv_output_0"),
                                                           ("seg2", "/conv4/Conv_output_0")}
    assert all(r["layer"].startswith("Reformatting CopyNode") and r["ms"] > 0 for r in found)
    assert any("reformat" in n and "/conv3/Conv_output_0" in n for n in m.extra["notes"])
    assert any("CUT REFORMAT" in r.getMessage() for r in caplog.records)


def test_no_cut_reformat_is_recorded_where_the_dla_engines_take_their_native_formats(seed_block_random, tmp_path):
    """The network input's GPU reformat in each DLA engine (FP32 linear, no cut) is not a cut's."""
    m = _measure(seed_block_random, tmp_path, THREE)
    assert m.status == "ok", m.reason
    assert m.extra["cut_formats"] and "cut_reformats" not in m.extra


def test_a_segment_that_fails_with_and_without_cut_formats_is_not_blamed_on_the_formats(seed_block_random, tmp_path):
    """A DLA segment given cut formats that fails to build is built once more with TensorRT's default
    I/O; when it fails the same way again the formats were not the cause: the failure does not say
    that the native formats did not build or that the pipeline was built with FP32 linear I/O (it was
    not built at all), it says the build was tried both ways."""
    m = _measure(seed_block_random, tmp_path, THREE, faults={"BUILD_NONE_ON": "/conv4/Conv"})
    assert m.status == "build_failed" and "segment 2 (DLA1: /conv4/Conv)" in m.reason
    assert "cut_formats_failed" not in m.extra
    notes = " ".join(m.extra.get("notes") or [])
    assert "did not build, so the pipeline was built" not in notes
    assert "with TensorRT's default I/O too" in notes and "the formats are not the cause" in notes
    assert "with TensorRT's default I/O too" in m.reason


def test_a_dla_segment_that_ran_wholly_on_the_gpu_is_drawn_and_counted_on_the_gpu(seed_block_random, tmp_path):
    """TensorRT put every layer of segment 1 (asked on DLA0) on the GPU (GPU fallback): the realised
    placement says so, and the timeline, the segment times and the busy time per device say it too,
    instead of showing DLA0 busy with work the GPU did; the engine row keeps what was asked."""
    m = _measure(seed_block_random, tmp_path, THREE, {"frames_in_flight": 2}, faults={"DLA_UNSUPPORTED_ON": "/conv3/Conv"})
    assert m.status == "ok", m.reason
    assert m.realized["/conv3/Conv"] == "GPU" and m.realized["/conv4/Conv"] == "DLA1"
    row = m.extra["engines"][1]
    assert row["device"] == "DLA0" and row["ran_on"] == "GPU"
    assert m.extra["engines"][2]["ran_on"] == "DLA1"
    assert {e["device"] for e in m.timeline if e["name"] == "seg1"} == {"GPU"}
    assert m.segment_times_ms[1]["device"] == "GPU" and m.segment_times_ms[1]["asked"] == "DLA0"
    assert "DLA0" not in m.extra["busy_ms"]
    assert any("seg1" in n and "ran on the GPU" in n for n in m.extra["notes"])


def _conv_gap_conv(path: Path) -> Path:
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    w1 = numpy_helper.from_array(rng.uniform(-0.5, 0.5, (8, 3, 3, 3)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.uniform(-0.5, 0.5, (8, 8, 1, 1)).astype(np.float32), "w2")
    nodes = [helper.make_node("Conv", ["input", "w1"], ["c1"], name="/conv1/Conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="/relu/Relu"),
             helper.make_node("GlobalAveragePool", ["r1"], ["gap"], name="/gap/GlobalAveragePool"),
             helper.make_node("Conv", ["gap", "w2"], ["output"], name="/conv2/Conv")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 8, 1, 1])], [w1, w2])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_int8_cut_after_a_global_pool_gets_the_range_of_the_layer_tensorrt_made(tmp_path):
    """onnx-tensorrt makes a GlobalAveragePool a reduce layer (importerUtils.cpp globalPoolingHelper,
    ``addReduce``), so trtexec's walk over TensorRT's layers (sampleEngines.cpp setTensorDynamicRange,
    release/10.3:392-436) gives its output +-4, a pooling's +-2 only to a pooling layer. Read off the
    ONNX op, the cut tensor after it got +-2 in both segments, silently another quantisation than
    trtexec's build of the whole network; the worker now sets the range its parser's layer gives."""
    model = _conv_gap_conv(tmp_path / "gap.onnx")
    be = _backend(tmp_path / "cache")
    ev = _ev(model, be, tmp_path, precision="int8")
    jobs = []
    orig = be.pool.run
    be.pool.run = lambda job, **kw: (jobs.append(job), orig(job, **kw))[1]
    try:
        m = ev.evaluate(Placement(ev.model, {"/conv2/Conv": "DLA0"}))
    finally:
        ev.close()
        be.close()
    assert m.status == "ok", m.reason
    specs = next(j for j in jobs if j.get("op") == "pipeline")["engines"]
    assert [s["int8_ranges"].get("gap") for s in specs] == [2.0, 2.0]  # the cut tensor, as the parent reads it
    assert m.extra["int8_ranges_moved"] == {"gap": [2.0, 4.0]}  # both its engines were built with +-4


def test_the_worker_reads_a_made_tensors_range_off_the_parsed_network(tmp_path, monkeypatch):
    """The worker side, against the TensorRT double (whose parser makes a GlobalAveragePool a
    REDUCE layer, as onnx-tensorrt): a given range of a tensor some network of the job makes is
    set to trtexec's; one of a network input (made by no layer) is kept; a network that does not
    parse is an error naming it, not a build with the ONNX reading."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 1, 1])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                               helper.make_node("GlobalAveragePool", ["r"], ["y"], name="gap")], "g", [x], [y])
    path = tmp_path / "gap.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    for k, v in fake_env("10.3.0").items():
        monkeypatch.setenv(k, v)
    monkeypatch.syspath_prepend(str(FAKES_DIR))
    monkeypatch.syspath_prepend(str(WORKER_FILE.parent))
    before = dict(sys.modules)
    for name in [m for m in sys.modules if m == "tensorrt" or m.startswith(("tensorrt.", "worker_"))
                 or m in ("_dla_rules", "_fakegpu", "_layerinfo")]:
        del sys.modules[name]
    try:
        trt = importlib.import_module("tensorrt")
        wb = importlib.import_module("worker_build")
    finally:  # the double and the worker's files leave no module behind
        for name in [m for m in sys.modules if m not in before]:
            del sys.modules[name]
        sys.modules.update(before)
    specs = [{"name": "seg0", "onnx": str(path), "int8_ranges": {"x": 2.0, "y": 2.0}}]
    assert wb.resolve_given_ranges(trt, specs, {"precision": "int8"}) == {"moved": {"y": [2.0, 4.0]}}
    assert specs[0]["int8_ranges"] == {"x": 2.0, "y": 4.0}
    (tmp_path / "bad.onnx").write_bytes(b"not onnx")
    # a network that does not parse gives no ranges: its own build fails and is blamed on it, not on
    # the first engine of the job (the reference of a pipeline is built last)
    bad = [{"name": "seg1", "onnx": str(tmp_path / "bad.onnx"), "int8_ranges": {"y": 2.0}}]
    assert wb.resolve_given_ranges(trt, bad, {}) == {"moved": {}}
    assert bad[0]["int8_ranges"] == {"y": 2.0}
