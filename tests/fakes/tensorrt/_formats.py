"""The fake's I/O tensor formats: which (type, format) pairs TensorRT accepts, and the bytes of each layout.

Transcribed from the ``TensorFormat`` comments of TensorRT's own headers (the only source of
these rules): ``include/NvInferRuntimeCommon.h`` on ``release/8.5`` / ``release/8.6`` and
``include/NvInferRuntimeBase.h`` on ``release/10.3`` (11.x keeps the 10.x text). Per format:
the data types it is "bound to" / "requires", the minimum rank, the vector dimension (counted
from the end) and the number of components per vector. What differs between versions:
``kCHW16`` is "bound to FP16" in 8.x and "requires INT8 or FP16" from 10.x.

Memory layouts (same headers): vector-major ``kCHW<V>`` is ``[N][(C+V-1)/V][H][W][V]``;
vector-minor ``kHWC<V>`` is ``[N][H][W][(C+V-1)/V*V]``; ``kDLA_LINEAR`` is
``[N][C][H][roundUp(W, 64/elementSize)]``. INT8 I/O holds ``round(x / scale)`` clipped to
[-127, 127] with ``scale = dynamic range / 127``. ``kDLA_HWC4``, ``kHWC``, ``kDHWC`` and
``kDHWC8`` are not modelled: a build asking for them fails in the fake (saying so).
"""

from __future__ import annotations

#: format -> (types, minimum rank, vector dimension from the end or 0, components per vector)
_COMMON = {
    "LINEAR": (None, 0, 0, 1),
    "CHW2": ({"HALF"}, 3, 3, 2),
    "HWC8": ({"HALF"}, 3, 3, 8),
    "CHW4": ({"INT8", "HALF"}, 3, 3, 4),
    "CHW32": (None, 3, 3, 32),
    "CDHW32": ({"HALF", "INT8"}, 4, 4, 32),
    "DLA_LINEAR": ({"HALF", "INT8"}, 3, 0, 1),
    "HWC16": ({"HALF"}, 3, 3, 16),
}
_VECTOR_MINOR = {"HWC8", "HWC16"}
_NOT_MODELLED = {"DLA_HWC4", "HWC", "DHWC", "DHWC8"}
#: the DLA's own formats ("native feature format" for FP16 / INT8; kDLA_LINEAR planar)
DLA_NATIVE = {("HALF", "CHW16"), ("INT8", "CHW32"), ("HALF", "DLA_LINEAR"), ("INT8", "DLA_LINEAR")}


def rules(major: int) -> dict:
    """The format table of TensorRT ``major``."""
    table = dict(_COMMON)
    table["CHW16"] = ({"HALF"} if major < 10 else {"INT8", "HALF"}, 3, 3, 16)
    return table


def choose(major: int, mask: int, dtype: str, rank: int, members: list[str]) -> tuple[str | None, str]:
    """The format a build gives an I/O tensor of ``dtype`` and ``rank`` whose ``allowed_formats``
    is ``mask``: ``kLINEAR`` when allowed, else the lowest allowed format the rules accept;
    ``(None, why)`` when none is acceptable."""
    table = rules(major)
    allowed = [m for i, m in enumerate(members) if mask >> i & 1]
    why = []
    for fmt in sorted(allowed, key=lambda m: (m != "LINEAR", members.index(m))):
        if fmt in _NOT_MODELLED:
            why.append(f"{fmt} (not modelled by the fake)")
            continue
        types, min_rank, _, _ = table[fmt]
        if types is not None and dtype not in types:
            why.append(f"{fmt} needs {'/'.join(sorted(types))}, not {dtype}")
        elif rank < min_rank:
            why.append(f"{fmt} needs rank >= {min_rank}, not {rank}")
        else:
            return fmt, ""
    return None, "; ".join(why) or "no format allowed"


def layout(major: int, fmt: str, shape: tuple) -> tuple[int, int]:
    """(vectorised dimension or -1, components per element) of ``fmt`` for ``shape``."""
    _, _, from_end, comps = rules(major)[fmt]
    if not from_end or comps == 1:
        return -1, 1
    return len(shape) - from_end, comps


