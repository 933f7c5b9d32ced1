"""Shared state of the fake GPU used by the ``tensorrt``, ``pycuda`` and ``cuda`` (cuda-python) test doubles.

Asynchronous, as CUDA is: work enqueued on a stream happens in simulated time, and its effect on
memory is seen only by what comes after it in that time.

Time model (milliseconds, deterministic):

* Every stream has a clock: the time its last operation finishes. Stream 0 is the legacy
  default stream: its work starts after all work of the *blocking* streams (pycuda's default
  ``Stream()``), and theirs after its (CUDA Driver API, "Stream synchronization behavior":
  the legacy default stream; cuda-python's layer makes ``CU_STREAM_NON_BLOCKING`` streams, which
  the legacy stream does not order).
* The host has a clock, ``host_now``: the latest completion it has *observed*. It moves on a
  synchronize, a blocking copy, and by :data:`POLL_MS` per query (``cuEventQuery`` /
  ``cuStreamQuery`` take time; a polling loop ends). Work the host enqueues cannot start before it.
* Every device lane (``GPU``, ``DLA0``, ``DLA1``, the copy engines ``H2D``/``D2H``/``D2D``)
  runs one piece of work at a time (``busy``): a piece starts at the first time after it is ready
  (its stream's clock, the host's clock) when the lane is free for its whole duration. Kernels
  launched directly (``launch(..., device=None)``) share no lane: they run at once, as small
  kernels on a big GPU do.
* ``cuStreamWaitEvent`` moves a stream's clock to the event's time; recording an event stamps
  the stream's clock. An event never recorded is complete (``cuEventQuery`` returns
  ``CUDA_SUCCESS`` for it: CUDA Driver API, Event Management).

Memory (``memory``: device pointer -> immutable contents, ``bytes`` or a lazily computed
:class:`Lazy`) changes only when the host observes the time of a write: every operation reads
its inputs and writes its outputs at simulated times (:func:`_schedule`), and :func:`observe`
applies them in time order (a write before a read at the same time). So

* a host read before the synchronisation sees stale bytes (a ``*_async`` copy to the host
  fills the array only once the host has observed the copy's end);
* an operation on a stream that did not wait for a writer reads what was there before;
* an engine that reads a buffer while another operation writes it reads torn data: its
  outputs are filled with 0xFF (NaN in float16/float32), so a race cannot pass a check.

Engine outputs are :class:`Lazy`: computed from the inputs read when first needed (a copy to
the host, another computation), so timing loops that never read them cost nothing.

Threads: the current context is per host thread, as in CUDA (``context_stack`` is each thread's
own stack: a thread that pushed none has no current context), and every operation on the fake
GPU's state holds :data:`lock`, so several host threads may drive it at once (the simulated
clocks stay one host's: a thread's synchronize is seen by all).

``PLACETUNE_FAKE_CUDA_HTOD_LOG``: a file every host-to-device copy appends ``<sha256 of its bytes>
<bytes>`` to (what a job uploaded: the tests see which input data reached the device).

Resources are counted while alive (:func:`live`): streams (until destroyed: ``cuStreamDestroy``,
or a pycuda ``Stream`` object going away), events, pinned host buffers and their bytes, device
buffers and their bytes, TensorRT execution contexts. A stream used after it was destroyed is an
error, as in CUDA.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import heapq
import itertools
import os
import threading
import weakref

_next_handle = itertools.count(0x7000)
_next_ptr = itertools.count(0x10000000, 0x100000)
_seq = itertools.count()

#: how long one query of an event or stream takes the host (ms): a polling loop ends
POLL_MS = 0.001
#: copy engine bandwidth (bytes per ms, ~10 GB/s) and the fixed cost of one copy (ms)
COPY_BYTES_PER_MS = 1.0e7
COPY_MS = 0.001

#: stream handle -> simulated time (ms); handle 0 is the legacy default stream.
clocks: dict[int, float] = {0: 0.0}
#: streams that synchronise with the legacy default stream (pycuda's ``Stream()`` default).
blocking: set[int] = set()
#: the latest completion time the host has observed.
host_now = 0.0
#: device lane -> sorted (start, end) intervals of its work (those before ``host_now`` are pruned).
busy: dict[str, list[tuple[float, float]]] = {}
#: device pointer -> bytes.
allocations: dict[int, int] = {}
#: the pointers of ``allocations`` made as managed memory (cuMemAllocManaged / pycuda's managed_empty) -> attach flags.
managed: dict[int, int] = {}
#: the device's ``integrated`` property (CU_DEVICE_ATTRIBUTE_INTEGRATED): 1, as a Jetson's GPU;
#: ``PLACETUNE_FAKE_TRT_INTEGRATED=0`` makes it a discrete GPU.
INTEGRATED = 0 if os.environ.get("PLACETUNE_FAKE_TRT_INTEGRATED", "1").strip() == "0" else 1
#: device pointer -> contents (bytes, or Lazy) as of the writes applied so far.
memory: dict[int, object] = {}
#: device pointer -> number of writes applied.
versions: dict[int, int] = {}
class _ThreadStacks(threading.local):
    """Each host thread's stack of current contexts (a list per thread)."""

    def __init__(self) -> None:
        self.stack: list[object] = []

    def append(self, ctx: object) -> None:
        self.stack.append(ctx)

    def pop(self) -> object:
        return self.stack.pop()

    def __bool__(self) -> bool:
        return bool(self.stack)

    def __len__(self) -> int:
        return len(self.stack)


