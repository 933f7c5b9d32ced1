"""Cost model of the simulated Jetson: per-layer, per-device times, fusion and boundaries.

Everything here is a *model*: the constants were fitted to the published numbers in
``placetune/data/jetson-measurements.md`` ("ref §N" below) or estimated (ESTIMATE), see
``docs/simulator.md``. Nothing is measured.

The expensive part (per layer and device kind: standalone time, time when fused into the
previous layer, DRAM bytes) is computed once per (model, platform, precision, batch, power
mode) into a :class:`CostTable`; evaluating a placement is then a few numpy operations over
the realised device codes (0 = GPU, 1 = DLA0, 2 = DLA1).
"""

from __future__ import annotations

import json
import math
import re
from collections import OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from placetune.model.model import Model
    from placetune.hardware.platforms import Platform

__all__ = ["SIM_VERSION", "ArchConstants", "ARCH", "PRIOR_ARCH", "FIT_FILE", "with_values", "arch_of", "power_factor", "op_class",
           "GraphInfo", "CostTable", "cost_table", "DEVICE_CODE", "CODE_DEVICE"]

#: Version of the simulated Jetson; part of every fingerprint. Bump when a constant changes.
#: 3: fitted to the published fit rows (calibration/builtin.py), native DLA I/O formats, symmetric
#:    contention, the noise model (noise.py); pipeline mode with K > 1 frames in flight uses the
#:    direct steady state (steady.py).
SIM_VERSION = 3

DEVICE_CODE = {"GPU": 0, "DLA0": 1, "DLA1": 2}
CODE_DEVICE = ("GPU", "DLA0", "DLA1")

_US = 1e-3  # microseconds -> milliseconds


# =========================================================================================
# Constants (the only tunables). One set per GPU architecture; peaks, bandwidth and power
# come from placetune.platforms. "fit" = chosen so benchmarks/calibration.py matches ref.
# =========================================================================================
@dataclass(frozen=True)
class ArchConstants:
    """Simulator constants of one Jetson generation (see docs/simulator.md for each source)."""

    # -- GPU
    gpu_conv_eff: dict  # precision -> fraction of dense peak a large conv/GEMM reaches
    gpu_t_half_us: float  # occupancy: a kernel whose ideal time is this long runs at half efficiency
    gpu_launch_us: float  # per kernel (enqueue + ramp), TensorRT on Jetson
    gpu_bw_eff: float  # fraction of DRAM bandwidth a streaming kernel reaches
    gpu_fp32_per_fp16: float  # fp32 (TF32 on Ampere / CUDA cores on Volta) vs fp16 peak
    gpu_int8_fc: bool  # TensorRT has INT8 fully-connected (Gemm) tactics; False: they run in fp16
    # -- DLA
    dla_conv_eff: dict  # precision -> fraction of the per-core dense peak for convolutions
    dla_op_us: float  # per DLA operation and per batch item (the DLA loops over the batch)
    dla_bw_eff: float  # fraction of DRAM bandwidth one DLA core's DMA reaches
    dla_weight_cache: float  # fraction of dla_sram_mib that keeps a layer's weights across items
    dla_island_us: float  # per DLA loadable execution: submit + completion sync with the GPU
    engine_us: float  # per engine per inference: enqueue + launch + event record/wait + stream sync
    # -- GPU <-> DLA boundaries
    boundary_us: float  # per boundary tensor: reformat kernel launch + event
    reformat_bw_frac: float  # reformat (format conversion) bandwidth as a fraction of DRAM
    # -- shared DRAM contention (stretch = 1 + sens * sum of other devices' DRAM demand)
    gpu_sensitivity: float
    dla_sensitivity: float


#: Relative efficiency of each op class against the conv efficiency of the device.
#: conv = Conv/Gemm/MatMul with constant weights; depthwise convs do not use tensor cores
#: (GPU) / the MAC array well (DLA); element-wise, pooling and normalisation are memory bound.
GPU_CLASS_EFF = {"conv": 1.0, "matmul": 0.7, "depthwise": 0.08, "eltwise": 0.02, "pool": 0.02,
                 "norm": 0.01, "shuffle": 0.02, "free": 1.0}
