"""The worker's ``replicas`` op: whole-network engines timed alone, then all at once in closed loops.

A sibling module of ``worker.py``: Python 3.8, no placetune imports.
"""

import time
import traceback

try:  # Python 3.8 needs typing's generics
    from typing import Any, Dict, List, Tuple
except ImportError:  # pragma: no cover
    pass

from worker_build import make_logger, obtain_all
from worker_cuda import driver
from worker_resources import Resources, alloc, random_fill, release
from worker_time import Engine


def _run_replicas(trt, cuda, np, job, plans, logger, out):
    # type: (Any, Any, Any, Dict[str, Any], List[bytes], Any, Dict[str, Any]) -> None
    specs = job["instances"]
    rng = np.random.default_rng(int(job.get("seed", 0)))
    engines = []
    addresses = []
    for s, p in zip(specs, plans):
        e = Engine(trt, cuda, str(s.get("name")), p, int(s.get("dla_core", -1)), logger, s.get("input_shapes"))
        addr = []
        for t in e.inputs + e.outputs:
            mem = alloc(cuda, e.nbytes(t))
            if t in e.inputs:
                random_fill(cuda, np, rng, mem, e.tensors[t][0], e.tensors[t][1])
            addr.append((t, mem))
        engines.append(e)
        addresses.append(addr)
    n = len(engines)
    iterations = max(1, int(job.get("iterations", 50)))
    warm_s = float(job.get("warmup_ms", 200.0)) / 1000.0
    # ---- each instance alone
    start, end = cuda.Event(), cuda.Event()
    alone = []
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
    # ---- all at once, each in a closed loop with `depth` inferences queued, for a duration
    depth = max(1, int(job.get("queue_depth", 2)))
    keep = max(iterations, int(job.get("timeline_iterations", 4)))
    ring = [[(cuda.Event(), cuda.Event()) for _ in range(depth + 1)] for _ in range(n)]
    kept = [[] for _ in range(n)]  # type: List[List[Tuple[Any, Any]]]
    last = [None] * n  # type: List[Any]
    queues = [[] for _ in range(n)]  # type: List[List[Tuple[Any, Any]]]
    counts = [0] * n
    timer = cuda.Stream()
    base = cuda.Event()
    base.record(timer)
    for e in engines:
        e.stream.wait_for_event(base)
    duration_s = float(job.get("duration_s", 3.0))
    cap = int(job.get("max_inferences", 100000))
    t_end = time.perf_counter() + duration_s
    while min(counts) < 1 or (time.perf_counter() < t_end and sum(counts) < cap):
        progressed = False
        for i, e in enumerate(engines):
            q = queues[i]
            if len(q) >= depth:
                if not q[0][1].query():
                    continue
                q.pop(0)
            c = counts[i]
            if c < keep:
                pair = (cuda.Event(), cuda.Event())
                kept[i].append(pair)
            else:
                pair = ring[i][c % (depth + 1)]
            pair[0].record(e.stream)
            e.run(addresses[i])
            pair[1].record(e.stream)
            q.append(pair)
            last[i] = pair
            counts[i] = c + 1
            progressed = True
        if not progressed:
            time.sleep(0.0002)
    for e in engines:
        e.stream.synchronize()
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
    out["status"] = "ok"


def replicas(job):
    # type: (Dict[str, Any]) -> Dict[str, Any]
    """Build (or load) one whole-network engine per instance (device, batch), time each alone,
    then run them all at once, each in a closed loop on its own stream, for ``duration_s``."""
    import numpy as np
    import tensorrt as trt

    result = {"trt_version": str(trt.__version__), "engines": []}  # type: Dict[str, Any]
    plans = obtain_all(trt, list(job.get("instances") or []), job.get("common") or {}, result)
    if plans is None:
        return result
    logger = make_logger(trt, False)
    result["runtime_log"] = logger.lines
    cuda = None  # the job's streams, events, buffers and engines: all freed when it ends
    try:
        cuda = Resources(driver())
        _run_replicas(trt, cuda, np, job, plans, logger, result)
    except Exception as exc:
        result.update(status="runtime_failed", error="%s: %s" % (type(exc).__name__, exc),
                      traceback=traceback.format_exc(limit=6))
    finally:
        release(cuda, result)
    return result
