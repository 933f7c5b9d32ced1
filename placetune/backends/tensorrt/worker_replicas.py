"""The worker's ``replicas`` op: whole-network engines timed alone, then all at once in closed loops.

All at once, each instance is driven by a thread of its own, as a deployment runs one thread
per stream (DeepStream) and trtexec ``--threads`` one per stream: ``execute_async_v3``
releases the GIL (``py::call_guard<py::gil_scoped_release>``, TensorRT python/src/infer/pyCore.cpp
release/8.5:839, release/8.6:871, release/10.3:1074), so one instance's enqueue no longer waits
for another's. Each thread makes the worker's CUDA context current first (the driver API's
current context is per thread), its events are made through the job's resources, and it runs
the same loop as every other instance (the timing method is one: backends/timing_method.py).
A thread that fails stops the others and fails the job with one line; a thread that does not
end in time fails it too, and its resources are then left for the worker's end (the parent
replaces a worker whose job could not free them). A sibling module of ``worker.py``:
Python 3.8, no placetune imports.
"""

import threading
import time
import traceback

try:  # Python 3.8 needs typing's generics
    from typing import Any, Dict, List, Tuple
except ImportError:  # pragma: no cover
    pass

from worker_build import make_logger, obtain_all
from worker_cuda import driver
from worker_resources import Resources, load_inputs, random_fill, release
from worker_time import Engine, engines_nvtx, io_managed, layer_information, timed_window


#: seconds the enqueue threads may take to reach the start line together
START_S = 60.0
#: seconds past the planned duration before a thread that has not ended fails the job
GRACE_S = 30.0


class _Shared(object):
    """What the enqueue threads share: the start line, the end time, each one's count, the stop
    flag and the errors (first first)."""

    def __init__(self, n, duration_s, cap):
        # type: (int, float, int) -> None
        self.counts = [0] * n
        self.cap = cap
        self.t_end = float("inf")
        self.stop = threading.Event()
        self.errors = []  # type: List[Tuple[int, str]]
        self.duration_s = duration_s
        self.start = threading.Barrier(n, action=self._started, timeout=START_S)

    def _started(self):
        # type: () -> None
        self.t_end = time.perf_counter() + self.duration_s

    def more(self, i):
        # type: (int) -> bool
        """Instance ``i`` queues another query: until it and every other instance ran one and the
        duration or the total cap is reached, or something failed."""
        if self.stop.is_set():
            return False
        if self.counts[i] < 1 or min(self.counts) < 1:
            return True
        return time.perf_counter() < self.t_end and sum(self.counts) < self.cap

    def fail(self, i, exc):
        # type: (int, BaseException) -> None
        if isinstance(exc, threading.BrokenBarrierError):  # another thread failed first, or one never came
            if not self.errors:
                self.errors.append((i, "the instances did not all reach the start line within %.0f s" % START_S))
        else:
            self.errors.append((i, "%s: %s" % (type(exc).__name__, (str(exc).splitlines() or [""])[0])))
        self.stop.set()
        self.start.abort()  # a thread still at the start line gives up at once


def _closed_loop(cuda, i, e, addr, pairs, ring, shared):
    # type: (Any, int, Any, List[Tuple[str, Any]], List[Tuple[Any, Any]], List[Tuple[Any, Any]], _Shared) -> None
    """One instance's enqueue thread: the context made current, its events made, then at the
    start line with the others, ``depth`` queries kept queued on its stream until told to stop.
    ``pairs``: the (start, end) events of its first queries, kept; ``ring``: reused after."""
    bound = False
    try:
        cuda.bind_thread()
        bound = True
        keep, depth = len(pairs), len(ring) - 1
        pairs[:] = [(cuda.Event(), cuda.Event()) for _ in range(keep)]
        ring[:] = [(cuda.Event(), cuda.Event()) for _ in range(depth + 1)]
        queue = []  # type: List[Tuple[Any, Any]]
        shared.start.wait()
        c = 0
        while shared.more(i):
            if len(queue) >= depth:
                if not queue[0][1].query():
                    time.sleep(0.0002)
                    continue
                queue.pop(0)
            pair = pairs[c] if c < keep else ring[c % (depth + 1)]
            pair[0].record(e.stream)
            e.run(addr)
            pair[1].record(e.stream)
            queue.append(pair)
            c += 1
            shared.counts[i] = c
        e.stream.synchronize()
    except BaseException as exc:  # noqa: B902 - any failure of the thread is the job's
        shared.fail(i, exc)
    finally:
        if bound:
            try:
                cuda.bind_thread(False)
            except Exception as exc:
                shared.fail(i, exc)


