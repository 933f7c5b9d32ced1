"""``optuna``: an Optuna study over the placement space: the placetune study's own Optuna study.

* The study is :class:`placetune.tuning.optuna_study.OptunaStudy`'s: same name as the
  placetune study, in the measurement database (``RDBStorage`` on the store's URL, or
  ``InMemoryStorage`` for an in-memory store), with named metrics and user attributes, so
  the dashboard shows the same study whichever agent measured it.
* One categorical parameter per decision unit, named after the unit, restricted to its
  allowed devices (units with a single allowed device are not parameters).
* TPE (``multivariate=True, group=True``) by default, single- and multi-objective
  (``latency+energy``: TPE handles both, and it is Optuna 5's default multi-objective
  sampler; NSGA-II needs more generations than a 100-300 evaluation budget gives);
  ``sampler="nsga2"``, ``"random"`` and ``"gp"`` on request.
* A placement that cannot be built or run (any measurement status but ``ok``) is a
  **PRUNED** trial with ``status`` and ``reason`` user attributes, never ``FAIL``: TPE
  ignores FAIL trials and would propose the same dead end again, while it ranks pruned
  trials below every complete one; the dashboard lists them without a penalty value
  stretching its axis.
* Warm start: the baselines are enqueued (``enqueue_trial(skip_if_exists=True)``) and
  every measurement already in the store for this cache scope (any study with the same
  model, machine and settings) is imported as a finished trial (user attribute
  ``imported``; written straight into Optuna's tables in one transaction), so a new study starts from what earlier runs learned without measuring
  it again. ``load_if_exists=True``: the same command resumes an interrupted run.
* The loop is ``study.optimize`` with a callback that stops at the budget, so Optuna's
  heartbeat (``heartbeat_interval``, RDB storage only) works when it is asked for. A stop
  request (Ctrl-C) ends the loop without a FAIL trial: the trial in flight is stored.
* An assignment the study already has is answered from the study (the FAQ's duplicate
  rule): it is a trial but not an ``evaluate()`` call.
"""

from __future__ import annotations

import importlib.util
import logging
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
import math

import optuna

from placetune.placement.placement import Placement

from .base import Agent, Budget, SearchResult, SearchRun, baseline_assignments, canonical, in_range
from placetune.errors import StoppedAfterMeasurement, StopRequested
from placetune.tuning.optuna_study import (OptunaStudy, add_trials, assignment_of, constraint_attrs, distributions,
                                           params_of, trial_attrs)
from placetune.tuning.optuna_study import storage_for as _storage_for

if TYPE_CHECKING:
    from placetune.tuning.evaluator import Evaluator
    from placetune.measurement import Measurement
    from placetune.placement.space import Space


__all__ = ["OptunaAgent", "SAMPLERS", "storage_for", "study_name_for"]

log = logging.getLogger(__name__)

#: Sampler names accepted by :class:`OptunaAgent`.
SAMPLERS = ("tpe", "nsga2", "random", "gp")
_ATTR_STATUS = "status"


def study_name_for(evaluator: "Evaluator", granularity: str = "fusion") -> str:
    """The Optuna study name of an evaluator's study: the placetune study's own name."""
    return evaluator.study_name


def storage_for(evaluator: "Evaluator", **rdb_kwargs: Any) -> "optuna.storages.BaseStorage":
    """Optuna storage in the evaluator's measurement database
    (:func:`placetune.tuning.optuna_study.storage_for` of its store)."""
    return _storage_for(evaluator.store, **rdb_kwargs)