#: the current contexts of the calling thread (pycuda make_context / retain_primary_context + push,
#: cuCtxPushCurrent).
context_stack = _ThreadStacks()
#: held by every operation on the state below (re-entrant: operations call each other)
lock = threading.RLock()
#: (time, phase, seq, effect): memory effects not applied yet (phase 0 writes before 1 reads).
_events: list = []
#: live counts of what has no table of its own here: events, pinned host buffers and bytes
counts: dict[str, int] = {"events": 0, "pinned_buffers": 0, "pinned_bytes": 0}
#: TensorRT execution contexts alive (the tensorrt double adds each; they go with their last reference)
contexts: "weakref.WeakSet" = weakref.WeakSet()


class Lazy:
    """Contents computed when first needed, then kept.

    ``compute()`` -> the bytes a write gave. With ``size`` (the allocation's bytes), a write of fewer
    bytes leaves the rest as they were: they are read from ``under``, the contents before the write
    (bytes or a Lazy), and only then (a write that fills the allocation never reads them). A buffer
    an engine writes on every frame of a timed loop, read once at its end, is a chain of hundreds of
    Lazy values, each over the one before: :meth:`get` walks it in a loop, never by recursion (a
    recursive walk ran out of Python's stack after some 250 unread writes, where CUDA just has
    the bytes)."""

    __slots__ = ("_compute", "_data", "_under", "_size")

    def __init__(self, compute, under: object = None, size: int | None = None) -> None:
        self._compute = compute
        self._data: bytes | None = None
        self._under = under
        self._size = size

    def _short(self, own: bytes) -> bool:
        """Whether a write of ``own`` leaves bytes of the contents under it."""
        return self._size is not None and len(own) < self._size

    def get(self) -> bytes:
        if self._data is None:
            chain: list[tuple[Lazy, bytes]] = []  # newest first: each needs the contents under it
            node = self
            while True:
                own = bytes(node._compute())
                chain.append((node, own))
                under = node._under
                if not node._short(own) or not isinstance(under, Lazy) or under._data is not None:
                    break
                node = under
            for node, own in reversed(chain):  # oldest first: the contents under each are known by then
                if node._short(own):
                    own += contents(node._under)[len(own):]
                node._data, node._compute, node._under = own, None, None
        return self._data


def contents(value) -> bytes:
    return value.get() if isinstance(value, Lazy) else value


def new_stream(blocking_stream: bool = True) -> int:
    handle = next(_next_handle)
    clocks[handle] = host_now
    if blocking_stream:
        blocking.add(handle)
    return handle


def destroy_stream(handle: int) -> bool:
    """Forget a stream (work already enqueued still completes: its effects are scheduled);
    False when there was none (an invalid handle)."""
    if not handle or handle not in clocks:
        return False
    del clocks[handle]
    blocking.discard(handle)
    return True


def count(key: str, delta: int) -> None:
    counts[key] += delta


def live() -> dict[str, int]:
    """What is alive now: streams (the legacy default stream not counted), events, pinned host
    buffers and bytes, device buffers and bytes, TensorRT execution contexts."""
    gc.collect()  # objects that go with their last reference: a cycle must not read as a leak
    return {"streams": len(clocks) - 1, "events": counts["events"], "pinned_buffers": counts["pinned_buffers"],
            "pinned_bytes": counts["pinned_bytes"], "device_buffers": len(allocations),
            "device_bytes": sum(allocations.values()), "trt_contexts": len(contexts)}


