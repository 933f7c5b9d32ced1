"""``guided``: learn the device from the builds the run pays for, and build only what the model
predicts will pay off; notice when the model is wrong and still converge.

Every real evaluation (an engine build and timing on a Jetson: 1-2 minutes) is precious; a
simulator evaluation costs about a millisecond. The agent works in rounds:

1. **fit** multiplicative corrections of the simulator (GPU, DLA, boundary, loadable,
   contention, per op class and per layer, engine overhead; :mod:`placetune.calibration`) to
   the measurements of this run, starting from the built-in platform: the agent never reads
   the backend's own device profile. On top of it, a **residual model** of what such scales
   cannot express, on the realised placement's structure (segment lengths and devices, cuts,
   misaligned reformats, convolutions fed across a cut, the devices' overlap:
   :mod:`search.residual`). The model it trusts this round is the candidate (per-layer
   profile, scales only, or the simulator as it is, each with its residuals) that predicts
   left-out plans best (:mod:`search.model_choice`);
2. **search the model** with thousands of cheap evaluations (:func:`search.surrogate.inner_search`:
   first-improvement descent over stage moves of :mod:`placetune.placement.stages`, from the best
   measured placements, the previous round's best predictions and random restarts);
3. **pick a few new, diverse candidates**: the best predicted one, then the most optimistic
   (mean - ``kappa`` x spread over posterior draws of the model) of other stage-device patterns,
   and model-ranked neighbours of the best measured plan (local search on the device;
   :mod:`search.picks`); while the model's recent picks miss their predictions (median error
   over :data:`POOR_ERROR`) most picks are such neighbours, and after two rounds in a row without
   a gain the **trust region** (units that may differ from a top measured plan) halves;
   Where the failed builds' length rule leaves exactly one loadable length untested (built ``s``
   layers, failed ``s + 2``), one pick of one round is the model's best plan of that length, if the
   model predicts it better than any plan the rules allow (:mod:`search.gaps`);
4. **evaluate them** on the backend (:meth:`search.base.SearchRun.evaluate`), and repeat.

A settled search costs less: past :data:`CHOOSE_EVERY_FROM` measurements the model choice runs
every :data:`CHOOSE_EVERY` rounds, twice as far apart each time it keeps the model (up to
:data:`CHOOSE_EVERY_MAX`), and a round whose model predicts the previous round's best predictions
as the previous model did (within :data:`HELD`) gets a quarter of the inner-search effort.

The first round measures the study's baselines (:func:`placetune.tuning.baselines.study_baselines`)
and the uncorrected simulator's best predictions; a resumed study's run (``Budget.recall``) starts
instead from every stored ok measurement of the study, answered without a build. Progress lines show the prediction next to
each measurement and the model's current cross-validated error. The search space is the run's
space (``granularity``, default ``stages``): with ``fusion`` or ``layer`` the same stage moves
apply, ``scope:N`` coarsens them. Multi-objective runs (``latency+energy``) are guided by the
primary objective; the Pareto front is kept from what was measured.

Each build of a network picks TensorRT tactics anew (~1-3 % apart on a Jetson; the simulated
Jetson draws a factor per build with ``noise`` > 0), so the best of many single builds tends to
be a lucky one. With a budget of at least :data:`REMEASURE_MIN_BUDGET` evaluations the agent
builds a close contender of the best again every other round and keeps the last ``remeasure``
(default 3) evaluations back: when the search is done it builds its top ``remeasure`` measured
candidates (distinct realisations) once more each (:mod:`search.rebuilds`,
:meth:`search.base.SearchRun.remeasure`; the store then holds each one's median over its builds,
:meth:`placetune.tuning.evaluator.Evaluator.remeasure`) and re-ranks them by these combined
figures; the result's best and notes say so ("re-measured the top 3: ..."). It re-measures
nothing with a smaller or no evaluation budget, with ``remeasure=0``, or on a simulated backend
without noise (a rebuild gives the same figures). When the best was not re-measured and looks
far better than its prediction (possibly a lucky one) the notes say so.

Once the run has converged, its rounds build only what can still change the answer (plans whose
optimistic prediction beats the best by over 1 %, leaders the noise cannot yet order) and the run
stops when none remains, where the budget says ``settle`` (:mod:`search.later`; ``placetune tune``'s default).
"""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from collections.abc import Sequence

