"""Device truths the guided agent's model cannot express: simulated Jetsons with structural effects.

A search agent fits multiplicative corrections of the simulator (device, op-class and per-layer
scales, boundary and loadable scales, one contention scale, an engine overhead:
:mod:`placetune.calibration`). A real Jetson differs in ways no such scale captures. Each
*family* here is a benchmark-only backend, :class:`TruthJetson`, that measures like a Jetson
would (per-build tactic noise, TensorRT-style per-layer profiles) with effects of that kind:

* ``seg-length``: a DLA segment longer than ``spill_knee`` layers slows down per extra layer
  (its working set spills out of the DLA's SRAM), and a DLA segment shorter than ``short_dla``
  layers pays ``short_dla_us`` more (a loadable launch the work does not hide);
* ``cut-tactics``: a GPU convolution right after a DLA->GPU cut gets a slower tactic (its input
  arrives in the DLA's format) and its epilogue no longer fuses into it;
* ``contention``: shared-DRAM contention that saturates (``1 + S_d * x0 * (1 - exp(-x / x0))``
  instead of ``1 + s * x``) and is asymmetric (``S_gpu`` != ``S_dla``);
* ``reformat``: GPU<->DLA reformat costs that depend on the direction (into / out of a DLA
  format) and on the channel alignment of the tensor (channels not a multiple of ``align``
  need a padded copy);
* ``mixed``: all of them at once, milder.

Three more families are effects *outside* every feature of the guided agent's residual model
(:mod:`search.residual`), one for each way a model-guided search can be fooled:

* ``dla-fail``: the DLA compiler rejects some loadables: a DLA segment longer than ``fail_len``
  layers, or one holding a tensor larger than ``fail_bytes`` (the model's ``fail_q`` quantile of
  tensor sizes), fails to build (``Measurement.status == "build_failed"``, with the compiler's
  reason); the build still costs its time, the plan has no value;
* ``handoff``: inside a DLA segment a tensor no larger than ``handoff_bytes`` (the ``handoff_q``
  quantile) stays on chip, and its consumer runs ``handoff`` faster (no DRAM round trip);
* ``drift``: the GPU slows as the night goes on, by ``drift`` x min(1, builds / ``drift_ramp``)
  (thermal throttling); the noise-free value of a plan is the cold device's, so a search that
  compares a cold early build with hot late ones ranks on the drift, not the plans.

One more, added later and fixed before any agent ran on it, outside every feature of the residual
model and of the device profile (neither looks at a layer's weights):

* ``dla-weights``: each DLA core keeps the weights of its loadables in an on-chip cache of
  ``weight_share`` of the model's weight bytes; when the weights placed on a core exceed it, the
  rest stream from DRAM every frame and every DLA segment of that core runs ``weight_cost`` x
  (the share of its core's weights that does not fit) slower. The cost depends on what else sits
  on the same core, not on the segment's length, tensors or cuts.

Two more, added for the fresh part only and fixed before any agent ran on them, again outside
every feature of the residual model and of the device profile:

* ``dla-switch``: a DLA core that runs several loadables per frame switches context between
  them, and each switch costs more the more loadables the core keeps resident (their
  configurations and buffers evict each other): every loadable on a core pays ``switch_us`` x
  (loadables on that core - 1), so a core's cost grows with the square of its loadables. The
  residual's segment features see one segment alone (a constant, its length, its own cuts) and
  its plan feature counts the plan's engines linearly over every device; nothing counts the
  loadables that share a segment's core (2 + 2 loadables and 4 + 0 have the same engines, costs
  4 and 12 switches).
* ``dla-cbuf``: a DLA convolution whose weights exceed the convolution buffer (``cbuf_q``
  quantile of the model's convolution weight sizes) streams them tile by tile and runs
  ``1 + cbuf_cost x log2(weights / buffer)`` slower; the GPU does not care. Neither model looks
  at a layer's weights, and the profiler reports a DLA loadable as one entry split evenly over
  its layers, so the per-layer fit sees the cost smeared over the loadable, never on the heavy
  convolutions that pay it (and a layer never built on a DLA keeps its prior).

Every family also draws a device the fit *can* express (GPU / DLA / boundary scales, a fixed
per-layer factor) and per-build noise of 1-3 % (each build picks other tactics). Per-layer
times are reported as TensorRT's profiler gives them: a DLA loadable and a fused GPU kernel are
one entry each, split evenly over their layers. Each family has several parameter draws
(:func:`truth`), seeded by the draw number.

:meth:`TruthJetson.true_value` gives the noise-free objective of a placement: what a plan an
agent reports is worth on this device. Agents see the device only through ``measure()``.

Everything here is SIMULATED (a benchmark of search robustness, not a device model).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from placetune.backends.simulate.costs import CODE_DEVICE, DEVICE_CODE, cost_table, graph_info, power_factor
from placetune.backends.simulate.noise import build_factor
from placetune.backends.simulate.profiled import apply_profile
from placetune.backends.simulate.schedule import run_one_frame
from placetune.backends.simulate.simulator import SimulatedJetson, figures
from placetune.backends.simulate.build_time import engine_specs
from placetune.calibration import DeviceProfile
from placetune.measurement import Measurement
from placetune.placement.realise import InfeasiblePlacement

__all__ = ["FAMILIES", "FRESH_ONLY", "Truth", "truth", "TruthJetson"]

#: The structural families, in benchmark order.
#: New families are appended: a family's draws are seeded by its position in this tuple.
FAMILIES = ("seg-length", "cut-tactics", "contention", "reformat", "mixed", "dla-fail", "handoff", "drift",
            "dla-weights", "dla-switch", "dla-cbuf")
#: families run only in the fresh part by default (added after the tuning and held-out parts were
#: looked at, to judge the agent on effects nobody tuned on: no run of the tuning part includes them)
FRESH_ONLY = ("dla-switch", "dla-cbuf")
_US = 1e-3


@dataclass(frozen=True)
class Truth:
    """One device truth: a family's parameter draw (see the module docstring for each effect)."""

    family: str
    draw: int
    noise: float = 0.02
    gpu: float = 1.0
    dla: float = 1.0
    boundary: float = 1.0
    layer_sigma: float = 0.05
    spill_knee: int = 0  # 0: no spill
    spill_slope: float = 0.0
    short_dla: int = 0  # 0: no short-segment cost
    short_dla_us: float = 0.0
    cut_tactic: float = 1.0
    cut_unfuse: bool = False
    sat_gpu: float = 0.0  # 0: the simulator's own (linear, symmetric) contention
    sat_dla: float = 0.0
    sat_x0: float = 1.0
    to_dla: float = 1.0
    to_gpu: float = 1.0
    misaligned: float = 1.0
    align: int = 32
    fail_len: int = 0  # 0: no length limit on DLA loadables
    fail_q: float = 0.0  # 0: no tensor-size limit; else the quantile of the model's tensor sizes
    handoff: float = 0.0  # 0: no on-chip hand-off
    handoff_q: float = 0.0
    drift: float = 0.0  # 0: no drift
    drift_ramp: int = 40
    weight_share: float = 0.0  # 0: no weight cache limit; else the share of the model's weight bytes a DLA core holds
    weight_cost: float = 0.0
    switch_us: float = 0.0  # 0: no per-core context switch between loadables
    cbuf_q: float = 0.0  # 0: no convolution-buffer limit; else the quantile of the conv weight sizes it holds
    cbuf_cost: float = 0.0

    def profile(self) -> DeviceProfile:
        """The part of the truth a device profile can express (the fit could learn it)."""
        return DeviceProfile(base="orin-agx", gpu=self.gpu, dla=self.dla, boundary=self.boundary,
                             layer_sigma=self.layer_sigma, seed=1000 + self.draw)

    def describe(self) -> str:
        """The parameters that differ from the nominal simulator, short."""
        base = Truth(self.family, self.draw)
        keep = [f.name for f in dataclasses.fields(self) if f.name not in ("family", "draw")
                and getattr(self, f.name) != getattr(base, f.name)]
        keep = ["noise"] + [k for k in keep if k != "noise"]
        return " ".join(f"{k}={_short(getattr(self, k))}" for k in keep)

    def digest(self) -> str:
        """Content hash of the parameters."""
        return hashlib.sha256(json.dumps(dataclasses.asdict(self), sort_keys=True).encode()).hexdigest()[:16]


