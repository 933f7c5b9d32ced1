"""Incremental evaluation on the simulated Jetson: placements as device-code vectors, moves re-cost.

Search agents evaluate thousands of placements that differ from the previous one by a move (a
few layers to another device). :class:`IncrementalSimulator` keeps everything per model fixed
(cost table with the backend's device profile applied, DLA support as a mask, producer lists)
and evaluates a placement as arrays: realisation (core remapping, GPU fallback, the 16-loadable
limit) on the code vector, segmentation on integers (memoised by the realised codes), per-layer
and boundary costs as numpy expressions, the one-frame schedule and the pipeline steady state.
:meth:`IncrementalSimulator.evaluate_move` starts from the previous :class:`Evaluation`: the
requested codes are copied and only the moved layers change. Realisations and figures are memoised (LRU, 4096
entries) by the codes after GPU fallback, so a move onto layers the DLA cannot run, or back to a
placement seen before, costs a lookup.

The figures equal ``SimulatedJetson.measure(realise(...))`` for the same placement and settings
(tests/test_incremental.py checks it over random moves); :meth:`Evaluation.measurement` gives
that full Measurement (e.g. to store it). Everything is **simulated**. ``replicas`` mode, a
missing power mode, ``gpu_fallback=False`` and DLA batches beyond the DLA limit go through the
full path.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
import dataclasses

import numpy as np

from placetune.backends.simulate.costs import CODE_DEVICE, DEVICE_CODE, cost_table, power_factor
from placetune.backends.simulate.profiled import apply_profile
from placetune.backends.simulate.schedule import run_one_frame
from placetune.backends.simulate.simulator import (
    DLA_MAX_BATCH, SimulatedJetson, figures, segment_sums_of,
)
from placetune.backends.simulate.steady import steady_state
from placetune.placement.placement import DEVICES, Placement, normalise_device, producer_indexes
from placetune.placement.realise import MAX_LOADABLES_PER_CORE, dla_support, realise
from placetune.memo import Memo
from placetune.placement.segmenting import ProducerArrays
from placetune.errors import PlacementError

if TYPE_CHECKING:
    from placetune.hardware.platforms import Platform
    from placetune.measurement import Measurement
    from placetune.model.model import Model
    from placetune.settings import Settings

__all__ = ["IncrementalSimulator", "Evaluation"]

_MEMO = 4096
_KEY_CHARS = bytes.maketrans(b"\x00\x01\x02", b"g01")
#: producer arrays (and their memoised segmentations) shared by every simulator of a model, for
#: the last 4 models: a search builds a new simulator for each model of the device
_PRODUCERS: Memo[ProducerArrays] = Memo(4)


def _producers(model: "Model") -> ProducerArrays:
    """The model's producer arrays, shared by every simulator of it."""
    pa = _PRODUCERS.get(model.hash)
    return pa if pa is not None else _PRODUCERS.put(model.hash, ProducerArrays(producer_indexes(model)))


class Evaluation:
    """The simulated figures of one placement, with what the next move needs.

    Attributes:
        codes: requested device code per layer (model layer order; 0 GPU, 1 DLA0, 2 DLA1).
        realized: realised device code per layer.
        latency_ms: median latency (ms); ``stats`` has the other statistics.
        throughput_fps, energy_mj, power_w, period_ms: as in the full Measurement.
        busy_ms: per device, busy time per inference.
    """

    __slots__ = ("sim", "codes", "realized", "latency_ms", "stats", "throughput_fps", "energy_mj", "power_w",
                 "period_ms", "busy_ms", "_full")

    def __init__(self, sim: "IncrementalSimulator", codes: np.ndarray, realized: np.ndarray | None,
                 figs: tuple | None, full: "Measurement | None" = None) -> None:
        self.sim, self.codes, self.realized, self._full = sim, codes, realized, full
        if figs is not None:
            (self.stats, self.throughput_fps, self.power_w, self.energy_mj, self.period_ms, self.busy_ms) = figs
        else:  # the full path measured it
            m = full
            self.stats = dict(m.latency_ms) if m.ok else {}
            self.throughput_fps, self.power_w, self.energy_mj = m.throughput_fps, m.power_w, m.energy_mj
            self.period_ms = (m.extra or {}).get("period_ms")
            self.busy_ms = dict((m.extra or {}).get("busy_ms") or {})
        self.latency_ms = self.stats.get("median")

    @property
    def ok(self) -> bool:
        """False when the full path reported a failure."""
        return self._full is None or self._full.ok

    def placement(self) -> Placement:
        """The requested placement."""
        names = self.sim.model.names
        return Placement.unchecked(self.sim.model, {n: DEVICES[c] for n, c in zip(names, self.codes.tolist())})

    def measurement(self) -> "Measurement":
        """The full simulated Measurement of this placement (computed once, on demand)."""
        if self._full is None:
            self._full = self.sim.measure_full(self.placement())
        return self._full


