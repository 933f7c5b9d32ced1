"""``optuna``: an Optuna study over the placement space, stored next to the measurements.

* One categorical parameter per decision unit, named after the unit, restricted to its
  allowed devices (units with a single allowed device are not parameters).
* TPE (``multivariate=True, group=True``) by default, single- and multi-objective
  (``latency+energy``: TPE handles both, and it is Optuna 5's default multi-objective
  sampler; NSGA-II needs more generations than a 100-300 evaluation budget gives);
  ``sampler="nsga2"``, ``"random"`` and ``"gp"`` on request.
* A placement that cannot be built or run (any measurement status but ``ok``) is a
  **COMPLETE** trial that violates a constraint (``constraint > 0``), never ``FAIL``: TPE
  ignores FAIL trials and would propose the same dead end again. Its value is a finite
  penalty (:data:`PENALTY` for minimised objectives, 0 for maximised ones); the
  constraint also goes to ``trial.user_attrs["constraint"]``. Optuna >= 5 records it
  with ``Trial.set_constraint``; older versions read it back through ``constraints_func``.
* Warm start: the baselines are enqueued (``enqueue_trial(skip_if_exists=True)``) and
  every measurement already in the store for this cache scope (any study with the same
  model, machine and settings) is imported with ``add_trial``, so a new study starts from
  what earlier runs learned without measuring it again.
* Storage: the study lives in the measurement database (``optuna.storages.RDBStorage`` on
  the store's URL: SQLite file or PostgreSQL), or in Optuna's ``InMemoryStorage`` for an
  in-memory store. ``load_if_exists=True``: the same command resumes an interrupted run.
* The loop is ``study.optimize`` with a callback that stops at the budget, so Optuna's
  heartbeat (``heartbeat_interval``, RDB storage only) works when it is asked for.
* An assignment the study already has is answered from the study (the FAQ's duplicate
  rule): it is a trial but not an ``evaluate()`` call.
"""

from __future__ import annotations

import logging
import math
import warnings
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from placetune.placement.placement import Placement

from .base import Agent, Budget, SearchResult, SearchRun, baseline_assignments

if TYPE_CHECKING:
    import optuna

    from placetune.tuning.evaluator import Evaluator
    from placetune.measurement import Measurement
    from placetune.placement.space import Space

__all__ = ["OptunaAgent", "PENALTY", "SAMPLERS", "storage_for", "study_name_for"]

log = logging.getLogger(__name__)

#: Objective value given to infeasible trials of a minimised objective (finite, so every
#: sampler and the dashboard accept it; the constraint is what marks the trial).
PENALTY = 1e9
#: Sampler names accepted by :class:`OptunaAgent`.
SAMPLERS = ("tpe", "nsga2", "random", "gp")
_ATTR_CONSTRAINT = "constraint"
_ATTR_STATUS = "status"
#: In-memory stores -> their Optuna storage (lives as long as the store).
_MEMORY: "weakref.WeakKeyDictionary[Any, optuna.storages.InMemoryStorage]" = weakref.WeakKeyDictionary()


def study_name_for(evaluator: "Evaluator", granularity: str) -> str:
    """The Optuna study name of an evaluator's study: ``<study>:optuna:<granularity>``."""
    return f"{evaluator.study_name}:optuna:{granularity}"


def storage_for(evaluator: "Evaluator", **rdb_kwargs: Any) -> "optuna.storages.BaseStorage":
    """Optuna storage in the evaluator's measurement database.

    ``RDBStorage`` on the store's URL (password included), or, when the store is in
    memory, one ``InMemoryStorage`` per store (it lives as long as the store, so a second
    run on the same store resumes too). ``rdb_kwargs`` go to ``RDBStorage``
    (``heartbeat_interval``...).
    """
    import optuna

    store = evaluator.store
    url = store.engine.url
    database = url.database
    if url.get_backend_name() == "sqlite" and database in (None, "", ":memory:"):
        storage = _MEMORY.get(store)
        if storage is None:
            storage = _MEMORY[store] = optuna.storages.InMemoryStorage()
        return storage
    if url.get_backend_name() != "sqlite":  # a server: replace connections it dropped (long builds, restarts)
        rdb_kwargs.setdefault("engine_kwargs", {"pool_pre_ping": True})
    return optuna.storages.RDBStorage(url.render_as_string(hide_password=False), **rdb_kwargs)


def _has_set_constraint() -> bool:
    import optuna

    return hasattr(optuna.trial.Trial, "set_constraint")


def _constraints_func(trial: "optuna.trial.FrozenTrial") -> Sequence[float]:
    return (float(trial.user_attrs.get(_ATTR_CONSTRAINT, 0.0)),)


