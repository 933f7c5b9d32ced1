"""Measurement: what a backend reports for one placement."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

__all__ = ["Measurement", "STATUSES", "FAILURE_STATUSES", "latency_stats", "non_finite"]

#: Every status a measurement can have.
STATUSES = ("ok", "infeasible", "build_failed", "runtime_failed", "timeout", "crashed")
#: Statuses that mean "no timing": the placement is stored as known-bad.
FAILURE_STATUSES = STATUSES[1:]


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
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown measurement status {self.status!r}; one of {STATUSES}")
        if self.latency_samples_ms and not self.latency_ms:
            self.latency_ms = latency_stats(self.latency_samples_ms)
        if self.status == "ok":
            bad = non_finite(self)
            if bad:  # NaN or infinite figures are not a measurement: never stored or ranked as ok
                self.status = "runtime_failed"
                self.reason = f"the backend reported a non-finite {bad}: not a measurement"
                self.latency_samples_ms, self.latency_ms = [], {}
                self.throughput_fps = self.energy_mj = self.power_w = None

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
    def median_ms(self) -> float | None:
        """Median latency in ms (None when not ok)."""
        return self.latency_ms.get("median") if self.ok else None

    def objective(self, name: str) -> float | None:
        """Value of objective ``latency`` (ms), ``throughput`` (fps), ``energy`` (mJ) or ``gpu_time``
        (GPU busy ms per frame, from ``extra["busy_ms"]``; 0 when the GPU does nothing); None when failed."""
        if not self.ok:
            return None
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