DLA_CLASS_EFF = {"conv": 1.0, "matmul": 0.5, "depthwise": 0.10, "eltwise": 0.02, "pool": 0.02,
                 "norm": 0.01, "shuffle": 0.02, "free": 1.0}

#: Channel multiple the GPU's tensor-core kernels pad a convolution's input channels to.
#: ESTIMATE (cuDNN/TensorRT NHWC8 for fp16, NC/32HW32 int8 kernels use 4..32; 16 taken).
GPU_CHANNEL_ALIGN = {"fp16": 8, "fp32": 4, "int8": 16}

#: Reads of the input per normalisation on the GPU (statistics pass(es) + normalise pass); these
#: ops also run at fp16 or wider in an INT8 engine. ESTIMATE (two-/three-pass kernels).
NORM_PASSES = {"InstanceNormalization": 3, "GroupNormalization": 3, "LayerNormalization": 3,
               "Softmax": 3, "LogSoftmax": 3, "LRN": 1, "BatchNormalization": 1}

#: DLA MAC-array atoms (input channels, output channels) per precision. ESTIMATE from the
#: open-source NVDLA nv_full configuration (atomic-C 64 / atomic-K 32 at 8 bit, half at fp16).
DLA_CHANNEL_ATOM = {"int8": (64, 32), "fp16": (32, 16)}

ARCH: dict[str, ArchConstants] = {
    # Jetson AGX Xavier / Xavier NX (Volta GPU, DLA v1). Fitted to seed 003 (ref §2) and the
    # HaX-CoNN whole-network and per-group profiles (ref §3); see benchmarks/calibration.py.
    "volta": ArchConstants(
        gpu_conv_eff={"fp16": 0.60, "int8": 0.58, "fp32": 0.60},  # fit: ResNet-50 bs 8 GPU 12.30 / 7.35 ms (ref §2)
        gpu_t_half_us=8.0,  # fit: GoogLeNet / AlexNet bs 1 (ref §3) against the bs 8 runs (ref §2)
        gpu_launch_us=9.5,  # fit: same cases (TensorRT 5-7 on Xavier)
        gpu_bw_eff=0.80,  # ref §3: AlexNet fc6 (75 MB fp16 weights) in 0.70 ms = 108 GB/s of 136.5
        gpu_fp32_per_fp16=0.25,  # ESTIMATE: Volta runs fp32 on CUDA cores (brief: fp16 peak / 2..4)
        gpu_int8_fc=False,  # seed 003 (TensorRT 5, Caffe): AlexNet INT8 4.87 ms vs FP16 5.10 ms, its FC
        # layers (58 of 61 M weights) gain nothing from INT8
        dla_conv_eff={"fp16": 0.60, "int8": 0.50},  # fit fp16: ResNet-50 DLA bs 8 48.97 ms (ref §2); int8 ESTIMATE
        dla_op_us=5.0,  # fit: GoogLeNet DLA bs 1 3.656 ms (ref §3), many small layers
        dla_bw_eff=0.31,  # fit: AlexNet DLA (ref §2, §3); fc6 on DLA 1.91 ms = 40 GB/s (ref §3)
        dla_weight_cache=0.0,  # fit: AlexNet DLA bs 8 / bs 1 = 9.9 (ref §2 vs §3): weights re-read per item
        dla_island_us=30.0,  # ref §3: exposing a boundary from a DLA engine costs 45-74 us (island + reformat)
        engine_us=20.0,  # public: ~20 us launch round trip per enqueue (NVIDIA Nsight Systems guide), docs/simulator.md
        boundary_us=8.0,  # ref §3: 10-43 us from a GPU engine
        reformat_bw_frac=0.15,  # ref §3/§4: 0.041 ms to reformat a 3x224x224 input
        gpu_sensitivity=0.2,  # ESTIMATE: as the DLA's (see ampere)
        dla_sensitivity=0.2,
    ),
    # Jetson AGX Orin / Orin NX / Orin Nano (Ampere GPU, DLA v2). Fitted to ref §4 and §5.
    "ampere": ArchConstants(
        gpu_conv_eff={"fp16": 0.28, "int8": 0.25, "fp32": 0.28},  # fit int8: ResNet-50 bs 1 ~0.9 ms and YOLOv5s
        # scaling (ref §4); fp16 ESTIMATE: INT8 1.7x faster than FP16 as on Xavier (ref §2, 12.30 / 7.35)
        gpu_t_half_us=4.0,  # fit: ref §4 YOLOv5s GPU bs 8 / bs 1 = 9.19 / 1.82 = 5.0
        gpu_launch_us=3.0,  # fit: same
        gpu_bw_eff=0.80,  # ESTIMATE (as Volta)
        gpu_fp32_per_fp16=0.5,  # Ampere runs fp32 convolutions as TF32 at half the fp16 rate
        gpu_int8_fc=True,  # ESTIMATE: TensorRT 8.x has INT8 FC / 1x1-conv tactics
        dla_conv_eff={"fp16": 0.60, "int8": 0.70},  # fit int8: ResNet-50 bs 2 2037 img/s on 2 DLAs (ref §4)
        dla_op_us=6.0,  # fit: GoogLeNet INT8 1.032 ms (ref §4) and seed 002 ModelBN 649.7 qps at bs 32
        dla_bw_eff=0.50,  # fit (upper bound of the search): ResNet-50 bs 2 (ref §4)
        dla_weight_cache=0.0,  # fit: ref §4 YOLOv5s DLA time linear in batch -> weights re-read per item
        dla_island_us=95.0,  # fit: seed 002 ModelGN (5-6 loadables) 305.9 vs ModelBN (2) 649.7 qps (ref §4/§5)
        engine_us=20.0,  # public: ~20 us launch round trip per enqueue (NVIDIA Nsight Systems guide), docs/simulator.md
        boundary_us=12.0,  # ref §4: HaX-CoNN GoogLeNet 0.017 ms to reformat a 1000-element output
        reformat_bw_frac=0.15,  # ref §4: 0.041 ms input reformat (3x224x224)
        # ref §5 conv model: GPU -43 % while both DLAs run; the poster says GPU permutation kernels
        # run around every DLA task there: GPU work the simulator models as the DLA engines' GPU
        # parts, not DRAM contention. DRAM contention itself is taken as symmetric: the DLA's figure.
        gpu_sensitivity=0.2,
        dla_sensitivity=0.2,  # fit: ref §5 conv model, DLA -15 % while the GPU and the other DLA run
    ),
}