def _check(handle: int) -> None:
    if handle not in clocks:
        raise RuntimeError(f"fake CUDA: invalid stream handle {handle:#x}")


def _ready(handle: int) -> float:
    """When the next operation on ``handle`` may start (legacy default stream rules included)."""
    t = max(clocks[handle], host_now)
    if handle == 0:
        t = max([t] + [clocks[h] for h in blocking])
    elif handle in blocking:
        t = max(t, clocks[0])
    return t


def run(handle: int, parts: list[tuple[str | None, float]]) -> tuple[float, float]:
    """Run pieces of work ``(device lane or None, ms)`` in order on a stream; returns (start, end)."""
    _check(handle)
    t = _ready(handle)
    start = None
    for device, ms in parts:
        if device is not None:
            t = _place(device, t, float(ms))
        if start is None:
            start = t
        t += float(ms)
    clocks[handle] = t
    return (t if start is None else start), t


def advance(handle: int, ms: float) -> None:
    """Run ``ms`` of GPU work on a stream (kept for callers that do not name a device)."""
    run(handle, [("GPU", ms)])


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


def _schedule(t: float, phase: int, effect) -> None:
    heapq.heappush(_events, (float(t), phase, next(_seq), effect))


def record(handle: int) -> float:
    """An event recorded on a stream now: when the work enqueued before it is done."""
    _check(handle)
    clocks[handle] = _ready(handle)
    return clocks[handle]


def wait(handle: int, t: float) -> None:
    """The stream waits for an event stamped ``t``."""
    _check(handle)
    clocks[handle] = max(clocks[handle], t)


def observe(t: float) -> None:
    """The host saw work finishing at ``t`` (synchronize, blocking copy): apply the memory
    effects of everything up to then."""
    global host_now
    host_now = max(host_now, float(t))
    while _events and _events[0][0] <= host_now + 1e-12:
        _, _, _, effect = heapq.heappop(_events)
        effect()


def poll(t: float) -> bool:
    """A query: the host spends :data:`POLL_MS`; whether work finishing at ``t`` is done."""
    observe(host_now + POLL_MS)
    return t <= host_now + 1e-12


def synchronize_all() -> None:
    """Wait for every stream (a context synchronize)."""
    observe(max(clocks.values()))


def now(handle: int) -> float:
    return clocks[handle]


def malloc(nbytes: int, managed_flags: int | None = None) -> int:
    """A device allocation (``managed_flags``: a managed one, with those attach flags)."""
    if not context_stack:
        raise RuntimeError("fake CUDA: no current context (call pycuda.driver.init() and make a context)")
    ptr = next(_next_ptr)
    allocations[ptr] = int(nbytes)
    memory[ptr] = bytes(int(nbytes))
    versions[ptr] = 0
    if managed_flags is not None:
        managed[ptr] = int(managed_flags)
    return ptr


def free(ptr: int) -> None:
    allocations.pop(ptr, None)
    managed.pop(ptr, None)
    memory.pop(ptr, None)
    versions.pop(ptr, None)


def _store(ptr: int, value, offset: int = 0) -> None:
    """Apply a write (the contents, or ``bytes`` at ``offset``)."""
    if ptr not in memory:  # freed meanwhile: the write goes nowhere
        return
    if offset or not isinstance(value, Lazy) and len(value) != allocations[ptr]:
        old = contents(memory[ptr])
        data = bytes(value if not isinstance(value, Lazy) else value.get())
        if offset + len(data) > len(old):
            raise RuntimeError(f"fake CUDA: write of {len(data)} bytes past the end of allocation {ptr:#x} "
                               f"({len(old)} bytes)")
        value = old[:offset] + data + old[offset + len(data):]
    memory[ptr] = value
    versions[ptr] += 1


def read_now(ptr: int, nbytes: int) -> bytes:
    """The contents of ``ptr`` as of the writes applied so far (the first ``nbytes``)."""
    data = contents(memory[ptr])
    if nbytes > len(data):
        raise RuntimeError(f"fake CUDA: read of {nbytes} bytes from allocation {ptr:#x} of {len(data)} bytes")
    return data[:nbytes]


def _lane_ms(nbytes: int) -> float:
    return COPY_MS + float(nbytes) / COPY_BYTES_PER_MS