def _short(v: Any) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def truth(family: str, draw: int) -> Truth:
    """Draw number ``draw`` of a family (the parameters are drawn from ranges by a seeded generator)."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; families are {', '.join(FAMILIES)}")
    rng = np.random.default_rng(7919 * (FAMILIES.index(family) + 1) + draw)
    u = lambda a, b: float(rng.uniform(a, b))  # noqa: E731
    common = dict(family=family, draw=draw, noise=round(u(0.01, 0.03), 4), gpu=round(u(0.9, 1.15), 3),
                  dla=round(u(0.75, 1.25), 3), boundary=round(u(0.8, 1.5), 3))
    if family == "seg-length":
        return Truth(**common, spill_knee=int(rng.integers(10, 26)), spill_slope=round(u(0.015, 0.04), 4),
                     short_dla=int(rng.integers(4, 10)), short_dla_us=round(u(60, 200), 1))
    if family == "cut-tactics":
        return Truth(**common, cut_tactic=round(u(1.4, 2.5), 3), cut_unfuse=True)
    if family == "contention":
        return Truth(**common, sat_gpu=round(u(0.5, 1.2), 3), sat_dla=round(u(0.03, 0.25), 3),
                     sat_x0=round(u(0.2, 0.6), 3))
    if family == "reformat":
        return Truth(**common, to_dla=round(u(0.6, 1.6), 3), to_gpu=round(u(1.5, 3.5), 3),
                     misaligned=round(u(2.0, 5.0), 3), align=int(rng.choice([16, 32, 64])))
    if family == "dla-fail":
        return Truth(**common, fail_len=int(rng.integers(12, 31)), fail_q=round(u(0.85, 0.97), 3))
    if family == "handoff":
        return Truth(**common, handoff=round(u(0.3, 0.55), 3), handoff_q=round(u(0.3, 0.6), 3))
    if family == "drift":
        return Truth(**common, drift=round(u(0.06, 0.12), 3), drift_ramp=int(rng.integers(25, 61)))
    if family == "dla-weights":
        return Truth(**common, weight_share=round(u(0.15, 0.45), 3), weight_cost=round(u(0.5, 1.2), 3))
    if family == "dla-switch":
        return Truth(**common, switch_us=round(u(15, 60), 1))
    if family == "dla-cbuf":
        return Truth(**common, cbuf_q=round(u(0.5, 0.8), 3), cbuf_cost=round(u(0.3, 0.8), 3))
    return Truth(**common, spill_knee=int(rng.integers(15, 31)), spill_slope=round(u(0.01, 0.025), 4),
                 short_dla=int(rng.integers(3, 7)), short_dla_us=round(u(40, 120), 1),
                 cut_tactic=round(u(1.2, 1.8), 3), cut_unfuse=True, sat_gpu=round(u(0.4, 0.9), 3),
                 sat_dla=round(u(0.05, 0.2), 3), sat_x0=round(u(0.3, 0.7), 3), to_dla=round(u(0.7, 1.3), 3),
                 to_gpu=round(u(1.3, 2.5), 3), misaligned=round(u(1.5, 3.0), 3), align=32)


class _ModelExtras:
    """Per-model arrays the structural effects need: each graph edge's channel count, heavy layers."""

    def __init__(self, model: Any) -> None:
        g = graph_info(model)
        layers = model.layers
        out_of: dict[str, tuple[int, Any]] = {}
        for i, layer in enumerate(layers):
            for t in layer.outputs:
                out_of[t.name] = (i, t)
        chans = []
        for layer in layers:  # the edges in GraphInfo's order
            seen = set()
            for t in layer.inputs:
                if t.const or t.name not in out_of or t.name in seen:
                    continue
                seen.add(t.name)
                shape = out_of[t.name][1].shape
                chans.append(int(shape[1]) if len(shape) > 1 else 1)
        if len(chans) != g.edge_p.size:
            raise RuntimeError("edge list differs from the simulator's")
        self.edge_channels = np.array(chans, dtype=np.int64)
        self.heavy = np.array([c in ("conv", "matmul") for c in g.cls])
        self.weight_bytes = np.array([float(layer.weight_bytes) for layer in layers])