class OptunaAgent(Agent):
    """Optuna study over unit devices (see the module docstring).

    Args:
        seed: sampler seed.
        granularity: decision units.
        sampler: ``tpe`` (default), ``nsga2``, ``random`` or ``gp`` (needs torch and scipy), or a sampler
            of your own, any ``optuna.samplers.BaseSampler`` (``CmaEsSampler(seed=0)``, ``QMCSampler``, a
            subclass), used as it is: ``seed``, ``n_startup_trials``, ``population_size`` and
            ``constant_liar`` then do not apply.
        n_startup_trials: TPE random trials before the model is used (imported and
            enqueued trials count).
        population_size: NSGA-II population.
        study_name: Optuna study name (default: :func:`study_name_for`).
        warm_start: import stored measurements of the same cache scope.
        enqueue_baselines: enqueue the baselines as the first trials.
        heartbeat_interval: seconds between heartbeats of a running trial (RDB storage
            only; a crashed run's trial then becomes FAIL after ``grace_period``).
        grace_period: see ``heartbeat_interval``.
        max_retry: with heartbeats, how often the stale trial of a crashed run is re-queued
            with its parameters (``RetryHeartbeatStaleTrialCallback``).
        constant_liar: TPE's constant liar (for several workers on one study).
        coordinator: fleet hooks (:class:`placetune.tuning.fleet_gate.TrialGate`): ``before_optimize(study)``
            and ``after_trial(study, trial)`` return False to stop; ``trial_started(study, trial)``
            is called once a trial's parameters are stored.

    Example:
        >>> from placetune.evaluator import Evaluator
        >>> from search import Budget
        >>> r = OptunaAgent(seed=0).run(Evaluator("seed-block", mode="pipeline"), Budget(20))
        >>> r.evaluations <= 20, r.extra["study_name"].endswith(":optuna:fusion")
        (True, True)
    """

    name = "optuna"

    def __init__(
        self,
        *,
        seed: int | None = None,
        granularity: str = "fusion",
        sampler: "str | optuna.samplers.BaseSampler" = "tpe",
        n_startup_trials: int = 10,
        population_size: int = 20,
        study_name: str | None = None,
        warm_start: bool = True,
        enqueue_baselines: bool = True,
        heartbeat_interval: int | None = None,
        grace_period: int | None = None,
        max_retry: int = 3,
        constant_liar: bool = False,
        coordinator: Any = None,
    ) -> None:
        super().__init__(seed=seed, granularity=granularity)
        if isinstance(sampler, optuna.samplers.BaseSampler):
            self._own_sampler: optuna.samplers.BaseSampler | None = sampler
            sampler = type(sampler).__name__
        elif sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {', '.join(SAMPLERS)} or an optuna.samplers.BaseSampler, "
                             f"not {str(sampler)[:60]!r}")
        else:
            self._own_sampler = None
            if sampler == "gp" and importlib.util.find_spec("torch") is None:
                raise ValueError("sampler 'gp' (Optuna's GPSampler) needs torch: pip install torch "
                                 "(a CPU build is enough), or pick tpe, nsga2 or random")
        #: the sampler's name (``tpe``...; the class name of a sampler given as an object)
        self.sampler: str = sampler
        in_range("n_startup_trials", int(n_startup_trials), 0)
        in_range("population_size", int(population_size), 2)  # NSGA-II crosses two parents
        in_range("max_retry", int(max_retry), 0)
        self.n_startup_trials = int(n_startup_trials)
        self.population_size = int(population_size)
        self.study_name = study_name
        self.warm_start = bool(warm_start)
        self.enqueue_baselines = bool(enqueue_baselines)
        self.heartbeat_interval = heartbeat_interval
        self.grace_period = grace_period
        self.max_retry = int(max_retry)
        self.constant_liar = bool(constant_liar)
        self.coordinator = coordinator

    # ------------------------------------------------------------------ pieces
    def make_sampler(self) -> "optuna.samplers.BaseSampler":
        """The configured sampler (the one given as an object, as it is: its own seed and options)."""
        if self._own_sampler is not None:
            return self._own_sampler
        # a study under constraints: Optuna 5 samplers read the values the objective sets with
        # Trial.set_constraint (constraints_func is deprecated there); older ones are given
        # constraints_func, which reads them from the trial's ``constraints`` user attribute
        old_api = not hasattr(optuna.trial.Trial, "set_constraint")
        cons: dict[str, Any] = {"constraints_func": constraint_values} \
            if getattr(self, "_constrained", False) and old_api else {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            if self.sampler == "tpe":
                return optuna.samplers.TPESampler(
                    seed=self.seed, multivariate=True, group=True, n_startup_trials=self.n_startup_trials,
                    constant_liar=self.constant_liar, **cons,
                )
            if self.sampler == "nsga2":
                return optuna.samplers.NSGAIISampler(
                    seed=self.seed, population_size=self.population_size, **cons
                )
            if self.sampler == "gp":
                return optuna.samplers.GPSampler(seed=self.seed)
            return optuna.samplers.RandomSampler(seed=self.seed)

    def study(self, evaluator: "Evaluator") -> "optuna.Study":
        """Create or load the Optuna study of this evaluator (nothing is measured)."""
        rdb: dict[str, Any] = {}
        if self.heartbeat_interval is not None:
            rdb["heartbeat_interval"] = int(self.heartbeat_interval)
            if self.grace_period is not None:
                rdb["grace_period"] = int(self.grace_period)
            if self.max_retry > 0:  # a crashed run's trial is re-queued for the next run or worker
                retry = getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None)
                kw = "heartbeat_stale_trial_callback" if retry is not None else "failed_trial_callback"
                retry = retry or optuna.storages.RetryFailedTrialCallback
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                    rdb[kw] = retry(max_retry=self.max_retry)
        with warnings.catch_warnings():  # heartbeat_interval is "experimental" in Optuna
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            storage = storage_for(evaluator, **rdb)
        if rdb and isinstance(storage, optuna.storages.InMemoryStorage):
            log.warning("heartbeats need an RDB storage; the in-memory store has none")
        name = self.study_name or study_name_for(evaluator, self.granularity)
        if name != evaluator.study_name:  # a study of the caller's own naming
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.create_study(storage=storage, sampler=self.make_sampler(), study_name=name,
                                           directions=list(evaluator.objective.directions), load_if_exists=True)
        return OptunaStudy(evaluator, self.granularity, storage=storage, sampler=self.make_sampler(),
                           backfill=self.coordinator is None).study

    @staticmethod
    def distributions(space: "Space") -> dict[str, "optuna.distributions.CategoricalDistribution"]:
        """Parameter name -> allowed devices, for units with more than one allowed device."""
        return distributions(space)

    @staticmethod
    def params_of(space: "Space", assignment: Sequence[int]) -> dict[str, str]:
        """Trial parameters of an assignment."""
        return params_of(space, assignment)

    @staticmethod
    def assignment_of(space: "Space", params: dict[str, Any]) -> list[int]:
        """Assignment of trial parameters (single-choice units take their only device)."""
        return assignment_of(space, params)

    # ------------------------------------------------------------------ warm start
    def _import(self, study: "optuna.Study", evaluator: "Evaluator", space: "Space") -> int:
        """Add every stored measurement of this cache scope that the study lacks, as a finished trial."""
        dists = self.distributions(space)
        have = {tuple(sorted(t.params.items())) for t in study.get_trials(deepcopy=False)}
        scope = evaluator.study.scope
        names = [s.name for s in evaluator.store.studies() if s.scope == scope]
        records = []
        seen_ids: set[int] = set()
        for name in names:
            for rec in evaluator.store.measurements(name):
                if rec.id not in seen_ids:
                    seen_ids.add(rec.id)
                    records.append(rec)
        trials = []
        for rec in records:
            for doc in (rec.requested, rec.realized):
                if not doc:
                    continue
                try:
                    p = Placement(evaluator.model, doc)
                except Exception:  # noqa: BLE001 - a record of another model version: skip it
                    continue
                a = space.from_placement(p)
                if not space.is_allowed(a) or space.to_placement(a).as_dict() != p.as_dict():
                    continue
                params = self.params_of(space, a)
                key = tuple(sorted(params.items()))
                if key in have:
                    continue
                have.add(key)
                m = rec.measurement
                m.extra = {**m.extra, "_id": rec.id, "cache_hit": True}
                trials.append(self._frozen(evaluator, params, {k: dists[k] for k in params},
                                           {**trial_attrs(m, p), "imported": True}, m))
        add_trials(study, evaluator.store, trials)
        return len(trials)

    @staticmethod
    def _frozen(evaluator: "Evaluator", params: dict[str, str], dists: dict[str, Any], attrs: dict[str, Any],
                m: "Measurement") -> "optuna.trial.FrozenTrial":
        values = _values(evaluator, m)
        state = optuna.trial.TrialState.COMPLETE if values is not None else optuna.trial.TrialState.PRUNED
        user, system = constraint_attrs(evaluator.objective, m) if values is not None else ({}, {})
        return optuna.trial.create_trial(state=state, params=params, distributions=dists, values=values,
                                         user_attrs={**attrs, **user}, system_attrs=system)

    # ------------------------------------------------------------------ run
    def search(self, evaluator: "Evaluator", budget: Budget) -> SearchResult:
        """Run (or resume) the study until the budget is spent.

        The agent writes its trials itself: an :class:`OptunaStudy` attached to the evaluator for the same
        Optuna study (``OptunaStudy(ev).attach()``, as a script does for every agent) is detached for the
        run, else each evaluation would be two trials, and attached again after it."""
        name = self.study_name or study_name_for(evaluator, self.granularity)
        sinks = evaluator.trial_log.sinks
        attached = [s for s in sinks if isinstance(s, OptunaStudy) and s.study.study_name == name]
        for s in attached:
            sinks.remove(s)
        try:
            return self._search(evaluator, budget)
        finally:
            if attached:
                evaluator.flush()
                sinks.extend(attached)

    def _search(self, evaluator: "Evaluator", budget: Budget) -> SearchResult:
        run = SearchRun(evaluator, budget, self.name, self.granularity)
        space = run.space
        self._constrained = bool(evaluator.objective.constraints)
        study = self.study(evaluator)
        dists = self.distributions(space)
        imported = self._import(study, evaluator, space) if self.warm_start else 0
        # the study's own earlier measurements (a resumed run) count for the result's best: answers, no budget
        run.recall()
        if self.enqueue_baselines:  # one of each pair that swaps DLA0 and DLA1 (identical cores)
            trials = study.get_trials(deepcopy=False)
            in_study = {tuple(sorted(t.params.items())) for t in trials}
            own = {tuple(sorted(t.params.items())) for t in trials
                   if not t.user_attrs.get("imported") and not t.user_attrs.get("repeat")}
            twins: set[tuple[int, ...]] = set()
            for a in baseline_assignments(space).values():
                if canonical(space, a) not in twins:
                    twins.add(canonical(space, a))
                    params = self.params_of(space, a)
                    key = tuple(sorted(params.items()))
                    if key in in_study and key not in own:
                        # Optuna knows it only from another study's import: measured for this study too
                        # (the store's answer, no build), so that no run reports a plan worse than it
                        if not run.exhausted:
                            run.evaluate(a)
                    else:
                        study.enqueue_trial(params, skip_if_exists=True)
        # answers the study already has (previous runs, imports): no evaluate() for them;
        # None: a placement that failed (its trial is pruned again)
        known: dict[tuple, list[float] | None] = {}
        violations: dict[tuple, list[float]] = {}  # constraint values of the known answers
        for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,
                                                          optuna.trial.TrialState.PRUNED)):
            known[tuple(sorted(t.params.items()))] = list(t.values) if t.values is not None else None
            if isinstance(t.user_attrs.get("constraints"), list):
                violations[tuple(sorted(t.params.items()))] = list(t.user_attrs["constraints"])
        size = 1
        for u in space.units:
            size *= len(u.choices)
        state: dict[str, Any] = {"trials": 0, "repeats": 0, "stopped": False, "error": None}

        def objective(trial: "optuna.Trial") -> Sequence[float]:
            params = {name: trial.suggest_categorical(name, d.choices) for name, d in dists.items()}
            if self.coordinator is not None:
                self.coordinator.trial_started(study, trial)
            key = tuple(sorted(params.items()))
            state["trials"] += 1
            if key in known:
                values = known[key]
                state["repeats"] += 1
                # answered from the study's earlier trial: nothing built, no request stored (a fleet's
                # budget counts builds and cache hits, as one machine's counts its requests)
                trial.set_user_attr("agent", self.name)
                trial.set_user_attr("repeat", True)
            else:
                state["repeats"] = 0
                a = self.assignment_of(space, params)
                try:
                    m = run.evaluate(a, finish=True)
                except StopRequested:  # Ctrl-C while the sampler proposed it: nothing measured
                    state["stopped"] = True
                    trial.set_user_attr("status", "stopped")
                    raise optuna.TrialPruned("stopped before measuring") from None
                except StoppedAfterMeasurement as stop:  # stored, then the run stops: the trial is told it
                    state["error"] = stop  # (a fleet's other workers count it), then the stop is raised
                    m = stop.measurement
                if m.extra.get("_id") is None:  # waiting in a batch: written now, so that the trial names
                    evaluator.flush()  # its measurement (the plan exported from it names this trial)
                values = _values(evaluator, m)
                known[key] = values
                if self._constrained and values is not None:
                    violations[key] = finite_violations(evaluator.objective, m)
                for k, v in trial_attrs(m, space.to_placement(a)).items():
                    trial.set_user_attr(k, v)
                trial.set_user_attr("agent", self.name)
            if values is None:
                raise optuna.TrialPruned("the placement cannot be built or run")
            if key in violations:
                trial.set_user_attr("constraints", violations[key])
                if hasattr(trial, "set_constraint"):  # Optuna >= 5
                    for c, v in zip(evaluator.objective.constraints, violations[key]):
                        trial.set_constraint(c.text, v)
            return values

        def stop(study: "optuna.Study", trial: "optuna.trial.FrozenTrial") -> None:
            if (state["stopped"] or state["error"] is not None or run.exhausted or len(known) >= size
                    or state["repeats"] > 200 or evaluator.stop_requested):
                study.stop()
            elif self.coordinator is not None and not self.coordinator.after_trial(study, trial):
                study.stop()

        if not run.exhausted and len(known) < size and (
            self.coordinator is None or self.coordinator.before_optimize(study)
        ):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                study.optimize(objective, timeout=budget.seconds, callbacks=[stop])
        if state["error"] is not None:
            raise state["error"]
        if state["repeats"] > 200:
            run.notes.append("stopped early: the sampler proposed 200 known assignments in a row")
        if state["stopped"]:
            raise StopRequested("stop requested: the evaluation in flight finished and is stored")
        return run.result(study_name=study.study_name, trials=len(study.trials), imported=imported,
                          sampler=self.sampler)


def constraint_values(trial: "optuna.trial.FrozenTrial") -> list[float]:
    """``constraints_func`` of the samplers: the trial's constraint values (``<= 0``: holds), as the
    objective stored them; a trial without them (pruned) counts as violating by 1."""
    vals = trial.user_attrs.get("constraints")
    return [float(v) for v in vals] if isinstance(vals, list) and vals else [1.0]


def finite_violations(objective: Any, m: "Measurement") -> list[float]:
    """The objective's constraint values of a measurement, a missing value as a large finite one."""
    return [min(v, 1e30) for v in objective.violations(m)]


def _values(evaluator: "Evaluator", m: "Measurement") -> list[float] | None:
    """Objective values of a measurement; None when it failed or a value is not finite."""
    vals = evaluator.objective.values(m)
    if vals is None or not all(math.isfinite(v) for v in vals):
        return None
    return [float(v) for v in vals]
