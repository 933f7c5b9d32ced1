"""Folding a graph to the layers TensorRT keeps: constants, shape-only chains and computations on constants.

:mod:`placetune.model.folding` evaluates one node on known values; this module walks the graph with it,
builds the graph of the nodes left, infers that graph's shapes and folds again while that folds more. A
size computed from a layer whose own size was computed in the graph (torchvision's detectors pad the
image they resized to a size computed from the input's, and size their anchors from the feature maps)
is known only once the first size has been folded, as TensorRT folds it at build time for static inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from placetune.errors import ModelError
from placetune.model.folding import FOLDABLE_OPS, constant_value, fold_value
from placetune.model.runnable import refuse_forbidden_operands

__all__ = ["SMALL_CONST_ELEMENTS", "GraphFolder", "attr_value"]

#: Constants with at most this many elements keep their value on TensorInfo.value.
SMALL_CONST_ELEMENTS = 4096

#: rounds of fold -> infer -> fold at most (each round folds the sizes the previous one made static)
MAX_ROUNDS = 16

Info = dict[str, tuple[list | None, int]]


def attr_value(attr: onnx.AttributeProto) -> Any:
    """An ONNX attribute as a plain value (a small tensor as a list; a subgraph as ``<GraphProto>``)."""
    value = helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, onnx.TensorProto):
        arr = numpy_helper.to_array(value) if value.raw_data or value.float_data or value.int64_data or value.int32_data or value.double_data else None
        return arr.tolist() if arr is not None and arr.size <= SMALL_CONST_ELEMENTS else None
    if isinstance(value, (onnx.GraphProto, onnx.TypeProto, onnx.SparseTensorProto)):
        return "<" + type(value).__name__ + ">"
    if isinstance(value, list):
        return [v.decode("utf-8", "replace") if isinstance(v, bytes) else "<" + type(v).__name__ + ">"
                if isinstance(v, (onnx.GraphProto, onnx.TensorProto, onnx.TypeProto)) else v for v in value]
    return value


class GraphFolder:
    """Fold one model's graph (see the module).

    Attributes:
        values: tensor -> value, for the constants whose value is known (small initializers, folded values).
        const: the tensors TensorRT folds (initializers, folded values, computations on constants).
        unevaluated: the constants computed from constants whose value placetune does not evaluate.
        alias: an ``Identity``'s output -> the tensor it passes on.
        stripped: initializers without data (their values are never loaded); added to.
    """

    def __init__(self, proto: onnx.ModelProto, *, name: str, values: dict[str, np.ndarray], stripped: set[str],
                 declared: Mapping[str, onnx.ValueInfoProto], infer: Callable[[onnx.ModelProto], Info]) -> None:
        self.proto, self.graph, self.name = proto, proto.graph, name
        self.values, self.stripped, self.declared, self.infer = values, stripped, declared, infer
        self.init = {t.name for t in self.graph.initializer}
        self.const: set[str] = set(self.init)
        self.unevaluated: set[str] = set()
        self.alias: dict[str, str] = {}

    def run(self, nodes: list[onnx.NodeProto], info: Info) -> tuple[list[onnx.NodeProto], onnx.ModelProto, Info]:
        """Fold ``nodes`` (topological order; ``info`` their file's shapes, updated) to a fixed point.

        Returns:
            the nodes kept, the graph of them (folded values as initializers), its inferred shapes.
        """
        keep = self.fold(nodes, info)
        folded = self.rebuild(keep, info)
        folded_info = self.infer(folded)
        for _ in range(MAX_ROUNDS):
            info.update(folded_info)
            again = self.fold(keep, info)
            if len(again) == len(keep):
                break
            keep = again
            folded = self.rebuild(keep, info)
            folded_info = self.infer(folded)
        return keep, folded, folded_info

    @property
    def out_names(self) -> list[str]:
        """The graph's outputs, through the ``Identity`` nodes folded away."""
        return [self.alias.get(o.name, o.name) for o in self.graph.output]

    def fold(self, pending: list[onnx.NodeProto], info: Info) -> list[onnx.NodeProto]:
        """One pass: the nodes of ``pending`` that stay (inputs renamed through folded ``Identity`` nodes)."""
        values, const = self.values, self.const

        def shape_of(tensor: str) -> tuple[int, ...] | None:
            if tensor in values:
                return tuple(values[tensor].shape)
            dims = info.get(tensor, (None, 0))[0]
            if dims is None or any(not isinstance(d, int) for d in dims):
                return None
            return tuple(dims)

        keep: list[onnx.NodeProto] = []
        for node in pending:
            ins = [self.alias.get(x, x) for x in node.input]
            attrs = {a.name: attr_value(a) for a in node.attribute}
            refuse_forbidden_operands(node, ins, values)  # (Range, ConstantOfShape: before folding hides them)
            if node.op_type == "Constant":
                v = constant_value(node)
                if v is not None:
                    values[node.output[0]] = v
                    const.add(node.output[0])
                    continue
            if node.op_type == "Identity" and ins and ins[0]:
                self.alias[node.output[0]] = ins[0]
                continue
            if node.domain in ("", "ai.onnx") and node.op_type in FOLDABLE_OPS:
                v = fold_value(node.op_type, attrs, [values.get(x) if x else None for x in ins],
                               shape_of(ins[0]) if ins else None)
                if v is not None:
                    values[node.output[0]] = v
                    const.add(node.output[0])
                    continue
            real = [x for x in ins if x]
            if real and all(x in const for x in real) and node.op_type not in ("Loop", "If", "Scan") \
                    and all(shape_of(o) is not None for o in node.output if o):
                # A computation on constants only (e.g. a transposed weight): TensorRT folds it. One whose
                # size is not known yet stays until the folded graph's inference gives it.
                const.update(o for o in node.output if o)
                self.unevaluated.update(o for o in node.output if o)
                continue
            new = onnx.NodeProto()
            new.CopyFrom(node)
            del new.input[:]
            new.input.extend(ins)
            keep.append(new)
        return keep

    def rebuild(self, keep: list[onnx.NodeProto], info: Info) -> onnx.ModelProto:
        """A model of the kept nodes with the folded values as initializers (weights left without data)."""
        graph, out_names = self.graph, self.out_names
        used = {x for n in keep for x in n.input if x}
        new_init = [t for t in graph.initializer if t.name in used]
        have = {t.name for t in new_init}
        for tname in sorted(used & self.const - have):
            if tname in self.values:
                new_init.append(numpy_helper.from_array(np.asarray(self.values[tname]), tname))
            else:
                dims, et = info.get(tname, (None, 1))
                if dims is None or any(not isinstance(d, int) for d in dims):
                    raise ModelError(f"constant tensor {tname!r} has no static shape after folding")
                t = onnx.TensorProto(name=tname, data_type=et or 1)
                t.dims.extend(int(d) for d in dims)
                new_init.append(t)
                self.stripped.add(tname)
        inputs = {i.name: i for i in graph.input if i.name not in self.init}
        new_graph = helper.make_graph(
            keep,
            graph.name or self.name,
            list(inputs.values()),
            # a graph input passed straight out (or through a folded Identity) keeps the input's type: an
            # output of no type under the input's name hid the input's shape from inference
            [self.declared.get(o) or inputs.get(o) or helper.make_tensor_value_info(o, 0, None) for o in out_names],
            new_init,
            value_info=[v for k, v in self.declared.items() if k not in out_names],
        )
        new_proto = helper.make_model(new_graph, opset_imports=list(self.proto.opset_import))
        new_proto.ir_version = self.proto.ir_version
        for fn in self.proto.functions:
            new_proto.functions.add().CopyFrom(fn)
        return new_proto
