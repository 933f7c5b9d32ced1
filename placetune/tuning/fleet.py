"""Fleet tuning: several workers (Jetsons, or processes) searching one study in a shared database.

``placetune tune --storage postgresql+psycopg://tuner@db-host/placetune --study NAME`` run on
N machines makes N *workers* of one study:

* **Trials.** The ``optuna`` agent's study lives in the same database (Optuna's RDB
  storage); every worker loads it and asks it for trials. TPE runs with
  ``constant_liar=True`` so that workers do not all propose the same region, and each
  worker has its own sampler seed. The study's budget (``--trials``) counts the trials
  the fleet ran (imported warm-start trials excluded); a :class:`TrialGate` (a database
  advisory lock around "count, then ask") makes the fleet stop at exactly that number.
* **Measurements** go to the same ``pt_measurements`` table (unique per cache scope and
  realised placement). Before measuring, a worker inserts a *claim* row
  (``pt_claims``, unique on the scope and the realised placement key); a worker that
  finds another worker's claim waits for that measurement instead of repeating it
  (:class:`Claims`). Claims carry a heartbeat; the claim of a worker that died expires
  after the grace period and is taken over.
* **Heartbeats.** Optuna's ``heartbeat_interval`` / ``grace_period`` are on, with
  ``RetryHeartbeatStaleTrialCallback`` (``RetryFailedTrialCallback`` before Optuna 4.9):
  the trial of a worker that died is failed by the next worker that asks for a trial and
  re-queued with the same parameters, so the fleet still finishes the budget.
* **One environment.** Every worker must have the study's environment fingerprint
  (platform, backend, module, JetPack/TensorRT, power mode...): a different machine is
  refused with the differences named (:func:`check_environment`).
* **SQLite is for one writer.** A SQLite file is not a fleet database: a second
  ``placetune tune`` on the same file is refused at once (:class:`SingleWriterLock`)
  rather than failing later with "database is locked".

Times (heartbeats, claim expiry) are read from the database server's clock, so the
workers' clocks need not agree.

Example:
    >>> is_shared_database("postgresql+psycopg://tuner@db/placetune")
    True
    >>> is_shared_database("sqlite:///placetune.db")
    False
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import logging
import os
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    Column,
    Float,
    MetaData,
    String,
    Table,
    UniqueConstraint,
    delete,
    insert,
    literal_column,
    select,
    text,
    update,
)
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, OperationalError, ProgrammingError, SQLAlchemyError

from placetune.errors import ConfigError, PlacetuneError, StoreError
from placetune.store.store import mask_url

if TYPE_CHECKING:
    import optuna

    from placetune.tuning.evaluator import Evaluator
    from placetune.measurement import Measurement
    from placetune.store.store import Store

__all__ = [
    "FLEET_AGENT",
    "FleetOptions",
    "Fleet",
    "Claims",
    "TrialGate",
    "SingleWriterLock",
    "is_shared_database",
    "check_environment",
    "worker_id",
    "fleet_trial_counts",
    "schema_lock",
    "storage_error",
    "tune_config",
    "prepare",
    "CLAIMS_TABLE",
]

log = logging.getLogger(__name__)

#: The agent a fleet runs: its Optuna study in the shared database coordinates the workers.
FLEET_AGENT = "optuna"

# --------------------------------------------------------------------------- pt_claims
_META = MetaData()
#: ``pt_claims``: which worker is measuring which realised placement right now. Not part of
#: the versioned ``pt_*`` schema of :mod:`placetune.store.schema` (rows live seconds to
#: minutes; the table is created on demand and may be dropped at any time between runs).
CLAIMS_TABLE = Table(
    "pt_claims",
    _META,
    Column("scope", String(200), nullable=False),
    Column("placement_key", String(255), nullable=False),
    Column("worker", String(255), nullable=False),
    Column("study", String(255), nullable=False),
    Column("claimed_at", Float, nullable=False),
    Column("beat_at", Float, nullable=False),
    UniqueConstraint("scope", "placement_key", name="uq_pt_claims_key"),
)
_C = CLAIMS_TABLE.c


def _now_sql(dialect: str) -> Any:
    """SQL for "now" in seconds since the epoch, on the database server's clock."""
    if dialect == "postgresql":
        return literal_column("EXTRACT(EPOCH FROM clock_timestamp())")
    if dialect in ("mysql", "mariadb"):
        return literal_column("UNIX_TIMESTAMP(NOW(6))")
    if dialect == "sqlite":
        return literal_column("((julianday('now') - 2440587.5) * 86400.0)")
    return literal_column(repr(time.time()))  # pragma: no cover - other servers: this host's clock


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


