"""The trtexec backend on what a real board does that the happy path does not: a build log without a
placement report the layer information still answers, trtexec run through a wrapper or killed by
the kernel, a profiling run as long as the timed one. Against the fake trtexec (tests/fakes/trtexec);
the premises are read in TensorRT's release/10.3 sources (cited where used)."""

from __future__ import annotations

import logging
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from placetune import Model, Placement
from placetune.backends.trtexec import engine as trtexec_engine

from tests.test_trtexec import FAKE, GN, _backend, _ev, _processes


@pytest.fixture(scope="module")
def gn() -> Model:
    return Model.load(GN)


def test_the_layer_information_decides_the_placement_and_its_fallback_reasons(tmp_path, gn, caplog):
    """trtexec writes --exportLayerInfo in the build itself (trtexec.cpp release/10.3, the
    --skipInference branch calls printLayerInfo). When the build log has no placement report that
    placetune reads, the layer information decides; the layers it shows on the GPU that were asked on
    the DLA are listed with a fallback reason, and no 'UNKNOWN' is said for a placement that is known."""
    be = _backend(tmp_path, "10.3.0", fake={"PLACEMENT": "none"})
    ev = _ev(gn, be, tmp_path, trt_version="10.3")
    with caplog.at_level(logging.DEBUG, logger="placetune"):
        m = ev.evaluate(Placement.all_dla(ev.model))
    ev.close()
    assert m.status == "ok", m.reason
    assert m.extra["placement_known"] is True and m.extra["placement_source"] == "engine inspector"
    asked_dla_on_gpu = {n for n, d in m.realized.items() if d == "GPU"}
    # the flatten before the classifier's Gemm stays on the GPU from TensorRT 10, the Gemm runs on the DLA
    # (the published TensorRT 10.3 AGX Orin ResNet-50 build)
    assert "/Reshape" in asked_dla_on_gpu and "/linear/Gemm" not in asked_dla_on_gpu
    assert set(m.fallback) == asked_dla_on_gpu, sorted(asked_dla_on_gpu ^ set(m.fallback))
    assert not any("UNKNOWN" in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]
    assert any("from the engine inspector only" in n for n in m.extra["notes"])


def test_replicas_read_each_builds_layer_information_too(tmp_path, gn):
    """Replicas mode built with --exportLayerInfo and never read it: a DLA replica whose build log has
    no placement report had its placement unknown although its layer information said it."""
    trtexec_engine.PARSER_LAYERS.clear()
    be = _backend(tmp_path, "10.3.0", fake={"PLACEMENT": "none"}, replica_duration_s=0.2)
    ev = _ev(gn, be, tmp_path, trt_version="10.3", mode="replicas", replicas={"DLA0": 32, "DLA1": 32})
    m = ev.evaluate(Placement.all_dla(ev.model))
    ev.close()
    assert m.status == "ok", m.reason
    assert m.extra["placement_known"] is True, m.extra.get("placement_unknown")
    # a classifier's 2-D Gemm runs on the DLA, as in the published TensorRT 10.3 AGX Orin ResNet-50 build
    assert m.realized["/cnn/cnn.0/Conv"] == "DLA0" and m.realized["/linear/Gemm"] == "DLA0"
    assert m.dla_loadables == {"DLA0": 6, "DLA1": 6}, m.dla_loadables


def _wrapper(tmp: Path, body: str) -> Path:
    """A shell script in front of the fake trtexec (a user's wrapper: environment, nice, taskset)."""
    path = tmp / "trtexec-wrapper"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.parametrize("where", ["build", "infer"])
def test_a_sigkill_placetune_did_not_send_is_a_crash_that_names_the_oom_killer(tmp_path, gn, where):
    be = _backend(tmp_path, "10.3.0", fake={"KILL": where})
    m = _ev(gn, be, tmp_path, trt_version="10.3").evaluate(Placement.all_gpu(gn))
    assert m.status == "crashed" and "SIGKILL" in m.reason and "out-of-memory killer" in m.reason, m.reason
    assert m.extra["signal"] == "SIGKILL"


