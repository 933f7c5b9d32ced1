"""The worker's CUDA layer for real: runs where a GPU and cuda-python (``cuda.bindings``) are present, skipped elsewhere.

Every test runs once per binding of the layer: cuda-python, and pycuda where ``pycuda.driver``
imports (both use the device's primary context, so the stand-in kernel, loaded through
cuda-python's driver API, runs on either binding's streams).

TensorRT's engine execution is replaced by stand-in engines that do real device work on the
worker's streams: an NVRTC-compiled kernel per "engine" that spins for a known time on the
GPU's global timer, then computes ``out = a*x + b (+ y)`` on integer-valued floats, so every
frame's output is exact and predictable. Everything else is the worker's own code: the CUDA
layer (context, pinned buffers, async copies, streams, events, timing) and the pipeline
scheduler (one stream per engine, an event per dependency, K frames in flight over reused
buffer slots, a different input per slot). Two deliberately broken schedules (a missing
event wait; a slot reused before its readers are done) must give wrong checksums.

On the device machine: ``python -m pytest -q tests/test_cuda_layer.py``.
pycuda there is built from its sdist with the machine's own numpy and CUDA 13 toolkit
(pycuda >= 2025.1.2 is needed for CUDA 13; with no registry, the sdist and its pure-Python
dependencies are carried in an ignored ``.device/wheels`` folder)::

    export CUDA_ROOT=/usr/local/cuda LIBRARY_PATH=/usr/local/cuda/lib64/stubs:/usr/local/cuda/lib64
    python -m pip install --no-index --target /tmp/pk --find-links .device/wheels pytools platformdirs mako siphash24
    python -m pip install --no-index --no-deps --no-build-isolation --target /tmp/pk .device/wheels/pycuda-2026.1.tar.gz
    PYTHONPATH=/tmp/pk python -m pytest -q tests/test_cuda_layer.py
"""

from __future__ import annotations

import ctypes
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

# the worker's directory, found without importing placetune (the GPU machine runs this file alone)
WORKER_DIR = str(Path(__file__).resolve().parents[1] / "placetune" / "backends" / "tensorrt")
N = 1 << 16  # floats per tensor

KERNEL = r"""
extern "C" __global__ void affine(const float* x, const float* y, float* out, int n, float a, float b,
                                  unsigned long long spin_ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < spin_ns);
    int i = blockIdx.x * blockDim.x + threadIdx.x;   // read the inputs after the spin: a race shows
    if (i < n) out[i] = a * x[i] + b + (y ? y[i] : 0.0f);
}
"""


def _worker_modules():
    if WORKER_DIR not in sys.path:
        sys.path.insert(0, WORKER_DIR)
    import worker_cuda
    import worker_pipeline

    return worker_cuda, worker_pipeline


@pytest.fixture(scope="module", params=["cuda-python", "pycuda"])
def cuda(request):
    """The worker's CUDA layer with ``PLACETUNE_CUDA`` set to the parameter's binding."""
    try:
        import cuda.bindings.driver  # noqa: F401
        from cuda.bindings import nvrtc  # noqa: F401
    except ImportError:
        pytest.skip("cuda-python (cuda.bindings) is not installed here")
    if request.param == "pycuda":
        pytest.importorskip("pycuda.driver")
    worker_cuda, _ = _worker_modules()
    worker_cuda.close()  # the layer is one per process: drop the other binding's
    old = os.environ.get("PLACETUNE_CUDA")
    os.environ["PLACETUNE_CUDA"] = request.param
    try:  # the variable goes back whatever happens: a skip left here would pin every later worker's binding
        try:
            layer = worker_cuda.driver()
        except Exception as exc:  # noqa: BLE001 - no GPU here
            pytest.skip(f"no usable GPU: {exc}")
        assert layer.name == request.param
        yield layer
        worker_cuda.close()
    finally:
        if old is None:
            os.environ.pop("PLACETUNE_CUDA", None)
        else:
            os.environ["PLACETUNE_CUDA"] = old


