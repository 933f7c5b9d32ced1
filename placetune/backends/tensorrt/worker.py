"""placetune's TensorRT build-and-time worker: one JSON job per stdin line, one JSON result per stdout line.

Runs in its own process so that a TensorRT segfault, hang or CUDA error cannot take the
study down (the parent, :mod:`placetune.backends.tensorrt.backend`, enforces timeouts and
restarts it). It depends only on ``tensorrt``, ``pycuda``, ``numpy`` and the standard
library, imports none of placetune and runs under Python 3.8, so it can be started as a
file with JetPack's system Python::

    /usr/bin/python3 placetune/backends/tensorrt/worker.py      # or: python -m placetune.backends.tensorrt.worker

This file is the protocol (hello, job loop, dispatch, probe); the jobs live in sibling modules
that the worker imports as top-level modules from this directory: ``worker_build`` (network,
builder config, DLA placement, build, engine cache), ``worker_cache`` (timing and engine cache
files under locks), ``worker_cuda`` (the CUDA layer), ``worker_time`` (one engine: ``measure``),
``worker_pipeline`` (``pipeline`` and its correctness gate), ``worker_replicas`` (``replicas``),
``worker_resources`` (a job's CUDA resources, freed when it ends; the memory each reply reports).

Protocol: the worker first writes ``{"hello": 1, "python": "3.8.10", "pid": N}``. Then for
each job line it writes exactly one result line. Jobs:

* ``{"op": "probe"}`` -> TensorRT version, DLA cores, which CUDA binding works (``cuda_binding``,
  ``cuda_error``, ``cuda_fix``; see ``worker_cuda.probe``) (never raises).
* ``{"op": "measure", "onnx": path, "input_shapes": {name: dims}, "precision": "fp16"|"int8"|"fp32",
  "strongly_typed": bool, "dla_core": k or -1, "gpu_fallback": bool, "dla_layers": [names],
  "timing_cache": path or null, "calibration_cache": path or null, "memory_pools": {POOL: bytes},
  "iterations": N, "min_timed_s": s (time at least this long: power sampling), "warmup_ms": ms,
  "profile_iterations": N, "inspector": bool, "save_plan": path or null, "plan_cache": path or null (an
  engine cache entry: the engine of the same key built before is loaded from it, not built again), "reuse_plan":
  bool (false: built anew all the same)}``
  -> ``{"status": "ok"|"build_failed"|"runtime_failed", "log": [[severity, text], ...] (the build's
  messages only), "runtime_log": [[severity, text], ...] (deserialising and running the engine),
  "network_layers": [[name, onnx name or null, type, dla requested, can run on DLA], ...],
  "latency_samples_ms": [...], "throughput_ms_per_inference": x, "timed_window": [start, end] of the timed
  loop in time.monotonic() seconds, "layer_profile": [[engine layer, ms], ...],
  "inspector": json text or null, "build_seconds": s, "engine_bytes": n, "plan_file": the saved engine
  (``save_plan``) or null, "cached": the engine was loaded from ``plan_cache`` (its ``log`` and
  ``build_seconds`` are its build's), "engine_digest": the engine's SHA-256, 16 hex digits, "error": text or null}``
* ``{"op": "pipeline", "engines": [spec, ...], "reference": spec or null, "common": {build fields},
  "network_inputs": {name: dims}, "network_outputs": [names], "frames_in_flight": K,
  "iterations": N, "warmup_ms": ms, "profile_iterations": N, "timeline_frames": N,
  "gate": {"tolerance": x, "enforce": bool, "reference": what the reference is}, "seed": n,
  "dla_cores": n}`` where a spec is a measure job's build fields plus ``name``, ``device`` and
  ``plan_cache`` (path of the engine cache entry or null); a DLA reference (the unsplit engine)
  is loaded on a DLA core where its loadables fit beside the pipeline's
  -> ``{"status", "engines": [build record + "cached"], "reference": record, "gate": report,
  "latency_samples_ms", "period_ms", "schedule": [[start, end] per engine], "timeline":
  [[engine, frame, start, end], ...], "alone_ms": [...], "timed_window": [start, end] of the timed
  part (the latency loop to each engine alone) in time.monotonic() seconds, "layer_profiles": [...],
  "error"}``.
  Engines are given in topological order; one stream each, events between them.
* ``{"op": "replicas", "instances": [spec + "batch"], "common": {...}, "iterations": N,
  "warmup_ms": ms, "duration_s": s, "timeline_iterations": N}`` -> ``{"status", "engines",
  "alone_samples_ms": [[...] per instance], "instances": [{"inferences", "span_ms",
  "samples_ms", ...}], "timeline": [[instance, iteration, start, end], ...], "window_ms",
  "timed_window": [start, end] of the timed part (each instance alone, then all at once) in
  time.monotonic() seconds}``.
* ``{"op": "build", "engines": [spec, ...], "common": {...}}`` -> ``{"status", "engines",
  "runtime_log"}``: each engine built and written to its spec's ``plan_cache`` path (``placetune
  build``), no timing; each DLA engine then deserialised on its core for its layer information
  (``inspector`` or ``inspector_error`` in its record, unless ``common["inspector"]`` is false).

Every result carries ``worker_memory``: the worker's RSS and what its CUDA layer still holds
after the job (streams, events, pinned and device bytes; ``worker_resources.memory_usage``), which
the parent's :class:`~placetune.backends.tensorrt.pool.WorkerPool` watches to recycle a worker
that grows.

Native libraries write to file descriptor 1 as they like; the worker moves its protocol to a
private copy of stdout and points fd 1 at stderr, so stray prints cannot corrupt a result.
"""