def _padded(shape: tuple, vec: int, comps: int) -> list[int]:
    dims = [int(d) for d in shape]
    if vec >= 0:
        dims[vec] = -(-dims[vec] // comps) * comps
    return dims


def nbytes(major: int, fmt: str, shape: tuple, itemsize: int) -> int:
    """Bytes of a tensor of ``shape`` in ``fmt``."""
    import numpy as np

    vec, comps = layout(major, fmt, shape)
    dims = _padded(shape, vec, comps)
    if fmt == "DLA_LINEAR":
        per = 64 // itemsize
        dims[-1] = -(-dims[-1] // per) * per
    return int(np.prod(dims)) * itemsize


def _np_type(dtype: str):
    import numpy as np

    return {"FLOAT": np.float32, "HALF": np.float16, "INT8": np.int8, "INT32": np.int32, "INT64": np.int64,
            "BOOL": np.bool_, "UINT8": np.uint8}[dtype]


def pack(major: int, values: np.ndarray, dtype: str, fmt: str, scale: float | None) -> bytes:
    """The bytes an engine writes for ``values`` (logical shape) as ``dtype`` in ``fmt``."""
    import numpy as np

    v = np.asarray(values)
    if dtype == "INT8":
        v = np.clip(np.round(v.astype(np.float64) / scale), -127, 127)
    v = v.astype(_np_type(dtype))
    if fmt == "LINEAR":
        return np.ascontiguousarray(v).tobytes()
    vec, comps = layout(major, fmt, v.shape)
    if fmt == "DLA_LINEAR":
        per = 64 // v.dtype.itemsize
        w = v.shape[-1]
        out = np.zeros(v.shape[:-1] + (-(-w // per) * per,), v.dtype)
        out[..., :w] = v
        return out.tobytes()
    dims = _padded(v.shape, vec, comps)
    full = np.zeros(dims, v.dtype)
    full[tuple(slice(0, d) for d in v.shape)] = v
    if fmt in _VECTOR_MINOR:  # [.., C, H, W] -> [.., H, W, C]
        return np.ascontiguousarray(np.moveaxis(full, vec, -1)).tobytes()
    # vector-major: [.., C/V*V, rest] -> [.., C/V, rest, V]
    split = full.reshape(dims[:vec] + [dims[vec] // comps, comps] + dims[vec + 1:])
    return np.ascontiguousarray(np.moveaxis(split, vec + 1, -1)).tobytes()


def unpack(major: int, data: bytes, shape: tuple, dtype: str, fmt: str, scale: float | None) -> np.ndarray:
    """The logical values (float32 for INT8, dequantised) of bytes an engine reads as ``dtype`` in ``fmt``."""
    import numpy as np

    nt = np.dtype(_np_type(dtype))
    shape = tuple(int(d) for d in shape)
    if fmt == "LINEAR":
        v = np.frombuffer(data, dtype=nt, count=int(np.prod(shape))).reshape(shape)
    elif fmt == "DLA_LINEAR":
        per = 64 // nt.itemsize
        wp = -(-shape[-1] // per) * per
        v = np.frombuffer(data, dtype=nt).reshape(shape[:-1] + (wp,))[..., :shape[-1]]
    else:
        vec, comps = layout(major, fmt, shape)
        dims = _padded(shape, vec, comps)
        if fmt in _VECTOR_MINOR:
            full = np.moveaxis(np.frombuffer(data, dtype=nt).reshape(dims[:vec] + dims[vec + 1:] + [dims[vec]]), -1, vec)
        else:
            split = np.frombuffer(data, dtype=nt).reshape(dims[:vec] + [dims[vec] // comps] + dims[vec + 1:] + [comps])
            full = np.moveaxis(split, -1, vec + 1).reshape(dims)
        v = full[tuple(slice(0, d) for d in shape)]
    if dtype == "INT8":
        return v.astype(np.float32) * np.float32(scale)
    return np.ascontiguousarray(v)
