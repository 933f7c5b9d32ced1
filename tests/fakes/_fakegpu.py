"""Shared state of the fake GPU used by the ``tensorrt`` and ``pycuda`` test doubles.

Time model (milliseconds, deterministic):

* Every stream has a clock: the time its last operation finished.
* The host has a clock, ``host_now``: the latest completion it has *observed* (a
  synchronize or a successful query). Work the host enqueues cannot start before it.
* Every device (``GPU``, ``DLA0``, ``DLA1``) runs one piece of work at a time (``busy``): a
  piece starts at the first time after it is ready (its stream's clock, the host's clock)
  when the device is free for its whole duration, so work of another stream may fill an
  idle gap. Engines on different streams overlap only when they run on different devices.
* ``cuStreamWaitEvent`` moves a stream's clock to the event's time; recording an event
  stamps the stream's clock.

So a fake engine on stream S that runs 0.3 ms on DLA0 starts at the first 0.3 ms gap of
DLA0 after ``max(clock[S], host_now)``.

Device memory holds real bytes (``memory``; ``versions`` counts changes per allocation) so
that the fake TensorRT computes real outputs. Engine outputs are computed lazily
(``defer``): when the bytes are first read (a copy to the host, or the input of another
engine's computation), so timing loops that never read them cost nothing.
"""

from __future__ import annotations

import itertools

_next_handle = itertools.count(0x7000)
_next_ptr = itertools.count(0x10000000, 0x100000)

#: stream handle -> simulated time (ms); handle 0 is the default (legacy) stream.
clocks: dict[int, float] = {0: 0.0}
#: the latest completion time the host has observed.
host_now = 0.0
#: device name -> sorted (start, end) intervals of its work (those before ``host_now`` are pruned).
busy: dict[str, list[tuple[float, float]]] = {}
#: device pointer -> bytes.
allocations: dict[int, int] = {}
#: device pointer -> contents.
memory: dict[int, bytearray] = {}
#: device pointer -> change counter.
versions: dict[int, int] = {}
#: device pointer -> a function that computes its contents (lazy fake-engine outputs).
pending: dict[int, object] = {}
#: True once a CUDA context is current (pycuda make_context / retain_primary_context + push).
context_stack: list[object] = []


def new_stream() -> int:
    handle = next(_next_handle)
    clocks[handle] = host_now
    return handle


def _check(handle: int) -> None:
    if handle not in clocks:
        raise RuntimeError(f"fake CUDA: invalid stream handle {handle:#x}")


def advance(handle: int, ms: float) -> None:
    """Run ``ms`` of GPU work on a stream (kept for callers that do not name a device)."""
    run(handle, [("GPU", ms)])


def run(handle: int, parts: list[tuple[str, float]]) -> tuple[float, float]:
    """Run pieces of work ``(device, ms)`` in order on a stream; returns (start, end)."""
    _check(handle)
    t = max(clocks[handle], host_now)
    start = None
    for device, ms in parts:
        t = _place(device, t, float(ms))
        if start is None:
            start = t
        t += float(ms)
    clocks[handle] = t
    return (t if start is None else start), t


def _place(device: str, ready: float, ms: float) -> float:
    """Book the first gap of ``ms`` on ``device`` at or after ``ready``; returns its start."""
    import bisect

    spans = busy.setdefault(device, [])
    while spans and spans[0][1] < host_now - 1e-9 and len(spans) > 1:
        spans.pop(0)
    t = ready
    for s, e in spans:
        if e <= t:
            continue
        if s >= t + ms:
            break
        t = max(t, e)
    bisect.insort(spans, (t, t + ms))
    return t


def record(handle: int) -> float:
    """An event recorded on a stream now: the stream's time (never before the host's)."""
    _check(handle)
    clocks[handle] = max(clocks[handle], host_now)
    return clocks[handle]


def wait(handle: int, t: float) -> None:
    """The stream waits for an event stamped ``t``."""
    _check(handle)
    clocks[handle] = max(clocks[handle], t)


def observe(t: float) -> None:
    """The host saw work finishing at ``t`` (synchronize / query)."""
    global host_now
    host_now = max(host_now, float(t))


def now(handle: int) -> float:
    return clocks[handle]


def malloc(nbytes: int) -> int:
    if not context_stack:
        raise RuntimeError("fake CUDA: no current context (call pycuda.driver.init() and make a context)")
    ptr = next(_next_ptr)
    allocations[ptr] = int(nbytes)
    memory[ptr] = bytearray(int(nbytes))
    versions[ptr] = 0
    return ptr


def free(ptr: int) -> None:
    allocations.pop(ptr, None)
    memory.pop(ptr, None)
    versions.pop(ptr, None)
    pending.pop(ptr, None)


def defer(ptr: int, compute) -> None:
    """The contents of ``ptr`` are what ``compute()`` writes, computed when first read."""
    pending[ptr] = compute
    versions[ptr] += 1


def write(ptr: int, data: bytes | memoryview, offset: int = 0) -> None:
    """Store bytes at a device pointer (bumps its version when the contents change)."""
    pending.pop(ptr, None)
    buf = memory[ptr]
    view = memoryview(data).cast("B")
    n = len(view)
    if offset + n > len(buf):
        raise RuntimeError(f"fake CUDA: write of {n} bytes past the end of allocation {ptr:#x} ({len(buf)} bytes)")
    if buf[offset:offset + n] != view:
        buf[offset:offset + n] = view
        versions[ptr] += 1


def read(ptr: int, nbytes: int) -> bytes:
    compute = pending.get(ptr)
    if compute is not None:
        compute()
        pending.pop(ptr, None)
    buf = memory[ptr]
    if nbytes > len(buf):
        raise RuntimeError(f"fake CUDA: read of {nbytes} bytes from allocation {ptr:#x} of {len(buf)} bytes")
    return bytes(buf[:nbytes])