class OptunaAgent(Agent):
    """Optuna study over unit devices (see the module docstring).

    Args:
        seed: sampler seed.
        granularity: decision units.
        sampler: ``tpe`` (default), ``nsga2``, ``random`` or ``gp`` (needs torch and scipy).
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
        sampler: str = "tpe",
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
        if sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {', '.join(SAMPLERS)}, not {sampler!r}")
        self.sampler = sampler
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
        """The configured sampler (constraints wired in through ``constraints_func`` for Optuna < 5)."""
        import optuna

        cf = None if _has_set_constraint() else _constraints_func
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            if self.sampler == "tpe":
                return optuna.samplers.TPESampler(
                    seed=self.seed, multivariate=True, group=True, n_startup_trials=self.n_startup_trials,
                    constraints_func=cf, constant_liar=self.constant_liar,
                )
            if self.sampler == "nsga2":
                return optuna.samplers.NSGAIISampler(
                    seed=self.seed, population_size=self.population_size, constraints_func=cf
                )
            if self.sampler == "gp":
                return optuna.samplers.GPSampler(seed=self.seed, constraints_func=cf)
            return optuna.samplers.RandomSampler(seed=self.seed)

    def study(self, evaluator: "Evaluator") -> "optuna.Study":
        """Create or load the Optuna study of this evaluator (nothing is measured)."""
        import optuna

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
        return optuna.create_study(
            storage=storage,
            sampler=self.make_sampler(),
            study_name=self.study_name or study_name_for(evaluator, self.granularity),
            directions=list(evaluator.objective.directions),
            load_if_exists=True,
        )

    @staticmethod
    def distributions(space: "Space") -> dict[str, "optuna.distributions.CategoricalDistribution"]:
        """Parameter name -> allowed devices, for units with more than one allowed device."""
        from optuna.distributions import CategoricalDistribution

        return {u.name: CategoricalDistribution(list(u.choices)) for u in space.units if len(u.choices) > 1}

    @staticmethod
    def params_of(space: "Space", assignment: Sequence[int]) -> dict[str, str]:
        """Trial parameters of an assignment."""
        return {u.name: space.devices[int(a)] for u, a in zip(space.units, assignment) if len(u.choices) > 1}

    @staticmethod
    def assignment_of(space: "Space", params: dict[str, Any]) -> list[int]:
        """Assignment of trial parameters (single-choice units take their only device)."""
        return [space.device_index(str(params.get(u.name, u.choices[0]))) for u in space.units]

    def _values(self, evaluator: "Evaluator", m: "Measurement") -> tuple[list[float], float]:
        """(objective values, constraint) of a measurement."""
        obj = evaluator.objective
        vals = obj.values(m)
        if vals is not None and all(math.isfinite(v) for v in vals):
            return [float(v) for v in vals], 0.0
        worst = [PENALTY if d == "minimize" else 0.0 for d in obj.directions]
        return worst, 1.0

    # ------------------------------------------------------------------ warm start
    def _import(self, study: "optuna.Study", evaluator: "Evaluator", space: "Space") -> int:
        """add_trial every stored measurement of this cache scope that the study lacks."""
        import optuna

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
        added = 0
        use_constraints = _has_set_constraint()
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
                values, c = self._values(evaluator, rec.measurement)
                kw: dict[str, Any] = {}
                if use_constraints:
                    kw["constraints"] = {_ATTR_CONSTRAINT: c}
                else:
                    kw["system_attrs"] = {"constraints": (c,)}
                trial = optuna.trial.create_trial(
                    params=params,
                    distributions={k: dists[k] for k in params},
                    values=values,
                    user_attrs={_ATTR_CONSTRAINT: c, _ATTR_STATUS: rec.measurement.status, "imported": True},
                    **kw,
                )
                study.add_trial(trial)
                added += 1
        return added

    # ------------------------------------------------------------------ run
    def run(self, evaluator: "Evaluator", budget: Budget) -> SearchResult:
        """Run (or resume) the study until the budget is spent."""
        import optuna

        run = SearchRun(evaluator, budget, self.name, self.granularity)
        space = run.space
        study = self.study(evaluator)
        dists = self.distributions(space)
        imported = self._import(study, evaluator, space) if self.warm_start else 0
        if self.enqueue_baselines:
            for a in baseline_assignments(space).values():
                study.enqueue_trial(self.params_of(space, a), skip_if_exists=True)
        # answers the study already has (previous runs, imports): no evaluate() for them
        known: dict[tuple, tuple[list[float], float]] = {}
        for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
            known[tuple(sorted(t.params.items()))] = (list(t.values), float(t.user_attrs.get(_ATTR_CONSTRAINT, 0.0)))
        use_constraints = _has_set_constraint()
        size = 1
        for u in space.units:
            size *= len(u.choices)
        state = {"trials": 0, "repeats": 0}

        def objective(trial: "optuna.Trial") -> Sequence[float]:
            params = {name: trial.suggest_categorical(name, d.choices) for name, d in dists.items()}
            if self.coordinator is not None:
                self.coordinator.trial_started(study, trial)
            key = tuple(sorted(params.items()))
            state["trials"] += 1
            if key in known:
                values, c = known[key]
                state["repeats"] += 1
            else:
                state["repeats"] = 0
                a = self.assignment_of(space, params)
                m = run.evaluate(a, finish=True)
                values, c = self._values(evaluator, m)
                known[key] = (values, c)
                trial.set_user_attr(_ATTR_STATUS, m.status)
                if m.reason:
                    trial.set_user_attr("reason", str(m.reason)[:500])
                trial.set_user_attr("cache_hit", bool(m.extra.get("cache_hit", False)))
            trial.set_user_attr(_ATTR_CONSTRAINT, c)
            if use_constraints:
                trial.set_constraint(_ATTR_CONSTRAINT, c)
            return values

        def stop(study: "optuna.Study", trial: "optuna.trial.FrozenTrial") -> None:
            if run.exhausted or len(known) >= size or state["repeats"] > 200:
                study.stop()
            elif self.coordinator is not None and not self.coordinator.after_trial(study, trial):
                study.stop()

        if not run.exhausted and len(known) < size and (
            self.coordinator is None or self.coordinator.before_optimize(study)
        ):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                study.optimize(objective, timeout=budget.seconds, callbacks=[stop])
        if state["repeats"] > 200:
            run.notes.append("stopped early: the sampler proposed 200 known assignments in a row")
        return run.result(study_name=study.study_name, trials=len(study.trials), imported=imported,
                          sampler=self.sampler)