from placetune import PlacetuneError
from placetune.errors import StopRequested
from placetune.measurement import Measurement

from .feasibility import Feasibility
from .base import (Agent, Budget, BudgetExhausted, SearchResult, SearchRun, baseline_assignments, canonical,
                   project)
from .blindspots import BlindSpots
from .drift import Drift
from .gaps import Gaps
from .later import LaterBuilds
from .picks import Picks
from .rebuilds import Rebuilds
from .surrogate import Fit, RunObservations, Surrogate, fit_ensemble, inner_search
from placetune.tuning.baselines import study_baselines
from . import model_choice
from .model_choice import Candidate

if TYPE_CHECKING:
    from placetune.tuning.evaluator import Evaluator

__all__ = ["GuidedAgent", "REMEASURE_MIN_BUDGET"]

#: the smallest evaluation budget of which the guided agent keeps evaluations back to re-measure
REMEASURE_MIN_BUDGET = 20
#: the model's recent picks missing their predictions by more than this (median |log ratio|) make
#: it "poor": most of a round's builds then go to model-ranked neighbours of the best measured
POOR_ERROR = 0.03
#: picks the recent error is the median of
_RECENT = 6
#: a round improves the best measured when it gains more than this (relative)
TRUST_GAIN = 0.003
#: the narrowest trust region, in units that differ from a top measured assignment
MIN_RADIUS = 4
#: with more measurements than this, the model is chosen by cross-validation every CHOOSE_EVERY rounds
#: (in between, the chosen one is refitted): the choice settles, its cost grows with the measurements.
#: Each choice that keeps the model doubles the interval, up to CHOOSE_EVERY_MAX; a change resets it
CHOOSE_EVERY_FROM = 30
CHOOSE_EVERY = 4
CHOOSE_EVERY_MAX = 16
#: a round's model "held" when it predicts the previous round's 8 best predictions within this
#: (relative) of the previous model; its inner search then gets inner_evals / _HELD_SHARE
#: evaluations (at least _HELD_MIN)
HELD = 0.002
_HELD_SHARE = 4
_HELD_MIN = 60
#: what the live bar says while the agent fits its model and searches it for the next builds (seconds
#: without a build; short enough for an 80-column terminal)
PICKING = "predicting"

log = logging.getLogger(__name__)


