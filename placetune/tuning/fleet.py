"""Fleet tuning: several workers (Jetsons, or processes) searching one study in a shared database.

``placetune tune --storage postgresql+psycopg://tuner@db-host/placetune --study NAME`` run on
N machines makes N *workers* of one study:

* **Trials.** The ``optuna`` agent's study lives in the same database (Optuna's RDB
  storage); every worker loads it and asks it for trials. TPE runs with
  ``constant_liar=True`` so that workers do not all propose the same region, and each
  worker has its own sampler seed. The study's budget (``--trials``) counts the trials
  the fleet ran, its baselines included (imported warm-start trials and the optuna agent's
  repeated proposals, answered without a build, excluded); a
  :class:`~placetune.tuning.fleet_gate.TrialGate` (a database advisory lock around
  "count, then ask") makes the fleet stop at exactly that number. Any other agent runs
  too: the study drives it by ask/tell and each proposal is a trial taken through the
  same gate (:mod:`placetune.tuning.fleet_steps`).
* **Measurements** go to the same ``pt_measurements`` table (unique per cache scope and
  realised placement). Before measuring, a worker inserts a *claim* row
  (``pt_claims``, unique on the scope and the realised placement key); a worker that
  finds another worker's claim waits for that measurement instead of repeating it
  (:class:`~placetune.tuning.fleet_claims.Claims`). Claims carry a heartbeat; the claim
  of a worker that died expires after the grace period and is taken over.
* **Heartbeats.** Optuna's ``heartbeat_interval`` / ``grace_period`` are on, with
  ``RetryHeartbeatStaleTrialCallback`` (``RetryFailedTrialCallback`` before Optuna 4.9):
  the trial of a worker that died is failed by the next worker that asks for a trial and
  re-queued with the same parameters, so the fleet still finishes the budget.
* **One environment.** Every worker must have the study's environment fingerprint
  (platform, backend, module, JetPack/TensorRT, power mode...): a different machine is
  refused with the differences named (:func:`check_environment`).
* **SQLite is for one writer.** A SQLite file is not a fleet database: a second
  ``placetune tune`` on the same file is refused at once
  (:class:`~placetune.tuning.fleet_locks.SingleWriterLock`) rather than failing later
  with "database is locked".

Times (heartbeats, claim expiry) are read from the database server's clock, so the
workers' clocks need not agree.

Example:
    >>> is_shared_database("postgresql+psycopg://tuner@db/placetune")
    True
    >>> is_shared_database("sqlite:///placetune.db")
    False
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol
from dataclasses import replace

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from placetune.errors import ConfigError, StoreError
from placetune.tuning.fleet_claims import Claims
from placetune.tuning.fleet_gate import TrialGate, fleet_trial_counts
from placetune.tuning.fleet_locks import SingleWriterLock
from placetune.tuning.fleet_worker import FleetOptions, whole_seconds, worker_id
from placetune._lazy import lazy_import
from placetune.hardware.locked_clocks import FINGERPRINT_KEY as LOCKED
from placetune.hardware.locked_clocks import lock_differences
from placetune.hardware.platforms import get_platform
from placetune.store.studies import as_json_dict
from placetune.tuning.fleet_steps import FleetAgent
from placetune.tuning.optuna_study import OptunaStudy, storage_for
from placetune.wording import plural
from placetune.tuning.studyfile import TuneConfig

if TYPE_CHECKING:
    from placetune.store.store import Store
    from placetune.tuning.evaluator import Evaluator

if TYPE_CHECKING:
    import optuna
else:
    optuna = lazy_import("optuna")

__all__ = [
    "FLEET_AGENT",
    "SharedStudyAgent",
    "Fleet",
    "is_shared_database",
    "check_environment",
    "storage_error",
    "tune_config",
    "agent_options_of",
    "prepare",
]

#: The agent a fleet runs: its Optuna study in the shared database coordinates the workers.
FLEET_AGENT = "optuna"


class SharedStudyAgent(Protocol):
    """What :meth:`Fleet.configure` sets on the :data:`FLEET_AGENT` agent, whose Optuna study in the
    shared database is the fleet's (:class:`search.optuna_search.OptunaAgent` has it)."""

    heartbeat_interval: int | None
    grace_period: int | None
    max_retry: int
    constant_liar: bool
    coordinator: Any


# --------------------------------------------------------------------------- helpers
def _url(url: str | URL | os.PathLike[str] | None) -> URL | None:
    if url is None:
        return None
    if isinstance(url, URL):
        return url
    text_ = os.fspath(url) if isinstance(url, os.PathLike) else str(url)
    if "://" not in text_:
        return None  # a file path: SQLite
    try:
        return make_url(text_.strip())
    except (ArgumentError, ValueError):
        return None