@pytest.mark.parametrize("fake, signame", [({"KILL": "build"}, "SIGKILL"), ({"CRASH": "build"}, "SIGSEGV")])
def test_a_wrapper_scripts_128_plus_n_is_the_signal_not_a_failed_build(tmp_path, gn, fake, signame):
    """trtexec exits only 0 or 1 (samples/common/logging.h release/10.3:418-427 reportPass/reportFail);
    a shell in front of it that saw it killed exits 128 + N. That was stored as 'build_failed: exit
    status 137', a fact about the placement, where the process was killed."""
    wrapper = _wrapper(tmp_path, f'"{sys.executable}" "{FAKE}" "$@"')
    be = _backend(tmp_path, "10.3.0", fake=fake)
    be.trtexec = str(wrapper)
    m = _ev(gn, be, tmp_path, trt_version="10.3").evaluate(Placement.all_gpu(gn))
    assert m.status == "crashed", (m.status, m.reason)
    assert signame in m.reason and "exit status" in m.reason and m.extra["signal"] == signame


def test_an_exit_status_trtexec_never_returns_is_no_failed_build(tmp_path, gn):
    wrapper = _wrapper(tmp_path, 'echo "trtexec-wrapper: cannot run it" >&2; exit 127')
    be = _backend(tmp_path, "10.3.0", trt_version="10.3.0")
    be.trtexec = str(wrapper)
    m = _ev(gn, be, tmp_path, trt_version="10.3").evaluate(Placement.all_gpu(gn))
    assert m.status == "crashed" and "exit status 127" in m.reason and "cannot run it" in m.reason, m.reason


def test_trtexecs_own_failure_stays_a_failed_build(tmp_path, gn):
    wrapper = _wrapper(tmp_path, f'"{sys.executable}" "{FAKE}" "$@"')
    be = _backend(tmp_path, "10.3.0", fake={"FAIL": "build"})
    be.trtexec = str(wrapper)
    m = _ev(gn, be, tmp_path, trt_version="10.3").evaluate(Placement.all_gpu(gn))
    assert m.status == "build_failed" and "Could not find any implementation" in m.reason, m.reason


def test_the_profiling_run_counts_in_the_timing_runs_limit(tmp_path, gn):
    """With --exportProfile trtexec runs inference a second time with the same warm-up and duration
    (trtexec.cpp release/10.3:474-491, --separateProfileRun): ``timeout_s`` is what a run may take
    beyond its timed part, so both of its timed parts are allowed, not only the first."""
    be = _backend(tmp_path, "10.3.0", fake={"PROFILE_RUN_S": 3.5}, timeout_s=3.0, duration_s=3.0)
    m = _ev(gn, be, tmp_path, trt_version="10.3").evaluate(Placement.all_gpu(gn))
    assert m.status == "ok", m.reason
    assert "--separateProfileRun" in m.extra["commands"]["time"] and len(_processes(tmp_path, "time")) == 1


