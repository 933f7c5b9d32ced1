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
