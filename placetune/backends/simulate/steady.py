"""Steady state of a pipeline with K frames in flight, computed directly (no per-frame events).

In ``pipeline`` mode every segment is an engine bound to one device; a device runs one engine
at a time, and a new frame enters when one of the K frames in flight leaves. Once the pipeline
is full it completes one frame every *period* ``P``, bounded by

* the busiest device: ``W_d * s_d(P)`` per frame, ``W_d`` the device's engine time per frame
  when alone and ``s_d`` its stretch from shared-DRAM contention, and
* the frame cycle: a frame takes the one-frame latency ``L`` stretched by the mean contention
  ``s(P)`` of the steady state, and K frames share that time: ``L * s(P) / K``.

Contention in the steady state: device ``e`` is busy a fraction ``u_e = min(1, W_e / P)`` of the
time, so a task on ``d`` runs at ``1 / s_d`` with ``s_d = 1 + sens_d * sum_{e != d} u_e * q_e``
(``q_e`` the time-weighted DRAM demand of ``e``'s engines; the same law as the event scheduler
of :mod:`placetune.backends.simulate.schedule`, with the overlap replaced by its steady-state
probability). ``P`` is the fixed point ``P = max(max_d W_d s_d(P), L s(P) / K)`` (the right
side does not grow with ``P``, so the fixed point is unique; found by bisection to 1e-12
relative). The frame latency with K in flight follows from Little's law: ``K * P``.

This is a model (ESTIMATE), cheap enough to be searched: O(segments) numpy work for any K.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["SteadyState", "steady_state"]

_ITERATIONS = 60


@dataclass(frozen=True)
class SteadyState:
    """The periodic steady state of a K-frame pipeline.

    Attributes:
        period_ms: time between completed frames.
        latency_ms: time a frame spends in the pipeline (Little's law: ``K * period_ms``).
        busy_ms: per device code (0 GPU, 1 DLA0, 2 DLA1), busy time per frame with contention.
    """

    period_ms: float
    latency_ms: float
    busy_ms: tuple[float, float, float]


def steady_state(seg_dev: np.ndarray, seg_time: np.ndarray, seg_demand: np.ndarray, latency_ms: float,
                 k: int, sensitivity: tuple[float, float, float]) -> SteadyState:
    """The steady state of ``k`` frames in flight through a segment DAG (see the module doc).

    Args:
        seg_dev: device code per segment (0 GPU, 1 DLA0, 2 DLA1).
        seg_time: engine time per segment when alone (ms).
        seg_demand: DRAM demand per segment (0..1).
        latency_ms: the one-frame latency (the event-scheduled makespan of one frame).
        k: frames in flight (>= 1).
        sensitivity: contention sensitivity per device code.
    """
    w3 = np.bincount(seg_dev, weights=seg_time, minlength=3)[:3]
    wq3 = np.bincount(seg_dev, weights=seg_time * seg_demand, minlength=3)[:3]
    w = w3.tolist()
    q = [b / a if a > 0 else 0.0 for a, b in zip(w, wq3.tolist())]
    sens = [float(x) for x in sensitivity]
    total_w = sum(w)
    k = max(1, int(k))

    def stretch(p: float) -> list[float]:
        uq = [min(1.0, a / p) * b for a, b in zip(w, q)] if p > 0 else q
        tot = uq[0] + uq[1] + uq[2]
        return [1.0 + sens[d] * (tot - uq[d]) for d in range(3)]

    def f(p: float) -> float:
        ws = [a * b for a, b in zip(w, stretch(p))]
        mean = (ws[0] + ws[1] + ws[2]) / total_w if total_w > 0 else 1.0
        return max(max(ws), latency_ms * mean / k)

    lo = max(max(w), latency_ms / k)
    if lo <= 0:
        return SteadyState(0.0, 0.0, (0.0, 0.0, 0.0))
    hi = f(lo)
    if hi > lo:  # f(lo) >= lo and f does not grow: the fixed point lies in [lo, f(lo)]
        for _ in range(_ITERATIONS):
            mid = 0.5 * (lo + hi)
            if f(mid) > mid:
                lo = mid
            else:
                hi = mid
            if hi - lo <= 1e-12 * hi:
                break
    period = hi
    s = stretch(period)
    return SteadyState(period, k * period, (w[0] * s[0], w[1] * s[1], w[2] * s[2]))
