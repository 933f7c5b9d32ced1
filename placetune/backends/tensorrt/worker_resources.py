"""A job's CUDA resources, owned and freed when the job ends; its buffers' data; the worker's memory.

A worker runs hundreds of jobs a night: streams, events, pinned host buffers (which cannot be
swapped), device buffers and TensorRT engines with their execution contexts that a job leaves
behind end the night on an 8-16 GB Jetson. Every job therefore makes its resources through a
:class:`Resources` and ends it (:func:`release`) however it ends. Each reply reports the
worker's memory (:func:`memory_usage`); :func:`alloc`, :func:`random_fill` and :func:`download`
fill and read a job's buffers. A sibling module of ``worker.py``: Python 3.8, no placetune imports.
"""

import os

try:  # Python 3.8 needs typing's generics
    from typing import Any, Dict, List, Optional, Tuple
except ImportError:  # pragma: no cover
    pass

from worker_cuda import Cuda, current


class Resources(Cuda):
    """The CUDA resources of one job: makes streams, events, device and pinned buffers through
    ``layer`` and frees them all at :meth:`close` (``with`` ends it too), newest first, after
    the device is idle, whether the job ended well or not. ``own(thing)`` adds anything with a
    ``close()`` (a TensorRT engine with its execution context). The copies go to the layer."""

    def __init__(self, layer):
        # type: (Cuda) -> None
        self.layer = layer
        self.name, self.version = layer.name, layer.version
        self.owned = []  # type: List[Any]

    def _keep(self, thing, free):
        # type: (Any, Any) -> Any
        self.owned.append(free)  # one append: safe from the replicas op's enqueue threads
        return thing

    def Stream(self):  # noqa: N802
        s = self.layer.Stream()
        return self._keep(s, s.destroy)

    def Event(self):  # noqa: N802
        e = self.layer.Event()
        return self._keep(e, e.destroy)

    def mem_alloc(self, nbytes, managed=False):
        m = self.layer.mem_alloc(nbytes, managed) if managed else self.layer.mem_alloc(nbytes)
        return self._keep(m, m.free)

    def integrated(self):
        return self.layer.integrated()

    def pagelocked_empty(self, shape, dtype):
        a = self.layer.pagelocked_empty(shape, dtype)
        return self._keep(a, lambda: self.layer.free_pagelocked(a))

    def free_pagelocked(self, array):
        self.layer.free_pagelocked(array)

    def own(self, thing):
        return self._keep(thing, thing.close)

    def memcpy_htod(self, mem, host):
        self.layer.memcpy_htod(mem, host)

    def memcpy_dtoh(self, host, mem):
        self.layer.memcpy_dtoh(host, mem)

    def memcpy_htod_async(self, mem, host, stream):
        self.layer.memcpy_htod_async(mem, host, stream)

    def memcpy_dtoh_async(self, host, mem, stream):
        self.layer.memcpy_dtoh_async(host, mem, stream)

    def memcpy_dtod_async(self, dst, src, nbytes, stream):
        self.layer.memcpy_dtod_async(dst, src, nbytes, stream)

    def synchronize(self):
        self.layer.synchronize()

    def device_name(self):
        return self.layer.device_name()

    def bind_thread(self, on=True):
        # type: (bool) -> None
        """The layer's context made current in (True) or popped from (False) the calling thread."""
        self.layer.bind_thread(on)

    def live(self):
        return self.layer.live()

    def close(self):
        # type: () -> List[str]
        """Wait for the device, then free everything (each release tried, even after one fails:
        a sticky CUDA error fails them all, and the worker is then recycled). Never raises:
        returns what failed, one line each."""
        errors = []  # type: List[str]
        owned, self.owned = self.owned, []
        if owned:
            try:  # nothing may be freed while the device may still use it
                self.layer.synchronize()
            except Exception as exc:
                errors.append("synchronize: %s: %s" % (type(exc).__name__, exc))
        for free in reversed(owned):
            try:
                free()
            except Exception as exc:
                errors.append("%s: %s" % (type(exc).__name__, exc))
        return errors

    def __enter__(self):
        # type: () -> Resources
        return self

    def __exit__(self, *exc):
        # type: (Any) -> None
        self.close()


def release(scope, result):
    # type: (Optional[Resources], Dict[str, Any]) -> None
    """End a job's :class:`Resources`; what failed to free goes into ``result["release_errors"]``."""
    if scope is not None:
        errors = scope.close()
        if errors:
            result["release_errors"] = errors[:10]


def memory_usage():
    # type: () -> Dict[str, Any]
    """The worker's memory as a reply reports it (the parent recycles a worker that grows):
    ``rss_bytes`` (/proc/self/statm; None elsewhere) and, once the CUDA layer is up, what it
    holds (:meth:`Cuda.live`)."""
    out = {"rss_bytes": None}  # type: Dict[str, Any]
    try:
        with open("/proc/self/statm") as fh:
            out["rss_bytes"] = int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        pass
    layer = current()
    if layer is not None:
        out.update(layer.live())
    return out


