"""Test double of ``pycuda.driver``: init, Device, contexts, mem_alloc, memcpy, Stream, Event.

Only what placetune's worker calls exists; anything else raises AttributeError, as it
should in a test. Times come from the fake GPU clock in ``_fakegpu``.
"""

from __future__ import annotations

import _fakegpu as _gpu

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
        pass


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


def memcpy_htod(dest: DeviceAllocation, src) -> None:
    _check_copy(dest.size, memoryview(src).nbytes)


def memcpy_htod_async(dest: DeviceAllocation, src, stream: "Stream | None" = None) -> None:
    _check_copy(dest.size, memoryview(src).nbytes)


def memcpy_dtoh(dest, src: DeviceAllocation) -> None:
    _check_copy(src.size, memoryview(dest).nbytes)


class Stream:
    def __init__(self, flags: int = 0) -> None:
        _need_init()
        self.handle = _gpu.new_stream()

    def synchronize(self) -> None:
        pass

    def is_done(self) -> bool:
        return True


class Event:
    def __init__(self, flags: int = 0) -> None:
        self._t: float | None = None

    def record(self, stream: Stream | None = None) -> "Event":
        self._t = _gpu.now(stream.handle if stream is not None else 0)
        return self

    def synchronize(self) -> "Event":
        return self

    def query(self) -> bool:
        return True

    def time_since(self, start: "Event") -> float:
        if self._t is None or start._t is None:
            raise LogicError("cuEventElapsedTime failed: event not recorded")
        return self._t - start._t

    def time_till(self, end: "Event") -> float:
        return end.time_since(self)
