"""Test double of ``cuda.bindings.nvrtc``: compiles only the kernels it knows.

It cannot compile CUDA C: each kernel it knows is a Python version of one exact CUDA source
(:data:`KERNELS`, checked against the source's digest, so an edited kernel fails to compile
here instead of running stale semantics). Known: ``affine``, the stand-in engine of
tests/test_cuda_layer.py (spin for ``spin_ns`` on the GPU timer, then ``out = a*x + b (+ y)``,
reading its inputs after the spin), on the asynchronous fake GPU (``_fakegpu.launch``).
Calls return ``(nvrtcResult, outputs...)`` like the real bindings.
"""

from __future__ import annotations

import ctypes
import enum
import hashlib
import itertools
import re

import _fakegpu as _gpu

#: the launch overhead of a kernel on the fake GPU (ms)
LAUNCH_MS = 0.002


class nvrtcResult(enum.IntEnum):  # noqa: N801 - the real name
    NVRTC_SUCCESS = 0
    NVRTC_ERROR_COMPILATION = 6


def _affine(stream: int, blocks: int, threads: int, x: int, y: int, out: int, n: int, a: float, b: float,
            spin_ns: int) -> None:
    import numpy as np

    n = int(n)
    count = min(n, blocks * threads)

    def compute(inputs: dict) -> dict:
        xs = np.frombuffer(inputs[x][:4 * n], np.float32)
        r = np.float32(a) * xs + np.float32(b)
        if y:
            r = r + np.frombuffer(inputs[y][:4 * n], np.float32)
        return {out: r[:count].astype(np.float32).tobytes()}

    reads = [x] + ([y] if y else [])
    _gpu.launch(stream, [(None, int(spin_ns) / 1e6 + LAUNCH_MS)], reads, [out], compute, read_at="end")


#: kernel name -> its Python version; SOURCES: the sha256 of the CUDA source (whitespace folded) it ports
KERNELS = {"affine": _affine}
SOURCES = {"affine": "ec10d81f1d270989edef61cd76694e8b8b481c556ae3bfed258514107759e7df"}
_programs: dict[int, dict] = {}
_next = itertools.count(1)


def _digest(src: str) -> str:
    return hashlib.sha256(re.sub(r"\s+", " ", src).strip().encode()).hexdigest()


def nvrtcCreateProgram(src: bytes, name: bytes, num_headers: int, headers, include_names):  # noqa: N802
    prog = next(_next)
    _programs[prog] = {"src": bytes(src).decode(), "log": "", "ptx": None}
    return (nvrtcResult.NVRTC_SUCCESS, prog)


def nvrtcCompileProgram(prog: int, num_options: int, options):  # noqa: N802
    p = _programs[prog]
    names = re.findall(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(', p["src"])
    unknown = [n for n in names if n not in KERNELS]
    if not names or unknown:
        p["log"] = f"nvrtc double: cannot compile kernels {unknown or names}: it knows only {sorted(KERNELS)}"
        return (nvrtcResult.NVRTC_ERROR_COMPILATION,)
    digest = _digest(p["src"])
    if any(SOURCES[n] != digest for n in names):
        p["log"] = (f"nvrtc double: the source of {names} changed (sha256 {digest}); its Python version in "
                    "tests/fakes/cuda/bindings/nvrtc.py must be updated with it")
        return (nvrtcResult.NVRTC_ERROR_COMPILATION,)
    p["ptx"] = ("// fake PTX\n" + "".join(f".entry {n}\n" for n in names)).encode()
    return (nvrtcResult.NVRTC_SUCCESS,)


def _fill(buf: bytes, data: bytes) -> None:
    """Write into the caller's buffer in place, as the C binding does."""
    ctypes.memmove(ctypes.c_char_p(buf), data, min(len(buf), len(data)))


def nvrtcGetProgramLogSize(prog: int):  # noqa: N802
    return (nvrtcResult.NVRTC_SUCCESS, len(_programs[prog]["log"]) + 1)


def nvrtcGetProgramLog(prog: int, log: bytes):  # noqa: N802
    _fill(log, _programs[prog]["log"].encode())
    return (nvrtcResult.NVRTC_SUCCESS,)


def nvrtcGetPTXSize(prog: int):  # noqa: N802
    return (nvrtcResult.NVRTC_SUCCESS, len(_programs[prog]["ptx"] or b"") + 1)


def nvrtcGetPTX(prog: int, ptx: bytes):  # noqa: N802
    _fill(ptx, _programs[prog]["ptx"] or b"")
    return (nvrtcResult.NVRTC_SUCCESS,)


def _kernels_of(image: bytes):
    """The kernel names of a PTX image this double made (None: not one of its images)."""
    text = image.rstrip(b"\x00 ").decode(errors="replace")
    if not text.startswith("// fake PTX"):
        return None
    return tuple(re.findall(r"\.entry (\w+)", text))
