"""Which model of the device the guided agent trusts this round: chosen by cross-validation.

The agent's physical model can be made of more or less of the measurements' detail:

* ``profile``: a device profile with a factor per layer (shrunk towards its op class's), the
  richest: right on a device that differs from the simulator by scales, but on a device with
  structural effects (a DLA segment that slows down past a length) the per-layer factors absorb
  those effects where they were measured, and carry them to placements where they do not apply;
* ``scales``: the same fit with every layer at its op class's factor (device, op-class,
  boundary, loadable and engine scales only);
* ``nominal``: the simulator as it is.

Each gets the residual correction of :mod:`search.residual` on top. :func:`choose` fits every
candidate on all but one fold of the run's measurements, predicts the plans of the fold left out
(``|log(measured / predicted)|`` of the objective), and keeps the candidate with the smallest
median error; near-ties (within :data:`TIE`) go to the richer model.

Nothing here measures anything.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .residual import Correction, CorrectedSimulator, evaluation_time_like, fit_correction, time_like
from .surrogate import RunObservations, observations_of, simulator
from placetune.calibration import fit_profile

if TYPE_CHECKING:
    from placetune.measurement import Measurement
    from placetune.tuning.evaluator import Evaluator

__all__ = ["Candidate", "MODELS", "TIE", "choose", "refit"]

log = logging.getLogger(__name__)

#: the candidate physical models, richest first
MODELS = ("profile", "scales", "nominal")
#: a cross-validated error this close to the best (absolute, in log units) counts as a tie
TIE = 0.003
_FOLDS = 5
_COARSE = 1e3  # layer_shrinkage that holds every layer at its op class's factor


@dataclass
class Candidate:
    """One model of the device: a physical profile (None: nominal) and the residual correction on it.

    Attributes:
        name: one of :data:`MODELS`.
        profile: the device profile (None: the nominal simulator).
        correction: the residual correction fitted on all measurements.
        draws: posterior draws of the correction.
        cv_error: median |log(measured / predicted)| of the plans left out (None: not estimated).
    """

    name: str
    profile: Any
    correction: Correction | None = None
    draws: list[Correction] = field(default_factory=list)
    cv_error: float | None = None


def _simulator(ev: "Evaluator", profile: Any) -> CorrectedSimulator | None:
    s = ev.settings.replace(noise=0.0) if ev.settings.noise else ev.settings
    sim = CorrectedSimulator(ev.model, ev.platform, s, simulator(profile), gpu_fallback=s.gpu_fallback,
                             dla_core=s.dla_core, trt_version=s.trt_version)
    return sim if sim.fast else None


def _profile(ev: "Evaluator", name: str, obs: Sequence[Any], ms: Sequence["Measurement"], full: Any) -> Any:
    """The physical profile of candidate ``name`` fitted to observations ``obs`` (``full``: the
    ``profile`` candidate's own fit on every measurement, when already made)."""
    if name == "nominal":
        return None
    shrink = {} if name == "profile" else {"layer_shrinkage": _COARSE}
    return fit_profile(ev.model, ev.platform, ev.settings, ms, observations_=obs, fast=True,
                       min_measurements=2, diagnostics=False, **shrink).profile


def _errors(ev: "Evaluator", sim: CorrectedSimulator, objective: Any, correction: Correction,
            ms: Sequence["Measurement"]) -> list[float]:
    sim.correction = correction
    out = []
    for m in ms:
        got = time_like(objective, m)
        if got is None or not m.realized:
            continue
        pred = evaluation_time_like(objective, sim.evaluate(sim.structure.codes(m.realized)))
        if pred is not None:
            out.append(abs(math.log(got / pred)))
    return out


def refit(ev: "Evaluator", objective: Any, measurements: Sequence["Measurement"], full_profile: Any, name: str, *,
          ensemble: int = 0, seed: int | None = None, cv_error: float | None = None,
          cache: "RunObservations | None" = None) -> Candidate:
    """Candidate ``name`` fitted on every measurement, without cross-validation (a model chosen
    in an earlier round, refitted with the new measurements; ``cache``: the run's observations)."""
    ms = [m for m in measurements if m.ok and m.realized]
    c = Candidate(name, full_profile if name == "profile" else None, cv_error=cv_error)
    try:
        if name == "scales":
            c.profile = _profile(ev, name, observations_of(ev, ms, cache), ms, None)
        sim = _simulator(ev, c.profile)
        if sim is not None:
            c.correction, c.draws, _ = fit_correction(sim, objective, ms, ensemble=ensemble, seed=seed)
    except Exception as exc:  # noqa: BLE001 - a degenerate fit: the physical model alone
        log.info("guided: model %s not refitted (%s)", name, exc)
    return c


def choose(ev: "Evaluator", objective: Any, measurements: Sequence["Measurement"], full_profile: Any, *,
           ensemble: int = 0, seed: int | None = None,
           cache: "RunObservations | None" = None) -> tuple[Candidate, list[Candidate]]:
    """Fit every candidate model and pick the one that predicts left-out plans best.

    Args:
        ev: the run's evaluator (model, platform, settings).
        objective: the run's objective.
        measurements: the run's ok measurements.
        full_profile: the ``profile`` candidate's fit on every measurement (the agent's own).
        ensemble: posterior draws of the chosen candidate's correction.
        seed: seed of the folds' shuffle and of the draws.
        cache: the run's observations read so far (None: the measurements are read here).

    Returns:
        ``(chosen, every candidate)``; with fewer than 3 measurements the ``profile`` candidate
        without a cross-validated error.
    """
    ms = [m for m in measurements if m.ok and m.realized]
    cands = [Candidate(name, full_profile if name == "profile" else None) for name in MODELS]
    if len(ms) < 3:
        return cands[0], cands
    obs = observations_of(ev, ms, cache)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(ms))
    folds = min(_FOLDS, len(ms))
    fold_of = {int(i): k % folds for k, i in enumerate(order)}
    nominal: CorrectedSimulator | None = None  # one for every fold: it keeps the parts it computed

    for c in cands:
        errs: list[float] = []
        try:
            if c.name == "scales":
                c.profile = _profile(ev, c.name, obs, ms, None)
            for f in range(folds):
                train = [m for i, m in enumerate(ms) if fold_of[i] != f]
                test = [m for i, m in enumerate(ms) if fold_of[i] == f]
                keep = {str(i) for i in range(len(ms)) if fold_of[i] != f}
                prof = _profile(ev, c.name, [o for o in obs if o.group in keep], train, None)
                sim = _simulator(ev, prof) if prof is not None else (nominal := nominal or _simulator(ev, None))
                if sim is None:
                    raise ValueError("no incremental simulator for these settings")
                corr, _, _ = fit_correction(sim, objective, train)
                errs += _errors(ev, sim, objective, corr, test)
            sim = _simulator(ev, c.profile) if c.profile is not None else (nominal := nominal or _simulator(ev, None))
            if sim is None:
                raise ValueError("no incremental simulator for these settings")
            c.correction, c.draws, _ = fit_correction(sim, objective, ms, ensemble=ensemble, seed=seed)
        except Exception as exc:  # noqa: BLE001 - a degenerate fit: this candidate is left out
            log.info("guided: model %s not fitted (%s)", c.name, exc)
            errs = []
        c.cv_error = float(np.median(errs)) if errs else None
    fitted = [c for c in cands if c.cv_error is not None]
    if not fitted:
        return cands[0], cands
    best = min(c.cv_error for c in fitted)  # type: ignore[type-var]
    chosen = next(c for c in fitted if c.cv_error <= best + TIE)  # type: ignore[operator]
    log.info("guided: models %s; chosen %s", {c.name: c.cv_error for c in cands}, chosen.name)
    return chosen, cands
