"""What the physical model misses: residuals learned from the run's measurements, on features of
the realised placement's structure.

The guided agent's physical model is the simulator with a fitted device profile: multiplicative
scales of its own terms. A real Jetson also differs in ways no such scale expresses: a DLA
segment that slows down past some length, a per-loadable cost that only short segments feel, a
GPU kernel that loses its tactic or its fusion right after a cut, reformats whose cost depends on
the direction and the channel alignment, contention that saturates or is not symmetric. This
module learns such effects where they show, at two levels:

* **segments**: each measured engine's time alone (``segment_times_ms``) against the physical
  prediction, ``log(measured / predicted)``, regressed on features of the segment (device kind,
  length and length hinges, a fixed cost, incoming boundaries, misaligned ones, the share of
  convolutions fed across a cut): :data:`SEGMENT_FEATURES`;
* **plans**: the measured objective against the prediction with corrected segments, regressed on
  the devices' overlap (contention), that overlap weighted by the side that is the bottleneck
  (contention that is not symmetric: a GPU slowed by the DLAs' traffic far more than they are by
  its) and the number of engines: :data:`PLAN_FEATURES`.

Both are Bayesian linear regressions (:class:`Ridge`) with a prior centred on "the physics is
right" (zero residual), so a device the physics describes keeps its prediction, and draws from
the posterior give the spread of a prediction. :class:`CorrectedSimulator` applies a
:class:`Correction` inside the incremental simulator (segment times before the schedule, the
plan factor after it), so the inner search and every prediction see it.

Nothing here measures anything: every figure is a prediction.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from placetune.backends.simulate.costs import DEVICE_CODE, graph_info
from placetune.backends.simulate.incremental import IncrementalSimulator
from placetune.memo import IdentityMemo

if TYPE_CHECKING:
    from placetune.measurement import Measurement
    from placetune.model.model import Model

__all__ = ["SEGMENT_FEATURES", "PLAN_FEATURES", "Ridge", "Correction", "CorrectedSimulator", "fit_correction",
           "time_like", "evaluation_time_like"]

log = logging.getLogger(__name__)

#: per device kind (GPU, then DLA): the features of a segment and the prior sd of their weights
SEGMENT_FEATURES = (
    ("scale", 0.15),  # a factor the profile fit left over
    ("log_length", 0.15),  # log(layers / 10): a smooth length effect
    ("long16", 0.3),  # max(0, layers - 16) / 16: a slowdown past a length
    ("long32", 0.3),  # max(0, layers - 32) / 32
    ("fixed", 1.0),  # 0.1 ms / predicted ms: a fixed cost per segment (e.g. a launch)
    ("boundaries", 1.0),  # 0.02 ms x incoming boundary tensors / predicted ms
    ("misaligned", 1.0),  # the same, for tensors whose channels are not a multiple of 32
    ("fed_conv", 1.0),  # share of the segment's time in convolutions fed across a cut
)
#: the features of a plan (objective-level residual after the segment correction) and their prior sd
PLAN_FEATURES = (
    ("scale", 0.1),
    ("gpu_dla_overlap", 0.4),  # u_GPU x (u_DLA0 + u_DLA1): contention the schedule misjudges
    ("dla_dla_overlap", 0.4),  # u_DLA0 x u_DLA1
    ("engines", 0.1),  # engines / 10
    # the same overlap weighted by which side is the bottleneck: contention is not symmetric (a GPU
    # can wait on the DLAs' DRAM traffic far more than they wait on its), and which device's stretch
    # sets the period depends on the plan
    ("gpu_bound_overlap", 0.4),  # u_GPU^2 x (u_DLA0 + u_DLA1): large when the GPU is the bottleneck
    ("dla_bound_overlap", 0.4),  # u_GPU x (u_DLA0^2 + u_DLA1^2): large when a DLA is
)
_ALIGN = 32
_CODES_KEPT = 4096  # realised placements whose codes a structure keeps
_PARTS_KEPT = 2048  # segmentations whose uncorrected parts a corrected simulator keeps
_MS_FIXED, _MS_BOUNDARY = 0.1, 0.02


class Ridge:
    """Bayesian linear regression with a zero-mean Gaussian prior (sd ``prior`` per weight) and a
    noise level estimated from the fit (at least ``min_noise``).

    Attributes:
        mean: posterior mean of the weights.
        cov: posterior covariance.
        noise: residual noise sd.
        n: observations fitted.
    """

    def __init__(self, prior: Sequence[float], min_noise: float = 0.02) -> None:
        self.prior = np.asarray(prior, dtype=float)
        self.min_noise = float(min_noise)
        self.mean = np.zeros(len(self.prior))
        self.cov = np.diag(self.prior ** 2)
        self.noise = self.min_noise
        self.n = 0

    def fit(self, X: np.ndarray, y: np.ndarray) -> "Ridge":
        """Posterior given rows ``X`` and targets ``y`` (empty: the prior)."""
        X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
        self.n = len(y)
        if not self.n:
            return self
        P = np.diag(1.0 / self.prior ** 2)
        noise = max(self.min_noise, 0.05)
        for _ in range(4):  # noise level and weights together (a few fixed-point steps)
            A = X.T @ X / noise ** 2 + P
            cov = np.linalg.inv(A)
            mean = cov @ X.T @ y / noise ** 2
            r = y - X @ mean
            dof = max(1.0, self.n - float(np.einsum("ij,ij->", X @ cov, X)) / noise ** 2)  # trace(X cov X')
            noise = max(self.min_noise, math.sqrt(float(r @ r) / dof))
        self.mean, self.cov, self.noise = mean, cov, noise
        return self

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        """A draw of the weights from the posterior."""
        return rng.multivariate_normal(self.mean, self.cov, method="cholesky")


@dataclass
class Correction:
    """Weights of the segment and plan residuals (time-like: > 0 means slower than the physics)."""

    segment: np.ndarray
    plan: np.ndarray

    @classmethod
    def none(cls) -> "Correction":
        return cls(np.zeros(2 * len(SEGMENT_FEATURES)), np.zeros(len(PLAN_FEATURES)))


class _Structure:
    """Per-model arrays for the features: graph edges, the channels of their tensors, convolutions."""

    def __init__(self, model: "Model") -> None:
        g = graph_info(model)
        self.g = g
        self.model = model
        out_shape: dict[str, tuple] = {}
        for layer in model.layers:
            for t in layer.outputs:
                out_shape[t.name] = tuple(t.shape)
        chans = []
        for layer in model.layers:  # the edges in the simulator's order (GraphInfo)
            seen: set[str] = set()
            for t in layer.inputs:
                if t.const or t.name not in out_shape or t.name in seen:
                    continue
                seen.add(t.name)
                shape = out_shape[t.name]
                chans.append(int(shape[1]) if len(shape) > 1 else 1)
        ok = len(chans) == g.edge_p.size
        self.misaligned = (np.array(chans) % _ALIGN != 0) if ok else np.zeros(g.edge_p.size, bool)
        self.heavy = np.array([c in ("conv", "matmul") for c in g.cls])
        self._codes: IdentityMemo[np.ndarray] = IdentityMemo(_CODES_KEPT)

    def codes(self, realized: dict[str, str]) -> np.ndarray:
        """The device codes of a measurement's realised placement (read once per placement
        dict: a search refits on the same measurements every round). Do not modify."""
        hit = self._codes.get(realized)
        return hit if hit is not None else self._codes.put(realized, _codes(self.model, realized))


_STRUCTURES: dict[str, _Structure] = {}


def _structure(model: "Model") -> _Structure:
    s = _STRUCTURES.get(model.hash)
    if s is None:
        s = _STRUCTURES[model.hash] = _Structure(model)
    return s


def _shape(st: _Structure, codes: np.ndarray, sa: Any) -> tuple:
    """The features of a segmentation that do not depend on times: ``(columns of the fixed
    features, incoming boundaries, misaligned ones, fed convolutions mask, DLA mask)``, kept
    with the (shared, memoised) segmentation."""
    hit = sa.derived.get("residual")
    if hit is not None:
        return hit
    g, seg_of = st.g, sa.seg_of
    k = len(sa)
    n = np.bincount(seg_of, minlength=k).astype(float)
    if g.edge_p.size:
        cross = codes[g.edge_p] != codes[g.edge_c]
        dst = seg_of[g.edge_c[cross]]
        nb = np.bincount(dst, minlength=k).astype(float)
        nmis = np.bincount(dst, weights=st.misaligned[cross].astype(float), minlength=k)
        fed = np.zeros(g.n, bool)
        fed[g.edge_c[cross]] = True
        fed &= st.heavy
    else:
        nb = nmis = np.zeros(k)
        fed = None
    fixed = np.column_stack([np.ones(k), np.log(np.maximum(n, 1.0) / 10.0), np.maximum(0.0, n - 16.0) / 16.0,
                             np.maximum(0.0, n - 32.0) / 32.0])
    dla = (np.asarray(sa.device) > 0)[:, None]
    out = sa.derived["residual"] = (fixed, nb, nmis, fed, dla)
    return out


def segment_rows(st: _Structure, codes: np.ndarray, sa: Any, t: np.ndarray, seg_time: np.ndarray) -> np.ndarray:
    """The feature rows of a placement's segments (``sa``, of device codes ``codes``, with layer
    times ``t`` and segment times ``seg_time``): ``(segments, 2 x features)``, GPU block then DLA block."""
    fixed, nb, nmis, fed, dla = _shape(st, codes, sa)
    k = len(sa)
    tt = np.maximum(seg_time, 1e-4)
    fed_ms = np.bincount(sa.seg_of, weights=np.where(fed, t, 0.0), minlength=k) if fed is not None else np.zeros(k)
    m = fixed.shape[1]
    X = np.zeros((k, 2 * (m + 4)))
    f = X[:, :m + 4]  # the GPU block; the DLA segments' rows move to the DLA block below
    f[:, :m] = fixed
    f[:, m] = _MS_FIXED / tt
    f[:, m + 1] = _MS_BOUNDARY * nb / tt
    f[:, m + 2] = _MS_BOUNDARY * nmis / tt
    f[:, m + 3] = np.minimum(1.0, fed_ms / tt)
    on = dla[:, 0]
    if on.any():
        X[on, m + 4:] = f[on]
        f[on] = 0.0
    return X


def plan_row(period: float, busy: dict[str, float], engines: int) -> np.ndarray:
    """The feature row of a plan from its predicted period and busy time per device."""
    p = max(period, 1e-9)
    u = {d: min(1.0, float(busy.get(d, 0.0)) / p) for d in ("GPU", "DLA0", "DLA1")}
    g, d0, d1 = u["GPU"], u["DLA0"], u["DLA1"]
    return np.array([1.0, g * (d0 + d1), d0 * d1, engines / 10.0, g * g * (d0 + d1), g * (d0 * d0 + d1 * d1)])


class CorrectedSimulator(IncrementalSimulator):
    """The incremental simulator with a :class:`Correction`: each segment's time times
    ``exp(segment features . w)`` before the schedule, the plan's period, latency and energy times
    ``exp(plan features . w)`` after it (its throughput divided by it)."""

    def __init__(self, *args: Any, correction: Correction | None = None, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._correction = correction or Correction.none()
        self.structure = _structure(self.model)
        self._parts: IdentityMemo[tuple] = IdentityMemo(_PARTS_KEPT)

    def parts(self, codes: np.ndarray, sa: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(time per layer, then time, bytes, device code and feature row per segment)`` of
        realised codes (``intp``) and their segments, uncorrected; kept for the last
        :data:`_PARTS_KEPT` segmentations (they do not depend on the correction: a fit evaluates
        the plans it read again with each correction it tries)."""
        hit = self._parts.get(sa)
        if hit is not None:
            return hit
        t, seg_time, seg_bytes, seg_dev = self.segment_parts(codes, sa)
        rows = segment_rows(self.structure, codes, sa, t, seg_time)
        return self._parts.put(sa, (t, seg_time, seg_bytes, seg_dev, rows))

    @property
    def correction(self) -> Correction:
        """The correction applied (setting it forgets the memoised figures)."""
        return self._correction

    @correction.setter
    def correction(self, value: Correction) -> None:
        self._correction = value
        self._memo.clear()

    def segment_times(self, dev: np.ndarray, sa) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        w = self.correction.segment
        if not w.any():
            return self.segment_parts(dev.astype(np.intp), sa)[1:]
        _, seg_time, seg_bytes, seg_dev, X = self.parts(dev.astype(np.intp), sa)
        return seg_time * np.exp(np.clip(X @ w, -2.0, 2.0)), seg_bytes, seg_dev

    def _figures(self, dev: np.ndarray, sa) -> tuple:
        stats, fps, p_w, energy, period, busy = super()._figures(dev, sa)
        w = self.correction.plan
        if not w.any():
            return stats, fps, p_w, energy, period, busy
        f = math.exp(max(-2.0, min(2.0, float(plan_row(period, busy, len(sa)) @ w))))
        return ({k: v * f for k, v in stats.items()}, fps / f, p_w, energy * f, period * f, busy)


