"""Every placetune study is an Optuna study: same name, same database, one trial per evaluation.

Whatever the agent, :class:`OptunaStudy` keeps an Optuna study named like the placetune
study in the store's database (``optuna.storages.RDBStorage`` on the same SQLAlchemy URL;
Optuna's ``InMemoryStorage`` for an in-memory store), so ``optuna studies``,
``optuna trials`` and ``optuna-dashboard sqlite:///placetune.db`` show every run live.

* **Parameters**: one categorical parameter per decision unit with more than one allowed
  device, its choices the unit's mask (:func:`distributions`).
* **Values**: the study's objective(s), named by :attr:`Objective.metric_names`
  (``throughput_fps``, ``latency_ms``, ``energy_mj``) through ``study.set_metric_names``.
* **Failures**: a placement that cannot be built or run is a ``PRUNED`` trial with its
  ``status`` and ``reason`` user attributes: the dashboard lists it without wrecking the
  value axis, and TPE ranks it below every complete trial (it ignores FAIL trials).
* **Trial user attributes**: ``status``, ``simulated``, ``cache_hit``, ``measurement_id``,
  ``placement_known`` (False: where TensorRT ran the layers could not be read; then
  ``placement_unknown`` says why and ``realised_differs`` is absent), ``realised_differs``, ``agent`` (and ``reason`` when it failed); every measured figure, not
  only the objective: ``latency_ms`` (median), ``latency_p99_ms``, ``throughput_fps``,
  ``energy_mj``, ``power_w``, ``build_s`` and ``dla0_loadables`` / ``dla1_loadables``
  (:func:`trial_attrs`); under constraints ``constraints`` (values, ``<= 0`` holds) and
  ``feasible``, the values also stored under Optuna's constraints system attribute
  (:func:`constraint_attrs`).
* **Times**: a trial starts when its evaluation was asked for and completes when its
  measurement (or cache hit) was ready, so the dashboard's timeline shows how long each took.
* **Writing**: the trials are written with the evaluator's other rows, in the same transaction
  (:mod:`placetune.tuning.trial_log`: at once, or in batches for a simulated backend), straight
  into Optuna's tables (:mod:`placetune.tuning.optuna_rows`; ``add_trials`` for an in-memory
  store, or an Optuna whose tables that module does not know).
* **Study user attributes**: model, model hash, platform, mode, precision, batch,
  backend, TensorRT version (the DLA rules applied), simulated, objective, granularity.
* **Existing databases**: a placetune study without its Optuna study gets one on its next
  open, backfilled from the study's stored requests (:meth:`OptunaStudy.open`).

Optuna is imported here lazily (never by ``import placetune``).
"""

from __future__ import annotations

import logging
import math
import time
import warnings
import weakref
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from placetune.placement.placement import Placement
from placetune._lazy import lazy_import
from placetune.errors import StoreError
from placetune.tuning.optuna_rows import FinishedTrial, TrialRows, supported

if TYPE_CHECKING:
    import optuna

    from placetune.measurement import Measurement
    from placetune.placement.space import Space
    from placetune.store.store import Store
    from placetune.tuning.evaluator import Evaluator
    from placetune.tuning.trial_log import LoggedTrial

if TYPE_CHECKING:
    import optuna.distributions as optuna_distributions
    import optuna.samplers._base as optuna_samplers__base
    import optuna.trial as optuna_trial
    import sqlalchemy

    from placetune.tuning import fleet_locks
else:
    sqlalchemy = lazy_import("sqlalchemy")
    fleet_locks = lazy_import("placetune.tuning.fleet_locks")
    optuna = lazy_import("optuna")
    optuna_distributions = lazy_import("optuna.distributions")
    optuna_samplers__base = lazy_import("optuna.samplers._base")
    optuna_trial = lazy_import("optuna.trial")

__all__ = ["OptunaStudy", "attached", "check_trial_rows", "distributions", "params_of", "assignment_of", "storage_for", "set_optuna_verbosity",
           "trial_attrs", "metric_attrs", "constraint_attrs"]

log = logging.getLogger(__name__)

#: In-memory stores -> their Optuna storage (lives as long as the store).
_MEMORY: "weakref.WeakKeyDictionary[Any, optuna.storages.InMemoryStorage]" = weakref.WeakKeyDictionary()
#: evaluator -> the Optuna study attached to it (:meth:`OptunaStudy.attach`; :func:`attached`)
_ATTACHED: "weakref.WeakKeyDictionary[Any, OptunaStudy]" = weakref.WeakKeyDictionary()


