"""The two adapters of the worker's CUDA interface: pycuda's and cuda-python's driver API.

:class:`Pycuda` wraps ``pycuda.driver``; :class:`CudaPython` calls cuda-python's
``cuda.bindings.driver`` (``cuda.cuda`` in older wheels), where every call returns
``(CUresult, *values)`` and :meth:`CudaPython.check` turns a failure into a ``CudaError`` naming
the call. Each makes the streams, events and device buffers of the interface
(``worker_cuda_api.Cuda``) and counts them while alive; each takes device 0's primary context
when made and pops it at ``close()``. A binding is imported only when its adapter is made;
:data:`ADAPTERS` is what ``worker_cuda`` chooses from.
A sibling module of ``worker.py``: Python 3.8, stdlib + numpy + the binding, no placetune imports.
"""

import ctypes

try:  # Python 3.8 needs typing's generics
    from typing import Any, Dict, List, Optional, Tuple
except ImportError:  # pragma: no cover
    pass

from worker_cuda_api import Cuda, CudaError, new_counts


class _PcStream(object):
    """A pycuda stream: pycuda frees it when its object goes, so the wrapper holds the only reference."""

    obj = None  # type: Any

    def __init__(self, layer):
        # type: (Pycuda) -> None
        self.layer = layer
        self.obj = layer.cuda.Stream()
        self.handle = int(self.obj.handle)
        layer.count("streams", 1)

    def synchronize(self):
        # type: () -> None
        self.obj.synchronize()

    def wait_for_event(self, event):
        # type: (_PcEvent) -> None
        self.obj.wait_for_event(event.obj)

    def destroy(self):
        # type: () -> None
        if self.obj is not None:
            self.obj = None  # the last reference: pycuda's destructor calls cuStreamDestroy
            self.layer.count("streams", -1)

    __del__ = destroy  # dropped without destroy(): pycuda frees it all the same


class _PcEvent(object):
    obj = None  # type: Any

    def __init__(self, layer):
        # type: (Pycuda) -> None
        self.layer = layer
        self.obj = layer.cuda.Event()
        layer.count("events", 1)

    def record(self, stream=None):
        # type: (Optional[_PcStream]) -> _PcEvent
        self.obj.record(stream.obj if stream is not None else None)
        return self

    def synchronize(self):
        # type: () -> _PcEvent
        self.obj.synchronize()
        return self

    def query(self):
        # type: () -> bool
        return bool(self.obj.query())

    def time_since(self, start):
        # type: (_PcEvent) -> float
        return float(self.obj.time_since(start.obj))

    def destroy(self):
        # type: () -> None
        if self.obj is not None:
            self.obj = None  # pycuda's destructor calls cuEventDestroy
            self.layer.count("events", -1)

    __del__ = destroy


class _PcMem(object):
    obj = None  # type: Any

    def __init__(self, layer, nbytes, managed=False):
        # type: (Pycuda, int, bool) -> None
        self.layer, self.size = layer, nbytes
        if managed:  # a ManagedAllocation (the .base of pycuda's managed_empty array), attached globally
            cuda = layer.cuda
            self.obj = cuda.managed_empty((nbytes,), "uint8", mem_flags=cuda.mem_attach_flags.GLOBAL).base
        else:
            self.obj = layer.cuda.mem_alloc(nbytes)
        self.managed = bool(managed)
        layer.count("device", 1, nbytes)

    def __int__(self):
        # type: () -> int
        return int(self.obj.get_device_pointer() if self.managed else self.obj)

    __index__ = __int__

    def free(self):
        # type: () -> None
        if self.obj is not None:
            obj, self.obj = self.obj, None
            self.layer.count("device", -1, self.size)
            obj.free()

    def __del__(self):
        # type: () -> None
        if self.obj is not None:  # dropped without free(): pycuda's destructor frees it
            self.obj = None
            self.layer.count("device", -1, self.size)