def _together(cuda, engines, addresses, job, iterations, base):
    # type: (Any, List[Any], List[Any], Dict[str, Any], int, Any) -> Tuple[List[Any], List[Any], List[int]]
    """Run every instance at once, one enqueue thread each; returns each one's kept (start, end)
    event pairs, its last pair and its count. Raises with one line when a thread failed or did
    not end in time."""
    n = len(engines)
    depth = max(1, int(job.get("queue_depth", 2)))
    keep = max(iterations, int(job.get("timeline_iterations", 4)))
    duration_s = float(job.get("duration_s", 3.0))
    shared = _Shared(n, duration_s, int(job.get("max_inferences", 100000)))
    kept = [[None] * keep for _ in range(n)]  # type: List[List[Any]]
    rings = [[None] * (depth + 1) for _ in range(n)]  # type: List[List[Any]]
    for e in engines:
        e.stream.wait_for_event(base)
    threads = [threading.Thread(target=_closed_loop, name="placetune-replica-%d" % i,
                                args=(cuda, i, e, addresses[i], kept[i], rings[i], shared), daemon=True)
               for i, e in enumerate(engines)]
    for t in threads:
        t.start()
    deadline = time.perf_counter() + START_S + duration_s + GRACE_S
    for t in threads:
        t.join(max(0.0, deadline - time.perf_counter()))
    stuck = [i for i, t in enumerate(threads) if t.is_alive()]
    if stuck:
        shared.stop.set()
        for i in stuck:
            threads[i].join(1.0)
        stuck = [i for i, t in enumerate(threads) if t.is_alive()]
    if stuck:
        raise _Stuck("instance %d (%s): its enqueue thread did not end within %.0f s of the start"
                     % (stuck[0], engines[stuck[0]].name, START_S + duration_s + GRACE_S))
    if shared.errors:
        i, why = shared.errors[0]
        raise RuntimeError("instance %d (%s): %s" % (i, engines[i].name, why))
    counts = shared.counts  # query c used kept[i][c] while c < keep, then rings[i][c % (depth + 1)]
    last = [kept[i][c - 1] if c <= keep else rings[i][(c - 1) % (depth + 1)] for i, c in enumerate(counts)]
    return [k[:min(c, keep)] for k, c in zip(kept, counts)], last, counts


class _Stuck(RuntimeError):
    """An enqueue thread still runs: the job's resources cannot be freed under it."""


