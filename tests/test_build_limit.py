"""The real backends' per-build limit leaves room for a real detector build on the slowest Orin with a DLA.

A night's first measurement is the all-GPU baseline, one build of the whole model; past the backend's
``timeout_s`` the worker (or trtexec) is killed, the baseline is recorded ``timeout`` and the first-build
check stops the night. A real build time (tests/data/trt_corpus/yolo11n-orin-10.3-grep-gpu-fp16-build-472s):
stock YOLO11n, FP16, all on the GPU, TensorRT 10.3 on an AGX Orin 64GB in its 50 W mode, 471.7 s. Builds time
tactics on the GPU, so the same build on a module with less GPU throughput takes longer: scaled by the
profiles' dense INT8 throughput (MAXN) and the 50 W mode's GPU cap, an Orin NX 8GB takes about 2.1 times as
long (about 1,000 s), over the former default of 900 s before INT8's extra tactics (the night's default
precision; not measured here) and before any larger YOLO. The limit must cover twice that.
"""

from __future__ import annotations

import re
from pathlib import Path

from placetune.backends.base import BUILD_TIMEOUT_S
from placetune.backends.tensorrt import jobs
from placetune.hardware.platforms import PLATFORMS

CORPUS = Path(__file__).parent / "data" / "trt_corpus"
#: AGX Orin 64GB: the GPU cap of MODE_50W and its top GPU frequency (MAXN), in Hz (NVIDIA's nvpmodel
#: file, tests/data/nvpmodel_conf; jetson_clocks --show at MAXN, placetune/hardware/locked_clocks.py)
_AGX_50W_GPU_HZ, _AGX_MAXN_GPU_HZ = 816_000_000, 1_300_500_000


def _real_build_s() -> float:
    text = (CORPUS / "yolo11n-orin-10.3-grep-gpu-fp16-build-472s" / "console.log").read_text(encoding="utf-8")
    return float(re.search(r"Engine built in ([0-9.]+) sec", text).group(1))


def test_the_default_build_limit_covers_twice_a_real_yolo_build_scaled_to_the_slowest_orin_with_a_dla():
    built = _real_build_s()
    assert built == 471.742
    agx_50w = PLATFORMS["orin-agx"].gpu_int8_tops * _AGX_50W_GPU_HZ / _AGX_MAXN_GPU_HZ
    slowest = min(p.gpu_int8_tops for p in PLATFORMS.values() if p.dla_count and p.name.startswith("orin"))
    scaled = built * agx_50w / slowest
    assert 900 < scaled  # the former default was shorter than the scaled FP16 build alone
    assert BUILD_TIMEOUT_S >= 2 * scaled, (BUILD_TIMEOUT_S, scaled)


def test_both_real_backends_default_to_it(tmp_path):
    import inspect

    from placetune.backends.tensorrt.backend import TensorRTBackend
    from placetune.backends.trtexec.backend import TrtexecBackend

    for cls in (TensorRTBackend, TrtexecBackend):
        assert inspect.signature(cls).parameters["timeout_s"].default == BUILD_TIMEOUT_S, cls


def test_a_timeout_names_the_setting_that_raises_it():
    from placetune.backends.tensorrt.pool import WorkerReply

    m = jobs.reply_failure(WorkerReply("timeout", stderr_tail=""), {}, {}, 3600.0)
    assert m is not None and m.status == "timeout"
    assert "timeout_s" in m.reason and "[backend_options]" in m.reason


def test_a_build_that_timed_out_is_built_again_by_a_later_run_whose_limit_was_raised(tmp_path):
    """The remedy a timeout names (a longer ``[backend_options] timeout_s``, then the same command) must work:
    before, the resumed study kept the earlier run's ``timeout`` as the all-GPU baseline's answer (a stored
    measurement is not repeated), so the night went on without its baseline and no gain over all-GPU was ever
    figured. A timeout stored by an earlier run is built again, once per run, and its row replaced; within one
    run it stays an answer (a build that hangs is not retried all night). Against the TensorRT double."""
    import shutil

    from placetune import Store
    from tests.test_tune_tensorrt import DATA, _tune

    study = tmp_path / "s.toml"
    shutil.copy(DATA / "seed_model_gn.onnx.gz", tmp_path)
    study.write_text('[study]\nmodel = "seed_model_gn.onnx.gz"\n[backend_options]\ntimeout_s = 3\n')
    first = _tune(tmp_path, str(study), "--trials", "3", fake={"HANG_ON": "*"})
    assert first.returncode == 8 and "first-build check timing failed" in first.stderr, first.stderr
    assert "[backend_options] timeout_s" in first.stderr
    study.write_text('[study]\nmodel = "seed_model_gn.onnx.gz"\n[backend_options]\ntimeout_s = 600\n')
    second = _tune(tmp_path, str(study), "--trials", "3")
    assert second.returncode == 0, second.stderr + second.stdout
    with Store(f"sqlite:///{tmp_path / 'pt.db'}") as store:
        rows = [r.measurement for r in store.measurements("night")]
    gpu = [m for m in rows if set(m.requested.values()) == {"GPU"}]
    assert len(gpu) == 1 and gpu[0].ok, [m.status for m in gpu]  # the row was replaced, not added
    assert "timeout" not in [m.status for m in rows]
