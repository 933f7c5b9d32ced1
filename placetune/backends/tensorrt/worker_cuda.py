"""The worker's CUDA layer: which binding runs (cuda-python's ``cuda.bindings`` or pycuda), once per process.

The only worker module that chooses a CUDA binding. The rest of the worker uses the object
:func:`driver` returns, a :class:`Cuda` (``worker_cuda_api``: streams, events, device and pinned
buffers, copies, each counted while alive) made by one of the adapters of ``worker_cuda_bindings``.
``close()`` pops the context; it also runs at exit, so that pycuda never aborts with "context stack
was not empty". The current context is per thread: another thread calls ``bind_thread()`` (pushes
it) before any CUDA call, ``bind_thread(False)`` at its end. A job makes its resources through
``worker_resources.Resources``, which frees them when the job ends.

Which binding: ``PLACETUNE_CUDA=cuda-python|pycuda`` picks one; otherwise cuda-python when it
imports and initialises (a wheel, no build step; as Polygraphy does), else pycuda.
:func:`probe` says which one works and, when none does, exactly what to install.
A sibling module of ``worker.py``: Python 3.8, stdlib + numpy + the binding, no placetune imports.
"""

import atexit
import os

try:  # Python 3.8 needs typing's generics
    from typing import Any, Dict, List, Optional, Tuple
except ImportError:  # pragma: no cover
    pass

from worker_cuda_api import Cuda, CudaError
from worker_cuda_bindings import ADAPTERS

__all__ = ["BINDINGS", "FIX", "Cuda", "CudaError", "close", "current", "driver", "probe"]

#: What to do when no binding works (doctor and selftest print it).
FIX = ("pip install cuda-python (wheels, no build; CUDA 12: 'cuda-python>=12,<13', CUDA 13 / JetPack 7: "
       "'cuda-python>=13'), or pycuda built against this CUDA: export PATH=/usr/local/cuda/bin:$PATH; "
       "pip install --no-build-isolation pycuda (JetPack 7 / CUDA 13 needs pycuda>=2025.1.2; on JetPack 5.1's "
       "system Python 3.8 build it against the system numpy 1.17.4: sudo apt-get install python3-dev "
       "python3-numpy, then python3 -m pip install --user --no-build-isolation 'pycuda<2024' (PyPI has no "
       "aarch64 numpy 1.17.4 wheel for Python 3.8), or a 'numpy.core.multiarray failed to import' ABI error follows)")
BINDINGS = ("cuda-python", "pycuda")
_STATE = {}  # type: Dict[str, Any]


def _order():
    # type: () -> List[str]
    want = os.environ.get("PLACETUNE_CUDA", "").strip()
    if want:
        if want not in ADAPTERS:
            raise CudaError("PLACETUNE_CUDA=%r: allowed values are %s" % (want, ", ".join(BINDINGS)))
        return [want]
    return list(BINDINGS)


def driver():
    # type: () -> Cuda
    """The CUDA layer with the primary context of device 0 current (once per process)."""
    if "layer" not in _STATE:
        errors = []
        for name in _order():
            try:
                layer = ADAPTERS[name]()
            except Exception as exc:
                errors.append("%s: %s: %s" % (name, type(exc).__name__, exc))
                continue
            _STATE["layer"] = layer
            atexit.register(close)
            break
        else:
            raise CudaError("no CUDA binding works in this Python (%s); fix: %s" % ("; ".join(errors), FIX))
    return _STATE["layer"]


def close():
    # type: () -> None
    """Pop the context (idempotent); registered at exit by :func:`driver`."""
    layer = _STATE.pop("layer", None)
    if layer is not None:
        layer.close()


def current():
    # type: () -> Optional[Cuda]
    """The layer if :func:`driver` made one in this process, else None (never initialises CUDA)."""
    return _STATE.get("layer")


def probe():
    # type: () -> Dict[str, Any]
    """Which binding works: ``{"cuda_binding", "cuda_version", "cuda_device", "cuda_error",
    "cuda_fix", "pycuda_version", "pycuda_error"}``; initialises the driver, never raises."""
    out = {"cuda_binding": None, "cuda_version": None, "cuda_device": None, "cuda_error": None, "cuda_fix": None,
           "pycuda_version": None, "pycuda_error": None}  # type: Dict[str, Any]
    try:
        layer = driver()
        out.update(cuda_binding=layer.name, cuda_version=layer.version, cuda_device=layer.device_name())
        if layer.name == "pycuda":
            out["pycuda_version"] = layer.version
    except Exception as exc:
        out["cuda_error"] = "%s: %s" % (type(exc).__name__, exc)
        out["cuda_fix"] = FIX
        out["pycuda_error"] = out["cuda_error"]
    return out