def worker_id() -> str:
    """This process as a fleet worker: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _lock_key(name: str) -> int:
    """A signed 64-bit advisory-lock key for a name."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


@contextmanager
def schema_lock(store: "Store", timeout: float = 120.0) -> Iterator[None]:
    """Serialise table creation between workers starting at once (a session advisory lock).

    Creating tables is not safe to run concurrently on PostgreSQL (two ``CREATE TABLE``
    of one name, Alembic's version table of Optuna's storage): the workers take turns.
    SQLite and other databases: no lock.
    """
    dialect = store.dialect
    if dialect not in ("postgresql", "mysql", "mariadb"):
        yield
        return
    key = _lock_key("placetune-schema")
    try:
        conn = store.engine.connect()
    except SQLAlchemyError as exc:
        raise store._translate(exc, "connecting", connecting=True) from None
    try:
        t_end = time.monotonic() + timeout
        while True:
            if dialect == "postgresql":
                got = conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar()
            else:
                got = conn.execute(text("SELECT GET_LOCK(:n, 0)"), {"n": f"pt{key}"}).scalar() == 1
            conn.commit()
            if got:
                break
            if time.monotonic() > t_end:
                raise StoreError(f"another worker has been creating the tables of {store.url} for more than "
                                 f"{timeout:g} s: check that database and the other workers")
            time.sleep(0.05)
        try:
            yield
        finally:
            if dialect == "postgresql":
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
            else:
                conn.execute(text("SELECT RELEASE_LOCK(:n)"), {"n": f"pt{key}"})
            conn.commit()
    finally:
        conn.close()


def fleet_trial_counts(study: "optuna.Study") -> dict[str, int]:
    """Trials of a fleet study by state; ``complete`` excludes imported warm-start trials.

    Returns:
        ``{"complete", "running", "waiting", "failed", "imported"}`` counts.
    """
    from optuna.trial import TrialState

    out = {"complete": 0, "running": 0, "waiting": 0, "failed": 0, "imported": 0}
    for t in study.get_trials(deepcopy=False):
        if t.state == TrialState.COMPLETE:
            if t.user_attrs.get("imported"):
                out["imported"] += 1
            else:
                out["complete"] += 1
        elif t.state == TrialState.RUNNING:
            out["running"] += 1
        elif t.state == TrialState.WAITING:
            out["waiting"] += 1
        elif t.state == TrialState.FAIL:
            out["failed"] += 1
    return out


