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

from placetune.backends.tensorrt.pool import WORKER_FILE, RecycleLimits, WorkerClient, WorkerPool, signal_name
from placetune.errors import ConfigError
from tests.fakes import fake_env

DATA = Path(__file__).parent / "data"
#: worker.py and its sibling modules, which it imports as top-level modules from its own directory
WORKER_FILES = sorted(WORKER_FILE.parent.glob("worker*.py"))
WORKER_MODULES = {p.stem for p in WORKER_FILES}
#: (hashlib: the digest of an engine file, which tells a reused engine from a rebuilt one; standard library on 3.8)
ALLOWED_IMPORTS = {"atexit", "ctypes", "fcntl", "hashlib", "json", "os", "re", "sys", "threading", "time", "traceback",
                   "typing", "tensorrt",
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
    # every reply says what the worker holds once the job is over: its RSS, and nothing of CUDA's
    assert first.result["worker_memory"]["rss_bytes"] > 0
    held = {k: r["worker_memory"][k] for k in ("streams", "events", "pinned_bytes", "device_bytes")}
    assert r["worker_memory"]["rss_bytes"] > 0 and held == {"streams": 0, "events": 0, "pinned_bytes": 0,
                                                            "device_bytes": 0}


@pytest.mark.parametrize("layer", ["cuda-python", "pycuda"])
@pytest.mark.parametrize("integrated", ["1", "0"])
def test_engine_io_tensors_are_managed_memory_on_an_integrated_gpu_as_trtexecs(seed_block_onnx, layer, integrated):
    """trtexec without copies binds the engine's tensors in managed memory on an integrated GPU
    (sampleInference.cpp release/10.3:262-264 ``useManagedMemory{(inference.skipTransfers &&
    isIntegrated) || ...}``), device memory on a discrete one; the worker's engine timing, trtexec's
    with --noDataTransfers, allocates them alike, through either CUDA binding, and frees them."""
    env = fake_env("10.3.0", INTEGRATED=integrated)
    env.update(PLACETUNE_CUDA=layer, PLACETUNE_FAKE_CUDA_PYTHON="1")
    client = WorkerClient(sys.executable, env)
    try:
        r = client.request(_job(seed_block_onnx, id=1), timeout_s=60).result
    finally:
        client.close()
    assert r["status"] == "ok", r.get("error")
    assert r["io_memory"] == ("managed" if integrated == "1" else "device")
    assert r["worker_memory"]["device_bytes"] == 0


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


def test_runtime_messages_are_the_runs_not_the_builds(seed_block_onnx):
    """One process-wide logger serves the build and the run: what TensorRT says while the engine
    is deserialised and executed (here cuDLA refusing the program) goes to ``runtime_log``, never
    into the build log that the build warnings/errors and the realised placement are read from."""
    client = WorkerClient(sys.executable, fake_env("10.3.0", EXEC_FAIL_ON="/conv3/Conv", PLAN_MODEL_WARN_ON="*"))
    try:
        failed = client.request(_job(seed_block_onnx, dla_layers=["/conv3/Conv"]), timeout_s=60).result
        ok = client.request(_job(seed_block_onnx), timeout_s=60).result
    finally:
        client.close()
    # TensorRT 10.3 on Orin warns at every deserialisation: a warning of the run, not of the build
    for r in (failed, ok):
        assert not [m for _, m in r["log"] if "engine plan file across different models" in m]
        assert [s for s, m in r["runtime_log"] if "engine plan file across different models" in m] == ["WARNING"]
    assert failed["status"] == "runtime_failed"
    assert not [m for _, m in failed["log"] if "cudlaUtils" in m]
    assert [s for s, m in failed["runtime_log"] if "cudlaUtils" in m] == ["ERROR"]
    assert "Failed to submit program to DLA engine" in failed["error"]  # the reply says why it failed
    # the next job's build log starts clean too
    assert ok["status"] == "ok" and not [m for _, m in ok["log"] + ok["runtime_log"] if "cudlaUtils" in m]


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


def test_a_shape_outside_the_engines_profile_fails_the_measurement_where_it_is_set(tmp_path):
    """TensorRT's set_input_shape returns False for a shape outside the engine's optimisation
    profile; ignored, the run failed later at execution with an obscure error. An engine built for
    batch 2 (min = opt = max), then timed at batch 3: the measurement fails at the shape, with one
    line naming the input, the shape and the profile."""
    import onnx

    proto = onnx.load_from_string(gzip.open(DATA / "seed_block.onnx.gz").read())
    for vi in list(proto.graph.input) + list(proto.graph.output):
        vi.type.tensor_type.shape.dim[0].dim_param = "N"
    path = tmp_path / "dyn.onnx"
    onnx.save(proto, str(path))
    script = (
        "import json, sys\n"
        "import tensorrt as trt\n"
        "import worker_build, worker_time\n"
        "from worker_cuda import driver\n"
        "job = json.loads(sys.argv[1])\n"
        "driver()\n"
        "logger = worker_build.make_logger(trt, False)\n"
        "plan, _ = worker_build.build(trt, job, logger)\n"
        "job['input_shapes'] = {'input': [3, 384, 56, 56]}\n"
        "out = worker_time.time_engine(trt, plan, job, logger)\n"
        "print(json.dumps({k: out.get(k) for k in ('status', 'error')}))\n")
    job = _job(str(path), input_shapes={"input": [2, 384, 56, 56]}, dla_core=-1, dla_layers=[], inspector=False)
    env = {**os.environ, **fake_env("10.3.0")}
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(WORKER_FILE.parent)])
    p = subprocess.run([sys.executable, "-c", script, json.dumps(job)], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["status"] == "runtime_failed"
    assert "\n" not in out["error"]
    assert "'input'" in out["error"] and "[3, 384, 56, 56]" in out["error"]
    assert "min [2, 384, 56, 56], max [2, 384, 56, 56]" in out["error"]
    assert "execute" not in out["error"]


def test_the_pool_recycles_a_healthy_worker_after_max_jobs():
    pool = WorkerPool(sys.executable, fake_env("10.3.0"), limits=RecycleLimits(max_jobs=2))
    try:
        first = pool.run({"op": "probe"}, timeout_s=60)
        pid = pool.pid
        second = pool.run({"op": "probe"}, timeout_s=60)
        assert pool.pid is None  # replaced between jobs: the next job starts a fresh worker
        third = pool.run({"op": "probe"}, timeout_s=60)
        assert pool.pid not in (None, pid)
    finally:
        pool.close()
    assert first.recycled is None and "max_jobs 2" in second.recycled and third.recycled is None
    assert all(r.kind == "result" and r.result["status"] == "ok" for r in (first, second, third))
    assert pool.recycles == 1 and pool.restarts == 0


STUB_WORKER = """#!{python}
# speaks the worker's protocol; its memory grows as STUB_RSS_MB says (one figure per job)
import json, os, sys
print(json.dumps({{"hello": 1, "python": "3.8.10", "pid": os.getpid()}}), flush=True)
rss = [int(x) for x in os.environ["STUB_RSS_MB"].split(",")]
for n, line in enumerate(sys.stdin):
    mem = {{"rss_bytes": rss[min(n, len(rss) - 1)] << 20, "pinned_bytes": int(os.environ["STUB_PINNED_MB"]) << 20,
           "device_bytes": 0}}
    reply = {{"status": "ok", "pid": os.getpid(), "worker_memory": mem}}
    if os.environ.get("STUB_RELEASE_ERROR"):
        reply["release_errors"] = [os.environ["STUB_RELEASE_ERROR"]]
    print(json.dumps(reply), flush=True)
"""


def _stub(tmp_path) -> str:
    path = tmp_path / "stub_python"
    path.write_text(STUB_WORKER.format(python=sys.executable))
    path.chmod(0o755)
    return str(path)


def test_the_pool_recycles_a_worker_whose_memory_grows(tmp_path):
    """The RSS after the first job (libraries loaded) is the baseline; a growth past
    max_rss_growth_mb replaces the worker after the job that showed it, and the new worker gets
    its own baseline. A probe does not set the baseline."""
    env = {"STUB_RSS_MB": "100,400,700,1000,1300", "STUB_PINNED_MB": "0"}
    pool = WorkerPool(_stub(tmp_path), env, limits=RecycleLimits(max_jobs=0, max_rss_growth_mb=500))
    try:
        replies = [pool.run({"op": "probe"}, timeout_s=30)] + [pool.run({"op": "measure"}, timeout_s=30)
                                                               for _ in range(4)]
    finally:
        pool.close()
    # probe 100 MB; baseline 400 (first measure); 700 (+300); 1000 (+600: recycled); new worker: 100
    assert [r.recycled is not None for r in replies] == [False, False, False, True, False]
    assert "grew by 600 MB" in replies[3].recycled and "max_rss_growth_mb 500" in replies[3].recycled
    assert replies[4].result["pid"] != replies[3].result["pid"] and pool.recycles == 1


def test_the_pool_recycles_a_worker_that_still_holds_pinned_memory_after_a_job(tmp_path):
    pool = WorkerPool(_stub(tmp_path), {"STUB_RSS_MB": "100", "STUB_PINNED_MB": "100"},
                      limits=RecycleLimits(max_held_mb=64))
    try:
        reply = pool.run({"op": "pipeline"}, timeout_s=30)
    finally:
        pool.close()
    assert reply.kind == "result" and "holds 100.0 MB of pinned and device memory" in reply.recycled


def test_the_pool_recycles_a_worker_that_could_not_free_a_jobs_resources(tmp_path):
    error = "synchronize: CudaError: cuCtxSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS (700)"
    pool = WorkerPool(_stub(tmp_path), {"STUB_RSS_MB": "100", "STUB_PINNED_MB": "0", "STUB_RELEASE_ERROR": error})
    try:
        reply = pool.run({"op": "pipeline"}, timeout_s=30)
    finally:
        pool.close()
    assert "could not free a job's CUDA resources" in reply.recycled and "ILLEGAL_ADDRESS" in reply.recycled


def test_recycle_limits_are_checked(tmp_path):
    assert RecycleLimits.from_options(None) == RecycleLimits()
    assert RecycleLimits.from_options({"max_jobs": 50, "max_held_mb": 0}) == RecycleLimits(max_jobs=50, max_held_mb=0)
    for bad, says in [({"max_job": 5}, "worker_recycle.max_job: unknown; allowed are max_jobs"),
                      ({"max_jobs": -1}, "worker_recycle.max_jobs = -1: a number >= 0"),
                      ({"max_jobs": 2.5}, "worker_recycle.max_jobs = 2.5: a whole number"),
                      ({"max_rss_growth_mb": "1G"}, "worker_recycle.max_rss_growth_mb = '1G'"),
                      ({"max_held_mb": True}, "worker_recycle.max_held_mb = True"),
                      ([1, 2], "worker_recycle: a table of max_jobs, max_rss_growth_mb, max_held_mb")]:
        with pytest.raises(ConfigError) as err:
            RecycleLimits.from_options(bad)
        assert says in str(err.value) and "\n" not in str(err.value)
    from placetune.backends.tensorrt.backend import TensorRTBackend

    be = TensorRTBackend(worker_recycle={"max_jobs": 10}, cache_dir=tmp_path)
    assert be.pool.limits == RecycleLimits(max_jobs=10)


def test_signal_names():
    assert signal_name(-11) == "SIGSEGV" and signal_name(-9) == "SIGKILL"
    assert signal_name(1) is None and signal_name(None) is None


def test_a_jobs_resources_are_freed_newest_first_after_the_device_is_idle_even_when_one_fails(monkeypatch):
    """worker_resources.Resources: everything a job made is freed when it ends, after a
    synchronize, newest first; a free that fails (a sticky CUDA error) does not stop the others
    and is reported, never raised."""
    monkeypatch.syspath_prepend(str(WORKER_FILE.parent))
    import worker_resources

    done = []

    class Thing:
        def __init__(self, name, fails=False):
            self.name, self.fails = name, fails

        def destroy(self):
            done.append(self.name)
            if self.fails:
                raise RuntimeError(f"cuStreamDestroy failed: {self.name}")

        free = close = destroy

    class Layer(worker_resources.Cuda):
        name, version = "stub", "0"

        def __init__(self):
            self.n = 0

        def Stream(self):  # noqa: N802
            self.n += 1
            return Thing(f"stream{self.n}", fails=self.n == 2)

        def Event(self):  # noqa: N802
            return Thing("event")

        def mem_alloc(self, nbytes):
            return Thing(f"mem{nbytes}")

        def synchronize(self):
            done.append("synchronize")

    out = {}
    scope = worker_resources.Resources(Layer())
    scope.Stream(), scope.mem_alloc(8), scope.Stream(), scope.Event(), scope.own(Thing("engine"))
    worker_resources.release(scope, out)
    assert done == ["synchronize", "engine", "event", "stream2", "mem8", "stream1"]
    assert out["release_errors"] == ["RuntimeError: cuStreamDestroy failed: stream2"]
    assert scope.close() == [] and done[-1] == "stream1"  # closed once
