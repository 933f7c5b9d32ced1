"""Timing noise of the simulated Jetson: per-build tactic variance and per-sample jitter with a tail.

With ``settings.noise = s > 0`` (``--noise s``; 0 turns all of it off and every sample equals
the model's value):

* **per-build factor** ``B = exp(N(0, s))``, drawn once per build from
  ``(settings.seed, placement key, mode, build counter)``: TensorRT's tactic selection differs
  between builds of the same network (~1-3 % on Jetson), so measuring a placement twice gives
  two different, reproducible figures (``s = 0.02`` -> builds differ by ~2 % sd).
* **per-sample jitter**: each of the ``iterations`` samples is
  ``latency * B * exp(N(0, s/2) - s^2/8) * (1 + T)`` where ``T`` is 0 with probability
  1 - :data:`TAIL_PROB` and exponential with mean :data:`TAIL_MEAN` x ``s`` otherwise (OS /
  DVFS / memory-refresh hiccups): p50 < p90 < p99, with p99 well above the median.

Everything is seeded: the same settings, placement and build number give the same samples.
"""

from __future__ import annotations

import math
import zlib

import numpy as np

__all__ = ["TAIL_PROB", "TAIL_MEAN", "CORE_FRACTION", "build_factor", "samples"]

#: Fraction of samples that hit a slow tail event.
TAIL_PROB = 0.05
#: Mean size of a tail event, in units of ``noise`` (noise 0.02 -> a tail sample is ~+6 % slower).
TAIL_MEAN = 3.0
#: Sd of the per-sample jitter as a fraction of ``noise``.
CORE_FRACTION = 0.5


def _rng(*parts) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(":".join(map(str, parts)).encode()))


def build_factor(noise: float, seed: int, key: str, mode: str, build: int) -> float:
    """The per-build factor (1.0 when ``noise`` is 0) of build number ``build`` of a placement."""
    if noise <= 0:
        return 1.0
    return float(math.exp(_rng(seed, key, mode, "build", build).normal(0.0, noise)))


def samples(latency: float, noise: float, n: int, seed: int, key: str, mode: str,
            build: int = 0) -> tuple[list[float], dict[str, float]]:
    """``n`` latency samples of one build and their statistics (median, mean, min, max, p90, p99)."""
    if noise <= 0:
        v = float(latency)
        return [v] * n, {"median": v, "mean": v, "min": v, "max": v, "p90": v, "p99": v}
    rng = _rng(seed, key, mode, "samples", build)
    sd = CORE_FRACTION * noise
    core = np.exp(rng.normal(-sd * sd / 2.0, sd, size=n))
    tail = np.where(rng.random(n) < TAIL_PROB, rng.exponential(TAIL_MEAN * noise, size=n), 0.0)
    a = latency * build_factor(noise, seed, key, mode, build) * core * (1.0 + tail)
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return a.tolist(), {"median": float(p50), "mean": float(a.mean()), "min": float(a.min()),
                        "max": float(a.max()), "p90": float(p90), "p99": float(p99)}