@dataclass
class FleetOptions:
    """Heartbeat and polling settings of a fleet worker.

    Set them in a study file's ``[agent_options]`` (``heartbeat_interval``, ``grace_period``,
    ``max_retry``); every worker should use the same values.

    Attributes:
        heartbeat_interval: seconds between heartbeats of a running trial and of a claim.
        grace_period: seconds without a heartbeat after which a trial or claim is
            considered dead (Optuna's default is twice the interval; engine builds and
            a loaded database make a larger margin safer).
        max_retry: how often the trial of a dead worker is re-queued.
        poll_seconds: how often a waiting worker looks again (claims, the gate).
    """

    heartbeat_interval: int = 20
    grace_period: int = 120
    max_retry: int = 3
    poll_seconds: float = 0.25

    def __post_init__(self) -> None:
        try:
            self.heartbeat_interval = int(self.heartbeat_interval)
            self.grace_period = int(self.grace_period)
            self.max_retry = int(self.max_retry)
            self.poll_seconds = float(self.poll_seconds)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"fleet options must be numbers: {exc}") from None
        if self.heartbeat_interval < 1:
            raise ConfigError(f"heartbeat_interval must be >= 1 second, not {self.heartbeat_interval}")
        if self.grace_period <= self.heartbeat_interval:
            raise ConfigError(
                f"grace_period ({self.grace_period} s) must be longer than heartbeat_interval "
                f"({self.heartbeat_interval} s), or live workers would be declared dead"
            )
        if self.max_retry < 0:
            raise ConfigError(f"max_retry must be >= 0, not {self.max_retry}")


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
    from placetune.store.store import _as_dict

    st = store._find_study(study)
    if st is None:
        return
    mine = _as_dict(fingerprint, "fingerprint")
    diffs = []
    for key, theirs, ours in (("platform", st.platform, platform), ("backend", st.backend, backend),
                              ("simulated", st.simulated, bool(simulated))):
        if theirs != ours:
            diffs.append(f"{key}: study {theirs}, this worker {ours}")
    for key in sorted(set(st.fingerprint) | set(mine)):
        a, b = st.fingerprint.get(key, "(unset)"), mine.get(key, "(unset)")
        if a != b:
            diffs.append(f"{key}: study {a}, this worker {b}")
    if diffs:
        raise ConfigError(
            f"worker {worker or worker_id()} cannot join study {study!r} in {store.url}: its environment differs "
            f"from the study's ({'; '.join(diffs)}). Every worker of a fleet must be the same module with the same "
            "JetPack, TensorRT and power mode (sudo nvpmodel -m N; sudo jetson_clocks), or the measurements would "
            "not be comparable: fix this machine, or tune it in a study of its own (--study NAME)"
        )


