"""Which device a network layer the ONNX parser added without a node goes to.

onnx-tensorrt names and tags with ``[ONNX Layer: <node>]`` metadata only the layers it
registers for a node (``ImporterContext::registerLayer(layer, node)``). The others carry no
metadata and are named:

* 8.5-GA, 8.6-GA: TensorRT's default ``(Unnamed Layer* N) [Type]`` (a Gemm's bias add and the
  bias's broadcast Shuffle, the unsqueeze/squeeze around a 1-D Conv or pooling), weights
  made Constant layers by ``convertToTensor``, named after the weights;
* 10.0-GA on (``registerLayer(layer, "ONNXTRT_<helper>", nullptr)``, names made unique with a
  ``_<k>`` suffix): ``ONNXTRT_Broadcast``, ``ONNXTRT_unsqueezeTensor``/``ONNXTRT_squeezeTensor``
  (around a 1-D Conv, ConvTranspose or pooling), ``ONNXTRT_castHelper``, ``ONNXTRT_Shape*`` ... (every
  ``ONNXTRT_`` name of 10.0-GA, 10.1-GA and main is in ``tests/trt_api/tensorrt-10.3.json``).

Left on the default GPU they split DLA islands; trtexec ``--useDLACore`` makes DLA the default,
so they join the DLA subgraph. Here a helper takes the device of the node it serves: that of
the layer producing its first computed input, else of its first consumer.

Used by the worker (Python 3.8, no imports: a sibling module of ``worker.py``) and by
:mod:`placetune.plan.apply`, so a plan applied in an application places helpers as measured.
"""

try:  # Python 3.8 needs typing's generics
    from typing import Any, Dict, List, Optional, Sequence, Set
except ImportError:  # pragma: no cover
    pass

UNNAMED = "(Unnamed Layer*"
#: the names a parser helper layer starts with: TensorRT's default (8.x parsers), onnx-tensorrt's own (10.x)
HELPER_PREFIXES = (UNNAMED, "ONNXTRT_")


def is_helper_name(name):
    # type: (str) -> bool
    """Whether a layer name is one the ONNX parser gives a layer it adds without a node."""
    return str(name).startswith(HELPER_PREFIXES)


def is_helper(layer, trt, onnx_name):
    # type: (Any, Any, Optional[str]) -> bool
    """A layer the parser added without registering it for a node: no metadata and a helper's
    name (:data:`HELPER_PREFIXES`), or a Constant (weights made into a tensor)."""
    if onnx_name is not None:
        return False
    if is_helper_name(getattr(layer, "name", "")):
        return True
    constant = constant_type(trt)
    return constant is not None and getattr(layer, "type", None) == constant


def constant_type(trt):
    # type: (Any) -> Any
    """``trt.LayerType.CONSTANT`` (None for a stand-in module without layer types)."""
    return getattr(getattr(trt, "LayerType", None), "CONSTANT", None)


def follow_helpers(layers, known, constant_type, default):
    # type: (Sequence[Any], Sequence[Any], Any, Any) -> List[Any]
    """``known`` with every None (a helper) replaced by the device of the layer it serves.

    Args:
        layers: the network's layers, in network order (``get_input``/``get_output``, ``num_*``).
        known: per layer its device, or None for a helper.
        constant_type: ``trt.LayerType.CONSTANT`` (a Constant input is not a computed input).
        default: the device of a helper connected to no placed layer.
    """
    producer = {}  # type: Dict[str, int]
    consumers = {}  # type: Dict[str, List[int]]
    for i, layer in enumerate(layers):
        for j in range(getattr(layer, "num_outputs", 0)):
            producer[layer.get_output(j).name] = i
        for j in range(getattr(layer, "num_inputs", 0)):
            t = layer.get_input(j)
            if t is not None:
                consumers.setdefault(t.name, []).append(i)
    out = list(known)

    def follow(i, seen):
        # type: (int, Set[int]) -> Any
        if out[i] is not None:
            return out[i]
        seen.add(i)
        layer = layers[i]
        ins = [producer.get(t.name) for t in (layer.get_input(j) for j in range(getattr(layer, "num_inputs", 0)))
               if t is not None]
        ins = [k for k in ins if k is not None and k not in seen and getattr(layers[k], "type", None) != constant_type]
        if ins:
            return follow(ins[0], seen)
        outs = [c for j in range(getattr(layer, "num_outputs", 0))
                for c in consumers.get(layer.get_output(j).name, [])]
        outs = [c for c in outs if c not in seen]
        return follow(outs[0], seen) if outs else default

    for i in range(len(out)):
        if out[i] is None:
            out[i] = follow(i, set())
    return out
