"""Test double of ``cuda.bindings.driver``: every call returns a tuple ``(CUresult, outputs...)``, as
the real bindings do (NVIDIA/cuda-python cuda_bindings/cuda/bindings/driver.pyx.in), on the
asynchronous fake GPU of ``_fakegpu`` (its docstring says what that models).

Semantics followed (CUDA Driver API reference, Stream and Event Management): ``cuEventQuery``
returns ``CUDA_ERROR_NOT_READY`` until the work before the record is done and ``CUDA_SUCCESS``
for an event never recorded; ``cuEventElapsedTime`` returns ``CUDA_ERROR_NOT_READY`` unless both
events have completed and ``CUDA_ERROR_INVALID_HANDLE`` for one never recorded;
``cuStreamCreate(CU_STREAM_NON_BLOCKING)`` makes a stream the legacy default stream does not
order; ``*Async`` copies run on their stream, the blocking ones on the legacy default stream
and return when done. Kernels come from the nvrtc double (only the kernels it knows).
A call that makes something (a stream, an event, memory) or launches a kernel needs a current
context in the calling thread, else ``CUDA_ERROR_INVALID_CONTEXT`` (the current context is per
thread: a new thread has none until it pushes or sets one); every call holds the fake GPU's lock.
"""

from __future__ import annotations

import ctypes
import enum
import itertools

import _fakegpu as _gpu


class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_NOT_INITIALIZED = 3
    CUDA_ERROR_INVALID_CONTEXT = 201
    CUDA_ERROR_INVALID_HANDLE = 400
    CUDA_ERROR_NOT_FOUND = 500
    CUDA_ERROR_NOT_READY = 600


class CUdevice_attribute(enum.IntEnum):  # noqa: N801 - the real name
    CU_DEVICE_ATTRIBUTE_INTEGRATED = 18
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76


class CUmemAttach_flags(enum.IntEnum):  # noqa: N801 - the real name (cuda.h CUmemAttach_flags_enum)
    CU_MEM_ATTACH_GLOBAL = 0x1
    CU_MEM_ATTACH_HOST = 0x2
    CU_MEM_ATTACH_SINGLE = 0x4


class _Handle:
    """CUstream, CUevent, CUdeviceptr...: ``int()`` and ``getPtr()`` give the address."""

    def __init__(self, init_value: int = 0) -> None:
        self._value = int(init_value)

    def __int__(self) -> int:
        return self._value

    __index__ = __int__

    def getPtr(self) -> int:  # noqa: N802 - the real name
        return self._value

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._value:#x}>"


class CUstream(_Handle):
    pass


class CUevent(_Handle):
    pass


class CUdeviceptr(_Handle):
    pass


class CUcontext(_Handle):
    pass


class CUdevice(_Handle):
    pass


class CUmodule(_Handle):
    pass


class CUfunction(_Handle):
    pass


_S = CUresult.CUDA_SUCCESS
_state = {"init": False}
_events: dict[int, float | None] = {}
_next_event = itertools.count(0x9000)
_host: dict[int, object] = {}  # pinned host buffers, by address (kept alive)
#: every host-to-device copy, in order: ``{"blocking": bool, "pinned": bool}`` (``pinned``: its source
#: lies in a buffer of cuMemHostAlloc), so a test can check that no copy reads pageable memory
htod_copies: list[dict[str, bool]] = []
_functions: dict[int, object] = {}
_next_function = itertools.count(0xF000)


def _stream(h) -> int:
    value = int(h) if h is not None else 0
    if value and value not in _gpu.clocks:
        raise ValueError(f"invalid stream {value:#x}")
    return value


def cuInit(flags: int):  # noqa: N802 - the real names, here and below
    _state["init"] = True
    return (_S,)


def cuDeviceGet(ordinal: int):
    if not _state["init"]:
        return (CUresult.CUDA_ERROR_NOT_INITIALIZED, None)
    if ordinal != 0:
        return (CUresult.CUDA_ERROR_INVALID_VALUE, None)
    return (_S, CUdevice(0))


def cuDeviceGetName(length: int, dev):
    return (_S, b"Orin (fake cuda-python)".ljust(length, b"\x00"))


def cuDeviceGetAttribute(attrib, dev):
    value = {CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: 8,
             CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: 7,
             CUdevice_attribute.CU_DEVICE_ATTRIBUTE_INTEGRATED: _gpu.INTEGRATED}.get(attrib)
    return (_S, value) if value is not None else (CUresult.CUDA_ERROR_INVALID_VALUE, None)


