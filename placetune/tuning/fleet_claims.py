"""Claims of a fleet: one worker measures a realised placement while the others wait for its result."""

from __future__ import annotations

import logging
import threading
import time
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
    update,
)
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError, SQLAlchemyError

from placetune.errors import PlacetuneError, StoreError
from placetune.tuning.fleet_locks import schema_lock
from placetune.tuning.fleet_worker import FleetOptions, worker_id

if TYPE_CHECKING:
    from placetune.measurement import Measurement
    from placetune.store.store import Store
    from placetune.tuning.evaluator import Evaluator

__all__ = ["CLAIMS_TABLE", "Claims"]

log = logging.getLogger(__name__)

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
                with schema_lock(self.store), self.store.transaction("creating the pt_claims table", write=True) as conn:
                    CLAIMS_TABLE.create(conn, checkfirst=True)
                return
            except (IntegrityError, ProgrammingError, OperationalError, StoreError) as exc:
                # two workers creating it at once: one wins, the other sees it next time
                if attempt == 2:
                    if isinstance(exc, PlacetuneError):
                        raise
                    raise self.store.database_error(exc, "creating the pt_claims table") from None
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
                with store.transaction("claiming a placement", write=True) as conn:
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
        with self.store.transaction("reading a placement claim") as conn:
            r = conn.execute(
                select(_C.worker, (self._now - _C.beat_at).label("age")).where(
                    _C.scope == scope, _C.placement_key == key)
            ).first()
        return None if r is None else (str(r.worker), float(r.age))

    def _take_over(self, scope: str, key: str, other: str) -> bool:
        with self.store.transaction("taking over a stale placement claim", write=True) as conn:
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
            with self.store.transaction("releasing a placement claim", write=True) as conn:
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
            with self.store.transaction("releasing placement claims", write=True) as conn:
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
                with self.store.transaction("heartbeat of placement claims", write=True) as conn:
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