def is_shared_database(url: str | URL | os.PathLike[str] | None) -> bool:
    """True for a database server URL (PostgreSQL, MySQL...): fleet mode. False for SQLite and paths."""
    u = _url(url)
    return u is not None and u.get_backend_name() != "sqlite"



# --------------------------------------------------------------------------- environment
def check_environment(
    store: "Store",
    study: str,
    *,
    platform: str,
    backend: str,
    simulated: bool,
    fingerprint: dict[str, Any],
    worker: str | None = None,
) -> None:
    """Refuse a worker whose machine differs from the study's (a fleet shares one environment).

    Does nothing when the study does not exist yet (this worker creates it).

    Raises:
        ConfigError: platform, backend, simulated flag or fingerprint differ; the message
            names every difference and what to do.
    """
    st = store.find_study(study)
    if st is None:
        return
    mine = as_json_dict(fingerprint, "fingerprint")
    diffs = []
    for key, theirs, ours in (("platform", st.platform, platform), ("backend", st.backend, backend),
                              ("simulated", st.simulated, bool(simulated))):
        if theirs != ours:
            diffs.append(f"{key}: study {theirs}, this worker {ours}")
    for key in sorted(set(st.fingerprint) | set(mine)):
        a, b = st.fingerprint.get(key, "(unset)"), mine.get(key, "(unset)")
        if key == LOCKED:  # within a tolerance, clock by clock; not recorded by an older study: not compared
            if key in st.fingerprint:
                diffs += [f"{key}.{clock}: study {was}, this worker {now}"
                          for clock, was, now in lock_differences(a, mine.get(key))]
            continue
        if a != b:
            diffs.append(f"{key}: study {a}, this worker {b}")
    if diffs:
        raise ConfigError(
            f"worker {worker or worker_id()} cannot join study {study!r} in {store.url}: its environment differs "
            f"from the study's ({'; '.join(diffs)}). Every worker of a fleet must be the same module with the same "
            "JetPack, TensorRT and power mode (sudo nvpmodel -m N; sudo jetson_clocks), or the measurements would "
            "not be comparable: fix this machine, or tune it in a study of its own (--study NAME)"
        )