def set_optuna_verbosity(verbose: int) -> None:
    """Route Optuna's own logging through placetune's verbosity: silent (warnings only)
    by default, its per-trial INFO lines with ``-v``."""
    optuna.logging.set_verbosity(optuna.logging.INFO if verbose >= 1 else optuna.logging.WARNING)


def attached(evaluator: Any) -> "OptunaStudy | None":
    """The Optuna study :meth:`OptunaStudy.attach` attached to ``evaluator`` (None: none)."""
    try:
        return _ATTACHED.get(evaluator)
    except TypeError:  # not weakly referable: nothing was attached to it
        return None


def storage_for(store: "Store", **rdb_kwargs: Any) -> "optuna.storages.BaseStorage":
    """Optuna storage in a store's database.

    ``RDBStorage`` on the store's URL (password included), or, when the store is in
    memory, one ``InMemoryStorage`` per store (it lives as long as the store).
    ``rdb_kwargs`` go to ``RDBStorage`` (``heartbeat_interval``...).
    """
    url = store.engine.url
    if url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:"):
        storage = _MEMORY.get(store)
        if storage is None:
            storage = _MEMORY[store] = optuna.storages.InMemoryStorage()
        return storage
    if url.get_backend_name() == "sqlite":
        return optuna.storages.RDBStorage(url.render_as_string(hide_password=False), **rdb_kwargs)
    rdb_kwargs.setdefault("engine_kwargs", {"pool_pre_ping": True})  # replace connections a server dropped
    attempt = 1
    while True:
        try:
            with fleet_locks.schema_lock(store):  # the first placetune process creates Optuna's tables, the others wait
                return optuna.storages.RDBStorage(url.render_as_string(hide_password=False), **rdb_kwargs)
        except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError) as exc:
            # a client that takes no lock (the optuna CLI, optuna-dashboard, a script) was creating the same
            # tables at that moment: PostgreSQL refuses the second CREATE; a moment later the tables exist
            if attempt == OPEN_ATTEMPTS or not _created_meanwhile(exc):
                raise
            time.sleep(0.2 * attempt)
            attempt += 1


#: how often Optuna's tables are opened on a database server when another client was creating them at once
OPEN_ATTEMPTS = 4
#: PostgreSQL's codes of a CREATE that lost a race: unique_violation (its catalog's type of the table),
#: duplicate_table, duplicate_object
_CREATED_MEANWHILE = {"23505", "42P07", "42710"}


def _created_meanwhile(exc: Exception) -> bool:
    """Whether a database error is a table or type another connection created at the same moment."""
    orig = getattr(exc, "orig", None)  # the driver's error: psycopg's sqlstate, psycopg2's pgcode
    code = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    return code in _CREATED_MEANWHILE


def distributions(space: "Space") -> dict[str, "optuna.distributions.CategoricalDistribution"]:
    """Parameter name -> allowed devices, for units with more than one allowed device."""
    return {u.name: optuna_distributions.CategoricalDistribution(list(u.choices)) for u in space.units if len(u.choices) > 1}


def params_of(space: "Space", assignment: Sequence[int]) -> dict[str, str]:
    """Trial parameters of an assignment."""
    return {u.name: space.devices[int(a)] for u, a in zip(space.units, assignment) if len(u.choices) > 1}


def assignment_of(space: "Space", params: dict[str, Any]) -> list[int]:
    """Assignment of trial parameters (single-choice units take their only device)."""
    return [space.device_index(str(params.get(u.name, u.choices[0]))) for u in space.units]


def _params_of_placement(space: "Space", placement: Placement) -> dict[str, str]:
    """Parameters of a placement: a unit takes its first layer's device; a device the unit's
    mask forbids becomes the GPU, as GPU fallback would realise it."""
    out = []
    for i, a in enumerate(space.from_placement(placement)):
        if not space.mask[i, a]:
            a = 0 if space.mask[i, 0] else int(next(k for k in range(len(space.devices)) if space.mask[i, k]))
        out.append(a)
    return params_of(space, out)


