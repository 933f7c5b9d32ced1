"""The isolated TensorRT worker: protocol, reuse, crash / timeout classification, Python 3.8,
no placetune imports. TensorRT and PyCUDA are the doubles in tests/fakes (worker PYTHONPATH)."""

from __future__ import annotations

import ast
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from placetune.backends.tensorrt.pool import WORKER_FILE, WorkerClient, WorkerPool, signal_name
from tests.fakes import fake_env

DATA = Path(__file__).parent / "data"
#: worker.py and its sibling modules, which it imports as top-level modules from its own directory
WORKER_FILES = sorted(WORKER_FILE.parent.glob("worker*.py"))
WORKER_MODULES = {p.stem for p in WORKER_FILES}
ALLOWED_IMPORTS = {"atexit", "ctypes", "fcntl", "json", "os", "re", "sys", "threading", "time", "traceback", "typing", "tensorrt",
                   "pycuda", "pycuda.driver", "numpy", "cuda", "cuda.bindings", "cuda.bindings.driver"}


@pytest.fixture(scope="module")
def seed_block_onnx(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("onnx") / "seed_block.onnx"
    with gzip.open(DATA / "seed_block.onnx.gz", "rb") as fin, open(path, "wb") as fout:
        shutil.copyfileobj(fin, fout)
    return str(path)


def _job(onnx: str, **kw) -> dict:
    job = {"op": "measure", "onnx": onnx, "input_shapes": {"input": [1, 384, 56, 56]}, "precision": "fp16",
           "dla_core": 0, "gpu_fallback": True, "dla_layers": ["/conv1/Conv", "/conv2/Conv"], "iterations": 5,
           "warmup_ms": 1, "profile_iterations": 2, "timing_cache": None}
    job.update(kw)
    return job


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"relative import in {path.name}"
            names.add(node.module)
    return names


def test_worker_runs_under_python_38_by_vermin():
    pytest.importorskip("vermin")
    assert WORKER_FILE in WORKER_FILES and len(WORKER_FILES) > 1
    files = [str(p) for p in WORKER_FILES]
    cmd = [sys.executable, "-c", "import sys, vermin; sys.exit(vermin.main())"]
    p = subprocess.run(cmd + ["-t=3.8-", "--violations", "--no-tips", "--eval-annotations"] + files,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    p = subprocess.run(cmd + ["--no-tips", "--eval-annotations"] + files, capture_output=True, text=True,
                       timeout=60)
    m = re.search(r"Minimum required versions:\s*(\d+)\.(\d+)", p.stdout)
    assert m and (int(m.group(1)), int(m.group(2))) <= (3, 8), p.stdout


@pytest.mark.parametrize("path", WORKER_FILES, ids=lambda p: p.name)
def test_worker_imports_nothing_but_tensorrt_pycuda_numpy_stdlib(path):
    names = _imports(path)
    assert names <= ALLOWED_IMPORTS | WORKER_MODULES, names - ALLOWED_IMPORTS - WORKER_MODULES


def test_worker_modules_form_no_cycle_and_never_import_the_entry_file():
    from tests.test_architecture import find_cycle

    graph = {p.stem: _imports(p) & WORKER_MODULES for p in WORKER_FILES}
    assert not [m for m, deps in graph.items() if "worker" in deps]
    assert find_cycle(graph) is None


def test_nothing_next_to_the_worker_shadows_a_module_it_imports():
    """The worker's directory is on its sys.path: no file or folder there may be named like a
    standard library module or a package the worker (or TensorRT, PyCUDA, NumPy) imports."""
    real = {n.split(".")[0] for n in ALLOWED_IMPORTS} | set(sys.stdlib_module_names) | {"pytools", "platformdirs"}
    names = {p.name.split(".")[0] for p in WORKER_FILE.parent.iterdir() if p.name != "__pycache__"}
    assert not names & real, names & real
    assert {p.stem for p in WORKER_FILES} == WORKER_MODULES and all(m.startswith("worker") for m in WORKER_MODULES)


def test_parent_never_imports_tensorrt():
    code = ("import sys, placetune, placetune.backends.tensorrt.backend, placetune.backends.tensorrt.pipeline, "
            "placetune.backends.doctor;"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorrt', 'pycuda')))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**os.environ, **fake_env()})
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"


def test_worker_modules_import_tensorrt_only_when_a_job_needs_it():
    """Imported as the worker imports them, no module loads tensorrt, pycuda or numpy: a probe
    must answer where they are missing."""
    code = (f"import sys; sys.path.insert(0, {str(WORKER_FILE.parent)!r}); import {', '.join(sorted(WORKER_MODULES))};"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorrt', 'pycuda', 'numpy')))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**os.environ, **fake_env()})
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"


@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="no system Python here")
def test_worker_as_a_file_under_the_system_python():
    client = WorkerClient("/usr/bin/python3", fake_env("8.5.2"))
    try:
        reply = client.request({"op": "probe"}, timeout_s=60)
    finally:
        client.close()
    assert reply.kind == "result", reply
    assert reply.result["trt_version"] == "8.5.2" and reply.result["num_dla_cores"] == 2
    # worker.py lives in placetune/backends/tensorrt/: neither that folder nor a sibling may shadow the package
    assert reply.result["trt_path"].endswith(os.path.join("fakes", "tensorrt", "__init__.py"))


def test_one_worker_serves_several_jobs(seed_block_onnx):
    client = WorkerClient(sys.executable, fake_env("10.3.0"))
    try:
        first = client.request({"op": "probe", "id": 1}, timeout_s=60)
        pid = client.proc.pid
        second = client.request(_job(seed_block_onnx, id=2), timeout_s=60)
        assert client.proc.pid == pid and client.jobs == 2
    finally:
        client.close()
    assert first.result["id"] == 1 and second.result["id"] == 2
    r = second.result
    assert r["status"] == "ok", r.get("error")
    assert len(r["latency_samples_ms"]) == 5 and r["throughput_ms_per_inference"] > 0
    # 10.x logs the placement report at VERBOSE (10.3's form: the loadables as "successfully offloaded"
    # lines); the worker keeps it without keeping all VERBOSE lines
    assert ["VERBOSE", "Number of DLA node candidates offloaded : 1 out of 1"] in r["log"]
    assert ["VERBOSE", "{ForeignNode[/conv1/Conv.../conv2/Conv]} successfully offloaded to DLA."] in r["log"]
    assert all(s != "VERBOSE" or m.startswith(("[DlaLayer]", "[GpuLayer]", "---", "Number of DLA", "{ForeignNode["))
               for s, m in r["log"])
    on_dla = [row[0] for row in r["network_layers"] if row[3]]
    assert on_dla == ["/conv1/Conv", "/conv2/Conv"]
    assert any(name.startswith("{ForeignNode[") for name, _ in r["layer_profile"])
    assert json.loads(r["inspector"])["FakeRuntimeDLACore"] == 0


def test_stray_stdout_output_does_not_break_the_protocol():
    client = WorkerClient(sys.executable, fake_env("8.5.2", STDOUT_NOISE="1"))
    try:
        reply = client.request({"op": "probe"}, timeout_s=60)
    finally:
        client.close()
    assert reply.kind == "result" and reply.result["trt_version"] == "8.5.2"
    assert "noise" in reply.stderr_tail


def test_segfault_is_crashed_and_the_pool_restarts(seed_block_onnx):
    pool = WorkerPool(sys.executable, fake_env("8.5.2", SEGFAULT_ON="/conv2/Conv"))
    try:
        ok = pool.run({"op": "probe"}, timeout_s=60)
        pid = pool.pid
        crash = pool.run(_job(seed_block_onnx), timeout_s=60)
        assert crash.kind == "crashed" and crash.signal == "SIGSEGV" and crash.returncode == -11
        assert pool.pid is None
        again = pool.run(_job(seed_block_onnx, dla_layers=["/conv1/Conv"]), timeout_s=60)
        assert again.kind == "result" and again.result["status"] == "ok"
        assert pool.pid != pid and pool.restarts == 1
    finally:
        pool.close()
    assert ok.kind == "result"


def test_hang_is_a_timeout_and_the_worker_is_killed(seed_block_onnx):
    pool = WorkerPool(sys.executable, fake_env("10.3.0", HANG_ON="*"))
    try:
        assert pool.run({"op": "probe"}, timeout_s=60).kind == "result"
        proc = pool._client.proc
        reply = pool.run(_job(seed_block_onnx), timeout_s=1.0)
        assert reply.kind == "timeout" and 1.0 <= reply.seconds < 10
        assert proc.poll() is not None  # killed, not left behind
        assert pool.run({"op": "probe"}, timeout_s=60).kind == "result"
    finally:
        pool.close()


def test_build_none_and_exec_failure(seed_block_onnx):
    client = WorkerClient(sys.executable, fake_env("8.5.2", BUILD_NONE_ON="/conv1/Conv", EXEC_FAIL_ON="/conv3/Conv"))
    try:
        built_none = client.request(_job(seed_block_onnx), timeout_s=60).result
        failed = client.request(_job(seed_block_onnx, dla_layers=["/conv3/Conv"]), timeout_s=60).result
    finally:
        client.close()
    assert built_none["status"] == "build_failed"
    assert "Failure to submit program to DLA engine" in built_none["error"]
    assert failed["status"] == "runtime_failed" and "execute_async_v3 returned False" in failed["error"]


def test_without_tensorrt_the_worker_says_so(seed_block_onnx):
    env = {"PYTHONPATH": ""}
    client = WorkerClient(sys.executable, env)
    try:
        probe = client.request({"op": "probe"}, timeout_s=60).result
        meas = client.request(_job(seed_block_onnx), timeout_s=60).result
    finally:
        client.close()
    assert probe["trt_version"] is None and "No module named 'tensorrt'" in probe["trt_error"]
    assert meas["status"] == "unavailable"


def test_missing_interpreter_is_a_crash_not_an_exception():
    reply = WorkerClient("/nonexistent/python3").request({"op": "probe"}, timeout_s=5)
    assert reply.kind == "crashed" and "cannot start" in reply.stderr_tail


def test_timing_cache_is_merged_under_a_lock(seed_block_onnx, tmp_path):
    cache = tmp_path / "timing" / "orin-agx-trt8.5.2.cache"
    cache.parent.mkdir()
    cache.write_text(json.dumps({"fake_timing_cache": "8.5.2", "entries": {"from another process": 1.0}}))
    client = WorkerClient(sys.executable, fake_env("8.5.2"))
    try:
        r = client.request(_job(seed_block_onnx, timing_cache=str(cache)), timeout_s=60).result
    finally:
        client.close()
    assert r["status"] == "ok"
    entries = json.loads(cache.read_text())["entries"]
    assert "from another process" in entries and "{ForeignNode[/conv1/Conv.../conv2/Conv]}" in entries
    assert (tmp_path / "timing" / "orin-agx-trt8.5.2.cache.lock").exists()
    assert not list(cache.parent.glob("*.tmp"))


def test_dynamic_batch_gets_a_static_profile(tmp_path):
    import onnx

    proto = onnx.load_from_string(gzip.open(DATA / "seed_block.onnx.gz").read())
    for vi in list(proto.graph.input) + list(proto.graph.output):
        vi.type.tensor_type.shape.dim[0].dim_param = "N"
    path = tmp_path / "dyn.onnx"
    onnx.save(proto, str(path))
    client = WorkerClient(sys.executable, fake_env("10.3.0"))
    try:
        ok = client.request(_job(str(path), input_shapes={"input": [2, 384, 56, 56]}), timeout_s=60).result
        missing = client.request(_job(str(path), input_shapes={}), timeout_s=60).result
    finally:
        client.close()
    assert ok["status"] == "ok", ok.get("error")
    assert not [m for s, m in ok["log"] if "dynamic shapes" in m]
    assert missing["status"] == "build_failed" and "no shape" in missing["error"]


def test_signal_names():
    assert signal_name(-11) == "SIGSEGV" and signal_name(-9) == "SIGKILL"
    assert signal_name(1) is None and signal_name(None) is None
