"""The tensorrt and trtexec backends measure the same thing on every TensorRT version.

The worker enqueues each inference on a stream (no CUDA graph) and lets the ONNX parser adjust
the network for the DLA wherever the bindings have ``ADJUST_FOR_DLA``. trtexec must be told the
same: ``--noCudaGraph`` from 11 (whose trtexec captures a graph by default), ``--adjustForDLA``
from 10.16 (where both the flag and the option appear), and no flag a version does not have.
The fake trtexec keeps each version's defaults (tests/fakes/trtexec), so the same engine timed
by both must agree.
"""

from __future__ import annotations

import pytest

from placetune import Evaluator, Placement
from placetune.backends.tensorrt.backend import TensorRTBackend
from placetune.backends.trtexec.backend import TrtexecBackend
from placetune.backends.trtexec.command import adjust_for_dla_flags, cuda_graph_flags, version_tuple
from placetune.settings import Settings
from tests.fakes import FAKES_DIR, fake_env

def _options(version: str) -> set[str]:
    """The options of that version's trtexec (the table the doubles hold it to; loaded from its
    file: importing the fake tensorrt package in the test process is not allowed)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_fake_trt_api", FAKES_DIR / "tensorrt" / "_api.py")
    api = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(api)
    return set(api.load_table(version)["trtexec"]["options"])


@pytest.mark.parametrize("version", ["8.5.2", "8.6.2", "10.3.0", "10.15.1", "10.16.0", "11.0.0", "11.4.1"])
def test_flags_say_what_the_worker_does_and_exist_in_that_trtexec(version):
    vt = version_tuple(version)
    graph, adjust, gpu = cuda_graph_flags(vt), adjust_for_dla_flags(0, vt), adjust_for_dla_flags(-1, vt)
    assert graph == (["--noCudaGraph"] if vt[0] >= 11 else [])
    assert adjust == (["--adjustForDLA"] if vt[:2] >= (10, 16) else []) and gpu == []
    if vt[:2] != (10, 15):  # 10.15 has no table of its own: it is held to 10.3's
        assert set(graph + adjust) <= _options(version)


@pytest.mark.parametrize("version", ["8.6.2", "10.3.0", "10.16.0", "11.4.1"])
def test_the_same_engine_timed_by_both_backends_agrees(version, seed_block, tmp_path, monkeypatch):
    """The worker's engine (``save_plans``) timed again by ``trtexec --loadEngine``: equal medians
    (the doubles' times are exact). Without ``--noCudaGraph`` trtexec 11 would time a CUDA graph;
    without ``--exposeDMA`` trtexec keeps two queries in flight and hides the worker's enqueue."""
    monkeypatch.setenv("PLACETUNE_FAKE_TRTEXEC_VERSION", version)
    be = TensorRTBackend(worker_env=fake_env(version), cache_dir=tmp_path / "trt", save_plans=tmp_path / "plans",
                         warmup_ms=1, iterations=5, profile_iterations=0)
    tx = TrtexecBackend(trtexec=str(FAKES_DIR / "trtexec"), cache_dir=tmp_path / "tx", warmup_ms=1, iterations=20,
                        duration_s=0, power=False)
    # placetune's DLA rules give 10.16 no DLA (10.7 was the last 10.x with DLA); the doubles still
    # build DLA engines there, so 10.3's rules ask for the DLA engine whose parser flag is compared
    rules = {"10.16.0": "10.3", "11.4.1": "11.4.1"}.get(version, ".".join(version.split(".")[:2]))
    ev = Evaluator(seed_block, "orin-agx", be, store=None, precision="fp16", trt_version=rules)
    try:
        for placement, core in ((Placement.all_gpu(ev.model), -1), (Placement.all_dla(ev.model), 0)):
            m = ev.evaluate(placement)
            assert m.ok, m.reason
            t = tx.time_plan(m.extra["plan_file"], Settings(precision="fp16"), dla_core=core, batch=m.batch)
            assert t.ok, t.reason
            assert t.latency_ms["median"] == pytest.approx(m.latency_ms["median"], rel=0.02), (core, t.extra)
            assert ("--noCudaGraph" in t.extra["commands"]["time"]) == version.startswith("11.")
            assert "--exposeDMA" in t.extra["commands"]["time"]  # one query in flight, as the worker times
            if core >= 0:
                assert m.dla_loadables.get("DLA0")
                assert (m.extra.get("dla_path") is not None) == (version_tuple(version)[:2] >= (10, 16))
    finally:
        ev.close()
        be.close()


@pytest.mark.parametrize("version", ["8.6.2", "10.3.0"])
def test_both_doubles_build_a_classifier_s_head_into_the_same_dla_loadables(version, seed_model_gn, tmp_path,
                                                                          monkeypatch):
    """An all-DLA plan of the GroupNorm model (a classifier: pooling, flatten, Gemm) built by the worker's
    TensorRT double and by the trtexec double: the same layers on the DLA and the same loadables. Both run the
    2-D constant-weight Gemm on the DLA (published 8.5.2 and 10.3.0 builds: corpus
    dlatutorial-repro-orin64-8.5.2-model-bn, orin-agx-trt10.3-dla-offloaded) and, from TensorRT 10, keep the
    flatten before it on the GPU (that 10.3.0 build: "Layer '/Flatten' (SHUFFLE): Unsupported on DLA"). With
    only the worker's double taking the Gemm, it built 6 loadables where trtexec built 5."""
    monkeypatch.setenv("PLACETUNE_FAKE_TRTEXEC_VERSION", version)
    be = TensorRTBackend(worker_env=fake_env(version), cache_dir=tmp_path / "trt", warmup_ms=1, iterations=3,
                         profile_iterations=0)
    tx = TrtexecBackend(trtexec=str(FAKES_DIR / "trtexec"), cache_dir=tmp_path / "tx", warmup_ms=1, iterations=3,
                        duration_s=0, power=False)
    rules = ".".join(version.split(".")[:2])
    got = {}
    try:
        for name, backend in (("worker", be), ("trtexec", tx)):
            ev = Evaluator(seed_model_gn, "orin-agx", backend, store=None, precision="fp16", trt_version=rules)
            m = ev.evaluate(Placement.all_dla(ev.model))
            assert m.ok, (name, m.reason)
            got[name] = (m.dla_loadables, {n: d for n, d in m.realized.items() if d != "GPU"})
            ev.close()
    finally:
        be.close()
    assert got["worker"] == got["trtexec"]
    loadables, on_dla = got["worker"]
    assert loadables == {"DLA0": 6} and on_dla["/linear/Gemm"] == "DLA0"
    assert ("/Reshape" in on_dla) == version.startswith("8.")
