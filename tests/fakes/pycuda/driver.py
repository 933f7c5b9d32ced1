"""Test double of ``pycuda.driver``: init, Device, contexts, mem_alloc, memcpy, Stream, Event.

Only what placetune's worker calls exists; anything else raises AttributeError, as it
should in a test. Times come from the fake GPU clocks in ``_fakegpu`` (see its docstring:
per-stream clocks, a host clock advanced by synchronize/query, one piece of work at a time
per device). Device memory holds real bytes: ``memcpy_htod`` / ``memcpy_dtoh`` copy them,
the fake TensorRT computes on them. Copies are instantaneous; an event that was never recorded is complete
(as in CUDA), and ``Stream.wait_for_event`` on it does not wait.
``PLACETUNE_FAKE_TRT_PYCUDA_DRIVER_ERROR`` makes this module fail to import with that message
(``import pycuda`` still works, as with a pycuda built against another numpy).
"""

from __future__ import annotations

import os

import _fakegpu as _gpu

if os.environ.get("PLACETUNE_FAKE_TRT_PYCUDA_DRIVER_ERROR"):  # e.g. JetPack 5.1's numpy ABI mismatch
    raise ImportError(os.environ["PLACETUNE_FAKE_TRT_PYCUDA_DRIVER_ERROR"])

_initialised = False


class Error(Exception):
    """pycuda.driver.Error."""


class LogicError(Error):
    """pycuda.driver.LogicError."""


def init(flags: int = 0) -> None:
    global _initialised
    _initialised = True


def _need_init() -> None:
    if not _initialised:
        raise LogicError("cuInit failed: not initialized (call pycuda.driver.init() first)")


class Context:
    def __init__(self, device: "Device") -> None:
        self._device = device

    def push(self) -> None:
        _gpu.context_stack.append(self)

    def pop(self) -> None:
        if _gpu.context_stack:
            _gpu.context_stack.pop()

    def detach(self) -> None:
        self.pop()

    def get_device(self) -> "Device":
        return self._device

    def synchronize(self) -> None:
        for t in list(_gpu.clocks.values()):
            _gpu.observe(t)


class Device:
    def __init__(self, ordinal: int) -> None:
        _need_init()
        if ordinal != 0:
            raise LogicError(f"cuDeviceGet failed: invalid device ordinal {ordinal}")
        self.ordinal = ordinal

    @staticmethod
    def count() -> int:
        _need_init()
        return 1

    def name(self) -> str:
        return "Orin (fake)"

    def compute_capability(self) -> tuple[int, int]:
        return (8, 7)

    def total_memory(self) -> int:
        return 32 << 30

    def make_context(self, flags: int = 0) -> Context:
        ctx = Context(self)
        ctx.push()
        return ctx

    def retain_primary_context(self) -> Context:
        return Context(self)


class DeviceAllocation:
    def __init__(self, nbytes: int) -> None:
        self.ptr = _gpu.malloc(nbytes)
        self.size = int(nbytes)

    def __int__(self) -> int:
        return self.ptr

    __index__ = __int__

    def free(self) -> None:
        _gpu.free(self.ptr)


def mem_alloc(nbytes: int) -> DeviceAllocation:
    _need_init()
    if nbytes <= 0:
        raise LogicError("cuMemAlloc failed: invalid argument (size must be > 0)")
    return DeviceAllocation(nbytes)


def _check_copy(dest_size: int, nbytes: int) -> None:
    if nbytes > dest_size:
        raise LogicError(f"cuMemcpy failed: {nbytes} bytes into an allocation of {dest_size}")


def _ptr(x) -> int:
    ptr = int(x)
    if ptr not in _gpu.memory:
        raise LogicError(f"cuMemcpy failed: invalid device pointer {ptr:#x}")
    return ptr


def memcpy_htod(dest: DeviceAllocation, src) -> None:
    view = memoryview(src)
    _check_copy(dest.size, view.nbytes)
    _gpu.write(_ptr(dest), view)


def memcpy_htod_async(dest: DeviceAllocation, src, stream: "Stream | None" = None) -> None:
    memcpy_htod(dest, src)


def memcpy_dtoh(dest, src: DeviceAllocation) -> None:
    view = memoryview(dest).cast("B")
    _check_copy(src.size, view.nbytes)
    view[:] = _gpu.read(_ptr(src), view.nbytes)


def memcpy_dtoh_async(dest, src: DeviceAllocation, stream: "Stream | None" = None) -> None:
    memcpy_dtoh(dest, src)


def memcpy_dtod(dest: DeviceAllocation, src: DeviceAllocation, size: int) -> None:
    _check_copy(dest.size, size)
    _gpu.write(_ptr(dest), _gpu.read(_ptr(src), size))


def memcpy_dtod_async(dest: DeviceAllocation, src: DeviceAllocation, size: int, stream: "Stream | None" = None) -> None:
    memcpy_dtod(dest, src, size)


def pagelocked_empty(shape, dtype, order: str = "C", mem_flags: int = 0):
    import numpy as np

    return np.empty(shape, dtype=dtype, order=order)


class Stream:
    def __init__(self, flags: int = 0) -> None:
        _need_init()
        self.handle = _gpu.new_stream()

    def synchronize(self) -> None:
        _gpu.observe(_gpu.now(self.handle))

    def is_done(self) -> bool:
        _gpu.observe(_gpu.now(self.handle))
        return True

    def wait_for_event(self, event: "Event") -> None:
        if event._t is not None:
            _gpu.wait(self.handle, event._t)


class Event:
    def __init__(self, flags: int = 0) -> None:
        self._t: float | None = None

    def record(self, stream: Stream | None = None) -> "Event":
        self._t = _gpu.record(stream.handle if stream is not None else 0)
        return self

    def synchronize(self) -> "Event":
        if self._t is not None:
            _gpu.observe(self._t)
        return self

    def query(self) -> bool:
        if self._t is not None:
            _gpu.observe(self._t)
        return True

    def time_since(self, start: "Event") -> float:
        if self._t is None or start._t is None:
            raise LogicError("cuEventElapsedTime failed: event not recorded")
        return self._t - start._t

    def time_till(self, end: "Event") -> float:
        return end.time_since(self)
