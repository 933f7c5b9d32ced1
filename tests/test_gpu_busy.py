"""A GPU kept busy by another process (a DeepStream pipeline left running) when a night starts: the
run stops before its first build with one line naming the load, never times every engine beside that
work and records the contended figures as the board's. Against a fake sysfs tree and the TensorRT
doubles only."""

from __future__ import annotations

from pathlib import Path

import pytest

from placetune import BackendError, Evaluator, Model, Placement
from placetune.backends import busy, clocks
from placetune.backends.tensorrt.backend import TensorRTBackend
from tests.fakes import fake_env

DATA = Path(__file__).parent / "data"


def _tree(tmp_path: Path, *loads: int) -> Path:
    """A sysfs tree whose GPU devfreq node's ``device/load`` reads ``loads`` in turn (tenths of a percent)."""
    root = tmp_path / "sys"
    dev = root / "class/devfreq/17000000.gpu/device"
    dev.mkdir(parents=True)
    (dev / "load").write_text(f"{loads[0]}\n")
    return root


def _evaluate(tmp_path: Path, fingerprint: dict | None = None):
    """All-GPU seed_model_gn measured through the TensorRT doubles; ``fingerprint`` (when given) gets the study's."""
    be = TensorRTBackend(worker_env=fake_env("10.3.0"), cache_dir=tmp_path / "cache", warmup_ms=1,
                         profile_iterations=2)
    try:
        ev = Evaluator(str(DATA / "seed_model_gn.onnx.gz"), "orin-agx", backend=be, store=None,
                       trt_version="10.3", iterations=3, precision="fp16")
        try:
            if fingerprint is not None:
                fingerprint.update(ev.fingerprint)
            return ev.evaluate(Placement(ev.model, {}))
        finally:
            ev.close()
    finally:
        be.close()


def test_a_night_on_a_gpu_another_process_keeps_busy_stops_before_its_first_build(tmp_path, monkeypatch):
    monkeypatch.setattr(clocks, "SYSFS_ROOT", str(_tree(tmp_path, 450)))  # 45.0 %: a pipeline runs on it
    monkeypatch.setattr(busy, "INTERVAL_S", 0.0)
    with pytest.raises(BackendError, match=r"the GPU is busy before placetune built anything: its load read 45, "
                                           r"45, 45, 45, 45 %.*another process"):
        _evaluate(tmp_path)


def test_an_idle_gpu_runs_and_a_brief_spike_is_not_a_busy_gpu(tmp_path, monkeypatch):
    monkeypatch.setattr(clocks, "SYSFS_ROOT", str(_tree(tmp_path, 0)))
    m = _evaluate(tmp_path)
    assert m.ok, m.reason
    # one sample of five below the threshold: a desktop redraw, not another process's pipeline
    reads = iter([300, 300, 20, 300, 300])
    root = tmp_path / "spike"
    load = root / "class/devfreq/17000000.gpu/device/load"
    load.parent.mkdir(parents=True)

    def step(_s: float) -> None:
        load.write_text(str(next(reads)))

    load.write_text("300")
    assert busy.gpu_busy(root, sleep=step) is None
    assert busy.gpu_load(tmp_path / "nothing") is None and busy.gpu_busy(tmp_path / "nothing") is None


def test_the_load_is_read_once_per_backend_before_it_builds_never_during_its_own_work(tmp_path, monkeypatch):
    """Later fingerprints of the same backend (``placetune selftest`` opens an evaluator per check) come
    after its own worker ran on the GPU: that load is placetune's, never another process's."""
    root = _tree(tmp_path, 0)
    monkeypatch.setattr(clocks, "SYSFS_ROOT", str(root))
    be = TensorRTBackend(worker_env=fake_env("10.3.0"), cache_dir=tmp_path / "cache", warmup_ms=1,
                         profile_iterations=2)
    try:
        ev = Evaluator(str(DATA / "seed_model_gn.onnx.gz"), "orin-agx", backend=be, store=None,
                       trt_version="10.3", iterations=3, precision="fp16")
        ev.close()
        (root / "class/devfreq/17000000.gpu/device/load").write_text("900")  # the worker's own timing
        ev = Evaluator(Model.load(DATA / "seed_model_gn.onnx.gz"), "orin-agx", backend=be, store=None,
                       trt_version="10.3", iterations=3, precision="fp16")
        # by its next job the worker's own load has fallen (a load still read then is another process's:
        # tests/test_gpu_contention.py)
        (root / "class/devfreq/17000000.gpu/device/load").write_text("0")
        assert ev.evaluate(Placement(ev.model, {})).ok
        ev.close()
    finally:
        be.close()


def test_a_deployment_that_shares_the_gpu_may_tune_beside_that_work_asked_and_kept_apart(tmp_path, monkeypatch,
                                                                                        caplog):
    """A camera pipeline the deployment keeps running beside the detector is work the night may time beside on
    purpose: ``PLACETUNE_SHARED_GPU=1`` lets it run, warned once, and the fingerprint says ``gpu_shared`` so the
    cache scope keeps those timings apart from any made alone. The refusal names that way out."""
    monkeypatch.setattr(clocks, "SYSFS_ROOT", str(_tree(tmp_path, 450)))
    monkeypatch.setattr(busy, "INTERVAL_S", 0.0)
    with pytest.raises(BackendError, match=r"set PLACETUNE_SHARED_GPU=1 \(the study then records gpu_shared"):
        _evaluate(tmp_path)
    monkeypatch.setenv("PLACETUNE_SHARED_GPU", "1")
    fingerprint: dict = {}
    assert _evaluate(tmp_path, fingerprint).ok
    assert fingerprint.get("gpu_shared") is True
    assert sum("GPU SHARED" in r.getMessage() for r in caplog.records) == 1


def test_the_worker_is_read_when_its_pipe_is_numbered_past_1024(tmp_path, monkeypatch):
    """A process holding many files (a long night's, an application's) hands the worker's pipe a descriptor
    numbered 1024 or more, which select() refuses ("filedescriptor out of range in select()": every
    measurement of the run failed); the worker's replies are read with poll, which has no such limit."""
    import os
    import resource

    monkeypatch.setattr(clocks, "SYSFS_ROOT", str(_tree(tmp_path, 0)))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"the hard limit of open files is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = []
    try:
        while not held or held[-1] < 1030:
            held.append(os.open(os.devnull, os.O_RDONLY))
        m = _evaluate(tmp_path)
        assert m.ok, m.reason
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_jetson_whose_gpu_load_cannot_be_read_says_so_and_marks_each_measurement(tmp_path, monkeypatch, caplog):
    """A GPU devfreq node without a readable ``device/load`` (jtop skips such a file unsaid) left the
    contention watch blind with nothing said: a figure timed beside another process's GPU work was kept
    as the board's. Now the run says GPU LOAD NOT WATCHED once and each measurement records why."""
    root = tmp_path / "sys"
    (root / "class/devfreq/17000000.gpu/device").mkdir(parents=True)  # the node, no load file
    monkeypatch.setattr(clocks, "SYSFS_ROOT", str(root))
    assert busy.load_unread(root) and "17000000.gpu/device/load" in busy.load_unread(root)
    m = _evaluate(tmp_path)
    assert m.ok, m.reason
    assert "17000000.gpu/device/load" in m.extra["gpu_load_not_watched"]
    assert sum("GPU LOAD NOT WATCHED" in r.getMessage() for r in caplog.records) == 1
    # a load that reads, or no GPU node at all (not a Jetson): nothing to say
    assert busy.load_unread(_tree(tmp_path / "ok", 0)) is None and busy.load_unread(tmp_path / "nothing") is None