def test_a_trtexec_that_does_not_die_when_killed_does_not_hang_the_run(tmp_path, gn, monkeypatch):
    """A process blocked in the kernel (a GPU or DLA driver call that never returns) does not die of
    SIGKILL until it leaves it: the run waited for it for ever after its timeout. It now waits
    KILL_GRACE_S and records the measurement as a timeout that says so."""
    import json
    import signal

    from placetune.backends.trtexec import process

    monkeypatch.setattr(process, "KILL_GRACE_S", 0.5, raising=False)
    # the output reader of a process that never dies never sees its end: waited READER_JOIN_S (10 s)
    monkeypatch.setattr(process, "READER_JOIN_S", 0.5)
    monkeypatch.setattr(process.Proc, "kill", lambda self: None)  # the SIGKILL that does not take effect
    be = _backend(tmp_path, "10.3.0", fake={"HANG": "build"}, timeout_s=1.0)
    t0 = time.monotonic()
    try:
        m = _ev(gn, be, tmp_path, trt_version="10.3").evaluate(Placement.all_gpu(gn))
    finally:
        for rec in map(json.loads, (tmp_path / "record.jsonl").read_text().splitlines()):
            try:
                os.kill(rec["pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert time.monotonic() - t0 < 30
    assert m.status == "timeout" and "still alive" in m.reason and m.extra["unkillable"] is True, m.reason


def test_the_kept_build_log_holds_the_placement_report_not_the_echo_of_the_command(tmp_path, gn, monkeypatch):
    """trtexec 10.x echoes every --layerDeviceTypes match as an [I] line (sampleEngines.cpp
    release/10.3:596): with every layer listed, a model of a few hundred layers filled the kept
    build log with them and its placement report, printed at the end of the build, was cut off."""
    monkeypatch.setattr(trtexec_engine, "_LOG_KEEP", 12)
    be = _backend(tmp_path, "10.3.0")
    ev = _ev(gn, be, tmp_path, trt_version="10.3")
    m = ev.evaluate(Placement(ev.model, dict.fromkeys(["/cnn/cnn.0/Conv", "/cnn/cnn.2/Relu"], "DLA0")))
    ev.close()
    assert m.status == "ok", m.reason
    kept = m.extra["build_log"]
    assert not any("Set layer " in x for x in kept[:-1]) and "left out" in kept[-1]
    assert any("successfully offloaded to DLA" in x for x in kept) and any("[GpuLayer]" in x for x in kept)


def test_a_rebuild_never_reads_the_files_an_earlier_build_left(tmp_path, gn):
    """The second build of a measurement (its parser's layers listed) writes to the same engine and
    --exportLayerInfo paths as the first: a build that wrote no layer information had the first
    build's read as its own (another engine's placement)."""
    from placetune.settings import Settings
    from placetune.hardware.platforms import get_platform

    be = _backend(tmp_path, "10.3.0", fake={"LAYER_INFO": "none"})
    work = tmp_path / "work"
    work.mkdir()
    onnx_path = trtexec_engine.onnx_file(be.cache_dir, gn, Settings(precision="fp16"), "10.3.0", {})
    eng = trtexec_engine.engine_spec(be, onnx_path, gn, Settings(precision="fp16"), "10.3.0",
                                     get_platform("orin-agx"), "DLA0", 0, int(gn.batch), ["--useDLACore=0", "--allowGPUFallback"], work,
                                     "engine")
    assert eng.layer_info_path is not None
    eng.layer_info_path.write_text('{"Layers": ["{ForeignNode[an earlier engine]}"]}')  # the first build's
    assert trtexec_engine.build(be, eng, "10.3.0", {"simulated": False}) is None
    assert not eng.layer_info_path.exists() and eng.engine_path.is_file()


def test_a_timed_engine_whose_placement_cannot_be_read_keeps_its_timing_and_says_so(tmp_path, gn):
    """trtexec built and timed the engine and printed its summary, but neither its build log nor its
    layer information says where the layers ran: the timing is stored, the placement is not guessed."""
    be = _backend(tmp_path, "10.3.0", fake={"PLACEMENT": "none", "LAYER_INFO": "none"})
    m = _ev(gn, be, tmp_path, trt_version="10.3").evaluate(Placement.all_dla(gn))
    assert m.status == "ok" and m.latency_ms["median"] > 0 and m.extra["summary"]["throughput_qps"]
    assert m.realized is None and m.dla_loadables == {} and m.extra["placement_known"] is False
    assert "no placement report" in m.extra["placement_unknown"]
    assert any("realised placement UNKNOWN" in n for n in m.extra["notes"])


def test_a_build_out_of_memory_says_so_not_only_that_no_implementation_was_found(tmp_path, gn):
    """trtexec 10.3.0 out of memory in a build (NVIDIA/TensorRT#4258) ends with 'Could not find any
    implementation for node ...', which reads as a fact of the placement: the failure is classed
    'memory' and says it ran out of memory."""
    be = _backend(tmp_path, "10.3.0", fake={"FAIL": "build_oom"})
    m = _ev(gn, be, tmp_path, trt_version="10.3").evaluate(Placement.all_gpu(gn))
    assert m.status == "build_failed" and m.extra["failure_class"] == "memory", m.reason
    assert "out of memory" in m.reason.split(":", 1)[1][:40], m.reason