# --------------------------------------------------------------------------- the fleet
class Fleet:
    """One worker's part in a fleet study: claims, gate, agent settings, environment check.

    Used by :class:`placetune.tuning.tune.Tuner` when the storage is a database server.

    Args:
        store: the shared store.
        options: heartbeat settings.
        worker: this worker's id (default ``host:pid``).
    """

    def __init__(self, store: "Store", options: FleetOptions | None = None, worker: str | None = None) -> None:
        self.store = store
        self.options = options or FleetOptions()
        self.worker = worker or worker_id()
        self.claims = Claims(store, self.worker, self.options)
        self.gate: TrialGate | None = None

    @classmethod
    def from_agent_options(cls, store: "Store", agent_options: dict[str, Any]) -> "Fleet":
        """A fleet whose heartbeat settings come from the study's ``[agent_options]``."""
        defaults = FleetOptions()
        given = {k: whole_seconds(k, agent_options[k]) for k in FLEET_OPTIONS if agent_options.get(k) is not None}
        interval = given.get("heartbeat_interval", defaults.heartbeat_interval)
        opts = FleetOptions(
            heartbeat_interval=interval,
            grace_period=given.get("grace_period", max(defaults.grace_period, 2 * interval)),
            max_retry=given.get("max_retry", defaults.max_retry),
        )
        return cls(store, opts)

    def seed(self, seed: int | None) -> int:
        """This worker's sampler seed: distinct per worker (equal seeds would propose equal trials)."""
        return (int(seed or 0) + zlib.crc32(self.worker.encode())) % (2**31 - 1)

    def attach(self, evaluator: "Evaluator") -> None:
        """Make ``evaluator`` claim realised placements before measuring them."""
        evaluator.claims = self.claims

    def record_baselines(self, evaluator: "Evaluator", granularity: str) -> "OptunaStudy":
        """Write each evaluation of ``evaluator`` as a trial of the fleet's Optuna study, with its agent
        and this worker, until the returned study is detached (:meth:`stop_recording`): the study's
        baselines, measured before the agent runs, become trials counted in the fleet's budget as on one
        machine (not warm-start imports outside it, without their agent)."""
        return OptunaStudy(evaluator, granularity, backfill=False, attrs={"worker": self.worker}).attach()

    @staticmethod
    def stop_recording(evaluator: "Evaluator", study: "OptunaStudy") -> None:
        """Detach a study of :meth:`record_baselines`: the agent writes its trials itself."""
        if study in evaluator.trial_log.sinks:
            evaluator.trial_log.sinks.remove(study)

    def configure(self, agent: Any, budget: int, *, deadline: float | None = None,
                  stop: Callable[[], bool] | None = None, study_name: str | None = None) -> Any:
        """Set up an agent for the fleet: a per-worker seed and the :class:`TrialGate`; the
        ``optuna`` agent also gets heartbeats with retry and constant liar (its sampler takes the
        gate's hooks). Any other agent is returned as a
        :class:`~placetune.tuning.fleet_steps.FleetAgent`: the study drives it by ask/tell, each
        proposal a trial of the fleet's Optuna study, through the gate.

        With ``study_name`` (the Optuna study's name) the gate is taken at once, so that
        the workers' study set-up (warm-start imports, enqueued baselines) does not race.

        Returns:
            The agent to run.
        """
        if agent.name != FLEET_AGENT:
            agent.seed = self.seed(agent.seed)
            self.gate = TrialGate(self.store, budget, self.worker, self.options, deadline=deadline, stop=stop)
            if study_name:
                self.gate.hold(study_name)
            return FleetAgent(agent, self.gate, self.options)
        shared: SharedStudyAgent = agent
        shared.heartbeat_interval = self.options.heartbeat_interval
        shared.grace_period = self.options.grace_period
        shared.max_retry = self.options.max_retry
        shared.constant_liar = True
        agent.seed = self.seed(agent.seed)
        self.gate = TrialGate(self.store, budget, self.worker, self.options, deadline=deadline, stop=stop)
        shared.coordinator = self.gate
        if study_name:
            self.gate.hold(study_name)
        return agent

    def describe(self, budget: int) -> str:
        """One line for the start of a worker's run."""
        o = self.options
        return (f"fleet worker {self.worker}: the {budget}-trial budget is shared by every worker of the study; "
                f"heartbeat every {o.heartbeat_interval} s, a worker silent for {o.grace_period} s is presumed "
                f"dead and its trial re-run (up to {o.max_retry} times)")

    def summary(self, study_name: str | None = None) -> str:
        """One line for the end of a worker's run: the study's trials as the budget counts them (read
        now, ``study_name`` given), what else its Optuna study holds, and this worker's part."""
        g = self.gate
        c = self.trial_counts(study_name) if study_name else (g.counts if g is not None else {})
        parts = []
        if c:
            parts.append(f"the study has {plural(c['complete'], 'trial')} of its budget (builds and cache hits, "
                         f"baselines included, as the summary counts them); its Optuna study also holds "
                         f"{c['repeats']} repeated proposals answered from an earlier trial without a build, "
                         f"{c['running']} running, {c['failed']} failed (dead workers' trials) and {c['imported']} "
                         "imported trials")
        parts.append(f"this worker started {g.started if g else 0} of the agent's Optuna trials")
        parts.append(f"measurements waited for while another worker made them: {self.claims.waited}")
        if self.claims.taken_over:
            parts.append(f"claims of dead workers taken over: {self.claims.taken_over}")
        return "fleet: " + "; ".join(parts)

    def trials_done(self, study_name: str) -> int:
        """The budget's count of the fleet's Optuna study ``study_name`` (0 if none yet): finished
        trials less imported ones and repeats (:func:`~placetune.tuning.fleet_gate.fleet_trial_counts`)."""
        return self.trial_counts(study_name)["complete"]

    def trial_counts(self, study_name: str) -> dict[str, int]:
        """:func:`~placetune.tuning.fleet_gate.fleet_trial_counts` of the fleet's Optuna study ``study_name``
        (all 0 if none yet)."""
        try:  # the first worker creates Optuna's tables, the others wait (concurrent creation fails)
            storage = storage_for(self.store, skip_compatibility_check=True)
        except SQLAlchemyError as exc:
            raise self.store.database_error(exc, "opening the Optuna study tables") from None
        try:
            try:
                study = optuna.load_study(study_name=study_name, storage=storage)
            except KeyError:
                return {"complete": 0, "running": 0, "waiting": 0, "failed": 0, "imported": 0, "repeats": 0}
            return fleet_trial_counts(study)
        finally:
            if isinstance(storage, optuna.storages.RDBStorage):  # an in-memory store's storage lives with it
                storage.remove_session()
                storage.engine.dispose()

    def close(self) -> None:
        """Release the gate and this worker's claims."""
        if self.gate is not None:
            self.gate.release()
        self.claims.close()