def _run_replicas(trt, cuda, np, job, plans, logger, out):
    # type: (Any, Any, Any, Dict[str, Any], List[bytes], Any, Dict[str, Any]) -> None
    specs = job["instances"]
    rng = np.random.default_rng(int(job.get("seed", 0)))
    inputs = load_inputs(np, job)  # the input data given (each replica's batch of it), else random input
    engines = []  # type: List[Engine]
    addresses = []
    # timed as trtexec's replicas (no copies): its tensors in managed memory on an integrated GPU, as
    # trtexec binds them (worker_time.io_managed), device memory on a discrete one
    managed = io_managed(cuda)
    out["io_memory"] = "managed" if managed else "device"
    for s, p in zip(specs, plans):
        e = Engine(trt, cuda, str(s.get("name")), p, int(s.get("dla_core", -1)), logger, s.get("input_shapes"))
        if int(s.get("dla_core", -1)) >= 0 and (job.get("common") or {}).get("inspector", True):
            # where its layers ran: the second source, beside the build log
            layer_information(trt, e.engine, e.context, out["engines"][len(engines)])
        addr = []
        for t in e.inputs + e.outputs:
            mem = cuda.mem_alloc(max(int(e.nbytes(t)), 1), managed)  # freed by the job's Resources
            if t in e.inputs:  # a copy from pinned memory: the host never touches managed memory
                random_fill(cuda, np, rng, mem, e.tensors[t][0], e.tensors[t][1], inputs, t)
            addr.append((t, mem))
        engines.append(e)
        addresses.append(addr)
    n = len(engines)
    out["nvtx_verbosity"] = engines_nvtx(engines)  # the NVTX markers every timed context runs with
    iterations = max(1, int(job.get("iterations", 50)))
    warm_s = float(job.get("warmup_ms", 200.0)) / 1000.0
    # ---- each instance alone
    start, end = cuda.Event(), cuda.Event()
    alone = []
    timed_from = time.monotonic()  # the timed part: each alone (their warm-ups between), then all at once
    for e, addr in zip(engines, addresses):
        t_start = time.perf_counter()
        warm = 0
        while warm < 1 or time.perf_counter() - t_start < warm_s:
            e.run(addr)
            e.stream.synchronize()
            warm += 1
        times = []
        for _ in range(iterations):
            start.record(e.stream)
            e.run(addr)
            end.record(e.stream)
            end.synchronize()
            times.append(float(end.time_since(start)))
        alone.append(times)
    out["alone_samples_ms"] = alone
    # ---- all at once: one enqueue thread per instance, each in a closed loop with `depth` queued
    timer = cuda.Stream()
    base = cuda.Event()
    base.record(timer)
    kept, last, counts = _together(cuda, engines, addresses, job, iterations, base)
    window = timed_window(timed_from)
    rows = []
    for i in range(n):
        first = kept[i][0][0]
        span = float(last[i][1].time_since(first))
        rows.append({"name": engines[i].name, "inferences": counts[i], "span_ms": span,
                     "start_ms": float(first.time_since(base)), "end_ms": float(last[i][1].time_since(base)),
                     "samples_ms": [float(b.time_since(a)) for a, b in kept[i][:iterations]]})
    out["instances"] = rows
    n_tl = int(job.get("timeline_iterations", 4))
    out["timeline"] = [[i, k, float(a.time_since(base)), float(b.time_since(base))]
                       for i in range(n) for k, (a, b) in enumerate(kept[i][:n_tl])]
    out["window_ms"] = max(r["end_ms"] for r in rows) - min(r["start_ms"] for r in rows)
    out["timed_window"] = window
    out["status"] = "ok"


def run_owned(trt, np, job, plans, logger, result):
    # type: (Any, Any, Dict[str, Any], List[Any], Any, Dict[str, Any]) -> None
    """Run the job with its streams, events, buffers and engines owned by a ``Resources`` and
    freed when it ends, however it ends; a failure is ``runtime_failed`` with one line."""
    cuda = None
    try:
        cuda = Resources(driver())
        _run_replicas(trt, cuda, np, job, plans, logger, result)
    except _Stuck as exc:  # freeing under a running thread could crash the worker: the parent replaces it
        result.update(status="runtime_failed", error=str(exc))
        result["release_errors"] = ["%s; its CUDA resources are left to the worker's end" % exc]
        cuda = None
    except Exception as exc:
        result.update(status="runtime_failed", error="%s: %s" % (type(exc).__name__, exc),
                      traceback=traceback.format_exc(limit=6))
    finally:
        release(cuda, result)


def replicas(job):
    # type: (Dict[str, Any]) -> Dict[str, Any]
    """Build (or load) one whole-network engine per instance (device, batch), time each alone,
    then run them all at once, each from a thread of its own in a closed loop on its own stream,
    for ``duration_s``."""
    import numpy as np
    import tensorrt as trt

    result = {"trt_version": str(trt.__version__), "engines": []}  # type: Dict[str, Any]
    plans = obtain_all(trt, list(job.get("instances") or []), job.get("common") or {}, result)
    if plans is None:
        return result
    logger = make_logger(trt, False)
    result["runtime_log"] = logger.lines
    run_owned(trt, np, job, plans, logger, result)
    return result