class Pycuda(Cuda):
    name = "pycuda"

    def __init__(self):
        # type: () -> None
        import pycuda
        import pycuda.driver as cuda  # the compiled driver: `import pycuda` alone loads only the version

        self.version = str(getattr(pycuda, "VERSION_TEXT", "unknown"))
        cuda.init()
        self.dev = cuda.Device(0)
        self.ctx = self.dev.retain_primary_context()
        self.ctx.push()
        self.cuda = cuda
        self.counts = new_counts()
        self.pinned = {}  # type: Dict[int, int]

    def Stream(self):  # noqa: N802
        return _PcStream(self)

    def Event(self):  # noqa: N802
        return _PcEvent(self)

    def mem_alloc(self, nbytes, managed=False):
        return _PcMem(self, max(int(nbytes), 1), managed)

    def integrated(self):
        return bool(self.dev.get_attribute(self.cuda.device_attribute.INTEGRATED))

    def pagelocked_empty(self, shape, dtype):
        array = self.cuda.pagelocked_empty(tuple(shape), dtype)
        # counted until free_pagelocked (an array merely dropped is freed by pycuda, uncounted);
        # no reference kept here: it would hold the memory
        self.pinned[int(array.ctypes.data)] = int(array.nbytes)
        self.count("pinned", 1, int(array.nbytes))
        return array

    def free_pagelocked(self, array):
        nbytes = self.pinned.pop(int(array.ctypes.data), None)
        if nbytes is not None:
            self.count("pinned", -1, nbytes)
            array.base.free()  # pycuda's array.base is its HostAllocation: the pinned memory goes now

    def memcpy_htod(self, mem, host):
        self.cuda.memcpy_htod(int(mem) if mem.managed else mem.obj, host)

    def memcpy_dtoh(self, host, mem):
        self.cuda.memcpy_dtoh(host, mem.obj)

    def memcpy_htod_async(self, mem, host, stream):
        self.cuda.memcpy_htod_async(mem.obj, host, stream.obj)

    def memcpy_dtoh_async(self, host, mem, stream):
        self.cuda.memcpy_dtoh_async(host, mem.obj, stream.obj)

    def memcpy_dtod_async(self, dst, src, nbytes, stream):
        self.cuda.memcpy_dtod_async(dst.obj, src.obj, int(nbytes), stream.obj)

    def synchronize(self):
        self.ctx.synchronize()

    def device_name(self):
        return str(self.dev.name())

    def bind_thread(self, on=True):  # pycuda keeps a context stack per thread
        self.ctx.push() if on else self.ctx.pop()

    def close(self):
        if self.ctx is not None:
            self.pinned = {}  # what was not freed goes with its arrays
            self.ctx.pop()
            self.ctx = None



def _cuda_bindings():
    # type: () -> Tuple[Any, str]
    try:
        from cuda.bindings import driver as drv  # cuda-python >= 12.6
    except ImportError:
        from cuda import cuda as drv  # type: ignore  # older cuda-python (JetPack 5.1's CUDA 11.4 wheels)
    try:
        from cuda import bindings

        version = str(getattr(bindings, "__version__", "unknown"))
    except ImportError:
        import cuda

        version = str(getattr(cuda, "__version__", "unknown"))
    return drv, version


class _CpMem(object):
    def __init__(self, layer, ptr, nbytes):
        # type: (CudaPython, Any, int) -> None
        self.layer, self.ptr, self.size = layer, ptr, nbytes
        layer.count("device", 1, nbytes)

    def __int__(self):
        # type: () -> int
        return int(self.ptr)

    __index__ = __int__

    def free(self):
        # type: () -> None
        if self.ptr is not None:
            ptr, self.ptr = self.ptr, None
            self.layer.count("device", -1, self.size)
            self.layer.check("cuMemFree", self.layer.drv.cuMemFree(ptr))


class _CpStream(object):
    def __init__(self, layer):
        # type: (CudaPython) -> None
        self.layer = layer
        self.obj = layer.check("cuStreamCreate", layer.drv.cuStreamCreate(1))  # CU_STREAM_NON_BLOCKING
        self.handle = _as_int(self.obj)
        layer.count("streams", 1)

    def destroy(self):
        # type: () -> None
        """cuStreamDestroy (work already enqueued still completes, as CUDA says)."""
        if self.obj is not None:
            obj, self.obj = self.obj, None
            self.layer.count("streams", -1)
            self.layer.check("cuStreamDestroy", self.layer.drv.cuStreamDestroy(obj))

    def synchronize(self):
        # type: () -> None
        self.layer.check("cuStreamSynchronize", self.layer.drv.cuStreamSynchronize(self.obj))

    def wait_for_event(self, event):
        # type: (_CpEvent) -> None
        self.layer.check("cuStreamWaitEvent", self.layer.drv.cuStreamWaitEvent(self.obj, event.obj, 0))


