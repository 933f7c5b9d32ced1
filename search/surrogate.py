"""The guided agent's model of the device: corrections fitted to the run's measurements, and a
cheap search of the corrected simulator.

:func:`fit_ensemble` fits a :class:`~placetune.calibration.DeviceProfile` (multiplicative
corrections of the simulator, starting from the built-in platform) to the measurements of the
run, plus bootstrap refits for the uncertainty. :class:`Surrogate` predicts the objective of a
unit assignment under one profile with the incremental simulator
(:class:`~placetune.backends.simulate.incremental.IncrementalSimulator`: the same figures as
``realise()`` + ``measure()``, without building a Placement or a Measurement; no store, no
budget), with a memo. :func:`inner_search` is multi-start
first-improvement descent over stage moves (:mod:`placetune.placement.stages`) of a surrogate.

Nothing here measures anything: every figure is a prediction of the simulator.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from placetune import InfeasiblePlacement, Measurement, PlacementError
from placetune.memo import IdentityMemo
from placetune.placement.stages import Stage, assignment_of, random_stage_move, stage_moves, stages_of
from placetune.backends.simulate.costs import DEVICE_CODE, cost_table, power_factor
from placetune.backends.simulate.incremental import IncrementalSimulator
from placetune.backends.simulate.profiled import apply_profile
from placetune.calibration import fit_profile
from placetune.backends.simulate.simulator import SimulatedJetson
from placetune import calibration
from placetune.calibration.fit import MIN_MEASUREMENTS
from placetune.placement.stages import cut_points, sample_stages
from .residual import CorrectedSimulator

if TYPE_CHECKING:
    from placetune.calibration import FitResult
    from placetune.tuning.evaluator import Evaluator
    from placetune.tuning.objectives import Objective
    from placetune.placement.space import Space

__all__ = ["Fit", "RunObservations", "fit_ensemble", "Surrogate", "inner_search", "simulator"]

log = logging.getLogger(__name__)


@dataclass
class Fit:
    """Corrections fitted to the run's measurements.

    Attributes:
        profile: the fitted device profile (None: the uncorrected simulator).
        cv_error: cross-validated median relative error of the fit (None: not estimated).
        ensemble: bootstrap refits (for the spread of a prediction).
        n: measurements it was fitted to.
        table: the fit's printable table, when the fitter gives one.
    """

    profile: Any = None
    cv_error: float | None = None
    ensemble: list[Any] = field(default_factory=list)
    n: int = 0
    table: str = ""


#: objectives an incremental evaluation gives directly (others come from its full measurement)
_FAST = ("latency", "throughput", "energy")


def _value(e: Any, name: str) -> float | None:
    """Objective ``name`` (one of :data:`_FAST`) of an incremental evaluation, as
    :meth:`Measurement.objective` gives it."""
    v = {"latency": e.latency_ms, "throughput": e.throughput_fps, "energy": e.energy_mj}[name]
    return None if v is None or not math.isfinite(v) else float(v)


def simulator(profile: Any = None) -> Any:
    """A simulated Jetson measuring with ``profile`` (None: the nominal simulator), no timeline."""
    if profile is None:
        return SimulatedJetson(timeline=False)
    return SimulatedJetson(timeline=False, profile=profile)


def _cv_error(result: "FitResult") -> float | None:
    """Median relative error of a fit's cross-validation (the fitter's own summary; None when
    the fit did not cross-validate)."""
    median = result.cross_validated.get("median")
    return None if median is None else float(median)


class RunObservations:
    """The calibration observations of a run's measurements, each measurement read once.

    ``of(ms)`` equals :func:`placetune.calibration.observations` of ``ms`` (each observation's
    group is the measurement's position in ``ms``), without reading again the measurements it
    has seen: a search refits on all of its measurements every round, and reading them again
    cost as much as the fits. The observations are shared between calls (a period row keeps
    the placement it realised on first use).
    """

    def __init__(self, evaluator: "Evaluator") -> None:
        self.evaluator = evaluator
        self._of: IdentityMemo[list[Any]] = IdentityMemo()

    def of(self, measurements: Sequence[Measurement]) -> list[Any]:
        """The observations of ``measurements``, in their order."""
        ev = self.evaluator
        out: list[Any] = []
        for i, m in enumerate(measurements):
            obs = self._of.get(m)
            if obs is None:
                obs = self._of.put(m, calibration.observations(ev.model, ev.platform, ev.settings, [m]))
            group = str(getattr(m, "id", None) or i)
            for o in obs:
                o.group = group
            out += obs
        return out


def observations_of(evaluator: "Evaluator", measurements: Sequence[Measurement],
                    cache: RunObservations | None = None) -> list[Any]:
    """:func:`placetune.calibration.observations` of ``measurements`` (through ``cache`` when given)."""
    if cache is not None:
        return cache.of(measurements)
    return calibration.observations(evaluator.model, evaluator.platform, evaluator.settings, measurements)


def fit_ensemble(evaluator: "Evaluator", measurements: Sequence[Measurement], *, ensemble: int = 4,
                 seed: int | None = None, min_points: int = 2, cross_validate: int = 5,
                 cache: RunObservations | None = None) -> Fit:
    """Fit corrections of the built-in platform's simulator to ``measurements``.

    The backend's own device profile is never read: the fit starts from the platform the
    evaluator plans for (``evaluator.platform``) and sees only measured figures.

    Args:
        evaluator: gives the model, platform and settings.
        measurements: ok measurements of this run (segment profiles are used when present).
        ensemble: bootstrap refits for the uncertainty (0: none).
        seed: seed of the bootstrap resamples.
        min_points: below this many measurements the uncorrected simulator is used.
        cross_validate: folds of the fit's cross-validated error (``Fit.cv_error``; 0: not
            estimated, nor the fit's other diagnostics: faster, for a caller that chooses its
            model by cross-validation itself).
        cache: the run's observations read so far (None: the measurements are read here).
    """
    ok = [m for m in measurements if m.ok]
    if len(ok) < min_points:
        return Fit(n=len(ok))
    model, platform, settings = evaluator.model, evaluator.platform, evaluator.settings
    try:
        obs = observations_of(evaluator, ok, cache)
        if len(ok) < MIN_MEASUREMENTS:  # the first rounds: a linear fit leaning on the priors, no CV
            early = fit_profile(model, platform, settings, ok, observations_=obs, fast=True,
                                min_measurements=min_points, diagnostics=False)
            return Fit(profile=early.profile, cv_error=None, n=len(ok))
        main = fit_profile(model, platform, settings, ok, observations_=obs, cross_validate=cross_validate,
                           diagnostics=bool(cross_validate))
    except Exception as exc:  # too few measurements, a degenerate fit: the search goes on uncorrected
        log.info("guided: no fit (%s); using the uncorrected simulator", exc)
        return Fit(n=len(ok))
    out = Fit(profile=main.profile, cv_error=_cv_error(main), n=len(ok))
    try:
        out.table = main.table()
    except Exception:  # pragma: no cover - cosmetic
        out.table = ""
    base = 0 if seed is None else int(seed) * 1000
    for b in range(ensemble):
        try:
            out.ensemble.append(fit_profile(model, platform, settings, ok, observations_=obs, fast=True,
                                            bootstrap_seed=base + b, diagnostics=False).profile)
        except Exception as exc:
            log.info("guided: bootstrap fit %d failed (%s)", b, exc)
    return out


class Surrogate:
    """Predicted loss (smaller is better, ``inf`` when infeasible) of unit assignments under one profile.

    Args:
        evaluator: realises placements (``evaluator.realise``) under its settings.
        space: the unit space of the assignments.
        objective: the objective (its primary component is predicted).
        profile: the device profile (None: the nominal simulator).
        correction: the residual model's correction (:mod:`search.residual`), or None.
        fails: predicts a failed build of an assignment (:meth:`search.feasibility.Feasibility.fails`):
            such an assignment's loss is ``inf``, as an infeasible one's; consulted on every call,
            so rules learned after a loss was memoised apply to it.
        local: a time-like log correction of an assignment's prediction
            (:class:`search.blindspots.LocalResidual`), applied after the simulation; set it
            before the first call (the memo holds corrected losses).
    """

    def __init__(self, evaluator: "Evaluator", space: "Space", objective: "Objective", profile: Any = None,
                 correction: Any = None, fails: Any = None) -> None:
        self.evaluator = evaluator
        self.space = space
        self.objective = objective
        self.sim = simulator(profile)
        self.profile = profile
        self.correction = correction  # search.residual.Correction: what the profile cannot express
        self.fails = fails
        self.local: Any = None
        self._unit_costs: np.ndarray | None = None
        self.settings = evaluator.settings.replace(noise=0.0) if evaluator.settings.noise else evaluator.settings
        self.memo: dict[tuple[int, ...], float] = {}
        self.calls = 0
        self._inc: Any = None  # the incremental simulator and the unit -> layer code map, built on first use

    def _incremental(self) -> tuple[Any, np.ndarray, np.ndarray]:
        """``(IncrementalSimulator, device code per space device, unit index per model layer)``; a
        layer in no unit gets index ``n_units`` (GPU)."""
        if self._inc is None:
            ev, space, s = self.evaluator, self.space, self.settings
            kind: Any = IncrementalSimulator
            kw: dict[str, Any] = {}
            if self.correction is not None:
                kind, kw = CorrectedSimulator, {"correction": self.correction}
            inc = kind(ev.model, ev.platform, s, self.sim, gpu_fallback=s.gpu_fallback, dla_core=s.dla_core,
                       trt_version=s.trt_version, **kw)
            index = {n: i for i, n in enumerate(ev.model.names)}
            unit_of = np.full(len(ev.model.names), space.n_units, dtype=np.intp)
            for u in space.units:
                for n in u.layers:
                    unit_of[index[n]] = u.index
            codes = np.array([DEVICE_CODE[d] for d in space.devices], dtype=np.int8)
            self._inc = (inc, codes, unit_of)
        return self._inc

    def loss(self, assignment: Sequence[int]) -> float:
        """Predicted loss of an assignment (memoised)."""
        key = tuple(map(int, assignment))
        if self.fails is not None and self.fails(key):
            return math.inf
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        self.calls += 1
        if len(key) != self.space.n_units or (key and not (min(key) >= 0 and max(key) < self.space.n_devices)):
            raise PlacementError(f"assignment {key!r} does not fit the space ({self.space.n_units} units, "
                                 f"{self.space.n_devices} devices)")
        inc, dev_codes, unit_of = self._incremental()
        try:
            e = inc.evaluate(np.append(dev_codes[np.asarray(key, dtype=np.intp)], np.int8(0))[unit_of])
            if not e.ok:
                loss = math.inf
            elif self.objective.constraints or self.objective.names[0] not in _FAST:
                # constraints (feasible before infeasible) and other objectives: from the full measurement
                loss = self.objective.loss(e.measurement())
            else:
                v = _value(e, self.objective.names[0])
                loss = math.inf if v is None else (v if self.objective.direction == "minimize" else -v)
        except (InfeasiblePlacement, PlacementError):
            loss = math.inf
        if self.local is not None and math.isfinite(loss) and abs(loss) < 1e12:
            r = self.local(key)
            loss *= math.exp(r if self.objective.direction == "minimize" else -r)
        self.memo[key] = loss
        return loss

    def unit_costs(self) -> np.ndarray:
        """``(n_devices, n_units)`` ms of each unit on each device of the space, under this profile
        (a unit a device cannot run costs its GPU time there: GPU fallback)."""
        if self._unit_costs is None:
            ev, space = self.evaluator, self.space
            power = power_factor(ev.platform, self.settings.power_mode) or 1.0
            table = apply_profile(cost_table(ev.model, ev.platform, self.settings.precision, ev.model.batch, power),
                                  self.profile)
            index = {n: j for j, n in enumerate(ev.model.names)}
            out = np.zeros((space.n_devices, space.n_units))
            for u in space.units:
                idx = [index[n] for n in u.layers]
                gpu = float(table.t_alone[0, idx].sum())
                for k, d in enumerate(space.devices):
                    out[k, u.index] = gpu if d == "GPU" or not space.mask[u.index, k] else float(
                        table.t_alone[1, idx].sum())
            self._unit_costs = out
        return self._unit_costs

    def value(self, loss: float) -> float | None:
        """Objective value of a loss (None for ``inf`` and for a penalised, infeasible one)."""
        if not math.isfinite(loss) or abs(loss) >= 1e12:
            return None
        return loss if self.objective.direction == "minimize" else -loss


def _descend(sur: Surrogate, stages: list[Stage], rng: np.random.Generator, budget: int,
             max_stages: int, cuts_only: bool = False) -> tuple[list[Stage], float, int]:
    """First-improvement descent over stage moves; returns (stages, loss, surrogate calls used)."""
    space = sur.space
    start_calls = sur.calls
    cur = stages
    cur_loss = sur.loss(assignment_of(space, cur))
    while sur.calls - start_calls < budget:
        moves = stage_moves(space, cur, max_stages=max_stages, cuts_only=cuts_only)
        improved = False
        for j in rng.permutation(len(moves)):
            if sur.calls - start_calls >= budget:
                break
            loss = sur.loss(assignment_of(space, moves[j]))
            if loss < cur_loss - 1e-12 * abs(cur_loss):
                cur, cur_loss, improved = moves[j], loss, True
                break
        if not improved:
            break
    return cur, cur_loss, sur.calls - start_calls


def patterns(n_devices: int, max_len: int = 4) -> list[tuple[int, ...]]:
    """Every sequence of 1..max_len stage devices with neighbours differing."""
    out: list[tuple[int, ...]] = [(d,) for d in range(n_devices)]
    frontier = list(out)
    for _ in range(max_len - 1):
        frontier = [p + (d,) for p in frontier for d in range(n_devices) if d != p[-1]]
        out += frontier
    return out


def pattern_start(space: "Space", pattern: Sequence[int], rng: np.random.Generator) -> list[Stage]:
    """Stages of ``pattern`` with roughly equal numbers of units (jittered cuts)."""
    n = space.n_units
    k = len(pattern)
    if k > n:
        return [Stage(0, n, int(pattern[0]))]
    cuts = [int(round(n * j / k + rng.uniform(-0.5, 0.5) * n / (2 * k))) for j in range(1, k)]
    points = cut_points(space)
    if points:  # snap to the nearest block boundary
        cuts = [min(points, key=lambda p: abs(p - c)) for c in cuts]
    cuts = sorted(set(min(n - 1, max(1, c)) for c in cuts))
    bounds = [0, *cuts, n]
    return [Stage(s, e, int(d)) for s, e, d in zip(bounds[:-1], bounds[1:], pattern) if e > s]


def _refine_portfolio(sur: Surrogate, portfolio: dict, rng: np.random.Generator, budget: int,
                      max_stages: int) -> list[list[Stage]]:
    space = sur.space
    t0 = sur.calls
    first = not portfolio
    costs = sur.unit_costs()
    if first:
        dlas = [k for k, d in enumerate(space.devices) if d != "GPU"]
        for pat in patterns(space.n_devices, min(4, max_stages)):
            used = [d for d in dict.fromkeys(pat) if d in dlas]
            if used != dlas[:len(used)]:  # DLA0 <-> DLA1 twin of a pattern already listed
                continue
            portfolio[pat] = pattern_start(space, pat, rng)
            portfolio[pat + (-1,)] = balanced_start(space, pat, costs)  # a second entry: balanced cuts
    else:  # the balanced cuts under this round's corrections, where they beat the refined ones
        for pat, st in list(portfolio.items()):
            if pat[-1] != -1:
                continue
            b = balanced_start(space, pat[:-1], costs)
            if sur.loss(assignment_of(space, b)) < sur.loss(assignment_of(space, st)):
                portfolio[pat] = b
    scored = sorted(((sur.loss(assignment_of(space, st)), pat) for pat, st in portfolio.items()),
                    key=lambda t: t[0])
    if first:  # every pattern's cuts get refined once
        chosen = [pat for _, pat in scored]
    else:
        chosen = [pat for _, pat in scored[:4]]
        rest = [pat for _, pat in scored[4:]]
        if rest:
            chosen += [rest[int(j)] for j in rng.choice(len(rest), min(2, len(rest)), replace=False)]
    per = max(10, budget // max(1, len(chosen)))
    for pat in chosen:
        if sur.calls - t0 >= budget:
            break
        st, _, _ = _descend(sur, list(portfolio[pat]), rng, per, max_stages, cuts_only=True)
        portfolio[pat] = st
    best = sorted(portfolio.values(), key=lambda st: sur.loss(assignment_of(space, st)))
    return [list(st) for st in best[:2]]


def balanced_start(space: "Space", pattern: Sequence[int], costs: np.ndarray) -> list[Stage]:
    """Stages of ``pattern`` whose cuts minimise the slowest stage's summed unit time (linear partition)."""
    n, k = space.n_units, len(pattern)
    if k > n:
        return [Stage(0, n, int(pattern[0]))]
    pre = np.concatenate([np.zeros((costs.shape[0], 1)), np.cumsum(costs, axis=1)], axis=1)
    inf = math.inf
    best = np.full((k + 1, n + 1), inf)
    arg = np.zeros((k + 1, n + 1), dtype=np.intp)
    best[0, 0] = 0.0
    for j in range(1, k + 1):
        d = int(pattern[j - 1])
        i = np.arange(j, n - (k - j) + 1)  # every end of stage j at once; its start c in [j - 1, i)
        c = np.arange(j - 1, n - (k - j))
        vals = np.maximum(best[j - 1, c][None, :], pre[d, i][:, None] - pre[d, c][None, :])
        vals[c[None, :] >= i[:, None]] = inf
        m = np.argmin(vals, axis=1)  # the first minimum, as for one end at a time
        best[j, i], arg[j, i] = vals[np.arange(i.size), m], c[m]
    cuts, i = [], n
    for j in range(k, 0, -1):
        cuts.append(i)
        i = int(arg[j, i])
    bounds = [0, *reversed(cuts)]
    return [Stage(a, b, int(dv)) for a, b, dv in zip(bounds[:-1], bounds[1:], pattern) if b > a]