def _check(call, result):
    """cuda-python's ``(err, value...)`` results: raise on an error, else the value(s)."""
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(getattr(err, "value", err)):
        raise AssertionError(f"{call} failed: {err}")
    return rest[0] if len(rest) == 1 else tuple(rest)


@pytest.fixture(scope="module")
def kernel(cuda):
    """The stand-in kernel, compiled by NVRTC and loaded into the current (primary) context."""
    from cuda.bindings import driver as drv
    from cuda.bindings import nvrtc

    dev = _check("cuDeviceGet", drv.cuDeviceGet(0))
    attr = drv.CUdevice_attribute
    major = _check("cuDeviceGetAttribute", drv.cuDeviceGetAttribute(
        attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev))
    minor = _check("cuDeviceGetAttribute", drv.cuDeviceGetAttribute(
        attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))
    err, prog = nvrtc.nvrtcCreateProgram(KERNEL.encode(), b"standin.cu", 0, [], [])
    opts = [f"--gpu-architecture=compute_{major}{minor}".encode()]
    err, = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    if int(getattr(err, "value", err)):
        size = nvrtc.nvrtcGetProgramLogSize(prog)[1]
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        raise AssertionError(log.decode())
    size = nvrtc.nvrtcGetPTXSize(prog)[1]
    ptx = b" " * size
    nvrtc.nvrtcGetPTX(prog, ptx)
    module = _check("cuModuleLoadData", drv.cuModuleLoadData(ptx))
    return _check("cuModuleGetFunction", drv.cuModuleGetFunction(module, b"affine"))


class StandIn:
    """An engine with the worker's Engine interface whose run() launches the stand-in kernel."""

    nvtx_verbosity = "none (a stand-in kernel, no TensorRT context)"  # Engine.nvtx_verbosity

    def __init__(self, cuda, kernel, name, inputs, output, a, b, spin_us):
        self.cuda, self.kernel, self.name = cuda, kernel, name
        self.inputs, self.outputs = list(inputs), [output]
        self.tensors = {t: ((N,), np.dtype(np.float32)) for t in self.inputs + self.outputs}
        self.formats = {t: ("LINEAR", -1, 1) for t in self.inputs + self.outputs}  # Engine.formats: linear FP32
        self.a, self.b, self.spin_ns = float(a), float(b), int(spin_us * 1000)
        self.stream = cuda.Stream()

    def nbytes(self, t):
        return N * 4

    def run(self, addresses):
        addr = dict(addresses)
        x = int(addr[self.inputs[0]])
        y = int(addr[self.inputs[1]]) if len(self.inputs) > 1 else 0
        args = ((x, y, int(addr[self.outputs[0]]), N, self.a, self.b, self.spin_ns),
                (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_float, ctypes.c_float,
                 ctypes.c_ulonglong))
        from cuda.bindings import driver as drv

        # the stream's raw handle: what TensorRT's execute_async_v3 gets from either binding
        _check("cuLaunchKernel", drv.cuLaunchKernel(self.kernel, N // 256, 1, 1, 256, 1, 1, 0,
                                                    drv.CUstream(int(self.stream.handle)), args, 0))


def _engines(cuda, kernel, spins):
    """A diamond: e0: t1 = 2x + 1; e1: t2 = 3*t1 - 2; e2: out = t2 + 5 + t1 (reads both)."""
    return [StandIn(cuda, kernel, "e0", ["x"], "t1", 2, 1, spins[0]),
            StandIn(cuda, kernel, "e1", ["t1"], "t2", 3, -2, spins[1]),
            StandIn(cuda, kernel, "e2", ["t2", "t1"], "out", 1, 5, spins[2])]


def _expected(x):
    t1 = 2 * x.astype(np.float64) + 1
    return (3 * t1 - 2) + 5 + t1