class _CpEvent(object):
    def __init__(self, layer):
        # type: (CudaPython) -> None
        self.layer = layer
        self.obj = layer.check("cuEventCreate", layer.drv.cuEventCreate(0))  # CU_EVENT_DEFAULT: timed
        layer.count("events", 1)

    def destroy(self):
        # type: () -> None
        if self.obj is not None:
            obj, self.obj = self.obj, None
            self.layer.count("events", -1)
            self.layer.check("cuEventDestroy", self.layer.drv.cuEventDestroy(obj))

    def record(self, stream=None):
        # type: (Optional[_CpStream]) -> _CpEvent
        self.layer.check("cuEventRecord", self.layer.drv.cuEventRecord(self.obj, stream.obj if stream else 0))
        return self

    def synchronize(self):
        # type: () -> _CpEvent
        self.layer.check("cuEventSynchronize", self.layer.drv.cuEventSynchronize(self.obj))
        return self

    def query(self):
        # type: () -> bool
        err = self.layer.drv.cuEventQuery(self.obj)[0]
        if _code(err) == _code(self.layer.drv.CUresult.CUDA_ERROR_NOT_READY):
            return False
        self.layer.check("cuEventQuery", (err,))
        return True

    def time_since(self, start):
        # type: (_CpEvent) -> float
        """Milliseconds from ``start`` to this event: ``cuEventElapsedTime_v2`` (CUDA 12.8 on; the
        cuda-python 13 bindings have it) where the driver has it, else ``cuEventElapsedTime``. A
        binding newer than the driver (cuda-python 13 on a JetPack 6 / CUDA 12.x driver) raises
        ``RuntimeError('Function "cuEventElapsedTime_v2" not found')`` or returns
        ``CUDA_ERROR_NOT_FOUND``: then the old entry point is used from then on."""
        drv = self.layer.drv
        fn = getattr(drv, "cuEventElapsedTime_v2", None)
        if fn is not None and not self.layer.no_elapsed_v2:
            try:
                ret = fn(start.obj, self.obj)
            except RuntimeError:  # the driver lacks the symbol
                ret = None
            if ret is not None and _code(ret[0]) != _code(drv.CUresult.CUDA_ERROR_NOT_FOUND):
                return float(self.layer.check("cuEventElapsedTime_v2", ret))
            self.layer.no_elapsed_v2 = True
        return float(self.layer.check("cuEventElapsedTime", drv.cuEventElapsedTime(start.obj, self.obj)))


def _code(err):
    # type: (Any) -> int
    return int(getattr(err, "value", err))


def _as_int(handle):
    # type: (Any) -> int
    try:
        return int(handle)
    except TypeError:
        return int(handle.getPtr())


def _host_ptr(array):
    # type: (Any) -> int
    if not array.flags["C_CONTIGUOUS"]:
        raise CudaError("host buffer must be C-contiguous")
    return int(array.ctypes.data)