_EXTRAS: dict[str, _ModelExtras] = {}


def _extras(model: Any) -> _ModelExtras:
    ex = _EXTRAS.get(model.hash)
    if ex is None:
        ex = _EXTRAS[model.hash] = _ModelExtras(model)
    return ex


@dataclass
class _Run:
    """The noise-free figures of one realised placement on a truth."""

    latency: float
    period: float
    busy: dict[str, float]
    segs: list[Any]
    seg_time: np.ndarray
    seg_dev: np.ndarray
    layer_profile: np.ndarray
    table: Any
    boundaries: int
    failed: str | None = None  # the DLA compiler's reason when a loadable fails to build


class TruthJetson(SimulatedJetson):
    """A simulated Jetson with a :class:`Truth`'s structural effects (benchmark only).

    Engine and pipeline modes carry the effects; replicas mode is the profiled simulator's.
    Reports ``segment_times_ms`` (each engine alone), ``layer_times_ms`` (TensorRT-style: a DLA
    loadable and a fused GPU kernel split evenly over their layers) and per-build noise.
    """

    def __init__(self, t: Truth, timeline: bool = False) -> None:
        super().__init__(timeline=timeline, profile=t.profile(), noise=t.noise)
        self.truth = t
        self.builds_done = 0  # the drift's clock: builds measured on this device so far

    def gpu_slowdown(self) -> float:
        """The drifting GPU's time factor now (1 when the truth does not drift)."""
        t = self.truth
        return 1.0 + t.drift * min(1.0, self.builds_done / max(1, t.drift_ramp)) if t.drift else 1.0

    def fingerprint(self, platform: Any, settings: Any) -> dict[str, Any]:
        fp = super().fingerprint(platform, settings)
        fp["truth"] = self.truth.digest()
        return fp

    # ------------------------------------------------------------------ the truth
    def _law(self, table: Any):
        """Contention stretch per device code for the others' DRAM demand ``x``."""
        t = self.truth
        c, k = table.c, table.contention
        if t.sat_gpu > 0:
            sens, x0 = (t.sat_gpu, t.sat_dla, t.sat_dla), t.sat_x0
            return lambda d, x: 1.0 + sens[d] * x0 * (1.0 - math.exp(-x / x0))
        sens = (c.gpu_sensitivity * k, c.dla_sensitivity * k, c.dla_sensitivity * k)
        return lambda d, x: 1.0 + sens[d] * x

    def run_truth(self, realisation: Any, platform: Any, settings: Any, gpu_slow: float = 1.0) -> _Run:
        """The noise-free figures of a realised placement (engine or pipeline mode); ``gpu_slow``:
        the drifting GPU's time factor (1: the cold device)."""
        t = self.truth
        realized = realisation.realized
        model = realized.model
        g = graph_info(model)
        ex = _extras(model)
        dev = realized.as_dict()
        codes = np.fromiter((DEVICE_CODE[dev[n]] for n in g.names), dtype=np.intp, count=g.n)
        power = power_factor(platform, settings.power_mode) or 1.0
        table = apply_profile(cost_table(model, platform, settings.precision, model.batch, power), self.profile)
        ms, nbytes, fused = table.layer_costs(codes)
        ms, fused = ms.copy(), fused.copy()
        if gpu_slow != 1.0:
            ms = np.where(codes == 0, ms * gpu_slow, ms)
        if t.cbuf_q:  # ---- DLA convolutions whose weights do not fit the convolution buffer
            conv_w = ex.weight_bytes[ex.heavy & (ex.weight_bytes > 0)]
            cbuf = float(np.quantile(conv_w, t.cbuf_q)) if conv_w.size else math.inf
            over = (codes > 0) & ex.heavy & (ex.weight_bytes > cbuf)
            ms = np.where(over, ms * (1.0 + t.cbuf_cost * np.log2(np.maximum(ex.weight_bytes, 1.0) / cbuf)), ms)
        cross = codes[g.edge_p] != codes[g.edge_c] if g.edge_p.size else np.zeros(0, bool)
        # ---- tactics at cuts: a GPU conv fed by a DLA loses its tactic and its epilogue's fusion
        if t.cut_tactic != 1.0 or t.cut_unfuse:
            into_gpu = cross & (codes[g.edge_p] > 0) & (codes[g.edge_c] == 0)
            after = np.zeros(g.n, bool)
            after[g.edge_c[into_gpu]] = True
            after &= ex.heavy
            ms = np.where(after, ms * t.cut_tactic, ms)
            if t.cut_unfuse:
                anchor = g.anchor_gpu
                lost = fused & (codes == 0) & (anchor >= 0) & after[np.where(anchor >= 0, anchor, 0)]
                ms = np.where(lost, table.t_alone[0], ms)
                fused &= ~lost
        # ---- boundaries: reformat cost by direction and channel alignment
        bms, bby = np.zeros(g.n), np.zeros(g.n)
        nb = 0
        idx = np.flatnonzero(cross)
        if idx.size:
            key = g.edge_p[idx] * 4 + codes[g.edge_c[idx]]
            _, first = np.unique(key, return_index=True)
            sel = idx[first]
            src, dst = codes[g.edge_p[sel]], codes[g.edge_c[sel]]
            f = np.where(dst > 0, t.to_dla, np.where(src > 0, t.to_gpu, 1.0))
            f = f * np.where(ex.edge_channels[sel] % t.align != 0, t.misaligned, 1.0)
            np.add.at(bms, g.edge_c[sel], table.edge_ms[sel] * f)
            np.add.at(bby, g.edge_c[sel], table.edge_bytes[sel])
            nb = int(sel.size)
        if g.in_layers.size:
            on = codes[g.in_layers] > 0
            np.add.at(bms, g.in_layers[on], table.in_ms[on] * t.to_dla)
        if g.out_layers.size:
            on = codes[g.out_layers] > 0
            np.add.at(bms, g.out_layers[on], table.out_ms[on] * t.to_gpu)
        # ---- segments
        pipeline = settings.mode == "pipeline"
        segs = realized.segments(pipeline=pipeline)
        seg_of = np.empty(g.n, dtype=np.intp)
        for s in segs:
            seg_of[[g.index[n] for n in s.layers]] = s.index
        seg_dev = np.array([DEVICE_CODE[s.device] for s in segs], dtype=np.intp)
        k = len(segs)
        failed = None
        if (t.fail_len or t.fail_q) and g.edge_p.size:
            limit = float(np.quantile(table.edge_bytes, t.fail_q)) if t.fail_q else math.inf
            held = np.zeros(k)  # the largest tensor each segment produces
            np.maximum.at(held, seg_of[g.edge_p], table.edge_bytes)
            for s in segs:
                if DEVICE_CODE[s.device] == 0:
                    continue
                n = len(s.layers)
                if t.fail_len and n > t.fail_len:
                    failed = (f"DLA compiler rejected the loadable of {n} layers ({s.layers[0]} .. {s.layers[-1]}) "
                              f"on {s.device}: too many layers for one loadable")
                elif held[s.index] > limit:
                    failed = (f"DLA compiler rejected the loadable {s.layers[0]} .. {s.layers[-1]} on {s.device}: "
                              f"a tensor of {held[s.index] / 1e6:.2f} MB does not fit its buffers")
                if failed:
                    break
        if t.handoff and g.edge_p.size:
            small = table.edge_bytes <= float(np.quantile(table.edge_bytes, t.handoff_q))
            inside = small & (codes[g.edge_p] > 0) & (seg_of[g.edge_p] == seg_of[g.edge_c])
            gets = np.zeros(g.n, bool)
            gets[g.edge_c[inside]] = True
            ms = np.where(gets, ms * (1.0 - t.handoff), ms)
        seg_time = np.bincount(seg_of, weights=ms + bms, minlength=k)
        seg_bytes = np.bincount(seg_of, weights=nbytes + bby, minlength=k)
        seg_time = seg_time + np.where(seg_dev > 0, table.island_ms, 0.0)
        if t.weight_share:  # ---- a DLA core's weight cache: what does not fit streams every frame
            cache = t.weight_share * float(ex.weight_bytes.sum())
            for d in (1, 2):
                held_w = float(ex.weight_bytes[codes == d].sum())
                if held_w > cache:
                    seg_time = np.where(seg_dev == d, seg_time * (1.0 + t.weight_cost * (1.0 - cache / held_w)),
                                        seg_time)
        if t.switch_us:  # ---- context switches between the loadables that share a DLA core
            per_core = np.bincount(seg_dev, minlength=3)
            seg_time = seg_time + np.where(seg_dev > 0, t.switch_us * _US * np.maximum(0, per_core[seg_dev] - 1), 0.0)
        n_layers = np.array([len(s.layers) for s in segs], dtype=float)
        dla = seg_dev > 0
        if t.spill_knee:
            seg_time = np.where(dla, seg_time * (1.0 + t.spill_slope * np.maximum(0.0, n_layers - t.spill_knee)),
                                seg_time)
        if t.short_dla:
            seg_time = seg_time + np.where(dla & (n_layers < t.short_dla), t.short_dla_us * _US, 0.0)
        # ---- the profiler's view: DLA loadables and fused GPU kernels split evenly over their layers
        head = np.arange(g.n)
        for i in range(g.n):
            a = g.anchor_gpu[i]
            if fused[i] and codes[i] == 0 and a >= 0:
                head[i] = head[a]
        kernel_ms = np.bincount(head, weights=np.where(codes == 0, ms, 0.0), minlength=g.n)
        kernel_n = np.bincount(head, minlength=g.n)
        prof = np.where(codes == 0, kernel_ms[head] / np.maximum(kernel_n[head], 1), 0.0)
        for s, st, d in zip(segs, seg_time.tolist(), seg_dev.tolist()):
            if d > 0:
                prof[[g.index[n] for n in s.layers]] = st / len(s.layers)
        law = self._law(table)
        if pipeline:
            seg_time = seg_time + table.engine_ms
            rate = np.maximum(seg_time, 1e-300) * table.dram_bytes_per_ms
            demand = np.where(seg_time > 0, np.minimum(1.0, seg_bytes / rate), 0.0)
            latency, one = run_one_frame(seg_dev.tolist(), seg_time.tolist(), demand.tolist(),
                                         [tuple(s.predecessors) for s in segs], (0.0, 0.0, 0.0), law=law)
            busy1 = {CODE_DEVICE[d]: v for d, v in one}
            period, busy_ss = _steady(seg_dev, seg_time, demand, latency, settings.frames_in_flight, law)
            busy = busy_ss if settings.frames_in_flight > 1 else busy1
        else:
            seg_time[0] += table.engine_ms
            latency = period = float(seg_time.sum())
            busy = {CODE_DEVICE[c]: float(seg_time[seg_dev == c].sum()) for c in range(3) if (seg_dev == c).any()}
        return _Run(latency, period, {d: v for d, v in busy.items() if v > 0}, segs, seg_time, seg_dev, prof,
                    table, nb, failed)

    def true_value(self, realisation: Any, platform: Any, settings: Any, objective: str) -> float:
        """The noise-free ``latency`` (ms), ``throughput`` (fps) or ``energy`` (mJ) of a realised placement
        (on the cold device).

        Raises:
            InfeasiblePlacement: one of its DLA loadables fails to build on this device.
        """
        r = self.run_truth(realisation, platform, settings)
        if r.failed:
            raise InfeasiblePlacement(r.failed)
        if objective == "latency":
            return r.latency
        if objective == "throughput":
            return 1000.0 * r.table.batch / r.period
        if objective == "energy":
            s = dataclasses.replace(settings, noise=0.0)
            return float(figures(s, platform, r.table, realisation.realized.key, r.latency, None, r.busy,
                                 r.period)[4])
        raise ValueError(f"objective {objective!r}: latency, throughput or energy")

    # ------------------------------------------------------------------ the backend
    def measure(self, realisation: Any, platform: Any, settings: Any) -> Measurement:
        if settings.mode not in ("engine", "pipeline"):
            return super().measure(realisation, platform, settings)
        if self.noise is not None:
            settings = dataclasses.replace(settings, noise=self.noise)
        realized = realisation.realized
        model = realized.model
        base = dict(simulated=True, backend="simulate-truth", mode=settings.mode, precision=settings.precision,
                    batch=int(model.batch), requested=realisation.requested.as_dict(), realized=realized.as_dict(),
                    fallback=dict(realisation.fallback))
        r = self.run_truth(realisation, platform, settings, self.gpu_slowdown())
        self.builds_done += 1
        if r.failed:
            return Measurement.failure("build_failed", r.failed, **base)
        key = realized.key
        bkey = (key, settings.mode)
        build = self._builds[bkey] = self._builds.get(bkey, -1) + 1
        samples, stats, fps, p_w, energy, by_dev, period = figures(settings, platform, r.table, key, r.latency,
                                                                   None, r.busy, r.period, build=build)
        f = build_factor(settings.noise, settings.seed, key, settings.mode, build)
        g = r.table.g
        seg_list = [{"index": s.index, "device": s.device, "layers": len(s.layers), "time_ms": st * f,
                     "alone_ms": st * f, "predecessors": list(s.predecessors)}
                    for s, st in zip(r.segs, r.seg_time.tolist())]
        device = self.clock.charge(engine_specs((model.hash, settings.precision, int(r.table.batch)), settings.mode,
                                                r.segs, []), latency_ms=stats["median"], iterations=settings.iterations)
        extra = {"build": build, "period_ms": period, "busy_ms": r.busy, "boundaries": r.boundaries,
                 "power_w_by_device": by_dev, "device_time_s": device}
        return Measurement(status="ok", latency_samples_ms=samples, latency_ms=stats, throughput_fps=float(fps),
                           dla_loadables=dict(realisation.loadables), segment_times_ms=seg_list,
                           layer_times_ms=dict(zip(g.names, (r.layer_profile * f).tolist())), energy_mj=float(energy),
                           power_w=float(p_w), build_seconds=float(device["build_s"]), extra=extra, **base)