class OptunaStudy:
    """The Optuna study of one placetune study (see the module docstring).

    Args:
        evaluator: the evaluator whose study this is.
        granularity: decision units of the parameters.
        storage: an Optuna storage (default: :func:`storage_for` the evaluator's store).
        sampler: the sampler the study is loaded with (agents that ask it for trials).
        backfill: give a new Optuna study the placetune study's stored evaluations as trials
            (off for fleet workers, whose trials are counted and labelled by worker).
        attrs: user attributes every trial written by :meth:`attach` carries too (a fleet worker's ``worker``).

    Example:
        >>> from placetune.tuning.evaluator import Evaluator
        >>> ev = Evaluator("seed-block", "orin-agx", mode="pipeline", objective="throughput")
        >>> st = OptunaStudy(ev).attach()
        >>> _ = ev.baseline()
        >>> st.study.study_name == ev.study_name, st.study.metric_names, len(st.study.trials)
        (True, ['throughput_fps'], 1)
    """

    def __init__(self, evaluator: "Evaluator", granularity: str = "fusion", *,
                 storage: Any = None, sampler: Any = None, backfill: bool = True,
                 attrs: dict[str, Any] | None = None) -> None:
        self.evaluator = evaluator
        self.attrs = dict(attrs or {})
        self.granularity = granularity
        self.space = evaluator.space(granularity)
        self._dists = distributions(self.space)
        self.backfill = backfill
        self._rows: Any = None  # optuna_rows.TrialRows once attached to an RDB storage
        self.study = self.open(storage=storage, sampler=sampler)

    # ------------------------------------------------------------------ opening
    def open(self, *, storage: Any = None, sampler: Any = None) -> "optuna.Study":
        """Create or load the Optuna study; a new one is labelled and backfilled from the store."""
        ev = self.evaluator
        storage = storage if storage is not None else storage_for(ev.store)
        names = set(optuna.get_all_study_names(storage))  # (the summaries load every trial of every study)
        new = ev.study_name not in names
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study = optuna.create_study(storage=storage, sampler=sampler, study_name=ev.study_name,
                                        directions=list(ev.objective.directions), load_if_exists=True)
        have = [d.name.lower() for d in study.directions]
        if have != [str(d).lower() for d in ev.objective.directions]:  # an edited or damaged table
            raise StoreError(f"the Optuna study {ev.study_name!r} of {ev.store.url} has the directions {have}, not "
                             f"those of objective {ev.objective.name!r}: the database was edited or damaged")
        metric_names = study.metric_names  # a study system attribute: Optuna reads it back as stored
        if metric_names is not None and not (isinstance(metric_names, list)
                                             and all(isinstance(n, str) for n in metric_names)):
            raise StoreError(f"the Optuna study {ev.study_name!r} of {ev.store.url} has the metric names "
                             f"{str(metric_names)[:80]!r}, not a list of names: the database was edited or damaged")
        if list(metric_names or []) != list(ev.objective.metric_names):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                study.set_metric_names(list(ev.objective.metric_names))
        attrs = self.study_attrs()
        if any(study.user_attrs.get(k) != v for k, v in attrs.items()):
            for k, v in attrs.items():
                study.set_user_attr(k, v)
        if new and self.backfill:
            self._backfill(study)
        elif ev.store.dialect == "sqlite":  # one writer at a time: a RUNNING trial is a killed run's
            check_trial_rows(ev.store, study)
            fail_stale_trials(study)
        return study

    def study_attrs(self) -> dict[str, Any]:
        """The study's user attributes: what it measures, and whether it is simulated."""
        ev = self.evaluator
        s = ev.settings
        return {
            "model": ev.model.name, "model_hash": ev.model.hash, "platform": ev.platform.name,
            "mode": s.mode, "precision": s.precision, "batch": ev.model.batch, "backend": ev.backend.name,
            "tensorrt_version": s.trt_version, "simulated": bool(ev.backend.simulated),
            "objective": ev.objective.name, "granularity": self.granularity,
        }

    def _backfill(self, study: "optuna.Study") -> int:
        """One trial per stored request of the study, in order (a study measured before
        placetune kept an Optuna study, or by an older placetune)."""
        ev = self.evaluator
        try:
            requests = ev.store.requests(ev.study_name)
        except Exception:  # noqa: BLE001 - a new study has no requests
            return 0
        if not requests:
            return 0
        by_id = {rec.id: rec for rec in ev.store.measurements(ev.study_name)}
        trials = []
        for req in requests:
            rec = by_id.get(req.measurement_id)
            if rec is None:
                continue
            try:
                doc = rec.requested if rec.requested and Placement(ev.model, rec.requested).key == req.requested_key \
                    else (rec.realized or rec.requested)
                placement = Placement(ev.model, doc or {})
            except Exception:  # noqa: BLE001 - a record of another model version
                continue
            m = rec.measurement
            m.extra = {**m.extra, "_id": rec.id, "cache_hit": req.cache_hit}
            trials.append(self.trial(placement, m, agent=req.agent))
        add_trials(study, ev.store, trials)
        log.info("backfilled Optuna study %r with %d stored evaluations", ev.study_name, len(trials))
        return len(trials)

    # ------------------------------------------------------------------ trials
    def attach(self) -> "OptunaStudy":
        """Add a trial to the study for every evaluation of the evaluator, written with the
        evaluation's rows (agents other than ``optuna``, which writes its trials itself)."""
        self._rows = _trial_rows(self.study)
        self.evaluator.trial_log.sinks.append(self)
        _ATTACHED[self.evaluator] = self
        return self

    def write(self, conn: Any, trials: "list[LoggedTrial]") -> None:
        """Trial sink: the batch's trials, in the store's transaction (RDB storage)."""
        if self._rows is None:
            return
        out = []
        for t in trials:
            state, values, params, user, system = self._trial_parts(t.placement, t.answer, t.agent)
            out.append(FinishedTrial(state, values, params, {k: self._dists[k] for k in params}, user, system,
                                     t.started, t.finished))
        self._rows.write(conn, out)

    def written(self, trials: "list[LoggedTrial]") -> None:
        """Trial sink: after the commit, the trials of a storage written through Optuna (in memory)."""
        if self._rows is not None:
            return
        for t in trials:
            self.record(t.placement, t.answer, t.agent, started=t.started, finished=t.finished)

    def record(self, placement: Placement, m: "Measurement", agent: str | None = None, *,
               started: datetime | None = None, finished: datetime | None = None) -> None:
        """Add the trial of one evaluation with ``Study.add_trial``."""
        try:
            self.study.add_trial(self.trial(placement, m, agent, started=started, finished=finished))
        except ValueError as exc:  # a parameter stored with other choices (another granularity)
            log.warning("not added to the Optuna study %r: %s", self.study.study_name, exc)

    def trial(self, placement: Placement, m: "Measurement", agent: str | None = None, *,
              started: datetime | None = None, finished: datetime | None = None) -> "optuna.trial.FrozenTrial":
        """The frozen trial of one evaluation: COMPLETE with the objective values, or PRUNED;
        it started at ``started`` and completed at ``finished`` (default: now)."""
        state, values, params, user, system = self._trial_parts(placement, m, agent)
        trial = optuna.trial.create_trial(state=state, params=params, values=values, user_attrs=user,
                                          system_attrs=system, distributions={k: self._dists[k] for k in params})
        if finished is not None:
            trial.datetime_complete = finished
            trial.datetime_start = started or finished
        return trial

    def params(self, placement: Placement) -> dict[str, str]:
        """The trial parameters of a placement (see :func:`_params_of_placement`)."""
        return _params_of_placement(self.space, placement)

    def tell(self, trial: "optuna.Trial", placement: Placement, m: "Measurement", agent: str | None = None) -> None:
        """Finish a RUNNING trial asked of the study (a fleet worker's) with an evaluation's values
        and attributes: COMPLETE, or PRUNED when it failed, as :meth:`trial` makes them."""
        state, values, _, user, system = self._trial_parts(placement, m, agent)
        for k, v in user.items():
            trial.set_user_attr(k, v)
        for k, v in system.items():  # the constraints, where Optuna's samplers read them
            self.study._storage.set_trial_system_attr(trial._trial_id, k, v)
        self.study.tell(trial, values, state=state)

    def _trial_parts(self, placement: Placement, m: "Measurement", agent: str | None,
                     ) -> tuple[Any, list[float] | None, dict[str, str], dict[str, Any], dict[str, Any]]:
        """(state, values, params, user attributes, system attributes) of an evaluation's trial."""
        params = _params_of_placement(self.space, placement)
        attrs = trial_attrs(m, placement)
        if agent or self.evaluator.agent:
            attrs["agent"] = agent or self.evaluator.agent
        attrs.update(self.attrs)
        values = self.values(m)
        state = optuna_trial.TrialState.COMPLETE if values is not None else optuna_trial.TrialState.PRUNED
        user, system = constraint_attrs(self.evaluator.objective, m) if values is not None else ({}, {})
        return state, values, params, {**attrs, **user}, system

    def values(self, m: "Measurement") -> list[float] | None:
        """The objective values of a measurement, None when it failed (or a value is not finite)."""
        vals = self.evaluator.objective.values(m)
        if vals is None or not all(math.isfinite(v) for v in vals):
            return None
        return [float(v) for v in vals]