def alloc(cuda, nbytes):
    # type: (Any, int) -> Any
    """A device buffer of ``nbytes`` (at least one byte), freed with the job's :class:`Resources`."""
    return cuda.mem_alloc(max(int(nbytes), 1))


def random_data(np, rng, shape, dtype):
    # type: (Any, Any, Tuple[int, ...], Any) -> Any
    """Random host data of a tensor: uniform(-1, 1) floats, 0/1 integers."""
    count = 1
    for d in shape:
        count *= max(int(d), 1)
    if dtype.kind == "f":
        return rng.uniform(-1.0, 1.0, size=count).astype(dtype)
    if dtype.kind in "iu":
        return rng.integers(0, 2, size=count).astype(dtype)
    return np.zeros(count, dtype)


def load_inputs(np, job):
    # type: (Any, Dict[str, Any]) -> Optional[Dict[str, Any]]
    """The job's input data: ``job["input_data"]``, a .npz of network input name -> array (placetune
    checked it against the model), or None: the inputs are random (:func:`random_data`)."""
    path = job.get("input_data")
    if not path:
        return None
    with np.load(path, allow_pickle=False) as npz:
        return dict((str(k), npz[k]) for k in npz.files)


def mirrored(np, a, variant):
    # type: (Any, Any, int) -> Any
    """Variant ``variant`` of input data ``a``: itself (0), mirrored along its last axis (1), its
    second-to-last (2) or both (3) (an axis of size 1 is never mirrored: the variants counted over
    those left); the next turn of variants also has its samples rotated along the first axis by one
    more, and after a whole turn of the samples (one sample: at once) the data shifted circularly by
    one more along the longer of its last two axes (a frame moved by a pixel). The pipeline gives
    each of its input slots another variant, so that a frame reading another slot's buffer is still
    seen by the gate (identical slots would hide it: with 4 frames in flight it has 5 slots' inputs,
    and a one-image frame's variant 4 was the image itself); an image and its mirror images are
    equally representative input."""
    k = int(variant)
    if k <= 0 or a.ndim == 0:
        return a
    flips = [ax for ax in (-1, -2) if a.ndim >= -ax and a.shape[ax] > 1]
    options = [()] + [(ax,) for ax in flips] + ([tuple(flips)] if len(flips) == 2 else [])
    axes = options[k % len(options)]
    out = np.flip(a, axis=axes) if axes else a
    turn = k // len(options)
    samples = int(a.shape[0]) if a.ndim > 1 and a.shape[0] > 1 else 1
    if turn % samples:
        out = np.roll(out, turn % samples, axis=0)
    if turn // samples:
        axis = -1 if a.ndim < 2 or a.shape[-1] >= a.shape[-2] else -2
        out = np.roll(out, turn // samples, axis=axis)
    return out


def input_values(np, rng, inputs, name, shape, dtype, variant=0):
    # type: (Any, Any, Optional[Dict[str, Any]], str, Tuple[int, ...], Any, int) -> Any
    """Host data of network input ``name`` (flat): the given input data cast to the engine's type (its
    samples repeated along the first axis up to a replica's batch; :func:`mirrored` ``variant``),
    else :func:`random_data`."""
    if inputs is None:
        return random_data(np, rng, shape, dtype)
    if name not in inputs:
        raise RuntimeError("the input data has no array for the engine's input %r (it has %s)"
                           % (name, ", ".join(sorted(inputs))))
    a = mirrored(np, inputs[name], variant)
    shape = tuple(int(d) for d in shape)
    if a.ndim and shape and tuple(a.shape) != shape and tuple(a.shape[1:]) == shape[1:] and a.shape[0]:
        a = a[np.arange(shape[0]) % a.shape[0]]
    if tuple(a.shape) != shape:
        raise RuntimeError("the input data's %r is %s, the engine's input is %s" % (name, list(a.shape), list(shape)))
    return np.ascontiguousarray(a, dtype=dtype).reshape(-1)


def random_fill(cuda, np, rng, mem, shape, dtype, inputs=None, name=None):
    # type: (Any, Any, Any, Any, Tuple[int, ...], Any, Optional[Dict[str, Any]], Optional[str]) -> Any
    """Fill a device buffer with network input ``name`` (:func:`input_values`: the job's input data
    ``inputs``, else random), copied from a pinned host buffer (as every other copy of a job; freed
    with the job's :class:`Resources`); returns that host copy."""
    data = random_data(np, rng, shape, dtype) if inputs is None else input_values(np, rng, inputs, str(name), shape,
                                                                                   dtype)
    host = cuda.pagelocked_empty(data.shape, data.dtype)
    host[:] = data
    cuda.memcpy_htod(mem, host)
    return host


def download(cuda, np, mem, shape, dtype):
    # type: (Any, Any, Any, Tuple[int, ...], Any) -> Any
    host = np.empty(tuple(int(d) for d in shape), dtype=dtype)
    cuda.memcpy_dtoh(host, mem)
    return host