def _steady(seg_dev: np.ndarray, seg_time: np.ndarray, demand: np.ndarray, latency: float, k: int,
            law) -> tuple[float, dict[str, float]]:
    """The period of ``k`` frames in flight (the simulator's steady-state bound, under a contention law)."""
    w = np.bincount(seg_dev, weights=seg_time, minlength=3)[:3].tolist()
    wq = np.bincount(seg_dev, weights=seg_time * demand, minlength=3)[:3].tolist()
    q = [b / a if a > 0 else 0.0 for a, b in zip(w, wq)]
    total_w = sum(w)
    k = max(1, int(k))

    def stretch(p: float) -> list[float]:
        u = [min(1.0, a / p) * b for a, b in zip(w, q)]
        tot = sum(u)
        return [law(d, tot - u[d]) for d in range(3)]

    def f(p: float) -> float:
        s = stretch(p)
        m = max(a * b for a, b in zip(w, s))
        mean = sum(a * b for a, b in zip(w, s)) / total_w * latency / k if total_w > 0 else latency / k
        return max(m, mean)

    lo = max(max(w), latency / k)
    hi = f(lo)
    for _ in range(60):
        if hi - lo <= 1e-12 * hi:
            break
        mid = 0.5 * (lo + hi)
        if f(mid) > mid:
            lo = mid
        else:
            hi = mid
    s = stretch(hi)
    return hi, {CODE_DEVICE[d]: w[d] * s[d] for d in range(3)}