def check_trial_rows(store: "Store", study: "optuna.Study") -> None:
    """Refuse a SQLite study whose Optuna rows Optuna cannot read back (an edited or damaged table: a
    state, a time, a parameter, a distribution or an attribute), checked by a few aggregate queries
    instead of loading every trial (which a resume of a million trials cannot afford).

    Raises:
        StoreError: one line naming the table and what is wrong.
    """
    from optuna.distributions import json_to_distribution
    from optuna.trial import TrialState
    backend = getattr(study._storage, "_backend", study._storage)
    if type(backend).__name__ != "RDBStorage":
        return
    sid = {"s": study._study_id}
    of_study = "JOIN trials t ON t.trial_id = x.trial_id WHERE t.study_id = :s"
    wrong: str | None = None
    with store.engine.connect() as conn:
        for (state,) in conn.execute(sqlalchemy.text("SELECT DISTINCT state FROM trials WHERE study_id = :s"), sid):
            if state not in TrialState.__members__:
                wrong = f"trials.state {str(state)[:40]!r}"
        bad = conn.scalar(sqlalchemy.text("SELECT COUNT(*) FROM trials WHERE study_id = :s AND ((datetime_start IS NOT NULL "
                               "AND julianday(datetime_start) IS NULL) OR (datetime_complete IS NOT NULL AND "
                               "julianday(datetime_complete) IS NULL))"), sid)
        wrong = wrong or (f"{bad} trials with a start or end time that is not a time" if bad else None)
        dists: dict[str, Any] = {}
        for name, value, doc in conn.execute(sqlalchemy.text("SELECT DISTINCT x.param_name, x.param_value, x.distribution_json "
                                                  f"FROM trial_params x {of_study}"), sid):
            try:
                if not isinstance(name, str) or not name:  # Optuna reads it back as a key of the trial's params
                    raise ValueError(f"a parameter is named {str(name)[:40]!r}, not a name")
                dist = dists[doc] if doc in dists else dists.setdefault(doc, json_to_distribution(doc))
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise ValueError(f"parameter {name!r} has the value {str(value)[:40]!r}")
                dist.to_external_repr(value)
            except (ValueError, TypeError, LookupError) as exc:
                wrong = wrong or f"trial_params: {str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__}"
        for table in ("trial_user_attributes", "trial_system_attributes"):
            bad = conn.scalar(sqlalchemy.text(f"SELECT COUNT(*) FROM {table} x {of_study} AND json_valid(x.value_json) = 0"),
                              sid)
            wrong = wrong or (f"{bad} rows of {table} whose value is not JSON" if bad else None)
            bad = conn.scalar(sqlalchemy.text(f"SELECT COUNT(*) FROM {table} x {of_study} AND (x.key IS NULL OR "
                                              "typeof(x.key) != 'text' OR x.key = '')"), sid)
            wrong = wrong or (f"{bad} rows of {table} whose key is not a name" if bad else None)
    if wrong is not None:
        from placetune.errors import StoreError

        raise StoreError(f"the Optuna tables of {store.url} are corrupt ({wrong}) while opening the Optuna study "
                         f"{study.study_name!r}: the database was edited or damaged (restore it from a backup)")