class CudaPython(Cuda):
    """cuda-python's driver API: every call returns a tuple ``(CUresult, *values)``."""

    name = "cuda-python"

    def __init__(self):
        # type: () -> None
        self.drv, self.version = _cuda_bindings()
        self.ctx = None
        self.pinned = {}  # type: Dict[int, int]
        self.counts = new_counts()
        self.no_elapsed_v2 = False  # the driver lacks cuEventElapsedTime_v2 (Event.time_since)
        self.check("cuInit", self.drv.cuInit(0))
        self.dev = self.check("cuDeviceGet", self.drv.cuDeviceGet(0))
        self.ctx = self.check("cuDevicePrimaryCtxRetain", self.drv.cuDevicePrimaryCtxRetain(self.dev))
        self.check("cuCtxPushCurrent", self.drv.cuCtxPushCurrent(self.ctx))

    def check(self, call, result):
        # type: (str, Any) -> Any
        err = result[0]
        if _code(err) != 0:
            try:
                name = self.drv.cuGetErrorName(err)[1]
                name = name.decode() if isinstance(name, bytes) else str(name)
            except Exception:  # pragma: no cover - the name is informative only
                name = str(err)
            raise CudaError("%s failed: %s (%d)" % (call, name, _code(err)))
        rest = result[1:]
        return rest[0] if len(rest) == 1 else (rest or None)

    def Stream(self):  # noqa: N802
        return _CpStream(self)

    def Event(self):  # noqa: N802
        return _CpEvent(self)

    def mem_alloc(self, nbytes, managed=False):
        n = max(int(nbytes), 1)
        if managed:  # freed by cuMemFree as any device allocation
            flags = int(self.drv.CUmemAttach_flags.CU_MEM_ATTACH_GLOBAL)  # an unsigned int parameter
            return _CpMem(self, self.check("cuMemAllocManaged", self.drv.cuMemAllocManaged(n, flags)), n)
        return _CpMem(self, self.check("cuMemAlloc", self.drv.cuMemAlloc(n)), n)

    def integrated(self):
        attr = self.drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_INTEGRATED
        return bool(self.check("cuDeviceGetAttribute", self.drv.cuDeviceGetAttribute(attr, self.dev)))

    def pagelocked_empty(self, shape, dtype):
        import numpy as np

        dt = np.dtype(dtype)
        count = 1
        for d in shape:
            count *= int(d)
        nbytes = max(count * dt.itemsize, 1)
        ptr = _as_int(self.check("cuMemHostAlloc", self.drv.cuMemHostAlloc(nbytes, 0)))
        self.pinned[ptr] = nbytes
        self.count("pinned", 1, nbytes)
        raw = (ctypes.c_byte * nbytes).from_address(ptr)
        return np.frombuffer(raw, dtype=np.uint8, count=count * dt.itemsize).view(dt).reshape(tuple(shape))

    def free_pagelocked(self, array):
        ptr = int(array.ctypes.data)
        nbytes = self.pinned.pop(ptr, None)
        if nbytes is not None:
            self.count("pinned", -1, nbytes)
            self.check("cuMemFreeHost", self.drv.cuMemFreeHost(ptr))

    def memcpy_htod(self, mem, host):
        self.check("cuMemcpyHtoD", self.drv.cuMemcpyHtoD(mem.ptr, _host_ptr(host), host.nbytes))

    def memcpy_dtoh(self, host, mem):
        self.check("cuMemcpyDtoH", self.drv.cuMemcpyDtoH(_host_ptr(host), mem.ptr, host.nbytes))

    def memcpy_htod_async(self, mem, host, stream):
        self.check("cuMemcpyHtoDAsync", self.drv.cuMemcpyHtoDAsync(mem.ptr, _host_ptr(host), host.nbytes, stream.obj))

    def memcpy_dtoh_async(self, host, mem, stream):
        self.check("cuMemcpyDtoHAsync", self.drv.cuMemcpyDtoHAsync(_host_ptr(host), mem.ptr, host.nbytes, stream.obj))

    def memcpy_dtod_async(self, dst, src, nbytes, stream):
        self.check("cuMemcpyDtoDAsync", self.drv.cuMemcpyDtoDAsync(dst.ptr, src.ptr, int(nbytes), stream.obj))

    def synchronize(self):
        self.check("cuCtxSynchronize", self.drv.cuCtxSynchronize())

    def device_name(self):
        name = self.check("cuDeviceGetName", self.drv.cuDeviceGetName(256, self.dev))
        return (name.decode(errors="replace") if isinstance(name, bytes) else str(name)).split("\x00")[0]

    def bind_thread(self, on=True):  # this thread's context stack: the retained primary context pushed, or popped
        self.check("cuCtxPushCurrent" if on else "cuCtxPopCurrent",
                   self.drv.cuCtxPushCurrent(self.ctx) if on else self.drv.cuCtxPopCurrent())

    def close(self):
        if self.ctx is None:
            return
        self.check("cuCtxSynchronize", self.drv.cuCtxSynchronize())
        for ptr in self.pinned:
            self.drv.cuMemFreeHost(ptr)
        self.pinned = {}
        self.check("cuCtxPopCurrent", self.drv.cuCtxPopCurrent())
        self.check("cuDevicePrimaryCtxRelease", self.drv.cuDevicePrimaryCtxRelease(self.dev))
        self.ctx = None



ADAPTERS = {"cuda-python": CudaPython, "pycuda": Pycuda}