def _run(cuda, kernel, k, spins, frames=24, breakage=None):
    """Run ``frames`` frames back to back with K in flight; per frame, the output copied to its
    own pinned host buffer (async, on the sink's stream). Returns (bad frames, period ms, latency ms)."""
    import worker_resources

    _, wp = _worker_modules()
    engines = _engines(cuda, kernel, spins)
    rng = np.random.default_rng(k)
    scope = worker_resources.Resources(cuda)  # the pipeline's buffers, freed at the end
    pipe = wp.Pipeline(scope, np, engines, {"x": [N]}, ["out"], k, rng)
    for t, data in pipe.input_data.items():  # integer-valued inputs: exact outputs
        for s, host in enumerate(data):
            host[:] = rng.integers(-8, 8, size=N).astype(np.float32)
            cuda.memcpy_htod_async(pipe.inputs[t][0][s], host, engines[0].stream)
    engines[0].stream.synchronize()
    if breakage == "missing wait":  # e1 no longer waits for e0's event: it reads t1 before it is written
        pipe.preds[1] = set()
    elif breakage == "slot reused early":  # e0 rewrites a slot of t1 before e1/e2 of the older frame read it
        pipe.succs[0] = set()
        pipe.k = 10 ** 9
    try:
        hosts = [cuda.pagelocked_empty((N,), np.float32) for _ in range(frames)]
        stamps = [cuda.Event() for _ in range(frames)]
        t0, end = cuda.Event(), cuda.Event()
        t0.record(pipe.timer)
        for i in range(frames):
            f = pipe.frame(after=t0 if i < k else None)
            cuda.memcpy_dtoh_async(hosts[i], pipe.buffers["out"][f % pipe.slots], engines[-1].stream)
            pipe.mark(f, stamps[i])
        pipe.finish(f, end)
        cuda.synchronize()
        want = [_expected(x) for x in pipe.input_data["x"]]  # frame i read input i % n_inputs
        n = pipe.n_inputs
        bad = [i for i in range(frames) if not np.array_equal(hosts[i].astype(np.float64), want[i % n])
               or float(hosts[i].sum(dtype=np.float64)) != float(want[i % n].sum())]
        fill = pipe.slots + len(engines)
        period = stamps[frames - 1].time_since(stamps[fill - 1]) / (frames - fill)
        # one frame alone: the latency
        t0.record(pipe.timer)
        f = pipe.frame(after=t0)
        pipe.finish(f, end)
        latency = end.time_since(t0)
        return bad, period, latency
    finally:
        cuda.synchronize()
        scope.close()


def test_layer_basics_pinned_async_copies_and_event_timing(cuda, kernel):
    assert cuda.name in ("cuda-python", "pycuda") and cuda.device_name()
    host = cuda.pagelocked_empty((N,), np.float32)
    host[:] = np.arange(N, dtype=np.float32)
    back = cuda.pagelocked_empty((N,), np.float32)
    a, b = cuda.mem_alloc(N * 4), cuda.mem_alloc(N * 4)
    s = cuda.Stream()
    assert isinstance(s.handle, int) and s.handle != 0  # what execute_async_v3 takes
    cuda.memcpy_htod_async(a, host, s)
    cuda.memcpy_dtod_async(b, a, N * 4, s)
    cuda.memcpy_dtoh_async(back, b, s)
    s.synchronize()
    assert np.array_equal(back, host)
    # event timing of one stand-in engine of known duration (2 ms of spinning)
    e = StandIn(cuda, kernel, "one", ["x"], "y", 1, 0, 2000)
    start, stop = cuda.Event(), cuda.Event()
    start.record(e.stream)
    e.run([("x", a), ("y", b)])
    stop.record(e.stream)
    assert stop.query() in (False, True)
    stop.synchronize()
    assert stop.query()
    ms = stop.time_since(start)
    print(f"stand-in engine of 2 ms spin: {ms:.3f} ms by events")
    assert 1.95 <= ms <= 2.6
    a.free()
    b.free()


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("spins", [(300, 20, 20), (20, 20, 300), (150, 100, 150)], ids=["slow-e0", "slow-e2", "even"])
def test_pipeline_frames_in_flight_give_exact_outputs(cuda, kernel, k, spins):
    bad, period, latency = _run(cuda, kernel, k, spins)
    print(f"K={k} spins(us)={spins}: period {period:.3f} ms, latency {latency:.3f} ms, bad frames {bad}")
    assert bad == []
    # e1 and e2 run one after the other; e0 overlaps only other frames
    critical_ms = sum(spins) / 1000.0
    assert latency >= critical_ms * 0.95
    if k == 1:  # no overlap between frames: the period is the latency
        assert period >= critical_ms * 0.95
    if k == 3:  # frames overlap: the period is the slowest engine's time (+ launch gaps)
        assert max(spins) / 1000.0 * 0.95 <= period <= max(spins) / 1000.0 * 1.15 + 0.02