def copy(handle: int, lane: str, nbytes: int, read, write) -> tuple[float, float]:
    """A copy of ``nbytes`` on a stream's copy engine ``lane``: ``read()`` -> bytes at its start
    (the source then), ``write(data)`` at its end."""
    start, end = run(handle, [(lane, _lane_ms(nbytes))])
    box: list = []
    _schedule(start, 1, lambda: box.append(read()))
    _schedule(end, 0, lambda: write(box[0]))
    return start, end


def htod(handle: int, ptr: int, host_bytes, offset: int = 0) -> tuple[float, float]:
    """Host -> device on a stream: ``host_bytes()`` is called at the copy's start (the host buffer
    as it is then: an async copy from pinned memory reads it while it runs)."""
    if ptr not in allocations:
        raise RuntimeError(f"fake CUDA: invalid device pointer {ptr:#x}")
    first = host_bytes()
    n = len(first)
    log = os.environ.get("PLACETUNE_FAKE_CUDA_HTOD_LOG")
    if log:  # what the host copied to the device (as enqueued): ``<sha256 of the bytes> <bytes>`` per copy
        with open(log, "a") as fh:
            fh.write(f"{hashlib.sha256(first).hexdigest()} {n}\n")
    if offset + n > allocations[ptr]:
        raise RuntimeError(f"fake CUDA: write of {n} bytes past the end of allocation {ptr:#x} "
                           f"({allocations[ptr]} bytes)")
    return copy(handle, "H2D", n, host_bytes, lambda data: _store(ptr, data, offset))


def dtoh(handle: int, ptr: int, nbytes: int, into) -> tuple[float, float]:
    """Device -> host on a stream: ``into(data)`` fills the host buffer at the copy's end."""
    if ptr not in allocations:
        raise RuntimeError(f"fake CUDA: invalid device pointer {ptr:#x}")
    return copy(handle, "D2H", nbytes, lambda: read_now(ptr, nbytes), into)


def dtod(handle: int, dst: int, src: int, nbytes: int) -> tuple[float, float]:
    for p in (dst, src):
        if p not in allocations:
            raise RuntimeError(f"fake CUDA: invalid device pointer {p:#x}")
    return copy(handle, "D2D", nbytes, lambda: read_now(src, nbytes), lambda data: _store(dst, data))


def launch(handle: int, parts: list[tuple[str | None, float]], reads: list[int], writes: list[int], compute,
           read_at: str = "start") -> tuple[float, float]:
    """Work on a stream that reads device buffers ``reads`` and writes ``writes``.

    ``compute(inputs)`` (``inputs``: pointer -> contents, as read) returns pointer -> bytes for
    the outputs; it runs when an output is first needed. ``read_at="start"``: the inputs are
    taken at the start and must not change before the end (an engine reads them while it runs:
    a write in between makes the outputs torn, 0xFF); ``"end"``: taken at the end (a kernel that
    reads after a delay, as tests/test_cuda_layer.py's stand-in does)."""
    start, end = run(handle, parts)
    state: dict = {}

    def take() -> None:
        state["in"] = {p: memory.get(p, b"") for p in reads}
        state["versions"] = {p: versions.get(p, -1) for p in reads}

    def finish() -> None:
        if read_at == "end":
            take()
        torn = any(versions.get(p, -1) != v for p, v in state["versions"].items())
        inputs = state["in"]
        result: dict = {}

        def outputs() -> dict:
            if not result:
                if torn:
                    result.update({p: b"\xff" * allocations.get(p, 0) for p in writes})
                else:
                    result.update(compute({p: contents(v) for p, v in inputs.items()}))
            return result

        for p in writes:  # bytes past what the computation writes stay as they were
            if p in memory:
                _store(p, Lazy(lambda p=p: outputs()[p], under=memory[p], size=allocations.get(p, 0)))

    if read_at == "start":
        _schedule(start, 1, take)
    _schedule(end, 0, finish)
    return start, end


def reset() -> None:
    """Forget every stream, allocation and pending effect (a fresh process)."""
    global host_now
    clocks.clear()
    clocks[0] = 0.0
    blocking.clear()
    host_now = 0.0
    busy.clear()
    allocations.clear()
    memory.clear()
    versions.clear()
    _events.clear()
    for k in counts:
        counts[k] = 0


def locked(fn):
    """``fn`` run while holding :data:`lock`."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        with lock:
            return fn(*args, **kwargs)
    return call


for _name in ("new_stream", "destroy_stream", "count", "live", "run", "advance", "record", "wait", "observe", "poll",
              "synchronize_all", "malloc", "free", "read_now", "copy", "htod", "dtoh", "dtod", "launch", "reset"):
    globals()[_name] = locked(globals()[_name])