class GuidedAgent(Agent):
    """Model-guided search: fit simulator corrections, search the corrected simulator, build the best few.

    Args:
        seed: seed of every random choice (inner search, bootstrap resamples).
        granularity: decision units of the run (default ``stages``).
        batch: new candidates evaluated per round (fewer when the budget is smaller).
        inner_evals: simulator evaluations of each round's inner search (1-3 ms each on a
            laptop core for ResNet-50 in pipeline mode; the first round, on the uncorrected
            simulator, gets eight times as many and refines the cuts of every device pattern).
        ensemble: bootstrap refits for the spread of predictions (0: none).
        kappa: weight of the spread in the optimistic score.
        max_stages: the most stages of an inner-search placement (default 6 in pipeline mode,
            10 otherwise).
        remeasure: with an evaluation budget of at least :data:`REMEASURE_MIN_BUDGET`, build
            the top this many measured candidates once more each at the end of the run, out of
            the budget, and rank them by the median over their builds (0: never; see the module
            docstring).

    Example:
        >>> from placetune.evaluator import Evaluator
        >>> from search import Budget
        >>> ev = Evaluator("seed-block", mode="pipeline", precision="int8", objective="throughput")
        >>> GuidedAgent(seed=0, inner_evals=200).run(ev, Budget(10)).evaluations
        10
    """

    name = "guided"

    def __init__(self, *, seed: int | None = None, granularity: str = "stages", batch: int = 3,
                 inner_evals: int = 600, ensemble: int = 4, kappa: float = 1.0,
                 max_stages: int | None = None, remeasure: int = 3) -> None:
        super().__init__(seed=seed, granularity=granularity)
        if int(batch) < 1:
            raise ValueError(f"batch must be >= 1, not {batch}")
        if int(inner_evals) < 10:
            raise ValueError(f"inner_evals must be >= 10, not {inner_evals}")
        if int(ensemble) < 0 or float(kappa) < 0:
            raise ValueError("ensemble and kappa must be >= 0")
        if max_stages is not None and int(max_stages) < 1:
            raise ValueError(f"max_stages must be >= 1, not {max_stages}")
        if isinstance(remeasure, bool) or int(remeasure) < 0:
            raise ValueError(f"remeasure must be an integer >= 0, not {remeasure}")
        self.batch = int(batch)
        self.inner_evals = int(inner_evals)
        self.ensemble = int(ensemble)
        self.kappa = float(kappa)
        self.max_stages = None if max_stages is None else int(max_stages)
        self.remeasure = int(remeasure)

    # ------------------------------------------------------------------ run
    def search(self, evaluator: "Evaluator", budget: Budget) -> SearchResult:
        """Search until the budget is spent."""
        run = SearchRun(evaluator, budget, self.name, self.granularity)
        state = _State(run, self)
        top = self.remeasure_count(evaluator, budget)
        run.reserve = top  # held back from the search for the re-measurements
        state.rebuilds = top > 0
        try:
            try:
                state.search()
            except BudgetExhausted:
                pass
            run.reserve = 0
            if top:
                state.remeasure_top(top, once=state.recalled > 0)
        except StopRequested as exc:  # Ctrl-C / SIGTERM: the drift seen so far goes with the interrupted run
            state.estimate_drift()
            note = state.drift_note()
            if note:
                exc.notes.append(note)
            raise
        state.finish()
        return run.result(rounds=state.rounds, cv_error=state.cv_error, model=state.model.name, fits=state.cv_history,
                          inner_evaluations=state.inner_calls, inner_rate=state.inner_rate,
                          remeasured=state.remeasured)

    def remeasure_count(self, evaluator: "Evaluator", budget: Budget) -> int:
        """Top candidates the run re-measures at its end: ``remeasure`` with an evaluation budget of
        at least :data:`REMEASURE_MIN_BUDGET` where a rebuild can give other figures, else 0."""
        n = budget.evaluations
        if not self.remeasure or n is None or int(n) < REMEASURE_MIN_BUDGET or not evaluator.rebuilds_vary:
            return 0
        return self.remeasure


