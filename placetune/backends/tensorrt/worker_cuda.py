"""The worker's CUDA layer: the device context, device buffers and host<->device copies (pycuda).

The only worker module that imports pycuda. The rest of the worker uses the object
:func:`driver` returns through this subset of ``pycuda.driver``, which another binding
(e.g. cuda-python's ``cuda.bindings``) could provide: ``Stream()`` (``.handle``,
``.synchronize()``, ``.wait_for_event(event)``), ``Event()`` (``.record(stream)``,
``.synchronize()``, ``.query()``, ``.time_since(event)`` in ms), ``mem_alloc(nbytes)``
(``int(mem)`` is the device address, ``.free()``), ``memcpy_htod(mem, array)`` and
``memcpy_dtoh(array, mem)``. A sibling module of ``worker.py``: Python 3.8, no placetune imports.
"""

try:  # Python 3.8 needs typing's generics
    from typing import Any, Dict, List, Tuple
except ImportError:  # pragma: no cover
    pass

_CUDA = {}  # type: Dict[str, Any]


def driver():
    # type: () -> Any
    """pycuda.driver with the primary context of device 0 current (once per process)."""
    if "driver" not in _CUDA:
        import pycuda.driver as cuda

        cuda.init()
        ctx = cuda.Device(0).retain_primary_context()
        ctx.push()
        _CUDA["driver"], _CUDA["context"] = cuda, ctx
    return _CUDA["driver"]


def alloc(cuda, allocs, nbytes):
    # type: (Any, List[Any], int) -> Any
    mem = cuda.mem_alloc(max(int(nbytes), 1))
    allocs.append(mem)
    return mem


def random_fill(cuda, np, rng, mem, shape, dtype):
    # type: (Any, Any, Any, Any, Tuple[int, ...], Any) -> None
    count = 1
    for d in shape:
        count *= max(int(d), 1)
    if dtype.kind == "f":
        data = rng.uniform(-1.0, 1.0, size=count).astype(dtype)
    elif dtype.kind in "iu":
        data = rng.integers(0, 2, size=count).astype(dtype)
    else:
        data = np.zeros(count, dtype)
    cuda.memcpy_htod(mem, data)


def download(cuda, np, mem, shape, dtype):
    # type: (Any, Any, Any, Tuple[int, ...], Any) -> Any
    host = np.empty(tuple(int(d) for d in shape), dtype=dtype)
    cuda.memcpy_dtoh(host, mem)
    return host
