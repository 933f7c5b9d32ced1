"""The replicas op's all-at-once phase on a real GPU: one thread enqueuing every instance round-robin
(the worker before one thread per instance: ``old/worker_replicas_old.py``) against one thread per
instance (``placetune/backends/tensorrt/worker_replicas.py``), on the stand-in instances of
tests/test_cuda_layer.py (an NVRTC kernel spinning ``kernel_us`` plus ``host_ms`` of host time per
enqueue with the GIL released, as ``execute_async_v3`` releases it). No TensorRT. One JSON line
per case. Run from the repository root on a machine with a GPU and cuda-python::

    mkdir -p old && git show 0f36f30:placetune/backends/tensorrt/worker_replicas.py > old/worker_replicas_old.py
    python benchmarks/replicas_threads.py
"""
import json
import sys
sys.path.insert(0, "placetune/backends/tensorrt"); sys.path.insert(0, "tests"); sys.path.insert(0, "old")
import numpy as np
import worker_cuda, worker_resources
import test_cuda_layer as T
import worker_replicas as new
import worker_replicas_old as old
from cuda.bindings import driver as drv, nvrtc

layer = worker_cuda.driver()
dev = T._check("d", drv.cuDeviceGet(0))
a = drv.CUdevice_attribute
mj = T._check("a", drv.cuDeviceGetAttribute(a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev))
mn = T._check("a", drv.cuDeviceGetAttribute(a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))
err, prog = nvrtc.nvrtcCreateProgram(T.KERNEL.encode(), b"s.cu", 0, [], [])
opts = [f"--gpu-architecture=compute_{mj}{mn}".encode()]
nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
size = nvrtc.nvrtcGetPTXSize(prog)[1]; ptx = b" " * size; nvrtc.nvrtcGetPTX(prog, ptx)
kernel = T._check("f", drv.cuModuleGetFunction(T._check("m", drv.cuModuleLoadData(ptx)), b"affine"))
for n, spin, host in [(4, 20, 0.0), (4, 20, 0.5), (4, 500, 0.0)]:
    for name, mod in (("one thread (main)", old), ("thread per instance", new)):
        log = []
        mod.Engine = lambda trt, cuda, nm, plan, core, logger, shapes=None: T._Replica(
            cuda, kernel, nm, ["x"], "out", 2, 1, spin, host_ms=host, log=log)
        job = {"instances": [{"name": f"r{i}"} for i in range(n)], "iterations": 20, "warmup_ms": 50,
               "duration_s": 2.0, "timeline_iterations": 4, "seed": 1}
        out = {}
        held = layer.live()
        scope = worker_resources.Resources(layer)
        try:
            mod._run_replicas(None, scope, np, job, [None] * n, None, out)
        finally:
            scope.close()
        rows = out["instances"]
        print(json.dumps({"loop": name, "instances": n, "kernel_us": spin, "host_ms_per_enqueue": host,
                          "inferences": [r["inferences"] for r in rows], "total": sum(r["inferences"] for r in rows),
                          "window_ms": round(out["window_ms"], 1),
                          "aggregate_per_s": round(1000 * sum(r["inferences"] for r in rows) / out["window_ms"], 1),
                          "live_back": layer.live() == held, "device": layer.device_name()}))