#: Fitted values of the constants above (``benchmarks/calibration.py --fit --write`` writes the
#: file from the ``fit`` rows of ``placetune/data/published.csv``; docs/simulator.md). The
#: literals above are the priors the fit starts from.
FIT_FILE = Path(__file__).resolve().parents[2] / "data" / "simulator_fit.json"


def with_values(c: ArchConstants, values: dict) -> ArchConstants:
    """``c`` with ``values`` set: ``{"field": x}`` or ``{"field.precision": x}`` for the dict fields."""
    kw: dict = {}
    for key, v in values.items():
        name, _, sub = key.partition(".")
        if sub:
            d = dict(kw.get(name, getattr(c, name)))
            d[sub] = float(v)
            kw[name] = d
        else:
            kw[name] = float(v)
    return replace(c, **kw)


def _load_fit(arch: dict[str, ArchConstants]) -> dict[str, ArchConstants]:
    try:
        doc = json.loads(FIT_FILE.read_text())
    except FileNotFoundError:
        return arch
    return {a: with_values(c, doc.get("values", {}).get(a, {})) for a, c in arch.items()}


PRIOR_ARCH = dict(ARCH)
ARCH = _load_fit(ARCH)


def arch_of(platform: "Platform") -> str:
    """``volta`` for Xavier modules, ``ampere`` for Orin modules."""
    return "volta" if platform.name.startswith("xavier") else "ampere"


#: Throughput relative to the fastest power mode. AGX Orin: ref §1 "2-DLA throughput relative
#: to MAXN: 50W 0.91-0.96x, 30W 0.89-0.95x, 15W 0.42-0.53x" (midpoints). Other modules:
#: ESTIMATE sqrt(watts / top watts), see power_factor().
POWER_MODE_FACTOR = {"orin-agx": {"MAXN": 1.0, "50W": 0.935, "30W": 0.92, "15W": 0.475}}