class _State(Rebuilds, BlindSpots, Drift, LaterBuilds, Picks, Gaps):
    """One guided run's bookkeeping: what was measured and predicted, the model, the trust region and
    the candidate pool (what a round picks from it: :class:`search.picks.Picks`)."""

    band_floor = POOR_ERROR  # search.blindspots: no model is trusted to tell plans closer than this apart

    def __init__(self, run: SearchRun, agent: GuidedAgent) -> None:
        self.run = run
        self.agent = agent
        self.ev = run.evaluator
        self.space = run.space
        self.rng = np.random.default_rng(agent.seed)
        self.max_stages = agent.max_stages or (6 if self.ev.settings.mode == "pipeline" else 10)
        self.measured: dict[tuple[int, ...], float] = {}
        self.canonical: set[tuple[int, ...]] = set()
        self.built: set[str] = set()
        self._realised: dict[tuple[int, ...], str] = {}
        self.measurements: list[Measurement] = []
        self.predicted: dict[tuple[int, ...], float] = {}
        self.elites: list[list[int]] = []
        self.portfolio: dict = {}  # device pattern -> best stages found for it (refined every round)
        self.fit = Fit()
        self.observations = RunObservations(self.ev)  # each measurement read once for the refits
        self.model = Candidate("nominal", None)  # this round's model of the device (search.model_choice)
        self.chosen_at = 0  # the round the model was last chosen by cross-validation
        self.choose_every = CHOOSE_EVERY  # rounds between two choices (once past CHOOSE_EVERY_FROM measurements)
        self.errors: list[float] = []  # |log(measured / predicted)| of each pick (time-like), in order
        self.radius = self.space.n_units  # trust region: units that may differ from a top measured plan
        self.rebuilds = False  # build close contenders again during the run (set by the agent's run)
        self.rebuilt = 1  # the last round that built a contender again
        self.misses = 0  # rounds in a row that did not improve the best measured
        self.rounds = 0
        self.watched: dict[tuple[int, ...], float] = {}  # the last round's best predictions (model_held)
        self.cv_history: list[tuple[int, float | None]] = []
        self.inner_calls = 0
        self.inner_seconds = 0.0
        self.remeasured = 0  # top candidates built again at the end of the run
        self.feasibility = Feasibility(self.ev.model, self.space, self.ev.settings.mode == "pipeline")  # what failed to build, and rules against it
        self.explored: list[tuple[int, ...]] = []  # exploration builds (search.blindspots)
        self.grown = False  # an exploration build surprised the model: predictions get a local correction
        self.build_log: dict[str, list[tuple[int, float]]] = {}  # realisation -> (time, log |loss|) per build
        self.beta, self.beta_se = 0.0, None  # drift per build (search.drift)
        self.drift_checked = 0  # builds done when the reference was last built
        self.recalled = 0  # the study's stored measurements the run started from (Budget.recall)
        self.gap_rng = self.rng.spawn(1)[0]  # the gap test's search (search.gaps): the rounds' draws stay as they were
        self.gap_tested: int | None = None  # the loadable length a build tested (search.gaps)

    @property
    def inner_rate(self) -> float | None:
        """Simulator evaluations per second of the inner searches."""
        return self.inner_calls / self.inner_seconds if self.inner_seconds > 0 else None

    # ---------------------------------------------------------------- steps
    def canon(self, a: list[int]) -> tuple[int, ...]:
        """Key of an assignment up to relabelling the DLA cores (identical hardware: DLA0 <-> DLA1)."""
        return canonical(self.space, a)

    @property
    def recent_error(self) -> float | None:
        """Median error of the model's last picks (out of sample: predicted before they were measured).
        A run that started from the study's stored measurements (:meth:`recall`) and has not yet picked
        two plans of its own takes its model's cross-validated error (also out of sample: plans left out)."""
        last = self.errors[-_RECENT:]
        if len(last) < 2 and self.recalled:
            return self.model.cv_error
        return float(np.median(last)) if len(last) >= 2 else None

    def recall(self) -> None:
        """Start from the study's stored ok measurements (a resumed study: :attr:`Budget.recall`): the model
        is fitted on all of them, and none is proposed again (:meth:`search.base.SearchRun.recall`)."""
        for a, m in self.run.recall():
            self.learn(a, m)
            self.recalled += 1
        log.info("guided: started from the study's %d stored measurements", self.recalled)

    @property
    def poor(self) -> bool:
        """True while the model's recent picks missed their predictions by more than :data:`POOR_ERROR`."""
        err = self.recent_error
        return err is None or err > POOR_ERROR

    def near(self, a: list[int], anchors: Sequence[np.ndarray] | None = None) -> bool:
        """True when ``a`` lies in the trust region: at most :attr:`radius` units differ from one of
        the three best measured assignments (``anchors``, when the caller has them as arrays)."""
        if self.radius >= self.space.n_units:
            return True
        if anchors is None:
            anchors = [np.asarray(b) for b in self.top_measured(3)]
        x = np.asarray(a)
        return any(int((x != b).sum()) <= self.radius for b in anchors)

    def distance(self, a: Sequence[int], b: Sequence[int]) -> int:
        """Units on other devices, DLA cores relabelled alike (twins are 0 apart)."""
        return int((np.asarray(self.canon(list(a))) != np.asarray(self.canon(list(b)))).sum())

    def top_measured(self, n: int) -> list[list[int]]:
        return [list(k) for k, _ in sorted(self.measured.items(), key=lambda t: t[1])[:n]]

    def realised(self, a: Sequence[int]) -> str:
        """Key of the placement the backend would build (two assignments may realise alike)."""
        key = tuple(int(x) for x in a)
        out = self._realised.get(key)
        if out is None:
            try:
                out = self.ev.realise(self.space.to_placement(list(key))).realized.key
            except PlacetuneError:
                out = "infeasible:" + ",".join(map(str, key))
            self._realised[key] = out
        return out

    def seen(self, a: list[int]) -> bool:
        """True when the assignment, its DLA-relabelled twin or its realisation was measured."""
        return (tuple(a) in self.measured or self.canon(a) in self.canonical
                or self.realised(a) in self.built or self.realised(list(self.canon(a))) in self.built)

    def learn(self, a: list[int], m: Measurement) -> float:
        """Record what ``m`` says of ``a`` (its loss; it, its twin and its realisation measured; the model's
        data; the feasibility rules): a plan built in this run or recalled from the study. Returns the loss."""
        got = self.measured[tuple(a)] = self.run.loss(m)
        self.canonical.add(self.canon(a))
        self.built.add(self.realised(a))
        if m.ok:
            self.measurements.append(m)
        self.feasibility.observe(a, m)
        return got

    def evaluate(self, a: list[int], predicted: float | None) -> Measurement:
        """Evaluate on the backend, with the prediction and the fit's error on the progress line."""
        note: dict[str, Any] = {}
        if predicted is not None and math.isfinite(predicted) and abs(predicted) < 1e12:  # not a penalised one
            note["predicted"] = predicted if self.run.objective.direction == "minimize" else -predicted
        if self.cv_error is not None:
            note["cv_error"] = self.cv_error
        t = self.run.evaluations
        m = self.run.evaluate(a, annotation=note or None)
        key = tuple(a)
        got = self.learn(a, m)
        if m.ok and not m.extra.get("cache_hit"):
            self.log_build(key, got, t)
        elif m.ok and self.realised(key) not in self.build_log:
            # answered without a build: a baseline the study built just before the agent ran (or a plan
            # an earlier run built). Its builds are in the store's median, so the drift fit and the final
            # ranking must see them too: ranked on its later builds only, a baseline loses to plans
            # ranked on all theirs (their lucky first builds included)
            for value in self.builds(key):
                self.log_build(key, value, t)
        if predicted is not None and math.isfinite(predicted) and abs(predicted) < 1e12 and math.isfinite(got) \
                and predicted * got > 0:
            self.errors.append(abs(math.log(abs(got) / abs(predicted))))
        if predicted is not None:
            self.predicted[key] = predicted
        log.info("guided: measured %s predicted %s", self.run.objective.value(m), note.get("predicted"))
        return m

    def search_surrogate(self, sur: Surrogate, starts: list[list[int]], *, evaluations: int,
                         sweep: int) -> list[tuple[float, list[int]]]:
        t0 = time.perf_counter()
        before = sur.calls
        ranked = inner_search(sur, starts, self.rng, evaluations=evaluations, max_stages=self.max_stages,
                              sweep=sweep, portfolio=self.portfolio)
        self.inner_calls += sur.calls - before
        self.inner_seconds += time.perf_counter() - t0
        return ranked

    def search(self) -> None:
        run, space = self.run, self.space
        # the study's baselines (a concurrent study's: the naive plans the model cannot rule out)
        first = [project(space, space.from_placement(b.placement)) for b in study_baselines(self.ev)
                 if b.measured_by_study]
        base = first + [list(a) for a in baseline_assignments(space).values()]
        nominal = Surrogate(self.ev, space, run.objective, None, fails=self.feasibility.fails)
        self.ev.working(PICKING)  # seconds of the simulator's predictions, before the first pick is built
        ranked = self.search_surrogate(nominal, base, evaluations=8 * self.agent.inner_evals, sweep=0)
        self.elites = [a for _, a in ranked[:8]]
        if run.budget.recall:
            self.recall()
        if self.recalled < 3:  # a resumed study's model starts from its measurements, not the simulator's bets
            # round 0: the baselines, then the uncorrected simulator's best predictions (a baseline that
            # failed to build has taught the feasibility rules something by then)
            remaining = run.remaining
            n_tops = 2 if remaining is None or remaining > 6 else 1
            for a in first:
                if not self.seen(a):
                    self.evaluate(a, nominal.loss(a))
            for a, _ in self.select(nominal, Fit(), ranked, n_tops):
                if not self.seen(a):
                    self.evaluate(a, nominal.loss(a))
        self.rounds = 1
        while not run.exhausted:
            self.round()

    def round(self) -> None:
        run, space = self.run, self.space
        self.rounds += 1
        self.ev.working(PICKING)  # the fit, the model choice and its search: seconds without a build
        self.fit = fit_ensemble(self.ev, self.measurements, ensemble=self.agent.ensemble,
                                seed=None if self.agent.seed is None else self.agent.seed + self.rounds,
                                cross_validate=0, cache=self.observations)  # the model choice cross-validates
        self.choose()
        self.cv_history.append((len(self.measurements), self.cv_error))
        sur = Surrogate(self.ev, space, run.objective, self.model.profile, self.model.correction,
                        fails=self.feasibility.fails)
        sur.local = self.local_residual(sur)  # what the model misses where an exploration build surprised it
        sur.memo.clear()
        best_measured = self.top_measured(3)
        held = self.model_held(sur)
        effort = self.agent.inner_evals if not held else max(_HELD_MIN, self.agent.inner_evals // _HELD_SHARE)
        ranked = self.search_surrogate(sur, best_measured + self.elites[:3], evaluations=effort, sweep=0)
        self.elites = [a for _, a in ranked[:8]]
        self.watched = {tuple(a): v for v, a in ranked[:8]}
        if self.later_round(sur, ranked):  # converged: only what can still change the answer (search.later)
            self.ev.flush()
            self.correct_measured()
            return
        k = self.agent.batch if run.remaining is None else max(1, min(self.agent.batch, run.remaining))
        explore = self.explore_round(self.rounds, k)  # a build where the model cannot tell plans apart
        k -= explore
        # steps of real local search (the model's favourite unmeasured neighbours of the best
        # measured): one per round, more while the model's picks miss their predictions
        n_local = 0 if k == 1 else (max(1, k - 1) if self.poor and k > 2 else 1)
        again = None
        if self.rebuilds and k >= 2 and self.reference_due() and self.top_measured(1):  # the drift's reference
            again = tuple(self.top_measured(1)[0])
        elif self.rebuilds and k >= 2 and self.rounds >= self.rebuilt + 2:
            again = self.contest()
        if again is not None:  # a build of a close contender instead of a new candidate (every other round)
            self.rebuilt = self.rounds
            self.drift_checked = run.evaluations  # any plan built again tells the drift
            self.rebuild(again)
            k -= 1
            n_local = min(n_local, max(0, k - 1))
        picks = self.select(sur, self.fit, ranked, k - n_local)
        for _ in range(n_local if picks else k):
            step = self.local_step(sur, [a for a, _ in picks])
            if step is not None:
                picks.append(step)
        test = self.gap_pick(sur, ranked, best_measured + self.elites[:3], effort)  # the one untested length
        if test is not None:  # takes the place of the round's last pick
            picks = picks[:k - 1] + [test] if len(picks) >= k else picks + [test]
        probe = self.blind_pick(sur, ranked, [a for a, _ in picks]) if explore else None
        if probe is not None:
            picks.append(probe)
            self.explored.append(tuple(probe[0]))
        if not picks:  # everything the model likes was measured: explore
            for _ in range(200):
                a = space.sample(self.rng)
                if not self.seen(a) and not self.feasibility.fails(a):
                    picks = [(a, sur.loss(a))]
                    break
            else:
                run.notes.append("stopped early: no unmeasured placement found")
                raise BudgetExhausted()
        log.info("guided round %d: fit on %d measurements, cv error %s, recent error %s, radius %d; %d candidates",
                 self.rounds, self.fit.n, self.cv_error, self.recent_error, self.radius, len(picks))
        before = min(self.measured.values(), default=math.inf)
        for a, pred in picks:
            self.evaluate(a, pred)
        if probe is not None:
            self.surprised(tuple(probe[0]))
        self.ev.flush()  # the round's evaluations are stored (and shown) before the next fit
        self.correct_measured()
        self.trust(before)

    def model_held(self, sur: Surrogate) -> bool:
        """True when this round's model predicts the previous round's best predictions within
        :data:`HELD` of what the previous model predicted: its search would walk the same
        ground again, so it gets a :data:`_HELD_SHARE`-th of the effort (the trust region, the
        picks and the local steps are unchanged). Judged on a separate surrogate, so that the
        search itself starts as it would."""
        if not self.watched:
            return False
        probe = Surrogate(self.ev, self.space, self.run.objective, self.model.profile, self.model.correction)
        for a, before in self.watched.items():
            now = probe.loss(list(a))
            if not (math.isfinite(now) and math.isfinite(before)) or abs(now - before) > HELD * abs(before):
                return False
        return True

    def trust(self, before: float) -> None:
        """Resize the trust region after a round: wider when it improved the best measured, half as
        wide after two rounds in a row that did not while the model's picks miss their predictions."""
        after = min(self.measured.values(), default=math.inf)
        if math.isfinite(after) and after < before - TRUST_GAIN * abs(before):
            self.misses = 0
            self.radius = min(self.space.n_units, 2 * self.radius)
            return
        self.misses += 1
        if self.misses >= 2 and self.poor:
            self.misses = 0
            self.radius = max(MIN_RADIUS, self.radius // 2)

    def choose(self) -> None:
        """This round's model: the candidate physical model (per-layer profile, scales, nominal)
        with its residual correction that best predicts left-out plans (:mod:`search.model_choice`)."""
        seed = None if self.agent.seed is None else self.agent.seed * 7919 + self.rounds
        n = len(self.measurements)
        if n < 3:
            self.model = Candidate("profile", self.fit.profile)
            return
        if n > CHOOSE_EVERY_FROM and self.rounds - self.chosen_at < self.choose_every:  # the last choice, refitted
            self.model = model_choice.refit(self.ev, self.run.objective, self.measurements, self.fit.profile, self.model.name,
                               ensemble=max(1, self.agent.ensemble), seed=seed, cv_error=self.model.cv_error,
                               cache=self.observations)
            return
        self.chosen_at = self.rounds
        before = self.model.name
        self.model, cands = model_choice.choose(self.ev, self.run.objective, self.measurements, self.fit.profile,
                                   ensemble=max(1, self.agent.ensemble), seed=seed, cache=self.observations)
        if n > CHOOSE_EVERY_FROM:  # a choice that holds is checked less often; a change, sooner again
            self.choose_every = min(CHOOSE_EVERY_MAX, 2 * self.choose_every) if self.model.name == before \
                else CHOOSE_EVERY
        log.info("guided round %d: model %s (cross-validated errors %s)", self.rounds, self.model.name,
                 {c.name: c.cv_error for c in cands})

    @property
    def cv_error(self) -> float | None:
        """Cross-validated error of this round's model (its physical profile's when not estimated)."""
        return self.model.cv_error if self.model.cv_error is not None else self.fit.cv_error

    def candidates(self, items: Sequence[tuple[float, list[int]]], limit: int, *,
                   anchors: Sequence[np.ndarray] | None = None,
                   per_pattern: int | None = None) -> list[tuple[float, list[int]]]:
        """Up to ``limit`` of ``items`` (prediction, assignment), in their order, worth a build: a finite
        prediction, unmeasured (nor its twin or realisation), one per DLA-relabelled twin, not predicted
        to fail to build, within the trust region around ``anchors`` when given, and at most
        ``per_pattern`` per stage-device pattern when given (the picks' and :mod:`search.later`'s pool)."""
        out: list[tuple[float, list[int]]] = []
        keys: set[tuple[int, ...]] = set()
        per: dict[tuple[int, ...], int] = {}
        for v, a in items:
            if len(out) >= limit:
                break
            c = self.canon(a)
            if not math.isfinite(v) or c in keys or self.seen(a) \
                    or (anchors is not None and not self.near(a, anchors)) or self.feasibility.fails(a):
                continue
            if per_pattern is not None:
                pat = tuple(s.device for s in self.space.stages(list(c)))  # self.pattern(a), canonical once
                if per.get(pat, 0) >= per_pattern:
                    continue
                per[pat] = per.get(pat, 0) + 1
            keys.add(c)
            out.append((v, a))
        return out

    def finish(self) -> None:
        """Note the failed builds and what they taught, and a best measurement much better than its
        prediction (a possibly lucky one), unless it was re-measured."""
        for line in (self.feasibility.note(self.run.evaluations), self.gap_note(), self.drift_note()):
            if line:
                self.run.notes.append(line)
        best = self.run.best_assignment
        if best is None or len((self.run.best_measurement.extra or {}).get("builds") or ()) >= 2:
            return
        key = tuple(best)
        pred, got = self.predicted.get(key), self.measured.get(key)
        if pred is not None and got is not None and math.isfinite(pred) and math.isfinite(got) and pred != 0:
            err = abs(got - pred) / abs(pred)
            if err > 0.1 and got < pred:
                self.run.notes.append(f"the best measurement is {100 * err:.0f}% better than the model predicted; "
                                      "measure it again before relying on it")
