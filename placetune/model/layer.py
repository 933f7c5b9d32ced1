"""Plain data types describing one compute layer of a :class:`~placetune.model.model.Model`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["TensorInfo", "Layer"]


@dataclass(frozen=True)
class TensorInfo:
    """A tensor at a layer's input or output.

    Attributes:
        name: ONNX tensor name.
        shape: static shape (every dim a positive int).
        dtype: numpy dtype name, e.g. ``"float32"``, ``"int64"``.
        const: True for initializers / folded constants (weights, shape operands).
        value: the value of a *small* constant (shape operands, scales), else None.
            Weight data is never loaded.
        dynamic: for a model input, True when the file leaves a dimension open (its shape
            here comes from ``--shape``): only such inputs take trtexec's ``--shapes``.
        data_dependent: the size depends on the input data (after a ``NonZero`` or
            ``NonMaxSuppression``): ``shape`` is its upper bound (:mod:`placetune.model.bounds`).
    """

    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"
    const: bool = False
    value: np.ndarray | None = field(default=None, compare=False, repr=False)
    dynamic: bool = False
    data_dependent: bool = False

    @property
    def size(self) -> int:
        """Number of elements."""
        n = 1
        for d in self.shape:
            n *= int(d)
        return n

    @property
    def nbytes(self) -> int:
        """Bytes at the tensor's ONNX dtype."""
        return self.size * np.dtype(self.dtype).itemsize


@dataclass
class Layer:
    """One compute node of the model, as TensorRT's ONNX parser would name it.

    Attributes:
        name: ONNX node name, or ``node_of_<first output>`` for an unnamed node
            (exactly TensorRT's ONNX parser rule).
        op_type: ONNX op type (``"Conv"``, ``"Relu"``, ...).
        index: position in topological order (0-based, dense over layers).
        attrs: ONNX attributes as plain Python values (ints, floats, str, lists).
        inputs: every input, constants included (``const=True``), in ONNX order.
        outputs: every output.
        macs: multiply-accumulates (Conv, Gemm, MatMul, ConvTranspose); 0 elsewhere.
        flops: floating point operations (2 * macs for the above; about one per
            output element for element-wise work, more for normalisations/softmax).
        weight_bytes: bytes of constant inputs at their ONNX dtype.
        bytes_in: bytes of the non-constant inputs at their ONNX dtype.
        bytes_out: bytes of the outputs at their ONNX dtype.
        scope: module scope parsed from the name (``/layer1/layer1.0/conv1/Conv``
            -> ``layer1/layer1.0/conv1``); empty when the name has none.
        producers: names of the layers that produce this layer's non-constant inputs.
        consumers: names of the layers that consume this layer's outputs.
        domain: ONNX operator domain ("" for the default domain).
        plugin: an op ONNX has no schema for (``EfficientNMS_TRT``, a custom domain's op): TensorRT
            runs it as a plugin on the GPU; its output shapes are the ones the file declares.
    """

    name: str
    op_type: str
    index: int
    attrs: dict[str, Any]
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    macs: int = 0
    flops: int = 0
    weight_bytes: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    scope: str = ""
    producers: tuple[str, ...] = ()
    consumers: tuple[str, ...] = ()
    domain: str = ""
    plugin: bool = False

    @property
    def activation_inputs(self) -> tuple[TensorInfo, ...]:
        """Non-constant inputs (the tensors that flow between layers)."""
        return tuple(t for t in self.inputs if not t.const)

    @property
    def const_inputs(self) -> tuple[TensorInfo, ...]:
        """Constant inputs (weights, biases, folded shape operands)."""
        return tuple(t for t in self.inputs if t.const)

    @property
    def output_shape(self) -> tuple[int, ...]:
        """Shape of the first output."""
        return self.outputs[0].shape if self.outputs else ()

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of the first non-constant input (or the first input)."""
        acts = self.activation_inputs
        if acts:
            return acts[0].shape
        return self.inputs[0].shape if self.inputs else ()
