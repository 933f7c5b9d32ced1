"""Measurement: what a backend reports for one placement."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypedDict

import numpy as np

from placetune.errors import UnknownNameError
from placetune.objective_registry import BUILTIN_OBJECTIVES, REGISTERED, registered_value

__all__ = ["Measurement", "Extra", "EXTRA_KEYS", "STATUSES", "FAILURE_STATUSES", "UNKNOWN_DEVICE", "check_extra",
           "latency_stats", "non_finite"]

#: Every status a measurement can have.
STATUSES = ("ok", "infeasible", "build_failed", "runtime_failed", "timeout", "crashed")
#: Statuses that mean "no timing": the placement is stored as known-bad.
FAILURE_STATUSES = STATUSES[1:]
#: The realised device of a layer whose placement could not be read (:attr:`Measurement.realized_partial`).
UNKNOWN_DEVICE = "unknown"


class Extra(TypedDict, total=False):
    """The details a backend or the evaluator adds to a measurement (``Measurement.extra``): every key
    placetune writes or reads, with its type. A key of a backend of its own starts with ``x_``;
    a key that starts with ``_`` is private to one process. Any other key is unknown: an error
    where :data:`STRICT_EXTRA` is on (the tests), and a type checker flags a misspelt key."""

    # ---- every backend
    notes: list[str]  # human notes (core remapping, loadable limit hits, what was assumed)
    timed: str  # what the latency samples time
    timed_input: str  # the input timed: "random-uniform" or the input data's content hash (placetune.inputdata)
    busy_ms: dict[str, float]  # device -> busy ms per frame (objective gpu_time)
    period_ms: float  # pipeline/replicas: ms between frames in steady state
    replicas: list[dict[str, Any]]  # replicas: one entry per instance (device, batch, fps...)
    window_ms: float  # replicas: the window all instances ran together
    latency_in_flight_ms: float  # pipeline: latency with frames_in_flight frames at once
    energy_per_sample_mj: float  # energy per sample (a batch counts batch samples)
    dla_ms: float  # per-layer profile: time on the DLA per inference
    gpu_ms: float  # per-layer profile: time on the GPU per inference
    engine_layer_times_ms: dict[str, float]  # TensorRT layer -> ms, as its profiler names it
    profile_iterations: int  # inferences of the per-layer profiling run
    realized_vs_predicted: dict[str, list[str]]  # layer -> [predicted, realised] where they differ
    failure_class: str  # what kind of failure (stored in its own column); "dla": the DLA compiler or runtime;
    # "dla_unsupported": a layer asked on the DLA that it cannot run, with GPU fallback off;
    # "clocks": taken under other clocks; "memory": TensorRT ran out of memory, or the kernel's OOM killer killed
    # the process (placetune/backends/oom.py)
    oom_kills: int  # a SIGKILLed measurement: the kernel's OOM kills meanwhile (oom_kill of /proc/vmstat)
    # ---- the realised placement's provenance (the Jetson backends: placetune/backends/tensorrt/placement_known.py)
    placement_known: bool  # False: the build log and the engine's layer information disagree, or neither was read
    placement_source: str  # which of the two sources the realised placement rests on
    placement_unknown: str  # why the placement is unknown
    dla_loadables_known: bool  # whether the DLA loadable count (and the 16-per-core check) could be read
    dla_candidates: list[int]  # TensorRT 10's "Number of DLA node candidates offloaded : N out of M"
    all_gpu_fallback: bool  # the log said every DLA layer fell back to the GPU
    placement_from_request: list[str]  # layers no source names: their realised device is the requested one
    placement_unchecked: str  # why the second source could not check the first (the placement rests on one)
    segment_placements: list[dict[str, Any]]  # pipeline: per segment, its realised placement known or not, and whence
    replica_placements: list[dict[str, Any]]  # replicas: per DLA replica, its realised placement as read, its layer information
    realized_partial: dict[str, str]  # pipeline, placement unknown: layer -> device read, "unknown" where not read
    # ---- the simulated Jetson
    boundaries: int  # GPU<->DLA boundaries of the realised placement
    boundary_ms: float  # their transfer time
    islands: int  # DLA islands (loadables)
    fused_layers: int  # layers fused into their producer
    serial_sum_ms: float  # pipeline: the segments' times one after the other
    build: Any  # simulated build: engines built and reused
    power_w_by_device: dict[str, float]  # simulated power per device
    sim_version: int  # version of the simulator's cost model
    device_time_s: dict[str, float]  # simulated device time of the evaluation (build_s, time_s...)
    # ---- the TensorRT and trtexec backends
    trt_version: str
    dla_core: int  # the DLA core of the engine (-1: none)
    worker_seconds: float  # the worker's wall time for the job
    helper_layers: dict[str, str]  # parser helper layers (no ONNX node) -> device
    parser_layers: dict[str, str]  # layers the ONNX parser made beyond the nodes -> GPU or DLA, as built
    dla_path: str  # how the network was made DLA-ready
    build_errors: list[str]
    build_warnings: list[str]
    build_log: list[str]
    engine_bytes: int
    plan_file: str  # the engine file written (save_plans)
    engine_digest: str  # engine mode: the timed engine's SHA-256 (16 hex digits): one digest, one engine
    traceback: str
    parser_errors: list[str]
    runtime_errors: list[str]
    nvtx_verbosity: str  # the NVTX markers the engines were timed with (every mode; trtexec's LAYER_NAMES_ONLY)
    cut_reformats: list[Any]  # pipeline: GPU reformats a DLA engine still runs at a cut given a native format
    io_memory: str  # "managed" (engine and replicas modes on an integrated GPU, as trtexec without copies) or "device"
    runtime_warnings: list[str]  # what TensorRT warned of while deserialising and running the engines (every mode)
    subgraph_limit: Any  # what the build log says of the DLA subgraph limit
    dla_subgraphs: list[Any]
    unmapped_log_names: list[str]  # build-log layer names matched to no ONNX node
    engine_inspector: str  # the engine inspector's JSON (cut)
    inspector_error: str  # why the worker's engine inspector gave no layer information (its exception)
    warmup_iterations: int
    warmup_frames: int
    int8_ranges: str  # calibration-cache or placeholder
    gpu_load_not_watched: str  # why this Jetson's GPU load was not read: another process's GPU work unseen
    int8_ranges_moved: dict  # {tensor: [the ONNX reading, trtexec's walk over TensorRT's layers]}: set as the latter
    stderr_tail: str
    returncode: int
    signal: str
    engine_cache: dict[str, Any]  # pipeline/replicas, engine mode with save_plans: engine cache hits and misses
    engines: list[dict[str, Any]]  # pipeline: one row per engine
    cut_formats: dict[str, Any]  # pipeline: the cut tensors' types and formats
    cut_formats_failed: str  # why the native cut formats did not build
    gate: dict[str, Any]  # pipeline: the correctness gate's verdict
    gate_unverified: str  # pipeline: why a gate that passed checked nothing (outputs that ignore the input)
    slots: Any  # pipeline: frames in flight the worker ran
    frames_in_flight: int  # pipeline: frames in flight asked for
    segments: int  # pipeline: engines chained
    # ---- trtexec
    commands: dict[str, list[str]]  # the build and time command lines
    trtexec_errors: list[str]
    trtexec_output_tail: list[str]
    unkillable: bool  # a killed trtexec still alive after its grace (blocked in the kernel), left behind
    time_log: list[str]
    summary: dict[str, Any]  # trtexec's performance summary
    timed_iterations: int | None
    engine_layers: int
    power: dict[str, Any]  # the power rails' reading (or why none)
    # ---- the Jetson backends' clocks (placetune/backends/clocks.py)
    clocks: dict[str, Any]  # {"before", "after": snapshots around its timed part, "span": "timing"|"measurement"}
    clocks_untrusted: str  # why the clocks were not the run's: the measurement is not kept as a figure
    gpu_contended: str  # why another process's GPU work likely ran during it (placetune/backends/busy.py): not kept
    overlap_s: float  # replicas: how long all instances ran together
    # ---- the evaluator
    cache_hit: bool  # answered from the store
    requested_key: str  # the key of the placement asked for
    annotation: dict[str, Any]  # an agent's note for the callbacks (never stored)
    network_latency_ms: dict[str, float]  # concurrent networks: latency per network
    builds: list[dict[str, Any]]  # re-measurements: one entry per build
    remeasured: int  # builds of this re-measurement
    _id: int  # the measurement's id in the store (this process only)


#: Every known key of ``Measurement.extra``.
EXTRA_KEYS = frozenset(Extra.__annotations__)
#: Unknown keys of ``Measurement.extra`` raise (the test suite turns it on: PLACETUNE_STRICT_EXTRA=1).
STRICT_EXTRA = os.environ.get("PLACETUNE_STRICT_EXTRA", "") not in ("", "0")


def check_extra(extra: Mapping[str, object] | None) -> None:
    """Raise ValueError for a key of ``extra`` that :class:`Extra` does not know (where
    :data:`STRICT_EXTRA` is on; ``x_`` and ``_`` keys are a backend's and a process's own)."""
    if not STRICT_EXTRA or not extra:
        return
    unknown = [k for k in extra if k not in EXTRA_KEYS and not str(k).startswith(("x_", "_"))]
    if unknown:
        raise ValueError(f"unknown Measurement.extra key(s) {', '.join(map(repr, sorted(unknown)))}: "
                         "add them to placetune.measurement.Extra, or start a backend's own key with x_")


def latency_stats(samples_ms: list[float] | np.ndarray) -> dict[str, float]:
    """``{"median", "mean", "min", "max", "p90", "p99"}`` of latency samples in ms."""
    a = np.asarray(samples_ms, dtype=float)
    if a.size == 0:
        return {}
    return {
        "median": float(np.median(a)),
        "mean": float(a.mean()),
        "min": float(a.min()),
        "max": float(a.max()),
        "p90": float(np.percentile(a, 90)),
        "p99": float(np.percentile(a, 99)),
    }


@dataclass
class Measurement:
    """The result of measuring (or failing to measure) one placement.

    Attributes:
        status: one of :data:`STATUSES`.
        reason: why it is not ``ok`` (None when ok).
        latency_samples_ms: per-inference latencies (ms); a batch counts as one inference.
        latency_ms: a dict of statistics of the samples in ms (``median``, ``mean``, ``min``, ``max``,
            ``p90``, ``p99``); :attr:`median_ms` is the median as a float.
        throughput_fps: samples per second (batch x inferences per second).
        requested: layer -> device that was asked for.
        realized: layer -> device that ran (after fallback and the 16-loadable limit); None when
            unknown (:attr:`placement_known`).
        dla_loadables: DLA loadables (islands) per DLA core that was used.
        fallback: layer -> reason for every layer that was asked on a DLA but ran on the GPU.
        segment_times_ms: per segment: index, device, layer count, time (ms).
        layer_times_ms: per layer time (ms) where known.
        energy_mj: energy per inference (a batch) in millijoules, where known.
        power_w: mean power during the measurement (W), where known.
        build_seconds: time spent building engines (the simulator reports a simulated figure:
            :mod:`placetune.backends.simulate.build_time`).
        timeline: events ``{"device", "name", "start_ms", "end_ms", "frame"}`` for drawing.
        simulated: True when the figures come from the simulated Jetson, not hardware.
        backend: backend name and version (``simulate-1``, ``tensorrt-10.3``...).
        mode: ``engine``, ``pipeline`` or ``replicas``.
        precision: ``fp16`` or ``int8``.
        batch: batch size per inference.
        extra: backend specific details.
    """

    status: str
    reason: str | None = None
    latency_samples_ms: list[float] = field(default_factory=list)
    latency_ms: dict[str, float] = field(default_factory=dict)
    throughput_fps: float | None = None
    requested: dict[str, str] | None = None
    realized: dict[str, str] | None = None
    dla_loadables: dict[str, int] = field(default_factory=dict)
    fallback: dict[str, str] = field(default_factory=dict)
    segment_times_ms: list[dict[str, Any]] = field(default_factory=list)
    layer_times_ms: dict[str, float] = field(default_factory=dict)
    energy_mj: float | None = None
    power_w: float | None = None
    build_seconds: float = 0.0
    timeline: list[dict[str, Any]] = field(default_factory=list)
    simulated: bool = False
    backend: str = ""
    mode: str = "engine"
    precision: str = "fp16"
    batch: int = 1
    extra: Extra = field(default_factory=lambda: Extra())

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown measurement status {self.status!r}; one of {STATUSES}")
        check_extra(self.extra)
        if self.latency_samples_ms and not self.latency_ms:
            self.latency_ms = latency_stats(self.latency_samples_ms)
        if self.status == "ok":
            bad = non_finite(self)
            if bad:  # NaN or infinite figures are not a measurement: never stored or ranked as ok
                self.status = "runtime_failed"
                self.reason = f"the backend reported a non-finite {bad}: not a measurement"
                self.latency_samples_ms, self.latency_ms = [], {}
                self.throughput_fps = self.energy_mj = self.power_w = None

    def __repr__(self) -> str:
        """One short line: the status, the figures and where the layers ran (the whole record, samples and
        per-layer times included, is :meth:`to_dict`)."""
        parts = [f"status={self.status!r}"]
        if self.reason:
            parts.append(f"reason={self.reason[:200]!r}")
        for name, value in (("median_ms", self.latency_ms.get("median")), ("throughput_fps", self.throughput_fps),
                            ("energy_mj", self.energy_mj)):
            if value is not None:
                parts.append(f"{name}={value:.4g}")
        if self.realized:
            counts: dict[str, int] = {}
            for device in self.realized.values():
                counts[device] = counts.get(device, 0) + 1
            parts.append("realized={" + ", ".join(f"{d}: {n}" for d, n in sorted(counts.items())) + "}")
        parts += [f"simulated={self.simulated}", f"backend={self.backend!r}", f"mode={self.mode!r}",
                  f"precision={self.precision!r}", f"batch={self.batch}"]
        return f"Measurement({', '.join(parts)})"

    @property
    def ok(self) -> bool:
        """True when the placement was built and timed."""
        return self.status == "ok"

    @property
    def placement_known(self) -> bool:
        """False when the backend could not tell where TensorRT placed the layers (``extra["placement_known"]``:
        the build log and the engine's layer information disagree, or neither says; ``realized`` is then
        None and ``extra["placement_unknown"]`` says why). True where the backend did not say otherwise."""
        return (self.extra or {}).get("placement_known", True) is not False

    @property
    def realized_partial(self) -> dict[str, str] | None:
        """Layer -> the device TensorRT ran it on, :data:`UNKNOWN_DEVICE` for a layer whose device could not
        be read: :attr:`realized` when the whole placement is known; of a pipeline some of whose segments
        could not be read, the others' layers as read (``extra["realized_partial"]``); None when nothing
        was read. Never the request filled in for an unread layer."""
        if self.realized is not None and self.placement_known:
            return dict(self.realized)
        partial = (self.extra or {}).get("realized_partial")
        return dict(partial) if isinstance(partial, dict) else None

    @property
    def segments_read(self) -> tuple[int, int] | None:
        """(segments whose placement was read, segments) of a pipeline whose placement is known for some
        segments only (``extra["segment_placements"]``); None when wholly known or wholly unknown."""
        extra = self.extra or {}
        segs = extra.get("segment_placements")
        if self.placement_known or not isinstance(segs, list) or not isinstance(extra.get("realized_partial"), dict):
            return None
        return sum(1 for s in segs if isinstance(s, dict) and s.get("known")), len(segs)

    def unread_line(self) -> str:
        """``2 layer(s) whose realised device was not read (a, b; 3 of 4 segments read)``: the unread
        layers of a placement known for some segments only (:attr:`segments_read`)."""
        read, of = self.segments_read or (0, 0)
        unread = self.unknown_layers
        return (f"{len(unread)} layer(s) whose realised device was not read ({', '.join(unread[:8])}"
                f"{', ...' if len(unread) > 8 else ''}; {read} of {of} segments read)")

    @property
    def unknown_layers(self) -> list[str]:
        """The layers whose realised device is unknown: every layer asked for when no segment was read,
        only those of the unread segments when some were (:attr:`realized_partial`), none when known."""
        if self.placement_known:
            return []
        partial = self.realized_partial
        if partial is None:
            return list(self.requested or {})
        return [n for n, d in partial.items() if d == UNKNOWN_DEVICE]

    @property
    def median_ms(self) -> float | None:
        """Median latency in ms (None when not ok)."""
        return self.latency_ms.get("median") if self.ok else None

    def objective(self, name: str) -> float | None:
        """Value of objective ``latency`` (ms), ``throughput`` (fps), ``energy`` (mJ) or ``gpu_time``
        (GPU busy ms per frame, from ``extra["busy_ms"]``; 0 when the GPU does nothing), or of one added
        with :func:`~placetune.tuning.objectives.register_objective`; None when failed or without it.

        Raises:
            UnknownNameError: ``name`` is none of these (a misspelt name's None read as a failed measurement).
        """
        registered = REGISTERED.get(name) if isinstance(name, str) else None
        if registered is None and name not in BUILTIN_OBJECTIVES:
            raise UnknownNameError(f"objective {str(name)[:40]!r}: a measurement's objectives are "
                                   f"{', '.join((*BUILTIN_OBJECTIVES, *REGISTERED))}")
        if not self.ok:
            return None
        if registered is not None:
            return registered_value(registered, self, name)
        if name == "gpu_time":
            busy = (self.extra or {}).get("busy_ms")
            return None if not isinstance(busy, dict) else float(busy.get("GPU") or 0.0)
        value = {
            "latency": self.latency_ms.get("median"),
            "throughput": self.throughput_fps,
            "energy": self.energy_mj,
        }.get(name)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return None
        return float(value)

    @classmethod
    def failure(cls, status: str, reason: str, **kw: Any) -> "Measurement":
        """A measurement that did not produce timings."""
        return cls(status=status, reason=reason, **kw)

    def not_kept(self, failure_class: str, label: str, why: str) -> "Measurement":
        """This measurement, taken under conditions that make its figures untrustworthy (moved clocks,
        another process on the GPU), as a ``runtime_failed`` one of ``failure_class`` whose reason says
        ``label: why`` and what its median was: never ranked, exported or kept as a figure. One that
        already failed keeps its own status, with the note."""
        if not self.ok:
            self.extra.setdefault("notes", []).append(f"{label}: {why}")
            return self
        median = self.latency_ms.get("median")
        extra = dict(self.extra)
        extra["failure_class"] = failure_class
        return Measurement.failure(
            "runtime_failed", f"{label}: {why}; its figures (median {median!r} ms) are not kept",
            requested=self.requested, realized=self.realized, dla_loadables=self.dla_loadables,
            fallback=self.fallback, build_seconds=self.build_seconds, simulated=self.simulated,
            backend=self.backend, mode=self.mode, precision=self.precision, batch=self.batch, extra=extra)

    def to_dict(self, *, timeline: bool = True) -> dict[str, Any]:
        """JSON-ready dict (``timeline=False`` leaves out the event list)."""
        # Shallow copies: dataclasses.asdict deep-copies every nested dict and list and costs
        # several times a whole simulated measurement on a 176-layer model.
        d: dict[str, Any] = {}
        for name in _FIELDS:
            if name == "timeline" and not timeline:
                continue
            v = getattr(self, name)
            if isinstance(v, dict):
                v = dict(v)
            elif isinstance(v, list):
                v = [dict(x) if isinstance(x, dict) else x for x in v]
            d[name] = v
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Measurement":
        """Inverse of :meth:`to_dict` (unknown keys go to ``extra``)."""
        known = {f for f in cls.__dataclass_fields__}
        kw = {k: v for k, v in d.items() if k in known}
        extra = {k: v for k, v in d.items() if k not in known}
        if extra:
            kw["extra"] = {**kw.get("extra", {}), **extra}
        return cls(**kw)


_FIELDS = tuple(f.name for f in fields(Measurement))


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


def non_finite(m: Measurement) -> str | None:
    """The first figure of an ``ok`` measurement that is not a finite number >= 0 (None when all are)."""
    for key, v in (m.latency_ms or {}).items():
        if not _finite(v):
            return f"latency {key} ({v!r} ms)"
    if not all(_finite(v) for v in m.latency_samples_ms or ()):
        return "latency sample"
    for name in ("throughput_fps", "energy_mj", "power_w"):
        v = getattr(m, name)
        if v is not None and not _finite(v):
            return f"{name} ({v!r})"
    return None