def _codes(model: "Model", realized: dict[str, str]) -> np.ndarray:
    return np.fromiter((DEVICE_CODE[realized[n]] for n in model.names), dtype=np.int8, count=len(model.names))


def time_like(objective: Any, m: Any) -> float | None:
    """A measurement's objective as a time (larger is worse): the period for throughput, else the value;
    None when the objective has no positive finite value."""
    v = objective.value(m)
    if v is None or not v > 0 or not math.isfinite(v):
        return None
    return 1.0 / v if objective.direction == "maximize" else v


def evaluation_time_like(objective: Any, e: Any) -> float | None:
    """:func:`time_like` of a simulator's (incremental) Evaluation ``e``: what the model predicts."""
    return time_like(objective, _Eval(e))


def fit_correction(sim: CorrectedSimulator, objective: Any, measurements: Sequence["Measurement"], *,
                   ensemble: int = 0, seed: int | None = None) -> tuple[Correction, list[Correction], dict]:
    """Fit the segment and plan residuals of ``measurements`` against ``sim``'s physical model.

    Args:
        sim: the physical model (its correction is ignored and left as it was).
        objective: the run's objective (its primary component's value is the plan target).
        measurements: the run's ok measurements.
        ensemble: posterior draws returned for the spread of predictions.
        seed: seed of the draws.

    Returns:
        ``(posterior mean, draws, summary)``; the summary has the rows, the noise levels and the
        in-sample error of the plan predictions.
    """
    model = sim.model
    st = sim.structure
    pipeline = sim.settings.mode == "pipeline"
    engine_ms = sim.table.engine_ms
    saved = sim.correction
    sim.correction = Correction.none()
    Xs, ys, plans = [], [], []
    try:
        for m in measurements:
            if not m.ok or not m.realized or set(m.realized) != set(model.names):
                continue
            codes = st.codes(m.realized)
            sa = sim.segments(codes, pipeline)
            ci = codes.astype(np.intp)
            t, seg_time, _, seg_dev, rows = sim.parts(ci, sa)  # uncorrected
            measured = {int(s.get("index", j)): s for j, s in enumerate(m.segment_times_ms or [])}
            counts = np.bincount(sa.seg_of, minlength=len(sa))
            for j in range(len(sa)):
                e = measured.get(j)
                if e is None or e.get("device") != ("GPU", "DLA0", "DLA1")[sa.device[j]] \
                        or int(e.get("layers", -1)) != int(counts[j]):
                    continue
                ms = e.get("alone_ms") or e.get("time_ms")
                if not ms or not ms > 0 or not seg_time[j] > 0:
                    continue
                own = float(ms) - (engine_ms if pipeline or j == 0 else 0.0)
                ys.append(math.log(max(own, 0.2 * seg_time[j]) / seg_time[j]))
                Xs.append(rows[j])
            plans.append((codes, m))
        seg = Ridge([p for _, p in SEGMENT_FEATURES] * 2).fit(np.array(Xs).reshape(-1, 2 * len(SEGMENT_FEATURES)),
                                                              np.array(ys))
        sim.correction = Correction(seg.mean, np.zeros(len(PLAN_FEATURES)))
        Xp, yp = [], []
        for codes, m in plans:
            e = sim.evaluate(codes)
            pred, got = evaluation_time_like(objective, e), time_like(objective, m)
            if pred is None or got is None:
                continue
            Xp.append(plan_row(e.period_ms or 0.0, e.busy_ms or {}, len(sim.segments(e.realized, pipeline))))
            yp.append(math.log(got / pred))
        plan = Ridge([p for _, p in PLAN_FEATURES]).fit(np.array(Xp).reshape(-1, len(PLAN_FEATURES)), np.array(yp))
    finally:
        sim.correction = saved
    mean = Correction(seg.mean, plan.mean)
    rng = np.random.default_rng(seed)
    draws = [Correction(seg.sample(rng), plan.sample(rng)) for _ in range(ensemble)]
    err = float(np.median(np.abs(np.array(yp) - np.array(Xp) @ plan.mean))) if yp else None
    return mean, draws, {"segments": seg.n, "plans": plan.n, "segment_noise": seg.noise, "plan_noise": plan.noise,
                         "plan_error": err}


class _Eval:
    """An incremental Evaluation as a Measurement-like object for :func:`time_like`."""

    def __init__(self, e: Any) -> None:
        self.e = e

    def objective(self, name: str) -> float | None:  # the names of placetune.tuning.objectives
        return {"latency": self.e.latency_ms, "throughput": self.e.throughput_fps,
                "energy": self.e.energy_mj}.get(name)