def fail_stale_trials(study: "optuna.Study") -> int:
    """Mark FAIL the trials a killed run left RUNNING (only where no other process can be running
    one: a SQLite study, written by one tune at a time); returns how many."""
    backend = getattr(study._storage, "_backend", study._storage)
    if type(backend).__name__ == "RDBStorage":  # the RUNNING trials' ids: asking the study loads every trial
        with backend.engine.connect() as conn:
            stale = [int(i) for i, in conn.execute(sqlalchemy.text("SELECT trial_id FROM trials WHERE study_id = :s AND "
                                                        "state = 'RUNNING'"), {"s": study._study_id})]
    else:
        stale = [t._trial_id for t in study.get_trials(deepcopy=False, states=(optuna_trial.TrialState.RUNNING,))]
    for trial_id in stale:
        study._storage.set_trial_state_values(trial_id, optuna_trial.TrialState.FAIL)
    if stale:
        log.info("%d Optuna trials a stopped run left RUNNING are marked FAIL", len(stale))
    return len(stale)


def add_trials(study: "optuna.Study", store: "Store", trials: "list[optuna.trial.FrozenTrial]") -> None:
    """Add finished trials to a study that lives in ``store``'s database: in one transaction of the
    store, straight into Optuna's tables (:class:`~placetune.tuning.optuna_rows.TrialRows`), not
    with ``Study.add_trials``, whose cost per trial grows with the study (queries per parameter);
    ``add_trials`` where the storage is not an RDB storage of a known layout."""
    rows = _trial_rows(study)
    if rows is None:
        study.add_trials(trials)
    elif trials:
        store.write_batch([], also=lambda conn: rows.write(conn, trials))


