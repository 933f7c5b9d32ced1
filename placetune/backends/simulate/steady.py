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
side does not grow with ``P``, so the fixed point is unique; found by the Illinois method (bracketed regula falsi) to 1e-12
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

    w0, w1, w2 = w
    q0, q1, q2 = q
    s0, s1, s2 = sens
    scale = latency_ms / k / total_w if total_w > 0 else 0.0
    floor = latency_ms / k if total_w <= 0 else 0.0

    def stretch(p: float) -> list[float]:
        uq = [min(1.0, a / p) * b for a, b in zip(w, q)] if p > 0 else q
        tot = uq[0] + uq[1] + uq[2]
        return [1.0 + sens[d] * (tot - uq[d]) for d in range(3)]

    def g(p: float) -> float:
        """f(p) - p, with f the period the devices' stretched work allows at period p (scalar
        arithmetic: this runs a few times per evaluation of every searched placement)."""
        u0 = q0 if w0 >= p else w0 / p * q0
        u1 = q1 if w1 >= p else w1 / p * q1
        u2 = q2 if w2 >= p else w2 / p * q2
        tot = u0 + u1 + u2
        a = w0 * (1.0 + s0 * (tot - u0))
        b = w1 * (1.0 + s1 * (tot - u1))
        c = w2 * (1.0 + s2 * (tot - u2))
        m = a if a > b else b
        m = m if m > c else c
        t = (a + b + c) * scale + floor
        return (m if m > t else t) - p

    lo = max(max(w), latency_ms / k)
    if lo <= 0:
        return SteadyState(0.0, 0.0, (0.0, 0.0, 0.0))
    g_lo = g(lo)
    hi = lo + g_lo
    if hi > lo:  # f(lo) >= lo and f does not grow: the fixed point of f lies in [lo, f(lo)]
        # Illinois (regula falsi with the stale end's value halved) on g = f - p, which falls
        # from g(lo) >= 0 to g(hi) <= 0: the same fixed point as bisection in a few evaluations
        g_hi = g(hi)
        side = 0
        for _ in range(_ITERATIONS):
            if g_hi >= 0:
                lo = hi
                break
            mid = hi - g_hi * (hi - lo) / (g_hi - g_lo)
            if not lo < mid < hi:
                mid = 0.5 * (lo + hi)
            g_mid = g(mid)
            if g_mid > 0:
                lo, g_lo = mid, g_mid
                if side == -1:
                    g_hi *= 0.5
                side = -1
            else:
                hi, g_hi = mid, g_mid
                if side == 1:
                    g_lo *= 0.5
                side = 1
            if hi - lo <= 1e-12 * hi or g_mid == 0:
                if g_mid == 0:
                    hi = mid
                break
    period = hi
    s = stretch(period)
    return SteadyState(period, k * period, (w[0] * s[0], w[1] * s[1], w[2] * s[2]))
