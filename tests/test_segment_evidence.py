"""What a pipeline or replicas measurement keeps of each DLA engine's placement, so that a user can
check it in the morning (and ``placetune selftest`` can send it): each DLA engine's layer information
beside its segment's (replica's) record, and every placement line of every engine's build log, however
long the logs before them. Against the TensorRT doubles (tests/fakes) and synthetic logs only."""

from __future__ import annotations

import json
from pathlib import Path


from placetune import Evaluator, Placement
from placetune.backends.tensorrt.backend import TensorRTBackend
from placetune.backends.tensorrt.jobs import logs_into
from placetune.cli.selftest_evidence import save_evidence
from tests.fakes import fake_env

DATA = Path(__file__).parent / "data"
THREE = {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1"}  # conv1+conv2 GPU, conv3 DLA0, conv4 DLA1, concat GPU


def _measure(seed_block_random: Path, tmp_path: Path, placement, **settings):
    be = TensorRTBackend(worker_env=fake_env("10.3.0"), cache_dir=tmp_path / "cache", warmup_ms=1,
                         profile_iterations=2, replicas_duration_s=0.2)  # replicas: 0.2 s timed, not 3
    ev = Evaluator(str(seed_block_random), "orin-agx", backend=be, store=None, trt_version="10.3", iterations=5,
                   precision="fp16", **settings)
    try:
        return ev.evaluate(Placement(ev.model, placement))
    finally:
        ev.close()
        be.close()


def test_a_pipeline_keeps_each_dla_segments_layer_information_and_selftest_saves_it(seed_block_random, tmp_path):
    m = _measure(seed_block_random, tmp_path, THREE, mode="pipeline")
    assert m.ok and m.placement_known, m.reason
    segs = {s["index"]: s for s in m.extra["segment_placements"]}
    for k in (1, 2):  # the DLA segments: the layer information their placement was read from
        layers = json.loads(segs[k]["engine_inspector"])["Layers"]
        assert layers, segs[k]
    assert "engine_inspector" not in segs[0] and "engine_inspector" not in segs[3]  # GPU engines: known by construction
    files = save_evidence(tmp_path / "report", "pipeline K=1", "placetune", m.extra)
    assert sorted(files) == ["evidence/pipeline-K-1-placetune-buildlog.txt",
                             "evidence/pipeline-K-1-placetune-seg1-layerinfo.json",
                             "evidence/pipeline-K-1-placetune-seg2-layerinfo.json"]
    assert (tmp_path / "report" / "evidence/pipeline-K-1-placetune-seg1-layerinfo.json").read_text() == \
        segs[1]["engine_inspector"]


def test_replicas_keep_each_dla_replicas_layer_information(seed_block_random, tmp_path):
    dla = {n: "DLA0" for n in ("/conv1/Conv", "/conv2/Conv", "/conv3/Conv", "/conv4/Conv", "/Concat")}
    m = _measure(seed_block_random, tmp_path, dla, mode="replicas", replicas={"DLA0": 1, "DLA1": 1})
    assert m.ok, m.reason
    rows = m.extra["replica_placements"]
    assert [r["device"] for r in rows] == ["DLA0", "DLA1"] and all(r["known"] for r in rows)
    assert all(json.loads(r["engine_inspector"])["Layers"] for r in rows)
    files = save_evidence(tmp_path / "report", "DLA0 || DLA1", "placetune", m.extra)
    assert sorted(f for f in files if f.endswith("layerinfo.json")) == [
        "evidence/DLA0-DLA1-placetune-DLA0-layerinfo.json", "evidence/DLA0-DLA1-placetune-DLA1-layerinfo.json"]


def test_every_placement_line_is_kept_past_a_long_log_of_earlier_engines():
    extra: dict = {}
    noisy = {"log": [["INFO", f"[MemUsageChange] step {i}"] for i in range(450)]}
    dla = {"log": [["INFO", "---------- Layers Running on DLA ----------"],
                   ["INFO", "[DlaLayer] {ForeignNode[/conv3/Conv]}"],
                   ["INFO", "---------- Layers Running on GPU ----------"]]}
    logs_into(extra, "seg0", noisy)
    logs_into(extra, "seg1", dla)
    kept = extra["build_log"]
    assert "seg1 [I] [DlaLayer] {ForeignNode[/conv3/Conv]}" in kept
    assert "seg1 [I] ---------- Layers Running on DLA ----------" in kept
    assert any("left out" in line and "50" in line for line in kept)  # the cut is said, with how many
