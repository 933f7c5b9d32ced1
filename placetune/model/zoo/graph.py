"""The zoo's graph builder: torch.onnx-style node, tensor and parameter names, optional weight data.

A network module's public functions (``resnet18``, ``yolov8n``, ...) are its builders: each takes a :class:`Graph`
and the batch (and its options, such as ``softmax``) and returns a :data:`Net`; the registry
(:mod:`placetune.model.zoo.registry`) names them. The layers they add come from :mod:`placetune.model.zoo.layers`.
"""

from __future__ import annotations

import math
import zlib
from typing import Any, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def scope_names(parts: Sequence[str]) -> tuple[str, str]:
    """Turn torch scope components into (node scope, dotted parameter prefix).

    ``("layer4", "layer4.0", "downsample", "downsample.0")`` gives
    ``("/layer4/layer4.0/downsample/downsample.0", "layer4.0.downsample.0")``.
    """
    dotted = ""
    prev = ""
    for part in parts:
        if prev and part.startswith(prev + "."):
            dotted = dotted[: len(dotted) - len(prev)] + part
        else:
            dotted = f"{dotted}.{part}" if dotted else part
        prev = part
    return ("/" + "/".join(parts)) if parts else "", dotted


class Graph:
    """Collects nodes and initializers with torch.onnx-style unique names."""

    def __init__(self, weights: bool, graph: onnx.GraphProto) -> None:
        self.weights = weights
        self.nodes: list[onnx.NodeProto] = []
        # initializers are written straight into the model's graph: no copy of big weights
        self.initializers = graph.initializer
        self._counts: dict[str, int] = {}
        self._calls: dict[str, int] = {}
        self._tensors: set[str] = set()

    def new_tensor(self, name: str) -> str:
        """Reserve the tensor name ``name`` (a graph input, a node output) and return it; a name used twice is a zoo bug."""
        if name in self._tensors:
            raise AssertionError(f"zoo bug: tensor name {name!r} used twice")
        self._tensors.add(name)
        return name

    def op(
        self,
        op_type: str,
        inputs: Sequence[str],
        parts: Sequence[str] = (),
        *,
        outputs: int = 1,
        **attrs: Any,
    ) -> Any:
        """Add one node; returns its output name (or a list when ``outputs > 1``)."""
        scope, _ = scope_names(parts)
        base = f"{scope}/{op_type}"
        k = self._counts.get(base, 0)
        self._counts[base] = k + 1
        name = base if k == 0 else f"{base}_{k}"
        outs = [self.new_tensor(f"{name}_output_{i}") for i in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=name, **attrs))
        return outs[0] if outputs == 1 else outs

    def skip(self, parts: Sequence[str], op_type: str, n: int = 1) -> None:
        """Advance the name counter of ``op_type`` in a scope, as an exported node folded away did."""
        base = f"{scope_names(parts)[0]}/{op_type}"
        self._counts[base] = self._counts.get(base, 0) + n

    def reuse(self, parts: Sequence[str]) -> list[str]:
        """Scope of one more call of a module that runs several times (torch: ``relu_1``)."""
        scope, _ = scope_names(parts)
        k = self._calls.get(scope, 0)
        self._calls[scope] = k + 1
        return list(parts) if k == 0 else [*parts[:-1], f"{parts[-1]}_{k}"]

    def const(self, parts: Sequence[str], value: Any, dtype: Any) -> str:
        """A ``Constant`` node holding ``value`` (always with data, whatever ``weights`` is)."""
        tensor = numpy_helper.from_array(np.asarray(value, dtype=dtype), name="")
        return self.op("Constant", [], parts, value=tensor)

    def param(self, name: str, shape: Sequence[int], init: str, fan_in: int = 1) -> str:
        """A float32 initializer: shape only, or deterministic data when ``weights`` is set.

        ``init`` is one of ``"weight"`` (uniform, variance 1/fan_in), ``"bias"`` (uniform in
        +-1/sqrt(fan_in)), ``"ones"``, ``"zeros"`` or ``"embed"`` (normal, std 0.02).
        """
        self.new_tensor(name)
        shape = [int(d) for d in shape]
        tensor = self.initializers.add()
        tensor.name = name
        tensor.data_type = TensorProto.FLOAT
        tensor.dims.extend(shape)
        if not self.weights:
            return name
        rng = np.random.default_rng(zlib.crc32(name.encode("utf-8")))
        f32 = np.float32
        if init in ("weight", "bias"):
            bound = math.sqrt(3.0 / fan_in) if init == "weight" else 1.0 / math.sqrt(fan_in)
            arr = rng.random(shape, dtype=f32)
            arr *= f32(2.0 * bound)
            arr -= f32(bound)
        elif init == "ones":
            arr = np.ones(shape, dtype=f32)
        elif init == "zeros":
            arr = np.zeros(shape, dtype=f32)
        elif init == "embed":
            arr = rng.standard_normal(shape, dtype=f32)
            arr *= f32(0.02)
        else:  # pragma: no cover - programming error
            raise AssertionError(f"zoo bug: unknown init {init!r}")
        tensor.raw_data = arr.astype("<f4", copy=False).tobytes()  # ONNX raw_data: little-endian
        return name

    def rename_output(self, tensor: str, new: str) -> str:
        """Rename the graph's final tensor (it must have no consumer yet)."""
        for node in self.nodes:
            for i, out in enumerate(node.output):
                if out == tensor:
                    node.output[i] = new
            if tensor in node.input:  # pragma: no cover - programming error
                raise AssertionError("zoo bug: renaming a consumed tensor")
        self._tensors.discard(tensor)
        return self.new_tensor(new)


#: What a network builder returns: (output tensor, input shape, output shape), or for a network with
#: several outputs (a tuple of tensors, input shape, a tuple of shapes).
Net = tuple[Any, list[int], Any]