def power_factor(platform: "Platform", mode: str) -> float | None:
    """Clock scale of a power mode (1.0 = fastest); None when the platform has no such mode."""
    modes = {m.upper(): m for m in platform.power_modes}
    key = str(mode).strip().upper()
    if key == "MAXN" and key not in modes and platform.power_modes:
        return 1.0  # "MAXN" = the fastest mode of any module (Settings' default)
    if key not in modes:
        return None
    table = POWER_MODE_FACTOR.get(platform.name)
    if table is not None and modes[key] in table:
        return table[modes[key]]
    if modes[key] == platform.power_modes[0]:
        return 1.0
    watts = [float(m[:-1]) for m in platform.power_modes if re.fullmatch(r"\d+(\.\d+)?W", m)]
    if not watts or not re.fullmatch(r"\d+(\.\d+)?W", modes[key]):
        return 1.0
    top = max(watts) * (1.25 if not re.fullmatch(r"\d+(\.\d+)?W", platform.power_modes[0]) else 1.0)
    return min(1.0, math.sqrt(float(modes[key][:-1]) / top))


# =========================================================================================
# Op classes and fusion rules
# =========================================================================================
_FREE = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout", "Concat"}
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


def _padding_eff(n: np.ndarray, atom: float) -> np.ndarray:
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
        self.passes = np.array([float(NORM_PASSES.get(layer.op_type, 1)) for layer in layers])
        self.int8_capable = np.array([layer.op_type not in NORM_PASSES or layer.op_type == "BatchNormalization"
                                      for layer in layers])
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
_TABLE_CACHE: "OrderedDict[tuple, CostTable]" = OrderedDict()
_CACHE_SIZE = 32


def graph_info(model: "Model") -> GraphInfo:
    """Cached :class:`GraphInfo` of a model (keyed by its content hash)."""
    g = _GRAPH_CACHE.get(model.hash)
    if g is None:
        g = _GRAPH_CACHE[model.hash] = GraphInfo(model)
        while len(_GRAPH_CACHE) > _CACHE_SIZE:
            _GRAPH_CACHE.popitem(last=False)
    return g


_ELEM_BYTES = {"fp16": 2.0, "int8": 1.0, "fp32": 4.0}