class IncrementalSimulator:
    """Evaluate many placements of one model on the simulated Jetson, fast and incrementally.

    Args:
        model: the model.
        platform: the Jetson profile.
        settings: build settings (mode, precision, frames in flight, noise...).
        backend: the :class:`SimulatedJetson` whose device profile and noise apply (default: nominal).
        gpu_fallback, dla_core, trt_version: as for :func:`~placetune.placement.realise.realise`.

    Example:
        >>> sim = IncrementalSimulator(m, orin, Settings(mode="pipeline", frames_in_flight=4))  # doctest: +SKIP
        >>> e = sim.evaluate(Placement.all_gpu(m))                                              # doctest: +SKIP
        >>> e2 = sim.evaluate_move(e, {m.names[10]: "DLA0"})                                    # doctest: +SKIP
    """

    def __init__(self, model: "Model", platform: "Platform", settings: "Settings", backend: SimulatedJetson | None = None,
                 *, gpu_fallback: bool = True, dla_core: int | None = None, trt_version: str = "8.6") -> None:
        self.model, self.platform = model, platform
        self.backend = backend or SimulatedJetson(timeline=False)
        self.backend.check_base(platform)
        if self.backend.noise is not None and settings.noise != self.backend.noise:
            settings = dataclasses.replace(settings, noise=self.backend.noise)
        self.settings = settings
        self.gpu_fallback, self.dla_core, self.trt_version = gpu_fallback, dla_core, trt_version
        self.names = model.names
        self.index = {n: i for i, n in enumerate(self.names)}
        self.producers = _producers(model)
        self.power = power_factor(platform, settings.power_mode)
        self.allowed = np.array([d in platform.devices for d in DEVICES])
        self.fast = (settings.mode in ("engine", "pipeline") and self.power is not None and gpu_fallback
                     and not (platform.dla_count > 0 and model.batch > DLA_MAX_BATCH)
                     and (dla_core is None or f"DLA{dla_core}" in platform.devices))
        if self.fast:
            self.table = apply_profile(cost_table(model, platform, settings.precision, model.batch, self.power),
                                       self.backend.profile)
            self.sens = self.table.sensitivity()
            self.sens3 = tuple(self.sens[d] for d in CODE_DEVICE)
            if platform.dla_count > 0 and settings.precision != "fp32":
                sup = dla_support(model, platform, settings.precision, trt_version)
                self.supported = np.array([sup[n].supported for n in self.names])
            else:
                self.supported = np.zeros(len(self.names), dtype=bool)
        self._hash_prefix = (model.hash + ":").encode()
        self._memo: OrderedDict[bytes, tuple] = OrderedDict()

    # ---------------------------------------------------------------- public
    def codes_of(self, placement: Placement | Mapping[str, str]) -> np.ndarray:
        """The device-code vector of a placement (model layer order)."""
        dev = (placement if isinstance(placement, Placement) else Placement(self.model, placement)).as_dict()
        return np.fromiter((DEVICE_CODE[dev[n]] for n in self.names), dtype=np.int8, count=len(self.names))

    def evaluate(self, placement: Placement | Mapping[str, str] | np.ndarray) -> Evaluation:
        """Evaluate a placement (or a device-code vector) from scratch (memoised by realised codes)."""
        codes = placement if isinstance(placement, np.ndarray) else self.codes_of(placement)
        return self._evaluate(np.asarray(codes, dtype=np.int8))

    def evaluate_move(self, prev: Evaluation, changes: Mapping[Any, Any]) -> Evaluation:
        """Evaluate ``prev``'s placement with ``changes`` applied: ``{layer name or number: device or code}``.

        Raises:
            PlacementError: an unknown layer or device name.
        """
        codes = prev.codes.copy()
        for layer, d in changes.items():
            i = layer if isinstance(layer, (int, np.integer)) else self.index.get(layer)
            if i is None:
                raise PlacementError(f"model {self.model.name!r} has no layer {layer!r}")
            codes[i] = d if isinstance(d, (int, np.integer)) else DEVICE_CODE[normalise_device(d)]
        return self._evaluate(codes)

    def measure_full(self, placement: Placement) -> "Measurement":
        """The full path: ``realise()`` + ``SimulatedJetson.measure()`` of the placement's first build
        (what the incremental evaluation models: with noise, each rebuild draws its own factor)."""
        s = self.settings
        r = realise(placement, self.platform, mode=s.mode, precision=s.precision, gpu_fallback=self.gpu_fallback,
                    dla_core=self.dla_core, trt_version=self.trt_version)
        self.backend.forget_builds(r.realized.key)
        return self.backend.measure(r, self.platform, s)

    # ---------------------------------------------------------------- internals
    def _evaluate(self, codes: np.ndarray) -> Evaluation:
        used = np.bincount(codes, minlength=3)
        if not self.fast or not all(self.allowed[d] for d in range(3) if used[d]):
            placement = Placement.unchecked(self.model, {n: DEVICES[c] for n, c in zip(self.names, codes.tolist())})
            full = self.measure_full(placement)  # raises PlacementError as realise() does
            return Evaluation(self, codes, self.codes_of(full.realized) if full.realized else None, None, full)
        dev = self._requested_on_devices(codes, used)
        key = dev.tobytes()  # the realisation and figures depend on these codes only
        hit = self._memo.get(key)
        if hit is None:
            realized, sa = self._loadable_limit(dev)
            hit = self._memo[key] = (realized, self._figures(realized, sa))
            if len(self._memo) > _MEMO:
                self._memo.popitem(last=False)
        else:
            self._memo.move_to_end(key)
        return Evaluation(self, codes, hit[0], hit[1])

    def _requested_on_devices(self, codes: np.ndarray, used: np.ndarray) -> np.ndarray:
        """realise() before the loadable limit: the engine's one DLA core, then GPU fallback."""
        dev = codes
        if self.settings.mode == "engine" and (used[1] or used[2]):
            core = self.dla_core
            if core is None:  # the core most layers ask for (DLA0 on a tie)
                core = 1 if used[1] >= used[2] else 2
            else:
                core += 1
            dev = np.where(codes > 0, core, 0).astype(np.int8)
        return np.where(self.supported, dev, 0).astype(np.int8)

    def _loadable_limit(self, dev: np.ndarray):
        """realise()'s 16-loadables-per-core limit: (realised codes, their segments)."""
        pipeline = self.settings.mode == "pipeline"
        sa = self.segments(dev, pipeline)
        counts = [0, 0, 0]
        for d in sa.device:
            counts[d] += 1
        if counts[1] > MAX_LOADABLES_PER_CORE or counts[2] > MAX_LOADABLES_PER_CORE:
            drop = np.zeros(len(sa.device), dtype=bool)  # segments past a core's 16th: to the GPU
            seen = [0, 0, 0]
            for k, d in enumerate(sa.device):
                if d and counts[d] > MAX_LOADABLES_PER_CORE:
                    seen[d] += 1
                    if seen[d] > MAX_LOADABLES_PER_CORE:
                        drop[k] = True
            dev = np.where(drop[sa.seg_of], 0, dev).astype(np.int8)
            sa = self.segments(dev, pipeline)
        return dev, sa

    def segments(self, dev: np.ndarray, pipeline: bool):
        """The segments of a device-code vector (``pipeline``: one per engine of a pipeline),
        memoised with the model's producers: shared between callers, do not modify."""
        return self.producers.segments(dev, pipeline)

    def segment_times(self, dev: np.ndarray, sa) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(time, bytes, device code)`` per segment of a realised code vector and its segments
        (alone, before the per-engine cost): what the schedule runs. A model on top of the
        simulator (e.g. a search agent's corrections) overrides this."""
        return self.segment_parts(dev.astype(np.intp), sa)[1:]

    def segment_parts(self, codes: np.ndarray, sa) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(time per layer, then time, bytes and device code per segment)`` of realised codes
        (``intp``) and their segments: the uncorrected figures :meth:`segment_times` returns, with
        the layer times they were summed from."""
        table = self.table
        pick = sa.derived.get("costs")  # what the codes select depends on them alone: kept with their segments
        if pick is None:
            pick = sa.derived["costs"] = table.selection(codes)
        t, by, bms, bby = table.costs_of(pick)
        return (t, *segment_sums_of(sa.seg_of, np.array(sa.device, dtype=np.intp), table, t + bms, by + bby))

    def _figures(self, dev: np.ndarray, sa) -> tuple:
        """(stats, fps, power_w, energy_mj, period_ms, busy_ms) of a realised code vector."""
        table, s = self.table, self.settings
        pipeline = s.mode == "pipeline"
        seg_time, seg_bytes, seg_dev = self.segment_times(dev, sa)
        if pipeline:
            seg_time = seg_time + table.engine_ms
            demand = table.demands(seg_time, seg_bytes)
            latency, one_busy = run_one_frame(sa.device, seg_time.tolist(), demand.tolist(), sa.preds, self.sens3)
            k = s.frames_in_flight
            if k == 1:
                period = latency
                busy = {CODE_DEVICE[d]: v for d, v in one_busy}
            else:
                ss = steady_state(seg_dev, seg_time, demand, latency, k, self.sens3)
                period = ss.period_ms
                busy = {d: v for d, v in zip(CODE_DEVICE, ss.busy_ms) if v > 0}
        else:
            seg_time[0] += table.engine_ms
            latency = float(seg_time.sum())
            busy = {d: float(seg_time[seg_dev == c].sum()) for c, d in enumerate(CODE_DEVICE) if (seg_dev == c).any()}
            period = latency
        key = hashlib.sha1(self._hash_prefix + dev.tobytes().translate(_KEY_CHARS)).hexdigest() if s.noise > 0 else ""
        _, stats, fps, p_w, energy, _, period = figures(s, self.platform, table, key, latency, None, busy, period)
        return stats, fps, p_w, energy, period, busy