def inner_search(sur: Surrogate, starts: Sequence[Sequence[int]], rng: np.random.Generator, *,
                 evaluations: int = 1500, max_stages: int = 6, restarts: int = 2,
                 sweep: int = 0, portfolio: dict | None = None) -> list[tuple[float, list[int]]]:
    """Search the surrogate: descent from each start, then from random kicks of the best.

    Args:
        sur: the surrogate (its memo is shared by every descent).
        starts: start assignments (best measured, previous elites, baselines...).
        rng: randomness of move orders and kicks.
        evaluations: surrogate calls allowed (memo hits are free).
        max_stages: the most stages a placement may have.
        restarts: random restarts (a sampled stage list) after the starts.
        sweep: device patterns (of up to 4 stages, evenly cut) to start from as well, drawn
            at random among all of them; 0: none, -1: all.
        portfolio: pattern -> best stages found so far for it, kept by the caller between
            calls. Every pattern's entry is re-scored, the best few and a few random ones get
            their cuts refined (a third of ``evaluations``), and the best two join the starts.

    Returns:
        Every assignment the search predicted, best first, as (loss, assignment).
    """
    space = sur.space
    t_calls = sur.calls
    seeds = [stages_of(space, a) for a in starts]
    seeds = [s if len(s) <= max_stages else s[:0] for s in seeds]
    seeds = [s for s in seeds if s]
    if portfolio is not None:
        share = evaluations * 2 // 3 if not portfolio else evaluations // 3
        seeds += _refine_portfolio(sur, portfolio, rng, share, max_stages)
    seeds += [sample_stages(space, rng, max_stages) for _ in range(restarts)]
    if sweep:
        pats = patterns(space.n_devices, min(4, max_stages))
        chosen = range(len(pats)) if sweep < 0 or sweep >= len(pats) else rng.choice(len(pats), sweep, replace=False)
        seeds += [pattern_start(space, pats[int(j)], rng) for j in chosen]
    # phase 1: a short descent from every start; phase 2: the best few descend to the end
    per = max(20, evaluations // (2 * max(1, len(seeds))))
    results: list[tuple[float, list[Stage]]] = []
    for s in seeds:
        if sur.calls - t_calls >= evaluations:
            break
        st, loss, _ = _descend(sur, list(s), rng, min(per, evaluations - (sur.calls - t_calls)), max_stages,
                               cuts_only=True)
        results.append((loss, st))
    results.sort(key=lambda t: t[0])
    best: tuple[float, list[Stage]] | None = results[0] if results else None
    top = results[:3]
    per = max(20, (evaluations - (sur.calls - t_calls)) // (2 * max(1, len(top))))
    for _, st in top:
        if sur.calls - t_calls >= evaluations:
            break
        st, loss, _ = _descend(sur, st, rng, min(per, evaluations - (sur.calls - t_calls)), max_stages)
        if best is None or loss < best[0]:
            best = (loss, st)
    # kicks of the best until the budget is spent (iterated local search)
    stale = 0
    while best is not None and sur.calls - t_calls < evaluations and stale < 50:
        kicked = best[1]
        for _ in range(int(rng.integers(1, 3))):
            kicked = random_stage_move(space, kicked, rng, max_stages)
        before = sur.calls
        st, loss, _ = _descend(sur, kicked, rng, min(per, evaluations - (sur.calls - t_calls)), max_stages)
        if loss < best[0]:
            best = (loss, st)
        if sur.calls == before:  # everything near the best is known
            stale += 1
            sur.loss(assignment_of(space, sample_stages(space, rng, max_stages)))
        else:
            stale = 0
    if best is not None:  # the branches and single units next to each cut: moves stages cannot express
        _polish(sur, assignment_of(space, best[1]), max(60, evaluations // 10))
    ranked = sorted(((v, list(k)) for k, v in sur.memo.items() if math.isfinite(v)), key=lambda t: t[0])
    return ranked


def _polish(sur: Surrogate, assignment: list[int], budget: int, reach: int = 3) -> tuple[list[int], float]:
    """First-improvement descent over single-unit device changes within ``reach`` units of a
    device change (e.g. one branch of a residual block on the other DLA core, which no
    contiguous-stage move produces); returns (assignment, loss)."""
    space = sur.space
    t0 = sur.calls
    cur, cur_loss = list(assignment), sur.loss(assignment)
    improved = True
    while improved and sur.calls - t0 < budget:
        improved = False
        edges = [i for i in range(1, len(cur)) if cur[i] != cur[i - 1]]
        near = sorted({j for e in edges for j in range(e - reach, e + reach) if 0 <= j < len(cur)})
        for j in near:
            for d in range(space.n_devices):
                if d == cur[j] or not space.mask[j, d]:
                    continue
                if sur.calls - t0 >= budget:
                    return cur, cur_loss
                cand = list(cur)
                cand[j] = d
                loss = sur.loss(cand)
                if loss < cur_loss - 1e-12 * abs(cur_loss):
                    cur, cur_loss, improved = cand, loss, True
                    break
            if improved:
                break
    return cur, cur_loss
