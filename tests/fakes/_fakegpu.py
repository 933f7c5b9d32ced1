"""Shared state of the fake GPU used by the ``tensorrt`` and ``pycuda`` test doubles.

Streams have a simulated clock (milliseconds). The fake TensorRT advances a stream's clock
when it enqueues an inference; fake CUDA events read it. Timings are therefore exact and
deterministic. Device memory is a dict of pointer -> size.
"""

from __future__ import annotations

import itertools

_next_handle = itertools.count(0x7000)
_next_ptr = itertools.count(0x10000000, 0x100000)

#: stream handle -> simulated time (ms); handle 0 is the default (legacy) stream.
clocks: dict[int, float] = {0: 0.0}
#: device pointer -> bytes.
allocations: dict[int, int] = {}
#: True once a CUDA context is current (pycuda make_context / retain_primary_context + push).
context_stack: list[object] = []


def new_stream() -> int:
    handle = next(_next_handle)
    clocks[handle] = 0.0
    return handle


def advance(handle: int, ms: float) -> None:
    if handle not in clocks:
        raise RuntimeError(f"fake CUDA: invalid stream handle {handle:#x}")
    clocks[handle] += float(ms)


def now(handle: int) -> float:
    return clocks[handle]


def malloc(nbytes: int) -> int:
    if not context_stack:
        raise RuntimeError("fake CUDA: no current context (call pycuda.driver.init() and make a context)")
    ptr = next(_next_ptr)
    allocations[ptr] = int(nbytes)
    return ptr


def free(ptr: int) -> None:
    allocations.pop(ptr, None)