# --------------------------------------------------------------------------- SQLite: one writer
class SingleWriterLock:
    """An exclusive lock that makes a SQLite database refuse a second ``placetune tune``.

    SQLite serialises writers with short locks; two tuners on one file would each wait on
    the other and eventually fail with "database is locked" (and Optuna's RDB storage
    does not support concurrent SQLite writers). The lock is ``flock`` on
    ``<database>.tune-lock`` (released by the kernel if the process dies; the file is
    removed on release).

    Args:
        db_path: the SQLite database file.
    """

    def __init__(self, db_path: str | os.PathLike[str]) -> None:
        self.db_path = Path(db_path)
        self.path = Path(str(self.db_path) + ".tune-lock")
        self._fd: int | None = None

    def acquire(self) -> "SingleWriterLock":
        """Take the lock.

        Raises:
            StoreError: another process holds it (the message names it and says what to do).
        """
        for _ in range(20):
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                # a read-only directory: the store reports that itself; no lock possible
                log.debug("cannot create %s (%s): no single-writer lock", self.path, exc)
                return self
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                holder = ""
                try:
                    holder = os.pread(fd, 400, 0).decode(errors="replace").strip()
                except OSError:
                    pass
                os.close(fd)
                if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    log.debug("flock %s: %s", self.path, exc)
                    return self
                raise StoreError(
                    f"SQLite database {self.db_path} is already being written by another placetune tune"
                    f"{' (' + holder + ')' if holder else ''}: SQLite is for one writer. Wait for it to finish, "
                    "use another --storage file, or run several workers on one study with a PostgreSQL database: "
                    "--storage postgresql+psycopg://user@host/dbname (see docs/fleet.md)"
                ) from None
            try:  # the file may have been removed and re-created by a releasing holder: re-check
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except OSError:
                same = False
            if not same:
                os.close(fd)
                continue
            info = f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S')}"
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, info.encode(), 0)
            except OSError:
                pass
            self._fd = fd
            return self
        return self  # pragma: no cover - pathological churn: go on without the lock

    def release(self) -> None:
        """Release (and remove) the lock; safe to call twice."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.unlink(self.path)
        except OSError:
            pass
        os.close(fd)

    def __enter__(self) -> "SingleWriterLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


# --------------------------------------------------------------------------- claims
class Claims:
    """Claim rows: one worker measures a realised placement, the others wait for its result.

    :meth:`acquire` is called by :meth:`placetune.tuning.evaluator.Evaluator.evaluate` on a cache
    miss, before measuring; :meth:`release` after the measurement is stored.

    Args:
        store: the shared :class:`~placetune.store.store.Store`.
        worker: this worker's id.
        options: heartbeat interval, grace period and polling.
    """

    def __init__(self, store: "Store", worker: str | None = None, options: FleetOptions | None = None) -> None:
        self.store = store
        self.worker = worker or worker_id()
        self.options = options or FleetOptions()
        self._now = _now_sql(store.dialect)
        self._held: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.waited = 0  # measurements this worker waited for instead of measuring
        self.taken_over = 0  # claims of dead workers taken over
        self._ensure_table()

    def _ensure_table(self) -> None:
        for attempt in range(3):
            try:
                with schema_lock(self.store), self.store._txn("creating the pt_claims table", write=True) as conn:
                    CLAIMS_TABLE.create(conn, checkfirst=True)
                return
            except (IntegrityError, ProgrammingError, OperationalError, StoreError) as exc:
                # two workers creating it at once: one wins, the other sees it next time
                if attempt == 2:
                    if isinstance(exc, PlacetuneError):
                        raise
                    raise self.store._translate(exc, "creating the pt_claims table") from None
                time.sleep(0.1 * (attempt + 1))

    @staticmethod
    def _scope(evaluator: "Evaluator") -> str:
        return ":".join(evaluator.study.scope)

    # -------------------------------------------------------------- claiming
    def acquire(self, evaluator: "Evaluator", key: str) -> "Measurement | None":
        """Claim the realised placement ``key`` of ``evaluator``'s cache scope.

        Returns:
            None: this worker holds the claim and measures. A measurement: another worker
            stored it meanwhile (a cache hit; nothing to measure).
        """
        scope = self._scope(evaluator)
        store = self.store
        said = False
        while True:
            m = store.lookup(*evaluator.study.scope, key)
            if m is not None:
                self.waited += said
                return m
            row = {"scope": scope, "placement_key": key, "worker": self.worker, "study": evaluator.study_name}
            try:
                with store._txn("claiming a placement", write=True) as conn:
                    conn.execute(insert(CLAIMS_TABLE).values(**row, claimed_at=self._now, beat_at=self._now))
            except IntegrityError:
                pass
            else:
                return self._won(evaluator, scope, key)
            holder = self._holder(scope, key)
            if holder is None:  # released between our insert and our read: look again
                continue
            other, age = holder
            if other == self.worker:  # ours already (a retried evaluation in this process)
                return self._won(evaluator, scope, key)
            if age > self.options.grace_period:
                if self._take_over(scope, key, other):
                    self.taken_over += 1
                    log.warning("worker %s took over placement %s from worker %s (no heartbeat for %.0f s)",
                                self.worker, key, other, age)
                    return self._won(evaluator, scope, key)
                continue
            if not said:
                said = True
                log.info("placement %s is being measured by worker %s: waiting for its result", key, other)
            time.sleep(self.options.poll_seconds)

    def _won(self, evaluator: "Evaluator", scope: str, key: str) -> "Measurement | None":
        with self._lock:
            self._held.add((scope, key))
        self._start_heartbeat()
        # stored between our lookup and our claim? then there is nothing to measure
        m = self.store.lookup(*evaluator.study.scope, key)
        if m is not None:
            self.release(evaluator, key)
        return m

    def _holder(self, scope: str, key: str) -> tuple[str, float] | None:
        with self.store._txn("reading a placement claim") as conn:
            r = conn.execute(
                select(_C.worker, (self._now - _C.beat_at).label("age")).where(
                    _C.scope == scope, _C.placement_key == key)
            ).first()
        return None if r is None else (str(r.worker), float(r.age))

    def _take_over(self, scope: str, key: str, other: str) -> bool:
        with self.store._txn("taking over a stale placement claim", write=True) as conn:
            res = conn.execute(
                update(CLAIMS_TABLE)
                .where(_C.scope == scope, _C.placement_key == key, _C.worker == other,
                       _C.beat_at < self._now - self.options.grace_period)
                .values(worker=self.worker, claimed_at=self._now, beat_at=self._now)
            )
            return res.rowcount == 1

    def release(self, evaluator: "Evaluator", key: str) -> None:
        """Drop this worker's claim on ``key`` (after its measurement is stored, or failed).

        Best effort: when the database cannot be reached the claim is no longer
        heartbeated and expires after the grace period.
        """
        scope = self._scope(evaluator)
        with self._lock:
            self._held.discard((scope, key))
        try:
            with self.store._txn("releasing a placement claim", write=True) as conn:
                conn.execute(delete(CLAIMS_TABLE).where(_C.scope == scope, _C.placement_key == key,
                                                        _C.worker == self.worker))
        except (PlacetuneError, SQLAlchemyError) as exc:
            log.warning("could not release the claim of worker %s on %s (it expires in %d s): %s",
                        self.worker, key, self.options.grace_period, exc)

    def release_all(self) -> None:
        """Drop every claim of this worker (end of the run; after an error)."""
        with self._lock:
            self._held.clear()
        try:
            with self.store._txn("releasing placement claims", write=True) as conn:
                conn.execute(delete(CLAIMS_TABLE).where(_C.worker == self.worker))
        except (PlacetuneError, SQLAlchemyError) as exc:
            log.debug("could not release the claims of %s: %s", self.worker, exc)

    # -------------------------------------------------------------- heartbeat
    def _start_heartbeat(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._beat, name="placetune-claims-heartbeat", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(self.options.heartbeat_interval):
            with self._lock:
                held = sorted(self._held)
            if not held:
                continue
            try:  # only the claims in flight: one whose release failed expires
                with self.store._txn("heartbeat of placement claims", write=True) as conn:
                    conn.execute(update(CLAIMS_TABLE).where(
                        _C.worker == self.worker, _C.placement_key.in_([k for _, k in held])).values(beat_at=self._now))
            except (PlacetuneError, SQLAlchemyError) as exc:  # the next beat tries again
                log.warning("claim heartbeat of worker %s failed: %s", self.worker, exc)

    def close(self) -> None:
        """Stop the heartbeat and drop this worker's claims."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        self.release_all()