import json
import os
import sys
import threading
import time
import traceback

try:  # Python 3.8 needs typing's generics
    from typing import Any, Dict
except ImportError:  # pragma: no cover
    pass


def _on_path():
    # type: () -> None
    """Make the sibling ``worker_*`` modules importable. Run as a file, Python has put this
    directory first on sys.path already; ``python -m`` and package imports have not. No file
    here is named like a module the worker imports (tests/test_worker.py checks), so nothing
    real is shadowed."""
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in [os.path.abspath(p or os.curdir) for p in sys.path]:
        sys.path.insert(0, here)


_on_path()

from worker_build import build_engines, make_logger  # noqa: E402
from worker_cuda import probe as cuda_probe  # noqa: E402
from worker_pipeline import pipeline  # noqa: E402
from worker_replicas import replicas  # noqa: E402
from worker_resources import memory_usage  # noqa: E402
from worker_time import inspect_built, measure  # noqa: E402

PROTOCOL = 1


def probe(job):
    # type: (Dict[str, Any]) -> Dict[str, Any]
    """What this Python can use: TensorRT version and DLA cores, the CUDA binding (worker_cuda.probe)."""
    out = {"status": "ok", "python": "%d.%d.%d" % sys.version_info[:3], "executable": sys.executable,
           "trt_version": None, "trt_error": None, "num_dla_cores": None, "pycuda_version": None,
           "pycuda_error": None}  # type: Dict[str, Any]
    try:
        import tensorrt as trt

        out["trt_version"] = str(trt.__version__)
        out["trt_path"] = getattr(trt, "__file__", None)
        try:
            logger = make_logger(trt, False)
            builder = trt.Builder(logger)
            out["num_dla_cores"] = int(builder.num_DLA_cores)
        except Exception as exc:  # a Builder needs a GPU
            out["builder_error"] = "%s: %s" % (type(exc).__name__, exc)
    except Exception as exc:
        out["trt_error"] = "%s: %s" % (type(exc).__name__, exc)
    out.update(cuda_probe())  # initialises the driver: `import pycuda` alone proves nothing
    return out


def handle(job):
    # type: (Dict[str, Any]) -> Dict[str, Any]
    op = job.get("op")
    if op == "probe":
        return probe(job)
    if op in ("measure", "pipeline", "replicas", "build"):
        try:
            import tensorrt  # noqa: F401
        except Exception as exc:
            return {"status": "unavailable", "error": "cannot import tensorrt: %s: %s" % (type(exc).__name__, exc)}
        if op == "build":
            return build_engines(job, inspect_built)
        return {"measure": measure, "pipeline": pipeline, "replicas": replicas}[op](job)
    return {"status": "error", "error": "unknown op %r" % (op,)}


def watch_parent(interval_s=0.5):
    # type: (float) -> None
    """Exit when placetune is gone. The worker runs in a session of its own
    and, while it builds or times, does not read stdin, so it would not see placetune die from
    SIGTERM or SIGKILL; a daemon thread notices the re-parenting (TensorRT releases the GIL
    while it builds) and ends the process."""
    parent = os.getppid()

    def watch():
        while True:
            time.sleep(interval_s)
            if os.getppid() != parent:
                os._exit(3)

    threading.Thread(target=watch, name="placetune-parent-watch", daemon=True).start()


def main():
    # type: () -> int
    watch_parent()
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything else written to stdout goes to stderr
    sys.stdout = sys.stderr

    def send(doc):
        proto.write(json.dumps(doc) + "\n")
        proto.flush()

    send({"hello": PROTOCOL, "python": "%d.%d.%d" % sys.version_info[:3], "pid": os.getpid()})
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        job = None
        try:
            job = json.loads(line)
            result = handle(job)
        except Exception as exc:
            result = {"status": "error", "error": "%s: %s" % (type(exc).__name__, exc),
                      "traceback": traceback.format_exc(limit=6)}
        if isinstance(job, dict) and "id" in job:
            result["id"] = job["id"]
        result["worker_memory"] = memory_usage()  # after the job's resources were freed: the parent recycles on growth
        send(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
