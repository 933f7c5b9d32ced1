"""Fit a device profile to measurements: how does this Jetson differ from the simulated one?

The model is linear in the profile's factors: a measured segment time is the sum of the
simulator's own component times (each layer on its device, the boundary reformats, the DLA
loadable overhead, the per-engine cost), each multiplied by its factor. Parameters:

* a factor per (device kind, layer) ``phi``, shrunk towards its op class's factor ``psi``
  (``layer_shrinkage``), which is shrunk towards the device factor ``delta`` (gpu, dla), which
  is shrunk towards 1 (``ridge``);
* ``boundary``, ``loadable`` (shrunk towards 1) and the per-engine cost (towards nominal);
* ``contention``, fitted afterwards on pipeline periods by simulating (one secant step).

Rows are weighted by 1 / measured time (relative errors, the first-order form of least squares
in log space) and solved as weighted ridge normal equations with numpy. Per-layer times where a
backend reports them add rows for single layers (weight ``layer_weight``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence
import time

import numpy as np

from placetune.backends.simulate.costs import DEVICE_CODE, cost_table, graph_info, power_factor
from placetune.backends.simulate.profiled import apply_profile
from placetune.calibration.design import Observation, Params, design_matrix
from placetune.calibration.profile import KINDS, OP_CLASSES, DeviceProfile
from placetune.errors import ConfigError
from placetune.measurement import Measurement
from placetune.backends.simulate.incremental import IncrementalSimulator
from placetune.backends.simulate.simulator import SimulatedJetson
from placetune.placement.placement import Placement
from placetune.placement.realise import realise

if TYPE_CHECKING:
    from placetune.hardware.platforms import Platform
    from placetune.model.model import Model
    from placetune.settings import Settings

__all__ = ["Observation", "observations", "FitResult", "fit_profile", "MIN_MEASUREMENTS"]

#: Successful engine- or pipeline-mode measurements a fit needs.
MIN_MEASUREMENTS = 8
_FLOOR_MS = 0.005  # relative weights of rows shorter than this are capped
_ENGINE_SCALE_MS = 0.05  # the per-engine cost's prior spread
_INFO_MIN = 1e-3  # a parameter with less information than this is "unidentified"
_CONTENTION_SAMPLE = 16  # pipeline periods simulated to fit contention
_CLIP = (0.05, 20.0)


def observations(model: "Model", platform: "Platform", settings: "Settings", measurements: Sequence[Any],
                 *, base_profile: DeviceProfile | None = None) -> list[Observation]:
    """Observations from measurements (``Measurement`` or stored ``MeasurementRecord``) of one model.

    Uses every successful engine- and pipeline-mode measurement: its segment times whose
    device and layers match the simulator's segments of the realised placement, its per-layer
    times, and its end-to-end latency (engine mode) or period (pipeline mode). Replicas-mode
    and failed measurements are skipped.
    """
    g = graph_info(model)
    power = power_factor(platform, settings.power_mode) or 1.0
    out: list[Observation] = []
    for i, raw in enumerate(measurements):
        stored = not isinstance(raw, Measurement)  # a MeasurementRecord (the store is not imported here)
        m = raw.measurement if stored else raw
        if not m.ok or m.mode not in ("engine", "pipeline") or not m.realized or set(m.realized) != set(g.names):
            continue
        pipeline = m.mode == "pipeline"
        table = apply_profile(cost_table(model, platform, m.precision, m.batch, power), base_profile)
        codes = np.fromiter((DEVICE_CODE[m.realized[n]] for n in g.names), dtype=np.intp, count=g.n)
        kind = (codes > 0).astype(np.intp)
        t, _, bms, _ = table.costs_of(table.selection(codes))
        placed = Placement(model, m.realized)
        segs = placed.segments(pipeline=pipeline)
        group = str((raw.id if stored else None) or i)
        rows = 0
        measured = {int(s.get("index", k)): s for k, s in enumerate(m.segment_times_ms or [])}
        for s in segs:
            e = measured.get(s.index)
            if e is None or e.get("device") != s.device or e.get("layers", len(s.layers)) != len(s.layers):
                continue
            ms = float(e.get("alone_ms") or e.get("time_ms") or 0.0)  # a pipeline engine timed alone
            if not ms > 0 or not math.isfinite(ms):
                continue
            idx = np.fromiter((g.index[n] for n in s.layers), dtype=np.intp, count=len(s.layers))
            if "ranges" in e and sorted(idx.tolist()) != [j for a, b in e["ranges"] for j in range(a, b + 1)]:
                continue
            engines = 1.0 if pipeline or s.index == 0 else 0.0
            out.append(Observation(group, "segment", ms, model, idx, kind[idx], t[idx], float(bms[idx].sum()),
                                   table.island_ms if s.device != "GPU" else 0.0, table.engine_ms, engines))
            rows += 1
        lt = m.layer_times_ms or {}
        if lt:
            # GPU layers only: a DLA loadable is one profiler entry, which the backends split evenly
            # over its layers; its time is the segment observation above, not a time per layer
            pairs = [(g.index[n], float(v)) for n, v in lt.items() if n in g.index and v and v > 0]
            pairs = [(j, v) for j, v in pairs if t[j] > 0 and math.isfinite(v) and kind[j] == 0]
            if pairs:
                idx = np.array([j for j, _ in pairs], dtype=np.intp)
                out.append(Observation(group, "layers", 0.0, model, idx, kind[idx], t[idx],
                                       measured_layers_ms=np.array([v for _, v in pairs])))
        all_idx = np.arange(g.n)
        n_dla = sum(1 for s in segs if s.device != "GPU")
        if pipeline:
            fps = m.throughput_fps
            period = m.extra.get("period_ms") or (1000.0 * m.batch / fps if fps else None)
            if period and period > 0:
                st = dataclasses.replace(settings, mode="pipeline", precision=m.precision, noise=0.0, iterations=1)
                out.append(Observation(group, "period", float(period), model, all_idx, kind, t, float(bms.sum()),
                                       table.island_ms * n_dla, table.engine_ms, float(len(segs)),
                                       realisation=placed, settings=st))
        else:
            lat = (m.latency_ms or {}).get("median")
            if lat and lat > 0:
                out.append(Observation(group, "latency", float(lat), model, all_idx, kind, t, float(bms.sum()),
                                       table.island_ms * n_dla, table.engine_ms, 1.0, redundant=rows > 0))
    return out


# =========================================================================================
# the linear least-squares problem
# =========================================================================================
def _solve(params: Params, obs: Sequence[Observation], weights: dict[str, float], *, ridge: float,
           layer_shrinkage: float, layer_weight: float, engine0: float) -> tuple[np.ndarray, np.ndarray]:
    """(theta, information per parameter) of the weighted ridge problem."""
    P = params.P
    lin = [o for o in obs if o.kind in ("segment", "latency") and not o.redundant]
    H = np.zeros((P, P))
    r = np.zeros(P)
    if lin:
        X = design_matrix(params, lin)
        y = np.array([o.measured_ms for o in lin])
        w = np.sqrt([weights.get(o.group, 1.0) for o in lin]) / np.maximum(y, _FLOOR_MS)
        nz = np.flatnonzero(X.any(axis=0))  # only the columns the rows touch (a few hundred)
        Xw = X[:, nz] * w[:, None]
        H[np.ix_(nz, nz)] += Xw.T @ Xw
        r[nz] += Xw.T @ (y * w)
    per = [o for o in obs if o.kind == "layers"] if layer_weight > 0 else []
    if per:  # every per-layer row at once, added in the same order as one at a time
        ws = [layer_weight * math.sqrt(weights.get(o.group, 1.0)) / np.maximum(o.measured_layers_ms, _FLOOR_MS)
              for o in per]
        p = params.columns(per)
        np.add.at(H, (p, p), np.concatenate([(w * o.layer_ms) ** 2 for w, o in zip(ws, per)]))
        np.add.at(r, p, np.concatenate([w * w * o.layer_ms * o.measured_layers_ms for w, o in zip(ws, per)]))
    info = np.diag(H).copy()
    # ---- penalties: phi -> psi(class) -> delta(kind) -> 1; b, l -> 1; e -> nominal
    L, C = params.L, len(OP_CLASSES)
    cls = np.asarray(params.cls, dtype=np.intp)
    lam = layer_shrinkage ** 2
    used = info[: 2 * L] > 0  # a layer factor without data equals its class factor: left out
    for k in range(2):
        sel = np.flatnonzero(used[k * L: (k + 1) * L])
        phi = k * L + sel
        psi = params.psi0 + k * C + cls[sel]
        np.add.at(H, (phi, phi), lam)
        np.add.at(H, (psi, psi), lam)
        np.add.at(H, (phi, psi), -lam)
        np.add.at(H, (psi, phi), -lam)
        for c in range(C):
            a, d = params.psi0 + k * C + c, params.delta0 + k
            H[a, a] += ridge ** 2
            H[d, d] += ridge ** 2
            H[a, d] -= ridge ** 2
            H[d, a] -= ridge ** 2
        d = params.delta0 + k
        H[d, d] += ridge ** 2
        r[d] += ridge ** 2
    for j in (params.b, params.l):
        H[j, j] += ridge ** 2
        r[j] += ridge ** 2
    le = (ridge / _ENGINE_SCALE_MS) ** 2
    H[params.e, params.e] += le
    r[params.e] += le * engine0
    keep = np.concatenate([np.flatnonzero(used), np.arange(2 * L, P)])
    theta = np.empty(P)
    theta[keep] = np.linalg.solve(H[np.ix_(keep, keep)] + 1e-12 * np.eye(keep.size), r[keep])
    for k in range(2):
        free = np.flatnonzero(~used[k * L: (k + 1) * L])
        theta[k * L + free] = theta[params.psi0 + k * C + cls[free]]
    theta[: params.e] = np.clip(theta[: params.e], *_CLIP)
    theta[params.e] = max(theta[params.e], 0.0)
    return theta, info


def _profile(params: Params, theta: np.ndarray, info: np.ndarray, base: DeviceProfile, engine0: float,
             contention: float) -> DeviceProfile:
    """The fitted factors as a profile composed with ``base``."""
    L, C = params.L, len(OP_CLASSES)
    op_class = dict(base.op_class)
    layer = dict(base.layer)
    delta = theta[params.delta0: params.delta0 + 2]
    for k, kind in enumerate(KINDS):
        psi = theta[params.psi0 + k * C: params.psi0 + (k + 1) * C]
        for c, name in enumerate(OP_CLASSES):
            f = psi[c] / delta[k]
            if abs(f - 1.0) > 5e-3:
                key = f"{kind}.{name}"
                op_class[key] = round(op_class.get(key, 1.0) * f, 6)
        phi = theta[k * L: (k + 1) * L]
        for j in np.flatnonzero(info[k * L: (k + 1) * L] > 0):
            f = phi[j] / psi[params.cls[j]]
            if abs(f - 1.0) > 5e-3:
                key = f"{kind}.{params.names[j]}"
                layer[key] = round(layer.get(key, 1.0) * f, 6)
    return DeviceProfile(
        base=base.base, gpu=round(base.gpu * delta[0], 6), dla=round(base.dla * delta[1], 6),
        boundary=round(base.boundary * theta[params.b], 6), loadable=round(base.loadable * theta[params.l], 6),
        contention=round(base.contention * contention, 6), op_class=op_class, layer=layer,
        engine_us=round(base.engine_us + 1000.0 * (theta[params.e] - engine0), 3),
        layer_sigma=base.layer_sigma, seed=base.seed)


def _predict(o: Observation, params: Params, theta: np.ndarray, profile: DeviceProfile, platform: "Platform") -> float:
    if o.kind == "period":
        if isinstance(o.realisation, Placement):
            o.realisation = realise(o.realisation, platform, mode="pipeline", precision=o.settings.precision)
        m = SimulatedJetson(timeline=False, profile=profile).measure(o.realisation, platform, o.settings)
        return float(m.extra.get("period_ms") or 0.0) if m.ok else float("nan")
    return float(params.row(o) @ theta)


def _relative(obs: Sequence[Observation], params: Params, theta: np.ndarray, profile: DeviceProfile,
              platform: "Platform") -> list[float]:
    """``predicted / measured - 1`` of each observation: the linear rows in one product, periods simulated."""
    pred = np.empty(len(obs))
    lin = [k for k, o in enumerate(obs) if o.kind != "period"]
    if lin:
        pred[lin] = design_matrix(params, [obs[k] for k in lin]) @ theta
    for k, o in enumerate(obs):
        if o.kind == "period":
            pred[k] = _predict(o, params, theta, profile, platform)
    return (pred / np.array([o.measured_ms for o in obs], dtype=float) - 1.0).tolist() if obs else []


def _errors(rel: Sequence[float]) -> dict[str, float]:
    a = np.abs(np.asarray([x for x in rel if math.isfinite(x)], dtype=float))
    if a.size == 0:
        return {}
    return {"median": float(np.median(a)), "max": float(a.max()), "n": int(a.size)}


def _end_to_end(obs: Sequence[Observation]) -> list[Observation]:
    return [o for o in obs if o.kind in ("latency", "period")]


def _periods(per: Sequence[Observation], params: Params, theta: np.ndarray, profile: DeviceProfile,
             platform: "Platform") -> np.ndarray:
    """:func:`_predict` of ``period`` observations, by the incremental simulator where it applies
    (the same figures as a full measurement, a fraction of its cost; one per model and settings)."""
    sims: dict[tuple, IncrementalSimulator] = {}
    out = np.empty(len(per))
    for j, o in enumerate(per):
        key = (o.model.hash, o.settings)
        sim = sims.get(key)
        if sim is None:
            sim = sims[key] = IncrementalSimulator(o.model, platform, o.settings,
                                                   SimulatedJetson(timeline=False, profile=profile))
        if not sim.fast:
            out[j] = _predict(o, params, theta, profile, platform)
            continue
        e = sim.evaluate(o.realisation if isinstance(o.realisation, Placement) else o.realisation.realized)
        out[j] = float(e.period_ms or 0.0) if e.ok else float("nan")
    return out


def _fit_contention(params, theta, info, base, engine0, obs, platform) -> tuple[float, bool]:
    """Contention factor from pipeline periods (a secant step between 1 and 2); (value, identified)."""
    per = [o for o in obs if o.kind == "period"]
    if not per:
        return 1.0, False
    step = max(1, len(per) // _CONTENTION_SAMPLE)
    per = per[::step][:_CONTENTION_SAMPLE]
    p1 = _profile(params, theta, info, base, engine0, 1.0)
    p2 = _profile(params, theta, info, base, engine0, 2.0)
    a = _periods(per, params, theta, p1, platform)
    b = _periods(per, params, theta, p2, platform)
    y = np.array([o.measured_ms for o in per])
    ok = (a > 0) & (b > 0)
    s = np.log(b[ok] / a[ok])
    if ok.sum() == 0 or float(np.abs(s).max(initial=0.0)) < 2e-3:
        return 1.0, False
    resid = np.log(y[ok] / a[ok])
    c = 1.0 + float((s * resid).sum() / ((s * s).sum() + 1e-4))
    return float(np.clip(c, 0.2, 5.0)), True


# =========================================================================================
# the result and the entry point
# =========================================================================================
@dataclass
class FitResult:
    """A fitted device profile and how well it predicts.

    Attributes:
        profile: the fitted :class:`DeviceProfile`.
        in_sample: relative error of the end-to-end predictions (latency in engine mode, period
            in pipeline mode) of the measurements fitted: ``{"median", "max", "n"}``.
        cross_validated: the same for each measurement predicted by a fit without it (k-fold
            by measurement; contention is held at the full fit's value); empty when not run.
        unidentified: parameters the data could not identify (they stay at their prior).
        measurements: measurements used; observations: rows fitted.
        seconds: time the fit took.
    """

    profile: DeviceProfile
    in_sample: dict
    cross_validated: dict
    unidentified: list[str]
    measurements: int = 0
    observations: int = 0
    seconds: float = 0.0
    folds: int = 0
    identified_layers: tuple[int, int] = (0, 0)
    extra: dict = field(default_factory=dict)

    def table(self) -> str:
        """The fit as printed by ``placetune calibrate``."""
        p = self.profile
        lines = [f"device profile fit (base {p.base}): {self.measurements} measurements, {self.observations} "
                 f"observations, {1000 * self.seconds:.0f} ms", "",
                 f"{'parameter':28s} {'value':>10s}"]
        for k in ("gpu", "dla", "boundary", "loadable", "contention"):
            lines.append(f"{k:28s} {getattr(p, k):10.3f}" + ("   (unidentified)" if k in self.unidentified else ""))
        lines.append(f"{'engine_us (added)':28s} {p.engine_us:10.1f}"
                     + ("   (unidentified)" if "engine_us" in self.unidentified else ""))
        for k, v in p.op_class.items():
            lines.append(f"{'op_class ' + k:28s} {v:10.3f}")
        if p.layer:
            vals = np.array(list(p.layer.values()))
            lines.append(f"{'per-layer factors':28s} {len(vals):10d}   (range {vals.min():.3f}..{vals.max():.3f})")
        lines.append("")
        lines.append(f"{'error (end to end)':28s} {'median':>8s} {'max':>8s} {'n':>5s}")
        for label, e in (("in-sample", self.in_sample), (f"cross-validated ({self.folds}-fold)", self.cross_validated)):
            if e:
                lines.append(f"{label:28s} {100 * e['median']:7.2f}% {100 * e['max']:7.2f}% {e['n']:5d}")
            else:
                lines.append(f"{label:28s} {'not run':>8s}")
        ident, total = self.identified_layers
        rest = [u for u in self.unidentified if u not in ("gpu", "dla", "boundary", "loadable", "contention", "engine_us")]
        lines.append("")
        lines.append("unidentified: " + (", ".join(self.unidentified) if self.unidentified else "none")
                     if not rest or len(rest) < 12 else
                     "unidentified: " + ", ".join(u for u in self.unidentified if u not in rest[12:]) + f" ... ({len(rest)} op classes)")
        lines.append(f"per-layer factors informed by the data: {ident} of {total}")
        return "\n".join(lines)


def _unidentified(params: Params, info: np.ndarray, obs: Sequence[Observation], contention_ok: bool) -> tuple[list[str], tuple[int, int]]:
    L = params.L
    cls = np.asarray(params.cls, dtype=np.intp)
    out = []
    present = set()
    for o in obs:
        present.update(zip(o.layer_kind.tolist(), params.layer_ids(o).tolist()))
    for k, kind in enumerate(KINDS):
        li = info[k * L: (k + 1) * L]
        if li.sum() < _INFO_MIN:
            out.append(kind)
        used = {cls[j] for kk, j in present if kk == k}
        for c in sorted(used):
            if li[cls == c].sum() < _INFO_MIN and OP_CLASSES[c] != "free":
                out.append(f"{kind}.{OP_CLASSES[c]}")
    for name, j in (("boundary", params.b), ("loadable", params.l), ("engine_us", params.e)):
        if info[j] < _INFO_MIN:
            out.append(name)
    if not contention_ok:
        out.append("contention")
    layer_info = info[: 2 * L]
    total = len(present)
    ident = int(sum(1 for k, j in present if layer_info[k * L + j] >= _INFO_MIN))
    return out, (ident, total)


def fit_profile(model: "Model", platform: "Platform", settings: "Settings", measurements: Sequence[Any], *,
                base_profile: DeviceProfile | None = None, ridge: float = 0.05, layer_shrinkage: float = 0.5,
                bootstrap_seed: int | None = None, layer_weight: float = 0.25, cross_validate: int = 5,
                fast: bool = False, observations_: Sequence[Observation] | None = None,
                min_measurements: int = MIN_MEASUREMENTS, diagnostics: bool = True) -> FitResult:
    """Fit a device profile to measurements of one model on one platform.

    Args:
        model, platform, settings: what was measured (the settings give the power mode).
        measurements: ``Measurement`` objects or stored ``MeasurementRecord`` (failed and
            replicas-mode ones are skipped).
        base_profile: the starting model (default: the nominal simulator of ``platform``);
            the result is this profile times the fitted corrections.
        ridge: strength of the pull of device, class, boundary, loadable and engine terms
            towards their prior (relative-error units: 0.05 = a factor 2 away costs as much as
            a 5 % error on one measured time).
        layer_shrinkage: pull of each layer's factor towards its op class's factor.
        bootstrap_seed: fit a bootstrap resample of the measurements (for an ensemble).
        layer_weight: weight of per-layer time rows against segment rows (0: ignore them).
        cross_validate: folds of the cross-validated error (0: not run, faster).
        fast: the linear fit only (for refits in a search loop, a few ms): contention stays at
            the base profile's, no cross-validation, the in-sample error is that of the
            segment and engine-latency rows (no simulation).
        observations_: precomputed :func:`observations` (the measurements are then not read).
        min_measurements: the fewest usable measurements to fit (``placetune calibrate``:
            :data:`MIN_MEASUREMENTS`; a search's early refits may go lower and lean on the priors).
        diagnostics: False: the profile alone, for a search that refits every round and judges
            its models itself: no in-sample or cross-validated error (empty), no list of
            unidentified parameters (empty), and no simulation but the contention fit's.

    Raises:
        ConfigError: fewer than ``min_measurements`` usable measurements, or a base profile
            of another platform.
    """
    t0 = time.perf_counter()
    base = base_profile or DeviceProfile.nominal(platform.name)
    if base.base != platform.name:
        raise ConfigError(f"the base profile is of {base.base!r}, the measurements of {platform.name!r}")
    obs = list(observations_) if observations_ is not None else observations(
        model, platform, settings, measurements, base_profile=base_profile)
    groups = sorted({o.group for o in obs}, key=lambda s: (len(s), s))
    if len(groups) < max(1, min_measurements):
        raise ConfigError(f"calibration needs at least {max(1, min_measurements)} successful engine- or pipeline-mode "
                          f"measurements; got {len(groups)}")
    weights: dict[str, float] = {}
    if bootstrap_seed is not None:
        rng = np.random.default_rng(bootstrap_seed)
        for j in rng.integers(0, len(groups), size=len(groups)):
            weights[groups[j]] = weights.get(groups[j], 0.0) + 1.0
        fit_obs = [o for o in obs if o.group in weights]
    else:
        fit_obs = obs
    params = Params(obs)
    engine0 = float(np.median([o.engine_ms for o in obs if o.engine_ms > 0] or [0.0]))
    kw = dict(ridge=ridge, layer_shrinkage=layer_shrinkage, layer_weight=layer_weight, engine0=engine0)
    theta, info = _solve(params, fit_obs, weights, **kw)
    if fast:
        contention, c_ok = 1.0, True
        e2e = [o for o in fit_obs if o.kind in ("segment", "latency")]
    else:
        contention, c_ok = _fit_contention(params, theta, info, base, engine0, fit_obs, platform)
        e2e = _end_to_end(fit_obs)
    profile = _profile(params, theta, info, base, engine0, contention)
    in_sample = _errors(_relative(e2e, params, theta, profile, platform)) if diagnostics else {}
    cv: dict = {}
    folds = min(int(cross_validate), len(groups)) \
        if cross_validate and cross_validate > 1 and not fast and diagnostics else 0
    if folds:
        fold_of = {gname: k % folds for k, gname in enumerate(groups)}
        rel = []
        for f in range(folds):
            train = [o for o in fit_obs if fold_of[o.group] != f]
            test = [o for o in _end_to_end(obs) if fold_of[o.group] == f]
            if not train or not test:
                continue
            th, inf_ = _solve(params, train, weights, **kw)
            pf = _profile(params, th, inf_, base, engine0, contention)
            rel += _relative(test, params, th, pf, platform)
        cv = _errors(rel)
    unidentified, layers = _unidentified(params, info, fit_obs, c_ok) if diagnostics else ([], (0, 0))
    return FitResult(profile, in_sample, cv, unidentified, measurements=len({o.group for o in fit_obs}),
                     observations=len(fit_obs), seconds=time.perf_counter() - t0, folds=folds,
                     identified_layers=layers)
