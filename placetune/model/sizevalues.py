"""The values of the small integer tensors a detector's post-processing computes from the shapes of its kept
boxes, as intervals: each is ``(lo, hi)``, two integer arrays of the tensor's shape that hold every value it
can take on any input.

Ultralytics' ``nms=True`` export computes the target of an ``Expand`` (torch's ``expand(-1, 4)`` of the kept
rows: ``Where(Equal(shape, -1), 1, shape)``, ``shape = Concat(Shape(rows)[0], 4)``) and the padding of its
detections to ``max_det`` rows (``Pad`` by ``(300 - Shape(dets)[0]) * 6``) this way. When the file's
``value_info`` names those sizes after the ``NonZero`` or NMS they come from (the exporter's own inference),
ONNX inference follows them; when a tool wrote its own (``polygraphy surgeon sanitize
--override-input-shapes``), the sizes get fresh symbols (``unk__110``) and :mod:`placetune.model.bounds` bounds
them from these intervals.

A dimension of a data-dependent tensor (``dependent``) is taken as ``[0, its bound]``, a static one exactly;
constants are exact. Each op below is evaluated on the interval arithmetic of its ONNX definition (``Sub``:
``[lo1 - hi2, hi1 - lo2]``; ``Mul``: the least and greatest product of the ends; ``Where`` on a constant condition only;
``Gather`` and ``Slice`` with constant indices only), so a bound stays a bound.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx

__all__ = ["Interval", "initial_intervals", "size_interval"]

Interval = tuple[np.ndarray, np.ndarray]

Info = Mapping[str, tuple[list | None, int]]


def _exact(v: np.ndarray) -> Interval:
    a = np.asarray(v, np.int64)
    return a, a.copy()


def initial_intervals(values: Mapping[str, np.ndarray]) -> dict[str, Interval]:
    """The exact intervals of the graph's small integer constants (rank <= 2)."""
    out: dict[str, Interval] = {}
    for k, v in values.items():
        a = np.asarray(v)
        if a.dtype.kind in "iu" and a.ndim <= 2:
            out[k] = _exact(a)
    return out


def _attr(node: onnx.NodeProto, name: str, default: int) -> int:
    return next((int(a.i) for a in node.attribute if a.name == name), default)


def _const(values: Mapping[str, np.ndarray], node: onnx.NodeProto, i: int) -> np.ndarray | None:
    if len(node.input) <= i or not node.input[i] or node.input[i] not in values:
        return None
    return np.asarray(values[node.input[i]])


def _shape(node: onnx.NodeProto, info: Info, dependent: set[str]) -> Interval | None:
    dims = info.get(node.input[0], (None, 0))[0]
    if dims is None or not all(isinstance(d, int) and d > 0 for d in dims):
        return None
    hi = np.array(dims[_attr(node, "start", 0):next((int(a.i) for a in node.attribute if a.name == "end"), None)],
                  np.int64)
    return (np.zeros_like(hi) if node.input[0] in dependent else hi.copy()), hi


def _arith(op: str, a: Interval, b: Interval) -> Interval | None:
    try:
        if op == "Add":
            return a[0] + b[0], a[1] + b[1]
        if op == "Sub":
            return a[0] - b[1], a[1] - b[0]
        if op == "Mul":
            ends = [x * y for x in a for y in b]  # the extremes of a product are at the ends
            return np.minimum.reduce(ends), np.maximum.reduce(ends)
        if op == "Min":
            return np.minimum(a[0], b[0]), np.minimum(a[1], b[1])
        if op == "Max":
            return np.maximum(a[0], b[0]), np.maximum(a[1], b[1])
    except ValueError:  # shapes that do not broadcast
        return None
    return None


def _slice(node: onnx.NodeProto, x: Interval, values: Mapping[str, np.ndarray]) -> Interval | None:
    starts, ends = _const(values, node, 1), _const(values, node, 2)
    if starts is None or ends is None:
        return None
    axes = _const(values, node, 3)
    steps = _const(values, node, 4)
    axes_l = list(axes.ravel()) if axes is not None else list(range(starts.size))
    steps_l = list(steps.ravel()) if steps is not None else [1] * starts.size
    index: list[slice] = [slice(None)] * x[0].ndim
    try:
        for s, e, ax, st in zip(starts.ravel(), ends.ravel(), axes_l, steps_l, strict=True):
            if st == 0:
                return None
            index[int(ax)] = slice(int(s), int(e), int(st))  # numpy clamps as ONNX's Slice does
    except (ValueError, IndexError):
        return None
    return x[0][tuple(index)], x[1][tuple(index)]


def size_interval(node: onnx.NodeProto, info: Info, dependent: set[str], sizes: Mapping[str, Interval],
                  values: Mapping[str, np.ndarray]) -> Interval | None:
    """The interval of the values of ``node``'s first output (see the module), or None."""
    if node.domain not in ("", "ai.onnx") or not node.output or not node.input:
        return None
    op = node.op_type
    if op == "Shape":
        return _shape(node, info, dependent)
    x = sizes.get(node.input[0])
    if op == "Where":
        cond = _const(values, node, 0)
        a, b = (sizes.get(t) for t in node.input[1:3]) if len(node.input) == 3 else (None, None)
        if cond is None or cond.dtype != np.bool_ or a is None or b is None:
            return None
        try:
            return np.where(cond, a[0], b[0]), np.where(cond, a[1], b[1])
        except ValueError:
            return None
    if x is None:
        return None
    if op in ("Cast", "Identity"):
        return x
    if op == "Gather":
        index = _const(values, node, 1)  # a constant index (a bound is no index)
        if index is None:
            return None
        try:
            ax = _attr(node, "axis", 0)
            return tuple(np.take(v, index.astype(np.int64), axis=ax) for v in x)  # type: ignore[return-value]
        except (IndexError, ValueError, np.exceptions.AxisError):
            return None
    if op in ("Unsqueeze", "Squeeze", "Reshape", "Flatten"):
        return _reshaped(node, x, values)
    if op == "Concat":
        parts = [sizes.get(t) for t in node.input]
        if any(p is None for p in parts):
            return None
        known: Sequence[Interval] = [p for p in parts if p is not None]
        try:
            ax = _attr(node, "axis", 0)
            return np.concatenate([p[0] for p in known], ax), np.concatenate([p[1] for p in known], ax)
        except (ValueError, np.exceptions.AxisError):
            return None
    if op in ("Add", "Sub", "Mul", "Min", "Max") and len(node.input) == 2:
        y = sizes.get(node.input[1])
        return _arith(op, x, y) if y is not None else None
    if op == "Slice":
        return _slice(node, x, values)
    return None


def _reshaped(node: onnx.NodeProto, x: Interval, values: Mapping[str, np.ndarray]) -> Interval | None:
    op, lo = node.op_type, x[0]
    try:
        if op == "Unsqueeze" and lo.ndim == 0:
            shape: tuple[int, ...] = (1,)
        elif op == "Squeeze" and lo.size == 1:
            shape = ()
        elif op == "Flatten":
            ax = _attr(node, "axis", 1) % max(lo.ndim, 1)
            shape = (int(np.prod(lo.shape[:ax])), -1)
        elif op == "Reshape":
            target = _const(values, node, 1)
            if target is None or (target == 0).any():
                return None
            shape = tuple(int(t) for t in target.ravel())
        else:
            return None
        return lo.reshape(shape), x[1].reshape(shape)
    except ValueError:
        return None