# --------------------------------------------------------------------------- trial gate
class TrialGate:
    """Makes the fleet run exactly the study's budget of trials.

    Before each new trial a worker takes a database advisory lock, counts the study's
    finished (COMPLETE, not imported) and RUNNING trials, and asks for a trial only while
    they are below the budget; the lock is released once the new trial is RUNNING and
    its parameters are stored (so the next worker's constant-liar TPE sees them). When
    the budget is covered but not finished (trials still running), the worker waits:
    running trials finish, or a dead worker's trial goes stale, is failed and re-queued
    (Optuna's heartbeat) and this worker runs it.

    The hooks are called by :class:`search.optuna_search.OptunaAgent` (its ``coordinator``).

    Args:
        store: the shared store (its engine opens the lock connection).
        budget: trials of the study, for the whole fleet.
        worker: this worker's id (stored as the ``worker`` user attribute of its trials).
        options: polling.
        deadline: ``time.monotonic()`` after which the worker stops (``--timeout``), or None.
        stop: returns True when the worker must stop (Ctrl-C).
    """

    def __init__(self, store: "Store", budget: int, worker: str | None = None,
                 options: FleetOptions | None = None, deadline: float | None = None,
                 stop: Callable[[], bool] | None = None) -> None:
        self.store = store
        self.budget = int(budget)
        self.worker = worker or worker_id()
        self.options = options or FleetOptions()
        self.deadline = deadline
        self.stop = stop or (lambda: False)
        self._conn: Any = None
        self._key: int | None = None
        self.started = 0  # trials this worker started
        self.waited_s = 0.0
        self.counts: dict[str, int] = {}

    # ------------------------------------------------------------ the lock
    def _acquire(self, name: str) -> None:
        if self._conn is not None:
            return
        dialect = self.store.dialect
        if dialect not in ("postgresql", "mysql", "mariadb"):
            return  # no advisory locks: the budget may be exceeded by (workers - 1) trials
        key = _lock_key("placetune-gate:" + name)
        conn = self.store.engine.connect()
        try:
            while True:
                if dialect == "postgresql":
                    got = conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar()
                else:
                    got = conn.execute(text("SELECT GET_LOCK(:n, 0)"), {"n": f"pt{key}"}).scalar() == 1
                conn.commit()
                if got:
                    break
                if self.stop():
                    raise _Stop()
                time.sleep(0.02)
        except BaseException:
            conn.close()
            raise
        self._conn, self._key = conn, key

    def release(self) -> None:
        """Release the lock if held (end of a run, errors); safe to call twice."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            if self.store.dialect == "postgresql":
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": self._key})
            else:
                conn.execute(text("SELECT RELEASE_LOCK(:n)"), {"n": f"pt{self._key}"})
            conn.commit()
        except SQLAlchemyError as exc:  # closing the connection releases it anyway
            log.debug("advisory unlock: %s", exc)
        finally:
            conn.close()

    def hold(self, name: str) -> None:
        """Take the lock early (serialises the workers' study set-up: warm start, enqueues)."""
        try:
            self._acquire(name)
        except _Stop:
            pass

    # ------------------------------------------------------------ agent hooks
    def before_optimize(self, study: "optuna.Study") -> bool:
        """Called before the first trial: True to start (the lock is then held)."""
        return self._may_ask(study)

    def after_trial(self, study: "optuna.Study", trial: "optuna.trial.FrozenTrial") -> bool:
        """Called after each trial: True to ask for another one (the lock is then held)."""
        return self._may_ask(study)

    def trial_started(self, study: "optuna.Study", trial: "optuna.Trial") -> None:
        """Called once a trial is RUNNING with its parameters stored: label it, release the lock."""
        self.started += 1
        try:
            trial.set_user_attr("worker", self.worker)
        finally:
            self.release()

    def _may_ask(self, study: "optuna.Study") -> bool:
        import warnings

        import optuna

        t0 = time.monotonic()
        try:
            while True:
                if self.stop() or (self.deadline is not None and time.monotonic() >= self.deadline):
                    self.release()
                    return False
                self._acquire(study.study_name)
                c = self.counts = fleet_trial_counts(study)
                if c["complete"] >= self.budget:
                    self.release()
                    return False
                if c["complete"] + c["running"] < self.budget:
                    return True  # keep the lock until the next trial is RUNNING
                # the budget is covered by running trials: wait for them (or for a dead
                # worker's trial to go stale, be failed and re-queued)
                self.release()
                time.sleep(self.options.poll_seconds)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                    optuna.storages.fail_stale_trials(study)
        except _Stop:
            return False
        finally:
            self.waited_s += time.monotonic() - t0


class _Stop(Exception):
    """Internal: a stop was requested while waiting for the gate."""


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
        opts = FleetOptions(
            heartbeat_interval=agent_options.get("heartbeat_interval") or defaults.heartbeat_interval,
            grace_period=agent_options.get("grace_period") or (
                max(defaults.grace_period, 2 * int(agent_options["heartbeat_interval"]))
                if agent_options.get("heartbeat_interval") else defaults.grace_period),
            max_retry=agent_options.get("max_retry", defaults.max_retry),
        )
        return cls(store, opts)

    def seed(self, seed: int | None) -> int:
        """This worker's sampler seed: distinct per worker (equal seeds would propose equal trials)."""
        return (int(seed or 0) + zlib.crc32(self.worker.encode())) % (2**31 - 1)

    def attach(self, evaluator: "Evaluator") -> None:
        """Make ``evaluator`` claim realised placements before measuring them."""
        evaluator.claims = self.claims

    def configure(self, agent: Any, budget: int, *, deadline: float | None = None,
                  stop: Callable[[], bool] | None = None, study_name: str | None = None) -> Any:
        """Set up the ``optuna`` agent for the fleet: heartbeats with retry, constant liar,
        a per-worker seed and the :class:`TrialGate`.

        With ``study_name`` (the Optuna study's name) the gate is taken at once, so that
        the workers' study set-up (warm-start imports, enqueued baselines) does not race.

        Raises:
            ConfigError: not the optuna agent.
        """
        if getattr(agent, "name", None) != FLEET_AGENT:
            raise ConfigError(
                f"a fleet study (shared database) runs the {FLEET_AGENT} agent, whose study in the database "
                f"coordinates the workers; agent {getattr(agent, 'name', agent)!r} cannot share a study: "
                f"use --agent {FLEET_AGENT}, or a SQLite --storage file for a single machine"
            )
        agent.heartbeat_interval = self.options.heartbeat_interval
        agent.grace_period = self.options.grace_period
        if hasattr(agent, "max_retry"):
            agent.max_retry = self.options.max_retry
        if hasattr(agent, "constant_liar"):
            agent.constant_liar = True
        agent.seed = self.seed(agent.seed)
        self.gate = TrialGate(self.store, budget, self.worker, self.options, deadline=deadline, stop=stop)
        agent.coordinator = self.gate
        if study_name:
            self.gate.hold(study_name)
        return agent

    def describe(self, budget: int) -> str:
        """One line for the start of a worker's run."""
        o = self.options
        return (f"fleet worker {self.worker}: the {budget}-trial budget is shared by every worker of the study; "
                f"heartbeat every {o.heartbeat_interval} s, a worker silent for {o.grace_period} s is presumed "
                f"dead and its trial re-run (up to {o.max_retry} times)")

    def summary(self) -> str:
        """One line for the end of a worker's run."""
        g = self.gate
        c = g.counts if g is not None else {}
        parts = [f"fleet: this worker ran {g.started if g else 0} trials"]
        if c:
            parts.append(f"the study has {c['complete']} complete, {c['running']} running, {c['failed']} failed "
                         f"(dead workers' trials, re-queued) and {c['imported']} imported trials")
        parts.append(f"measurements waited for while another worker made them: {self.claims.waited}")
        if self.claims.taken_over:
            parts.append(f"claims of dead workers taken over: {self.claims.taken_over}")
        return "; ".join(parts)

    def trials_done(self, study_name: str) -> int:
        """COMPLETE (not imported) trials of the fleet's Optuna study ``study_name`` (0 if none yet)."""
        import optuna

        # the first worker creates Optuna's tables here, the others wait (concurrent creation fails)
        with schema_lock(self.store):
            try:
                storage = optuna.storages.RDBStorage(self.store.engine.url.render_as_string(hide_password=False),
                                                     skip_compatibility_check=True)
            except SQLAlchemyError as exc:
                raise self.store._translate(exc, "opening the Optuna study tables") from None
        try:
            try:
                study = optuna.load_study(study_name=study_name, storage=storage)
            except KeyError:
                return 0
            return fleet_trial_counts(study)["complete"]
        finally:
            storage.remove_session()
            storage.engine.dispose()

    def close(self) -> None:
        """Release the gate and this worker's claims."""
        if self.gate is not None:
            self.gate.release()
        self.claims.close()


# --------------------------------------------------------------------------- placetune tune
def tune_config(cfg: Any) -> tuple[Any, str | None]:
    """The tune configuration for its storage: on a shared database the agent is ``optuna``.

    Returns:
        ``(config, note)``: the default agent is replaced (``note`` says so).

    Raises:
        ConfigError: another agent was asked for on a shared database.
    """
    if not is_shared_database(cfg.storage) or cfg.agent == FLEET_AGENT:
        return cfg, None
    from placetune.tuning.studyfile import TuneConfig

    default = TuneConfig.agent
    if cfg.agent != default:
        raise ConfigError(
            f"--storage {mask_url(cfg.storage)} is a shared database (fleet mode), where the {FLEET_AGENT} agent's "
            f"study coordinates the workers; agent {cfg.agent!r} cannot share a study: use --agent {FLEET_AGENT}, "
            "or a SQLite --storage file for a single machine"
        )
    from dataclasses import replace

    note = (f"fleet mode (shared database): agent {FLEET_AGENT} instead of {default}; its study in the database "
            "coordinates every worker that joins")
    return replace(cfg, agent=FLEET_AGENT), note


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
    from placetune.hardware.platforms import get_platform

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
        return store._translate(exc, action)
    cause = exc.__cause__ or exc.__context__
    if type(exc).__name__ == "StorageInternalError":
        if isinstance(cause, SQLAlchemyError):
            return store._translate(cause, action)
        return StoreError(f"database error on {store.url} while {action}: {store._scrub(str(exc))}")
    return None