# --------------------------------------------------------------------------- placetune tune
def tune_config(cfg: Any) -> tuple[Any, str | None]:
    """The tune configuration for its storage: on a shared database the default agent is ``optuna``.

    Any other agent named runs too (:mod:`placetune.tuning.fleet_steps`); the default becomes
    ``optuna``, whose sampler sees every worker's trials (constant liar).

    Returns:
        ``(config, note)``: the default agent is replaced (``note`` says so).
    """
    default = TuneConfig.agent
    if not is_shared_database(cfg.storage) or cfg.agent != default:
        return cfg, None
    note = (f"fleet mode (shared database): agent {FLEET_AGENT} instead of {default}; its study in the database "
            "coordinates every worker that joins")
    return replace(cfg, agent=FLEET_AGENT), note


#: ``[agent_options]`` of a fleet study that are the fleet's (heartbeats), not the agent's
FLEET_OPTIONS = ("heartbeat_interval", "grace_period", "max_retry")


def agent_options_of(cfg: Any) -> dict[str, Any]:
    """The options ``placetune tune`` builds its agent with: ``[agent_options]``, less the fleet's
    heartbeat settings on a shared database where the agent is not ``optuna`` (the fleet takes them)."""
    options = dict(cfg.agent_options)
    for key in FLEET_OPTIONS:  # named here: the optuna agent takes them too, and is built before the fleet
        if options.get(key) is not None:
            whole_seconds(key, options[key])
    if is_shared_database(cfg.storage) and cfg.agent != FLEET_AGENT:
        for key in FLEET_OPTIONS:
            options.pop(key, None)
    return options


def prepare(store: "Store", cfg: Any, backend: Any, settings: Any) -> tuple["Fleet | None", SingleWriterLock | None]:
    """What ``placetune tune`` needs before opening its study.

    SQLite file: the single-writer lock. Shared database: a :class:`Fleet`, after checking
    that this machine's environment matches the study's (when the study is named).

    Raises:
        StoreError: another tuner writes the SQLite file.
        ConfigError: this worker's environment differs from the study's.
    """
    if store.dialect == "sqlite":
        path = store.sqlite_path
        return None, (SingleWriterLock(path).acquire() if path else None)
    fleet = Fleet.from_agent_options(store, dict(cfg.agent_options))
    try:
        if cfg.study:
            platform = get_platform(cfg.platform)
            check_environment(store, cfg.study, platform=platform.name, backend=backend.name,
                              simulated=backend.simulated, fingerprint=backend.fingerprint(platform, settings),
                              worker=fleet.worker)
    except BaseException:
        fleet.close()
        raise
    return fleet, None


def storage_error(store: "Store", exc: BaseException, action: str) -> StoreError | None:
    """A database failure inside an agent's Optuna study as a :class:`StoreError` (else None).

    Optuna's RDB storage raises SQLAlchemy errors, or wraps them in
    ``optuna.exceptions.StorageInternalError``; either becomes one clear, password-free line.
    """
    if isinstance(exc, SQLAlchemyError):
        return store.database_error(exc, action)
    cause = exc.__cause__ or exc.__context__
    if type(exc).__name__ == "StorageInternalError":
        if isinstance(cause, SQLAlchemyError):
            return store.database_error(cause, action)
        return StoreError(f"database error on {store.url} while {action}: {store.scrub(str(exc))}")
    if isinstance(exc, RuntimeError) and _raised_reading_optuna(exc) and "table schema" in str(exc):
        # Optuna's schema check: tables written by another Optuna (a newer one, or an edited alembic_version)
        return StoreError(f"the Optuna tables of {store.url} have a schema this Optuna cannot use while {action} "
                          f"({store.scrub(str(exc).splitlines()[0] if str(exc) else '')[:300]}): use the Optuna that "
                          "wrote them, or restore the database from a backup")
    if isinstance(exc, (LookupError, ValueError, TypeError, AssertionError)) and _raised_reading_optuna(exc):
        # an edited Optuna table (a state, a distribution, an attribute that is not JSON; a FINITE
        # trial value set to NULL fails an assert in Optuna's stored_repr_to_value)
        said = str(exc).splitlines()[0] if str(exc) else f"in Optuna's {_innermost(exc)}"
        return StoreError(f"the Optuna tables of {store.url} are corrupt ({type(exc).__name__}: "
                          f"{store.scrub(said)[:200]}) while {action}: "
                          "the database was edited or damaged (restore it from a backup)")
    return None


def _innermost(exc: BaseException) -> str:
    """The function ``exc`` was raised in (for an exception that carries no message)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return f"{tb.tb_frame.f_code.co_name}()" if tb is not None else "storage"


def _raised_reading_optuna(exc: BaseException) -> bool:
    """True when ``exc`` was raised inside Optuna's RDB storage (reading its rows), not in an agent."""
    tb = exc.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename.replace("\\", "/")
        if "/optuna/storages/" in name:
            return True
        tb = tb.tb_next
    return False
