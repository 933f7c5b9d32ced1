"""The worker's CUDA interface and what it holds: :class:`Cuda`, which each binding adapter implements, and its counts.

The rest of the worker uses a :class:`Cuda`: ``Stream()`` (``.handle`` as an int for
``execute_async_v3``, ``.synchronize()``, ``.wait_for_event(event)``), ``Event()``
(``.record(stream)``, ``.synchronize()``, ``.query()``, ``.time_since(start)`` in ms),
``mem_alloc(nbytes, managed=False)`` (``int(mem)`` is the device address, ``.free()``), ``integrated()``,
``pagelocked_empty(shape, dtype)`` (a numpy array in pinned host memory), blocking and
``*_async`` copies, ``synchronize()`` and ``close()``.

Ownership: every stream, event, device and pinned host buffer the layer makes can be freed
(``stream.destroy()``, ``event.destroy()``, ``mem.free()``, ``free_pagelocked(array)``) and is
counted while alive (``live()``: streams, events, pinned and device bytes; :meth:`Cuda.count`,
thread-safe). A job makes its resources through ``worker_resources.Resources``, which frees them
when the job ends. The adapters are in ``worker_cuda_bindings``; which one runs, ``worker_cuda``.
A sibling module of ``worker.py``: Python 3.8, stdlib only, no placetune imports.
"""

import threading

try:  # Python 3.8 needs typing's generics
    from typing import Any, Dict, List, Optional, Tuple
except ImportError:  # pragma: no cover
    pass

_COUNT_LOCK = threading.Lock()  # the counts change from several threads (the replicas op's enqueue threads)


class CudaError(RuntimeError):
    """A CUDA call failed (the message names the call and the CUDA error)."""


class Cuda(object):
    """The interface. ``name`` is ``cuda-python`` or ``pycuda``; ``version`` its version."""

    counts = {}  # type: Dict[str, int]  # what the layer holds: each binding's __init__ sets its own

    name = ""
    version = ""

    def Stream(self):  # noqa: N802 - pycuda's spelling, which the worker uses
        # type: () -> Any
        raise NotImplementedError

    def Event(self):  # noqa: N802
        # type: () -> Any
        raise NotImplementedError

    def mem_alloc(self, nbytes, managed=False):
        # type: (int, bool) -> Any
        """Device memory; ``managed``: managed memory attached globally (``cuMemAllocManaged`` with
        ``CU_MEM_ATTACH_GLOBAL``, as trtexec's ``cudaMallocManaged`` default), freed the same way."""
        raise NotImplementedError

    def integrated(self):
        # type: () -> bool
        """Whether the GPU is integrated (shares the host's memory: a Jetson), ``CU_DEVICE_ATTRIBUTE_INTEGRATED``."""
        raise NotImplementedError

    def pagelocked_empty(self, shape, dtype):
        # type: (Tuple[int, ...], Any) -> Any
        raise NotImplementedError

    def memcpy_htod(self, mem, host):
        # type: (Any, Any) -> None
        raise NotImplementedError

    def memcpy_dtoh(self, host, mem):
        # type: (Any, Any) -> None
        raise NotImplementedError

    def memcpy_htod_async(self, mem, host, stream):
        # type: (Any, Any, Any) -> None
        raise NotImplementedError

    def memcpy_dtoh_async(self, host, mem, stream):
        # type: (Any, Any, Any) -> None
        raise NotImplementedError

    def memcpy_dtod_async(self, dst, src, nbytes, stream):
        # type: (Any, Any, int, Any) -> None
        raise NotImplementedError

    def synchronize(self):
        # type: () -> None
        raise NotImplementedError

    def device_name(self):
        # type: () -> str
        raise NotImplementedError

    def close(self):
        # type: () -> None
        raise NotImplementedError

    def free_pagelocked(self, array):
        # type: (Any) -> None
        """Free a buffer of :meth:`pagelocked_empty` now (the array must not be used after)."""
        raise NotImplementedError

    def own(self, thing):
        # type: (Any) -> Any
        """Take ``thing`` (anything with ``close()``) to free with the job's resources; the
        process-wide layer frees nothing per job (``worker_resources.Resources`` does)."""
        return thing

    def live(self):
        # type: () -> Dict[str, int]
        """What the layer holds now: ``streams``, ``events``, ``pinned_bytes``, ``device_bytes``
        (and the buffers' counts)."""
        return dict(self.counts)

    def count(self, kind, delta, nbytes=0):
        # type: (str, int, int) -> None
        """``delta`` more (or fewer) ``streams``/``events``, or ``pinned``/``device`` buffers of ``nbytes``."""
        with _COUNT_LOCK:
            if kind in ("pinned", "device"):
                self.counts[kind + "_bytes"] += delta * nbytes
                kind += "_buffers"
            self.counts[kind] += delta



def new_counts():
    # type: () -> Dict[str, int]
    """Zero counts of everything a binding adapter holds (its ``counts`` at start)."""
    return {"streams": 0, "events": 0, "pinned_buffers": 0, "pinned_bytes": 0, "device_buffers": 0,
            "device_bytes": 0}
