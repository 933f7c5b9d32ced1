"""Constant folding of shape-only computation (Shape/Gather/Unsqueeze/Concat/... chains).

TensorRT folds these chains at build time; placetune folds them at import so that the
remaining nodes are the compute layers a placement talks about. Only small integer /
float tensors are evaluated; weights are never touched (their data is not loaded).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

__all__ = ["fold_value", "FOLDABLE_OPS", "MAX_FOLD_ELEMENTS"]

#: Values larger than this are not materialised by the folder.
MAX_FOLD_ELEMENTS = 1 << 16


def _axes(node_attrs: dict[str, Any], inputs: list[np.ndarray | None], idx: int) -> list[int] | None:
    if "axes" in node_attrs:
        return list(node_attrs["axes"])
    if len(inputs) > idx and inputs[idx] is not None:
        return [int(a) for a in np.asarray(inputs[idx]).reshape(-1)]
    return None


def _shape(a, x, shape_of):
    shp = np.array(shape_of, dtype=np.int64)
    start = int(a.get("start", 0))
    end = a.get("end")
    return shp[start:] if end is None else shp[start:int(end)]


def _unsqueeze(a, x):
    axes = _axes(a, x, 1) or []
    out = x[0]
    rank = out.ndim + len(axes)
    for ax in sorted(ax % rank for ax in axes):
        out = np.expand_dims(out, ax)
    return out


def _squeeze(a, x):
    axes = _axes(a, x, 1)
    if axes is None:
        return np.squeeze(x[0])
    return np.squeeze(x[0], axis=tuple(ax % x[0].ndim for ax in axes))


def _slice(a, x):
    data = x[0]
    starts, ends = x[1].tolist(), x[2].tolist()
    axes = x[3].tolist() if len(x) > 3 and x[3] is not None else list(range(len(starts)))
    steps = x[4].tolist() if len(x) > 4 and x[4] is not None else [1] * len(starts)
    sl = [slice(None)] * data.ndim
    for s, e, ax, st in zip(starts, ends, axes, steps):
        sl[ax % data.ndim] = slice(int(s), int(e), int(st))
    return data[tuple(sl)]


def _reshape(a, x):
    data, shape = x[0], [int(v) for v in x[1].tolist()]
    if not a.get("allowzero", 0):
        shape = [data.shape[i] if v == 0 else v for i, v in enumerate(shape)]
    return data.reshape(shape)


def _cast(a, x):
    return x[0].astype(onnx.helper.tensor_dtype_to_np_dtype(int(a["to"])))


def _constant_of_shape(a, x):
    val = a.get("value")
    fill = np.asarray(val).reshape(-1)[0] if val is not None else np.float32(0)
    return np.full([int(v) for v in x[0].tolist()], fill, dtype=np.asarray(fill).dtype)


def _div(a, x):
    if np.issubdtype(x[0].dtype, np.integer):
        return (x[0] // x[1]).astype(x[0].dtype)
    return x[0] / x[1]


def _reduce(fn: Callable[..., np.ndarray]) -> Callable[[dict[str, Any], list], np.ndarray]:
    """ReduceMax / ReduceMin: ``axes`` an attribute (opset < 18) or input 1; none given reduces every axis
    unless ``noop_with_empty_axes`` (ONNX spec)."""
    def run(a: dict[str, Any], x: list) -> np.ndarray:
        axes = _axes(a, x, 1)
        if not axes and a.get("noop_with_empty_axes", 0):
            return x[0]
        keep = bool(a.get("keepdims", 1))
        return fn(x[0], axis=tuple(ax % max(x[0].ndim, 1) for ax in axes) if axes else None, keepdims=keep)
    return run


def _clip(a: dict[str, Any], x: list) -> np.ndarray:
    """Clip: ``min``/``max`` optional inputs (opset 11 and later) or attributes (before); either may be left out."""
    out = x[0]
    lo = x[1] if len(x) > 1 and x[1] is not None else a.get("min")
    hi = x[2] if len(x) > 2 and x[2] is not None else a.get("max")
    if lo is not None:
        out = np.maximum(out, np.asarray(lo, out.dtype))
    if hi is not None:
        out = np.minimum(out, np.asarray(hi, out.dtype))
    return out


_EVAL: dict[str, Callable[[dict[str, Any], list], np.ndarray]] = {
    "Identity": lambda a, x: x[0],
    "Gather": lambda a, x: np.take(x[0], x[1], axis=int(a.get("axis", 0))),
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Concat": lambda a, x: np.concatenate([np.atleast_1d(v) for v in x], axis=int(a.get("axis", 0))),
    "Cast": _cast,
    "Slice": _slice,
    "Reshape": _reshape,
    "Add": lambda a, x: x[0] + x[1],
    "Sub": lambda a, x: x[0] - x[1],
    "Mul": lambda a, x: x[0] * x[1],
    "Div": _div,
    "Neg": lambda a, x: -x[0],
    "Abs": lambda a, x: np.abs(x[0]),
    "Floor": lambda a, x: np.floor(x[0]),
    "Ceil": lambda a, x: np.ceil(x[0]),
    "Max": lambda a, x: np.maximum.reduce(x),
    "Min": lambda a, x: np.minimum.reduce(x),
    "Equal": lambda a, x: np.equal(x[0], x[1]),
    "Where": lambda a, x: np.where(x[0], x[1], x[2]),
    "ConstantOfShape": _constant_of_shape,
    "Range": lambda a, x: np.arange(x[0].item(), x[1].item(), x[2].item(), dtype=x[0].dtype),
    "Size": lambda a, x: np.array(x[0].size, dtype=np.int64),
    "ReduceProd": lambda a, x: np.prod(x[0], keepdims=bool(a.get("keepdims", 1))),
    "ReduceMax": _reduce(np.max),
    "ReduceMin": _reduce(np.min),
    "Expand": lambda a, x: x[0] * np.ones([int(v) for v in x[1].tolist()], dtype=x[0].dtype),
    "Transpose": lambda a, x: np.transpose(x[0], a.get("perm")),
    "Sqrt": lambda a, x: np.sqrt(x[0]),
    "Reciprocal": lambda a, x: np.reciprocal(x[0]),
    "Round": lambda a, x: np.round(x[0]),  # half to even, as ONNX's Round
    "Less": lambda a, x: np.less(x[0], x[1]),
    "Greater": lambda a, x: np.greater(x[0], x[1]),
    "LessOrEqual": lambda a, x: np.less_equal(x[0], x[1]),
    "GreaterOrEqual": lambda a, x: np.greater_equal(x[0], x[1]),
    "Not": lambda a, x: np.logical_not(x[0]),
    "And": lambda a, x: np.logical_and(x[0], x[1]),
    "Or": lambda a, x: np.logical_or(x[0], x[1]),
    "Clip": _clip,
    # ONNX Mod: the sign of the divisor (numpy's mod) unless fmod=1 (C's fmod, the sign of the dividend)
    "Mod": lambda a, x: np.fmod(x[0], x[1]) if a.get("fmod", 0) else np.mod(x[0], x[1]),
}

#: ops whose output is their inputs broadcast together (numpy's rules, as ONNX's multidirectional broadcasting)
_BROADCAST = frozenset({"Add", "Sub", "Mul", "Div", "Max", "Min", "Equal", "Where", "Less", "Greater", "LessOrEqual",
                        "GreaterOrEqual", "And", "Or", "Mod"})


def _elements(op_type: str, attrs: dict[str, Any], x: list) -> int | None:
    """How many elements ``op_type`` would write, worked out from its inputs' shapes and values without computing
    it (None: not known here; the op then fails or stays small on its own). An op that writes more than the
    folder keeps is never run: ``ConstantOfShape`` of a drawn ``[2**31]`` filled 8 GB before its size was
    checked."""
    try:
        if op_type == "ConstantOfShape":
            return math.prod(int(v) for v in np.asarray(x[0]).reshape(-1).tolist())
        if op_type == "Expand":
            target = tuple(int(v) for v in np.asarray(x[1]).reshape(-1).tolist())
            rank = max(np.ndim(x[0]), len(target))
            dims = [1] * (rank - np.ndim(x[0])) + list(np.shape(x[0]))
            want = [1] * (rank - len(target)) + list(target)
            return math.prod(max(a, b) for a, b in zip(dims, want))
        if op_type == "Range":
            start, limit, delta = (float(np.asarray(v).reshape(-1)[0]) for v in x[:3])
            return max(0, math.ceil((limit - start) / delta))
        if op_type == "Gather":
            data = np.asarray(x[0])
            axis = int(attrs.get("axis", 0)) % max(data.ndim, 1)
            return np.asarray(x[1]).size * math.prod(d for i, d in enumerate(data.shape) if i != axis)
        if op_type in _BROADCAST:
            return math.prod(np.broadcast_shapes(*(np.shape(v) for v in x if v is not None)))
    except (ArithmeticError, ValueError, TypeError, IndexError):
        return None
    return None


#: Ops the folder can evaluate when every input value is known.
FOLDABLE_OPS = frozenset(_EVAL) | {"Shape", "Constant"}


def constant_value(node: onnx.NodeProto) -> np.ndarray | None:
    """Value of a ``Constant`` node (None for sparse or unsupported forms)."""
    for attr in node.attribute:
        if attr.name == "value":
            return numpy_helper.to_array(attr.t)
        if attr.name == "value_float":
            return np.array(attr.f, dtype=np.float32)
        if attr.name == "value_floats":
            return np.array(list(attr.floats), dtype=np.float32)
        if attr.name == "value_int":
            return np.array(attr.i, dtype=np.int64)
        if attr.name == "value_ints":
            return np.array(list(attr.ints), dtype=np.int64)
    return None


def fold_value(
    op_type: str,
    attrs: dict[str, Any],
    inputs: list[np.ndarray | None],
    first_input_shape: tuple[int, ...] | None = None,
) -> np.ndarray | None:
    """Evaluate one shape-only op on known values.

    Args:
        op_type: ONNX op type.
        attrs: attributes as plain values.
        inputs: input values (None where unknown; an empty optional input is None too).
        first_input_shape: static shape of input 0 (for ``Shape``).

    Returns:
        The output value, or None when the op cannot be folded here.
    """
    if op_type == "Shape":
        if first_input_shape is None:
            return None
        return _shape(attrs, inputs, first_input_shape)
    fn = _EVAL.get(op_type)
    if fn is None:
        return None
    required = [v for v in inputs if v is not None]
    if not required or (inputs and inputs[0] is None):
        return None
    if op_type not in ("Slice", "Unsqueeze", "Squeeze", "ReduceMax", "ReduceMin", "Clip") and any(v is None for v in inputs):
        return None
    size = _elements(op_type, attrs, inputs)
    if size is not None and size > MAX_FOLD_ELEMENTS:
        return None
    try:
        out = np.asarray(fn(attrs, [None if v is None else np.asarray(v) for v in inputs]))
    except Exception:  # noqa: BLE001 - anything numpy rejects is simply not folded
        return None
    return out if out.size <= MAX_FOLD_ELEMENTS else None
