"""The graph facts the simulated Jetson's cost model needs: op classes, fusion, per-layer arrays.

:func:`op_class` sorts a layer into the classes whose efficiencies the cost model knows;
:class:`GraphInfo` holds per-model arrays (work, activation and weight sizes, edges) and where
each layer fuses: into the kernel of a producer (epilogue / point-wise fusion on the GPU, one
SDP operation on a DLA) or with a sibling convolution that reads the same tensor (TensorRT's
horizontal fusion, GPU only). Built once per model and cached by its content hash.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np

from placetune.model.qdq import int8_layers

if TYPE_CHECKING:
    from placetune.model.model import Model

__all__ = ["op_class", "GraphInfo", "graph_info", "padding_eff", "NORM_PASSES"]

#: Reads of the input per normalisation on the GPU (statistics pass(es) + normalise pass); these
#: ops also run at fp16 or wider in an INT8 engine. ESTIMATE (two-/three-pass kernels).
NORM_PASSES = {"InstanceNormalization": 3, "GroupNormalization": 3, "LayerNormalization": 3,
               "Softmax": 3, "LogSoftmax": 3, "LRN": 1, "BatchNormalization": 1}

# =========================================================================================
# Op classes and fusion rules
# =========================================================================================
#: (QuantizeLinear / DequantizeLinear: TensorRT fuses them into the neighbouring layers' INT8 input,
#: weights and output, explicit quantization; placetune.model.qdq says which layers run INT8.)
_FREE = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout", "Concat", "QuantizeLinear",
         "DequantizeLinear"}
_SHUFFLE = {"Transpose", "Split", "Slice", "Gather", "Pad", "Tile", "Expand", "DepthToSpace",
            "SpaceToDepth", "Cast"}
_POOL = {"MaxPool", "AveragePool", "LpPool", "GlobalAveragePool", "GlobalMaxPool", "ReduceMean",
         "ReduceMax", "ReduceMin", "ReduceSum", "ReduceL2", "ReduceProd", "Resize", "Upsample"}
_NORM = {"BatchNormalization", "InstanceNormalization", "LayerNormalization", "GroupNormalization",
         "LRN", "Softmax", "LogSoftmax"}
#: Ops TensorRT folds into the kernel of a preceding convolution / GEMM (and that the DLA's
#: SDP unit applies in its convolution pipeline): bias/scale, batch norm, activations, residual add.
_EPILOGUE = {"BatchNormalization", "Relu", "Clip", "LeakyRelu", "Sigmoid", "Tanh", "PRelu", "Add",
             "Sub", "Mul", "HardSwish", "HardSigmoid", "Elu", "Selu"}
#: Point-wise ops: chains of them fuse into one GPU kernel (TensorRT PointWise fusion).
_POINTWISE = _EPILOGUE | {"Div", "Pow", "Sqrt", "Erf", "Exp", "Log", "Abs", "Neg", "Reciprocal",
                          "Max", "Min", "Gelu", "Softplus", "Mish", "Floor", "Ceil", "Round", "Sign",
                          "Where", "Equal", "Greater", "Less", "Not", "And", "Or"}


def op_class(layer) -> str:
    """``conv``, ``matmul``, ``depthwise``, ``eltwise``, ``pool``, ``norm``, ``shuffle`` or ``free``."""
    op = layer.op_type
    if op in ("Conv", "ConvTranspose"):
        group = int(layer.attrs.get("group", 1) or 1)
        cin = layer.inputs[0].shape[1] if len(layer.inputs[0].shape) > 1 else 1
        return "depthwise" if group > 1 and group == cin else "conv"
    if op == "Gemm":
        return "conv"
    if op == "MatMul":
        return "conv" if any(t.const for t in layer.inputs) else "matmul"
    if op in _FREE:
        return "free"
    if op in _SHUFFLE:
        return "shuffle"
    if op in _POOL:
        return "pool"
    if op in _NORM:
        return "norm"
    return "eltwise"


def _cin_per_group(layer) -> int:
    """Input channels per group of a (non-depthwise) convolution; 0 for other layers."""
    if layer.op_type not in ("Conv", "ConvTranspose") or not layer.inputs or len(layer.inputs[0].shape) < 2:
        return 0
    if op_class(layer) == "depthwise":  # depthwise kernels do not pad channels into MAC atoms
        return 0
    return max(1, int(layer.inputs[0].shape[1]) // max(1, int(layer.attrs.get("group", 1) or 1)))


def _cout_per_group(layer) -> int:
    if layer.op_type not in ("Conv", "ConvTranspose") or not layer.outputs or len(layer.outputs[0].shape) < 2:
        return 0
    if op_class(layer) == "depthwise":
        return 0
    return max(1, int(layer.outputs[0].shape[1]) // max(1, int(layer.attrs.get("group", 1) or 1)))


def padding_eff(n: np.ndarray, atom: float) -> np.ndarray:
    """Useful fraction of a MAC array that processes channels in groups of ``atom`` (1 where n == 0)."""
    return np.where(n > 0, n / (np.ceil(n / atom) * atom + 1e-30), 1.0)


class GraphInfo:
    """Per-model arrays the cost model needs (built once per model hash)."""

    def __init__(self, model: "Model") -> None:
        layers = model.layers
        n = len(layers)
        self.n = n
        self.names = [layer.name for layer in layers]
        self.index = {name: i for i, name in enumerate(self.names)}
        self.model_batch = max(1, int(model.batch))
        self.cls = [op_class(layer) for layer in layers]
        self.ops = [layer.op_type for layer in layers]
        self.macs = np.array([float(layer.macs) for layer in layers])
        self.flops = np.array([float(max(layer.flops, 2 * layer.macs)) for layer in layers])
        act_in = np.zeros(n)
        out = np.zeros(n)
        w = np.zeros(n)
        for i, layer in enumerate(layers):
            act_in[i] = sum(t.size for t in layer.inputs if not t.const)
            out[i] = sum(t.size for t in layer.outputs)
            w[i] = sum(t.size for t in layer.inputs if t.const and t.dtype.startswith("float"))
        self.in_elems, self.out_elems, self.w_elems = act_in, out, w
        # reduction depth of each multiply-accumulate layer (MACs per output element)
        self.depth = np.where(out > 0, self.macs / np.maximum(out, 1.0), 0.0)
        self.passes = np.array([float(NORM_PASSES.get(layer.op_type, 1)) for layer in layers])
        self.int8_capable = np.array([layer.op_type not in NORM_PASSES or layer.op_type == "BatchNormalization"
                                      for layer in layers])
        # explicit quantization: a model with Q/DQ nodes runs INT8 only in the layers they mark (an
        # INT8 engine of it runs every other layer at fp16); None: no Q/DQ, the precision flag rules
        marked = int8_layers(model)
        self.qdq_int8 = None if marked is None else np.array([name in marked for name in self.names])
        # input channels per group of convolutions (tensor-core channel padding), 0 elsewhere
        self.cin_g = np.array([_cin_per_group(layer) for layer in layers], dtype=float)
        self.cout_g = np.array([_cout_per_group(layer) for layer in layers], dtype=float)
        inputs = {t.name for t in model.inputs}
        self.reads_input = np.array([any(t.name in inputs for t in layer.inputs) for layer in layers])
        # producer -> consumer edges with the size of the tensor that flows
        out_of = {}
        for i, layer in enumerate(layers):
            for t in layer.outputs:
                out_of[t.name] = (i, t.size)
        ep, ec, ee = [], [], []
        for c, layer in enumerate(layers):
            seen = set()
            for t in layer.inputs:
                if t.const or t.name not in out_of or t.name in seen:
                    continue
                seen.add(t.name)
                p, size = out_of[t.name]
                ep.append(p)
                ec.append(c)
                ee.append(size)
        self.edge_p = np.array(ep, dtype=np.intp)
        self.edge_c = np.array(ec, dtype=np.intp)
        self.edge_elems = np.array(ee, dtype=float)
        model_inputs = {t.name: t.size for t in model.inputs}
        self.in_layers = np.array(sorted({i for i, l in enumerate(layers) for t in l.inputs if t.name in model_inputs}), dtype=np.intp)
        self.in_layer_elems = np.array([sum(t.size for t in layers[i].inputs if t.name in model_inputs) for i in self.in_layers], dtype=float)
        outs = {t.name for t in model.outputs}
        self.out_layers = np.array(sorted({out_of[o][0] for o in outs if o in out_of}), dtype=np.intp)
        self.out_layer_elems = np.array([sum(t.size for t in layers[i].outputs if t.name in outs) for i in self.out_layers], dtype=float)
        self.anchor_gpu, self.anchor_dla, self.extra_in = self._anchors(model, out_of, outs)
        self.sibling = self._siblings(model)
        # (i, j): j is an earlier convolution of i's sibling group; i joins j's GPU kernel when both run there
        pairs = [(i, j) for i in np.flatnonzero(self.sibling >= 0) for j in range(self.sibling[i], i)
                 if j == self.sibling[i] or self.sibling[j] == self.sibling[i]]
        self.sib_i = np.array([i for i, _ in pairs], dtype=np.intp)
        self.sib_j = np.array([j for _, j in pairs], dtype=np.intp)

    def _siblings(self, model) -> np.ndarray:
        """The first convolution of each convolution's sibling group (-1: none; the first itself: -1).

        TensorRT merges convolutions that read the same tensor with the same kernel, stride,
        padding and dilation into one wider convolution (horizontal fusion: the 1x1 branches of
        an Inception module) when they run on the GPU; a convolution joins the kernel of the
        first of its group that runs there.
        """
        sib = np.full(self.n, -1, dtype=np.intp)
        first: dict[tuple, int] = {}
        for i, layer in enumerate(model.layers):
            if layer.op_type != "Conv" or self.cls[i] != "conv" or int(layer.attrs.get("group", 1) or 1) != 1:
                continue
            a = layer.attrs
            key = (layer.inputs[0].name, tuple(a.get("kernel_shape", ()) or ()), tuple(a.get("strides", ()) or ()),
                   tuple(a.get("pads", ()) or ()), tuple(a.get("dilations", ()) or ()))
            if key in first:
                sib[i] = first[key]
            else:
                first[key] = i
        return sib

    def _anchors(self, model, out_of, graph_outputs):
        """Fusion anchor of each layer on the GPU and on a DLA (-1 = runs as its own kernel).

        A layer fuses into the producer ``p`` of one of its inputs when that tensor is read by
        this layer only (and is not a graph output), and either ``p`` heads or continues a
        conv/GEMM chain and the layer is an epilogue op (GPU and DLA), or both are point-wise
        (GPU only: TensorRT's PointWise fusion).
        """
        layers = model.layers
        n = len(layers)
        a_gpu = np.full(n, -1, dtype=np.intp)
        a_dla = np.full(n, -1, dtype=np.intp)
        extra = np.zeros(n)
        # conv_led: the chain a layer ends is headed by a conv/GEMM (its epilogue runs in the
        # same kernel on the GPU / in the DLA's SDP stage right after the convolution core);
        # on a DLA a chain of epilogue ops without a conv is one SDP operation as well.
        conv_led_gpu = [False] * n
        conv_led_dla = [False] * n
        pw_gpu = [False] * n
        for i, layer in enumerate(layers):
            cls = self.cls[i]
            if cls in ("conv", "matmul", "depthwise"):
                conv_led_gpu[i] = conv_led_dla[i] = True
                continue
            op = layer.op_type
            if op not in _POINTWISE:
                continue
            pw_gpu[i] = True
            cands = []
            for t in layer.inputs:
                if t.const or t.name not in out_of or t.name in graph_outputs:
                    continue
                p, size = out_of[t.name]
                if layers[p].consumers != (layer.name,):
                    continue
                cands.append((p, size))
            best_g = best_d = None
            for p, size in cands:  # prefer the latest producer (the chain just computed)
                if op in _EPILOGUE and conv_led_gpu[p] or pw_gpu[p] and self.cls[p] != "free":
                    if best_g is None or p > best_g[0]:
                        best_g = (p, size)
                if op in _EPILOGUE and (conv_led_dla[p] or self.ops[p] in _EPILOGUE):
                    if best_d is None or p > best_d[0]:
                        best_d = (p, size)
            if best_g is not None:
                a_gpu[i] = best_g[0]
                conv_led_gpu[i] = conv_led_gpu[best_g[0]]
                extra[i] = self.in_elems[i] - best_g[1]
            if best_d is not None:
                a_dla[i] = best_d[0]
                conv_led_dla[i] = True
                if best_g is None or best_g[0] != best_d[0]:
                    extra[i] = self.in_elems[i] - best_d[1]
        return a_gpu, a_dla, extra


_GRAPH_CACHE: "OrderedDict[str, GraphInfo]" = OrderedDict()
_CACHE_SIZE = 32


def graph_info(model: "Model") -> GraphInfo:
    """Cached :class:`GraphInfo` of a model (keyed by its content hash)."""
    g = _GRAPH_CACHE.get(model.hash)
    if g is None:
        g = _GRAPH_CACHE[model.hash] = GraphInfo(model)
        while len(_GRAPH_CACHE) > _CACHE_SIZE:
            _GRAPH_CACHE.popitem(last=False)
    return g