def _trial_rows(study: "optuna.Study") -> Any:
    """A :class:`~placetune.tuning.optuna_rows.TrialRows` writer of ``study`` when its storage is an RDB
    storage of the layout that module knows, else None (``add_trials``: in memory, or another Optuna)."""
    storage = getattr(study, "_storage", None)
    backend = getattr(storage, "_backend", storage)  # an RDB storage behind Optuna's cache
    return TrialRows(study._study_id) if type(backend).__name__ == "RDBStorage" and supported() else None


def constraint_attrs(objective: Any, m: "Measurement") -> tuple[dict[str, Any], dict[str, Any]]:
    """(user attrs, system attrs) of a complete trial under constraints: the constraint values
    (``<= 0``: holds) as the ``constraints`` user attribute, and under Optuna's
    ``optuna.samplers._base._CONSTRAINTS_KEY`` system attribute, where ``constraints_func``
    results are stored and Optuna's samplers and ``best_trials`` read them. Empty without constraints."""
    if not objective.constraints:
        return {}, {}
    vals = [min(float(v), 1e30) for v in objective.violations(m)]
    return {"constraints": vals, "feasible": all(v <= 0 for v in vals)}, {optuna_samplers__base._CONSTRAINTS_KEY: vals}


def trial_attrs(m: "Measurement", placement: Placement | None = None) -> dict[str, Any]:
    """The user attributes of an evaluation's trial."""
    realized = m.realized or {}
    requested = placement.as_dict() if placement is not None else (m.requested or {})
    attrs: dict[str, Any] = {
        "status": m.status,
        "simulated": bool(m.simulated),
        "cache_hit": bool(m.extra.get("cache_hit", False)),
        "measurement_id": m.extra.get("_id"),
        "placement_known": m.placement_known,
    }
    if m.placement_known:  # where it was not read, neither a match nor a difference can be claimed
        attrs["realised_differs"] = bool(realized) and any(realized.get(k, d) != d for k, d in requested.items())
    elif m.extra.get("placement_unknown"):
        attrs["placement_unknown"] = str(m.extra["placement_unknown"])[:500]
    if m.reason:
        attrs["reason"] = str(m.reason)[:500]
    attrs.update(metric_attrs(m))
    return attrs


def metric_attrs(m: "Measurement") -> dict[str, Any]:
    """Every figure a measurement has, as trial user attributes (missing or not finite: left out):
    ``latency_ms`` (median), ``latency_p99_ms``, ``throughput_fps``, ``energy_mj``, ``power_w``,
    ``build_s`` (engine build time, simulated on the simulated Jetson) and the DLA loadables per
    core (``dla0_loadables``...)."""
    lat = m.latency_ms or {}
    figures = {"latency_ms": lat.get("median"), "latency_p99_ms": lat.get("p99"), "throughput_fps": m.throughput_fps,
               "energy_mj": m.energy_mj, "power_w": m.power_w, "build_s": m.build_seconds if m.ok else None}
    out: dict[str, Any] = {k: float(v) for k, v in figures.items()
                           if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}
    for core, n in sorted((m.dla_loadables or {}).items()):
        if isinstance(n, int) and not isinstance(n, bool):
            out[f"{str(core).lower()}_loadables"] = n
    return out
