"""Cost model of the simulated Jetson: per-layer, per-device times, fusion and boundaries.

Everything here is a *model*: the constants are fitted to the published rows of
``placetune/data/published.csv`` (``placetune/calibration/builtin.py``) or taken from the
published numbers of ``placetune/data/jetson-measurements.md`` ("ref §N") or estimated
(ESTIMATE), see :data:`CONSTANT_SOURCES` and ``docs/simulator.md``. Nothing is measured.

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
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from placetune.backends.simulate.graph import GraphInfo, graph_info, op_class, padding_eff
from placetune.hardware.power_modes import MAXN_SCALE, ClockScale, modes_of, power_scale

if TYPE_CHECKING:
    from placetune.model.model import Model
    from placetune.hardware.platforms import Platform

__all__ = ["SIM_VERSION", "ArchConstants", "ARCH", "PRIOR_ARCH", "FIT_FILE", "CONSTANT_SOURCES", "with_values", "arch_of", "power_factor", "op_class",
           "GraphInfo", "graph_info", "CostTable", "CostSelection", "cost_table", "forget_cost_tables", "DEVICE_CODE",
           "CODE_DEVICE"]

#: Version of the simulated Jetson; part of every fingerprint. Bump when a constant changes.
#: 3: fitted to the published fit rows (calibration/builtin.py), native DLA I/O formats, symmetric
#:    contention, the noise model (noise.py); pipeline mode with K > 1 frames in flight uses the
#:    direct steady state (steady.py).
#: 4: refitted with scipy on 115 published rows; GPU occupancy from the work per SM and the
#:    reduction depth (replaces a fixed ramp time), horizontal fusion of sibling convolutions,
#:    INT8 reformats around layers without INT8 kernels, the Orin GPU fitted on Orin rows.
SIM_VERSION = 4

DEVICE_CODE = {"GPU": 0, "DLA0": 1, "DLA1": 2}
CODE_DEVICE = ("GPU", "DLA0", "DLA1")

_US = 1e-3  # microseconds -> milliseconds


# =========================================================================================
# Constants (the only tunables). One set per GPU architecture; peaks, bandwidth and power
# come from placetune.platforms.
# =========================================================================================
@dataclass(frozen=True)
class ArchConstants:
    """Simulator constants of one Jetson generation (see docs/simulator.md for each source)."""

    # -- GPU
    gpu_conv_eff: dict  # precision -> fraction of dense peak a large conv/GEMM reaches
    gpu_sm_half_mops: float  # occupancy: a kernel of this many mega-ops per SM runs at half efficiency
    gpu_split_k: float  # reduction depth up to which a kernel's fill time grows (split-K beyond)
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

#: DLA MAC-array atoms (input channels, output channels) per precision. ESTIMATE from the
#: open-source NVDLA nv_full configuration (atomic-C 64 / atomic-K 32 at 8 bit, half at fp16).
DLA_CHANNEL_ATOM = {"int8": (64, 32), "fp16": (32, 16)}

#: The priors: the literal values below. ``placetune/calibration/builtin.py`` (``PARAMS``) fits
#: the constants marked "fit" to the published ``fit`` rows, within bounds and pulled towards these
#: priors; the fitted values are stored in FIT_FILE and loaded over them. The others come from
#: :data:`CONSTANT_SOURCES`. docs/simulator.md tabulates both (docs/simulator_tables.py).
ARCH: dict[str, ArchConstants] = {
    # Jetson AGX Xavier / Xavier NX (Volta GPU, DLA v1)
    "volta": ArchConstants(
        gpu_conv_eff={"fp16": 0.60, "int8": 0.60, "fp32": 0.60},  # fit fp16, int8
        gpu_sm_half_mops=15.0,  # fit (shared by both architectures)
        gpu_split_k=1024.0,  # fit (shared)
        gpu_launch_us=9.5,  # fit
        gpu_bw_eff=0.80,
        gpu_fp32_per_fp16=0.25,
        gpu_int8_fc=False,
        dla_conv_eff={"fp16": 0.60, "int8": 0.50},  # fit fp16, int8
        dla_op_us=5.0,  # fit
        dla_bw_eff=0.31,  # fit
        dla_weight_cache=0.0,
        dla_island_us=30.0,
        engine_us=20.0,
        boundary_us=8.0,
        reformat_bw_frac=0.15,
        gpu_sensitivity=0.2,  # fit (shared)
        dla_sensitivity=0.2,
    ),
    # Jetson AGX Orin / Orin NX / Orin Nano (Ampere GPU, DLA v2)
    "ampere": ArchConstants(
        gpu_conv_eff={"fp16": 0.60, "int8": 0.60, "fp32": 0.60},  # fit int8; fp16 shared with Volta
        gpu_sm_half_mops=15.0,  # fit (shared)
        gpu_split_k=1024.0,  # fit (shared)
        gpu_launch_us=3.0,  # fit
        gpu_bw_eff=0.80,
        gpu_fp32_per_fp16=0.5,
        gpu_int8_fc=True,
        dla_conv_eff={"fp16": 0.60, "int8": 0.70},  # fit int8
        dla_op_us=6.0,  # fit
        dla_bw_eff=0.50,  # fit
        dla_weight_cache=0.0,
        dla_island_us=95.0,  # fit
        engine_us=20.0,
        boundary_us=12.0,
        reformat_bw_frac=0.15,
        gpu_sensitivity=0.2,  # fit (shared)
        dla_sensitivity=0.2,
    ),
}

#: Where each constant the fit does not set comes from ("ref §N": placetune/data/jetson-measurements.md).
CONSTANT_SOURCES: dict[str, str] = {
    "gpu_conv_eff.fp32": "ESTIMATE: as fp16 (no published fp32 row); the fp32 peak is gpu_fp32_per_fp16 of fp16's",
    "gpu_bw_eff": "ref §3: HaX-CoNN AlexNet group 5 (fc6, 75 MB of fp16 weights) takes 0.70 ms on the Xavier GPU = "
                  "108 GB/s of 136.5; Orin ESTIMATE (as Volta)",
    "gpu_fp32_per_fp16": "Volta runs fp32 on CUDA cores (ESTIMATE 1/4 of the fp16 tensor-core peak); Ampere runs "
                         "fp32 convolutions as TF32 at half the fp16 rate",
    "gpu_int8_fc": "Volta: seed 003 (TensorRT 5) AlexNet INT8 4.87 ms vs FP16 5.10 ms, its FC layers (58 of 61 M "
                   "weights) gain nothing from INT8; Ampere ESTIMATE: TensorRT 8.x has INT8 FC tactics",
    "dla_conv_eff.fp16": "Orin: ESTIMATE (no published Orin DLA FP16 row)",
    "dla_weight_cache": "cuDLA-samples YOLOv5s DLA time linear in batch (ref §4: 3.82 -> 30.92 ms for bs 1 -> 8): "
                        "weights re-read for every batch item",
    "dla_island_us": "Xavier: ref §3, exposing a boundary from a DLA engine costs 45-74 us (loadable + reformat)",
    "engine_us": "public: ~20 us launch round trip per enqueue (NVIDIA Nsight Systems guide), docs/simulator.md",
    "boundary_us": "Xavier: ref §3, 10-43 us per boundary from a GPU engine; Orin: ref §4, HaX-CoNN GoogLeNet "
                   "0.017 ms to reformat a 1000-element output to the GPU",
    "reformat_bw_frac": "ref §4: HaX-CoNN 0.041 ms to reformat a 3x224x224 input for the Orin DLA",
    "dla_sensitivity": "ref §5 conv model: each DLA -15 % while the GPU and the other DLA run (forum 219770)",
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
    known = set(ArchConstants.__dataclass_fields__)
    return {a: with_values(c, {k: v for k, v in doc.get("values", {}).get(a, {}).items() if k.partition(".")[0] in known})
            for a, c in arch.items()}


PRIOR_ARCH = dict(ARCH)
ARCH = _load_fit(ARCH)


def arch_of(platform: "Platform") -> str:
    """``volta`` for Xavier modules, ``ampere`` for Orin modules."""
    return "volta" if platform.name.startswith("xavier") else "ampere"


#: The DLA's throughput relative to the fastest mode where it is published. AGX Orin: ref §1 "2-DLA
#: throughput relative to MAXN: 50W 0.91-0.96x, 30W 0.89-0.95x, 15W 0.42-0.53x" (midpoints; the
#: DLA-SW README rows). The DLA does not follow its clock cap there: 50W and 30W cap it 14 % lower
#: and it loses 4-9 %; a model that scaled it by its clock missed the calibration's leave-one-source-out
#: target (max 36.5 %, 35.4 % after a refit, on the 15W row), so where a ratio is published the DLA and
#: the memory it reads take it, and the GPU follows its clocks.
DLA_MODE_FACTOR = {"orin-agx": {"50W": 0.935, "30W": 0.92, "15W": 0.475}}


def power_factor(platform: "Platform", mode: str) -> ClockScale | None:
    """How a power mode slows the GPU, the DLA and the memory (1.0 = the fastest mode); None when
    the platform has no such mode.

    Orin and Xavier modules: from the caps of NVIDIA's nvpmodel file (:mod:`placetune.hardware.power_modes`):
    GPU compute by active TPCs x GPU clock, the DLA by its clock, memory by the EMC clock; where the
    DLA's own ratio is published (:data:`DLA_MODE_FACTOR`), the DLA and memory take that instead.
    A platform without a transcribed file (none of the built-in ones): ESTIMATE sqrt(watts / top
    watts) for every domain alike."""
    table = modes_of(platform.name, mode)
    if table is not None:
        scale = power_scale(platform.name, mode)  # a JetPack 6.2 Super mode: against the profile's own fastest
        known = table.mode(mode)
        measured = DLA_MODE_FACTOR.get(platform.name, {}).get(known.label) if known is not None else None
        if scale is not None and measured is not None:
            return scale._replace(dla=measured, emc=measured)
        return scale
    modes = {m.upper(): m for m in platform.power_modes}
    key = str(mode).strip().upper()
    if key == "MAXN" and key not in modes and platform.power_modes:
        return MAXN_SCALE  # "MAXN" = the fastest mode of any module (Settings' default)
    if key not in modes:
        return None
    if modes[key] == platform.power_modes[0]:
        return MAXN_SCALE
    watts = [float(m[:-1]) for m in platform.power_modes if re.fullmatch(r"\d+(\.\d+)?W", m)]
    if not watts or not re.fullmatch(r"\d+(\.\d+)?W", modes[key]):
        return MAXN_SCALE
    top = max(watts) * (1.25 if not re.fullmatch(r"\d+(\.\d+)?W", platform.power_modes[0]) else 1.0)
    return ClockScale.uniform(min(1.0, math.sqrt(float(modes[key][:-1]) / top)))


def _as_scale(power: "float | ClockScale") -> ClockScale:
    """A :class:`ClockScale`; a bare number scales every domain alike."""
    return power if isinstance(power, ClockScale) else ClockScale.uniform(power)


_TABLE_CACHE: "OrderedDict[tuple, CostTable]" = OrderedDict()
_CACHE_SIZE = 32

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
        gpu_ramp_ms: (n,) the occupancy term of each layer on the GPU (0 for layers that are not
            convolutions, GEMMs or MatMuls), ms.
    """

    def __init__(self, model: "Model", platform: "Platform", precision: str, batch: int,
                 power: "float | ClockScale") -> None:
        g = graph_info(model)
        self.g = g
        self.platform = platform
        self.precision = precision
        self.batch = int(batch)
        # a slower power mode lowers the GPU (TPCs x clock), DLA and memory clocks separately
        s = self.power = _as_scale(power)
        c = self.c = ARCH[arch_of(platform)]
        scale = batch / g.model_batch
        elem = _ELEM_BYTES[precision]
        dram = platform.dram_gbps * 1e6  # bytes per ms
        self.dram_bytes_per_ms = dram * s.emc  # for DRAM demand; the memory clock caps it
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
        # ops per ms a large convolution reaches (fp16 ones in an INT8 engine: the fp16 figure)
        rate = np.where(fc16, platform.gpu_fp16_tflops * 1e9 * c.gpu_conv_eff["fp16"], gpu_peak * conv_eff)
        cls_eff = np.array([GPU_CLASS_EFF[k] for k in g.cls])
        # tensor cores pad the input channels of a convolution (3 -> 8 for the stem)
        cls_eff = cls_eff * padding_eff(g.cin_g, GPU_CHANNEL_ALIGN[precision])
        heavy = np.array([k in ("conv", "matmul", "depthwise") for k in g.cls])
        free = np.array([k == "free" for k in g.cls])
        # occupancy: a kernel of W ops reaches W / (W + W_half) of its rate, W_half =
        # gpu_sm_half_mops per SM (about a tile per SM; small layers and batch 1 fill the GPU
        # poorly): time = d + t_half with t_half the time of W_half at the layer's rate, so a
        # wider GPU or a slower precision takes longer to fill
        # (a power mode with gated TPCs has fewer SMs to fill and a lower rate: the ramp follows the clock)
        ideal = flops / (rate * cls_eff) / s.gpu
        depth = np.minimum(g.depth, c.gpu_split_k) / c.gpu_split_k
        t_half = platform.gpu_sm_count * c.gpu_sm_half_mops * 1e6 * depth / rate / s.gpu_clock
        self.gpu_ramp_ms = np.where(heavy, t_half, 0.0)  # the occupancy term of each layer
        g_compute = ideal + np.where(heavy, t_half, 0.0)
        g_mem = (act_bytes + g_w_bytes) / gpu_bw / s.emc
        g_alone = np.maximum(g_compute, g_mem) + c.gpu_launch_us * _US / s.gpu_clock
        if precision == "int8":
            # a layer without INT8 kernels (LRN, softmax, layer / group norms) runs at fp16 between two
            # reformat kernels: int8 -> fp16 on its input, fp16 -> int8 on its output
            io = (g.in_elems + g.out_elems) * scale * 3.0  # read one format, write the other
            g_alone = g_alone + np.where(g.int8_capable, 0.0,
                                         2 * c.boundary_us * _US / s.gpu_clock
                                         + io / (dram * c.reformat_bw_frac) / s.emc)
        g_extra_bytes = g.extra_in * scale * elem
        g_fused = g_extra_bytes / gpu_bw / s.emc  # epilogue math is free; only its extra inputs are read
        # a convolution merged with its sibling (horizontal fusion) adds its work to the sibling's
        # kernel: no launch and no second occupancy ramp
        sib = g.sibling >= 0
        g_fused = np.where(sib, np.maximum(ideal, g_mem), g_fused)
        g_fused_bytes = np.where(sib, act_bytes + g_w_bytes, g_extra_bytes)
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
            d_eff = d_eff * np.where(g.reads_input, 1.0, padding_eff(g.cin_g, atom_c)) * padding_eff(g.cout_g, atom_k)
            cache = platform.dla_sram_mib * 2**20 * c.dla_weight_cache
            cached = w_bytes <= cache
            w_per_item = np.where(cached, 0.0, w_bytes)
            d_compute = per_item_flops / (dla_peak * d_eff) / s.dla
            d_mem = (per_item_act + w_per_item) / dla_bw / s.emc
            d_alone = (items * (np.maximum(d_compute, d_mem) + c.dla_op_us * _US / s.dla)
                       + np.where(cached, w_bytes / dla_bw / s.emc, 0.0))
            d_fused = items * (g.extra_in / g.model_batch * elem / dla_bw / s.emc)
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
        self.b_fused = np.vstack([g_fused_bytes, g_extra_bytes])
        # ---------------- boundaries, I/O reformat, islands
        reformat_bw = dram * c.reformat_bw_frac
        # GPU<->DLA tensors cross in the DLA's native format at the engine precision (int8
        # chw32 / fp16 chw16), except that an INT8 DLA output feeding a layer without INT8
        # kernels (softmax, layer/group norm) is written as fp16: the DLA output-format effect
        # (cuDLA-samples: YOLOv5s DLA 3.82 ms with fp16 output, ~2.4 ms with int8 chw32).
        edge_elem = np.where(g.int8_capable[g.edge_c], elem, max(elem, 2.0)) if g.edge_c.size else np.zeros(0)
        self.edge_bytes = g.edge_elems * scale * edge_elem
        # (reformats are GPU kernels: a fixed cost at the GPU clock, the copy at the memory clock)
        self.edge_ms = c.boundary_us * _US / s.gpu_clock + self.edge_bytes / reformat_bw / s.emc
        # model input / output of a DLA layer: one conversion into the DLA's native input format
        # at the engine precision (kDLA_HWC4 int8 / chw16 fp16) and out of it as fp16 (a
        # float output), not an fp32 reformat at each end
        self.in_ms = c.boundary_us * _US / s.gpu_clock + g.in_layer_elems * scale * elem / reformat_bw / s.emc
        self.out_ms = (c.boundary_us * _US / s.gpu_clock
                       + g.out_layer_elems * scale * max(elem, 2.0) / reformat_bw / s.emc)
        # per loadable and per engine: submission on the CPU, whose power-mode caps are not modelled
        self.island_ms = c.dla_island_us * _US
        self.engine_ms = c.engine_us * _US
        self.contention = 1.0
        self._arange = np.arange(g.n)
        if precision == "int8" and g.qdq_int8 is not None:
            self._explicit_quantization(model, platform, batch, power)

    def _explicit_quantization(self, model, platform, batch, power) -> None:
        """A Q/DQ model in an INT8 engine: the layers its Q/DQ nodes mark keep their INT8 costs, every
        other layer (and every tensor it reads across a GPU <-> DLA boundary) takes its fp16 costs,
        on the GPU and on the DLA (whose INT8 layers need the Q/DQ scales)."""
        hi = CostTable(model, platform, "fp16", batch, power)
        fp16 = ~self.g.qdq_int8
        for name in ("t_alone", "t_fused", "b_alone", "b_fused"):
            getattr(self, name)[:, fp16] = getattr(hi, name)[:, fp16]
        self.gpu_ramp_ms = np.where(fp16, hi.gpu_ramp_ms, self.gpu_ramp_ms)
        if self.g.edge_c.size:
            edge16 = fp16[self.g.edge_c]
            self.edge_bytes = np.where(edge16, hi.edge_bytes, self.edge_bytes)
            self.edge_ms = np.where(edge16, hi.edge_ms, self.edge_ms)

    # ---------------------------------------------------------------- evaluation
    def selection(self, codes: np.ndarray) -> "CostSelection":
        """What the costs of device codes (0 GPU, 1 DLA0, 2 DLA1) are made of: which layers fuse,
        which tensors cross to another device. It depends on the codes and the graph alone, so
        every table of the model (any profile, precision or power) can cost it: :meth:`costs_of`."""
        g = self.g
        kind = (codes > 0).astype(np.intp)
        anchor = np.where(kind == 1, g.anchor_dla, g.anchor_gpu)
        has = anchor >= 0
        fused = has & (codes[np.where(has, anchor, 0)] == codes)
        if g.sib_i.size:  # horizontal fusion: a GPU convolution joins an earlier sibling's GPU kernel
            joined = (codes[g.sib_i] == 0) & (codes[g.sib_j] == 0)
            if joined.any():
                fused[g.sib_i[joined]] = True
        sel = dst = None
        if g.edge_p.size:
            idx = np.flatnonzero(codes[g.edge_p] != codes[g.edge_c])
            if idx.size:  # a tensor crossing to another device is reformatted once per destination device
                key = g.edge_p[idx] * 4 + codes[g.edge_c[idx]]
                _, first = np.unique(key, return_index=True)
                sel = idx[first]
                dst = g.edge_c[sel]
        in_on = codes[g.in_layers] > 0 if g.in_layers.size else None
        out_on = codes[g.out_layers] > 0 if g.out_layers.size else None
        return CostSelection(kind * g.n + self._arange, fused, sel, dst,
                             in_on if in_on is not None and in_on.any() else None,
                             out_on if out_on is not None and out_on.any() else None)

    def costs_of(self, pick: "CostSelection") -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per-layer ``(ms, bytes, incoming boundary ms, incoming boundary bytes)`` of a :meth:`selection`."""
        return (*self._layer_part(pick), *self._boundary_part(pick))

    def _layer_part(self, pick: "CostSelection") -> tuple[np.ndarray, np.ndarray]:
        t = np.where(pick.fused, self.t_fused.ravel()[pick.flat], self.t_alone.ravel()[pick.flat])
        b = np.where(pick.fused, self.b_fused.ravel()[pick.flat], self.b_alone.ravel()[pick.flat])
        return t, b

    def _boundary_part(self, pick: "CostSelection") -> tuple[np.ndarray, np.ndarray]:
        n = self.g.n
        if pick.sel is not None:
            ms = np.bincount(pick.dst, weights=self.edge_ms[pick.sel], minlength=n)
            by = np.bincount(pick.dst, weights=self.edge_bytes[pick.sel], minlength=n)
        else:
            ms, by = np.zeros(n), np.zeros(n)
        # model input / output reformat for a DLA first / last layer
        if pick.in_on is not None:
            np.add.at(ms, self.g.in_layers[pick.in_on], self.in_ms[pick.in_on])
        if pick.out_on is not None:
            np.add.at(ms, self.g.out_layers[pick.out_on], self.out_ms[pick.out_on])
        return ms, by

    def dla_reformats(self, pick: "CostSelection") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per layer on a DLA: the GPU reformats into its DLA input format (its incoming boundary
        tensors and the model input it reads), ms and bytes, and of the model output it writes, ms.

        They are part of :meth:`costs_of`'s boundary ms (charged to the DLA layer), but TensorRT runs
        reformat layers as GPU kernels (trtexec: "Reformatting runs on GPU"), so work that shares
        the GPU by time slices runs them as GPU work before / after the DLA segment."""
        n = self.g.n
        pre, pre_b, post = np.zeros(n), np.zeros(n), np.zeros(n)
        if pick.sel is not None:
            d = pick.flat[pick.dst] >= n  # the destination layer is on a DLA (flat row 1)
            if d.any():
                pre = np.bincount(pick.dst[d], weights=self.edge_ms[pick.sel[d]], minlength=n)
                pre_b = np.bincount(pick.dst[d], weights=self.edge_bytes[pick.sel[d]], minlength=n)
        if pick.in_on is not None:
            np.add.at(pre, self.g.in_layers[pick.in_on], self.in_ms[pick.in_on])
        if pick.out_on is not None:
            np.add.at(post, self.g.out_layers[pick.out_on], self.out_ms[pick.out_on])
        return pre, pre_b, post

    def demand(self, nbytes: float, ms: float) -> float:
        """The share of DRAM bandwidth work of ``ms`` moving ``nbytes`` asks for (0..1; contention)."""
        if ms <= 0:
            return 0.0
        return min(1.0, nbytes / (ms * self.dram_bytes_per_ms))

    def demands(self, seg_time: np.ndarray, seg_bytes: np.ndarray) -> np.ndarray:
        """:meth:`demand` per segment, vectorised."""
        rate = np.maximum(seg_time, 1e-300) * self.dram_bytes_per_ms
        return np.where(seg_time > 0, np.minimum(1.0, seg_bytes / rate), 0.0)

    def sensitivity(self) -> dict[str, float]:
        """How much each device slows under DRAM contention (the fitted sensitivities, scaled)."""
        c, k = self.c, self.contention
        return {"GPU": c.gpu_sensitivity * k, "DLA0": c.dla_sensitivity * k, "DLA1": c.dla_sensitivity * k}

    def layer_costs(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-layer (ms, bytes, fused mask) for device codes (0 GPU, 1 DLA0, 2 DLA1)."""
        pick = self.selection(codes)
        return (*self._layer_part(pick), pick.fused)

    def boundary_costs(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """Per-layer incoming boundary cost (ms, bytes) and the number of boundary tensors.

        A tensor crossing to another device is reformatted once per destination device.
        """
        pick = self.selection(codes)
        return (*self._boundary_part(pick), pick.boundaries)


class CostSelection(NamedTuple):
    """What :meth:`CostTable.selection` found for device codes.

    Attributes:
        flat: per layer, its index in a flattened ``(2, n)`` cost array (row: GPU 0, DLA 1).
        fused: per layer, whether it fuses into its anchor.
        sel, dst: the crossing edges costed (one per tensor and destination device) and the layer
            each feeds (None: no crossing).
        in_on, out_on: which model inputs / outputs are on a DLA (None: none).
    """

    flat: np.ndarray
    fused: np.ndarray
    sel: np.ndarray | None
    dst: np.ndarray | None
    in_on: np.ndarray | None
    out_on: np.ndarray | None

    @property
    def boundaries(self) -> int:
        """Boundary tensors (reformats) of the placement."""
        return 0 if self.sel is None else int(self.sel.size)


def cost_table(model: "Model", platform: "Platform", precision: str, batch: int,
               power: "float | ClockScale" = 1.0) -> CostTable:
    """Cached :class:`CostTable` for (model, platform, precision, batch, power mode's clock scale;
    a number scales every clock alike)."""
    key = (model.hash, platform, precision, int(batch), tuple(round(x, 6) for x in _as_scale(power)))
    t = _TABLE_CACHE.get(key)
    if t is None:
        t = _TABLE_CACHE[key] = CostTable(model, platform, precision, batch, power)
        while len(_TABLE_CACHE) > _CACHE_SIZE:
            _TABLE_CACHE.popitem(last=False)
    else:
        _TABLE_CACHE.move_to_end(key)
    return t


def forget_cost_tables() -> None:
    """Drop the tables :func:`cost_table` keeps: they were built from :data:`ARCH` (and the harness
    costs) as they were, so whoever changes those (a calibration's refit) calls this after."""
    _TABLE_CACHE.clear()