def test_pipelining_shortens_the_period(cuda, kernel):
    spins = (150, 100, 150)
    p1 = _run(cuda, kernel, 1, spins, frames=40)[1]
    p3 = _run(cuda, kernel, 3, spins, frames=40)[1]
    print(f"steady-state period: K=1 {p1:.3f} ms, K=3 {p3:.3f} ms (spins {spins} us)")
    assert p3 < 0.7 * p1


@pytest.mark.parametrize("breakage, spins", [("missing wait", (300, 20, 20)), ("slot reused early", (20, 20, 300))])
def test_a_broken_dependency_gives_wrong_checksums(cuda, kernel, breakage, spins):
    ok, _, _ = _run(cuda, kernel, 2, spins)
    bad, _, _ = _run(cuda, kernel, 2, spins, breakage=breakage)
    print(f"{breakage}: correct schedule bad frames {ok}; broken schedule bad frames {len(bad)}/24: {bad}")
    assert ok == []
    assert len(bad) >= 12  # most frames read the wrong data


EXIT_SCRIPT = r"""
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np, worker_cuda
c = worker_cuda.driver()
s = c.Stream(); e = c.Event(); m = c.mem_alloc(1 << 20)
h = c.pagelocked_empty((1 << 18,), np.float32); h[:] = 1
c.memcpy_htod_async(m, h, s); e.record(s); e.synchronize()
print("binding", c.name, c.version)
"""


@pytest.mark.parametrize("k", [1, 2, 3])
def test_application_stream_feeds_and_fetches_each_frame_exactly(cuda, kernel, k):
    """placetune.runtime's loop (worker_pipeline.stream_frames): each frame's input uploaded on
    a feed stream the readers wait for, its output copied on a fetch stream once its writer is
    done, K frames in flight over reused slots; every output must be its own input's."""
    import time

    import worker_resources

    _, wp = _worker_modules()
    engines = _engines(cuda, kernel, (150, 100, 150))
    scope = worker_resources.Resources(cuda)  # the pipeline's buffers, freed at the end
    pipe = wp.Pipeline(scope, np, engines, {"x": [N]}, ["out"], k, np.random.default_rng(0))
    rng = np.random.default_rng(10 + k)
    xs = [rng.integers(-8, 8, size=N).astype(np.float32) for _ in range(24)]
    try:
        t0 = time.perf_counter()
        outs = [o["out"] for o in wp.stream_frames(np, pipe, ({"x": x} for x in xs), k)]
        wall = time.perf_counter() - t0
        bad = [i for i, (o, x) in enumerate(zip(outs, xs)) if not np.array_equal(o.astype(np.float64), _expected(x))]
        print(f"stream K={k}: 24 frames in {wall * 1000:.1f} ms, bad frames {bad}")
        assert len(outs) == 24 and bad == []
        if k > 1:
            assert wall < 24 * 0.400 * 0.9  # frames overlap: less than 24 back-to-back latencies
    finally:
        cuda.synchronize()
        scope.close()


