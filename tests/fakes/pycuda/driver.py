"""Test double of ``pycuda.driver``: init, Device, contexts, mem_alloc, memcpy, Stream, Event.

Only what placetune's worker calls exists; anything else raises AttributeError, as it
should in a test. Asynchronous like CUDA (``_fakegpu``: per-stream clocks, a host clock
advanced by synchronize and query, device memory changed only as the host observes the time of
each write): ``*_async`` copies happen on their stream's copy engine, a host buffer filled by
``memcpy_dtoh_async`` holds its old bytes until the stream (or an event after the copy) is
synchronised, ``Event.query()`` is False until the work before the record is done, and
``time_since`` of an event not yet completed raises (CUDA_ERROR_NOT_READY). The blocking copies
run on the legacy default stream (after the work of blocking streams) and return when done. An
event that was never recorded is complete (as in CUDA), and ``Stream.wait_for_event`` on it does
not wait.
Resources are freed as pycuda frees them: a ``Stream`` or ``Event`` when its object goes (pycuda's
C++ destructors), a ``pagelocked_empty`` array's pinned memory by ``array.base.free()`` (its
``HostAllocation``) or when that goes; ``_fakegpu.live()`` counts what is alive.
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


def _need_context(call: str) -> None:
    """The current context is per thread: a thread that pushed none has none (pycuda's wording)."""
    if not _gpu.context_stack:
        raise LogicError(f"{call} failed: invalid device context - no currently active context?")


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
        _gpu.synchronize_all()


class device_attribute:  # noqa: N801 - pycuda's name (an enum of CUdevice_attribute)
    INTEGRATED = 18
    COMPUTE_CAPABILITY_MAJOR = 75
    COMPUTE_CAPABILITY_MINOR = 76


class mem_attach_flags:  # noqa: N801 - pycuda's name (CUmemAttach_flags)
    GLOBAL = 1
    HOST = 2
    SINGLE = 4


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

    def get_attribute(self, attr: int) -> int:
        values = {device_attribute.INTEGRATED: _gpu.INTEGRATED, device_attribute.COMPUTE_CAPABILITY_MAJOR: 8,
                  device_attribute.COMPUTE_CAPABILITY_MINOR: 7}
        if attr not in values:
            raise LogicError(f"cuDeviceGetAttribute failed: invalid value ({attr})")
        return values[attr]

    def make_context(self, flags: int = 0) -> Context:
        ctx = Context(self)
        ctx.push()
        return ctx

    def retain_primary_context(self) -> Context:
        return Context(self)


class _Releasable:
    """What pycuda's allocations share: ``free()`` releases the memory now (twice is pycuda's
    LogicError), and an allocation still held is released when it is collected."""

    _KIND = "allocation"
    ptr: int
    _valid: bool

    def free(self) -> None:
        if not self._valid:
            raise LogicError(f"{self._KIND}::free failed: invalid resource handle")
        self._valid = False
        _gpu.free(self.ptr)

    def __del__(self) -> None:
        try:
            if self._valid:
                self.free()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


class DeviceAllocation(_Releasable):
    """Freed by ``free()`` (a second ``free()`` is an error, as in pycuda) or when it goes."""

    def __init__(self, nbytes: int) -> None:
        self.ptr = _gpu.malloc(nbytes)
        self.size = int(nbytes)
        self._valid = True

    def __int__(self) -> int:
        return self.ptr

    __index__ = __int__

    _KIND = "device_allocation"


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


def _handle(stream: "Stream | None") -> int:
    return stream.handle if stream is not None else 0


def _host_bytes(src) -> bytes:
    return memoryview(src).cast("B").tobytes()


def _size(dest) -> int:
    """The bytes of a device allocation, or of the one an int pointer names (pycuda takes either)."""
    size = getattr(dest, "size", None)
    return int(size) if size is not None else _gpu.allocations.get(int(dest), 0)


def memcpy_htod(dest: DeviceAllocation, src) -> None:
    """Blocking: on the legacy default stream, returns once the copy is done."""
    view = memoryview(src)
    _check_copy(_size(dest), view.nbytes)
    data = _host_bytes(src)  # taken now: the host may reuse its buffer once this returns
    _gpu.observe(_gpu.htod(0, _ptr(dest), lambda: data)[1])


def memcpy_htod_async(dest: DeviceAllocation, src, stream: "Stream | None" = None) -> None:
    """On ``stream``: reads the host buffer when the copy runs, writes the device at its end."""
    view = memoryview(src)
    _check_copy(dest.size, view.nbytes)
    _gpu.htod(_handle(stream), _ptr(dest), lambda: _host_bytes(src))


def _into(dest):
    view = memoryview(dest).cast("B")

    def fill(data: bytes) -> None:
        view[:] = data

    return fill


def memcpy_dtoh(dest, src: DeviceAllocation) -> None:
    """Blocking: on the legacy default stream (after the blocking streams' work), returns once done."""
    view = memoryview(dest).cast("B")
    _check_copy(src.size, view.nbytes)
    _gpu.observe(_gpu.dtoh(0, _ptr(src), view.nbytes, _into(dest))[1])


def memcpy_dtoh_async(dest, src: DeviceAllocation, stream: "Stream | None" = None) -> None:
    """On ``stream``: the host buffer is filled at the copy's end, once the host has observed it
    (a read before that sees what was there before)."""
    view = memoryview(dest).cast("B")
    _check_copy(src.size, view.nbytes)
    _gpu.dtoh(_handle(stream), _ptr(src), view.nbytes, _into(dest))


def memcpy_dtod(dest: DeviceAllocation, src: DeviceAllocation, size: int) -> None:
    _check_copy(dest.size, size)
    _gpu.observe(_gpu.dtod(0, _ptr(dest), _ptr(src), size)[1])


def memcpy_dtod_async(dest: DeviceAllocation, src: DeviceAllocation, size: int, stream: "Stream | None" = None) -> None:
    _check_copy(dest.size, size)
    _gpu.dtod(_handle(stream), _ptr(dest), _ptr(src), size)


class HostAllocation(bytearray):
    """Pinned host memory (pycuda.driver.HostAllocation): the ``.base`` of a ``pagelocked_empty``
    array; ``free()`` releases it now (using the array afterwards is an error in pycuda)."""

    def __init__(self, nbytes: int) -> None:
        super().__init__(nbytes)
        self._held = int(nbytes)
        _gpu.count("pinned_buffers", 1)
        _gpu.count("pinned_bytes", self._held)

    def free(self) -> None:
        if self._held is not None:
            _gpu.count("pinned_buffers", -1)
            _gpu.count("pinned_bytes", -self._held)
            self._held = None

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def pagelocked_empty(shape, dtype, order: str = "C", mem_flags: int = 0):
    import numpy as np

    dt = np.dtype(dtype)
    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    count = 1
    for d in dims:
        count *= int(d)
    alloc = HostAllocation(max(count * dt.itemsize, 1))
    return np.ndarray(dims, dtype=dt, buffer=alloc, order=order)


class ManagedAllocation(bytearray, _Releasable):
    """Managed memory (pycuda.driver.ManagedAllocation): the ``.base`` of a ``managed_empty`` array;
    ``get_device_pointer()`` its address on the device, ``free()`` releases it now."""

    def __init__(self, nbytes: int, mem_flags: int) -> None:
        super().__init__(nbytes)
        self.ptr = _gpu.malloc(int(nbytes), int(mem_flags))
        self._valid = True

    def get_device_pointer(self) -> int:
        return self.ptr

    _KIND = "managed_allocation"


def managed_empty(shape, dtype, order: str = "C", mem_flags: int = 0, stream: "Stream | None" = None):
    import numpy as np

    _need_init()
    if mem_flags not in (mem_attach_flags.GLOBAL, mem_attach_flags.HOST):  # cuMemAllocManaged's flags
        raise LogicError("cuMemAllocManaged failed: invalid argument (mem_flags)")
    dt = np.dtype(dtype)
    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    count = 1
    for d in dims:
        count *= int(d)
    alloc = ManagedAllocation(max(count * dt.itemsize, 1), mem_flags)
    return np.ndarray(dims, dtype=dt, buffer=alloc, order=order)


class Stream:
    """``Stream(flags=0)``: a blocking stream (ordered with the legacy default stream), as
    ``cuStreamCreate(CU_STREAM_DEFAULT)``."""

    def __init__(self, flags: int = 0) -> None:
        _need_init()
        _need_context("cuStreamCreate")
        self.handle = _gpu.new_stream(blocking_stream=not (int(flags) & 1))

    def __del__(self) -> None:  # pycuda's ~stream(): cuStreamDestroy
        try:
            _gpu.destroy_stream(self.handle)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def synchronize(self) -> None:
        _gpu.observe(_gpu.record(self.handle))

    def is_done(self) -> bool:
        return _gpu.poll(_gpu.record(self.handle))

    def wait_for_event(self, event: "Event") -> None:
        if event._t is not None:
            _gpu.wait(self.handle, event._t)


class Event:
    def __init__(self, flags: int = 0) -> None:
        _need_context("cuEventCreate")
        self._t: float | None = None
        _gpu.count("events", 1)

    def __del__(self) -> None:  # pycuda's ~event(): cuEventDestroy
        try:
            _gpu.count("events", -1)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def record(self, stream: Stream | None = None) -> "Event":
        self._t = _gpu.record(stream.handle if stream is not None else 0)
        return self

    def synchronize(self) -> "Event":
        if self._t is not None:
            _gpu.observe(self._t)
        return self

    def query(self) -> bool:
        """True once the work before the record is done (an event never recorded: True)."""
        return True if self._t is None else _gpu.poll(self._t)

    def time_since(self, start: "Event") -> float:
        if self._t is None or start._t is None:
            raise LogicError("cuEventElapsedTime failed: invalid resource handle (event not recorded)")
        if max(self._t, start._t) > _gpu.host_now + 1e-12:
            # CUDA: cuEventElapsedTime returns CUDA_ERROR_NOT_READY until both events completed
            raise LogicError("cuEventElapsedTime failed: device not ready")
        return self._t - start._t

    def time_till(self, end: "Event") -> float:
        return end.time_since(self)