def cuDevicePrimaryCtxRetain(dev):
    return (_S, CUcontext(0xC0))


def cuDevicePrimaryCtxRelease(dev):
    return (_S,)


def cuCtxPushCurrent(ctx):
    _gpu.context_stack.append(ctx)
    return (_S,)


def cuCtxPopCurrent():
    if not _gpu.context_stack:
        return (CUresult.CUDA_ERROR_INVALID_CONTEXT, None)
    return (_S, _gpu.context_stack.pop())


def cuCtxSynchronize():
    _gpu.synchronize_all()
    return (_S,)


def cuGetErrorName(error):
    return (_S, CUresult(int(error)).name.encode())


def _no_context():
    return not _gpu.context_stack


def cuStreamCreate(flags: int):
    if _no_context():
        return (CUresult.CUDA_ERROR_INVALID_CONTEXT, None)
    return (_S, CUstream(_gpu.new_stream(blocking_stream=not (int(flags) & 1))))


def cuStreamDestroy(stream):
    return (_S if _gpu.destroy_stream(int(stream)) else CUresult.CUDA_ERROR_INVALID_HANDLE,)


def cuStreamSynchronize(stream):
    _gpu.observe(_gpu.record(_stream(stream)))
    return (_S,)


def cuStreamQuery(stream):
    done = _gpu.poll(_gpu.record(_stream(stream)))
    return (_S if done else CUresult.CUDA_ERROR_NOT_READY,)


def cuStreamWaitEvent(stream, event, flags: int):
    if int(event) not in _events:
        return (CUresult.CUDA_ERROR_INVALID_HANDLE,)
    t = _events.get(int(event))
    if t is not None:
        _gpu.wait(_stream(stream), t)
    return (_S,)


def cuEventCreate(flags: int):
    if _no_context():
        return (CUresult.CUDA_ERROR_INVALID_CONTEXT, None)
    ev = CUevent(next(_next_event))
    _events[int(ev)] = None
    _gpu.count("events", 1)
    return (_S, ev)


def cuEventDestroy(event):
    if int(event) not in _events:
        return (CUresult.CUDA_ERROR_INVALID_HANDLE,)
    del _events[int(event)]
    _gpu.count("events", -1)
    return (_S,)


def cuEventRecord(event, stream):
    if int(event) not in _events:  # destroyed, or never created
        return (CUresult.CUDA_ERROR_INVALID_HANDLE,)
    _events[int(event)] = _gpu.record(_stream(stream))
    return (_S,)


def cuEventSynchronize(event):
    if int(event) not in _events:
        return (CUresult.CUDA_ERROR_INVALID_HANDLE,)
    t = _events.get(int(event))
    if t is not None:
        _gpu.observe(t)
    return (_S,)


def cuEventQuery(event):
    if int(event) not in _events:
        return (CUresult.CUDA_ERROR_INVALID_HANDLE,)
    t = _events.get(int(event))
    return (_S if t is None or _gpu.poll(t) else CUresult.CUDA_ERROR_NOT_READY,)


def cuEventElapsedTime(start, end):
    t0, t1 = _events.get(int(start)), _events.get(int(end))
    if t0 is None or t1 is None:
        return (CUresult.CUDA_ERROR_INVALID_HANDLE, None)
    if max(t0, t1) > _gpu.host_now + 1e-12:
        return (CUresult.CUDA_ERROR_NOT_READY, None)
    return (_S, float(t1 - t0))


def cuMemGetInfo():
    total = 32 << 30
    return (_S, total - sum(_gpu.allocations.values()), total)


def cuMemAlloc(nbytes: int):
    try:
        return (_S, CUdeviceptr(_gpu.malloc(int(nbytes))))
    except RuntimeError:
        return (CUresult.CUDA_ERROR_INVALID_CONTEXT, None)


def cuMemAllocManaged(nbytes: int, flags: int):
    # "flags must be one of CU_MEM_ATTACH_GLOBAL or CU_MEM_ATTACH_HOST"; "If bytesize is 0, cuMemAllocManaged
    # returns CUDA_ERROR_INVALID_VALUE" (the driver API's cuMemAllocManaged)
    if int(flags) not in (1, 2) or int(nbytes) <= 0:
        return (CUresult.CUDA_ERROR_INVALID_VALUE, None)
    try:
        return (_S, CUdeviceptr(_gpu.malloc(int(nbytes), int(flags))))
    except RuntimeError:
        return (CUresult.CUDA_ERROR_INVALID_CONTEXT, None)