@pytest.mark.parametrize("binding", ["cuda-python", "pycuda"])
def test_worker_process_exits_cleanly(binding, cuda):
    """No 'context stack was not empty' abort at exit: the layer pops its context atexit."""
    if binding == "pycuda":
        pytest.importorskip("pycuda.driver")
    p = subprocess.run([sys.executable, "-c", EXIT_SCRIPT, WORKER_DIR], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PLACETUNE_CUDA": binding})
    print(p.stdout, p.stderr[-500:])
    assert p.returncode == 0, p.stderr
    assert "context stack" not in p.stderr and f"binding {binding}" in p.stdout


def _rss_bytes():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _device_free_bytes():
    from cuda.bindings import driver as drv

    free, _total = _check("cuMemGetInfo", drv.cuMemGetInfo())
    return int(free)


def _fake_counts():
    """The doubles' live streams, events, pinned and device buffers (None on a real GPU)."""
    try:
        import _fakegpu
    except ImportError:
        return None
    return _fakegpu.live()


class _Failing(StandIn):
    """A stand-in engine whose ``fail_at``-th run fails, as an ``execute_async_v3`` that returns False."""

    def __init__(self, *args, fail_at):
        super().__init__(*args)
        self.fail_at, self.runs = fail_at, 0

    def run(self, addresses):
        self.runs += 1
        if self.runs == self.fail_at:
            raise RuntimeError(f"engine {self.name}: execute_async_v3 returned False (a failure by design)")
        super().run(addresses)


def _standin_engines(kernel, monkeypatch):
    """worker_pipeline's Engine replaced by stand-ins (once per test); ``state["fail_at"]``: the
    run at which engine e1 fails in the next job (None: never)."""
    _, wp = _worker_modules()
    state = {"fail_at": None}
    spin = 5  # us per engine: jobs of a few ms

    def engine(trt, cuda, name, plan, core, logger, shapes=None):
        inputs, output, a, b = plan
        if state["fail_at"] is not None and name == "e1":
            return _Failing(cuda, kernel, name, inputs, output, a, b, spin, fail_at=state["fail_at"])
        return StandIn(cuda, kernel, name, inputs, output, a, b, spin)

    monkeypatch.setattr(wp, "Engine", engine)
    return state


def _pipeline_job(layer, state, k, fail_at=None, owned=True):
    """One ``pipeline`` job as the worker runs it (worker_pipeline._run_pipeline: correctness gate
    against a one-kernel reference, warm-up, latency, throughput with K frames in flight, timeline,
    each engine alone) on stand-in engines, its resources in a Resources scope released as
    ``pipeline()`` releases them (``owned=False``: made on the bare layer, as before jobs had an
    owner). Returns the job's result."""
    import worker_resources

    _, wp = _worker_modules()
    state["fail_at"] = fail_at
    plans = [(["x"], "t1", 2, 1), (["t1"], "t2", 3, -2), (["t2", "t1"], "out", 1, 5)]
    ref_plan = (["x"], "out", 8, 7)  # the diamond in one kernel: 3(2x+1) - 2 + 5 + (2x+1)
    job = {"engines": [{"name": f"e{i}"} for i in range(3)], "network_inputs": {"x": [N]},
           "network_outputs": ["out"], "frames_in_flight": k, "iterations": 5, "warmup_ms": 0,
           "timeline_frames": 4, "profile_iterations": 0, "gate": {"tolerance": 1e-5}, "seed": k}
    out: dict = {}
    scope = None
    try:
        scope = worker_resources.Resources(layer) if owned else None
        wp._run_pipeline(None, scope or layer, np, job, plans, ref_plan, None, out)
    except Exception as exc:  # noqa: BLE001 - as pipeline() does
        out.update(status="runtime_failed", error=f"{type(exc).__name__}: {exc}")
    finally:
        worker_resources.release(scope, out)  # without an owner nothing is freed
    return out


def test_the_counts_see_what_a_job_without_an_owner_leaves(cuda, kernel, monkeypatch):
    """The check below can see a leak: jobs made on the bare layer (as every job was before
    jobs owned their resources) leave, on cuda-python, their streams, events, pinned and device
    buffers behind; pycuda frees a stream or event when its object goes, and the counts say so."""
    state = _standin_engines(kernel, monkeypatch)
    before = cuda.live()
    for i in range(10):
        assert _pipeline_job(cuda, state, 1 + i % 3, owned=False)["status"] == "ok"
    cuda.synchronize()
    after = cuda.live()
    grown = {key: after[key] - before[key] for key in after}
    print(f"{cuda.name}: 10 jobs without an owner left {grown}")
    if cuda.name == "pycuda":
        assert grown["streams"] == 0 and grown["events"] == 0
    else:
        assert grown["streams"] >= 10 * 4 and grown["events"] >= 10 * 50 and grown["pinned_bytes"] >= 10 * 3 * N * 4


def test_a_thousand_pipeline_jobs_leave_memory_flat(cuda, kernel, monkeypatch):
    """The worker runs hundreds of jobs a night: after each, every stream, event, pinned host
    buffer and device buffer it made is gone. A thousand pipeline jobs (K = 1..3 frames in
    flight, every 10th failing half way, as an engine that fails to enqueue) through the real
    CUDA layer: the layer's own counts come back to where they were after every job, and the
    device's free memory (cuMemGetInfo) and the process's RSS stay flat.
    ``PLACETUNE_LEAK_JOBS`` sets the number of jobs (the doubles run fewer);
    ``PLACETUNE_LEAK_OUT`` a file for the figures."""
    import json
    import time

    jobs = int(os.environ.get("PLACETUNE_LEAK_JOBS", "1000"))
    state = _standin_engines(kernel, monkeypatch)
    cuda.synchronize()
    for i in range(20):  # the first jobs grow the driver's and the allocator's pools
        assert _pipeline_job(cuda, state, 1 + i % 3)["status"] == "ok"
    import gc

    gc.collect()
    held, dev0, rss0 = cuda.live(), _device_free_bytes(), _rss_bytes()
    fake0 = _fake_counts()
    samples, failed, t0 = [], 0, time.perf_counter()
    for i in range(jobs):
        out = _pipeline_job(cuda, state, 1 + i % 3, fail_at=7 if i % 10 == 9 else None)
        assert "release_errors" not in out, out["release_errors"]
        if i % 10 == 9:
            assert out["status"] == "runtime_failed" and "by design" in out["error"], out
            failed += 1
        else:
            assert out["status"] == "ok" and out["gate"]["passed"], out.get("error")
        assert cuda.live() == held, (i, cuda.live(), held)  # nothing of the job is left, even when it failed
        if i % max(1, jobs // 10) == 0 or i == jobs - 1:
            samples.append({"job": i + 1, "device_free_mb": _device_free_bytes() / 2**20,
                            "rss_mb": _rss_bytes() / 2**20})
    wall = time.perf_counter() - t0
    gc.collect()
    dev1, rss1 = _device_free_bytes(), _rss_bytes()
    if fake0 is not None:  # against the doubles, their own counts too (not the layer's word for it)
        assert _fake_counts() == fake0, (_fake_counts(), fake0)
    figures = {"binding": cuda.name, "device": cuda.device_name(), "jobs": jobs, "failed_by_design": failed,
               "wall_s": round(wall, 2), "live_before": held, "live_after": cuda.live(),
               "device_free_mb_before": dev0 / 2**20, "device_free_mb_after": dev1 / 2**20,
               "rss_mb_before": rss0 / 2**20, "rss_mb_after": rss1 / 2**20, "samples": samples}
    print(json.dumps(figures))
    if os.environ.get("PLACETUNE_LEAK_OUT"):
        with open(f"{os.environ['PLACETUNE_LEAK_OUT']}.{cuda.name}.json", "w") as fh:
            json.dump(figures, fh, indent=1)
    # a job pins about 1 MB and allocates about 3 MB on the device: a leak of either shows at once
    assert abs(dev0 - dev1) <= 8 << 20
    assert rss1 - rss0 <= 32 << 20


# ---------------------------------------------------------------- replicas: one enqueue thread per instance
class _Replica(StandIn):
    """A stand-in instance whose enqueue also takes ``host_ms`` of host time with the GIL released
    (``time.sleep``; ``execute_async_v3`` releases the GIL) and logs (name, thread, start, end) of
    each enqueue; its ``fail_at``-th run raises, its ``block[0]``-th run waits for ``block[1]``."""

    def __init__(self, *args, host_ms, log, fail_at=None, block=None):
        super().__init__(*args)
        self.host_ms, self.log, self.fail_at, self.block, self.runs = host_ms, log, fail_at, block, 0

    def run(self, addresses):
        import threading
        import time

        self.runs += 1
        if self.runs == self.fail_at:
            raise RuntimeError(f"engine {self.name}: execute_async_v3 returned False (a failure by design)")
        if self.block is not None and self.runs == self.block[0]:
            self.block[1].wait()
        t0 = time.perf_counter()
        time.sleep(self.host_ms / 1000.0)
        super().run(addresses)
        self.log.append((self.name, threading.get_ident(), t0, time.perf_counter()))


def _replicas_job(kernel, monkeypatch, n=3, host_ms=1.0, duration_s=0.3, fail_at=None, block=None):
    """One ``replicas`` job as the worker runs it (worker_replicas.run_owned: each instance alone,
    then all at once, one enqueue thread each) on ``n`` stand-in instances; instance r1 fails or
    blocks as asked. Returns (result, enqueue log, the job's Resources)."""
    import worker_replicas as wr
    import worker_resources

    log, scopes = [], []

    def engine(trt, cuda, name, plan, core, logger, shapes=None):
        odd = name == "r1"
        return _Replica(cuda, kernel, name, ["x"], "out", 2, 1, 2, host_ms=host_ms, log=log,
                        fail_at=fail_at if odd else None, block=block if odd else None)

    class Scope(worker_resources.Resources):
        def __init__(self, layer):
            super().__init__(layer)
            scopes.append(self)

    monkeypatch.setattr(wr, "Engine", engine)
    monkeypatch.setattr(wr, "Resources", Scope)
    job = {"instances": [{"name": f"r{i}"} for i in range(n)], "iterations": 5, "warmup_ms": 0,
           "duration_s": duration_s, "timeline_iterations": 4, "seed": 1}
    out: dict = {}
    wr.run_owned(None, np, job, [None] * n, None, out)
    return out, log, scopes[0]


def _replica_threads():
    import threading

    return [t for t in threading.enumerate() if t.name.startswith("placetune-replica")]


def test_replicas_enqueue_from_one_thread_each_at_the_same_time(cuda, kernel, monkeypatch):
    """Every instance is enqueued by a thread of its own (the context current there), the
    threads' enqueues overlap in host time, each instance's figures come from its own stream's
    events, and the job leaves nothing behind. Host-bound instances (1 ms of host time per
    enqueue) run about n times as many queries together as one thread could."""
    import itertools
    import json
    import threading

    main = threading.get_ident()
    held = cuda.live()
    host_ms, duration_s, n = 1.0, 0.3, 3
    out, log, _ = _replicas_job(kernel, monkeypatch, n=n, host_ms=host_ms, duration_s=duration_s)
    assert out["status"] == "ok", out.get("error")
    assert "release_errors" not in out and cuda.live() == held and not _replica_threads()
    together = [(name, tid, a, b) for name, tid, a, b in log if tid != main]
    by_name = {}
    for name, tid, _, _ in together:
        by_name.setdefault(name, set()).add(tid)
    assert sorted(by_name) == ["r0", "r1", "r2"] and all(len(t) == 1 for t in by_name.values())
    assert len(set().union(*by_name.values())) == n  # one thread each, none the main thread
    start, end = min(a for _, _, a, _ in together), max(b for _, _, _, b in together)
    concurrency = sum(b - a for _, _, a, b in together) / (end - start)  # at most 1.0 from one thread
    edges = sorted([(a, 1) for _, _, a, _ in together] + [(b, -1) for _, _, _, b in together])
    at_once = max(itertools.accumulate(d for _, d in edges))  # the most enqueues in progress at one time
    rows = out["instances"]
    total = sum(r["inferences"] for r in rows)
    figures = {"binding": cuda.name, "device": cuda.device_name(), "instances": n, "host_ms_per_enqueue": host_ms,
               "duration_s": duration_s, "inferences": [r["inferences"] for r in rows],
               "one_thread_at_most": int(duration_s * 1000 / host_ms), "host_concurrency": round(concurrency, 2),
               "most_enqueues_at_once": at_once,
               "window_ms": round(out["window_ms"], 3)}
    print("replicas threads: " + json.dumps(figures))
    assert at_once == n and concurrency > 1.1, figures
    assert all(r["inferences"] >= 1 and len(r["samples_ms"]) == min(5, r["inferences"]) for r in rows)
    assert all(r["span_ms"] > 0 and r["end_ms"] > r["start_ms"] >= 0 for r in rows)
    if _fake_counts() is None:  # a real GPU: the wall clock is the device's (the doubles' is simulated)
        assert total > 1.5 * figures["one_thread_at_most"], figures


def test_a_failing_replica_thread_fails_the_job_with_one_line(cuda, kernel, monkeypatch):
    """An instance whose enqueue fails in its thread (after the alone phase: warm-up 1 + 5 timed
    runs) stops the others and fails the job with one line naming it; nothing hangs or is left."""
    import time

    held = cuda.live()
    t0 = time.perf_counter()
    out, _, _ = _replicas_job(kernel, monkeypatch, host_ms=0.2, duration_s=5.0, fail_at=9)
    assert time.perf_counter() - t0 < 4.0  # the others stopped at once, not after duration_s
    assert out["status"] == "runtime_failed" and "\n" not in out["error"], out
    assert "instance 1 (r1)" in out["error"] and "by design" in out["error"], out["error"]
    assert "release_errors" not in out and cuda.live() == held and not _replica_threads()


def test_a_replica_thread_needs_the_context_current(cuda, kernel, monkeypatch):
    """Without the context made current in the enqueue thread the first CUDA call there fails
    (the driver API's current context is per thread): the job fails with that one line."""
    import worker_resources

    held = cuda.live()
    monkeypatch.setattr(worker_resources.Resources, "bind_thread", lambda self, on=True: None)
    out, _, _ = _replicas_job(kernel, monkeypatch, host_ms=0.0, duration_s=0.1)
    print(f"{cuda.name}: unbound thread: {out.get('error')}")
    assert out["status"] == "runtime_failed" and "\n" not in out["error"], out
    assert re.search(r"^RuntimeError: instance \d \(r\d\): ", out["error"]), out["error"]  # whichever came first
    assert "context" in out["error"].lower(), out["error"]
    assert cuda.live() == held and not _replica_threads()


def test_a_replica_thread_that_does_not_end_fails_the_job_and_keeps_its_resources(cuda, kernel, monkeypatch):
    """A thread still in an enqueue past the grace time: the job fails with one line instead of
    waiting, and its resources are not freed under it (``release_errors``: the parent replaces
    the worker)."""
    import threading
    import time

    import worker_replicas as wr

    monkeypatch.setattr(wr, "START_S", 2.0)
    monkeypatch.setattr(wr, "GRACE_S", 0.5)
    gate = threading.Event()
    t0 = time.perf_counter()
    try:
        out, _, scope = _replicas_job(kernel, monkeypatch, host_ms=0.2, duration_s=0.2, block=(9, gate))
        waited = time.perf_counter() - t0
        assert out["status"] == "runtime_failed" and "\n" not in out["error"], out
        assert "instance 1 (r1)" in out["error"] and "did not end" in out["error"], out["error"]
        assert out["release_errors"] and scope.owned and waited < 2.0 + 0.2 + 0.5 + 3.0
    finally:
        gate.set()
    for t in _replica_threads():
        t.join(5.0)
    assert not _replica_threads()
    assert scope.close() == []
