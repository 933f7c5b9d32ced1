"""trtexec's INT8 dynamic ranges for a network without calibration or Q/DQ nodes, the one rule the
tensorrt backend's segments and ``placetune build`` give every tensor.

trtexec sets them with ``setTensorDynamicRange`` (samples/common/sampleEngines.cpp, release/8.5:384-428,
the same in 10.3), layer by layer: an unset input +-2 (+-4 into a concatenation), every layer output +-4,
pooling outputs +-2; so a network input gets +-4 when the first layer reading it is a concatenation. Applied once over the whole network (or over all of
a pipeline's segments together), a cut tensor gets the range its producer gives it in every segment
that reads it, as inside the whole network's engine; trtexec's rule applied per segment would give it
+-2 where it is a segment's input.

This reading goes by the ONNX op; trtexec's walk goes by the layer TensorRT's parser made, which
differs for some ops (onnx-tensorrt makes GlobalAveragePool/GlobalMaxPool reduce layers and ends
GlobalLpPool in a power, +-4; a 1-D pooling ends in a squeeze, +-4). The worker therefore sets every given tensor that a layer of the
job's networks makes to the walk's range (``worker_build.resolve_given_ranges``, reported as
``int8_ranges_moved``); the layer order is the parser's (:func:`parser_order`), which is ONNX's for a
sorted graph."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Sequence, TypeVar

if TYPE_CHECKING:
    import onnx

__all__ = ["POOLING", "parser_order", "placeholder_ranges"]

_N = TypeVar("_N")


def parser_order(nodes: "Sequence[_N]") -> "list[_N]":
    """The order onnx-tensorrt imports ``nodes`` in, so the order of TensorRT's layers: its
    ``toposort`` (toposort.hpp, 8.5-GA .. main), a depth-first post-order from each node in turn
    over the producers of its inputs. A sorted graph keeps its order; an unsorted one (the parser
    accepts it, the ONNX checker does not) is read as TensorRT reads it. A cycle or a repeated
    output name (the parser refuses both) leaves the order as given."""
    made: dict[str, int] = {}
    for i, node in enumerate(nodes):
        for o in node.output:  # type: ignore[attr-defined]
            if not o:  # an omitted optional output
                continue
            if o in made:
                return list(nodes)
            made[o] = i
    state = [0] * len(nodes)  # 0 unvisited, 1 on the path, 2 done
    order: list[int] = []
    for root in range(len(nodes)):
        if state[root]:
            continue
        stack = [(root, iter(nodes[root].input))]  # type: ignore[attr-defined]
        state[root] = 1
        while stack:
            i, inputs = stack[-1]
            nxt = next((made[x] for x in inputs if x in made and state[made[x]] != 2), None)
            if nxt is None:
                state[i] = 2
                order.append(i)
                stack.pop()
            elif state[nxt] == 1:
                return list(nodes)  # a cycle
            else:
                state[nxt] = 1
                stack.append((nxt, iter(nodes[nxt].input)))  # type: ignore[attr-defined]
    return [nodes[i] for i in order]


#: the ONNX pooling ops whose outputs trtexec gives +-2
POOLING = frozenset({"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LpPool", "GlobalLpPool"})


def placeholder_ranges(graphs: "Iterable[onnx.GraphProto]") -> dict[str, float]:
    """``{tensor: range}`` over ``graphs`` together (one whole network, or every segment of a
    pipeline): every node output +-4 (+-2 for pooling), every graph input that no node makes +-2,
    or +-4 when the first node (in order) that reads it is a Concat."""
    ranges: dict[str, float] = {}
    inputs: list[str] = []
    first_reader: dict[str, str] = {}
    for graph in graphs:
        inputs.extend(i.name for i in graph.input)
        for node in parser_order(graph.node):
            for i in node.input:
                if i:
                    first_reader.setdefault(i, node.op_type)
            for o in node.output:
                if o:
                    ranges.setdefault(o, 2.0 if node.op_type in POOLING else 4.0)
    return {**{i: 4.0 if first_reader.get(i) == "Concat" else 2.0 for i in inputs if i not in ranges}, **ranges}