def cuMemFree(ptr):
    if int(ptr) not in _gpu.allocations:
        return (CUresult.CUDA_ERROR_INVALID_VALUE,)
    _gpu.free(int(ptr))
    return (_S,)


def cuMemHostAlloc(nbytes: int, flags: int):
    if _no_context():
        return (CUresult.CUDA_ERROR_INVALID_CONTEXT, None)
    buf = (ctypes.c_byte * int(nbytes))()
    addr = ctypes.addressof(buf)
    _host[addr] = buf
    _gpu.count("pinned_buffers", 1)
    _gpu.count("pinned_bytes", int(nbytes))
    return (_S, addr)


def cuMemFreeHost(ptr):
    buf = _host.pop(int(ptr), None)
    if buf is None:
        return (CUresult.CUDA_ERROR_INVALID_VALUE,)
    _gpu.count("pinned_buffers", -1)
    _gpu.count("pinned_bytes", -ctypes.sizeof(buf))
    return (_S,)


def _read_host(addr: int, n: int):
    return lambda: ctypes.string_at(addr, n)


def _write_host(addr: int):
    return lambda data: ctypes.memmove(addr, data, len(data))


def _dev(ptr) -> int:
    p = int(ptr)
    if p not in _gpu.allocations:
        raise ValueError(f"invalid device pointer {p:#x}")
    return p


def _pinned(addr: int, nbytes: int) -> bool:
    """Whether ``addr``..``addr + nbytes`` lies in one pinned host buffer (cuMemHostAlloc)."""
    return any(base <= addr and addr + nbytes <= base + ctypes.sizeof(buf) for base, buf in _host.items())


def cuMemcpyHtoD(dst, src: int, nbytes: int):
    htod_copies.append({"blocking": True, "pinned": _pinned(int(src), int(nbytes))})
    data = ctypes.string_at(int(src), int(nbytes))  # taken now: the host may reuse its buffer on return
    _gpu.observe(_gpu.htod(0, _dev(dst), lambda: data)[1])
    return (_S,)


def cuMemcpyDtoH(dst: int, src, nbytes: int):
    _gpu.observe(_gpu.dtoh(0, _dev(src), int(nbytes), _write_host(int(dst)))[1])
    return (_S,)


def cuMemcpyHtoDAsync(dst, src: int, nbytes: int, stream):
    htod_copies.append({"blocking": False, "pinned": _pinned(int(src), int(nbytes))})
    _gpu.htod(_stream(stream), _dev(dst), _read_host(int(src), int(nbytes)))
    return (_S,)


def cuMemcpyDtoHAsync(dst: int, src, nbytes: int, stream):
    _gpu.dtoh(_stream(stream), _dev(src), int(nbytes), _write_host(int(dst)))
    return (_S,)


def cuMemcpyDtoDAsync(dst, src, nbytes: int, stream):
    _gpu.dtod(_stream(stream), _dev(dst), _dev(src), int(nbytes))
    return (_S,)


def cuModuleLoadData(image):
    from cuda.bindings import nvrtc

    kernels = nvrtc._kernels_of(bytes(image))
    if kernels is None:
        return (CUresult.CUDA_ERROR_INVALID_VALUE, None)
    return (_S, CUmodule(id(kernels)))


def cuModuleGetFunction(module, name: bytes):
    from cuda.bindings import nvrtc

    impl = nvrtc.KERNELS.get(bytes(name).decode())
    if impl is None:
        return (CUresult.CUDA_ERROR_NOT_FOUND, None)
    f = CUfunction(next(_next_function))
    _functions[int(f)] = impl
    return (_S, f)


def cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
    if _no_context():
        return (CUresult.CUDA_ERROR_INVALID_CONTEXT,)
    impl = _functions.get(int(f))
    if impl is None:
        return (CUresult.CUDA_ERROR_INVALID_HANDLE,)
    values, _types = params
    impl(_stream(stream), int(gx) * int(gy) * int(gz), int(bx) * int(by) * int(bz), *values)
    return (_S,)


for _name in [n for n in globals() if n.startswith("cu") and callable(globals()[n])]:
    globals()[_name] = _gpu.locked(globals()[_name])