class CostTable:
    """Per-layer costs of one model on one platform at one precision, batch and power mode.

    Attributes:
        t_alone: (2, n) ms per layer on the GPU (row 0) / a DLA core (row 1), own kernel.
        t_fused: (2, n) ms when fused into its anchor (same device).
        b_alone, b_fused: DRAM bytes moved in those cases (for contention).
        edge_ms: boundary cost of each edge's tensor (reformat + copy), ms.
        edge_bytes: bytes of each edge's tensor at the precision.
        in_ms, out_ms: model input/output reformat cost when the layer is on a DLA.
        island_ms: per DLA loadable execution.
        engine_ms: per engine per inference (enqueue, launch and synchronisation).
        contention: factor on the DRAM-contention sensitivities (1 nominal; device profiles change it).
    """

    def __init__(self, model: "Model", platform: "Platform", precision: str, batch: int, power: float) -> None:
        g = graph_info(model)
        self.g = g
        self.platform = platform
        self.precision = precision
        self.batch = int(batch)
        self.power = power
        c = self.c = ARCH[arch_of(platform)]
        scale = batch / g.model_batch
        elem = _ELEM_BYTES[precision]
        dram = platform.dram_gbps * 1e6  # bytes per ms
        self.dram_bytes_per_ms = dram * power  # for DRAM demand; the memory clock scales too
        # ---------------- GPU
        gpu_peak = platform.gpu_int8_tops if precision == "int8" else platform.gpu_fp16_tflops
        if precision == "fp32":
            gpu_peak *= c.gpu_fp32_per_fp16
        gpu_peak *= 1e9  # ops per ms
        gpu_bw = dram * c.gpu_bw_eff
        flops = g.flops * scale
        # normalisations read their input several times and run at fp16 at least (no INT8 kernels)
        g_elem = np.where(g.int8_capable, elem, max(elem, 2.0))
        # fully-connected layers of an INT8 engine run in fp16 where TensorRT has no INT8 FC tactic
        fc16 = np.array([op == "Gemm" for op in g.ops]) if precision == "int8" and not c.gpu_int8_fc else np.zeros(g.n, bool)
        g_elem = np.where(fc16, 2.0, g_elem)
        act_bytes = (g.in_elems * g.passes + g.out_elems) * scale * g_elem
        w_bytes = g.w_elems * elem
        g_w_bytes = np.where(fc16, g.w_elems * 2.0, w_bytes)
        conv_eff = c.gpu_conv_eff[precision]
        eff = np.array([conv_eff * GPU_CLASS_EFF[k] for k in g.cls])
        # tensor cores pad the input channels of a convolution (3 -> 8 for the stem)
        align = GPU_CHANNEL_ALIGN[precision]
        eff = eff * _padding_eff(g.cin_g, align)
        heavy = np.array([k in ("conv", "matmul", "depthwise") for k in g.cls])
        free = np.array([k == "free" for k in g.cls])
        # occupancy: a kernel whose ideal duration is d reaches d / (d + t_half) of its
        # efficiency (small layers and batch 1 fill the GPU poorly): time = d + t_half
        ideal = flops / (np.where(fc16, platform.gpu_fp16_tflops * 1e9 / max(c.gpu_conv_eff["fp16"], 1e-9)
                                  * c.gpu_conv_eff[precision], gpu_peak) * eff)
        g_compute = ideal + np.where(heavy, c.gpu_t_half_us * _US, 0.0)
        g_mem = (act_bytes + g_w_bytes) / gpu_bw
        g_alone = np.maximum(g_compute, g_mem) + c.gpu_launch_us * _US
        g_extra_bytes = g.extra_in * scale * elem
        g_fused = g_extra_bytes / gpu_bw  # epilogue math is free; only its extra inputs are read
        g_alone[free] = 0.0
        # ---------------- DLA (one core); the DLA loops over the batch items
        if precision in ("fp16", "int8") and platform.dla_count > 0:
            dla_peak = (platform.dla_int8_tops if precision == "int8" else platform.dla_fp16_tflops) * 1e9
            dla_bw = dram * c.dla_bw_eff
            items = float(batch)
            per_item_flops = g.flops / g.model_batch
            per_item_act = (g.in_elems + g.out_elems) / g.model_batch * elem
            d_eff = np.array([c.dla_conv_eff[precision] * DLA_CLASS_EFF[k] for k in g.cls])
            # the MAC array works on atoms of input and output channels; the first layer reads
            # the image in a packed format (kDLA_HWC4), so its input channels are not padded
            atom_c, atom_k = DLA_CHANNEL_ATOM[precision]
            d_eff = d_eff * np.where(g.reads_input, 1.0, _padding_eff(g.cin_g, atom_c)) * _padding_eff(g.cout_g, atom_k)
            cache = platform.dla_sram_mib * 2**20 * c.dla_weight_cache
            cached = w_bytes <= cache
            w_per_item = np.where(cached, 0.0, w_bytes)
            d_compute = per_item_flops / (dla_peak * d_eff)
            d_mem = (per_item_act + w_per_item) / dla_bw
            d_alone = items * (np.maximum(d_compute, d_mem) + c.dla_op_us * _US) + np.where(cached, w_bytes / dla_bw, 0.0)
            d_fused = items * (g.extra_in / g.model_batch * elem / dla_bw)
            d_alone[free] = 0.0
            d_bytes = items * (per_item_act + w_per_item) + np.where(cached, w_bytes, 0.0)
        else:  # no DLA or a precision the DLA cannot run: never used (realise moves layers off)
            d_alone = np.full(g.n, np.inf)
            d_fused = np.full(g.n, np.inf)
            d_bytes = np.zeros(g.n)
        g_fused[free] = 0.0
        d_fused[free] = 0.0
        self.t_alone = np.vstack([g_alone, d_alone])
        self.t_fused = np.vstack([g_fused, d_fused])
        g_bytes = np.where(free, 0.0, act_bytes + g_w_bytes)
        self.b_alone = np.vstack([g_bytes, np.where(free, 0.0, d_bytes)])
        self.b_fused = np.vstack([g_extra_bytes, g_extra_bytes])
        # ---------------- boundaries, I/O reformat, islands
        reformat_bw = dram * c.reformat_bw_frac
        # GPU<->DLA tensors cross in the DLA's native format at the engine precision (int8
        # chw32 / fp16 chw16), except that an INT8 DLA output feeding a layer without INT8
        # kernels (softmax, layer/group norm) is written as fp16: the DLA output-format effect
        # (cuDLA-samples: YOLOv5s DLA 3.82 ms with fp16 output, ~2.4 ms with int8 chw32).
        edge_elem = np.where(g.int8_capable[g.edge_c], elem, max(elem, 2.0)) if g.edge_c.size else np.zeros(0)
        self.edge_bytes = g.edge_elems * scale * edge_elem
        self.edge_ms = c.boundary_us * _US + self.edge_bytes / reformat_bw
        # model input / output of a DLA layer: one conversion into the DLA's native input format
        # at the engine precision (kDLA_HWC4 int8 / chw16 fp16) and out of it as fp16 (a
        # float output), not an fp32 reformat at each end
        self.in_ms = c.boundary_us * _US + g.in_layer_elems * scale * elem / reformat_bw
        self.out_ms = c.boundary_us * _US + g.out_layer_elems * scale * max(elem, 2.0) / reformat_bw
        self.island_ms = c.dla_island_us * _US
        self.engine_ms = c.engine_us * _US
        self.contention = 1.0
        # a slower power mode lowers the GPU, DLA and memory clocks: every time stretches by
        # 1 / power (ref §1 gives the resulting throughput ratios for AGX Orin)
        if power != 1.0:
            for name in ("t_alone", "t_fused", "edge_ms", "in_ms", "out_ms", "island_ms", "engine_ms"):
                setattr(self, name, getattr(self, name) / power)
        self._arange = np.arange(g.n)

    # ---------------------------------------------------------------- evaluation
    def layer_costs(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-layer (ms, bytes, fused mask) for device codes (0 GPU, 1 DLA0, 2 DLA1)."""
        g = self.g
        kind = (codes > 0).astype(np.intp)
        anchor = np.where(kind == 1, g.anchor_dla, g.anchor_gpu)
        has = anchor >= 0
        fused = has & (codes[np.where(has, anchor, 0)] == codes)
        ar = self._arange
        t = np.where(fused, self.t_fused[kind, ar], self.t_alone[kind, ar])
        b = np.where(fused, self.b_fused[kind, ar], self.b_alone[kind, ar])
        return t, b, fused

    def boundary_costs(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """Per-layer incoming boundary cost (ms, bytes) and the number of boundary tensors.

        A tensor crossing to another device is reformatted once per destination device.
        """
        g = self.g
        n = g.n
        count = 0
        ms = by = None
        if g.edge_p.size:
            cross = codes[g.edge_p] != codes[g.edge_c]
            idx = np.flatnonzero(cross)
            if idx.size:
                key = g.edge_p[idx] * 4 + codes[g.edge_c[idx]]
                _, first = np.unique(key, return_index=True)
                sel = idx[first]
                dst = g.edge_c[sel]
                ms = np.bincount(dst, weights=self.edge_ms[sel], minlength=n)
                by = np.bincount(dst, weights=self.edge_bytes[sel], minlength=n)
                count = int(sel.size)
        if ms is None:
            ms, by = np.zeros(n), np.zeros(n)
        # model input / output reformat for a DLA first / last layer
        if g.in_layers.size:
            on = codes[g.in_layers] > 0
            if on.any():
                np.add.at(ms, g.in_layers[on], self.in_ms[on])
        if g.out_layers.size:
            on = codes[g.out_layers] > 0
            if on.any():
                np.add.at(ms, g.out_layers[on], self.out_ms[on])
        return ms, by, count


def cost_table(model: "Model", platform: "Platform", precision: str, batch: int, power: float = 1.0) -> CostTable:
    """Cached :class:`CostTable` for (model, platform, precision, batch, power factor)."""
    key = (model.hash, platform, precision, int(batch), round(power, 6))
    t = _TABLE_CACHE.get(key)
    if t is None:
        t = _TABLE_CACHE[key] = CostTable(model, platform, precision, batch, power)
        while len(_TABLE_CACHE) > _CACHE_SIZE:
            _TABLE_CACHE.popitem(last=False)
    else:
        _TABLE_CACHE.move_to_end(key)
    return t
